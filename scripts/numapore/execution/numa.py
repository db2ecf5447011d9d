"""NUMA hosts for numapore: topology, host files, the advisor, numactl command plans, policy."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

log = logging.getLogger("numapore.execution.numa")

REPO = Path(__file__).resolve().parents[3]
SCHEMA_PATH = REPO / "workflow" / "schemas" / "host.schema.yaml"
HOSTS_DIR = REPO / "config" / "hosts"
SYSFS_NODES = Path("/sys/devices/system/node")

STEPS = ("alignment", "methylation", "conversion")
STRATEGIES = ("none", "interleave", "localalloc", "instances", "auto")
IO_MODES = ("fast5", "fast5-pool", "slow5")
LOCAL_DISTANCE = 10  # ACPI SLIT value for a node to itself
REMOTE_DISTANCE = 20  # what Linux assumes between nodes when firmware gives no SLIT
# "Well under half" of a node: the index copy must leave room for reads, buffers and sorting.
FIT_FRACTION = 0.4

# A command is an argv list (run without a shell) or a shell string (Snakemake `shell:`).
Command = list[str] | str
ShardCommand = Callable[[int, int, int], Sequence[str] | str]


class NumaError(Exception):
    """Base class of numapore.execution.numa errors."""


class TopologyError(NumaError):
    """The NUMA layout could not be read or is inconsistent."""


class HostConfigError(NumaError):
    """A host file is missing, malformed, or does not match the machine."""


# ---------------------------------------------------------------------------------------------
# Topology


@dataclass(frozen=True)
class Node:
    """One NUMA node: id, logical CPUs, memory in MiB, and its row of the distance table."""

    id: int
    cpus: tuple[int, ...]
    memory_mib: int
    distances: tuple[int, ...]


@dataclass(frozen=True)
class Topology:
    """A NUMA host: nodes sorted by id; distances[i] of a node refers to nodes[i]."""

    nodes: tuple[Node, ...]
    source: str = "explicit"

    def __post_init__(self) -> None:
        """Check ids, CPUs and distance rows so every Topology is consistent."""
        if not self.nodes:
            raise TopologyError(f"{self.source}: no NUMA nodes")
        ids = [n.id for n in self.nodes]
        if ids != sorted(set(ids)):
            raise TopologyError(f"{self.source}: node ids must be unique and sorted, got {ids}")
        seen: dict[int, int] = {}
        for n in self.nodes:
            for cpu in n.cpus:
                if cpu in seen:
                    raise TopologyError(
                        f"{self.source}: CPU {cpu} is listed under node {seen[cpu]} and node {n.id}"
                    )
                seen[cpu] = n.id
            if len(n.distances) != len(self.nodes):
                raise TopologyError(
                    f"{self.source}: node {n.id} has {len(n.distances)} distances, "
                    f"expected {len(self.nodes)} (one per node)"
                )
            own = n.distances[ids.index(n.id)]
            if own != LOCAL_DISTANCE:
                raise TopologyError(
                    f"{self.source}: node {n.id} distance to itself is {own}, expected 10"
                )

    @property
    def node_ids(self) -> tuple[int, ...]:
        """Ids of all nodes, ascending."""
        return tuple(n.id for n in self.nodes)

    @property
    def cpus(self) -> tuple[int, ...]:
        """All logical CPUs of the host, ascending."""
        return tuple(sorted(c for n in self.nodes for c in n.cpus))

    @property
    def memory_nodes(self) -> tuple[Node, ...]:
        """Nodes that have memory (targets for interleave and membind)."""
        return tuple(n for n in self.nodes if n.memory_mib > 0)

    @property
    def compute_nodes(self) -> tuple[Node, ...]:
        """Nodes with both CPUs and memory: the ones an instance can be bound to."""
        return tuple(n for n in self.nodes if n.cpus and n.memory_mib > 0)

    def node(self, node_id: int) -> Node:
        """The node with this id."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def cpu_node(self) -> dict[int, int]:
        """Map each CPU to the id of its node."""
        return {c: n.id for n in self.nodes for c in n.cpus}

    def distance(self, a: int, b: int) -> int:
        """SLIT distance from node a to node b."""
        return self.node(a).distances[self.node_ids.index(b)]

    def to_dict(self) -> dict[str, Any]:
        """The layout in host-file form (the `topology:` value of config/hosts/*.yaml)."""
        return {
            "nodes": [
                {
                    "id": n.id,
                    "cpus": format_cpulist(n.cpus),
                    "memory_mib": n.memory_mib,
                    "distances": list(n.distances),
                }
                for n in self.nodes
            ]
        }

    def summary(self) -> str:
        """One line for logs: node count, CPUs and memory per node."""
        parts = [
            f"{n.id}:cpus={format_cpulist(n.cpus) or '-'},mem={n.memory_mib}MiB" for n in self.nodes
        ]
        return f"{len(self.nodes)} NUMA node(s) [{'; '.join(parts)}] from {self.source}"


