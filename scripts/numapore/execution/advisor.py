"""The NUMA advisor: which strategy a step gets on a host when its host file says `auto`, and
how many nodes each instance spans (instance_group).

The rule (the study's: instances when the index fits a node): an instance's memory must hold
its index copies with room to spare for reads, buffers and sorting, i.e. the copies take at
most FIT_FRACTION of it. An instance spans the smallest group of consecutive nodes (a divisor of
the node count, so that every group is alike) whose memory, the smallest group's, holds them
so. One node: an instance per node, each with a local index. A group of g nodes: an instance
per group, its index interleaved over the group (an index larger than a node: SNAP's 29 GB
human index on 16 GiB nodes). Only all the nodes together: one shared index interleaved over
them all (interleave), or nothing fits at all.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from numapore.execution.hosts import HostConfig
from numapore.execution.strategies import STRATEGIES
from numapore.execution.topology import Topology

log = logging.getLogger("numapore.execution.advisor")

# "Well under half" of a node: the index copy must leave room for reads, buffers and sorting.
FIT_FRACTION = 0.4


def group_memory_mib(topology: Topology, size: int) -> int:
    """The memory of the smallest group when the compute nodes are in groups of size."""
    return min(sum(n.memory_mib for n in group) for group in topology.node_groups(size))


def fitting_group(topology: Topology, index_bytes: int, copies: int = 1) -> int | None:
    """The fewest nodes an instance can span so that `copies` index copies take at most
    FIT_FRACTION of its group's memory (groups of consecutive nodes, the size a divisor of the
    node count); None when not even all the nodes hold them so."""
    n = len(topology.compute_nodes)
    need_mib = index_bytes * max(1, copies) / 2**20
    for size in (s for s in range(1, n + 1) if n % s == 0):
        if need_mib <= FIT_FRACTION * group_memory_mib(topology, size):
            return size
    return None


def advise(
    topology: Topology,
    index_bytes: int,
    instances_per_node: int = 1,
    instance_nodes: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """Pick none/instances/interleave for an index of index_bytes (instances: each over
    instance_nodes nodes when given, else over fitting_group's); return it with the numbers."""
    usable = topology.compute_nodes
    smallest = min((n.memory_mib for n in usable), default=0)
    copies = max(1, instances_per_node)
    need_mib = index_bytes * copies / 2**20
    limit_mib = FIT_FRACTION * smallest
    reasons: dict[str, Any] = {
        "nodes": len(topology.nodes),
        "nodes_with_cpus_and_memory": len(usable),
        "smallest_node_memory_mib": smallest,
        "index_bytes": index_bytes,
        "index_mib": round(index_bytes / 2**20, 1),
        "instances_per_node": copies,
        "index_copies_per_node_mib": round(need_mib, 1),
        "fit_fraction": FIT_FRACTION,
        "fit_limit_mib": round(limit_mib, 1),
        "index_share_of_node": round(need_mib / smallest, 3) if smallest else None,
    }
    if len(usable) <= 1:
        reasons |= {"strategy": "none", "why": "one NUMA node: nothing to place"}
        log.info("NUMA advisor: none (%s)", json.dumps(reasons, sort_keys=True))
        return "none", reasons
    size = instance_nodes or fitting_group(topology, index_bytes, copies)
    if size is not None and (instance_nodes or size < len(usable)):
        strategy = "instances"
        reasons |= group_reasons(topology, index_bytes, copies, size, bool(instance_nodes))
    else:
        strategy = "interleave"
        reasons["why"] = (
            f"{copies} index copy/copies = {need_mib:.0f} MiB > {FIT_FRACTION:.0%} of every "
            f"group of fewer than all {len(usable)} nodes: one shared index interleaved over "
            "all nodes"
        )
    reasons["strategy"] = strategy
    log.info("NUMA advisor: %s (%s)", strategy, json.dumps(reasons, sort_keys=True))
    return strategy, reasons


def group_reasons(
    topology: Topology, index_bytes: int, copies: int, size: int, configured: bool
) -> dict[str, Any]:
    """The numbers behind instances over groups of size nodes (configured: the host file's
    instance_nodes), with a `why` line."""
    usable = topology.compute_nodes
    need_mib = index_bytes * copies / 2**20
    memory = group_memory_mib(topology, size)
    groups = [[n.id for n in g] for g in topology.node_groups(size)]
    where = "each with a local index" if size == 1 else "its index interleaved over its group"
    if configured:
        how = f"instance_nodes: {size} in the host file"
    elif need_mib > FIT_FRACTION * memory:
        how = (
            f"{copies} index copy/copies = {need_mib:.0f} MiB > {FIT_FRACTION:.0%} of even all "
            f"{size} nodes ({memory} MiB)"
        )
    else:
        how = (
            f"{copies} index copy/copies = {need_mib:.0f} MiB <= {FIT_FRACTION:.0%} of "
            f"{'one node' if size == 1 else f'{size} nodes'} ({memory} MiB)"
            + ("" if size == 1 else f", > {FIT_FRACTION:.0%} of fewer nodes")
        )
    per = "node" if size == 1 else f"group of {size} nodes"
    return {
        "instance_nodes": size,
        "groups": groups,
        "group_memory_mib": memory,
        "group_fit_limit_mib": round(FIT_FRACTION * memory, 1),
        "why": f"{how}: one process per {per} ({len(usable) // size}), {where}",
    }


def instance_group(
    host: HostConfig,
    step: str,
    topology: Topology,
    index_bytes: int,
    aligner: str | None = None,
    reasons: dict[str, Any] | None = None,
) -> int:
    """How many nodes each instance spans: the host file's instance_nodes for the step (or the
    aligner), else the fewest that hold the index (fitting_group), else all of them. The
    numbers go into reasons (the plan's record) when they are not there yet."""
    configured = host.instance_nodes_for(step, aligner)
    copies = max(1, host.instances_per_node)
    size = configured or fitting_group(topology, index_bytes, copies)
    if size is None:  # not even all the nodes hold it: one instance over them all
        size = len(topology.compute_nodes)
    if reasons is not None and "instance_nodes" not in reasons:
        extra = group_reasons(topology, index_bytes, copies, size, bool(configured))
        reasons |= {k: v for k, v in extra.items() if k != "why"} | {"groups_why": extra["why"]}
    return size


def resolve_strategy(
    host: HostConfig,
    step: str,
    topology: Topology,
    index_bytes: int = 0,
    aligner: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The concrete strategy for a step: the configured one, or the advisor's when 'auto'."""
    chosen = host.strategy_for(step)
    if STRATEGIES[chosen].concrete:
        return chosen, {"strategy": chosen, "why": f"configured in host file {host.name}"}
    configured = host.instance_nodes_for(step, aligner)
    return advise(topology, index_bytes, host.instances_per_node, configured)
