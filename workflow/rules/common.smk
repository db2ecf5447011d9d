# Configuration and sample sheet: validated here, before any job starts, so that a bad input
# fails fast with one message naming the key or the file.
import functools
import json
import os
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import yaml
from snakemake.utils import validate
from snakemake_interface_logger_plugins.common import LogEvent

try:  # the installed package (./setup.sh: pip install -e .), as every rule script imports it
    import numapore.cli  # noqa: F401
except ImportError as _err:
    raise WorkflowError(
        f"numapore: the numapore package is not installed for {sys.executable} ({_err}): "
        "run ./setup.sh (or pip install -e . in this environment)"
    )
# What envs/install-numapore.sh (every conda env's post-deploy script) installs.
os.environ.update(NUMAPORE_SOURCE=str(Path(workflow.basedir).parent))
from numapore.execution.cluster import job_cpus, node_request  # noqa: E402
from numapore.compare.cells import Cell, compared_sample, matrix, measured_steps  # noqa: E402
from numapore.nanopolish.calls import llr_probability  # noqa: E402
from numapore.methylation.motifs import MOTIFS  # noqa: E402
from numapore.methylation.dmr import plan as plan_contrasts  # noqa: E402
from numapore.pileup.settings import SettingsError, check_settings  # noqa: E402
from numapore.execution.hosts import (  # noqa: E402
    config_overrides,
    describe_overrides,
    host_path,
    load_host_config,
    startup_check,
    with_overrides,
)
from numapore.execution.aligners import ALIGNERS  # noqa: E402
from numapore.execution.io_modes import IO_MODES, modes_reading  # noqa: E402
from numapore.execution.io_modes import check_run as check_io_mode  # noqa: E402
from numapore.execution.runstate import replaced_results  # noqa: E402
from numapore import __version__ as numapore_version  # noqa: E402
from numapore.compare import tune_pileup, tune_strategy, tuning  # noqa: E402
from numapore.compare.measure import MIN_MEASURABLE_S  # noqa: E402
from numapore.report.empty import SampleOutputs, closing_lines  # noqa: E402
from numapore.execution.tools import check_minimap2_preset  # noqa: E402
from numapore.execution.topology import NumaError  # noqa: E402
from numapore.execution.versions import tool_versions  # noqa: E402
from numapore.inputs.kinds import DEFAULT_KIND, KINDS  # noqa: E402
from numapore.inputs.schema import check_config, did_you_mean  # noqa: E402
from numapore.inputs.sheet import (  # noqa: E402
    InputError,
    check_aligner,
    combine_samples,
    load_samples,
    read_checked_sheet,
    check_phased_samples,
    sample_groups,
    signal_files,
    simulated_samples,
)
from numapore.base.atomic import temp_name  # noqa: E402
from numapore.inputs.modbam_reads import StagedReads  # noqa: E402
from numapore.inputs.phasing import vcf_sample  # noqa: E402
from numapore.base.workdir import (  # noqa: E402
    check_writable,
    prepare_exit,
    release_stale_locks,
    remove_dead_shadows,
    results_folder_problem,
    write_problem,
)


def _load_schema(name):
    """One of workflow/schemas/, parsed."""
    return yaml.safe_load((Path(workflow.basedir) / "schemas" / name).read_text())


# Snakemake prints `Shell command: None` for every job of a script rule (no shell command)
# when shell commands are printed (printshellcmds in profiles/default); shell rules' commands
# are kept.
def _no_empty_shell_command(record):
    """A logging filter: drop the shell-command line of a job that has no shell command."""
    command = getattr(record, "shellcmd", None) or getattr(record, "cmd", None)
    return getattr(record, "event", None) != LogEvent.SHELLCMD or bool(command)


logger.addFilter(_no_empty_shell_command)

# The demo off: `--config simulate=none` (or `simulate:` empty in a config file; a
# `--config simulate={}`, which Snakemake would merge into the file's samples, too).
if (
    config.get("simulate") in ("none", None)
    or workflow.config_settings.config.get("simulate") == {}
):
    config["simulate"] = {}
# `--config tune=on` (or an unquoted on/off in YAML) reads as a boolean: the word is meant.
if isinstance(config.get("tune"), bool):
    config["tune"] = "on" if config["tune"] else "off"
# One numapore: line for an unknown key (with the closest known one) or a refused value, naming
# the file and line or --config; Snakemake's validate would print the whole schema.
try:
    check_config(
        config,
        _load_schema("config.schema.yaml"),
        [Path(f) for f in workflow.configfiles],
        workflow.config_settings.config,
    )
except InputError as err:
    raise WorkflowError(f"numapore: {err}")
validate(config, schema="../schemas/config.schema.yaml")
# pileup: settings its modkit semantics cannot run: one line now, not a failed job later
try:
    check_settings(config["pileup"])
except SettingsError as err:
    raise WorkflowError(f"numapore: {err}")

# Before Snakemake makes results/.snakemake (its shadow prefix) and fails with a traceback.
if results_folder_problem(Path("results")):
    raise WorkflowError(f"numapore: {results_folder_problem(Path('results'))}")

try:
    _sheet = Path(config["samples"])
    _table = read_checked_sheet(_sheet, _load_schema("samples.schema.yaml"))
    validate(_table, schema="../schemas/samples.schema.yaml")
    _from_sheet = load_samples(_table, _sheet, Path.cwd())
    _simulated = simulated_samples(config["simulate"], Path.cwd())
    SAMPLES = combine_samples(_from_sheet, _simulated, _sheet)
    # group -> its samples (the sheet's group column; simulate.<name>.group), in sample order
    GROUPS = sample_groups(SAMPLES)
    if config["pileup"]["phased"]:  # haplotags come with a modBAM's reads, or from its VCF
        check_phased_samples(SAMPLES.values())
    # The host file: config/hosts/ of the working directory (the user's own), else the
    # workflow's shipped one (numapore.execution.hosts.host_path). Its NUMA layout must exist
    # on this machine before any job starts. Jobs sent to a cluster check it on their node
    # instead; the submitting host only reads it.
    HOST_FILE = str(host_path(config["host"]).absolute())
    if workflow.is_main_process and config["host_check"] == "jobs":
        _file_host = load_host_config(HOST_FILE)
    else:
        _file_host = startup_check(HOST_FILE)[0]
    # --config io_mode=... strategy=... (strategy_alignment=, strategy_methylation=) over the
    # host file's settings; HOST.overrides names those that differ from the file.
    _given = config_overrides(config)
    HOST = with_overrides(_file_host, _given)
    # Decided once, here: the rules get the I/O mode as a param (steps never re-read it);
    # what it needs and does: numapore.execution.io_modes.
    IO_MODE = HOST.io_mode
    check_io_mode(IO_MODE, SAMPLES.values(), config, HOST_FILE)
    if config["aligner"] == "minimap2":  # a preset the user chose (the kinds table says which)
        for _setting in {s.input_kind.minimap2_preset_setting for s in SAMPLES.values()} - {""}:
            _section, _key = _setting.split(".")
            check_minimap2_preset(config[_section][_key], f"config {_setting}")
    check_aligner(SAMPLES.values(), config["aligner"])
except (InputError, NumaError, ValueError) as err:
    raise WorkflowError(f"numapore: {err}")
if workflow.is_main_process:
    logger.info(f"numapore: host file {HOST_FILE} (I/O mode {IO_MODE})")
    if _given:
        _what = describe_overrides(_file_host, _given)
        logger.info(f"numapore: the command line overrides the host file: {_what}")
    if _from_sheet and _simulated:
        _demo = ", ".join(f"'{name}'" for name in _simulated)
        logger.info(
            f"numapore: also running the demo sample{'s' * (len(_simulated) > 1)} {_demo} "
            "(config simulate:); --config simulate=none turns it off"
        )
    for _note in (n for s in SAMPLES.values() for n in s.notes):
        logger.warning(f"numapore: {_note}")


