"""Reads and reference files checked once, streaming with bounded memory, before any heavy job.

What the tools would choke on, silently or with a bare error, is refused with the file, the line,
the record and the reason: compression that does not match the name, truncated or corrupt gzip,
a FASTQ record cut short or with fewer qualities than bases, RNA (U) or non-base characters, a
header without a name, a name too long for the tools, records with an empty sequence (all
counted: the tidied copy would drop their empty lines and corrupt a FASTQ, faidx cannot index an
empty contig). What the tools can use once tidied is tidied in a normalised copy (only then:
otherwise the input is linked): lowercase read bases are uppercased (nanopolish makes no calls
on them), CR or CRLF line ends become LF, blank lines go.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from numapore.base.atomic import atomic_output
from numapore.base.errors import InputError
from numapore.base.textfiles import is_gzip, open_maybe_gzip

PIECE = 1 << 16  # longest piece of a line held in memory at once
# IUPAC nucleotide codes; U (RNA) gets its own reason.
BASES = "ACGTNRYKMSWBDHV"
NOT_A_BASE = str.maketrans("", "", BASES + BASES.lower())
# BAM stores a read name in at most 254 characters (samtools refuses longer ones).
MAX_READ_NAME = 254
# minimap2's index (.mmi) stores a contig name's length in one byte (uint8_t in mm_idx_dump,
# index.c): a longer name is cut to its length modulo 256, and nanopolish aborts on the BAM.
MAX_CONTIG_NAME = 255
NAME = re.compile(r"\S*")


@dataclass
class SequenceCheck:
    """What a check found: records, and what a normalised copy would tidy."""

    records: int = 0
    empty_records: int = 0
    lowercase: bool = False
    blank_lines: bool = False
    cr_line_ends: bool = False

    def needs_copy(self, kind: str) -> bool:
        """True when the tools need a tidied copy rather than the file itself."""
        return self.blank_lines or self.cr_line_ends or (kind == "reads" and self.lowercase)


def is_bam(path: Path) -> bool:
    """Whether a gzip (BGZF) file holds a BAM: its text starts with BAM's magic."""
    try:
        with gzip.open(path, "rb") as raw:
            return raw.read(4) == b"BAM\1"
    except (OSError, EOFError):
        return False


def open_text(path: Path) -> TextIO:
    """Open a FASTA/FASTQ file as text with universal line ends; its compression must match its
    name (tools choose gzip by the .gz suffix)."""
    compressed = is_gzip(path)
    named_gz = path.name.lower().endswith(".gz")
    if compressed and is_bam(path):
        raise InputError(f"{path}: is a BAM file (alignments), not FASTA/FASTQ text")
    if compressed and not named_gz:
        raise InputError(
            f"{path}: is gzip-compressed but its name does not end in .gz; rename it "
            f"to {path.name}.gz"
        )
    if named_gz and not compressed:
        raise InputError(
            f"{path}: its name ends in .gz but it is not gzip-compressed; remove the .gz suffix"
        )
    return io.TextIOWrapper(open_maybe_gzip(path, "rb"), encoding="latin-1", newline=None)


def line_pieces(handle: TextIO) -> Iterator[tuple[int, str, bool]]:
    """(line number, piece of the line without its end, first piece of the line?)."""
    number, first = 1, True
    while piece := handle.readline(PIECE):
        ended = piece.endswith("\n")
        yield number, piece.removesuffix("\n"), first
        number, first = (number + 1, True) if ended else (number, False)


