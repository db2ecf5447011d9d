"""What a run makes: the default target's files, the outputs the reports read, MultiQC's inputs
and the DMRs' files, from the plan and the results' layout."""

from __future__ import annotations

from typing import TYPE_CHECKING

from numapore.workflow import layout
from numapore.workflow.jobs import phased_outputs

if TYPE_CHECKING:
    from numapore.workflow.plan import RunPlan

# The per-sample reports (rules/report.smk); accuracy too for a simulated sample.
REPORT_KINDS = ["alignment_qc", "methylation", "accounting", "provenance"]


def modification_outputs(plan: RunPlan, sample: str, aligner: str) -> dict[str, str]:
    """A run's modBAM and bedMethyl: a signal sample's first motif's modBAM and its pileup, a
    modbam sample's realigned modBAM and its pileup."""
    if plan.samples[sample].input_kind.runs("call_methylation"):
        motif = plan.accounting_motif
        return {
            "modbam": layout.methylation(sample, aligner, motif, ".modbam.bam"),
            "bedmethyl": layout.methylation(sample, aligner, motif, ".bedmethyl.gz"),
        }
    return {
        "modbam": layout.bam(sample, aligner),
        "bedmethyl": layout.methylation(
            sample, aligner, plan.config["pileup"]["motif"], ".bedmethyl.gz"
        ),
    }


def run_output(plan: RunPlan, kind: str, sample: str, aligner: str) -> str:
    """The path of one output of a sample's run that the report reads: 'bam', 'stats',
    'flagstat_text', 'accounting', 'calls', 'frequency', 'modbam', 'bedmethyl', 'accuracy' or
    'truth' (calls and frequency: the motif the accounting counts)."""
    motif = plan.accounting_motif
    paths = {
        "bam": lambda: layout.bam(sample, aligner),
        "stats": lambda: layout.bam(sample, aligner, ".stats.txt"),
        "flagstat_text": lambda: layout.bam(sample, aligner, ".flagstat.txt"),
        "accounting": lambda: layout.accounting(sample, aligner),
        "calls": lambda: layout.methylation(sample, aligner, motif, ".calls.tsv"),
        "frequency": lambda: layout.methylation(sample, aligner, motif, ".frequency.tsv"),
        "modbam": lambda: modification_outputs(plan, sample, aligner)["modbam"],
        "bedmethyl": lambda: modification_outputs(plan, sample, aligner)["bedmethyl"],
        "accuracy": lambda: layout.methylation(sample, aligner, "cpg", ".accuracy.tsv"),
        "truth": lambda: layout.simulated(sample, "truth.tsv"),
    }
    return paths[kind]()


def report_figures(plan: RunPlan, sample: str, aligner: str) -> list[str]:
    """The report's files of one sample and aligner (figures, tables; accuracy if simulated):
    for a sample that nanopolish does not call, its alignment QC and provenance."""
    config = plan.config
    simulated = sample in config["simulate"] and "cpg" in config["methylation"]["motifs"]
    kinds = REPORT_KINDS + (["accuracy"] if simulated else [])
    kind = plan.samples[sample].input_kind
    if not kind.runs("call_methylation"):
        kinds = ["alignment_qc", *(["methylation"] if kind.runs("pileup") else [])]
        kinds += ["accounting"] if kind.read_accounting else []
        kinds.append("provenance")
    if plan.sample_tracks(sample):
        kinds.append("tracks")
    suffix = {"provenance": "html", "tracks": "html"}  # the others are figures
    return [layout.report_file(sample, aligner, f"{k}.{suffix.get(k, 'png')}") for k in kinds]


def dmr_outputs(plan: RunPlan) -> list[str]:
    """The files of every contrast: merged tables (indexed), the report's figure and table, and
    the score when the truth is known."""
    from numapore.workflow.jobs import dmr_truth

    out = []
    for name in plan.contrasts:
        out += [layout.dmr(name, ".sites.tsv.gz.tbi"), layout.dmr(name, ".dmrs.bed.gz.tbi")]
        out += [layout.dmr(name, ".dmrs.png"), layout.dmr(name, ".top_dmrs.html")]
        if dmr_truth(plan, name):
            out.append(layout.dmr(name, ".score.tsv"))
    return out


