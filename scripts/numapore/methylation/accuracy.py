"""Score methylation calls against a numapore.simulate.reads truth table: nanopolish
call-methylation output (signal samples), or an aligned modBAM and its bedMethyl (modbam samples).

nanopolish: a call covers the CpGs of one read from `start` to `end` (forward-strand C positions,
as in the truth table). Its true label is the majority state of those CpGs in the truth (ties
count as methylated); the simulator makes the CpGs of one nanopolish group share a state, so ties
are rare.

modBAM: each 5mC call (MM/ML, read with pysam's modified_bases) of a primary alignment is placed
on the reference (a reverse-strand read's call sits on the G, one past the forward C) and labelled
with that read's truth at that CpG; the AUC is of its ML probability. Per site, the bedMethyl's
fraction modified (5mC rows) is compared with the true fraction among the reads called there.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pysam

from numapore.methylation.bedmethyl import read_bedmethyl


@dataclass
class Accuracy:
    """Summary of how well per-read calls recover the simulated truth."""

    reads: int  # simulated reads (denominator of called_fraction)
    reads_called: int  # reads with at least one call
    called_fraction: float
    calls: int
    calls_matched: int  # calls whose [start, end] holds at least one truth CpG of that read
    auc: float  # per-call ROC AUC of log_lik_ratio (a modBAM: probability) against the truth
    sites: int  # sites with >= min_coverage confident calls
    site_correlation: float  # Pearson r, called vs true methylated fraction at those sites


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Return the ROC AUC of scores for binary labels (Mann-Whitney U with tied ranks averaged)."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    ranks = np.empty(s.size, dtype=np.float64)
    # Average rank (1-based) over each run of tied scores.
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    ends = np.concatenate((starts[1:], [s.size]))
    avg = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(avg, ends - starts)
    u = ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def label_calls(calls: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Return calls with columns n_truth (truth CpGs in the call) and truth (majority state)."""
    t = truth.sort_values(["read_id", "chromosome", "position"], kind="mergesort")
    groups = {k: g for k, g in t.groupby(["read_id", "chromosome"], sort=False)}
    n_truth = np.zeros(len(calls), dtype=np.int64)
    frac = np.full(len(calls), np.nan)
    keys = zip(calls["read_name"], calls["chromosome"], calls["start"], calls["end"], strict=True)
    for i, (rid, chrom, lo, hi) in enumerate(keys):
        g = groups.get((rid, chrom))
        if g is None:
            continue
        pos = g["position"].to_numpy()
        a, b = np.searchsorted(pos, lo, "left"), np.searchsorted(pos, hi, "right")
        if b > a:
            n_truth[i] = b - a
            frac[i] = g["methylated"].to_numpy()[a:b].mean()
    out = calls.copy()
    out["n_truth"] = n_truth
    out["truth"] = frac >= 0.5
    return out


def per_site(
    labelled: pd.DataFrame, threshold: float, min_coverage: int
) -> tuple[pd.DataFrame, float]:
    """Called vs true methylated fraction per site with >= min_coverage confident calls, and
    their correlation (NaN with fewer than 3 sites)."""
    # Confident calls only, as nanopolish's calculate_methylation_frequency does.
    conf = labelled[labelled["log_lik_ratio"].abs() >= threshold].copy()
    conf["called"] = conf["log_lik_ratio"] > 0
    per = conf.groupby(["chromosome", "start"]).agg(
        n=("called", "size"), called=("called", "mean"), truth=("truth", "mean")
    )
    per = per[per["n"] >= min_coverage]
    r = float(np.corrcoef(per["called"], per["truth"])[0, 1]) if len(per) > 2 else float("nan")
    return per, r


def scored(
    reads: int, called: int, calls: int, matched: int, auc: float, sites: int, r: float
) -> Accuracy:
    """The accuracy row of reads (all), called (with a call), calls (matched: to the truth),
    the per-call AUC, and the sites with their correlation."""
    return Accuracy(
        reads=int(reads),
        reads_called=int(called),
        called_fraction=called / reads if reads else float("nan"),
        calls=calls,
        calls_matched=matched,
        auc=auc,
        sites=sites,
        site_correlation=r,
    )


def evaluate(
    calls_path: Path,
    truth_path: Path,
    n_reads: int | None = None,
    threshold: float = 2.0,
    min_coverage: int = 5,
) -> Accuracy:
    """Compare nanopolish calls with the truth table; n_reads defaults to the truth's reads."""
    calls = pd.read_csv(calls_path, sep="\t", dtype={"chromosome": str, "read_name": str})
    truth = pd.read_csv(truth_path, sep="\t", dtype={"chromosome": str, "read_id": str})
    total = n_reads if n_reads is not None else truth["read_id"].nunique()
    lab = label_calls(calls, truth)
    m = lab[lab["n_truth"] > 0]
    auc = roc_auc(m["log_lik_ratio"].to_numpy(), m["truth"].to_numpy())
    per, r = per_site(m, threshold, min_coverage)
    return scored(total, calls["read_name"].nunique(), len(calls), len(m), auc, len(per), r)


