"""Read ids as compact polars columns (built a chunk at a time: memory never holds every id as a
Python string), and the alignment check that counts them (reads in, primary alignments mapped).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

import polars as pl

from numapore.base.atomic import atomic_output
from numapore.base.errors import AccountingError, empty_sample

CHUNK = 500_000  # rows gathered in Python lists before they become a compact polars chunk


def chunks(items: Iterable, size: int = CHUNK) -> Iterator[list]:
    """Items in lists of up to size."""
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def rows_frame(rows: Iterable[tuple], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Rows as one polars frame, built CHUNK rows at a time (memory holds compact columns,
    never all the Python tuples)."""
    parts = []
    for chunk in chunks(rows):
        columns = zip(schema, zip(*chunk, strict=True), strict=True)  # row tuples -> columns
        parts.append(pl.DataFrame(dict(columns), schema=schema))
    return pl.concat(parts) if parts else pl.DataFrame(schema=schema)


class IdColumnBuilder:
    """Strings gathered into one compact polars column, CHUNK at a time: memory holds compact
    chunks, never every string as a Python object. add() one at a time (a loop that does other
    work per read), or extend() with a list (id_column)."""

    def __init__(self) -> None:
        self.parts: list[pl.Series] = []
        self.pending: list[str] = []

    def add(self, value: str) -> None:
        """One more string."""
        self.pending.append(value)
        if len(self.pending) >= CHUNK:
            self.extend([])

    def extend(self, values: list[str]) -> None:
        """The strings added so far, then values, as compact chunks."""
        for chunk in (self.pending, values):
            if chunk:
                self.parts.append(pl.Series(chunk, dtype=pl.String))
        self.pending = []

    def column(self) -> pl.Series:
        """Every string added, in order."""
        self.extend([])
        return pl.concat(self.parts) if self.parts else pl.Series([], dtype=pl.String)


def repeats(ids: pl.Series) -> pl.Series:
    """Each id's repeats: every occurrence after its first."""
    return ids.filter(~ids.is_first_distinct())


def id_column(values: Iterable[str]) -> pl.Series:
    """Strings as one compact polars column, built CHUNK values at a time."""
    column = IdColumnBuilder()
    for chunk in chunks(values):
        column.extend(chunk)
    return column.column()


# A table of read ids (one column, read_id) that staging writes beside reads it parsed anyway:
# later jobs count and join the ids without reading a gigabyte of FASTQ again.
READ_ID_TABLE = ".ids.parquet"


def read_id_column(path: str | os.PathLike) -> pl.Series:
    """The read ids of a FASTA/FASTQ file (gzip allowed), or of a read id table (a name ending
    in READ_ID_TABLE, write_read_id_table), in order, as a polars column."""
    if str(path).endswith(READ_ID_TABLE):
        return pl.read_parquet(path, columns=["read_id"])["read_id"]
    import pysam  # here: the census job uses this module's columns and reads no reads file

    with pysam.FastxFile(str(path)) as fastx:
        return id_column(rec.name for rec in fastx)


def write_read_id_table(ids: pl.Series, path: str | os.PathLike) -> None:
    """Read ids, in order, as a read id table at path (its name ends in READ_ID_TABLE),
    complete or absent."""
    if not str(path).endswith(READ_ID_TABLE):
        raise ValueError(f"{path}: a read id table's name ends in {READ_ID_TABLE}")
    with atomic_output(Path(path)) as tmp:
        pl.DataFrame({"read_id": ids}).write_parquet(tmp)


def read_ids(path: str | os.PathLike) -> tuple[pl.Series, pl.Series]:
    """The read ids of a FASTA/FASTQ file in order, and each id's repeats (every occurrence
    after its first), as polars columns."""
    ids = read_id_column(path)
    return ids, repeats(ids)


def unique_read_ids(path: str | os.PathLike, sample: str) -> pl.Series:
    """The read ids of a reads file; AccountingError naming the file if an id repeats."""
    ids, repeated = read_ids(path)
    if len(repeated):
        shown = ", ".join(repeated.unique().sort().head(3))
        raise AccountingError(
            f"sample '{sample}': reads file {Path(path).resolve()} repeats {len(repeated)} read "
            f"id(s) (e.g. {shown}); nanopolish would call such reads twice: remove the duplicates"
        )
    return ids


def none_mapped_reason(
    reads_in: int, source: str | os.PathLike, reference: str, aligner: str
) -> str:
    """Why a sample whose reads all went unmapped is empty: the reads file and the reference."""
    return (
        f"none of its {reads_in} reads mapped to the reference {reference} with {aligner} "
        f"(reads file {source}): is it the right reference (do its contigs include the "
        "sequenced genome)?"
    )


def alignment_summary(
    flagstat: dict, reads_in: int, sample: str, aligner: str, reference: str,
    source: str | os.PathLike, allow_empty: bool = False,
) -> str:  # fmt: skip
    """The alignment check's table (reads in: the count of the staged reads' unique ids, as
    unique_read_ids gives them, or the BAM's primary records when the reads streamed into the
    aligner; primary alignments mapped) from samtools flagstat's JSON;
    EmptySample when nothing mapped unless allow_empty (source: the user's reads file that the
    reads were staged from, for the message)."""
    mapped = flagstat["QC-passed reads"]["primary mapped"]
    if mapped == 0:
        why = none_mapped_reason(reads_in, source, reference, aligner)
        empty_sample(sample, why, allow_empty)
    return (
        "sample\taligner\treads_in\tprimary_mapped\tprimary_mapped_fraction\n"
        f"{sample}\t{aligner}\t{reads_in}\t{mapped}\t{mapped / reads_in:.4f}\n"
    )


def short_read_summary(
    flagstat: dict, fragments: int, sample: str, aligner: str, reference: str, paired: bool,
    source: str | os.PathLike, allow_empty: bool = False,
) -> str:  # fmt: skip
    """The accounting of a short-read sample from samtools flagstat's JSON of its BAM: reads and
    pairs in (fragments: the R1 file's unique read ids; pairs count twice), primary alignments
    mapped, reads properly paired, primary duplicates. AccountingError when the BAM's primary
    records are not the reads in (a read lost or doubled); EmptySample when nothing mapped
    unless allow_empty."""
    counts = flagstat["QC-passed reads"]
    reads_in = fragments * (2 if paired else 1)
    primary = counts["primary"] + flagstat["QC-failed reads"]["primary"]
    if primary != reads_in:
        raise AccountingError(
            f"sample '{sample}': its BAM holds {primary} primary records but {reads_in} reads "
            f"went in ({aligner}); reads were lost or doubled"
        )
    mapped = counts["primary mapped"]
    if mapped == 0:
        why = none_mapped_reason(reads_in, source, reference, aligner)
        empty_sample(sample, why, allow_empty)
    return (
        "sample\taligner\treads_in\tpairs_in\tprimary_mapped\tprimary_mapped_fraction"
        "\tproperly_paired\tduplicates\n"
        f"{sample}\t{aligner}\t{reads_in}\t{fragments if paired else 0}\t{mapped}"
        f"\t{mapped / reads_in:.4f}\t{counts['properly paired']}"
        f"\t{counts['primary duplicates']}\n"
    )
