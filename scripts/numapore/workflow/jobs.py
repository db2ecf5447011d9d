"""What each job of the run reads and how it runs, asked of the plan by the workflow's input
functions (workflow/rules/common.smk) with the job's wildcards as plain values. What only a
finished tuning knows (the I/O mode, the pileup's regions) the caller passes in."""

from __future__ import annotations

import functools
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from numapore.execution.aligners import ALIGNERS
from numapore.execution.io_modes import IO_MODES, modes_reading
from numapore.inputs.sheet import signal_files
from numapore.nanopolish.calls import llr_probability
from numapore.pileup.common import Options
from numapore.pileup.settings import check_settings, modkit_motif, modkit_version
from numapore.workflow import layout

if TYPE_CHECKING:
    from numapore.workflow.plan import RunPlan


# ---- reads


def staged_reads(plan: RunPlan, name: str, io_mode: str) -> str:
    """The sample's reads as staged for an I/O mode, with nanopolish's read index beside them
    pointing at that mode's signal files; a modBAM sample's as FASTQ with their tags in the
    headers; a short sample's checked reads (R1 of pairs)."""
    sample = plan.samples[name]
    signal = IO_MODES[io_mode].signal_format
    staging = sample.input_kind.staging
    return layout.staged_reads_of(staging, name, sample.reads_format, sample.paired, signal)


def staged_reads2(plan: RunPlan, name: str) -> list[str] | str:
    """The R2 mates of a paired sample as staged (none for other samples)."""
    sample = plan.samples[name]
    return layout.paired_reads(name, 2, sample.reads_format) if sample.paired else []


def counted_reads(plan: RunPlan, name: str, io_mode: str) -> list[str] | str:
    """The file whose read ids the alignment check counts: the staged reads, or a modBAM
    sample's read id table; none when its staging streams into the align job, which then counts
    the BAM's primary records (the table is written once the stream ends)."""
    if not plan.samples[name].input_kind.stages_tagged_reads:
        return staged_reads(plan, name, io_mode)
    return [] if plan.staging_streams else read_id_table(name)


def read_id_table(name: str) -> str:
    """A modBAM sample's read id table, which its staging writes (numapore.inputs.readids)."""
    return layout.modbam_staging(name, "ids")


def reads_shard(plan: RunPlan, name: str, shard: str, io_mode: str, mate: int = 1):
    """The reads the aligner gets for one shard (R1 or R2 of pairs: mate): all reads when the
    step is not scattered; none for R2 of a sample without pairs."""
    sample = plan.samples[name]
    if mate == 2 and not sample.paired:
        return []
    if plan.config["scatter"]["alignment"] == 1:
        return staged_reads(plan, name, io_mode) if mate == 1 else staged_reads2(plan, name)
    fmt = sample.reads_format.removesuffix(".gz")
    return layout.reads_shard(name, shard, f".{mate}" if sample.paired else "", fmt)


def short_reads_input(plan: RunPlan, name: str) -> dict[str, Any]:
    """A short sample's reads files as the sheet names them: reads, and reads2 for pairs."""
    sample = plan.samples[name]
    return {"reads": sample.reads, **({"reads2": sample.reads2} if sample.paired else {})}


def reference_fasta(plan: RunPlan, name: str) -> str:
    """The sample's reference as prepared under results/references/."""
    return layout.reference_fasta(plan.samples[name].reference_name)


@functools.cache
def odd_fast5_names(folder: str) -> list[Path]:
    """FAST5 files in a folder whose extension is not '.fast5' exactly (e.g. '.FAST5')."""
    found = signal_files(Path(folder)).get("fast5", []) if Path(folder).is_dir() else []
    return sorted(p for p in found if p.suffix != ".fast5")


def fast5_inputs(plan: RunPlan, name: str) -> dict[str, list[str]]:
    """The sample's FAST5 folders for nanopolish index, plus the files it would not find there
    (listed files, and '*.FAST5'-like names in folders), linked into one folder."""
    # By name, not on disk: a simulated sample's folder does not exist before its rule runs.
    paths = plan.samples[name].signal
    dirs = [str(p) for p in paths if p.suffix.lower() != ".fast5"]
    files = [str(p) for p in paths if p.suffix.lower() == ".fast5"]
    files += [str(p) for d in dirs for p in odd_fast5_names(d)]
    if files:
        dirs.append(layout.fast5_links(name))
    return {"files": files, "dirs": dirs}


