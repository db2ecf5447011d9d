"""`numapore entropy`: modkit 0.6.1's `entropy`, the methylation entropy of windows of
`--num-positions` motif positions within `--window-size` bases, from the reads that span each
window (a read's calls as a pattern, filtered calls as wildcards):

    numapore entropy --in-bam IN.bam --ref FA (--cpg | --motif SEQ OFFSET | --base B)
                     -o OUT.bedgraph [--regions BED -o DIR] ...

Windows: `chrom start end entropy strand num_reads` (f32 entropy). With --regions, OUT is a
folder with windows.bedgraph (the windows of each region in turn) and regions.bed (per region
and strand: the span of its windows, mean, median, min and max entropy, mean, min and max
reads, successful and failed windows). The entropy's float sums run in pattern order (0.6.1
sums in hash order, so its last digit changes between runs: the suite README).

Where 0.6.1 contradicts its documentation numapore follows the documentation (README items 6
and 8): --no-filtering keeps every call (0.6.1 still estimates and applies a threshold); a
region's median entropy is the median of its windows' (0.6.1 interpolates them unsorted); a
region with one successful window gets its row (0.6.1 writes none). The 6 columns (0.6.1's,
not the docs' 5) and the regions' span and `+` strand for combined strands are 0.6.1's format.
"""

from __future__ import annotations

import bisect
import math
import os
import sys
from collections.abc import Iterator, Sequence
from itertools import islice
from dataclasses import dataclass, field

import numpy as np

from numapore.methylation.bedmethyl import code_key, f32
from numapore.modbam import positions as shared
from numapore.modbam.positions import CommandError, FILTERED, Parser, rust_f32

COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A"}
HEADER = "#chrom\tstart\tend\tentropy\tstrand\tnum_reads\n"
REGIONS_HEADER = (
    "chrom\tstart\tend\tregion_name\tmean_entropy\tstrand\tmedian_entropy\tmin_entropy\t"
    "max_entropy\tmean_num_reads\tmin_num_reads\tmax_num_reads\tsuccessful_window_count\t"
    "failed_window_count\n"
)
SKIP_FLAGS = 0x4 | 0x100 | 0x400 | 0x800  # unmapped, secondary, duplicate, supplementary
WINDOW_BATCH = 4096  # windows filled with their reads at a time


@dataclass
class Window:
    """A window: per strand (+ combined strands: + only) its (base, position) keys in
    position order (None: no window on that strand), the keys a - strand read is read at
    (combined strands), and the reads' patterns."""

    keys: dict  # strand -> list of (base, position) or None
    neg_keys: list | None = None  # combined strands: the - strand partners of keys["+"]
    patterns: dict = field(default_factory=lambda: {"+": [], "-": []})

    def span(self, strand: str) -> tuple[int, int] | None:
        """[first, last] position of the strand's window (combined: both strands')."""
        keys = self.keys.get(strand)
        if keys is None:
            return None
        positions = [p for _, p in keys] + [p for _, p in self.neg_keys or []]
        low, high = min(positions), max(positions)
        return (low, high) if high > low else (low, low + 1)

    @property
    def leftmost(self) -> int:
        """The window's first position on either strand."""
        return min(s[0] for s in map(self.span, "+-") if s is not None)

    @property
    def rightmost(self) -> int:
        """The window's last position on either strand."""
        return max(s[1] for s in map(self.span, "+-") if s is not None)


def motif_hits_at(seq: str, motifs, start: int, stop: int, adj: int, origin: int) -> list:
    """modkit's hits in seq[start:stop] (searched from start - adj, positions before start
    dropped): (genome position, strand, base, - strand partner or None), by position."""
    from numapore.pileup.positions import motif_hits

    sub_start = max(start - adj, 0)
    offset = start - sub_start
    sub = seq[sub_start:stop]
    hits = []
    for motif in motifs:
        for pos, strand in motif_hits(sub, motif):
            rel = pos - offset
            if rel < 0:
                continue
            base = seq[rel + start]
            base = COMPLEMENT.get(base, base) if strand else base
            genome = rel + start + origin
            partner = genome + motif.reverse_offset - motif.offset if motif.palindrome else None
            hits.append((genome, strand, base, partner))
    hits.sort(key=lambda h: h[0])
    return hits


