"""modBAM: the alignments with SAM MM/ML base-modification tags made from nanopolish's calls.

nanopolish runs once (its per-read call table); each call's log-likelihood ratio becomes an ML
probability (numapore.methylation.frequency.llr_to_ml) on every motif site of its group, at the
read base the alignment puts on the modified base of the read's own strand (aligned pairs: reference
-> query). Every call is tagged, confident or not: readers apply their own thresholds.

Both inputs are streamed, grouped by read name (GNU sort on disk, bytewise order for both), so
memory holds one read's alignments and calls at a time whatever the size of the tables. Reads
without calls, and alignments without a SEQ, are written unchanged.
"""

from __future__ import annotations

import functools
import itertools
import subprocess
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from shlex import quote

import numpy as np
import pysam

from numapore.methylation.frequency import CALL_COLUMNS, llr_to_ml
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


def mm_ml(
    seq: str, reverse: bool, motif: Motif, queries: np.ndarray, mls: np.ndarray
) -> tuple[str, array]:
    """MM and ML for one record: the ML byte mls[k] at query position queries[k] (SEQ index,
    distinct positions). MM counts the motif's base on the read as sequenced: SEQ
    reverse-complemented for reverse alignments."""
    original = seq.translate(COMPLEMENT)[::-1] if reverse else seq
    where = len(seq) - 1 - queries if reverse else queries
    order = np.argsort(where, kind="stable")
    # rank: the motif bases on the read before each site; MM gives the bases skipped between
    # one site and the next (the first: from the read's start).
    is_base = np.frombuffer(original.encode("ascii"), dtype=np.uint8) == ord(motif.base)
    ranks = np.concatenate(([0], np.cumsum(is_base)))[where[order]]
    skips = np.diff(ranks, prepend=-1) - 1
    positions = "".join("," + skip for skip in map(str, skips.tolist()))
    probs = array("B", np.asarray(mls, dtype=np.uint8)[order].tobytes())
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
        references: list[int] = []
        queries: list[int] = []
        lengths: list[int] = []
        ref, query = record.reference_start, 0
        for op, length in record.cigartuples or ():
            if op in MATCH_OPS:
                references.append(ref)
                queries.append(query)
                lengths.append(length)
                ref += length
                query += length
            elif op in QUERY_OPS:
                query += length
            elif op in REFERENCE_OPS:
                ref += length
        self.references = np.array(references, dtype=np.int64)
        self.queries = np.array(queries, dtype=np.int64)
        self.lengths = np.array(lengths, dtype=np.int64)

    def query_of(self, refs: np.ndarray) -> np.ndarray:
        """The query position aligned to each reference position of refs, -1 where none is."""
        if not len(self.references):
            return np.full(len(refs), -1, dtype=np.int64)
        block = np.searchsorted(self.references, refs, side="right") - 1
        inside = block >= 0
        block[~inside] = 0
        offset = refs - self.references[block]
        inside &= offset < self.lengths[block]
        return np.where(inside, self.queries[block] + offset, -1)

    def query(self, ref: int) -> int | None:
        """The query position aligned to reference position ref, None if there is none."""
        found = int(self.query_of(np.array([ref], dtype=np.int64))[0])
        return None if found < 0 else found


@functools.lru_cache(maxsize=1 << 16)
def site_offsets(motif: Motif, sequence: str) -> tuple[int, ...]:
    """motif.sites of a call's sequence, remembered: the same group sequences recur."""
    return tuple(motif.sites(sequence))


class SiteGroup:
    """The sites of a read's calls on one contig and strand, in call order: reference
    positions, ML bytes, and whether an alignment has placed them yet."""

    __slots__ = ("refs", "mls", "placed")

    def __init__(self, refs: list[int], mls: list[int]) -> None:
        """The sites' positions and ML bytes, none placed."""
        self.refs = np.array(refs, dtype=np.int64)
        self.mls = np.array(mls, dtype=np.uint8)
        self.placed = np.zeros(len(refs), dtype=bool)


