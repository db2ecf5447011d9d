"""A modBAM pileup with modkit 0.6.1's semantics (0.4.4's with Options.compat "0.4"): a
coordinate-sorted, indexed BAM with MM/ML tags (and, for motifs, the reference FASTA) to bedMethyl
byte for byte as `modkit pileup` writes it. One engine; the two semantics differ in options:
0.6.1 writes a `#` header and tabs only, gives a motif position rows of the motif's base only,
and counts `--modified-bases` at the reference's bases. Where 0.6.1 contradicts the SAM MM/ML
specification or its own documentation (the 0.6.1 suite's README, items A-F), this follows the
specification and the documentation.

The engine, laid out as modkit's own:
- common: the options, errors, base codes and the compiled core;
- tags: MM/ML parsing, each position's probabilities, what a record's alignment gives;
- thresholds: the caller's thresholds, given or estimated from sampled calls;
- positions: motifs and --include-bed position filters;
- regions: the region planner (intervals, their motif positions, scatter regions);
- counting_compiled: the counting core of an interval and its rows (0.4.4's and 0.6.1's generic
  path); modified_bases: 0.6.1's `--modified-bases` counting;
- inputs: the BAM's header and index counts and the FASTA, without pysam where they
  allow it; reader: an interval's BAM records read and tallied in C (bam_core.c, BGZF
  through libdeflate); counting_python and sampling: the numpy and pysam paths (no
  compiled core, or what the C reader leaves to pysam), imported only when used;
- numapore.methylation.bedmethyl: the bedMethyl format, its row writer and reader (text.c's
  put_row writes the same rows);
- cli: the command line, and the one writer of every output form (text, BGZF, --phased);
- this module: running a pileup over the intervals, on worker threads (or processes), in
  modkit's order.

Work goes by interval (modkit's `-i` chunks of a contig), so memory is bounded by one interval's
reads; with threads > 1 the intervals run on worker threads (the compiled core's C reader and
tally run without the GIL; worker processes where Python does the intervals) and come back in
order, so the bytes do not depend on threads. pileup(regions=...) keeps the intervals of the
whole run that start in each region, so pileups of regions that tile the genome
(scatter_regions) concatenate to the whole pileup.

Not done: 0.6.1's generic path caps the reads counted per position at 8000 (--max-depth's
default, applied without --high-depth too) and 0.4.4 at htslib's 8000; numapore applies a cap
only with --high-depth --max-depth on the --modified-bases path. --partition-tag, --bedgraph and
duplex pileup are not offered.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

from numapore.methylation.bedmethyl import HEADER_LINE
from numapore.pileup.common import NOT_PRIMARY_MAPPED, Options, PileupError, Stats
from numapore.pileup.inputs import open_bam, open_fasta, read_listing_line, stale_index
from numapore.pileup.thresholds import Caller, index_counts, make_caller
from numapore.pileup.positions import make_motif, read_position_filter
from numapore.pileup.regions import Chunk, parse_region, plan_chunks, select_chunks
from numapore.pileup.counting_compiled import ChunkWorker

# What callers outside the engine use, in one place
from numapore.pileup.common import (  # noqa: F401
    DEFAULT_INTERVAL, ENABLED, SAMPLING_INTERVAL, eprint,
)  # fmt: skip
from numapore.pileup.counting_compiled import READ_LISTING_HEADER  # noqa: F401

from numapore.pileup.regions import scatter_regions  # noqa: F401
from numapore.pileup.inputs import carries_calls  # noqa: F401

# BGZF's end-of-file block: an empty block, the last 28 bytes of a complete BAM
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def lacks_end_block(path: str) -> bool:
    """Whether a BGZF file (a BAM) lacks the empty block that ends every complete one (the SAM
    specification's 4.1.2), as a file cut short does."""
    with open(path, "rb") as handle:
        if handle.read(4) != BGZF_EOF[:4] or os.path.getsize(path) < len(BGZF_EOF):
            return False
        handle.seek(-len(BGZF_EOF), os.SEEK_END)
        return handle.read() != BGZF_EOF


def open_inputs(in_bam: str, options: Options):
    """Open and check the BAM (indexed, sorted, mapped reads) and the reference; the BAM,
    FASTA (or None) and position filter (or None)."""
    if "://" not in in_bam and not os.path.isfile(in_bam):  # htslib would print a line first
        raise PileupError(
            f"{in_bam}: " + ("a folder, not a BAM" if os.path.isdir(in_bam) else "no such file")
        )
    if "://" not in in_bam and lacks_end_block(in_bam):
        raise PileupError(
            f"{in_bam}: truncated (it lacks the end-of-file block a complete BAM ends with): "
            "copy or download it again in full"
        )
    index = stale_index(in_bam)
    if index is not None:
        raise PileupError(
            f"{in_bam}: its index {index} is older than the BAM and does not fit it (the BAM "
            f"changed after it was indexed): index it again (samtools index {in_bam})"
        )
    try:
        bam = open_bam(in_bam)
    except (OSError, ValueError) as err:
        raise PileupError(f"{in_bam}: cannot read as BAM ({err})") from None
    if not bam.references:
        raise PileupError(f"{in_bam}: no reference sequences in the header (align the reads first)")
    if not bam.has_index():  # modkit reads by region: an index, so a sorted BAM
        so = bam.header.to_dict().get("HD", {}).get("SO")
        if so in ("unsorted", "queryname", "unknown"):
            raise PileupError(
                f"{in_bam}: not coordinate-sorted (@HD SO:{so}) and no index; "
                "sort and index it (samtools sort, samtools index)"
            )
        raise PileupError(f"{in_bam}: no BAM index (.bai/.csi); sort and index it (samtools index)")
    names = {n: i for i, n in enumerate(bam.references)}
    pf = read_position_filter(options.include_bed, names) if options.include_bed else None
    mapped, _ = index_counts(bam)
    if options.region:
        name = parse_region(options.region, bam)[0]
        has_mapped = mapped.get(names[name], 0) > 0
    elif pf is not None:
        has_mapped = any(mapped.get(t, 0) for t in pf.tids())
    else:
        has_mapped = any(mapped.values())
    if not has_mapped:
        raise PileupError(f"{in_bam}: no mapped reads (align the reads first)")
    fasta = None
    if options.motif_list():
        if not options.reference:
            raise PileupError("--cpg, --motif and --preset need the reference (--ref)")
    if options.reference:
        try:
            fasta = open_fasta(options.reference)
        except (OSError, ValueError) as err:
            raise PileupError(
                f"{options.reference}: cannot read as indexed FASTA ({err})"
            ) from None
        have = set(fasta.references)
        for tid, n in mapped.items():
            if n and bam.references[tid] not in have:
                raise PileupError(
                    f"{options.reference}: contig {bam.references[tid]} of {in_bam} is missing"
                )
    if options.modern and options.modified_bases:
        if options.motifs:
            raise PileupError("--motif with --modified-bases is not offered yet (use --cpg)")
        if options.combine_strands and not options.cpg:
            raise PileupError("--combine-strands with --modified-bases needs --cpg here")
    elif options.combine_strands and options.preset is None and not options.motif_list():
        raise PileupError("--combine-strands needs --motif or --cpg")
    if options.numeric()[2] and any(
        not make_motif(m, o).palindrome for m, o in options.motif_list()
    ):
        raise PileupError("cannot combine strands with a motif that is not a palindrome")
    if options.filter_percentile > 1.0:
        raise PileupError("filter percentile must be <= 1.0")
    return bam, fasta, pf


_WORKER: ChunkWorker | None = None


def _init_worker(in_bam: str, options: Options, caller: Caller, pf, list_reads: bool) -> None:
    """A worker process's ChunkWorker."""
    global _WORKER
    _WORKER = ChunkWorker(in_bam, options, caller, pf, list_reads)


def _run_chunk(chunk: Chunk) -> tuple[str, Stats]:
    """One chunk in a worker process."""
    return _WORKER.pileup_chunk(chunk)


def iter_chunk_text(
    in_bam: str,
    options: Options,
    caller: Caller,
    chunks: list[Chunk],
    pf=None,
    list_reads: bool = False,
):
    """(text, stats) of each chunk in order, on options.threads threads (processes where the
    chunks' work is Python's: no compiled core or C reader, or --modified-bases)."""
    worker = ChunkWorker(in_bam, options, caller, pf, list_reads)
    if options.threads <= 1 or len(chunks) <= 1:
        for chunk in chunks:
            yield worker.pileup_chunk(chunk)
        return
    if worker.in_c():
        others = [ChunkWorker(in_bam, options, caller, pf, list_reads)
                  for _ in range(options.threads - 1)]  # fmt: skip
        yield from in_threads([worker, *others], chunks)
        return
    del worker
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(options.threads, _init_worker, (in_bam, options, caller, pf, list_reads)) as pool:
        yield from pool.imap(_run_chunk, chunks, chunksize=1)


def in_threads(workers: list[ChunkWorker], chunks: list[Chunk]):
    """(text, stats) of each chunk in order, on a thread per worker. A chunk's work is the
    compiled core's, which runs without the GIL (cffi releases it around every call), so
    threads share the reading, tallying and writing of chunks with no process to start and no
    text to send back; a few chunks ahead at most, as memory holds their text."""
    import queue
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    free: queue.SimpleQueue = queue.SimpleQueue()
    for worker in workers:
        free.put(worker)

    def run(chunk: Chunk) -> tuple[str, Stats]:
        worker = free.get()
        try:
            return worker.pileup_chunk(chunk)
        finally:
            free.put(worker)

    ahead = 2 * len(workers)
    with ThreadPoolExecutor(len(workers), thread_name_prefix="pileup") as pool:
        pending = deque(pool.submit(run, chunk) for chunk in chunks[:ahead])
        following = iter(chunks[ahead:])
        try:
            while pending:
                done = pending.popleft().result()
                chunk = next(following, None)
                if chunk is not None:
                    pending.append(pool.submit(run, chunk))
                yield done
        finally:
            for future in pending:
                future.cancel()


@dataclass
class Result:
    """A finished pileup's counts."""

    stats: Stats
    caller: Caller


def pileup(
    in_bam: str, out, options: Options, regions: list[str] | None = None, reads_out=None
) -> Result:
    """pileup_run without the cyclic garbage collector: the planner and the counting make
    millions of small objects and no cycles, and the collector's passes over them took a
    quarter of a motif pileup's time (measured with py-spy); worker processes inherit it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return pileup_run(in_bam, out, options, regions, reads_out)
    finally:
        if enabled:
            gc.enable()


def pileup_run(
    in_bam: str, out, options: Options, regions: list[str] | None = None, reads_out=None
) -> Result:
    """Write the bedMethyl of in_bam to the text stream out. regions (name or name:start-end)
    keeps only the intervals of the whole run that start inside them, in the order given, so
    pileups of regions that tile the genome concatenate to the whole output. reads_out (a text
    stream) gets the read listing: each mapped primary record once, in the interval where it
    starts (read_id, mapq, 1 if it carries ML values, HP tag or 0: READ_LISTING_COLUMNS; rows
    only); it
    lists every such record of the BAM when the run covers whole contigs (no region or
    include-bed option), or the regions of a scatter do together."""
    if reads_out is not None and (options.region or options.include_bed):
        raise PileupError("a read listing needs whole contigs: not with --region/--include-bed")
    bam, fasta, pf = open_inputs(in_bam, options)
    caller = make_caller(in_bam, options, pf)
    chunks = plan_chunks(bam, options, fasta, pf)
    if regions is not None:
        chunks = select_chunks(bam, chunks, regions)
    stats = Stats()
    if options.with_header:
        out.write("#" + HEADER_LINE if options.modern else HEADER_LINE)
    listing = reads_out is not None
    for text, chunk_stats in iter_chunk_text(in_bam, options, caller, chunks, pf, listing):
        out.write(text)
        if listing:
            reads_out.writelines(chunk_stats.reads)
        stats.add(chunk_stats)
    return Result(stats, caller)


def write_read_listing(in_bam: str, out, regions: list[str] | None = None) -> None:
    """pileup's read listing (reads_out) without a pileup, for a BAM no pileup runs on: each
    mapped primary record once, over whole contigs or over regions that tile them (a
    scatter's), in the region where it starts."""
    import pysam  # the records themselves: no C reader here

    with pysam.AlignmentFile(in_bam, "rb", check_sq=False) as bam:
        if regions is None:
            spans = [(n, 0, ln) for n, ln in zip(bam.references, bam.lengths, strict=True)]
        else:
            spans = [parse_region(raw, bam) for raw in regions]
        for name, start, end in spans:
            for rec in bam.fetch(name, start, end):
                if not rec.flag & NOT_PRIMARY_MAPPED and rec.reference_start >= start:
                    out.write(read_listing_line(rec))
