"""A modBAM sample's reads staged for realignment: FASTQ whose headers carry the MM, ML and MN
tags, from a BAM/CRAM (an aligned one's primary records not marked duplicate: `samtools fastq
-F 0xD00 -T ...`; an unaligned one's every record) or a FASTQ that has them. The aligners copy
the tags from the headers into their records (minimap2 -y, bwa -C, bowtie2
--sam-append-comment), so the basecaller's calls survive the realignment.

The staged reads' ids go to a read id table (numapore.inputs.readids), for the read accounting
(and the alignment check of a scattered alignment); a read id that repeats stops staging with
one line. The output may be a named pipe that the aligner reads as it comes (Snakemake's
pipe()): a check that needs every read (no tags on any, a repeated id) then fails after the
stream ended, and Snakemake fails the aligner's job with it.

Every record is counted: in, left out (an aligned input's secondary, supplementary and marked
duplicate records: samtools flagstat counts them beside the staging), staged with
tags, without (kept, aligned, no calls), or with an MN tag that does not fit the sequence (kept
without its tags, named in the log and listed: htslib and modkit refuse such tags). A sample
whose reads carry no usable MM/ML at all stops here with one line.
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import stat
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path

from numapore.base.atomic import atomic_output
from numapore.base.errors import InputError
from numapore.inputs.kinds import MODBAM_SUFFIXES
from numapore.inputs.seqcheck import open_text

# The tags kept (Mm/Ml: the names before SAM's 2021 spec, which modkit still reads).
KEPT_TAGS = "MM,ML,MN,Mm,Ml"
MOD_TAGS = (b"MM:Z:", b"Mm:Z:")
KEPT_PREFIXES = tuple(f"{tag}:".encode() for tag in KEPT_TAGS.split(","))
# An upstream phasing's haplotags (haplotype, phase set: WhatsHap's, as modkit --phased reads
# them): kept too, and not dropped with the modification tags when an MN does not fit.
HAPLOTAG_TAGS = "HP,PS"
HAPLOTAG = b"HP:i:"


# Why a staged read carries no calls (the listing beside the staged reads; read accounting).
NO_TAGS = "no MM/ML tags in the input"
MN_MISMATCH = "MN tag does not match its sequence length: tags dropped (as htslib and modkit do)"
NAMED_IN_LOG = 20  # reads of a kind named in the log; the listing names them all
PIPE_BUFFER = 1 << 20  # bytes a pipe from samtools fastq, or to the aligner, holds
FASTQ_BLOCK = 4 << 20  # bytes of FASTQ checked at a time (more for a longer record)
# What htslib says of a BAM/CRAM cut short or corrupt (lower case).
DAMAGED_INPUT = ("truncated", "failed to read bgzf", "failed to read bam record", "inflate",
                 "invalid bam binary", "crc", "failed to read header")  # fmt: skip


@dataclass
class StagedReads:
    """What staging found: the input's records and those left out, reads written, with and
    without modification tags, and whether the input was aligned (and to which reference)."""

    records: int = 0  # in the input (a FASTQ: its reads)
    secondary: int = 0  # left out: the read's primary record is realigned
    supplementary: int = 0  # left out, as secondary records
    duplicates: int = 0  # primary records marked duplicate (0x400): left out, as modkit does
    # Staged: an aligned input's primary records not marked duplicate; an unaligned input's
    # (or a FASTQ's) every record.
    reads: int = 0
    with_tags: int = 0
    mn_mismatch: int = 0  # reads whose MN is not their length: staged without their tags
    with_haplotag: int = 0  # reads with an HP tag (an upstream phasing's), kept
    aligned_input: bool = False
    # Reference sequences the input was aligned to that the sample's reference lacks (a few).
    other_reference: str = ""

    @property
    def without_tags(self) -> int:
        """Reads staged without MM/ML tags in the input (aligned, but without calls)."""
        return self.reads - self.with_tags - self.mn_mismatch

    @property
    def left_out(self) -> int:
        """Records of the input not staged (secondary, supplementary, duplicates)."""
        return self.secondary + self.supplementary + self.duplicates

    def summary(self) -> str:
        """One line for the log."""
        line = f"{self.reads} reads staged, {self.with_tags} with MM/ML tags"
        if self.without_tags:
            line += f", {self.without_tags} without (aligned; no modification calls)"
        if self.mn_mismatch:
            line += f", {self.mn_mismatch} whose MN tag does not match their length (tags dropped)"
        if self.with_haplotag:
            line += f", {self.with_haplotag} with an HP tag (kept)"
        left = {
            "secondary": self.secondary,
            "supplementary": self.supplementary,
            "marked duplicate": self.duplicates,
        }
        if self.left_out:
            line += "; records left out: " + ", ".join(f"{n} {w}" for w, n in left.items() if n)
        return line

    def warnings(self, sample: str, reference: str, listing: str, log: str) -> list[str]:
        """What a user must hear after the run (one line each): reads without calls for want
        of tags, MN tags that do not fit, an input aligned to another reference."""
        lines = []
        if self.without_tags:
            lines.append(
                f"sample '{sample}': {self.without_tags} of its {self.reads} reads carry no MM/ML "
                f"tags: aligned, without modification calls (listed in {listing})"
            )
        if self.mn_mismatch:
            lines.append(
                f"sample '{sample}': {self.mn_mismatch} read(s) have an MN tag that does not "
                f"match their sequence length: aligned without their tags (named in {log})"
            )
        if self.other_reference:
            lines.append(
                f"sample '{sample}': its reads file was aligned to another reference "
                f"({self.other_reference} are not in {reference}): its reads were realigned "
                "to the sample's reference"
            )
        return lines

    def write(self, path: Path) -> None:
        """The counts as a two-line TSV (header, values), complete or absent."""
        names = [f.name for f in fields(self)]
        with atomic_output(path) as tmp:
            values = (getattr(self, n) for n in names)
            Path(tmp).write_text("\t".join(names) + "\n" + "\t".join(map(str, values)) + "\n")

    @classmethod
    def read(cls, path: str | os.PathLike) -> StagedReads:
        """The counts write() wrote."""
        header, values = Path(path).read_text().splitlines()[:2]
        row = dict(zip(header.split("\t"), values.split("\t"), strict=True))
        kinds = {f.name: f.type for f in fields(cls)}
        parsed = {
            k: (v == "True" if kinds[k] == "bool" else int(v) if kinds[k] == "int" else v)
            for k, v in row.items()
        }
        return cls(**parsed)


def copy_fastq(
    readinto: Callable[[memoryview], int], write: Callable[[memoryview | bytes], object],
    source: Path, check: Callable[[bytes, int], bytes | None],
) -> None:  # fmt: skip
    """Copy the 4-line FASTQ records readinto gives to write, a block at a time: the bytes go
    through as they are (no decoding, no line rebuilt), so staging costs little beside the
    aligner. check(header line, sequence length) sees each record's header, line end included,
    and returns a header line to write in its place, or None to keep it. A record whose third
    line is more than '+' is written with '+' alone; blank lines between records are dropped;
    the last record may lack its line end. InputError naming the record when one is cut short.
    Line ends are '\n' alone: samtools writes them so, and open_text makes them so."""
    buffer = bytearray(FASTQ_BLOCK)
    filled, ended = 0, False
    while not ended:
        if filled == len(buffer):  # a record longer than the buffer: make room for it
            buffer.extend(bytes(len(buffer)))
        with memoryview(buffer) as view:
            got = readinto(view[filled:])
        filled += got
        if not got:
            ended = True
            if filled and buffer[filled - 1] != 0x0A:  # the last line lacks its end
                del buffer[filled:]
                buffer.append(0x0A)
                filled += 1
        done = copy_fastq_records(buffer, filled, write, source, check)
        if done:  # the incomplete record left to the front
            buffer[: filled - done] = buffer[done:filled]
            filled -= done
    if buffer[:filled].strip():
        name = bytes(buffer[:filled]).split(b"\n", 1)[0].strip()[:60].decode("latin-1")
        raise InputError(f"reads file {source}: FASTQ record {name!r} is cut")


def copy_fastq_records(
    buffer: bytearray, end: int, write: Callable[[memoryview | bytes], object], source: Path,
    check: Callable[[bytes, int], bytes | None],
) -> int:  # fmt: skip
    """copy_fastq's work on one block: the complete records of buffer[:end] checked and written
    (each run of unchanged records as one piece); returns where the first incomplete record
    starts."""
    find = buffer.find
    position = start = 0  # start: where the bytes not yet written begin
    with memoryview(buffer) as view:
        while (header_end := find(b"\n", position, end)) >= 0:
            if buffer[position] != 0x40 and not buffer[position:header_end].strip():  # not '@'
                if position > start:  # a blank line between records: dropped
                    write(view[start:position])
                position = start = header_end + 1
                continue
            seq_end = find(b"\n", header_end + 1, end)
            plus_end = find(b"\n", seq_end + 1, end) if seq_end >= 0 else -1
            qual_end = find(b"\n", plus_end + 1, end) if plus_end >= 0 else -1
            if qual_end < 0:  # the record goes on in the next block
                break
            header = bytes(view[position : header_end + 1])
            if not header.startswith(b"@") or buffer[seq_end + 1] != 0x2B:  # '+'
                name = header.strip()[:60].decode("latin-1")
                raise InputError(f"reads file {source}: FASTQ record {name!r} is cut")
            new_header = check(header, seq_end - header_end - 1)
            if new_header is not None or plus_end != seq_end + 2:
                if position > start:
                    write(view[start:position])
                seq, qual = view[header_end + 1 : seq_end + 1], view[plus_end + 1 : qual_end + 1]
                write(b"".join((new_header or header, seq, b"+\n", qual)))
                start = qual_end + 1
            position = qual_end + 1
        if position > start:
            write(view[start:position])
    return position


def has_mod_tags(tags: list[bytes]) -> bool:
    """Whether a FASTQ header's fields after the read name hold an MM (or old-style Mm) tag."""
    return any(field.startswith(MOD_TAGS) for field in tags)


