"""The cohort table: the bedMethyl files of every sample of a run (one motif, one reference) as
one table of sites x samples.

Columns 1-18 are, row for row and byte for byte, what `modkit bedmethyl merge` (modkit 0.6.1)
writes from the same files: its outer join of the sites (chrom, start, modification code,
strand), the eight counts summed over the samples, score and N_valid_cov the summed valid
coverage, the percent recomputed from the sums; rows in the order of the reference's contigs,
then start, strand (+, -, .), code (one-letter codes, then ChEBI numbers). Then two columns per
sample, in the run's sample order: `valid_<sample>` (its N_valid_cov) and `mod_<sample>` (its
N_mod), 0 and 0 where the sample has no row: what a per-sample test (DSS: N and X) needs.

modkit's merge keeps only the code of a bedMethyl's name column (`m` of `m,CG,0`); so does this
table. A `#` header line names the columns (modkit's with `--header`, then the samples').

Filters, as modkit 0.6.4's `bedmethyl merge --min-samples --min-sample-coverage` define them
(its defaults, 1 and 0, are the outer join): a sample counts at a site, in the tally and in the
summed counts, only when its row there has at least min_sample_coverage valid coverage; a site is
kept when at least min_samples samples count there (a sample is counted once, however many rows
its file has there).

    write_cohort_table(out, [("s1", bed1), ("s2", bed2)], contigs)   # bgzipped, tabix-indexed
    write_cohort_table(out, beds, contigs, Filters(min_samples=2, min_sample_coverage=5))
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from numapore.methylation.bedmethyl import COLOUR, COLUMNS, code_key, percent_modified, polars_frame
from numapore.methylation.bgzf import write_indexed_bed

COUNTS = ["n_mod", "n_canonical", "n_other_mod", "n_delete", "n_fail", "n_diff", "n_nocall"]
STRAND_ORDER = {"+": 0, "-": 1, ".": 2}  # modkit's StrandRule order: Positive, Negative, Both


class CohortError(ValueError):
    """A bedMethyl file the cohort table cannot read."""


@dataclass(frozen=True)
class Filters:
    """Which sites the table keeps (config cohort:; modkit 0.6.4's merge options): those where
    at least min_samples samples have a row of at least min_sample_coverage valid coverage."""

    min_samples: int = 1
    min_sample_coverage: int = 0


@dataclass(frozen=True)
class Written:
    """What write_cohort_table wrote: its rows, and per sample (in the run's order) the sites
    its file has and those of them the table kept."""

    rows: int
    read: dict[str, int]
    kept: dict[str, int]


def write_sample_counts(path: Path, written: Written) -> None:
    """Beside the table: each sample's sites read and kept, a TSV (read by read_sample_counts)."""
    lines = ["sample\tsites_read\tsites_kept"]
    lines += [f"{s}\t{n}\t{written.kept[s]}" for s, n in written.read.items()]
    Path(path).write_text("\n".join(lines) + "\n")


def read_sample_counts(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """What write_sample_counts wrote: per sample its sites read, and kept."""
    rows = [line.split("\t") for line in Path(path).read_text().splitlines()[1:]]
    return {s: int(n) for s, n, _ in rows}, {s: int(k) for s, _, k in rows}


def dropped_lines(
    table: str | Path, read: dict[str, int], kept: dict[str, int], filters: Filters
) -> list[str]:
    """What the filters left out, said: the samples of which the table kept no site (and the
    table itself when empty), naming the settings (config cohort:) that did it."""
    setting = (
        f"cohort.min_samples: {filters.min_samples}, "
        f"cohort.min_sample_coverage: {filters.min_sample_coverage}"
    )
    lines = []
    if not any(kept.values()) and any(read.values()):
        lines.append(f"cohort table {table} is empty: {setting} left out every site")
    for sample, kept_here in kept.items():
        if kept_here == 0:
            count = read[sample]
            why = (
                f"its {count} sites all left out by {setting}"
                if count
                else "its bedMethyl is empty"
            )
            lines.append(f"cohort table {table}: sample '{sample}' contributes no site ({why})")
    return lines


def sample_columns(samples: Sequence[str]) -> list[str]:
    """The per-sample columns after modkit's 18: valid_<sample>, mod_<sample> for each."""
    return [f"{what}_{sample}" for sample in samples for what in ("valid", "mod")]


def header_line(samples: Sequence[str]) -> str:
    """The table's header line: modkit's bedMethyl header (`--header`), then the samples'."""
    return "#" + "\t".join([*COLUMNS, *sample_columns(samples)]) + "\n"


def read_sample(path: Path, index: int) -> pl.DataFrame:
    """A bedMethyl file's rows (gzip/BGZF or plain; `#` lines skipped): the site, the code of its
    name column, the eight counts, and the sample's index."""
    columns = ["chrom", "start", "end", "name", "strand", "valid_cov", *COUNTS]
    try:
        table = polars_frame(path, columns)
    except pl.exceptions.PolarsError as err:
        raise CohortError(f"{path}: not a bedMethyl file: {err}") from err
    return table.select(
        "chrom", "start", "end",
        pl.col("name").str.split(",").list.first().alias("code"),
        "strand", pl.col("valid_cov").alias("valid"), *COUNTS, sample=pl.lit(index, pl.Int32),
    )  # fmt: skip


def cohort_frame(
    beds: Sequence[tuple[str, Path]], contigs: Sequence[str], filters: Filters = Filters()
) -> pl.DataFrame:
    """The table's rows as a frame, in modkit's order: the site, the summed counts, and each
    sample's valid and mod columns (0 where the sample does not count there). contigs: the
    reference's contig order (its .fai's)."""
    return filtered_frame(beds, contigs, filters)[0]


def filtered_frame(
    beds: Sequence[tuple[str, Path]], contigs: Sequence[str], filters: Filters
) -> tuple[pl.DataFrame, dict[str, int], dict[str, int]]:
    """cohort_frame's rows, and per sample the sites its file has and those the table kept."""
    samples = [name for name, _ in beds]
    rows = pl.concat([read_sample(Path(path), i) for i, (_, path) in enumerate(beds)])
    read = per_sample(rows, samples)
    unknown = set(rows["chrom"].unique()) - set(contigs)
    if unknown:
        raise CohortError(f"contig(s) {', '.join(sorted(unknown)[:3])} not in the reference")
    if filters.min_sample_coverage > 0:
        rows = rows.filter(pl.col("valid") >= filters.min_sample_coverage)
    key = ["chrom", "start", "code", "strand"]
    pooled = (
        rows.sort("sample")
        .group_by(key, maintain_order=True)
        .agg(
            pl.col("end").first(),
            pl.col("valid").sum(),
            *(pl.col(c).sum() for c in COUNTS),
            pl.col("sample").n_unique().alias("samples_here"),
        )
    )
    if filters.min_samples > 1:
        pooled = pooled.filter(pl.col("samples_here") >= filters.min_samples)
    for what, column in (("valid", "valid"), ("mod", "n_mod")):
        wide = rows.pivot(on="sample", index=key, values=column, aggregate_function="sum")
        wide = wide.rename({str(i): f"{what}_{s}" for i, s in enumerate(samples)
                            if str(i) in wide.columns})  # fmt: skip
        pooled = pooled.join(wide, on=key, how="left", nulls_equal=True)
    for column in sample_columns(samples):
        if column not in pooled.columns:  # a sample without any row
            pooled = pooled.with_columns(pl.lit(0, pl.Int64).alias(column))
    pooled = pooled.with_columns(pl.col(c).fill_null(0) for c in sample_columns(samples))
    order = {name: i for i, name in enumerate(contigs)}
    codes = pooled["code"].unique().to_list()
    code_rank = {c: i for i, c in enumerate(sorted(codes, key=code_key))}
    frame = pooled.with_columns(
        contig_rank=pl.col("chrom").replace_strict(order, return_dtype=pl.Int64),
        strand_rank=pl.col("strand").replace_strict(STRAND_ORDER, return_dtype=pl.Int64),
        code_rank=pl.col("code").replace_strict(code_rank, return_dtype=pl.Int64),
    ).sort("contig_rank", "start", "strand_rank", "code_rank")
    kept = per_sample(rows.join(frame.select(key), on=key, how="semi", nulls_equal=True), samples)
    return frame, read, kept


def per_sample(rows: pl.DataFrame, samples: Sequence[str]) -> dict[str, int]:
    """The sites of each sample among rows (by its index), 0 for one without any."""
    counts = dict(rows.group_by("sample").len().iter_rows())
    return {name: counts.get(i, 0) for i, name in enumerate(samples)}


def cohort_lines(frame: pl.DataFrame, samples: Sequence[str]) -> Iterator[str]:
    """The table's lines (without the header): modkit merge's 18 columns, then the samples'."""
    per_sample = sample_columns(samples)
    columns = ["chrom", "start", "end", "code", "valid", "strand", *COUNTS, *per_sample]
    for row in frame.select(columns).iter_rows():
        chrom, start, end, code, valid, strand, *rest = row
        counts, own = rest[: len(COUNTS)], rest[len(COUNTS) :]
        fields = [chrom, start, end, code, valid, strand, start, end, COLOUR, valid,
                  percent_modified(counts[0], valid), *counts, *own]  # fmt: skip
        yield "\t".join(map(str, fields)) + "\n"


def write_cohort_table(
    out: Path,
    beds: Sequence[tuple[str, Path]],
    contigs: Sequence[str],
    filters: Filters = Filters(),
) -> Written:
    """Write the cohort table of beds ((sample, bedMethyl) in the run's order) to out, bgzipped
    with its tabix index (out.tbi); return what it wrote."""
    samples = [name for name, _ in beds]
    frame, read, kept = filtered_frame(beds, contigs, filters)

    def chunks() -> Iterator[bytes]:
        """The header, then the rows, a block at a time."""
        yield header_line(samples).encode()
        block: list[str] = []
        for line in cohort_lines(frame, samples):
            block.append(line)
            if len(block) == 100_000:
                yield "".join(block).encode()
                block = []
        yield "".join(block).encode()

    write_indexed_bed(out, chunks())
    return Written(frame.height, read, kept)
