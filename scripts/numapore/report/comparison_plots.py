"""The comparison's plots, in the style of the studies behind numapore: time against threads per
strategy, CPU utilisation and core-hours against threads, and bars per raw-signal I/O mode.

What is noise is marked as such on the plots themselves: each series has a colour and a marker
of its own, each point is the median over repeats with the repeats' range (min-max) as its error
bar, a point whose time does not differ from its reference (strategy none, or I/O mode fast5)
beyond the repeats' spread, or that ran the same command as strategy none on this host, has a
hollow marker, and a point with a cell too short to measure is faded (time axes: under a grey
band up to MIN_MEASURABLE_S). What each plot shows, series by series and point by point, is
written beside the plots (plots.data.json), read back from the drawn figure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from numapore.base.atomic import atomic_output  # noqa: E402
from numapore.compare.cells import Cell  # noqa: E402
from numapore.compare.measure import MIN_MEASURABLE_S  # noqa: E402
from numapore.compare.recommend import MIN_EFFECT, difference  # noqa: E402
from numapore.compare.summary import BASELINE, config_of  # noqa: E402
from numapore.execution.hosts import IO_MODES  # noqa: E402
from numapore.report.comparison import storage_description  # noqa: E402

STEP_TITLES = {"alignment": "Alignment", "methylation": "Methylation calling (nanopolish)"}
# A series' colour and marker (series_style): twelve of each, as many as the most series a panel
# can have (3 aligners or I/O modes x 4 strategies), so that there each series differs from every
# other in both. Colours: matplotlib's tab10 and two dark ones; markers: filled shapes.
SERIES_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#393b79",
)  # fmt: skip
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "*")
# How the marks look: a hollow marker (white face) for no difference, faded for too short.
HOLLOW_FACE = "white"
FADED_ALPHA = 0.35
SHORT_BAND = "0.88"  # the grey of the too-short band on time axes
# Verdicts (recommend.difference) that mean no difference from the reference.
NO_DIFFERENCE = ("identical", "within spread", "too short")


def series_style(index: int) -> tuple[str, str]:
    """The colour and marker of a panel's index-th series: colour and marker `index` of
    SERIES_COLOURS and SERIES_MARKERS for the first twelve (each its own colour and its own
    marker); past them, the marker shifts by one per round of colours, so that no two of up to
    144 series share both."""
    colours, markers = len(SERIES_COLOURS), len(SERIES_MARKERS)
    return SERIES_COLOURS[index % colours], SERIES_MARKERS[(index + index // colours) % markers]


@dataclass(frozen=True)
class Point:
    """One configuration at one thread count: its median row, its repeats' rows, how it
    compares with its reference (recommend.difference) and whether a cell was too short."""

    median: Mapping[str, Any]
    runs: tuple[Mapping[str, Any], ...]
    verdict: str

    @property
    def threads(self) -> int:
        """The point's thread count."""
        return self.median["threads"]

    @property
    def too_short(self) -> bool:
        """Whether a repeat ran for less than MIN_MEASURABLE_S (not measurable)."""
        return any(r["too_short"] for r in self.runs)

    @property
    def hollow(self) -> bool:
        """Whether the point shows no difference from its reference (a hollow marker)."""
        return self.verdict in NO_DIFFERENCE

    def spread(self, column: str) -> tuple[float, float, float]:
        """The median, minimum and maximum of a column over the repeats."""
        values = [r[column] for r in self.runs]
        return self.median[column], min(values), max(values)


def series(rows: Sequence[Mapping[str, Any]], step: str) -> dict[str, list[Point]]:
    """A step's points grouped by what is compared (aligner x strategy, I/O x strategy), each
    sorted by threads; the series in label order."""
    groups: dict[str, list[Point]] = {}
    for m in rows:
        if m["repeat"] == "median" and m["step"] == step:
            runs = tuple(
                r for r in rows if r["repeat"] != "median" and config_of(r) == config_of(m)
            )
            label = Cell(m["step"], m["aligner"], m["strategy"], m["io_mode"], 1, 1).label
            groups.setdefault(label, []).append(Point(m, runs, difference(rows, config_of(m))))
    return {k: sorted(v, key=lambda p: p.threads) for k, v in sorted(groups.items())}


def legend_label(label: str, points: Sequence[Point]) -> str:
    """A series' legend entry: its label, and `= none on this host` when every point of it ran
    the same command as strategy none."""
    if points and all(p.verdict == "identical" for p in points):
        return f"{label} (= {BASELINE['strategy']} on this host)"
    return label