def samtools_fastq(
    source: Path, reference: Path, threads: int, every_record: bool = False
) -> subprocess.Popen:
    """samtools fastq of a BAM/CRAM's primary records not marked duplicate, or of every record
    (every_record), tags in the headers (a CRAM is decoded against the sample's reference)."""
    argv = ["samtools", "fastq", "-F", "0" if every_record else "0xD00"]
    argv += ["-T", f"{KEPT_TAGS},{HAPLOTAG_TAGS}"]
    if threads > 1:  # one to decompress; beside the aligner (threads 0) it keeps to one thread
        argv += ["-@", str(threads - 1)]
    if source.name.lower().endswith(".cram"):
        argv += ["--reference", str(reference)]
    # Unbuffered: copy_fastq reads the pipe straight into its own block.
    return subprocess.Popen([*argv, str(source)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            bufsize=0)  # fmt: skip


def widen_pipe(fd: int) -> None:
    """Let a pipe hold PIPE_BUFFER bytes (Linux; 64 KiB by default), so the reads cross it in
    fewer, larger pieces; anything but a pipe is left as it is."""
    if stat.S_ISFIFO(os.fstat(fd).st_mode):
        with suppress(OSError):  # above the system's limit, or not Linux
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BUFFER)


def write_all(out: io.RawIOBase, data: memoryview | bytes) -> None:
    """Write every byte of data to an unbuffered file (a pipe may take part of it at a time)."""
    view = memoryview(data)
    while view:
        view = view[out.write(view) :]


