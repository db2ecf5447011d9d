"""Short reads (input kind short) staged: each file checked like any reads
(numapore.inputs.seqcheck: truncated or corrupt files, short qualities, ...), and the two files
of pairs as many records, record i of R2 the mate of record i of R1 (the same name, a /1 or /2
suffix aside, as bwa and bowtie2 trim it). Plainly well-formed pairs, the usual case, are checked
in one pass over each file (plain_mates); anything else by the line parser, then the mates side
by side (check_mates), which name the file, the record and the reason."""

from __future__ import annotations

from itertools import zip_longest
from pathlib import Path

from numapore.base.errors import InputError
from numapore.inputs.seqcheck import (
    NotPlain,
    link_sequences,
    plain_fastq_headers,
    stage_sequences,
)


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


MATE_SUFFIXES = (b"/1", b"/2")


def fragment_names(heads: list[bytes]) -> list[bytes]:
    """Header lines' read names (with their '@') without a mate suffix (fragment_name)."""
    names = [head.split(None, 1)[0] for head in heads]
    return [n[:-2] if n[-2:] in MATE_SUFFIXES and len(n) > 3 else n for n in names]


def plain_mates(reads: Path, reads2: Path) -> int | None:
    """The pairs of two plainly well-formed FASTQ files (seqcheck.plain_fastq_headers) whose
    records are mates in the same order, each file read once, a block at a time, the mates'
    names compared as their blocks come; None when a file is not so plain, or the files differ
    in records or in a mate's name (then the parser and check_mates name the problem). Memory
    holds about a block's names: the file with fewer names waiting is read next."""
    files = [plain_fastq_headers(reads, "reads"), plain_fastq_headers(reads2, "reads")]
    waiting: list[list[bytes]] = [[], []]
    pairs = 0
    try:
        while True:
            side = 0 if len(waiting[0]) <= len(waiting[1]) else 1
            heads = next(files[side], None)
            if heads is None:  # that file ended: the other must have no record left
                other = 1 - side
                return pairs if not waiting[other] and next(files[other], None) is None else None
            waiting[side] += fragment_names(heads)
            both = min(map(len, waiting))
            if waiting[0][:both] != waiting[1][:both]:
                return None
            del waiting[0][:both], waiting[1][:both]
            pairs += both
    except NotPlain:
        return None
    finally:
        for headers in files:
            headers.close()


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
    or a tidied copy), and R2 beside them, the mates checked; what was done, for the log. Two
    plainly well-formed FASTQ files of mates in step are checked in one pass over each
    (plain_mates); anything else is read by the parser and check_mates, which name the
    problem."""
    if reads2 is None:
        return stage_sequences(reads, target, "reads", fmt)
    if target2 is None:
        raise ValueError("pairs need a staged path for R2")
    pairs = plain_mates(reads, reads2) if fmt.startswith("fastq") else None
    if pairs is not None:
        done = [link_sequences(reads, target, pairs), link_sequences(reads2, target2, pairs)]
    else:
        done = [
            stage_sequences(path, to, "reads", fmt)
            for path, to in ((reads, target), (reads2, target2))
        ]
        pairs = check_mates(reads, reads2)
    return "\n".join([*done, f"{pairs} pairs, each mate beside its mate"])
