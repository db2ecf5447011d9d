"""`numapore pileup`: a modBAM to bedMethyl, byte for byte as modkit 0.6.1's `modkit pileup`
writes it (modkit 0.4.4's with `--modkit-compat 0.4`), with modkit's option names:

    python -m numapore.pileup.cli IN.bam OUT.bed [--ref FA] [--cpg] ...

OUT `-` (or `stdout`) writes to standard output; a file is written under a temporary name in
its folder and renamed when complete. Bad input: one `numapore: ` line on stderr, exit code 1.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from contextlib import ExitStack
from dataclasses import dataclass, replace

from numapore.pileup import engine
from numapore.pileup.modkit_versions import DEFAULT_VERSION, MODKIT_VERSIONS, ONLY_04

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
    sel.add_argument("--invert-edge-filter", action="store_true", help="0.4 only")
    sel.add_argument("--high-depth", action="store_true",
                     help="0.6: cap the reads counted per position at --max-depth")  # fmt: skip
    sel.add_argument("--max-depth", type=int,
                     help="with --high-depth (0.6): reads counted per position and strand, "
                     "first in BAM order (default 8000)")  # fmt: skip
    filt = parser.add_argument_group(
        "filtering",
        "Without --filter-threshold or --no-filtering the pass threshold is the -p percentile "
        "of sampled calls. Which reads are sampled is decided by -n, -f, --seed, "
        "--sampling-interval-size, --region/--sample-region and --sampling-threads (modkit's "
        "batches), "
        "never by chance: the same options give the same threshold and the same bytes on "
        "every run (modkit 0.6.1's can change between runs).",
    )
    filt.add_argument("--no-filtering", action="store_true")
    filt.add_argument("--filter-threshold", "--pass-threshold", action="append", metavar="X")
    filt.add_argument("--mod-thresholds", "--mod-threshold", action="append", metavar="CODE:X")
    filt.add_argument("-p", "--filter-percentile", type=float, default=0.1)
    filt.add_argument("-n", "--num-reads", type=int, default=10_042)
    filt.add_argument("-f", "--sampling-frac", type=float)
    filt.add_argument("--seed", type=int)
    filt.add_argument(
        "--sampling-threads", type=int,
        help="the threads whose batches pick the sampled reads (default 4, modkit's default "
        "--threads; give modkit's --threads to match a modkit run with other threads)",
    )  # fmt: skip
    filt.add_argument("--sample-region", help="where to sample calls (default: --region)")
    filt.add_argument("--sampling-interval-size", type=int, default=engine.SAMPLING_INTERVAL)
    mods = parser.add_argument_group("modified bases")
    mods.add_argument("--ref", "--reference", "-r", dest="reference", metavar="FASTA")
    mods.add_argument("--cpg", action="store_true")
    mods.add_argument("--motif", nargs=2, action="append", metavar=("SEQ", "OFFSET"))
    mods.add_argument("--combine-strands", action="store_true")
    mods.add_argument("--combine-mods", action="store_true")
    mods.add_argument("--modified-bases", nargs="+", metavar="MOD",
                      help="0.6: 5mC 5hmC 6mA ... (rows at the reference's bases)")  # fmt: skip
    mods.add_argument("--ignore", metavar="CODE", help="0.4 only")
    mods.add_argument("--preset", choices=["traditional"], help="0.4 only")
    mods.add_argument("--force-allow-implicit", action="store_true", help="0.4 only")
    mods.add_argument("-k", "--mask", action="store_true")
    out = parser.add_argument_group("output")
    out.add_argument("--mixed-delim", "--mixed-delimiters", dest="mixed_delim", action="store_true",
                     help="0.4 only")  # fmt: skip
    out.add_argument("--only-tabs", action="store_true", help="0.4 only (its default)")
    out.add_argument("--with-header", "--header", "--include_header", dest="with_header",
                     action="store_true")  # fmt: skip
    out.add_argument("--bgzf", action="store_true",
                     help="0.6: BGZF output, its tabix index (.tbi) beside it")  # fmt: skip
    out.add_argument("--phased", action="store_true",
                     help="0.6: OUT is a folder of combined, hp1 and hp2 bedMethyl files "
                     "(all records, HP:i:1 records, HP:i:2 records)")  # fmt: skip
    out.add_argument("--prefix", help="0.6, with --phased: the files' names start PREFIX_")
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
        "--modkit-compat", choices=list(MODKIT_VERSIONS), default=DEFAULT_VERSION,
        help="whose semantics: modkit 0.6.1's (default) or 0.4.4's",
    )  # fmt: skip
    extra.add_argument(
        "--read-listing", metavar="TSV",
        help="also list each mapped primary record once: read id, MAPQ, 1 if it carries ML "
        "values (a TSV; numapore's read accounting reads it instead of the BAM again)",
    )  # fmt: skip


def check_compat(args: argparse.Namespace) -> None:
    """Refuse a 0.4-only option under 0.6 semantics (naming the 0.6 equivalent) and a 0.6-only
    one under 0.4; and 0.6.1's own option rules."""
    if args.modkit_compat == "0.4":
        only_06 = {"--modified-bases": args.modified_bases, "--high-depth": args.high_depth,
                   "--bgzf": args.bgzf, "--phased": args.phased}  # fmt: skip
        for option, given in only_06.items():
            if given:
                raise engine.PileupError(f"{option} is modkit 0.6's; drop --modkit-compat 0.4")
        return
    for dest, (option, instead) in ONLY_04.items():
        if getattr(args, dest):
            raise engine.PileupError(
                f"{option} is modkit 0.4's (removed in 0.6): use {instead}, "
                "or add --modkit-compat 0.4"
            )
    needs_modified_bases = {"--cpg": args.cpg, "--edge-filter": args.edge_filter}
    for option, given in needs_modified_bases.items():
        if given and not args.modified_bases:
            raise engine.PileupError(f"{option} needs --modified-bases in modkit 0.6")
    if args.modified_bases and not args.reference:
        raise engine.PileupError("--modified-bases needs --ref")
    if args.include_bed and not (args.motif or args.modified_bases):
        raise engine.PileupError("--include-bed needs --motif or --modified-bases in modkit 0.6")
    if args.max_depth is not None and args.max_depth < 1:
        raise engine.PileupError(f"--max-depth {args.max_depth}: must be 1 or more")
    if args.max_depth is not None and not args.high_depth:
        raise engine.PileupError("--max-depth needs --high-depth in modkit 0.6")
    if args.prefix and not args.phased:
        raise engine.PileupError("--prefix needs --phased")
    if (args.phased or args.bgzf) and (args.read_listing or args.out_bed in ("-", "stdout")):
        raise engine.PileupError("--phased and --bgzf write files (not - and no --read-listing)")
    if args.motif and len(args.motif) > 1 and args.combine_strands:
        raise engine.PileupError("multiple motifs and --combine-strands not supported")


