"""The aligners, in one registry: each one's command line, the files its index consists of, what
it is given as its index, and the longest read it takes. Which options tell an aligner about a
kind's reads (its preset, a read group) is a per-kind answer: the kinds table's aligner_options
(numapore.inputs.kinds), which align_command (numapore.execution.tools) puts into {options}."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Aligner:
    """One aligner."""

    name: str
    # Its command line, the one place it is written: {options} is the kind's preset, {files}
    # the reads (R1, then R2 for pairs), {mates} bowtie2's -1/-2 or -U, {fmt} its -q/-f, {mode}
    # SNAP's single/paired; SAM goes to standard output (SNAP: -o -sam -).
    command: str
    # The files of its index, after the reference's name ({preset}: minimap2's, whose k-mer and
    # window sizes are the index's, so one index per preset); a name with a folder (SNAP's) is
    # a file in the index's folder.
    index_suffixes: tuple[str, ...]
    # The longest read it takes (SNAP: its MAX_READ_LENGTH, compiled in; it stops at a longer
    # one): checked before it starts (numapore.inputs.short_reads.check_read_lengths).
    max_read_length: int | None = None

    def index_files(self, prefix: str, minimap2_preset: str) -> list[str]:
        """Every file of its index of the reference at prefix (results/references/<ref>/
        <aligner>/<ref>), for a sample whose minimap2 preset is minimap2_preset."""
        return [prefix + suffix.format(preset=minimap2_preset) for suffix in self.index_suffixes]

    def index_argument(self, files: list[str]) -> str:
        """What it is given as its index: the file (minimap2's .mmi), the folder (SNAP's), or
        the prefix the files share (bwa's, bowtie2's)."""
        first = files[0]
        if len(files) == 1:
            return first
        if "/" in self.index_suffixes[0]:
            return str(Path(first).parent)
        return first.removesuffix(self.index_suffixes[0])


# SNAP's index is a folder of these files.
SNAP_INDEX = tuple(
    f".snap/{f}" for f in ("Genome", "GenomeIndex", "GenomeIndexHash", "OverflowTable")
)
ALIGNERS = {
    aligner.name: aligner
    for aligner in (
        Aligner(
            "minimap2", "minimap2 {options} -t {threads} {index} {files}", (".{preset}.mmi",)
        ),
        Aligner(
            "bwa", "bwa {options} -t {threads} {index} {files}",
            (".amb", ".ann", ".bwt", ".pac", ".sa"),
        ),
        Aligner(
            "bowtie2", "bowtie2 {options} -p {threads} -x {index} {fmt} {mates}",
            (".1.bt2", ".2.bt2", ".3.bt2", ".4.bt2", ".rev.1.bt2", ".rev.2.bt2"),
        ),
        Aligner(
            "snap", "snap-aligner {mode} {index} {files} {options} -t {threads} -o -sam -",
            SNAP_INDEX,
            max_read_length=1000,
        ),
    )  # fmt: skip
}
NAMES = tuple(ALIGNERS)
