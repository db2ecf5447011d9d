"""Benchmark: how long Snakemake takes to build the workflow's DAG at scale. Writes a project of
N samples (default 100) with alignment and methylation scattered into S shards each (default
16), every sample on the real E. coli reads of ../shared, and times a dry run
(`snakemake -n`, the hpc-numa profile, as a user would start). Prints the figures; measures,
never asserts (the issue's target: <= 30 s for 100 samples x 16 shards).

    .venv/bin/python benchmarks/bench_dag.py [--samples N] [--shards S] [--repeats R]
    .venv/bin/python benchmarks/bench_dag.py --profile-to dag.prof   # cProfile of one dry run

The reads and references are checked in jobs, not when the DAG is built, so the samples may
all share one set of inputs: start-up reads only each reads file's first line and counts the
FAST5 files of each sample's folder.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchpath  # noqa: F401  (scripts/ and tests/ on the path)
from project import snakemake_command, write_project

REPO = Path(__file__).resolve().parent.parent
ECOLI = REPO.parent / "shared" / "data" / "ecoli_r94"


def dag_project(work: Path, samples: int, shards: int, data: Path = ECOLI) -> Path:
    """A project of `samples` samples (all on the E. coli reads, reference region.fa) with
    alignment and methylation scattered into `shards` shards; return its folder."""
    rows = [
        {
            "sample": f"s{i:03d}",
            "signal": str(data / "fast5"),
            "reads": str(data / "reads.fasta"),
            "reference": str(data / "region.fa"),
        }
        for i in range(1, samples + 1)
    ]
    return write_project(work, rows, {"scatter": {"alignment": shards, "methylation": shards}})


def dry_run(work: Path, profile_to: Path | None = None) -> tuple[float, float, int]:
    """Time `snakemake -n` in the project (optionally under cProfile); return its wall and CPU
    seconds (CPU: what it takes on a quiet machine) and the number of jobs it would run."""
    cmd = snakemake_command(work, 2, "-n", "--quiet", "rules")
    if profile_to:
        cmd = [sys.executable, "-m", "cProfile", "-o", str(profile_to), *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if run.returncode != 0:
        sys.exit(f"dry run failed ({' '.join(cmd)}):\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
    return seconds, cpu, jobs_planned(run.stdout + run.stderr)


def jobs_planned(text: str) -> int:
    """The job count of a dry run's `--quiet rules` table (its `total` row)."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "total" and fields[1].isdigit():
            return int(fields[1])
    raise ValueError("no 'total' row in the dry run's output")


def main(argv: list[str] | None = None) -> int:
    """Command line: write the project, time the dry runs, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ECOLI, help="fast5/, reads.fasta, region.fa")
    parser.add_argument("--profile-to", type=Path, help="write a cProfile of one dry run here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="numapore-dag-") as tmp:
        work = dag_project(Path(tmp), args.samples, args.shards, args.data)
        if args.profile_to:
            seconds, _, _ = dry_run(work, args.profile_to)
            print(f"cProfile of one dry run ({seconds:.1f} s) -> {args.profile_to}")
            return 0
        times, cpus, jobs = [], [], 0
        for _ in range(args.repeats):
            seconds, cpu, jobs = dry_run(work)
            times.append(seconds)
            cpus.append(cpu)
    print(f"DAG: {args.samples} samples x {args.shards} shards (alignment and methylation)")
    print(f"jobs planned: {jobs}")
    print("dry run (snakemake -n) wall s: " + ", ".join(f"{t:.1f}" for t in times))
    print("dry run CPU s (user + system): " + ", ".join(f"{c:.1f}" for c in cpus))
    print(
        f"median: wall {statistics.median(times):.1f} s, CPU {statistics.median(cpus):.1f} s "
        f"(target <= 30 s; on a busy machine wall > CPU)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
