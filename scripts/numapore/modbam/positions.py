"""What the modbam commands of positions and windows share (localize, entropy, pileup-hemi,
extract-calls): beside command.py's frame (one `numapore:` line, no traceback), modkit's options
numapore does not offer refused by name (flags too), output files, BED features, sizes files, the
f32 text modkit writes, and a read's calls at reference positions through the pileup engine's
MM/ML parser."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from decimal import Decimal, ROUND_HALF_UP
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from numapore.methylation.bedmethyl import f32
from numapore.modbam.command import CommandError, Parser, run_main  # noqa: F401 (shared)
from numapore.modbam.inputs import need_file, read_sizes, text_lines  # noqa: F401 (shared)

if TYPE_CHECKING:  # numpy is imported where a read's calls are (localize needs none)
    import numpy as np


class _Refused(argparse.Action):
    """An option modkit has and numapore does not offer: refused, naming it."""

    def __call__(self, parser, namespace, values, option_string=None):
        """Refuse the option."""
        parser.error(f"{option_string} (modkit's) is not offered by numapore")


def refuse(group, *names: str, flag: bool = False) -> None:
    """Add modkit's options `names` (one option's spellings) to be refused when given."""
    group.add_argument(*names, action=_Refused, nargs=0 if flag else None,
                       help=argparse.SUPPRESS)  # fmt: skip


def ignored(group, *names: str, flag: bool = False, **kwargs) -> None:
    """Add modkit's options that only tune its own work (progress bars, I/O threads, logs)."""
    if flag:
        group.add_argument(*names, action="store_true", help="accepted, ignored")
    else:
        group.add_argument(*names, help="accepted, ignored", **kwargs)


def positive(text: str) -> int:
    """A count option of 1 or more (argparse type)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def non_negative(text: str) -> int:
    """A count option of 0 or more (argparse type)."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


@contextmanager
def output(path: str | None, force: bool):
    """The output stream: stdout for None or `-`, else a new file (an existing one only with
    --force, as modkit), removed again if the command fails."""
    if path in (None, "-", "stdout"):
        yield sys.stdout
        return
    if os.path.exists(path) and not force:
        raise CommandError(f"{path}: exists (add --force to overwrite)")
    try:
        handle = open(path, "w")
    except OSError as err:
        raise CommandError(f"{path}: cannot write ({err.strerror})") from None
    try:
        with handle:
            yield handle
    except BaseException:
        os.unlink(path)
        raise


@functools.lru_cache(maxsize=1 << 16)  # calls' probabilities repeat: 256 levels and sums
def rust_f32(value: float) -> str:
    """An f32 as Rust's Display writes it: the shortest decimal that is that f32, never an
    exponent, no `.0` on whole numbers (66.66667, 100, 0.22957395); of two shortest, the
    one rounded half up (0.43945313), as Rust breaks the tie."""
    x = f32(value)
    if x != x or x in (float("inf"), float("-inf")):
        return "NaN" if x != x else ("inf" if x > 0 else "-inf")
    exact = Decimal(x)
    places = 0
    while True:
        text = f"{exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP):f}"
        if f32(float(text)) == x:
            return text
        places += 1


@dataclass
class Feature:
    """A BED record: its interval, name and strand (`.` for BED3-5)."""

    chrom: str
    start: int
    end: int
    name: str
    strand: str

    @property
    def midpoint(self) -> int:
        """modkit's GenomeRegion midpoint."""
        return (self.start + self.end) // 2


def read_features(path: str) -> list[Feature]:
    """A BED file's records as modkit reads regions: `#` lines first are skipped; a first
    line of 6+ columns makes every line stranded (score a number or `.`, strand + - .), else
    all are unstranded; lines that do not parse are skipped; none parsed is an error."""
    lines = [line for line in text_lines(path, "a BED file") if line.strip()]
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    if not lines:
        raise CommandError(f"{path}: no BED records")
    stranded = len(lines[0].split()) > 5
    features = []
    for line in lines:
        parts = line.split()
        try:
            chrom, start, end = parts[0], int(parts[1]), int(parts[2])
        except (IndexError, ValueError):
            continue
        name = parts[3] if len(parts) > 3 else "."
        strand = "."
        if stranded:
            if len(parts) < 6 or parts[5] not in ("+", "-", "."):
                continue
            strand = parts[5]
        if start < 0 or end < start:
            continue
        features.append(Feature(chrom, start, end, name, strand))
    if not features:
        raise CommandError(f"{path}: no record parses as BED (chrom start end ...)")
    return features


FILTERED = -2  # BaseCalls.calls' value of a call under its threshold


