"""The region planner: the spans to work on (--region, contigs, --include-bed), modkit's
intervals (`-i`) with their motif positions (the interval end moved past a motif when strands are
combined), the regions of a scatter, and 0.4.4's --combine-strands rows (a motif's two strands
summed at its + position)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from numapore.methylation.bedmethyl import code_key
from numapore.pileup.common import Options, PileupError, WORK_SIZE
from numapore.pileup.inputs import open_bam
from numapore.pileup.positions import (
    BOTH,
    NEG,
    POS,
    make_motif,
    Motif,
    merge_intervals,
    motif_hits,
    PositionFilter,
)


@dataclass
class Chunk:
    """One interval modkit processes on its own: [start, end) of contig tid, and what to
    report there: rules maps position -> strand rule (None: all positions), pos_ids/neg_ids
    the motif indices per position, pos_motifs (combine strands) the + strand motif hits."""

    tid: int
    chrom: str
    start: int
    end: int
    rules: dict[int, int] | None = None
    regions: tuple | None = None
    pos_ids: dict[int, list[int]] | None = None
    neg_ids: dict[int, list[int]] | None = None
    pos_motifs: dict[int, list[int]] | None = None
    first: bool = False  # the first interval of its span (counts reads starting before it)
    # motif positions are found again by the worker (memory holds one interval's): the end
    # planned before a combined-strands extension, and the end of the span
    planned_end: int | None = None
    span_end: int | None = None


def parse_region(raw: str, bam) -> tuple[str, int, int]:
    """modkit's Region::parse_str: chrom, or chrom:start-end (commas allowed); bam: open_bam's.
    A contig whose name holds ':' (region.fa's 'tig1:200-300') is read whole by its name, or
    up to its span after the last ':' (a scatter's shares of it)."""
    if raw in bam.references:
        return raw, 0, bam.get_reference_length(raw)
    if ":" in raw:
        name, _, span = raw.rpartition(":")
        parts = span.replace(",", "").split("-")
        if ":" in span or len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise PileupError(f"invalid region {raw!r}")
        start, end = int(parts[0]), int(parts[1])
        if end <= start:
            raise PileupError(f"invalid region {raw!r}")
    else:
        name, start, end = raw, 0, None
    if name not in bam.references:
        raise PileupError(f"region {raw!r}: contig {name} is not in the BAM header")
    length = bam.get_reference_length(name)
    if start >= length:
        raise PileupError(f"region {raw!r} starts past the end of contig {name} ({length} bp)")
    return name, start, length if end is None else end


def reference_records(bam, options: Options, pf: PositionFilter | None):
    """The (tid, name, start, end) spans to work on: the region or all contigs, or with
    --include-positions the BED's merged intervals grouped up to interval size."""
    if options.region:
        name, start, end = parse_region(options.region, bam)
        records = [(bam.get_tid(name), name, start, end)]
    else:
        records = [
            (t, n, 0, ln) for t, (n, ln) in enumerate(zip(bam.references, bam.lengths, strict=True))
        ]
    if pf is None:
        return records
    lut = {r[0]: r for r in records}
    out = []
    for tid in pf.tids():
        if tid not in lut:
            continue
        ivs = merge_intervals(pf.intervals.get((tid, 0), []) + pf.intervals.get((tid, 1), []))
        current = list(ivs[0])
        grouped = []
        for iv in ivs[1:]:
            if current[1] - current[0] > options.interval_size:
                grouped.append(tuple(current))
                current = list(iv)
                continue
            current[1] = iv[1]
        grouped.append(tuple(current))
        out += [(tid, lut[tid][1], s, e) for s, e in grouped]
    return out


def plan_chunks(bam, options: Options, fasta, pf: PositionFilter | None) -> list[Chunk]:
    """modkit's intervals (ReferenceIntervalsFeeder) with their focus positions."""
    motifs = [make_motif(m, o) for m, o in options.motif_list()]
    combine = options.numeric()[2]
    # without motifs the interval bounds change nothing in the output: cap the work unit
    step = options.interval_size if motifs else min(options.interval_size, WORK_SIZE)
    chunks = []
    # a contig the FASTA lacks has no mapped reads (open_inputs refuses one that has): no
    # rows, as modkit leaves out the contigs without mapped reads
    in_fasta = set(fasta.references) if motifs else set()
    for tid, name, rec_start, rec_end in reference_records(bam, options, pf):
        if motifs and name not in in_fasta:
            continue
        pos = rec_start
        while pos < rec_end:
            end = min(pos + step, rec_end)
            chunk = Chunk(tid, name, pos, end, first=pos == rec_start)
            if motifs:  # the worker finds the positions; here only where the interval ends
                if combine:
                    chunk.end = combined_end(chunk, motifs, fasta, rec_end, pf, options.mask)[0]
                chunk.end = min(chunk.end, rec_end)
                chunk.planned_end, chunk.span_end = end, rec_end
                end = chunk.end
            elif pf is not None:
                chunk.regions = tuple(
                    [(max(s, pos), min(e, end)) for s, e in pf.intervals.get((tid, k), [])
                     if s < end and e > pos]
                    for k in (0, 1)
                )  # fmt: skip
            chunks.append(chunk)
            pos = end
    return chunks


def _fetch_seq(fasta, name: str, start: int, end: int, mask: bool) -> str:
    """Reference bases [start, end) (upper case unless soft masking is respected)."""
    seq = fasta.fetch(name, start, end)
    return seq if mask else seq.upper()


def _hits_in(motifs, seq, offset, tid, pf):
    """Per motif, position -> strand rule of its hits in seq (placed at offset), kept only
    where --include-positions allows that strand."""
    out = []
    for motif in motifs:
        rules: dict[int, int] = {}
        for p, strand in motif_hits(seq, motif):
            p += offset
            if pf is not None and not pf.contains(tid, p, strand):
                continue
            rules[p] = rules.get(p, 0) | (1 << strand)
        out.append(rules)
    return out


def combined_end(chunk: Chunk, motifs, fasta, rec_end, pf, mask: bool) -> tuple[int, int]:
    """Where an interval ends when strands are combined (modkit moves it past a motif
    straddling it): (its end, the end of the sequence searched). Only hits near the end decide
    it: the merged motif interval over end - 1 is made of hits at end - longest or after, so
    each window is searched from 2 x longest before the end (the whole interval before)."""
    start, end = chunk.start, chunk.end
    longest = max(m.length for m in motifs)
    buffer = longest * 5
    w_end = min(end + buffer, rec_end)
    too_close = max(w_end - longest, 0)
    while True:
        w_start = max(start, end - 2 * longest)
        seq = _fetch_seq(fasta, chunk.chrom, w_start, w_end, mask)
        ivs = []
        for motif, rules in zip(motifs, _hits_in(motifs, seq, w_start, chunk.tid, pf), strict=True):
            adj = motif.length - motif.offset
            ivs += [(p, p + adj) for p in rules]
        search_end = end
        for s, e in merge_intervals(ivs):
            if s < end and e > end - 1:
                search_end = e
                break
        if search_end < too_close or w_end >= rec_end:
            return search_end, w_end
        end = w_end
        w_end += buffer
        too_close = max(w_end - longest, 0)


def motif_focus(chunk: Chunk, motifs, fasta, rec_end, pf, combine: bool, mask: bool) -> None:
    """The chunk's motif positions (modkit's get_motif_positions and FocusPositions); when
    strands are combined the end moves past a motif straddling it (combined_end)."""
    start, end = chunk.start, chunk.end
    if combine:
        search_end, w_end = combined_end(chunk, motifs, fasta, rec_end, pf, mask)
        per = _hits_in(motifs, _fetch_seq(fasta, chunk.chrom, start, w_end, mask), start,
                       chunk.tid, pf)  # fmt: skip
        per = [{p: r for p, r in rules.items() if p <= search_end} for rules in per]
        chunk.end = end = min(search_end, rec_end)
        chunk.rules, chunk.pos_motifs, chunk.neg_ids = {}, {}, {}
        for idx, rules in enumerate(per):
            for p in sorted(rules):
                if not start <= p < end:
                    continue
                r = rules[p]
                chunk.rules[p] = r if p not in chunk.rules or chunk.rules[p] == r else BOTH
                if r & POS:
                    chunk.pos_motifs.setdefault(p, []).append(idx)
                else:
                    chunk.neg_ids.setdefault(p, []).append(idx)
        return
    per = _hits_in(motifs, _fetch_seq(fasta, chunk.chrom, start, end, mask), start, chunk.tid, pf)
    rules_out: dict[int, int] = {}
    pos_ids: dict[int, list[int]] = {}
    neg_ids: dict[int, list[int]] = {}
    single = all(m.length == 1 for m in motifs)
    if len(motifs) > 1 and single:
        ids = {m.raw: i for i, m in enumerate(motifs)}
        for top, bottom in (("A", "T"), ("C", "G")):
            if top not in ids:
                continue
            a = ids[top]
            for p in sorted(per[a]):
                if not start <= p < end:
                    continue
                if bottom in ids:
                    rules_out[p] = BOTH
                    pos_ids[p] = neg_ids[p] = [a, ids[bottom]]
                else:
                    rules_out[p] = per[a][p]
                    (pos_ids if per[a][p] == POS else neg_ids)[p] = [a]
    else:
        for idx, rules in enumerate(per):
            for p in sorted(rules):
                if not start <= p < end:
                    continue
                r = rules[p]
                if len(motifs) == 1 and single:
                    rules_out[p] = r
                else:
                    rules_out[p] = r if p not in rules_out or rules_out[p] == r else BOTH
                if r & POS:
                    pos_ids.setdefault(p, []).append(idx)
                if r & NEG:
                    neg_ids.setdefault(p, []).append(idx)
    chunk.rules, chunk.pos_ids, chunk.neg_ids = rules_out, pos_ids, neg_ids


def select_chunks(bam, chunks: list[Chunk], regions: Iterable[str]) -> list[Chunk]:
    """The chunks starting inside each region, region by region."""
    out = []
    for raw in regions:
        name, start, end = parse_region(raw, bam)
        out += [c for c in chunks if c.chrom == name and start <= c.start < end]
    return out


def scatter_regions(in_bam: str, n: int) -> list[str]:
    """Up to n regions (name:start-end) tiling the BAM's contigs by length, for a scatter whose
    pileups (same options) concatenate to the whole pileup."""
    bam = open_bam(in_bam)
    total = sum(bam.lengths)
    size = max(math.ceil(total / max(n, 1)), 1)
    regions = []
    for name, length in zip(bam.references, bam.lengths, strict=True):
        for s in range(0, length, size):
            regions.append(f"{name}:{s}-{min(s + size, length)}")
    return regions


def combine_strand_rows(chunk: Chunk, rows: list[tuple], motifs: list[Motif]) -> list[tuple]:
    """modkit's combine_strand_features: at each + strand motif position, per motif, the +
    rows there and the - rows at the motif's other C summed by code, strand '.'."""
    at: dict[int, list[tuple]] = {}
    for r in rows:
        at.setdefault(r[0], []).append(r)
    out = []
    for p in sorted(chunk.pos_motifs):
        for idx in chunk.pos_motifs[p]:
            motif = motifs[idx]
            if not motif.palindrome:
                continue
            neg = p + motif.reverse_offset - motif.offset
            if neg < 0:
                continue
            feats = [r for r in at.get(p, []) if r[1] == "+" and r[3] == idx]
            feats += [r for r in at.get(neg, []) if r[1] == "-" and r[3] == idx]
            by_code: dict[str, list[int]] = {}
            for r in feats:
                acc = by_code.setdefault(r[2], [0] * 8)
                for i, v in enumerate(r[4:]):
                    acc[i] += v
            for code in sorted(by_code, key=code_key):
                out.append((p, ".", code, idx) + tuple(by_code[code]))
    return out


def position_masks(chunk: Chunk, length: int) -> tuple[bytearray, bytearray | None]:
    """Which (position, strand) of the chunk may have rows, one byte each at 2 x position +
    strand (its motif strand rules, its --include-bed intervals, or all); and which positions
    have a strand that may (None: all)."""
    start = chunk.start
    if chunk.rules is None and chunk.regions is None:
        return bytearray(b"\1") * (2 * length), None
    allowed, want = bytearray(2 * length), bytearray(length)
    if chunk.rules is not None:
        for p, rule in chunk.rules.items():
            if start <= p < start + length:
                i = p - start
                allowed[2 * i], allowed[2 * i + 1] = bool(rule & POS), bool(rule & NEG)
                want[i] = allowed[2 * i] | allowed[2 * i + 1]
    else:
        for s in (0, 1):
            for a, b in chunk.regions[s]:
                a, b = a - start, b - start
                allowed[2 * a + s : 2 * b + s : 2] = b"\1" * (b - a)
                want[a:b] = b"\1" * (b - a)
    return allowed, want
