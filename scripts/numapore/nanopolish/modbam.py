"""modBAM: the alignments with SAM MM/ML base-modification tags made from nanopolish's calls.

nanopolish runs once (its per-read call table); each call's log-likelihood ratio becomes an ML
probability (numapore.nanopolish.calls.llr_to_ml) on every motif site of its group, at the
read base the alignment puts on the modified base of the read's own strand (aligned pairs: reference
-> query). Every call is tagged, confident or not: readers apply their own thresholds.

Both inputs are streamed, grouped by read name (GNU sort on disk, bytewise order for both), so
memory holds one read's alignments and calls at a time whatever the size of the tables. Reads
without calls, and alignments without a SEQ, are written unchanged.

The per-call and per-site work (parsing, motif sites, the alignment lookup, MM and ML) is
calls_modbam.c's cc_tag_read, a read at a time, when the compiled call-table core is built;
without it, read_sites and mm_ml below do the same in Python: the same tags, the same errors
(tests/test_calls_core.py runs both).
"""

from __future__ import annotations

import bisect
import itertools
import re
import subprocess
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from shlex import quote

import pysam

from numapore.base import compiled
from numapore.nanopolish.calls import CALL_COLUMNS, llr_to_ml
from numapore.methylation.motifs import Motif

# The module itself, not calls_core.py (that one imports numpy and polars); None: read_sites
# and mm_ml do the work.
_core = compiled.load("numapore.nanopolish._calls_core")
ffi, lib = (_core.ffi, _core.lib) if _core is not None else (None, None)

