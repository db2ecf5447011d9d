"""The report's DMR figure and table of a contrast (config dmr:), and MultiQC's line per
contrast.

The figure: on top, every tested site's difference (side A - side B, DSS's diff) against its
position, the DMRs shaded; below, the top DMRs (by |areaStat|, config dmr.top, at most 6 drawn)
each with every sample's (or haplotype's) per-site fraction modified from its bedMethyl, side A
in one colour and side B in another. The numbers drawn are written beside it (.data.json).
"""

from __future__ import annotations

import gzip
import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from numapore.methylation.bedmethyl import fetch_rows  # noqa: E402
from numapore.report.comparison_plots import save  # noqa: E402
from numapore.report.figures import write_mqc_tsv  # noqa: E402
from numapore.report.provenance import write_html, write_json  # noqa: E402

DRAWN = 6  # top DMRs drawn below the overview (the table lists dmr.top)
FLANK = 0.5  # drawn around a DMR: this share of its length on each side
COLOURS = ("tab:red", "tab:blue")


def read_table(path: str | os.PathLike) -> tuple[list[str], list[list[str]]]:
    """A merged DMR output (bgzipped, '#' header): its column names and rows."""
    with gzip.open(path, "rt") as handle:
        header = handle.readline().lstrip("#").rstrip("\n").split("\t")
        rows = [line.rstrip("\n").split("\t") for line in handle if line.strip()]
    return header, rows


def top_dmrs(rows: Sequence[Sequence[str]], n: int) -> list[Sequence[str]]:
    """The n DMRs of largest |areaStat| (the last column), as DSS orders them."""
    return sorted(rows, key=lambda r: -abs(float(r[-1])))[:n]


def site_fractions(bedmethyl: str, code: str, chrom: str, start: int, end: int):
    """(positions, fractions modified) of a bedMethyl's sites of a code in a region."""
    positions, fractions = [], []
    for row in fetch_rows(bedmethyl, chrom, start, end):
        if row.name == code and row.valid_cov > 0:
            positions.append(row.start)
            fractions.append(row.n_mod / row.valid_cov)
    return positions, fractions


def dmr_figure(
    contrast,
    dmrs_path: str,
    sites_path: str,
    code: str,
    top: int,
    png: Path,
    table: Path,
    data: Path,
) -> None:
    """A contrast's figure (module docstring), its top-DMR table (HTML) and the data drawn."""
    dmr_columns, dmrs = read_table(dmrs_path)
    _, sites = read_table(sites_path)
    best = top_dmrs(dmrs, top)
    drawn = best[:DRAWN]
    rows = 1 + (len(drawn) + 2) // 3
    fig = plt.figure(figsize=(12, 3 + 2.6 * (rows - 1)))
    grid = fig.add_gridspec(rows, 3)
    ax = fig.add_subplot(grid[0, :])
    contigs = list(dict.fromkeys(r[0] for r in sites))
    offsets, total = {}, 0
    for contig in contigs:  # contigs side by side, in reference order
        offsets[contig] = total
        total += max(int(r[2]) for r in sites if r[0] == contig)
    x = [offsets[r[0]] + int(r[1]) for r in sites]
    diff = [float(r[5]) for r in sites]
    ax.scatter(x, diff, s=2, color="grey", alpha=0.5, linewidths=0)
    for r in dmrs:
        ax.axvspan(
            offsets.get(r[0], 0) + int(r[1]),
            offsets.get(r[0], 0) + int(r[2]),
            color="tab:orange",
            alpha=0.3,
            linewidth=0,
        )
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel(
        "position"
        + (" (contigs side by side)" if len(contigs) > 1 else f" ({contigs[0]})" if contigs else "")
    )
    ax.set_ylabel(f"difference\n{contrast.label1} - {contrast.label2}")
    ax.set_title(f"{contrast.name}: {len(dmrs)} DMRs (shaded) over {len(sites)} tested sites")
    panels: list[dict[str, Any]] = []
    for i, r in enumerate(drawn):
        sub = fig.add_subplot(grid[1 + i // 3, i % 3])
        chrom, start, end = r[0], int(r[1]), int(r[2])
        flank = int((end - start) * FLANK) + 50
        panel = {"region": f"{chrom}:{start}-{end}", "areaStat": float(r[-1]), "samples": {}}
        for side, columns in enumerate((contrast.group1, contrast.group2)):
            for column in columns:
                pos, frac = site_fractions(
                    contrast.sources[column], code, chrom, start - flank, end + flank
                )
                sub.plot(
                    pos,
                    frac,
                    "o-",
                    markersize=2,
                    linewidth=0.6,
                    color=COLOURS[side],
                    alpha=0.7,
                    label=contrast.label1 if side == 0 else contrast.label2,
                )
                panel["samples"][column] = {"positions": pos, "fractions": frac}
        sub.axvspan(start, end, color="tab:orange", alpha=0.2, linewidth=0)
        sub.set_ylim(-0.05, 1.05)
        sub.set_title(
            f"#{i + 1} {chrom.split('|')[-2] if '|' in chrom else chrom}:{start}-{end}", fontsize=8
        )
        sub.tick_params(labelsize=7)
        handles, labels = sub.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        sub.legend(unique.values(), unique.keys(), fontsize=6)
        panels.append(panel)
    fig.tight_layout()
    save(fig, png)
    body = "<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in dmr_columns) + "</tr>"
    body += "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in best
    )
    body += "</table>"
    write_html(f"{contrast.name}: top {len(best)} of {len(dmrs)} DMRs by |areaStat|", body, table)
    write_json(
        {
            "contrast": contrast.name,
            "dmrs": len(dmrs),
            "sites": len(sites),
            "top": [dict(zip(dmr_columns, r, strict=True)) for r in best],
            "drawn": panels,
        },
        data,
    )


def dmr_summary(dmrs_path: str) -> dict[str, int]:
    """A contrast's MultiQC line: DMRs found and the CpGs in them."""
    _, rows = read_table(dmrs_path)
    return {"DMRs": len(rows), "CpGs in DMRs": sum(int(r[3]) for r in rows)}


def multiqc_dmr(contrasts: Sequence[str], dmrs: Sequence[str], output: Path) -> None:
    """numapore's MultiQC custom content of the DMRs: one line per contrast."""
    rows: Mapping[str, Mapping[str, Any]] = {
        name: dmr_summary(path) for name, path in zip(contrasts, dmrs, strict=True)
    }
    write_mqc_tsv("dmr", rows, output)
