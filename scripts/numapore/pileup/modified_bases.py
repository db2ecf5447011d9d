"""modkit 0.6.1's `--modified-bases` pileup (its "optimized" DnaPileupWorker): rows only at the
reference positions of the requested primary bases, a read's base there is its call or no call
when it equals the reference base and N_diff otherwise, and each position's call is its top
ML value against that call's own threshold (BaseModsAdapter::next_modified_position).

Where this follows modkit's documentation and not 0.6.1's code: an asymmetric --edge-filter
trims the read's 5' and 3' ends in read orientation (0.6.1 uses BAM orientation on reverse reads;
the suite's README, item F), and `Mm`/`Ml` tags are read (0.6.1's optimized path looks for `Ml`
instead of `Mm`, fixed in 0.6.2).
"""

from __future__ import annotations

import numpy as np
import pysam

from numapore.pileup import common
from numapore.pileup.common import ffi, lib, PileupError
from numapore.pileup.thresholds import parse_mod_thresholds

BASES = "ACGT"
# --modified-bases long names (modkit's LONG_NAME_TO_CODE) to (primary base, code)
LONG_NAMES = {
    "5hmC": ("C", "h"), "5mC": ("C", "m"), "4mC": ("C", "21839"), "6mA": ("A", "a"),
    "m6A": ("A", "a"), "m5C": ("C", "m"), "pseU": ("T", "17802"), "inosine": ("A", "17596"),
    "2OmeG": ("G", "19229"), "2OmeC": ("C", "19228"), "2OmeA": ("A", "69426"),
    "2OmeU": ("T", "19227"), "A": ("A", "A"), "C": ("C", "C"), "T": ("T", "T"), "G": ("G", "G"),
}  # fmt: skip
COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A"}
_LUT = np.full(256, 4, dtype=np.int8)
for _i, _b in enumerate(BASES):
    _LUT[ord(_b)] = _i
    _LUT[ord(_b.lower())] = _i


class RecordError(Exception):
    """A record modkit's optimized path drops whole (its tags cannot be read)."""


def parse_modified_bases(raw: list[str]) -> list[tuple[int, str]]:
    """--modified-bases values (long names or BASE:CODE) as sorted (base index, code) pairs."""
    out = set()
    for item in raw:
        if ":" in item:
            base, _, code = item.partition(":")
            if base not in BASES or not code or ":" in code:
                raise PileupError(f"invalid --modified-bases {item!r}, should be e.g. C:m")
            out.add((BASES.index(base), code))
        elif item in LONG_NAMES:
            base, code = LONG_NAMES[item]
            out.add((BASES.index(base), code))
        else:
            raise PileupError(f"unknown --modified-bases {item!r} (e.g. 5mC 5hmC 6mA, or C:m)")
    return sorted(out, key=lambda bc: (bc[0], code_order(bc[1])))


def code_order(code: str) -> tuple:
    """modkit's ModCodeRepr order: letter codes (by character) before ChEBI numbers."""
    return (1, int(code), "") if code.isdigit() else (0, 0, code)


