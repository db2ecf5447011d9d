"""Scatter and gather by read: the split/merge half of every sharded step.

A step scattered into N shards (Slurm chunks, per-NUMA-node instances, FAST5 I/O processes)
runs the unchanged tool once per shard and these functions split its input and merge its
output, always in shard order so the result is reproducible.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import zlib
from pathlib import Path
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import zip_longest
from typing import IO

import pysam

from numapore.base.atomic import atomic_output, atomic_outputs
from numapore.inputs.kinds import DEFAULT_KIND, KINDS


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


def bwa_batch_ends(lengths: Iterable[int], batch_bases: int, paired: bool) -> list[tuple[int, int]]:
    """Where bwa mem -K batch_bases ends its batches, as (fragments, bases) read by the end of
    each batch (a fragment: a read, or a pair whose two lengths lengths holds added), the last
    batch ending with the input. bwa's bseq_read adds each sequence's length and ends a batch
    after the fragment that brings it to batch_bases or more with an even number of sequences
    in it (single-end reads too). batch_bases 0: every fragment a batch of its own."""
    ends, size, n, fragments, bases = [], 0, 0, 0, 0
    for length in lengths:
        fragments, bases, size = fragments + 1, bases + length, size + length
        n += 2 if paired else 1
        if size >= batch_bases and n % 2 == 0:
            ends.append((fragments, bases))
            size, n = 0, 0
    if not ends or ends[-1][0] != fragments:
        ends.append((fragments, bases))
    return ends


def shares_on_batches(batch_ends: Sequence[tuple[int, int]], shards: int) -> list[int]:
    """Fragments per shard when consecutive shards take whole batches (bwa_batch_ends) and
    about equal bases: a shard ends at the last batch ending within its share of the bases (at
    least one batch when one is left); shards after the last batch are empty."""
    total = batch_ends[-1][1] if batch_ends else 0
    counts, start, b = [], 0, 0
    for i in range(shards):
        target = total * (i + 1) / shards
        end = start
        while b < len(batch_ends) and (
            end == start or batch_ends[b][1] <= target or i == shards - 1
        ):
            end = batch_ends[b][0]
            b += 1
        counts.append(end - start)
        start = end
    return counts


def split_short_reads(
    reads: Path,
    reads2: Path | None,
    outputs: Sequence[Path],
    outputs2: Sequence[Path] | None = None,
    batch_bases: int = 0,
) -> list[int]:
    """Split short reads into len(outputs) consecutive shares (and R2 likewise into outputs2:
    shard i of R2 holds the mates of shard i of R1, record for record, so mates are never
    apart), each share whole bwa batches of batch_bases (bwa_batch_ends) and about an equal
    share of the bases; return the reads (or pairs) per shard. Reads the input twice (lengths,
    then records): memory holds the batch ends only.

    Why consecutive shares of whole batches: bwa mem estimates the insert-size distribution of
    pairs per batch, so a shard that began inside a batch would see other batches and could
    place pairs differently; with a fixed -K each shard's batches are exactly the unsplit run's.
    (One thing remains: bwa breaks ties between equally good hits with the read's ordinal in its
    input, so a read with several best hits, MAPQ 0, may get another of them in a split run.)
    """
    import pysam

    paired = reads2 is not None
    if paired != (outputs2 is not None):
        raise ValueError("pairs need R2 shards (outputs2), single-end reads none")

    def fragments() -> Iterator[tuple[pysam.FastxRecord, pysam.FastxRecord | None]]:
        """(R1 record, R2 record or None) in file order; ValueError on unequal counts."""
        with pysam.FastxFile(str(reads)) as first:
            if not paired:
                yield from ((r, None) for r in first)
                return
            with pysam.FastxFile(str(reads2)) as second:
                for r1, r2 in zip_longest(first, second):
                    if r1 is None or r2 is None:
                        raise ValueError(f"{reads} and {reads2} hold different numbers of reads")
                    yield r1, r2

    lengths = (len(r1.sequence) + (len(r2.sequence) if r2 else 0) for r1, r2 in fragments())
    counts = shares_on_batches(bwa_batch_ends(lengths, batch_bases, paired), len(outputs))
    with atomic_outputs([*outputs, *(outputs2 or [])]) as temps:
        handles = [open(path, "w") for path in temps]
        try:
            shard, left = 0, counts[0]
            for r1, r2 in fragments():
                while left == 0:
                    shard += 1
                    left = counts[shard]
                handles[shard].write(str(r1) + "\n")
                if r2 is not None:
                    handles[len(outputs) + shard].write(str(r2) + "\n")
                left -= 1
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
        # distinct with random suffixes, and the same shards give different bytes every time);
        # -c: likewise their @RG lines (bwa -R), and then their records' RG tags keep the ID.
        cmd = ["samtools", "merge", "-f", "-p", "-c", "-@", str(threads), "-o", str(tmp)]
        cmd += [str(p) for p in inputs]
        print(" ".join(cmd), file=log, flush=True)
        result = subprocess.run(cmd, capture_output=True, text=True)
        log.write(result.stdout + result.stderr)
        if result.returncode != 0:
            raise RuntimeError(
                f"samtools merge failed ({result.returncode}): {result.stderr.strip()}"
            )


# The sorted BAM's index and samtools reports, each complete or absent: (output key, samtools
# arguments before the BAM). The job that makes the BAM writes its index and the JSON flagstat
# (the alignment check reads it); the text flagstat and stats, which only MultiQC and the report
# read, are the job of rule alignment_reports (REPORTS_BESIDE), which holds no core.
BAM_REPORTS = [
    ("flagstat", ["flagstat", "-O", "json"]),
    ("flagstat_text", ["flagstat"]),  # the text form, which MultiQC's samtools module reads
    ("stats", ["stats"]),
]
REPORTS_BESIDE = ("flagstat_text", "stats")


def start_index_and_reports(
    bam: Path, outputs: dict[str, Path], threads: int, log: IO[str]
) -> Callable[[], None]:
    """Start what outputs asks for, side by side: samtools index of bam into outputs['bai'],
    and each report of BAM_REPORTS whose key it has (flagstat JSON, text, stats; the caller
    goes on meanwhile). Each is the same bytes as the tool run by hand on the same path (stats
    records its command line). Returns the function that waits for them and raises the first
    failure. Each output is complete or absent."""

    def samtools(args: list[str]) -> str:
        """Run samtools with args, log its stderr, fail loudly; return its stdout."""
        cmd = ["samtools", *args]
        print(" ".join(cmd), file=log, flush=True)
        result = subprocess.run(cmd, capture_output=True, text=True)
        log.write(result.stderr)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr}")
        return result.stdout

    def index() -> None:
        """The BAM's index, renamed into place once complete."""
        with atomic_output(outputs["bai"]) as tmp:
            samtools(["index", "-@", str(threads), str(bam), str(tmp)])

    def report(key: str, args: list[str]) -> None:
        """One report, written from Python, not by samtools: its writes to stdout go unchecked
        (a full disk would give an empty report and exit 0)."""
        text = samtools([*args[:1], "-@", str(threads), *args[1:], str(bam)])
        with atomic_output(outputs[key]) as tmp:
            tmp.write_text(text)

    asked = [(key, args) for key, args in BAM_REPORTS if key in outputs]
    pool = ThreadPoolExecutor(1 + len(asked))
    runs = [pool.submit(index)] if "bai" in outputs else []
    runs += [pool.submit(report, key, args) for key, args in asked]

    def wait() -> None:
        """Wait for every run; raise the first failure."""
        pool.shutdown()
        for run in runs:
            run.result()

    return wait


