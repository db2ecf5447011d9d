"""`numapore extract-calls`: modkit 0.6.1's `extract calls`, one row per base-modification call
of each read (the most probable state at each position the MM tags list), 23 columns with a
header line, reads in BAM order:

    numapore extract-calls IN.bam OUT.tsv [--reference FA] [--cpg | --motif SEQ OFFSET]
                           [--filter-threshold X | --no-filtering] [--pass-only] ...

OUT `-` or `stdout` writes to standard output. Primary records only (modkit's default), then
unmapped reads at the end (not with --mapped-only, a motif or --region). Without a threshold
option the pass threshold is estimated as `numapore pileup` estimates it (the same sampled
reads at any thread count), counting soft-clipped calls unless --mapped-only. 0.6.1 has no
haplotype column or option; neither has this.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from numapore.modbam.positions import (
    CommandError,
    ignored,
    motif_sites,
    need_file,
    non_negative,
    open_output,
    Parser,
    read_calls,
    refuse,
    run_main,
    rust_f32,
)

COLUMNS = (
    "read_id", "forward_read_position", "ref_position", "chrom", "mod_strand", "ref_strand",
    "ref_mod_strand", "fw_soft_clipped_start", "fw_soft_clipped_end", "alignment_start",
    "alignment_end", "read_length", "call_prob", "call_code", "base_qual", "ref_kmer",
    "query_kmer", "canonical_base", "modified_primary_base", "fail", "inferred",
    "within_alignment", "flag",
)  # fmt: skip
COMPLEMENT = str.maketrans("ACGTNacgtn", "TGCANtgcan")
NOT_PRIMARY = 0x100 | 0x800


def kmer(seq: str, pos: int, size: int) -> str:
    """modkit's Kmer: size bases around pos (one fewer before for even sizes), `-` past
    either end."""
    before = size // 2 - 1 if size % 2 == 0 else size // 2
    out = []
    for i in range(pos - before, pos + size // 2 + 1):
        out.append(seq[i] if 0 <= i < len(seq) else "-")
    return "".join(out)


def soft_clips(rec) -> tuple[int, int]:
    """Leading and trailing soft clips, in forward read order."""
    cig = rec.cigartuples or []
    if rec.is_unmapped or not cig:
        return 0, 0
    start = end = 0
    for op, n in cig:
        if op != 4:
            break
        start += n
    for op, n in reversed(cig):
        if op != 4:
            break
        end += n
    return (end, start) if rec.is_reverse else (start, end)


class CallWriter:
    """extract calls' rows of each read."""

    def __init__(self, args, caller, fasta, chrom_seqs: dict):
        """The settings: args (the command line), the threshold caller, the FASTA or None."""
        self.args, self.caller, self.fasta = args, caller, fasta
        self.seqs = chrom_seqs
        self.motifs = motif_list(args)
        self.sites: dict[str, set] = {}

    def reference(self, chrom: str) -> str | None:
        """The reference sequence of chrom (None: no FASTA or not in it)."""
        if self.fasta is None or chrom not in self.fasta.references:
            return None
        if chrom not in self.seqs:
            self.seqs[chrom] = self.fasta.fetch(chrom)
        return self.seqs[chrom]

    def motif_sites(self, chrom: str) -> set:
        """The motif positions of chrom ((position, strand) pairs)."""
        if chrom not in self.sites:
            have = self.fasta is not None and chrom in self.fasta.references
            self.sites[chrom] = (
                motif_sites(self.fasta, chrom, self.motifs, False) if have else set()
            )
        return self.sites[chrom]

    def rows(self, rec) -> list[str]:
        """The read's rows (none if modkit skips it)."""
        from numapore.pileup.common import ReadError

        try:
            groups = read_calls(rec)
        except ReadError:
            return []
        mapped = not rec.is_unmapped
        chrom = rec.reference_name if mapped else "."
        ref_seq = self.reference(chrom) if mapped else None
        fwd_seq = rec.query_sequence or ""
        quals = rec.query_qualities
        if rec.is_reverse:
            fwd_seq = fwd_seq.translate(COMPLEMENT)[::-1]
            quals = quals[::-1] if quals is not None else None
        n = len(fwd_seq)
        clip_start, clip_end = soft_clips(rec)
        strand = ("-" if rec.is_reverse else "+") if mapped else "."
        a_start = rec.reference_start if mapped else -1
        a_end = rec.reference_end if mapped else -1
        tail = f"\t{clip_start}\t{clip_end}\t{a_start}\t{a_end}\t{n}\t"
        size = self.args.kmer_size
        sites = self.motif_sites(chrom) if self.motifs and mapped else None
        calls = []
        for g in groups:
            best, best_p = g.argmax()
            fails = ~g.passes(self.caller) if self.caller is not None else np.zeros(len(best), bool)
            mod_ref_strand = (g.strand == "-") ^ rec.is_reverse
            primary = g.base.translate(COMPLEMENT) if g.strand == "-" else g.base
            for i, fpos in enumerate(g.forward.tolist()):
                ref_pos = int(g.reference[i])
                if sites is not None and (
                    ref_pos < 0 or (ref_pos, int(mod_ref_strand)) not in sites
                ):
                    continue
                if ref_pos < 0 and (self.motifs or self.args.mapped_only or self.args.region):
                    continue
                fail = bool(fails[i])
                if fail and self.args.pass_only:
                    continue
                code = g.codes[best[i]] if best[i] >= 0 else "-"
                query_kmer = kmer(fwd_seq, fpos, size)
                if g.strand == "-":
                    query_kmer = query_kmer.translate(COMPLEMENT)[::-1]
                ref_kmer = (
                    kmer(ref_seq, ref_pos, size) if ref_seq is not None and ref_pos >= 0 else "."
                )
                within = mapped and clip_start <= fpos < n - clip_end
                qual = quals[fpos] if quals is not None else 255
                ref_strand_char = ("-" if mod_ref_strand else "+") if mapped else "."
                calls.append(
                    (
                        fpos,
                        f"{rec.query_name}\t{fpos}\t{ref_pos}\t{chrom}\t{g.strand}\t{strand}\t"
                        f"{ref_strand_char}{tail}{rust_f32(best_p[i])}\t{code}\t{qual}\t{ref_kmer}\t"
                        f"{query_kmer}\t{g.base}\t{primary}\t{str(fail).lower()}\t"
                        f"{str(bool(g.inferred[i])).lower()}\t{str(within).lower()}\t{rec.flag}\n",
                    )
                )
        calls.sort(key=lambda c: c[0], reverse=bool(rec.is_reverse))
        return [text for _, text in calls]


