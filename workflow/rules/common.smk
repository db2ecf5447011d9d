# Wiring: the run's plan (numapore.workflow.plan: every decision, every setting checked) is built
# here once, before any job; the input functions below ask it with the job's wildcards. Paths
# come from numapore.workflow.layout, the rules' outputs and the inputs alike.
import json
import os
import sys
import time
from pathlib import Path

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
from numapore.base.atomic import temp_name  # noqa: E402
from numapore.base.errors import InputError  # noqa: E402
from numapore.base.workdir import (  # noqa: E402
    check_writable,
    prepare_exit,
    release_stale_locks,
    remove_dead_shadows,
    write_problem,
)
from numapore.compare import tune_pileup, tune_strategy, tuning  # noqa: E402
from numapore.compare.cells import Cell  # noqa: E402
from numapore.execution.aligners import ALIGNERS  # noqa: E402
from numapore.execution.cluster import job_cpus, node_request  # noqa: E402
from numapore.execution.cluster import staging_threads as cluster_staging_threads  # noqa: E402
from numapore.inputs.phasing import vcf_sample  # noqa: E402
from numapore.inputs.schema import did_you_mean  # noqa: E402
from numapore.workflow import build, closing, jobs, layout, outputs, tuning_plans  # noqa: E402
from numapore.workflow.plan import RunPlan  # noqa: E402


# Snakemake prints `Shell command: None` for every job of a script rule (no shell command)
# when shell commands are printed (printshellcmds in profiles/default); shell rules' are kept.
def _no_empty_shell_command(record):
    command = getattr(record, "shellcmd", None) or getattr(record, "cmd", None)
    return getattr(record, "event", None) != LogEvent.SHELLCMD or bool(command)


logger.addFilter(_no_empty_shell_command)


def run_cores():
    """The run's core count (--cores); 1 when it has none (a cluster run without --cores)."""
    try:
        return workflow.cores
    except WorkflowError:  # Snakemake's way of saying that --cores was not given
        return 1


def say(lines, level="warning"):
    for line in lines:
        getattr(logger, level)(line)


try:
    PLAN = build.build(
        config,
        schemas=Path(workflow.basedir) / "schemas",
        configfiles=[Path(f) for f in workflow.configfiles],
        given=workflow.config_settings.config,
        cores=run_cores(),
        executor=getattr(workflow.executor_plugin, "name", ""),
        threads_given=list(workflow.resource_settings.overwrite_threads),
        main_process=workflow.is_main_process,
    )
except InputError as err:
    raise WorkflowError(f"numapore: {err}")
os.environ.update(PLAN.environment)
# What the run's last lines ask the cluster's accounting about: its jobs since it began.
RUN_STARTED = time.time()
if workflow.is_main_process:
    for _level, _line in PLAN.notes:
        say([_line], _level)

# The names the rules use.
SAMPLES, HOST_FILE, RUN_CORES = PLAN.samples, PLAN.host_file, PLAN.cores
TUNE, TUNE_PILEUP, TUNING_NAME = PLAN.tune, PLAN.tune_pileup, PLAN.tuning_name
DMR_CONTRASTS, COMPARE_CELLS = PLAN.contrasts, PLAN.compare_cells
WILDCARD_PATTERNS, WILDCARD_PATTERNS_DMR = PLAN.wildcard_patterns(), PLAN.contrast_pattern()
REFERENCES, TUNED_STEP = PLAN.references, tuning_plans.tuned_step(PLAN)
ONE_CALL_SHARD, ONE_ALIGN_SHARD = PLAN.one_call_shard, PLAN.one_align_shard
STAGING_STREAMS = PLAN.staging_streams
CALL_SHARD, ALIGN_SHARD = PLAN.job_shard("methylation"), PLAN.job_shard("alignment")
DMR_SHARDS = PLAN.shard_ids("dmr")
MULTIQC_REPORT, COMPARISON_REPORT = layout.MULTIQC_REPORT, layout.COMPARISON_REPORT
# The threads of the one-thread steps that mostly read files (nanopolish index, the signal
# census, samtools stats, the read accounting): none held, so they run beside the heavy step
# that holds every core rather than before or after it. Their one thread shares the cores.
HOLDS_NO_CORE = 0


