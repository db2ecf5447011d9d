"""A cell's measurements: the parsers of its three raw files and the summary row made of them.

The raw files: the launcher's run record (wall and exact CPU seconds of the tool processes, and
each process's policy probe: placement), `/usr/bin/time -v` around the whole cell (maximum RSS)
and Snakemake's benchmark file (the job's wall seconds). The summary is computed from those files
only, so a test can recompute it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from numapore.compare.cells import Cell
from numapore.execution.probe import parse_numactl_show, parse_proc_status
from numapore.execution.topology import format_cpulist

SUMMARY_COLUMNS = [
    "step",
    "aligner",
    "strategy",
    "io_mode",
    "threads",
    "repeat",
    "wall_s",
    "cpu_s",
    "cpu_utilisation",
    "core_hours",
    "max_rss_mb",
    "speedup",
    "job_wall_s",
    "storage_latency_ms",
    "storage_disks",
    "storage_requests",
    "placement",
    "too_short",
    "identical_to",
    "run_order",
    "seed",
]
# The measured columns, whose median over repeats is the configuration's (summary.summarise).
MEASURED_COLUMNS = SUMMARY_COLUMNS[
    SUMMARY_COLUMNS.index("wall_s") : SUMMARY_COLUMNS.index("placement")
]
# A cell whose tool processes ran for less than this many seconds is too short to measure: start-up
# and scheduling noise is as large as the differences between strategies.
MIN_MEASURABLE_S = 2.0  # quoted by the plots' captions (workflow/report/*.rst)
# A cell's raw files, after its name, in results/compare/cells/ (the benchmark is Snakemake's).
RECORD_SUFFIX = ".run.json"


def parse_time_v(text: str) -> dict[str, float]:
    """Wall, user and system seconds and maximum RSS (kB) from GNU time's `-v` report."""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.strip().rpartition(": ")
        fields[key] = value
    try:
        wall = fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")
        return {
            "wall_s": sum(float(part) * 60**i for i, part in enumerate(reversed(wall))),
            "user_s": float(fields["User time (seconds)"]),
            "system_s": float(fields["System time (seconds)"]),
            "max_rss_kb": float(fields["Maximum resident set size (kbytes)"]),
            "exit_status": float(fields.get("Exit status", "0")),
        }
    except (KeyError, ValueError) as err:
        raise ValueError(f"not a complete GNU time -v report (missing {err})") from err


def parse_benchmark(text: str) -> dict[str, float]:
    """The first row of a Snakemake benchmark file as numbers (columns s, max_rss, cpu_time...)."""
    header, row, *_ = text.splitlines()
    values = {}
    for key, value in zip(header.split("\t"), row.split("\t"), strict=True):
        try:
            values[key] = float(value)
        except ValueError:
            values[key] = float("nan")
    return values


def memory_policy(show: Mapping[str, Any], mems_allowed: Sequence[int]) -> str:
    """A process's memory placement in words: its one allowed memory node (any policy then
    places memory there), else the policy in force with its nodes."""
    if len(mems_allowed) == 1:
        return f"node {mems_allowed[0]}"
    policy = str(show.get("policy", "?"))
    nodes = show.get("membind") if policy == "bind" else show.get("interleavemask")
    if policy in ("bind", "interleave") and isinstance(nodes, list):
        return f"{policy} {format_cpulist(nodes)}"
    return policy


def placement(record: Mapping[str, Any]) -> str:
    """Where a cell's tool processes ran, as measured in each (its threads, allowed CPUs and
    memory placement), in words; two cells with the same placement ran the same way."""
    parts = []
    for process in record.get("processes", []):
        if not process.get("policy"):
            return "unknown"  # no policy probe output: never taken as identical to another
        status = parse_proc_status(process["policy"])
        cpus = format_cpulist(status.get("Cpus_allowed_list", ()))
        memory = memory_policy(
            parse_numactl_show(process["policy"]), status.get("Mems_allowed_list", ())
        )
        parts.append(f"{process['threads']}t cpus {cpus} mem {memory}")
    return "; ".join(sorted(parts)) or "unknown"


def cell_row(
    cell: Cell, record: Mapping[str, Any], time_v: Mapping[str, float], benchmark: Mapping
) -> dict[str, Any]:
    """A summary row from a cell's raw measurements: the tool processes' wall and CPU seconds
    (run record), the largest process's RSS (time -v), the job's wall seconds (benchmark), where
    the processes ran (placement), whether the cell was too short to measure, and its place in
    the run order with the order's seed (run record)."""
    wall, cpu = record["wall_seconds"], record["cpu_seconds"]
    storage = record.get("storage") or {}
    return {
        **asdict(cell),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "cpu_utilisation": round(cpu / (wall * cell.threads), 3),
        "core_hours": round(cell.threads * wall / 3600, 6),
        "max_rss_mb": round(time_v["max_rss_kb"] / 1024, 1),
        "speedup": float("nan"),
        "job_wall_s": round(benchmark["s"], 3),
        "storage_latency_ms": storage.get("latency_ms", 0),
        "storage_disks": storage.get("disks", 0),
        "storage_requests": storage.get("requests", 0),
        "placement": placement(record),
        "too_short": int(wall < MIN_MEASURABLE_S),
        "identical_to": "",
        "run_order": record["order"]["position"],
        "seed": record["order"]["seed"],
    }


def cell_rows(
    records: Sequence[Path], times: Sequence[Path], benchmarks: Sequence[Path]
) -> list[dict[str, Any]]:
    """The rows of every cell from its raw files (run record, time -v report, benchmark; the
    cell named by its record's file name)."""
    rows = []
    for record, time_report, benchmark in zip(records, times, benchmarks, strict=True):
        cell = Cell.parse(Path(record).name.removesuffix(RECORD_SUFFIX))
        rows.append(
            cell_row(
                cell,
                json.loads(Path(record).read_text()),
                parse_time_v(Path(time_report).read_text()),
                parse_benchmark(Path(benchmark).read_text()),
            )
        )
    return rows