def tuning_plan():
    """Host tuning (config tune, tuning:; numapore.compare.tuning): None when off or when
    there is nothing to tune (no I/O mode: no raw-signal sample or an io_mode on the command
    line; and no strategy: one NUMA node or one on the command line), else the tuned sample,
    the candidates, the cache key and the tuning files (named for this host, or on a cluster
    for the partition: tuning.tuning_name)."""
    settings = tuning.settings(config)
    if settings["mode"] == "off":
        return None
    signal_samples = [s for s in SAMPLES.values() if s.input_kind.runs("raw_signal")]
    io_why = ""
    if "io_mode" in HOST.overrides:
        io_why = f"--config io_mode={IO_MODE} is given"
    elif not signal_samples:
        io_why = "no sample has raw signal"
    # The steps' strategies, on a host of more than one NUMA node (tune_strategy): the
    # alignment's of every input kind, with the run's aligner, on the tuned sample's first
    # reads; nanopolish calling's under the I/O mode, when the tuned sample has raw signal.
    whys = {step: tune_strategy.why_not_tuned(HOST, step) for step in tune_strategy.STEPS}
    if not signal_samples:
        whys["methylation"] = whys["methylation"] or "nothing to tune: no raw signal"
    strategy_steps = [step for step, why in whys.items() if not why]
    strategies_why = "; ".join(dict.fromkeys(whys.values())) if not strategy_steps else ""
    if io_why and not strategy_steps:
        if workflow.is_main_process:
            logger.info(f"numapore: tuning: nothing to tune: {io_why}; {strategies_why}")
        return None
    # The I/O modes and the calling's strategies need a raw-signal sample; the alignment's
    # alone, any sample.
    choices = signal_samples or list(SAMPLES.values())
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
            check_io_mode(mode, SAMPLES.values(), config, HOST_FILE)
            candidates.append(mode)
        except ValueError:  # BLOW5 settings nanopolish cannot read: slow5 is no candidate
            pass
    sample = SAMPLES[name]
    key = tuning.cache_key(
        tool_versions(("nanopolish", config["aligner"]) if candidates else (config["aligner"],)),
        config["aligner"],
        sample.reference,
        sample.signal,
        settings["storage"],
        candidates,
    ) | {"slice": {k: settings[k] for k in ("reads", "repeats", "share")}}
    if strategy_steps:
        key["strategies"] = strategy_steps
    files = tuning.tuning_files(name=TUNING_NAME)
    reuse, why = tuning.cached(files["record"], key)
    if settings["mode"] == "again":
        why = "tune=again: measuring anew"
    elif reuse is not None:
        why += f"; I/O mode {reuse['io_mode']} ({reuse['why']})"
    elif settings["check_payback"] and len(candidates) > 1 and not strategy_steps:
        # Before any job: a sample too small for any I/O mode to save what measuring costs
        # runs the host file's mode, with no tuning job (its start, the slice's alignment and
        # the DAG's update after a checkpoint cost more than such a sample could gain). Only
        # when no strategy is tuned either (one NUMA node, or given on the command line).
        # Timed once, by the main process: a job's process (a cluster job parses the workflow
        # again) gets its answer from the environment, so that both build the same DAG (the
        # page cache may have changed the storage's answer in between).
        decided = os.environ.get(tuning.PAYBACK_ENV)
        if workflow.is_main_process or decided not in ("measure", "skip"):
            cells = len(tuning.order(candidates, settings["repeats"]))
            latency_ms = settings["storage"]["latency_ms"]
            worth, because = tuning.worth_measuring(
                sample.reads, sample.signal, latency_ms, cells, MIN_MEASURABLE_S
            )
            os.environ[tuning.PAYBACK_ENV] = "measure" if worth else "skip"
        else:
            worth, because = decided == "measure", "as the run's main process found"
        if not worth:
            if workflow.is_main_process:
                logger.info(f"numapore: tuning: {why}")
                logger.info(f"numapore: tuning: strategies: {strategies_why}")
                logger.info(f"numapore: tuning: {because}; I/O mode {IO_MODE} (host file)")
            return None
        why += f"; {because}"
    if workflow.is_main_process:
        steps = " and ".join(f"the {step}'s" for step in strategy_steps)
        what = strategies_why or f"{steps} measured on the first reads of sample '{name}'"
        logger.info(f"numapore: tuning: strategies: {what}")
        if io_why:
            logger.info(f"numapore: tuning: I/O mode: nothing to tune: {io_why}")
        logger.info(f"numapore: tuning: {why}")
    return {
        "sample": name,
        "candidates": candidates,
        "key": key,
        "files": files,
        "settings": settings,
        "strategy_steps": strategy_steps,
        "strategies_why": strategies_why,
        # tune=again: a param that differs from the last run's, so Snakemake runs it again.
        "again": time.time_ns() if settings["mode"] == "again" else 0,
    }


# The tuning files' name: this host's, or on a cluster the partition's (a node type).
TUNING_NAME = tuning.tuning_name(config, getattr(workflow.executor_plugin, "name", ""))
if workflow.is_main_process:
    os.environ[tuning.NAME_ENV] = TUNING_NAME
try:
    TUNE = tuning_plan()
except (InputError, ValueError) as err:
    raise WorkflowError(f"numapore: {err}")
# The step whose node the tuning job asks for: the alignment's, when only its strategies are
# tuned.
TUNED_STEP = (
    "alignment"
    if TUNE and TUNE["strategy_steps"] == ["alignment"] and not TUNE["candidates"]
    else "methylation"
)


def run_io_mode():
    """The run's I/O mode: the host's (IO_MODE), or the tuning's choice once it is made (an
    input function calling this waits for checkpoint tune_host); the host's when the I/O mode
    is not tuned (only the strategies are)."""
    if TUNE is None or not TUNE["candidates"]:
        return IO_MODE
    record = checkpoints.tune_host.get().output.record
    return json.loads(Path(record).read_text())["io_mode"]


def tuned_strategy_record(step):
    """An input function: the tuning record whose strategy of the step ('alignment',
    'methylation') its jobs follow (they wait for checkpoint tune_host), when that step's
    strategies are tuned (more than one NUMA node)."""

    def record(wildcards=None):
        if TUNE is None or step not in TUNE["strategy_steps"]:
            return []
        return checkpoints.tune_host.get().output.record

    return record


def tuned_strategy_params(step):
    """A rule's params: the step's tuned strategy ('': the host file's), only when that step's
    strategies are tuned, so that other runs have the params of one before tuning."""
    if TUNE is None or step not in TUNE["strategy_steps"]:
        return {}
    record = tuned_strategy_record(step)
    return {"tuned_strategy": lambda wc: tune_strategy.chosen(Path(record()), step)}


def write_error(err):
    """A WorkflowError for an OSError writing the working directory, naming the path."""
    where = f"cannot write {Path(err.filename).resolve()}: " if err.filename else ""
    return WorkflowError(f"numapore: {where}{err.strerror}")


# Rerunning the same command after a kill resumes: --rerun-incomplete (profiles/default) reruns
# the killed jobs, and Snakemake's lock files left by a killed run are removed when no other
# numapore run is alive in this directory (numapore.base.workdir). Snakemake has no public way to
# tell a dead run's locks from a live one's: `--unlock` is a run of its own, by hand, and would
# unlock a live run's files too; so the lock files (.snakemake/locks) are removed here.
_RUN_LOCK = None
if workflow.is_main_process:
    try:
        _RUN_LOCK, _stale_locks = release_stale_locks()
    except OSError as err:
        raise write_error(err)
    if _stale_locks:
        logger.warning(
            "numapore: removed the lock files of a killed run: " + ", ".join(map(str, _stale_locks))
        )


def check_results_writable():
    """Before any job starts: stop, naming the folder and the reason, when results/ cannot be
    written (read-only, full)."""
    try:
        check_writable(Path("results"))
    except OSError as err:
        raise write_error(err)


def host_overrides(*names):
    """A rule's params: the command line's settings over the host file (HOST.overrides) among
    names ('io_mode', 'strategy.alignment', 'strategy.methylation'), as {'overrides': ...};
    nothing without any, so that such a run has the params (and reruns) of one before them."""
    chosen = {k: v for k, v in HOST.overrides.items() if k in names}
    return {"overrides": chosen} if chosen else {}


def shadow_folder():
    """Snakemake's shadow folder: `shadow` in --shadow-prefix (profiles/default sets it), else in
    .snakemake, as --shadow-prefix's help documents (from onstart: the run's settings exist)."""
    return Path(workflow.execution_settings.shadow_prefix or ".snakemake") / "shadow"


def remove_killed_jobs_shadows():
    """Before any job starts, when no other numapore run is alive here: remove the shadow
    folders (partial outputs) of jobs a killed run left."""
    # Snakemake's own `--cleanup-shadow` is a run of its own that empties the whole folder; a
    # killed job's folder stays until someone runs it.
    if _RUN_LOCK is not None:
        removed = remove_dead_shadows(shadow_folder())
        if removed:
            logger.warning(
                "numapore: removed killed jobs' shadow folders: " + ", ".join(map(str, removed))
            )


