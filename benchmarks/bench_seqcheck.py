"""Benchmark: the reads check (numapore.inputs.seqcheck) on the real E. coli reads repeated to a
given size, plain and gzip-compressed FASTQ. Prints throughput and peak memory; measures, never
asserts.

    .venv/bin/python benchmarks/bench_seqcheck.py [--copies 200]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchpath  # noqa: F401  (scripts/ and tests/ on the path)
from numapore.inputs.seqcheck import check_sequences

REPO = Path(__file__).resolve().parent.parent
READS = REPO.parent / "shared" / "data" / "ecoli_r94" / "reads.fasta"


def fastq_text() -> str:
    """The 112 real reads as 4-line FASTQ."""
    out = []
    for record in READS.read_text().split(">")[1:]:
        header, *lines = record.split("\n")
        seq = "".join(lines)
        out.append(f"@{header}\n{seq}\n+\n{'5' * len(seq)}\n")
    return "".join(out)


def measure(path: Path, fmt: str) -> str:
    """Check path in a fresh process; its wall seconds, MB/s and peak RSS as one line."""
    code = (
        "import resource, sys, time; from pathlib import Path;"
        "from numapore.inputs.seqcheck import check_sequences;"
        "t = time.perf_counter(); c = check_sequences(Path(sys.argv[1]), 'reads', sys.argv[2]);"
        "print(c.records, time.perf_counter() - t,"
        " resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), fmt],
        capture_output=True, text=True, check=True, env={"PYTHONPATH": str(REPO / "scripts")},
    )  # fmt: skip
    records, seconds, rss_kb = done.stdout.split()
    size = path.stat().st_size / 1e6
    return (
        f"{path.name:12} {size:8.1f} MB  {int(records):8d} reads  {float(seconds):6.2f} s  "
        f"{size / float(seconds):7.1f} MB/s  peak RSS {int(rss_kb) / 1024:6.1f} MiB"
    )


def main() -> None:
    """Write the test files, check each, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=200, help="copies of the 112 reads")
    args = parser.parse_args()
    text = fastq_text()
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "reads.fastq"
        with open(plain, "w") as out:
            for _ in range(args.copies):
                out.write(text)
        packed = Path(tmp) / "reads.fastq.gz"
        with open(plain, "rb") as src, gzip.open(packed, "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        start = time.perf_counter()
        check_sequences(plain, "reads", "fastq")  # warm the page cache
        print(f"warm-up {time.perf_counter() - start:.2f} s; in a fresh process each:")
        print(measure(plain, "fastq"))
        print(measure(packed, "fastq.gz"))


if __name__ == "__main__":
    main()
