"""MM/ML parsing (modkit's ModBaseInfo and its calls): implicit `.` vs explicit `?` modes,
ChEBI codes, `Mm`/`Ml`, `MN`, the ML length check, group combination and its conflicts; the
--ignore collapse, the edge filter and each position's call (with the caller's thresholds); and
what a record's alignment gives (aligned pairs, deletions). numpy: the Python path's, which the
compiled core's calls.c follows rule for rule."""

from __future__ import annotations

import array
import re
from dataclasses import dataclass, field

import numpy as np
import pysam

from numapore.pileup.common import (
    BASES,
    BASE_INDEX,
    CANONICAL,
    COMPLEMENT_BYTES,
    FILTERED,
    FX_K,
    MASK64,
    MAX_PROB,
    ReadError,
)

# bytes of a read's sequence to base index 0-3 (A, C, G, T), 4 for anything else
BASE_LUT = np.full(256, 4, dtype=np.int8)
for _i, _b in enumerate(BASES):
    BASE_LUT[ord(_b)] = _i


def fx_hash(code: str) -> int:
    """FxHasher (rustc-hash 1.1) of a ModCodeRepr: its discriminant, then the char or number."""
    h = 0 if not code.isdigit() else FX_K  # add_to_hash(discriminant): 0 -> 0, 1 -> K
    value = int(code) if code.isdigit() else ord(code)
    rotated = ((h << 5) | (h >> 59)) & MASK64
    return ((rotated ^ value) * FX_K) & MASK64


def hash_order(codes: list[str]) -> list[str]:
    """The iteration order of a std HashMap (hashbrown) with FxHasher holding codes inserted in
    this order: small tables probe linearly from hash & mask and iterate by slot. It decides
    ties between equally probable codes and the order floats are summed in."""
    buckets: list[str | None] = [None] * 4
    for n, code in enumerate(codes):
        if n == 3:  # the fourth insert grows the table to 8 buckets, re-inserting in order
            old = [c for c in buckets if c is not None]
            buckets = [None] * 8
            for c in old:
                _hb_insert(buckets, c)
        if n == 7:
            return list(codes)  # beyond any real modBAM; keep MM order
        _hb_insert(buckets, code)
    return [c for c in buckets if c is not None]


def _hb_insert(buckets: list, code: str) -> None:
    """Put code in the first free slot at or after its hash's slot (wrapping)."""
    mask = len(buckets) - 1
    slot = fx_hash(code) & mask
    while buckets[slot] is not None:
        slot = (slot + 1) & mask
    buckets[slot] = code


@dataclass
class MmGroup:
    """One MM group, e.g. C+hm?,0,3,1: fundamental base, strand, codes, mode, delta list."""

    base: str
    strand: str
    codes: list[str]
    mode: str  # "?" explicit, "." implicit, "" none given (modkit's default-implicit)
    deltas: np.ndarray


_SIMPLE_DELTAS = re.compile(r"\d+(,\d+)*")


_DELTA_ITEM = re.compile(r"[ \t\r\n]*(\d+)[ \t\r\n]*")


def parse_deltas(text: str) -> list[int]:
    """A delta list as modkit's nom parser reads it: comma-separated integers (whitespace
    around them allowed), at least one; anything after the last good item is ignored."""
    if _SIMPLE_DELTAS.fullmatch(text):
        return list(map(int, text.split(",")))
    items, at = [], 0
    while True:
        m = _DELTA_ITEM.match(text, at)
        if not m:
            if not items:
                raise ReadError("mm", f"invalid MM delta list {text[:20]!r}")
            return items
        items.append(int(m.group(1)))
        at = m.end()
        if not text.startswith(",", at):
            return items
        at += 1