def steps_in(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The steps present in the summary, in pipeline order."""
    return [s for s in STEP_TITLES if any(r["step"] == s for r in rows)]


def repeats_in(rows: Sequence[Mapping[str, Any]]) -> int:
    """How many repeats each cell ran (the most of any configuration)."""
    counts: dict[tuple, int] = {}
    for r in rows:
        if r["repeat"] != "median":
            counts[config_of(r)] = counts.get(config_of(r), 0) + 1
    return max(counts.values(), default=0)


def order_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """The run order in words: shuffled with its seed."""
    seeds = sorted({str(r["seed"]) for r in rows if r["repeat"] != "median"})
    return f"cells run in a shuffled order (compare.seed {', '.join(seeds)})"


def draw_point(ax, x: float, y: float, colour: str, marker: str, point: Point, gid: str):
    """A point's marker: filled, or hollow (no difference); faded when too short."""
    (artist,) = ax.plot(
        [x], [y], linestyle="none", marker=marker, markersize=7, color=colour,
        markerfacecolor=HOLLOW_FACE if point.hollow else colour, markeredgewidth=1.5,
        alpha=FADED_ALPHA if point.too_short else 1.0, zorder=3, gid=gid,
    )  # fmt: skip
    return artist


def error_bars(points: Sequence[Point], column: str) -> list[list[float]] | None:
    """The error bars of a series' points (matplotlib's yerr: below and above the median): the
    repeats' range; None (no bars) when every point ran once."""
    if all(len(p.runs) < 2 for p in points):
        return None
    spreads = [p.spread(column) for p in points]
    return [[m - low for m, low, _ in spreads], [high - m for m, _, high in spreads]]


def plot_series(ax, groups: Mapping[str, Sequence[Point]], column: str) -> list[dict[str, Any]]:
    """One line per series: the column's median against threads, the repeats' range as error
    bars, each point's marker marked (draw_point); the series side by side around each thread
    count. Returns what was drawn, read back from the artists (drawn_series)."""
    threads = sorted({p.threads for g in groups.values() for p in g})
    gap = min((b - a for a, b in zip(threads, threads[1:], strict=False)), default=1)
    width = 0.3 * gap  # the series of one thread count spread over this much of the axis
    drawn = []
    for i, (label, points) in enumerate(groups.items()):
        colour, marker = series_style(i)
        dodge = (i - (len(groups) - 1) / 2) * width / max(len(groups) - 1, 1)
        xs = [p.threads + dodge for p in points]
        mid = [p.spread(column)[0] for p in points]
        identical = all(p.verdict == "identical" for p in points)
        bars = ax.errorbar(
            xs, mid, yerr=error_bars(points, column), color=colour,
            linestyle=":" if identical else "-", linewidth=1.2, capsize=3, elinewidth=1,
            zorder=2, gid=f"series {label}",
        )  # fmt: skip
        markers = [
            draw_point(ax, x, y, colour, marker, p, f"point {label}")
            for x, y, p in zip(xs, mid, points, strict=True)
        ]
        drawn.append(drawn_series(label, legend_label(label, points), bars, markers, points))
    ax.set_xticks(threads)
    ax.set_xlabel("threads")
    ax.grid(alpha=0.3)
    return drawn


def drawn_series(label: str, legend: str, bars, markers, points: Sequence[Point]) -> dict:
    """What a series looks like on the plot, read from its artists: colour, marker, line style,
    and per point the median, the error bar's ends, the fill and fading of its marker, and the
    verdict and too-short flag it was drawn from."""
    line = bars.lines[0]
    segments = bars.lines[2][0].get_segments() if bars.lines[2] else []
    return {
        "label": label,
        "legend": legend,
        "colour": matplotlib.colors.to_hex(line.get_color()),
        "marker": markers[0].get_marker(),
        "linestyle": line.get_linestyle(),
        "points": [
            {
                "threads": p.threads,
                "median": float(m.get_ydata()[0]),
                "error_bar": [float(seg[0][1]), float(seg[1][1])] if seg is not None else None,
                "hollow": matplotlib.colors.to_hex(m.get_markerfacecolor())
                == matplotlib.colors.to_hex(HOLLOW_FACE),
                "faded": m.get_alpha() < 1,
                "verdict": p.verdict,
                "too_short": p.too_short,
            }
            for p, m, seg in zip(points, markers, segments or [None] * len(points), strict=True)
        ],
    }


def short_band(ax, top: float) -> None:
    """The grey band of times too short to measure (0 to MIN_MEASURABLE_S) on a time axis whose
    upper limit is top, labelled; the axis starts at 0."""
    ax.set_ylim(0, top)
    ax.axhspan(0, MIN_MEASURABLE_S, color=SHORT_BAND, zorder=0, linewidth=0)
    ax.text(
        0.5, min(MIN_MEASURABLE_S, top) * 0.97, f"too short to measure (< {MIN_MEASURABLE_S:g} s)",
        transform=ax.get_yaxis_transform(), va="top", ha="center", fontsize="small", color="0.35",
    )  # fmt: skip


def all_short_note(ax, groups: Mapping[str, Sequence[Point]]) -> None:
    """Across a panel whose every point has a cell too short to measure, say so."""
    points = [p for g in groups.values() for p in g]
    if points and all(p.too_short for p in points):
        ax.text(
            0.5, 0.5, f"every cell ran < {MIN_MEASURABLE_S:g} s:\ntoo short to measure",
            transform=ax.transAxes, ha="center", va="center", fontsize="large", color="0.3",
            bbox={"facecolor": "white", "edgecolor": "0.6", "alpha": 0.85},
        )  # fmt: skip


def series_legend(ax, drawn: Sequence[Mapping[str, Any]], title: str) -> None:
    """The series' legend beside a panel: colour, marker and line style of each series."""
    handles = [
        Line2D([], [], color=d["colour"], marker=d["marker"], linestyle=d["linestyle"])
        for d in drawn
    ]
    ax.legend(
        handles, [d["legend"] for d in drawn], title=title, fontsize="small",
        loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
    )  # fmt: skip


def marks_legend(fig, repeats: int) -> None:
    """The legend of the marks, at the foot of a figure."""
    grey = "0.3"
    handles = [
        Line2D([], [], color=grey, marker="o", linestyle="none"),
        Line2D([], [], color=grey, marker="o", markerfacecolor=HOLLOW_FACE, linestyle="none"),
        Line2D([], [], color=grey, marker="o", alpha=FADED_ALPHA, linestyle="none"),
        Line2D([], [], color=grey, linestyle=":"),
    ]
    labels = [
        f"filled: differs from strategy {BASELINE['strategy']} (or I/O {BASELINE['io_mode']}) "
        "beyond the repeats' spread",
        f"hollow: no difference (within the repeats' spread or < {MIN_EFFECT:.0%}, or too short)",
        f"faded: a cell ran < {MIN_MEASURABLE_S:g} s, too short to measure",
        f"dotted: the same command as strategy {BASELINE['strategy']} on this host (one NUMA "
        "node)",
    ]
    if repeats > 1:
        handles.append(Line2D([], [], color=grey, marker="|", markersize=12, linestyle="none"))
        labels.append(f"error bar: min-max of {repeats} repeats (point: median)")
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize="small", frameon=False)