def check_rule_settings():
    """Once every rule is defined, stop when --set-threads or --set-resources (or a profile's
    set-threads, set-resources) names a rule this workflow does not have; Snakemake ignores
    it. (A malformed value, e.g. call_methylation=-2, Snakemake refuses before reading the
    workflow: profiles/README.md.)"""
    names = sorted(r.name for r in workflow.rules)
    settings = workflow.resource_settings
    for option, given in [
        ("--set-threads", settings.overwrite_threads),
        ("--set-resources", settings.overwrite_resources),
    ]:
        for name in given or {}:
            if name not in names:
                raise WorkflowError(
                    f"numapore: {option} (or a profile's {option.lstrip('-')}): no rule "
                    f"'{name}' in this workflow{did_you_mean(name, names)}"
                )


def hidden_temp(wildcards, output):
    """A params function: the hidden name (numapore.base.atomic.temp_name) a shell rule's tool
    writes its one output to before `mv` renames it, so the output is complete or absent."""
    return str(temp_name(output[0]))


def hidden_index_prefix(suffix):
    """A params function for an index rule: the hidden name (temp_name) of the index's prefix,
    its first output without suffix. The indexer writes there and each file is renamed into
    place once all are written, so each is complete or absent."""
    return lambda wildcards, output: str(temp_name(output[0].removesuffix(suffix)))


def run_cores():
    """The run's core count (--cores); 1 when it has none (a cluster run without --cores)."""
    try:
        return workflow.cores
    except WorkflowError:  # Snakemake's way of saying that --cores was not given
        return 1


# The threads the heavy steps declare (indexes, conversion, alignment, sorting, methylation
# calling) are all the run's cores, so `snakemake --cores N` without a profile gives each N. A
# profile's set-threads overrides them (profiles/hpc-numa caps light steps; profiles/slurm,
# whose runs have no --cores, sets the heavy steps' threads per cluster job).
RUN_CORES = run_cores()
# The threads of the one-thread steps that mostly read files (nanopolish index, the signal
# census, samtools stats, the read accounting): none held, so they run beside the heavy step
# that holds every core rather than before or after it (on a PromethION run they read for
# hours). Their one thread shares the cores.
HOLDS_NO_CORE = 0

# Wildcard patterns (applied in the Snakefile): sample names as the sheet schema allows them.
WILDCARD_PATTERNS = {
    "sample": r"[A-Za-z0-9][A-Za-z0-9_-]*",
    "aligner": "|".join(ALIGNERS),  # numapore.execution.aligners
    "ref": r"[A-Za-z0-9._-]+",
    "shard": r"\d+-of-\d+",
    "fmt": r"fast[aq](\.gz)?",
    "signal": "fast5|blow5",
    "cell": r"[a-z0-9.-]+",
    "motif": "|".join([*MOTIFS, "any"]),
    # The kinds' presets, with those the config chooses.
    "preset": "|".join(map(re.escape, sorted({k.minimap2_preset(config) for k in KINDS.values()}))),
}
REFERENCES = {s.reference_name: s.reference for s in SAMPLES.values()}


def shard_ids(step, n=None):
    """Shard names '1-of-N' .. 'N-of-N' for a step scattered into N pieces (config scatter:,
    unless given)."""
    n = n or config["scatter"][step]
    return [f"{i}-of-{n}" for i in range(1, n + 1)]


# Methylation calling not scattered: nanopolish's job writes the sample's call table itself (a
# merge job after it would only link it: a Python process for nothing); its shard is '1-of-1',
# in its log names as in a scattered run's. Scattered: one table per shard, merged in order.
ONE_CALL_SHARD = config["scatter"]["methylation"] == 1
CALL_SHARD = "1-of-1" if ONE_CALL_SHARD else "{shard}"
# The same for the alignment: not scattered, the align job makes the sample's BAM and finishes
# it (index, samtools reports, alignment check) as merge_alignment_shards does for shards.
ONE_ALIGN_SHARD = config["scatter"]["alignment"] == 1
ALIGN_SHARD = "1-of-1" if ONE_ALIGN_SHARD else "{shard}"
# A modBAM sample's staged reads stream into the one align job through a named pipe
# (rules/reads.smk: stage_modbam_reads); a scattered alignment splits a file of them first.
STAGING_STREAMS = ONE_ALIGN_SHARD


def staged_modbam_reads_output(path):
    """The staging's FASTQ of a modBAM sample: a named pipe to its align job when the staging
    streams (STAGING_STREAMS), else a file."""
    return pipe(path) if STAGING_STREAMS else path


def staging_threads(wildcards):
    """The threads of a modBAM sample's staging: none held when it streams into the align job,
    whose threads are every core (Snakemake sums a pipe group's threads, and on Slurm the two
    are one job with the align job's CPUs); else the run's cores."""
    return HOLDS_NO_CORE if STAGING_STREAMS else RUN_CORES


def sample_bam_outputs():
    """The sample's sorted BAM and what its job makes with it: index, flagstat (JSON) and the
    alignment check (summary), by output name (the reports for MultiQC: rule
    alignment_reports)."""
    name = "results/{sample}/align/{sample}.{aligner}"
    return {
        "bam": f"{name}.bam",
        "bai": f"{name}.bam.bai",
        "flagstat": f"{name}.flagstat.json",
        "summary": f"{name}.summary.tsv",
    }


def nanopolish_signal_format(mode):
    """Where nanopolish reads the raw signal from in an I/O mode: 'fast5' or 'blow5' files."""
    return IO_MODES[mode].signal_format


def staged_reads(wildcards, io_mode=None):
    """The sample's reads as staged for an I/O mode (default: the host's), with nanopolish's
    read index beside them pointing at that mode's signal files; a modBAM sample's as FASTQ
    with their tags in the headers; a short sample's checked reads (R1 of pairs)."""
    sample = SAMPLES[wildcards.sample]
    tuned = not io_mode and sample.input_kind.runs("raw_signal")  # only signal reads differ
    signal = nanopolish_signal_format(io_mode or (run_io_mode() if tuned else IO_MODE))
    return sample.input_kind.staged_reads(sample.name, sample.reads_format, sample.paired, signal)


def read_id_table(wildcards):
    """A modBAM sample's read id table, which its staging writes (numapore.inputs.readids)."""
    # Imported here: the module loads polars, which no other part of the DAG's making needs.
    from numapore.inputs.readids import READ_ID_TABLE

    return f"results/{wildcards.sample}/reads/modbam/{wildcards.sample}{READ_ID_TABLE}"


def counted_reads(wildcards):
    """The file whose read ids the alignment check counts: the staged reads, or a modBAM
    sample's read id table; none when its staging streams into the align job, which then counts
    the BAM's primary records (the table is written once the stream ends)."""
    if not SAMPLES[wildcards.sample].input_kind.stages_tagged_reads:
        return staged_reads(wildcards)
    return [] if STAGING_STREAMS else read_id_table(wildcards)


def staged_reads2(wildcards):
    """The R2 mates of a paired sample as staged (none for other samples)."""
    sample = SAMPLES[wildcards.sample]
    if not sample.paired:
        return []
    return f"results/{sample.name}/reads/paired/{sample.name}.2.{sample.reads_format}"


def reads_shard(wildcards):
    """The reads the aligner gets for one shard: all reads when the step is not scattered."""
    if config["scatter"]["alignment"] == 1:
        return staged_reads(wildcards)
    sample = SAMPLES[wildcards.sample]
    fmt = sample.reads_format.removesuffix(".gz")
    mate = ".1" if sample.paired else ""
    return f"results/{sample.name}/reads/shards/{sample.name}.{wildcards.shard}{mate}.{fmt}"


def reads2_shard(wildcards):
    """The R2 mates of one shard of a paired sample (none for other samples)."""
    sample = SAMPLES[wildcards.sample]
    if not sample.paired or config["scatter"]["alignment"] == 1:
        return staged_reads2(wildcards)
    fmt = sample.reads_format.removesuffix(".gz")
    return f"results/{sample.name}/reads/shards/{sample.name}.{wildcards.shard}.2.{fmt}"


def short_reads_input(wildcards):
    """A short sample's reads files as the sheet names them: reads, and reads2 for pairs."""
    sample = SAMPLES[wildcards.sample]
    return {"reads": sample.reads, **({"reads2": sample.reads2} if sample.paired else {})}


