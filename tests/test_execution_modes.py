"""Execution strategies and I/O modes change how the tools run, never what they compute:
each one, run end to end on the real E. coli reads, gives the baseline's alignments and calls
(minimap2_run's; a strategy's run on the shortest reads, minimap2_run's of those reads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import (
    assert_as_minimap2_run,
    FEW_READS,
    REPO,
    ecoli_row,
    host_file,
    run_workflow,
    shortest_reads,
)

from project import write_project

BAM = "results/ecoli/align/ecoli.minimap2.bam"
CALLS = "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv"


def run_with_host(tmp_path: Path, ecoli_dir: Path, dh10b: Path, host: Path) -> Path:
    """Run the workflow on the shortest E. coli reads (conftest.FEW_READS) with the given host
    file (named on the command line, as a user would: the hpc-numa profile's own host=auto
    outranks the config file), for the BAM and the CpG calls (what the tests read: not the
    BAM's samtools reports)."""
    reads = shortest_reads(ecoli_dir / "reads.fasta", tmp_path / "short.fasta", FEW_READS)
    work = write_project(tmp_path / "run", [ecoli_row(ecoli_dir, dh10b, reads)])
    run_workflow(work, BAM, CALLS, "--config", f"host={host}")
    return work


def run_record(work: Path, rule: str) -> dict:
    """The launcher's record of what ran for a rule's (single) job of the ecoli sample."""
    (path,) = (work / "results/logs" / rule).glob("ecoli.*.run.json")
    return json.loads(path.read_text())


@pytest.mark.parametrize(
    "strategy, extra, processes",
    [
        ("interleave", {}, 1),
        ("localalloc", {}, 1),
        # One node here: two instances on it exercise the split, the bound runs and the merge.
        ("instances", {"instances_per_node": 2}, 2),
    ],
)
def test_strategy_gives_same_results_as_none(
    tmp_path, ecoli_dir, dh10b, minimap2_run, strategy, extra, processes
):
    host = host_file(tmp_path / "host.yaml", strategy, **extra)
    work = run_with_host(tmp_path, ecoli_dir, dh10b, host)
    assert_as_minimap2_run(work, minimap2_run, tmp_path / "short.fasta")
    for rule in ("align", "call_methylation"):
        record = run_record(work, rule)
        assert record["strategy"] == strategy
        assert len(record["processes"]) == processes
        for proc in record["processes"]:
            assert proc["command"].startswith("numactl ")
            expected_policy = {"interleave": "interleave", "localalloc": "local"}.get(
                strategy, "bind"
            )
            assert f"policy: {expected_policy}" in proc["policy"]


@pytest.mark.parametrize(
    "run, io_mode",
    [("signal_pool_run", "fast5-pool"), ("signal_slow5_run", "slow5")],
    ids=["fast5-pool", "slow5"],
)
def test_io_mode_gives_same_calls_as_fast5(request, minimap2_run, run, io_mode):
    """The signal route's runs in I/O modes fast5-pool and slow5 (tests/runs_signal.py, their
    host.yaml with 2 I/O processes): the E. coli sample on DH10B (its shortest reads) calls as
    minimap2_run calls those reads."""
    work = request.getfixturevalue(run)
    host = work / "host.yaml"
    assert_as_minimap2_run(work, minimap2_run, work / "short.fasta", alignments=False)
    record = run_record(work, "call_methylation")
    assert len(record["processes"]) == (2 if io_mode == "fast5-pool" else 1)
    # The I/O mode the workflow resolved and the host file it used, as the job recorded them.
    assert record["io_mode"] == io_mode and record["host_file"] == str(host)
    signal = "blow5" if io_mode == "slow5" else "fast5"
    readdb = (work / f"results/ecoli/reads/{signal}/ecoli.fasta.index.readdb").read_text()
    if io_mode == "slow5":
        assert (work / "results/ecoli/signal/ecoli.blow5.idx").is_file()
        assert "ecoli.blow5" in readdb and ".fast5" not in readdb
    else:
        assert ".fast5" in readdb


def test_svb_zd_signal_is_refused_for_nanopolish(tmp_path, ecoli_dir, dh10b):
    host = host_file(tmp_path / "host.yaml", "none", "slow5")
    svb = {"slow5": {"record_compression": "zlib", "signal_compression": "svb-zd"}}
    work = write_project(tmp_path / "run", [ecoli_row(ecoli_dir, dh10b)], svb)
    result = run_workflow(work, "--dry-run", "--config", f"host={host}", check=False)
    assert result.returncode != 0
    assert "segfaults on svb-zd" in result.stdout + result.stderr


def test_host_files_come_from_the_working_directory(tmp_path, ecoli_dir, dh10b):
    """A host name is looked up in config/hosts/ of the directory Snakemake runs in (a user's
    own file, even one named like a shipped file) before the workflow's shipped files; the
    run's log says which file it uses."""
    work = write_project(tmp_path / "run", [ecoli_row(ecoli_dir, dh10b)])
    (work / "config/hosts").mkdir()
    own = host_file(work / "config/hosts/shared-node.yaml", "none", "slow5")
    result = run_workflow(work, "--dry-run", "--config", "host=shared-node")
    log = result.stdout + result.stderr
    assert f"numapore: host file {own} (I/O mode slow5)" in log
    assert "fast5_to_blow5" in log  # the user's file's io_mode: slow5, not the shipped fast5
    shipped = run_workflow(work, "--dry-run", "--config", "host=opteron-6376", check=False)
    assert f"{REPO}/config/hosts/opteron-6376.yaml does not match this machine" in (
        shipped.stdout + shipped.stderr
    )