class Parser:
    """FASTA/FASTQ records as kseq (minimap2, nanopolish) reads them, labelling each piece
    of each line: header, sequence, plus, quality or blank; problems raise InputError."""

    def __init__(self, path: Path, kind: str, fmt: str) -> None:
        self.path, self.kind, self.fastq = path, kind, fmt.startswith("fastq")
        self.check = SequenceCheck()
        self.max_name = MAX_READ_NAME if kind == "reads" else MAX_CONTIG_NAME
        self.record_start = (0, "")  # the current record's header line and name
        self.first_empty: tuple[int, int, str] | None = None  # record, line, name

    def fail(self, line: int, reason: str) -> None:
        """Raise the problem naming the file, the line and the record."""
        record = f" (record {self.check.records})" if self.check.records else ""
        raise InputError(f"{self.kind} file {self.path}, line {line}{record}: {reason}")

    def pieces(self) -> Iterator[tuple[str, str, bool]]:
        """(role, piece, first piece of its line?) for every piece of the file, checked."""
        handle = open_text(self.path)
        line = 0
        try:
            with handle:
                try:
                    for line, role, piece, first in self._roles(handle):  # noqa: B007
                        yield role, piece, first
                except InputError:  # garbage from a damaged gzip stream? its checksum says
                    while self.path.name.lower().endswith(".gz") and handle.read(PIECE):
                        pass
                    raise
                newlines = handle.newlines or ()
        except EOFError:
            self.fail(line + 1, "the gzip data is truncated (the file was cut short)")
        except (gzip.BadGzipFile, zlib.error) as err:
            self.fail(line + 1, f"the gzip data is corrupt ({err})")
        ends = (newlines,) if isinstance(newlines, str) else newlines  # str, tuple or None
        self.check.cr_line_ends = any(end != "\n" for end in ends)

    def _roles(self, handle: TextIO) -> Iterator[tuple[int, str, str, bool]]:
        """The state machine behind pieces(): (line, role, piece, first)."""
        marker = "@" if self.fastq else ">"
        state, seq_len, qual_len, name_len, name_open, line = "start", 0, 0, 0, False, 0
        for line, piece, first in line_pieces(handle):
            if first:  # a new line: where does it belong?
                if state == "header":
                    state = "sequence"
                elif state == "plus":
                    state = "quality"
                if state == "quality" and qual_len >= seq_len:
                    state = "next"
                elif state == "quality" and qual_len and piece.startswith("@"):
                    # A quality line after the first that starts with '@' while qualities are
                    # missing: the next record's header (a first quality line may start with
                    # '@': '@' is quality 31)
                    self.fail(
                        line - 1, f"quality shorter than the sequence ({qual_len} < {seq_len})"
                    )
                if not piece and state in ("start", "next", "sequence"):
                    self.check.blank_lines = True
                    yield line, "blank", piece, first
                    continue
                if state in ("start", "next") or (
                    state == "sequence" and piece[0] == marker == ">"
                ):
                    if not piece.startswith(marker):
                        where = "does not start" if state == "start" else "a record does not start"
                        self.fail(line, f"{where} with '{marker}' as {self._format()} should")
                    if self.check.records:
                        self._end_record(seq_len)
                    self.check.records += 1
                    state, seq_len, qual_len, name_len, name_open = "header", 0, 0, 0, True
                    name = NAME.match(piece, 1).group()
                    if not name:
                        self.fail(line, "header without a name")
                    self.record_start = (line, name)
                elif state == "sequence" and self.fastq and piece.startswith("+"):
                    state = "plus"
            if state == "header":
                if name_open:  # the name may run over several pieces of a long line
                    name = NAME.match(piece, 1 if first else 0).group()
                    name_len += len(name)
                    name_open = len(name) == len(piece) - (1 if first else 0)
                    if name_len > self.max_name:
                        self.fail(
                            line, f"name longer than {self.max_name} characters ({self._why()})"
                        )
                yield line, "header", piece, first
            elif state == "plus":
                yield line, "plus", piece, first
            elif state == "quality":
                qual_len += len(piece)
                if qual_len > seq_len:
                    self.fail(line, f"quality longer than the sequence ({qual_len} > {seq_len})")
                yield line, "quality", piece, first
            else:
                self._check_bases(line, piece)
                seq_len += len(piece)
                yield line, "sequence", piece, first
        if state == "start":
            raise InputError(f"{self.kind} file {self.path} is empty (no records)")
        if self.fastq and state in ("header", "sequence"):
            self.fail(line, "truncated: the last record has no '+' line and no qualities")
        if self.fastq and state in ("plus", "quality") and qual_len < seq_len:
            self.fail(
                line, f"truncated: quality shorter than the sequence ({qual_len} < {seq_len})"
            )
        self._end_record(seq_len)
        if self.check.empty_records:
            self._refuse_empty_records()

    def _end_record(self, seq_len: int) -> None:
        """Count the record just read if its sequence is empty; keep where the first one was."""
        if seq_len == 0:
            self.check.empty_records += 1
            if self.first_empty is None:
                self.first_empty = (self.check.records, *self.record_start)

    def _refuse_empty_records(self) -> None:
        """Raise: how many records have an empty sequence, and where the first is."""
        count = self.check.empty_records
        record, line, name = self.first_empty
        what = "read" if self.kind == "reads" else "contig"
        where = f"{what} {name[:60]!r}, record {record}, line {line}"
        if count == 1:
            found = f"1 record has an empty sequence ({where})"
        else:
            found = f"{count} records have an empty sequence (the first: {where})"
        if self.kind == "reads":
            why = "a read without bases cannot be aligned or called: remove them"
        else:  # samtools faidx leaves it out of the index, or fails when it is the last
            why = "samtools faidx cannot index an empty contig: remove it"
        raise InputError(f"{self.kind} file {self.path}: {found}; {why}")

    def _check_bases(self, line: int, piece: str) -> None:
        """Refuse RNA and non-base characters; note lowercase bases."""
        bad = piece.translate(NOT_A_BASE)
        if bad:
            if bad[0] in "Uu":
                self.fail(line, "RNA alphabet (U): nanopolish calls CpG methylation on DNA reads")
            self.fail(line, f"{bad[0]!r} is not a nucleotide code")
        if not self.check.lowercase and piece != piece.upper():
            self.check.lowercase = True

    def _format(self) -> str:
        """FASTA or FASTQ."""
        return "FASTQ" if self.fastq else "FASTA"

    def _why(self) -> str:
        """Why names are limited."""
        if self.kind == "reads":
            return "BAM files hold read names of up to 254 characters"
        return "minimap2's index keeps names of up to 255 characters"