def finish(fig, title: str, rows: Sequence[Mapping[str, Any]], rows_of_legend: int = 3) -> None:
    """A figure's title (with the run order) and marks legend, laid out to leave them room."""
    fig.suptitle(f"{title}\n{order_note(rows)}; {storage_description(rows)}", fontsize="medium")
    marks_legend(fig, repeats_in(rows))
    height = fig.get_figheight()
    fig.tight_layout(rect=(0, rows_of_legend * 0.25 / height, 1, 1))


def time_vs_threads(rows: Sequence[Mapping[str, Any]], output: Path) -> list[dict]:
    """Median execution time against threads, one panel per step (rows); returns the panels
    drawn (plot_series)."""
    steps = steps_in(rows)
    fig, axes = plt.subplots(len(steps), 1, figsize=(10, 4.2 * len(steps) + 1.2), squeeze=False)
    panels = []
    for ax, step in zip(axes[:, 0], steps, strict=True):
        groups = series(rows, step)
        drawn = plot_series(ax, groups, "wall_s")
        top = max(max(p.spread("wall_s")[2] for p in g) for g in groups.values())
        short_band(ax, top * 1.15)
        all_short_note(ax, groups)
        ax.set_ylabel("wall time (s)")
        ax.set_title(STEP_TITLES[step])
        series_legend(ax, drawn, "aligner strategy" if step == "alignment" else "I/O strategy")
        panels.append(
            {"figure": "time_vs_threads", "step": step, "column": "wall_s", "series": drawn}
        )
    finish(fig, "Execution time vs threads (median over repeats)", rows)
    save(fig, output)
    return panels


