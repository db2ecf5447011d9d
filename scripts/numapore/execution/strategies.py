"""The NUMA strategies numapore applies to a heavy step, in one registry: their names, what each
does, whether its cluster job must own the node, whether the comparison measures it, and the
numactl prefix that applies it. The schemas' strategy enums (host file, config) are checked
against this registry (tests/test_decisions.py); the advisor picks among its names (`auto`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from numapore.execution.topology import Topology, format_cpulist


def _no_prefix(topology: Topology, group: list[int]) -> list[str]:
    return []


def _interleave(topology: Topology, group: list[int]) -> list[str]:
    targets = topology.memory_nodes or topology.nodes
    return ["numactl", f"--interleave={format_cpulist([n.id for n in targets])}"]


def _localalloc(topology: Topology, group: list[int]) -> list[str]:
    return ["numactl", "--localalloc"]


def _instance(topology: Topology, group: list[int]) -> list[str]:
    if not group:
        raise ValueError("the instances strategy needs a node")
    where = format_cpulist(group)
    if len(group) == 1:
        return ["numactl", f"--cpunodebind={where}", f"--membind={where}"]
    # --membind over several nodes fills the first before the next: interleave spreads the
    # index evenly over the group's memory.
    return ["numactl", f"--cpunodebind={where}", f"--interleave={where}"]


def _unresolved(topology: Topology, group: list[int]) -> list[str]:
    raise ValueError("strategy 'auto' must be resolved first (resolve_strategy / advise)")


@dataclass(frozen=True)
class Strategy:
    """One NUMA strategy."""

    name: str
    does: str  # what it does, in a phrase
    # numactl's argv prefix on a topology, for one process bound to a group of nodes (the
    # group matters to instances only).
    numactl: Callable[[Topology, list[int]], list[str]]
    # It binds to, or spreads over, every NUMA node: a cluster job must own the whole node.
    node_wide: bool = False
    # A placement of its own, which a comparison measures (auto picks one of them at run time).
    concrete: bool = True
    # One process per node or group of nodes, each on its own shard of the input.
    one_process_per_group: bool = False


STRATEGIES = {
    strategy.name: strategy
    for strategy in (
        Strategy("none", "the OS's default placement", _no_prefix),
        Strategy(
            "interleave", "pages spread over every node with memory", _interleave, node_wide=True
        ),
        Strategy("localalloc", "pages on the node of the CPU that first touches them", _localalloc),
        Strategy(
            "instances",
            "one process per node (or group of nodes), bound to it, each on a shard",
            _instance,
            node_wide=True,
            one_process_per_group=True,
        ),
        Strategy(
            "auto",
            "the advisor picks one of the others from the index size",
            _unresolved,
            concrete=False,
        ),
    )
}
NAMES = tuple(STRATEGIES)
CONCRETE = tuple(name for name, s in STRATEGIES.items() if s.concrete)
NODE_WIDE = frozenset(name for name, s in STRATEGIES.items() if s.node_wide)


def strategy(name: str) -> Strategy:
    """The registry's entry of a strategy; ValueError naming the known ones."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; expected one of {', '.join(NAMES)}")
    return STRATEGIES[name]


def numactl_prefix(
    name: str, topology: Topology, nodes: int | Sequence[int] | None = None
) -> list[str]:
    """The numactl argv prefix for a strategy (nodes, one or a group, required for
    'instances': a group's CPUs, its memory interleaved over it)."""
    group = [nodes] if isinstance(nodes, int) else list(nodes or [])
    return strategy(name).numactl(topology, group)
