"""The run's plan built (numapore.workflow.plan.RunPlan): the config as Snakemake makes it,
checked, the samples loaded, the host file read, both tunings planned, the DMR contrasts and
the comparison's cells; InputError, one line, for the first setting or input that cannot run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from numapore.base.errors import InputError
from numapore.base.workdir import results_folder_problem
from numapore.compare.cells import matrix
from numapore.execution.cluster import NODE_HOST_ENV, partition_hosts, partition_hosts_note
from numapore.execution.hosts import (
    config_overrides,
    describe_overrides,
    host_path,
    load_host_config,
    startup_check,
    with_overrides,
)
from numapore.execution.io_modes import check_run as check_io_mode
from numapore.execution.tools import check_minimap2_preset
from numapore.execution.topology import NumaError
from numapore.inputs.sheet import (
    check_aligner,
    check_phased_samples,
    combine_samples,
    load_samples,
    read_checked_sheet,
    sample_groups,
    simulated_samples,
)
from numapore.methylation.dmr import plan as plan_contrasts
from numapore.workflow import input_checks, layout, outputs, tuning_plans
from numapore.workflow.plan import RunPlan


def normalise(config: dict[str, Any], given: Mapping[str, Any]) -> None:
    """The config's shorthand as its one meaning, in place: the demo off (`simulate: none`,
    empty, or `--config simulate={}`, given: the command line's config) and `tune` as a word
    (`--config tune=on` or an unquoted on/off in YAML read as a boolean)."""
    if config.get("simulate") in ("none", None) or given.get("simulate") == {}:
        config["simulate"] = {}
    if isinstance(config.get("tune"), bool):
        config["tune"] = "on" if config["tune"] else "off"


def check_settings(
    config: dict[str, Any],
    schemas: Path,
    configfiles: Sequence[Path],
    given: Mapping[str, Any],
) -> None:
    """The config checked: one InputError line for an unknown key (with the closest known one)
    or a refused value, naming the file and line or --config; then Snakemake's validation,
    which sets the defaults; then the pileup's settings against its modkit semantics."""
    import yaml
    from snakemake.utils import validate

    from numapore.inputs.schema import check_config
    from numapore.pileup.settings import SettingsError
    from numapore.pileup.settings import check_settings as check_pileup

    schema = yaml.safe_load((schemas / "config.schema.yaml").read_text())
    check_config(config, schema, list(configfiles), given)
    validate(config, schema=str(schemas / "config.schema.yaml"))  # sets the defaults
    try:
        check_pileup(config["pileup"])
    except SettingsError as err:
        raise InputError(str(err)) from None


def load_run_samples(config: dict[str, Any], schemas: Path, workdir: Path):
    """The run's samples, the sheet's and the simulated ones (config simulate:), checked."""
    import yaml
    from snakemake.utils import validate

    sheet = Path(config["samples"])
    table = read_checked_sheet(sheet, yaml.safe_load((schemas / "samples.schema.yaml").read_text()))
    validate(table, schema=str(schemas / "samples.schema.yaml"))
    from_sheet = load_samples(table, sheet, workdir)
    simulated = simulated_samples(config["simulate"], workdir, Path(layout.SIMULATED))
    samples = combine_samples(from_sheet, simulated, sheet)
    return samples, from_sheet, simulated


def load_config(files: Sequence[Path], given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The config as Snakemake makes it for the workflow, keys in its order: files[0] is the
    workflow's own (the Snakefile's configfile:), the others the --configfile files; given the
    command line's --config. Snakemake starts from the command line's (the --configfile files
    merged in order, then --config), merges the workflow's file into it and the command line's
    over that again: nested keys merged, the command line's keys first."""
    import copy

    import yaml
    from snakemake.utils import update_config

    def read(path: Path) -> dict[str, Any]:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8-sig")) or {}

    command_line: dict[str, Any] = {}
    for path in files[1:]:
        update_config(command_line, read(path))
    update_config(command_line, dict(given or {}))
    config = copy.deepcopy(command_line)
    if files:
        update_config(config, read(files[0]))
        update_config(config, command_line)
    return config