def reference_names(source: Path) -> list[str]:
    """The reference sequences a BAM/CRAM's header lists (none: it was not aligned)."""
    header = subprocess.run(["samtools", "view", "-H", str(source)], capture_output=True, text=True)
    return [
        field[3:]
        for line in header.stdout.splitlines()
        if line.startswith("@SQ")
        for field in line.split("\t")
        if field.startswith("SN:")
    ]


def cram_reference(source: Path) -> str:
    """Where a CRAM's header says its reference was (the first @SQ's UR), or ''."""
    header = subprocess.run(["samtools", "view", "-H", str(source)], capture_output=True, text=True)
    for line in header.stdout.splitlines():
        if line.startswith("@SQ"):
            for field in line.split("\t"):
                if field.startswith("UR:"):
                    return field[3:].removeprefix("file://")
    return ""


def record_counts(source: Path) -> dict[str, int]:
    """A BAM/CRAM's records by samtools flagstat (one pass; a CRAM needs no reference for it):
    total, secondary, supplementary, primary duplicates (QC-passed and failed together)."""
    done = subprocess.run(["samtools", "flagstat", "-O", "tsv", str(source)], capture_output=True,
                          text=True)  # fmt: skip
    counts = {}
    for line in done.stdout.splitlines():
        passed, failed, what = line.split("\t", 2)
        if passed.isdigit() and failed.isdigit():
            counts[what] = int(passed) + int(failed)
    if done.returncode != 0 or "primary duplicates" not in counts:
        raise InputError(f"reads file {source}: samtools flagstat cannot read it")
    return {
        "records": counts["total (QC-passed reads + QC-failed reads)"],
        "secondary": counts["secondary"],
        "supplementary": counts["supplementary"],
        "duplicates": counts["primary duplicates"],
    }


