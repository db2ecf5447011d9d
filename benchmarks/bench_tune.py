"""Host tuning end to end: the workflow up to the methylation calls with `tune: on` against the
same run with the host file's I/O mode (fast5), each in a fresh project, on simulated reads
whose raw signal sits behind the comparison's emulated slow storage (FUSE, --latency-ms; 0:
plain storage). Prints each run's wall and CPU seconds, the tuning's choice, its reason and its
own seconds, and the ratio. Asserts nothing.

    nice -n 15 .venv/bin/python benchmarks/bench_tune.py --simulate 3000 --latency-ms 5
    nice -n 15 .venv/bin/python benchmarks/bench_tune.py --simulate 3000 --latency-ms 0
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

import benchpath  # noqa: F401  (scripts/ and tests/ on the path)
from bench_overhead import REPO, timed
from project import snakemake_command, write_project

from numapore.compare.slowfs import mounted
from numapore.compare.tuning import host_name
from numapore.execution.io_modes import IO_MODES


def simulate(reference: Path, reads: int, out: Path, threads: int) -> None:
    """numapore's simulator: raw R9.4 signal in multi-read FAST5 files of 1,000 reads."""
    subprocess.run(
        [sys.executable, "-m", "numapore.simulate.reads", "--reference", str(reference),
         "--out", str(out), "--reads", str(reads), "--processes", str(threads), "--quiet"],
        check=True, env={**os.environ, "PYTHONPATH": str(REPO / "scripts")},
    )  # fmt: skip


def run(
    work: Path, row: dict, tune: str, threads: int, tuning_only: bool = False
) -> tuple[float, float, dict | None]:
    """The workflow up to the calls (tuning_only: up to the tuning's record) in a fresh
    project; wall, CPU and the tuning record. tune: on, off, or an I/O mode (that mode given
    with --config, tuning off). The host file is the profile's (host=auto: here one node's,
    io_mode fast5)."""
    work.mkdir(parents=True)
    write_project(work, [row], {"tune": "off" if tune in IO_MODES else tune})
    given = ["--config", f"io_mode={tune}"] if tune in IO_MODES else []
    record = work / "results" / "tuning" / f"{host_name()}.json"
    target = "results/bench/methylation/bench.minimap2.cpg.calls.tsv"
    target = str(record.relative_to(work)) if tuning_only else target
    timing = timed(shlex.join([*snakemake_command(work, threads), target, *given]), work)
    return timing.wall, timing.cpu, json.loads(record.read_text()) if record.is_file() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulate", type=int, default=3000)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--disks", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reference", type=Path, default=REPO / "resources" / "ecoli_dh10b.fa")
    parser.add_argument(
        "--runs",
        default="on,off",
        help="tune values run, in this order (an I/O mode: that mode, tuning off)",
    )
    parser.add_argument(
        "--tuning-only", action="store_true", help="each run only up to the tuning's record"
    )
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        simulate(args.reference, args.simulate, tmp / "sim", args.threads)
        storage = (
            mounted({"sim": tmp / "sim"}, args.latency_ms, args.disks)
            if args.latency_ms
            else nullcontext()
        )
        with storage as mount:
            signal = tmp / "sim" / "fast5_multi"
            row = {
                "sample": "bench",
                "signal": str(mount.path(signal) if mount else signal),
                "reads": str(tmp / "sim" / "reads.fastq"),
                "reference": str(args.reference.resolve()),
            }
            results = {}
            for tune in args.runs.split(","):
                results[tune] = run(tmp / tune, row, tune, args.threads, args.tuning_only)
                wall, cpu, _ = results[tune]
                load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
                print(
                    f"tune={tune}: {wall:.1f} s wall, {cpu:.1f} s CPU (load average {load})",
                    file=sys.stderr,
                    flush=True,
                )
    where = f"FUSE {args.latency_ms:g} ms, {args.disks} disks" if args.latency_ms else "plain"
    what = "up to the tuning's record" if args.tuning_only else "up to the calls"
    print(
        f"{args.simulate} simulated reads, signal on {where} storage, {args.threads} threads, "
        f"{what}"
    )
    for tune, (wall, cpu, record) in results.items():
        print(f"tune={tune:3}: {wall:7.1f} s wall, {cpu:7.1f} s CPU")
        if record:
            walls = "; ".join(
                f"{m} " + ", ".join(f"{w:.2f}" for w in ws)
                for m, ws in record.get("walls", {}).items()
                if ws
            )
            what = f"I/O mode {record['io_mode']}: {record['why']}"
            print(f"  tuning: {record['seconds']:.1f} s, {what}")
            print(f"  first cell: {record.get('probe')}; cells (s): {walls or 'none'}")
            print(f"  sizing: {record.get('sizing')}")
            whole = "; ".join(
                f"{m} " + ", ".join(f"{w:.0f}" for w in ws)
                for m, ws in record.get("estimates", {}).items()
                if ws
            )
            print(f"  the whole run, estimated part by part (s): {whole or 'none'}")
            for cell in record.get("cells", []):
                print(f"  cell: {cell}")
    for tune in [t for t in results if t != "off" and "off" in results]:
        name = "tuned" if tune == "on" else tune
        print(f"{name} / fast5: x{results[tune][0] / results['off'][0]:.3f} wall")


if __name__ == "__main__":
    main()
