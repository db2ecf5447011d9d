"""The run report's figures and tables, per sample and aligner: alignment QC, methylation overview,
read accounting, accuracy (simulated samples); and MultiQC custom content. The provenance page,
which draws nothing, is numapore.report.provenance.

Every figure is written with the numbers it shows beside it (<figure>.data.json), so that what a
person sees can be checked against the workflow's TSV outputs.

Why one ~500-line module: every figure shares the readers of the workflow's tables, the figure
style and the figure + data.json writer; split by figure it would be five modules importing the
same helpers, and a new figure is one function here.
"""

from __future__ import annotations

import html
import os
from array import array
from collections.abc import Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import pysam

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from numapore.methylation.bedmethyl import pandas_frame  # noqa: E402
from numapore.base.atomic import atomic_output  # noqa: E402
from numapore.report.comparison_plots import save  # noqa: E402
from numapore.report.provenance import write_html, write_json  # noqa: E402

if TYPE_CHECKING:
    import pandas as pd

# pandas, polars (the accounting module) and the accuracy module are imported by the functions
# that use them: every report job is a process of its own, and the alignment QC job needs
# none of them (about a second of CPU a job).

BINS = 200  # bins along the reference (coverage, methylation)


def samtools_stats(path: str | os.PathLike) -> dict[str, Any]:
    """The summary numbers (SN) and read-length histogram (RL) of a `samtools stats` file."""
    summary: dict[str, float] = {}
    lengths: dict[int, int] = {}
    for line in Path(path).read_text().splitlines():
        fields = line.split("\t")
        if fields[0] == "SN":
            summary[fields[1].rstrip(":")] = float(fields[2])
        elif fields[0] == "RL":
            lengths[int(fields[1])] = int(fields[2])
    return {"summary": summary, "read_lengths": lengths}


def primary_alignment_metrics(bam: str | os.PathLike) -> dict[str, Any]:
    """Per primary alignment: identity (1 - NM / aligned columns); per contig: the aligned bases
    per position bin over the covered span (mean depth along the reference)."""
    identities: list[float] = []
    # Each contig's aligned blocks as start, end pairs in one flat array (8 bytes a number: a
    # list of tuples took about 8 times the memory).
    blocks: dict[str, array] = {}
    with pysam.AlignmentFile(str(bam)) as handle:
        for r in handle.fetch(until_eof=True):
            if r.is_unmapped or r.is_secondary or r.is_supplementary:
                continue
            ops = r.get_cigar_stats()[0]  # M, I, D, N, S, H, P, =, X
            columns = ops[0] + ops[1] + ops[2] + ops[7] + ops[8]
            identities.append(1 - r.get_tag("NM") / columns if columns else 0.0)
            flat = blocks.setdefault(r.reference_name, array("q"))
            flat.extend(chain.from_iterable(r.get_blocks()))
    coverage = {}
    for contig, flat in blocks.items():
        spans = np.frombuffer(flat, dtype=np.int64).reshape(-1, 2)
        starts, ends = spans[:, 0], spans[:, 1]
        edges = np.linspace(starts.min(), ends.max(), BINS + 1)
        depth = aligned_bases_per_bin(starts, ends, edges) / np.diff(edges)
        coverage[contig] = {
            "bin_start": edges[:-1].tolist(),
            "bin_width": float(edges[1] - edges[0]),
            "depth": depth.tolist(),
        }
    return {"identity": identities, "coverage": coverage}