def first_hit(seq: str, motifs) -> int | None:
    """modkit's start position: the first hit in the first 10 kb chunk holding one."""
    from numapore.pileup.positions import motif_hits

    for at in range(0, len(seq), 10_000):
        chunk = seq[at : at + 10_000]
        found = [hits[0][0] for m in motifs if (hits := motif_hits(chunk, m))]
        if found:
            return min(found)
    return None


def sliding_windows(seq: str, origin: int, motifs, settings) -> Iterator[Window]:
    """modkit's SlidingWindows over seq (genome positions from origin), in order."""
    n, size = settings.num_positions, settings.window_size
    adj = max((m.length for m in motifs if m.length > 1), default=0)
    at = first_hit(seq, motifs)
    while at is not None and at < len(seq):
        end = min(at + size, len(seq))
        hits = motif_hits_at(seq, motifs, at, end, adj, origin)
        window = window_of(hits, n, settings.combine_strands)
        if window is not None:
            yield window
            at = window.leftmost + 1 - origin
            continue
        found = sorted({h[0] - origin for h in hits})
        if not found:
            at = end
        elif found[0] == at:
            at = found[1] if len(found) > 1 else end
        else:
            at = found[0]


def window_of(hits: list, n: int, combine: bool) -> Window | None:
    """modkit's enough_hits_for_window: the window of the first n hits, None if too few."""
    pos_hits = [h for h in hits if h[1] == 0]
    neg_hits = [h for h in hits if h[1] == 1]
    if combine:
        pairs = [(h[2], h[0], h[3]) for h in pos_hits[:n] if h[3] is not None]
        if len(pairs) < n:
            return None
        return Window({"+": [(b, p) for b, p, _ in pairs], "-": None},
                      [(b, q) for b, _, q in pairs])  # fmt: skip
    plus = [(h[2], h[0]) for h in pos_hits[:n]] if len(pos_hits) >= n else None
    minus = [(h[2], h[0]) for h in neg_hits[:n]] if len(neg_hits) >= n else None
    if plus is None and minus is None:
        return None
    if plus is not None and minus is not None:
        if plus[0][1] < minus[0][1]:
            minus = None
        elif minus[0][1] < plus[0][1]:
            plus = None
    return Window({"+": plus, "-": minus})


def read_pattern_calls(rec, caller) -> tuple[str, dict] | None:
    """The read's strand and calls by (base, reference position): a code, `-` canonical
    or None filtered; None for a read modkit leaves out (unparsable, duplex)."""
    from numapore.pileup.common import ReadError

    try:
        groups = shared.read_calls(rec)
    except ReadError:
        return None
    if len({g.strand for g in groups}) > 1:
        return None  # duplex: 0.6.1's entropy leaves these reads out
    calls = {}
    for g in groups:
        called = g.calls(caller, g.base)
        for ref_pos, c in zip(g.reference.tolist(), called.tolist(), strict=True):
            if ref_pos >= 0:
                calls[(g.base, ref_pos)] = None if c == FILTERED else ("-" if c < 0 else g.codes[c])
    return ("-" if rec.is_reverse else "+"), calls


def add_read(window: Window, strand: str, start: int, end: int, calls: dict, most_filtered):
    """modkit's add_read_to_patterns: the read's pattern if it spans the strand's window and
    has at most most_filtered filtered positions."""
    span = window.span("+" if window.neg_keys is not None else strand)
    if span is None or window.keys.get("+" if window.neg_keys is not None else strand) is None:
        return
    if not (start <= span[0] and end >= span[1]):
        return
    if window.neg_keys is not None:
        keys = window.keys["+"] if strand == "+" else window.neg_keys
        strand = "+"
    else:
        keys = window.keys[strand]
    pattern = [calls.get(k) for k in keys]
    if sum(c is None for c in pattern) > most_filtered:
        return
    window.patterns[strand].append(pattern)


