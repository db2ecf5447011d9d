"""The input kinds numapore serves: one table of what each kind is, what it needs, which steps it
runs, how each aligner is told about its reads, and what its read accounting counts.

Every kind meets the others at an aligned BAM (a modBAM where modifications were called). The
workflow's rules ask this table (runs, aligner_options) rather than testing kind names, so a
new kind is a new entry here plus the rules of the steps only it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from numapore.base.errors import InputError

# The steps a kind can run (workflow stage names).
STEPS = (
    "raw_signal",  # raw signal made readable for nanopolish (conversion, index, census)
    "call_methylation",  # nanopolish per motif: calls, frequency, bedMethyl, modBAM from calls
    "pileup",  # the aligned modBAM's MM/ML tags piled up into bedMethyl (modkit's semantics)
)


@dataclass(frozen=True)
class InputKind:
    """One input kind: a row of the sample sheet whose `kind` is name."""

    name: str
    data: str  # what a user has, in a phrase
    chemistry: str  # which flow cells / basecallers it comes from
    reads: str  # what the `reads` column holds
    needs_signal: bool  # the `signal` column must name raw signal files
    steps: frozenset[str]
    # Per aligner, the options that tell it about these reads (before its threads and index);
    # an aligner missing here cannot align this kind.
    aligner_options: dict[str, str] = field(default_factory=dict)
    accounting: str = ""  # what its read accounting counts, in a phrase

    def runs(self, step: str) -> bool:
        """Whether samples of this kind run a step (one of STEPS)."""
        if step not in STEPS:
            raise ValueError(f"unknown step {step!r}; steps are {', '.join(STEPS)}")
        return step in self.steps

    def aligner_preset(self, aligner: str) -> str:
        """The aligner's options for this kind; InputError naming the ones that can."""
        if aligner not in self.aligner_options:
            raise InputError(
                f"aligner {aligner} cannot align {self.name} samples; use "
                + " or ".join(sorted(self.aligner_options))
            )
        return self.aligner_options[aligner]


KINDS = {
    kind.name: kind
    for kind in (
        InputKind(
            name="signal",
            data="raw nanopore signal (FAST5, POD5 or BLOW5) and its basecalled reads",
            chemistry="R9.4.1 (nanopolish's pore models); methylation called by nanopolish",
            reads="FASTA or FASTQ basecalls of the signal's reads (.gz allowed)",
            needs_signal=True,
            steps=frozenset({"raw_signal", "call_methylation", "pileup"}),
            aligner_options={
                "minimap2": "-ax map-ont",
                "bwa": "mem -x ont2d",
                "bowtie2": "--local",
            },
            accounting="signal files and reads, staged, aligned, called (first motif)",
        ),
        InputKind(
            name="modbam",
            data="basecaller modBAM: reads with MM/ML modification tags (dorado, Guppy)",
            chemistry="R10.4.1 (or any) with 5mC/5hmC/6mA called by the basecaller",
            reads=(
                "unaligned or aligned BAM/CRAM with MM/ML tags, or FASTQ whose headers carry "
                "them (dorado --emit-fastq, samtools fastq -T MM,ML)"
            ),
            needs_signal=False,
            steps=frozenset({"pileup"}),
            # -y copies the FASTQ comment (MM, ML, MN) into each record; -Y soft-clips
            # supplementary alignments so that their tags still fit the sequence they hold.
            aligner_options={
                "minimap2": "-ax map-ont -y -Y",
                "bwa": "mem -x ont2d -C",
                "bowtie2": "--local --sam-append-comment",
            },
            accounting="reads in, with tags, aligned (primary), with modification calls",
        ),
    )
}
DEFAULT_KIND = "signal"
MODBAM_SUFFIXES = (".bam", ".cram")


def infer_kind(declared: str, signal: str, reads: str, key: str) -> str:
    """The kind of a sheet row: its `kind` column when given, else a modBAM when the reads are
    a BAM/CRAM, else signal when it names raw signal. InputError when it cannot be told."""
    if declared:
        if declared not in KINDS:
            raise InputError(
                f"{key}: kind {declared!r} is not an input kind; kinds are {', '.join(KINDS)}"
            )
        return declared
    if reads.lower().endswith(MODBAM_SUFFIXES):
        return "modbam"
    if signal:
        return "signal"
    raise InputError(
        f"{key}: no raw signal and the reads are not a BAM/CRAM: say which kind of input this "
        "is in a `kind` column (modbam: FASTQ whose headers carry MM/ML tags)"
    )
