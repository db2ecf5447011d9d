"""End to end: the workflow on 112 real E. coli reads against DH10B, checked against the same
tools run directly, outside the workflow, on the same inputs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pysam
import pytest
import forked_snakemake
from conftest import (
    assert_as_minimap2_run,
    FEW_READS,
    call_set,
    ecoli_row,
    primary_mapped,
    read_calls,
    run_workflow,
    shortest_reads,
)

from project import snakemake_command, write_project


def sh(cmd: str, cwd: Path) -> None:
    """Run a shell pipeline with pipefail, failing the test with its stderr."""
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, capture_output=True, text=True
    )
    assert result.returncode == 0, f"{cmd}\n{result.stderr[-3000:]}"


@pytest.fixture(scope="session")
def direct(tmp_path_factory, ecoli_dir, dh10b) -> Path:
    """minimap2 | samtools sort, nanopolish index and call-methylation run by hand."""
    work = tmp_path_factory.mktemp("direct")
    shutil.copy(ecoli_dir / "reads.fasta", work / "reads.fasta")
    shutil.copy(dh10b, work / "genome.fa")
    sh("minimap2 -ax map-ont -t 2 genome.fa reads.fasta | samtools sort -o aln.bam -", work)
    sh("samtools index aln.bam", work)
    sh(f"nanopolish index -d {ecoli_dir / 'fast5'} reads.fasta", work)
    sh(
        "nanopolish call-methylation -t 2 -r reads.fasta -b aln.bam -g genome.fa > calls.tsv",
        work,
    )
    return work


def test_same_primary_alignments_as_direct_minimap2(minimap2_run, direct):
    bam = minimap2_run / "results/ecoli/align/ecoli.minimap2.bam"
    assert (minimap2_run / "results/ecoli/align/ecoli.minimap2.bam.bai").is_file()
    ours, theirs = primary_mapped(bam), primary_mapped(direct / "aln.bam")
    assert len(theirs) == 112
    assert ours == theirs
    summary = pd.read_csv(minimap2_run / "results/ecoli/align/ecoli.minimap2.summary.tsv", sep="\t")
    assert summary.loc[0, ["reads_in", "primary_mapped"]].tolist() == [112, 112]


def test_same_calls_as_direct_nanopolish(minimap2_run, direct):
    ours = call_set(minimap2_run / "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv")
    theirs = call_set(direct / "calls.tsv")
    assert ours == theirs
    version = subprocess.run(["nanopolish", "--version"], capture_output=True, text=True).stdout
    if "0.14.0" in version:  # the golden count measured with Debian's nanopolish 0.14.0
        assert len(ours) == 19862


def test_every_job_leaves_a_log_and_a_benchmark(minimap2_run):
    logs = {p.parent.name for p in (minimap2_run / "results/logs").rglob("*.log")}
    benchmarks = {p.parent.name for p in (minimap2_run / "results/benchmarks").glob("*/*.tsv")}
    for rule in ["align", "call_methylation", "nanopolish_index", "prepare_reference"]:
        assert rule in logs and rule in benchmarks
    assert (
        "post-run summary"
        in next((minimap2_run / "results/logs/call_methylation").glob("*.log")).read_text()
    )


def test_scattered_run_gives_the_same_results(tmp_path, ecoli_dir, dh10b, minimap2_run):
    """The shortest reads in 2 alignment and 2 methylation shards: minimap2_run's alignments and
    calls of these reads (conftest.FEW_READS)."""
    reads = shortest_reads(ecoli_dir / "reads.fasta", tmp_path / "short.fasta", FEW_READS)
    work = write_project(
        tmp_path / "run",
        [ecoli_row(ecoli_dir, dh10b, reads)],
        {"scatter": {"alignment": 2, "methylation": 2}},
    )
    bam = "results/ecoli/align/ecoli.minimap2.bam"
    calls = "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv"
    run_workflow(work, bam, calls)  # what is read, not the BAM's samtools reports
    assert_as_minimap2_run(work, minimap2_run, reads)
    # Both shards did work, and the shard files were removed after merging.
    logs = sorted((work / "results/logs/call_methylation").glob("*.log"))
    assert [p.name for p in logs] == [
        "ecoli.minimap2.cpg.1-of-2.log",
        "ecoli.minimap2.cpg.2-of-2.log",
    ]
    assert not list((work / "results/ecoli/methylation/shards").glob("*.tsv"))


def test_without_a_profile_heavy_rules_take_every_core(tmp_path, ecoli_dir):
    """`snakemake --cores 2` with no --profile (only the workflow's own profiles/default):
    alignment, methylation calling, index building, merging and sorting run with 2 threads."""
    reads = shortest_reads(ecoli_dir / "reads.fasta", tmp_path / "short.fasta", 20)
    row = ecoli_row(ecoli_dir, ecoli_dir / "region.fa", reads)
    work = write_project(tmp_path / "project", [row])
    targets = [
        "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv",
        "results/ecoli/signal/ecoli.census.parquet",
    ]
    cmd = snakemake_command(work, 2, *targets, profile=None)
    run = forked_snakemake.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, f"{' '.join(cmd)}\n{run.stderr[-3000:]}"
    # The jobs' run records: threads given to the step, and the tools' command lines.
    for step, tool in [("align", "minimap2 -ax map-ont -t 2 "), ("call_methylation", "-t 2 ")]:
        records = list((work / "results/logs" / step).glob("*.run.json"))
        assert records, step
        for path in records:
            record = json.loads(path.read_text())
            assert record["threads"] == 2, path
            assert all(p["threads"] == 2 for p in record["processes"]), path
            assert all(tool in p["command"] for p in record["processes"]), path
    # Snakemake's own account of every job it ran (printed per job: rule, then its threads).
    threads = {}
    for block in re.split(r"\n(?=(?:local)?rule )", run.stdout + run.stderr):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        if rule:
            found = re.search(r"^\s+threads: (\d+)$", block, re.M)
            threads[rule.group(1)] = int(found.group(1)) if found else 1
    assert threads.get("align") == 2, threads
    # Not scattered: the align job makes the sample's BAM, with no merge job after it.
    assert "merge_alignment_shards" not in threads, threads
    # minimap2 indexes with at most 3 threads, and takes half the cores: nanopolish index
    # runs beside it.
    assert threads.get("minimap2_index") == 1, threads
    # One thread of reading each, holding no core: they run beside the alignment.
    assert threads.get("nanopolish_index") == 0 and threads.get("signal_census") == 0, threads
    assert threads.get("call_methylation") == 2, threads


@pytest.mark.parametrize("aligner", ["bwa", "bowtie2"])
def test_other_aligners_give_sorted_indexed_bams_and_calls(tmp_path, ecoli_dir, dh10b, aligner):
    """The shortest reads (conftest.FEW_READS: bowtie2 is very slow on long reads, nanopolish's
    cost grows with their length) with bwa and bowtie2 on DH10B: sorted, indexed BAMs and calls."""
    reads = shortest_reads(ecoli_dir / "reads.fasta", tmp_path / "short.fasta", FEW_READS)
    work = write_project(tmp_path, [ecoli_row(ecoli_dir, dh10b, reads)], {"aligner": aligner})
    bam = f"results/ecoli/align/ecoli.{aligner}.bam"
    calls = f"results/ecoli/methylation/ecoli.{aligner}.cpg.calls.tsv"
    run_workflow(work, f"{bam}.bai", calls)  # what is read, not the BAM's samtools reports
    bam = work / bam
    with pysam.AlignmentFile(str(bam)) as handle:
        assert handle.header["HD"]["SO"] == "coordinate"
        assert handle.check_index()
        assert handle.mapped > 0
    assert len(primary_mapped(bam)) >= 0.9 * FEW_READS
    calls = read_calls(work / calls)
    # bowtie2 leaves many of the short reads multi-mapped (MAPQ < 20, skipped by nanopolish):
    # 365 calls of 9 reads here; bwa 1,123 of the 20.
    assert len(calls) > (100 if aligner == "bowtie2" else 1_000)
    assert calls["read_name"].nunique() > (5 if aligner == "bowtie2" else 0.9 * FEW_READS)
