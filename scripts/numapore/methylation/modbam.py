"""modBAM: the alignments with SAM MM/ML base-modification tags made from nanopolish's calls.

nanopolish runs once (its per-read call table); each call's log-likelihood ratio becomes an ML
probability (numapore.methylation.calls.llr_to_ml) on every motif site of its group, at the
read base the alignment puts on the modified base of the read's own strand (aligned pairs: reference
-> query). Every call is tagged, confident or not: readers apply their own thresholds.

Both inputs are streamed, grouped by read name (GNU sort on disk, bytewise order for both), so
memory holds one read's alignments and calls at a time whatever the size of the tables. Reads
without calls, and alignments without a SEQ, are written unchanged.
"""

from __future__ import annotations

import bisect
import itertools
import subprocess
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from shlex import quote

import pysam

from numapore.methylation.calls import CALL_COLUMNS, llr_to_ml
from numapore.methylation.motifs import Motif

COMPLEMENT = str.maketrans("ACGTN", "TGCAN")


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
def sorted_lines(command: str, source: Path) -> Iterator[Iterator[str]]:
    """The lines a shell command prints (bash -o pipefail), failing with source if it fails."""
    proc = subprocess.Popen(
        ["bash", "-o", "pipefail", "-c", command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
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
    """Shell: body's lines sorted by one tab-separated column, bytewise, stable, on disk."""
    return (
        f"{body} | LC_ALL=C sort -s -t $'\\t' -k{column},{column} -S 256M -T {quote(str(scratch))}"
    )


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


def read_sites(
    records: list[pysam.AlignedSegment],
    calls: list[list[str]],
    motif: Motif,
    columns: dict[str, int],
    stats: TagStats,
) -> dict[int, dict[int, int]]:
    """Per record (index in records): query position -> ML byte of every site of the calls."""
    # Primary first, then supplementary, then secondary: a site goes to the first that has it.
    order = sorted(
        (i for i, r in enumerate(records) if not r.is_unmapped and r.query_sequence),
        key=lambda i: (records[i].is_secondary, records[i].is_supplementary),
    )
    # Per candidate record, read once (pysam builds these on every access): its contig,
    # strand, SEQ, and its aligned blocks when a site first needs them.
    candidates = [
        (i, records[i].reference_name, records[i].is_reverse, records[i].query_sequence)
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
    for call in calls:
        chrom, reverse = call[chrom_col], call[strand_col] == "-"
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


def tag_alignments(bam: Path, calls: Path, motif: Motif, output: Path, scratch: Path) -> TagStats:
    """Write bam with MM/ML tags from the call table into output (unsorted BAM)."""
    with open(calls) as handle:
        header = handle.readline().rstrip("\n").split("\t")
    missing = set(CALL_COLUMNS) - set(header)
    if missing:
        raise ValueError(f"{calls}: not a nanopolish call table, missing {sorted(missing)}")
    columns = {name: header.index(name) for name in CALL_COLUMNS}
    name_col = columns["read_name"]
    stats = TagStats()
    calls_cmd = by_name_command(f"tail -n +2 {quote(str(calls))}", name_col + 1, scratch)
    bam_cmd = by_name_command(f"samtools view {quote(str(bam))}", 1, scratch)
    with (
        pysam.AlignmentFile(str(bam)) as source,
        pysam.AlignmentFile(str(output), "wb", template=source) as out,
        sorted_lines(calls_cmd, calls) as call_lines,
        sorted_lines(bam_cmd, bam) as bam_lines,
    ):
        header_obj = source.header
        call_groups = itertools.groupby(
            (line.rstrip("\n").split("\t") for line in call_lines), key=lambda f: f[name_col]
        )
        pending = next(call_groups, None)
        for name, lines in itertools.groupby(bam_lines, key=lambda line: line.split("\t", 1)[0]):
            records = [pysam.AlignedSegment.fromstring(ln.rstrip("\n"), header_obj) for ln in lines]
            if pending is not None and pending[0] < name:
                raise ValueError(
                    f"{calls}: read {pending[0]!r} has calls but no alignment in {bam}"
                )
            if pending is not None and pending[0] == name:
                stats.reads_with_calls += 1
                tagged = read_sites(records, list(pending[1]), motif, columns, stats)
                pending = next(call_groups, None)
                for i, sites in tagged.items():
                    record = records[i]
                    mm, ml = mm_ml(record.query_sequence, record.is_reverse, motif, sites)
                    record.set_tag("MM", mm, "Z")
                    record.set_tag("ML", ml)
                    record.set_tag("MN", len(record.query_sequence), "i")
                    stats.tagged_records += 1
                    stats.tagged_sites += len(sites)
                stats.tagged_reads += bool(tagged)
            for record in records:
                out.write(record)
        if pending is not None:
            raise ValueError(f"{calls}: read {pending[0]!r} has calls but no alignment in {bam}")
    return stats
