"""`numapore extract-calls`: modkit 0.6.1's `extract calls`, one row per base-modification call
of each read (the most probable state at each position the MM tags list), 23 columns with a
header line, reads in BAM order:

    numapore extract-calls IN.bam OUT.tsv [--reference FA] [--cpg | --motif SEQ OFFSET]
                           [--filter-threshold X | --no-filtering] [--pass-only] ...

OUT `-` or `stdout` writes to standard output. Primary records only (modkit's default: no
secondary, supplementary or duplicate records), then unmapped reads at the end (not with
--mapped-only, a motif or --region). -t N: N processes over 100 kb spans of the contigs, each
read in the span where it starts; the rows stay in BAM order at any N (0.6.1 writes each
interval's reads when its worker ends, so on a large BAM its order of intervals varies; its
sorted rows are these). Without a threshold option the pass threshold is estimated as `numapore
pileup` estimates it (the same sampled reads at any thread count: modkit's estimate can change
between runs, the pileup suite's README B), counting soft-clipped calls unless --mapped-only.
0.6.1 has no haplotype column or option; neither has this. Motifs without a hit on the
BAM's contigs in the reference are refused, as 0.6.1 refuses them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


from numapore.modbam import positions
from numapore.modbam.positions import (
    add_run_options,
    add_threshold_options,
    CommandError,
    contig_spans,
    FILTERED,
    ignored,
    motif_sites,
    non_negative,
    open_bam,
    open_fasta,
    ordered_map,
    output,
    parse_motif,
    PerProcess,
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
BOOL = ("false", "true")
NOT_PRIMARY = 0x100 | 0x400 | 0x800  # secondary, duplicate, supplementary (modkit skips them)


def padded(seq: str, size: int) -> str:
    """seq with `-` before and after, so that padded[pos : pos + size] is modkit's Kmer of
    size bases around pos (one fewer before for even sizes, `-` past either end)."""
    before = size // 2 - 1 if size % 2 == 0 else size // 2
    return "-" * before + seq + "-" * (size // 2)


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

    def __init__(self, args, caller):
        """The settings: args (the command line) and the threshold caller."""
        self.args, self.caller = args, caller
        self.files = PerProcess(args.in_bam, args.reference)
        self.seqs: dict[str, str] = {}
        self.motifs = motif_list(args)
        self.sites: dict[str, dict] = {}
        self.padded: dict[tuple[str, int], str] = {}
        labels = [f"{raw},{offset}" for raw, offset in self.motifs]
        self.labels = labels if args.motif else None  # --cpg alone: no motifs column
        self.compiled = CompiledRows(args, caller) if not self.motifs else None

    @property
    def fasta(self):
        """The FASTA (None without --reference)."""
        return self.files.fasta

    def __call__(self, span) -> str | bytes:
        """The rows of the reads of a span: (contig, start, end) the reads starting there,
        (contig, start, end, True) all reads overlapping it (--region), ("*",) the
        unplaced reads, None every read in file order (a BAM without index)."""
        if self.compiled is not None and span is not None and len(span) == 3:
            text = self.compiled(span, self.reference)
            if text is not None:
                return text
        bam, args = self.files.bam, self.args
        if span is None:
            fetched = bam.fetch(until_eof=True)
        elif span[0] == "*":
            fetched = bam.fetch("*")
        else:
            fetched = bam.fetch(span[0], span[1], span[2])
        skip_unmapped = args.mapped_only or args.region or self.motifs
        rows = []
        for rec in fetched:
            if rec.flag & NOT_PRIMARY or (rec.is_unmapped and skip_unmapped):
                continue
            if span is not None and len(span) == 3 and rec.reference_start < span[1]:
                continue  # done with the span where it starts
            rows += self.rows(rec)
        return "".join(rows)

    def reference(self, chrom: str) -> str | None:
        """The reference sequence of chrom (None: no FASTA or not in it)."""
        if self.fasta is None or chrom not in self.fasta.references:
            return None
        if chrom not in self.seqs:
            self.seqs[chrom] = self.fasta.fetch(chrom)
        return self.seqs[chrom]

    def motif_sites(self, chrom: str) -> dict:
        """The motif hits of chrom ((position, strand) to motif indices)."""
        if chrom not in self.sites:
            have = self.fasta is not None and chrom in self.fasta.references
            self.sites[chrom] = motif_sites(self.fasta, chrom, self.motifs, False) if have else {}
        return self.sites[chrom]

    def motif_column(self, sites, ref_pos: int, strand: bool) -> str:
        """With --motif, the last column: the motifs hitting the position (`;`-joined), `.`
        for none (and, as modkit, for reference position 0)."""
        if self.labels is None:
            return ""
        hits = sites.get((ref_pos, strand)) if sites and ref_pos > 0 else None
        return "\t" + (";".join(self.labels[i] for i in hits) if hits else ".")

    def rows(self, rec) -> list[str]:
        """The read's rows (none if modkit skips it), by read position (reversed for a
        reverse alignment, as modkit)."""
        from numapore.pileup.common import ReadError

        try:
            groups = read_calls(rec)
        except ReadError:
            return []
        read = ReadFacts(rec)
        read.ref_seq = self.reference(read.chrom) if read.mapped else None
        sites = self.motif_sites(read.chrom) if self.motifs and read.mapped else None
        calls = []
        for g in groups:
            calls += self.group_rows(read, g, sites)
        calls.sort(key=lambda c: c[0], reverse=bool(rec.is_reverse))
        return [text for _, text in calls]

    def group_rows(self, read: ReadFacts, g, sites) -> list[tuple[int, str]]:
        """(forward position, row) of one MM strand and base's calls."""
        best, best_p = g.argmax()
        if self.caller is None:
            fails = [False] * len(best)
        else:
            fails = (g.calls(self.caller, g.base) == FILTERED).tolist()
        mod_ref_strand = (g.strand == "-") ^ read.rec.is_reverse
        ref_mod_char = ("-" if mod_ref_strand else "+") if read.mapped else "."
        primary = g.base.translate(COMPLEMENT) if g.strand == "-" else g.base
        size = self.args.kmer_size
        only_mapped = self.motifs or self.args.mapped_only or self.args.region
        query_seq = padded(read.fwd_seq, size)
        ref_seq = self.padded_reference(read.chrom, size) if read.ref_seq is not None else None
        head = f"\t{read.chrom}\t{g.strand}\t{read.strand}\t{ref_mod_char}\t{read.alignment}\t"
        middle = f"\t{g.base}\t{primary}\t"
        codes = [*g.codes, "-"]  # index -1: canonical
        within_start, within_end = read.clip_start, read.length - read.clip_end
        quals = read.quals
        out = []
        rows = zip(g.forward.tolist(), g.reference.tolist(), best.tolist(), best_p.tolist(),
                   fails, g.inferred.tolist(), strict=True)  # fmt: skip
        for fpos, ref_pos, call, prob, fail, inferred in rows:
            if ref_pos < 0 and only_mapped:
                continue
            if sites is not None and (ref_pos, mod_ref_strand) not in sites:
                continue
            if fail and self.args.pass_only:
                continue
            query_kmer = query_seq[fpos : fpos + size]
            if g.strand == "-":
                query_kmer = query_kmer.translate(COMPLEMENT)[::-1]
            ref_kmer = ref_seq[ref_pos : ref_pos + size] if ref_seq and ref_pos >= 0 else "."
            within = read.mapped and within_start <= fpos < within_end
            qual = quals[fpos] if quals is not None else 255
            out.append((fpos, (
                f"{read.name}\t{fpos}\t{ref_pos}{head}{rust_f32(prob)}\t{codes[call]}\t{qual}\t"
                f"{ref_kmer}\t{query_kmer}{middle}{BOOL[fail]}\t{BOOL[inferred]}\t"
                f"{BOOL[within]}\t{read.flag}{self.motif_column(sites, ref_pos, mod_ref_strand)}\n"
            )))  # fmt: skip
        return out

    def padded_reference(self, chrom: str, size: int) -> str:
        """The contig's sequence padded for k-mers (padded())."""
        key = (chrom, size)
        if key not in self.padded:
            self.padded = {key: padded(self.reference(chrom), size)}  # one contig at a time
        return self.padded[key]


