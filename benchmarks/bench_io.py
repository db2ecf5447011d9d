"""Benchmark the raw-signal I/O modes on this host: FAST5 -> BLOW5 conversion throughput with
K = 1..cores reader processes, then methylation calling through the workflow in each I/O mode
(fast5, fast5-pool, slow5): wall time, CPU time and CPU utilisation = CPU / (wall x threads).
Prints tables; measures, never asserts. Run the modes side by side in one invocation: this
machine is shared and noisy.

    .venv/bin/python benchmarks/bench_io.py [--replicate N] [--threads T] [--reference FASTA]

--replicate N copies the 112 E. coli reads of ../shared N times with new read ids (N=40 is the
4,480-read set of ../shared/README.md's benchmark targets).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import h5py
import yaml

import benchpath  # noqa: F401  (scripts/ and tests/ on the path)
from numapore.signal.convert import convert
from project import snakemake_command, write_project

REPO = Path(__file__).resolve().parent.parent
ECOLI = REPO.parent / "shared" / "data" / "ecoli_r94"


def replicate_reads(out: Path, copies: int) -> tuple[Path, Path]:
    """Copy the E. coli FAST5 files and reads `copies` times with new read ids."""
    fast5_dir = out / "fast5"
    fast5_dir.mkdir(parents=True)
    seqs, name = {}, None
    for line in (ECOLI / "reads.fasta").read_text().splitlines():
        if line.startswith(">"):
            name = line[1:].split()[0]
            seqs[name] = []
        else:
            seqs[name].append(line)
    files = sorted((ECOLI / "fast5").glob("*.fast5"))
    fasta = []
    for copy in range(copies):
        for src in files:
            dst = fast5_dir / f"c{copy}_{src.name}"
            shutil.copyfile(src, dst)
            with h5py.File(dst, "r+") as f:
                (read,) = f["Raw/Reads"].values()
                old = read.attrs["read_id"]
                old = old.decode() if isinstance(old, bytes) else str(old)
                new = old if copy == 0 else str(uuid.uuid5(uuid.NAMESPACE_OID, f"{old}/{copy}"))
                read.attrs["read_id"] = new.encode()
            fasta.append(f">{new}\n{''.join(seqs[old])}\n")
    reads = out / "reads.fasta"
    reads.write_text("".join(fasta))
    return fast5_dir, reads


def conversion_table(fast5_dir: Path, work: Path, max_k: int) -> list[dict]:
    """Convert with K = 1..max_k processes (zlib records, no signal compression)."""
    rows = []
    for k in range(1, max_k + 1):
        report = convert([fast5_dir], work / f"k{k}.blow5", processes=k, progress=None)
        rows.append({
            "K": k, "reads": report.reads_written, "seconds": round(report.seconds, 2),
            "reads/s": round(report.reads_per_second, 1),
            "signal MB/s": round(report.signal_mb_per_second, 1),
        })  # fmt: skip
    return rows


def run_mode(work: Path, fast5: Path, reads: Path, reference: Path, mode: str, threads: int):
    """Run the workflow up to the call table in one I/O mode; return its benchmark rows."""
    write_project(
        work, [{"sample": "bench", "fast5": fast5, "reads": reads, "reference": reference}]
    )
    host = work / "host.yaml"
    host.write_text(yaml.safe_dump({
        "description": f"I/O benchmark, {mode}", "topology": "auto",
        "strategy": {"alignment": "none", "methylation": "none"},
        "io_mode": mode, "io_processes": threads,
    }))  # fmt: skip
    target = "results/bench/methylation/bench.minimap2.cpg.calls.tsv"
    subprocess.run(
        snakemake_command(work, threads, "--config", f"host={host}", "--", target),
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    out = {}
    # CPU of the calling step from the launcher's record (exact, from the kernel's accounting of
    # child processes); Snakemake's benchmark samples processes and misses short-lived ones.
    (record,) = (work / "results/logs/call_methylation").glob("*.run.json")
    run = json.loads(record.read_text())
    out["call_methylation"] = (run["wall_seconds"], run["cpu_seconds"])
    for rule in ("fast5_to_blow5", "nanopolish_index"):
        for path in (work / "results/benchmarks" / rule).glob("*.tsv"):
            with open(path) as handle:
                row = next(csv.DictReader(handle, delimiter="\t"))
            out[rule] = (float(row["s"]), float(row["cpu_time"]))
    calls = (
        sum(1 for _ in open(work / "results/bench/methylation/bench.minimap2.cpg.calls.tsv")) - 1
    )
    return out, calls


def print_table(rows: list[dict]) -> None:
    """Print dict rows as an aligned text table."""
    keys = list(rows[0])
    widths = [max(len(k), *(len(str(r[k])) for r in rows)) for k in keys]
    print("  ".join(k.rjust(w) for k, w in zip(keys, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[k]).rjust(w) for k, w in zip(keys, widths, strict=True)))


def main() -> None:
    """Make the dataset, then measure conversion and the three I/O modes side by side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicate", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--reference", type=Path, default=ECOLI / "region.fa")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        fast5, reads = replicate_reads(tmp / "data", args.replicate)
        n_files = len(list(fast5.glob("*.fast5")))
        print(f"dataset: {n_files} single-read FAST5 files, reference {args.reference.name}")
        print("\nFAST5 -> BLOW5 conversion (zlib records, uncompressed signal):")
        print_table(conversion_table(fast5, tmp, args.threads))
        rows = []
        for mode in ("fast5", "fast5-pool", "slow5"):
            start = time.perf_counter()
            bench, calls = run_mode(tmp / mode, fast5, reads, args.reference.resolve(), mode,
                                    args.threads)  # fmt: skip
            wall, cpu = bench["call_methylation"]
            rows.append({
                "io_mode": mode, "threads": args.threads, "calls": calls,
                "call wall s": round(wall, 1), "call CPU s": round(cpu, 1),
                "CPU utilisation": round(cpu / (wall * args.threads), 2),
                "index s": round(bench["nanopolish_index"][0], 1),
                "convert s": round(bench.get("fast5_to_blow5", (0.0, 0.0))[0], 1),
                "workflow wall s": round(time.perf_counter() - start, 1),
            })  # fmt: skip
        print(f"\nmethylation calling, {args.threads} threads (call: the nanopolish processes):")
        print_table(rows)


if __name__ == "__main__":
    main()
