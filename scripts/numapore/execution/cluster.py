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

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from numapore.execution.hosts import HostConfig
from numapore.execution.strategies import NODE_WIDE, STRATEGIES

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
