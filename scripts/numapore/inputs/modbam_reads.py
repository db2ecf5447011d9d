"""A modBAM sample's reads staged for realignment: FASTQ whose headers carry the MM, ML and MN
tags, from a BAM/CRAM (primary records not marked duplicate: `samtools fastq -F 0xD00 -T ...`)
or a FASTQ that has them. The aligners copy the tags from the headers into their records
(minimap2 -y, bwa -C, bowtie2 --sam-append-comment), so the basecaller's calls survive the
realignment.

Every read is counted: in, with tags, without (kept, aligned, no calls); a sample whose reads
carry no MM/ML at all stops here with one line.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from numapore.base.atomic import atomic_output
from numapore.base.errors import InputError
from numapore.inputs.kinds import MODBAM_SUFFIXES
from numapore.inputs.seqcheck import open_text

# The tags kept (Mm/Ml: the names before SAM's 2021 spec, which modkit still reads).
KEPT_TAGS = "MM,ML,MN,Mm,Ml"
MOD_TAGS = ("MM:Z:", "Mm:Z:")


@dataclass
class StagedReads:
    """What staging found: reads written, with and without modification tags, and whether the
    input was aligned (to which reference, as its header says)."""

    reads: int = 0
    with_tags: int = 0
    aligned_input: bool = False
    duplicates: int = 0  # primary records marked duplicate (0x400): left out, as modkit does

    @property
    def without_tags(self) -> int:
        """Reads staged without MM/ML (aligned, but without calls)."""
        return self.reads - self.with_tags

    def summary(self) -> str:
        """One line for the log."""
        line = f"{self.reads} reads staged, {self.with_tags} with MM/ML tags"
        if self.without_tags:
            line += f", {self.without_tags} without (aligned; no modification calls)"
        if self.duplicates:
            line += f"; {self.duplicates} records marked duplicate left out"
        return line


def fastq_records(handle: IO[str], source: Path) -> Iterator[tuple[str, str, str]]:
    """(header, sequence, qualities) of each 4-line FASTQ record; InputError naming the record
    when one is cut short."""
    while header := handle.readline():
        if not header.strip():
            continue
        seq, plus, qual = handle.readline(), handle.readline(), handle.readline()
        if not header.startswith("@") or not plus.startswith("+") or not qual:
            raise InputError(f"reads file {source}: FASTQ record {header.strip()[:60]!r} is cut")
        yield header.rstrip("\n"), seq.rstrip("\n"), qual.rstrip("\n")


def has_mod_tags(header: str) -> bool:
    """Whether a FASTQ header carries an MM (or old-style Mm) tag after the read name."""
    return any(field.startswith(MOD_TAGS) for field in header.split()[1:])


def samtools_fastq(source: Path, reference: Path, threads: int) -> subprocess.Popen:
    """samtools fastq of a BAM/CRAM's primary records, tags in the headers (a CRAM is decoded
    against the sample's reference)."""
    argv = ["samtools", "fastq", "-F", "0xD00", "-T", KEPT_TAGS, "-@", str(max(1, threads - 1))]
    if source.name.lower().endswith(".cram"):
        argv += ["--reference", str(reference)]
    return subprocess.Popen(
        [*argv, str(source)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def is_aligned(source: Path) -> bool:
    """Whether a BAM/CRAM's header lists reference sequences (it was aligned)."""
    header = subprocess.run(["samtools", "view", "-H", str(source)], capture_output=True, text=True)
    return any(line.startswith("@SQ") for line in header.stdout.splitlines())


def duplicate_records(source: Path, reference: Path) -> int:
    """Primary records of a BAM/CRAM marked duplicate (0x400)."""
    argv = ["samtools", "view", "-c", "-f", "0x400", "-F", "0x900", str(source)]
    if source.name.lower().endswith(".cram"):
        argv[2:2] = ["--reference", str(reference)]
    counted = subprocess.run(argv, capture_output=True, text=True)
    return int(counted.stdout.strip() or 0) if counted.returncode == 0 else 0


def stage_modbam_reads(source: Path, output: Path, reference: Path, threads: int) -> StagedReads:
    """Write source's reads as FASTQ with their tags to output (complete or absent); InputError
    when nothing usable is there."""
    staged = StagedReads()
    bam = source.name.lower().endswith(MODBAM_SUFFIXES)
    process = samtools_fastq(source, reference, threads) if bam else None
    if bam:
        staged.aligned_input = is_aligned(source)
        staged.duplicates = duplicate_records(source, reference)
    with atomic_output(output) as tmp, open(tmp, "w") as out:
        handle = process.stdout if process else open_text(source)
        try:
            for header, seq, qual in fastq_records(handle, source):
                staged.reads += 1
                staged.with_tags += has_mod_tags(header)
                out.write(f"{header}\n{seq}\n+\n{qual}\n")
        finally:
            handle.close()
        if process is not None:
            error = process.stderr.read().strip()
            if process.wait() != 0:
                detail = error.splitlines()[-1] if error else f"exit {process.returncode}"
                hint = ""
                if source.name.lower().endswith(".cram"):
                    hint = " (a CRAM needs the reference it was written against)"
                raise InputError(f"reads file {source}: samtools cannot read it{hint}: {detail}")
        if staged.reads == 0:
            raise InputError(f"reads file {source}: no reads (no primary records)")
        if staged.with_tags == 0:
            raise InputError(
                f"reads file {source}: none of its {staged.reads} reads carries MM/ML tags: "
                "it holds no modification calls (basecall with modified-base models, e.g. "
                "dorado --modified-bases, and keep the tags: samtools fastq -T MM,ML,MN)"
            )
    return staged