def modbam_calls(bam_path: Path) -> pd.DataFrame:
    """The 5mC calls of a modBAM's primary alignments: read_id, chromosome, position (the
    forward-strand C of the CpG, as in the truth table) and probability (ML / 256 + 1/512)."""
    rows: dict[str, list] = {"read_id": [], "chromosome": [], "position": [], "probability": []}
    with pysam.AlignmentFile(str(bam_path)) as bam:
        for rec in bam:
            if rec.is_unmapped or rec.is_secondary or rec.is_supplementary:
                continue
            calls = [c for (base, _, code), cs in rec.modified_bases.items() if code == "m"
                     and base == "C" for c in cs]  # fmt: skip
            if not calls:
                continue
            ref_at = dict(rec.get_aligned_pairs(matches_only=True))
            shift = 1 if rec.is_reverse else 0  # the read's C is the forward G
            for qpos, ml in calls:
                ref = ref_at.get(qpos)
                if ref is None:
                    continue
                rows["read_id"].append(rec.query_name)
                rows["chromosome"].append(rec.reference_name)
                rows["position"].append(ref - shift)
                rows["probability"].append((ml + 0.5) / 256)
    return pd.DataFrame(rows)


def bedmethyl_fractions(path: Path) -> pd.DataFrame:
    """The 5mC rows of a bedMethyl as chromosome, position (forward-strand C) and fraction
    modified (n_mod / valid coverage), rows without valid coverage left out."""
    rows = [
        (r.chrom, r.start - (r.strand == "-"), r.n_mod / r.valid_cov, r.valid_cov)
        for r in read_bedmethyl(path)
        if r.name == "m" and r.valid_cov > 0
    ]
    return pd.DataFrame(rows, columns=["chromosome", "position", "called", "n"])


def evaluate_modbam(
    bam_path: Path,
    bedmethyl_path: Path,
    truth_path: Path,
    n_reads: int | None = None,
    min_coverage: int = 5,
) -> Accuracy:
    """Compare an aligned modBAM's 5mC calls and its bedMethyl with the truth table (module
    docstring); n_reads defaults to the truth's reads."""
    truth = pd.read_csv(truth_path, sep="\t", dtype={"chromosome": str, "read_id": str})
    total = n_reads if n_reads is not None else truth["read_id"].nunique()
    calls = modbam_calls(bam_path)
    key = ["read_id", "chromosome", "position"]
    m = calls.merge(truth[[*key, "methylated"]], on=key, how="inner")
    auc = roc_auc(m["probability"].to_numpy(), m["methylated"].to_numpy())
    true_fraction = m.groupby(["chromosome", "position"])["methylated"].mean().rename("truth")
    per = bedmethyl_fractions(bedmethyl_path).join(true_fraction, on=["chromosome", "position"])
    per = per[(per["n"] >= min_coverage) & per["truth"].notna()]
    r = float(np.corrcoef(per["called"], per["truth"])[0, 1]) if len(per) > 2 else float("nan")
    return scored(total, calls["read_id"].nunique(), len(calls), len(m), auc, len(per), r)


def count_fastq_reads(path: Path) -> int:
    """Return the number of records of a FASTQ file (4 lines each)."""
    with open(path, "rb") as fh:
        return sum(1 for _ in fh) // 4


def main(argv: list[str] | None = None, prog: str = "numapore accuracy") -> int:
    """Command-line entry point: print the accuracy of calls against a truth table as JSON."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--calls", type=Path, help="nanopolish call-methylation TSV")
    source.add_argument("--modbam", type=Path, help="aligned modBAM (indexed), with --bedmethyl")
    p.add_argument("--bedmethyl", type=Path, help="the modBAM's bedMethyl (numapore pileup)")
    p.add_argument("--truth", type=Path, required=True, help="numapore.simulate.reads truth.tsv")
    p.add_argument("--fastq", type=Path, help="simulated reads (denominator of called_fraction)")
    p.add_argument("--threshold", type=float, default=2.0, help="|llr| for a confident call")
    p.add_argument("--min-coverage", type=int, default=5, help="calls per site for correlation")
    a = p.parse_args(argv)
    n = count_fastq_reads(a.fastq) if a.fastq else None
    if a.modbam and not a.bedmethyl:
        p.error("--modbam needs --bedmethyl")
    if a.modbam:
        acc = evaluate_modbam(a.modbam, a.bedmethyl, a.truth, n, a.min_coverage)
    else:
        acc = evaluate(a.calls, a.truth, n, a.threshold, a.min_coverage)
    json.dump(asdict(acc), sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
