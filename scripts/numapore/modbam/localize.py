"""`numapore localize`: modkit 0.6.1's `localize`, the %-modification of a bgzipped, indexed
bedMethyl at each offset from the midpoints of BED features, summed over the features:

    numapore localize IN.bed.gz --regions FEATURES.bed --genome-sizes SIZES [-w 2000] [-o OUT]

Columns `mod_code offset n_valid n_mod percent_modified`, by code then offset; offsets with no
record are absent. Where 0.6.1 contradicts its documentation ("distance in base pairs from the
center of the genome features, negative values reflect towards the 5' of the genome") numapore
follows the documentation (the suite README's items 10-12):
- offset = record position - feature midpoint (0.6.1: anchor - position, where the anchor is
  the middle of its clipped window, one base 5' of the midpoint: the sign is inverted, the
  feature's own base is -1 and near a contig start the anchor moves);
- the window is the midpoint +-`--window` bases, clipped to the contig (0.6.1's reaches one
  base further 5' and one less 3');
- --min-coverage applies (0.6.1 ignores it);
- --stranded alone reads both strands' records and keeps the same or opposite strand's (0.6.1
  reads only the feature's strand first, so `opposite` keeps nothing). A `.` feature has no
  opposite strand: it keeps every record with `same`, none with `opposite`, as in 0.6.1.
Offsets stay in genome orientation for minus-strand features (not mirrored), as documented.
-t N: N processes over runs of the features (counts summed: the same output at any N).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from numapore.methylation.bedmethyl import code_key, f32, parse_line
from numapore.modbam.positions import (
    CommandError,
    Feature,
    ignored,
    need_file,
    non_negative,
    ordered_map,
    output,
    Parser,
    read_features,
    read_sizes,
    refuse,
    run_main,
    rust_f32,
)

HEADER = "mod_code\toffset\tn_valid\tn_mod\tpercent_modified\n"
FETCH_STRANDS = {"positive": "+", "negative": "-", "both": "."}
FEATURES_PER_WORKER = 64  # fewer features a worker: not worth its start


@dataclass
class Settings:
    """localize's options (modkit061: 0.6.1's numbers, for the conformance test)."""

    window: int = 2000
    stranded: str | None = None
    stranded_features: str | None = None
    min_coverage: int = 3
    modkit061: bool = False


def strand_overlaps(rule: str, strand: str) -> bool:
    """modkit's StrandRule::overlaps (`.` overlaps both)."""
    return rule == "." or strand == "." or rule == strand


def window_of(feature: Feature, settings: Settings, length: int) -> tuple[int, int, int]:
    """The feature's window [start, end) and the position offsets are counted from."""
    mid = feature.midpoint
    if settings.modkit061:
        start, end = max(0, mid - settings.window - 1), min(mid + settings.window, length)
        return start, end, (start + end) // 2
    return max(0, mid - settings.window), min(mid + settings.window + 1, length), mid


def feature_counts(tabix, feature: Feature, settings: Settings, length: int, counts: dict):
    """Add the feature's records to counts[(code, offset)] = [n_valid, n_mod]."""
    start, end, anchor = window_of(feature, settings, length)
    if end <= start:
        return
    if settings.stranded_features is not None:
        fetch = FETCH_STRANDS[settings.stranded_features]
    elif settings.stranded is not None and not settings.modkit061:
        fetch = "."
    else:
        fetch = feature.strand
    kept: dict[str, bool] = {}  # a record's strand: whether its records count
    codes: dict[str, str] = {}  # a record's name: its code
    least = float("-inf") if settings.modkit061 else settings.min_coverage
    for line in tabix.fetch(feature.chrom, start, end):
        row_start, name, strand, valid_cov, n_mod = record_of(line)
        keep = kept.get(strand)
        if keep is None:
            keep = kept[strand] = strand_kept(fetch, feature.strand, strand, settings.stranded)
        if not keep or valid_cov < least:
            continue
        offset = anchor - row_start if settings.modkit061 else row_start - anchor
        code = codes.get(name) or codes.setdefault(name, name.split(",")[0])
        cell = counts.setdefault((code, offset), [0, 0])
        cell[0] += valid_cov
        cell[1] += n_mod


def strand_kept(fetch: str, feature_strand: str, strand: str, stranded: str | None) -> bool:
    """Whether a record on strand counts: read with the fetch rule, and with --stranded on
    the same or the opposite strand of the feature."""
    if not strand_overlaps(fetch, strand):
        return False
    if stranded is None:
        return True
    return strand_overlaps(feature_strand, strand) == (stranded == "same")


