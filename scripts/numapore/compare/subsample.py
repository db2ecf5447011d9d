"""The comparison's input subset: the first `compare.reads` reads (pairs: both mates) of the
compared sample and their alignments, so that a cell runs on a sample of a size chosen for
measuring."""

from __future__ import annotations

from pathlib import Path


def subsample_reads(source: Path, output: Path, n: int) -> list[str]:
    """Write the first n reads of a FASTA/FASTQ (all when n is 0); return their names."""
    import pysam

    names = []
    with pysam.FastxFile(str(source)) as fastx, open(output, "w") as out:
        for record in fastx:
            if n and len(names) == n:
                break
            out.write(str(record) + "\n")
            names.append(record.name)
    return names


def subsample_alignments(source: Path, reads: Path, output: Path) -> int:
    """Write the alignments of the reads in a FASTA/FASTQ (sorted as in source); return count."""
    import pysam

    with pysam.FastxFile(str(reads)) as fastx:
        names = {record.name for record in fastx}
    count = 0
    with pysam.AlignmentFile(str(source)) as bam:
        with pysam.AlignmentFile(str(output), "wb", template=bam) as out:
            for record in bam:
                if record.query_name in names:
                    out.write(record)
                    count += 1
    return count


def count_reads(reads: Path) -> int:
    """How many reads a FASTA/FASTQ holds."""
    import pysam

    with pysam.FastxFile(str(reads)) as fastx:
        return sum(1 for _ in fastx)


def subsample_pairs(reads: Path, reads2: Path, output: Path, output2: Path, n: int) -> int:
    """Write the first n pairs (all when n is 0) of R1 and R2, read side by side so that each
    mate stays beside its mate; return the pairs. InputError naming the record when the files
    stop being mates (the staged reads were checked so: numapore.inputs.short_reads)."""
    import pysam

    from numapore.base.errors import InputError
    from numapore.inputs.short_reads import fragment_name

    pairs = 0
    with pysam.FastxFile(str(reads)) as first, pysam.FastxFile(str(reads2)) as second:
        with open(output, "w") as out, open(output2, "w") as out2:
            for r1 in first:
                if n and pairs == n:
                    break
                r2 = next(second, None)
                if r2 is None or fragment_name(r1.name) != fragment_name(r2.name):
                    raise InputError(
                        f"reads file {reads2}, record {pairs + 1}: "
                        f"{'missing' if r2 is None else r2.name} is not the mate of {r1.name} "
                        f"in {reads}"
                    )
                out.write(str(r1) + "\n")
                out2.write(str(r2) + "\n")
                pairs += 1
    return pairs