# ---- what only a finished tuning knows (checkpoints tune_host, tune_pileup)


def run_io_mode():
    """The run's I/O mode: the host's, or the tuning's choice once it is made (a caller waits
    for checkpoint tune_host); the host's when the I/O mode is not tuned."""
    if TUNE is None or not TUNE["candidates"]:
        return PLAN.io_mode
    record = checkpoints.tune_host.get().output.record
    return json.loads(Path(record).read_text())["io_mode"]


def job_io_mode(name):
    """The I/O mode a sample's staged reads are for: the run's (tuned) for raw signal, else the
    host's (other samples' reads do not depend on it: no wait for the tuning)."""
    return run_io_mode() if SAMPLES[name].input_kind.runs("raw_signal") else PLAN.io_mode


def tuned_strategy_record(step):
    """An input function: the tuning record whose strategy of the step its jobs follow (they
    wait for checkpoint tune_host), when that step's strategies are tuned."""

    def record(wildcards=None):
        if TUNE is None or step not in TUNE["strategy_steps"]:
            return []
        return checkpoints.tune_host.get().output.record

    return record


def tuned_strategy_params(step):
    """A rule's params: the step's tuned strategy, only when that step's strategies are tuned,
    so that other runs have the params of one before tuning."""
    if TUNE is None or step not in TUNE["strategy_steps"]:
        return {}
    record = tuned_strategy_record(step)
    return {"tuned_strategy": lambda wc: tune_strategy.chosen(Path(record()), step)}


def tuned_pileup_record(wildcards=None):
    """The pileup's tuning record when the pileup is tuned (a job asking for it waits for
    checkpoint tune_pileup); none otherwise."""
    if TUNE_PILEUP is None:
        return []
    return checkpoints.tune_pileup.get().output.record


def pileup_setting():
    """The pileup's {regions, threads}: untuned, or the tuning's choice once it is made."""
    if TUNE_PILEUP is None:
        return tuning_plans.untuned_pileup(PLAN)
    return tune_pileup.chosen(json.loads(Path(tuned_pileup_record()).read_text()))


def pileup_threads(wildcards):
    """The threads of a pileup job: the tuning record read as a file (a threads function cannot
    wait for a checkpoint: Snakemake makes the pileup's jobs anew once tune_pileup has run);
    the untuned setting until then."""
    record = Path(TUNE_PILEUP["files"]["record"]) if TUNE_PILEUP is not None else None
    if record is not None and record.is_file():
        return tune_pileup.chosen(json.loads(record.read_text()))["threads"]
    return tuning_plans.untuned_pileup(PLAN)["threads"]


# ---- input functions and params (the plan's answers for the job's wildcards)


def ask(function, *names):
    """An input or params function: function(PLAN, the job's wildcards of these names)."""
    return lambda wildcards: function(PLAN, *(getattr(wildcards, name) for name in names))


def staged_reads(wildcards):
    return jobs.staged_reads(PLAN, wildcards.sample, job_io_mode(wildcards.sample))


def counted_reads(wildcards):
    return jobs.counted_reads(PLAN, wildcards.sample, job_io_mode(wildcards.sample))


def reads_shard(wildcards, mate=1):
    shard = getattr(wildcards, "shard", "")
    return jobs.reads_shard(PLAN, wildcards.sample, shard, job_io_mode(wildcards.sample), mate)


def reads2_shard(wildcards):
    return reads_shard(wildcards, mate=2)