def options_from_args(args: argparse.Namespace) -> engine.Options:
    """The engine's options from parsed arguments (checking modkit's conflicts)."""
    check_compat(args)
    if args.preset and (args.combine_mods or args.cpg or args.combine_strands or args.ignore
                        or args.motif):  # fmt: skip
        raise engine.PileupError("--preset cannot be combined with motif/combine/ignore options")
    if args.ignore and len(args.ignore) > 1 and not args.ignore.isdigit():
        raise engine.PileupError(
            f"--ignore {args.ignore!r}: a code is one letter or a ChEBI number (5hmC is h)"
        )
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
        compat=args.modkit_compat,
        sampling_threads=args.sampling_threads,
        max_depth=(args.max_depth or 8000) if args.high_depth else None,
        modified_bases=args.modified_bases,
    )


def check_reads(in_bam: str, stats: engine.Stats, edge_filter: str | None = None) -> None:
    """Refuse a BAM whose reads were all skipped for their tags or for the edge filter (what
    modkit would turn into an empty bedMethyl); warn about the reads skipped otherwise."""
    if stats.used == 0 and stats.skipped:
        kind = max(stats.skipped, key=stats.skipped.get)
        name, reason = stats.examples[kind]
        if kind == "empty" and edge_filter:
            raise engine.PileupError(
                f"{in_bam}: --edge-filter {edge_filter} removed every call of every read "
                f"(read {name}: {reason} after it)"
            )
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


@dataclass(frozen=True)
class Outputs:
    """What a pileup writes: its bedMethyl (- for stdout; with phased, the folder of modkit
    0.6.1's three files, named with prefix), BGZF with a tabix index (bgzf), the listing of
    its mapped primary records (read_listing), and the pass thresholds it used (thresholds: a
    JSON record, numapore.pileup.thresholds.threshold_record)."""

    out_bed: str
    read_listing: str | None = None
    phased: bool = False
    bgzf: bool = False
    prefix: str | None = None
    thresholds: str | None = None

    def files(self) -> list[tuple[str, int | None]]:
        """The bedMethyl files to write, each with the haplotype it counts (None: all
        records): out_bed, or with phased the three files in the folder out_bed."""
        if not self.phased:
            return [(self.out_bed, None)]
        suffix = "bed.gz" if self.bgzf else "bedmethyl"
        prefix = f"{self.prefix}_" if self.prefix else ""
        return [
            (os.path.join(self.out_bed, f"{prefix}{name}.{suffix}"), haplotype)
            for name, haplotype in (("combined", None), ("hp1", 1), ("hp2", 2))
        ]


def run(args: argparse.Namespace, regions: list[str] | None = None) -> int:
    """Run the pileup of the parsed command line (of the regions only, when given: a
    scatter's share); 0, or 1 after one `numapore: ` line on stderr."""
    try:
        options = options_from_args(args)
    except engine.PileupError as err:
        engine.eprint(f"numapore: {err}")
        return 1
    outputs = Outputs(args.out_bed, args.read_listing, args.phased, args.bgzf, args.prefix)
    for option, path in (("OUT_BED", outputs.files()[0][0]), ("--read-listing", args.read_listing)):
        if path and os.path.isdir(path):
            engine.eprint(f"numapore: {path}: is a folder ({option} names a file)")
            return 1
    return run_options(args.in_bam, outputs, options, regions, args.quiet)


