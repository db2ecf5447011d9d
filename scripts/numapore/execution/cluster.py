"""What a heavy step's cluster job asks the scheduler for, derived from the host file.

A strategy that places processes or memory across the NUMA nodes of a machine (instances:
one process bound to each node; interleave: pages spread over every node) only does what it
says when the job owns the whole node: the rules turn that into Slurm resources (`slurm_extra`
--exclusive, `cpus_per_task` = every CPU of the host file's layout) for the Snakemake Slurm
executor plugin. Jobs of the other strategies share nodes and ask for their threads.

After a run on Slurm: which of its jobs were lost with their node and run again, and which
failed on every node they ran on, from Slurm's accounting (sacct).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numapore.base.errors import InputError
from numapore.execution.hosts import (
    HostConfig,
    HostConfigError,
    host_path,
    load_host_config,
    startup_check,
)
from numapore.execution.strategies import NODE_WIDE, STRATEGIES
from numapore.execution.topology import NumaError

# Strategies that bind to, or spread over, every NUMA node of the machine.
NODE_WIDE_STRATEGIES = NODE_WIDE


# The executors of a Slurm run: the plugin's on the submitting host, its jobstep's in each job.
SLURM_EXECUTORS = ("slurm", "slurm-jobstep")


def staging_threads(streams: bool, run_cores: int, executor: str) -> int:
    """A modBAM sample's staging threads: none held when it streams into its align job (whose
    threads are its group's: Snakemake sums a pipe group's); one on Slurm (the run has no
    cores, its job asks for one, and in the job the node's cores would ask srun for more than
    the job has); else the run's cores."""
    if streams:
        return 0
    return 1 if executor in SLURM_EXECUTORS else run_cores


def needs_whole_node(host: HostConfig, step: str) -> bool:
    """True when the step's strategy uses every NUMA node, so its cluster job must own one."""
    strategy = host.strategy_for(step)
    if not STRATEGIES[strategy].concrete:
        # The advisor picks at run time; it can only pick none on a layout known to be one node.
        return host.topology is None or len(host.topology.compute_nodes) > 1
    return strategy in NODE_WIDE_STRATEGIES


def host_cpus(host: HostConfig) -> int | None:
    """Logical CPUs of the host file's explicit layout (None for `topology: auto`)."""
    return None if host.topology is None else len(host.topology.cpus)


def job_cpus(host: HostConfig, step: str, threads: int) -> int:
    """Slurm cpus_per_task of a step's job: the host's every CPU when it owns the node."""
    if needs_whole_node(host, step):
        return max(threads, host_cpus(host) or 0)
    return threads


def node_request(host: HostConfig, step: str) -> str | None:
    """Slurm slurm_extra of a step's job: --exclusive when it must own the node, else None."""
    return "--exclusive" if needs_whole_node(host, step) else None


# ---------------------------------------------------------------------------------------------
# A host file per partition (config hosts:): a heterogeneous cluster's node types

# The partition of every job of a cluster run (profiles/slurm reads it too).
PARTITION_ENV = "NUMAPORE_SLURM_PARTITION"
# The partition a Slurm job runs on (Slurm sets it in every job's environment).
JOB_PARTITION_ENV = "SLURM_JOB_PARTITION"
# The host file of the node a job runs on (its partition's, config hosts:), set by the job's
# own plan for its scripts (node_host_file); the run's plan keeps the run's host file.
NODE_HOST_ENV = "NUMAPORE_NODE_HOST"


def partition_host_files(config: Mapping[str, Any]) -> dict[str, str]:
    """config hosts: each partition's host file found (a name in config/hosts/ or a path, as
    config host), absolute. InputError naming hosts.<partition> for one not found; `auto`
    (the submitting host's own file) names no partition's nodes."""
    files = {}
    for partition, name in config.get("hosts", {}).items():
        if name == "auto":
            raise InputError(
                f"config hosts.{partition}: auto is the submitting host's own file; name the "
                "host file of the partition's nodes (a name in config/hosts/ or a path)"
            )
        try:
            files[partition] = str(host_path(name).absolute())
        except HostConfigError as err:
            raise InputError(f"config hosts.{partition}: {err}") from None
    return files


def partition_hosts(
    config: Mapping[str, Any], run_host_file: str, main_process: bool
) -> tuple[str, str, str]:
    """The run's host file and, in a cluster job, its node's, with config hosts: given.

    The run's (its plan: the I/O mode, the pileup's setting, what the jobs ask the scheduler
    for): hosts[<the run's partition>] (NUMAPORE_SLURM_PARTITION, the profile's partition of
    every job), else config host. A job's node: hosts[<its partition>] (SLURM_JOB_PARTITION),
    its layout checked on the node (host_check: jobs), whose strategies its steps follow.
    Returns (the run's host file, the node's ('' outside a job, or without hosts:), the
    setting that named the run's). InputError, one line naming the setting, for: hosts:
    without host_check: jobs, a host file not found or not valid, a partition with none."""
    files = partition_host_files(config)
    if not files:
        return run_host_file, "", "host"
    if config["host_check"] != "jobs":
        raise InputError(
            "config hosts: a host file per partition is for cluster runs, whose jobs check "
            "their partition's on their node: set host_check: jobs (profiles/slurm does)"
        )
    given = ", ".join(files)
    if main_process:
        for partition, path in files.items():
            try:
                load_host_config(path)
            except NumaError as err:
                raise InputError(f"config hosts.{partition}: {err}") from None
    partition = os.environ.get(PARTITION_ENV, "")
    if partition and partition not in files:
        raise InputError(
            f"config hosts: no host file for partition {partition!r} ({PARTITION_ENV}, the "
            f"partition of every job); the partitions given: {given}"
        )
    run_file, named = (
        (files[partition], f"hosts.{partition}") if partition else (run_host_file, "host")
    )
    if main_process:
        return run_file, "", named
    node = os.environ.get(JOB_PARTITION_ENV) or partition
    if node not in files:
        raise InputError(
            f"config hosts: this job runs on partition {node or '(unknown)'!r} "
            f"({JOB_PARTITION_ENV}), which has no host file there; the partitions given: {given}"
        )
    try:
        startup_check(files[node])
    except NumaError as err:
        raise InputError(f"config hosts.{node}: {err}") from None
    return run_file, files[node], named