# A module built before the tagging was added to it (./setup.sh not rerun) counts as not built.
COMPILED = hasattr(lib, "cc_tag_read")  # tests switch the compiled tagging off to compare both
COMPLEMENT = str.maketrans("ACGTN", "TGCAN")
# What a call's start and log-likelihood ratio may be (calls_core.c's parse_int,
# calls_modbam.c's parse_llr).
CALL_START = re.compile(rb"[+-]?[0-9]{1,18}")
CALL_LLR = re.compile(rb"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
BAD_START = "start is not a whole number of at most 18 digits"
BAD_LLR = "log_lik_ratio is not a decimal number"
PAST_SEQ = "an alignment's CIGAR is longer than its SEQ"  # an error of the BAM, not the calls
CHUNK = 4 << 20  # bytes of the sorted call stream read at a time


@dataclass
class TagStats:
    """What tagging did: reads with calls, reads and sites tagged, sites left out and why."""

    reads_with_calls: int = 0
    tagged_reads: int = 0
    tagged_records: int = 0
    tagged_sites: int = 0
    sites_unaligned: int = 0  # the site falls in a deletion or outside every alignment
    sites_other_base: int = 0  # the read has another base there (a sequencing error)


@contextmanager
def sorted_lines(command: str, source: Path, text: bool = True, stdin=None) -> Iterator:
    """What a shell command prints (bash -o pipefail; lines of text, or a binary stream; its
    standard input stdin, a file), failing with source if it fails."""
    proc = subprocess.Popen(
        ["bash", "-o", "pipefail", "-c", command],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=text,
    )
    try:
        yield proc.stdout
    except BaseException:  # the reader's error is the one to report, not the broken pipe's
        proc.kill()
        proc.wait()
        raise
    proc.stdout.close()
    err = proc.stderr.read()
    if proc.wait() != 0:
        raise RuntimeError(f"numapore: sorting {source} failed: {err.strip()}")


def by_name_command(body: str, column: int, scratch: Path) -> str:
    """Shell: body's lines (standard input if body is empty) sorted by one tab-separated
    column, bytewise, stable, on disk."""
    sort = f"LC_ALL=C sort -s -t $'\\t' -k{column},{column} -S 256M -T {quote(str(scratch))}"
    return f"{body} | {sort}" if body else sort


def mm_ml(seq: str, reverse: bool, motif: Motif, calls: dict[int, int]) -> tuple[str, array]:
    """MM and ML for one record: calls maps query positions (SEQ) to ML bytes. MM counts the
    motif's base on the read as sequenced: SEQ reverse-complemented for reverse alignments."""
    original = seq.translate(COMPLEMENT)[::-1] if reverse else seq
    skips, probs, previous = [], array("B"), -1
    # rank: the motif bases before `where` on the read, counted on from the previous site (C's
    # str.count, not a list of every base's position).
    rank, start = 0, 0
    for where, ml in sorted((len(seq) - 1 - q if reverse else q, ml) for q, ml in calls.items()):
        rank += original.count(motif.base, start, where)
        start = where
        skips.append(str(rank - previous - 1))
        probs.append(ml)
        previous = rank
    positions = "".join("," + skip for skip in skips)
    return f"{motif.base}+{motif.code}?{positions};", probs


# CIGAR operations (pysam's codes) that move along the query, the reference or both.
MATCH_OPS = frozenset({0, 7, 8})  # M, =, X: a query base aligned to a reference base
QUERY_OPS = frozenset({1, 4, 6})  # I, S, and P as pysam.get_aligned_pairs counts it
REFERENCE_OPS = frozenset({2, 3})  # D, N


class AlignedBlocks:
    """A record's reference -> query (SEQ index) positions of aligned bases, the pairs of
    pysam's get_aligned_pairs(matches_only=True), kept as the CIGAR's match blocks (a lookup is
    a bisection: no dict of every aligned base of a long read)."""

    __slots__ = ("references", "queries", "lengths")

    def __init__(self, record: pysam.AlignedSegment) -> None:
        """The match blocks of record, in reference order."""
        self.references: list[int] = []
        self.queries: list[int] = []
        self.lengths: list[int] = []
        ref, query = record.reference_start, 0
        for op, length in record.cigartuples or ():
            if op in MATCH_OPS:
                self.references.append(ref)
                self.queries.append(query)
                self.lengths.append(length)
                ref += length
                query += length
            elif op in QUERY_OPS:
                query += length
            elif op in REFERENCE_OPS:
                ref += length

    def query(self, ref: int) -> int | None:
        """The query position aligned to reference position ref, None if there is none."""
        i = bisect.bisect_right(self.references, ref) - 1
        if i >= 0 and ref - self.references[i] < self.lengths[i]:
            return self.queries[i] + ref - self.references[i]
        return None


class BadCall(Exception):
    """A call line that cannot be read (the line, what is wrong): tag_alignments names the file."""


def wrong_fields(n: int, ncols: int) -> str:
    """What is wrong with a call line of n fields."""
    return f"{n} field{'s' * (n != 1)} where the header has {ncols}"


def line_fields(line: bytes, ncols: int) -> list[bytes]:
    """A call line's fields, exactly as many as the header has."""
    fields = line.split(b"\t")
    if len(fields) != ncols:
        raise BadCall(line, wrong_fields(len(fields), ncols))
    return fields


def read_sites(
    records: list[pysam.AlignedSegment],
    order: list[int],
    calls: list[tuple[bytes, list[bytes]]],
    motif: Motif,
    columns: dict[str, int],
    stats: TagStats,
) -> dict[int, dict[int, int]]:
    """Per record (index in records): query position -> ML byte of every site of the calls
    (lines and their fields), on the records of order (candidates: their priority order).
    BadCall for a start or LLR that cannot be read."""
    # Per candidate record, read once (pysam builds these on every access): its contig,
    # strand, SEQ, and its aligned blocks when a site first needs them.
    candidates = [
        (i, records[i].reference_name.encode(), records[i].is_reverse, records[i].query_sequence)
        for i in order
    ]
    blocks: dict[int, AlignedBlocks] = {}
    tagged: dict[int, dict[int, int]] = {}
    strands = {
        reverse: (
            motif.reverse_offset if reverse else motif.forward_offset,
            motif.base.translate(COMPLEMENT) if reverse else motif.base,
        )
        for reverse in (False, True)
    }
    chrom_col, strand_col, start_col = columns["chromosome"], columns["strand"], columns["start"]
    llr_col, sequence_col = columns["log_lik_ratio"], columns["sequence"]
    for line, call in calls:
        chrom, reverse = call[chrom_col], call[strand_col] == b"-"
        if not CALL_START.fullmatch(call[start_col]):
            raise BadCall(line, BAD_START)
        if not CALL_LLR.fullmatch(call[llr_col]):
            raise BadCall(line, BAD_LLR)
        start = int(call[start_col])
        ml = llr_to_ml(float(call[llr_col]))
        shift, base = strands[reverse]
        for offset in motif.sites(call[sequence_col]):
            ref = start + offset + shift
            for i, record_chrom, record_reverse, sequence in candidates:
                if record_chrom != chrom or record_reverse != reverse:
                    continue
                if i not in blocks:
                    blocks[i] = AlignedBlocks(records[i])
                query = blocks[i].query(ref)
                if query is not None:
                    if query >= len(sequence):
                        raise BadCall(line, PAST_SEQ)
                    if sequence[query] == base:
                        tagged.setdefault(i, {}).setdefault(query, ml)
                    else:
                        stats.sites_other_base += 1
                    break
            else:
                stats.sites_unaligned += 1
    if not tagged and order:
        # Every site fell on a deletion or another base: the first alignment still says the
        # read was called, with no position (MM "C+m?;", empty ML: nothing known per base).
        tagged[order[0]] = {}
    return tagged


def candidates(records: list[pysam.AlignedSegment]) -> list[int]:
    """The records a call's sites can go to, mapped and with a SEQ, in the order a site goes
    to the first that has it: primary, then supplementary, then secondary."""
    return sorted(
        (i for i, r in enumerate(records) if not r.is_unmapped and r.query_sequence),
        key=lambda i: (records[i].is_secondary, records[i].is_supplementary),
    )


def set_tags(record: pysam.AlignedSegment, mm: str, ml: array, stats: TagStats) -> None:
    """A record's MM, ML and MN (SEQ's length, so that readers know MM/ML are for this SEQ)."""
    record.set_tag("MM", mm, "Z")
    record.set_tag("ML", ml)
    record.set_tag("MN", len(record.query_sequence), "i")
    stats.tagged_records += 1
    stats.tagged_sites += len(ml)


class PythonTagger:
    """One read's calls on its records in Python (read_sites, mm_ml): the fallback."""

    def __init__(self, motif: Motif, columns: dict[str, int], ncols: int) -> None:
        """For the motif and the call table's columns (their count: ncols)."""
        self.motif, self.columns, self.ncols = motif, columns, ncols

    def groups(self, stream) -> Iterator[tuple[bytes, list[tuple[bytes, list[bytes]]]]]:
        """The sorted call stream (binary) by read: its name, its lines and their fields.
        Blank lines are skipped, CRLF read as LF; every line read must have the header's
        field count, the next read's first one included (as cc_call_group)."""
        name_col, current, lines = self.columns["read_name"], None, []
        for raw in stream:
            line = raw.rstrip(b"\n")
            line = line[:-1] if line.endswith(b"\r") else line
            if not line:
                continue
            fields = line_fields(line, self.ncols)
            if fields[name_col] != current:
                if current is not None:
                    yield current, lines
                current, lines = fields[name_col], []
            lines.append((line, fields))
        if current is not None:
            yield current, lines

    def tag(self, records: list[pysam.AlignedSegment], calls, stats: TagStats) -> None:
        """Tag the records of one read with its calls (a group of groups())."""
        tagged = read_sites(records, candidates(records), calls, self.motif, self.columns, stats)
        for i, sites in tagged.items():
            record = records[i]
            mm, ml = mm_ml(record.query_sequence, record.is_reverse, self.motif, sites)
            set_tags(record, mm, ml, stats)
        stats.tagged_reads += bool(tagged)

    def close(self, stats: TagStats) -> None:
        """Nothing to release."""


class CompiledTagger:
    """One read's calls on its records in C: calls_modbam.c's cc_call_group and cc_tag_read."""

    def __init__(
        self, motif: Motif, columns: dict[str, int], ncols: int, header: pysam.AlignmentHeader
    ) -> None:
        """For the motif, the call table's columns (ncols of them) and the BAM's header."""
        lengths = {len(s) for s in motif.literals}
        assert len(lengths) == 1 and motif.base in "ACGT", "calls_modbam.c: one length, base ACGT"
        self.prefix = f"{motif.base}+{motif.code}?"
        self.t = t = ffi.new("cc_tagger *")
        self.literals = [ffi.new("char[]", s.encode()) for s in motif.literals]
        self.literal_array = ffi.new("char *[]", self.literals)
        t.literals, t.nlit, t.lit_len = self.literal_array, len(self.literals), lengths.pop()
        t.offset = [motif.forward_offset, motif.reverse_offset]
        t.base = [c.encode() for c in (motif.base, motif.base.translate(COMPLEMENT))]
        t.ncols = ncols
        t.col_chrom, t.col_strand = columns["chromosome"], columns["strand"]
        t.col_start, t.col_llr = columns["start"], columns["log_lik_ratio"]
        t.col_seq, t.col_name = columns["sequence"], columns["read_name"]
        self.contigs = [ffi.new("char[]", name.encode()) for name in header.references]
        self.out = [ffi.new("int64_t *") for _ in range(4)]

    def error(self, buf: bytes, at: int) -> Exception:
        """The error the tagger reported, its line at buf[at + error_at...]."""
        t = self.t
        if t.error == lib.CC_NO_MEMORY:
            return MemoryError("numapore: out of memory tagging the alignments")
        line = buf[at + t.error_at : at + t.error_at + t.error_len]
        if t.error == lib.CC_BAD_FIELDS:
            return BadCall(line, wrong_fields(t.error_fields, t.ncols))
        reasons = {lib.CC_BAD_START: BAD_START, lib.CC_BAD_LLR: BAD_LLR, lib.CC_BAD_CIGAR: PAST_SEQ}
        return BadCall(line, reasons[t.error])

    def groups(self, stream) -> Iterator[tuple[bytes, tuple[bytes, int, int]]]:
        """The sorted call stream (binary) by read: its name, and its lines as (bytes, where
        they start, their length), read CHUNK bytes at a time."""
        buf, pos, eof = b"", 0, False
        skip, name_at, name_len, length = self.out
        while True:
            view = ffi.from_buffer(buf)
            found = lib.cc_call_group(
                self.t, view + pos, len(buf) - pos, eof, skip, name_at, name_len, length
            )
            if found == lib.CC_GROUP:
                name = buf[pos + name_at[0] : pos + name_at[0] + name_len[0]]
                pos += skip[0]
                yield name, (buf, pos, length[0])
                pos += length[0]
            elif found == lib.CC_MORE:
                chunk = stream.read(CHUNK)
                buf, pos, eof = buf[pos:] + chunk, 0, not chunk
            elif found == lib.CC_END:
                return
            else:
                raise self.error(buf, pos)

    def tag(self, records: list[pysam.AlignedSegment], calls, stats: TagStats) -> None:
        """Tag the records of one read with its calls (a group of groups())."""
        order = candidates(records)
        cells = ffi.new("cc_record[]", len(order))
        alive = []  # what the cells point to, kept until cc_tag_read has run
        for cell, i in zip(cells, order, strict=True):
            record = records[i]
            seq = ffi.from_buffer(record.query_sequence.encode())
            pairs = array("I", itertools.chain.from_iterable(record.cigartuples or ()))
            cigar = ffi.from_buffer("uint32_t[]", pairs)
            alive += (seq, cigar)
            cell.chrom = contig = self.contigs[record.reference_id]
            cell.chrom_len = len(contig) - 1
            cell.seq, cell.seq_len = seq, len(seq)
            cell.cigar, cell.ncigar = cigar, len(cigar) // 2
            cell.ref_start, cell.reverse = record.reference_start, record.is_reverse
        buf, at, length = calls
        t = self.t
        if lib.cc_tag_read(t, ffi.from_buffer(buf) + at, length, cells, len(order)):
            raise self.error(buf, at)
        for cell, i in zip(cells, order, strict=True):
            if cell.tagged:
                mm = ffi.buffer(t.mm + cell.mm_off, cell.mm_len)[:].decode()
                ml = array("B", ffi.buffer(t.ml + cell.ml_off, cell.nsites)[:])
                set_tags(records[i], f"{self.prefix}{mm};", ml, stats)
        stats.tagged_reads += bool(order)

    def close(self, stats: TagStats) -> None:
        """The counts of sites left out into stats; the tagger's memory released."""
        stats.sites_unaligned += self.t.sites_unaligned
        stats.sites_other_base += self.t.sites_other_base
        lib.cc_tagger_free(self.t)


def call_columns(calls: Path) -> tuple[dict[str, int], int, int]:
    """Where each of CALL_COLUMNS is in the call table's header, its column count, and the
    header line's length in bytes."""
    with open(calls, "rb") as handle:
        line = handle.readline()
    header = line.rstrip(b"\n").removesuffix(b"\r").decode(errors="replace").split("\t")
    missing = set(CALL_COLUMNS) - set(header)
    if missing:
        raise ValueError(
            f"numapore: {calls}: not a nanopolish call table, missing {sorted(missing)}"
        )
    return {name: header.index(name) for name in CALL_COLUMNS}, len(header), len(line)


def missing_read(calls: Path, name: bytes, bam: Path) -> str:
    """The error for calls of a read that has no alignment."""
    read = name.decode(errors="replace")
    return f"numapore: {calls}: read {read!r} has calls but no alignment in {bam}"


def tag_alignments(bam: Path, calls: Path, motif: Motif, output: Path, scratch: Path) -> TagStats:
    """Write bam with MM/ML tags from the call table into output: unsorted, its BGZF blocks
    stored, not deflated (the rule pipes it into samtools sort, which reads it straight back)."""
    columns, ncols, header_bytes = call_columns(calls)
    stats = TagStats()
    calls_cmd = by_name_command("", columns["read_name"] + 1, scratch)
    bam_cmd = by_name_command(f"samtools view {quote(str(bam))}", 1, scratch)
    name = None
    rows = open(calls, "rb")  # sort reads the rows from the file, after the header: no pipe
    rows.seek(header_bytes)
    with (
        rows,
        pysam.AlignmentFile(str(bam)) as source,
        pysam.AlignmentFile(str(output), "wb0", template=source) as out,
        sorted_lines(calls_cmd, calls, text=False, stdin=rows) as call_stream,
        sorted_lines(bam_cmd, bam) as bam_lines,
    ):
        header = source.header
        if COMPILED:
            tagger = CompiledTagger(motif, columns, ncols, header)
        else:
            tagger = PythonTagger(motif, columns, ncols)
        try:
            call_groups = tagger.groups(call_stream)
            pending = next(call_groups, None)
            for name, lines in itertools.groupby(bam_lines, key=lambda ln: ln.split("\t", 1)[0]):
                records = [pysam.AlignedSegment.fromstring(ln.rstrip("\n"), header) for ln in lines]
                key = name.encode()
                if pending is not None and pending[0] < key:
                    raise ValueError(missing_read(calls, pending[0], bam))
                if pending is not None and pending[0] == key:
                    stats.reads_with_calls += 1
                    tagger.tag(records, pending[1], stats)
                    pending = next(call_groups, None)
                for record in records:
                    out.write(record)
        except BadCall as bad:
            line, reason = bad.args
            if reason == PAST_SEQ:
                raise ValueError(f"numapore: {bam}: read {name!r}: {PAST_SEQ}") from None
            shown = line[:200].decode(errors="replace")
            raise ValueError(f"numapore: {calls}: {reason} in the call line {shown!r}") from None
        finally:
            tagger.close(stats)
        if pending is not None:
            raise ValueError(missing_read(calls, pending[0], bam))
    return stats