# Bytes read at a time by the plain-FASTQ check; upper-case bases only (anything else: the parser).
FAST_BLOCK = 1 << 22
UPPER_BASES = BASES.encode()


class NotPlain(Exception):
    """A FASTQ that the block check does not take: the line parser reads it instead."""


def plain_fastq_headers(path: Path, kind: str) -> Iterator[list[bytes]]:
    """The header lines of a FASTQ that is plainly well formed, a block of whole 4-line records
    at a time (short reads have millions of short lines: the parser's work per line is most of
    its time): headers '@' + a name within the limit, upper-case bases, '+' lines, as many
    qualities as bases, LF line ends, a final line end. NotPlain, once the blocks before it are
    given, when a record is not so plain, the file holds none or its gzip stream is damaged: the
    Parser then reads the file and names the problem, or what a copy would tidy. Accepting here
    means Parser accepts the same records untidied."""
    max_header = (MAX_READ_NAME if kind == "reads" else MAX_CONTIG_NAME) + 1
    records, rest = 0, b""
    try:
        with open_text(path) as text:
            raw = text.buffer  # the (decompressed) bytes under the text layer
            while block := raw.read(FAST_BLOCK):
                lines = (rest + block).split(b"\n")
                last = lines.pop()  # an unfinished line (b"" after a line end)
                whole = len(lines) // 4 * 4
                rest = b"\n".join([*lines[whole:], last])
                heads, seqs = lines[0:whole:4], lines[1:whole:4]
                plus, quals = lines[2:whole:4], lines[3:whole:4]
                if not heads:
                    continue
                head_lengths, seq_lengths = list(map(len, heads)), list(map(len, seqs))
                if (
                    b"\r" in block
                    or not all(h.startswith(b"@") and h[1:2].strip() for h in heads)
                    or max(head_lengths) > max_header
                    or not all(p.startswith(b"+") for p in plus)
                    or min(seq_lengths) == 0
                    or seq_lengths != list(map(len, quals))
                    or b"".join(seqs).translate(None, UPPER_BASES)
                ):
                    raise NotPlain
                records += len(heads)
                yield heads
    except (EOFError, OSError, zlib.error):  # damaged gzip: the parser says where
        raise NotPlain from None
    if not records or rest:
        raise NotPlain


def plain_fastq_records(path: Path, kind: str) -> int | None:
    """The records of a FASTQ that is plainly well formed (plain_fastq_headers), None when it
    is not."""
    try:
        return sum(len(heads) for heads in plain_fastq_headers(path, kind))
    except NotPlain:
        return None


def check_sequences(path: Path, kind: str, fmt: str) -> SequenceCheck:
    """Read the whole file once (bounded memory); raise InputError on the first problem."""
    if fmt.startswith("fastq"):
        records = plain_fastq_records(path, kind)
        if records is not None:
            return SequenceCheck(records=records)
    parser = Parser(path, kind, fmt)
    for _ in parser.pieces():
        pass
    return parser.check


def write_normalised(path: Path, target: Path, kind: str, fmt: str) -> None:
    """Write a tidied copy to target: LF line ends, no blank lines, read bases uppercased (gzip
    if target's name ends in .gz)."""
    opener = gzip.open if target.name.endswith(".gz") else open
    kwargs = {"compresslevel": 1} if opener is gzip.open else {}
    with opener(target, "wt", encoding="latin-1", **kwargs) as out:
        started = False
        for role, piece, first in Parser(path, kind, fmt).pieces():
            if role == "blank":
                continue
            if first and started:
                out.write("\n")
            if role == "sequence" and kind == "reads":
                piece = piece.upper()
            out.write(piece)
            started = True
        out.write("\n")


def stage_sequences(path: Path, target: Path, kind: str, fmt: str) -> str:
    """Check path; place it at target as a link, or as a tidied copy when the tools need one.
    Returns what was done, for the log."""
    check = check_sequences(path, kind, fmt)
    if check.needs_copy(kind):
        with atomic_output(target) as tmp:
            write_normalised(path, tmp, kind, fmt)
        tidied = [
            what
            for what, found in (
                ("lowercase bases uppercased", check.lowercase and kind == "reads"),
                ("CR line ends made LF", check.cr_line_ends),
                ("blank lines removed", check.blank_lines),
            )
            if found
        ]
        return f"{path}: {check.records} records, copied with {', '.join(tidied)}"
    return link_sequences(path, target, check.records)


def link_sequences(path: Path, target: Path, records: int) -> str:
    """Place a checked file that needs no tidying at target as a link; what was done, for the
    log."""
    with atomic_output(target) as tmp:
        os.symlink(os.path.realpath(path), tmp)
    return f"{path}: {records} records, linked"