def utilisation_core_hours(rows: Sequence[Mapping[str, Any]], output: Path) -> list[dict]:
    """CPU utilisation (left) and core-hours (right) against threads, one row per step;
    returns the panels drawn."""
    steps = steps_in(rows)
    fig, axes = plt.subplots(len(steps), 2, figsize=(14, 4.2 * len(steps) + 1.2), squeeze=False)
    panels = []
    for row_axes, step in zip(axes, steps, strict=True):
        groups = series(rows, step)
        for ax, column, ylabel, what in (
            (row_axes[0], "cpu_utilisation", "CPU s / (wall s x threads)", "CPU utilisation"),
            (row_axes[1], "core_hours", "threads x wall h", "core-hours"),
        ):
            drawn = plot_series(ax, groups, column)
            all_short_note(ax, groups)
            ax.set_ylabel(ylabel)
            ax.set_title(f"{STEP_TITLES[step]}: {what}")
            panels.append(
                {
                    "figure": "utilisation_core_hours",
                    "step": step,
                    "column": column,
                    "series": drawn,
                }
            )
        row_axes[0].set_ylim(0, 1.05)
        series_legend(
            row_axes[1], drawn, "aligner strategy" if step == "alignment" else "I/O strategy"
        )
    finish(fig, "CPU utilisation and core-hours vs threads (median over repeats)", rows)
    save(fig, output)
    return panels


def io_modes(rows: Sequence[Mapping[str, Any]], output: Path) -> list[dict]:
    """Methylation time per I/O mode with strategy none (bars per thread count: the median, its
    series' colour, and its marker at the top with the repeats' range), marked as the lines
    are; returns the panel drawn."""
    fig, ax = plt.subplots(figsize=(10, 5.4))
    groups = series(rows, "methylation")
    strategy = BASELINE["strategy"]
    if not any(k.endswith(f" {strategy}") for k in groups):
        strategy = next((k.split()[1] for k in groups), strategy)
    modes = sorted(
        (k for k in groups if k.split()[1] == strategy), key=lambda k: IO_MODES.index(k.split()[0])
    )
    drawn = []
    if not modes:
        ax.text(0.5, 0.5, "no methylation cells in the comparison", ha="center", va="center")
        ax.set_axis_off()
    else:
        threads = sorted({p.threads for k in modes for p in groups[k]})
        width = 0.8 / len(modes)
        styles = {k: series_style(list(groups).index(k)) for k in modes}
        for i, mode in enumerate(modes):
            colour, marker = styles[mode]
            points = groups[mode]
            xs = [threads.index(p.threads) + (i - (len(modes) - 1) / 2) * width for p in points]
            mid = [p.spread("wall_s")[0] for p in points]
            ax.bar(xs, mid, width * 0.9, color=colour, alpha=0.45, zorder=1, gid=f"bar {mode}")
            bars = ax.errorbar(
                xs, mid, yerr=error_bars(points, "wall_s"), color=colour, linestyle="none",
                capsize=4, elinewidth=1.2, zorder=2, gid=f"series {mode}",
            )  # fmt: skip
            markers = [
                draw_point(ax, x, y, colour, marker, p, f"point {mode}")
                for x, y, p in zip(xs, mid, points, strict=True)
            ]
            drawn.append(drawn_series(mode, mode.split()[0], bars, markers, points))
        top = max(max(p.spread("wall_s")[2] for p in groups[k]) for k in modes)
        short_band(ax, top * 1.15)
        ax.set_xticks(range(len(threads)), [str(t) for t in threads])
        ax.set_xlabel("threads")
        ax.set_ylabel("methylation calling wall time (s)")
        ax.grid(axis="y", alpha=0.3)
        ax.set_title(f"I/O modes, strategy {strategy} (marks: against I/O {BASELINE['io_mode']})")
        series_legend(ax, drawn, "I/O mode")
    finish(fig, "Methylation calling time per raw-signal I/O mode (median over repeats)", rows)
    save(fig, output)
    return [{"figure": "io_modes", "step": "methylation", "column": "wall_s", "series": drawn}]


def save(fig, output: Path) -> None:
    """Write a figure as PNG under a temporary name, renamed into place when complete."""
    with atomic_output(output) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def write_plots_data(panels: Sequence[Mapping[str, Any]], output: Path) -> None:
    """Write what the plots show (their panels, series and points as drawn) as JSON."""
    with atomic_output(output) as tmp:
        tmp.write_text(json.dumps({"panels": list(panels)}, indent=1) + "\n")
