"""The counting core's Python path (numpy, pysam's records): an interval's reads tallied per
position and strand with numpy where the compiled core is not built or leaves the interval to
Python (more mod codes than it holds, a repeated read name, an N fundamental base), pysam's
records into the core where its C reader cannot read them, and the rows of the generic layouts
(several motifs on separate strands) from the core's tallies. The same bytes as the compiled
route (tests/test_pileup_conformance*.py run both); imported only when used."""

from __future__ import annotations

import numpy as np

from numapore.methylation.bedmethyl import code_key, rows_text
from numapore.pileup.common import (
    BASES,
    CANONICAL,
    FILTERED,
    NO_CALL,
    ffi,
    lib,
    ReadError,
    Stats,
)
from numapore.pileup.tags import (
    alignment_arrays,
    BASE_LUT,
    call_positions,
    edge_keep,
    forward_sequence,
    get_mod_tags,
    read_mod_tables,
    table_probs,
)
from numapore.pileup.inputs import usable
from numapore.pileup.regions import Chunk, combine_strand_rows, position_masks

CORE_DEFER = 7  # core.c's SKIP_CODES: the chunk goes to the Python path
# core.c's features of a position and strand: deletions, then per base (A, C, G, T) failed
# calls, no calls and canonical calls, then per code one per base
DELETES, FAILS, NOCALLS, CANONICALS, CODES = 0, 1, 5, 9, 13


CORE_KINDS = {1: "missing", 2: "ml_short", 3: "mm", 4: "conflict", 5: "empty", 6: "implicit"}


class CodeRegistry:
    """Mod codes met so far, numbered in order of appearance (internal indices only)."""

    def __init__(self):
        """An empty registry."""
        self.codes: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, code: str) -> int:
        """The index of code (registered if new)."""
        i = self.index.get(code)
        if i is None:
            i = self.index[code] = len(self.codes)
            self.codes.append(code)
        return i


class ReadCalls:
    """One read's per-position calls (forward coordinates) for MM + and - strand and the mod
    codes it reports per (reference strand, primary base)."""

    __slots__ = ("pos", "neg", "codes")

    def __init__(self, pos, neg, codes):
        """Calls per MM strand (None: no table) and the (strand, base, code) keys."""
        self.pos, self.neg, self.codes = pos, neg, codes


NO_CALLS = ReadCalls(None, None, set())  # what a skipped read contributes