def node_host_file(run_host_file: str) -> str:
    """The host file a job's step runs with: its node's (NODE_HOST_ENV, a job of a run with
    config hosts:), else the run's."""
    return os.environ.get(NODE_HOST_ENV) or run_host_file


def partition_hosts_note(config: Mapping[str, Any], named: str) -> str:
    """The run's first lines with config hosts: which host file each partition's jobs run
    with, and which setting named the run's."""
    given = ", ".join(f"{p}: {name}" for p, name in config["hosts"].items())
    return (
        f"config hosts: each job runs its steps with its partition's host file ({given}), "
        f"checked on its node; the run's I/O mode and pileup setting are {named}'s"
    )


# ---- what Slurm's accounting says of a run's jobs (its last lines)

# How a job ended without its outputs; NODE_FAIL: lost with its node (the node died or stopped
# answering), not a fault of the job.
FAILED_STATES = {"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT", "BOOT_FAIL", "DEADLINE"}
LOST = "NODE_FAIL"
SACCT_FIELDS = ["JobID", "Comment", "State", "NodeList", "Submit", "WorkDir"]


@dataclass(frozen=True)
class SlurmJob:
    """One Slurm job of a run: its id, the job it ran (the executor plugin's comment: rule and
    wildcards), how it ended and on which node."""

    jobid: str
    job: str
    state: str
    node: str

    @property
    def where(self) -> str:
        """Slurm job 12 on node3"""
        return f"Slurm job {self.jobid} on {self.node or 'no node'}"


def job_label(comment: str) -> str:
    """The workflow job a Slurm job ran, from the plugin's comment (rule_<rule>_wildcards_<w>):
    'call_methylation (ecoli_minimap2_cpg_1-of-2)'."""
    rule, _, wildcards = comment.removeprefix("rule_").partition("_wildcards_")
    return f"{rule} ({wildcards})" if wildcards else rule


def parse_sacct(text: str, workdir: Path, since: str) -> list[SlurmJob]:
    """The jobs of `sacct -X -D -n -P --format=<SACCT_FIELDS>` output submitted from workdir at
    or after since (sacct's time format), in submission order."""
    jobs = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) != len(SACCT_FIELDS):
            continue
        jobid, comment, state, node, submitted, where = fields
        if comment.startswith("rule_") and Path(where) == workdir and submitted >= since:
            jobs.append((submitted, SlurmJob(jobid, job_label(comment), state.split()[0], node)))
    return [job for _, job in sorted(jobs, key=lambda pair: (pair[0], int(pair[1].jobid)))]


def run_slurm_jobs(workdir: Path, started: float) -> list[SlurmJob]:
    """The Slurm jobs submitted from workdir since started (epoch seconds), as sacct lists them
    (every record, requeued ones too); none when sacct is missing or fails."""
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started))
    command = [
        "sacct", "-X", "-D", "-n", "-P", "--starttime", since,
        "--format=" + ",".join(f"{f}%1000" for f in SACCT_FIELDS),
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_sacct(done.stdout, workdir, since) if done.returncode == 0 else []


def by_job(jobs: list[SlurmJob]) -> dict[str, list[SlurmJob]]:
    """Each workflow job's Slurm jobs, in submission order."""
    grouped: dict[str, list[SlurmJob]] = {}
    for job in jobs:
        grouped.setdefault(job.job, []).append(job)
    return grouped


def lost_job_lines(jobs: list[SlurmJob]) -> list[str]:
    """One line per workflow job lost with its node and run again: where it was lost, where
    its rerun ran and how that ended."""
    lines = []
    for job, tries in by_job(jobs).items():
        lost = [t for t in tries if t.state == LOST]
        if not lost or tries[-1] in lost:
            continue
        where = ", ".join(t.where for t in lost)
        last = tries[-1]
        lines.append(
            f"job {job} lost with its node ({where}: {LOST}); rerun as {last.where}: {last.state}"
        )
    return lines


def failed_everywhere_lines(jobs: list[SlurmJob]) -> list[str]:
    """One line per workflow job whose every Slurm job failed (lost with its node or failed
    itself): each try's node and state."""
    lines = []
    for job, tries in by_job(jobs).items():
        if all(t.state in FAILED_STATES for t in tries):
            each = "; ".join(f"{t.where}: {t.state}" for t in tries)
            failed = "failed on every node it ran on" if len(tries) > 1 else "failed"
            lines.append(
                f"job {job} {failed} ({each}); its Slurm logs: "
                f".snakemake/slurm_logs/rule_{job.split(' ')[0]}/"
            )
    return lines
