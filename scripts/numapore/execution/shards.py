"""Scatter and gather by read: the split/merge half of every sharded step.

A step scattered into N shards (Slurm chunks, per-NUMA-node instances, FAST5 I/O processes)
runs the unchanged tool once per shard and these functions split its input and merge its
output, always in shard order so the result is reproducible.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zlib
from pathlib import Path
from typing import IO
from collections.abc import Sequence

import pysam

from numapore.run.atomic import atomic_output, atomic_outputs


def shard_of_read(read_name: str, n_shards: int) -> int:
    """The 0-based shard of a read: a stable hash of its name, so all its alignments go together."""
    return zlib.crc32(read_name.encode()) % n_shards


def split_fastx(reads: Path, outputs: Sequence[Path]) -> list[int]:
    """Deal reads round-robin into len(outputs) FASTA/FASTQ files; return reads per shard."""
    counts = [0] * len(outputs)
    with atomic_outputs(outputs) as temps:
        handles = [open(path, "w") for path in temps]
        try:
            with pysam.FastxFile(str(reads)) as fastx:
                for i, record in enumerate(fastx):
                    handles[i % len(handles)].write(str(record) + "\n")
                    counts[i % len(handles)] += 1
        finally:
            for handle in handles:
                handle.close()
    return counts


def split_bam(bam: Path, outputs: Sequence[Path], index: bool = False) -> list[int]:
    """Split a coordinate-sorted BAM by read name into sorted BAMs (indexed if asked); return
    records per shard."""
    counts = [0] * len(outputs)
    with pysam.AlignmentFile(str(bam)) as source, atomic_outputs(outputs) as temps:
        sinks = [pysam.AlignmentFile(str(p), "wb", template=source) for p in temps]
        try:
            for record in source:
                shard = shard_of_read(record.query_name, len(sinks))
                sinks[shard].write(record)
                counts[shard] += 1
        finally:
            for sink in sinks:
                sink.close()
    if index:
        for path in outputs:
            pysam.index(str(path))
    return counts


def link_or_copy(source: Path, target: Path) -> None:
    """Make target the same content as source: a hard link when possible, else a copy."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        with atomic_output(target) as tmp:
            shutil.copyfile(source, tmp)


def merge_bams(inputs: Sequence[Path], output: Path, threads: int, log: IO[str]) -> None:
    """Merge sorted BAM shards with samtools merge (a single shard is linked, not rewritten)."""
    if len(inputs) == 1:
        link_or_copy(inputs[0], output)
        return
    with atomic_output(output) as tmp:
        # -p: shards' @PG lines with one ID become one line (else samtools makes the IDs
        # distinct with random suffixes, and the same shards give different bytes every time).
        cmd = ["samtools", "merge", "-f", "-p", "-@", str(threads), "-o", str(tmp)]
        cmd += [str(p) for p in inputs]
        print(" ".join(cmd), file=log, flush=True)
        result = subprocess.run(cmd, capture_output=True, text=True)
        log.write(result.stdout + result.stderr)
        if result.returncode != 0:
            raise RuntimeError(
                f"samtools merge failed ({result.returncode}): {result.stderr.strip()}"
            )


COPY_BLOCK = 16 << 20  # bytes copied at a time when concatenating tables


def concat_tables(inputs: Sequence[Path], output: Path) -> int:
    """Concatenate TSV shards in order, keeping the first header only; return data rows.
    The rows are copied as bytes, a block at a time: memory stays flat whatever their number."""
    rows = 0
    header = None
    with atomic_output(output) as tmp, open(tmp, "wb") as out:
        for path in inputs:
            with open(path, "rb") as handle:
                first = handle.readline()
                if not first:
                    continue  # a shard with no alignments: nanopolish wrote nothing
                if header is None:
                    header = first
                    out.write(first)
                elif first != header:
                    raise ValueError(f"{path}: header differs from the first shard's")
                last = b"\n"
                while block := handle.read(COPY_BLOCK):
                    out.write(block)
                    rows += block.count(b"\n")
                    last = block[-1:]
                rows += last != b"\n"  # a last row without its line end is a row too
    return rows
