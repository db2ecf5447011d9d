"""A modBAM pileup with modkit 0.6.1's semantics (0.4.4's with Options.compat "0.4"): a
coordinate-sorted, indexed BAM with MM/ML tags (and, for motifs, the reference FASTA) to bedMethyl
byte for byte as `modkit pileup` writes it (numapore.methylation.bedmethyl owns the format).

The two semantics share this engine; 0.6.1 differs in: a `#` header and tabs only; at a motif
position only the motif's base has rows; `--modified-bases` counts in pileup_modbases. Where
0.6.1 contradicts the SAM MM/ML specification or its own documentation (the 0.6.1 suite's
README, items A-F), this follows the specification and the documentation.

Where modkit's rules live here:
- MM/ML parsing (implicit `.` vs explicit `?` modes, ChEBI codes, `Mm`/`Ml`, `MN`, the ML
  length check, group combination and its conflicts): parse_mod_tags, parse_mm_group,
  read_mod_tables.
- Which records count (no secondary, supplementary, duplicate, unmapped or empty records; the
  per-region read cache keyed by name; implicit tags without a mode are skipped unless
  force_allow_implicit): ChunkWorker.read_record.
- Per-call thresholds (per base, per mod code, default; ties as Rust's max() over a hash map's
  order): Caller and hash_order.
- The pass threshold from a percentile of sampled calls (modkit's sampling schedule, intervals
  and read budgets; exact whenever every read is sampled): estimate_thresholds.
- `--ignore`/`--preset traditional` (redistribute a code), `--combine-mods`, the edge filter:
  collapse_redistribute, Options.numeric, edge_keep.
- Regions, intervals (`-i`), motifs found per interval, the interval end moved past a motif
  when strands are combined, `--include-positions`: plan_chunks and motif_focus.
- The tally per position and strand, the rows and their order, `--combine-strands`:
  ChunkWorker.pileup_chunk, rows_from_counts, combine_strand_rows.

Work goes by interval (modkit's `-i` chunks of a contig, default 100 kb), so memory is bounded
by one interval's reads; with threads > 1 the intervals run on worker processes and come back in
modkit's order, so the bytes do not depend on threads. One exception, as in modkit: when the
pass threshold is estimated from a limited sample (more reads than `-n`), modkit's sampling
budgets follow its batches of threads x 1.5 intervals, and so do these. pileup(regions=...)
keeps the intervals of the whole run that start in each region, so pileups of regions that tile
the genome (scatter_regions) concatenate to the whole pileup.

Not done: modkit's --max-depth (htslib's pileup depth cap, 8000 by default) is not applied;
--partition-tag, --bedgraph and duplex pileup are not offered; two primary records with the
same name in one interval share the first one's calls by read position, where modkit maps them
by the first one's reference positions.
"""

from __future__ import annotations

import array
import math
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pysam

from numapore.base import compiled
from numapore.methylation.bedmethyl import HEADER_LINE, BedMethylRow, f32, format_row
from numapore.methylation.bedmethyl import percent_modified
from numapore.methylation.pileup_modbases import ModBasesCounter, rows_text

_core = compiled.load("numapore.methylation._pileup_core")  # None: numpy, the same bytes
ffi, lib = (_core.ffi, _core.lib) if _core is not None else (None, None)

ENABLED = lib is not None  # tests switch the compiled core off to compare both paths

BASES = "ACGT"
BASE_INDEX = {b: i for i, b in enumerate(BASES)}
# bytes of a read's sequence to base index 0-3 (A, C, G, T), 4 for anything else
BASE_LUT = np.full(256, 4, dtype=np.int8)
for _i, _b in enumerate(BASES):
    BASE_LUT[ord(_b)] = _i
COMPLEMENT_BYTES = bytes.maketrans(
    b"ACGTNacgtnRYKMSWBDHVrykmswbdhv", b"TGCANtgcanYRMKSWVHDByrmkswvhdb"
)
NO_CALL, FILTERED, CANONICAL = -2, -1, 0  # a read position's call; k + 1 is mod code k
FX_K = 0x517CC1B727220A95  # rustc-hash 1.1's FxHasher multiplier
MASK64 = (1 << 64) - 1
MAX_PROB = f32(1.01)
DEFAULT_INTERVAL = 100_000
SAMPLING_INTERVAL = 1_000_000
WORK_SIZE = 100_000  # the most reference bases tallied at once when motifs allow it


class PileupError(Exception):
    """Bad input: the message names the file (and read) and the reason, on one line."""


class ReadError(Exception):
    """A read modkit skips; kind says why (missing, ml_short, mm, mn, implicit, conflict...)."""

    def __init__(self, kind: str, message: str):
        """The skip kind and its one-line message."""
        super().__init__(message)
        self.kind = kind