def me_entropy(patterns: list[str], n: int) -> float:
    """modkit's methylation entropy of encoded patterns (`*` a wildcard over the codes its
    column shows), in f32, summing in pattern order."""
    import re

    columns = ["".join(sorted({p[i] for p in patterns} - {"*"})) for i in range(n)]
    unique = sorted(set(patterns))
    if not any("*" in p for p in unique):
        candidates = unique
    else:
        level = set(columns[0])
        for idx in range(1, n):
            grown = set()
            for seq in unique:
                prefix = re.compile(to_regex(seq[:idx], columns))
                for pattern in level:
                    if prefix.fullmatch(pattern):
                        tail = columns[idx] if seq[idx] == "*" else seq[idx]
                        grown.update(pattern + c for c in tail)
            level = grown
        candidates = sorted(level)
    counts = dict.fromkeys(candidates, np.float32(0))
    for seq in patterns:
        regex = re.compile(to_regex(seq, columns))
        matches = [c for c in candidates if regex.fullmatch(c)]
        factor = np.float32(1) / np.float32(len(matches))
        for c in matches:
            counts[c] = np.float32(counts[c] + factor)
    values = [v for v in counts.values() if v]
    total = np.float32(0)
    for v in values:
        total = np.float32(total + v)
    shannon = np.float32(0)
    for v in values:
        p = np.float32(v / total)
        # numpy's float32 log2 gives glibc's log2f (Rust's f32::log2) bits; f32(math.log2)
        # differs in the last bit for 1 value in 200
        shannon = np.float32(shannon + np.float32(p * np.log2(p)))
    value = np.float32(np.float32(1) / np.float32(n)) * np.float32(-shannon)
    return float(value) + 0.0  # -0.0 as 0


def to_regex(seq: str, columns: list[str]) -> str:
    """A pattern with its wildcards as their columns' classes."""
    return "".join(f"[{columns[i]}]" if c == "*" else c for i, c in enumerate(seq))


@dataclass
class Settings:
    """entropy's options."""

    num_positions: int = 4
    window_size: int = 50
    combine_strands: bool = False
    min_coverage: int = 3
    most_filtered: int = 2
    drop_zeros: bool = False


def window_entropy(window: Window, strand: str, settings: Settings):
    """(entropy, reads) of the window's strand, None without the coverage at every
    position (no row; a failed window of a region)."""
    patterns = window.patterns[strand]
    n = settings.num_positions
    coverage = [sum(p[i] is not None for p in patterns) for i in range(n)]
    if any(c < settings.min_coverage for c in coverage):
        return None
    codes = sorted({c for p in patterns for c in p if c not in (None, "-")}, key=code_key)
    lookup = {c: str(i + 1) for i, c in enumerate(codes)}
    lookup.update({"-": "0", None: "*"})
    encoded = ["".join(lookup[c] for c in p) for p in patterns]
    return me_entropy(encoded, n), len(patterns)


def window_rows(chrom: str, windows: list[Window], settings: Settings, results: list) -> str:
    """The bedgraph lines of windows; results gets (strand, entropy, reads) or (strand,
    None) for each strand with a window."""
    out = []
    for window in windows:
        for strand in "+-":
            span = window.span(strand)
            if span is None:
                continue
            got = window_entropy(window, strand, settings)
            results.append((strand, got))
            if got is None or (settings.drop_zeros and got[0] == 0):
                continue
            out.append(f"{chrom}\t{span[0]}\t{span[1] + 1}\t{rust_f32(got[0])}\t{strand}\t"
                       f"{got[1]}\n")  # fmt: skip
    return "".join(out)


def median(values: list[float], modkit061: bool) -> float | None:
    """The median (f32 interpolation as modkit's): of the sorted values, or as 0.6.1 of
    the values in genome order (None for fewer than 2 there)."""
    from numapore.pileup.thresholds import percentile_linear_interp

    if modkit061 and len(values) < 2:
        return None
    if len(values) == 1:
        return values[0]
    return percentile_linear_interp(values if modkit061 else sorted(values), len(values), 0.5)


