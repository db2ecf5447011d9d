"""The reads of a sample's raw signal files (FAST5 or POD5), from their layout alone: read id,
file, whether it holds signal, and the files that cannot be read. Made by the signal_census job,
saved as Parquet + TSV, and read by the read accounting (numapore.report.accounting).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from numapore.base.atomic import atomic_output
from numapore.inputs.readids import rows_frame
from numapore.signal.fast5 import list_fast5, read_layout

CENSUS_SCHEMA = {"read_id": pl.String, "file": pl.String, "has_signal": pl.Boolean}
CENSUS_FILES_SCHEMA = {"file": pl.String, "reads": pl.Int64, "unreadable": pl.String}


@dataclass
class Fast5Census:
    """The reads of a set of FAST5 files: a table of read_id, file, has_signal (a non-empty
    Signal dataset), each id once (its first file), and the unreadable files."""

    files: int = 0
    reads: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CENSUS_SCHEMA))
    reads_per_file: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    repeated: int = 0  # read ids met again in a later file (the conversion rejects them)

    @property
    def total(self) -> int:
        """Reads in the readable files, repeated ids included."""
        return sum(self.reads_per_file.values())

    def add_reads(self, rows: Iterable[tuple[str, str, bool]]) -> None:
        """Take (read_id, file, has_signal) rows, in file order; a repeated id keeps its first."""
        table = pl.concat([self.reads, rows_frame(rows, CENSUS_SCHEMA)])
        self.reads = table.unique("read_id", keep="first", maintain_order=True)
        self.repeated = table.height - self.reads.height


def fast5_census(inputs: Iterable[str | os.PathLike]) -> Fast5Census:
    """Count and name the reads of FAST5 files/folders (layout only, the signal is not read)."""
    census = Fast5Census()

    def rows() -> Iterator[tuple[str, str, bool]]:
        for path in map(str, list_fast5(inputs)):
            census.files += 1
            try:
                reads = read_layout(path)
            except Exception as err:  # noqa: BLE001 - any library error: the file is unreadable
                census.unreadable[path] = f"{type(err).__name__}: {err}"
                continue
            census.reads_per_file[path] = len(reads)
            yield from ((rid, path, has_signal) for rid, has_signal in reads)

    census.add_reads(rows())
    return census


def pod5_census(inputs: Iterable[str | os.PathLike]) -> Fast5Census:
    """Count and name the reads of POD5 files/folders (with the pod5 library)."""
    import pod5

    from numapore.signal.inputs import list_pod5

    census = Fast5Census()

    def rows() -> Iterator[tuple[str, str, bool]]:
        for path in map(str, list_pod5([Path(p) for p in inputs])):
            census.files += 1
            try:
                with pod5.Reader(path) as reader:
                    ids = [str(r.read_id) for r in reader.reads()]
            except Exception as err:  # noqa: BLE001 - any library error: the file is unreadable
                census.unreadable[path] = f"{type(err).__name__}: {err}"
                continue
            census.reads_per_file[path] = len(ids)
            yield from ((rid, path, True) for rid in ids)

    census.add_reads(rows())
    return census


def write_census(
    census: Fast5Census, reads_path: str | os.PathLike, files_path: str | os.PathLike
) -> None:
    """Save a census (read_census loads it): its reads table as Parquet, and its files as a TSV
    of file, reads, unreadable (why it could not be read; empty for a readable file)."""
    files = [(path, n, "") for path, n in census.reads_per_file.items()]
    files += [(path, None, why) for path, why in census.unreadable.items()]
    table = pl.DataFrame(files, schema=CENSUS_FILES_SCHEMA, orient="row")
    with atomic_output(reads_path) as tmp:
        census.reads.write_parquet(tmp)
    with atomic_output(files_path) as tmp:
        table.write_csv(tmp, separator="\t", null_value="NA")


def read_census(reads_path: str | os.PathLike, files_path: str | os.PathLike) -> Fast5Census:
    """A census saved by write_census."""
    files = pl.read_csv(
        files_path,
        separator="\t",
        schema=CENSUS_FILES_SCHEMA,
        null_values={"reads": "NA"},  # an unreadable file's (a file may be named NA)
    )
    readable = pl.col("unreadable").is_null()  # written empty: a reason never is
    census = Fast5Census(files=files.height, reads=pl.read_parquet(reads_path))
    census.reads_per_file = dict(files.filter(readable).select("file", "reads").iter_rows())
    census.unreadable = dict(files.filter(~readable).select("file", "unreadable").iter_rows())
    census.repeated = census.total - census.reads.height
    return census