def marks_duplicates(wildcards):
    """Whether the sample's BAM gets its duplicates marked: kinds that mark them (short), when
    config short_reads.mark_duplicates asks for it."""
    kind = SAMPLES[wildcards.sample].input_kind
    return kind.marks_duplicates and config["short_reads"]["mark_duplicates"]


def rewrites_sorted_bam(wildcards):
    """Whether the sample's sorted BAM is rewritten once aligned (read groups settled, duplicates
    marked where asked): the kinds table's answer (short reads). The rule asks the table and its
    script gets the answer, as for marks_duplicates."""
    return SAMPLES[wildcards.sample].input_kind.rewrites_sorted_bam


def alignment_reports_threads(wildcards):
    """The threads of a sample's samtools stats and text flagstat: none held when its kind has a
    step after the alignment (methylation calling, the pileup), which holds every core while
    they run beside it; the run's cores when the alignment is its last step (short reads), so
    the run does not wait on one thread."""
    return HOLDS_NO_CORE if SAMPLES[wildcards.sample].input_kind.steps else RUN_CORES


# The rules that first read a signal sample's reads or raw signal take its prepared reference as
# an input too: a bad reference (prepare_reference checks it) stops the run before they start,
# and every sample's first jobs sit at the same depth of the DAG whether its files are on disk
# or simulated (simulate_reads reads the raw reference): Snakemake's report draws a rule once per
# depth, so a rule at two depths was drawn twice.
def reference_fasta(wildcards):
    """The sample's reference as prepared under results/references/."""
    ref = SAMPLES[wildcards.sample].reference_name
    return f"results/references/{ref}/{ref}.fa"


# The motif whose calls the read accounting counts: the first of methylation.motifs.
ACCOUNTING_MOTIF = config["methylation"]["motifs"][0]


def samples_running(step):
    """A wildcard pattern matching the names of the samples whose input kind runs a step
    (numapore.inputs.kinds.STEPS: raw_signal, call_methylation, pileup); one matching nothing when none does.
    """
    names = [re.escape(s.name) for s in SAMPLES.values() if s.input_kind.runs(step)]
    return "|".join(names) if names else "(?!)"


def simulated_of_kind(kind):
    """A wildcard pattern matching the names of the simulated samples (config simulate:) of an
    input kind (signal or modbam); one matching nothing when there is none."""
    names = [re.escape(n) for n in config["simulate"] if SAMPLES[n].kind == kind]
    return "|".join(names) if names else "(?!)"


def scored(sample):
    """Whether a sample's calls are scored against a simulated truth: a simulated sample whose
    calls cover CpG (nanopolish's motifs, or the pileup's motif for a modbam sample)."""
    if sample not in config["simulate"]:
        return False
    if SAMPLES[sample].input_kind.runs("call_methylation"):
        return "cpg" in config["methylation"]["motifs"]
    return config["pileup"]["motif"] == "cpg"


def accuracy_inputs(wildcards):
    """What the accuracy of a simulated sample reads besides its truth: nanopolish's CpG calls,
    or (modbam) the aligned modBAM with its index and its CpG bedMethyl."""
    s, aligner = wildcards.sample, wildcards.aligner
    inputs = {"truth": f"results/simulated/{s}/truth.tsv"}
    if SAMPLES[s].input_kind.runs("call_methylation"):
        inputs["calls"] = f"results/{s}/methylation/{s}.{aligner}.cpg.calls.tsv"
    else:
        inputs["modbam"] = f"results/{s}/align/{s}.{aligner}.bam"
        inputs["bai"] = f"results/{s}/align/{s}.{aligner}.bam.bai"
        inputs["bedmethyl"] = f"results/{s}/methylation/{s}.{aligner}.cpg.bedmethyl.gz"
    return inputs


def pileup_bam(wildcards):
    """The modBAM a pileup reads: a modbam sample's aligned BAM (haplotagged by WhatsHap when
    it has a phased VCF), or the modBAM made from a signal sample's calls of the motif."""
    name = f"{wildcards.sample}.{wildcards.aligner}"
    if SAMPLES[wildcards.sample].input_kind.runs("call_methylation"):
        return f"results/{wildcards.sample}/methylation/{name}.{wildcards.motif}.modbam.bam"
    if SAMPLES[wildcards.sample].phased_vcf:  # WhatsHap's haplotags from the phased VCF
        return f"results/{wildcards.sample}/align/{name}.haplotagged.bam"
    return f"results/{wildcards.sample}/align/{name}.bam"


def pileup_inputs(wildcards):
    """What the pileup reads: the sample's modBAM (pileup_bam) with its index, and the
    reference; split (pileup_setting's regions > 1), the shards' texts and read listings; tuned,
    the tuning record whose split and threads the jobs follow (they wait for tune_pileup)."""
    name = f"{wildcards.sample}.{wildcards.aligner}"
    bam = pileup_bam(wildcards)
    inputs = {"bam": bam, "bai": f"{bam}.bai", "reference": reference_fasta(wildcards)}
    if TUNE_PILEUP is not None:
        inputs["tuning"] = tuned_pileup_record()
    regions = pileup_setting()["regions"]
    if regions > 1 and "shard" not in wildcards.keys():
        shards = [
            f"results/{wildcards.sample}/methylation/shards/{name}.{wildcards.motif}.{shard}"
            for shard in shard_ids("pileup", regions)
        ]
        inputs["shards"] = [f"{shard}.bed" for shard in shards]
        inputs["shard_listings"] = [f"{shard}.pileup_reads.tsv" for shard in shards]
    return inputs


def haplotype_pileup_inputs(wildcards):
    """What the pileup per haplotype reads: the pileup's BAM, index and reference (never its
    scatter's shards: it is one job)."""
    inputs = pileup_inputs(wildcards)
    return {k: inputs[k] for k in ("bam", "bai", "reference")}


def samples_with_phased_vcf():
    """A wildcard pattern matching the samples with a phased VCF (rule haplotag)."""
    names = [re.escape(s.name) for s in SAMPLES.values() if s.phased_vcf]
    return "|".join(names) if names else "(?!)"


def phased_outputs(sample, aligner, motif):
    """The bedMethyl files per haplotype of a sample's motif (pileup.phased), with indexes."""
    name = f"results/{sample}/methylation/{sample}.{aligner}.{motif}"
    return [f"{name}.{hp}.bedmethyl.gz{index}" for hp in ("hp1", "hp2") for index in ("", ".tbi")]


def sample_motifs(sample):
    """The motifs a sample has a bedMethyl of: nanopolish's (methylation.motifs) for a signal
    sample, the pileup's (pileup.motif) for one piling up its reads' own calls; none else."""
    if sample.input_kind.runs("call_methylation"):
        return list(config["methylation"]["motifs"])
    return [config["pileup"]["motif"]] if sample.input_kind.runs("pileup") else []


def cohort_samples(ref, motif):
    """The samples of a cohort table: every sample on the reference with a bedMethyl of the
    motif, in the run's order."""
    return [
        s.name for s in SAMPLES.values() if s.reference_name == ref and motif in sample_motifs(s)
    ]


def cohort_inputs(wildcards):
    """What the cohort table reads: each of its samples' bedMethyl, and the reference's index
    (its contig order)."""
    beds = [
        f"results/{s}/methylation/{s}.{wildcards.aligner}.{wildcards.motif}.bedmethyl.gz"
        for s in cohort_samples(wildcards.ref, wildcards.motif)
    ]
    return {"beds": beds, "fai": f"results/references/{wildcards.ref}/{wildcards.ref}.fa.fai"}


def cohort_tables(aligner):
    """The cohort tables of the run: per reference and motif shared by two samples or more."""
    motifs = dict.fromkeys(m for s in SAMPLES.values() for m in sample_motifs(s))
    return [
        f"results/cohort/{ref}/cohort.{aligner}.{motif}.bed.gz.tbi"
        for ref in REFERENCES
        for motif in motifs
        if len(cohort_samples(ref, motif)) >= 2
    ]


def pileup_settings(wildcards):
    """The pileup: settings of a job: config pileup: with the job's motif; for nanopolish's calls
    the threshold `auto` keeps nanopolish's meaning: the probability of an LLR of
    methylation.call_threshold (numapore.nanopolish.calls.llr_probability)."""
    settings = {**config["pileup"], "motif": wildcards.motif}
    called = SAMPLES[wildcards.sample].input_kind.runs("call_methylation")
    if called and settings["filter_threshold"] == "auto":
        settings["filter_threshold"] = llr_probability(config["methylation"]["call_threshold"])
    return settings


