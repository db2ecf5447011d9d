"""The one plan model of a step, from layout to processes to argv (pure: no subprocess).

plan_step resolves the host's strategy (the advisor for `auto`) and lays the step out as
processes (`Slot`s): one process under none / interleave / localalloc, or an unbound pool of K
processes (fast5-pool); under instances, one bound process per NUMA node x instances_per_node,
or per group of nodes when an instance spans several (its index larger than a node's share:
numapore.execution.advisor.instance_group).
StepPlan.command(i, tool) then gives process i's command line: the strategy's numactl prefix
in front of the unchanged tool command. The launcher, the compare cells, the probe CLI and the
tests all use this model.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from numapore.execution.advisor import instance_group, resolve_strategy
from numapore.execution.hosts import STEPS, HostConfig
from numapore.execution.strategies import STRATEGIES, numactl_prefix
from numapore.execution.topology import Topology, TopologyError

# A command is an argv list (run without a shell) or a shell string (Snakemake `shell:`).
Command = list[str] | str
# Builds process i's tool command: (i, number of processes, threads of process i) -> command.
ShardCommand = Callable[[int, int, int], Sequence[str] | str]


@dataclass(frozen=True)
class Slot:
    """One process of a step: the nodes it is bound to (none: unbound; several: a group), its
    CPUs and threads."""

    nodes: tuple[int, ...]
    cpus: tuple[int, ...]
    threads: int

    @property
    def node(self) -> int | None:
        """The one node the process is bound to; None when unbound or over a group."""
        return self.nodes[0] if len(self.nodes) == 1 else None


@dataclass(frozen=True)
class StepPlan:
    """How a step runs: the concrete strategy, why, and its processes in shard order."""

    step: str
    strategy: str
    topology: Topology
    slots: tuple[Slot, ...]
    reasons: dict[str, Any] = field(default_factory=dict)
    instances_per_node: int = 1

    @property
    def nodes(self) -> tuple[int | None, ...]:
        """The node each process is bound to (None: unbound or over a group), in shard order."""
        return tuple(s.node for s in self.slots)

    @property
    def groups(self) -> tuple[tuple[int, ...], ...]:
        """The nodes each process is bound to (empty: unbound), in shard order."""
        return tuple(s.nodes for s in self.slots)

    @property
    def threads(self) -> tuple[int, ...]:
        """The threads of each process, in shard order."""
        return tuple(s.threads for s in self.slots)

    def prefix(self, i: int) -> list[str]:
        """The numactl argv prefix of process i."""
        return numactl_prefix(self.strategy, self.topology, self.slots[i].nodes)

    def command(self, i: int, tool: Sequence[str] | str) -> Command:
        """Process i's command line: its numactl prefix around the unchanged tool command."""
        return with_prefix(self.prefix(i), tool)

    def commands(self, tool: ShardCommand | Sequence[str] | str) -> list[Command]:
        """Every process's command line in shard order; tool(i, n, threads) builds shard i's
        tool command (a plain command is allowed for one unbound process)."""
        n = len(self.slots)
        if not callable(tool):
            # Each instance works on its own shard, so it needs its own command (even alone).
            per_group = STRATEGIES[self.strategy].one_process_per_group
            if n > 1 or per_group:
                what = f"the {self.strategy} strategy" if per_group else "a pool"
                raise ValueError(
                    f"{what} yields several commands: it needs shard_command(i, n, threads)"
                )
            return [self.command(0, tool)]
        return [self.command(i, tool(i, n, s.threads)) for i, s in enumerate(self.slots)]


_LIST_OPERATORS = {"|", "||", "&&", ";", "&", "|&", ";;", "(", ")"}