def parse_cpulist(text: str) -> tuple[int, ...]:
    """Parse a kernel cpulist/nodelist such as '0-3,8,10-11' into sorted unique numbers."""
    out: set[int] = set()
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?(?::(\d+)(?:/(\d+))?)?", part)
        if not m:
            raise ValueError(f"bad cpulist element {part!r} in {text!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ValueError(f"bad cpulist range {part!r} in {text!r}")
        # "a-b:used/group" strides appear in kernel boot syntax; support them for completeness.
        used = int(m.group(3)) if m.group(3) else None
        group = int(m.group(4)) if m.group(4) else used
        for c in range(lo, hi + 1):
            if used is None or group is None or (c - lo) % group < used:
                out.add(c)
    return tuple(sorted(out))


def format_cpulist(cpus: Sequence[int]) -> str:
    """Format numbers as a compact kernel cpulist, e.g. [0, 1, 2, 5] -> '0-2,5'."""
    nums = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(parts)


def parse_numactl_hardware(text: str, source: str = "numactl --hardware") -> Topology:
    """Parse `numactl --hardware` output into a Topology."""
    if "No NUMA available" in text:
        raise TopologyError(f"{source}: kernel reports no NUMA support")
    cpus: dict[int, tuple[int, ...]] = {}
    mem: dict[int, int] = {}
    header: list[int] = []
    rows: dict[int, list[int]] = {}
    in_distances = False
    for line in text.splitlines():
        if m := re.match(r"\s*node\s+(\d+)\s+cpus:(.*)$", line):
            cpus[int(m.group(1))] = tuple(sorted(int(c) for c in m.group(2).split()))
        elif m := re.match(r"\s*node\s+(\d+)\s+size:\s*(\d+)\s*MB", line):
            mem[int(m.group(1))] = int(m.group(2))  # numactl's "MB" are MiB (size >> 20)
        elif re.match(r"\s*node distances:", line):
            in_distances = True
        elif in_distances and (m := re.match(r"\s*node((?:\s+\d+)+)\s*$", line)):
            header = [int(x) for x in m.group(1).split()]
        elif in_distances and (m := re.match(r"\s*(\d+):((?:\s+\d+)+)\s*$", line)):
            rows[int(m.group(1))] = [int(x) for x in m.group(2).split()]
    ids = sorted(set(cpus) | set(mem))
    if not ids:
        raise TopologyError(f"{source}: no 'node N cpus:' lines found")
    if not header:
        header = ids
    nodes = []
    for nid in ids:
        if nid in rows:
            by_id = dict(zip(header, rows[nid], strict=False))
            dist = tuple(by_id.get(other, _default_distance(nid, other)) for other in ids)
        else:
            dist = tuple(_default_distance(nid, other) for other in ids)
        nodes.append(Node(nid, cpus.get(nid, ()), mem.get(nid, 0), dist))
    return Topology(tuple(nodes), source)


def _default_distance(a: int, b: int) -> int:
    """Distance Linux assumes without a SLIT table."""
    return LOCAL_DISTANCE if a == b else REMOTE_DISTANCE


def read_sysfs_topology(root: Path = SYSFS_NODES) -> Topology:
    """Read the layout from sysfs (node*/cpulist, node*/meminfo, node*/distance)."""
    dirs = sorted(
        (p for p in root.glob("node*") if re.fullmatch(r"node\d+", p.name)),
        key=lambda p: int(p.name[4:]),
    )
    if not dirs:
        raise TopologyError(f"{root}: no node directories")
    ids = [int(p.name[4:]) for p in dirs]
    nodes = []
    for nid, d in zip(ids, dirs, strict=True):
        cpus = parse_cpulist((d / "cpulist").read_text())
        mem_kib = 0
        meminfo = d / "meminfo"
        if meminfo.exists():
            m = re.search(r"MemTotal:\s*(\d+)\s*kB", meminfo.read_text())
            mem_kib = int(m.group(1)) if m else 0
        dist_file = d / "distance"
        if dist_file.exists():
            dist = tuple(int(x) for x in dist_file.read_text().split())
        else:
            dist = tuple(_default_distance(nid, o) for o in ids)
        nodes.append(Node(nid, cpus, mem_kib // 1024, dist))
    return Topology(tuple(nodes), f"sysfs {root}")


def _uma_topology() -> Topology:
    """A non-NUMA kernel is one node holding every online CPU and all memory."""
    online = Path("/sys/devices/system/cpu/online")
    if online.exists():
        cpus = parse_cpulist(online.read_text())
    else:
        cpus = tuple(range(os.cpu_count() or 1))
    mem_kib = 0
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        m = re.search(r"MemTotal:\s*(\d+)\s*kB", meminfo.read_text())
        mem_kib = int(m.group(1)) if m else 0
    return Topology((Node(0, cpus, mem_kib // 1024, (LOCAL_DISTANCE,)),), "non-NUMA kernel")


def detect_topology(sysfs_root: Path = SYSFS_NODES, numactl: str = "numactl") -> Topology:
    """Detect this machine's layout: sysfs first, `numactl --hardware` second, else one node."""
    try:
        return read_sysfs_topology(sysfs_root)
    except (OSError, TopologyError, ValueError) as exc:
        log.debug("sysfs topology unavailable (%s); trying %s --hardware", exc, numactl)
    exe = shutil.which(numactl)
    if exe:
        res = subprocess.run([exe, "--hardware"], capture_output=True, text=True, check=False)
        if res.returncode == 0:
            try:
                return parse_numactl_hardware(res.stdout)
            except TopologyError as exc:
                log.debug("numactl --hardware unusable: %s", exc)
    return _uma_topology()


# ---------------------------------------------------------------------------------------------
# Host files


@dataclass(frozen=True)
class HostConfig:
    """A loaded host file: explicit topology (None = auto) and the per-step NUMA settings."""

    name: str
    path: Path | None
    topology: Topology | None
    strategy: Mapping[str, str] = field(default_factory=dict)
    instances_per_node: int = 1
    io_mode: str = "fast5"
    io_processes: int | None = None
    description: str = ""

    def strategy_for(self, step: str) -> str:
        """Configured strategy for a step (may be 'auto')."""
        if step not in STEPS:
            raise ValueError(f"unknown step {step!r}; steps are {', '.join(STEPS)}")
        return self.strategy[step]


def load_schema(path: Path = SCHEMA_PATH) -> dict[str, Any]:
    """Load the host-file JSON schema (YAML form)."""
    import yaml  # imported here so topology/policy work (e.g. in the guest) without PyYAML

    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def apply_defaults(data: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of data with the schema's `default`s filled in (recursively for objects)."""
    out = dict(data)
    for key, sub in schema.get("properties", {}).items():
        if key not in out and "default" in sub:
            out[key] = json.loads(json.dumps(sub["default"]))  # deep copy
        if isinstance(out.get(key), dict) and sub.get("type") == "object":
            out[key] = apply_defaults(out[key], sub)
    return out


def _where(path: Sequence[Any]) -> str:
    """Render a jsonschema error path like strategy.alignment or topology.nodes[1].cpus."""
    text = ""
    for p in path:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else str(p))
    return text or "(top level)"


def validate_host_data(data: Any, source: str, schema: Mapping[str, Any] | None = None) -> None:
    """Validate parsed host-file data against the schema; HostConfigError lists every error."""
    import jsonschema

    schema = schema if schema is not None else load_schema()
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = []
        for err in errors:
            # oneOf failures hide the useful reason in their sub-errors: show the closest one.
            best = jsonschema.exceptions.best_match([err]) if err.context else err
            hint = ""
            if best.validator == "oneOf":  # say what the alternatives are
                alts = [a.get("description", "") for a in best.schema.get("oneOf", [])]
                hint = " (expected one of: " + " | ".join(alts) + ")"
            lines.append(f"{_where(best.absolute_path)}: {best.message}{hint}")
        # One line: Snakemake shows a multi-line error's first line only in some places.
        raise HostConfigError(f"{source}: invalid host file: " + "; ".join(lines))


def host_config_from_dict(
    data: Any, source: str = "<dict>", name: str | None = None, path: Path | None = None
) -> HostConfig:
    """Validate a parsed host file, fill defaults, and build a HostConfig."""
    if data is None:
        data = {}
    schema = load_schema()
    validate_host_data(data, source, schema)
    full = apply_defaults(data, schema)
    topo = full["topology"]
    topology = None
    if topo != "auto":
        try:
            topology = _topology_from_host_nodes(topo["nodes"], source)
        except (TopologyError, ValueError) as exc:
            raise HostConfigError(str(exc)) from exc
    return HostConfig(
        name=name or (path.stem if path else source),
        path=path,
        topology=topology,
        strategy=dict(full["strategy"]),
        instances_per_node=full["instances_per_node"],
        io_mode=full["io_mode"],
        io_processes=full["io_processes"],
        description=full["description"],
    )


def _topology_from_host_nodes(nodes: Sequence[Mapping[str, Any]], source: str) -> Topology:
    """Build a Topology from the `topology.nodes` list of a host file."""
    ordered = sorted(nodes, key=lambda n: n["id"])
    ids = [n["id"] for n in ordered]
    if len(set(ids)) != len(ids):
        raise TopologyError(f"{source}: node ids repeat: {ids}")
    built = []
    for n in ordered:
        cpus = n["cpus"]
        cpu_tuple = parse_cpulist(cpus) if isinstance(cpus, str) else tuple(sorted(cpus))
        dist = n.get("distances")
        row = tuple(dist) if dist is not None else tuple(_default_distance(n["id"], o) for o in ids)
        built.append(Node(n["id"], cpu_tuple, n["memory_mib"], row))
    return Topology(tuple(built), source)


def host_path(name_or_path: str | os.PathLike[str], hosts_dir: Path = HOSTS_DIR) -> Path:
    """Resolve a host name (config/hosts/<name>.yaml) or a path to a host file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.exists():
            raise HostConfigError(f"{p}: host file not found")
        return p
    candidate = hosts_dir / f"{name_or_path}.yaml"
    if not candidate.exists():
        known = sorted(q.stem for q in hosts_dir.glob("*.yaml"))
        raise HostConfigError(
            f"host {str(name_or_path)!r}: {candidate} not found (known hosts: {', '.join(known)})"
        )
    return candidate


def load_host_config(
    name_or_path: str | os.PathLike[str], hosts_dir: Path = HOSTS_DIR
) -> HostConfig:
    """Load and validate config/hosts/<name>.yaml (or a given path) into a HostConfig."""
    import yaml

    path = host_path(name_or_path, hosts_dir)
    if path.is_dir():
        raise HostConfigError(f"{path}: host file is a folder, not a file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HostConfigError(f"{path}: host file cannot be read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise HostConfigError(f"{path}: not valid YAML: {exc}") from exc
    return host_config_from_dict(data, source=str(path), name=path.stem, path=path)


def check_host_against_machine(host: HostConfig, machine: Topology) -> Topology:
    """Check a host file's layout against the machine; raise HostConfigError naming each problem."""
    # `topology: auto` is the machine's own layout by definition.
    if host.topology is None:
        return machine
    where = str(host.path) if host.path else host.name
    machine_cpu_node = machine.cpu_node()
    problems: list[str] = []
    for n in host.topology.nodes:
        if n.id not in machine.node_ids:
            problems.append(
                f"node {n.id} (CPUs {format_cpulist(n.cpus) or 'none'}) does not exist on this "
                f"machine, which has node(s) {format_cpulist(machine.node_ids)}"
            )
            continue
        missing = [c for c in n.cpus if c not in machine_cpu_node]
        if missing:
            problems.append(
                f"node {n.id} lists CPU(s) {format_cpulist(missing)} that this machine does not "
                f"have (its CPUs are {format_cpulist(machine.cpus)})"
            )
        moved = [c for c in n.cpus if c in machine_cpu_node and machine_cpu_node[c] != n.id]
        for c in moved:
            problems.append(
                f"node {n.id} lists CPU {c}, which belongs to node {machine_cpu_node[c]} "
                "on this machine"
            )
    if problems:
        raise HostConfigError(
            f"{where} does not match this machine ({machine.summary()}):\n  - "
            + "\n  - ".join(problems)
        )
    for n in host.topology.nodes:
        real = machine.node(n.id).memory_mib
        if real and n.memory_mib > real * 1.05:
            log.warning(
                "%s: node %d declares %d MiB but the machine has %d MiB; advisor uses %d MiB",
                where, n.id, n.memory_mib, real, n.memory_mib,
            )  # fmt: skip
    return host.topology


def startup_check(
    name_or_path: str | os.PathLike[str],
    machine: Topology | None = None,
    hosts_dir: Path = HOSTS_DIR,
) -> tuple[HostConfig, Topology]:
    """Load a host file and check it against this machine; the workflow calls this before jobs."""
    host = load_host_config(name_or_path, hosts_dir)
    machine = machine if machine is not None else detect_topology()
    topology = check_host_against_machine(host, machine)
    log.info("host %s: %s", host.name, topology.summary())
    return host, topology


# ---------------------------------------------------------------------------------------------
# Advisor


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


# ---------------------------------------------------------------------------------------------
# Command building (pure: no subprocess)


class Instance(NamedTuple):
    """One bound process of the instances strategy; its shard index is its list position."""

    node: int
    cpus: tuple[int, ...]
    threads: int
    command: Command


@dataclass(frozen=True)
class StepPlan:
    """What to run for one step: a single command, or one Instance per shard."""

    step: str
    strategy: str
    threads: int
    command: Command | None = None
    instances: tuple[Instance, ...] = ()

    @property
    def commands(self) -> list[Command]:
        """Every command of the plan, in shard order."""
        return [i.command for i in self.instances] if self.instances else [self.command or []]


def numactl_prefix(strategy: str, topology: Topology, node: int | None = None) -> list[str]:
    """The numactl argv prefix for a strategy (node is required for 'instances')."""
    if strategy == "none":
        return []
    if strategy == "interleave":
        targets = topology.memory_nodes or topology.nodes
        return ["numactl", f"--interleave={format_cpulist([n.id for n in targets])}"]
    if strategy == "localalloc":
        return ["numactl", "--localalloc"]
    if strategy == "instances":
        if node is None:
            raise ValueError("the instances strategy needs a node")
        return ["numactl", f"--cpunodebind={node}", f"--membind={node}"]
    if strategy == "auto":
        raise ValueError("strategy 'auto' must be resolved first (resolve_strategy / advise)")
    raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")


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


def single_command(topology: Topology, strategy: str, command: Sequence[str] | str) -> Command:
    """The one command to run under none, interleave or localalloc."""
    if strategy == "instances":
        raise ValueError("the instances strategy yields several commands: use instance_commands")
    return with_prefix(numactl_prefix(strategy, topology), command)


def split_threads(topology: Topology, threads: int, instances_per_node: int = 1) -> list[int]:
    """Split threads over the instances (node-major), in proportion to each node's CPUs."""
    # Every instance gets at least one thread, so fewer threads than instances oversubscribes.
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if instances_per_node < 1:
        raise ValueError(f"instances_per_node must be >= 1, got {instances_per_node}")
    weights = [len(n.cpus) for n in topology.compute_nodes for _ in range(instances_per_node)]
    if not weights:
        raise TopologyError(f"{topology.source}: no node has both CPUs and memory")
    total = sum(weights)
    exact = [threads * w / total for w in weights]
    shares = [int(x) for x in exact]
    # Largest remainder: hand out the leftover threads to the biggest fractional parts.
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[: threads - sum(shares)]:
        shares[i] += 1
    return [max(1, s) for s in shares]


def instance_slots(
    topology: Topology, threads: int, instances_per_node: int = 1
) -> list[tuple[Node, int]]:
    """The instances of a step in shard order: (node, threads) per node x instances_per_node."""
    nodes = [n for n in topology.compute_nodes for _ in range(instances_per_node)]
    return list(zip(nodes, split_threads(topology, threads, instances_per_node), strict=True))


def instance_commands(
    topology: Topology,
    threads: int,
    shard_command: ShardCommand,
    instances_per_node: int = 1,
) -> list[Instance]:
    """One bound command per node x instances_per_node; shard_command(i, n, t) builds shard i."""
    slots = instance_slots(topology, threads, instances_per_node)
    n_shards = len(slots)
    out = []
    for i, (node, t) in enumerate(slots):
        tool = shard_command(i, n_shards, t)
        cmd = with_prefix(numactl_prefix("instances", topology, node.id), tool)
        out.append(Instance(node.id, node.cpus, t, cmd))
    return out


def plan_step(
    topology: Topology,
    step: str,
    strategy: str,
    threads: int,
    command: Sequence[str] | str | None = None,
    shard_command: ShardCommand | None = None,
    instances_per_node: int = 1,
) -> StepPlan:
    """Plan a step under a concrete strategy: one command, or one bound Instance per shard."""
    # `command` is used as is; without it single-command strategies use shard_command(0, 1, t).
    # The instances strategy always needs shard_command(i, n, t).
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}; steps are {', '.join(STEPS)}")
    if strategy == "instances":
        if shard_command is None:
            raise ValueError("the instances strategy needs shard_command(i, n, threads)")
        inst = instance_commands(topology, threads, shard_command, instances_per_node)
        return StepPlan(step, strategy, threads, instances=tuple(inst))
    if command is None:
        if shard_command is None:
            raise ValueError("give command or shard_command")
        command = shard_command(0, 1, threads)
    return StepPlan(step, strategy, threads, command=single_command(topology, strategy, command))


# ---------------------------------------------------------------------------------------------
# Policy in force


_SHOW_KEYS = (
    "preferred node",
    "interleavemask",
    "interleavenode",
    "physcpubind",
    "cpubind",
    "nodebind",
    "membind",
    "preferred",
    "policy",
)


def parse_numactl_show(text: str) -> dict[str, Any]:
    """Parse `numactl --show` into {policy, preferred_node, physcpubind, cpubind, ...}."""
    # numactl 2.0.16 omits a newline after "preferred node:" under --localalloc, so keys are
    # located anywhere in the text rather than at line starts.
    pattern = r"\b(" + "|".join(re.escape(k) for k in _SHOW_KEYS) + r"):"
    matches = list(re.finditer(pattern, text))
    out: dict[str, Any] = {}
    for m, nxt in zip(matches, [*matches[1:], None], strict=True):
        key = m.group(1).replace(" ", "_")
        value = text[m.end() : nxt.start() if nxt else len(text)].strip()
        if key in ("physcpubind", "cpubind", "nodebind", "membind", "interleavemask", "preferred"):
            out[key] = [int(x) for x in value.split()] if re.fullmatch(r"[\d\s]*", value) else value
        else:
            out[key] = value
    return out


def parse_proc_status(text: str) -> dict[str, tuple[int, ...]]:
    """Cpus_allowed_list and Mems_allowed_list from /proc/<pid>/status text."""
    out: dict[str, tuple[int, ...]] = {}
    for key in ("Cpus_allowed_list", "Mems_allowed_list"):
        m = re.search(rf"^{key}:\s*(.*)$", text, re.MULTILINE)
        if m:
            out[key] = parse_cpulist(m.group(1))
    return out


def policy_in_force(pid: int | None = None, numactl: str = "numactl") -> dict[str, Any]:
    """The NUMA policy in force for this process (pid None) or another one, for job logs."""
    # CPUs come from /proc/<pid>/status. The memory policy is not in /proc: Mems_allowed_list
    # is the cpuset's and stays e.g. 0-1 under --membind=1. For this process `numactl --show`
    # (a child, which inherits our policy) reports it; for another pid only /proc is read.
    status_path = Path(f"/proc/{pid or 'self'}/status")
    status = parse_proc_status(status_path.read_text())
    out: dict[str, Any] = {
        "pid": pid or os.getpid(),
        "cpus_allowed": list(status.get("Cpus_allowed_list", ())),
        "mems_allowed": list(status.get("Mems_allowed_list", ())),
    }
    exe = shutil.which(numactl)
    if pid is None and exe:
        res = subprocess.run([exe, "--show"], capture_output=True, text=True, check=False)
        if res.returncode == 0:
            out.update(parse_numactl_show(res.stdout))
    return out


def format_policy(policy: Mapping[str, Any]) -> str:
    """One log line for a policy_in_force() result."""

    def fmt(v: Any) -> str:
        """Lists as cpulists, other values as text."""
        return format_cpulist(v) if isinstance(v, list) and v else str(v or "-")

    parts = [f"policy={policy.get('policy', '?')}"]
    for key in ("membind", "interleavemask", "preferred_node", "cpus_allowed", "mems_allowed"):
        if key in policy and policy[key] not in ("", [], None):
            parts.append(f"{key}={fmt(policy[key])}")
    return f"pid {policy.get('pid')}: " + " ".join(parts)


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `topology` prints the detected layout, `check HOST` validates, `policy` shows ours."""
    ap = argparse.ArgumentParser(prog="python -m numapore.execution.numa", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_top = sub.add_parser("topology", help="print this machine's NUMA layout")
    p_top.add_argument("--json", action="store_true", help="JSON instead of a summary line")
    p_chk = sub.add_parser("check", help="validate a host file against this machine")
    p_chk.add_argument("host", help="host name (config/hosts/NAME.yaml) or path")
    p_pol = sub.add_parser("policy", help="print the NUMA policy this process runs under")
    p_pol.add_argument("--json", action="store_true", help="JSON instead of a summary line")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "topology":
            topo = detect_topology()
            print(
                json.dumps(topo.to_dict() | {"source": topo.source})
                if args.json
                else topo.summary()
            )
        elif args.cmd == "check":
            host, topo = startup_check(args.host)
            print(f"{host.path}: OK: {topo.summary()}")
        else:
            pol = policy_in_force()
            print(json.dumps(pol) if args.json else format_policy(pol))
    except NumaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