# ---------------------------------------------------------------- mod codes and thresholds


def code_key(code: str) -> tuple:
    """modkit's ModCodeRepr order (derived Ord): one-letter codes by character, then ChEBI."""
    return (1, int(code), "") if code.isdigit() else (0, 0, code)


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
class Caller:
    """modkit's MultipleThresholdModCaller: a call's threshold is its code's, else the base's
    any-mod code's, else its primary base's, else the default; canonical uses base or default."""

    per_base: dict[int, float] = field(default_factory=dict)
    per_mod: dict[str, float] = field(default_factory=dict)
    default: float = 0.0

    def code_threshold(self, base: int, code: str) -> np.float32:
        """The threshold a modified call of code at primary base index base must reach."""
        for value in (self.per_mod.get(code), self.per_mod.get(BASES[base])):
            if value is not None:
                return np.float32(value)
        return np.float32(self.per_base.get(base, self.default))

    def canonical_threshold(self, base: int) -> np.float32:
        """The threshold a canonical call at base must reach."""
        return np.float32(self.per_base.get(base, self.default))


def parse_float32(text: str, what: str) -> float:
    """A threshold as Rust's parse::<f32> reads it."""
    try:
        return f32(float(text))
    except ValueError:
        raise PileupError(f"failed to parse {what} {text!r}") from None


def parse_thresholds(raw: list[str], per_mod: dict[str, float]) -> Caller:
    """--filter-threshold values: one default and/or BASE:X per-base values."""
    default, per_base = None, {}
    for item in raw:
        if ":" in item:
            base, _, value = item.partition(":")
            if not base or base[0] not in BASE_INDEX or ":" in value:
                raise PileupError(f"illegal per-base threshold {item!r}, should be e.g. C:0.75")
            if BASE_INDEX[base[0]] in per_base:
                raise PileupError(f"repeated threshold for base {base[0]}")
            per_base[BASE_INDEX[base[0]]] = parse_float32(value, "threshold")
        else:
            if default is not None:
                raise PileupError("default threshold given more than once")
            default = parse_float32(item, "threshold")
    return Caller(per_base, per_mod, default or 0.0)


def parse_mod_thresholds(raw: list[str] | None) -> dict[str, float]:
    """--mod-thresholds CODE:X values."""
    out = {}
    for item in raw or []:
        parts = item.split(":")
        if len(parts) != 2 or not parts[0]:
            raise PileupError(f"illegal per-mod threshold {item!r}, should be e.g. h:0.8")
        out[parts[0] if len(parts[0]) == 1 else str(int(parts[0]))] = parse_float32(
            parts[1], "per-mod threshold"
        )
    return out


def percentile_linear_interp(xs: np.ndarray, q: float) -> float:
    """modkit's percentile of sorted float32 values, in float32 arithmetic."""
    if len(xs) < 2:
        raise PileupError(f"not enough calls ({len(xs)}) to estimate a pass threshold")
    q = np.float32(q)
    if q == np.float32(1.0):
        return float(xs[-1])
    l_q = np.float32(len(xs) - 1) * q
    left, right = int(np.floor(l_q)), int(np.ceil(l_q))
    g = np.float32(l_q - np.float32(np.trunc(l_q)))
    y = xs[left] * (np.float32(1.0) - g) + xs[right] * g
    return float(np.float32(y))


# ---------------------------------------------------------------- MM/ML parsing


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


def call_positions(codes, columns, n, caller: Caller, base: int, code_index) -> np.ndarray:
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


def argmax_probs(columns, n) -> np.ndarray:
    """The probability of each position's most likely state (what modkit samples)."""
    can = canonical_probs(columns) if columns else np.ones(n, dtype=np.float32)
    if not columns:
        return can
    mx = np.full(n, -np.inf, dtype=np.float32)
    for pres, p in columns:
        mx = np.where(pres & (p > mx) | pres & (mx == -np.inf), np.maximum(mx, p), mx)
    return np.where(mx > can, mx, can).astype(np.float32)


# ---------------------------------------------------------------- alignments


def forward_sequence(rec: pysam.AlignedSegment) -> np.ndarray:
    """The read's sequence as sequenced (reverse-complemented back for reverse alignments)."""
    seq = rec.query_sequence.encode()
    if rec.is_reverse:
        seq = seq.translate(COMPLEMENT_BYTES)[::-1]
    return np.frombuffer(seq, dtype=np.uint8)