def _is_compound(command: str) -> bool:
    """True when a shell string is a pipeline or list, so a prefix would bind only its head."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return any(tok in _LIST_OPERATORS for tok in lexer)
    except ValueError:  # unbalanced quotes: let the shell report it
        return False


def with_prefix(prefix: Sequence[str], command: Sequence[str] | str) -> Command:
    """Put a numactl prefix in front of a command, leaving the tool command itself unchanged."""
    # A shell pipeline or list goes under `bash -c` so that every stage inherits the policy
    # (a bare prefix would bind only the first stage); simple strings just get the prefix.
    if isinstance(command, str):
        if not prefix:
            return command
        if _is_compound(command):
            inner = ["bash", "-o", "pipefail", "-c", command]
            return shlex.join([*prefix, *inner])
        return f"{shlex.join(prefix)} {command}"
    return [*prefix, *command]


def split_threads(
    topology: Topology, threads: int, instances_per_node: int = 1, instance_nodes: int = 1
) -> list[int]:
    """Split threads over the instances (group-major; a group is one node unless each instance
    spans instance_nodes nodes), in proportion to each group's CPUs."""
    # Every instance gets at least one thread, so fewer threads than instances oversubscribes.
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if instances_per_node < 1:
        raise ValueError(f"instances_per_node must be >= 1, got {instances_per_node}")
    if not topology.compute_nodes:
        raise TopologyError(f"{topology.source}: no node has both CPUs and memory")
    weights = [
        sum(len(n.cpus) for n in group)
        for group in topology.node_groups(instance_nodes)
        for _ in range(instances_per_node)
    ]
    total = sum(weights)
    exact = [threads * w / total for w in weights]
    shares = [int(x) for x in exact]
    # Largest remainder: hand out the leftover threads to the biggest fractional parts.
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[: threads - sum(shares)]:
        shares[i] += 1
    return [max(1, s) for s in shares]


def plan_strategy(
    topology: Topology,
    step: str,
    strategy: str,
    threads: int,
    instances_per_node: int = 1,
    pool: int = 1,
    reasons: dict[str, Any] | None = None,
    instance_nodes: int = 1,
) -> StepPlan:
    """Lay a step out under a concrete strategy: one bound process per group of
    instance_nodes nodes (one node by default) x instances_per_node (instances), else `pool`
    unbound processes sharing the threads."""
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}; steps are {', '.join(STEPS)}")
    numactl_prefix(strategy, topology, nodes=0)  # refuses auto and unknown strategies
    reasons = reasons if reasons is not None else {"strategy": strategy}
    if STRATEGIES[strategy].one_process_per_group:
        groups = [
            g for g in topology.node_groups(instance_nodes) for _ in range(instances_per_node)
        ]
        shares = split_threads(topology, threads, instances_per_node, instance_nodes)
        slots = tuple(
            Slot(tuple(n.id for n in g), tuple(sorted(c for n in g for c in n.cpus)), t)
            for g, t in zip(groups, shares, strict=True)
        )
        return StepPlan(step, strategy, topology, slots, reasons, instances_per_node)
    pool = max(1, pool)
    shares = [threads // pool + (1 if i < threads % pool else 0) for i in range(pool)]
    slots = tuple(Slot((), topology.cpus, max(1, s)) for s in shares)
    return StepPlan(step, strategy, topology, slots, reasons)


def plan_step(
    host: HostConfig,
    topology: Topology,
    step: str,
    threads: int,
    index_bytes: int = 0,
    pool: int = 1,
    aligner: str | None = None,
) -> StepPlan:
    """Plan a step on a host: its strategy (the advisor's when `auto`, from the index size) and
    its processes (pool > 1: a process pool, unbound; instances ignore the pool; each instance
    over as many nodes as instance_group says, for the aligner's setting where it has one)."""
    strategy, reasons = resolve_strategy(host, step, topology, index_bytes, aligner)
    size = 1
    if STRATEGIES[strategy].one_process_per_group:
        size = instance_group(host, step, topology, index_bytes, aligner, reasons)
    return plan_strategy(
        topology, step, strategy, threads, host.instances_per_node, pool, reasons, size
    )
