"""The summary table of a comparison: every cell's row, the median over repeats of each
configuration, its speed-up against the baseline (strategy none, I/O mode fast5), which
strategies ran exactly as none did, and the table as a file (summary.tsv)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from numapore.compare.cells import NOT_APPLICABLE, STEPS
from numapore.compare.measure import MEASURED_COLUMNS, MIN_MEASURABLE_S, SUMMARY_COLUMNS
from numapore.base.atomic import atomic_output

# The baseline each cell's speed-up is measured against (same step, aligner, threads).
BASELINE = {"strategy": "none", "io_mode": "fast5"}


def config_of(row: Mapping[str, Any]) -> tuple:
    """A row's configuration: everything but the repeat."""
    return tuple(row[k] for k in ("step", "aligner", "strategy", "io_mode", "threads"))


def summarise(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The summary table: every cell's row, then one `median` row per configuration (median
    over repeats), each with its speed-up: the median wall of the baseline (strategy none,
    I/O mode fast5) with the same step, aligner and threads over its own wall; and
    `identical_to` none when the configuration ran exactly as strategy none did (e.g. every
    strategy on a one-node host)."""
    rows = [dict(r) for r in rows]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(config_of(r), []).append(r)
    medians = []
    for (step, aligner, strategy, io_mode, threads), members in groups.items():
        median = {
            "step": step,
            "aligner": aligner,
            "strategy": strategy,
            "io_mode": io_mode,
            "threads": threads,
            "repeat": "median",
        }
        for column in MEASURED_COLUMNS:
            values = [m[column] for m in members]
            median[column] = round(statistics.median(values), 6)
        places = {m["placement"] for m in members}
        median["placement"] = places.pop() if len(places) == 1 else "varied"
        median["too_short"] = int(median["wall_s"] < MIN_MEASURABLE_S)
        median["identical_to"] = ""
        median["run_order"] = ""  # its repeats ran at their own places in the order
        seeds = {m["seed"] for m in members}
        median["seed"] = seeds.pop() if len(seeds) == 1 else "varied"
        medians.append(median)
    for row in rows + medians:
        base = baseline_of(row, medians)
        row["speedup"] = round(base["wall_s"] / row["wall_s"], 3) if base else float("nan")
    # Same step, aligner, I/O mode and threads, another strategy, the same placement in every
    # repeat: the same command as strategy none on this host, whatever its name.
    for median in medians:
        plain = [m for m in medians if same_but_strategy(m, median, BASELINE["strategy"])]
        if (
            median["strategy"] != BASELINE["strategy"]
            and plain
            and median["placement"] not in ("varied", "unknown")
            and plain[0]["placement"] == median["placement"]
        ):
            median["identical_to"] = BASELINE["strategy"]
            for r in rows:
                if config_of(r) == config_of(median):
                    r["identical_to"] = BASELINE["strategy"]
    return rows + medians


def same_but_strategy(row: Mapping[str, Any], other: Mapping[str, Any], strategy: str) -> bool:
    """Whether row is other's configuration with the given strategy instead of its own."""
    return row["strategy"] == strategy and all(
        row[k] == other[k] for k in ("step", "aligner", "io_mode", "threads")
    )


def baseline_of(row: Mapping[str, Any], medians: Sequence[Mapping[str, Any]]) -> dict | None:
    """The median row a row's speed-up is measured against, None if the matrix lacks it."""
    io_mode = NOT_APPLICABLE if row["step"] == "alignment" else BASELINE["io_mode"]
    for m in medians:
        if (m["step"], m["aligner"], m["threads"], m["strategy"], m["io_mode"]) == (
            row["step"],
            row["aligner"],
            row["threads"],
            BASELINE["strategy"],
            io_mode,
        ):
            return dict(m)
    return None


def identical_strategies(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Per step, the strategies that ran exactly as strategy none in every configuration
    measured (summarise's identical_to: e.g. all of them on a one-node host)."""
    out: dict[str, list[str]] = {}
    for step in STEPS:
        medians = [r for r in rows if r["repeat"] == "median" and r["step"] == step]
        strategies = dict.fromkeys(r["strategy"] for r in medians if r["identical_to"])
        same = [
            s for s in strategies if all(r["identical_to"] for r in medians if r["strategy"] == s)
        ]
        if same:
            out[step] = same
    return out


def write_tsv(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Write summary rows as a tab-separated table with the summary's columns."""
    lines = ["\t".join(SUMMARY_COLUMNS)]
    lines += ["\t".join(str(r[c]) for c in SUMMARY_COLUMNS) for r in rows]
    with atomic_output(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n")


def read_tsv(path: Path) -> list[dict[str, Any]]:
    """Read a summary table back (numbers as numbers, `median` repeats as text)."""
    header, *lines = path.read_text().splitlines()
    columns = header.split("\t")
    rows = []
    for line in lines:
        row: dict[str, Any] = {}
        for column, value in zip(columns, line.split("\t"), strict=True):
            try:
                row[column] = int(value) if value.isdigit() else float(value)
            except ValueError:
                row[column] = value
        rows.append(row)
    return rows
