"""The comparison's input subset: the first `compare.reads` reads of the compared sample and
their alignments, so that a cell runs on a sample of a size chosen for measuring."""

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