def settle_read_groups(bam: Path, threads: int, log: IO[str], duplicates: bool) -> None:
    """Rewrite a sorted BAM whose records carry read groups (RG tags: bwa -R) through samtools
    merge, and mark its duplicates with samtools markdup (its records carry fixmate -m's mate
    tags; numapore.execution.tools.align_command) when duplicates; the BAM is replaced once the
    new one is complete, the statistics are in log.

    Why merge one file: samtools merge moves every record's RG tag to the end of its tags (it
    deletes and appends it), so a BAM merged from shards (NUMA instances, a scattered alignment)
    would hold other bytes than an unsplit run's BAM; the unsplit BAM goes through it too, so
    both hold the same records, tag for tag. Piped into markdup, it costs no extra file."""
    merge = ["samtools", "merge", "-p", "-c", "-@", str(threads)]
    with atomic_output(bam) as tmp:
        if duplicates:  # uncompressed into markdup
            mark = ["samtools", "markdup", "-s", "-@", str(threads), "-", str(tmp)]
            command = f"{shlex.join([*merge, '-u', '-o', '-', str(bam)])} | {shlex.join(mark)}"
        else:
            command = shlex.join([*merge, "-o", str(tmp), str(bam)])
        print(command, file=log, flush=True)
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True
        )
        log.write(result.stdout + result.stderr)
        if result.returncode != 0:
            raise RuntimeError(f"{command} failed ({result.returncode}): {result.stderr.strip()}")