def fasta_names(fai: Path) -> set[str]:
    """The sequence names of a faidx index."""
    return {line.split("\t", 1)[0] for line in fai.read_text().splitlines() if line}


def mn_mismatch(tags: list[bytes], length: int) -> bool:
    """Whether a FASTQ header's MN tag (the length its MM/ML were written for) is not length."""
    return any(f.startswith(b"MN:i:") and f[5:] != b"%d" % length for f in tags)


def without_mod_tags(name: bytes, tags: list[bytes]) -> bytes:
    """A FASTQ header line without its modification tags (MM, ML, MN and the old Mm, Ml)."""
    return b"\t".join([name, *(f for f in tags if not f.startswith(KEPT_PREFIXES))]) + b"\n"


def samtools_error(source: Path, reference: Path, error: str, returncode: int) -> InputError:
    """Why samtools could not read a BAM/CRAM, in one line."""
    if source.name.lower().endswith(".cram") and "reference" in error.lower():
        written = cram_reference(source)
        where = f" ({written}, as its header says)" if written else ""
        return InputError(
            f"reads file {source}: its reference is not found: a CRAM is decoded against the "
            f"reference it was written with{where}, and neither the sample's reference "
            f"{reference} nor that file holds it; give that FASTA as the sample's reference"
        )
    lines = [x for x in error.splitlines() if not x.startswith("[M::")]
    damaged = [x for x in lines if any(m in x.lower() for m in DAMAGED_INPUT)]
    if damaged:  # samtools then says it could not write: the input is at fault, not the output
        detail = re.sub(r"^\[[A-Z]::\w+\] ", "", damaged[0])
        return InputError(
            f"reads file {source} is truncated or damaged: samtools cannot read it to its end "
            f"({detail}); copy or download it again in full"
        )
    detail = lines[-1] if lines else f"exit {returncode}"
    return InputError(f"reads file {source}: samtools cannot read it: {detail}")