@dataclass
class BaseCalls:
    """A read's calls of one MM strand and base: forward read positions, their reference
    positions (-1: not aligned), the codes (hash order) and their float32 probabilities (0
    where a code is not listed), and which positions are implicit canonical."""

    strand: str
    base: str
    forward: np.ndarray
    reference: np.ndarray
    codes: list[str]
    probs: list[np.ndarray]
    inferred: np.ndarray

    def canonical(self) -> np.ndarray:
        """1 - the sum of the mod probabilities, in float32 (modkit's canonical_prob)."""
        import numpy as np

        total = np.zeros(len(self.forward), dtype=np.float32)
        for p in self.probs:
            total = (total + p).astype(np.float32)
        return (np.float32(1.0) - total).astype(np.float32)

    def argmax(self) -> tuple[np.ndarray, np.ndarray]:
        """modkit's argmax_base_mod_call: per position the code index (-1 canonical) and its
        probability (a mod code only if strictly more probable than canonical; the last of
        equally probable codes)."""
        import numpy as np

        can = self.canonical()
        best = np.full(len(can), -1, dtype=np.int64)
        best_p = np.full(len(can), -np.inf, dtype=np.float32)
        for i, p in enumerate(self.probs):
            ok = p >= best_p
            best[ok] = i
            best_p[ok] = p[ok]
        mod = (best >= 0) & (best_p > can)
        return np.where(mod, best, -1), np.where(mod, best_p, can).astype(np.float32)

    def calls(self, caller, threshold_base: str) -> np.ndarray:
        """modkit's MultipleThresholdModCaller.call per position, thresholds of
        threshold_base: the code index of the most probable state at or over its threshold
        (-1 canonical, canonical winning ties, else the last of equals), FILTERED if none."""
        import numpy as np

        from numapore.pileup.common import BASE_INDEX

        b = BASE_INDEX[threshold_base]
        best = np.full(len(self.forward), FILTERED, dtype=np.int64)
        best_p = np.full(len(self.forward), -np.inf, dtype=np.float32)
        for i, (code, p) in enumerate(zip(self.codes, self.probs, strict=True)):
            ok = (p >= caller.code_threshold(b, code)) & (p >= best_p)
            best[ok], best_p[ok] = i, p[ok]
        can = self.canonical()
        best[(can >= caller.canonical_threshold(b)) & (can >= best_p)] = -1
        return best


def aligned_reference(rec, n: int, pairs=None) -> np.ndarray:
    """The reference position of each alignment query position (-1: soft clip, insertion,
    or an unmapped read); pairs: the aligned (query, reference) arrays if known."""
    import numpy as np

    ref = np.full(n, -1, dtype=np.int64)
    if rec.is_unmapped or not rec.cigartuples:
        return ref
    if pairs is None:
        from numapore.pileup.tags import alignment_arrays

        pairs = alignment_arrays(rec)[:2]
    ref[pairs[0]] = pairs[1]
    return ref