def motif_list(args) -> list[tuple[str, int]]:
    """--motif and --cpg as (motif, offset) pairs."""
    motifs = []
    for raw, offset in args.motif or []:
        try:
            motifs.append((raw.upper(), int(offset)))
        except ValueError:
            raise CommandError(f"--motif {raw} {offset}: the offset is not a number") from None
    if args.cpg and ("CG", 0) not in motifs:
        motifs.append(("CG", 0))
    return motifs


def records(bam, args):
    """The records to report: primary ones in BAM order (the region's with --region), then
    the unmapped ones."""
    from numapore.pileup.regions import parse_region

    if args.region:
        try:
            chrom, start, end = parse_region(args.region, bam)
        except Exception as err:  # noqa: BLE001 - the engine's message names the region
            raise CommandError(f"--region {args.region}: {err}") from None
        fetched = bam.fetch(chrom, start, end)
    else:
        fetched = bam.fetch(until_eof=True)
    for rec in fetched:
        if rec.flag & NOT_PRIMARY:
            continue
        if rec.is_unmapped and (args.mapped_only or args.region or motif_list(args)):
            continue
        yield rec


def make_caller(args):
    """The threshold caller (None: --no-filtering, every call passes)."""
    from numapore.pileup.common import Options
    from numapore.pileup import thresholds

    if args.no_filtering:
        return None
    options = Options(
        filter_threshold=args.filter_threshold, mod_thresholds=args.mod_thresholds,
        filter_percentile=args.filter_percentile, num_reads=args.num_reads_sampled,
        sampling_interval_size=args.sampling_interval_size, region=args.region,
        include_unmapped=not (args.mapped_only or motif_list(args)),
    )  # fmt: skip
    return thresholds.make_caller(args.in_bam, options, None)