def untuned_pileup():
    """The pileup's {regions, threads} untuned: the host file's pileup: section (what a tuning
    chose, adopted), else config scatter.pileup regions, each job with the run's cores."""
    return dict(HOST.pileup) or {"regions": config["scatter"]["pileup"], "threads": RUN_CORES}


def pileup_tuning_plan():
    """Host tuning of the pileup (config tune; numapore.compare.tune_pileup): None when off or
    when there is nothing to tune (no sample runs the pileup; every setting the same command,
    as on one core), else the tuned sample (tuning.sample if it runs the pileup, else the
    first that does), its modBAM, the candidates, the run's pileup jobs, the cache key and the
    tuning files."""
    settings = tuning.settings(config)
    if settings["mode"] == "off":
        return None
    samples = [s for s in SAMPLES.values() if s.input_kind.runs("pileup")]
    base = untuned_pileup()
    candidates, dropped = tune_pileup.candidates(base["regions"], base["threads"], RUN_CORES)
    # a profile's set-threads (profiles/slurm) wins over a rule's threads: the tuned ones too
    given = set(workflow.resource_settings.overwrite_threads) & {"pileup", "pileup_shard"}
    why = ""
    if not samples:
        why = "no sample runs the pileup"
    elif given:
        why = f"the pileup's threads are given (set-threads: {', '.join(sorted(given))})"
    elif len(candidates) < 2:
        what = tune_pileup.label(candidates[0])
        why = f"on {RUN_CORES} core{'s' * (RUN_CORES > 1)} every setting runs as {what} does"
    if why:
        if workflow.is_main_process:
            logger.info(f"numapore: tuning: pileup: nothing to tune: {why}")
        return None
    named = settings["sample"] in {s.name for s in samples}
    name = settings["sample"] if named else samples[0].name
    wildcards = SimpleNamespace(
        sample=name, aligner=config["aligner"], motif=sample_motifs(SAMPLES[name])[0]
    )
    bam = pileup_bam(wildcards)
    names = [tune_pileup.label(c) for c in candidates]
    key = {
        "format": tune_pileup.FORMAT,
        "numapore": numapore_version,
        "modbam": str(Path(bam).absolute()),
        "settings": pileup_settings(wildcards),
        "candidates": names,
        "slice": {k: settings[k] for k in ("repeats", "share")},
    }
    files = tune_pileup.files(name=TUNING_NAME)
    reuse, why = tuning.cached(files["record"], key)
    if settings["mode"] == "again":
        why = "tune=again: measuring anew"
    elif reuse is not None:
        why += f"; {tune_pileup.label(list(tune_pileup.chosen(reuse).values()))} ({reuse['why']})"
    if workflow.is_main_process:
        logger.info(f"numapore: tuning: pileup: {why}")
    return {
        "sample": name,
        "motif": wildcards.motif,
        "bam": bam,
        "candidates": candidates,
        "dropped": dropped,
        "jobs": sum(len(sample_motifs(s)) for s in samples),
        "key": key,
        "files": files,
        "settings": settings,
        "again": time.time_ns() if settings["mode"] == "again" else 0,
    }


def tuned_pileup_record(wildcards=None):
    """The pileup's tuning record, when the pileup is tuned (an input: a job asking for it
    waits for checkpoint tune_pileup); none otherwise."""
    if TUNE_PILEUP is None:
        return []
    return checkpoints.tune_pileup.get().output.record


def pileup_setting():
    """The pileup's {regions, threads}: untuned_pileup(), or the tuning's choice once it is made
    (a function calling this waits for checkpoint tune_pileup)."""
    if TUNE_PILEUP is None:
        return untuned_pileup()
    return tune_pileup.chosen(json.loads(Path(tuned_pileup_record()).read_text()))


def pileup_threads(wildcards):
    """The threads of a pileup job: pileup_setting's, the tuning record read as a file (a
    threads function cannot wait for a checkpoint: Snakemake makes the pileup's jobs anew once
    tune_pileup has run, as they wait for its record); untuned_pileup's until then."""
    if TUNE_PILEUP is not None and Path(TUNE_PILEUP["files"]["record"]).is_file():
        record = json.loads(Path(TUNE_PILEUP["files"]["record"]).read_text())
        return tune_pileup.chosen(record)["threads"]
    return untuned_pileup()["threads"]


def tuned_pileup_base():
    """The host file the pileup's adoptable host file starts from: host tuning's (its
    <host>.yaml) when it runs, else the run's."""
    return tuning.tuning_files(name=TUNING_NAME)["host"] if TUNE is not None else HOST_FILE


try:
    TUNE_PILEUP = pileup_tuning_plan()
except (InputError, ValueError) as err:
    raise WorkflowError(f"numapore: {err}")


def final_outputs():
    """The default target's files: per sample, the alignments and QC, and what its input kind
    runs (nanopolish: per motif, calls, frequency, bedMethyl, modBAM; pileup: bedMethyl); the
    report's figures and the MultiQC report over every sample."""
    aligner = config["aligner"]
    out = []
    for s, sample in SAMPLES.items():
        prefix = f"results/{s}"
        out += [
            f"{prefix}/align/{s}.{aligner}.bam.bai",
            f"{prefix}/align/{s}.{aligner}.stats.txt",
            f"{prefix}/align/{s}.{aligner}.summary.tsv",
        ]
        if sample.input_kind.stages_tagged_reads:  # the pileup of the reads' own calls
            name = f"{prefix}/methylation/{s}.{aligner}.{config['pileup']['motif']}"
            out += [f"{name}.bedmethyl.gz.tbi", f"{prefix}/{s}.staged.tsv"]
            if config["pileup"]["phased"]:
                out += phased_outputs(s, aligner, config["pileup"]["motif"])
            if scored(s):
                out.append(f"{prefix}/methylation/{s}.{aligner}.cpg.accuracy.tsv")
        if sample.input_kind.read_accounting:
            out.append(f"{prefix}/{s}.{aligner}.accounting.tsv")
        if not sample.input_kind.runs("call_methylation"):
            out += report_figures(s, aligner)
            continue
        for motif in config["methylation"]["motifs"]:
            name = f"{prefix}/methylation/{s}.{aligner}.{motif}"
            out += [
                f"{name}.calls.tsv",
                f"{name}.frequency.tsv",
                f"{name}.bedmethyl.gz.tbi",
                f"{name}.modbam.bam.bai",
            ]
        # The truth is known (simulated CpG methylation): measure calling accuracy.
        if scored(s):
            out.append(f"{prefix}/methylation/{s}.{aligner}.cpg.accuracy.tsv")
        out += report_figures(s, aligner)
    out += dmr_outputs()  # rules/dmr.smk
    out += cohort_tables(aligner)
    out.append(MULTIQC_REPORT)
    return out


# The run report (rules/report.smk). Its inputs are named here only, so that renamed outputs of
# the other stages need one change: run_output.
MULTIQC_REPORT = "results/multiqc/numapore_multiqc.html"
REPORT_KINDS = ["alignment_qc", "methylation", "accounting", "provenance"]


def run_output(kind, sample, aligner):
    """The path of one output of a sample's run that the report reads: 'bam', 'stats',
    'flagstat_text', 'accounting', 'calls', 'frequency', 'accuracy' or 'truth'."""
    return {
        "bam": f"results/{sample}/align/{sample}.{aligner}.bam",
        "stats": f"results/{sample}/align/{sample}.{aligner}.stats.txt",
        "flagstat_text": f"results/{sample}/align/{sample}.{aligner}.flagstat.txt",
        "accounting": f"results/{sample}/{sample}.{aligner}.accounting.tsv",
        # The report's methylation figures show the motif the accounting counts (the first).
        "calls": f"results/{sample}/methylation/{sample}.{aligner}.{ACCOUNTING_MOTIF}.calls.tsv",
        "frequency": (
            f"results/{sample}/methylation/{sample}.{aligner}.{ACCOUNTING_MOTIF}.frequency.tsv"
        ),
        # Any source of calls: the report's and MultiQC's modification figures (the first
        # motif's modBAM and its pileup for a signal sample, the realigned modBAM for a modbam
        # sample).
        **modification_outputs(sample, aligner),
        "accuracy": f"results/{sample}/methylation/{sample}.{aligner}.cpg.accuracy.tsv",
        "truth": f"results/simulated/{sample}/truth.tsv",
    }[kind]


