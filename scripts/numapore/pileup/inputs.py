"""The pileup's inputs as the planner reads them, without pysam where they allow it: a BAM's
header (names, lengths) and its .bai's counts of mapped reads (BamHeader), a FASTA through its
.fai (FastaIndex); pysam's AlignmentFile and FastaFile otherwise (a .csi, a URL, a compressed
FASTA, a missing index, a file that does not parse here), which offer the same attributes and
name the error. pysam and numpy are two thirds of a small pileup's memory (measured with
/usr/bin/time): the compiled core's route imports neither. Also what decides, on pysam's
records, whether a record counts and what the read listing says of it."""

from __future__ import annotations

import gzip
import os
import re
import struct
import zlib
from typing import NamedTuple

PSEUDO_BIN = 37450  # the BAI's per-reference bin of mapped and unmapped counts
BGZF_MAGIC = b"\x1f\x8b\x08\x04"  # how a BGZF block starts (gzip with an extra field)


class IndexStats(NamedTuple):
    """A reference's counts in the index, as pysam's get_index_statistics gives them."""

    contig: str
    mapped: int
    unmapped: int
    total: int


def bai_path(bam_path: str) -> str | None:
    """The BAM's .bai index (X.bam.bai or X.bai), None if it has none."""
    for candidate in (bam_path + ".bai", re.sub(r"\.bam$", ".bai", bam_path)):
        if candidate != bam_path and os.path.isfile(candidate):
            return candidate
    return None


class BamHeader:
    """What the planner reads of a BAM with a .bai, under pysam.AlignmentFile's names:
    references, lengths, get_tid, get_reference_length, has_index, get_index_statistics and
    nocoordinate (no records: the compiled core reads them)."""

    def __init__(self, references, lengths, mapped, unmapped, nocoordinate: int):
        """The header's names and lengths; the index's counts per reference and unplaced."""
        self.references, self.lengths = tuple(references), tuple(lengths)
        self._tids = {name: tid for tid, name in enumerate(self.references)}
        self._mapped, self._unmapped = mapped, unmapped
        self.nocoordinate = nocoordinate

    @classmethod
    def read(cls, path: str) -> BamHeader | None:
        """The header and .bai counts of path; None where pysam must read it."""
        index = bai_path(path)
        if index is None or "://" in path:
            return None
        try:
            names, lengths = _read_references(path)
            with open(index, "rb") as handle:
                counts = _read_bai_counts(handle.read(), len(names))
        except (OSError, EOFError, ValueError, struct.error, zlib.error, UnicodeDecodeError):
            return None
        return None if counts is None else cls(names, lengths, *counts)

    def get_tid(self, name: str) -> int:
        """The reference's index, -1 if it is not in the header."""
        return self._tids.get(name, -1)

    def get_reference_length(self, name: str) -> int:
        """The reference's length."""
        return self.lengths[self._tids[name]]

    def has_index(self) -> bool:
        """Always: only a BAM with a .bai is read here."""
        return True

    def get_index_statistics(self) -> list[IndexStats]:
        """Mapped and unmapped records per reference, from the .bai's pseudo-bins."""
        return [
            IndexStats(name, m, u, m + u)
            for name, m, u in zip(self.references, self._mapped, self._unmapped, strict=True)
        ]


def _read_references(path: str) -> tuple[list[str], list[int]]:
    """The BAM header's reference names and lengths (ValueError if it is not a BAM)."""
    with gzip.open(path, "rb") as bam:
        magic, l_text = struct.unpack("<4si", bam.read(8))
        if magic != b"BAM\1" or l_text < 0:
            raise ValueError("not a BAM")
        bam.seek(l_text, os.SEEK_CUR)
        (n_ref,) = struct.unpack("<i", bam.read(4))
        names, lengths = [], []
        for _ in range(n_ref):
            (l_name,) = struct.unpack("<i", bam.read(4))
            raw = bam.read(l_name + 4)
            if len(raw) != l_name + 4:
                raise EOFError
            names.append(raw[: l_name - 1].decode())
            lengths.append(struct.unpack_from("<i", raw, l_name)[0])
    return names, lengths


def _read_bai_counts(data: bytes, n_ref: int):
    """Per reference the mapped and unmapped counts of a BAI (0 without a pseudo-bin, as
    htslib's hts_idx_get_stat), and its records without coordinates; None if it does not
    match the BAM."""
    if data[:4] != b"BAI\1" or struct.unpack_from("<i", data, 4)[0] != n_ref:
        return None
    at = 8
    mapped, unmapped = [0] * n_ref, [0] * n_ref
    for ref in range(n_ref):
        (n_bin,) = struct.unpack_from("<i", data, at)
        at += 4
        for _ in range(n_bin):
            bin_id, n_chunk = struct.unpack_from("<Ii", data, at)
            if bin_id == PSEUDO_BIN and n_chunk == 2:
                mapped[ref], unmapped[ref] = struct.unpack_from("<QQ", data, at + 24)
            at += 8 + 16 * n_chunk
        (n_intv,) = struct.unpack_from("<i", data, at)
        at += 4 + 8 * n_intv
    if at > len(data):
        return None
    no_coor = struct.unpack_from("<Q", data, at)[0] if at + 8 <= len(data) else 0
    return mapped, unmapped, no_coor


