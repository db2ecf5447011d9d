"""The input kinds numapore serves: one table of what each kind is, what it needs, which steps it
runs, how each aligner is told about its reads, and what its read accounting counts.

Every kind meets the others at an aligned BAM (a modBAM where modifications were called). The
workflow and the package ask this table every per-kind question (which steps run, how the reads
are staged and where, which minimap2 preset, what the accounting reads, how reads are split)
and never compare kind names (tests/test_decisions.py), so a new kind is a new entry here plus
the rules of the steps only it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from numapore.base.errors import InputError

# How a kind's reads are staged (rules/reads.smk; where: numapore.workflow.layout.staged_reads_of).
STAGINGS = {
    # checked, and staged once per signal format nanopolish reads (fast5 or blow5): its read
    # index beside them names where each read's signal is (rule stage_reads)
    "basecalls",
    # the records of a modBAM as FASTQ whose headers carry MM/ML/MN, for the aligner to copy
    # into its records; the read ids, counts and untagged reads beside them for the accounting
    # (numapore.inputs.modbam_reads, rule stage_modbam_reads)
    "tagged",
    # checked, pairs side by side (rules stage_short_reads, stage_paired_reads)
    "short_reads",
}

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
    staging: str  # how its reads are staged (one of STAGINGS)
    # Per aligner, the options that tell it about these reads (before its threads and index);
    # an aligner missing here cannot align this kind.
    aligner_options: dict[str, str] = field(default_factory=dict)
    accounting: str = ""  # what its read accounting counts, in a phrase
    # Its runs write a read accounting table (<sample>.<aligner>.accounting.tsv) that reconciles.
    read_accounting: bool = False
    # May have a second reads file (the sheet's `reads2`: mates, R2); its alignment check then
    # counts pairs, properly paired and duplicates (numapore.inputs.readids.short_read_summary).
    paired: bool = False
    # bwa mem's -K of the kind's preset (bases per batch; 0: none): bwa estimates the insert
    # size per batch, so shards of the reads are cut on whole batches (numapore.execution.shards).
    batch_bases: int = 0
    # The config key with which a user sets that -K ("": batch_bases as it is).
    batch_bases_setting: str = ""
    # Duplicates marked (samtools fixmate -m before the sort, markdup after the merge) when
    # config short_reads.mark_duplicates asks for it.
    marks_duplicates: bool = False
    # Its sorted BAM is written again (read groups settled by samtools merge, duplicates marked:
    # numapore.execution.shards.settle_read_groups), so the sort writes it fast (-l 1): level 6
    # takes about 5 times the CPU seconds of level 1, for a file read once.
    rewrites_sorted_bam: bool = False
    minimap2_index: str = "map-ont"  # the preset minimap2's index is built with (its -x)
    # The platform its reads' BAM/CRAM header names (numapore.inputs.bam_header: "PacBio",
    # "Oxford Nanopore"); "" for kinds whose reads are not BAM/CRAM. A header naming another
    # platform stops the run (numapore.workflow.input_checks).
    platform: str = ""
    # The config key with which a user chooses minimap2's -x for this kind ("": minimap2_index).
    minimap2_preset_setting: str = ""

    def __post_init__(self) -> None:
        if self.staging not in STAGINGS:
            raise ValueError(f"kind {self.name}: staging {self.staging!r} is not one of STAGINGS")
        if not self.steps <= set(STEPS):
            raise ValueError(f"kind {self.name}: unknown steps {sorted(self.steps - set(STEPS))}")

    @property
    def stages_tagged_reads(self) -> bool:
        """Whether its reads carry their modification calls (MM/ML) through staging into the
        aligner's records, with the staging's counts and read ids for the accounting."""
        return self.staging == "tagged"

    def minimap2_preset(self, settings: dict[str, dict]) -> str:
        """minimap2's -x for this kind, index and alignment alike: the configured one where the
        kind lets a user choose it (minimap2_preset_setting, a key of settings, the config),
        else minimap2_index."""
        if not self.minimap2_preset_setting:
            return self.minimap2_index
        section, key = self.minimap2_preset_setting.split(".")
        return settings[section][key]

    def batch(self, settings: dict[str, dict]) -> int:
        """bwa mem's -K for this kind (0: no batches): the configured one where the kind lets a
        user set it (batch_bases_setting, a key of settings, the config), else batch_bases."""
        if not (self.batch_bases and self.batch_bases_setting):
            return self.batch_bases
        section, key = self.batch_bases_setting.split(".")
        return int(settings.get(section, {}).get(key, self.batch_bases))

    def runs(self, step: str) -> bool:
        """Whether samples of this kind run a step (one of STEPS)."""
        if step not in STEPS:
            raise ValueError(f"unknown step {step!r}; steps are {', '.join(STEPS)}")
        return step in self.steps

    def aligner_preset(
        self, aligner: str, sample: str = "sample", minimap2_preset: str = "", batch: int = 0
    ) -> str:
        """The aligner's options for this kind (a read group, where the preset has one, named
        after the sample; minimap2's -x where the kind lets a user choose it, else
        minimap2_index; batch: bwa's -K where the config sets it, else batch_bases); InputError
        naming the aligners that can."""
        if aligner not in self.aligner_options:
            serves = [k.name for k in KINDS.values() if aligner in k.aligner_options]
            only = f" (it aligns {' and '.join(serves)} samples only)" if serves else ""
            raise InputError(
                f"aligner {aligner} cannot align {self.name} samples{only}; use "
                + " or ".join(sorted(self.aligner_options))
            )
        return self.aligner_options[aligner].format(
            sample=sample,
            batch=batch or self.batch_bases,
            preset=minimap2_preset or self.minimap2_index,
        )


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
            staging="basecalls",
            aligner_options={
                "minimap2": "-ax map-ont",
                "bwa": "mem -x ont2d",
                "bowtie2": "--local",
            },
            accounting="signal files and reads, staged, aligned, called (first motif)",
            read_accounting=True,
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
            staging="tagged",
            # -y copies the FASTQ comment (MM, ML, MN) into each record; -Y soft-clips
            # supplementary alignments so that their tags still fit the sequence they hold.
            # {preset}: config modbam.minimap2_preset (map-ont: Debian's minimap2 2.24 has no
            # lr:hq, the field's preset for reads of R10.4.1).
            aligner_options={
                "minimap2": "-ax {preset} -y -Y",
                "bwa": "mem -x ont2d -C",
                "bowtie2": "--local --sam-append-comment",
            },
            accounting=(
                "records in, left out (secondary, supplementary, duplicates), reads staged with "
                "and without tags (MN not fitting), aligned, with modification calls or why not"
            ),
            read_accounting=True,
            minimap2_preset_setting="modbam.minimap2_preset",
            platform="Oxford Nanopore",
        ),
        InputKind(
            name="hifi",
            data=(
                "PacBio HiFi modBAM: HiFi (CCS) reads with 5mC calls in MM/ML (Revio, primrose, "
                "jasmine)"
            ),
            chemistry="PacBio Sequel II/IIe or Revio HiFi reads; 5mC at CpG from the kinetics",
            reads=(
                "unaligned or aligned BAM/CRAM with MM/ML tags (hifi_reads.bam), or FASTQ whose "
                "headers carry them"
            ),
            needs_signal=False,
            steps=frozenset({"pileup"}),
            staging="tagged",
            # minimap2's HiFi preset, the tags copied as for modbam (-y -Y). pbmm2 (PacBio's
            # minimap2 wrapper, which sets the same preset) is in no registry numapore installs
            # from.
            aligner_options={"minimap2": "-ax {preset} -y -Y"},
            accounting=(
                "records in, left out (secondary, supplementary, duplicates), reads staged with "
                "and without tags, aligned, with modification calls or why not"
            ),
            read_accounting=True,
            minimap2_index="map-hifi",
            platform="PacBio",
        ),
        InputKind(
            name="short",
            data="short reads (Illumina and the like): single-end FASTQ, or pairs (R1, R2)",
            chemistry="any short-read sequencer; no signal, no methylation calls",
            reads=(
                "FASTQ (.gz allowed): R1, or the single-end reads; R2 in the `reads2` column, "
                "its records in R1's order with the same names"
            ),
            needs_signal=False,
            steps=frozenset(),
            staging="short_reads",
            # bwa: no -x (its short-read defaults), a read group named after the sample, and a
            # fixed batch (-K) so that its output does not depend on its threads or on how the
            # reads are split (it estimates the insert size per batch); bowtie2 end to end
            # (-1/-2 or -U, numapore.execution.tools); minimap2's short-read preset. SNAP
            # (single or paired, numapore.execution.tools): -b- leaves its threads where numactl
            # put them (it pins thread i to CPU i otherwise, whatever node that is) and -map-
            # reads its index into the process's own memory, placed by the strategy's policy
            # (mapped, the index stays in the page cache wherever it was first read, shared by
            # every instance); its read group named after the sample, as bwa's.
            aligner_options={
                "minimap2": "-ax sr",
                "bwa": "mem -K {batch} -R '@RG\\tID:{sample}\\tSM:{sample}'",
                "bowtie2": "--end-to-end",
                "snap": "-b- -map- -R '@RG\\tID:{sample}\\tSM:{sample}'",
            },
            accounting="reads and pairs in, mapped, properly paired, duplicates",
            paired=True,
            batch_bases=10_000_000,
            batch_bases_setting="short_reads.bwa_batch_bases",
            marks_duplicates=True,
            rewrites_sorted_bam=True,
            minimap2_index="sr",
        ),
    )
}
DEFAULT_KIND = "signal"
MODBAM_SUFFIXES = (".bam", ".cram")


# The kind a user may mean by a platform's name
PLATFORM_KINDS = {"pacbio": "hifi", "ont": "modbam", "nanopore": "modbam", "illumina": "short"}


def infer_kind(
    declared: str, signal: str, reads: str, key: str, reads2: str = "", pacbio: bool = False
) -> str:
    """The kind of a sheet row: its `kind` column when given, else short when it has a second
    reads file (`reads2`), a modBAM when the reads are a BAM/CRAM (hifi when its header says
    PacBio: pacbio), signal when it names raw signal. InputError when it cannot be told."""
    if declared:
        if declared not in KINDS:
            meant = PLATFORM_KINDS.get(declared.lower(), declared.lower())
            hint = f"; did you mean `{meant}`?" if meant in KINDS else ""
            raise InputError(
                f"{key}: kind {declared!r} is not an input kind; kinds are "
                f"{', '.join(KINDS)}{hint}"
            )
        if reads2 and not KINDS[declared].paired:
            raise InputError(
                f"{key}: a {declared} sample takes no second reads file; leave reads2 empty "
                "(pairs are kind short)"
            )
        return declared
    if reads2:
        return "short"
    if reads.lower().endswith(MODBAM_SUFFIXES):
        return "hifi" if pacbio else "modbam"
    if signal:
        return "signal"
    raise InputError(
        f"{key}: no raw signal and the reads are not a BAM/CRAM: say which kind of input this "
        "is in a `kind` column (modbam: FASTQ whose headers carry MM/ML tags; short: "
        "single-end short reads)"
    )
