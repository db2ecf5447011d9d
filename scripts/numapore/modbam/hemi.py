"""`numapore pileup-hemi`: modkit 0.6.1's `pileup-hemi`, the two strands' calls of one molecule
(a duplex read) paired at each motif position, counted per pattern:

    numapore pileup-hemi IN.bam --ref FA (--cpg | --motif SEQ OFFSET) [-o OUT.bed] ...

At each position of a palindromic motif's hits (CG 0: the C and the G, as modkit's mask), a
read's pattern is its call at that position on its own strand and its call on the opposite
strand's motif base (a duplex read reports it as e.g. `G-m` on the G): `first,second,primary
base` in 5'->3' order, `-` canonical. One row per pattern seen at a position, 18 columns as
pileup's bedMethyl (strand `.`): N_valid = pairs that pass, N_mod = pairs of this pattern,
N_canonical = `-,-` pairs, N_other = pairs of another pattern, N_delete, N_fail (either call
under its threshold), N_diff (pairs at another read base), N_nocall (no pair). Simplex reads
have no pairs: no rows. QC failures, duplicates, secondary and supplementary records are not
counted (as htslib's pileup in modkit). -t N: N processes over 100 kb spans of the contigs, the
same bytes at any N.

A contig of the BAM with mapped reads that the FASTA lacks is refused (0.6.1 logs an error
for it over and over and never finishes: the suite README's item 9).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

import numpy as np

from numapore.methylation.bedmethyl import code_key, percent_modified
from numapore.modbam import positions as shared
from numapore.modbam.positions import CommandError, FILTERED, Parser

COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A"}
SKIP_FLAGS = 0x4 | 0x100 | 0x200 | 0x400 | 0x800  # unmapped, secondary, QC fail, dup, suppl.
BASES = "ACGT"


NO_CALL = -3  # a label array's value where the read has no call (calls(): FILTERED, -1, codes)


class ContigCounts:
    """The motif positions of a contig (sorted) and, at each, the deletions and per read base
    the failed pairs, the no-calls and the pairs by pattern."""

    def __init__(self, starts: np.ndarray):
        """Nothing counted at the positions starts."""
        self.starts = starts
        self.deletes = np.zeros(len(starts), dtype=np.int64)
        self.nocall = np.zeros((4, len(starts)), dtype=np.int64)
        self.fail = np.zeros((4, len(starts)), dtype=np.int64)
        self.patterns: dict[int, dict] = {}  # position index: {(base, first, second): n}

    def rows(self, chrom: str) -> list[str]:
        """The rows of the positions with pairs: by position, base, then pattern (canonical
        first, then the codes' order)."""
        out = []
        for i in sorted(self.patterns):
            pos, found = int(self.starts[i]), self.patterns[i]
            for b, base in enumerate(BASES):
                patterns = {k[1:]: n for k, n in found.items() if k[0] == b}
                if not patterns:
                    continue
                total = sum(patterns.values())
                n_diff = sum(n for k, n in found.items() if k[0] != b)
                n_canonical = patterns.get(("-", "-"), 0)
                for pattern in sorted(patterns, key=lambda p: tuple(map(pattern_key, p))):
                    n = patterns[pattern]
                    out.append(
                        f"{chrom}\t{pos}\t{pos + 1}\t{pattern[0]},{pattern[1]},{base}\t{total}\t"
                        f".\t{pos}\t{pos + 1}\t255,0,0\t{total}\t{percent_modified(n, total)}\t"
                        f"{n}\t{n_canonical}\t{total - n}\t{self.deletes[i]}\t{self.fail[b, i]}\t"
                        f"{n_diff}\t{self.nocall[b, i]}\n"
                    )
        return out


def pattern_key(code: str) -> tuple:
    """modkit's order of a pattern's codes: canonical first, then the codes' order."""
    return (0,) if code == "-" else (1, *code_key(code))


def read_pairs(rec, caller, offset: int, counts: ContigCounts) -> None:
    """Add the read's pair (or failure, or no call) at each motif position it covers: its
    call there on its own strand and its opposite strand's call at position + offset."""
    from numapore.pileup.common import ReadError
    from numapore.pileup.tags import alignment_arrays, BASE_LUT

    ref_start = rec.reference_start
    lo, hi = np.searchsorted(counts.starts, [ref_start, rec.reference_end])
    if lo == hi:
        return
    q, r, deleted, _ = alignment_arrays(rec)
    try:
        groups = shared.read_calls(rec, (q, r))
    except ReadError:
        return
    span = rec.reference_end - ref_start + offset + 1
    labels, codes = {}, {}
    for g in groups:
        threshold_base = COMPLEMENT[g.base] if g.strand == "-" else g.base
        dense = np.full(span, NO_CALL, dtype=np.int64)
        aligned = g.reference >= 0
        dense[g.reference[aligned] - ref_start] = g.calls(caller, threshold_base)[aligned]
        labels[g.strand, g.base], codes[g.strand, g.base] = dense, g.codes
    query_at = np.full(span, -1, dtype=np.int64)
    query_at[r - ref_start] = q
    at = counts.starts[lo:hi] - ref_start
    is_deleted = np.zeros(span, dtype=bool)
    is_deleted[deleted - ref_start] = True
    counts.deletes[lo:hi] += is_deleted[at]
    qpos = query_at[at]
    seq = np.frombuffer(rec.query_sequence.encode(), dtype=np.uint8)
    read_base = np.where(qpos >= 0, BASE_LUT[seq[np.maximum(qpos, 0)]], 4)
    for b in np.unique(read_base[read_base < 4]).tolist():
        base = BASES[b]
        here = np.flatnonzero(read_base == b)
        own, other = ("+", base), ("-", COMPLEMENT[base])
        first_key, second_key = (other, own) if rec.is_reverse else (own, other)
        none = np.full(len(here), NO_CALL)
        first = labels[first_key][at[here]] if first_key in labels else none
        second = labels[second_key][at[here] + offset] if second_key in labels else none
        nocall = (first == NO_CALL) | (second == NO_CALL)
        counts.nocall[b, lo + here] += nocall
        fail = ~nocall & ((first == FILTERED) | (second == FILTERED))
        counts.fail[b, lo + here] += fail
        for k in np.flatnonzero(~nocall & ~fail).tolist():
            pair = (b, label(codes[first_key], first[k]), label(codes[second_key], second[k]))
            found = counts.patterns.setdefault(lo + here[k], {})
            found[pair] = found.get(pair, 0) + 1


def label(codes: list[str], call: int) -> str:
    """A call's pattern letter: `-` canonical, else its code."""
    return "-" if call < 0 else codes[call]


def make_caller(args):
    """The threshold caller (given, none with --no-filtering, or estimated as numapore
    pileup estimates it)."""
    from numapore.pileup import thresholds
    from numapore.pileup.common import Options

    options = Options(
        filter_threshold=args.filter_threshold, mod_thresholds=args.mod_thresholds,
        no_filtering=args.no_filtering, filter_percentile=args.filter_percentile,
        num_reads=args.num_reads, sampling_frac=args.sampling_frac, seed=args.seed,
        region=args.region, sample_region=args.sample_region,
        sampling_interval_size=args.sampling_interval_size,
    )  # fmt: skip
    return thresholds.make_caller(args.in_bam, options, None)


def open_inputs(args):
    """The BAM (indexed), the FASTA and the motif; refused as one line where bad."""
    bam = shared.open_bam(args.in_bam, indexed=True)
    fasta = shared.open_fasta(args.reference)
    if args.cpg == bool(args.motif):
        raise CommandError("give one of --cpg and --motif SEQ OFFSET")
    motif = shared.parse_motif(*(("CG", "0") if args.cpg else args.motif))
    if not motif.palindrome:
        raise CommandError(f"--motif {motif.raw}: not palindromic (pileup-hemi needs both strands)")
    return bam, fasta, motif


def spans(bam, fasta, region: str | None) -> list[tuple[str, int, int]]:
    """The region, or the contigs with mapped reads in pieces (positions.SPAN), each in the
    FASTA."""
    from numapore.pileup.regions import parse_region

    if region:
        try:
            targets = [parse_region(region, bam)]
        except Exception as err:  # noqa: BLE001 - the engine's message names the region
            raise CommandError(f"--region {region}: {err}") from None
    else:
        targets = shared.contig_spans(bam)
    for chrom in {t[0] for t in targets}:
        if chrom not in fasta.references:
            raise CommandError(f"{fasta.filename.decode()}: no contig {chrom} (reads map to it)")
    return targets


class SpanCounter(shared.PerProcess):
    """pileup-hemi's rows of a span (contig, start, end), in this process or a forked
    worker (each finds its span's motif positions: the main process holds no contig's)."""

    def __init__(self, args, caller, motif):
        """The BAM and FASTA, the threshold caller, the motif (its offset to its - strand
        base) and --mask."""
        super().__init__(args.in_bam, args.reference)
        self.caller, self.motif, self.mask = caller, motif, args.mask
        self.offset = motif.reverse_offset - motif.offset

    def __call__(self, span) -> str:
        """The span's rows. Only reads with calls on both strands (an MM group of the -
        strand) make pairs, so they are counted first; the others (simplex reads) add only
        deletions and no-calls, read only where a pair was seen."""
        chrom, start, end = span
        # both strands' hits (the mask modkit's pileup walks)
        starts = motif_positions(self.fasta, chrom, start, end, self.motif, self.mask)
        counts = ContigCounts(starts)
        if not len(starts):
            return ""
        simplex = 0
        for rec in self.bam.fetch(chrom, start, end):
            if not rec.flag & SKIP_FLAGS and rec.query_sequence:
                if both_strands(rec):
                    read_pairs(rec, self.caller, self.offset, counts)
                else:
                    simplex += 1
        if simplex and counts.patterns:
            seen = starts[sorted(counts.patterns)]
            for rec in self.bam.fetch(chrom, start, end):
                if rec.flag & SKIP_FLAGS or not rec.query_sequence or both_strands(rec):
                    continue
                lo, hi = np.searchsorted(seen, [rec.reference_start, rec.reference_end])
                if lo < hi:
                    read_pairs(rec, self.caller, self.offset, counts)
        return "".join(counts.rows(chrom))


MINUS_GROUP = re.compile(r"(?:^|;)\s*[ACGTUN]-")


def both_strands(rec) -> bool:
    """Whether the read's MM tag has a group of the - strand (a duplex read's)."""
    for tag in ("MM", "Mm"):
        if rec.has_tag(tag):
            mm = rec.get_tag(tag)
            return isinstance(mm, str) and MINUS_GROUP.search(mm) is not None
    return False


def motif_positions(fasta, chrom: str, start: int, end: int, motif, mask: bool) -> np.ndarray:
    """The positions in [start, end) of chrom of a palindromic motif's hits on both strands,
    sorted (those of positions.motif_sites over the contig: the hits of a fixed-length motif
    depend on its bases only, read here with a motif's length either side)."""
    reach = motif.length
    at = max(0, start - reach)
    seq = fasta.fetch(chrom, at, min(end + reach, fasta.get_reference_length(chrom)))
    if not mask:
        seq = seq.upper()
    starts = np.fromiter((m.start() for m in motif.forward.finditer(seq)), dtype=np.int64) + at
    found = np.unique(np.concatenate([starts + motif.offset, starts + motif.reverse_offset]))
    return found[(found >= start) & (found < end)]


def run(args) -> int:
    """pileup-hemi with the parsed command line."""
    bam, fasta, motif = open_inputs(args)
    targets = spans(bam, fasta, args.region)
    caller = make_caller(args)
    counter = SpanCounter(args, caller, motif)
    with shared.output(args.out_bed, True) as out:
        out.writelines(shared.ordered_map(counter, targets, args.threads))
    return 0


def make_parser(prog: str) -> Parser:
    """pileup-hemi's command line (modkit's options)."""
    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("in_bam", help="coordinate-sorted, indexed modBAM")
    parser.add_argument("-o", "--out-bed", metavar="BED", help="default stdout")
    parser.add_argument("--cpg", action="store_true")
    parser.add_argument("--motif", nargs=2, metavar=("SEQ", "OFFSET"))
    parser.add_argument("-r", "--ref", "--reference", dest="reference", required=True)
    parser.add_argument("--region", help="chrom or chrom:start-end")
    parser.add_argument("-k", "--mask", action="store_true", help="soft-masked bases skipped")
    shared.add_threshold_options(parser)
    parser.add_argument("-n", "--num-reads", type=shared.non_negative, default=10_042)
    parser.add_argument("-f", "--sampling-frac", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--sample-region")
    parser.add_argument("--sampling-interval-size", type=shared.non_negative, default=1_000_000)
    shared.add_run_options(parser)
    shared.ignored(parser, "--only-tabs", flag=True)
    shared.ignored(parser, "-i", "--interval-size", type=shared.non_negative)
    shared.ignored(parser, "--queue-size", type=shared.non_negative)
    shared.ignored(parser, "--chunk-size", type=shared.non_negative)
    for option in ("--include-unmapped", "--force-allow-implicit", "--combine-mods",
                   "--invert-edge-filter", "--mixed-delimiters"):  # fmt: skip
        shared.refuse(parser, option, flag=True)
    for option in ("--max-depth", "--include-bed", "--include-positions", "--ignore",
                   "--edge-filter"):  # fmt: skip
        shared.refuse(parser, option)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "numapore pileup-hemi") -> int:
    """Run `numapore pileup-hemi`."""
    return shared.run_main(make_parser(prog), argv, run)


if __name__ == "__main__":
    sys.exit(main())
