"""Benchmark the FAST5 census's per-file work, numapore.signal.fast5.read_layout, with its
compiled layout (numapore.signal.fast5_core) and without it (the Python path, h5py), on each
folder given. Runs alternate (compiled, Python, compiled, ...) so a busy phase of this shared
machine hits both alike; prints files, reads, median seconds of --repeats and ms per read.
Measures, never asserts.

    .venv/bin/python benchmarks/bench_census.py FOLDER [FOLDER ...] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import benchpath  # noqa: F401  (scripts/ and tests/ on the path)
from numapore.signal import fast5_core
from numapore.signal.fast5 import list_fast5, read_layout


def timed_census(paths: list[str], compiled: bool) -> tuple[float, int]:
    """Wall seconds of read_layout over every file (compiled layout on or off), and its reads."""
    fast5_core.ENABLED = compiled
    start = time.perf_counter()
    reads = sum(len(read_layout(path)) for path in paths)
    return time.perf_counter() - start, reads


def main() -> None:
    """Time read_layout both ways on each folder, alternated; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", type=Path, nargs="+", help="folders of FAST5 files")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if fast5_core.lib is None:
        sys.exit("numapore.signal._fast5_core is not built (./setup.sh): nothing to compare")
    header = ["folder", "path", "files", "reads", "median s", "ms/read", "Python/compiled"]
    rows = []
    for folder in args.folders:
        paths = [str(p) for p in list_fast5([folder])]
        seconds: dict[bool, list[float]] = {True: [], False: []}
        counts = set()
        for _ in range(args.repeats):
            for compiled in (True, False):
                took, reads = timed_census(paths, compiled)
                seconds[compiled].append(took)
                counts.add(reads)
        (reads,) = counts  # both paths list the same reads
        medians = {c: statistics.median(s) for c, s in seconds.items()}
        for compiled in (True, False):
            rows.append([str(folder), "compiled" if compiled else "Python", len(paths), reads,
                         f"{medians[compiled]:.3f}", f"{medians[compiled] / reads * 1e3:.3f}",
                         f"{medians[False] / medians[True]:.1f}" if compiled else ""])  # fmt: skip
    fast5_core.ENABLED = fast5_core.lib is not None
    print(f"read_layout over each folder's FAST5 files, median of {args.repeats} (alternated):")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).rjust(w) for v, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
