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

from numapore.methylation.bedmethyl import f32, f32_text
from numapore.pileup import common
from numapore.pileup.common import (
    BASES,
    BASE_INDEX,
    ffi,
    lib,
    Options,
    PileupError,
)
from numapore.pileup.inputs import open_bam
from numapore.pileup.positions import PositionFilter
from numapore.pileup.regions import parse_region
from numapore.pileup.reader import BamReader


@dataclass
class Caller:
    """modkit's MultipleThresholdModCaller: a call's threshold is its code's, else the base's
    any-mod code's, else its primary base's, else the default; canonical uses base or default."""

    per_base: dict[int, float] = field(default_factory=dict)
    per_mod: dict[str, float] = field(default_factory=dict)
    default: float = 0.0

    def code_threshold(self, base: int, code: str):
        """The threshold a modified call of code at primary base index base must reach (a
        numpy float32: the Python path compares float32 arrays with it)."""
        import numpy as np

        for value in (self.per_mod.get(code), self.per_mod.get(BASES[base])):
            if value is not None:
                return np.float32(value)
        return np.float32(self.per_base.get(base, self.default))

    def canonical_threshold(self, base: int):
        """The threshold a canonical call at base must reach (a numpy float32)."""
        import numpy as np

        return np.float32(self.per_base.get(base, self.default))


def parse_float32(text: str, what: str) -> float:
    """A threshold as Rust's parse::<f32> reads it."""
    try:
        return f32(float(text))
    except ValueError:
        raise PileupError(f"failed to parse {what} {text!r}") from None


def parse_probability(text: str, what: str) -> float:
    """A pass threshold, a probability (a percentage is refused: no call would pass it)."""
    value = parse_float32(text, what)
    if not 0 <= value <= 1:
        raise PileupError(f"{what} {text!r} is not a probability from 0 to 1 (70 % is 0.7)")
    return value


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
            per_base[BASE_INDEX[base[0]]] = parse_probability(value, "threshold")
        else:
            if default is not None:
                raise PileupError("default threshold given more than once")
            default = parse_probability(item, "threshold")
    return Caller(per_base, per_mod, default or 0.0)


def parse_mod_thresholds(raw: list[str] | None) -> dict[str, float]:
    """--mod-thresholds CODE:X values."""
    out = {}
    for item in raw or []:
        parts = item.split(":")
        if len(parts) != 2 or not parts[0]:
            raise PileupError(f"illegal per-mod threshold {item!r}, should be e.g. h:0.8")
        if len(parts[0]) > 1 and not parts[0].isdigit():
            raise PileupError(
                f"illegal per-mod threshold {item!r}: its code is one letter or a ChEBI number "
                "(5mC is m, 5hmC is h, 6mA is a), e.g. m:0.8"
            )
        out[parts[0] if len(parts[0]) == 1 else str(int(parts[0]))] = parse_probability(
            parts[1], "per-mod threshold"
        )
    return out


def percentile_linear_interp(xs, n: int, q: float) -> float:
    """modkit's percentile of n sorted float32 values xs (any sequence: a numpy array, the
    core's buffer), in float32 arithmetic (f32 after each operation)."""
    if n < 2:
        raise PileupError(f"not enough calls ({n}) to estimate a pass threshold")
    q = f32(q)
    if q == 1.0:
        return float(xs[n - 1])
    l_q = f32(f32(n - 1) * q)
    left, right = math.floor(l_q), math.ceil(l_q)
    g = f32(l_q - math.trunc(l_q))
    return f32(f32(float(xs[left]) * f32(1.0 - g)) + f32(float(xs[right]) * g))


def new_core(options: Options, caller: Caller | None):
    """A core.c context with the options' settings and caller's thresholds."""
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
    ctx.force_allow = options.reads_implicit
    ctx.fail_by_base = options.modern
    return ctx


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
    core, values = sample_calls(bam_path, options, pf)
    per_mod = parse_mod_thresholds(options.mod_thresholds)
    per_base = {}
    for b in range(4):
        if b in values:  # numpy made them: the core's join them there
            from numapore.pileup.sampling import sorted_values

            xs = sorted_values(values[b], core, b)
            n = len(xs)
        elif core is not None and core.nvalues[b]:  # sorted in C: millions of values
            lib.pu_sort_values(core, b)
            xs, n = core.values[b], core.nvalues[b]
        else:
            continue
        if n:
            per_base[b] = percentile_linear_interp(xs, n, options.filter_percentile)
    return Caller(per_base, per_mod, 0.0)