def stage_modbam_reads(
    source: Path, output: Path, reference: Path, threads: int, fai: Path | None = None,
    listing: Path | None = None, ids: Path | None = None,
    check_first: Callable[[], None] | None = None,
    finish: Callable[[StagedReads], None] | None = None,
) -> StagedReads:  # fmt: skip
    """Write source's reads as FASTQ with their tags to output (complete or absent), the reads
    staged without calls with the reason to listing, and the reads' ids to the read id table
    ids; InputError when nothing usable is there or a read id repeats. fai: the sample's
    reference index, to tell whether an aligned input was aligned to another reference.
    check_first: a check run once output is open (its InputError closes it: an aligner
    reading it as a pipe sees its end, rather than waiting for it to open). finish: run with
    what staging counted once every check passed, before output closes: what it writes (the
    counts) is there when an aligner reading the pipe sees its end, and its InputError fails
    the staging before that end."""
    # Imported here, not with the module: the workflow imports StagedReads when it starts, and
    # the read id tables' module loads polars (about 0.4 s of CPU a Snakemake start).
    from numapore.inputs.readids import IdColumnBuilder, repeats, write_read_id_table

    staged = StagedReads()
    bam = source.name.lower().endswith(MODBAM_SUFFIXES)
    counting = process = None
    if bam:
        names = reference_names(source)
        staged.aligned_input = bool(names)
        if names:
            # Only an aligned input has records to leave out: samtools flagstat counts them in a
            # thread while the FASTQ pass runs. An unaligned input's records are all staged and
            # counted by the pass itself, without a second decompression of the input.
            pool = ThreadPoolExecutor(max_workers=1)
            counting = pool.submit(record_counts, source)
            pool.shutdown(wait=False)
            if fai is not None:
                known = fasta_names(fai)
                other = [n for n in names if n not in known]
                more = f" and {len(other) - 3} more" if len(other) > 3 else ""
                staged.other_reference = ", ".join(other[:3]) + more
        process = samtools_fastq(source, reference, threads, every_record=not names)
    untagged: list[tuple[str, str]] = []
    read_names = IdColumnBuilder()

    def check(header: bytes, length: int) -> bytes | None:
        """Count a staged read and keep its id; its header without the tags if its MN does
        not fit its sequence."""
        staged.reads += 1
        first, *tags = header.split()
        name = first[1:].decode("latin-1")
        read_names.add(name)
        if any(field.startswith(HAPLOTAG) for field in tags):
            staged.with_haplotag += 1
        if not has_mod_tags(tags):
            untagged.append((name, NO_TAGS))
        elif mn_mismatch(tags, length):
            staged.mn_mismatch += 1
            untagged.append((name, MN_MISMATCH))
            return without_mod_tags(first, tags)
        else:
            staged.with_tags += 1
        return None

    with atomic_output(output) as tmp, open(tmp, "wb", buffering=0) as out:
        if check_first is not None:
            check_first()
        widen_pipe(out.fileno())
        if process is not None:
            handle = process.stdout
            widen_pipe(handle.fileno())
            readinto = handle.readinto
        else:  # a FASTQ (any line ends, maybe gzipped), as bytes
            handle = open_text(source)

            def readinto(view: memoryview) -> int:
                """The FASTQ's next characters into view, one byte each (latin-1)."""
                data = handle.read(len(view)).encode("latin-1")
                view[: len(data)] = data
                return len(data)

        try:
            copy_fastq(readinto, partial(write_all, out), source, check)
        finally:
            handle.close()
        if process is not None:
            error = process.stderr.read().decode(errors="replace").strip()
            if process.wait() != 0:
                raise samtools_error(source, reference, error, process.returncode)
        if counting is None:
            staged.records = staged.reads
        else:
            counts = counting.result()  # flagstat's InputError if it could not read the input
            staged.records = counts.pop("records")
            for key, value in counts.items():
                setattr(staged, key, value)
        if staged.reads == 0:
            why = " (no primary records)" if staged.aligned_input else ""
            raise InputError(f"reads file {source}: no reads{why}")
        if staged.with_tags == 0:
            raise InputError(
                f"reads file {source}: none of its {staged.reads} reads carries MM/ML tags"
                + (" that fit its sequence (MN)" if staged.mn_mismatch else "")
                + ": it holds no modification calls (basecall with modified-base models, e.g. "
                "dorado --modified-bases, and keep the tags: samtools fastq -T MM,ML,MN)"
            )
        if staged.records != staged.reads + staged.left_out:
            raise InputError(
                f"reads file {source}: {staged.records} records, but {staged.reads} staged and "
                f"{staged.left_out} left out (secondary, supplementary, duplicates)"
            )
        staged_ids = read_names.column()
        if len(repeated := repeats(staged_ids)):  # the read would be aligned, and counted, twice
            raise InputError(
                f"reads file {source}: {repeated.n_unique()} read id(s) occur in more than one "
                f"staged record (e.g. {repeated.unique().sort()[0]}): each read must occur "
                "once; remove the repeats"
            )
        if ids is not None:
            write_read_id_table(staged_ids, ids)
        if listing is not None:
            with atomic_output(listing) as tmp_listing:
                rows = "".join(f"{name}\t{why}\n" for name, why in untagged)
                Path(tmp_listing).write_text("read_id\treason\n" + rows)
        if finish is not None:
            finish(staged)
    return staged


class StagingFailed(InputError):
    """The staging whose reads streamed into an align job failed (it said why, in its own
    `numapore:` line): the align job keeps nothing and only points at it."""


def check_streamed_staging(counts: Path, sample: str, log: str) -> None:
    """StagingFailed when the staging whose reads streamed into an align job failed: it writes its
    counts before the reads end (stage_modbam_reads' finish) and Snakemake removes them before it
    runs, so the reads' end without them is a failure, whose own line its log gives."""
    if not counts.is_file():
        raise StagingFailed(
            f"sample '{sample}': its alignment is not kept: the staging of its reads failed "
            f"(its log {log} says why)"
        )


def mn_mismatched_reads(listing: Path) -> list[str]:
    """The reads a staging listing says had an MN tag that did not fit their sequence."""
    rows = (line.split("\t", 1) for line in listing.read_text().splitlines()[1:] if line)
    return [name for name, why in rows if why == MN_MISMATCH]