def region_rows(chrom: str, name: str, span: tuple[int, int], results: list, settings) -> str:
    """regions.bed's rows of one region (per strand with windows)."""
    out = []
    for strand in "+-":
        done = [r for s, r in results if s == strand]
        if not done:
            continue
        ok = [r for r in done if r is not None]
        if not ok:
            continue
        entropies, reads = [e for e, _ in ok], [n for _, n in ok]
        mid = median(entropies, modkit061=False)
        if mid is None:
            continue
        total = 0.0
        for e in entropies:
            total = f32(total + e)
        mean = f32(total / f32(len(entropies)))
        reads_total = 0.0
        for r in reads:
            reads_total = f32(reads_total + r)
        mean_reads = f32(reads_total / f32(len(reads)))
        cells = [rust_f32(mean), strand, rust_f32(mid), rust_f32(min(entropies)),
                 rust_f32(max(entropies)), rust_f32(mean_reads), str(min(reads)),
                 str(max(reads)), str(len(ok)), str(len(done) - len(ok))]  # fmt: skip
        out.append(f"{chrom}\t{span[0]}\t{span[1]}\t{name}\t" + "\t".join(cells) + "\n")
    return "".join(out)


class Counter:
    """The reads of the BAMs into windows, with the threshold caller."""

    def __init__(self, bams: list, caller, settings: Settings):
        """Open BAMs (pysam), the caller, the settings."""
        self.bams, self.caller, self.settings = bams, caller, settings

    def fill(self, chrom: str, windows: list[Window]) -> None:
        """Add every read that spans a window to it."""
        if not windows:
            return
        lefts = [w.leftmost for w in windows]
        low, high = lefts[0], max(w.rightmost for w in windows)
        for bam in self.bams:
            for rec in bam.fetch(chrom, low, max(high, low + 1)):
                if rec.flag & SKIP_FLAGS or not rec.query_length:
                    continue
                got = read_pattern_calls(rec, self.caller)
                if got is None:
                    continue
                strand, calls = got
                start, end = rec.reference_start, rec.reference_end
                first = bisect.bisect_left(lefts, start)
                last = bisect.bisect_right(lefts, end)
                for window in windows[first:last]:
                    add_read(window, strand, start, end, calls, self.settings.most_filtered)

    def stream(self, chrom: str, windows: Iterator[Window]) -> Iterator[list[Window]]:
        """One BAM's reads of chrom into windows in one pass, in order: fill's patterns, each
        window given back (in order, in lists) once no later read can span it (a read
        starting after the window's last strand start), so only the windows under the
        reads at hand are held."""
        (bam,) = self.bams
        ready: list[Window] = []  # made, not given back: by leftmost
        lefts: list[int] = []
        more = True
        for rec in bam.fetch(chrom):
            if rec.flag & SKIP_FLAGS or not rec.query_length:
                continue
            start, end = rec.reference_start, rec.reference_end
            while more and (not lefts or lefts[-1] <= end):
                window = next(windows, None)
                more = window is not None
                if more:
                    ready.append(window)
                    lefts.append(window.leftmost)
            done = 0
            while done < len(ready) and last_start(ready[done]) < start:
                done += 1
            if done:
                yield ready[:done]
                del ready[:done], lefts[:done]
            first = bisect.bisect_left(lefts, start)
            last = bisect.bisect_right(lefts, end)
            if first == last:
                continue
            got = read_pattern_calls(rec, self.caller)
            if got is None:
                continue
            strand, calls = got
            for window in ready[first:last]:
                add_read(window, strand, start, end, calls, self.settings.most_filtered)
        yield ready + list(windows)


def last_start(window: Window) -> int:
    """The last of the window's strands' first positions: a read starting after it spans
    none of its strands."""
    return max(s[0] for s in map(window.span, "+-") if s is not None)


def motifs_of(args) -> tuple[list, bool]:
    """The motifs (the engine's Motif) and whether strands are combined."""
    if args.cpg:
        if args.motif or args.base or args.combine_strands:
            raise CommandError("--cpg is --motif CG 0 --combine-strands: not with those")
        return [shared.parse_motif("CG", "0")], True
    if args.base and args.combine_strands:
        raise CommandError("cannot combine strands with single base modifications (--base)")
    motifs = [shared.parse_motif(raw, offset) for raw, offset in args.motif or []]
    for base in args.base or []:
        if base.upper() not in COMPLEMENT:
            raise CommandError(f"--base {base}: not A, C, G or T")
        motifs.append(shared.parse_motif(base.upper(), "0"))
    if not motifs:
        raise CommandError("give --cpg, --motif SEQ OFFSET or --base B")
    if args.combine_strands and not all(m.palindrome for m in motifs):
        raise CommandError("motifs must be palindromic to combine strands")
    return motifs, args.combine_strands