def read_calls(
    rec: pysam.AlignedSegment,
    thresholds,
    mod_thresholds: dict[str, float],
    compiled: CompiledCalls | None = None,
):
    """The record's calls by forward (read-orientation) position, as modkit's BaseModsAdapter
    makes them: the forward bases, kind per position (-1 no call, 0 canonical, 1 modified, 2
    filtered) and (the codes met, per position the modified call's code: their index, -1
    none). RecordError where it drops the record. With compiled, modcalls.c makes them
    where it can (the same calls)."""
    mm, ml = first_tag(rec, "MM", "Mm"), first_tag(rec, "ML", "Ml")
    if not isinstance(mm, str) or not mm or ml is None or isinstance(ml, (str, int, float)):
        raise RecordError("no MM/ML tags")
    ml = np.frombuffer(ml, dtype=np.uint8) if not isinstance(ml, np.ndarray) else ml
    if compiled is not None:
        calls = compiled.calls(rec, mm, ml)
        if calls is not None:
            return calls
    seq = rec.query_sequence
    if rec.is_reverse:
        seq = seq.translate(str.maketrans("ACGTNacgtn", "TGCANtgcan"))[::-1]
    fwd = _LUT[np.frombuffer(seq.encode(), dtype=np.uint8)]
    n = len(fwd)
    # per base: its MM groups' entries (position, code id, ML value), in MM order, and whether
    # it is implicit
    codes_seen: list[str] = []
    entries: dict[int, list[tuple]] = {}
    implicit = [False] * 4
    pointer = 0
    for raw in mm.split(";"):
        if not raw:
            continue
        head, *deltas = raw.split(",")
        if len(head) < 2 or head[0] not in BASES or head[1] != "+":
            raise RecordError(f"unsupported MM entry {raw[:16]!r}")
        base = BASES.index(head[0])
        spec = head[2:]
        mode = spec[-1] if spec and spec[-1] in ".?" else ""
        spec = spec[:-1] if mode else spec
        codes = [spec] if spec.isdigit() else list(spec)
        if not codes:
            raise RecordError(f"MM entry {raw[:16]!r} without a code")
        implicit[base] |= mode != "?"
        occurrences = np.flatnonzero(fwd == base)
        try:
            steps = np.asarray([int(d) for d in deltas], dtype=np.int64)
        except ValueError:
            raise RecordError(f"invalid MM deltas {raw[:16]!r}") from None
        index = np.cumsum(steps + 1) - 1
        if len(index) and index[-1] >= len(occurrences):
            raise RecordError("MM refers past the sequence's end")
        end = pointer + len(index) * len(codes)
        if end > len(ml):
            raise RecordError("ML shorter than MM needs")
        values = ml[pointer:end]
        pointer = end
        for c in codes:
            if c not in codes_seen:
                codes_seen.append(c)
        ids = np.asarray([codes_seen.index(c) for c in codes], dtype=np.int64)
        entries.setdefault(base, []).append(
            (np.repeat(occurrences[index], len(codes)), np.tile(ids, len(index)), values)
        )
    kind = np.full(n, -1, dtype=np.int8)
    code_at = np.full(n, -1, dtype=np.int64)  # the modified call's code (codes_seen index)
    for base in range(4):
        threshold = np.float32(thresholds[base])
        if implicit[base]:  # unlisted bases of the type: canonical, quality 255
            where = fwd == base
            kind[where] = 0 if prob(255) >= threshold else 2
        if base in entries:
            _listed_calls(entries[base], codes_seen, threshold, mod_thresholds, kind, code_at)
    return fwd, kind, (codes_seen, code_at)


class CompiledCalls:
    """read_calls through the compiled core (modcalls.c's pu_mb_calls) with fixed
    thresholds."""

    def __init__(self, thresholds, mod_thresholds: dict[str, float]):
        """The canonical thresholds per base and the per-code ones (codes of at most 11
        characters: build() checks)."""
        self.thresholds = ffi.new("float[4]", [float(t) for t in thresholds])
        self.mod_codes = ffi.new("char[]", b"".join(c.encode().ljust(12, b"\0")
                                                    for c in mod_thresholds) or b"\0")  # fmt: skip
        self.mod_values = ffi.new("float[]", [float(v) for v in mod_thresholds.values()] or [0.0])
        self.nmod = len(mod_thresholds)
        self.codes = ffi.new("char[]", 12 * 16)
        self.ncodes = ffi.new("int *")

    @classmethod
    def build(cls, thresholds, mod_thresholds: dict[str, float]) -> CompiledCalls | None:
        """The compiled calls, None without the core (or with a code it cannot hold)."""
        if not common.ENABLED or any(len(c.encode()) > 11 for c in mod_thresholds):
            return None
        return cls(thresholds, mod_thresholds)

    def calls(self, rec, mm: str, ml: np.ndarray):
        """read_calls' result, None where the core leaves the record to numpy."""
        seq = rec.query_sequence.encode()
        n = len(seq)
        fwd, kind = np.empty(n, dtype=np.int8), np.empty(n, dtype=np.int8)
        code_at = np.empty(n, dtype=np.int32)
        got = lib.pu_mb_calls(
            seq, n, rec.is_reverse, mm.encode(), ffi.from_buffer(ml), len(ml), self.thresholds,
            self.mod_codes, self.mod_values, self.nmod, ffi.from_buffer("int8_t[]", fwd),
            ffi.from_buffer("int8_t[]", kind), ffi.from_buffer("int32_t[]", code_at), self.codes,
            self.ncodes,
        )  # fmt: skip
        if got:
            return None
        codes = [ffi.string(self.codes + 12 * k).decode() for k in range(self.ncodes[0])]
        return fwd, kind, (codes, code_at)