def modification_outputs(sample, aligner):
    """A run's modBAM and bedMethyl (run_output's 'modbam' and 'bedmethyl')."""
    name = f"results/{sample}/methylation/{sample}.{aligner}"
    if SAMPLES[sample].input_kind.runs("call_methylation"):
        return {
            "modbam": f"{name}.{ACCOUNTING_MOTIF}.modbam.bam",
            "bedmethyl": f"{name}.{ACCOUNTING_MOTIF}.bedmethyl.gz",
        }
    return {
        "modbam": f"results/{sample}/align/{sample}.{aligner}.bam",
        "bedmethyl": f"{name}.{config['pileup']['motif']}.bedmethyl.gz",
    }


def report_inputs(*kinds):
    """An input function: the named run outputs (run_output) of the job's sample and aligner."""
    return lambda wc: {k: run_output(k, wc.sample, wc.aligner) for k in kinds}


def report_figures(sample, aligner):
    """The report's files of one sample and aligner (figures, tables; accuracy if simulated):
    for a sample that nanopolish does not call, its alignment QC and provenance."""
    simulated = sample in config["simulate"] and "cpg" in config["methylation"]["motifs"]
    kinds = REPORT_KINDS + (["accuracy"] if simulated else [])
    if not SAMPLES[sample].input_kind.runs("call_methylation"):
        kind = SAMPLES[sample].input_kind
        kinds = ["alignment_qc", *(["methylation"] if kind.runs("pileup") else [])]
        kinds += ["accounting"] if kind.read_accounting else []
        kinds.append("provenance")
    suffix = {"provenance": "html"}  # the others are figures
    return [f"results/{sample}/report/{sample}.{aligner}.{k}.{suffix.get(k, 'png')}" for k in kinds]


def motif_calls(wildcards):
    """The merged call tables of every motif of methylation.motifs for a sample and aligner
    (none for a sample nanopolish does not call)."""
    if not SAMPLES[wildcards.sample].input_kind.runs("call_methylation"):
        return []
    name = f"results/{wildcards.sample}/methylation/{wildcards.sample}.{wildcards.aligner}"
    return [f"{name}.{motif}.calls.tsv" for motif in config["methylation"]["motifs"]]


def step_records(wildcards):
    """The run records (*.run.json: strategy, command lines, NUMA policies) of a sample's
    alignment and methylation jobs, per step."""
    name = f"{wildcards.sample}.{wildcards.aligner}"
    alignment = [f"results/logs/align/{name}.{shard}.run.json" for shard in shard_ids("alignment")]
    if not SAMPLES[wildcards.sample].input_kind.runs("call_methylation"):
        return {"alignment": alignment}
    return {
        "alignment": alignment,
        "methylation": [
            f"results/logs/call_methylation/{name}.{motif}.{shard}.run.json"
            for motif in config["methylation"]["motifs"]
            for shard in shard_ids("methylation")
        ],
    }


def report_replaced_results():
    """Before the DAG: say which existing results this run makes again with another I/O mode
    or strategy than their run records say (numapore.execution.runstate): results of
    different modes are written to the same paths."""
    if not workflow.is_main_process:
        return
    runs = {s: step_records(SimpleNamespace(sample=s, aligner=config["aligner"])) for s in SAMPLES}
    strategies = {step: HOST.strategy_for(step) for step in ("alignment", "methylation")}
    overrides = {
        "alignment": host_overrides("strategy.alignment").get("overrides", {}),
        "methylation": host_overrides("io_mode", "strategy.methylation").get("overrides", {}),
    }
    io = IO_MODE
    if TUNE is not None and TUNE["candidates"]:  # the last tuning's, if any (this run's later)
        record = Path(TUNE["files"]["record"])
        if not record.is_file():
            return
        io = json.loads(record.read_text())["io_mode"]
    for line in replaced_results(runs, io, strategies, overrides):
        logger.warning(f"numapore: {line}")


def multiqc_inputs(wildcards=None):
    """What MultiQC reads: every sample's samtools stats and flagstat (text), and numapore's
    custom content."""
    runs = [(s, config["aligner"]) for s in SAMPLES]
    return {
        # numapore's custom content covers the nanopolish samples; every sample's samtools
        # reports are there.
        "stats": [run_output("stats", s, a) for s, a in runs],
        "flagstat": [run_output("flagstat_text", s, a) for s, a in runs],
        "custom": [
            "results/multiqc/numapore_accounting_mqc.tsv",
            "results/multiqc/numapore_methylation_mqc.tsv",
            # a line per DMR contrast (rules/dmr.smk), when there are any
            *(["results/multiqc/numapore_dmr_mqc.tsv"] if DMR_CONTRASTS else []),
        ],
    }


def multiqc_runs(wildcards=None):
    """Per MultiQC sample name ('<sample>.<aligner>', as MultiQC names samtools reports) the
    modBAM and bedMethyl of that run, and its read accounting where it has one."""
    a = config["aligner"]
    runs = {}
    for s, sample in SAMPLES.items():
        kinds = ["modbam", "bedmethyl"] if sample.input_kind.runs("pileup") else []
        if sample.input_kind.read_accounting:
            kinds.append("accounting")
        runs[f"{s}.{a}"] = {k: run_output(k, s, a) for k in kinds}
    return runs


def report_locations():
    """After a successful run: say where the reports this run made are (and how to build
    Snakemake's), each only if this run's targets include it (no pointer to an earlier run's
    leftover); the strategy comparison's last, so that a comparison's last line says where it is."""
    rules = {job.rule.name for job in workflow.dag.jobs}
    if "multiqc" in rules:
        logger.info(f"numapore: MultiQC report over every sample: {Path(MULTIQC_REPORT).resolve()}")
    if rules & {f"report_{kind}" for kind in REPORT_KINDS}:
        logger.info(
            "numapore: figures per sample in results/<sample>/report/; the run report (figures, "
            "accounting, provenance): snakemake --profile profiles/hpc-numa --report "
            "results/report.html"
        )
    if "compare_report" in rules:
        logger.info(
            f"numapore: strategy comparison: {Path(COMPARISON_REPORT).resolve()} (plots beside "
            "it: time_vs_threads.png, utilisation_core_hours.png, io_modes.png; every cell: "
            "summary.tsv; the host file to adopt: recommended-host.yaml)"
        )


def read_fates(sample, aligner):
    """Where each of a sample's reads is accounted for: the read accounting (nanopolish's
    samples), else what staging counted (modbam samples)."""
    if SAMPLES[sample].input_kind.runs("call_methylation"):
        return run_output("accounting", sample, aligner)
    return f"results/{sample}/{sample}.staged.tsv"


def report_empty_samples():
    """After a successful run, last: one warning per sample whose main output is empty (those
    that allow_empty_samples let through), with the reason (numapore.report.empty)."""
    a = config["aligner"]
    runs = []
    for s, sample in SAMPLES.items():
        summary = Path(f"results/{s}/align/{s}.{a}.summary.tsv")
        piled = sample.input_kind.runs("pileup")
        called = sample.input_kind.runs("call_methylation")
        runs.append(
            SampleOutputs(
                sample=s,
                main=Path(run_output("bedmethyl", s, a)) if piled else summary,
                alignment=summary,
                source=str(sample.reads),
                reference=str(sample.reference),
                aligner=a,
                accounting=Path(run_output("accounting", s, a)) if called else None,
                signal=", ".join(str(p) for p in sample.signal),
                fates=Path(read_fates(s, a)),
            )
        )
    for line in closing_lines(runs):
        logger.warning(line)


def aligner_index_files(wildcards):
    """Every file of the aligner's index for the sample's reference."""
    sample = SAMPLES[wildcards.sample]
    ref = sample.reference_name
    prefix = f"results/references/{ref}/{wildcards.aligner}/{ref}"
    return ALIGNERS[wildcards.aligner].index_files(prefix, minimap2_preset(sample))


def minimap2_preset(sample):
    """minimap2's -x for a sample, index and alignment alike: its kind's, or the one the config
    chooses for it (numapore.inputs.kinds)."""
    return sample.input_kind.minimap2_preset(config)


def bwa_batch(wildcards):
    """bwa mem's -K for the sample (0: its kind reads no batches): the kind's, or the one the
    config sets (numapore.inputs.kinds)."""
    return SAMPLES[wildcards.sample].input_kind.batch(config)


def aligner_index(wildcards):
    """What the aligner is given as its index: minimap2's .mmi, bwa's / bowtie2's prefix, or
    SNAP's folder."""
    return ALIGNERS[wildcards.aligner].index_argument(aligner_index_files(wildcards))