def aligned_bases_per_bin(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The aligned bases of the blocks [start, end) within each bin between edges. Before a
    point x the blocks hold the sum of clip(x - start, 0, end - start): the sums over the
    starts and over the ends below x (sorted once, not a pass over every block per bin), in
    integers up to x's whole part, so that no rounding grows with the blocks' count."""
    starts, ends = np.sort(starts), np.sort(ends)
    start_sums = np.concatenate(([0], np.cumsum(starts)))
    end_sums = np.concatenate(([0], np.cumsum(ends)))
    begun = np.searchsorted(starts, edges, side="left")  # blocks starting before x
    ended = np.searchsorted(ends, edges, side="left")  # blocks ending before x
    whole = np.floor(edges).astype(np.int64)
    exact = (begun * whole - start_sums[begun]) - (ended * whole - end_sums[ended])
    fraction = (begun - ended) * (edges - whole)  # the blocks open at x, over x's fraction
    return np.diff(exact) + np.diff(fraction)


def histogram(values: Sequence[float], bins: int | Sequence[float]) -> dict[str, list]:
    """Counts of values per bin, with the bin edges (numpy.histogram)."""
    counts, edges = np.histogram(np.asarray(values, dtype=float), bins=bins)
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def bar_histogram(ax, hist: Mapping[str, list], xlabel: str, title: str) -> None:
    """Draw a histogram from its edges and counts."""
    edges = hist["edges"]
    ax.stairs(hist["counts"], edges, fill=True, alpha=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    ax.set_title(title)
    ax.grid(alpha=0.3)


def alignment_qc(
    stats: str | os.PathLike, bam: str | os.PathLike, name: str, png: Path, data: Path
) -> None:
    """Alignment QC figure: reads mapped/unmapped, read lengths, identity, depth along the
    reference."""
    st = samtools_stats(stats)
    metrics = primary_alignment_metrics(bam)
    sn = st["summary"]
    lengths = st["read_lengths"]
    numbers = {
        "reads": int(sn["raw total sequences"]),
        "mapped": int(sn["reads mapped"]),
        "unmapped": int(sn["reads unmapped"]),
        "error_rate": sn["error rate"],
        "read_length": {"length": list(lengths), "reads": list(lengths.values())},
        "identity": histogram(metrics["identity"], np.linspace(0.5, 1.0, 51)),
        "primary_alignments": len(metrics["identity"]),
        "coverage": metrics["coverage"],
    }
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    ax = axes[0][0]
    ax.bar(["mapped", "unmapped"], [numbers["mapped"], numbers["unmapped"]], color=["C2", "C3"])
    for i, v in enumerate([numbers["mapped"], numbers["unmapped"]]):
        ax.annotate(str(v), (i, v), ha="center", va="bottom")
    ax.set_ylabel("reads")
    ax.set_title(f"Reads: {numbers['reads']} (samtools stats)")
    ax = axes[0][1]
    length_hist = histogram(
        np.repeat(list(lengths), list(lengths.values())), min(50, max(len(lengths), 1))
    )
    bar_histogram(ax, length_hist, "read length (bases)", "Read length distribution")
    bar_histogram(
        axes[1][0],
        numbers["identity"],
        "identity (1 - NM / aligned columns)",
        f"Identity of primary alignments (error rate {numbers['error_rate']:.3f})",
    )
    ax = axes[1][1]
    for contig, cov in metrics["coverage"].items():
        ax.plot(cov["bin_start"], cov["depth"], label=contig)
    ax.set_xlabel("position on the reference (covered span)")
    ax.set_ylabel("mean depth")
    ax.set_title("Coverage over the reference")
    ax.grid(alpha=0.3)
    if len(metrics["coverage"]) > 1:
        ax.legend(fontsize="small")
    fig.suptitle(f"{name}: alignment QC")
    fig.tight_layout()
    save(fig, png)
    write_json(numbers, data)


def read_calls_table(path: str | os.PathLike) -> pd.DataFrame:
    """A nanopolish call table (columns as nanopolish writes them)."""
    import pandas as pd

    return pd.read_csv(path, sep="\t", dtype={"chromosome": str, "read_name": str})


# Modification codes as the SAM spec names them (ChEBI numbers stay numbers).
CODE_NAMES = {
    "m": "5mC", "h": "5hmC", "f": "5fC", "c": "5caC", "a": "6mA", "g": "5hmU", "e": "5fU",
    "b": "5caU", "o": "8oxoG", "n": "Xao", "C": "any C", "A": "any A",
}  # fmt: skip


def code_name(code: str) -> str:
    """A bedMethyl / MM modification code as people read it (m: 5mC)."""
    return CODE_NAMES.get(code, code)


def modbam_calls(bam: str | os.PathLike) -> dict[str, Any]:
    """The modification calls of a modBAM's primary records, from their MM/ML tags: per code
    the calls and their probabilities' ML histogram (256 bins), and the calls of each read."""
    per_code: dict[str, dict[str, Any]] = {}
    per_read: list[int] = []
    with pysam.AlignmentFile(str(bam), check_sq=False) as handle:
        for rec in handle.fetch(until_eof=True):
            ml_tag = "ML" if rec.has_tag("ML") else "Ml"  # Ml, Mm: the names before 2021
            if rec.is_secondary or rec.is_supplementary or not rec.has_tag(ml_tag):
                continue
            mm = rec.get_tag("MM") if rec.has_tag("MM") else rec.get_tag("Mm")
            ml = np.asarray(rec.get_tag(ml_tag), dtype=np.int64)
            at = 0
            for group in filter(None, mm.split(";")):
                head, *deltas = group.split(",")
                codes = head[2:].rstrip("?.")
                codes = [codes] if codes.isdigit() else list(codes)
                n = len(deltas) * len(codes)
                values = ml[at : at + n].reshape(-1, len(codes)) if n else ml[:0].reshape(0, 1)
                at += n
                for k, code in enumerate(codes):
                    entry = per_code.setdefault(code, {"calls": 0, "ml": np.zeros(256, np.int64)})
                    entry["calls"] += len(values)
                    entry["ml"] += np.bincount(values[:, k], minlength=256)[:256]
            if at:
                per_read.append(at)
    return {"codes": per_code, "per_read": np.asarray(per_read, dtype=np.int64)}


def bedmethyl_frame(path: str | os.PathLike) -> pd.DataFrame:
    """A bedMethyl file's rows (numapore.methylation.bedmethyl reads it) with the fraction
    modified of each (N_mod / N_valid_cov)."""
    rows = pandas_frame(path)
    rows["fraction"] = rows["n_mod"] / rows["valid_cov"].where(rows["valid_cov"] > 0)
    return rows


def methylation_overview(
    bedmethyl: str | os.PathLike, modbam: str | os.PathLike, name: str, png: Path, data: Path
) -> None:
    """Methylation figure of any source of calls, from the bedMethyl and the modBAM: per-site
    fraction modified per code, calls per read, the calls' probabilities per code (ML), and
    the mean fraction modified along the reference per code (5mC and 5hmC side by side)."""
    sites = bedmethyl_frame(bedmethyl)
    calls = modbam_calls(modbam)
    per_read = calls["per_read"]
    codes = sorted(set(sites["name"]) | set(calls["codes"]))
    along: dict[str, dict[str, dict[str, list]]] = {}
    for code in codes:
        for contig, rows in sites[sites["name"] == code].groupby("chrom"):
            lo, hi = int(rows["start"].min()), int(rows["start"].max()) + 1
            edges = np.linspace(lo, hi, min(BINS, len(rows)) + 1)
            which = np.clip(np.searchsorted(edges, rows["start"], "right") - 1, 0, len(edges) - 2)
            means = rows.groupby(which)["fraction"].mean()
            along.setdefault(code, {})[str(contig)] = {
                "bin_start": [float(edges[i]) for i in means.index],
                "mean_fraction": means.tolist(),
            }
    numbers = {
        "codes": codes,
        "sites": {c: int((sites["name"] == c).sum()) for c in codes},
        "calls": {c: int(calls["codes"].get(c, {}).get("calls", 0)) for c in codes},
        "reads_with_calls": int(per_read.size),
        "fraction_modified": {
            c: histogram(sites.loc[sites["name"] == c, "fraction"].dropna(), np.linspace(0, 1, 21))
            for c in codes
        },
        # A sample without calls (max of nothing) gets one empty bin.
        "calls_per_read": histogram(
            per_read, min(40, max(int(per_read.max()), 1) if per_read.size else 1)
        ),
        "probability": {
            c: calls["codes"][c]["ml"].tolist() for c in codes if c in calls["codes"]
        },  # ML byte N: probability in [N/256, (N+1)/256)
        "along_reference": along,
    }
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    width = 0.05 / max(len(codes), 1)
    for k, code in enumerate(codes):
        hist = numbers["fraction_modified"][code]
        axes[0][0].bar(
            np.asarray(hist["edges"][:-1]) + k * width, hist["counts"], width=width, align="edge",
            label=f"{code_name(code)} ({numbers['sites'][code]} sites)",
        )  # fmt: skip
        if code in numbers["probability"]:
            coarse = np.asarray(numbers["probability"][code]).reshape(32, 8).sum(axis=1)
            axes[1][0].plot(
                (np.arange(32) + 0.5) / 32, coarse, ".-", lw=0.8,
                label=f"{code_name(code)} ({numbers['calls'][code]} calls)",
            )  # fmt: skip
        for contig, series in along.get(code, {}).items():
            axes[1][1].plot(
                series["bin_start"], series["mean_fraction"], ".-", lw=0.8,
                label=f"{code_name(code)} {contig}"[:40],
            )  # fmt: skip
    axes[0][0].set_xlabel("fraction modified (N_mod / N_valid_cov)")
    axes[0][0].set_ylabel("sites")
    axes[0][0].set_title("Per-site fraction modified (bedMethyl)")
    bar_histogram(
        axes[0][1], numbers["calls_per_read"], "modification calls per read",
        f"Calls per read ({numbers['reads_with_calls']} reads)",
    )  # fmt: skip
    axes[1][0].set_xlabel("probability of the modification (ML)")
    axes[1][0].set_ylabel("calls (32 bins)")
    axes[1][0].set_title("Call probabilities (modBAM)")
    axes[1][1].set_ylim(-0.02, 1.02)
    axes[1][1].set_xlabel("position on the reference (span with calls)")
    axes[1][1].set_ylabel("mean fraction modified")
    axes[1][1].set_title("Modification along the reference")
    for ax in (axes[0][0], axes[1][0], axes[1][1]):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    fig.suptitle(f"{name}: base modifications ({', '.join(map(code_name, codes)) or 'none'})")
    fig.tight_layout()
    save(fig, png)
    write_json(numbers, data)


def read_accounting(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of an accounting TSV (stage, what, reads, detail)."""
    from numapore.report.accounting import COLUMNS as ACCOUNTING_COLUMNS

    lines = Path(path).read_text().splitlines()
    header = lines[0].split("\t")
    if tuple(header) != ACCOUNTING_COLUMNS:
        raise ValueError(f"numapore: {path}: not an accounting table (header {header})")
    return [dict(zip(header, line.split("\t"), strict=True)) for line in lines[1:] if line]


def read_fates(rows: Sequence[Mapping[str, str]]) -> dict[str, int]:
    """Where each basecalled read ended: 'with calls' or the reason it has none."""
    fates = {}
    for r in rows:
        if r["stage"] == "methylation":
            label = "with calls" if r["what"] == "reads with calls" else r["detail"]
            fates[label] = int(r["reads"])
    return fates


def row_label(row: Mapping[str, str]) -> str:
    """An accounting row's label in the plot: stage and what, with the reason where several
    rows share them (reads skipped or without calls)."""
    label = f"{row['stage']}: {row['what']}"
    if row["what"] in ("reads without calls", "reads skipped", "records left out"):
        label += f" ({row['detail']})"
    return label


def accounting_figure(
    accounting: str | os.PathLike, name: str, png: Path, table: Path, data: Path
) -> None:
    """Read accounting: a bar per stage count and per fate of the basecalled reads, and the
    table as an HTML page."""
    rows = read_accounting(accounting)
    counts = [(row_label(r), int(r["reads"])) for r in rows if r["reads"] != "NA"]
    fates = read_fates(rows)
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(11, 4 + 0.35 * (len(counts) + len(fates))), height_ratios=[len(counts), 3]
    )
    ys = range(len(counts))[::-1]  # first row on top
    top.barh(ys, [n for _, n in counts], color="C0")
    top.set_yticks(ys, [label for label, _ in counts], fontsize="small")
    for y, (_, n) in zip(ys, counts, strict=True):
        top.annotate(f" {n}", (n, y), va="center", fontsize="small")
    top.set_xlabel("reads (files for 'fast5: files')")
    top.set_title("Counts per stage")
    left = 0
    for i, (fate, n) in enumerate(fates.items()):
        bottom.barh([0], [n], left=left, color=f"C{i + 2}", label=f"{fate} ({n})")
        left += n
    bottom.set_yticks([])
    bottom.set_xlabel("basecalled reads")
    bottom.set_title("Where every basecalled read went")
    bottom.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=1)
    fig.suptitle(f"{name}: read accounting")
    fig.tight_layout()
    save(fig, png)
    write_json({"counts": dict(counts), "fates": fates}, data)
    from numapore.report.accounting import COLUMNS as ACCOUNTING_COLUMNS

    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(r[c])}</td>" for c in ACCOUNTING_COLUMNS) + "</tr>"
        for r in rows
    )
    head = "".join(f"<th>{c}</th>" for c in ACCOUNTING_COLUMNS)
    write_html(f"{name}: read accounting", f"<table><tr>{head}</tr>{body}</table>", table)


def roc_curve(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """False and true positive rates at every distinct score threshold (highest first)."""
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], labels[order].astype(bool)
    last = np.r_[np.flatnonzero(s[1:] != s[:-1]), s.size - 1]  # last index of each tied run
    tp = np.cumsum(y)[last]
    fp = np.cumsum(~y)[last]
    return np.r_[0, fp / max(fp[-1], 1)], np.r_[0, tp / max(tp[-1], 1)]


def accuracy_figure(
    calls: str | os.PathLike,
    truth: str | os.PathLike,
    threshold: float,
    name: str,
    png: Path,
    data: Path,
    min_coverage: int = 5,
) -> None:
    """Simulated samples: the ROC curve of per-call LLRs against the truth and the per-site
    scatter of called vs true methylated fraction (same rules as
    numapore.methylation.accuracy.evaluate).
    """
    import pandas as pd

    from numapore.methylation.accuracy import label_calls, per_site, roc_auc

    c = read_calls_table(calls)
    t = pd.read_csv(truth, sep="\t", dtype={"chromosome": str, "read_id": str})
    m = label_calls(c, t)
    m = m[m["n_truth"] > 0]
    scores, labels = m["log_lik_ratio"].to_numpy(float), m["truth"].to_numpy(bool)
    fpr, tpr = roc_curve(scores, labels)
    per, r = per_site(m, threshold, min_coverage)
    numbers = {
        "auc": roc_auc(scores, labels),
        "roc_auc_trapezoid": float(np.trapezoid(tpr, fpr)),
        "roc": {"fpr": fpr.tolist(), "tpr": tpr.tolist()},
        "sites": {"truth": per["truth"].tolist(), "called": per["called"].tolist()},
        "site_correlation": r,
    }
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5))
    left.plot(fpr, tpr, lw=1.5)
    left.plot([0, 1], [0, 1], "k--", lw=0.7)
    left.set_xlabel("false positive rate")
    left.set_ylabel("true positive rate")
    left.set_title(f"Per-call ROC ({len(m)} calls, AUC {numbers['auc']:.3f})")
    left.grid(alpha=0.3)
    right.scatter(per["truth"], per["called"], s=6, alpha=0.5)
    right.plot([0, 1], [0, 1], "k--", lw=0.7)
    right.set_xlabel("true methylated fraction")
    right.set_ylabel("called methylated fraction")
    right.set_title(f"Per site ({len(per)} sites with >= {min_coverage} calls, r = {r:.3f})")
    right.grid(alpha=0.3)
    fig.suptitle(f"{name}: calls against the simulated truth")
    fig.tight_layout()
    save(fig, png)
    write_json(numbers, data)


# MultiQC custom content: the header (YAML in comment lines) MultiQC reads from a *_mqc.tsv.
MQC_HEADERS = {
    "accounting": {
        "id": "numapore_accounting",
        "section_name": "numapore: read accounting",
        "description": "Where every basecalled read went: with calls (CpG for signal samples, "
        "any modification for modbam samples), or the reason it has none "
        "(results/&lt;sample&gt;/&lt;sample&gt;.&lt;aligner&gt;.accounting.tsv).",
        "plot_type": "bargraph",
        "pconfig": {"id": "numapore_accounting_plot", "title": "numapore: read fates"},
    },
    "methylation": {
        "id": "numapore_methylation",
        "section_name": "numapore: base modifications",
        "description": "Per sample and modification code (5mC, 5hmC, 6mA, ...): calls in the "
        "modBAM, reads with calls, bedMethyl sites and their mean fraction modified.",
        "plot_type": "table",
        "pconfig": {"id": "numapore_methylation_table", "title": "numapore: base modifications"},
    },
    "dmr": {
        "id": "numapore_dmr",
        "section_name": "numapore: DMRs (DSS)",
        "description": "Per DMR contrast (config dmr:): DMRs found by DSS's callDMR, the CpGs in "
        "them and the sites tested (results/dmr/&lt;contrast&gt;/).",
        "plot_type": "table",
        "pconfig": {"id": "numapore_dmr_table", "title": "numapore: DMRs"},
    },
    "calls_qc": {
        "id": "numapore_calls_qc",
        "section_name": "numapore: QC of the calls",
        "description": "Per sample: the calls the pileup sampled (modkit's modbam summary and "
        "sample-probs of its modBAM), the pass threshold the pileup used and the share of each "
        "code's calls reaching it (results/&lt;sample&gt;/qc/).",
        "plot_type": "table",
        "pconfig": {"id": "numapore_calls_qc_table", "title": "numapore: QC of the calls"},
    },
}


def methylation_summary(bedmethyl: str | os.PathLike, modbam: str | os.PathLike) -> dict:
    """One sample's modification numbers for MultiQC, per code: calls (modBAM), sites, mean
    fraction modified and sites at least half modified (bedMethyl); and reads with calls."""
    sites = bedmethyl_frame(bedmethyl)
    calls = modbam_calls(modbam)
    summary: dict[str, Any] = {"reads_with_calls": int(calls["per_read"].size)}
    for code in sorted(set(sites["name"]) | set(calls["codes"])):
        rows = sites[sites["name"] == code]
        label = code_name(code)
        summary[f"{label} calls"] = int(calls["codes"].get(code, {}).get("calls", 0))
        summary[f"{label} sites"] = len(rows)
        mean = rows["fraction"].mean()
        summary[f"{label} mean fraction"] = round(float(mean), 4) if len(rows) else 0.0
        summary[f"{label} sites >= 50%"] = int((rows["fraction"] >= 0.5).sum())
    return summary


def write_mqc_tsv(kind: str, rows: Mapping[str, Mapping[str, Any]], output: Path) -> None:
    """A MultiQC custom-content TSV: the header of its kind, then one row per MultiQC sample."""
    import yaml

    columns: list[str] = []
    for values in rows.values():
        columns += [c for c in values if c not in columns]
    header = yaml.safe_dump(MQC_HEADERS[kind], sort_keys=False).splitlines()
    lines = [f"# {line}" for line in header]
    lines.append("\t".join(["Sample", *columns]))
    lines += ["\t".join([s, *(str(v.get(c, 0)) for c in columns)]) for s, v in rows.items()]
    with atomic_output(output) as tmp:
        tmp.write_text("\n".join(lines) + "\n")


def multiqc_custom_content(
    runs: Mapping[str, Mapping[str, str]], accounting_out: Path, methylation_out: Path
) -> None:
    """numapore's MultiQC custom content over every run (name '<sample>.<aligner>', as MultiQC
    names the samtools reports): read fates from the accounting, methylation summaries."""
    fates = {
        name: read_fates(read_accounting(f["accounting"]))
        for name, f in runs.items()
        if "accounting" in f
    }
    write_mqc_tsv("accounting", fates, accounting_out)
    meth = {
        name: methylation_summary(f["bedmethyl"], f["modbam"])
        for name, f in runs.items()
        if "bedmethyl" in f
    }
    write_mqc_tsv("methylation", meth, methylation_out)
