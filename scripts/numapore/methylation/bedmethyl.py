"""The bedMethyl format as `modkit pileup` writes it: 18 columns (chrom, start, end, mod code,
score, strand, start, end, colour, N_valid_cov, percent modified, N_mod, N_canonical,
N_other_mod, N_delete, N_fail, N_diff, N_nocall), tabs everywhere or (modkit 0.4.4's
`--mixed-delim`) single spaces between columns 10 to 18, an optional header line (`#` first in
modkit 0.6.1), and a reader.

numapore.pileup.engine writes through format_row; tests and downstream code read through
read_bedmethyl.
"""

from __future__ import annotations

import gzip
import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

COLUMNS = [
    "chrom", "chromStart", "chromEnd", "name", "score", "strand", "thickStart", "thickEnd",
    "color", "valid_coverage", "percent_modified", "count_modified", "count_canonical",
    "count_other_mod", "count_delete", "count_fail", "count_diff", "count_nocall",
]  # fmt: skip
HEADER_LINE = "\t".join(COLUMNS) + "\n"  # modkit's --header (alias --with-header)
COLOUR = "255,0,0"
_F32 = struct.Struct("<f")


class BedMethylRow(NamedTuple):
    """One bedMethyl row; percent is the text modkit writes (two decimals of a float32)."""

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


def f32(x: float) -> float:
    """x rounded to single precision (one IEEE operation done in double then rounded gives the
    float32 result for + - * /, so chaining this reproduces Rust's f32 arithmetic)."""
    return _F32.unpack(_F32.pack(x))[0]


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
    if len(parts) != 18:
        raise ValueError(f"bedMethyl line has {len(parts)} columns, not 18: {line.rstrip()!r}")
    counts = [int(x) for x in parts[9:10] + parts[11:18]]
    return BedMethylRow(
        parts[0], int(parts[1]), parts[3], parts[5], counts[0], parts[10], *counts[1:]
    )


def read_bedmethyl(path: str | os.PathLike) -> Iterator[BedMethylRow]:
    """The rows of a bedMethyl file, plain or gzip/BGZF-compressed (a header line, if any, is
    skipped)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as handle:
        for number, line in enumerate(handle, 1):
            if number == 1 and line.startswith(("chrom\tchromStart", "#chrom\tchromStart")):
                continue
            if line.strip():
                yield parse_line(line)