def make_caller(args):
    """The threshold caller: --filter-threshold (canonical and default), every call passing
    with --no-filtering, else estimated as numapore pileup estimates it."""
    from numapore.pileup import thresholds
    from numapore.pileup.common import Options

    per_mod = thresholds.parse_mod_thresholds(args.mod_thresholds)
    if args.filter_threshold is not None:
        return thresholds.Caller({}, per_mod, f32(args.filter_threshold))
    if args.no_filtering:
        return thresholds.Caller({}, per_mod, 0.0)
    if len(args.in_bams) > 1:
        raise CommandError("several --in-bam: give --filter-threshold or --no-filtering")
    options = Options(mod_thresholds=args.mod_thresholds, num_reads=args.num_reads,
                      filter_percentile=args.filter_percentile)  # fmt: skip
    return thresholds.make_caller(args.in_bams[0], options, None)


def open_inputs(args):
    """The BAMs (indexed, with mapped reads) and the FASTA."""
    bams = []
    for path in args.in_bams:
        bam = shared.open_bam(path, indexed=True)
        if not any(s.mapped for s in bam.get_index_statistics()):
            raise CommandError(f"{path}: no mapped reads (align the reads first)")
        bams.append(bam)
    if len({b.references for b in bams}) > 1:
        raise CommandError("the BAMs' headers differ: align them to the same reference")
    return bams, shared.open_fasta(args.reference)


def contigs_with_reads(bams, fasta) -> list[str]:
    """The contigs some BAM has mapped reads on and the FASTA holds, in header order."""
    mapped = {s.contig for b in bams for s in b.get_index_statistics() if s.mapped}
    return [c for c in bams[0].references if c in mapped and c in fasta.references]


def sequence(fasta, chrom: str, start: int, end: int | None, mask: bool) -> str:
    """The reference's bases (upper-cased unless --mask)."""
    seq = fasta.fetch(chrom, start, end)
    return seq if mask else seq.upper()


def read_regions(path: str) -> list[tuple[str, int, int, str]]:
    """--regions BED as modkit reads it (name: column 4, or chrom:start-end for BED3)."""
    lines = [ln.rstrip("\n") for ln in shared.text_lines(path, "a BED file") if ln.strip()]
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    regions = []
    for line in lines:
        parts = line.split("\t")
        try:
            chrom, start, end = parts[0], int(parts[1]), int(parts[2])
        except (IndexError, ValueError):
            continue
        name = parts[3] if len(parts) > 3 else f"{chrom}:{start}-{end}"
        regions.append((chrom, start, end, name))
    if not regions:
        raise CommandError(f"{path}: no valid regions (chrom start end [name])")
    return regions


def run(args) -> int:
    """entropy with the parsed command line."""
    motifs, combine = motifs_of(args)
    settings = Settings(args.num_positions, args.window_size, combine, args.min_coverage)
    settings.drop_zeros = args.drop_zeros
    if args.max_filtered_positions is not None:
        settings.most_filtered = args.max_filtered_positions
    else:
        settings.most_filtered = math.floor(f32(args.num_positions * 0.5))
    if args.regions and not args.out_bed:
        raise CommandError("--regions needs -o DIR (a folder for windows and regions)")
    if args.prefix and not args.regions:
        raise CommandError("--prefix is for --regions")
    bams, fasta = open_inputs(args)
    counter = Counter(bams, make_caller(args), settings)
    contigs = contigs_with_reads(bams, fasta)
    if args.regions:
        regions = read_regions(args.regions)
        return write_regions(args, regions, contigs, fasta, motifs, counter)
    with shared.output(args.out_bed, True) as out:
        if args.header:
            out.write(HEADER)
        for chrom in contigs:
            windows = sliding_windows(sequence(fasta, chrom, 0, None, args.mask), 0, motifs,
                                      settings)  # fmt: skip
            # a contig's windows and their reads' patterns held as they are filled (all at
            # once: 155 MB on a 6 Mb contig at 20,000 reads); with several BAMs (whose reads
            # add in BAM order) a batch at a time, a read spanning two batches read for each
            if len(counter.bams) == 1:
                for done in counter.stream(chrom, windows):
                    out.write(window_rows(chrom, done, settings, []))
                continue
            while batch := list(islice(windows, WINDOW_BATCH)):
                counter.fill(chrom, batch)
                out.write(window_rows(chrom, batch, settings, []))
    return 0


