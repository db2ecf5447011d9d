"""`numapore tobigwig`: a bedMethyl to a bigWig track of the percent modified, with the values
modkit 0.6.1's `modkit bedmethyl tobigwig` writes (same chromosomes, intervals and float32
values; the file's bytes are pybigtools' own):

    numapore tobigwig IN.bed OUT.bw --mod-codes h,m (--sizes FAI | --header BAM)

Rows whose code (column 4, before any comma) is in --mod-codes are kept, sorted by position as
pileup writes them. One interval per position: f32(N_mod / N_valid_cov) * 100 (* -100 on the
minus strand with --negative-strand-values). Several codes at one position and strand are
summed when their N_valid_cov and N_canonical agree (N_valid_cov differing is an error, as in
modkit); rows on both strands at one position give the larger N_valid_cov's, + on a tie.

Where 0.6.1 contradicts its help: codes of different primary bases (--mod-codes a,h) are not
refused, as 0.6.1 does not refuse them (the help says they error): one mixed track, the same
values as modkit's, since that output is well-defined per position and users rely on it.
N_valid_cov is read from column 10 (modkit reads the score, column 5, which its pileup sets to
the same number).
"""

from __future__ import annotations

import os
import sys
from array import array
from collections.abc import Iterator

from numapore.methylation.bedmethyl import BedMethylRow, f32, parse_line
from numapore.base.textfiles import open_maybe_gzip
from numapore.pileup.inputs import open_bam
from numapore.modbam.command import CommandError, Parser, add_ignored, run_main
from numapore.modbam.positions import read_sizes


def header_sizes(bam_path: str) -> dict[str, int]:
    """The chromosome sizes of a BAM's header."""
    with open(bam_path, "rb") as handle:
        if handle.read(2) != b"\x1f\x8b":  # BGZF: htslib would print its own lines first
            raise CommandError(f"{bam_path}: not a BAM (--header needs the modBAM)")
    bam = open_bam(bam_path)
    return dict(zip(bam.references, bam.lengths, strict=True))


def kept_rows(path: str, codes: set[str]) -> Iterator[tuple[int, BedMethylRow]]:
    """The bedMethyl's rows of the codes, with their line numbers."""
    try:
        yield from _kept_rows(path, codes)
    except (UnicodeDecodeError, EOFError) as err:
        raise CommandError(f"{path}: not a bedMethyl ({err.__class__.__name__})") from None


def _kept_rows(path: str, codes: set[str]) -> Iterator[tuple[int, BedMethylRow]]:
    """kept_rows' reading."""
    handle = sys.stdin if path in ("-", "stdin") else open_maybe_gzip(path, "rt")
    with handle:
        for number, line in enumerate(handle, 1):
            if line.lstrip().startswith("#") or not line.strip():
                continue
            try:
                row = parse_line(line)
            except ValueError as err:
                raise CommandError(f"{path}: line {number}: {err}") from None
            if row.name.split(",")[0] in codes:
                yield number, row


def position_values(path: str, codes: set[str], negative: bool):
    """modkit's BedMethylStream: (chrom, start, value) per position, in file order."""
    current = None  # [row, n_mod]
    for number, row in kept_rows(path, codes):
        if current is not None:
            kept, n_mod = current
            same_place = kept.chrom == row.chrom and kept.start == row.start
            if same_place and kept.strand == row.strand:
                if row.name.split(",")[0] == kept.name.split(",")[0]:
                    raise CommandError(f"{path}: line {number}: duplicated record")
                if row.valid_cov != kept.valid_cov:
                    raise CommandError(
                        f"{path}: line {number}: invalid overlapping records: codes at one "
                        "position and strand with different N_valid_cov (codes of different "
                        "primary bases?)"
                    )
                if row.n_canonical == kept.n_canonical:
                    current[1] = n_mod + row.n_mod
                continue
            if same_place:
                if row.valid_cov > kept.valid_cov:
                    current = [row, row.n_mod]
                continue
            yield value_of(kept, n_mod, negative)
        current = [row, row.n_mod]
    if current is None:
        raise CommandError(f"{path}: no bedMethyl rows of code(s) {','.join(sorted(codes))}")
    yield value_of(current[0], current[1], negative)


