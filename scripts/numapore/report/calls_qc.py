"""The report's QC of the calls (numapore.modbam.qc's tables) and its MultiQC section.

The figure: per canonical base, each code's histogram of the calls' probabilities (the most
likely state's, bins of 1/256 as `sample-probs --hist` writes them; '-' canonical), the
pileup's threshold drawn, each code's pass fraction in the legend. The table: the pass table,
the percentiles and the summary. MultiQC: a table per sample (pass fraction per code, the
threshold, reads sampled) and the histograms as a line plot.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from numapore.base.atomic import atomic_output  # noqa: E402
from numapore.report.comparison_plots import save  # noqa: E402
from numapore.report.figures import code_name, write_mqc_tsv  # noqa: E402
from numapore.report.provenance import write_html, write_json  # noqa: E402

SOURCES = {
    "estimated": "estimated by the pileup",
    "given": "given",
    "none": "no filtering",
}
MQC_PLOT = {
    "id": "numapore_calls_qc_probabilities",
    "section_name": "numapore: call probabilities",
    "description": "Per sample and code: the sampled calls' probabilities (the most likely "
    "state's), the fraction of the code's calls per bin of 1/256 (modkit's sample-probs "
    "--hist).",
    "plot_type": "linegraph",
    "pconfig": {
        "id": "numapore_calls_qc_probabilities_plot",
        "title": "numapore: call probabilities",
        "xlab": "probability of the most likely state",
        "ylab": "fraction of the code's calls",
    },
}


def read_tsv(path: str | Path) -> list[dict[str, str]]:
    """A tab-separated table's rows by column (comment lines skipped)."""
    lines = [x for x in Path(path).read_text().splitlines() if x and not x.startswith("#")]
    if not lines:
        return []
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:]]


def histograms(path: str | Path) -> dict[tuple[str, str], dict[str, list[float]]]:
    """probabilities.tsv per (base, code): bin starts, counts and fractions."""
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for row in read_tsv(path):
        entry = out.setdefault((row["primary_base"], row["code"]), {"start": [], "count": [],
                                                                      "frac": []})  # fmt: skip
        entry["start"].append(float(row["range_start"]))
        entry["count"].append(int(row["count"]))
        entry["frac"].append(float(row["frac"]))
    return out


def label(base: str, code: str) -> str:
    """A code as the figure names it: 5mC, or 'canonical C'."""
    return f"canonical {base}" if code == "-" else code_name(code)


def calls_qc_report(
    files: Mapping[str, str], name: str, png: Path, table: Path, data: Path
) -> dict[str, Any]:
    """The figure, its numbers and the HTML table of one QC of the calls (files: 'passing',
    'histogram', 'thresholds', 'summary'); the numbers."""
    rows = read_tsv(files["passing"])
    hists = histograms(files["histogram"])
    bases = sorted({r["base"] for r in rows})
    numbers = {
        "pass": rows,
        "histograms": {f"{b} {c}": v for (b, c), v in hists.items()},
        "thresholds": {r["base"]: float(r["threshold"]) for r in rows},
    }
    fig, axes = plt.subplots(1, max(len(bases), 1), figsize=(6.5 * max(len(bases), 1), 4.5))
    axes = [axes] if not hasattr(axes, "__len__") else list(axes)
    for ax, base in zip(axes, bases, strict=False):
        for row in (r for r in rows if r["base"] == base):
            hist = hists.get((base, row["code"]), {"start": [], "count": []})
            share = float(row["pass_fraction"]) * 100
            ax.step(
                hist["start"], hist["count"], where="post", lw=1,
                label=f"{label(base, row['code'])}: {share:.1f}% of {row['all_calls']} pass",
            )  # fmt: skip
        threshold = numbers["thresholds"][base]
        ax.axvline(threshold, color="k", ls="--", lw=1, label=f"threshold {threshold:.4g}")
        source = SOURCES.get(rows[0]["threshold_source"], rows[0]["threshold_source"])
        setting = f": {rows[0]['threshold_setting']}" if rows[0].get("threshold_setting") else ""
        ax.set_title(
            f"{base}: pileup's threshold {threshold:.4g} ({source}{setting})", fontsize="medium"
        )
        ax.set_xlabel("probability of the most likely state (bins of 1/256)")
        ax.set_ylabel("sampled calls")
        ax.set_yscale("log")  # bins listed are non-empty
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    if not bases:
        axes[0].text(0.5, 0.5, "no base modification calls", ha="center", va="center")
    reads = rows[0]["reads_sampled"] if rows else "0"
    fig.suptitle(f"{name}: QC of the calls ({reads} reads sampled)")
    fig.tight_layout()
    save(fig, png)
    write_json(numbers, data)
    columns = list(rows[0]) if rows else []
    body = "<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>"
    body += "".join(
        "<tr>" + "".join(f"<td>{html.escape(r[c])}</td>" for c in columns) + "</tr>" for r in rows
    )
    body += "</table>"
    for title, key in (("Percentiles (sample-probs)", "thresholds"), ("Summary", "summary")):
        text = Path(files[key]).read_text()
        body += f"<h3>{title}</h3><pre>{html.escape(text)}</pre>"
    write_html(f"{name}: QC of the calls", body, table)
    return numbers


def mqc_row(rows: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """One sample's MultiQC table row: reads sampled, threshold per base, pass % per code."""
    out: dict[str, Any] = {"reads sampled": int(rows[0]["reads_sampled"]) if rows else 0}
    for r in rows:
        out[f"{r['base']} threshold"] = float(r["threshold"])
    for r in rows:
        out[f"{label(r['base'], r['code'])} pass %"] = round(float(r["pass_fraction"]) * 100, 2)
    return out


def multiqc_calls_qc(runs: Mapping[str, Sequence[str]], table_out: Path, plot_out: Path) -> None:
    """numapore's MultiQC QC section over every QC (runs: MultiQC sample name -> its
    pass.tsv and probabilities.tsv): the table and the histograms' line plot."""
    write_mqc_tsv("calls_qc", {n: mqc_row(read_tsv(f[0])) for n, f in runs.items()}, table_out)
    lines: dict[str, dict[float, float]] = {}
    for name, files in runs.items():
        for (base, code), hist in histograms(files[1]).items():
            points = dict(zip(hist["start"], hist["frac"], strict=True))
            lines[f"{name} {label(base, code)}"] = points
    with atomic_output(plot_out) as tmp:
        tmp.write_text(json.dumps({**MQC_PLOT, "data": lines}, indent=1) + "\n")
