"""The plan's checks of what the inputs themselves say, before any job: a sheet kind against the
platform its BAM's header names, the DMR code against the codes the contrasts' samples carry, a
haplotype contrast of a sample whose reads carry no haplotag. One InputError line each, naming
the setting; a warning note where a user may mean it."""

from __future__ import annotations

from numapore.base.errors import InputError
from numapore.inputs.bam_header import (
    PACBIO,
    first_records,
    header_platform,
    is_alignment_file,
)
from numapore.inputs.kinds import KINDS
from numapore.inputs.sheet import Sample
from numapore.methylation.motifs import MOTIFS
from numapore.workflow.plan import RunPlan

# minimap2's presets for PacBio reads: a modbam sample of PacBio reads aligned with one of them
# is what its user chose (config modbam.minimap2_preset).
PACBIO_PRESETS = ("map-pb", "map-hifi")
# Modification names of modkit's and the literature's vocabulary -> their MM code.
CODE_NAMES = {"5mc": "m", "5hmc": "h", "6ma": "a", "5fc": "f", "5cac": "c", "4mc": "21839"}


def kind_of(platform: str) -> str:
    """The kind whose reads the platform writes (the kinds table)."""
    return next(kind.name for kind in KINDS.values() if kind.platform == platform)


def from_sheet(plan: RunPlan, sample: Sample) -> bool:
    """Whether a sample's reads are the user's file (not the simulator's, made by a job)."""
    return sample.name not in plan.config["simulate"]


def check_platforms(plan: RunPlan) -> None:
    """A sheet kind its reads' header contradicts: hifi on nanopore reads stops; modbam on PacBio
    reads stops with the nanopore preset, and warns with a PacBio one (modbam.minimap2_preset),
    which a user chose for them."""
    sheet = plan.config["samples"]
    for sample in plan.samples.values():
        if not (sample.input_kind.stages_tagged_reads and from_sheet(plan, sample)):
            continue
        if not is_alignment_file(sample.reads):
            continue
        platform, evidence = header_platform(sample.reads)
        key = f"sample sheet {sheet}, sample '{sample.name}'"
        article = "an" if platform[:1] in "AEIOU" else "a"
        said = f"its reads file {sample.reads} has {article} {platform} header ({evidence})"
        expected = sample.input_kind.platform
        if not expected or platform in ("", expected):
            continue
        if expected == PACBIO:
            preset = sample.input_kind.minimap2_index
            raise InputError(
                f"{key}: kind {sample.kind}, but {said}: minimap2's {preset} preset is for "
                f"PacBio HiFi reads; give kind {kind_of(platform)} (or no kind)"
            )
        if platform == PACBIO:
            preset = plan.minimap2_preset(sample)
            if preset not in PACBIO_PRESETS:
                raise InputError(
                    f"{key}: kind modbam, but {said}: it would be aligned with the nanopore "
                    f"preset {preset} (modbam.minimap2_preset); give kind hifi (or no kind)"
                )
            plan.notes.append(
                ("warning", f"numapore: {key}: kind modbam, but {said}: aligned with "
                 f"modbam.minimap2_preset {preset}, as set (kind hifi is PacBio HiFi's)")
            )  # fmt: skip


def carried_codes(plan: RunPlan, sample: Sample) -> set[str] | None:
    """The modification codes a sample's bedMethyl can hold (column 4): its motif's for a
    sample nanopolish calls, simulate.<name>.mod_codes for a simulated modBAM, the MM tags' of
    its first records for a modBAM of the sheet (those of the pileup's motif's base, without
    pileup.ignore); None when they cannot be told here."""
    config = plan.config
    if sample.input_kind.runs("call_methylation"):
        return {MOTIFS[plan.accounting_motif].code}
    if not sample.input_kind.runs("pileup"):
        return set()
    if not from_sheet(plan, sample):
        return set(config["simulate"][sample.name].get("mod_codes", "m"))
    seen = first_records(sample.reads, sample.reference)
    if seen is None or not seen.codes:
        return None
    motif = MOTIFS.get(config["pileup"]["motif"])
    ignored = config["pileup"].get("ignore", "")
    return {c for base, c in seen.codes if (motif is None or base == motif.base) and c != ignored}


def check_dmr_codes(plan: RunPlan) -> None:
    """config dmr.code against each contrast's sides: a side none of whose samples carries it
    would give DSS no site; it stops the run, naming the codes they carry."""
    code = plan.config["dmr"]["code"]
    for contrast in plan.contrasts.values():
        for label, columns in ((contrast.label1, contrast.group1),
                               (contrast.label2, contrast.group2)):  # fmt: skip
            names = {c.rsplit("_hp", 1)[0] if contrast.kind == "haplotypes" else c for c in columns}
            carried = [carried_codes(plan, plan.samples[n]) for n in sorted(names)]
            if any(c is None for c in carried) or any(code in c for c in carried):
                continue
            codes = ", ".join(sorted(set().union(*carried))) or "none"
            side = f"group '{label}'" if contrast.kind == "groups" else label
            known = CODE_NAMES.get(code.lower())
            hint = f"; {code} is code '{known}'" if known and known != code else ""
            raise InputError(
                f"config dmr.code: contrast '{contrast.name}': no call of code '{code}' in "
                f"{side} ({', '.join(sorted(names))} carry {codes}: the MM tags' codes, which "
                f"bedMethyl's column 4 names){hint}: DSS would test no site"
            )


def no_haplotags(plan: RunPlan, sample: Sample) -> str:
    """Why a modBAM sample of the sheet without a phased VCF has empty haplotype files: every
    record of its reads file read here, none with an HP tag ('' when it has some, or the file
    is longer than what is read here: its staging job checks every read)."""
    if sample.phased_vcf or not from_sheet(plan, sample):
        return ""
    seen = first_records(sample.reads, sample.reference)
    if seen is None or seen.haplotagged or not seen.whole:
        return ""
    return (
        f"none of the {seen.records} records of its reads file {sample.reads} carries an HP tag "
        "and it has no phased VCF (the sheet's phased_vcf): its haplotype bedMethyl files would "
        "be empty"
    )