def signal_index_inputs(plan: RunPlan, name: str, signal: str) -> list[str]:
    """What nanopolish index reads the signal from: FAST5 folders, or the converted BLOW5."""
    return [layout.blow5(name)] if signal == "blow5" else fast5_inputs(plan, name)["dirs"]


# ---- alignment and calling


def aligner_index(plan: RunPlan, name: str, aligner: str) -> str:
    """What the aligner is given as its index: minimap2's .mmi, bwa's / bowtie2's prefix, or
    SNAP's folder."""
    return ALIGNERS[aligner].index_argument(plan.aligner_index_files(name, aligner))


def methylation_shard_inputs(plan: RunPlan, name: str, aligner: str, shard: str, io_mode: str):
    """What nanopolish needs for one shard: reads + their signal index, BAM shard, reference;
    and the alignment check, so a wrong reference fails with its reason."""
    reads = staged_reads(plan, name, io_mode)
    if plan.one_call_shard:
        bam = layout.bam(name, aligner)
    else:
        bam = layout.methylation_shard(name, aligner, None, shard, ".bam")
    return {
        "reads": reads,
        "readdb": f"{reads}.index.readdb",
        "bam": bam,
        "bai": f"{bam}.bai",
        "genome": reference_fasta(plan, name),
        "alignment_summary": layout.bam(name, aligner, ".summary.tsv"),
    }


def motif_calls(plan: RunPlan, name: str, aligner: str) -> list[str]:
    """The merged call tables of every motif of methylation.motifs for a sample and aligner
    (none for a sample nanopolish does not call)."""
    if not plan.samples[name].input_kind.runs("call_methylation"):
        return []
    motifs = plan.config["methylation"]["motifs"]
    return [layout.methylation(name, aligner, motif, ".calls.tsv") for motif in motifs]


def step_records(plan: RunPlan, name: str, aligner: str) -> dict[str, list[str]]:
    """The run records (*.run.json) of a sample's alignment and methylation jobs, per step."""
    records = {
        "alignment": [
            layout.log("align", f"{name}.{aligner}.{shard}.run.json")
            for shard in plan.shard_ids("alignment")
        ]
    }
    if plan.samples[name].input_kind.runs("call_methylation"):
        records["methylation"] = [
            layout.log("call_methylation", f"{name}.{aligner}.{motif}.{shard}.run.json")
            for motif in plan.config["methylation"]["motifs"]
            for shard in plan.shard_ids("methylation")
        ]
    return records


def accounting_inputs(plan: RunPlan, name: str, aligner: str, io_mode: str) -> dict[str, str]:
    """What the accounting reads: reads and their signal index, BAM, the first motif's calls
    (+ the BLOW5's; + the census of FAST5/POD5 inputs); for a modbam sample, the staged reads'
    ids, what staging counted and listed, and the realigned BAM with the pileup's listing of
    its primary alignments (a second pass here would cost a tenth of the pileup's CPU time)."""
    sample = plan.samples[name]
    if sample.input_kind.stages_tagged_reads:
        motif = plan.config["pileup"]["motif"]
        return {
            "reads": read_id_table(name),
            "staged": layout.staged_counts(name),
            "untagged": layout.modbam_staging(name, "untagged"),
            "bam": layout.bam(name, aligner),
            "listing": layout.methylation(name, aligner, motif, ".pileup_reads.tsv"),
        }
    reads = staged_reads(plan, name, io_mode)
    motif = plan.accounting_motif
    inputs = {
        "reads": reads,
        "readdb": f"{reads}.index.readdb",
        "bam": layout.bam(name, aligner),
        "calls": layout.methylation(name, aligner, motif, ".calls.tsv"),
        "modbam": layout.methylation(name, aligner, motif, ".modbam.bam"),
    }
    if IO_MODES[io_mode].converts_signal:
        inputs["blow5_index"] = layout.blow5(name, ".idx")
        inputs["rejected"] = layout.blow5(name, ".rejected.tsv")
    if sample.signal_format != "blow5":  # a BLOW5 input's index lists its reads
        inputs |= {
            "census_reads": layout.census(name, ".parquet"),
            "census_files": layout.census(name, ".files.tsv"),
        }
    return inputs


