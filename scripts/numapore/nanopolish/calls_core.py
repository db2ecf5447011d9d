"""numapore's compiled call-table core (calls_core.c through cffi, built by calls_core_build.py
when the package is installed): counts a call table's groups in one pass and compresses BGZF
blocks with libdeflate; it also tags a read's alignments with MM/ML from its calls
(numapore.nanopolish.modbam uses that part directly, without this module's numpy and polars).
The bedMethyl is the pileup's (numapore.pileup.engine) of the modBAM.

numapore.nanopolish.frequency uses it when it is built and falls back on DuckDB and polars
(numapore.methylation.bgzf on zlib) without it: the same frequency table (tests/test_calls_core.py
runs both on the same inputs).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl

from numapore.base import compiled

_core = compiled.load("numapore.nanopolish._calls_core")  # None: DuckDB, polars and zlib
ffi, lib = (_core.ffi, _core.lib) if _core is not None else (None, None)

ENABLED = lib is not None  # tests switch the compiled core off to compare both

# calls_core.c's cc_group, as numpy reads it.
GROUP_FIELDS = [
    ("start", "<i8"), ("end", "<i8"), ("num_motifs", "<i8"), ("first_row", "<i8"),
    ("hash", "<u8"), ("seq_off", "<u8"), ("seq_len", "<u4"), ("chrom", "<u4"),
    ("valid", "<u4"), ("methylated", "<u4"), ("failed", "<u4"), ("calls", "<u4"),
    ("strong", "<u4"), ("strong_unmethylated", "<u4"),
]  # fmt: skip
# The columns it reads, in calls_core.c's order (F_CHROM ... F_SEQ).
CALL_FIELDS = ["chromosome", "start", "end", "log_lik_ratio", "num_motifs", "sequence"]


@contextmanager
def aggregated(path: Path, header: list[str], threshold: float) -> Iterator:
    """The call table at path (its column names: header) counted by group in one pass, as a
    cc_table (freed when the block ends); a clear error if a row cannot be read."""
    where = ffi.new("int[]", [CALL_FIELDS.index(n) if n in CALL_FIELDS else -1 for n in header])
    table = ffi.new("cc_table *")
    try:
        if lib.cc_aggregate(table, os.fsencode(path), where, len(header), float(threshold)):
            reason = ffi.string(table.reason).decode(errors="replace")
            at = f" (data row {table.error_row})" if table.error_row else ""
            raise ValueError(f"{path}: not a readable nanopolish call table{at}: {reason}")
        yield table
    finally:
        lib.cc_free(table)


def chromosome_ranks(table) -> tuple[list[str], np.ndarray]:
    """The table's chromosome names in Python's (the reference's) string order, and each
    chromosome number's rank in it."""
    names = [ffi.string(table.chroms[i]).decode() for i in range(table.nchroms)]
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int64)
    rank[order] = np.arange(len(names))
    return [names[i] for i in order], rank


def groups_frame(table) -> pl.DataFrame:
    """An aggregated table's groups as frequency.group_counts returns them: one row per
    (chromosome, start, end, num_motifs, sequence), first_row always set."""
    import pyarrow as pa  # here: the accounting imports the package without needing it

    n = table.ngroups
    dtype = np.dtype(GROUP_FIELDS)
    assert dtype.itemsize == ffi.sizeof("cc_group")
    raw = np.frombuffer(ffi.buffer(table.groups, n * dtype.itemsize), dtype=dtype)
    pool = np.frombuffer(ffi.buffer(table.pool, table.pool_len), dtype=np.uint8)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(raw["seq_len"], out=offsets[1:])  # the pool holds the sequences in group order
    sequence = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(pool))
    counts = ["valid", "methylated", "failed", "calls", "strong", "strong_unmethylated"]
    columns = {name: raw[name].copy() for name in ["start", "end", "num_motifs", *counts]}
    names, rank = chromosome_ranks(table)
    group_rank = pl.Series("rank", rank[raw["chrom"]], dtype=pl.Int64)
    enum = pl.Series(names, dtype=pl.Enum(names))
    return pl.DataFrame(columns).with_columns(
        chromosome=enum.gather(group_rank),
        sequence=pl.from_arrow(sequence),  # a copy: the table's memory is freed after
        first_row=pl.Series(raw["first_row"].copy()).replace(-1, None),
        rank=group_rank,
    )
