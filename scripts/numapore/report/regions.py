"""The report's page of a region set (config regions:): its two tables (numapore stats' and
numapore entropy's values per sample, haplotype and group) and a figure of them: per region, the
percent modified of each code (top) and the mean entropy (bottom) of every sample, haplotype and
group. The numbers drawn are written beside it (.data.json)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from numapore.report.comparison_plots import save  # noqa: E402
from numapore.report.provenance import write_html, write_json  # noqa: E402

MARKERS = {"sample": "o", "haplotype": "^", "group": "s"}
DRAWN = 40  # regions drawn (the set's first); the tables have them all
LISTED = 2000  # rows of each table on the page
LINES = {"sample": "-", "haplotype": ":", "group": "--"}


def read_tsv(path: str | Path) -> tuple[list[str], list[list[str]]]:
    """A region table's header and rows."""
    lines = Path(path).read_text().splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:] if line]


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], path: str) -> str:
    """An HTML table of a region table's first LISTED rows (an empty one says so)."""
    if not rows:
        return "<p>No row (the run's log of this table says why).</p>"
    note = ""
    if len(rows) > LISTED:
        note = f"<p>The first {LISTED} of {len(rows)} rows; all in {html.escape(str(path))}.</p>"
        rows = rows[:LISTED]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"{note}<table><tr>{head}</tr>{body}</table>"


def region_label(row: Sequence[str], name_column: int) -> str:
    """A region's label: its name, or chrom:start-end for an unnamed one."""
    name = row[name_column]
    return name if name not in (".", "") else f"{row[2]}:{row[3]}-{row[4]}"


def series(header, rows, value: str, name_column: int) -> dict[str, dict[str, float]]:
    """Per 'level of' the column's value per region label (entropy: its first strand's)."""
    column = header.index(value)
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        label = region_label(row, name_column)
        if row[column] not in ("", "nan"):
            out.setdefault(f"{row[0]} {row[1]}", {}).setdefault(label, float(row[column]))
    return out


def regions_report(name: str, stats: str, entropy: str, png: Path, page: Path, data: Path):
    """The set's figure, page and figure data."""
    stats_header, stats_rows = read_tsv(stats)
    entropy_header, entropy_rows = read_tsv(entropy)
    percents = [c for c in stats_header if c.startswith("percent_")]
    panels = {c: series(stats_header, stats_rows, c, stats_header.index("name")) for c in percents}
    panels["mean_entropy"] = series(
        entropy_header, entropy_rows, "mean_entropy", entropy_header.index("region_name")
    )
    every = list(dict.fromkeys(region_label(r, 5) for r in stats_rows))
    labels = every[:DRAWN]
    size = (max(6, 0.5 * len(labels) + 3), 3 * len(panels))
    fig, axes = plt.subplots(len(panels), 1, figsize=size, squeeze=False)
    for ax, (column, by) in zip(axes[:, 0], panels.items(), strict=True):
        for who, values in by.items():
            xs = [i for i, label in enumerate(labels) if label in values]
            ys = [values[labels[i]] for i in xs]
            level = who.split()[0]
            ax.plot(xs, ys, marker=MARKERS[level], linestyle=LINES[level], alpha=0.7, label=who)
        ax.set_ylabel(column)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
    shown = f" (the first {DRAWN} of {len(every)} regions)" if len(every) > DRAWN else ""
    axes[0, 0].set_title(f"region set {name}{shown}")
    axes[0, 0].legend(fontsize=6, ncol=2, loc="best")
    fig.tight_layout()
    save(fig, png)
    drawn = {c: {w: {r: v for r, v in by.items() if r in labels} for w, by in p.items()}
             for c, p in panels.items()}  # fmt: skip
    write_json({"regions": labels, "panels": drawn}, data)
    body = (
        f"<h3>numapore stats (modkit stats) over {html.escape(name)}</h3>"
        + html_table(stats_header, stats_rows, stats)
        + f"<h3>numapore entropy (modkit entropy --regions) over {html.escape(name)}</h3>"
        + html_table(entropy_header, entropy_rows, entropy)
    )
    write_html(f"Region set {name}", body, page)
