"""Per-site methylation from nanopolish call-methylation tables, for every motif it calls.

The frequency table is nanopolish's own calculate_methylation_frequency.py output, byte for byte
(tests run that script on real call tables): a call counts when |log_lik_ratio| >= threshold x
num_motifs; it is methylated when log_lik_ratio > 0; a group adds num_motifs called sites, or,
with split_groups, one site per motif of its sequence (that script splits on "CG" whatever the
motif; here each motif splits on its own pattern, so non-CpG tables agree with it unsplit only).

The calls are read a block at a time (polars parses, DuckDB aggregates within a memory limit):
only per-group counters and sequences are kept, never the call rows, and the text is written a
chunk of rows at a time; percentages are formatted by Python's % on each distinct ratio, as the
reference does. The bedMethyl is not made here: it is the pileup (numapore.pileup.engine,
modkit's semantics) of the modBAM that numapore.nanopolish.modbam makes from the same calls.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:  # imported where used: the accounting reads call tables with polars alone
    import duckdb
    import pyarrow as pa

from numapore.nanopolish import calls_core
from numapore.nanopolish.calls import CALL_COLUMNS
from numapore.methylation.motifs import Motif

FREQUENCY_COLUMNS = [
    "chromosome",
    "start",
    "end",
    "num_motifs_in_group",
    "called_sites",
    "called_sites_methylated",
    "methylated_frequency",
    "group_sequence",
]


@dataclass
class FrequencySummary:
    """What frequency_outputs wrote and the call figures the rule log reports."""

    rows: int  # frequency table rows
    calls: int
    confident_calls: int  # |llr| >= threshold (not x num_motifs)
    confident_unmethylated: int


READ_BLOCK = 8 << 20  # bytes of call table parsed at a time
DUCKDB_MEMORY = "2GB"  # DuckDB's own limit for the per-group aggregation


def text_blocks(path: Path, skip_header: bool = True) -> Iterator[bytes]:
    """A text file's contents in blocks of about READ_BLOCK bytes, each ending at a line end,
    read with plain reads: a memory-mapped table (polars' scan_csv) would count whole toward
    the process's resident memory, 5 GB for a 50 M-row table."""
    with open(path, "rb") as handle:
        if skip_header:
            handle.readline()
        rest = b""
        while block := handle.read(READ_BLOCK):
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            if cut:
                yield block[:cut]
        if rest:
            yield rest


def table_blocks(path: Path, types: dict[str, pl.DataType]) -> Iterator[pl.DataFrame]:
    """The columns `types` names of a tab-separated table with a header, a block of rows at a
    time (text_blocks), parsed by polars."""
    with open(path) as handle:
        header = handle.readline().rstrip("\n").split("\t")
    indices = sorted(header.index(name) for name in types)  # polars keeps the file's order
    names = [header[i] for i in indices]

    def parse(block: bytes) -> pl.DataFrame:
        return pl.read_csv(
            block,
            has_header=False,
            separator="\t",
            quote_char=None,
            columns=indices,
            new_columns=names,
            schema_overrides={name: types[name] for name in names},
        ).select(list(types))

    # The next block is parsed while the consumer works on this one (polars frees the GIL).
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = None
        for block in text_blocks(path):
            parsed = pool.submit(parse, block)
            if pending is not None:
                yield pending.result()
            pending = parsed
        if pending is not None:
            yield pending.result()


CALL_TYPES = {
    "chromosome": pl.String(),
    "start": pl.Int64(),
    "end": pl.Int64(),
    "num_motifs": pl.Int64(),
    "log_lik_ratio": pl.Float64(),
    "sequence": pl.String(),
}  # the call table's columns the per-site outputs need


def check_call_header(path: Path) -> list[str]:
    """A call table's column names; a clear error if its header is not nanopolish's."""
    with open(path) as handle:
        header = handle.readline().rstrip("\n").split("\t")
    missing = set(CALL_COLUMNS) - set(header)
    if missing:
        raise ValueError(f"{path}: not a nanopolish call table, missing {sorted(missing)}")
    return header


def call_batches(
    path: Path, row_numbers: bool, chromosomes: dict[str, int] | None = None
) -> pa.RecordBatchReader:
    """The call table's CALL_TYPES columns as Arrow batches (with each row's number if asked),
    for DuckDB to aggregate: polars parses a block at a time, DuckDB never sees the text.
    With `chromosomes` (filled as names come), the chromosome is its number there, and the
    sequence's hash is added: numbers make DuckDB's group keys small and quick to compare."""
    import pyarrow as pa

    check_call_header(path)
    schema = pl.Schema({"row": pl.Int64(), **CALL_TYPES} if row_numbers else CALL_TYPES)
    if chromosomes is not None:
        schema.update(chromosome=pl.UInt32(), sequence_hash=pl.UInt64())

    def batches() -> Iterator[pa.RecordBatch]:
        row = 0
        for block in table_blocks(path, CALL_TYPES):
            if row_numbers:
                block = block.with_row_index("row", offset=row).cast({"row": pl.Int64})
            row += block.height
            if chromosomes is not None:
                for name in block["chromosome"].unique():
                    chromosomes.setdefault(name, len(chromosomes))
                sequence = pl.col("sequence")
                block = block.with_columns(
                    pl.col("chromosome").replace_strict(chromosomes, return_dtype=pl.UInt32),
                    sequence_hash=pl.when(sequence.is_not_null()).then(sequence.hash()),
                )
            yield from block.select(schema.names()).to_arrow().to_batches()

    arrow_schema = pl.DataFrame(schema=schema).to_arrow().schema
    return pa.RecordBatchReader.from_batches(arrow_schema, batches())


SQL_TYPES = {
    "chromosome": "VARCHAR",
    "start": "BIGINT",
    "end": "BIGINT",
    "num_motifs": "BIGINT",
    "log_lik_ratio": "DOUBLE",
    "sequence": "VARCHAR",
}  # fmt: skip  (CALL_TYPES in SQL)


def call_table_scan(path: Path) -> str:
    """DuckDB's own reader over a call table, as SQL: parallel, streamed, typed as nanopolish
    writes it (CALL_TYPES' columns; the others read as text and left alone), with each
    sequence's hash. Used where the rows' order does not matter (no split groups)."""
    header = check_call_header(path)
    columns = ", ".join(f"'{name}': '{SQL_TYPES.get(name, 'VARCHAR')}'" for name in header)
    quoted = str(path).replace("'", "''")
    return f"""(SELECT *, hash(sequence) AS sequence_hash FROM read_csv('{quoted}',
        delim = '\t', header = true, quote = '', escape = '', auto_detect = false,
        columns = {{{columns}}}))"""


@contextmanager
def duckdb_session(scratch: Path | None) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB held to DUCKDB_MEMORY (it spills to a temporary folder in scratch,
    or the system's, beyond that)."""
    import duckdb

    with tempfile.TemporaryDirectory(dir=scratch, prefix="numapore-duckdb.") as spill:
        config = {
            "memory_limit": DUCKDB_MEMORY,
            "temp_directory": spill,
            "preserve_insertion_order": False,
        }
        con = duckdb.connect(config=config)
        con.execute("SET enable_progress_bar = false")  # a rule log is no terminal
        try:
            yield con
        finally:
            con.close()


def group_counts(
    path: Path, threshold: float, first_rows: bool = True, scratch: Path | None = None
) -> pl.DataFrame:
    """One row per group of a call table (chromosome, start, end, sequence, num_motifs): the
    index of its first confident row (nanopolish's script keeps that call's group size and
    sequence), confident calls (|llr| >= threshold x num_motifs), methylated ones among them,
    the others (failed), the per-call figures, and the chromosome's rank in sorted order.

    Streamed (DuckDB's aggregation over polars-parsed blocks, DUCKDB_MEMORY at most, spilling
    to scratch beyond): memory holds numbers and one sequence per group, never the rows. A key
    (chromosome, start, end) has one sequence and group size in nanopolish's tables (they are
    the reference's); only if one has several (by their hashes) does a second pass keep them
    apart. first_rows=False leaves first_row null when the keys need no order (no split
    groups): less to hold per group.
    """
    import duckdb
    import pyarrow as pa

    confident = f"abs(log_lik_ratio) >= {float(threshold)!r} * num_motifs"
    strong = f"abs(log_lik_ratio) >= {float(threshold)!r}"
    counts = f"""
        count(*) FILTER ({confident})::UINTEGER AS valid,
        count(*) FILTER ({confident} AND log_lik_ratio > 0)::UINTEGER AS methylated,
        count(*) FILTER (NOT ({confident}))::UINTEGER AS failed,
        count(*)::UINTEGER AS calls,
        count(*) FILTER ({strong})::UINTEGER AS strong,
        count(*) FILTER ({strong} AND log_lik_ratio <= 0)::UINTEGER AS strong_unmethylated,
        {{first_row}} AS first_row"""
    first_row = f"min(row) FILTER ({confident})"
    # One pass: the sequence is carried, its hash tells whether a key has several.
    single = """
        SELECT chromosome, start, "end", {counts}, any_value(sequence) AS sequence,
            min(sequence_hash) != max(sequence_hash) OR min(num_motifs) != max(num_motifs)
                AS mixed,
            min(num_motifs) AS num_motifs
        FROM {source} GROUP BY chromosome, start, "end" """
    several = f"""
        SELECT chromosome, start, "end", sequence, num_motifs, {counts.format(first_row=first_row)},
            false AS mixed
        FROM calls GROUP BY chromosome, start, "end", sequence, num_motifs"""
    try:
        with duckdb_session(scratch) as con:
            if first_rows:  # rows numbered in file order: polars parses, DuckDB aggregates
                numbers: dict[str, int] = {}  # chromosome -> its number in DuckDB's keys
                calls = call_batches(path, True, numbers)  # noqa: F841 (read by name)
                query = single.format(counts=counts.format(first_row=first_row), source="calls")
                groups = con.sql(query).pl()
                names = pl.Series(list(numbers), dtype=pl.String)
                groups = groups.with_columns(chromosome=names.gather(groups["chromosome"]))
            else:  # any order will do: DuckDB's own reader, on every core
                first = counts.format(first_row="NULL::BIGINT")
                source = call_table_scan(path)
                groups = con.sql(single.format(counts=first, source=source)).pl()
            if groups["mixed"].any():  # a second pass keeps each sequence's calls apart
                calls = call_batches(path, True)  # noqa: F841 (the order matters then)
                groups = con.sql(several).pl()
    except (duckdb.Error, pl.exceptions.PolarsError, pa.ArrowException) as err:
        raise ValueError(f"{path}: not a readable nanopolish call table: {err}") from err
    groups = groups.drop("mixed").with_columns(
        pl.col("chromosome").cast(pl.Categorical()), pl.col("num_motifs").cast(pl.Int64)
    )
    # Rank of each chromosome in Python's (the reference's) string order, for integer sorts.
    names = groups.select(pl.col("chromosome").unique()).select(
        pl.col("chromosome").to_physical().alias("id"), pl.col("chromosome").cast(pl.String)
    )
    order = sorted(names.iter_rows(), key=lambda row: row[1])
    ids, ranks = [i for i, _ in order], list(range(len(order)))
    rank = pl.col("chromosome").to_physical().replace_strict(ids, ranks, return_dtype=pl.Int64)
    return groups.with_columns(rank=rank)


def formatted(pairs: pl.DataFrame, numerator: str, denominator: str, fmt: str) -> pl.DataFrame:
    """Each distinct (numerator, denominator) pair with fmt % (numerator / denominator) as Python
    formats it (the reference scripts' rounding, byte for byte); few pairs, so Python is cheap."""
    pairs = pairs.select(numerator, denominator).unique()
    text = [fmt % (n / d) for n, d in pairs.iter_rows()]
    return pairs.with_columns(text=pl.Series(text, dtype=pl.String))


def motif_offsets(motif: Motif) -> pl.Expr:
    """Offsets of the motif's sites in a group's sequence, from its first site."""
    found = (
        pl.col("sequence").str.find_many(motif.literals, overlapping=True).cast(pl.List(pl.Int64))
    )
    return found - found.list.min()


def frequency_table(groups: pl.DataFrame, motif: Motif, split_groups: bool) -> pl.DataFrame:
    """nanopolish's frequency rows from group_counts, sorted as its script sorts them, numbers
    only: `group` is the row of groups whose sequence the row shows (null: "split-group")."""
    called = groups.lazy().with_row_index("group").filter(pl.col("valid") > 0)
    key = ["rank", "start", "end"]
    whole = called.select(
        "chromosome",
        *key,
        "first_row",
        group_size="num_motifs",
        group=pl.col("group"),
        called=pl.col("valid") * pl.col("num_motifs"),
        methylated=pl.col("methylated") * pl.col("num_motifs"),
    )
    if split_groups:  # one key per motif of a group, 1 site per call each
        split = (
            called.filter(pl.col("num_motifs") > 1)
            .with_columns(offset=motif_offsets(motif))
            .explode("offset", empty_as_null=True)
            .drop_nulls("offset")
            .select(
                "chromosome",
                "rank",
                start=pl.col("start") + pl.col("offset"),
                end=pl.col("start") + pl.col("offset"),
                first_row="first_row",
                group_size=pl.lit(1, pl.Int64),
                group=pl.lit(None, pl.get_index_type()),
                called=pl.col("valid").cast(pl.Int64),
                methylated=pl.col("methylated").cast(pl.Int64),
            )
        )
        whole = pl.concat([whole.filter(pl.col("group_size") <= 1), split])
    table = whole.sort(key).collect()
    repeated = pl.all_horizontal(pl.col(k) == pl.col(k).shift() for k in key).any()
    if table.select(repeated).item():
        # Keys seen through several groups: nanopolish's script keeps the first call's.
        table = (
            table.lazy()
            .group_by(key)
            .agg(
                pl.col("chromosome").first(),
                pl.col("group_size", "group").sort_by("first_row").first(),
                pl.col("called", "methylated").sum(),
            )
            .sort(key)
            .collect()
        )
    return table.filter(pl.col("called") > 0).select(
        "chromosome", "start", "end", "group_size", "called", "methylated", "group"
    )


def frequency_rows(chunk: pl.DataFrame, sequences: pl.Series, text: pl.DataFrame) -> pl.DataFrame:
    """frequency_table rows as nanopolish's columns: each group's sequence, the frequency as
    text (formatted's pairs)."""
    sequence = sequences.gather(chunk["group"].fill_null(0))
    return chunk.join(text, on=["methylated", "called"], how="left", maintain_order="left").select(
        "chromosome",
        "start",
        "end",
        num_motifs_in_group="group_size",
        called_sites="called",
        called_sites_methylated="methylated",
        methylated_frequency="text",
        group_sequence=pl.when(pl.col("group").is_null())
        .then(pl.lit("split-group"))
        .otherwise(sequence),
    )


WRITE_CHUNK = 1_000_000  # rows formatted at a time: the text columns of a chunk, not the table's


def table_text(table: pl.DataFrame, header: bool, rows=lambda chunk: chunk) -> Iterator[bytes]:
    """table as tab-separated text, unquoted, a chunk of rows(chunk) at a time."""
    options = {"separator": "\t", "quote_style": "never", "line_terminator": "\n"}
    for i, chunk in enumerate(table.iter_slices(WRITE_CHUNK)):
        text = io.BytesIO()
        rows(chunk).write_csv(text, include_header=header and i == 0, **options)
        yield text.getvalue()
    if header and table.height == 0:
        text = io.BytesIO()
        rows(table).write_csv(text, include_header=True, **options)
        yield text.getvalue()


def write_text(path: Path, chunks: Iterable[bytes]) -> None:
    """Write chunks of text to path."""
    with open(path, "wb") as out:
        for chunk in chunks:
            out.write(chunk)


def write_frequency(groups: pl.DataFrame, motif: Motif, split_groups: bool, tsv: Path) -> int:
    """Write nanopolish's frequency table of group_counts' groups to tsv; its rows."""
    frequency = frequency_table(groups, motif, split_groups)
    text = formatted(frequency, "methylated", "called", "%.3f")
    rows = partial(frequency_rows, sequences=groups["sequence"], text=text)
    write_text(tsv, table_text(frequency, header=True, rows=rows))
    return frequency.height


def frequency_outputs(
    calls: Path, motif: Motif, threshold: float, split_groups: bool, tsv: Path
) -> FrequencySummary:
    """Write the frequency table (tsv) of a call table, in one streamed pass over its rows;
    memory holds one entry per group (numbers, and a sequence), the text is made a chunk of
    rows at a time. The compiled core (calls_core) does the counting when it is built."""
    header = check_call_header(calls)
    totals = ["calls", "strong", "strong_unmethylated"]
    if calls_core.ENABLED:
        with calls_core.aggregated(calls, header, threshold) as table:
            groups = calls_core.groups_frame(table)  # its sequences live in the table's memory
            counts = groups.select(pl.col(totals).cast(pl.Int64).sum()).row(0)
            return FrequencySummary(write_frequency(groups, motif, split_groups, tsv), *counts)
    groups = group_counts(calls, threshold, first_rows=split_groups, scratch=tsv.parent)
    counts = groups.select(pl.col(totals).cast(pl.Int64).sum()).row(0)
    return FrequencySummary(write_frequency(groups, motif, split_groups, tsv), *counts)
