"""`numapore pileup`: a modBAM to bedMethyl, byte for byte as modkit 0.4.4's `modkit pileup`
writes it, with modkit's option names:

    python -m numapore.methylation.pileup_cli IN.bam OUT.bed [--ref FA] [--cpg] ...

OUT `-` (or `stdout`) writes to standard output; a file is written under a temporary name in
its folder and renamed when complete. Bad input: one `numapore: ` line on stderr, exit code 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from numapore.methylation import pileup as engine

SKIP_REASONS = {
    "missing": "no MM/ML tags",
    "ml_short": "ML shorter than MM needs",
    "ml": "ML not uint8 array",
    "mm": "invalid MM",
    "mn": "MN differs from the sequence length",
    "implicit": "MM without a mode ('.' or '?')",
    "conflict": "conflicting MM groups",
    "empty": "no usable calls",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """modkit pileup's options (those that only tune modkit's own work are accepted and
    ignored)."""
    parser.add_argument("in_bam", help="coordinate-sorted, indexed modBAM (MM/ML tags)")
    parser.add_argument("out_bed", help="output bedMethyl, - for stdout")
    sel = parser.add_argument_group("selection")
    sel.add_argument("--region", help="chrom or chrom:start-end")
    sel.add_argument("--include-bed", "--include-positions", dest="include_bed", metavar="BED")
    sel.add_argument("--include-unmapped", action="store_true")
    sel.add_argument("--edge-filter", metavar="N[,M]")
    sel.add_argument("--invert-edge-filter", action="store_true")
    sel.add_argument("--max-depth", type=int, default=8000, help="accepted, not applied")
    filt = parser.add_argument_group("filtering")
    filt.add_argument("--no-filtering", action="store_true")
    filt.add_argument("--filter-threshold", "--pass-threshold", action="append", metavar="X")
    filt.add_argument("--mod-thresholds", "--mod-threshold", action="append", metavar="CODE:X")
    filt.add_argument("-p", "--filter-percentile", type=float, default=0.1)
    filt.add_argument("-n", "--num-reads", type=int, default=10_042)
    filt.add_argument("-f", "--sampling-frac", type=float)
    filt.add_argument("--seed", type=int)
    filt.add_argument("--sample-region", help="where to sample calls (default: --region)")
    filt.add_argument("--sampling-interval-size", type=int, default=engine.SAMPLING_INTERVAL)
    mods = parser.add_argument_group("modified bases")
    mods.add_argument("--ref", "--reference", "-r", dest="reference", metavar="FASTA")
    mods.add_argument("--cpg", action="store_true")
    mods.add_argument("--motif", nargs=2, action="append", metavar=("SEQ", "OFFSET"))
    mods.add_argument("--combine-strands", action="store_true")
    mods.add_argument("--combine-mods", action="store_true")
    mods.add_argument("--ignore", metavar="CODE")
    mods.add_argument("--preset", choices=["traditional"])
    mods.add_argument("--force-allow-implicit", action="store_true")
    mods.add_argument("-k", "--mask", action="store_true")
    out = parser.add_argument_group("output")
    out.add_argument("--mixed-delim", "--mixed-delimiters", dest="mixed_delim", action="store_true")
    out.add_argument("--only-tabs", action="store_true", help="the default (deprecated)")
    out.add_argument("--with-header", "--header", "--include_header", dest="with_header",
                     action="store_true")  # fmt: skip
    comp = parser.add_argument_group("compute")
    comp.add_argument("-t", "--threads", type=int, default=1)
    comp.add_argument("-i", "--interval-size", type=int, default=engine.DEFAULT_INTERVAL)
    comp.add_argument("--queue-size", type=int, help="accepted, ignored")
    comp.add_argument("--chunk-size", type=int, help="accepted, ignored")
    comp.add_argument("--suppress-progress", action="store_true", help="accepted, ignored")
    comp.add_argument("--log-filepath", "--log", help="accepted, ignored")
    comp.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    extra = parser.add_argument_group("numapore's own (not modkit's)")
    extra.add_argument(
        "--read-listing", metavar="TSV",
        help="also list each mapped primary record once: read id, MAPQ, 1 if it carries ML "
        "values (a TSV; numapore's read accounting reads it instead of the BAM again)",
    )  # fmt: skip


def options_from_args(args: argparse.Namespace) -> engine.Options:
    """The engine's options from parsed arguments (checking modkit's conflicts)."""
    if args.preset and (args.combine_mods or args.cpg or args.combine_strands or args.ignore
                        or args.motif):  # fmt: skip
        raise engine.PileupError("--preset cannot be combined with motif/combine/ignore options")
    if args.combine_mods and args.ignore:
        raise engine.PileupError("--combine-mods and --ignore cannot be used together")
    if args.no_filtering and args.filter_threshold:
        raise engine.PileupError("--no-filtering and --filter-threshold cannot be used together")
    motifs = []
    for seq, offset in args.motif or []:
        if not offset.isdigit():
            raise engine.PileupError(f"couldn't parse motif offset {offset!r}")
        if (seq, int(offset)) in motifs:
            raise engine.PileupError("cannot have the same motif more than once")
        motifs.append((seq, int(offset)))
    if args.interval_size <= 0 or args.threads <= 0:
        raise engine.PileupError("--interval-size and --threads must be positive")
    return engine.Options(
        interval_size=args.interval_size,
        filter_threshold=args.filter_threshold,
        mod_thresholds=args.mod_thresholds,
        no_filtering=args.no_filtering,
        filter_percentile=args.filter_percentile,
        num_reads=args.num_reads,
        sampling_frac=args.sampling_frac,
        seed=args.seed,
        sampling_interval_size=args.sampling_interval_size,
        include_unmapped=args.include_unmapped,
        region=args.region,
        sample_region=args.sample_region,
        include_bed=args.include_bed,
        ignore=args.ignore,
        combine_mods=args.combine_mods,
        combine_strands=args.combine_strands,
        preset=args.preset,
        motifs=motifs,
        cpg=args.cpg,
        reference=args.reference,
        mask=args.mask,
        edge_filter=args.edge_filter,
        invert_edge_filter=args.invert_edge_filter,
        force_allow_implicit=args.force_allow_implicit,
        mixed_delim=args.mixed_delim,
        with_header=args.with_header,
        threads=args.threads,
    )


def check_reads(in_bam: str, stats: engine.Stats) -> None:
    """Refuse a BAM whose reads were all skipped for their tags (what modkit would turn into
    an empty bedMethyl); warn about the reads skipped otherwise."""
    if stats.used == 0 and stats.skipped:
        kind = max(stats.skipped, key=stats.skipped.get)
        name, reason = stats.examples[kind]
        if kind == "missing":
            raise engine.PileupError(f"{in_bam}: no read has MM/ML tags (read {name}: {reason})")
        if kind == "implicit":
            raise engine.PileupError(
                f"{in_bam}: read {name}: {reason}; modkit skips such reads "
                "(--force-allow-implicit reads them as implicit)"
            )
        raise engine.PileupError(f"{in_bam}: every read was skipped (read {name}: {reason})")
    for kind in ("ml_short", "mm", "mn", "conflict", "implicit"):
        if kind in stats.skipped:
            name, reason = stats.examples[kind]
            engine.eprint(
                f"numapore: {in_bam}: read {name}: {reason}; skipped "
                f"({stats.skipped[kind]} read(s) like it)"
            )


def run(args: argparse.Namespace, regions: list[str] | None = None) -> int:
    """Run the pileup (of the regions only, when given: a scatter's share); 0, or 1 after one
    `numapore: ` line on stderr."""
    tmp = listing_tmp = None
    try:
        options = options_from_args(args)
        with ExitStack() as files:
            listing = None
            if args.read_listing:
                listing_tmp = part_file(Path(args.read_listing))
                listing = files.enter_context(open(listing_tmp, "w", buffering=1 << 20))
                listing.write(engine.READ_LISTING_HEADER)
            if args.out_bed in ("-", "stdout"):
                out = sys.stdout
            else:
                tmp = part_file(Path(args.out_bed))
                out = files.enter_context(open(tmp, "w", buffering=1 << 20))
            result = engine.pileup(args.in_bam, out, options, regions, listing)
        check_reads(args.in_bam, result.stats)
        sys.stdout.flush()
        for part, final in ((tmp, args.out_bed), (listing_tmp, args.read_listing)):
            if part is not None:
                os.replace(part, final)
        tmp = listing_tmp = None
    except engine.PileupError as err:
        engine.eprint(f"numapore: {err}")
        return 1
    except OSError as err:
        engine.eprint(f"numapore: {err.filename or args.out_bed}: {err.strerror}")
        return 1
    except KeyboardInterrupt:
        engine.eprint("numapore: interrupted")
        return 1
    finally:
        for part in (tmp, listing_tmp):
            if part is not None and os.path.exists(part):
                os.unlink(part)
    if not args.quiet:
        st = result.stats
        skipped = ", ".join(f"{n} {SKIP_REASONS.get(k, k)}" for k, n in sorted(st.skipped.items()))
        engine.eprint(
            f"numapore pileup: {st.used} read(s) used, "
            f"{sum(st.skipped.values())} skipped{' (' + skipped + ')' if skipped else ''}, "
            f"{st.rows} row(s) written"
        )
    return 0


def part_file(out: Path) -> str:
    """A new empty file (mode 644) in out's folder, made if missing, to be renamed to out
    once complete."""
    folder = out.parent if str(out.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=folder)
    os.close(fd)
    os.chmod(tmp, 0o644)
    return tmp


def shard_regions(in_bam: str, shard: int, shards: int) -> list[str]:
    """The regions of scatter shard `shard` of `shards` (1-based): consecutive regions of
    engine.scatter_regions, so that the shards' pileups concatenate, in shard order, to the
    whole pileup."""
    regions = engine.scatter_regions(in_bam, shards)
    return regions[(shard - 1) * len(regions) // shards : shard * len(regions) // shards]


def parse(argv: list[str]) -> argparse.Namespace:
    """The pileup's command line parsed (IN.bam OUT.bed OPTIONS...)."""
    parser = argparse.ArgumentParser(prog="numapore pileup")
    add_arguments(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, prog: str = "numapore pileup") -> int:
    """Parse argv (default sys.argv[1:]) and run."""
    parser = argparse.ArgumentParser(
        prog=prog, description="modBAM to bedMethyl (modkit 0.4.4 pileup semantics)"
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