class CompiledRows:
    """The rows of a span's reads by the pileup core's C (extract_calls.c: the BAM read
    there, no pysam record or numpy per read), in each process its own reader; None where
    that C hands the span back (Python then writes the same bytes) or is not built."""

    def __init__(self, args, caller):
        """The settings (a BAM with a .bai; the thresholds of caller, None: no filtering)."""
        from numapore.pileup.common import Options, lib
        from numapore.pileup.inputs import bai_path
        from numapore.pileup.thresholds import new_core

        self.lib, self.args = lib, args
        self.index = bai_path(args.in_bam)
        self.core = new_core(Options(), caller) if lib is not None and self.index else None
        self.options = (
            (lib.XC_NO_FILTERING if caller is None else 0)
            | (lib.XC_PASS_ONLY if args.pass_only else 0)
            | (lib.XC_MAPPED_ONLY if args.mapped_only else 0)
        ) if self.core is not None else 0  # fmt: skip
        self._opened: tuple | None = None
        self.ref: tuple[str, bytes | None] | None = None

    def _reader(self):
        """This process's reader (pu_bam) and its contigs' indices."""
        from numapore.pileup.common import ffi
        from numapore.pileup.inputs import BamHeader

        if self._opened is None or self._opened[0] != os.getpid():
            bam = self.lib.pu_bam_open(self.args.in_bam.encode(), self.index.encode())
            bam = ffi.gc(bam, self.lib.pu_bam_close) if bam != ffi.NULL else None
            header = BamHeader.read(self.args.in_bam)
            names = header.references if header is not None else ()
            tids = {name: tid for tid, name in enumerate(names)}
            self._opened = (os.getpid(), bam, tids)
        return self._opened[1:]

    def __call__(self, span, reference) -> bytes | None:
        """The rows of the reads starting in span (contig, start, end); reference(chrom):
        the contig's sequence or None."""
        from numapore.pileup.common import ffi

        if self.core is None:
            return None
        bam, tids = self._reader()
        chrom, start, end = span
        if bam is None or chrom not in tids:
            return None
        if self.ref is None or self.ref[0] != chrom:
            seq = reference(chrom)
            self.ref = (chrom, seq.encode() if seq is not None else None)
        ref = self.ref[1]
        out = ffi.new("pu_xbuf *")
        try:
            rows = self.lib.pu_extract_span(
                self.core, bam, tids[chrom], start, end, chrom.encode(),
                ref if ref is not None else ffi.NULL, len(ref or b""), self.args.kmer_size,
                self.options, out,
            )  # fmt: skip
            if rows < 0:
                return None
            return ffi.unpack(out.text, out.len) if out.len else b""
        finally:
            self.lib.pu_xbuf_free(out)


