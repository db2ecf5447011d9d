"""The README's main job: the simulated demo runs end to end without ../shared, and nanopolish
recovers the simulated methylation; so do the opt-in modBAM demo's basecaller calls. The demos
share tests/runs_signal.py's demo_run (outputs only); the default target's files are checked on
report_run, the run of .test/config-signal.yaml (the demo, smaller)."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import REPO, check_modkit_golden, numapore_output, reference_output


def test_modbam_demo_calls_recover_the_truth(demo_run):
    """The realigned basecaller calls score as the noise model says (per-call AUC
    Phi(3.5 / sqrt 2) = 0.993) and the bedMethyl follows the true per-site fractions."""
    name = "results/demo_modbam/methylation/demo_modbam.minimap2.cpg"
    row = pd.read_csv(demo_run / f"{name}.accuracy.tsv", sep="\t").iloc[0]
    assert row["reads"] == 300 and row["called_fraction"] >= 0.97
    assert row["calls_matched"] >= 0.95 * row["calls"]
    assert 0.98 <= row["auc"] <= 1.0
    assert row["sites"] > 1000 and row["site_correlation"] >= 0.95
    assert (demo_run / f"{name}.bedmethyl.gz.tbi").stat().st_size > 0


def test_demo_calls_recover_the_truth(demo_run):
    acc = pd.read_csv(
        demo_run / "results/demo/methylation/demo.minimap2.cpg.accuracy.tsv", sep="\t"
    )
    row = acc.iloc[0]
    assert row["reads"] == 300
    assert row["called_fraction"] >= 0.90
    assert row["auc"] >= 0.85
    assert row["sites"] > 100 and row["site_correlation"] >= 0.8


def test_demo_writes_every_output(report_run):
    """The default target of .test/config-signal.yaml (run as a user runs it) makes every
    output of its demo."""
    out = report_run[0] / "results/demo"
    for path in [
        "align/demo.minimap2.bam.bai",
        "align/demo.minimap2.summary.tsv",
        "methylation/demo.minimap2.cpg.calls.tsv",
        "methylation/demo.minimap2.cpg.frequency.tsv",
        "methylation/demo.minimap2.cpg.bedmethyl.gz.tbi",
        "methylation/demo.minimap2.cpg.modbam.bam.bai",
        "methylation/demo.minimap2.cpg.accuracy.tsv",
    ]:
        assert (out / path).stat().st_size > 0, path


def test_demo_logs_carry_no_tool_warnings(report_run):
    """No job log of a whole run (.test/config-signal.yaml's demo and E. coli, every rule of
    the default target) holds libgomp's complaint about OMP_NUM_THREADS (Snakemake sets it to a
    rule's threads, 0 for the I/O-bound steps)."""
    logs = sorted((report_run[0] / "results/logs").rglob("*.log"))
    assert any("nanopolish_index" in str(p) for p in logs)
    noisy = [str(p) for p in logs if "libgomp" in p.read_text(errors="replace")]
    assert noisy == []


def test_demo_bedmethyl_is_modkits(demo_run):
    """The demo's bedMethyl is modkit 0.6.1's pileup of the demo's own modBAM with the command
    the pileup job's log gives, but for 0.6.1's item A (each read's first CpG after its last
    call left uncounted: shown base by base); `numapore pileup --modkit-compat 0.4` of the same
    modBAM is modkit 0.4.4's byte for byte (tests/data/modkit, tests/modkit_golden.py)."""
    assert check_modkit_golden(demo_run, "demo") == 2


def test_demo_needs_nothing_from_shared():
    config = "".join(
        path.read_text()
        for path in [
            *(
                REPO / "config" / name
                for name in ("config.yaml", "samples.tsv", "demo_modbam.yaml")
            ),
            REPO / ".test" / "config-signal.yaml",
        ]
    )
    active = [line for line in config.splitlines() if not line.lstrip().startswith("#")]
    assert not any("shared" in line for line in active)


@pytest.mark.parametrize("options", [(), ("-s",), ("-c", "2.5"), ("-s", "-c", "2.5")])
def test_demo_frequency_is_the_reference_scripts(demo_run, options):
    """The frequency table is nanopolish's calculate_methylation_frequency.py output, byte for
    byte: the workflow's own (default options), and numapore's with the script's options."""
    calls = demo_run / "results/demo/methylation/demo.minimap2.cpg.calls.tsv"
    expected = reference_output(calls, *options)
    if not options:
        assert calls.with_name("demo.minimap2.cpg.frequency.tsv").read_text() == expected
    threshold = float(options[-1]) if "-c" in options else 2.0
    assert numapore_output(calls, "cpg", threshold, "-s" in options) == expected
