"""BGZF (blocked gzip, what tabix indexes) written from a stream of text, blocks compressed on
every core while the text is still being made.

Blocks are htslib's: BGZF_BLOCK bytes of text each, deflated at level 6 (htslib's default).
Without the compiled module, zlib compresses them, which gives the bytes pysam's tabix_index
(htslib with zlib) writes; with it, libdeflate does, about twice as fast: the same text once
decompressed, other compressed bytes.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections import deque
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from numapore.base import compiled

# calls_core.c's libdeflate block writer, loaded alone: calls_core.py imports polars and numpy
_core = compiled.load("numapore.nanopolish._calls_core")
ENABLED = _core is not None  # tests switch it off to compare both compressors
BGZF_BLOCK = 0xFF00  # htslib's BGZF_BLOCK_SIZE: text bytes per block
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
LEVEL = 6  # htslib's default (bgzip, tabix_index)
IN_FLIGHT = 64  # blocks being compressed at once: bounded memory, every core busy


def zlib_block(data: bytes) -> bytes:
    """One BGZF block of data (at most BGZF_BLOCK bytes) deflated by zlib, as htslib does."""
    packer = zlib.compressobj(LEVEL, zlib.DEFLATED, -15, 8)
    body = packer.compress(data) + packer.flush()
    header = struct.pack("<4BI2BH2BHH", 31, 139, 8, 4, 0, 0, 255, 6, 66, 67, 2, len(body) + 25)
    return header + body + struct.pack("<II", zlib.crc32(data), len(data))


def compiled_block(data: bytes) -> bytes:
    """One BGZF block of data deflated by libdeflate (calls_core's compiled module)."""
    ffi, lib = _core.ffi, _core.lib
    out = ffi.new("unsigned char[65536]")
    size = lib.cc_bgzf_block(ffi.from_buffer(data), len(data), out, LEVEL)
    if size == 0:
        raise MemoryError("numapore: libdeflate could not compress a BGZF block")
    return ffi.buffer(out, size)[:]


def write_bgzf(path: str | Path, chunks: Iterable[bytes], threads: int | None = None) -> None:
    """Write chunks of text to path as BGZF (EOF block included), blocks compressed by
    `threads` threads (by default one per core this process may run on: a Slurm job's or
    taskset's share, not the whole host) in order of the text."""
    block = compiled_block if ENABLED else zlib_block
    pending: deque = deque()
    rest = b""
    threads = threads or len(os.sched_getaffinity(0))
    with open(path, "wb") as out, ThreadPoolExecutor(threads) as pool:
        for chunk in chunks:
            data = rest + chunk if rest else chunk
            whole = len(data) - len(data) % BGZF_BLOCK
            view = memoryview(data)
            for start in range(0, whole, BGZF_BLOCK):
                pending.append(pool.submit(block, view[start : start + BGZF_BLOCK]))
                while len(pending) > IN_FLIGHT:
                    out.write(pending.popleft().result())
            rest = bytes(view[whole:])
        if rest:
            pending.append(pool.submit(block, rest))
        while pending:
            out.write(pending.popleft().result())
        out.write(BGZF_EOF)


def write_indexed_bed(path: str | Path, chunks: Iterable[bytes]) -> None:
    """Write a sorted BED-like text to path as BGZF, and its tabix index (path + '.tbi')."""
    import pysam  # imported here: a pileup's memory peaks before its BGZF is written

    write_bgzf(path, chunks)
    pysam.tabix_index(str(path), preset="bed", force=True)