class ReadFacts:
    """What every row of a read repeats: its name, contig, strand, clips, span, length."""

    def __init__(self, rec):
        """The facts of rec (forward sequence and qualities as sequenced)."""
        self.rec = rec
        self.name, self.flag = rec.query_name, rec.flag
        self.mapped = not rec.is_unmapped
        self.chrom = rec.reference_name if self.mapped else "."
        self.ref_seq = None
        self.fwd_seq = rec.query_sequence or ""
        self.quals = rec.query_qualities
        if rec.is_reverse:
            self.fwd_seq = self.fwd_seq.translate(COMPLEMENT)[::-1]
            self.quals = self.quals[::-1] if self.quals is not None else None
        self.length = len(self.fwd_seq)
        self.clip_start, self.clip_end = soft_clips(rec)
        self.strand = ("-" if rec.is_reverse else "+") if self.mapped else "."
        span = (rec.reference_start, rec.reference_end) if self.mapped else (-1, -1)
        self.alignment = f"{self.clip_start}\t{self.clip_end}\t{span[0]}\t{span[1]}\t{self.length}"


def motif_list(args) -> list[tuple[str, int]]:
    """--motif and --cpg as (motif, offset) pairs (--cpg's CG 0 last)."""
    motifs = []
    for raw, offset in args.motif or []:
        motif = parse_motif(raw, offset)
        motifs.append((motif.raw, motif.offset))
    if args.cpg and ("CG", 0) not in motifs:
        motifs.append(("CG", 0))
    return motifs