def alignment_arrays(rec: pysam.AlignedSegment):
    """From the CIGAR: query and reference positions of the aligned (M/=/X) bases, the
    reference positions of deletions, and the covered reference segments (all but N skips)."""
    cig = np.array(rec.cigartuples, dtype=np.int64).reshape(-1, 2)
    ops, lens = cig[:, 0], cig[:, 1]
    q_adv = np.isin(ops, (0, 1, 4, 7, 8)) * lens
    r_adv = np.isin(ops, (0, 2, 3, 7, 8)) * lens
    q_start = np.concatenate(([0], np.cumsum(q_adv)[:-1]))
    r_start = rec.reference_start + np.concatenate(([0], np.cumsum(r_adv)[:-1]))
    match = np.isin(ops, (0, 7, 8))
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


NOT_PRIMARY_MAPPED = 0x4 | 0x100 | 0x800  # unmapped, secondary, supplementary


def carries_calls(rec: pysam.AlignedSegment) -> bool:
    """Whether the record carries at least one modification probability (ML or Ml values)."""
    return any(rec.has_tag(t) and len(rec.get_tag(t)) for t in ("ML", "Ml"))


def read_listing_line(rec: pysam.AlignedSegment) -> str:
    """A mapped primary record's line of the read listing: read id, MAPQ, 1 if it carries
    calls (READ_LISTING_COLUMNS)."""
    return f"{rec.query_name}\t{rec.mapping_quality}\t{int(carries_calls(rec))}\n"


def haplotype_of(rec: pysam.AlignedSegment) -> int:
    """The record's HP tag (0 without one, or when it is not an integer)."""
    if not rec.has_tag("HP"):
        return 0
    value = rec.get_tag("HP")
    return value if isinstance(value, int) else 0


def usable(rec: pysam.AlignedSegment) -> bool:
    """Whether a record enters modkit's pileup: mapped, primary, not a duplicate, with SEQ."""
    return not (
        rec.is_unmapped
        or rec.is_secondary
        or rec.is_supplementary
        or rec.is_duplicate
        or not rec.query_sequence
    )


# ---------------------------------------------------------------- options and regions


@dataclass
class Options:
    """The pileup's settings, named as modkit's options."""

    interval_size: int = DEFAULT_INTERVAL
    filter_threshold: list[str] | None = None
    mod_thresholds: list[str] | None = None
    no_filtering: bool = False
    filter_percentile: float = 0.1
    num_reads: int = 10_042
    sampling_frac: float | None = None
    seed: int | None = None
    sampling_interval_size: int = SAMPLING_INTERVAL
    include_unmapped: bool = False
    region: str | None = None
    sample_region: str | None = None
    include_bed: str | None = None
    ignore: str | None = None
    combine_mods: bool = False
    combine_strands: bool = False
    preset: str | None = None
    motifs: list[tuple[str, int]] = field(default_factory=list)
    cpg: bool = False
    reference: str | None = None
    mask: bool = False
    edge_filter: str | None = None
    invert_edge_filter: bool = False
    force_allow_implicit: bool = False
    mixed_delim: bool = False
    with_header: bool = False
    threads: int = 1
    compat: str = "0.6"  # whose semantics: modkit 0.6.1's or (with "0.4") 0.4.4's
    haplotype: int | None = None  # count only records with this HP tag (--phased's files)
    max_depth: int | None = None  # 0.6's --high-depth --max-depth: reads counted per position
    modified_bases: list[str] | None = None  # 0.6's --modified-bases (5mC 5hmC 6mA ...)

    @property
    def modern(self) -> bool:
        """Whether modkit 0.6.1's semantics apply (not 0.4.4's)."""
        return self.compat != "0.4"

    def numeric(self) -> tuple[str | None, bool, bool]:
        """(code to ignore, combine mods, combine strands) after --preset traditional."""
        if self.preset == "traditional":
            return "h", False, True
        return self.ignore, self.combine_mods, self.combine_strands

    def motif_list(self) -> list[tuple[str, int]]:
        """The motifs asked for (--cpg adds CG 0; traditional is CG 0); none with 0.6's
        --modified-bases, whose counter finds its own positions."""
        if self.modern and self.modified_bases:
            return []
        if self.preset == "traditional":
            return [("CG", 0)]
        motifs = list(self.motifs)
        if self.cpg and ("CG", 0) not in motifs:
            motifs.append(("CG", 0))
        return motifs

    def edge(self) -> tuple[int, int, bool] | None:
        """--edge-filter as (start trim, end trim, inverted)."""
        if self.edge_filter is None:
            return None
        parts = self.edge_filter.split(",")
        try:
            if len(parts) == 1:
                return int(parts[0]), int(parts[0]), self.invert_edge_filter
            if len(parts) == 2:
                return int(parts[0]), int(parts[1]), self.invert_edge_filter
        except ValueError:
            pass
        raise PileupError(f"illegal --edge-filter {self.edge_filter!r}, should be N or N,M")


