"""The threshold estimate's sample through pysam's records (and numpy for its values): where
the compiled core's BAM reader cannot read an interval (no .bai, a record it leaves to pysam),
with an --include-bed filter, for unplaced reads, or without the compiled core. Records go
through the core when it is built (_sample_core), else through tags' numpy tables: the
same values either way, and the same as bam_core.c's sampler."""

from __future__ import annotations

import numpy as np
import pysam

from numapore.pileup.common import ffi, lib, Options, ReadError
from numapore.pileup.tags import (
    alignment_arrays,
    canonical_probs,
    edge_keep,
    forward_sequence,
    get_mod_tags,
    read_mod_tables,
    table_probs,
)


class PysamSample:
    """The BAM opened through pysam once, its intervals (or unplaced records) sampled into
    values (per canonical base, lists of float32 arrays) or the core's, skipping names in
    seen (the names sampled so far, shared with bam_core.c's sampler)."""

    def __init__(self, bam_path: str, options: Options, only_mapped: bool, pf, seen, values, core):
        """The sample's settings, as estimate_thresholds holds them."""
        self.bam = pysam.AlignmentFile(bam_path, "rb", check_sq=False)
        self.options, self.only_mapped, self.pf = options, only_mapped, pf
        self.ignore, self.edge = options.numeric()[0], options.edge()
        self.seen, self.values, self.core = seen, values, core

    def interval(self, tid: int, start: int, end: int, budget: int | None) -> int:
        """Sample [start, end) of tid until budget reads gave calls; the reads used."""
        records = self.bam.fetch(self.bam.references[tid], start, end)
        return self._records(records, budget, self.only_mapped)

    def unplaced(self, budget: int | None) -> int:
        """Sample the records without coordinates (--include-unmapped)."""
        records = self.bam.fetch(until_eof=True, contig="*") if self.bam.nocoordinate else []
        return self._records(records, budget, False)

    def _records(self, records, budget, only_mapped: bool) -> int:
        """_process_records with this sample's settings."""
        return _process_records(records, budget, self.options, only_mapped, self.pf,
                                self.ignore, self.edge, self.seen, self.values,
                                self.core)  # fmt: skip


def sorted_values(arrays: list, core, base: int) -> np.ndarray:
    """The sampled values of base, sorted: the pysam path's arrays and the core's."""
    if core is not None and core.nvalues[base]:
        buf = ffi.buffer(core.values[base], core.nvalues[base] * 4)
        arrays = [*arrays, np.frombuffer(buf, dtype=np.float32)]
    return np.sort(np.concatenate(arrays).astype(np.float32), kind="stable")


def argmax_probs(columns, n) -> np.ndarray:
    """The probability of each position's most likely state (what modkit samples)."""
    can = canonical_probs(columns) if columns else np.ones(n, dtype=np.float32)
    if not columns:
        return can
    mx = np.full(n, -np.inf, dtype=np.float32)
    for pres, p in columns:
        mx = np.where(pres & (p > mx) | pres & (mx == -np.inf), np.maximum(mx, p), mx)
    return np.where(mx > can, mx, can).astype(np.float32)


def _sample_values(rec, options: Options, only_mapped, pf, ignore, edge, values) -> bool:
    """Add one record's sampled call probabilities per canonical base to values (modkit's
    ReadIdsToBaseModProbs::process_records for one record); whether it gave any."""
    try:
        mm, ml = get_mod_tags(rec)
        fwd = forward_sequence(rec)
        tables = read_mod_tables(mm, ml, fwd)
    except ReadError:
        return False
    n = len(fwd)
    if edge is not None and (n <= edge[0] or n <= edge[1]):
        return False
    aligned = None
    if only_mapped:
        q, r, _, _ = alignment_arrays(rec)
        aligned = np.zeros(n, dtype=bool)
        ref_at = np.full(n, -1, dtype=np.int64)
        qf = n - 1 - q if rec.is_reverse else q
        aligned[qf] = True
        ref_at[qf] = r
    keep_edge = edge_keep(edge, n)
    added = False
    for (strand, base), table in tables.items():
        kept = table.has & keep_edge
        if aligned is not None:
            kept &= aligned
        if pf is not None:
            ref_strand = int((strand == "-") ^ rec.is_reverse)
            where = np.flatnonzero(kept)
            inside = [pf.contains(rec.reference_id, int(ref_at[w]), ref_strand) for w in where]
            kept = np.zeros(n, dtype=bool)
            kept[where[np.asarray(inside, dtype=bool)]] = True
        if not kept.any():
            continue
        _, columns = table_probs(table, kept, ignore)
        tb = base if strand == "+" else 3 - base
        values.setdefault(tb, []).append(argmax_probs(columns, int(kept.sum())))
        added = True
    return added


def _process_records(
    records, budget, options, only_mapped, pf, ignore, edge, seen, values, core=None
):
    """Sample records until budget reads have given calls (None: no limit), skipping reads
    already seen; returns the number used. With core (core.c, no position filter) the
    values gather in the core."""
    used = 0
    local: set[str] = set()
    for rec in records:
        if rec.is_secondary or rec.is_supplementary or rec.is_duplicate:
            continue
        if not rec.query_sequence:
            continue
        if (only_mapped or edge is not None) and rec.is_unmapped:
            continue
        if budget is not None and used >= budget:
            break
        name = rec.query_name
        if name in local:
            continue
        sink: dict = {}
        got = None
        if core is not None:
            got = _sample_core(core, rec, only_mapped, keep=name not in seen)
        if got is None:
            got = _sample_values(rec, options, only_mapped, pf, ignore, edge, sink)
        local.add(name)
        if got:
            used += 1
        if name not in seen:
            seen.add(name)
            for b, v in sink.items():
                values.setdefault(b, []).extend(v)
    return used


def _sample_core(core, rec, only_mapped: bool, keep: bool) -> bool | None:
    """_sample_values through core.c (values kept in the core only if keep); None if
    the core leaves the record to Python."""
    try:
        mm, ml = get_mod_tags(rec)
    except ReadError:
        return False
    before = [core.nvalues[b] for b in range(4)]
    seq = rec.query_sequence.encode()
    aligned_only = only_mapped or core.sample_in_region
    cigar = rec.cigarstring.encode() if aligned_only and rec.cigarstring else ffi.NULL
    if aligned_only and cigar == ffi.NULL:
        return False
    ncig = len(cigar) if cigar != ffi.NULL else 0
    got = lib.pu_sample_read(core, rec.is_reverse, seq, len(seq), mm.encode(),
                             ffi.from_buffer(ml), len(ml), cigar, ncig,
                             rec.reference_start)  # fmt: skip
    if got < 0 or not keep:
        for b in range(4):
            core.nvalues[b] = before[b]
    return None if got < 0 else bool(got)