def finish_sample_bam(
    bam: Path,
    outputs: dict[str, Path],
    threads: int,
    log: IO[str],
    *,
    reads: Path | None,
    sample: str,
    aligner: str,
    reference: str,
    kind: str = DEFAULT_KIND,
    paired: bool = False,
    rewrites_sorted_bam: bool = False,
    duplicates: bool = False,
    source: str | None = None,
    allow_empty: bool = False,
) -> None:
    """Index the sample's sorted BAM, write its JSON flagstat and the alignment check
    (outputs['summary']: reads in, primary alignments mapped; for short reads also pairs,
    properly paired and duplicates). reads: the staged reads, or their read id table; None when
    they streamed into the aligner (a modBAM sample's): reads in are the BAM's primary records,
    one per read, which the read accounting later reconciles with the staged ids (none: the
    staging failed, RuntimeError; its own line gives the reason).
    rewrites_sorted_bam (the kinds table's answer, which the rule passes): the BAM's read
    groups are settled first, and its duplicates marked when duplicates asks for it.
    AccountingError when the reads repeat a read id, EmptySample when nothing mapped unless
    allow_empty (source: the user's reads file, for the message)."""

    def unique_reads() -> int | None:
        """The reads' ids, counted (AccountingError when one repeats); None without reads."""
        from numapore.inputs.readids import unique_read_ids  # polars: a few tenths of a second

        return None if reads is None else len(unique_read_ids(reads, sample))

    # The reads file is read in a thread while samtools works on the BAM: the check needs both,
    # and for millions of short reads the read ids take seconds.
    with ThreadPoolExecutor(1) as pool:
        reads_in = pool.submit(unique_reads)
        if rewrites_sorted_bam:  # records with read groups, duplicates
            settle_read_groups(bam, threads, log, duplicates)
        reports = {key: outputs[key] for key in ("bai", "flagstat")}
        start_index_and_reports(bam, reports, threads, log)()
        counted = reads_in.result()
    from numapore.inputs.readids import alignment_summary, short_read_summary

    flagstat = json.loads(outputs["flagstat"].read_text())
    if counted is None:
        counted = flagstat["QC-passed reads"]["primary"] + flagstat["QC-failed reads"]["primary"]
        if counted == 0:  # staging stops on an input without reads: it failed, with the reason
            raise RuntimeError(
                f"sample '{sample}': no reads came through the pipe from its staging, whose "
                "log says why"
            )
    source = source or reads
    if KINDS[kind].paired:  # kinds that may be pairs count pairs, properly paired, duplicates
        summary = short_read_summary(
            flagstat, counted, sample, aligner, reference, paired, source, allow_empty
        )
    else:
        summary = alignment_summary(
            flagstat, counted, sample, aligner, reference, source, allow_empty
        )
    with atomic_output(outputs["summary"]) as tmp:
        tmp.write_text(summary)


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
                if last != b"\n":  # a last row without its line end: ended, not run on
                    out.write(b"\n")
                    rows += 1
    return rows
