"""The NUMA layout of a machine: nodes, CPUs, memory and distances, read from the kernel
(sysfs, or `numactl --hardware`) or built from a host file's explicit `topology:`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _debug(msg: str, *args: Any) -> None:
    """A debug message; logging is imported only then: `numapore probe policy` imports this
    module, and each module a Python start imports costs seconds in the emulated guest."""
    import logging

    logging.getLogger("numapore.execution.topology").debug(msg, *args)


SYSFS_NODES = Path("/sys/devices/system/node")
LOCAL_DISTANCE = 10  # ACPI SLIT value for a node to itself
REMOTE_DISTANCE = 20  # what Linux assumes between nodes when firmware gives no SLIT


class NumaError(Exception):
    """Base class of the errors of numapore.execution (layouts and host files)."""


class TopologyError(NumaError):
    """The NUMA layout could not be read or is inconsistent."""


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

    def node_groups(self, size: int) -> tuple[tuple[Node, ...], ...]:
        """The compute nodes in groups of size consecutive nodes (by id): where the instances
        of a step go when each spans several nodes. size must divide the compute nodes."""
        usable = self.compute_nodes
        if size < 1 or len(usable) % size:
            raise TopologyError(
                f"{self.source}: groups of {size} node(s) do not divide the {len(usable)} "
                f"node(s) with CPUs and memory ({format_cpulist([n.id for n in usable])})"
            )
        return tuple(usable[i : i + size] for i in range(0, len(usable), size))

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
            dist = tuple(by_id.get(other, default_distance(nid, other)) for other in ids)
        else:
            dist = tuple(default_distance(nid, other) for other in ids)
        nodes.append(Node(nid, cpus.get(nid, ()), mem.get(nid, 0), dist))
    return Topology(tuple(nodes), source)


def default_distance(a: int, b: int) -> int:
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
            dist = tuple(default_distance(nid, o) for o in ids)
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
        _debug("sysfs topology unavailable (%s); trying %s --hardware", exc, numactl)
    exe = shutil.which(numactl)
    if exe:
        res = subprocess.run([exe, "--hardware"], capture_output=True, text=True, check=False)
        if res.returncode == 0:
            try:
                return parse_numactl_hardware(res.stdout)
            except TopologyError as exc:
                _debug("numactl --hardware unusable: %s", exc)
    return _uma_topology()