def open_bam(path: str):
    """The BAM (an index needed only for --region)."""
    import pysam

    need_file(path, "a BAM")
    try:
        return pysam.AlignmentFile(path, "rb", check_sq=False)
    except (OSError, ValueError) as err:
        raise CommandError(f"{path}: cannot read as BAM ({err})") from None


def run(args) -> int:
    """extract calls with the parsed command line."""
    import pysam

    if args.kmer_size > 50 or args.kmer_size < 1:
        raise CommandError("--kmer-size must be between 1 and 50")
    if motif_list(args) and not args.reference:
        raise CommandError("--cpg and --motif need --reference")
    if args.no_filtering and (args.filter_threshold or args.mod_thresholds or args.pass_only):
        raise CommandError("--no-filtering conflicts with thresholds and --pass-only")
    bam = open_bam(args.in_bam)
    if args.region and not bam.has_index():
        raise CommandError(f"{args.in_bam}: --region needs a BAM index (samtools index)")
    fasta = None
    if args.reference:
        need_file(args.reference, "a FASTA")
        try:
            fasta = pysam.FastaFile(args.reference)
        except (OSError, ValueError) as err:
            raise CommandError(f"{args.reference}: cannot read as FASTA ({err})") from None
    caller = make_caller(args)
    writer = CallWriter(args, caller, fasta, {})
    out = open_output(args.out_path, args.force)
    try:
        if not args.no_headers:
            out.write("\t".join(COLUMNS) + "\n")
        for rec in records(bam, args):
            out.writelines(writer.rows(rec))
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def make_parser(prog: str) -> Parser:
    """extract calls' command line (modkit's options)."""
    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("in_bam", help="modBAM (MM/ML tags)")
    parser.add_argument("out_path", help="output TSV, - or stdout for standard output")
    parser.add_argument("--reference", "--ref", metavar="FASTA")
    parser.add_argument("--cpg", action="store_true")
    parser.add_argument("--motif", nargs=2, action="append", metavar=("SEQ", "OFFSET"))
    parser.add_argument("--region", help="chrom or chrom:start-end (needs an index)")
    parser.add_argument("--mapped-only", "--mapped", dest="mapped_only", action="store_true")
    parser.add_argument("--pass-only", "--pass", dest="pass_only", action="store_true")
    parser.add_argument("--filter-threshold", "--pass-threshold", action="append",
                        metavar="X")  # fmt: skip
    parser.add_argument("--mod-threshold", "--mod-thresholds", dest="mod_thresholds",
                        action="append", metavar="CODE:X")  # fmt: skip
    parser.add_argument("--no-filtering", action="store_true")
    parser.add_argument("-p", "--filter-percentile", type=float, default=0.1)
    parser.add_argument("-n", "--sample-num-reads", dest="num_reads_sampled",
                        type=non_negative, default=10_042)  # fmt: skip
    parser.add_argument("--sampling-interval-size", type=non_negative, default=1_000_000)
    parser.add_argument("--kmer-size", type=int, default=5)
    parser.add_argument("--no-headers", action="store_true")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("-t", "--threads", type=non_negative, default=4, help="accepted")
    ignored(parser, "--suppress-progress", flag=True)
    ignored(parser, "--log-filepath", "--log")
    ignored(parser, "-q", "--queue-size", type=non_negative)
    ignored(parser, "--ignore-index", flag=True)
    for option in ("--bgzf", "--allow-non-primary", "--non-primary", "--ignore-implicit",
                   "--invert-edge-filter", "-k", "--mask"):  # fmt: skip
        refuse(parser, option, flag=True)
    for option in ("--out-threads", "--num-reads", "--include-bed", "--include-positions",
                   "--exclude-bed", "--exclude", "-v", "--edge-filter", "--ignore",
                   "-f", "--sampling-frac", "--seed"):  # fmt: skip
        refuse(parser, option)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "numapore extract-calls") -> int:
    """Run `numapore extract-calls`."""
    return run_main(make_parser(prog), argv, run)


if __name__ == "__main__":
    sys.exit(main())
