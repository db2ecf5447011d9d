"""The signal route's shared runs (raw nanopore signal -> nanopolish): each configuration runs
once per pytest invocation (shared_runs.shared_run) and asks for the files its tests read, not
the default target; only report_run builds the report (it is what test_report checks).

- minimap2_run (conftest.py): E. coli on DH10B, every motif, I/O mode fast5: the baseline.
- signal_fast5_run: fast5 mode on region.fa: clean, messy (FAST5 listed twice...) and vbz reads,
  host tuning on, its check that the sample can pay it back off (so that its job runs; its
  first cell says not to measure: fast5 runs).
- signal_slow5_run: slow5 mode: E. coli on DH10B (FAST5), and POD5, BLOW5, slow5tools' BLOW5 and
  VBZ reads on region.fa (the samples of the 112 reads' signal with the shortest reads'
  sequences: nanopolish's cost is by read).
- signal_pool_run: fast5-pool mode: E. coli on DH10B and the VBZ reads on region.fa (the
  shortest reads' sequences).
- demo_run: the default config's demo (300 reads) and the opt-in modBAM demo, outputs only.
- report_run: .test/config-signal.yaml (the small demo) and E. coli on region.fa, default target
  and Snakemake's report.

A new check of one of these configurations belongs in a test on its run, not in a new run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyslow5
import pytest
import yaml
from conftest import FEW_READS, REPO, ecoli_row, host_file, run_workflow, shortest_reads
from shared_runs import keep_output, kept_output, shared_run

from numapore.signal.convert import convert
from numapore.signal.fast5 import VBZ_FILTER_ID
from project import write_project

BIN = Path(sys.executable).parent
SIGNAL_TEST_CONFIG = REPO / ".test" / "config-signal.yaml"
# The report run's tracks (config tracks:, off by default): its report lists them.
REPORT_TRACKS = "tracks={mod_codes: [m]}"
SSM1 = "expected/multi-fast5-output/ssm1_zlib.blow5"  # slow5tools' own BLOW5 (zlib, no svb)
ECOLI_BAM = "results/ecoli/align/ecoli.minimap2.bam"


def outputs(sample: str, *kinds: str, motifs=("cpg",), aligner: str = "minimap2") -> list[str]:
    """A run's targets for one sample: 'bam' (sorted, indexed, its samtools reports), 'calls',
    'frequency', 'bedmethyl', 'modbam' (per motif), 'accounting', 'accuracy'."""
    name = f"results/{sample}/methylation/{sample}.{aligner}"
    per_kind = {
        "bam": [
            f"results/{sample}/align/{sample}.{aligner}.bam.bai",
            f"results/{sample}/align/{sample}.{aligner}.stats.txt",
            f"results/{sample}/align/{sample}.{aligner}.summary.tsv",
        ],
        "calls": [f"{name}.{m}.calls.tsv" for m in motifs],
        "frequency": [f"{name}.{m}.frequency.tsv" for m in motifs],
        "bedmethyl": [f"{name}.{m}.bedmethyl.gz.tbi" for m in motifs],
        "modbam": [f"{name}.{m}.modbam.bam.bai" for m in motifs],
        "accounting": [f"results/{sample}/{sample}.{aligner}.accounting.tsv"],
        "accuracy": [f"{name}.cpg.accuracy.tsv"],
    }
    return [path for kind in kinds for path in per_kind[kind]]


def run_logged(work: Path, *args: str) -> subprocess.CompletedProcess:
    """run_workflow, its output kept beside the run for the other worker's tests."""
    return keep_output(work, run_workflow(work, *args))


def region_row(name: str, signal: str, ecoli_dir: Path, reads: Path | None = None) -> dict:
    """A sample-sheet row of E. coli reads (or others) on region.fa."""
    return ecoli_row(ecoli_dir, ecoli_dir / "region.fa", reads) | {"sample": name, "signal": signal}


# Inputs of shared runs are shared too: every worker sees the same paths (the runs' messages
# name them).


@pytest.fixture(scope="session")
def messy_fast5(tmp_path_factory, ecoli_dir) -> tuple[Path, str]:
    """Copies of the 112 reads: 100 in folder A (10 of them named *.FAST5), two single files
    both named batch_0.fast5 in folders B and C; the sheet lists A twice and a file of A."""
    files = sorted((ecoli_dir / "fast5").glob("*.fast5"))

    def make(work: Path) -> None:
        for i, path in enumerate(files):
            if i < 2:
                target = work / "BC"[i] / "batch_0.fast5"
            elif i < 12:
                target = work / "A" / "upper" / (path.stem + ".FAST5")
            else:
                target = work / "A" / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)

    work = shared_run(tmp_path_factory, "messy_fast5", make)
    a, listed = work / "A", work / "A" / files[20].name
    signal = f"{a},{a},{work / 'B/batch_0.fast5'},{work / 'C/batch_0.fast5'},{listed}"
    return work, signal