def _listed_calls(parts, codes_seen, threshold, mod_thresholds, kind, code_at) -> None:
    """The calls at a base's listed positions, each from its entries in MM order (modkit's
    BaseModsAdapter): the first code with the highest ML value, the canonical quality 255 -
    the values' sum (at least 0); canonical if above the mod's value, each against its own
    threshold (2: filtered)."""
    pos = np.concatenate([p for p, _, _ in parts])
    ids = np.concatenate([i for _, i, _ in parts])
    qual = np.concatenate([q for _, _, q in parts]).astype(np.int64)
    order = np.argsort(pos, kind="stable")  # a position's entries stay in MM order
    pos, ids, qual = pos[order], ids[order], qual[order]
    starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]])
    at = pos[starts]
    total = np.minimum(np.add.reduceat(qual, starts), 255)
    top = np.maximum.reduceat(qual, starts)
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(pos)]))
    first = np.minimum.reduceat(
        np.where(qual == top[group], np.arange(len(qual)), len(qual)), starts
    )
    code = ids[first]
    canonical = 255 - total
    wins = canonical > top
    limits = np.asarray([mod_thresholds.get(c, threshold) for c in codes_seen], dtype=np.float32)
    kind[at] = np.where(
        wins,
        np.where(prob(canonical) >= threshold, 0, 2),
        np.where(prob(top) >= limits[code], 1, 2),
    )
    code_at[at[~wins]] = code[~wins]


def first_tag(rec: pysam.AlignedSegment, *tags: str):
    """The value of the first of tags the record has (None if none)."""
    for tag in tags:
        if rec.has_tag(tag):
            return rec.get_tag(tag)
    return None


def prob(qual):
    """modkit's qual_to_prob: (q + 0.5) / 256 in f32 (of a value or an array)."""
    return (np.asarray(qual).astype(np.float32) + np.float32(0.5)) / np.float32(256)


NOT_COUNTED = 0x4 | 0x100 | 0x400 | 0x800  # unmapped, secondary, duplicate, supplementary


