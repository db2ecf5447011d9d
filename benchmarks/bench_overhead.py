"""Benchmark: the workflow end to end versus the same tools run directly, and where the
difference goes. Prints a table; measures, never asserts.

    .venv/bin/python benchmarks/bench_overhead.py [--fast5 DIR --reads FASTA --reference FASTA]

Defaults to the 112 E. coli reads in ../shared against the DH10B genome from ./setup.sh.
"""

from __future__ import annotations

import argparse
import csv
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchpath  # noqa: F401  (scripts/ and tests/ on the path)
from project import snakemake_command, write_project

REPO = Path(__file__).resolve().parent.parent
ECOLI = REPO.parent / "shared" / "data" / "ecoli_r94"


def timed(cmd: str, cwd: Path) -> float:
    """Run a shell command (pipefail), fail loudly, return its wall time in seconds."""
    start = time.perf_counter()
    subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - start


def direct_run(work: Path, fast5: Path, reads: Path, reference: Path, threads: int) -> dict:
    """The tools by hand: align+sort, index BAM, nanopolish index, call-methylation."""
    shutil.copy(reads, work / "reads.fasta")
    shutil.copy(reference, work / "genome.fa")
    return {
        "align+sort": timed(
            f"minimap2 -ax map-ont -t {threads} genome.fa reads.fasta"
            f" | samtools sort -@ {threads} -o aln.bam -",
            work,
        ),
        "index_bam": timed("samtools index aln.bam", work),
        "nanopolish_index": timed(f"nanopolish index -d {fast5} reads.fasta", work),
        "call_methylation": timed(
            f"nanopolish call-methylation -t {threads} -r reads.fasta -b aln.bam -g genome.fa"
            " > calls.tsv",
            work,
        ),
    }


def workflow_run(work: Path, fast5: Path, reads: Path, reference: Path, threads: int) -> float:
    """The workflow in a fresh project directory; returns its wall time."""
    write_project(
        work, [{"sample": "bench", "fast5": fast5, "reads": reads, "reference": reference}]
    )
    return timed(shlex.join(snakemake_command(work, threads)), work)


def rule_seconds(work: Path) -> dict[str, float]:
    """Wall seconds per rule from the workflow's benchmark files."""
    totals: dict[str, float] = {}
    for path in sorted((work / "results" / "benchmarks").glob("*/*.tsv")):
        with open(path) as handle:
            row = next(csv.DictReader(handle, delimiter="\t"))
        totals[path.parent.name] = totals.get(path.parent.name, 0.0) + float(row["s"])
    return totals


def main() -> None:
    """Run both side by side and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast5", type=Path, default=ECOLI / "fast5")
    parser.add_argument("--reads", type=Path, default=ECOLI / "reads.fasta")
    parser.add_argument("--reference", type=Path, default=REPO / "resources" / "ecoli_dh10b.fa")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        direct_dir, wf_dir = Path(tmp, "direct"), Path(tmp, "workflow")
        direct_dir.mkdir()
        wf_dir.mkdir()
        inputs = (args.fast5.resolve(), args.reads.resolve(), args.reference.resolve())
        steps = direct_run(direct_dir, *inputs, args.threads)
        wall = workflow_run(wf_dir, *inputs, args.threads)
        rules = rule_seconds(wf_dir)
    direct_total = sum(steps.values())
    parts = ", ".join(f"{k} {v:.1f}" for k, v in steps.items())
    print(f"direct tools:  {direct_total:7.1f} s  ({parts})")
    print(f"workflow:      {wall:7.1f} s  ratio {wall / direct_total:.2f}")
    print("workflow jobs (benchmark: wall s):")
    for rule, seconds in sorted(rules.items(), key=lambda kv: -kv[1]):
        print(f"  {rule:28s} {seconds:7.2f}")
    jobs = sum(rules.values())
    print(f"  {'sum of jobs':28s} {jobs:7.2f}")
    print(f"  {'scheduling, start-up, DAG':28s} {wall - jobs:7.2f}  (wall minus sum of jobs)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
