"""Differentially methylated regions with DSS (config dmr:): the contrasts checked before any job,
the counts DSS reads, the contig groups of a scattered run, the merged outputs and their scoring
against a simulated truth.

A contrast is group A vs group B (the sheet's group column: replicates of each) or haplotype 1
vs 2 of one phased sample (allele-specific methylation: the per-haplotype bedMethyl files of
`pileup.phased`). Its counts are, per site, each sample's (or haplotype's) valid coverage N and
modified calls X of the code dmr.code in its bedMethyl (modkit's Nvalid_cov and Nmod), which is
what DSS's makeBSseqData takes; scripts/dmr_test.R runs DMLtest and callDMR on them.

Replicates. DSS's DMLtest estimates each site's dispersion from the replicates of each group;
with one sample on a side (a group of one, or a haplotype contrast, always one per side) it
refuses to run without smoothing ("There is no biological replicates in at least one
condition"). With smoothing, neighbouring CpGs (smoothing_span) stand in for replicates: DSS
tests such a contrast, but its p-values then say nothing of the variation between individuals.
numapore follows DSS: a side of one sample is allowed with smoothing on (said in the run's first
lines) and refused before any job with smoothing off.

Scatter (dmr.scatter N): the sites are cut into N groups of whole contigs (consecutive in
reference order, balanced by sites), each tested in its own job. DSS estimates the dispersion
prior and the weights' scale over what it is given, so a group's results are those of DSS run
on that group alone (as DSS is commonly run per chromosome); N = 1 is DSS on the whole table.
The merged per-site table's fdr is recomputed over all sites (Benjamini-Hochberg, as DSS
computes it) when N > 1.

Outputs (rule dmr_merge), bgzipped and tabix-indexed, 0-based half-open coordinates:
- <name>.sites.tsv.gz: per tested site: chrom, start, end, then DSS's mu1 mu2 diff diff.se stat
  phi1 phi2 pval fdr (side A first);
- <name>.dmrs.bed.gz: per DMR: chrom, start (its first CpG), end (after its last CpG's C), CpGs,
  mean methylation of side A, of side B, difference (A - B) and DSS's areaStat, by position.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numapore.base.errors import InputError
from numapore.base.textfiles import open_maybe_gzip
from numapore.methylation.dmr_regions import check_bound

# config dmr: keys DSS's functions take, as a contrast may override them
DSS_KEYS = (
    "smoothing",
    "smoothing_span",
    "delta",
    "p_threshold",
    "minlen",
    "min_cg",
    "dis_merge",
    "pct_sig",
)
SITE_HEADER = "#chrom\tstart\tend\tmu1\tmu2\tdiff\tdiff.se\tstat\tphi1\tphi2\tpval\tfdr\n"


@dataclass(frozen=True)
class Contrast:
    """One DMR contrast: side A (label1: its count columns) against side B."""

    name: str
    kind: str  # groups or haplotypes
    label1: str
    label2: str
    group1: tuple[str, ...]  # count columns of side A (sample names, or <sample>_hp1)
    group2: tuple[str, ...]
    sources: Mapping[str, str] = field(default_factory=dict)  # count column -> bedMethyl
    settings: Mapping[str, Any] = field(default_factory=dict)  # DSS_KEYS
    reference: str = ""  # the reference name of its samples (one)
    notes: tuple[str, ...] = ()

    def dss(self) -> dict[str, Any]:
        """What scripts/dmr_test.R reads of it."""
        return {
            "name": self.name,
            "label1": self.label1,
            "label2": self.label2,
            "group1": list(self.group1),
            "group2": list(self.group2),
            **self.settings,
        }


def contrast_name(entry: Mapping[str, Any]) -> str:
    """A contrast's name: its own, else <A>_vs_<B> (groups) or <sample>_hp1_vs_hp2."""
    if entry.get("name"):
        return str(entry["name"])
    if "groups" in entry:
        return f"{entry['groups'][0]}_vs_{entry['groups'][1]}"
    return f"{entry['sample']}_hp1_vs_hp2"


