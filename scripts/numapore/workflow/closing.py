"""What a run says at its end (and, for results it replaces, before its DAG): each function
gives the lines, the workflow logs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from numapore.execution.cluster import failed_everywhere_lines, lost_job_lines, run_slurm_jobs
from numapore.execution.runstate import replaced_results
from numapore.inputs.modbam_reads import StagedReads
from numapore.methylation.cohort import dropped_lines, read_sample_counts
from numapore.report.empty import SampleOutputs, closing_lines
from numapore.workflow import layout
from numapore.workflow.jobs import step_records
from numapore.workflow.outputs import REPORT_KINDS, run_output

if TYPE_CHECKING:
    from numapore.workflow.plan import RunPlan


def replaced_results_lines(plan: RunPlan) -> list[str]:
    """Which existing results this run makes again with another I/O mode or strategy than
    their run records say: results of different modes are written to the same paths."""
    runs = {s: step_records(plan, s, plan.aligner) for s in plan.samples}
    strategies = {step: plan.host.strategy_for(step) for step in ("alignment", "methylation")}
    overrides = {
        "alignment": plan.host_overrides("strategy.alignment").get("overrides", {}),
        "methylation": plan.host_overrides("io_mode", "strategy.methylation").get("overrides", {}),
    }
    io = plan.io_mode
    if plan.tune is not None and plan.tune["candidates"]:  # the last tuning's, if any
        record = Path(plan.tune["files"]["record"])
        if not record.is_file():
            return []
        io = json.loads(record.read_text())["io_mode"]
    return [f"numapore: {line}" for line in replaced_results(runs, io, strategies, overrides)]


def rejected_lines(plan: RunPlan) -> list[str]:
    """Per sample, how many FAST5 files or reads the conversion left out."""
    lines = []
    for name in plan.samples:
        listing = Path(layout.blow5(name, ".rejected.tsv"))
        if listing.is_file():
            skipped = len(listing.read_text().splitlines()) - 1
            if skipped:
                lines.append(
                    f"numapore: sample '{name}': {skipped} FAST5 files/reads skipped "
                    f"(on_bad_fast5: skip), listed with reasons in {listing}"
                )
    return lines


def modbam_staging_lines(plan: RunPlan) -> list[str]:
    """Per modbam sample, which reads went without calls for want of usable tags, and when its
    input was aligned to another reference."""
    lines = []
    for name, sample in plan.samples.items():
        counts = Path(layout.staged_counts(name))
        if not sample.input_kind.stages_tagged_reads or not counts.is_file():
            continue
        staged = StagedReads.read(counts)
        listing = layout.modbam_staging(name, "untagged")
        log = layout.log("stage_modbam_reads", f"{name}.log")
        lines += [
            f"numapore: {line}"
            for line in staged.warnings(name, str(sample.reference), listing, log)
        ]
    return lines


def location_lines(rules: set[str]) -> list[str]:
    """Where the reports this run made are (and how to build Snakemake's), each only if this
    run's jobs (rules: their rules' names) include it, the strategy comparison's last."""
    lines = []
    if "multiqc" in rules:
        where = Path(layout.MULTIQC_REPORT).resolve()
        lines.append(f"numapore: MultiQC report over every sample: {where}")
    if rules & {f"report_{kind}" for kind in REPORT_KINDS}:
        lines.append(
            "numapore: figures per sample in results/<sample>/report/; the run report (figures, "
            "accounting, provenance): snakemake --profile profiles/hpc-numa --report "
            "results/report.html"
        )
    if "compare_report" in rules:
        lines.append(
            f"numapore: strategy comparison: {Path(layout.COMPARISON_REPORT).resolve()} (plots "
            "beside it: time_vs_threads.png, utilisation_core_hours.png, io_modes.png; every "
            "cell: summary.tsv; the host file to adopt: recommended-host.yaml)"
        )
    return lines


def cohort_lines(plan: RunPlan) -> list[str]:
    """Per cohort table, the samples of which its filters (config cohort:) kept no site, and
    the table itself when they emptied it."""
    lines = []
    for ref, motif in plan.cohorts():
        counts = Path(layout.cohort_samples(ref, plan.aligner, motif))
        if counts.is_file():
            read, kept = read_sample_counts(counts)
            table = layout.cohort_table(ref, plan.aligner, motif)
            filters = plan.cohort_filters(ref, motif)
            lines += [f"numapore: {line}" for line in dropped_lines(table, read, kept, filters)]
    return lines


def after_run_lines(plan: RunPlan, rules: set[str]) -> list[tuple[str, str]]:
    """What a successful run says last, in order, as (level, line): what the conversion and the
    staging left out, where the reports are (rules: the run's jobs' rules), what the cohort
    tables' filters left out, and last the samples whose main output is empty."""

    def warn(lines: list[str]) -> list[tuple[str, str]]:
        return [("warning", line) for line in lines]

    return [
        *warn(rejected_lines(plan)),
        *warn(modbam_staging_lines(plan)),
        *[("info", line) for line in location_lines(rules)],
        *warn(cohort_lines(plan)),
        *warn(empty_sample_lines(plan)),
    ]


def empty_sample_lines(plan: RunPlan) -> list[str]:
    """One warning per sample whose main output is empty (those that allow_empty_samples let
    through), with the reason (numapore.report.empty)."""
    a = plan.aligner
    runs = []
    for s, sample in plan.samples.items():
        summary = Path(layout.bam(s, a, ".summary.tsv"))
        piled = sample.input_kind.runs("pileup")
        called = sample.input_kind.runs("call_methylation")
        # Where each read is accounted for: the read accounting, else what staging counted.
        fates = run_output(plan, "accounting", s, a) if called else layout.staged_counts(s)
        runs.append(
            SampleOutputs(
                sample=s,
                main=Path(run_output(plan, "bedmethyl", s, a)) if piled else summary,
                alignment=summary,
                source=str(sample.reads),
                reference=str(sample.reference),
                aligner=a,
                accounting=Path(run_output(plan, "accounting", s, a)) if called else None,
                signal=", ".join(str(p) for p in sample.signal),
                fates=Path(fates),
            )
        )
    return list(closing_lines(runs))


def cluster_lines(executor: str, started: float, succeeded: bool) -> list[str]:
    """On Slurm (executor: the plugin's name), from its accounting of the jobs this run
    submitted since started (epoch s): which were lost with their node and run again; after a
    failed run also which failed on every node they ran on."""
    if executor != "slurm":
        return []
    jobs = run_slurm_jobs(Path.cwd().resolve(), started)
    lines = lost_job_lines(jobs) + ([] if succeeded else failed_everywhere_lines(jobs))
    return [f"numapore: {line}" for line in lines]