def io_processes(wildcards, threads):
    """FAST5 reader processes (conversion, fast5-pool): the host's io_processes, else threads."""
    return HOST.io_processes or threads


def cluster_cpus(step):
    """Slurm cpus_per_task of a heavy step's jobs: every CPU of the host when it owns the node."""
    return lambda wildcards, threads: job_cpus(HOST, step, threads)


def cluster_node(step):
    """Slurm slurm_extra of a heavy step's jobs: --exclusive when it must own the node."""
    return lambda wildcards: node_request(HOST, step)


def samples_with_signal_format(signal_format):
    """A wildcard pattern matching the names of the samples whose raw signal is in a format
    ('fast5', 'pod5', 'blow5'); one matching nothing when there are none."""
    names = [re.escape(s.name) for s in SAMPLES.values() if s.signal_format == signal_format]
    return "|".join(names) if names else "(?!)"


def signal_index_inputs(wildcards):
    """What nanopolish index reads the signal from: FAST5 folders, or the converted BLOW5."""
    if wildcards.signal == "blow5":
        return [f"results/{wildcards.sample}/signal/{wildcards.sample}.blow5"]
    return fast5_inputs(wildcards)["dirs"]


def fast5_inputs(wildcards):
    """The sample's FAST5 folders for nanopolish index, plus the files it would not find there
    (listed files, and '*.FAST5'-like names in folders), linked into one folder."""
    # By name, not on disk: a simulated sample's folder does not exist before its rule runs.
    paths = SAMPLES[wildcards.sample].signal
    dirs = [str(p) for p in paths if p.suffix.lower() != ".fast5"]
    files = [str(p) for p in paths if p.suffix.lower() == ".fast5"]
    files += [str(p) for d in dirs for p in odd_fast5_names(d)]
    if files:
        dirs.append(f"results/{wildcards.sample}/fast5_files")
    return {"files": files, "dirs": dirs}


@functools.cache
def odd_fast5_names(folder):
    """FAST5 files in a folder whose extension is not '.fast5' exactly (e.g. '.FAST5')."""
    found = signal_files(Path(folder)).get("fast5", []) if Path(folder).is_dir() else []
    return sorted(p for p in found if p.suffix != ".fast5")


def methylation_shard_inputs(wildcards):
    """What nanopolish needs for one shard: reads + their signal index, BAM shard, reference."""
    reads = staged_reads(wildcards)
    if ONE_CALL_SHARD:
        bam = f"results/{wildcards.sample}/align/{wildcards.sample}.{wildcards.aligner}.bam"
    else:
        bam = (
            f"results/{wildcards.sample}/methylation/shards/"
            f"{wildcards.sample}.{wildcards.aligner}.{wildcards.shard}.bam"
        )
    return {
        "reads": reads,
        "readdb": f"{reads}.index.readdb",
        "bam": bam,
        "bai": f"{bam}.bai",
        "genome": reference_fasta(wildcards),
        # Calling waits for the alignment check, so a wrong reference fails with its reason.
        "alignment_summary": (
            f"results/{wildcards.sample}/align/{wildcards.sample}.{wildcards.aligner}.summary.tsv"
        ),
    }


def accounting_inputs(wildcards):
    """What the accounting reads: reads and their signal index, BAM, the first motif's calls
    (+ the BLOW5's; + the census of FAST5/POD5 inputs); for a modbam sample, the staged reads'
    ids, what staging counted and listed, and the realigned BAM with the pileup's listing of
    its primary alignments."""
    prefix = f"results/{wildcards.sample}"
    name = f"{wildcards.sample}.{wildcards.aligner}"
    reads = staged_reads(wildcards)
    if SAMPLES[wildcards.sample].input_kind.stages_tagged_reads:  # staging counted and listed
        # The pileup lists the BAM's primary alignments as it reads them: a second pass here,
        # beside it, would cost a tenth of its CPU time.
        listing = f"{prefix}/methylation/{name}.{config['pileup']['motif']}.pileup_reads.tsv"
        return {
            "reads": read_id_table(wildcards),
            "staged": f"{prefix}/{wildcards.sample}.staged.tsv",
            "untagged": f"{prefix}/reads/modbam/{wildcards.sample}.untagged.tsv",
            "bam": f"{prefix}/align/{name}.bam",
            "listing": listing,
        }
    inputs = {
        "reads": reads,
        "readdb": f"{reads}.index.readdb",
        "bam": f"{prefix}/align/{name}.bam",
        "calls": f"{prefix}/methylation/{name}.{ACCOUNTING_MOTIF}.calls.tsv",
        "modbam": f"{prefix}/methylation/{name}.{ACCOUNTING_MOTIF}.modbam.bam",
    }
    if IO_MODES[run_io_mode()].converts_signal:
        inputs["blow5_index"] = f"{prefix}/signal/{wildcards.sample}.blow5.idx"
        inputs["rejected"] = f"{prefix}/signal/{wildcards.sample}.blow5.rejected.tsv"
    if SAMPLES[wildcards.sample].signal_format != "blow5":  # a BLOW5 input's index lists its reads
        census = f"{prefix}/signal/{wildcards.sample}.census"
        inputs |= {"census_reads": f"{census}.parquet", "census_files": f"{census}.files.tsv"}
    return inputs


def report_rejected():
    """After a run: say per sample how many FAST5 files or reads the conversion left out."""
    for name in SAMPLES:
        listing = Path(f"results/{name}/signal/{name}.blow5.rejected.tsv")
        if listing.is_file():
            skipped = len(listing.read_text().splitlines()) - 1
            if skipped:
                logger.warning(
                    f"numapore: sample '{name}': {skipped} FAST5 files/reads skipped "
                    f"(on_bad_fast5: skip), listed with reasons in {listing}"
                )


def report_modbam_staging():
    """After a run: say per modbam sample which reads went without calls for want of usable
    tags, and when its input was aligned to another reference (numapore.inputs.modbam_reads)."""
    for name, sample in SAMPLES.items():
        counts = Path(f"results/{name}/{name}.staged.tsv")
        if not sample.input_kind.stages_tagged_reads or not counts.is_file():
            continue
        staged = StagedReads.read(counts)
        listing = f"results/{name}/reads/modbam/{name}.untagged.tsv"
        log = f"results/logs/stage_modbam_reads/{name}.log"
        for line in staged.warnings(name, str(sample.reference), listing, log):
            logger.warning(f"numapore: {line}")


def report_write_problem():
    """After a failed run: say so when the results folder is read-only or full (the tools'
    own messages may be lost: their logs are on the same filesystem)."""
    problem = write_problem(Path("results")) if Path("results").is_dir() else None
    if problem:
        logger.error(
            f"numapore: cannot write the results: {problem}. Free space (or make it writable) "
            "and rerun the same command: finished outputs are kept and reused."
        )


# ----------------------------------------------------------------------------------------------
# The strategy comparison (rules/compare.smk): its cells run one at a time, in run order.


def compare_sample():
    """The sample the comparison benchmarks (numapore.compare.cells.compared_sample, which names
    what is wrong with it)."""
    try:
        return compared_sample(config["compare"], SAMPLES)
    except InputError as err:
        raise WorkflowError(f"numapore: {err}")


def compare_steps():
    """The steps the comparison measures: those of compare.steps that the compared sample's
    kind runs (a short-read sample: alignment only). compare_sample names a missing sample."""
    name = config["compare"]["sample"] or next(iter(SAMPLES), "")
    kind = SAMPLES[name].kind if name in SAMPLES else DEFAULT_KIND
    return measured_steps(config["compare"]["steps"], kind)


COMPARISON_REPORT = "results/compare/report.md"
# The comparison's cells in run order: repeats interleaved, each shuffled with compare.seed
# (numapore.compare.cells.matrix).
COMPARE_CELLS = [
    cell.name for cell in matrix({**config["compare"], "steps": compare_steps()}, config["aligner"])
]


def compared_staged_reads(wildcards):
    """The staged reads the comparison reads, a file: a modBAM sample's staged again for it when
    its staging streams into the align job (STAGING_STREAMS; a pipe has one reader)."""
    if STAGING_STREAMS and SAMPLES[wildcards.sample].input_kind.stages_tagged_reads:
        return f"results/compare/input/staged/{wildcards.sample}.fastq"
    return staged_reads(wildcards)