def accuracy_inputs(plan: RunPlan, name: str, aligner: str) -> dict[str, str]:
    """What the accuracy of a simulated sample reads besides its truth: nanopolish's CpG calls,
    or (modbam) the aligned modBAM with its index and its CpG bedMethyl."""
    inputs = {"truth": layout.simulated(name, "truth.tsv")}
    if plan.samples[name].input_kind.runs("call_methylation"):
        inputs["calls"] = layout.methylation(name, aligner, "cpg", ".calls.tsv")
    else:
        inputs["modbam"] = layout.bam(name, aligner)
        inputs["bai"] = layout.bam(name, aligner, ".bam.bai")
        inputs["bedmethyl"] = layout.methylation(name, aligner, "cpg", ".bedmethyl.gz")
    return inputs


# ---- the pileup


def pileup_bam(plan: RunPlan, name: str, aligner: str, motif: str) -> str:
    """The modBAM a pileup reads: a modbam sample's aligned BAM (haplotagged by WhatsHap when
    it has a phased VCF), or the modBAM made from a signal sample's calls of the motif."""
    sample = plan.samples[name]
    if sample.input_kind.runs("call_methylation"):
        return layout.methylation(name, aligner, motif, ".modbam.bam")
    if sample.phased_vcf:  # WhatsHap's haplotags from the phased VCF
        return layout.bam(name, aligner, ".haplotagged.bam")
    return layout.bam(name, aligner)


def pileup_options(plan: RunPlan, name: str, motif: str) -> Options:
    """The engine's options of a sample's pileup of a motif (its job sets the threads): for
    nanopolish's calls the threshold `auto` keeps nanopolish's meaning, the probability of an
    LLR of methylation.call_threshold."""
    called = plan.samples[name].input_kind.runs("call_methylation")
    call_threshold = plan.config["methylation"]["call_threshold"]
    probability = llr_probability(call_threshold) if called else None
    return options_of(
        {**plan.config["pileup"], "motif": motif}, reference_fasta(plan, name), 1, probability
    )


def options_of(
    settings: Mapping[str, Any], reference: str, threads: int = 1, called: float | None = None
) -> Options:
    """The engine's options for pileup: settings with a motif (a config's pileup: and the
    job's motif), with the semantics pileup.modkit names; every setting decided here, once:
    filter_threshold auto is a calling's own threshold (called) where there is one, else
    modkit's estimate at filter_percentile. SettingsError for a 0.4-only setting under 0.6."""
    check_settings(settings)
    version = modkit_version(settings)
    motif = settings["motif"]
    motifs = []
    if motif == "cpg" and version == "0.6":  # --cpg needs --modified-bases in 0.6
        motifs = [("CG", 0)]
    elif motif not in ("cpg", "any"):
        motifs = [modkit_motif(motif)]
    threshold = settings["filter_threshold"]
    if threshold == "auto" and called is not None:
        threshold = called
    estimated = {"filter_percentile": float(settings["filter_percentile"])}
    return Options(
        **(estimated if threshold == "auto" else {}),
        compat=version,
        reference=reference,
        cpg=motif == "cpg" and version != "0.6",
        motifs=motifs,
        combine_strands=bool(settings["combine_strands"]) and motif != "any",
        filter_threshold=None if threshold == "auto" else [str(threshold)],
        ignore=settings["ignore"] or None,
        edge_filter=settings["edge_filter"] or None,
        threads=threads,
    )