def record_of(line: str) -> tuple:
    """(start, name, strand, N_valid, N_mod) of a bedMethyl line: parse_line's, whose
    BedMethylRow cost twice this split where every number is plain digits (the usual line)."""
    parts = line.split("\t")
    if len(parts) == 18 and (parts[1] + parts[9] + "".join(parts[11:])).isdecimal():
        return int(parts[1]), parts[3], parts[5], int(parts[9]), int(parts[11])
    try:
        row = parse_line(line)
    except ValueError as err:
        raise CommandError(f"bedMethyl: {err}") from None
    return row.start, row.name, row.strand, row.valid_cov, row.n_mod


def open_tabix(in_bedmethyl: str):
    """pysam's reader of the bgzipped bedMethyl; refused as one line where it cannot be."""
    import pysam

    need_file(in_bedmethyl, "a bgzipped bedMethyl")
    try:
        return pysam.TabixFile(in_bedmethyl)
    except (OSError, ValueError) as err:
        raise CommandError(
            f"{in_bedmethyl}: not a bgzipped bedMethyl with a tabix index ({err})"
        ) from None


class FeatureCounts:
    """The counts of some features, in this process or a forked worker (its own reader)."""

    def __init__(self, in_bedmethyl: str, sizes: dict[str, int], settings: Settings):
        """The bedMethyl, the contigs' sizes, the settings."""
        self.in_bedmethyl, self.sizes, self.settings = in_bedmethyl, sizes, settings

    def __call__(self, features: list[Feature]) -> dict:
        """counts[(code, offset)] = [n_valid, n_mod] over the features."""
        counts: dict = {}
        with open_tabix(self.in_bedmethyl) as tabix:
            for feature in features:
                feature_counts(tabix, feature, self.settings, self.sizes[feature.chrom], counts)
        return counts


def localize(in_bedmethyl: str, features: list[Feature], sizes: dict[str, int],
             settings: Settings, threads: int = 1) -> str:  # fmt: skip
    """The table's text (header line first); threads: processes over runs of the features
    (their integer counts summed: the same text at any number)."""
    with open_tabix(in_bedmethyl) as tabix:
        kept = [f for f in features if f.chrom in sizes and f.chrom in tabix.contigs]
    if not kept:
        raise CommandError("no feature is on a contig of both the sizes and the bedMethyl")
    parts = max(1, min(threads, len(kept) // FEATURES_PER_WORKER))
    runs = [kept[i * len(kept) // parts : (i + 1) * len(kept) // parts] for i in range(parts)]
    counts: dict = {}
    for part in ordered_map(FeatureCounts(in_bedmethyl, sizes, settings), runs, parts):
        for key, (n_valid, n_mod) in part.items():
            cell = counts.setdefault(key, [0, 0])
            cell[0] += n_valid
            cell[1] += n_mod
    lines = [HEADER]
    for code, offset in sorted(counts, key=lambda k: (code_key(k[0]), k[1])):
        n_valid, n_mod = counts[code, offset]
        percent = rust_f32(f32(f32(n_mod / n_valid) * 100.0)) if n_valid else "NaN"
        lines.append(f"{code}\t{offset}\t{n_valid}\t{n_mod}\t{percent}\n")
    return "".join(lines)


def make_parser(prog: str) -> Parser:
    """localize's command line (modkit's options)."""
    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("in_bedmethyl", help="bgzipped bedMethyl with a .tbi beside it")
    parser.add_argument("--regions", required=True, metavar="BED", help="the features")
    parser.add_argument("-w", "--window", type=non_negative, default=2000,
                        help="bases each side of a feature's midpoint (default 2000)")  # fmt: skip
    parser.add_argument("-s", "--stranded", choices=["same", "opposite"])
    parser.add_argument("--stranded-features", choices=list(FETCH_STRANDS))
    parser.add_argument("--min-coverage", type=non_negative, default=3)
    parser.add_argument("-r", "--genome-sizes", required=True, metavar="SIZES")
    parser.add_argument("-o", "--out-file", metavar="TSV", help="default stdout")
    parser.add_argument("-f", "--force", action="store_true")
    parser.add_argument("-t", "--threads", type=non_negative, default=4,
                        help="processes over the features (the output does not depend on "
                        "them)")  # fmt: skip
    ignored(parser, "--io-threads", type=non_negative)
    ignored(parser, "--batch-size", type=non_negative)
    ignored(parser, "--log-filepath", "--log")
    refuse(parser, "--chart")
    refuse(parser, "--name")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "numapore localize") -> int:
    """Run `numapore localize`."""

    def body(args) -> int:
        settings = Settings(args.window, args.stranded, args.stranded_features,
                            args.min_coverage)  # fmt: skip
        sizes = read_sizes(args.genome_sizes)
        features = read_features(args.regions)
        text = localize(args.in_bedmethyl, features, sizes, settings, args.threads)
        with output(args.out_file, args.force) as out:
            out.write(text)
        return 0

    return run_main(make_parser(prog), argv, body)


if __name__ == "__main__":
    sys.exit(main())
