"""The comparison's plots, in the style of the studies behind numapore: time against threads per
strategy, CPU utilisation and core-hours against threads, and bars per raw-signal I/O mode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from numapore.base.atomic import atomic_output  # noqa: E402
from numapore.compare.cells import Cell  # noqa: E402
from numapore.report.comparison import storage_description  # noqa: E402
from numapore.execution.hosts import IO_MODES  # noqa: E402

STEP_TITLES = {"alignment": "Alignment", "methylation": "Methylation calling (nanopolish)"}


def save(fig, output: Path) -> None:
    """Write a figure as PNG under a temporary name, renamed into place when complete."""
    with atomic_output(output) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def medians(rows: Sequence[Mapping[str, Any]], step: str) -> dict[str, list[Mapping[str, Any]]]:
    """A step's median rows grouped by what is compared (aligner x strategy, I/O x strategy),
    each sorted by threads."""
    groups: dict[str, list] = {}
    for r in rows:
        if r["repeat"] == "median" and r["step"] == step:
            label = Cell(r["step"], r["aligner"], r["strategy"], r["io_mode"], 1, 1).label
            groups.setdefault(label, []).append(r)
    return {k: sorted(v, key=lambda r: r["threads"]) for k, v in sorted(groups.items())}


def steps_in(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The steps present in the summary, in pipeline order."""
    return [s for s in STEP_TITLES if any(r["step"] == s for r in rows)]


def plot_lines(ax, groups, column: str, ylabel: str, title: str) -> None:
    """One line per group: column against threads."""
    for label, group in groups.items():
        ax.plot([r["threads"] for r in group], [r[column] for r in group], "o-", label=label)
    threads = sorted({r["threads"] for g in groups.values() for r in g})
    ax.set_xticks(threads)
    ax.set_xlabel("threads")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def time_vs_threads(rows: Sequence[Mapping[str, Any]], output: Path) -> None:
    """Median execution time against threads, one panel per step."""
    steps = steps_in(rows)
    fig, axes = plt.subplots(1, len(steps), figsize=(6 * len(steps), 4.5), squeeze=False)
    for ax, step in zip(axes[0], steps, strict=True):
        plot_lines(ax, medians(rows, step), "wall_s", "wall time (s)", STEP_TITLES[step])
    fig.suptitle("Execution time vs threads (median over repeats)")
    fig.tight_layout()
    save(fig, output)


def utilisation_core_hours(rows: Sequence[Mapping[str, Any]], output: Path) -> None:
    """CPU utilisation (top) and core-hours (bottom) against threads, one column per step."""
    steps = steps_in(rows)
    fig, axes = plt.subplots(2, len(steps), figsize=(6 * len(steps), 8), squeeze=False)
    for col, step in enumerate(steps):
        groups = medians(rows, step)
        plot_lines(
            axes[0][col], groups, "cpu_utilisation", "CPU utilisation (CPU s / (wall s x threads))",
            f"{STEP_TITLES[step]}: CPU utilisation",
        )  # fmt: skip
        axes[0][col].set_ylim(0, 1.05)
        plot_lines(
            axes[1][col], groups, "core_hours", "core-hours (threads x wall h)",
            f"{STEP_TITLES[step]}: core-hours",
        )  # fmt: skip
    fig.suptitle("CPU utilisation and core-hours vs threads (median over repeats)")
    fig.tight_layout()
    save(fig, output)


def io_modes(rows: Sequence[Mapping[str, Any]], output: Path) -> None:
    """Methylation time per I/O mode (grouped bars per thread count, min-max over repeats)."""
    runs = [r for r in rows if r["step"] == "methylation" and r["repeat"] != "median"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if not runs:
        ax.text(0.5, 0.5, "no methylation cells in the comparison", ha="center", va="center")
        ax.set_axis_off()
    else:
        strategy = "none" if any(r["strategy"] == "none" for r in runs) else runs[0]["strategy"]
        runs = [r for r in runs if r["strategy"] == strategy]
        # Bar height: the summary's own median row (the number the report quotes).
        median_wall = {
            (r["strategy"], r["io_mode"], r["threads"]): r["wall_s"]
            for r in rows
            if r["step"] == "methylation" and r["repeat"] == "median"
        }
        modes = sorted({r["io_mode"] for r in runs}, key=IO_MODES.index)
        threads = sorted({r["threads"] for r in runs})
        width = 0.8 / len(modes)
        for i, mode in enumerate(modes):
            heights, low, high = [], [], []
            for t in threads:
                walls = sorted(
                    r["wall_s"] for r in runs if (r["io_mode"], r["threads"]) == (mode, t)
                )
                mid = median_wall.get((strategy, mode, t), 0)
                heights.append(mid)
                low.append(mid - walls[0] if walls else 0)
                high.append(walls[-1] - mid if walls else 0)
            xs = [j + (i - (len(modes) - 1) / 2) * width for j in range(len(threads))]
            ax.bar(xs, heights, width, yerr=[low, high], capsize=3, label=mode)
        ax.set_xticks(range(len(threads)), [str(t) for t in threads])
        ax.set_xlabel("threads")
        ax.set_ylabel("methylation calling wall time (s)")
        ax.legend(title="I/O mode")
        ax.grid(axis="y", alpha=0.3)
        ax.set_title(f"I/O modes (strategy {strategy}; bars: median, whiskers: min-max)")
    fig.suptitle(storage_description(rows), fontsize="small")
    fig.tight_layout()
    save(fig, output)
