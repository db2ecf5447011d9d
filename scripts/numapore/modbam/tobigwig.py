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
from collections.abc import Iterator
from itertools import chain, repeat

from numapore.base import compiled
from numapore.base.textfiles import open_maybe_gzip
from numapore.methylation.bedmethyl import BedMethylRow, f32, parse_line
from numapore.modbam.command import CommandError, Parser, add_ignored, run_main
from numapore.modbam.inputs import read_sizes

BATCH = 1 << 11  # positions per batch handed to the writer
CHUNK = 1 << 18  # bytes of the bedMethyl read at a time
Batch = tuple[str, list[int], list[float]]  # a chromosome's positions and values


def header_sizes(bam_path: str) -> dict[str, int]:
    """The chromosome sizes of a BAM's header."""
    with open(bam_path, "rb") as handle:
        if handle.read(2) != b"\x1f\x8b":  # BGZF: htslib would print its own lines first
            raise CommandError(f"{bam_path}: not a BAM (--header needs the modBAM)")
    from numapore.pileup.inputs import open_bam

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
            row = kept_row(line, number, path, codes)
            if row is not None:
                yield number, row


def kept_row(line: str, number: int, path: str, codes: set[str]) -> BedMethylRow | None:
    """Line number's row if it is one of the codes (None: a comment, a blank line, another
    code's row)."""
    if line.lstrip().startswith("#") or not line.strip():
        return None
    try:
        row = parse_line(line)
    except ValueError as err:
        raise CommandError(f"{path}: line {number}: {err}") from None
    return row if row.name.split(",")[0] in codes else None


def merge_error(path: str, number: int, duplicate: bool) -> CommandError:
    """Two rows of one position and strand that modkit refuses."""
    if duplicate:
        return CommandError(f"{path}: line {number}: duplicated record")
    return CommandError(
        f"{path}: line {number}: invalid overlapping records: codes at one position and strand "
        "with different N_valid_cov (codes of different primary bases?)"
    )


def position_values(path: str, codes: set[str], negative: bool):
    """modkit's BedMethylStream: (chrom, start, value) per position, in file order (Python's
    reading; the compiled core's bedmethyl_rows.c does the same in _compiled_batches)."""
    current = None  # [row, n_mod]
    for number, row in kept_rows(path, codes):
        if current is not None:
            kept, n_mod = current
            same_place = kept.chrom == row.chrom and kept.start == row.start
            if same_place and kept.strand == row.strand:
                if row.name.split(",")[0] == kept.name.split(",")[0]:
                    raise merge_error(path, number, duplicate=True)
                if row.valid_cov != kept.valid_cov:
                    raise merge_error(path, number, duplicate=False)
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
        raise no_rows(path, codes)
    yield value_of(current[0], current[1], negative)


def no_rows(path: str, codes: set[str]) -> CommandError:
    """The refusal of a bedMethyl without a row of the codes."""
    return CommandError(f"{path}: no bedMethyl rows of code(s) {','.join(sorted(codes))}")


def value_of(row: BedMethylRow, n_mod: int, negative: bool) -> tuple[str, int, float]:
    """A position's value: f32(N_mod / N_valid_cov) * +-100 in float32."""
    fraction = f32(n_mod / row.valid_cov) if row.valid_cov else float("nan")
    factor = -100.0 if negative and row.strand in ("-", ".") else 100.0
    return row.chrom, row.start, f32(fraction * factor)


def _python_batches(path: str, codes: set[str], negative: bool) -> Iterator[Batch]:
    """position_values in batches of one chromosome."""
    chrom, starts, values = None, [], []
    for name, start, value in position_values(path, codes, negative):
        if name != chrom or len(starts) == BATCH:
            if starts:
                yield chrom, starts, values
            chrom, starts, values = name, [], []
        starts.append(start)
        values.append(value)
    if starts:
        yield chrom, starts, values