def value_of(row: BedMethylRow, n_mod: int, negative: bool) -> tuple[str, int, float]:
    """A position's value: f32(N_mod / N_valid_cov) * +-100 in float32."""
    fraction = f32(n_mod / row.valid_cov) if row.valid_cov else float("nan")
    factor = -100.0 if negative and row.strand in ("-", ".") else 100.0
    return row.chrom, row.start, f32(fraction * factor)


def gather(path: str, codes: set[str], negative: bool, sizes: dict[str, int]):
    """The values per chromosome (starts and float32 values), chromosomes in file order,
    checked against the sizes."""
    tracks: dict[str, tuple[array, array]] = {}
    for chrom, start, value in position_values(path, codes, negative):
        if chrom not in tracks:
            if chrom not in sizes:
                raise CommandError(f"{path}: chromosome {chrom} is not in the chromosome sizes")
            tracks[chrom] = (array("q"), array("f"))
        if start + 1 > sizes[chrom]:
            raise CommandError(
                f"{path}: position {start} of {chrom} is past its length {sizes[chrom]}"
            )
        starts, values = tracks[chrom]
        starts.append(start)
        values.append(value)
    return tracks


def write_bigwig(out_path: str, sizes: dict[str, int], tracks) -> None:
    """The bigWig of the tracks (only their chromosomes listed), written under a temporary
    name and renamed when complete."""
    import pybigtools

    def intervals():
        for chrom in sorted(tracks):
            starts, values = tracks[chrom]
            for start, value in zip(starts, values, strict=True):
                yield chrom, start, start + 1, value

    folder, name = os.path.split(out_path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.part.bw")  # pybigtools wants .bw
    try:
        try:
            pybigtools.open(tmp, "w").write({c: sizes[c] for c in tracks}, intervals())
        except (ValueError, RuntimeError) as err:  # pybigtools' refusals (unsorted input)
            raise CommandError(f"{out_path}: {err}") from None
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def run(args) -> None:
    """Write the bigWig of the parsed command line."""
    codes = {code for raw in args.mod_codes for code in raw.split(",") if code}
    if not codes:
        raise CommandError("--mod-codes: give at least one modification code")
    if (args.sizes is None) == (args.header is None):
        raise CommandError("give one of --sizes and --header")
    sizes = read_sizes(args.sizes) if args.sizes else header_sizes(args.header)
    tracks = gather(args.in_bedmethyl, codes, args.negative_strand_values, sizes)
    write_bigwig(args.out_bw, sizes, tracks)


def main(argv: list[str] | None = None, prog: str = "numapore tobigwig") -> int:
    """Parse argv (default sys.argv[1:]) and run."""
    parser = Parser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("in_bedmethyl", help="bedMethyl (plain or gzip), - for stdin")
    parser.add_argument("out_bw", help="output bigWig")
    parser.add_argument("-g", "--sizes", help="chromosome sizes (name length per line, or .fai)")
    parser.add_argument("-b", "--header", metavar="BAM", help="chromosome sizes from a BAM")
    parser.add_argument("-m", "--mod-codes", "--mod-code", action="append", required=True,
                        help="code(s), comma-separated: their counts are summed")  # fmt: skip
    parser.add_argument("--negative-strand-values", action="store_true",
                        help="minus-strand percentages as negative values")  # fmt: skip
    add_ignored(parser, "-t", "--nthreads", "-z", "--nzooms", "--zooms", "--block-size",
                "--items-per-slot", "--log-filepath", "--log")  # fmt: skip
    add_ignored(parser, "-u", "--uncompressed", "--inmemory", "--force-chromosome-ordering",
                "--suppress-progress", value=False)  # fmt: skip
    return run_main(parser, argv, run)


if __name__ == "__main__":
    sys.exit(main())