def run_options(
    in_bam: str,
    outputs: Outputs,
    options: engine.Options,
    regions: list[str] | None = None,
    quiet: bool = False,
) -> int:
    """Run the pileup of in_bam with the engine's options (of the regions only, when given);
    0, or 1 after one `numapore: ` line on stderr."""
    try:
        used = {}
        for out_bed, haplotype in outputs.files():
            result = write_pileup(
                in_bam, outputs, out_bed, replace(options, haplotype=haplotype), regions,
                haplotype is None,
            )  # fmt: skip
            used[haplotype] = result.stats.used
            if haplotype is None and outputs.thresholds:
                write_threshold_record(outputs.thresholds, result.caller, options)
        if outputs.phased and regions is None and used[None] and not used[1] + used[2]:
            remove_outputs(outputs)
            raise engine.PileupError(
                f"{in_bam}: --phased, but none of its {used[None]} read(s) carries an HP tag: "
                "hp1 and hp2 would be empty (tag them first: whatshap haplotag)"
            )
    except engine.PileupError as err:
        engine.eprint(f"numapore: {err}")
        return 1
    except OSError as err:
        engine.eprint(f"numapore: {err.filename or outputs.out_bed}: {err.strerror or err}")
        return 1
    except KeyboardInterrupt:
        engine.eprint("numapore: interrupted")
        return 1
    if not quiet:
        st = result.stats
        skipped = ", ".join(f"{n} {SKIP_REASONS.get(k, k)}" for k, n in sorted(st.skipped.items()))
        engine.eprint(
            f"numapore pileup: {st.used} read(s) used, "
            f"{sum(st.skipped.values())} skipped{' (' + skipped + ')' if skipped else ''}, "
            f"{st.rows} row(s) written"
        )
    return 0


def write_threshold_record(path: str, caller, options: engine.Options) -> None:
    """The pileup's pass thresholds as a JSON record (complete or absent), and as a line on
    stderr (the job's log)."""
    import json

    from numapore.pileup.thresholds import threshold_line, threshold_record

    record = threshold_record(caller, options)
    engine.eprint(f"numapore pileup: {threshold_line(record)}")
    tmp = part_file(path)
    with open(tmp, "w") as out:
        json.dump(record, out, indent=1)
        out.write("\n")
    os.replace(tmp, path)


def remove_outputs(outputs: Outputs) -> None:
    """Remove what a refused pileup wrote (its files and their indexes)."""
    for out_bed, _ in outputs.files():
        for path in (out_bed, out_bed + ".tbi"):
            if os.path.exists(path):
                os.unlink(path)


def write_pileup(
    in_bam: str, outputs: Outputs, out_bed: str, options, regions, check: bool
) -> engine.Result:
    """The one bedMethyl writer: the pileup's text to out_bed (- for stdout; BGZF with its
    tabix index for outputs.bgzf), written under a temporary name and renamed when complete;
    check: refuse a pileup whose reads were all skipped."""
    tmp = listing_tmp = None
    try:
        with ExitStack() as files:
            listing = None
            if outputs.read_listing:
                listing_tmp = part_file(outputs.read_listing)
                listing = files.enter_context(open(listing_tmp, "w", buffering=1 << 20))
                listing.write(engine.READ_LISTING_HEADER)
            if out_bed in ("-", "stdout"):
                out = sys.stdout
            else:
                tmp = part_file(out_bed)
                out = files.enter_context(open(tmp, "w", buffering=1 << 20))
            result = engine.pileup(in_bam, out, options, regions, listing)
        if check:
            check_reads(in_bam, result.stats, options.edge_filter)
        sys.stdout.flush()
        if outputs.bgzf:
            # imported here: its thread pool and pysam's tabix are a tenth of a pileup's memory
            from numapore.methylation.bgzf import write_indexed_bed

            compressed = part_file(out_bed)
            with open(tmp, "rb") as text:
                write_indexed_bed(compressed, iter(lambda: text.read(4 << 20), b""))
            os.replace(compressed + ".tbi", out_bed + ".tbi")
            os.replace(compressed, tmp)
        for part, final in ((tmp, out_bed), (listing_tmp, outputs.read_listing)):
            if part is not None:
                os.replace(part, final)
        tmp = listing_tmp = None
    finally:
        for part in (tmp, listing_tmp):
            if part is not None and os.path.exists(part):
                os.unlink(part)
    return result


def part_file(out: str) -> str:
    """A new empty file (mode 644) in out's folder, made if missing, to be renamed to out
    once complete."""
    # not tempfile (and not pathlib): their imports are a megabyte of a small pileup's memory
    folder, name = os.path.split(out)
    folder = folder or "."
    os.makedirs(folder, exist_ok=True)
    for n in itertools.count():
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.{n}.part")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
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
        prog=prog,
        description="modBAM to bedMethyl (modkit 0.6.1 pileup semantics; 0.4.4's with "
        "--modkit-compat 0.4)",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