def build(
    config: dict[str, Any],
    *,
    schemas: Path,
    configfiles: Sequence[Path] = (),
    given: Mapping[str, Any] | None = None,
    cores: int = 1,
    executor: str = "",
    threads_given: Sequence[str] = (),
    main_process: bool = True,
    workdir: Path | None = None,
) -> RunPlan:
    """The run's plan (config: Snakemake's, normalised and defaulted in place; schemas: the
    workflow's schemas/; configfiles and given: the config's files and --config, for the
    messages; cores: the run's; executor: the executor plugin's name; threads_given: the rules
    whose threads the command line or a profile sets; main_process: the run's own process, not
    a job's). InputError for the first setting or input that cannot run."""
    from numapore.compare import tuning

    given = dict(given or {})
    workdir = workdir or Path.cwd()
    normalise(config, given)
    check_settings(config, schemas, configfiles, given)
    # Before Snakemake makes results/.snakemake (its shadow prefix) and fails with a traceback.
    problem = results_folder_problem(Path(layout.RESULTS))
    if problem:
        raise InputError(problem)
    try:
        samples, from_sheet, simulated = load_run_samples(config, schemas, workdir)
        if config["pileup"]["phased"]:  # haplotags come with a modBAM's reads, or its VCF
            check_phased_samples(samples.values())
        # The host file: config/hosts/ of the working directory (the user's own), else the
        # shipped one. Its NUMA layout must exist on this machine before any job starts; jobs
        # sent to a cluster check it on their node instead: the submitting host only reads it.
        host_file = str(host_path(config["host"]).absolute())
        # config hosts: the run's partition's host file, and a job's node's (checked there)
        host_file, node_file, host_named = partition_hosts(config, host_file, main_process)
        if main_process and config["host_check"] == "jobs" or node_file:
            file_host = load_host_config(host_file)
        else:
            file_host = startup_check(host_file)[0]
        overrides = config_overrides(config)
        host = with_overrides(file_host, overrides)
        check_io_mode(host.io_mode, samples.values(), config, host_file)
        if config["aligner"] == "minimap2":  # a preset the user chose (the kinds say which)
            for setting in {s.input_kind.minimap2_preset_setting for s in samples.values()} - {""}:
                section, key = setting.split(".")
                check_minimap2_preset(config[section][key], f"config {setting}")
        check_aligner(samples.values(), config["aligner"])
    except (NumaError, ValueError) as err:
        raise InputError(str(err)) from None
    plan = RunPlan(
        config=config,
        samples=samples,
        groups=sample_groups(samples),
        host_file=host_file,
        host=host,
        file_host=file_host,
        cores=cores,
    )
    plan.notes.append(("info", f"numapore: host file {host_file} (I/O mode {host.io_mode})"))
    if config["hosts"]:
        plan.notes.append(("info", f"numapore: {partition_hosts_note(config, host_named)}"))
    if node_file:
        plan.environment[NODE_HOST_ENV] = node_file
    if overrides:
        what = describe_overrides(file_host, overrides)
        plan.notes.append(("info", f"numapore: the command line overrides the host file: {what}"))
    if from_sheet and simulated:
        demo = ", ".join(f"'{name}'" for name in simulated)
        plan.notes.append(
            (
                "info",
                f"numapore: also running the demo sample{'s' * (len(simulated) > 1)} {demo} "
                "(config simulate:); --config simulate=none turns it off",
            )
        )
    plan.notes += [("warning", f"numapore: {n}") for s in samples.values() for n in s.notes]
    # What the inputs themselves say (their headers and first records) is read by the run's own
    # process only: a cluster job's parses the workflow again, and what the run refused never
    # reaches a job.
    if main_process:
        input_checks.check_platforms(plan)
    plan.tuning_name = tuning.tuning_name(config, executor)
    if main_process:
        plan.environment[tuning.NAME_ENV] = plan.tuning_name
    try:
        plan.tune = tuning_plans.host_tuning(plan, main_process)
        plan.tune_pileup = tuning_plans.pileup_tuning(plan, set(threads_given), main_process)
    except ValueError as err:
        raise InputError(str(err)) from None
    plan_dmr_contrasts(plan)
    check_cohort(plan)
    if main_process:
        input_checks.check_dmr_codes(plan)
    check_tracks(plan)
    if main_process:
        check_regions(plan)
    plan.compare_cells = [
        cell.name
        for cell in matrix({**config["compare"], "steps": plan.compare_steps()}, plan.aligner)
    ]
    return plan