def methylation_shard_inputs(wildcards):
    shard = getattr(wildcards, "shard", "1-of-1")
    io_mode = job_io_mode(wildcards.sample)
    return jobs.methylation_shard_inputs(PLAN, wildcards.sample, wildcards.aligner, shard, io_mode)


def accounting_inputs(wildcards):
    tagged = SAMPLES[wildcards.sample].input_kind.stages_tagged_reads
    io_mode = PLAN.io_mode if tagged else run_io_mode()
    return jobs.accounting_inputs(PLAN, wildcards.sample, wildcards.aligner, io_mode)


def pileup_inputs(wildcards):
    """The pileup's modBAM, index and reference; its shards' texts and listings when split; the
    tuning record whose split and threads the jobs follow, when tuned."""
    w, regions = wildcards, pileup_setting()["regions"]
    whole = "shard" not in w.keys()
    inputs = jobs.pileup_inputs(PLAN, w.sample, w.aligner, w.motif, regions, whole)
    return inputs | ({"tuning": tuned_pileup_record()} if TUNE_PILEUP is not None else {})


def haplotype_pileup_inputs(wildcards):
    """The pileup's modBAM, index and reference (never its scatter's shards: it is one job)."""
    inputs = pileup_inputs(wildcards)
    return {k: inputs[k] for k in ("bam", "bai", "reference")}


def kind_param(attribute):
    """A params function: what the job's sample's input kind says (numapore.inputs.kinds)."""
    return lambda wildcards: getattr(SAMPLES[wildcards.sample].input_kind, attribute)


def staged_modbam_reads_output(path):
    """The staging's FASTQ of a modBAM sample: a named pipe to its align job when the staging
    streams, else a file."""
    return pipe(path) if STAGING_STREAMS else path


def executor_name():
    """The executor plugin's name (slurm, slurm-jobstep, local, ...): set once the run starts,
    after the Snakefile is read."""
    return getattr(workflow.executor_plugin, "name", "")


def staging_threads(wildcards):
    """A modBAM sample's staging: numapore.execution.cluster.staging_threads."""
    return cluster_staging_threads(STAGING_STREAMS, RUN_CORES, executor_name())


def alignment_reports_threads(wildcards):
    """samtools stats and flagstat: no core held when a step follows the alignment (it holds
    every core while they run beside it); the run's cores when the alignment is the last."""
    return HOLDS_NO_CORE if SAMPLES[wildcards.sample].input_kind.steps else RUN_CORES


def io_processes(wildcards, threads):
    """FAST5 reader processes (conversion, fast5-pool): the host's io_processes, else threads."""
    return PLAN.host.io_processes or threads


def cluster_cpus(step):
    """Slurm cpus_per_task of a heavy step's jobs: every CPU of the host when it owns the node."""
    return lambda wildcards, threads: job_cpus(PLAN.host, step, threads)


def cluster_node(step):
    """Slurm slurm_extra of a heavy step's jobs: --exclusive when it must own the node."""
    return lambda wildcards: node_request(PLAN.host, step)


def hidden_temp(wildcards, output):
    """A params function: the hidden name a shell rule's tool writes its one output to before
    `mv` renames it, so the output is complete or absent."""
    return str(temp_name(output[0]))


def hidden_index_prefix(suffix):
    """A params function for an index rule: the hidden name of the index's prefix (its first
    output without suffix); each file is renamed into place once all are written."""
    return lambda wildcards, output: str(temp_name(output[0].removesuffix(suffix)))


def report_inputs(*kinds):
    """An input function: the named run outputs of the job's sample and aligner."""
    return lambda wc: {k: outputs.run_output(PLAN, k, wc.sample, wc.aligner) for k in kinds}


# ---- the strategy comparison (rules/compare.smk): its cells run one at a time, in run order


def compare_sample():
    try:
        return PLAN.compare_sample()
    except InputError as err:
        raise WorkflowError(f"numapore: {err}")