def call_sites(
    calls: list[list[str]], motif: Motif, columns: dict[str, int]
) -> dict[tuple[str, bool], SiteGroup]:
    """Every motif site of a read's calls, grouped by (contig, reverse strand), in call order:
    the modified base's reference position on its strand, and the call's ML byte."""
    chrom_col, strand_col, start_col = columns["chromosome"], columns["strand"], columns["start"]
    llr_col, sequence_col = columns["log_lik_ratio"], columns["sequence"]
    shifts = {False: motif.forward_offset, True: motif.reverse_offset}
    sites: dict[tuple[str, bool], tuple[list[int], list[int]]] = {}
    ml_of: dict[str, int] = {}  # per LLR as written: the same values recur
    for call in calls:
        key = (call[chrom_col], call[strand_col] == "-")
        refs, mls = sites.get(key) or sites.setdefault(key, ([], []))
        start = int(call[start_col]) + shifts[key[1]]
        offsets = site_offsets(motif, call[sequence_col])
        llr = call[llr_col]
        ml = ml_of.get(llr)
        if ml is None:
            ml = ml_of[llr] = llr_to_ml(float(llr))
        refs.extend([start + offset for offset in offsets])
        mls.extend([ml] * len(offsets))
    return {key: SiteGroup(refs, mls) for key, (refs, mls) in sites.items()}


def read_sites(
    records: list[pysam.AlignedSegment],
    calls: list[list[str]],
    motif: Motif,
    columns: dict[str, int],
    stats: TagStats,
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per record (index in records): the query positions of the calls' sites and their ML
    bytes (the first call's where two calls share a site)."""
    # Primary first, then supplementary, then secondary: a site goes to the first that has it.
    order = sorted(
        (i for i, r in enumerate(records) if not r.is_unmapped and r.query_sequence),
        key=lambda i: (records[i].is_secondary, records[i].is_supplementary),
    )
    groups = call_sites(calls, motif, columns)
    bases = {False: ord(motif.base), True: ord(motif.base.translate(COMPLEMENT))}
    tagged: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i in order:
        record = records[i]
        reverse = record.is_reverse
        group = groups.get((record.reference_name, reverse))
        if group is None or group.placed.all():
            continue
        waiting = np.flatnonzero(~group.placed)
        query = AlignedBlocks(record).query_of(group.refs[waiting])
        aligned = query >= 0
        group.placed[waiting[aligned]] = True
        query, mls = query[aligned], group.mls[waiting[aligned]]
        sequence = np.frombuffer(record.query_sequence.encode("ascii"), dtype=np.uint8)
        right_base = sequence[query] == bases[reverse]
        stats.sites_other_base += int(len(query) - right_base.sum())
        query, mls = query[right_base], mls[right_base]
        if len(query):
            # np.unique's first index of each position: the earliest call's site keeps it.
            positions, first = np.unique(query, return_index=True)
            tagged[i] = (positions, mls[first])
    stats.sites_unaligned += sum(int(len(g.placed) - g.placed.sum()) for g in groups.values())
    if not tagged and order:
        # Every site fell on a deletion or another base: the first alignment still says the
        # read was called, with no position (MM "C+m?;", empty ML: nothing known per base).
        empty = np.zeros(0, dtype=np.int64)
        tagged[order[0]] = (empty, empty.astype(np.uint8))
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
                for i, (queries, mls) in tagged.items():
                    record = records[i]
                    mm, ml = mm_ml(record.query_sequence, record.is_reverse, motif, queries, mls)
                    record.set_tag("MM", mm, "Z")
                    record.set_tag("ML", ml)
                    record.set_tag("MN", len(record.query_sequence), "i")
                    stats.tagged_records += 1
                    stats.tagged_sites += len(queries)
                stats.tagged_reads += bool(tagged)
            for record in records:
                out.write(record)
        if pending is not None:
            raise ValueError(f"{calls}: read {pending[0]!r} has calls but no alignment in {bam}")
    return stats