def plan(
    dmr: Mapping[str, Any],
    groups: Mapping[str, Sequence[str]],
    bedmethyl: Callable[[str], str],
    references: Mapping[str, str],
    haplotype_bedmethyl: Callable[[str], tuple[str, str]] | None = None,
    not_phased: Callable[[str], str] | None = None,
) -> list[Contrast]:
    """The contrasts of config dmr:, checked: one InputError line for the first that cannot
    run (a group no sample has, a side of one sample without smoothing, a haplotype contrast on
    a sample that is not phased, samples on different references, two contrasts of one name).
    groups: group -> its samples; bedmethyl(sample): its bedMethyl; references: sample -> its
    reference's name; haplotype_bedmethyl(sample): its two per-haplotype bedMethyl files;
    not_phased(sample): why it has none ('' when it has)."""
    out: list[Contrast] = []
    seen: set[str] = set()
    for i, entry in enumerate(dmr.get("contrasts", [])):
        name = contrast_name(entry)
        where = f"config dmr.contrasts[{i}] ({name})"
        if name in seen:
            raise InputError(f"{where}: a second contrast named '{name}': give it a name: key")
        seen.add(name)
        settings = {key: entry.get(key, dmr[key]) for key in DSS_KEYS}
        if "groups" in entry:
            contrast = _group_contrast(entry, name, where, groups, bedmethyl, settings)
        else:
            contrast = _haplotype_contrast(
                entry, name, where, references, haplotype_bedmethyl, not_phased, settings
            )
        samples = {s.rsplit("_hp", 1)[0] if contrast.kind == "haplotypes" else s for s in
                   (*contrast.group1, *contrast.group2)}  # fmt: skip
        refs = sorted({references[s] for s in samples})
        if len(refs) > 1:
            listed = ", ".join(f"{s}: {references[s]}" for s in sorted(samples))
            raise InputError(f"{where}: its samples are on different references ({listed})")
        out.append(Contrast(**{**vars(contrast), "reference": refs[0]}))
        columns = len(contrast.group1) + len(contrast.group2)
        check_bound(dmr.get("max_memory_gb") or None, name, columns)
    return out


def _one_sample_side(where: str, what: str, settings: Mapping[str, Any]) -> str:
    """The note (smoothing on) or the error (off) for a side of one sample."""
    if not settings["smoothing"]:
        raise InputError(
            f"{where}: {what}: DSS's DMLtest estimates each site's dispersion from replicates "
            "and refuses a side of one sample without smoothing; add replicates, or set "
            "smoothing: true (dmr.smoothing, or the contrast's own), which makes neighbouring "
            "CpGs stand in for replicates"
        )
    return (
        f"{where}: {what}: tested with smoothing, neighbouring CpGs standing in for "
        "replicates (its p-values say nothing of the variation between individuals)"
    )


def _group_contrast(entry, name, where, groups, bedmethyl, settings) -> Contrast:
    """A contrast of two groups of samples."""
    from numapore.inputs.schema import did_you_mean

    label1, label2 = entry["groups"]
    if label1 == label2:
        raise InputError(f"{where}: groups: both sides are '{label1}'")
    sides = []
    notes = []
    for label in (label1, label2):
        if label not in groups:
            known = ", ".join(groups) or "none: no sample has a group"
            fix = did_you_mean(label, list(groups)) or f" (the run's groups: {known})"
            raise InputError(
                f"{where}: no sample has group '{label}' (the sheet's group column, or "
                f"simulate.<name>.group){fix}"
            )
        members = tuple(groups[label])
        if len(members) == 1:
            what = f"group '{label}' has one sample ({members[0]})"
            notes.append(_one_sample_side(where, what, settings))
        sides.append(members)
    sources = {s: bedmethyl(s) for side in sides for s in side}
    return Contrast(
        name, "groups", label1, label2, sides[0], sides[1], sources, settings, notes=tuple(notes)
    )


def _haplotype_contrast(
    entry, name, where, references, haplotype_bedmethyl, not_phased, settings
) -> Contrast:
    """Haplotype 1 against 2 of one phased sample."""
    from numapore.inputs.schema import did_you_mean

    sample = entry["sample"]
    if sample not in references:
        raise InputError(f"{where}: no sample '{sample}'" + did_you_mean(sample, list(references)))
    reason = not_phased(sample) if not_phased else "haplotype contrasts are not available"
    if reason:
        raise InputError(f"{where}: sample '{sample}' is not phased: {reason}")
    what = f"haplotype 1 vs 2 of sample '{sample}' (one sample per side)"
    note = _one_sample_side(where, what, settings)
    hp1, hp2 = haplotype_bedmethyl(sample)
    columns = (f"{sample}_hp1", f"{sample}_hp2")
    return Contrast(
        name, "haplotypes", f"{sample} hp1", f"{sample} hp2", columns[:1], columns[1:],
        {columns[0]: hp1, columns[1]: hp2}, settings, notes=(note,),
    )  # fmt: skip