def parse_mm_group(raw: str) -> MmGroup:
    """One `;`-separated MM entry (modkit's MmTagInfo::parse)."""
    header = raw.split(",", 1)[0]
    if not header or header[0] not in "ACGTUN":
        raise ReadError("mm", f"invalid MM entry {raw[:20]!r}: bad fundamental base")
    if len(header) < 2 or header[1] not in "+-":
        raise ReadError("mm", f"invalid MM entry {raw[:20]!r}: bad strand")
    codes, mode, rest = [], "", header[2:]
    digits = re.match(r"[0-9]+", rest)
    if digits:
        codes.append(str(int(digits.group())))
        rest = rest[digits.end() :]
    for c in rest:
        if c in "?.":
            mode = c
        elif c.isdigit():
            raise ReadError("mm", f"invalid MM entry {raw[:20]!r}: digit mod code")
        elif digits:
            raise ReadError("mm", f"invalid MM entry {raw[:20]!r}: ChEBI and letter codes")
        else:
            codes.append(c)
    deltas = parse_deltas(raw[len(header) + 1 :]) if len(header) + 1 <= len(raw) else []
    return MmGroup(header[0], header[1], codes, mode, np.asarray(deltas, dtype=np.int64))


def get_mod_tags(rec: pysam.AlignedSegment) -> tuple[str, np.ndarray]:
    """The MM string and ML values (new-style tags first, then Mm/Ml as modkit accepts), the
    MN check; ReadError as modkit's parse_raw_mod_tags fails."""
    mm = ml = None
    try:
        mm, ml = _first_tag(rec, ("MM", "Mm")), _first_tag(rec, ("ML", "Ml"))
    except UnicodeDecodeError:
        raise ReadError("mm", "MM/ML tag is not valid text") from None
    if mm is None:
        raise ReadError("missing", "no MM tag")
    if not isinstance(mm, str):
        raise ReadError("mm", "MM tag is not a string")
    if ml is None:
        raise ReadError("missing", "no ML tag")
    if not (isinstance(ml, array.array) and ml.typecode == "B"):
        raise ReadError("ml", "ML tag is not an array of uint8")
    if rec.has_tag("MN"):
        mn = rec.get_tag("MN")
        if not isinstance(mn, int):
            raise ReadError("mn", "MN tag is not an integer")
        if mn != rec.query_length:
            raise ReadError("mn", f"MN tag length {mn} and seq length {rec.query_length} differ")
    return mm, np.frombuffer(ml, dtype=np.uint8)


def _first_tag(rec: pysam.AlignedSegment, tags: tuple[str, str]):
    """The value of the first of tags the record has (None if neither)."""
    for tag in tags:
        if rec.has_tag(tag):
            return rec.get_tag(tag)
    return None


@dataclass
class ModTable:
    """A read's modification probabilities for one (MM strand, base), over forward read
    positions: has (a position is listed), inferred (implicit canonical), per code the
    presence and float32 probability; codes in insertion order; modkit's skip mode."""

    mode: str
    has: np.ndarray
    inferred: np.ndarray
    codes: list[str] = field(default_factory=list)
    present: dict = field(default_factory=dict)
    probs: dict = field(default_factory=dict)

    def add_code(self, code: str, n: int) -> None:
        """Make room for code."""
        if code not in self.present:
            self.codes.append(code)
            self.present[code] = np.zeros(n, dtype=bool)
            self.probs[code] = np.zeros(n, dtype=np.float32)


def read_mod_tables(mm: str, ml: np.ndarray, fwd: np.ndarray) -> dict[tuple[str, int], ModTable]:
    """The read's ModTables keyed by (MM strand, base index), from its MM/ML and forward
    sequence (modkit's ModBaseInfo::new): ReadError where modkit's parse fails."""
    n = len(fwd)
    tables: dict[tuple[str, int], ModTable] = {}
    pointer = 0
    base_positions: dict[str, np.ndarray] = {}
    for raw in mm.split(";"):
        if not raw:
            continue
        g = parse_mm_group(raw)
        fb = "T" if g.base == "U" else g.base
        stride = len(g.codes)
        if g.base == "N":
            if len(g.deltas) and (np.any(np.cumsum(g.deltas[1:] + 1) + g.deltas[0] >= n)):
                raise ReadError("mm", "MM refers to positions beyond end of seq")
            positions = np.cumsum(g.deltas + 1) - 1 if len(g.deltas) else g.deltas
            if len(positions) and positions[0] >= n:
                raise ReadError("mm", "MM refers to positions beyond end of seq")
            all_base = np.zeros(0, dtype=np.int64)
        else:
            if fb not in base_positions:
                base_positions[fb] = np.flatnonzero(fwd == ord(fb))
            all_base = base_positions[fb]
            idx = np.cumsum(g.deltas + 1) - 1
            if len(idx) and idx[-1] >= len(all_base):
                raise ReadError("mm", "MM delta list refers to positions beyond end of seq")
            positions = all_base[idx]
        end = pointer + len(g.deltas) * stride
        if end > len(ml):
            raise ReadError("ml_short", f"ML array too short, need {end} have {len(ml)}")
        quals = ml[pointer:end].astype(np.float32).reshape(len(g.deltas), stride)
        probs = (quals + np.float32(0.5)) / np.float32(256)
        pointer = end
        pos_bases = BASE_LUT[fwd[positions]] if len(positions) else np.zeros(0, np.int8)
        if np.any(pos_bases == 4):
            raise ReadError("mm", "MM position on a non-ACGT base")
        for b in np.unique(pos_bases) if g.base == "N" else [BASE_INDEX[fb]]:
            sel = pos_bases == b
            if g.mode in (".", ""):
                inferred = all_base if BASES[b] == fb else np.zeros(0, dtype=np.int64)
            else:
                inferred = np.zeros(0, dtype=np.int64)
            if not np.any(sel) and len(inferred) == 0:
                continue
            _combine_group(tables, (g.strand, int(b)), g, positions[sel], probs[sel], inferred, n)
    return tables


