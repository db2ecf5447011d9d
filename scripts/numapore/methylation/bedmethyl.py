"""The bedMethyl format as `modkit pileup` writes it: 18 columns (chrom, start, end, mod code,
score, strand, start, end, colour, N_valid_cov, percent modified, N_mod, N_canonical,
N_other_mod, N_delete, N_fail, N_diff, N_nocall), tabs everywhere or (modkit 0.4.4's
`--mixed-delim`) single spaces between columns 10 to 18, an optional header line (`#` first in
modkit 0.6.1); its one writer and its one reader.

The columns are stated once (SCHEMA: modkit's header name, numapore's name, type); every reader
of the package goes through this module:

    read_bedmethyl(path)                 # rows (BedMethylRow), plain or gzip/BGZF
    fetch_rows(path, chrom, start, end)  # rows of a region (bgzipped, tabix-indexed)
    pandas_frame(path)                   # the rows as a pandas frame (BedMethylRow's columns)
    polars_frame(path, columns)          # chosen columns as a polars frame (genome scale)

numapore.pileup.engine writes through rows_text / format_row.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from numapore.base.textfiles import open_maybe_gzip

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

# The columns in order: modkit's --header name, numapore's name (a row's field, a frame's
# column), type. end, score, thickStart, thickEnd and color are not in a row: modkit writes them
# as start + 1, N_valid_cov, start, start + 1 and COLOUR.
SCHEMA: tuple[tuple[str, str, type], ...] = (
    ("chrom", "chrom", str),
    ("chromStart", "start", int),
    ("chromEnd", "end", int),
    ("name", "name", str),
    ("score", "score", int),
    ("strand", "strand", str),
    ("thickStart", "thick_start", int),
    ("thickEnd", "thick_end", int),
    ("color", "colour", str),
    ("valid_coverage", "valid_cov", int),
    ("percent_modified", "percent", str),
    ("count_modified", "n_mod", int),
    ("count_canonical", "n_canonical", int),
    ("count_other_mod", "n_other_mod", int),
    ("count_delete", "n_delete", int),
    ("count_fail", "n_fail", int),
    ("count_diff", "n_diff", int),
    ("count_nocall", "n_nocall", int),
)
COLUMNS = [header for header, _, _ in SCHEMA]  # modkit's header names
NAMES = [name for _, name, _ in SCHEMA]
INDEX = {name: i for i, name in enumerate(NAMES)}
TYPES = {name: kind for _, name, kind in SCHEMA}
HEADER_LINE = "\t".join(COLUMNS) + "\n"  # modkit's --header (alias --with-header)
COLOUR = "255,0,0"
_F32 = struct.Struct("<f")
_F32_BITS = struct.Struct("<I")


class BedMethylRow(NamedTuple):
    """One bedMethyl row (the columns that are not written from others, SCHEMA); percent is the
    text modkit writes (two decimals of a float32)."""

    chrom: str
    start: int
    name: str
    strand: str
    valid_cov: int
    percent: str
    n_mod: int
    n_canonical: int
    n_other_mod: int
    n_delete: int
    n_fail: int
    n_diff: int
    n_nocall: int

    @property
    def end(self) -> int:
        """The half-open end (a row is one base)."""
        return self.start + 1


# Where a row's fields are in a line (the counts are the last seven columns).
_CHROM, _START, _NAME, _STRAND, _VALID, _PERCENT = (
    INDEX[name] for name in ("chrom", "start", "name", "strand", "valid_cov", "percent")
)
_COUNTS = slice(INDEX["n_mod"], INDEX["n_nocall"] + 1)


def f32(x: float) -> float:
    """x rounded to single precision (one IEEE operation done in double then rounded gives the
    float32 result for + - * /, so chaining this reproduces Rust's f32 arithmetic)."""
    return _F32.unpack(_F32.pack(x))[0]


def f32_text(x: float) -> str:
    """x as Rust's Display writes an f32: the shortest digits that read back as the same
    float32 (of those, the nearest to it; a tie upwards), never an exponent (33.333336, 50,
    0.1, NaN, inf). Integer arithmetic, no numpy (the commands that print one start faster)."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    x = f32(x)
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    bits = _F32_BITS.unpack(_F32.pack(abs(x)))[0]
    exponent, fraction = bits >> 23, bits & 0x7FFFFF
    m = fraction | 1 << 23 if exponent else fraction
    shift = (exponent if exponent else 1) - 152  # x is 4m units of 2^shift
    # what reads back as x: [low, high] in those units (a power of two has a closer neighbour
    # below); a decimal on a midpoint reads back as the even neighbour
    low, value, high = 4 * m - (1 if fraction == 0 and exponent > 1 else 2), 4 * m, 4 * m + 2
    inclusive = m % 2 == 0
    scale, den = (1 << shift, 1) if shift >= 0 else (1, 1 << -shift)
    low, value, high = low * scale, value * scale, high * scale  # exact values: X / den
    k = math.floor(math.log10(high / den)) + 1
    while True:  # the largest place 10^k with a multiple j * 10^k in [low, high] / den
        if k >= 0:
            lo, hi, step = low, high, den * 10**k
        else:
            lo, hi, step = low * 10**-k, high * 10**-k, den
        first, last = -(-lo // step), hi // step
        if not inclusive:
            first += first * step == lo
            last -= last * step == hi
        if first <= last:
            break
        k -= 1
    near = (2 * (value if k >= 0 else value * 10**-k) + step) // (2 * step)  # a tie upwards
    digits = str(min(max(near, first), last))
    sign = "-" if x < 0 else ""
    if k >= 0:
        return sign + digits + "0" * k
    digits = digits.rjust(-k + 1, "0")
    return f"{sign}{digits[:k]}.{digits[k:]}".rstrip("0").rstrip(".")


def code_key(code: str) -> tuple:
    """modkit's order of modification codes, that of its rows (derived Ord of ModCodeRepr):
    one-letter codes by character, then ChEBI numbers by value."""
    return (1, int(code), "") if code.isdigit() else (0, 0, code)


def percent_modified(n_mod: int, valid_cov: int) -> str:
    """modkit's percent column: (n_mod as f32 / cov as f32) * 100f32, printed with two decimals
    (correctly rounded, as Rust's {:.2} does)."""
    if valid_cov == 0:
        return "NaN"
    return f"{f32(f32(n_mod / valid_cov) * 100.0):.2f}"


def format_row(row: BedMethylRow, mixed_delim: bool = False) -> str:
    """The row's line (with its newline): tabs, or spaces between columns 10 to 18."""
    sep = " " if mixed_delim else "\t"
    start, end = row.start, row.start + 1
    head = f"{row.chrom}\t{start}\t{end}\t{row.name}\t{row.valid_cov}\t{row.strand}\t"
    head += f"{start}\t{end}\t{COLOUR}\t"
    tail = (
        row.valid_cov, row.percent, row.n_mod, row.n_canonical, row.n_other_mod, row.n_delete,
        row.n_fail, row.n_diff, row.n_nocall,
    )  # fmt: skip
    return head + sep.join(map(str, tail)) + "\n"


def rows_text(chrom: str, rows, mixed_delim: bool = False) -> str:
    """The pileup's one writer of rows in Python: the lines of rows given as (start, strand,
    name, valid_cov, n_mod, n_canonical, n_other_mod, n_delete, n_fail, n_diff, n_nocall)
    on chrom (numapore.pileup's text.c, put_row, writes the same lines)."""
    out = []
    for pos, strand, name, cov, n_mod, *counts in rows:
        row = BedMethylRow(chrom, pos, name, strand, cov, percent_modified(n_mod, cov), n_mod,
                           *counts)  # fmt: skip
        out.append(format_row(row, mixed_delim))
    return "".join(out)


def parse_line(line: str) -> BedMethylRow:
    """One bedMethyl line (tab-only or mixed delimiters) as a row; ValueError if malformed."""
    parts = line.rstrip("\n").split("\t")
    if len(parts) == 10:  # mixed: the last tab-separated field holds columns 10-18
        parts = parts[:9] + parts[9].split(" ")
    if len(parts) != len(SCHEMA):
        raise ValueError(f"bedMethyl line has {len(parts)} columns, not 18: {line.rstrip()!r}")
    return BedMethylRow(
        parts[_CHROM], int(parts[_START]), parts[_NAME], parts[_STRAND], int(parts[_VALID]),
        parts[_PERCENT], *map(int, parts[_COUNTS]),
    )  # fmt: skip


def is_header(line: str) -> bool:
    """Whether a file's first line is modkit's header line (`--header`, `#` first in 0.6.1)."""
    return line.startswith(("chrom\tchromStart", "#chrom\tchromStart"))


def read_bedmethyl(path: str | os.PathLike) -> Iterator[BedMethylRow]:
    """The rows of a bedMethyl file, plain or gzip/BGZF-compressed (a header line, if any, is
    skipped)."""
    with open_maybe_gzip(path, "rt") as handle:
        for number, line in enumerate(handle, 1):
            if number == 1 and is_header(line):
                continue
            if line.strip():
                yield parse_line(line)


def fetch_rows(path: str, chrom: str, start: int, end: int) -> Iterator[BedMethylRow]:
    """The rows of a bgzipped, tabix-indexed bedMethyl in [start, end) of chrom (none when the
    index has no such contig)."""
    import pysam

    with pysam.TabixFile(path) as tabix:
        if chrom not in tabix.contigs:
            return
        for line in tabix.fetch(chrom, max(0, start), end):
            yield parse_line(line)


def pandas_frame(path: str | os.PathLike) -> pd.DataFrame:
    """A bedMethyl file's rows (read_bedmethyl) as a pandas frame, BedMethylRow's columns."""
    import pandas as pd

    return pd.DataFrame(read_bedmethyl(path), columns=BedMethylRow._fields)


def polars_frame(path: str | os.PathLike, columns: Sequence[str] = NAMES) -> pl.DataFrame:
    """Columns (numapore's names) of a tab-delimited bedMethyl file, plain or gzip/BGZF (`#`
    lines skipped), as a polars frame: the whole file parsed in one call, for genome-scale files.
    Raises polars' errors for what is not a bedMethyl."""
    with open_maybe_gzip(path, "rb") as handle:
        return polars_rows(handle.read(), columns)


def polars_rows(data: bytes, columns: Sequence[str] = NAMES) -> pl.DataFrame:
    """Columns (numapore's names) of whole bedMethyl lines (`#` lines skipped) as a polars
    frame. Raises polars' errors for what is not a bedMethyl."""
    import polars as pl

    kinds = {name: pl.Int64 if TYPES[name] is int else pl.String for name in columns}
    if not data.strip():
        return pl.DataFrame(schema=kinds)
    table = pl.read_csv(
        data, separator="\t", has_header=False, new_columns=NAMES, comment_prefix="#",
        schema_overrides=kinds,
    )  # fmt: skip
    return table.select(columns)


def polars_batches(
    path: str | os.PathLike, columns: Sequence[str] = NAMES, batch_bytes: int = 16 << 20
) -> Iterator[pl.DataFrame]:
    """polars_frame's rows a batch of whole lines (about batch_bytes of text) at a time, in the
    file's order: memory bounded by the batch, not the file."""
    with open_maybe_gzip(path, "rb") as handle:
        rest = b""
        while True:
            block = handle.read(batch_bytes)
            data = rest + block
            cut = data.rfind(b"\n") + 1 if block else len(data)
            rest = data[cut:]
            if cut:
                yield polars_rows(data[:cut], columns)
            if not block:
                return