def any_hit(fasta, contigs, motifs: list[tuple[str, int]]) -> bool:
    """Whether a motif occurs (either strand) on a contig of the BAM in the FASTA."""
    from numapore.pileup.positions import make_motif

    patterns = [make_motif(raw, offset) for raw, offset in motifs]
    for chrom in set(contigs) & set(fasta.references):
        seq = fasta.fetch(chrom).upper()
        if any(m.forward.search(seq) or m.reverse.search(seq) for m in patterns):
            return True
    return False


def spans(bam, args) -> list:
    """What CallWriter does, in order: the region's reads; or each contig's spans, then the
    unplaced reads; or (no index) every read in file order."""
    from numapore.pileup.regions import parse_region

    if args.region:
        try:
            chrom, start, end = parse_region(args.region, bam)
        except Exception as err:  # noqa: BLE001 - the engine's message names the region
            raise CommandError(f"--region {args.region}: {err}") from None
        return [(chrom, start, end, True)]
    if not bam.has_index():
        return [None]
    unplaced = [] if args.mapped_only or motif_list(args) else [("*",)]
    # the C's rows: a quarter span each (a span's text is held three times on its way out)
    compiled = header_of(args) is not None and not motif_list(args)
    return contig_spans(bam, positions.SPAN // 4 if compiled else None) + unplaced


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


def header_of(args):
    """The BAM's header and index counts read without pysam where the C writes the rows (a
    .bai beside it, no --region), else None (pysam's reader then)."""
    from numapore.pileup.common import lib
    from numapore.pileup.inputs import BamHeader

    if lib is None or args.region or not os.path.isfile(args.in_bam):
        return None
    return BamHeader.read(args.in_bam)


def run(args) -> int:
    """extract calls with the parsed command line."""

    if args.kmer_size > 50 or args.kmer_size < 1:
        raise CommandError("--kmer-size must be between 1 and 50")
    if motif_list(args) and not args.reference:
        raise CommandError("--cpg and --motif need --reference")
    if args.no_filtering and (args.filter_threshold or args.mod_thresholds or args.pass_only):
        raise CommandError("--no-filtering conflicts with thresholds and --pass-only")
    bam = header_of(args) or open_bam(args.in_bam, indexed=bool(args.region))
    if args.reference:
        fasta = open_fasta(args.reference)  # refused here if bad (workers open their own)
        if motif_list(args) and not any_hit(fasta, bam.references, motif_list(args)):
            raise CommandError("no hit of the motifs on the BAM's contigs in the reference")
    caller = make_caller(args)
    writer = CallWriter(args, caller)
    work = spans(bam, args)
    with output(args.out_path, args.force) as out:
        if not args.no_headers:
            motifs = ("motifs",) if args.motif else ()
            out.write("\t".join(COLUMNS + motifs) + "\n")
        write_rows(out, ordered_map(writer, work, args.threads))
    return 0


def write_rows(out, chunks) -> None:
    """Write the spans' rows: text (Python's) or bytes (the C's, written as they are where
    the stream has a binary layer)."""
    binary = getattr(out, "buffer", None)
    for chunk in chunks:
        if isinstance(chunk, str):
            out.write(chunk)
        elif binary is None:
            out.write(chunk.decode())
        else:
            out.flush()
            binary.write(chunk)


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
    add_threshold_options(parser)
    parser.add_argument("-n", "--sample-num-reads", dest="num_reads_sampled",
                        type=non_negative, default=10_042)  # fmt: skip
    parser.add_argument("--sampling-interval-size", type=non_negative, default=1_000_000)
    parser.add_argument("--kmer-size", type=int, default=5)
    parser.add_argument("--no-headers", action="store_true")
    parser.add_argument("--force", action="store_true")
    add_run_options(parser)
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
