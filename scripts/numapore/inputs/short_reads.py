"""Short reads (input kind short) staged: each file checked once like any reads
(numapore.inputs.seqcheck: truncated or corrupt files, short qualities, ...), then the two files
of pairs read side by side: as many records, and record i of R2 the mate of record i of R1 (the
same name, a /1 or /2 suffix aside, as bwa and bowtie2 trim it)."""

from __future__ import annotations

from itertools import zip_longest
from pathlib import Path

from numapore.base.errors import InputError
from numapore.inputs.seqcheck import stage_sequences


def fragment_name(name: str) -> str:
    """A read name without its mate suffix: 'r7/1' -> 'r7' (bwa's trim_readno)."""
    return name[:-2] if len(name) > 2 and name[-2] == "/" and name[-1] in "12" else name


def check_mates(reads: Path, reads2: Path) -> int:
    """Read R1 and R2 side by side; InputError naming the file and the record when one has
    fewer records or a record's name differs from its mate's. Returns the pairs."""
    import pysam

    pairs = 0
    # persist=False: one record object per file, reused (its name is read before the next).
    with (
        pysam.FastxFile(str(reads), persist=False) as first,
        pysam.FastxFile(str(reads2), persist=False) as second,
    ):
        for r1, r2 in zip_longest(first, second):
            pairs += 1
            if r1 is None or r2 is None:
                short, long_ = (reads, reads2) if r1 is None else (reads2, reads)
                raise InputError(
                    f"reads file {short}: ends after {pairs - 1} records, but its mate file "
                    f"{long_} has more (record {pairs}: {(r1 or r2).name}); the two files of "
                    "pairs hold the same reads in the same order"
                )
            if fragment_name(r1.name) != fragment_name(r2.name):
                raise InputError(
                    f"reads file {reads2}, record {pairs}: read {r2.name} is not the mate of "
                    f"record {pairs} of {reads} ({r1.name}); the two files of pairs hold the "
                    "same reads in the same order"
                )
    return pairs


def check_read_lengths(reads: Path, limit: int, aligner: str) -> None:
    """InputError naming the file, the record and the read when a read is longer than limit
    bases, the most the aligner takes (SNAP: 1000, compiled in)."""
    import pysam

    with pysam.FastxFile(str(reads)) as fastx:
        for number, record in enumerate(fastx, 1):
            if len(record.sequence) > limit:
                raise InputError(
                    f"reads file {reads}, record {number}: read {record.name} has "
                    f"{len(record.sequence)} bases, more than the {limit} that {aligner} takes; "
                    "align these reads with bwa, bowtie2 or minimap2"
                )


def stage_short_reads(
    reads: Path, target: Path, fmt: str, reads2: Path | None = None, target2: Path | None = None
) -> str:
    """Check and stage a short sample's reads (numapore.inputs.seqcheck.stage_sequences: a link,
    or a tidied copy), and R2 beside them, the mates checked; what was done, for the log."""
    done = [stage_sequences(reads, target, "reads", fmt)]
    if reads2 is not None:
        if target2 is None:
            raise ValueError("pairs need a staged path for R2")
        done.append(stage_sequences(reads2, target2, "reads", fmt))
        done.append(f"{check_mates(reads, reads2)} pairs, each mate beside its mate")
    return "\n".join(done)