def compared_staged_reads(wildcards):
    name = wildcards.sample
    return jobs.compared_staged_reads(PLAN, name, job_io_mode(name))


def compare_reads(wildcards=None):
    return jobs.compare_reads(PLAN, job_io_mode(compare_sample().name))


def compare_index_files(wildcards=None):
    try:
        return jobs.compare_index_files(PLAN)
    except InputError as err:
        raise WorkflowError(f"numapore: {err}")


def compare_cell_inputs(wildcards):
    """What a cell needs: every cell's inputs (all ready before the first cell starts)."""
    if wildcards.cell not in COMPARE_CELLS:
        raise WorkflowError(f"numapore: {wildcards.cell!r} is not a cell of config compare:")
    check_one_cell_at_a_time()
    return jobs.compare_cell_inputs(PLAN, job_io_mode(compare_sample().name))


# Cells run one at a time, in run order: each holds the resource `compare`, limited to 1 by
# `resources: [compare=1]` in profiles/default, and the ready cell of highest priority starts.
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
    return len(COMPARE_CELLS) - COMPARE_CELLS.index(wildcards.cell)


# ---- the run's start and end


def write_error(err):
    """A WorkflowError for an OSError writing the working directory, naming the path."""
    where = f"cannot write {Path(err.filename).resolve()}: " if err.filename else ""
    return WorkflowError(f"numapore: {where}{err.strerror}")


# Rerunning the same command after a kill resumes: --rerun-incomplete (profiles/default) reruns
# the killed jobs, and the lock files a killed run left are removed when no other numapore run
# is alive in this directory (Snakemake has no public way to tell a dead run's from a live
# one's: `--unlock` would unlock a live run's files too).
_RUN_LOCK = None
if workflow.is_main_process:
    try:
        _RUN_LOCK, _stale_locks = release_stale_locks()
    except OSError as err:
        raise write_error(err)
    if _stale_locks:
        _stale = ", ".join(map(str, _stale_locks))
        say([f"numapore: removed the lock files of a killed run: {_stale}"])


def check_results_writable():
    """Before any job starts: stop, naming the folder and why, when the results folder cannot
    be written (read-only, full)."""
    try:
        check_writable(Path(layout.RESULTS))
    except OSError as err:
        raise write_error(err)


def remove_killed_jobs_shadows():
    """Before any job starts, when no other numapore run is alive here: remove the shadow
    folders (partial outputs) of jobs a killed run left (in --shadow-prefix, else .snakemake)."""
    if _RUN_LOCK is not None:
        folder = Path(workflow.execution_settings.shadow_prefix or ".snakemake") / "shadow"
        removed = remove_dead_shadows(folder)
        if removed:
            say(["numapore: removed killed jobs' shadow folders: " + ", ".join(map(str, removed))])


def check_rule_settings():
    """Once every rule is defined, stop when --set-threads or --set-resources (or a profile's)
    names a rule this workflow does not have; Snakemake ignores it."""
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


def report_replaced_results():
    if workflow.is_main_process:
        say(closing.replaced_results_lines(PLAN))


def report_after_run():
    """After a successful run: numapore.workflow.closing.after_run_lines, and on a cluster the
    jobs lost with their node and run again."""
    for level, line in closing.after_run_lines(PLAN, {j.rule.name for j in workflow.dag.jobs}):
        say([line], level)
    say(closing.cluster_lines(executor_name(), RUN_STARTED, succeeded=True))


def report_write_problem():
    """After a failed run: say so when the results folder is read-only or full; on a cluster,
    the jobs lost with their node and those that failed on every node they ran on."""
    say(closing.cluster_lines(executor_name(), RUN_STARTED, succeeded=False), "error")
    results = Path(layout.RESULTS)
    problem = write_problem(results) if results.is_dir() else None
    if problem:
        logger.error(
            f"numapore: cannot write the results: {problem}. Free space (or make it writable) "
            "and rerun the same command: finished outputs are kept and reused."
        )