def read_calls(rec, pairs=None) -> list[BaseCalls]:
    """The read's calls per MM strand and base, through the pileup engine's MM/ML parser
    (ReadError where modkit skips the read); positions in forward read order. pairs: the
    alignment's aligned (query, reference) arrays, if the caller has them."""
    import numpy as np

    from numapore.pileup.common import BASES
    from numapore.pileup.tags import (
        forward_sequence,
        get_mod_tags,
        hash_order,
        read_mod_tables,
    )

    mm, ml = get_mod_tags(rec)
    fwd = forward_sequence(rec)
    tables = read_mod_tables(mm, ml, fwd)
    n = len(fwd)
    ref_of_query = aligned_reference(rec, n, pairs)
    codes_of_base: dict[int, list[str]] = {}
    for (_, base), table in tables.items():
        known = codes_of_base.setdefault(base, [])
        known += [c for c in table.codes if c not in known]
    out = []
    for (strand, base), table in sorted(tables.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        where = np.flatnonzero(table.has)
        if not len(where):
            continue
        query = n - 1 - where if rec.is_reverse else where
        inferred = table.inferred[where]
        codes = hash_order(codes_of_base[base])
        probs = []
        for code in codes:
            p = table.probs[code][where] if code in table.probs else np.zeros(len(where))
            probs.append(np.where(inferred, 0, p).astype(np.float32))
        out.append(BaseCalls(strand, BASES[base], where, ref_of_query[query], codes, probs,
                             inferred))  # fmt: skip
    return out


def motif_sites(fasta, chrom: str, motifs: list[tuple[str, int]], mask: bool) -> dict:
    """The motif hits of chrom: (position, strand 0 + / 1 -) to the indices of the motifs
    that hit there (modkit's find_motif_hits on the upper-cased sequence unless mask)."""
    from numapore.pileup.positions import make_motif, motif_hits

    seq = fasta.fetch(chrom)
    if not mask:
        seq = seq.upper()
    sites: dict = {}
    for i, (raw, offset) in enumerate(motifs):
        for hit in motif_hits(seq, make_motif(raw, offset)):
            found = sites.setdefault(hit, [])
            if i not in found:
                found.append(i)
    return sites


def parse_motif(raw: str, offset: str):
    """--motif SEQ OFFSET as the pileup engine's Motif; refused as modkit refuses it (an
    offset that is no number or past the motif, a modified base other than A, C, G, T)."""
    from numapore.pileup.positions import make_motif

    try:
        at = int(offset)
    except ValueError:
        raise CommandError(f"--motif {raw} {offset}: the offset is not a number") from None
    motif = make_motif(raw.upper(), at)
    if motif.raw[at] not in "ACGT":
        raise CommandError(f"--motif {raw} {offset}: the modified base must be A, C, G or T")
    return motif


def add_threshold_options(parser: Parser, per_base: bool = True) -> None:
    """modkit's pass-threshold options: --filter-threshold (X, or with per_base B:X and
    repeatable), --mod-threshold CODE:X, --no-filtering, -p (estimate's percentile)."""
    if per_base:
        parser.add_argument("--filter-threshold", "--pass-threshold", action="append",
                            metavar="X")  # fmt: skip
    else:
        parser.add_argument("--filter-threshold", "--pass-threshold", type=float, metavar="X")
    parser.add_argument("--mod-threshold", "--mod-thresholds", dest="mod_thresholds",
                        action="append", metavar="CODE:X")  # fmt: skip
    parser.add_argument("--no-filtering", action="store_true")
    parser.add_argument("-p", "--filter-percentile", type=float, default=0.1)


def add_run_options(parser: Parser) -> None:
    """modkit's options of its own work: threads (the output does not depend on them),
    progress bars and log files."""
    parser.add_argument("-t", "--threads", type=non_negative, default=4, help="accepted")
    ignored(parser, "--suppress-progress", flag=True)
    ignored(parser, "--log-filepath", "--log")


def open_bam(path: str, indexed: bool):
    """pysam's reader of a BAM; refused as one line: missing, not a BAM, or (indexed) without
    an index."""
    import pysam

    need_file(path, "a BAM")
    try:
        bam = pysam.AlignmentFile(path, "rb", check_sq=False)
    except (OSError, ValueError) as err:
        raise CommandError(f"{path}: cannot read as BAM ({err})") from None
    if indexed and not bam.has_index():
        raise CommandError(f"{path}: no BAM index (.bai/.csi): samtools index it")
    return bam


def open_fasta(path: str):
    """pysam's reader of an indexed FASTA (the .fai made if missing); one line if bad."""
    import pysam

    need_file(path, "a FASTA")
    try:
        return pysam.FastaFile(path)
    except (OSError, ValueError) as err:
        raise CommandError(f"{path}: cannot read as FASTA ({err})") from None


SPAN = 100_000  # bases of a contig one worker does at a time (its rows held in memory)


def contig_spans(bam, size: int | None = None) -> list[tuple[str, int, int]]:
    """The contigs with mapped reads (index counts) in pieces of size (SPAN) bases, in BAM
    order."""
    size = size or SPAN
    mapped = {s.contig: s.mapped for s in bam.get_index_statistics()}
    return [(name, start, min(start + size, length))
            for name, length in zip(bam.references, bam.lengths, strict=True) if mapped.get(name)
            for start in range(0, length, size)]  # fmt: skip


class PerProcess:
    """A BAM (and FASTA) opened once in each process that uses it: pysam's readers share
    their file offsets across fork, so each worker opens its own."""

    def __init__(self, bam_path: str, fasta_path: str | None = None):
        """The paths (opened on first use)."""
        self.bam_path, self.fasta_path = bam_path, fasta_path
        self._opened: tuple | None = None

    def _open(self) -> tuple:
        """(pid, BAM, FASTA or None) of this process."""
        if self._opened is None or self._opened[0] != os.getpid():
            import pysam

            fasta = pysam.FastaFile(self.fasta_path) if self.fasta_path else None
            bam = pysam.AlignmentFile(self.bam_path, "rb", check_sq=False)
            self._opened = (os.getpid(), bam, fasta)
        return self._opened

    @property
    def bam(self):
        """This process's BAM reader."""
        return self._open()[1]

    @property
    def fasta(self):
        """This process's FASTA reader (None without a FASTA)."""
        return self._open()[2]


_JOB: Callable | None = None  # what forked workers run (inherited, not pickled)


def _run_job(item):
    """One item in a worker process."""
    return _JOB(item)


def ordered_map(job: Callable, items: list, threads: int):
    """job(item) of each item, in order, on `threads` forked processes (in this one for 1):
    the output does not depend on threads."""
    global _JOB
    if threads <= 1 or len(items) <= 1:
        yield from map(job, items)
        return
    import multiprocessing

    _JOB = job
    with multiprocessing.get_context("fork").Pool(min(threads, len(items))) as pool:
        yield from pool.imap(_run_job, items, chunksize=1)