def final_outputs(plan: RunPlan) -> list[str]:
    """The default target's files: per sample, the alignments and QC, and what its input kind
    runs (nanopolish: per motif, calls, frequency, bedMethyl, modBAM; pileup: bedMethyl); the
    report's figures, the DMRs, the cohort tables and the MultiQC report over every sample."""
    aligner = plan.aligner
    pileup_motif = plan.config["pileup"]["motif"]
    out = []
    for s, sample in plan.samples.items():
        out += [layout.bam(s, aligner, suffix) for suffix in (".bam.bai", ".stats.txt")]
        out.append(layout.bam(s, aligner, ".summary.tsv"))
        if sample.input_kind.stages_tagged_reads:  # the pileup of the reads' own calls
            out += [
                layout.methylation(s, aligner, pileup_motif, ".bedmethyl.gz.tbi"),
                layout.staged_counts(s),
            ]
            if plan.config["pileup"]["phased"]:
                out += phased_outputs(s, aligner, pileup_motif)
            if plan.scored(s):
                out.append(layout.methylation(s, aligner, "cpg", ".accuracy.tsv"))
        if sample.input_kind.read_accounting:
            out.append(layout.accounting(s, aligner))
        if sample.input_kind.runs("call_methylation"):
            for motif in plan.config["methylation"]["motifs"]:
                out += [
                    layout.methylation(s, aligner, motif, suffix)
                    for suffix in (".calls.tsv", ".frequency.tsv", ".bedmethyl.gz.tbi")
                ]
                out.append(layout.methylation(s, aligner, motif, ".modbam.bam.bai"))
            # The truth is known (simulated CpG methylation): measure calling accuracy.
            if plan.scored(s):
                out.append(layout.methylation(s, aligner, "cpg", ".accuracy.tsv"))
        out += report_figures(plan, s, aligner)
    out += plan.tracks() + plan.igv_sessions()
    out += calls_qc_outputs(plan)
    out += dmr_outputs(plan)
    out += plan.cohort_tables()
    out += plan.region_tables()
    out.append(layout.MULTIQC_REPORT)
    return out


def multiqc_inputs(plan: RunPlan) -> dict[str, list[str]]:
    """What MultiQC reads: every sample's samtools stats and flagstat (text), and numapore's
    custom content (a line per DMR contrast, when there are any)."""
    runs = [(s, plan.aligner) for s in plan.samples]
    return {
        "stats": [run_output(plan, "stats", s, a) for s, a in runs],
        "flagstat": [run_output(plan, "flagstat_text", s, a) for s, a in runs],
        "custom": [
            layout.multiqc_custom("accounting"),
            layout.multiqc_custom("methylation"),
            *(
                [layout.multiqc_custom("calls_qc"), layout.multiqc_custom_plot("calls_qc")]
                if plan.calls_qc_runs()
                else []
            ),
            *([layout.multiqc_custom("dmr")] if plan.contrasts else []),
        ],
    }


def multiqc_runs(plan: RunPlan) -> dict[str, dict[str, str]]:
    """Per MultiQC sample name ('<sample>.<aligner>', as MultiQC names samtools reports) the
    modBAM and bedMethyl of that run, and its read accounting where it has one."""
    a = plan.aligner
    runs = {}
    for s, sample in plan.samples.items():
        kinds = ["modbam", "bedmethyl"] if sample.input_kind.runs("pileup") else []
        if sample.input_kind.read_accounting:
            kinds.append("accounting")
        runs[f"{s}.{a}"] = {k: run_output(plan, k, s, a) for k in kinds}
    return runs


def calls_qc_outputs(plan: RunPlan) -> list[str]:
    """The QC of the calls (plan.calls_qc_runs): per sample and motif its tables, and the
    report's figure and table of them."""
    out = []
    for sample, motif in plan.calls_qc_runs():
        out += [layout.calls_qc(sample, plan.aligner, motif, n) for n in layout.CALLS_QC_FILES]
        out += calls_qc_report_files(sample, plan.aligner, motif)
    return out


def calls_qc_report_files(sample: str, aligner: str, motif: str) -> list[str]:
    """The report's figure and table of a QC of the calls."""
    return [layout.report_file(sample, aligner, f"{motif}.calls_qc.{s}") for s in ("png", "html")]


def calls_qc_inputs(plan: RunPlan) -> dict[str, list[str]]:
    """What MultiQC's QC section reads: every QC's pass table and histograms, by MultiQC
    sample name ('<sample>.<aligner>', '.<motif>' after it when the sample has several)."""
    out = {}
    for sample, motif in plan.calls_qc_runs():
        several = len(plan.sample_motifs(plan.samples[sample])) > 1
        name = f"{sample}.{plan.aligner}" + (f".{motif}" if several else "")
        out[name] = [
            layout.calls_qc(sample, plan.aligner, motif, n)
            for n in ("pass.tsv", "probabilities.tsv")
        ]
    return out
