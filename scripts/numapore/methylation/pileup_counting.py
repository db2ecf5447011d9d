"""The counting core: an interval's reads tallied per position and strand (compiled core if
built, else numpy; the same bytes), its rows (modkit's FeatureVector::decode), --combine-strands,
and their bedMethyl text. Records with the same name in one interval share the first one's
calls by read position, where modkit maps them by the first one's reference positions."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pysam

from numapore.methylation.bedmethyl import rows_text
from numapore.methylation import pileup_common as common
from numapore.methylation.pileup_common import (
    BASES,
    BASE_INDEX,
    BASE_LUT,
    CANONICAL,
    FILTERED,
    NOT_PRIMARY_MAPPED,
    NO_CALL,
    ffi,
    lib,
    Options,
    ReadError,
)
from numapore.methylation.pileup_tags import (
    alignment_arrays,
    code_key,
    edge_keep,
    forward_sequence,
    get_mod_tags,
    haplotype_of,
    read_listing_line,
    read_mod_tables,
    table_probs,
    usable,
)
from numapore.methylation.pileup_thresholds import Caller, call_positions, new_core
from numapore.methylation.pileup_positions import NEG, POS, make_motif, PositionFilter
from numapore.methylation.pileup_regions import Chunk, combine_strand_rows, motif_focus
from numapore.methylation.pileup_modbases import ModBasesCounter
from numapore.methylation.pileup_reader import BamReader


@dataclass
class Stats:
    """Counts for the summary line."""

    used: int = 0
    skipped: dict = field(default_factory=dict)
    rows: int = 0
    examples: dict = field(default_factory=dict)  # kind -> (read name, reason)
    # A chunk's lines of the read listing (ChunkWorker.list_reads), written as they come
    reads: list = field(default_factory=list)

    def add(self, other: Stats) -> None:
        """Add another chunk's counts (not its read listing)."""
        self.used += other.used
        self.rows += other.rows
        for k, v in other.skipped.items():
            self.skipped[k] = self.skipped.get(k, 0) + v
        for k, v in other.examples.items():
            self.examples.setdefault(k, v)


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


# The columns of pileup's read listing (reads_out), a TSV with this header line
READ_LISTING_COLUMNS = ("read_id", "mapq", "called", "hp")


READ_LISTING_HEADER = "\t".join(READ_LISTING_COLUMNS) + "\n"


