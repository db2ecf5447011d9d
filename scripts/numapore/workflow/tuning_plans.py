"""The run's two tunings, planned before any job (config tune, tuning:): the host's (I/O mode
and NUMA strategies: numapore.compare.tuning, tune_strategy) and the pileup's (regions x
threads: numapore.compare.tune_pileup). Each plan is None when tuning is off or has nothing to
tune, else what the tuning job measures, its cache key and files; what it says goes to the
plan's notes."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numapore.base.errors import InputError
from numapore.compare import tune_pileup, tune_strategy, tuning
from numapore.compare.measure import MIN_MEASURABLE_S
from numapore.execution.io_modes import check_run as check_io_mode
from numapore.execution.versions import tool_versions
from numapore.workflow import layout

if TYPE_CHECKING:
    from numapore.workflow.plan import RunPlan


def _say(plan: RunPlan, main_process: bool, line: str) -> None:
    """A tuning line in the run's first lines (the run's own process only)."""
    if main_process:
        plan.notes.append(("info", f"numapore: tuning: {line}"))


def host_tuning(plan: RunPlan, main_process: bool) -> dict[str, Any] | None:
    """Host tuning's plan: None when off or when there is nothing to tune (no I/O mode: no
    raw-signal sample or an io_mode on the command line; and no strategy: one NUMA node or one
    on the command line), else the tuned sample, the candidates, the cache key and the tuning
    files (named for this host, or on a cluster for the partition)."""
    config, samples = plan.config, plan.samples
    settings = tuning.settings(config)
    if settings["mode"] == "off":
        return None
    signal_samples = [s for s in samples.values() if s.input_kind.runs("raw_signal")]
    io_why = ""
    if "io_mode" in plan.host.overrides:
        io_why = f"--config io_mode={plan.io_mode} is given"
    elif not signal_samples:
        io_why = "no sample has raw signal"
    # The steps' strategies, on a host of more than one NUMA node: the alignment's of every
    # input kind, with the run's aligner, on the tuned sample's first reads; nanopolish
    # calling's under the I/O mode, when the tuned sample has raw signal.
    whys = {step: tune_strategy.why_not_tuned(plan.host, step) for step in tune_strategy.STEPS}
    if not signal_samples:
        whys["methylation"] = whys["methylation"] or "nothing to tune: no raw signal"
    strategy_steps = [step for step, why in whys.items() if not why]
    strategies_why = "; ".join(dict.fromkeys(whys.values())) if not strategy_steps else ""
    if io_why and not strategy_steps:
        _say(plan, main_process, f"nothing to tune: {io_why}; {strategies_why}")
        return None
    # The I/O modes and the calling's strategies need a raw-signal sample; the alignment's
    # alone, any sample.
    choices = signal_samples or list(samples.values())
    name = settings["sample"] or choices[0].name
    if name not in {s.name for s in choices}:
        what = "a raw-signal sample" if signal_samples else "a sample of the sheet"
        raise InputError(
            f"config tuning.sample: {name!r} is not {what} "
            f"(those: {', '.join(s.name for s in choices)})"
        )
    candidates = []
    for mode in [] if io_why else tuning.io_candidates(s.signal_format for s in signal_samples):
        try:
            check_io_mode(mode, samples.values(), config, plan.host_file)
            candidates.append(mode)
        except ValueError:  # BLOW5 settings nanopolish cannot read: slow5 is no candidate
            pass
    sample = samples[name]
    aligner = plan.aligner
    key = tuning.cache_key(
        tool_versions(("nanopolish", aligner) if candidates else (aligner,)),
        aligner,
        sample.reference,
        sample.signal,
        settings["storage"],
        candidates,
    ) | {"slice": {k: settings[k] for k in ("reads", "repeats", "share")}}
    if strategy_steps:
        key["strategies"] = strategy_steps
    files = tuning.tuning_files(layout.TUNING, plan.tuning_name)
    reuse, why, again = tuning.IO.cache(files["record"], key, settings["mode"])
    measuring = settings["mode"] != "again" and reuse is None
    decided = os.environ.get(tuning.PAYBACK_ENV)
    if (measuring or settings["mode"] == "again") and len(candidates) > 1:
        # Before any job, the storage probe: what the baseline spends reading the sample's
        # signal, which no I/O mode can save more than. Timed once, by the main process: a
        # job's process (a cluster job parses the workflow again) gets its answer from the
        # environment, so that both build the same DAG; the tuning job weighs its cap by it.
        if main_process or decided not in ("measure", "skip"):
            cells = len(tuning.order(candidates, settings["repeats"]))
            latency_ms = settings["storage"]["latency_ms"]
            worth, because, saving_s = tuning.worth_measuring(
                sample.reads, sample.signal, latency_ms, cells, MIN_MEASURABLE_S
            )
            plan.environment[tuning.PAYBACK_ENV] = "measure" if worth else "skip"
            plan.environment[tuning.SAVING_ENV] = f"{saving_s:.3f}"
        else:
            worth, because = decided == "measure", "as the run's main process found"
    if measuring and settings["check_payback"] and len(candidates) > 1 and not strategy_steps:
        # A sample too small for any I/O mode to save what measuring costs runs the host
        # file's mode, with no tuning job. Only when no strategy is tuned either.
        if not worth:
            _say(plan, main_process, why)
            _say(plan, main_process, f"strategies: {strategies_why}")
            _say(plan, main_process, f"{because}; I/O mode {plan.io_mode} (host file)")
            return None
        why += f"; {because}"
    steps = " and ".join(f"the {step}'s" for step in strategy_steps)
    what = strategies_why or f"{steps} measured on the first reads of sample '{name}'"
    _say(plan, main_process, f"strategies: {what}")
    if io_why:
        _say(plan, main_process, f"I/O mode: nothing to tune: {io_why}")
    _say(plan, main_process, why)
    return {
        "sample": name,
        "candidates": candidates,
        "key": key,
        "files": files,
        "settings": settings,
        "strategy_steps": strategy_steps,
        "strategies_why": strategies_why,
        "again": again,  # tune=again: a new value each run, so Snakemake runs the job again
    }


def tuned_step(plan: RunPlan) -> str:
    """The step whose node the host tuning job asks for: the alignment's, when only its
    strategies are tuned."""
    tune = plan.tune
    if tune and tune["strategy_steps"] == ["alignment"] and not tune["candidates"]:
        return "alignment"
    return "methylation"


def untuned_pileup(plan: RunPlan) -> dict[str, int]:
    """The pileup's {regions, threads} untuned: the host file's pileup: section (what a tuning
    chose, adopted), else config scatter.pileup regions, each job with the run's cores."""
    return dict(plan.host.pileup) or {
        "regions": plan.config["scatter"]["pileup"],
        "threads": plan.cores,
    }


