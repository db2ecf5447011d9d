"""Benchmark FAST5 -> BLOW5 conversion: numapore's converter against slow5tools `f2s`, side by
side, with K = 1 and 2 processes, for zlib + svb-zd and the workflow's default zlib + none.
Prints median wall seconds, CPU milliseconds per read, reads/s and the K=2 / K=1 wall ratio,
then (--breakdown) where numapore's time per read goes. Measures, never asserts.

    .venv/bin/python benchmarks/bench_convert.py [--replicate 40] [--repeats 3] [--fast5 DIR]
        [--slow5tools PATH] [--baseline SCRIPTS_DIR] [--breakdown]

The data set is the 112 E. coli reads of ../shared copied --replicate times with new read ids
(40: the 4,480 files of ../shared/README.md's benchmark targets), in the system temporary
folder (or --fast5 DIR: an existing folder). slow5tools is not part of numapore: build it by
hand from its public source and name it with --slow5tools (or have it on PATH); without it only
numapore's figures are printed. --baseline names the scripts/ folder of another numapore
version (e.g. `git archive main scripts | tar -x -C /tmp/old`), run beside this one as
"numapore-baseline" in the same conditions. Runs are interleaved (every configuration once,
then again) so a busy phase of this shared machine hits all alike; CPU time (user + system of
every process) is what a quiet machine would need.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import benchpath  # noqa: F401  (scripts/ and tests/ on the path)
from bench_io import replicate_reads

REPO = Path(__file__).resolve().parent.parent
COMPRESSIONS = [("zlib", "svb-zd"), ("zlib", "none")]


def run_timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run a command to completion; its wall seconds and CPU seconds (all its processes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def numapore_command(fast5: Path, out: Path, record: str, signal: str, k: int) -> list[str]:
    """numapore's converter as a command (a fresh interpreter, like the workflow's job)."""
    return [sys.executable, "-m", "numapore.signal.convert", str(fast5), "-o", str(out),
            "-c", record, "-s", signal, "-p", str(k), "-q"]  # fmt: skip


def slow5tools_command(
    tool: str, fast5: Path, out: Path, record: str, signal: str, k: int
) -> list[str]:
    """slow5tools f2s with K processes: into one file (K=1), else into a folder (f2s needs -d
    for K > 1 and writes one file per process there; numapore writes one file either way)."""
    where = ["-o", str(out)] if k == 1 else ["-d", str(out)]
    return [tool, "f2s", str(fast5), *where, "-c", record, "-s", signal, "-p", str(k)]


def breakdown(fast5: Path, files: int = 448) -> list[tuple[str, float]]:
    """Where numapore's CPU time per read goes, measured stage by stage on some files (ms)."""
    from dataclasses import replace

    import h5py

    from numapore.signal.convert_worker import conform_aux
    from numapore.signal.fast5 import read_fast5
    from numapore.signal.slow5 import encode_record_binary, svb_zd_encode

    paths = sorted(fast5.glob("*.fast5"))[:files]
    run = read_fast5(paths[0]).reads[0].run_id

    def per_read(fn, items) -> tuple[float, list]:
        """CPU milliseconds per item of fn over items, and its results."""
        start = time.process_time()
        out = [fn(x) for x in items]
        return (time.process_time() - start) / len(items) * 1e3, out

    opened, _ = per_read(lambda p: h5py.File(p, "r").close(), paths)
    total, reads = per_read(lambda p: read_fast5(p, known_runs={run}).reads[0], paths)
    signal, _ = per_read(lambda r: r.record.signal.copy(), reads)  # baseline: a copy
    rows = [("HDF5 open + close", opened), ("read_fast5 (open, walk, attributes, signal)", total)]
    records = [replace(r.record, read_group=0, aux=conform_aux(r, r.aux_fields)) for r in reads]
    fields = reads[0].aux_fields
    svb, _ = per_read(lambda r: svb_zd_encode(r.signal), records)
    rows.append(("svb-zd signal encoding", svb))
    for record, sig in COMPRESSIONS:
        pack = partial(encode_record_binary, aux_fields=fields, record_compression=record,
                       signal_compression=sig)  # fmt: skip
        packed, _ = per_read(pack, records)
        rows.append((f"record packing + {record} ({sig} signal)", packed))
    rows.append(("(a copy of the signal, for scale)", signal))
    from numapore.signal.fast5_core import CoreReader, lib

    if lib is not None:  # the compiled reader: walk, attributes, signal and record in one C call
        groups = {run: 0}
        for record, sig in COMPRESSIONS:
            core = CoreReader(record, sig, fields, groups)
            ms, _ = per_read(lambda p, core=core: core.read(str(p)), paths)
            rows.append((f"compiled reader: file to record, {record} ({sig} signal)", ms))
    return rows