@pytest.fixture(scope="session")
def pod5_file(tmp_path_factory, ecoli_dir) -> Path:
    """The 112 reads as POD5, by the pod5 package's `pod5 convert fast5` (which reads
    multi-read FAST5: ont-fast5-api's single_to_multi_fast5 first)."""

    def make(work: Path) -> None:
        multi = ["single_to_multi_fast5", "-i", str(ecoli_dir / "fast5"), "-s", "multi"]
        subprocess.run(
            [str(BIN / multi[0]), *multi[1:], "-n", "4000"],
            cwd=work,
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [str(BIN / "pod5"), "convert", "fast5", "--strict", str(work / "multi"),
             "-o", str(work / "in" / "ecoli.pod5")],
            check=True,
            capture_output=True,
        )  # fmt: skip

    return shared_run(tmp_path_factory, "pod5", make) / "in"


@pytest.fixture(scope="session")
def vbz_dir(tmp_path_factory, ecoli_dir) -> Path:
    """The 112 real E. coli reads as one VBZ-compressed multi-read FAST5, made by ont-fast5-api."""
    import h5py

    def make(work: Path) -> None:
        for command in (
            ["single_to_multi_fast5", "-i", str(ecoli_dir / "fast5"), "-s", "multi", "-n", "4000"],
            ["compress_fast5", "-i", "multi", "-s", "vbz", "-c", "vbz"],
        ):
            subprocess.run([str(BIN / command[0]), *command[1:]], cwd=work, check=True)
        (fast5,) = (work / "vbz").glob("*.fast5")
        with h5py.File(fast5, "r") as h5:
            filters = {
                h5[f"{read}/Raw/Signal"].id.get_create_plist().get_filter(0)[0]
                for read in h5
                if read.startswith("read_")
            }
        assert filters == {VBZ_FILTER_ID}

    return shared_run(tmp_path_factory, "vbz", make) / "vbz"


@pytest.fixture(scope="session")
def signal_fast5_run(tmp_path_factory, ecoli_dir, messy_fast5, vbz_dir) -> Path:
    """I/O mode fast5 on region.fa: the reads as they are (clean: gzip FAST5), the messy copies
    and the VBZ copy; run.stderr holds the run's messages. With host tuning on (test_tuning):
    its first cell, on 4 of clean's reads, says measuring would cost more than 5 % of the run,
    so the host file's fast5 runs (what the other tests of this run expect); clean's bedMethyl
    too, whose pileup tuning (tune_pileup) finds its pileup too small to measure."""

    def make(work: Path) -> None:
        rows = [
            region_row("clean", str(ecoli_dir / "fast5"), ecoli_dir),
            region_row("messy", messy_fast5[1], ecoli_dir),  # line 3 of the sheet
            region_row("vbz", str(vbz_dir), ecoli_dir),
        ]
        write_project(work, rows, {"tune": "on", "tuning": {"reads": 4, "check_payback": False}})
        host = host_file(work / "host.yaml", "none", "fast5")
        targets = [t for s in ("clean", "messy", "vbz") for t in outputs(s, "calls", "accounting")]
        targets += outputs("clean", "bedmethyl")
        run_logged(work, *targets, "--config", f"host={host}")

    return shared_run(tmp_path_factory, "signal_fast5", make)