def _combine_group(tables, key, g: MmGroup, positions, probs, inferred_all, n) -> None:
    """Merge one group's positions into the read's table (modkit's combine_positions_to_probs:
    same-code probabilities add up, explicit and inferred entries must not meet, totals must
    stay <= 1.01)."""
    # the group's own map: its listed positions, then implicit canonical for the other bases
    g_has = np.zeros(n, dtype=bool)
    g_has[positions] = True
    g_inferred = np.zeros(n, dtype=bool)
    if len(inferred_all):
        g_inferred[inferred_all] = True
        g_inferred &= ~g_has
        g_has |= g_inferred
    table = tables.get(key)
    if table is None:
        table = tables[key] = ModTable(g.mode, np.zeros(n, bool), np.zeros(n, bool))
    elif table.mode != g.mode:
        table.mode = "."
    overlap = table.has & g_has
    if np.any(overlap & (table.inferred != g_inferred)):
        raise ReadError("conflict", "explicit and inferred calls at the same position")
    for j, code in enumerate(g.codes):
        table.add_code(code, n)
        values = np.zeros(n, dtype=np.float32)
        values[positions] = probs[:, j] if len(positions) else values[positions]
        table.probs[code] = (table.probs[code] + values).astype(np.float32)
        table.present[code] |= g_has
    if np.any(overlap):
        total = np.zeros(n, dtype=np.float32)
        for code in hash_order(table.codes):
            total = (total + np.where(table.present[code], table.probs[code], 0)).astype(np.float32)
        if np.any(overlap & (total > MAX_PROB)):
            raise ReadError("conflict", "probabilities at a position sum to more than 1")
    table.has |= g_has
    table.inferred |= g_inferred


def collapse_redistribute(table: ModTable, code: str, keep: np.ndarray) -> tuple[list, list]:
    """modkit's ReDistribute collapse of code at the kept positions: its probability shared
    equally among the other codes and canonical; the other codes (hash order) and their new
    (presence, float32 probability) arrays."""
    order = hash_order(table.codes)
    others = [c for c in order if c != code]
    if code not in table.present:
        return others, [(table.present[c][keep], table.probs[c][keep]) for c in others]
    marginal = np.where(table.present[code][keep], table.probs[code][keep], 0).astype(np.float32)
    n_other = np.ones(int(keep.sum()), dtype=np.float32)
    for c in others:
        n_other += table.present[c][keep]
    share = (marginal / n_other).astype(np.float32)
    out = []
    for c in others:
        pres = table.present[c][keep]
        out.append((pres, np.where(pres, table.probs[c][keep] + share, 0).astype(np.float32)))
    return hash_order(others), [out[others.index(c)] for c in hash_order(others)]


def edge_keep(edge: tuple[int, int, bool] | None, n: int) -> np.ndarray | None:
    """The forward positions the edge filter keeps (None: the read is too short to trim)."""
    keep = np.ones(n, dtype=bool)
    if edge is None:
        return keep
    start, end, inverted = edge
    if n <= start or n <= end:
        return None
    q = np.arange(n)
    inside = (q >= start) & (q < n - end)
    return ~inside if inverted else inside