class PythonCounter:
    """A ChunkWorker's Python path (one per worker: its code registry numbers the codes met
    over the run)."""

    def __init__(self, worker):
        """The Python path of worker (its options, caller, motifs and pysam reader)."""
        self.w = worker
        self.codes = CodeRegistry()

    def modbases_counter(self):
        """0.6.1's --modified-bases counter (modified_bases) of the worker's BAM."""
        import pysam

        from numapore.pileup.modified_bases import ModBasesCounter

        w = self.w
        fasta = pysam.FastaFile(w.options.reference)
        return ModBasesCounter(w.bam, fasta, w.options, w.caller, w.pf, alignment_arrays,
                               w.in_haplotype)  # fmt: skip

    def read_record(self, rec, stats: Stats) -> ReadCalls | None:
        """The read's calls as modkit's ReadCache::add_record makes them, None if skipped."""
        try:
            mm, ml = get_mod_tags(rec)
            fwd = forward_sequence(rec)
            tables = read_mod_tables(mm, ml, fwd)
            if not any(t.has.any() for t in tables.values()):
                raise ReadError("empty", "no modified base information")
            implicit = any(t.mode == "" for t in tables.values())
            if implicit and not self.w.options.reads_implicit:
                raise ReadError("implicit", f"MM {mm.split(';')[0][:12]!r} has no mode ('.'/'?')")
        except ReadError as err:
            stats.skipped[err.kind] = stats.skipped.get(err.kind, 0) + 1
            stats.examples.setdefault(err.kind, (rec.query_name, str(err)))
            return None
        n = len(fwd)
        calls = {"+": None, "-": None}
        codes = set()
        added = False
        keep = edge_keep(self.w.edge, n)
        for (strand, base), table in tables.items():
            if keep is None:
                continue
            kept = table.has & keep
            if not kept.any():
                continue
            where = np.flatnonzero(kept)
            order, columns = table_probs(table, kept, self.w.ignore)
            tb = base if strand == "+" else 3 - base
            call = call_positions(order, columns, len(where), self.w.caller, tb, self.codes)
            arr = calls[strand]
            if arr is None:
                arr = calls[strand] = np.full(n, NO_CALL, dtype=np.int16)
            arr[where] = call
            ref_strand = (strand == "-") ^ rec.is_reverse
            for code, (pres, _) in zip(order, columns, strict=True):
                if pres.any():
                    codes.add((int(ref_strand), tb, self.codes(code)))
            added = True
        if not added:
            stats.skipped["empty"] = stats.skipped.get("empty", 0) + 1
            return None
        stats.used += 1
        return ReadCalls(calls["+"], calls["-"], codes)

    def tally_pysam(self, chunk: Chunk, stats: Stats) -> bool | None:
        """The interval's usable records through pysam into the core (its want mask set):
        whether a read was tallied, None where Python must do the interval."""
        ctx, start, length = self.w.core, chunk.start, chunk.end - chunk.start
        names: set[str] = set()
        for rec in self.w.bam.fetch(chunk.chrom, start, chunk.end):
            self.w.list_read(rec, chunk, stats)
            if not usable(rec) or not self.w.in_haplotype(rec):
                continue
            if not names:  # the tallies are set up once the interval has a read
                lib.pu_begin(ctx, start, length)
            name = rec.query_name
            if name in names:
                return None
            names.add(name)
            counted = stats if chunk.first or rec.reference_start >= start else Stats()
            cigar, seq = rec.cigarstring.encode(), rec.query_sequence.encode()
            try:
                mm, ml = get_mod_tags(rec)
            except ReadError as err:
                # skipped, yet counted as no call where it is aligned
                lib.pu_add_read(ctx, rec.is_reverse, rec.reference_start, cigar, len(cigar),
                                seq, len(seq), ffi.NULL, ffi.NULL, 0)  # fmt: skip
                counted.skipped[err.kind] = counted.skipped.get(err.kind, 0) + 1
                counted.examples.setdefault(err.kind, (name, str(err)))
                continue
            rc = lib.pu_add_read(
                ctx, rec.is_reverse, rec.reference_start, cigar, len(cigar), seq, len(seq),
                mm.encode(), ffi.from_buffer(ml), len(ml),
            )  # fmt: skip
            if rc == CORE_DEFER:
                return None
            if rc:
                kind = CORE_KINDS[rc]
                counted.skipped[kind] = counted.skipped.get(kind, 0) + 1
                counted.examples.setdefault(kind, (name, ffi.string(ctx.reason).decode()))
                continue
            counted.used += 1
        return bool(names)

    def core_text(self, chunk: Chunk, length: int, stats: Stats) -> tuple[str, Stats]:
        """The text of several motifs on separate strands from the core's tallies (every
        position tallied: no want mask), through numpy's rows."""
        ctx = self.w.core
        ncodes = max(ctx.ncodes, 1)
        k = ctx.k
        counts = np.frombuffer(ffi.buffer(ctx.counts, length * 2 * k * 4), dtype=np.int32)
        counts = counts.reshape(length, 2, k)[:, :, : CODES + 4 * ncodes].astype(np.int64)
        bits = np.frombuffer(ffi.buffer(ctx.observed, length * 8), dtype=np.uint8)
        bits = bits.reshape(length, 2, 4)
        observed = ((bits[..., None] >> np.arange(ncodes, dtype=np.uint8)) & 1).astype(bool)
        names_c = [ffi.string(ctx.codes[i]).decode() for i in range(ctx.ncodes)] or ["?"]
        rows = self.rows_from_counts(chunk, counts, observed, ncodes, names_c)
        stats.rows = len(rows)
        return self._text(chunk, rows), stats

    def pileup_chunk(self, chunk: Chunk) -> tuple[str, Stats]:
        """ChunkWorker.pileup_chunk in Python and numpy."""
        stats = Stats()
        start, end = chunk.start, chunk.end
        length = end - start
        if length <= 0:
            return "", stats
        cache: dict[str, ReadCalls | None] = {}
        feat_pos, feat_kind = [], []
        cover = []  # (read's code keys, segments)
        for rec in self.w.bam.fetch(chunk.chrom, start, end):
            self.w.list_read(rec, chunk, stats)
            if not usable(rec) or not self.w.in_haplotype(rec):
                continue
            name = rec.query_name
            if name in cache:
                rc = cache[name]
            else:
                # count each read once over the run: in the interval where it starts
                counted = stats if chunk.first or rec.reference_start >= start else Stats()
                rc = cache[name] = self.read_record(rec, counted)
            if rc is None:  # skipped: still no call (and deletions) where it is aligned
                rc = NO_CALLS
            q, r, d, segments = alignment_arrays(rec)
            cover.append((rc.codes, segments))
            strand = 1 if rec.is_reverse else 0
            sel = (r >= start) & (r < end)
            q, r = q[sel], r[sel] - start
            seq = np.frombuffer(rec.query_sequence.encode(), dtype=np.uint8)
            base = BASE_LUT[seq[q]]
            ok = base != 4
            q, r, base = q[ok], r[ok], base[ok].astype(np.int64)
            n = len(seq)
            if strand:
                base = 3 - base
                qf = n - 1 - q
            else:
                qf = q
            pc = rc.pos[qf] if rc.pos is not None else np.full(len(q), NO_CALL, np.int16)
            nc = rc.neg[qf] if rc.neg is not None else np.full(len(q), NO_CALL, np.int16)
            none = (pc == NO_CALL) & (nc == NO_CALL)
            # the features of DELETES ... CODES, as core.c tallies them
            feat_pos.append(r[none] * 2 + strand)
            feat_kind.append(NOCALLS + base[none])
            for calls, tally, primary in ((pc, strand, base), (nc, 1 - strand, 3 - base)):
                has = calls != NO_CALL
                if not has.any():
                    continue
                c = calls[has].astype(np.int64)
                p = primary[has]
                kind = np.where(
                    c == FILTERED,
                    FAILS + p,
                    np.where(c == CANONICAL, CANONICALS + p, CODES + 4 * (c - 1) + p),
                )
                feat_pos.append(r[has] * 2 + (tally if np.isscalar(tally) else tally))
                feat_kind.append(kind)
            d = d[(d >= start) & (d < end)] - start
            feat_pos.append(d * 2 + strand)
            feat_kind.append(np.full(len(d), DELETES, dtype=np.int64))
        if not feat_pos:
            return "", stats
        ncodes = max(len(self.codes.codes), 1)
        k = CODES + 4 * ncodes
        flat = np.concatenate(feat_pos).astype(np.int64) * k + np.concatenate(feat_kind)
        counts = np.bincount(flat, minlength=length * 2 * k).reshape(length, 2, k)
        observed = self._observed(cover, start, length, ncodes)
        if self.w.combine_strands and self.w.options.modern:
            rows = self.folded_rows(chunk, counts, observed, ncodes, self.codes.codes)
        else:
            rows = self.rows_from_counts(chunk, counts, observed, ncodes, self.codes.codes)
            if self.w.combine_strands:
                rows = combine_strand_rows(chunk, rows, self.w.motifs)
        text = self._text(chunk, rows)
        stats.rows = len(rows)
        return text, stats

    def _observed(self, cover, start, length, ncodes) -> np.ndarray:
        """Per position, strand, base and code: whether a read over it reports that code."""
        diff = np.zeros((2, 4, ncodes, length + 1), dtype=np.int32)
        for codes, segments in cover:
            if not codes:
                continue
            for a, b in segments:
                a, b = max(a - start, 0), min(b - start, length)
                if a >= b:
                    continue
                for s, base, c in codes:
                    diff[s, base, c, a] += 1
                    diff[s, base, c, b] -= 1
        return np.moveaxis(np.cumsum(diff, axis=3)[..., :length] > 0, 3, 0)

    def folded_rows(self, chunk: Chunk, counts, observed, ncodes, code_names) -> list[tuple]:
        """0.6.1's --combine-strands: each + strand motif position tallies its - strand
        partner's reads too (modkit 0.6.1 moves them before counting, so a strand's fails count
        even where it has no valid call), one row per code, strand '.'."""
        length = counts.shape[0]
        counts, observed = counts.copy(), observed.copy()
        keep = np.zeros((length, 2), dtype=bool)
        for p in sorted(chunk.pos_motifs):
            for idx in chunk.pos_motifs[p]:
                motif = self.w.motifs[idx]
                partner = p + motif.reverse_offset - motif.offset - chunk.start
                at = p - chunk.start
                if not motif.palindrome or not 0 <= at < length:
                    continue
                keep[at, 0] = True
                if 0 <= partner < length and idx in chunk.neg_ids.get(partner + chunk.start, ()):
                    counts[at, 0] += counts[partner, 1]
                    observed[at, 0] |= observed[partner, 1]
                    counts[partner, 1] = 0
        counts[~keep] = 0
        rows = self.rows_from_counts(chunk, counts, observed, ncodes, code_names)
        return [(r[0], ".", *r[2:]) for r in rows]

    def rows_from_counts(
        self, chunk: Chunk, counts, observed, ncodes, code_names: list[str]
    ) -> list[tuple]:
        """The rows (modkit's FeatureVector::decode at each position), sorted by position,
        strand and code: (pos, strand, code, motif idx, cov, mod, canonical, other, delete,
        fail, diff, nocall). counts: (length, 2, CODES + 4 ncodes), core.c's features;
        observed: (length, 2, 4, ncodes) booleans."""
        start = chunk.start
        length = counts.shape[0]
        allowed = allowed_mask(chunk, length)
        delete = counts[:, :, DELETES]
        fails = counts[:, :, FAILS:NOCALLS]
        nocall = counts[:, :, NOCALLS:CANONICALS]
        canon = counts[:, :, CANONICALS:CODES]
        mods = counts[:, :, CODES:].reshape(length, 2, ncodes, 4)
        mod_total = mods.sum(axis=2)  # (L, 2, 4)
        calls = canon + mod_total
        all_calls = (nocall + calls).sum(axis=2)  # (L, 2)
        exists = (calls > 0) & allowed[:, :, None]
        rows = []
        fail_by_base = self.w.options.modern
        if self.w.combine_mods:
            idx = np.argwhere(exists)
        else:
            idx = np.argwhere(exists[:, :, :, None] & observed)
        ids_for = (chunk.pos_ids, chunk.neg_ids) if chunk.pos_ids is not None else None
        if self.w.combine_strands:
            ids_for = ({p: v for p, v in chunk.pos_motifs.items()}, chunk.neg_ids)
        for item in idx:
            p, s, b = int(item[0]), int(item[1]), int(item[2])
            if self.w.motif_bases and b not in self.w.motif_bases:
                continue
            cov = int(calls[p, s, b])
            total = int(mod_total[p, s, b])
            if self.w.combine_mods:
                code, n_mod, n_other = BASES[b], total, 0
            else:
                code = code_names[int(item[3])]
                n_mod = int(mods[p, s, int(item[3]), b])
                n_other = total - n_mod
            n_diff = int(all_calls[p, s] - calls[p, s, b] - nocall[p, s, b])
            if fail_by_base:  # 0.6.1: another base's failed call is N_diff
                n_fail = int(fails[p, s, b])
                n_diff += int(fails[p, s].sum()) - n_fail
            else:
                n_fail = int(fails[p, s].sum())
            values = (cov, n_mod, int(canon[p, s, b]), n_other, int(delete[p, s]), n_fail,
                      n_diff, int(nocall[p, s, b]))  # fmt: skip
            pos = start + p
            strand = "+-"[s]
            idxs = ids_for[s].get(pos) if ids_for is not None else None
            for motif_idx in idxs if idxs else [None]:
                rows.append((pos, strand, code, motif_idx) + values)
        rows.sort(key=lambda r: (r[0], r[1], code_key(r[2])))
        return rows

    def _text(self, chunk: Chunk, rows) -> str:
        """The rows as bedMethyl lines."""
        labels = self.w.motif_labels
        named = [
            (pos, strand, f"{code},{labels[idx]}" if len(labels) >= 2 and idx is not None else code,
             *counts)
            for pos, strand, code, idx, *counts in rows
        ]  # fmt: skip
        return rows_text(chunk.chrom, named, self.w.options.mixed_delim)


def allowed_mask(chunk: Chunk, length: int) -> np.ndarray:
    """position_masks' allowed (position, strand) pairs as a (length, 2) boolean array."""
    allowed, _ = position_masks(chunk, length)
    return np.frombuffer(bytes(allowed), dtype=np.uint8).reshape(length, 2).astype(bool)