def pileup_tuning(
    plan: RunPlan, threads_given: set[str], main_process: bool = True
) -> dict[str, Any] | None:
    """The pileup's tuning plan: None when off or when there is nothing to tune (no sample runs
    the pileup; its threads given; every setting the same command, as on one core), else the
    tuned sample (tuning.sample if it runs the pileup, else the first that does), its modBAM,
    the candidates, the run's pileup jobs, the cache key and the tuning files."""
    from numapore import __version__ as numapore_version
    from numapore.workflow import jobs

    settings = tuning.settings(plan.config)
    if settings["mode"] == "off":
        return None
    samples = [s for s in plan.samples.values() if s.input_kind.runs("pileup")]
    base = untuned_pileup(plan)
    cores = plan.cores
    candidates, dropped = tune_pileup.candidates(base["regions"], base["threads"], cores)
    # a profile's set-threads (profiles/slurm) wins over a rule's threads: the tuned ones too
    given = threads_given & {"pileup", "pileup_shard"}
    why = ""
    if not samples:
        why = "no sample runs the pileup"
    elif given:
        why = f"the pileup's threads are given (set-threads: {', '.join(sorted(given))})"
    elif len(candidates) < 2:
        what = tune_pileup.label(candidates[0])
        why = f"on {cores} core{'s' * (cores > 1)} every setting runs as {what} does"
    if why:
        _say(plan, main_process, f"pileup: nothing to tune: {why}")
        return None
    named = settings["sample"] in {s.name for s in samples}
    name = settings["sample"] if named else samples[0].name
    motif = plan.sample_motifs(plan.samples[name])[0]
    bam = jobs.pileup_bam(plan, name, plan.aligner, motif)
    key = {
        "format": tune_pileup.FORMAT,
        "numapore": numapore_version,
        "modbam": str(Path(bam).absolute()),
        # as the record's JSON holds it (tuples as lists), so that an equal key compares equal
        "settings": json.loads(json.dumps(asdict(jobs.pileup_options(plan, name, motif)))),
        "candidates": [tune_pileup.label(c) for c in candidates],
        "slice": {k: settings[k] for k in ("repeats", "share")},
    }
    files = tune_pileup.files(layout.TUNING, plan.tuning_name)
    _, why, again = tune_pileup.PILEUP.cache(files["record"], key, settings["mode"])
    _say(plan, main_process, f"pileup: {why}")
    return {
        "sample": name,
        "motif": motif,
        "bam": bam,
        "candidates": candidates,
        "dropped": dropped,
        "jobs": sum(len(plan.sample_motifs(s)) for s in samples),
        "key": key,
        "files": files,
        "settings": settings,
        "again": again,
    }


def tuned_pileup_base(plan: RunPlan) -> str:
    """The host file the pileup's adoptable host file starts from: host tuning's (its
    <host>.yaml) when it runs, else the run's."""
    if plan.tune is None:
        return plan.host_file
    return tuning.tuning_files(layout.TUNING, plan.tuning_name)["host"]