def table_probs(table: ModTable, keep: np.ndarray, ignore: str | None) -> tuple[list, list]:
    """A table's codes (hash order) and their (presence, probability) at the kept positions,
    after the --ignore collapse if any."""
    if ignore is not None:
        return collapse_redistribute(table, ignore, keep)
    order = hash_order(table.codes)
    return order, [(table.present[c][keep], table.probs[c][keep]) for c in order]


def canonical_probs(columns: list) -> np.ndarray:
    """1 - the sum of the mod probabilities (float32, summed in the map's order)."""
    total = np.zeros(len(columns[0][1]) if columns else 0, dtype=np.float32)
    for pres, p in columns:
        total = (total + np.where(pres, p, 0)).astype(np.float32)
    return (np.float32(1.0) - total).astype(np.float32)


def call_positions(codes, columns, n, caller, base: int, code_index) -> np.ndarray:
    """modkit's call() at each position: the most probable of the mod codes over their
    threshold and canonical over its own (the last of equals wins), else filtered."""
    can = canonical_probs(columns) if columns else np.ones(n, dtype=np.float32)
    best = np.full(n, FILTERED, dtype=np.int16)
    best_p = np.full(n, -np.inf, dtype=np.float32)
    for code, (pres, p) in zip(codes, columns, strict=True):
        ok = pres & (p >= caller.code_threshold(base, code)) & (p >= best_p)
        best[ok] = code_index(code) + 1
        best_p[ok] = p[ok]
    ok = (can >= caller.canonical_threshold(base)) & (can >= best_p)
    best[ok] = CANONICAL
    return best


def forward_sequence(rec: pysam.AlignedSegment) -> np.ndarray:
    """The read's sequence as sequenced (reverse-complemented back for reverse alignments)."""
    seq = rec.query_sequence.encode()
    if rec.is_reverse:
        seq = seq.translate(COMPLEMENT_BYTES)[::-1]
    return np.frombuffer(seq, dtype=np.uint8)


# CIGAR operations (MIDNSHP=XB, 0-9) that advance the query, the reference, or align a base:
# lookups, not np.isin (a third of a --modified-bases pileup's time, measured with cProfile)
QUERY_OPS = np.array([1, 1, 0, 0, 1, 0, 0, 1, 1, 0], dtype=np.int64)
REFERENCE_OPS = np.array([1, 0, 1, 1, 0, 0, 0, 1, 1, 0], dtype=np.int64)
MATCH_OPS = np.array([1, 0, 0, 0, 0, 0, 0, 1, 1, 0], dtype=bool)


def alignment_arrays(rec: pysam.AlignedSegment):
    """From the CIGAR: query and reference positions of the aligned (M/=/X) bases, the
    reference positions of deletions, and the covered reference segments (all but N skips)."""
    cig = np.array(rec.cigartuples, dtype=np.int64).reshape(-1, 2)
    ops, lens = cig[:, 0], cig[:, 1]
    q_adv = QUERY_OPS[ops] * lens
    r_adv = REFERENCE_OPS[ops] * lens
    q_start = np.concatenate(([0], np.cumsum(q_adv)[:-1]))
    r_start = rec.reference_start + np.concatenate(([0], np.cumsum(r_adv)[:-1]))
    match = MATCH_OPS[ops]
    q, r = _expand(q_start[match], r_start[match], lens[match])
    dele = ops == 2
    _, d = _expand(q_start[dele], r_start[dele], lens[dele])
    skip = ops == 3
    ref_end = rec.reference_start + int(r_adv.sum())
    if np.any(skip):
        bounds = [rec.reference_start]
        for s, ln in zip(r_start[skip], lens[skip], strict=True):
            bounds += [int(s), int(s + ln)]
        bounds.append(ref_end)
        segments = list(zip(bounds[::2], bounds[1::2], strict=True))
    else:
        segments = [(rec.reference_start, ref_end)]
    return q, r, d, segments


def _expand(q0: np.ndarray, r0: np.ndarray, lens: np.ndarray):
    """Every position of runs starting at q0/r0 of the given lengths."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    offsets = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
    return np.repeat(q0, lens) + offsets, np.repeat(r0, lens) + offsets
