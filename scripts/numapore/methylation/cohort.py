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

Memory. The table is written as a k-way merge of the samples' files, each read a batch at a
time: the rows of all samples up to the smallest position any sample's batch reaches are joined
and written, then the next batch is read. Its memory is that of a batch per sample, whatever the
genome's size. This needs each file in the reference's contig order, by position (modkit's
pileup and numapore's write them so); a file that is not is said in the job's log and the table
is then made in memory at once (memory growing with the files).

    write_cohort_table(out, [("s1", bed1), ("s2", bed2)], contigs)   # bgzipped, tabix-indexed
    write_cohort_table(out, beds, contigs, Filters(min_samples=2, min_sample_coverage=5))
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from numapore.methylation.bedmethyl import COLOUR, COLUMNS, code_key, percent_modified
from numapore.methylation.bedmethyl import polars_batches, polars_frame
from numapore.methylation.bgzf import write_indexed_bed

COUNTS = ["n_mod", "n_canonical", "n_other_mod", "n_delete", "n_fail", "n_diff", "n_nocall"]
STRAND_ORDER = {"+": 0, "-": 1, ".": 2}  # modkit's StrandRule order: Positive, Negative, Both


class CohortError(ValueError):
    """A bedMethyl file the cohort table cannot read."""


class UnknownContig(CohortError):
    """Rows on a contig the reference has not."""


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


READ_COLUMNS = ["chrom", "start", "end", "name", "strand", "valid_cov", *COUNTS]
BATCH_BYTES = 8 << 20  # of each sample's text read at a time (~100,000 rows)


def read_sample(path: Path, index: int) -> pl.DataFrame:
    """A bedMethyl file's rows (gzip/BGZF or plain; `#` lines skipped): the site, the code of its
    name column, the eight counts, and the sample's index."""
    try:
        table = polars_frame(path, READ_COLUMNS)
    except pl.exceptions.PolarsError as err:
        raise CohortError(f"{path}: not a bedMethyl file: {err}") from err
    return sample_rows(table, index)


def sample_rows(table: pl.DataFrame, index: int) -> pl.DataFrame:
    """read_sample's columns of a bedMethyl's rows."""
    return table.select(
        "chrom", "start", "end",
        pl.col("name").str.split(",").list.first().alias("code"),
        "strand", pl.col("valid_cov").alias("valid"), *COUNTS, sample=pl.lit(index, pl.Int32),
    )  # fmt: skip


def ranked(rows: pl.DataFrame, order: dict[str, int]) -> pl.DataFrame:
    """rows with their contig's rank in the reference (CohortError naming contigs it has not)."""
    unknown = set(rows["chrom"].unique()) - set(order)
    if unknown:
        raise UnknownContig(f"contig(s) {', '.join(sorted(unknown)[:3])} not in the reference")
    return rows.with_columns(
        contig_rank=pl.col("chrom").replace_strict(order, return_dtype=pl.Int64)
    )


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
    rows = ranked(rows, {name: i for i, name in enumerate(contigs)})
    frame, kept = pooled_frame(rows, samples, filters)
    return frame, read, kept


def pooled_frame(
    rows: pl.DataFrame, samples: Sequence[str], filters: Filters
) -> tuple[pl.DataFrame, dict[str, int]]:
    """The table's rows (in modkit's order) of the samples' rows (read_sample's, ranked), and
    per sample those of its sites the table kept."""
    if filters.min_sample_coverage > 0:
        rows = rows.filter(pl.col("valid") >= filters.min_sample_coverage)
    key = ["chrom", "start", "code", "strand"]
    pooled = (
        rows.sort("sample")
        .group_by(key, maintain_order=True)
        .agg(
            pl.col("end").first(),
            pl.col("contig_rank").first(),
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
    codes = pooled["code"].unique().to_list()
    code_rank = {c: i for i, c in enumerate(sorted(codes, key=code_key))}
    frame = pooled.with_columns(
        strand_rank=pl.col("strand").replace_strict(STRAND_ORDER, return_dtype=pl.Int64),
        code_rank=pl.col("code").replace_strict(code_rank, return_dtype=pl.Int64),
    ).sort("contig_rank", "start", "strand_rank", "code_rank")
    kept = per_sample(rows.join(frame.select(key), on=key, how="semi", nulls_equal=True), samples)
    return frame, kept


def per_sample(rows: pl.DataFrame, samples: Sequence[str]) -> dict[str, int]:
    """The sites of each sample among rows (by its index), 0 for one without any."""
    counts = dict(rows.group_by("sample").len().iter_rows())
    return {name: counts.get(i, 0) for i, name in enumerate(samples)}


def cohort_lines(frame: pl.DataFrame, samples: Sequence[str]) -> Iterator[str]:
    """The table's lines (without the header): modkit merge's 18 columns, then the samples'."""
    text = cohort_text(frame, samples)
    yield from text.splitlines(keepends=True)


def cohort_text(frame: pl.DataFrame, samples: Sequence[str]) -> str:
    """cohort_lines' text, made column-wise (the percent computed once per distinct pair of
    N_mod and valid coverage)."""
    if frame.height == 0:
        return ""
    pairs = frame.select("n_mod", "valid").unique()
    percent = pairs.with_columns(
        percent=pl.Series([percent_modified(m, v) for m, v in pairs.iter_rows()], dtype=pl.String)
    )
    with_percent = frame.join(percent, on=["n_mod", "valid"], how="left", maintain_order="left")
    fields = ["chrom", "start", "end", "code", "valid", "strand", "start", "end",
              pl.lit(COLOUR), "valid", "percent", *COUNTS, *sample_columns(samples)]  # fmt: skip
    lines = with_percent.select(
        pl.concat_str([pl.col(f) if isinstance(f, str) else f for f in fields], separator="\t")
    ).to_series()
    return "\n".join(lines) + "\n"


class NotSorted(Exception):
    """A bedMethyl file not in the reference's contig order, by position."""


class SampleReader:
    """One sample's rows a batch at a time (read_sample's columns, ranked), with the sort key
    (contig rank, start) checked to never decrease."""

    SHIFT = 1 << 40  # key = contig rank * SHIFT + start

    def __init__(self, path: Path, index: int, order: dict[str, int], batch_bytes: int):
        self.path = Path(path)
        self.batches = polars_batches(path, READ_COLUMNS, batch_bytes)
        self.index, self.order = index, order
        self.pending = pl.DataFrame()
        self.done = False
        self.read = 0
        self.last = -1

    def pull(self) -> None:
        """Read batches until one has rows (or the file ends), after the pending rows."""
        while not self.done:
            try:
                batch = next(self.batches)
            except StopIteration:
                self.done = True
                return
            except pl.exceptions.PolarsError as err:
                raise CohortError(f"{self.path}: not a bedMethyl file: {err}") from err
            if batch.height == 0:
                continue
            rows = ranked(sample_rows(batch, self.index), self.order)
            rows = rows.with_columns(key=pl.col("contig_rank") * self.SHIFT + pl.col("start"))
            keys = rows["key"]
            if keys[0] < self.last or not keys.diff().drop_nulls().ge(0).all():
                raise NotSorted(str(self.path))
            self.last = keys[-1]
            self.read += rows.height
            self.pending = rows if self.pending.height == 0 else pl.concat([self.pending, rows])
            return

    def take_before(self, key: int | None) -> pl.DataFrame:
        """The pending rows before key (all with None), taken out."""
        if key is None or self.pending.height == 0:
            out, self.pending = self.pending, pl.DataFrame()
            return out
        cut = int(self.pending["key"].search_sorted(key, side="left"))
        out, self.pending = self.pending[:cut], self.pending[cut:]
        return out


def merged_chunks(
    beds: Sequence[tuple[str, Path]], contigs: Sequence[str], batch_bytes: int
) -> tuple[list[SampleReader], Iterator[pl.DataFrame]]:
    """The samples' readers, and their rows in consecutive runs of positions (each run every
    sample's rows there, read_sample's columns ranked): a k-way merge of the sorted files."""
    order = {name: i for i, name in enumerate(contigs)}
    readers = [SampleReader(path, i, order, batch_bytes) for i, (_, path) in enumerate(beds)]

    def chunks() -> Iterator[pl.DataFrame]:
        for reader in readers:
            reader.pull()
        while True:
            live = [r for r in readers if not r.done]
            # every row before the smallest last position of a live sample is complete
            boundary = min((r.last for r in live), default=None)
            parts = [r.take_before(boundary) for r in readers]
            parts = [part.drop("key") for part in parts if part.height]
            if parts:
                yield pl.concat(parts)
            if boundary is None:
                return
            for reader in live:
                if reader.last == boundary:
                    reader.pull()

    return readers, chunks()


def write_cohort_table(
    out: Path,
    beds: Sequence[tuple[str, Path]],
    contigs: Sequence[str],
    filters: Filters = Filters(),
    batch_bytes: int = BATCH_BYTES,
) -> Written:
    """Write the cohort table of beds ((sample, bedMethyl) in the run's order) to out, bgzipped
    with its tabix index (out.tbi); return what it wrote. Streamed (the module's Memory), or in
    memory at once when a file is not sorted (said on stdout, the job's log)."""
    samples = [name for name, _ in beds]
    try:
        return _write_streamed(out, beds, contigs, filters, batch_bytes)
    except NotSorted as err:
        print(
            f"cohort table: {err} is not in the reference's contig order by position: the "
            "table is made in memory at once (memory grows with the files)"
        )
    frame, read, kept = filtered_frame(beds, contigs, filters)
    write_indexed_bed(out, _text_blocks(samples, [frame]))
    return Written(frame.height, read, kept)


def _write_streamed(out, beds, contigs, filters, batch_bytes) -> Written:
    """write_cohort_table's k-way merge (NotSorted when a file is not sorted)."""
    samples = [name for name, _ in beds]
    readers, chunks = merged_chunks(beds, contigs, batch_bytes)
    rows = 0
    kept = dict.fromkeys(samples, 0)

    def frames() -> Iterator[pl.DataFrame]:
        nonlocal rows
        for chunk in chunks:
            frame, kept_here = pooled_frame(chunk, samples, filters)
            rows += frame.height
            for sample, count in kept_here.items():
                kept[sample] += count
            yield frame

    write_indexed_bed(out, _text_blocks(samples, frames()))
    return Written(rows, {s: r.read for s, r in zip(samples, readers, strict=True)}, kept)


def _text_blocks(samples: Sequence[str], frames: Iterable[pl.DataFrame]) -> Iterator[bytes]:
    """The table's text: the header, then the frames' rows, a block at a time."""
    yield header_line(samples).encode()
    for frame in frames:
        for start in range(0, frame.height, 100_000):
            yield cohort_text(frame.slice(start, 100_000), samples).encode()