# ------------------------------------------------------------------------------ the counts


def read_counts(path: str, code: str):
    """A bedMethyl's sites of a modification code: polars frame chrom, start, N (valid
    coverage), X (modified), read as the cohort table reads a sample."""
    import polars as pl

    from numapore.methylation.cohort import read_sample

    return _counts_of(read_sample(Path(path), 0).filter(pl.col("code") == code))


def _counts_of(rows):
    """A cohort frame's rows (numapore.methylation.cohort's columns) as counts: chrom, start,
    N (valid coverage), X (modified)."""
    return rows.select("chrom", "start", N="valid", X="n_mod")


def count_columns(contrast: Contrast) -> list[str]:
    """The counts' columns DSS reads, in the contrast's column order: N.<column>, X.<column>."""
    return [f"{what}.{c}" for c in (*contrast.group1, *contrast.group2) for what in ("N", "X")]


def joined_counts(contrast: Contrast, frames: Sequence[Any]):
    """The counts of each column's sites (frames: chrom, start, N, X, in the contrast's column
    order) side by side: chrom, start, N.<column>, X.<column> ..., 0 where a column has none."""
    table = None
    for column, frame in zip((*contrast.group1, *contrast.group2), frames, strict=True):
        frame = frame.rename({"N": f"N.{column}", "X": f"X.{column}"})
        if table is None:
            table = frame
        else:
            table = table.join(frame, on=["chrom", "start"], how="full", coalesce=True)
    return table.fill_null(0)


def count_table(contrast: Contrast, code: str, contigs: Sequence[str]):
    """The contrast's counts (chrom, pos 1-based, N.<column>, X.<column> per column, 0 where a
    sample has no call), in reference order (contigs), for DSS; made in memory at once."""
    columns = (*contrast.group1, *contrast.group2)
    table = joined_counts(contrast, [read_counts(contrast.sources[c], code) for c in columns])
    order = {c: i for i, c in enumerate(contigs)}
    unknown = sorted(set(table["chrom"].unique()) - set(order))
    for extra in unknown:  # not in the reference's index: after its contigs, by name
        order[extra] = len(order)
    return for_dss(table, order)


def for_dss(table, order: Mapping[str, int]):
    """joined_counts's table as DSS reads it: chrom, pos (1-based), the counts, in the order of
    the contigs (order: contig -> rank), then by position."""
    import polars as pl

    table = table.with_columns(
        pl.col("chrom").replace_strict(order, return_dtype=pl.Int64).alias("_order"),
        (pl.col("start") + 1).alias("pos"),
    ).sort(["_order", "pos"])
    counts = [c for c in table.columns if c.startswith(("N.", "X."))]
    return table.select(["chrom", "pos", *counts])


def streamed_counts(contrast: Contrast, code: str, contigs: Sequence[str], batch_bytes: int):
    """count_table's rows a run of positions at a time: a k-way merge of the sorted bedMethyl
    files (numapore.methylation.cohort's, as the cohort table streams). cohort.NotSorted when a
    file is not in the reference's contig order by position, cohort.UnknownContig naming a
    contig the reference has not."""
    import polars as pl

    from numapore.methylation import cohort

    columns = (*contrast.group1, *contrast.group2)
    beds = [(c, Path(contrast.sources[c])) for c in columns]
    _, chunks = cohort.merged_chunks(beds, contigs, batch_bytes)
    order = {c: i for i, c in enumerate(contigs)}
    for chunk in chunks:
        rows = chunk.filter(pl.col("code") == code)
        if rows.height == 0:
            continue
        frames = [_counts_of(rows.filter(pl.col("sample") == i)) for i in range(len(columns))]
        yield for_dss(joined_counts(contrast, frames), order)


def contig_groups(sites: Mapping[str, int], n: int) -> list[list[str]]:
    """n groups of whole contigs, consecutive in the given order, balanced by their sites:
    group k ends at the first contig whose running total reaches k/n of all sites (some
    groups are empty when there are fewer contigs with sites than groups)."""
    total = sum(sites.values())
    groups: list[list[str]] = [[] for _ in range(n)]
    running = 0
    k = 0
    for contig, count in sites.items():
        groups[k].append(contig)
        running += count
        while k < n - 1 and running >= total * (k + 1) / n:
            k += 1
    return groups