@dataclass
class Motif:
    """A sequence motif and the offset of its modified base (modkit's RegexMotif)."""

    raw: str
    offset: int
    forward: re.Pattern
    reverse: re.Pattern
    reverse_offset: int
    palindrome: bool

    @property
    def label(self) -> str:
        """The name-column label, e.g. CG,0."""
        return f"{self.raw},{self.offset}"

    @property
    def length(self) -> int:
        """The motif's length."""
        return len(self.raw)


IUPAC = {
    "A": "A", "C": "C", "G": "G", "T": "T", "U": "U", "M": "[AC]", "R": "[AG]", "W": "[AT]",
    "S": "[CG]", "Y": "[CT]", "K": "[GT]", "V": "[ACG]", "H": "[ACT]", "D": "[AGT]",
    "B": "[CGT]", "X": "[ACGT]", "N": "[ACGT]",
}  # fmt: skip


def make_motif(raw: str, offset: int) -> Motif:
    """A motif as modkit parses it (IUPAC to a regex; palindromic if its reverse complement's
    regex is the same text)."""
    if len(raw) == 1 and raw not in "ACGT":
        raise PileupError("degenerate bases are not supported as single base motifs")
    try:
        pattern = "".join(IUPAC[c] for c in raw)
    except KeyError as err:
        raise PileupError(f"invalid IUPAC code in motif {raw!r}: {err.args[0]}") from None
    swap = {"A": "T", "C": "G", "G": "C", "T": "A", "U": "A", "[": "]", "]": "["}
    rc = "".join(swap.get(c, c) for c in reversed(pattern))
    if offset >= len(raw):
        raise PileupError(f"motif {raw} not long enough for offset {offset}")
    return Motif(
        raw,
        offset,
        re.compile(f"(?=({pattern}))"),
        re.compile(f"(?=({rc}))"),
        len(raw) - offset - 1,
        pattern == rc,
    )


def motif_hits(seq: str, motif: Motif) -> list[tuple[int, int]]:
    """(position, strand 0 + / 1 -) of every (overlapping) hit, as find_motif_hits."""
    hits = []
    if motif.palindrome:
        for m in motif.forward.finditer(seq):
            s = m.start()
            if motif.offset <= motif.reverse_offset:
                hits += [(s + motif.offset, 0), (s + motif.reverse_offset, 1)]
            else:
                hits += [(s + motif.reverse_offset, 1), (s + motif.offset, 0)]
    elif motif.length == 1:
        rv = {"A": "T", "C": "G", "G": "C", "T": "A"}[motif.raw]
        hits = [(i, 0 if c == motif.raw else 1) for i, c in enumerate(seq) if c in (motif.raw, rv)]
    else:
        hits = [(m.start() + motif.offset, 0) for m in motif.forward.finditer(seq)]
        hits += [(m.start() + motif.reverse_offset, 1) for m in motif.reverse.finditer(seq)]
        hits.sort(key=lambda h: h[0])
    return hits


BOTH, POS, NEG = 3, 1, 2  # strand rules as bit masks (1: + strand, 2: - strand)


@dataclass
class PositionFilter:
    """--include-positions: merged intervals per contig and strand (0 +, 1 -)."""

    intervals: dict[tuple[int, int], list[tuple[int, int]]]

    def contains(self, tid: int, pos: int, strand: int) -> bool:
        """Whether pos on strand is inside an interval."""
        ivs = self.intervals.get((tid, strand))
        if not ivs:
            return False
        import bisect

        i = bisect.bisect_right(ivs, (pos, math.inf)) - 1
        return i >= 0 and ivs[i][0] <= pos < ivs[i][1]

    def tids(self) -> list[int]:
        """The contigs with intervals, sorted."""
        return sorted({t for t, _ in self.intervals})