class _CompiledTrack:
    """bedmethyl_rows.c's merge of the rows (bm_track) and its batches."""

    def __init__(self, core, path: str, codes: set[str], negative: bool):
        """A merge of the codes' rows of path."""
        self.ffi, self.lib, self.path, self.codes = core.ffi, core.lib, path, codes
        joined = b"\0".join(code.encode() for code in sorted(codes))
        self.keep = [self.ffi.new("char[]", joined)]  # alive while the C side points at them
        track = self.track = self.ffi.new("bm_track *")
        track.codes, track.codes_len, track.negative = self.keep[0], len(joined), negative
        self.starts = self.ffi.new("int64_t[]", BATCH)
        self.values = self.ffi.new("float[]", BATCH)
        track.out_start, track.out_value, track.out_cap = self.starts, self.values, BATCH

    def full(self) -> bool:
        """Whether the batch must be taken before another row."""
        return bool(self.track.held) or self.track.out_n == BATCH

    def take(self) -> Iterator[Batch]:
        """The batch, if any (then the held position starts the next)."""
        n = self.track.out_n
        if n:
            chrom = self.ffi.string(self.track.out_chrom).decode()
            yield chrom, self.ffi.unpack(self.starts, n), self.ffi.unpack(self.values, n)
        self.lib.bm_take(self.track)

    def failed(self, status: int) -> CommandError:
        """The error of a bm_read or bm_push status."""
        number = self.track.line
        if status == self.lib.BM_LONG_NAME:
            return CommandError(f"{self.path}: line {number}: a name over 1,023 characters")
        return merge_error(self.path, number, duplicate=status == self.lib.BM_DUPLICATE)

    def python_lines(self, raw: bytes) -> Iterator[Batch]:
        """Lines C leaves to Python (parse_line decides), read as text mode reads them."""
        text = raw.decode().replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        for line in lines[:-1] if text.endswith("\n") else lines:
            self.track.line += 1
            row = kept_row(line, self.track.line, self.path, self.codes)
            if row is None:
                continue
            code = row.name.split(",")[0]
            if self.full():
                yield from self.take()
            fields = [x.encode() for x in (row.chrom, code, row.strand)]
            status = self.lib.bm_push(self.track, fields[0], len(fields[0]), row.start,
                                      fields[1], len(fields[1]), fields[2], len(fields[2]),
                                      row.valid_cov, row.n_mod, row.n_canonical)  # fmt: skip
            if status:
                yield from self.take()
                raise self.failed(status)

    def chunk(self, data: bytearray, end: int) -> Iterator[Batch]:
        """The rows of data[:end] (whole lines)."""
        buf, pos = self.ffi.from_buffer(data), 0
        while pos < end:
            pos += self.lib.bm_read(self.track, buf + pos, end - pos)
            status = self.track.status
            if status == self.lib.BM_PYTHON:
                yield from self.python_lines(bytes(data[pos : pos + self.track.bad_len]))
                pos += self.track.bad_len
            elif status:
                yield from self.take()
                yield from self.take()
                raise self.failed(status)
            if self.full():
                yield from self.take()

    def batches(self, handle) -> Iterator[Batch]:
        """All the batches of the file open in handle (binary), read into one buffer (a
        line longer than it grows it)."""
        data, filled = bytearray(CHUNK), 0
        while True:
            if filled == len(data):
                data.extend(bytes(len(data)))
            got = handle.readinto(memoryview(data)[filled:])
            filled += got
            end = data.rfind(b"\n", 0, filled) + 1 if got else filled
            yield from self.chunk(data, end)
            data[: filled - end] = data[end:filled]
            filled -= end
            if not got:
                break
        while self.full():
            yield from self.take()
        self.lib.bm_finish(self.track)
        while self.track.out_n:
            yield from self.take()
        if not self.track.any:
            raise no_rows(self.path, self.codes)


def track_batches(path: str, codes: set[str], negative: bool) -> Iterator[Batch]:
    """The positions' values in batches of one chromosome, in file order (the compiled core's
    reading, or Python's: the same values)."""
    core = compiled.load("numapore.pileup._pileup_core")
    if core is None:
        yield from _python_batches(path, codes, negative)
        return
    try:
        handle = sys.stdin.buffer if path in ("-", "stdin") else open_maybe_gzip(path, "rb")
        with handle:
            yield from _CompiledTrack(core, path, codes, negative).batches(handle)
    except (UnicodeDecodeError, EOFError) as err:
        raise CommandError(f"{path}: not a bedMethyl ({err.__class__.__name__})") from None


def checked(batches: Iterator[Batch], sizes: dict[str, int], path: str) -> Iterator[Batch]:
    """The batches, each checked against the chromosome sizes."""
    for chrom, starts, values in batches:
        size = sizes.get(chrom)
        if size is None:
            raise CommandError(f"{path}: chromosome {chrom} is not in the chromosome sizes")
        if max(starts) + 1 > size:
            start = next(s for s in starts if s + 1 > size)
            raise CommandError(f"{path}: position {start} of {chrom} is past its length {size}")
        yield chrom, starts, values


def intervals(batches: Iterator[Batch], failure: list):
    """The writer's (chrom, start, end, value) of the batches; the first error goes to failure
    and ends them (pybigtools would print it and write on)."""
    try:
        for chrom, starts, values in batches:
            yield from zip(repeat(chrom), starts, [s + 1 for s in starts], values)
    except Exception as err:  # noqa: BLE001 (raised again by write_bigwig)
        failure.append(err)


def write_bigwig(out_path: str, sizes: dict[str, int], batches: Iterator[Batch], path: str):
    """The bigWig of the batches (pybigtools lists only the chromosomes with values), written
    under a temporary name and renamed when complete. The first batch is read before the
    writer starts: a file that fails at once fails before pybigtools prints anything."""
    import pybigtools

    batches = checked(batches, sizes, path)
    first = next(batches)  # the reading raises where there is no row
    folder, name = os.path.split(out_path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.part.bw")  # pybigtools wants .bw
    failure: list[Exception] = []
    try:
        try:
            values = intervals(chain([first], batches), failure)
            pybigtools.open(tmp, "w").write(sizes, values)
        except (ValueError, RuntimeError) as err:  # pybigtools' refusals (unsorted input)
            raise CommandError(f"{out_path}: {err}") from None
        if failure:
            raise failure[0]
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
    batches = track_batches(args.in_bedmethyl, codes, args.negative_strand_values)
    write_bigwig(args.out_bw, sizes, batches, args.in_bedmethyl)


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