def stale_index(bam_path: str) -> str | None:
    """The BAM's .bai when it is older than the BAM and does not fit it (one of its chunks
    starts where the BAM has no BGZF block: the BAM was rewritten after it was indexed), else
    None. An older index that fits is read, as htslib and modkit read it (a copy may write the
    index first)."""
    index = bai_path(bam_path)
    if index is None or "://" in bam_path:
        return None
    try:
        if os.path.getmtime(index) >= os.path.getmtime(bam_path):
            return None
        with open(index, "rb") as handle:
            offsets = _bai_block_offsets(handle.read())
        size = os.path.getsize(bam_path)
        with open(bam_path, "rb") as bam:
            for offset in offsets:
                bam.seek(offset)
                if offset >= size or bam.read(4) != BGZF_MAGIC:
                    return index
    except (OSError, struct.error):
        return index
    return None


def _bai_block_offsets(data: bytes, most: int = 4096) -> list[int]:
    """The BAM offsets of the BGZF blocks a BAI's chunks start in (at most `most`, evenly
    spread over the sorted offsets)."""
    if data[:4] != b"BAI\1":
        raise struct.error("not a BAI")
    (n_ref,) = struct.unpack_from("<i", data, 4)
    at, offsets = 8, set()
    for _ in range(n_ref):
        (n_bin,) = struct.unpack_from("<i", data, at)
        at += 4
        for _ in range(n_bin):
            bin_id, n_chunk = struct.unpack_from("<Ii", data, at)
            if bin_id != PSEUDO_BIN:
                for k in range(n_chunk):
                    offsets.add(struct.unpack_from("<Q", data, at + 8 + 16 * k)[0] >> 16)
            at += 8 + 16 * n_chunk
        (n_intv,) = struct.unpack_from("<i", data, at)
        at += 4 + 8 * n_intv
    ordered = sorted(offsets)
    step = max(len(ordered) // most, 1)
    return ordered[::step]


def open_bam(path: str):
    """The BAM for the planner: a BamHeader, else pysam's AlignmentFile (OSError or ValueError
    when it cannot be read)."""
    header = BamHeader.read(path)
    if header is not None:
        return header
    import pysam

    return pysam.AlignmentFile(path, "rb", check_sq=False)


class FastaIndex:
    """An uncompressed FASTA read through its .fai, under pysam.FastaFile's names: references
    and fetch (the same text: the bases as written, line ends left out)."""

    def __init__(self, path: str, index: dict[str, tuple[int, int, int, int]]):
        """path and its .fai entries: name -> (length, offset, bases per line, bytes per
        line)."""
        self.path, self.index = path, index
        self.references = tuple(index)
        self.handle = open(path, "rb")

    @classmethod
    def read(cls, path: str) -> FastaIndex | None:
        """The FASTA at path through path.fai; None where pysam must read it (no .fai: pysam
        makes one; compressed; a .fai that does not parse)."""
        try:
            with open(path, "rb") as handle:
                if handle.read(2) == b"\x1f\x8b":
                    return None
            index = {}
            with open(path + ".fai") as fai:
                for line in fai:
                    name, length, offset, bases, width = line.split("\t")[:5]
                    index[name] = (int(length), int(offset), int(bases), int(width))
        except (OSError, ValueError):
            return None
        if any(bases <= 0 or width < bases for _, _, bases, width in index.values()):
            return None
        return cls(path, index)

    def fetch(self, name: str, start: int, end: int) -> str:
        """The bases [start, end) of name (clipped to its length)."""
        length, offset, bases, width = self.index[name]
        start, end = max(start, 0), min(end, length)
        if start >= end:
            return ""
        first = offset + start // bases * width + start % bases
        last = offset + (end - 1) // bases * width + (end - 1) % bases + 1
        self.handle.seek(first)
        raw = self.handle.read(last - first)
        return raw.replace(b"\n", b"").replace(b"\r", b"").decode("latin-1")


def open_fasta(path: str):
    """The reference for the planner: a FastaIndex, else pysam's FastaFile (OSError or
    ValueError when it cannot be read)."""
    fasta = FastaIndex.read(path)
    if fasta is not None:
        return fasta
    import pysam

    return pysam.FastaFile(path)


# ---------------------------------------------------------------- pysam's records


def carries_calls(rec, tagged: bool = False) -> bool:
    """Whether the record carries modification calls: at least one probability (ML or Ml
    values), what the pileup counts; with tagged, an MM (or old-style Mm) tag, even one that
    lists no call (a read the basecaller or the modBAM writer looked at)."""
    if tagged:
        return rec.has_tag("MM") or rec.has_tag("Mm")
    return any(rec.has_tag(t) and len(rec.get_tag(t)) for t in ("ML", "Ml"))


def read_listing_line(rec) -> str:
    """A mapped primary record's line of the read listing: read id, MAPQ, 1 if it carries
    calls, its HP tag (0: none) (READ_LISTING_COLUMNS)."""
    called = int(carries_calls(rec))
    return f"{rec.query_name}\t{rec.mapping_quality}\t{called}\t{haplotype_of(rec)}\n"


def haplotype_of(rec) -> int:
    """The record's HP tag (0 without one, or when it is not an integer)."""
    if not rec.has_tag("HP"):
        return 0
    value = rec.get_tag("HP")
    return value if isinstance(value, int) else 0


def usable(rec) -> bool:
    """Whether a record enters modkit's pileup: mapped, primary, not a duplicate, with SEQ."""
    # flag bits unmapped, secondary, duplicate, supplementary; query_length 0: no SEQ (without
    # decoding the sequence, which the caller does once)
    return not rec.flag & 0xD04 and rec.query_length > 0