def check_tracks(plan: RunPlan) -> None:
    """config tracks.mod_codes: each entry codes (a letter or a ChEBI number) separated by
    commas, no entry twice (one file each)."""
    seen = set()
    for i, entry in enumerate(plan.config["tracks"]["mod_codes"]):
        where = f"config tracks.mod_codes[{i}]"
        for code in str(entry).split(","):
            name = input_checks.CODE_NAMES.get(code.strip().lower())
            if name:
                raise InputError(
                    f"{where}: {entry!r}: {code!r} is modkit's --modified-bases name; "
                    f"its code is {name}"
                )
            if not (len(code) == 1 and code.isalpha() or code.isdigit()):
                raise InputError(
                    f"{where}: {entry!r} is not modification codes (a letter such as m, h, a, or "
                    "a ChEBI number; several separated by commas, no spaces: h,m)"
                )
        codes = ",".join(sorted(str(entry).split(",")))
        if codes in seen:
            raise InputError(f"{where}: {entry!r} is given twice (the same track)")
        seen.add(codes)


def check_regions(plan: RunPlan) -> None:
    """config regions: each set's BED file readable, with regions, every line BED and on
    contigs of every reference of the samples with a bedMethyl (numapore.modbam.regions);
    a run without such samples refused; a group whose samples have different references named
    (its rows are left out)."""
    from numapore.modbam import regions

    sets = plan.region_sets()
    if not sets:
        return
    with_calls = [n for m in plan.region_motifs() for n in plan.region_samples(m)]
    if not with_calls:
        raise InputError(
            "config regions: no sample of the run has a bedMethyl (methylation calls) to "
            "summarise over the regions"
        )
    if "any" in plan.region_motifs():
        raise InputError(
            "config regions: pileup.motif is any: numapore entropy's windows need a motif "
            "(set pileup.motif, e.g. cpg)"
        )
    references = {plan.samples[n].reference_name: plan.samples[n].reference for n in with_calls}
    lengths = {
        shown(path): regions.reference_lengths(path, layout.reference_fasta(name))
        for name, path in references.items()
    }
    for name, path in sets.items():
        regions.check_region_set(name, path, lengths)
    for motif in plan.region_motifs():
        left_out = set(plan.groups) - set(plan.region_groups(motif))
        for group in sorted(g for g in left_out if set(plan.groups[g]) & set(with_calls)):
            plan.notes.append(
                ("warning", f"numapore: config regions: group {group!r} has no rows in the "
                 "region tables: its samples are on different references")
            )  # fmt: skip


def shown(path: Path) -> str:
    """A path as messages show it: from the working directory when it is under it."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def check_cohort(plan: RunPlan) -> None:
    """config cohort: a min_samples that is neither a number from 1 nor `all`, or that no
    cohort table of the run has samples enough for (it would be empty)."""
    given = plan.config["cohort"]["min_samples"]
    if given != "all" and (isinstance(given, str) or given < 1):
        fix = "; did you mean `all`?" if str(given).strip().lower() == "all" else ""
        raise InputError(
            f"config cohort.min_samples: {given!r} is neither a number of samples from 1 nor "
            f"all{fix}"
        )
    for ref, motif in plan.cohorts():
        samples = plan.cohort_samples(ref, motif)
        if given != "all" and given > len(samples):
            raise InputError(
                f"config cohort.min_samples: {given} is more than the {len(samples)} samples of "
                f"the cohort table of {ref} ({motif}: {', '.join(samples)}): it would be empty"
            )


def plan_dmr_contrasts(plan: RunPlan) -> None:
    """The contrasts of config dmr:, checked (numapore.methylation.dmr.plan), into the plan."""
    config = plan.config
    motif = config["pileup"]["motif"]

    def haplotype_bedmethyl(sample: str) -> tuple[str, str]:
        return tuple(
            layout.methylation(sample, plan.aligner, motif, f".{hp}.bedmethyl.gz")
            for hp in ("hp1", "hp2")
        )

    def not_phased(sample: str) -> str:
        kind = plan.samples[sample].input_kind
        if not config["pileup"].get("phased", False):
            return "pileup.phased is false (no per-haplotype bedMethyl files)"
        if not kind.stages_tagged_reads:
            return f"its reads (kind {plan.samples[sample].kind}) carry no haplotags (HP tags)"
        simulated = config["simulate"].get(sample)
        if simulated is not None and not simulated.get("haplotagged", 0):
            return f"simulate.{sample}.haplotagged is 0: its reads carry no HP tags"
        return input_checks.no_haplotags(plan, plan.samples[sample])

    contrasts = plan_contrasts(
        config["dmr"],
        plan.groups,
        lambda sample: outputs.run_output(plan, "bedmethyl", sample, plan.aligner),
        {s: plan.samples[s].reference_name for s in plan.samples},
        haplotype_bedmethyl,
        not_phased,
    )
    plan.contrasts = {c.name: c for c in contrasts}
    plan.notes += [("info", f"numapore: {n}") for c in contrasts for n in c.notes]
