"""What a heavy step's cluster job asks the scheduler for, derived from the host file.

A strategy that places processes or memory across the NUMA nodes of a machine (instances:
one process bound to each node; interleave: pages spread over every node) only does what it
says when the job owns the whole node: the rules turn that into Slurm resources (`slurm_extra`
--exclusive, `cpus_per_task` = every CPU of the host file's layout) for the Snakemake Slurm
executor plugin. Jobs of the other strategies share nodes and ask for their threads.
"""

from __future__ import annotations

from numapore.execution.hosts import HostConfig
from numapore.execution.strategies import NODE_WIDE, STRATEGIES

# Strategies that bind to, or spread over, every NUMA node of the machine.
NODE_WIDE_STRATEGIES = NODE_WIDE


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