class ChunkWorker:
    """Does chunks of one BAM with fixed settings (one per process)."""

    def __init__(
        self,
        bam_path: str,
        options: Options,
        caller: Caller,
        pf: PositionFilter | None = None,
        list_reads: bool = False,
    ):
        """Open the BAM (and the FASTA for motifs); the compiled core if built. list_reads:
        each chunk's Stats.reads lists the mapped primary records starting in it."""
        self.bam = pysam.AlignmentFile(bam_path, "rb", check_sq=False)
        self.list_reads = list_reads
        self.fasta = pysam.FastaFile(options.reference) if options.motif_list() else None
        self.pf = pf
        self.options = options
        self.caller = caller
        self.ignore, self.combine_mods, self.combine_strands = options.numeric()
        self.edge = options.edge()
        self.codes = CodeRegistry()
        self.motif_labels = [make_motif(m, o).label for m, o in options.motif_list()]
        self.motifs = [make_motif(m, o) for m, o in options.motif_list()]
        # 0.6: a motif position's rows are of the motif's base only (other bases' calls there
        # are no calls of theirs, so N_diff of the motif base's rows)
        self.motif_bases = (
            [BASE_INDEX.get(m.raw[m.offset], 4) for m in self.motifs] if options.modern else []
        )
        # the same as pileup_core.c's bit mask of bases with rows
        self.base_mask = (
            sum(1 << b for b in set(self.motif_bases) if b < 4) if self.motif_bases else 15
        )
        self.core = new_core(options, caller) if common.ENABLED else None
        self.reader = BamReader.open(bam_path) if self.core is not None else None
        self.modbases = None
        if options.modern and options.modified_bases:
            self.modbases = ModBasesCounter(
                self.bam, pysam.FastaFile(options.reference), options, caller, pf,
                alignment_arrays, self.in_haplotype,
            )  # fmt: skip

    def read_record(self, rec, stats: Stats) -> ReadCalls | None:
        """The read's calls as modkit's ReadCache::add_record makes them, None if skipped."""
        try:
            mm, ml = get_mod_tags(rec)
            fwd = forward_sequence(rec)
            tables = read_mod_tables(mm, ml, fwd)
            if not any(t.has.any() for t in tables.values()):
                raise ReadError("empty", "no modified base information")
            if not self.options.force_allow_implicit and any(t.mode == "" for t in tables.values()):
                raise ReadError("implicit", f"MM {mm.split(';')[0][:12]!r} has no mode ('.'/'?')")
        except ReadError as err:
            stats.skipped[err.kind] = stats.skipped.get(err.kind, 0) + 1
            stats.examples.setdefault(err.kind, (rec.query_name, str(err)))
            return None
        n = len(fwd)
        calls = {"+": None, "-": None}
        codes = set()
        added = False
        keep = edge_keep(self.edge, n)
        for (strand, base), table in tables.items():
            if keep is None:
                continue
            kept = table.has & keep
            if not kept.any():
                continue
            where = np.flatnonzero(kept)
            order, columns = table_probs(table, kept, self.ignore)
            tb = base if strand == "+" else 3 - base
            call = call_positions(order, columns, len(where), self.caller, tb, self.codes)
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

    def in_haplotype(self, rec) -> bool:
        """Whether the record counts in this pileup's haplotype (all do without one)."""
        return self.options.haplotype is None or haplotype_of(rec) == self.options.haplotype

    def list_read(self, rec, chunk: Chunk, stats: Stats) -> None:
        """With list_reads, add a mapped primary record to the chunk's listing when it starts
        in the chunk (as the reads counted for the summary): once over chunks that tile."""
        if (
            self.list_reads
            and not rec.flag & NOT_PRIMARY_MAPPED
            and (chunk.first or rec.reference_start >= chunk.start)
        ):
            stats.reads.append(read_listing_line(rec))

    def pileup_chunk(self, chunk: Chunk) -> tuple[str, Stats]:
        """The bedMethyl text of one interval and its counts (compiled core if built)."""
        if self.modbases is not None:
            stats = Stats()
            rows = self.modbases.rows(chunk.chrom, chunk.start, chunk.end, stats)
            stats.rows = len(rows)
            return rows_text(chunk.chrom, rows), stats
        if chunk.planned_end is not None:  # its motif positions, found again
            found = self.reader.any(chunk.tid, chunk.start, chunk.end) if self.reader else None
            if found is None:
                found = next(self.bam.fetch(chunk.chrom, chunk.start, chunk.end), None) is not None
            if not found:
                return "", Stats()  # no read, no row: its motif positions are not needed
            span_end = chunk.span_end
            chunk = Chunk(chunk.tid, chunk.chrom, chunk.start, chunk.planned_end, first=chunk.first)
            motif_focus(chunk, self.motifs, self.fasta, span_end, self.pf, self.combine_strands,
                        self.options.mask)  # fmt: skip
            chunk.end = min(chunk.end, span_end)
        if common.ENABLED and self.core is not None:
            done = self.pileup_chunk_core(chunk)
            if done is not None:
                return done
        return self.pileup_chunk_python(chunk)

    def pileup_chunk_core(self, chunk: Chunk) -> tuple[str, Stats] | None:
        """pileup_chunk through pileup_core.c; None where it leaves the chunk to Python (more
        mod codes than it holds, a repeated read name, an N fundamental base)."""
        stats = Stats()
        start, end = chunk.start, chunk.end
        length = end - start
        if length <= 0:
            return "", stats
        ctx = self.core
        # The C text writers read the tallies of allowed positions only (motif positions,
        # --include-bed): the core tallies those alone; the numpy rows (several motifs on
        # separate strands) read them all.
        text_in_c = self.combine_strands or len(self.motif_labels) < 2
        want = None
        if text_in_c and (chunk.rules is not None or chunk.regions is not None):
            want = np.ascontiguousarray(allowed_mask(chunk, length).any(axis=1), dtype=np.uint8)
        ctx.want = ffi.from_buffer(want) if want is not None else ffi.NULL
        tallied = None
        if self.reader is not None:
            tallied = self.reader.tally(
                ctx, chunk, self.options.haplotype, self.list_reads, stats
            )  # fmt: skip
        if tallied is None:
            tallied = self._tally_pysam(chunk, stats)
            if tallied is None:
                return None
        if not tallied:
            return "", stats
        return self._core_text(chunk, length, stats)

    def _tally_pysam(self, chunk: Chunk, stats: Stats) -> bool | None:
        """The interval's usable records through pysam into the core (its want mask set):
        whether a read was tallied, None where Python must do the interval."""
        ctx, start, length = self.core, chunk.start, chunk.end - chunk.start
        names: set[str] = set()
        for rec in self.bam.fetch(chunk.chrom, start, chunk.end):
            self.list_read(rec, chunk, stats)
            if not usable(rec) or not self.in_haplotype(rec):
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

    def _core_text(self, chunk: Chunk, length: int, stats: Stats) -> tuple[str, Stats]:
        """The bedMethyl text of the interval tallied in the core."""
        ctx = self.core
        lib.pu_observe(ctx)
        if not self.combine_strands and len(self.motif_labels) < 2:
            allowed = np.ascontiguousarray(allowed_mask(chunk, length), dtype=np.uint8)
            chrom = chunk.chrom.encode()
            cap = lib.pu_rows_bound(ctx, self.combine_mods) * (len(chrom) + 200) + len(chrom) + 201
            nrows = ffi.new("int64_t *")
            out = _raw_alloc("char[]", cap)
            size = lib.pu_text(
                ctx, chrom, ffi.from_buffer(allowed), self.base_mask, self.combine_mods,
                self.options.mixed_delim, out, cap, nrows,
            )  # fmt: skip
            if size < 0:
                raise RuntimeError("pileup_core: text buffer too small")
            stats.rows = nrows[0]
            return ffi.unpack(out, size).decode(), stats
        if self.combine_strands:
            text = self._combined_text_core(chunk, length, folded=bool(self.motif_bases))
            stats.rows = self._last_rows if text else 0
            return text, stats
        ncodes = max(ctx.ncodes, 1)
        k = ctx.k
        counts = np.frombuffer(ffi.buffer(ctx.counts, length * 2 * k * 4), dtype=np.int32)
        counts = counts.reshape(length, 2, k)[:, :, : 10 + 4 * ncodes].astype(np.int64)
        bits = np.frombuffer(ffi.buffer(ctx.observed, length * 8), dtype=np.uint8)
        bits = bits.reshape(length, 2, 4)
        observed = ((bits[..., None] >> np.arange(ncodes, dtype=np.uint8)) & 1).astype(bool)
        names_c = [ffi.string(ctx.codes[i]).decode() for i in range(ctx.ncodes)] or ["?"]
        if self.combine_strands and self.options.modern:
            rows = self.folded_rows(chunk, counts, observed, ncodes, names_c)
        else:
            rows = self.rows_from_counts(chunk, counts, observed, ncodes, names_c)
            if self.combine_strands:
                rows = combine_strand_rows(chunk, rows, self.motifs)
        stats.rows = len(rows)
        return self._text(chunk, rows), stats

    def _combined_text_core(self, chunk: Chunk, length: int, folded: bool = False) -> str:
        """--combine-strands text through pileup_core.c: 0.4.4's (combine_strand_rows' pairs:
        each + strand motif position with its motif's - strand position, when it has rows
        there), or with folded 0.6.1's (folded_rows: the - strand partner's tallies moved onto
        the + strand position, then its rows of the motif bases)."""
        start = chunk.start
        allowed = allowed_mask(chunk, length)
        pos, idx, neg, pos_ok = [], [], [], []
        for p in sorted(chunk.pos_motifs):
            for i in chunk.pos_motifs[p]:
                motif = self.motifs[i]
                other = p + motif.reverse_offset - motif.offset
                if not motif.palindrome or (other < 0 and not folded):
                    continue
                o = other - start
                if folded:
                    has_neg = 0 <= o < length and i in chunk.neg_ids.get(other, ())
                else:
                    has_neg = (
                        0 <= o < length and allowed[o, 1] and i in chunk.neg_ids.get(other, ())
                    )
                pos.append(p - start)
                idx.append(i)
                neg.append(o if has_neg else -1)
                pos_ok.append(bool(allowed[p - start, 0]))
        if not pos:
            return ""
        arrays = [
            np.asarray(pos, dtype=np.int64), np.asarray(idx, dtype=np.int32),
            np.asarray(neg, dtype=np.int64), np.asarray(pos_ok, dtype=np.uint8),
        ]  # fmt: skip
        labels = [ffi.new("char[]", label.encode()) for label in self.motif_labels]
        label_array = ffi.new("char *[]", labels)
        chrom = chunk.chrom.encode()
        longest = max((len(label) for label in self.motif_labels), default=0)
        cap = len(pos) * (lib.PU_MAXC + 4) * (len(chrom) + longest + 220) + 1
        out = _raw_alloc("char[]", cap)
        nrows = ffi.new("int64_t *")
        typed = [ffi.from_buffer(t, a) for t, a in zip(C_TYPES, arrays, strict=True)]
        if folded:
            size = lib.pu_text_folded(
                self.core, chrom, *typed, len(pos), label_array, len(labels), self.base_mask,
                self.combine_mods, out, cap, nrows,
            )  # fmt: skip
        else:
            size = lib.pu_text_combined(
                self.core, chrom, *typed, len(pos), label_array,
                len(labels), self.combine_mods, self.options.mixed_delim, out, cap, nrows,
            )  # fmt: skip
        if size < 0:
            raise RuntimeError("pileup_core: text buffer too small")
        self._last_rows = nrows[0]
        return ffi.unpack(out, size).decode()

    def pileup_chunk_python(self, chunk: Chunk) -> tuple[str, Stats]:
        """pileup_chunk in Python and numpy."""
        stats = Stats()
        start, end = chunk.start, chunk.end
        length = end - start
        if length <= 0:
            return "", stats
        cache: dict[str, ReadCalls | None] = {}
        feat_pos, feat_kind = [], []
        cover = []  # (read's code keys, segments)
        for rec in self.bam.fetch(chunk.chrom, start, end):
            self.list_read(rec, chunk, stats)
            if not usable(rec) or not self.in_haplotype(rec):
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
            # kinds: 0 delete, 1 filtered, 2+b no call, 6+b canonical, 10+4k+b mod code k
            feat_pos.append(r[none] * 2 + strand)
            feat_kind.append(2 + base[none])
            for calls, tally, primary in ((pc, strand, base), (nc, 1 - strand, 3 - base)):
                has = calls != NO_CALL
                if not has.any():
                    continue
                c = calls[has].astype(np.int64)
                p = primary[has]
                kind = np.where(
                    c == FILTERED, 1, np.where(c == CANONICAL, 6 + p, 10 + 4 * (c - 1) + p)
                )
                feat_pos.append(r[has] * 2 + (tally if np.isscalar(tally) else tally))
                feat_kind.append(kind)
            d = d[(d >= start) & (d < end)] - start
            feat_pos.append(d * 2 + strand)
            feat_kind.append(np.zeros(len(d), dtype=np.int64))
        if not feat_pos:
            return "", stats
        ncodes = max(len(self.codes.codes), 1)
        k = 10 + 4 * ncodes
        flat = np.concatenate(feat_pos).astype(np.int64) * k + np.concatenate(feat_kind)
        counts = np.bincount(flat, minlength=length * 2 * k).reshape(length, 2, k)
        observed = self._observed(cover, start, length, ncodes)
        if self.combine_strands and self.options.modern:
            rows = self.folded_rows(chunk, counts, observed, ncodes, self.codes.codes)
        else:
            rows = self.rows_from_counts(chunk, counts, observed, ncodes, self.codes.codes)
            if self.combine_strands:
                rows = combine_strand_rows(chunk, rows, self.motifs)
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
                motif = self.motifs[idx]
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
        fail, diff, nocall). counts: (length, 2, 10 + 4 ncodes); observed: (length, 2, 4,
        ncodes) booleans."""
        start = chunk.start
        length = counts.shape[0]
        allowed = allowed_mask(chunk, length)
        delete, fail = counts[:, :, 0], counts[:, :, 1]
        nocall = counts[:, :, 2:6]
        canon = counts[:, :, 6:10]
        mods = counts[:, :, 10:].reshape(length, 2, ncodes, 4)
        mod_total = mods.sum(axis=2)  # (L, 2, 4)
        calls = canon + mod_total
        all_calls = (nocall + calls).sum(axis=2)  # (L, 2)
        exists = (calls > 0) & allowed[:, :, None]
        rows = []
        if self.combine_mods:
            idx = np.argwhere(exists)
        else:
            idx = np.argwhere(exists[:, :, :, None] & observed)
        ids_for = (chunk.pos_ids, chunk.neg_ids) if chunk.pos_ids is not None else None
        if self.combine_strands:
            ids_for = ({p: v for p, v in chunk.pos_motifs.items()}, chunk.neg_ids)
        for item in idx:
            p, s, b = int(item[0]), int(item[1]), int(item[2])
            if self.motif_bases and b not in self.motif_bases:
                continue
            cov = int(calls[p, s, b])
            total = int(mod_total[p, s, b])
            if self.combine_mods:
                code, n_mod, n_other = BASES[b], total, 0
            else:
                code = code_names[int(item[3])]
                n_mod = int(mods[p, s, int(item[3]), b])
                n_other = total - n_mod
            n_diff = int(all_calls[p, s] - calls[p, s, b] - nocall[p, s, b])
            values = (cov, n_mod, int(canon[p, s, b]), n_other, int(delete[p, s]),
                      int(fail[p, s]), n_diff, int(nocall[p, s, b]))  # fmt: skip
            pos = start + p
            strand = "+-"[s]
            idxs = ids_for[s].get(pos) if ids_for is not None else None
            for motif_idx in idxs if idxs else [None]:
                rows.append((pos, strand, code, motif_idx) + values)
        rows.sort(key=lambda r: (r[0], r[1], code_key(r[2])))
        return rows

    def _text(self, chunk: Chunk, rows) -> str:
        """The rows as bedMethyl lines."""
        labels = self.motif_labels
        named = [
            (pos, strand, f"{code},{labels[idx]}" if len(labels) >= 2 and idx is not None else code,
             *counts)
            for pos, strand, code, idx, *counts in rows
        ]  # fmt: skip
        return rows_text(chunk.chrom, named, self.options.mixed_delim)


def allowed_mask(chunk: Chunk, length: int) -> np.ndarray:
    """Which (position, strand) of the chunk may have rows: its motif strand rules, its
    --include-positions intervals, or all."""
    start = chunk.start
    allowed = np.ones((length, 2), dtype=bool)
    if chunk.rules is not None:
        allowed[:] = False
        for p, rule in chunk.rules.items():
            if start <= p < start + length:
                allowed[p - start, 0] = bool(rule & POS)
                allowed[p - start, 1] = bool(rule & NEG)
    elif chunk.regions is not None:
        allowed[:] = False
        for s in (0, 1):
            for a, b in chunk.regions[s]:
                allowed[a - start : b - start, s] = True
    return allowed


_raw_alloc = ffi.new_allocator(should_clear_after_alloc=False) if ffi is not None else None


C_TYPES = ("int64_t[]", "int32_t[]", "int64_t[]", "uint8_t[]")  # pu_text_combined's arrays


CORE_DEFER = 7  # pileup_core.c's SKIP_CODES: the chunk goes to the Python path


CORE_KINDS = {1: "missing", 2: "ml_short", 3: "mm", 4: "conflict", 5: "empty", 6: "implicit"}