def compare_reads(wildcards=None):
    """The reads of the alignment cells (R1 of pairs): the sample's, or their first
    compare.reads (pairs)."""
    sample = compare_sample()
    if not config["compare"]["reads"]:
        return compared_staged_reads(SimpleNamespace(sample=sample.name))
    fmt = sample.reads_format.removesuffix(".gz")
    mate = ".1" if sample.paired else ""
    return f"results/compare/input/{sample.name}{mate}.{fmt}"


def compare_reads2(wildcards=None):
    """The R2 mates of the alignment cells' pairs (none for other samples): the sample's, or
    the mates of the first compare.reads pairs."""
    sample = compare_sample()
    if not sample.paired or not config["compare"]["reads"]:
        return staged_reads2(SimpleNamespace(sample=sample.name))
    return f"results/compare/input/{sample.name}.2.{sample.reads_format.removesuffix('.gz')}"


def compare_index_files(wildcards=None):
    """Every compared aligner's index files for the compared sample, by aligner (the report
    sets their size against the nodes' memory); none without alignment cells."""
    if "alignment" not in compare_steps():
        return {}
    sample = SimpleNamespace(sample=compare_sample().name)
    return {
        f"index_{aligner}": aligner_index_files(SimpleNamespace(**vars(sample), aligner=aligner))
        for aligner in config["compare"]["aligners"]
    }


def compare_bam(wildcards=None):
    """The alignments of the methylation cells: the sample's, or those of compare.reads reads."""
    sample = compare_sample()
    if not config["compare"]["reads"]:
        return f"results/{sample.name}/align/{sample.name}.{config['aligner']}.bam"
    return f"results/compare/input/{sample.name}.{config['aligner']}.bam"


def compare_cell_inputs(wildcards):
    """What a cell needs: every cell's inputs (all are ready before the first cell starts, so no
    other job runs beside a cell)."""
    if wildcards.cell not in COMPARE_CELLS:
        raise WorkflowError(f"numapore: {wildcards.cell!r} is not a cell of config compare:")
    check_one_cell_at_a_time()
    sample = SimpleNamespace(sample=compare_sample().name)
    inputs = {"reads": compare_reads(), "genome": reference_fasta(sample)}
    if compare_reads2():
        inputs["reads2"] = compare_reads2()
    steps = compare_steps()
    inputs.update(compare_index_files())
    if "methylation" in steps:
        bam = compare_bam()
        inputs["bam"], inputs["bai"] = bam, f"{bam}.bai"
        for io_mode in config["compare"]["io_modes"]:
            reads = staged_reads(sample, io_mode)
            inputs[f"signal_{io_mode}"] = [reads, f"{reads}.index.readdb"]
        if modes_reading("blow5", config["compare"]["io_modes"]):
            inputs["blow5"] = f"results/{sample.sample}/signal/{sample.sample}.blow5"
    return inputs


# Cells run one at a time, in run order: each holds the resource `compare` (rules/compare.smk),
# limited to 1 by `resources: [compare=1]` in profiles/default, and the scheduler starts the
# ready cell of highest priority first (cell_priority).
def check_one_cell_at_a_time():
    """Stop, saying how to fix it, when the run does not limit the `compare` resource to 1 (a
    --resources on the command line replaces profiles/default's): cells would overlap."""
    limits = workflow.resource_settings.resources
    if workflow.is_main_process and ("compare" not in limits or limits["compare"].value != 1):
        raise WorkflowError(
            "numapore: the comparison's cells must run one at a time: give --resources "
            "compare=1 (profiles/default sets it; a --resources of your own replaces it)"
        )


def cell_priority(wildcards):
    """A cell's scheduling priority: the earlier in the run order, the higher."""
    return len(COMPARE_CELLS) - COMPARE_CELLS.index(wildcards.cell)


def compare_cell_files(kind):
    """Every cell's file of a kind: 'record', 'time' (GNU time -v) or 'benchmark'."""
    pattern = {
        "record": "results/compare/cells/{}.run.json",
        "time": "results/compare/cells/{}.time.txt",
        "benchmark": "results/benchmarks/compare_cell/{}.tsv",
    }[kind]
    return [pattern.format(name) for name in COMPARE_CELLS]


# ----------------------------------------------------------------------------------------------
# DMRs with DSS (rules/dmr.smk; numapore.methylation.dmr): the contrasts of config dmr:, checked
# here at config load, before any job.
def dmr_bedmethyl(sample):
    """The bedMethyl a group contrast reads of a sample (the report's: run_output)."""
    return run_output("bedmethyl", sample, config["aligner"])


def dmr_haplotype_bedmethyl(sample):
    """A phased sample's per-haplotype bedMethyl files (pileup.phased), haplotype 1 then 2."""
    name = f"results/{sample}/methylation/{sample}.{config['aligner']}.{config['pileup']['motif']}"
    return f"{name}.hp1.bedmethyl.gz", f"{name}.hp2.bedmethyl.gz"


def dmr_not_phased(sample):
    """Why a sample has no per-haplotype bedMethyl ('' when it has them)."""
    kind = SAMPLES[sample].input_kind
    if not config["pileup"].get("phased", False):
        return "pileup.phased is false (no per-haplotype bedMethyl files)"
    if not kind.stages_tagged_reads:
        return f"its reads (kind {SAMPLES[sample].kind}) carry no haplotags (HP tags)"
    simulated = config["simulate"].get(sample)
    if simulated is not None and not simulated.get("haplotagged", 0):
        return f"simulate.{sample}.haplotagged is 0: its reads carry no HP tags"
    return ""


try:
    DMR_CONTRASTS = {
        c.name: c
        for c in plan_contrasts(
            config["dmr"],
            GROUPS,
            dmr_bedmethyl,
            {s: SAMPLES[s].reference_name for s in SAMPLES},
            dmr_haplotype_bedmethyl,
            dmr_not_phased,
        )
    }
except InputError as err:
    raise WorkflowError(f"numapore: {err}")
if workflow.is_main_process:
    for _note in (n for c in DMR_CONTRASTS.values() for n in c.notes):
        logger.info(f"numapore: {_note}")

DMR_SHARDS = shard_ids("dmr")
# Contrast names as the contrasts: key allows them (the schema's pattern).
WILDCARD_PATTERNS_DMR = "|".join(re.escape(n) for n in DMR_CONTRASTS) or "(?!)"


def dmr_counts_inputs(wildcards):
    """A contrast's bedMethyl files (with their indexes) and its reference's index (the contig
    order)."""
    contrast = DMR_CONTRASTS[wildcards.contrast]
    ref = contrast.reference
    beds = list(contrast.sources.values())
    return {
        "bedmethyl": beds,
        "tbi": [f"{b}.tbi" for b in beds],
        "fai": f"results/references/{ref}/{ref}.fa.fai",
    }


def dmr_truth(contrast):
    """The simulated truth regions a contrast is scored against: its first sample's, when every
    sample of it is simulated with regions of its kind (DMRs between groups, allele-specific
    regions); else None."""
    samples = [c.removesuffix("_hp1").removesuffix("_hp2") for c in contrast.group1]
    samples += [c.removesuffix("_hp1").removesuffix("_hp2") for c in contrast.group2]
    key = "group_regions" if contrast.kind == "groups" else "asm_regions"
    settings = [config["simulate"].get(s) for s in samples]
    if all(s is not None and s.get(key, 0) > 0 for s in settings):
        return f"results/simulated/{samples[0]}/regions.bed"
    return None


def dmr_outputs():
    """The files of every contrast: merged tables (indexed), the report's figure and table, and
    the score when the truth is known."""
    out = []
    for name, contrast in DMR_CONTRASTS.items():
        prefix = f"results/dmr/{name}/{name}"
        out += [f"{prefix}.sites.tsv.gz.tbi", f"{prefix}.dmrs.bed.gz.tbi"]
        out += [f"{prefix}.dmrs.png", f"{prefix}.top_dmrs.html"]
        if dmr_truth(contrast):
            out.append(f"{prefix}.score.tsv")
    return out


def dmr_report_inputs(wildcards):
    """What a contrast's figure reads: its merged tables and its samples' bedMethyl files (each
    sample's per-site values in the top regions)."""
    prefix = f"results/dmr/{wildcards.contrast}/{wildcards.contrast}"
    beds = list(DMR_CONTRASTS[wildcards.contrast].sources.values())
    return {
        "dmrs": f"{prefix}.dmrs.bed.gz",
        "sites": f"{prefix}.sites.tsv.gz",
        "bedmethyl": beds,
        "tbi": [f"{b}.tbi" for b in beds],
    }