def main() -> None:
    """Make or take the data set, run every configuration interleaved, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicate", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fast5", type=Path, help="an existing folder of FAST5 files")
    parser.add_argument("--slow5tools", default=shutil.which("slow5tools"))
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--compressions",
        nargs="+",
        default=[f"{r}+{s}" for r, s in COMPRESSIONS],
        help="record+signal compressions to run (default: %(default)s)",
    )
    parser.add_argument("--baseline", type=Path, help="scripts/ of another numapore version")
    parser.add_argument("--breakdown", action="store_true", help="time numapore's stages")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO / "scripts")}
    with tempfile.TemporaryDirectory(prefix="numapore-convert-") as tmp:
        tmp = Path(tmp)
        fast5 = args.fast5 or replicate_reads(tmp / "data", args.replicate)[0]
        n_reads = len(list(fast5.glob("*.fast5")))
        tools = {"numapore": None}
        if args.baseline:
            tools["numapore-baseline"] = None
        if args.slow5tools:
            tools["slow5tools"] = args.slow5tools
        compressions = [tuple(c.split("+")) for c in args.compressions]
        configs = [(t, c, k) for c in compressions for k in args.processes for t in tools]
        times: dict[tuple, list[tuple[float, float]]] = {c: [] for c in configs}
        for _ in range(args.repeats):
            for tool, (record, signal), k in configs:
                out = tmp / f"{tool}.{record}.{signal}.k{k}.blow5"
                if tool.startswith("numapore"):
                    cmd = numapore_command(fast5, out, record, signal, k)
                else:
                    cmd = slow5tools_command(tools[tool], fast5, out, record, signal, k)
                scripts = args.baseline if tool == "numapore-baseline" else REPO / "scripts"
                times[(tool, (record, signal), k)].append(
                    run_timed(cmd, {**env, "PYTHONPATH": str(scripts)})
                )
                shutil.rmtree(out) if out.is_dir() else out.unlink()
        print(f"FAST5 -> BLOW5, {n_reads} single-read FAST5 files, median of {args.repeats}:")
        header = ["records+signal", "tool", "K", "wall s", "CPU ms/read", "reads/s", "K/K=1"]
        rows = []
        for tool, comp, k in configs:
            wall = statistics.median(w for w, _ in times[(tool, comp, k)])
            cpu = statistics.median(c for _, c in times[(tool, comp, k)])
            first = statistics.median(w for w, _ in times[(tool, comp, args.processes[0])])
            rows.append([f"{comp[0]}+{comp[1]}", tool, k, f"{wall:.1f}",
                         f"{cpu / n_reads * 1e3:.2f}", f"{n_reads / wall:.0f}",
                         f"{wall / first:.2f}"])  # fmt: skip
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(str(v).rjust(w) for v, w in zip(row, widths, strict=True)))
        if not args.slow5tools:
            print("(slow5tools not found: numapore's figures only; --slow5tools PATH)")
        if args.breakdown:
            print("\nnumapore, CPU ms per read by stage (one process):")
            for label, ms in breakdown(fast5):
                print(f"  {label:56s} {ms:6.2f}")


if __name__ == "__main__":
    main()