@dataclass
class Coverage:
    """What a contrast's counts cover: a site with calls on side A, on side B, on both."""

    side1: bool = False
    side2: bool = False
    both: bool = False

    def add(self, contrast: Contrast, table) -> None:
        """Take in a table of the contrast's counts."""
        import polars as pl

        side1 = pl.any_horizontal([pl.col(f"N.{c}") > 0 for c in contrast.group1])
        side2 = pl.any_horizontal([pl.col(f"N.{c}") > 0 for c in contrast.group2])
        seen = table.select(side1.any().alias("1"), side2.any().alias("2"),
                            (side1 & side2).any().alias("both")).row(0)  # fmt: skip
        self.side1 |= bool(seen[0])
        self.side2 |= bool(seen[1])
        self.both |= bool(seen[2])


def check_sides(contrast: Contrast, code: str, coverage: Coverage) -> None:
    """InputError when a side of the contrast has no valid call of code at any site (every
    bedMethyl of it empty of that code: haplotype files of reads WhatsHap could not tag, a
    group of samples whose reads carry other codes), or when the two sides share no site with
    calls (samples of different regions or panels): DSS would test no site."""
    sides = []
    both_sides = ((contrast.label1, contrast.group1, coverage.side1),
                  (contrast.label2, contrast.group2, coverage.side2))  # fmt: skip
    for label, columns, covered in both_sides:
        side = f"group '{label}'" if contrast.kind == "groups" else label
        files = ", ".join(contrast.sources[c] for c in columns)
        sides.append(f"{side} ({files})")
        if not covered:
            raise InputError(
                f"DMR contrast '{contrast.name}': {side} has no valid call of code '{code}' "
                f"(config dmr.code) in {files}: DSS would test no site"
            )
    if not coverage.both:
        raise InputError(
            f"DMR contrast '{contrast.name}': {sides[0]} and {sides[1]} have no site with valid "
            f"calls of code '{code}' in common: DSS would test no site"
        )


COUNTS_BATCH_BYTES = 8 << 20  # of each bedMethyl's text read at a time


def write_counts(
    contrast: Contrast,
    code: str,
    contigs: Sequence[str],
    outputs: Sequence[str],
    max_memory_gb: float | None = None,
    say: Callable[[str], None] | None = None,
    batch_bytes: int = COUNTS_BATCH_BYTES,
) -> list[list[str]]:
    """Write the contrast's counts cut into len(outputs) contig groups (TSV each, header
    first, a region column last: numapore.methylation.dmr_regions under max_memory_gb, config
    dmr.max_memory_gb); return the groups' contigs. say: told each shard's regions.

    Memory: the counts are streamed once into a scratch table beside outputs[0] (the sites'
    count per contig noted), then each group is read back and cut into regions: a group at a
    time, not the genome. A bedMethyl not sorted as the reference is said, and the counts are
    then made in memory at once."""
    from numapore.methylation import cohort

    scratch = Path(f"{outputs[0]}.all")
    try:
        try:
            groups = _stream_to_scratch(contrast, code, contigs, scratch, len(outputs), batch_bytes)
        except (cohort.NotSorted, cohort.UnknownContig) as err:
            scratch.unlink(missing_ok=True)
            if say:
                if isinstance(err, cohort.NotSorted):
                    why = f"{err} is not in the reference's contig order by position"
                else:
                    why = f"a bedMethyl has {err}"
                say(f"DMR counts: {why}: the counts are made in memory at once")
            return _write_in_memory(contrast, code, contigs, outputs, max_memory_gb, say)
        _write_groups(contrast, scratch, groups, outputs, max_memory_gb, say)
        return [members for members, _, _ in groups]
    except cohort.CohortError as err:  # a file that is not a bedMethyl
        raise InputError(str(err)) from err
    finally:
        scratch.unlink(missing_ok=True)