def write_regions(args, regions, contigs, fasta, motifs, counter) -> int:
    """--regions: windows.bedgraph and regions.bed in the -o folder."""
    folder = args.out_bed
    if os.path.isfile(folder):
        raise CommandError(f"{folder}: a file; with --regions -o is a folder")
    os.makedirs(folder, exist_ok=True)
    stem = f"{args.prefix}_" if args.prefix else ""
    settings = counter.settings
    lengths = dict(zip(fasta.references, fasta.lengths, strict=True))
    windows_path = os.path.join(folder, f"{stem}windows.bedgraph")
    regions_path = os.path.join(folder, f"{stem}regions.bed")
    with (
        shared.output(windows_path, True) as windows_out,
        shared.output(regions_path, True) as regions_out,
    ):
        if args.header:
            windows_out.write(HEADER)
            regions_out.write(REGIONS_HEADER)
        for chrom, start, end, name in regions:
            if chrom not in contigs or end > lengths[chrom] or end <= start:
                continue
            seq = sequence(fasta, chrom, start, end, args.mask)
            windows = list(sliding_windows(seq, start, motifs, settings))
            if not windows:
                continue
            counter.fill(chrom, windows)
            results: list = []
            windows_out.write(window_rows(chrom, windows, settings, results))
            span = (windows[0].leftmost, windows[-1].rightmost)
            regions_out.write(region_rows(chrom, name, span, results, settings))
    return 0


def make_parser(prog: str) -> Parser:
    """entropy's command line (modkit's options)."""
    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("-s", "--in-bam", dest="in_bams", action="append", required=True,
                        metavar="BAM", help="indexed modBAM (repeat for several)")  # fmt: skip
    parser.add_argument("-o", "--out-bed", metavar="OUT", help="default stdout; a folder "
                        "with --regions")  # fmt: skip
    parser.add_argument("--prefix", help="with --regions: PREFIX_regions.bed, ...")
    parser.add_argument("-n", "--num-positions", type=shared.positive, default=4)
    parser.add_argument("-w", "--window-size", type=shared.positive, default=50)
    parser.add_argument("--ref", "--reference", dest="reference", required=True)
    parser.add_argument("--mask", action="store_true", help="soft-masked bases are no hits")
    parser.add_argument("--motif", nargs=2, action="append", metavar=("SEQ", "OFFSET"))
    parser.add_argument("--cpg", action="store_true", help="--motif CG 0 --combine-strands")
    parser.add_argument("--base", action="append", metavar="B")
    parser.add_argument("--combine-strands", action="store_true")
    parser.add_argument("--regions", metavar="BED")
    parser.add_argument("--min-coverage", dest="min_coverage", type=shared.positive, default=3)
    parser.add_argument("--max-filtered-positions", type=shared.non_negative)
    shared.add_threshold_options(parser, per_base=False)
    parser.add_argument("--num-reads", type=shared.positive, default=10_042)
    parser.add_argument("--header", "--with-header", action="store_true")
    parser.add_argument("--drop-zeros", action="store_true")
    shared.ignored(parser, "--force", flag=True)  # 0.6.1 overwrites its outputs regardless
    shared.add_run_options(parser)
    shared.ignored(parser, "--io-threads", type=shared.non_negative)
    shared.ignored(parser, "--verbose-logging", "--verbose", flag=True)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "numapore entropy") -> int:
    """Run `numapore entropy`."""
    return shared.run_main(make_parser(prog), argv, run)


if __name__ == "__main__":
    sys.exit(main())