def merge_intervals(ivs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """rust-lapper's merge_overlaps (touching intervals merge too)."""
    out: list[list[int]] = []
    for s, e in sorted(ivs):
        if out and not out[-1][1] < s:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def read_position_filter(path: str, names: dict[str, int]) -> PositionFilter:
    """A BED3/BED6 file as modkit's StrandedPositionFilter (contigs not in the BAM skipped)."""
    per: dict[tuple[int, int], list] = {}
    try:
        handle = open(path)
    except OSError as err:
        raise PileupError(f"{path}: cannot read ({err.strerror})") from None
    with handle:
        for line in handle:
            parts = line.split()
            if not parts or len(parts) < 3:
                continue
            try:
                start, stop = int(parts[1]), int(parts[2])
            except ValueError:
                continue
            if len(parts) == 3:
                strands = (0, 1)
            elif len(parts) >= 6 and parts[5] in "+-.":
                strands = {"+": (0,), "-": (1,), ".": (0, 1)}[parts[5]]
            else:
                continue
            tid = names.get(parts[0])
            if tid is None:
                continue
            for s in strands:
                per.setdefault((tid, s), []).append((start, stop))
    if not per:
        raise PileupError(f"{path}: zero valid positions parsed from the BED file")
    return PositionFilter({k: merge_intervals(v) for k, v in per.items()})


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


def parse_region(raw: str, bam: pysam.AlignmentFile) -> tuple[str, int, int]:
    """modkit's Region::parse_str: chrom, or chrom:start-end (commas allowed)."""
    if ":" in raw:
        name, _, span = raw.partition(":")
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
    if end is None:
        end = bam.get_reference_length(name)
    return name, start, end


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
    for tid, name, rec_start, rec_end in reference_records(bam, options, pf):
        pos = rec_start
        while pos < rec_end:
            end = min(pos + step, rec_end)
            chunk = Chunk(tid, name, pos, end, first=pos == rec_start)
            if motifs:
                motif_focus(chunk, motifs, fasta, rec_end, pf, combine, options.mask)
                chunk.end = min(chunk.end, rec_end)
                chunk.planned_end, chunk.span_end = end, rec_end
                chunk.rules = chunk.pos_ids = chunk.neg_ids = chunk.pos_motifs = None
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


def motif_focus(chunk: Chunk, motifs, fasta, rec_end, pf, combine: bool, mask: bool) -> None:
    """The chunk's motif positions (modkit's get_motif_positions and FocusPositions); when
    strands are combined the end moves past a motif straddling it."""
    start, end = chunk.start, chunk.end
    if combine:
        longest = max(m.length for m in motifs)
        buffer = longest * 5
        w_end = min(end + buffer, rec_end)
        too_close = max(w_end - longest, 0)
        while True:
            per = _hits_in(motifs, _fetch_seq(fasta, chunk.chrom, start, w_end, mask), start,
                           chunk.tid, pf)  # fmt: skip
            ivs = []
            for motif, rules in zip(motifs, per, strict=True):
                adj = motif.length - motif.offset
                ivs += [(p, p + adj) for p in rules]
            search_end = end
            for s, e in merge_intervals(ivs):
                if s < end and e > end - 1:
                    search_end = e
                    break
            if search_end < too_close or w_end >= rec_end:
                break
            end = w_end
            w_end += buffer
            too_close = max(w_end - longest, 0)
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


# ---------------------------------------------------------------- the pileup of a chunk


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
READ_LISTING_COLUMNS = ("read_id", "mapq", "called")
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
        self.core = new_core(options, caller) if ENABLED else None
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
            span_end = chunk.span_end
            chunk = Chunk(chunk.tid, chunk.chrom, chunk.start, chunk.planned_end, first=chunk.first)
            motif_focus(chunk, self.motifs, self.fasta, span_end, self.pf, self.combine_strands,
                        self.options.mask)  # fmt: skip
            chunk.end = min(chunk.end, span_end)
        if ENABLED and self.core is not None:
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
        names: set[str] = set()
        for rec in self.bam.fetch(chunk.chrom, start, end):
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
        if not names:
            return "", stats
        lib.pu_observe(ctx)
        if not self.combine_strands and len(self.motif_labels) < 2 and not self.motif_bases:
            allowed = np.ascontiguousarray(allowed_mask(chunk, length), dtype=np.uint8)
            chrom = chunk.chrom.encode()
            cap = lib.pu_rows_bound(ctx, self.combine_mods) * (len(chrom) + 200) + len(chrom) + 201
            nrows = ffi.new("int64_t *")
            out = _raw_alloc("char[]", cap)
            size = lib.pu_text(
                ctx, chrom, ffi.from_buffer(allowed), self.combine_mods,
                self.options.mixed_delim, out, cap, nrows,
            )  # fmt: skip
            if size < 0:
                raise RuntimeError("pileup_core: text buffer too small")
            stats.rows = nrows[0]
            return ffi.unpack(out, size).decode(), stats
        if self.combine_strands and not self.motif_bases:
            text = self._combined_text_core(chunk, length)
            stats.rows = self._last_rows if text else 0
            return text, stats
        ncodes = max(ctx.ncodes, 1)
        k = lib.PU_K
        counts = np.frombuffer(ffi.buffer(ctx.counts, length * 2 * k * 4), dtype=np.int32)
        counts = counts.reshape(length, 2, k)[:, :, : 10 + 4 * ncodes].astype(np.int64)
        bits = np.frombuffer(ffi.buffer(ctx.observed, length * 8), dtype=np.uint8)
        bits = bits.reshape(length, 2, 4)
        observed = ((bits[..., None] >> np.arange(ncodes, dtype=np.uint8)) & 1).astype(bool)
        names_c = [ffi.string(ctx.codes[i]).decode() for i in range(ctx.ncodes)] or ["?"]
        rows = self.rows_from_counts(chunk, counts, observed, ncodes, names_c)
        if self.combine_strands:
            rows = combine_strand_rows(chunk, rows, self.motifs)
        stats.rows = len(rows)
        return self._text(chunk, rows), stats

    def _combined_text_core(self, chunk: Chunk, length: int) -> str:
        """--combine-strands text through pileup_core.c (combine_strand_rows' pairs: each +
        strand motif position with its motif's - strand position, when it has rows there)."""
        start = chunk.start
        allowed = allowed_mask(chunk, length)
        pos, idx, neg, pos_ok = [], [], [], []
        for p in sorted(chunk.pos_motifs):
            for i in chunk.pos_motifs[p]:
                motif = self.motifs[i]
                other = p + motif.reverse_offset - motif.offset
                if not motif.palindrome or other < 0:
                    continue
                o = other - start
                has_neg = 0 <= o < length and allowed[o, 1] and i in chunk.neg_ids.get(other, ())
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
        mixed = self.options.mixed_delim
        out = []
        for pos, strand, code, idx, cov, n_mod, can, other, dele, fail, diff, nocall in rows:
            name = f"{code},{labels[idx]}" if len(labels) >= 2 and idx is not None else code
            row = BedMethylRow(chunk.chrom, pos, name, strand, cov, percent_modified(n_mod, cov),
                               n_mod, can, other, dele, fail, diff, nocall)  # fmt: skip
            out.append(format_row(row, mixed))
        return "".join(out)


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


def new_core(options: Options, caller: Caller | None):
    """A pileup_core.c context with the options' settings and caller's thresholds."""
    ctx = ffi.gc(ffi.new("pu_ctx *"), lib.pu_free)
    caller = caller or Caller()
    for b in range(4):
        ctx.has_per_base[b] = b in caller.per_base
        ctx.per_base[b] = caller.per_base.get(b, 0.0)
    ctx.default_threshold = caller.default
    if len(caller.per_mod) > 16:
        return None
    ctx.nper_mod = len(caller.per_mod)
    for i, (code, value) in enumerate(caller.per_mod.items()):
        ctx.per_mod_code[i] = code.encode()[:11]
        ctx.per_mod_value[i] = value
    ignore = options.numeric()[0]
    ctx.ignore = lib.pu_code(ctx, ignore.encode()) if ignore is not None else -1
    edge = options.edge()
    if edge is not None:
        ctx.edge_on, ctx.edge_start, ctx.edge_end, ctx.edge_inverted = 1, *edge
    ctx.force_allow = options.force_allow_implicit
    return ctx


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


# ---------------------------------------------------------------- threshold estimation


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
    already seen; returns the number used. With core (pileup_core.c, no position filter) the
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
    """_sample_values through pileup_core.c (values kept in the core only if keep); None if
    the core leaves the record to Python."""
    try:
        mm, ml = get_mod_tags(rec)
    except ReadError:
        return False
    before = [core.nvalues[b] for b in range(4)]
    seq = rec.query_sequence.encode()
    cigar = rec.cigarstring.encode() if only_mapped and rec.cigarstring else ffi.NULL
    if only_mapped and cigar == ffi.NULL:
        return False
    ncig = len(cigar) if cigar != ffi.NULL else 0
    got = lib.pu_sample_read(
        core, rec.is_reverse, seq, len(seq), mm.encode(), ffi.from_buffer(ml), len(ml), cigar, ncig
    )
    if got < 0 or not keep:
        for b in range(4):
            core.nvalues[b] = before[b]
    return None if got < 0 else bool(got)


def index_counts(bam) -> tuple[dict[int, int], int]:
    """Mapped records per contig and unmapped records, from the BAM index."""
    mapped, unmapped = {}, 0
    for stat in bam.get_index_statistics():
        mapped[bam.get_tid(stat.contig)] = stat.mapped
        unmapped += stat.unmapped
    return mapped, unmapped + bam.nocoordinate


def estimate_thresholds(bam_path: str, options: Options, pf: PositionFilter | None) -> Caller:
    """The pass thresholds modkit estimates: the filter percentile of the most likely state's
    probability over sampled calls, per canonical base (exact when every read is sampled)."""
    ignore = options.numeric()[0]
    edge = options.edge()
    only_mapped = not options.include_unmapped
    bam = pysam.AlignmentFile(bam_path, "rb", check_sq=False)
    mapped, unmapped = index_counts(bam)
    raw_region = options.sample_region or options.region  # modkit samples there
    region = parse_region(raw_region, bam) if raw_region else None
    if region:
        mapped = {t: n for t, n in mapped.items() if t == bam.get_tid(region[0])}
    elif pf is not None:
        mapped = {t: n for t, n in mapped.items() if t in set(pf.tids())}
    total = sum(mapped.values()) + (unmapped if not only_mapped else 0)
    if total == 0:
        raise PileupError(f"{bam_path}: zero reads found in the BAM index")
    frac = options.sampling_frac
    schedule: dict[int, int | None] = {}
    for tid, n in mapped.items():
        if n == 0:
            continue
        if frac is not None:
            schedule[tid] = None if frac == 1.0 else math.ceil(f32(n * f32(frac)))
        else:
            share = f32(f32(n) / f32(total))
            schedule[tid] = min(math.ceil(f32(f32(options.num_reads) * share)), n)
    if frac is None:
        _prune(schedule, options.num_reads, mapped)
    targets = []
    if region:
        targets = [(bam.get_tid(region[0]), region[1], region[2])]
    else:
        targets = [(t, 0, ln) for t, ln in enumerate(bam.lengths)]
    targets = [t for t in targets if schedule.get(t[0]) is not None or t[0] in schedule]
    seen: set[str] = set()
    values: dict[int, list] = {}
    core = new_core(options, None) if ENABLED and pf is None else None
    sampled_per: dict[int, int] = {}
    batch = max(int(options.threads * 1.5), 1)
    intervals = []
    for tid, s, e in targets:
        p = s
        while p < e:
            intervals.append((tid, p, min(p + options.sampling_interval_size, e)))
            p = min(p + options.sampling_interval_size, e)
    lengths = {t: e - s for t, s, e in targets}
    for super_batch in _super_batches(intervals, batch, options.sampling_interval_size):
        groups = _schedule_batch(super_batch, schedule, lengths, sampled_per)
        for (tid, s, e), budget in groups:
            if pf is not None and not any(
                a < e and b > s for k in (0, 1) for a, b in pf.intervals.get((tid, k), [])
            ):
                continue
            records = bam.fetch(bam.references[tid], s, e)
            got = _process_records(
                records, budget, options, only_mapped, pf, ignore, edge, seen, values, core
            )
            sampled_per[tid] = sampled_per.get(tid, 0) + got
    if not only_mapped:
        budget = None
        if frac is None:
            budget = max(options.num_reads - len(seen), 0)
        elif frac < 1.0:
            budget = None  # modkit samples these at random; all are used here
        _process_records(bam.fetch(until_eof=True, contig="*") if _has_unplaced(bam) else [],
                         budget, options, False, pf, ignore, edge, seen, values, core)  # fmt: skip
    if core is not None:
        for b in range(4):
            if core.nvalues[b]:
                buf = ffi.buffer(core.values[b], core.nvalues[b] * 4)
                values.setdefault(b, []).append(np.frombuffer(buf, dtype=np.float32).copy())
    per_mod = parse_mod_thresholds(options.mod_thresholds)
    per_base = {}
    for b in sorted(values):
        xs = np.sort(np.concatenate(values[b]).astype(np.float32), kind="stable")
        if len(xs) == 0:
            continue
        per_base[b] = percentile_linear_interp(xs, options.filter_percentile)
    return Caller(per_base, per_mod, 0.0)


def _super_batches(intervals, batch: int, size: int) -> Iterator[list]:
    """The feeder's batches: intervals joined until they reach size bp, batch of those."""
    multis, current, length = [], [], 0
    for iv in intervals:
        current.append(iv)
        length += iv[2] - iv[1]
        if length >= size:
            multis.append(current)
            current, length = [], 0
        if len(multis) >= batch:
            yield [x for m in multis for x in m]
            multis = []
    if current:
        multis.append(current)
    if multis:
        yield [x for m in multis for x in m]


def _has_unplaced(bam) -> bool:
    """Whether the BAM has reads without coordinates."""
    return bam.nocoordinate > 0


def _prune(schedule: dict, num_reads: int, mapped: dict) -> None:
    """modkit drops contigs with few reads while the schedule asks for 1.5x too many."""
    total = sum(v for v in schedule.values() if v)
    floor = 1
    while total / num_reads > 1.5:
        for tid in sorted(schedule):
            if schedule[tid] is not None and schedule[tid] <= floor:
                total -= schedule[tid]
                schedule[tid] = 0
            if total <= num_reads:
                break
        total = sum(v for v in schedule.values() if v)
        floor += 1
    for tid in [t for t, v in schedule.items() if v == 0]:
        del schedule[tid]


def _schedule_batch(intervals, schedule, lengths, sampled_per):
    """modkit's accumulate_sample_counts: each interval's read budget (None: all), small
    budgets merged with their neighbours until they reach 50 reads."""
    per_chrom_len: dict[int, int] = {}
    for tid, s, e in intervals:
        per_chrom_len[tid] = per_chrom_len.get(tid, 0) + (e - s)
    counts: dict[int, int | None] = {}
    for tid, ln in per_chrom_len.items():
        if tid not in schedule:
            continue
        total = schedule[tid]
        if total is None:
            counts[tid] = None
            continue
        remaining = total - sampled_per.get(tid, 0)
        if remaining > 0:
            counts[tid] = math.ceil(f32(f32(f32(ln) / f32(lengths[tid])) * f32(remaining)))
    grouped, slack = [], None
    for tid, s, e in sorted(intervals):
        if tid not in counts:
            continue
        if counts[tid] is None:
            grouped.append(((tid, s, e), None))
            continue
        x = math.ceil(f32(f32(counts[tid]) * f32(f32(e - s) / f32(per_chrom_len[tid]))))
        if x < 50:
            if slack is None:
                slack = ((tid, s, e), x)
            elif slack[0][0] == tid:
                merged = (tid, min(slack[0][1], s), max(slack[0][2], e))
                if x + slack[1] < 50:
                    slack = (merged, x + slack[1])
                else:
                    grouped.append((merged, x + slack[1]))
                    slack = None
            else:
                grouped.append(slack)
                slack = ((tid, s, e), x)
        else:
            if slack is not None and slack[0][0] == tid:
                grouped.append(((tid, min(slack[0][1], s), max(slack[0][2], e)), slack[1] + x))
            else:
                if slack is not None:
                    grouped.append(slack)
                grouped.append(((tid, s, e), x))
            slack = None
    if slack is not None:
        grouped.append(slack)
    return grouped


# ---------------------------------------------------------------- running


def open_inputs(in_bam: str, options: Options):
    """Open and check the BAM (indexed, sorted, mapped reads) and the reference; the BAM,
    FASTA (or None) and position filter (or None)."""
    try:
        bam = pysam.AlignmentFile(in_bam, "rb", check_sq=False)
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
            fasta = pysam.FastaFile(options.reference)
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


def make_caller(in_bam: str, options: Options, pf) -> Caller:
    """The threshold caller from the options (given, passthrough or estimated)."""
    per_mod = parse_mod_thresholds(options.mod_thresholds)
    if options.filter_threshold:
        return parse_thresholds(options.filter_threshold, per_mod)
    if options.no_filtering:
        return Caller()
    return estimate_thresholds(in_bam, options, pf)


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
    """(text, stats) of each chunk in order, on options.threads processes."""
    if options.threads <= 1 or len(chunks) <= 1:
        worker = ChunkWorker(in_bam, options, caller, pf, list_reads)
        for chunk in chunks:
            yield worker.pileup_chunk(chunk)
        return
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(options.threads, _init_worker, (in_bam, options, caller, pf, list_reads)) as pool:
        yield from pool.imap(_run_chunk, chunks, chunksize=1)


@dataclass
class Result:
    """A finished pileup's counts."""

    stats: Stats
    caller: Caller


def pileup(
    in_bam: str, out, options: Options, regions: list[str] | None = None, reads_out=None
) -> Result:
    """Write the bedMethyl of in_bam to the text stream out. regions (name or name:start-end)
    keeps only the intervals of the whole run that start inside them, in the order given, so
    pileups of regions that tile the genome concatenate to the whole output. reads_out (a text
    stream) gets the read listing: each mapped primary record once, in the interval where it
    starts (read_id, mapq, 1 if it carries ML values: READ_LISTING_COLUMNS; rows only); it
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
    with pysam.AlignmentFile(in_bam, "rb", check_sq=False) as bam:
        if regions is None:
            spans = [(n, 0, ln) for n, ln in zip(bam.references, bam.lengths, strict=True)]
        else:
            spans = [parse_region(raw, bam) for raw in regions]
        for name, start, end in spans:
            for rec in bam.fetch(name, start, end):
                if not rec.flag & NOT_PRIMARY_MAPPED and rec.reference_start >= start:
                    out.write(read_listing_line(rec))


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
    bam = pysam.AlignmentFile(in_bam, "rb", check_sq=False)
    total = sum(bam.lengths)
    size = max(math.ceil(total / max(n, 1)), 1)
    regions = []
    for name, length in zip(bam.references, bam.lengths, strict=True):
        for s in range(0, length, size):
            regions.append(f"{name}:{s}-{min(s + size, length)}")
    return regions


def eprint(message: str) -> None:
    """One line on stderr."""
    print(message, file=sys.stderr)
