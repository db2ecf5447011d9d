"""The NUMA advisor: which strategy a step gets on a host when its host file says `auto`."""

from __future__ import annotations

import json
import logging
from typing import Any

from numapore.execution.hosts import HostConfig
from numapore.execution.topology import Topology

log = logging.getLogger("numapore.execution.advisor")

# "Well under half" of a node: the index copy must leave room for reads, buffers and sorting.
FIT_FRACTION = 0.4


def advise(
    topology: Topology, index_bytes: int, instances_per_node: int = 1
) -> tuple[str, dict[str, Any]]:
    """Pick none/instances/interleave for an index of index_bytes; return it with the numbers."""
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
        strategy = "none"
        reasons["why"] = "one NUMA node: nothing to place"
    elif need_mib <= limit_mib:
        strategy = "instances"
        reasons["why"] = (
            f"{copies} index copy/copies per node = {need_mib:.0f} MiB <= {FIT_FRACTION:.0%} of "
            f"the smallest node ({smallest} MiB): one process per node, each with a local index"
        )
    else:
        strategy = "interleave"
        reasons["why"] = (
            f"{copies} index copy/copies per node = {need_mib:.0f} MiB > {FIT_FRACTION:.0%} of "
            f"the smallest node ({smallest} MiB): one shared index interleaved over all nodes"
        )
    reasons["strategy"] = strategy
    log.info("NUMA advisor: %s (%s)", strategy, json.dumps(reasons, sort_keys=True))
    return strategy, reasons


def resolve_strategy(
    host: HostConfig, step: str, topology: Topology, index_bytes: int = 0
) -> tuple[str, dict[str, Any]]:
    """The concrete strategy for a step: the configured one, or the advisor's when 'auto'."""
    chosen = host.strategy_for(step)
    if chosen != "auto":
        return chosen, {"strategy": chosen, "why": f"configured in host file {host.name}"}
    return advise(topology, index_bytes, host.instances_per_node)