@pytest.fixture(scope="session")
def signal_slow5_run(tmp_path_factory, ecoli_dir, dh10b, f2s_dir, pod5_file, vbz_dir) -> Path:
    """I/O mode slow5 (host.yaml, 2 I/O processes): the shortest E. coli reads on DH10B
    (short.fasta: FEW_READS of minimap2_run's; FAST5 converted), and on region.fa POD5, a
    numapore BLOW5, slow5tools' BLOW5 (ssm1) and the VBZ reads (all but ssm1 with short.fasta's
    sequences)."""

    def make(work: Path) -> None:
        blow5 = work / "numapore" / "ecoli.blow5"
        convert([ecoli_dir / "fast5"], blow5, processes=2)
        # slow5tools' 3 reads have no basecalls: stand-in sequences (E. coli reads) under their
        # ids.
        ids = [r["read_id"] for r in pyslow5.Open(str(f2s_dir / SSM1), "r").seq_reads()]
        lines = (ecoli_dir / "reads.fasta").read_text().split(">")[1:4]
        stand_in = work / "ssm1.fasta"
        sequences = [entry.split("\n", 1)[1] for entry in lines]
        stand_in.write_text("".join(f">{i}\n{s}" for i, s in zip(ids, sequences, strict=True)))
        short = shortest_reads(ecoli_dir / "reads.fasta", work / "short.fasta", FEW_READS)
        # POD5, numapore's BLOW5 and VBZ with the shortest reads' sequences (nanopolish calls
        # each read on its own): their calls are compared with signal_fast5_run's of those
        # reads; the signal files hold all 112 reads. FAST5 converted in this I/O mode: the
        # ecoli sample (test_execution_modes compares its calls with minimap2_run's).
        rows = [
            ecoli_row(ecoli_dir, dh10b, short),
            region_row("pod5", str(pod5_file), ecoli_dir, short),
            region_row("blow5", str(blow5), ecoli_dir, short),
            region_row("ssm1", str(f2s_dir / SSM1), ecoli_dir, stand_in),
            region_row("vbz", str(vbz_dir), ecoli_dir, short),
        ]
        # ssm1's stand-in reads get no call: an empty sample, let through.
        write_project(work, rows, {"allow_empty_samples": True})
        host = host_file(work / "host.yaml", "none", "slow5", io_processes=2)
        targets = outputs("ecoli", "bam", "calls") + [
            t for r in rows[1:] for t in outputs(r["sample"], "calls", "accounting")
        ]
        # ssm1 without calls: its report's methylation figure is still drawn.
        targets.append("results/ssm1/report/ssm1.minimap2.methylation.png")
        run_logged(work, *targets, "--config", f"host={host}")

    return shared_run(tmp_path_factory, "signal_slow5", make)


@pytest.fixture(scope="session")
def signal_pool_run(tmp_path_factory, ecoli_dir, dh10b, vbz_dir) -> Path:
    """I/O mode fast5-pool (host.yaml, 2 I/O processes): the shortest E. coli reads on DH10B
    (short.fasta: FEW_READS of minimap2_run's) and the VBZ reads on region.fa (short.fasta's
    sequences)."""

    def make(work: Path) -> None:
        short = shortest_reads(ecoli_dir / "reads.fasta", work / "short.fasta", FEW_READS)
        rows = [
            ecoli_row(ecoli_dir, dh10b, short),
            region_row("vbz", str(vbz_dir), ecoli_dir, short),
        ]
        write_project(work, rows)
        host = host_file(work / "host.yaml", "none", "fast5-pool", io_processes=2)
        targets = outputs("ecoli", "bam", "calls") + outputs("vbz", "calls")
        run_logged(work, *targets, "--config", f"host={host}")

    return shared_run(tmp_path_factory, "signal_pool", make)


def shipped_demo(config_file: str, name: str) -> dict:
    """A demo sample of a shipped config file, its reference made absolute."""
    demo = yaml.safe_load((REPO / "config" / config_file).read_text())["simulate"][name]
    return demo | {"reference": str(REPO / demo["reference"])}


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> Path:
    """The default config's demo (300 simulated reads: tests/data/modkit's golden bedMethyl is
    its) and the opt-in modBAM demo (config/demo_modbam.yaml), with an empty sample sheet: their
    calls, frequency, bedMethyl, modBAM and accuracy (the report: report_run)."""

    def make(work: Path) -> None:
        demos = {
            "demo": shipped_demo("config.yaml", "demo"),
            "demo_modbam": shipped_demo("demo_modbam.yaml", "demo_modbam"),
        }
        write_project(work, [], {"simulate": demos})
        targets = outputs("demo", "calls", "frequency", "bedmethyl", "modbam", "accuracy")
        targets += outputs("demo_modbam", "accuracy") + [
            "results/demo_modbam/methylation/demo_modbam.minimap2.cpg.bedmethyl.gz.tbi"
        ]
        run_logged(work, *targets)

    return shared_run(tmp_path_factory, "demo", make)


@pytest.fixture(scope="session")
def report_run(tmp_path_factory, ecoli_dir) -> tuple[Path, subprocess.CompletedProcess]:
    """.test/config-signal.yaml as a user runs it (its small demo; resources/ linked as in the
    repository), with the E. coli reads on region.fa in the sheet and 5mC tracks on: the default
    target, then `--report`; returns the folder and the first run's output."""

    def make(work: Path) -> None:
        write_project(work, [ecoli_row(ecoli_dir, ecoli_dir / "region.fa")])
        (work / "resources").symlink_to(REPO / "resources")
        config = ("--configfile", str(SIGNAL_TEST_CONFIG), "--config", REPORT_TRACKS)
        run_logged(work, *config)
        run_workflow(work, *config, "--report", "results/report.html")

    work = shared_run(tmp_path_factory, "report", make)
    return work, kept_output(work)