def _stream_to_scratch(contrast, code, contigs, scratch: Path, n: int, batch_bytes: int):
    """The counts, streamed into scratch without a header; the n contig groups, each with the
    byte range of its rows in scratch."""
    coverage = Coverage()
    per_contig: dict[str, list[int]] = {}  # contig -> [first byte, sites]
    with open(scratch, "wb") as out:
        for table in streamed_counts(contrast, code, contigs, batch_bytes):
            coverage.add(contrast, table)
            for part in table.partition_by("chrom", maintain_order=True):
                # a contig's rows are consecutive: its first part's offset starts them
                per_contig.setdefault(part["chrom"][0], [out.tell(), 0])[1] += part.height
                part.write_csv(out, separator="\t", include_header=False)
    check_sides(contrast, code, coverage)
    sites = {contig: count for contig, (_, count) in per_contig.items()}
    offsets = [first for first, _ in per_contig.values()] + [scratch.stat().st_size]
    starts = dict(zip(per_contig, offsets[:-1], strict=True))
    # a contig's rows end where the next contig's start
    ends = dict(zip(per_contig, offsets[1:], strict=True))
    groups = []
    for members in contig_groups(sites, n):
        if members:
            groups.append((members, starts[members[0]], ends[members[-1]]))
        else:
            groups.append((members, 0, 0))
    return groups


def _write_groups(contrast, scratch, groups, outputs, max_memory_gb, say) -> None:
    """Each group's rows read back from scratch and written with their regions."""
    import polars as pl

    counts = dict.fromkeys(count_columns(contrast), pl.Int64)
    schema = {"chrom": pl.String, "pos": pl.Int64} | counts
    with open(scratch, "rb") as handle:
        for k, ((_, first, after), path) in enumerate(zip(groups, outputs, strict=True), 1):
            handle.seek(first)
            text = handle.read(after - first)
            shard = (pl.read_csv(text, separator="\t", has_header=False, schema=schema)
                     if text else pl.DataFrame(schema=schema))  # fmt: skip
            del text
            _write_shard(contrast, k, shard, path, max_memory_gb, say)


def _write_in_memory(contrast, code, contigs, outputs, max_memory_gb, say) -> list[list[str]]:
    """write_counts with the whole table in memory at once (a bedMethyl not sorted)."""
    import polars as pl

    table = count_table(contrast, code, contigs)
    coverage = Coverage()
    coverage.add(contrast, table)
    check_sides(contrast, code, coverage)
    per_contig = dict(table.group_by("chrom", maintain_order=True).len().iter_rows())
    groups = contig_groups(per_contig, len(outputs))
    for k, (members, path) in enumerate(zip(groups, outputs, strict=True), 1):
        shard = table.filter(pl.col("chrom").is_in(members))
        _write_shard(contrast, k, shard, path, max_memory_gb, say)
    return groups


def _write_shard(contrast, k: int, shard, path: str, max_memory_gb, say) -> None:
    """One contig group's counts written with its regions under max_memory_gb."""
    import polars as pl

    from numapore.methylation import dmr_regions

    samples = len(contrast.group1) + len(contrast.group2)
    gap = dmr_regions.safe_gap(contrast.settings) if max_memory_gb is not None else 0
    most = None
    if max_memory_gb is not None:
        most = dmr_regions.max_region_sites(max_memory_gb, samples, shard.height)
        if most < dmr_regions.SMALLEST_REGION:
            raise InputError(
                f"config dmr.max_memory_gb: {max_memory_gb:g} GiB cannot hold DSS's counts "
                f"of shard {k} of contrast '{contrast.name}' ({shard.height:,} sites x "
                f"{samples} samples) and a region of them: raise it, or raise scatter.dmr"
            )
    ids, forced = dmr_regions.region_ids(shard["chrom"], shard["pos"], most, gap)
    shard.with_columns(region=pl.Series(ids)).write_csv(path, separator="\t")
    if say and shard.height:
        bound = f"at most {most:,} sites each" if most else "no bound"
        dense = f", {forced} cut in CpGs closer than {gap} bases" if forced else ""
        say(f"shard {k}: {shard.height:,} sites in {int(ids[-1])} region(s) ({bound}{dense})")


# ------------------------------------------------------------------------------ the merge