def pileup_inputs(
    plan: RunPlan, name: str, aligner: str, motif: str, regions: int, whole: bool
) -> dict[str, Any]:
    """What the pileup reads: the sample's modBAM with its index, and the reference; the whole
    pileup (whole) of a split one (regions > 1), the shards' texts and read listings."""
    bam = pileup_bam(plan, name, aligner, motif)
    inputs = {"bam": bam, "bai": f"{bam}.bai", "reference": reference_fasta(plan, name)}
    if regions > 1 and whole:
        shards = [
            layout.methylation_shard(name, aligner, motif, shard)
            for shard in plan.shard_ids("pileup", regions)
        ]
        inputs["shards"] = [f"{shard}.bed" for shard in shards]
        inputs["shard_listings"] = [f"{shard}.pileup_reads.tsv" for shard in shards]
        inputs["shard_thresholds"] = [f"{shard}.pileup_thresholds.json" for shard in shards]
    return inputs


def phased_outputs(sample: str, aligner: str, motif: str) -> list[str]:
    """The bedMethyl files per haplotype of a sample's motif (pileup.phased), with indexes."""
    return [
        layout.methylation(sample, aligner, motif, f".{hp}.bedmethyl.gz{index}")
        for hp in ("hp1", "hp2")
        for index in ("", ".tbi")
    ]


def track_inputs(plan: RunPlan, name: str, aligner: str, motif: str, part: str) -> dict:
    """What a track reads: the bedMethyl (a haplotype's for part hp1, hp2) and the reference's
    index (the chromosome sizes)."""
    suffix = ".bedmethyl.gz" if part == "all" else f".{part}.bedmethyl.gz"
    return {
        "bedmethyl": layout.methylation(name, aligner, motif, suffix),
        "sizes": f"{reference_fasta(plan, name)}.fai",
    }


def track_arguments(plan: RunPlan, codes: str) -> list[str]:
    """`numapore tobigwig` options (after IN OUT) of a track of codes ('h_m'), as modkit's
    `bedmethyl tobigwig` takes them (config tracks:), without the sizes."""
    arguments = ["--mod-codes", codes.replace("_", ",")]
    if plan.config["tracks"]["negative_strand_values"]:
        arguments.append("--negative-strand-values")
    return arguments


def cohort_inputs(plan: RunPlan, ref: str, aligner: str, motif: str) -> dict[str, Any]:
    """What the cohort table reads: each of its samples' bedMethyl, and the reference's index
    (its contig order)."""
    beds = [
        layout.methylation(s, aligner, motif, ".bedmethyl.gz")
        for s in plan.cohort_samples(ref, motif)
    ]
    return {"beds": beds, "fai": f"{layout.reference_fasta(ref)}.fai"}


# ---- DMRs


def dmr_counts_inputs(plan: RunPlan, contrast: str) -> dict[str, Any]:
    """A contrast's bedMethyl files (with their indexes) and its reference's index (the contig
    order)."""
    chosen = plan.contrasts[contrast]
    beds = list(chosen.sources.values())
    return {
        "bedmethyl": beds,
        "tbi": [f"{b}.tbi" for b in beds],
        "fai": f"{layout.reference_fasta(chosen.reference)}.fai",
    }


def dmr_truth(plan: RunPlan, contrast: str) -> str | None:
    """The simulated truth regions a contrast is scored against: its first sample's, when every
    sample of it is simulated with regions of its kind (DMRs between groups, allele-specific
    regions); else None."""
    chosen = plan.contrasts[contrast]
    samples = [
        c.removesuffix("_hp1").removesuffix("_hp2") for c in (*chosen.group1, *chosen.group2)
    ]
    key = "group_regions" if chosen.kind == "groups" else "asm_regions"
    settings = [plan.config["simulate"].get(s) for s in samples]
    if all(s is not None and s.get(key, 0) > 0 for s in settings):
        return layout.simulated(samples[0], "regions.bed")
    return None


def dmr_report_inputs(plan: RunPlan, contrast: str) -> dict[str, Any]:
    """What a contrast's figure reads: its merged tables and its samples' bedMethyl files (each
    sample's per-site values in the top regions)."""
    beds = list(plan.contrasts[contrast].sources.values())
    return {
        "dmrs": layout.dmr(contrast, ".dmrs.bed.gz"),
        "sites": layout.dmr(contrast, ".sites.tsv.gz"),
        "bedmethyl": beds,
        "tbi": [f"{b}.tbi" for b in beds],
    }


