"""Thresholds: the caller's per-code, per-base and default thresholds (ties as Rust's max()
over a hash map's order), given or estimated from a percentile of sampled calls (modkit's
sampling schedule, intervals and read budgets; exact whenever every read is sampled).

The estimate depends on which reads are sampled: with more reads than `-n` (--num-reads) or a
--sampling-frac below 1, modkit's schedule over --sampling-interval-size intervals in batches of
--sampling-threads x 1.5 (default 4 threads; --threads with 0.4.4's semantics) decides them,
with --seed; numapore follows that schedule without randomness, so the same options give the
same threshold on every run and at any --threads."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pysam

from numapore.methylation.bedmethyl import f32
from numapore.methylation import pileup_common as common
from numapore.methylation.pileup_common import (
    BASES,
    BASE_INDEX,
    CANONICAL,
    FILTERED,
    ffi,
    lib,
    Options,
    PileupError,
    ReadError,
)
from numapore.methylation.pileup_tags import (
    alignment_arrays,
    canonical_probs,
    edge_keep,
    forward_sequence,
    get_mod_tags,
    read_mod_tables,
    table_probs,
)
from numapore.methylation.pileup_positions import PositionFilter
from numapore.methylation.pileup_regions import parse_region
from numapore.methylation.pileup_reader import BamReader


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
    values: dict[int, list] = {}
    core = new_core(options, None) if common.ENABLED and pf is None else None
    reader = BamReader.open(bam_path) if core is not None else None
    seen = reader.seen_names() if reader is not None else set()
    sampled_per: dict[int, int] = {}
    batch = max(int(options.sampler_threads() * 1.5), 1)
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
            got = None
            if reader is not None:  # the records read in C (pileup_reader)
                got = reader.sample(core, tid, s, e, budget, only_mapped, edge is not None)
            if got is None:
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


def make_caller(in_bam: str, options: Options, pf) -> Caller:
    """The threshold caller from the options (given, passthrough or estimated)."""
    per_mod = parse_mod_thresholds(options.mod_thresholds)
    if options.filter_threshold:
        return parse_thresholds(options.filter_threshold, per_mod)
    if options.no_filtering:
        return Caller()
    return estimate_thresholds(in_bam, options, pf)