def bh_fdr(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values, as R's p.adjust(method = 'BH') (NA stays NA)."""
    indexed = [(p, i) for i, p in enumerate(pvalues) if not math.isnan(p)]
    n = len(indexed)
    out = [math.nan] * len(pvalues)
    running = 1.0
    for rank, (p, i) in zip(range(n, 0, -1), sorted(indexed, reverse=True), strict=True):
        running = min(running, n / rank * p)
        out[i] = min(1.0, running)
    return out


def _rows(path: str) -> list[list[str]]:
    """A DSS table written by scripts/dmr_test.R, without its header."""
    with open(path) as handle:
        handle.readline()
        return [line.rstrip("\n").split("\t") for line in handle if line.strip()]


def site_lines(shards: Sequence[str]) -> list[str]:
    """The merged per-site table (header first): DSS's chr/pos as chrom, start, end; fdr
    over every shard's sites when there are several."""
    rows = [row for shard in shards for row in _rows(shard)]
    if len(shards) > 1:
        fdr = bh_fdr([float(r[9]) if r[9] not in ("NA", "") else math.nan for r in rows])
        for row, q in zip(rows, fdr, strict=True):
            row[10] = "NA" if math.isnan(q) else repr(q)
    body = [f"{r[0]}\t{int(r[1]) - 1}\t{r[1]}\t" + "\t".join(r[2:]) + "\n" for r in rows]
    return [SITE_HEADER, *body]


def dmr_lines(shards: Sequence[str], label1: str, label2: str) -> list[str]:
    """The merged DMR BED (header first), by position within each shard's contig order."""
    header = f"#chrom\tstart\tend\tCpGs\tmean_{label1}\tmean_{label2}\tdifference\tareaStat\n"
    out = [header.replace(" ", "_")]
    for shard in shards:
        for r in _rows(shard):
            chrom, start, end, _length, ncg, mean1, mean2, diff, area = r
            out.append(
                f"{chrom}\t{int(start) - 1}\t{end}\t{ncg}\t{mean1}\t{mean2}\t{diff}\t{area}\n"
            )
    return out


# ------------------------------------------------------------------------------ scoring


def read_bed(path: str | Path, kind: str | None = None) -> list[tuple[str, int, int]]:
    """The regions of a BED (gzip allowed; '#' lines skipped): truth BEDs of the simulator
    filtered by kind (its 5th column) when given."""
    out = []
    with open_maybe_gzip(path, "rt") as handle:
        for line in handle:
            if line.startswith("#") or not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            if kind is None or (len(fields) > 4 and fields[4] == kind):
                out.append((fields[0], int(fields[1]), int(fields[2])))
    return out


def overlaps(a: tuple[str, int, int], regions: Sequence[tuple[str, int, int]]) -> bool:
    """Whether region a shares a base with any of regions."""
    return any(a[0] == b[0] and a[1] < b[2] and b[1] < a[2] for b in regions)


def score(truth: Sequence[tuple[str, int, int]], called: Sequence[tuple[str, int, int]]):
    """(recall, precision, true regions found, called regions on a true one): a true region is
    found when a called one overlaps it; a called one is right when it overlaps a true one."""
    found = sum(overlaps(t, called) for t in truth)
    right = sum(overlaps(c, truth) for c in called)
    recall = found / len(truth) if truth else math.nan
    precision = right / len(called) if called else math.nan
    return recall, precision, found, right


def score_lines(truth_path: str, kind: str, dmrs_path: str, contrast: str = "") -> list[str]:
    """The score as a TSV (header and one row)."""
    truth = read_bed(truth_path, kind)
    called = read_bed(dmrs_path)
    recall, precision, found, right = score(truth, called)
    return [
        "contrast\tkind\ttrue_regions\tfound\tcalled\tcalled_on_truth\trecall\tprecision\n",
        f"{contrast}\t{kind}\t{len(truth)}\t{found}\t{len(called)}\t{right}\t"
        f"{recall:.4f}\t{precision:.4f}\n",
    ]


def main(argv: Sequence[str] | None = None, prog: str = "numapore dmr-score") -> int:
    """numapore dmr-score: recall and precision of a DMR BED against a simulated truth."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Score called DMRs (a BED, e.g. results/dmr/<contrast>/<contrast>.dmrs.bed.gz) "
        "against the simulator's truth regions (results/simulated/<sample>/regions.bed): recall "
        "(true regions overlapped by a call) and precision (calls overlapping a true region).",
    )
    p.add_argument("truth", help="the simulator's regions.bed")
    p.add_argument("dmrs", help="the called DMRs (BED, gzip allowed)")
    p.add_argument("--kind", default="dmr", choices=["dmr", "asm"], help="dmr: groups; asm: HP")
    a = p.parse_args(argv)
    try:
        lines = score_lines(a.truth, a.kind, a.dmrs)
    except (OSError, ValueError) as err:
        print(f"numapore: {err}", file=sys.stderr)
        return 1
    sys.stdout.writelines(lines)
    return 0
