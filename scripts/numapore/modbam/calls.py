"""The calls of a modBAM's sampled reads, as modkit 0.6.1's `modbam summary` and `modbam
sample-probs` gather them (ReadIdsToBaseModProbs): the pileup engine's threshold sample
(numapore.pileup.thresholds.sample_calls, its C reader) with each call's most likely state,
per canonical base (a G- call of a duplex read counts under C). Also the sampling options
both commands share, and the modkit options they take."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from numapore.modbam.command import CommandError, add_ignored, add_unsupported
from numapore.pileup.common import BASES, SAMPLING_INTERVAL, Options, ffi, lib
from numapore.pileup.inputs import bai_path
from numapore.pileup.thresholds import sample_calls


class BaseCalls:
    """One canonical base's sampled calls, read in the core (sample.c; no numpy): each call's
    most likely state (0 canonical, else 1 + an index into SampledCalls.codes) and its
    probability; reads: the reads with calls there; codes: the codes its calls carry."""

    def __init__(self, core, base: int, codes: set[str]):
        """The calls of base in the core's sample."""
        self.core, self.base, self.codes = core, base, codes
        self.n = core.nvalues[base]
        self.first_of_read, self.reads = self._tally(0.0)[2]

    def _tally(self, threshold: float):
        """pu_sample_tally: per state [pass], [fail], and the flags' counts."""
        pass_ = ffi.new("int64_t[32]")
        fail = ffi.new("int64_t[32]")
        flags = ffi.new("int64_t[2]")
        lib.pu_sample_tally(self.core, self.base, threshold, pass_, fail, flags)
        return list(pass_), list(fail), list(flags)

    def counts(self, threshold: float) -> dict[int, list[int]]:
        """Per state with calls: [calls at or above threshold (float32), calls below it]."""
        passing, failing, _ = self._tally(threshold)
        return {k: [passing[k], failing[k]] for k in range(32) if passing[k] + failing[k]}

    def sorted_values(self) -> SortedValues:
        """The probabilities as a sorted sequence (indexing only)."""
        return SortedValues(self)

    def histogram(self) -> dict[int, list[int]]:
        """Per state with calls: the calls in each bin of 1/256 (a probability of 1 in the
        last)."""
        bins = ffi.new("int64_t[]", 32 * 256)
        lib.pu_sample_histogram(self.core, self.base, bins)
        flat = list(bins)
        return {
            k: flat[k * 256 : (k + 1) * 256]
            for k in range(32)
            if any(flat[k * 256 : (k + 1) * 256])
        }


class SortedValues:
    """A base's sampled probabilities in ascending order, each found by its rank in C
    (pu_sample_rank), for percentile_linear_interp."""

    def __init__(self, calls: BaseCalls):
        """The values of calls."""
        self.calls = calls

    def __len__(self) -> int:
        """The number of values."""
        return self.calls.n

    def __getitem__(self, rank: int) -> float:
        """The rank-th smallest value."""
        return lib.pu_sample_rank(self.calls.core, self.calls.base, rank)