def sample_calls(
    bam_path: str, options: Options, pf: PositionFilter | None, states=False, in_region=False
):
    """The threshold estimate's sample, modkit's ReadIdsToBaseModProbs: the most likely
    state's probability of each call of the sampled reads, per canonical base, in the core
    (core.values; with states, core.states and core.sampled_codes too) and, for what the
    pysam path sampled, in values (per canonical base, lists of float32 arrays). Returns
    (core, values); with states, a PileupError where the core cannot hold them. in_region
    (with states and a region): only the calls whose reference position is in the region."""
    edge = options.edge()
    only_mapped = not options.include_unmapped
    bam = open_bam(bam_path)
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
    values: dict[int, list] = {}  # the pysam path's, per canonical base (the core keeps its own)
    core = new_core(options, None) if common.ENABLED and pf is None else None
    if states:
        if core is None:
            raise PileupError("the calls' states need the compiled core and no position filter")
        core.sample_states = 1
        if in_region and region:
            core.sample_in_region, core.sample_from, core.sample_to = 1, region[1], region[2]
    reader = BamReader.open(bam_path) if core is not None else None
    seen = reader.seen_names() if reader is not None else set()
    by_pysam = None  # sampling's, opened where the C reader cannot sample

    def pysam_sample():
        nonlocal by_pysam
        if by_pysam is None:
            from numapore.pileup.sampling import PysamSample

            by_pysam = PysamSample(bam_path, options, only_mapped, pf, seen, values, core)
        return by_pysam

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
            if reader is not None:  # the records read in C (reader)
                got = reader.sample(core, tid, s, e, budget, only_mapped, edge is not None)
            if got is None:
                got = pysam_sample().interval(tid, s, e, budget)
            sampled_per[tid] = sampled_per.get(tid, 0) + got
    if not only_mapped and bam.nocoordinate:
        budget = None
        if frac is None:
            budget = max(options.num_reads - len(seen), 0)
        elif frac < 1.0:
            budget = None  # modkit samples these at random; all are used here
        pysam_sample().unplaced(budget)
    if states and values:
        raise PileupError(f"{bam_path}: calls the compiled core cannot read (over 8 codes?)")
    return core, values


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


def threshold_record(caller: Caller | None, options: Options) -> dict:
    """What a pileup's pass thresholds were and where they came from ('given', 'estimated',
    'none' with --no-filtering, 'no calls' without a caller), with the sampling options that
    pick the calls an estimate reads: what the workflow's QC of the calls
    (numapore.modbam.qc) shows beside the calls' summary, and gives `numapore summary`
    as --filter-threshold (filter_threshold: the values that make the same caller)."""
    source = "no calls" if caller is None else "estimated"
    if options.no_filtering:
        source = "none"
    elif options.filter_threshold:
        source = "given"
    caller = caller or Caller()
    if source == "given":
        arguments = list(options.filter_threshold)
    else:
        arguments = [f"{BASES[b]}:{f32_text(v)}" for b, v in sorted(caller.per_base.items())]
    return {
        "source": source,
        "per_base": {BASES[b]: float(v) for b, v in sorted(caller.per_base.items())},
        "default": float(caller.default),
        "per_mod": {code: float(v) for code, v in caller.per_mod.items()},
        "filter_threshold": arguments if source in ("given", "estimated") else None,
        "filter_percentile": options.filter_percentile,
        "sampling": {
            "num_reads": options.num_reads,
            "sampling_frac": options.sampling_frac,
            "interval_size": options.sampling_interval_size,
            "sampling_threads": options.sampler_threads(),
            "ignore": options.ignore,
            "edge_filter": options.edge_filter,
            "invert_edge_filter": options.invert_edge_filter,
            "modkit": options.compat,
        },
    }


def threshold_line(record: dict) -> str:
    """A threshold record as one line of the pileup's log."""
    values = [f"{b} {f32_text(v)}" for b, v in record["per_base"].items()]
    values += [f"{code} {f32_text(v)}" for code, v in record["per_mod"].items()]
    if record["source"] == "given" and not record["per_base"]:
        values.insert(0, f32_text(record["default"]))
    shown = ", ".join(values) or "-"
    why = {
        "estimated": f"estimated: percentile {record['filter_percentile'] * 100:g} of the "
        "sampled calls' probabilities",
        "given": "given",
        "none": "no filtering",
        "no calls": "no calls",
    }[record["source"]]
    return f"pass thresholds: {shown} ({why})"
