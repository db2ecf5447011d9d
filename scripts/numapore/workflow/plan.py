"""The run's plan: built once from the config, the sample sheet, the host file and the run's
cores, before any job. It holds every decision of the run (the samples, the host with the
command line's overrides, the I/O mode, both tunings, the pileup's options, the DMR contrasts,
the cohort tables, the comparison's cells) and checks every setting, raising one InputError
line for the first that cannot run. The workflow's common.smk only asks it; a test can build
it without Snakemake."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numapore.base.errors import InputError
from numapore.base.workdir import results_folder_problem
from numapore.compare.cells import compared_sample, matrix, measured_steps
from numapore.execution.aligners import ALIGNERS
from numapore.execution.hosts import (
    HostConfig,
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
from numapore.inputs.kinds import DEFAULT_KIND, KINDS
from numapore.inputs.sheet import (
    Sample,
    check_aligner,
    check_phased_samples,
    combine_samples,
    load_samples,
    read_checked_sheet,
    sample_groups,
    simulated_samples,
)
from numapore.methylation.dmr import Contrast
from numapore.methylation.dmr import plan as plan_contrasts
from numapore.methylation.motifs import MOTIFS
from numapore.workflow import layout


@dataclass
class RunPlan:
    """What a run does, decided once (see the module's docstring). notes: (level, line) to say
    in the run's first lines, in order ('info' or 'warning')."""

    config: dict[str, Any]
    samples: dict[str, Sample]
    groups: dict[str, list[str]]
    host_file: str
    host: HostConfig
    file_host: HostConfig
    cores: int
    tuning_name: str = ""
    tune: dict[str, Any] | None = None
    tune_pileup: dict[str, Any] | None = None
    contrasts: dict[str, Contrast] = field(default_factory=dict)
    compare_cells: list[str] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)

    # ---- settings read everywhere

    @property
    def aligner(self) -> str:
        """The run's aligner (config aligner)."""
        return self.config["aligner"]

    @property
    def io_mode(self) -> str:
        """The host's I/O mode, with the command line's io_mode (a tuning may choose another)."""
        return self.host.io_mode

    @property
    def references(self) -> dict[str, Path]:
        """The run's references by name."""
        return {s.reference_name: s.reference for s in self.samples.values()}

    def shard_ids(self, step: str, n: int | None = None) -> list[str]:
        """Shard names '1-of-N' .. 'N-of-N' of a step scattered into N pieces (config
        scatter:, unless given)."""
        n = n or self.config["scatter"][step]
        return [f"{i}-of-{n}" for i in range(1, n + 1)]

    @property
    def one_call_shard(self) -> bool:
        """Methylation calling not scattered: nanopolish's job writes the sample's call table
        itself (a merge after it would only link it); its shard is '1-of-1'."""
        return self.config["scatter"]["methylation"] == 1

    @property
    def one_align_shard(self) -> bool:
        """The alignment not scattered: the align job makes and finishes the sample's BAM."""
        return self.config["scatter"]["alignment"] == 1

    def job_shard(self, step: str) -> str:
        """The shard in the names of a step's job logs: '1-of-1' when the step is not
        scattered (its one job names itself as a scattered run's shards do), else the
        wildcard."""
        return "{shard}" if self.config["scatter"][step] > 1 else "1-of-1"

    @property
    def staging_streams(self) -> bool:
        """Whether a modBAM sample's staged reads stream into its one align job through a
        named pipe (a scattered alignment splits a file of them first)."""
        return self.one_align_shard

    @property
    def accounting_motif(self) -> str:
        """The motif whose calls the read accounting and the report count: the first."""
        return self.config["methylation"]["motifs"][0]

    def sample_motifs(self, sample: Sample) -> list[str]:
        """The motifs a sample has a bedMethyl of: nanopolish's (methylation.motifs) for a
        signal sample, the pileup's (pileup.motif) for one piling up its reads' own calls."""
        if sample.input_kind.runs("call_methylation"):
            return list(self.config["methylation"]["motifs"])
        return [self.config["pileup"]["motif"]] if sample.input_kind.runs("pileup") else []

    def scored(self, name: str) -> bool:
        """Whether a sample's calls are scored against a simulated truth: a simulated sample
        whose calls cover CpG."""
        if name not in self.config["simulate"]:
            return False
        if self.samples[name].input_kind.runs("call_methylation"):
            return "cpg" in self.config["methylation"]["motifs"]
        return self.config["pileup"]["motif"] == "cpg"

    def minimap2_preset(self, sample: Sample) -> str:
        """minimap2's -x for a sample, index and alignment alike."""
        return sample.input_kind.minimap2_preset(self.config)

    def marks_duplicates(self, name: str) -> bool:
        """Whether the sample's BAM gets its duplicates marked: kinds that mark them (short),
        when config short_reads.mark_duplicates asks for it."""
        kind = self.samples[name].input_kind
        return kind.marks_duplicates and self.config["short_reads"]["mark_duplicates"]

    def bwa_batch(self, name: str) -> int:
        """bwa mem's -K for the sample (0: its kind reads no batches)."""
        return self.samples[name].input_kind.batch(self.config)

    def aligner_index_files(self, name: str, aligner: str) -> list[str]:
        """Every file of the aligner's index for the sample's reference."""
        sample = self.samples[name]
        prefix = layout.reference_index_prefix(sample.reference_name, aligner)
        return ALIGNERS[aligner].index_files(prefix, self.minimap2_preset(sample))

    # ---- wildcard patterns

    def names_where(self, keep) -> str:
        """A wildcard pattern matching the names of the samples keep(sample) is true of; one
        matching nothing when there is none."""
        import re

        names = [re.escape(s.name) for s in self.samples.values() if keep(s)]
        return "|".join(names) if names else "(?!)"

    def wildcard_patterns(self) -> dict[str, str]:
        """The wildcards' patterns (sample names as the sheet schema allows them)."""
        import re

        presets = sorted({k.minimap2_preset(self.config) for k in KINDS.values()})
        return {
            "sample": r"[A-Za-z0-9][A-Za-z0-9_-]*",
            "aligner": "|".join(ALIGNERS),
            "ref": r"[A-Za-z0-9._-]+",
            "shard": r"\d+-of-\d+",
            "fmt": r"fast[aq](\.gz)?",
            "signal": "fast5|blow5",
            "cell": r"[a-z0-9.-]+",
            "motif": "|".join([*MOTIFS, "any"]),
            "preset": "|".join(map(re.escape, presets)),
        }

    def samples_running(self, step: str) -> str:
        """A pattern of the samples whose input kind runs a step (raw_signal, call_methylation,
        pileup)."""
        return self.names_where(lambda s: s.input_kind.runs(step))

    def samples_with_signal_format(self, signal_format: str) -> str:
        """A pattern of the samples whose raw signal is in a format (fast5, pod5, blow5)."""
        return self.names_where(lambda s: s.signal_format == signal_format)

    def simulated_of_kind(self, kind: str) -> str:
        """A pattern of the simulated samples (config simulate:) of an input kind."""
        return self.names_where(lambda s: s.name in self.config["simulate"] and s.kind == kind)

    def samples_with_phased_vcf(self) -> str:
        """A pattern of the samples with a phased VCF (rule haplotag)."""
        return self.names_where(lambda s: bool(s.phased_vcf))

    def host_overrides(self, *names: str) -> dict[str, dict[str, str]]:
        """A rule's params: the command line's settings over the host file among names
        ('io_mode', 'strategy.alignment', 'strategy.methylation'), as {'overrides': ...};
        nothing without any, so that such a run has the params (and reruns) of one before."""
        chosen = {k: v for k, v in self.host.overrides.items() if k in names}
        return {"overrides": chosen} if chosen else {}

    def contrast_pattern(self) -> str:
        """A wildcard pattern matching the contrasts' names."""
        import re

        return "|".join(re.escape(n) for n in self.contrasts) or "(?!)"

    # ---- the cohort tables

    def cohort_samples(self, ref: str, motif: str) -> list[str]:
        """The samples of a cohort table: every sample on the reference with a bedMethyl of
        the motif, in the run's order."""
        return [
            s.name
            for s in self.samples.values()
            if s.reference_name == ref and motif in self.sample_motifs(s)
        ]

    def cohort_tables(self) -> list[str]:
        """The cohort tables of the run (their indexes): per reference and motif shared by two
        samples or more."""
        motifs = dict.fromkeys(m for s in self.samples.values() for m in self.sample_motifs(s))
        return [
            layout.cohort_table(ref, self.aligner, motif, ".tbi")
            for ref in self.references
            for motif in motifs
            if len(self.cohort_samples(ref, motif)) >= 2
        ]

    # ---- the comparison

    def compare_sample(self) -> Sample:
        """The sample the comparison benchmarks (InputError naming what is wrong with it)."""
        return compared_sample(self.config["compare"], self.samples)

    def compare_steps(self) -> list[str]:
        """The steps the comparison measures: those of compare.steps the compared sample's kind
        runs."""
        name = self.config["compare"]["sample"] or next(iter(self.samples), "")
        kind = self.samples[name].kind if name in self.samples else DEFAULT_KIND
        return measured_steps(self.config["compare"]["steps"], kind)


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
    """The config as Snakemake makes it for the workflow: the files' in order, each over the
    ones before (nested keys merged), then the command line's --config (given) over them."""
    import yaml
    from snakemake.utils import update_config

    config: dict[str, Any] = {}
    for path in files:
        update_config(config, yaml.safe_load(Path(path).read_text(encoding="utf-8-sig")) or {})
    update_config(config, dict(given or {}))
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
    from numapore.workflow import tuning_plans

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
        if main_process and config["host_check"] == "jobs":
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
    plan.tuning_name = tuning.tuning_name(config, executor)
    if main_process:
        os.environ[tuning.NAME_ENV] = plan.tuning_name
    try:
        plan.tune = tuning_plans.host_tuning(plan, main_process)
        plan.tune_pileup = tuning_plans.pileup_tuning(plan, set(threads_given), main_process)
    except ValueError as err:
        raise InputError(str(err)) from None
    plan_dmr_contrasts(plan)
    plan.compare_cells = [
        cell.name
        for cell in matrix({**config["compare"], "steps": plan.compare_steps()}, plan.aligner)
    ]
    return plan


def plan_dmr_contrasts(plan: RunPlan) -> None:
    """The contrasts of config dmr:, checked (numapore.methylation.dmr.plan), into the plan."""
    from numapore.workflow import outputs

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
        return ""

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