@dataclass
class SampledCalls:
    """The sampled reads' calls per canonical base index (0-3, BASES' order)."""

    bases: dict[int, BaseCalls]
    codes: list[str]  # the registry: state k + 1 is codes[k]
    reads: int  # reads that gave calls

    def state_code(self, state: int) -> str:
        """A state's code, '-' for canonical."""
        return "-" if state == 0 else self.codes[state - 1]


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """modkit's sampling and selection options of summary and sample-probs."""
    sampling = parser.add_argument_group(
        "sampling",
        "Which reads are sampled is decided by -n, -f, --seed, --region, -i and "
        "--sampling-threads (modkit's batches of -t), never by chance: the same options give "
        "the same output on every run and at any -t.",
    )
    sampling.add_argument("-n", "--num-reads", type=int, default=10_042)
    sampling.add_argument("-f", "--sampling-frac", type=float)
    sampling.add_argument("--no-sampling", action="store_true", help="use every read")
    sampling.add_argument("-s", "--seed", type=int, help="accepted (sampling has no chance)")
    sampling.add_argument("--region", help="chrom or chrom:start-end: the reads overlapping it")
    sampling.add_argument("-i", "--interval-size", type=int, default=SAMPLING_INTERVAL)
    sampling.add_argument(
        "--sampling-threads", type=int, default=4,
        help="numapore's own: the -t whose batches pick the reads (modkit's -t, default 4)",
    )  # fmt: skip
    selection = parser.add_argument_group("selection")
    selection.add_argument("--edge-filter", metavar="N[,M]")
    selection.add_argument("--invert-edge-filter", action="store_true")
    selection.add_argument("--ignore", metavar="CODE", help="redistribute this code's probability")
    selection.add_argument("--mapped-only", "--only-mapped", dest="mapped_only",
                           action="store_true", help="only calls on aligned bases")  # fmt: skip
    add_unsupported(parser, "--include-bed", "--include-positions")
    add_ignored(parser, "-t", "--threads", "--log-filepath", "--log")
    add_ignored(parser, "--suppress-progress", value=False)


def sampling_options(args: argparse.Namespace) -> Options:
    """The engine's options for the sample of the parsed command line."""
    given = [args.no_sampling, args.sampling_frac is not None, args.num_reads != 10_042]
    if sum(given) > 1:
        raise CommandError("--num-reads, --sampling-frac and --no-sampling exclude each other")
    if args.seed is not None and args.sampling_frac is None:
        raise CommandError("--seed needs --sampling-frac")
    if args.invert_edge_filter and not args.edge_filter:
        raise CommandError("--invert-edge-filter needs --edge-filter")
    if args.num_reads <= 0 or args.interval_size <= 0 or args.sampling_threads <= 0:
        raise CommandError("--num-reads, --interval-size and --sampling-threads must be positive")
    if args.sampling_frac is not None and not 0 < args.sampling_frac <= 1:
        raise CommandError("--sampling-frac must be in (0, 1]")
    if args.ignore is not None and not (args.ignore.isdigit() or len(args.ignore) == 1):
        raise CommandError(f"--ignore {args.ignore!r}: not a modification code")
    return Options(
        num_reads=args.num_reads,
        sampling_frac=1.0 if args.no_sampling else args.sampling_frac,
        seed=args.seed,
        sampling_interval_size=args.interval_size,
        include_unmapped=not args.mapped_only,
        region=args.region,
        ignore=args.ignore,
        edge_filter=args.edge_filter,
        invert_edge_filter=args.invert_edge_filter,
        sampling_threads=args.sampling_threads,
    )


def check_bam(path: str) -> None:
    """Refuse what the sampler cannot read: a missing file, one that is not a BAM, a BAM
    without a .bai index beside it."""
    with open(path, "rb") as handle:
        if handle.read(2) != b"\x1f\x8b":
            raise CommandError(f"{path}: not a BAM")
    if bai_path(path) is None:
        raise CommandError(f"{path}: no .bai index beside it (samtools index {path})")


def sample(bam_path: str, options: Options, in_region: bool = False) -> SampledCalls:
    """The calls of the sampled reads (in_region: with --region, only those whose reference
    position is in the region; a read counts if it gave one)."""
    check_bam(bam_path)
    try:
        core, _ = sample_calls(bam_path, options, None, states=True, in_region=in_region)
    except ValueError as err:  # pysam's word for a BAM it cannot read
        raise CommandError(f"{bam_path}: {err}") from None
    codes = [ffi.string(core.codes[k]).decode() for k in range(core.ncodes)]
    bases, reads = {}, 0
    for b in range(4):
        if not core.nvalues[b]:
            continue
        seen = {codes[k] for k in range(len(codes)) if core.sampled_codes[b] >> k & 1}
        bases[b] = BaseCalls(core, b, seen)
        reads += bases[b].first_of_read
    return SampledCalls(bases, codes, reads)


def base_letter(b: int) -> str:
    """A base index's letter."""
    return BASES[b]
