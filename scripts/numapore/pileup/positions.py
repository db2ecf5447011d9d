"""Motifs and position filters: modkit's RegexMotif (IUPAC to a regex, palindromes, hits on
both strands) and --include-bed's stranded intervals."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


from numapore.pileup.common import PileupError


@dataclass
class Motif:
    """A sequence motif and the offset of its modified base (modkit's RegexMotif)."""

    raw: str
    offset: int
    forward: re.Pattern
    reverse: re.Pattern
    reverse_offset: int
    palindrome: bool

    @property
    def label(self) -> str:
        """The name-column label, e.g. CG,0."""
        return f"{self.raw},{self.offset}"

    @property
    def length(self) -> int:
        """The motif's length."""
        return len(self.raw)


IUPAC = {
    "A": "A", "C": "C", "G": "G", "T": "T", "U": "U", "M": "[AC]", "R": "[AG]", "W": "[AT]",
    "S": "[CG]", "Y": "[CT]", "K": "[GT]", "V": "[ACG]", "H": "[ACT]", "D": "[AGT]",
    "B": "[CGT]", "X": "[ACGT]", "N": "[ACGT]",
}  # fmt: skip


def make_motif(raw: str, offset: int) -> Motif:
    """A motif as modkit parses it (IUPAC to a regex; palindromic if its reverse complement's
    regex is the same text)."""
    if len(raw) == 1 and raw not in "ACGT":
        raise PileupError("degenerate bases are not supported as single base motifs")
    try:
        pattern = "".join(IUPAC[c] for c in raw)
    except KeyError as err:
        raise PileupError(f"invalid IUPAC code in motif {raw!r}: {err.args[0]}") from None
    swap = {"A": "T", "C": "G", "G": "C", "T": "A", "U": "A", "[": "]", "]": "["}
    rc = "".join(swap.get(c, c) for c in reversed(pattern))
    if offset >= len(raw):
        raise PileupError(f"motif {raw} not long enough for offset {offset}")
    return Motif(
        raw,
        offset,
        re.compile(f"(?=({pattern}))"),
        re.compile(f"(?=({rc}))"),
        len(raw) - offset - 1,
        pattern == rc,
    )


def motif_hits(seq: str, motif: Motif) -> list[tuple[int, int]]:
    """(position, strand 0 + / 1 -) of every (overlapping) hit, as find_motif_hits."""
    hits = []
    if motif.palindrome:
        for m in motif.forward.finditer(seq):
            s = m.start()
            if motif.offset <= motif.reverse_offset:
                hits += [(s + motif.offset, 0), (s + motif.reverse_offset, 1)]
            else:
                hits += [(s + motif.reverse_offset, 1), (s + motif.offset, 0)]
    elif motif.length == 1:
        rv = {"A": "T", "C": "G", "G": "C", "T": "A"}[motif.raw]
        hits = [(i, 0 if c == motif.raw else 1) for i, c in enumerate(seq) if c in (motif.raw, rv)]
    else:
        hits = [(m.start() + motif.offset, 0) for m in motif.forward.finditer(seq)]
        hits += [(m.start() + motif.reverse_offset, 1) for m in motif.reverse.finditer(seq)]
        hits.sort(key=lambda h: h[0])
    return hits


BOTH, POS, NEG = 3, 1, 2  # strand rules as bit masks (1: + strand, 2: - strand)


@dataclass
class PositionFilter:
    """--include-positions: merged intervals per contig and strand (0 +, 1 -)."""

    intervals: dict[tuple[int, int], list[tuple[int, int]]]

    def contains(self, tid: int, pos: int, strand: int) -> bool:
        """Whether pos on strand is inside an interval."""
        ivs = self.intervals.get((tid, strand))
        if not ivs:
            return False
        import bisect

        i = bisect.bisect_right(ivs, (pos, math.inf)) - 1
        return i >= 0 and ivs[i][0] <= pos < ivs[i][1]

    def tids(self) -> list[int]:
        """The contigs with intervals, sorted."""
        return sorted({t for t, _ in self.intervals})


def merge_intervals(ivs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """rust-lapper's merge_overlaps (touching intervals merge too)."""
    out: list[list[int]] = []
    for s, e in sorted(ivs):
        if out and not out[-1][1] < s:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def bed_lines(handle, path: str):
    """The lines of a BED text file; a binary file (a BAM, a gzipped BED) said in one line."""
    try:
        yield from handle
    except UnicodeDecodeError:
        raise PileupError(f"{path}: not a BED text file (binary or compressed?)") from None


def read_position_filter(path: str, names: dict[str, int]) -> PositionFilter:
    """A BED3/BED6 file as modkit's StrandedPositionFilter (contigs not in the BAM skipped)."""
    per: dict[tuple[int, int], list] = {}
    try:
        handle = open(path)
    except OSError as err:
        raise PileupError(f"{path}: cannot read ({err.strerror})") from None
    with handle:
        for line in bed_lines(handle, path):
            parts = line.split()
            if not parts or len(parts) < 3:
                continue
            try:
                start, stop = int(parts[1]), int(parts[2])
            except ValueError:
                continue
            if len(parts) == 3:
                strands = (0, 1)
            elif len(parts) >= 6 and parts[5] in "+-.":
                strands = {"+": (0,), "-": (1,), ".": (0, 1)}[parts[5]]
            else:
                continue
            tid = names.get(parts[0])
            if tid is None:
                continue
            for s in strands:
                per.setdefault((tid, s), []).append((start, stop))
    if not per:
        raise PileupError(f"{path}: zero valid positions parsed from the BED file")
    return PositionFilter({k: merge_intervals(v) for k, v in per.items()})