# ---- the comparison


def compared_staged_reads(plan: RunPlan, name: str, io_mode: str) -> str:
    """The staged reads the comparison reads, a file: a modBAM sample's staged again for it when
    its staging streams into the align job (a pipe has one reader)."""
    if plan.staging_streams and plan.samples[name].input_kind.stages_tagged_reads:
        return layout.compare_input(f"staged/{name}.fastq")
    return staged_reads(plan, name, io_mode)


def compare_reads(plan: RunPlan, io_mode: str, mate: int = 1) -> str | list[str]:
    """The reads of the alignment cells (R1 of pairs; mate 2: R2, none for other samples): the
    sample's, or their first compare.reads (pairs)."""
    sample = plan.compare_sample()
    fmt = sample.reads_format.removesuffix(".gz")
    if mate == 2:
        if not sample.paired or not plan.config["compare"]["reads"]:
            return staged_reads2(plan, sample.name)
        return layout.compare_input(f"{sample.name}.2.{fmt}")
    if not plan.config["compare"]["reads"]:
        return compared_staged_reads(plan, sample.name, io_mode)
    mate_suffix = ".1" if sample.paired else ""
    return layout.compare_input(f"{sample.name}{mate_suffix}.{fmt}")


def compare_index_files(plan: RunPlan) -> dict[str, list[str]]:
    """Every compared aligner's index files for the compared sample, by aligner (the report
    sets their size against the nodes' memory); none without alignment cells."""
    if "alignment" not in plan.compare_steps():
        return {}
    name = plan.compare_sample().name
    return {
        f"index_{aligner}": plan.aligner_index_files(name, aligner)
        for aligner in plan.config["compare"]["aligners"]
    }


def compare_bam(plan: RunPlan) -> str:
    """The alignments of the methylation cells: the sample's, or those of compare.reads reads."""
    sample = plan.compare_sample()
    if not plan.config["compare"]["reads"]:
        return layout.bam(sample.name, plan.aligner)
    return layout.compare_input(f"{sample.name}.{plan.aligner}.bam")


def compare_cell_inputs(plan: RunPlan, io_mode: str) -> dict[str, Any]:
    """What a cell needs: every cell's inputs (all are ready before the first cell starts, so no
    other job runs beside a cell)."""
    name = plan.compare_sample().name
    inputs = {"reads": compare_reads(plan, io_mode), "genome": reference_fasta(plan, name)}
    if compare_reads(plan, io_mode, 2):
        inputs["reads2"] = compare_reads(plan, io_mode, 2)
    steps = plan.compare_steps()
    inputs.update(compare_index_files(plan))
    if "methylation" in steps:
        bam = compare_bam(plan)
        inputs["bam"], inputs["bai"] = bam, f"{bam}.bai"
        for mode in plan.config["compare"]["io_modes"]:
            reads = staged_reads(plan, name, mode)
            inputs[f"signal_{mode}"] = [reads, f"{reads}.index.readdb"]
        if modes_reading("blow5", plan.config["compare"]["io_modes"]):
            inputs["blow5"] = layout.blow5(name)
    return inputs


def compare_cell_files(plan: RunPlan, kind: str) -> list[str]:
    """Every cell's file of a kind: 'record', 'time' (GNU time -v) or 'benchmark'."""
    path = {
        "record": lambda cell: layout.compare_cell(cell, ".run.json"),
        "time": lambda cell: layout.compare_cell(cell, ".time.txt"),
        "benchmark": lambda cell: layout.benchmark("compare_cell", f"{cell}.tsv"),
    }[kind]
    return [path(cell) for cell in plan.compare_cells]


# ---- statistics over region sets (config regions:; numapore.modbam.regions)