class ModBasesCounter:
    """One interval at a time: the --modified-bases tallies and their bedMethyl rows."""

    def __init__(self, bam, fasta, options, caller, pf, alignment_arrays, in_haplotype):
        self.bam, self.fasta, self.pf = bam, fasta, pf
        self.alignment_arrays = alignment_arrays
        self.in_haplotype = in_haplotype
        self.max_depth = options.max_depth
        self.requested = parse_modified_bases(options.modified_bases)
        self.bases = sorted({b for b, _ in self.requested})
        self.cpg = options.cpg
        self.combine_mods = options.combine_mods
        self.combine_strands = options.combine_strands
        self.mask = options.mask
        self.thresholds = [caller.canonical_threshold(b) for b in range(4)]
        self.mod_thresholds = dict(caller.per_mod) or parse_mod_thresholds(options.mod_thresholds)
        edge = options.edge()
        self.edge = edge[:2] if edge is not None else (0, 0)
        self.codes: list[str] = [c for _, c in self.requested]
        self.compiled = CompiledCalls.build(self.thresholds, self.mod_thresholds)

    def code_index(self, code: str) -> int:
        """A mod code's slot in the tallies (codes found in reads are added)."""
        if code not in self.codes:
            self.codes.append(code)
        return self.codes.index(code)

    def focus(self, tid: int, chrom: str, start: int, end: int) -> np.ndarray:
        """(end - start, 2) booleans: the positions and strands that get rows."""
        length = self.fasta.get_reference_length(chrom)
        lo, hi = max(start - 1, 0), min(end + 1, length)
        seq = self.fasta.fetch(chrom, lo, hi)
        seq = seq if self.mask else seq.upper()
        ref = _LUT[np.frombuffer(seq.encode(), dtype=np.uint8)]
        at = start - lo
        here = ref[at : at + end - start]
        focus = np.zeros((end - start, 2), dtype=bool)
        if self.cpg:
            after = np.append(ref[at + 1 : at + 1 + end - start], 4)[: end - start]
            before = ref[at - 1 : at - 1 + end - start] if at else np.append(4, here[:-1])
            focus[:, 0] = (here == 1) & (after == 2)
            focus[:, 1] = (here == 2) & (before == 1)
        else:
            for b in self.bases:
                focus[:, 0] |= here == b
                focus[:, 1] |= here == 3 - b
        if self.pf is not None:
            for s in (0, 1):
                inside = np.zeros(end - start, dtype=bool)
                for a, e in self.pf.intervals.get((tid, s), []):
                    if a < end and e > start:
                        inside[max(a, start) - start : min(e, end) - start] = True
                focus[:, s] &= inside
        self.row_base = np.stack([here, np.where(here < 4, 3 - here, 4)], axis=1)
        return focus

    def count(self, chrom: str, start: int, end: int, focus, stats):
        """The tallies of [start, end): (total, delete) (L, 2) and per kind (L, 2, slots, 4)
        with slots no call, canonical, filtered, then one per mod code. With a max depth,
        only the first that many records over a focus position count there (record order)."""
        length = end - start
        depth = np.zeros(length * 2, dtype=np.int64) if self.max_depth is not None else None
        in_focus = focus.reshape(-1)
        flat_pos, flat_kind, deletes, totals = [], [], [], []
        es, ee = self.edge
        for rec in self.bam.fetch(chrom, start, end):
            if rec.flag & NOT_COUNTED or rec.reference_id < 0 or not rec.query_sequence:
                continue
            if not self.in_haplotype(rec):
                continue
            n = rec.query_length
            if n <= es or n <= ee:
                continue
            try:
                fwd, kind, calls = read_calls(rec, self.thresholds, self.mod_thresholds,
                                              self.compiled)  # fmt: skip
            except RecordError as err:
                stats.skipped["mm"] = stats.skipped.get("mm", 0) + 1
                stats.examples.setdefault("mm", (rec.query_name, str(err)))
                continue
            if rec.reference_start >= start or start == 0:
                stats.used += 1
            q, r, d, _ = self.alignment_arrays(rec)
            strand = int(rec.is_reverse)
            sel = (r >= start) & (r < end)
            q, r = q[sel], r[sel] - start
            qf = n - 1 - q if strand else q
            keep = (qf >= es) & (qf < n - ee)
            qf, r = qf[keep], r[keep]
            slot = np.where(kind[qf] == -1, 0, np.where(kind[qf] == 0, 1, 2)).astype(np.int64)
            modified = np.flatnonzero(kind[qf] == 1)
            if len(modified):
                codes_seen, code_at = calls
                ids = code_at[qf[modified]]
                _, first = np.unique(ids, return_index=True)
                lut = np.zeros(len(codes_seen), dtype=np.int64)
                for j in ids[np.sort(first)].tolist():  # registered in order of appearance
                    lut[j] = self.code_index(codes_seen[j])
                slot[modified] = 3 + lut[ids]
            base = fwd[qf].astype(np.int64)
            ok = base < 4
            d = d[(d >= start) & (d < end)] - start
            if depth is not None:  # the record's focus positions while under the cap
                cell, dcell = r * 2 + strand, d * 2 + strand
                room = depth < self.max_depth
                keep, dkeep = room[cell] & in_focus[cell], room[dcell] & in_focus[dcell]
                depth[cell[keep]] += 1
                depth[dcell[dkeep]] += 1
                r, slot, base, ok, d = r[keep], slot[keep], base[keep], ok[keep], d[dkeep]
            flat_pos.append(r[ok] * 2 + strand)
            flat_kind.append(slot[ok] * 4 + base[ok])
            totals.append(r * 2 + strand)
            deletes.append(d * 2 + strand)
        slots = 3 + len(self.codes)
        total = _bincount(totals, length * 2).reshape(length, 2)
        delete = _bincount(deletes, length * 2).reshape(length, 2)
        if flat_pos:
            index = np.concatenate(flat_pos) * (slots * 4) + np.concatenate(flat_kind)
        else:
            index = np.zeros(0, dtype=np.int64)
        kinds = np.bincount(index, minlength=length * 2 * slots * 4)
        return total, delete, kinds.reshape(length, 2, slots, 4)

    def rows(self, chrom: str, start: int, end: int, stats) -> list[tuple]:
        """The interval's rows: (position, strand, code, cov, mod, canonical, other, delete,
        fail, diff, nocall), in modkit's order."""
        if chrom not in self.fasta.references:  # no reference bases: no rows
            return []
        tid = self.bam.get_tid(chrom)
        span_end = end + 1 if self.combine_strands else end  # a CpG's G past the end
        span_end = min(span_end, self.bam.get_reference_length(chrom))
        focus = self.focus(tid, chrom, start, span_end)
        total, delete, kinds = self.count(chrom, start, span_end, focus, stats)
        out = []
        positions = np.argwhere(focus)
        values = {}
        for p, s in positions.tolist():
            b = int(self.row_base[p, s])
            if b == 4:
                continue
            nocall, canonical, filtered = (int(kinds[p, s, k, b]) for k in range(3))
            mods = kinds[p, s, 3:, b]
            n_mod_all = int(mods.sum())
            same_base = nocall + canonical + filtered + n_mod_all
            diff = int(total[p, s]) - same_base
            values[(p, s)] = (b, canonical, mods, n_mod_all, int(delete[p, s]), filtered, diff,
                              nocall)  # fmt: skip
        wanted = [(p, s) for p, s in positions.tolist() if p < end - start]
        if self.combine_strands:
            wanted = [(p, 0) for p, s in wanted if s == 0]
        for p, s in wanted:
            if (p, s) not in values:
                continue
            parts = [values[(p, s)]]
            strand = "+-"[s]
            if self.combine_strands:
                strand = "."
                if (p + 1, 1) in values:
                    parts.append(values[(p + 1, 1)])
            out += self.position_rows(start + p, strand, parts)
        return out

    def position_rows(self, position: int, strand: str, parts) -> list[tuple]:
        """One position's rows from its (summed) strands' tallies."""
        base = parts[0][0]
        canonical = sum(x[1] for x in parts)
        mods = sum(x[2] for x in parts)
        n_mod_all = sum(x[3] for x in parts)
        rest = [sum(x[i] for x in parts) for i in range(4, 8)]
        cov = canonical + n_mod_all
        if cov == 0:
            return []
        if self.combine_mods:
            return [(position, strand, BASES[base], cov, n_mod_all, canonical, 0, *rest)]
        out = []
        for b, code in self.requested:
            if b != base:
                continue
            n_mod = int(mods[self.codes.index(code)])
            out.append((position, strand, code, cov, n_mod, canonical, n_mod_all - n_mod, *rest))
        return out


def _bincount(parts: list, size: int) -> np.ndarray:
    """np.bincount of the concatenated index arrays, of length size."""
    if not parts:
        return np.zeros(size, dtype=np.int64)
    return np.bincount(np.concatenate(parts).astype(np.int64), minlength=size)