def entropy_threshold(plan: RunPlan, name: str) -> float | None:
    """The pass threshold of a sample's entropy, its pileup's: pileup.filter_threshold when a
    number, the probability of nanopolish's LLR threshold for called reads; None: estimated."""
    threshold = plan.config["pileup"]["filter_threshold"]
    if threshold != "auto":
        return float(threshold)
    if plan.samples[name].input_kind.runs("call_methylation"):
        return llr_probability(plan.config["methylation"]["call_threshold"])
    return None


def region_entities(plan: RunPlan, aligner: str, motif: str) -> list[dict[str, Any]]:
    """Who a region set's tables have rows of, in order: each sample with a bedMethyl of the
    motif, then its haplotypes (pileup.phased), then each group (of one reference): per entity
    level, name ('of'), bedMethyl files (stats) and what its entropy reads."""
    percentile = float(plan.config["pileup"]["filter_percentile"])
    entities = []

    def entity(level, of, bams, beds, reference, threshold=None, **more):
        return {"level": level, "of": of, "bams": bams, "bedmethyl": beds, "threshold": threshold,
                "reference": reference, "percentile": percentile, **more}  # fmt: skip

    for name in plan.region_samples(motif):
        bam, reference = pileup_bam(plan, name, aligner, motif), reference_fasta(plan, name)
        threshold = entropy_threshold(plan, name)
        bed = layout.methylation(name, aligner, motif, ".bedmethyl.gz")
        entities.append(entity("sample", name, [bam], [bed], reference, threshold))
        for hp in plan.region_haplotypes(name):
            bed = layout.methylation(name, aligner, motif, f".{hp}.bedmethyl.gz")
            entities.append(
                entity("haplotype", f"{name}.{hp}", [bam], [bed], reference,
                       haplotype=int(hp[-1]), mean_of=[(bam, threshold)])  # fmt: skip
            )
    for group, members in plan.region_groups(motif).items():
        bams = [pileup_bam(plan, m, aligner, motif) for m in members]
        beds = [layout.methylation(m, aligner, motif, ".bedmethyl.gz") for m in members]
        thresholds = [entropy_threshold(plan, m) for m in members]
        mean_of = list(zip(bams, thresholds, strict=True))
        reference = reference_fasta(plan, members[0])
        entities.append(entity("group", group, bams, beds, reference, mean_of=mean_of))
    return entities


def region_inputs(plan: RunPlan, aligner: str, motif: str, what: str) -> dict[str, list[str]]:
    """What a region set's table reads: 'stats' the bedMethyl files (with their indexes),
    'entropy' the modBAMs and references (with theirs)."""
    entities = region_entities(plan, aligner, motif)
    if what == "stats":
        beds = list(dict.fromkeys(b for e in entities for b in e["bedmethyl"]))
        return {"bedmethyl": beds, "tbi": [f"{b}.tbi" for b in beds]}
    bams = list(dict.fromkeys(b for e in entities for b in e["bams"]))
    references = list(dict.fromkeys(e["reference"] for e in entities))
    return {
        "bams": bams,
        "bai": [f"{b}.bai" for b in bams],
        "references": references,
        "fai": [f"{r}.fai" for r in references],
    }


def calls_qc_inputs(plan: RunPlan, name: str, aligner: str, motif: str) -> dict[str, str]:
    """What the QC of a pileup's calls reads: the modBAM the pileup read, with its index, and
    the pass thresholds the pileup recorded."""
    bam = pileup_bam(plan, name, aligner, motif)
    return {
        "bam": bam,
        "bai": f"{bam}.bai",
        "thresholds": layout.pileup_thresholds(name, aligner, motif),
    }


def threshold_setting(plan: RunPlan, name: str) -> str:
    """The config setting that decides a sample's pileup threshold, as the QC of the calls
    names it (options_of decides the threshold itself)."""
    settings = plan.config["pileup"]
    if settings["filter_threshold"] != "auto":
        return f"pileup.filter_threshold {settings['filter_threshold']}"
    if plan.samples[name].input_kind.runs("call_methylation"):
        return f"methylation.call_threshold {plan.config['methylation']['call_threshold']} (LLR)"
    return f"pileup.filter_percentile {settings['filter_percentile']}"
