"""Tests of numapore.execution: topology parsing, host files, advisor, plans, real numactl.

The probes that need a real 2-node NUMA machine run in test_numa_guest.py (one guest boot).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numa_guest  # beside this file: pytest puts tests/ on sys.path (rootdir conftest)
import pytest
import yaml

from numapore.execution import advisor, hosts, probe, topology
from numapore.execution import plan as planner

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PYTHONPATH = str(REPO / "scripts")

# --- realistic `numactl --hardware` outputs ---------------------------------------------------

SP = " "  # numactl ends distance-table lines with a space; written out to keep that realistic
XEON_NODE0_CPUS = " ".join(map(str, [*range(0, 16), *range(32, 48)]))
XEON_NODE1_CPUS = " ".join(map(str, [*range(16, 32), *range(48, 64)]))

NUMACTL_1_NODE = f"""\
available: 1 nodes (0)
node 0 cpus: 0 1 2 3 4 5 6 7
node 0 size: 31941 MB
node 0 free: 20112 MB
node distances:
node   0{SP}
  0:  10{SP}
"""

# 2 x Xeon, 16 cores + HT per socket: siblings numbered 32 apart.
NUMACTL_2_NODES = f"""\
available: 2 nodes (0-1)
node 0 cpus: {XEON_NODE0_CPUS}
node 0 size: 192057 MB
node 0 free: 180334 MB
node 1 cpus: {XEON_NODE1_CPUS}
node 1 size: 193531 MB
node 1 free: 189870 MB
node distances:
node   0   1{SP}
  0:  10  21{SP}
  1:  21  10{SP}
"""

# 4 x Opteron 6376: 8 dies of 8 cores; nodes 2-3 own CPUs 32-47 and nodes 4-5 own 16-31.
NUMACTL_8_NODES = f"""\
available: 8 nodes (0-7)
node 0 cpus: 0 1 2 3 4 5 6 7
node 0 size: 32229 MB
node 0 free: 30412 MB
node 1 cpus: 8 9 10 11 12 13 14 15
node 1 size: 32253 MB
node 1 free: 31870 MB
node 2 cpus: 32 33 34 35 36 37 38 39
node 2 size: 32253 MB
node 2 free: 31822 MB
node 3 cpus: 40 41 42 43 44 45 46 47
node 3 size: 32253 MB
node 3 free: 31901 MB
node 4 cpus: 16 17 18 19 20 21 22 23
node 4 size: 32253 MB
node 4 free: 31780 MB
node 5 cpus: 24 25 26 27 28 29 30 31
node 5 size: 32253 MB
node 5 free: 31866 MB
node 6 cpus: 48 49 50 51 52 53 54 55
node 6 size: 32253 MB
node 6 free: 31843 MB
node 7 cpus: 56 57 58 59 60 61 62 63
node 7 size: 32237 MB
node 7 free: 31802 MB
node distances:
node   0   1   2   3   4   5   6   7{SP}
  0:  10  16  16  22  16  22  16  22{SP}
  1:  16  10  16  22  22  16  22  16{SP}
  2:  16  16  10  16  16  16  16  22{SP}
  3:  22  22  16  10  16  16  22  16{SP}
  4:  16  22  16  16  10  16  16  16{SP}
  5:  22  16  16  16  16  10  22  22{SP}
  6:  16  22  16  22  16  22  10  16{SP}
  7:  22  16  22  16  16  22  16  10{SP}
"""

EXAMPLE_HOSTS = ("single-node", "xeon-2socket", "opteron-6376")


@pytest.fixture(scope="module")
def machine() -> topology.Topology:
    """This machine's real layout."""
    return topology.detect_topology()


@pytest.fixture(scope="module")
def topologies(machine: topology.Topology) -> dict[str, topology.Topology]:
    """The layout of each example host (single-node: this machine's, as `auto` yields)."""
    out = {}
    for name in EXAMPLE_HOSTS:
        host = hosts.load_host_config(name)
        out[name] = host.topology if host.topology is not None else machine
    return out


def write_host(tmp_path: Path, data: object, name: str = "h.yaml") -> Path:
    """Write a host file into tmp_path and return its path."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def run(argv: list[str] | str, **kw: object) -> subprocess.CompletedProcess[str]:
    """Run a command here (a string via bash) with numapore importable, capturing text."""
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    if isinstance(argv, str):
        return subprocess.run(
            ["bash", "-c", argv], capture_output=True, text=True, env=env, check=False, **kw
        )
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, **kw)


# --- cpulists and numactl --hardware parsing --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cpus", "compact"),
    [
        ("0", (0,), "0"),
        ("0-3,8,10-11\n", (0, 1, 2, 3, 8, 10, 11), "0-3,8,10-11"),
        ("0-15,32-47", tuple(range(16)) + tuple(range(32, 48)), "0-15,32-47"),
        ("", (), ""),
        ("0-7:2/4", (0, 1, 4, 5), "0-1,4-5"),
    ],
)
def test_cpulist_round_trip(text: str, cpus: tuple[int, ...], compact: str) -> None:
    """Kernel cpulists parse to sorted CPUs and format back compactly."""
    assert topology.parse_cpulist(text) == cpus
    assert topology.format_cpulist(cpus) == compact


@pytest.mark.parametrize("bad", ["a", "3-1", "1,,x", "-2"])
def test_cpulist_rejects_garbage(bad: str) -> None:
    """Malformed cpulists raise ValueError."""
    with pytest.raises(ValueError):
        topology.parse_cpulist(bad)


def test_parse_numactl_hardware_1_node() -> None:
    """One node: all CPUs, its memory, distance 10."""
    t = topology.parse_numactl_hardware(NUMACTL_1_NODE)
    assert t.node_ids == (0,)
    assert t.node(0) == topology.Node(0, tuple(range(8)), 31941, (10,))


def test_parse_numactl_hardware_2_nodes_with_ht() -> None:
    """Two sockets with hyper-threads: split CPU ranges and the 21 remote distance."""
    t = topology.parse_numactl_hardware(NUMACTL_2_NODES)
    assert t.node_ids == (0, 1)
    assert topology.format_cpulist(t.node(0).cpus) == "0-15,32-47"
    assert topology.format_cpulist(t.node(1).cpus) == "16-31,48-63"
    assert [n.memory_mib for n in t.nodes] == [192057, 193531]
    assert t.distance(0, 1) == t.distance(1, 0) == 21
    assert len(t.cpus) == 64


def test_parse_numactl_hardware_8_nodes_matches_opteron_host_file() -> None:
    """The 8-node Opteron output parses to the CPUs and distances of opteron-6376.yaml."""
    t = topology.parse_numactl_hardware(NUMACTL_8_NODES)
    host = hosts.load_host_config("opteron-6376").topology
    assert host is not None
    assert t.node_ids == tuple(range(8))
    assert [n.cpus for n in t.nodes] == [n.cpus for n in host.nodes]
    assert [n.distances for n in t.nodes] == [n.distances for n in host.nodes]
    assert t.node(2).cpus == tuple(range(32, 40))
    assert {t.distance(a, b) for a in t.node_ids for b in t.node_ids} == {10, 16, 22}
    assert all(t.distance(a, b) == t.distance(b, a) for a in t.node_ids for b in t.node_ids)


def test_parse_numactl_hardware_memory_only_node() -> None:
    """A node with memory but no CPUs (e.g. CXL) is kept, and instances skip it."""
    text = (
        "available: 2 nodes (0-1)\nnode 0 cpus: 0 1 2 3\nnode 0 size: 15890 MB\n"
        "node 0 free: 9000 MB\nnode 1 cpus:\nnode 1 size: 65536 MB\nnode 1 free: 65000 MB\n"
        "node distances:\nnode   0   1 \n  0:  10  50 \n  1:  50  10 \n"
    )
    t = topology.parse_numactl_hardware(text)
    assert t.node(1).cpus == () and t.node(1).memory_mib == 65536
    assert [n.id for n in t.compute_nodes] == [0]
    assert planner.plan_strategy(t, "alignment", "instances", 4).nodes == (0,)
    inter = planner.plan_strategy(t, "alignment", "interleave", 4)
    assert inter.commands(["x"]) == [["numactl", "--interleave=0-1", "x"]]


def test_parse_numactl_hardware_without_numa() -> None:
    """A kernel without NUMA support is reported as a TopologyError."""
    with pytest.raises(topology.TopologyError, match="no NUMA"):
        topology.parse_numactl_hardware("No NUMA available on this system\n")


def test_read_sysfs_topology_fake_8_nodes(tmp_path: Path) -> None:
    """The sysfs reader handles an 8-node tree (cpulist, meminfo in kB, distance rows)."""
    ref = topology.parse_numactl_hardware(NUMACTL_8_NODES)
    for n in ref.nodes:
        d = tmp_path / f"node{n.id}"
        d.mkdir()
        (d / "cpulist").write_text(topology.format_cpulist(n.cpus) + "\n")
        (d / "meminfo").write_text(
            f"Node {n.id} MemTotal:       {n.memory_mib * 1024} kB\n"
            f"Node {n.id} MemFree:        1024 kB\n"
        )
        (d / "distance").write_text(" ".join(map(str, n.distances)) + "\n")
    (tmp_path / "online").write_text("0-7\n")  # not a node directory: must be ignored
    t = topology.read_sysfs_topology(tmp_path)
    assert t.nodes == ref.nodes
    assert t.source.startswith("sysfs")


def test_detect_topology_real_machine_sysfs_and_numactl_agree(tmp_path: Path) -> None:
    """On this machine, sysfs detection and the numactl --hardware fallback give one layout."""
    from_sysfs = topology.detect_topology()
    from_numactl = topology.detect_topology(sysfs_root=tmp_path / "absent")
    real = subprocess.run(["numactl", "--hardware"], capture_output=True, text=True, check=True)
    parsed = topology.parse_numactl_hardware(real.stdout)
    assert from_numactl.source == "numactl --hardware"
    assert from_sysfs.node_ids == from_numactl.node_ids == parsed.node_ids
    assert [n.cpus for n in from_sysfs.nodes] == [n.cpus for n in parsed.nodes]
    assert set(from_sysfs.cpus) >= set(os.sched_getaffinity(0))
    assert all(n.memory_mib > 0 for n in from_sysfs.nodes)


def test_topology_rejects_inconsistent_layouts() -> None:
    """Shared CPUs, short distance rows and a non-10 self distance are refused."""
    with pytest.raises(topology.TopologyError, match="CPU 1 is listed under node 0 and node 1"):
        topology.Topology(
            (topology.Node(0, (0, 1), 1, (10, 20)), topology.Node(1, (1,), 1, (20, 10)))
        )
    with pytest.raises(topology.TopologyError, match="2 distances, expected 1"):
        topology.Topology((topology.Node(0, (0,), 1, (10, 20)),))
    with pytest.raises(topology.TopologyError, match="distance to itself is 20"):
        topology.Topology((topology.Node(0, (0,), 1, (20,)),))


# --- schema and host files --------------------------------------------------------------------


def _walk_properties(schema: dict, path: str = "") -> list[tuple[str, dict]]:
    """Every property schema (recursing through properties, items and oneOf) with its path."""
    out = []
    for key, sub in schema.get("properties", {}).items():
        out.append((f"{path}.{key}", sub))
        out += _walk_properties(sub, f"{path}.{key}")
    for alt in schema.get("oneOf", []):
        out += _walk_properties(alt, path)
    if isinstance(schema.get("items"), dict):
        out += _walk_properties(schema["items"], f"{path}[]")
    return out


def test_schema_is_strict_documented_and_defaulted() -> None:
    """Valid draft 2020-12; every object closed; every property described; optionals defaulted."""
    import jsonschema

    schema = hosts.load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    props = _walk_properties(schema)
    assert {p for p, _ in props} >= {
        ".topology",
        ".strategy.alignment",
        ".strategy.methylation",
        ".instances_per_node",
        ".io_mode",
        ".io_processes",
        ".topology.nodes[].distances",
    }
    for path, sub in props:
        assert sub.get("description"), f"{path} has no description"
    objects = [schema] + [s for _, s in props if s.get("type") == "object"]
    objects += [alt for _, s in props for alt in s.get("oneOf", []) if alt.get("type") == "object"]
    for obj in objects:
        assert obj.get("additionalProperties") is False
    for key, sub in schema["properties"].items():
        assert "default" in sub, f"top-level key {key} has no default"
    assert "conversion" not in schema["properties"]["strategy"]["properties"]  # no numactl
    for step in hosts.STEPS:
        assert schema["properties"]["strategy"]["properties"][step]["enum"] == list(
            hosts.STRATEGIES
        )
    assert schema["properties"]["io_mode"]["enum"] == list(hosts.IO_MODES)


@pytest.mark.parametrize("name", EXAMPLE_HOSTS)
def test_example_hosts_load(name: str) -> None:
    """The shipped host files validate and carry a concrete setting for every step."""
    host = hosts.load_host_config(name)
    assert host.path == REPO / "config" / "hosts" / f"{name}.yaml"
    assert set(host.strategy) == set(hosts.STEPS)
    assert host.io_mode in hosts.IO_MODES
    assert host.instances_per_node >= 1
    assert host.description


def test_example_host_layouts() -> None:
    """single-node is auto; xeon has 2x32 CPUs and 192 GiB nodes; opteron 8x8 CPUs."""
    assert hosts.load_host_config("single-node").topology is None
    xeon = hosts.load_host_config("xeon-2socket").topology
    assert xeon is not None and xeon.node_ids == (0, 1)
    assert [len(n.cpus) for n in xeon.nodes] == [32, 32]
    assert [n.memory_mib for n in xeon.nodes] == [192 * 1024] * 2
    assert xeon.distance(0, 1) == 21
    opt = hosts.load_host_config("opteron-6376").topology
    assert opt is not None and len(opt.nodes) == 8
    assert all(len(n.cpus) == 8 for n in opt.nodes) and opt.cpus == tuple(range(64))


def test_defaults_filled_in(tmp_path: Path) -> None:
    """An empty host file means auto topology, auto/auto/none, 1 instance, fast5, io null."""
    host = hosts.load_host_config(write_host(tmp_path, "{}\n"))
    assert host.topology is None
    assert host.strategy == {"alignment": "auto", "methylation": "auto"}
    assert (host.instances_per_node, host.io_mode, host.io_processes) == (1, "fast5", None)
    partial = hosts.load_host_config(write_host(tmp_path, {"strategy": {"alignment": "none"}}))
    assert partial.strategy == {"alignment": "none", "methylation": "auto"}
    node = {"id": 0, "cpus": [0, 1], "memory_mib": 100}
    host2 = hosts.load_host_config(write_host(tmp_path, {"topology": {"nodes": [node]}}))
    assert host2.topology is not None and host2.topology.node(0).distances == (10,)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"threads": 4}, r"\(top level\): Additional properties are not allowed \('threads'"),
        ({"strategy": {"alignment": "fast"}}, r"strategy\.alignment: 'fast' is not one of"),
        ({"strategy": {"assembly": "none"}}, r"strategy: .*'assembly' was unexpected"),
        # The conversion runs without numactl: a strategy for it is refused, naming the key.
        ({"strategy": {"conversion": "none"}}, r"strategy: .*'conversion' was unexpected"),
        ({"io_mode": "blow5"}, r"io_mode: 'blow5' is not one of"),
        ({"instances_per_node": 0}, r"instances_per_node: 0 is less than the minimum of 1"),
        ({"io_processes": "many"}, r"io_processes: 'many' is not of type"),
        ({"topology": "detect"}, r"topology: 'detect' is not valid .*Detect the layout"),
        (
            {"topology": {"nodes": [{"id": 0, "cpus": "0-1", "memory_mib": 1, "socket": 0}]}},
            r"topology\.nodes\[0\]: Additional .*'socket' was unexpected",
        ),
        (
            {"topology": {"nodes": [{"id": 0, "cpus": "0-1"}]}},
            r"topology\.nodes\[0\]: 'memory_mib' is a required property",
        ),
        (
            {"topology": {"nodes": [{"id": 0, "cpus": "zero", "memory_mib": 1}]}},
            r"topology\.nodes\[0\]\.cpus: 'zero' does not match",
        ),
        ({"topology": {"nodes": []}}, r"topology\.nodes: \[\] should be non-empty"),
    ],
)
def test_schema_errors_name_file_and_key(tmp_path: Path, data: dict, expected: str) -> None:
    """Schema violations raise HostConfigError naming the file and the offending key."""
    path = write_host(tmp_path, data)
    with pytest.raises(hosts.HostConfigError) as err:
        hosts.load_host_config(path)
    assert str(path) in str(err.value)
    assert re.search(expected, str(err.value)), str(err.value)


def test_semantic_errors_in_explicit_layout(tmp_path: Path) -> None:
    """Layouts that pass the schema but are inconsistent are refused with the file named."""
    shared = {
        "topology": {
            "nodes": [
                {"id": 0, "cpus": "0-3", "memory_mib": 1},
                {"id": 1, "cpus": "3-5", "memory_mib": 1},
            ]
        }
    }
    path = write_host(tmp_path, shared, "shared.yaml")
    with pytest.raises(hosts.HostConfigError, match=r"shared\.yaml: CPU 3 is listed under node 0"):
        hosts.load_host_config(path)
    short = {
        "topology": {"nodes": [{"id": 0, "cpus": [0], "memory_mib": 1, "distances": [10, 20]}]}
    }
    with pytest.raises(hosts.HostConfigError, match="node 0 has 2 distances, expected 1"):
        hosts.load_host_config(write_host(tmp_path, short, "short.yaml"))
    twice = {"topology": {"nodes": [{"id": 0, "cpus": [0], "memory_mib": 1}] * 2}}
    with pytest.raises(hosts.HostConfigError, match="node ids repeat"):
        hosts.load_host_config(write_host(tmp_path, twice, "twice.yaml"))


def test_unknown_host_and_bad_yaml(tmp_path: Path) -> None:
    """Unknown names list the known hosts; broken YAML names the file."""
    with pytest.raises(hosts.HostConfigError, match=r"known hosts: .*opteron-6376"):
        hosts.load_host_config("no-such-host")
    bad = write_host(tmp_path, "strategy: [unclosed\n", "bad.yaml")
    with pytest.raises(hosts.HostConfigError, match=r"bad\.yaml: not valid YAML"):
        hosts.load_host_config(bad)


# --- validation against the machine -----------------------------------------------------------


def test_startup_check_single_node_passes_here(machine: topology.Topology) -> None:
    """The auto host file is valid on this machine and yields the detected layout."""
    host, topo = hosts.startup_check("single-node")
    assert host.name == "single-node"
    assert topo.node_ids == machine.node_ids and topo.cpus == machine.cpus


@pytest.mark.parametrize("name", ["xeon-2socket", "opteron-6376"])
def test_startup_check_big_hosts_fail_here(name: str, machine: topology.Topology) -> None:
    """The multi-node example files name nodes and CPUs this machine lacks: clear error."""
    if len(machine.nodes) > 1:
        pytest.skip("this check assumes the 1-node development machine")
    with pytest.raises(hosts.HostConfigError) as err:
        hosts.startup_check(name)
    msg = str(err.value)
    assert f"config/hosts/{name}.yaml does not match this machine" in msg
    assert "node 1 (CPUs " in msg and "does not exist on this machine" in msg
    assert re.search(r"node 0 lists CPU\(s\) \S+ that this machine does not have", msg)


def test_startup_check_against_parsed_machines() -> None:
    """Each example passes on the machine it describes (as numactl --hardware shows it)."""
    xeon = topology.parse_numactl_hardware(NUMACTL_2_NODES)
    opteron = topology.parse_numactl_hardware(NUMACTL_8_NODES)
    _, topo = hosts.startup_check("xeon-2socket", machine=xeon)
    assert topo.node_ids == (0, 1)
    _, topo = hosts.startup_check("opteron-6376", machine=opteron)
    assert len(topo.nodes) == 8
    with pytest.raises(hosts.HostConfigError, match="node 2 .* does not exist"):
        hosts.startup_check("opteron-6376", machine=xeon)


def test_check_names_missing_node_cpu_and_moved_cpu(tmp_path: Path) -> None:
    """Errors name the file, a node the machine lacks, a CPU it lacks, and a misplaced CPU."""
    machine = topology.parse_numactl_hardware(NUMACTL_2_NODES)
    data = {
        "topology": {
            "nodes": [
                {"id": 0, "cpus": "0-15,32-47,64", "memory_mib": 1000},
                {"id": 1, "cpus": "16-31,48-62", "memory_mib": 1000},
                {"id": 2, "cpus": [63], "memory_mib": 1000},
            ]
        }
    }
    path = write_host(tmp_path, data, "wrong.yaml")
    with pytest.raises(hosts.HostConfigError) as err:
        hosts.startup_check(path, machine=machine)
    msg = str(err.value)
    assert msg.startswith(f"{path} does not match this machine")
    assert "node 0 lists CPU(s) 64 that this machine does not have" in msg
    assert "node 2 (CPUs 63) does not exist on this machine, which has node(s) 0-1" in msg
    moved = {"topology": {"nodes": [{"id": 0, "cpus": "0-16", "memory_mib": 1000}]}}
    with pytest.raises(hosts.HostConfigError, match="node 0 lists CPU 16, which belongs to node 1"):
        hosts.startup_check(write_host(tmp_path, moved, "moved.yaml"), machine=machine)


def test_check_warns_when_declared_memory_exceeds_machine(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A node declaring far more memory than the machine has passes, with a logged warning."""
    machine = topology.parse_numactl_hardware(NUMACTL_1_NODE)
    big = {"topology": {"nodes": [{"id": 0, "cpus": "0-7", "memory_mib": 10**6}]}}
    with caplog.at_level(logging.WARNING, logger="numapore.execution.hosts"):
        hosts.startup_check(write_host(tmp_path, big, "big.yaml"), machine=machine)
    assert "node 0 declares 1000000 MiB but the machine has 31941 MiB" in caplog.text


def test_check_cli_reports_error_for_xeon_here(machine: topology.Topology) -> None:
    """`python -m numapore.execution.probe check` exits 2 with the message on a mismatching host."""
    ok = run([PYTHON, "-m", "numapore.execution.probe", "check", "single-node"])
    assert ok.returncode == 0 and ": OK: " in ok.stdout
    if len(machine.nodes) == 1:
        bad = run([PYTHON, "-m", "numapore.execution.probe", "check", "xeon-2socket"])
        assert bad.returncode == 2 and "xeon-2socket.yaml does not match" in bad.stderr


# --- advisor ----------------------------------------------------------------------------------


def test_advise_one_node_is_none(topologies: dict[str, topology.Topology]) -> None:
    """On one node there is nothing to place, whatever the index size."""
    for size in (0, 10**9, 10**12):
        strategy, why = advisor.advise(topology.parse_numactl_hardware(NUMACTL_1_NODE), size)
        assert strategy == "none" and why["nodes"] == 1
    if len(topologies["single-node"].nodes) == 1:
        assert advisor.advise(topologies["single-node"], 5 * 2**30)[0] == "none"


@pytest.mark.parametrize(
    ("host", "index_gib", "per_node", "expected", "group"),
    [
        ("opteron-6376", 8, 1, "instances", 1),  # 8 of 32 GiB: 25 %
        ("opteron-6376", 12.8, 1, "instances", 1),  # exactly 40 %
        ("opteron-6376", 13, 1, "instances", 2),  # 13 of 64 GiB over 2 nodes
        ("opteron-6376", 8, 2, "instances", 2),  # two copies per node: 50 %; per 2 nodes 25 %
        ("opteron-6376", 3.1, 4, "instances", 1),
        ("opteron-6376", 51, 1, "instances", 4),  # 51 of 128 GiB over 4 nodes
        ("opteron-6376", 60, 1, "interleave", None),  # only all 8 nodes (256 GiB) hold it
        ("xeon-2socket", 60, 1, "instances", 1),  # 60 of 192 GiB
        ("xeon-2socket", 100, 1, "interleave", None),
    ],
)
def test_advise_multi_node(
    topologies: dict[str, topology.Topology],
    host: str,
    index_gib: float,
    per_node: int,
    expected: str,
    group: int | None,
) -> None:
    """Instances when the index copies fit in 40 % of the smallest node, each over the fewest
    nodes whose memory they fit so (a group) when not; interleave when only all nodes do."""
    strategy, why = advisor.advise(topologies[host], int(index_gib * 2**30), per_node)
    assert strategy == expected == why["strategy"]
    assert why.get("instance_nodes") == group
    node_mib = min(n.memory_mib for n in topologies[host].nodes)
    assert why["smallest_node_memory_mib"] == node_mib
    assert why["fit_limit_mib"] == pytest.approx(0.4 * node_mib, abs=0.1)
    assert why["index_copies_per_node_mib"] == pytest.approx(index_gib * 1024 * per_node, abs=0.1)
    assert why["why"]
    if group:
        assert why["group_memory_mib"] == group * node_mib


def test_advise_logs_its_numbers(
    caplog: pytest.LogCaptureFixture, topologies: dict[str, topology.Topology]
) -> None:
    """The decision and the numbers behind it go to the numapore.execution.advisor logger."""
    with caplog.at_level(logging.INFO, logger="numapore.execution.advisor"):
        advisor.advise(topologies["opteron-6376"], 20 * 2**30)
    line = caplog.records[-1].getMessage()
    assert line.startswith("NUMA advisor: instances")
    assert '"smallest_node_memory_mib": 32768' in line and '"index_bytes": 21474836480' in line
    assert '"instance_nodes": 2' in line


def test_resolve_strategy_uses_config_or_advisor(topologies: dict[str, topology.Topology]) -> None:
    """Configured strategies are returned as is; auto goes to the advisor."""
    opt = hosts.load_host_config("opteron-6376")
    assert advisor.resolve_strategy(opt, "alignment", topologies["opteron-6376"])[0] == "instances"
    xeon = hosts.load_host_config("xeon-2socket")
    assert (
        advisor.resolve_strategy(xeon, "methylation", topologies["xeon-2socket"])[0] == "interleave"
    )
    big = advisor.resolve_strategy(xeon, "alignment", topologies["xeon-2socket"], 100 * 2**30)
    assert big[0] == "interleave" and "smallest_node_memory_mib" in big[1]
    with pytest.raises(ValueError, match="unknown step"):
        advisor.resolve_strategy(xeon, "basecalling", topologies["xeon-2socket"])


# --- instances over groups of nodes (an index larger than a node's share) ---------------------


def synthetic(nodes: int, memory_gib: int, cpus: int = 16) -> topology.Topology:
    """nodes NUMA nodes of cpus CPUs and memory_gib GiB each, Linux's default distances."""
    return topology.Topology(
        tuple(
            topology.Node(
                i,
                tuple(range(i * cpus, (i + 1) * cpus)),
                memory_gib * 1024,
                tuple(topology.default_distance(i, j) for j in range(nodes)),
            )
            for i in range(nodes)
        ),
        f"synthetic {nodes} x {memory_gib} GiB",
    )


SNAP_HUMAN_INDEX = 29 * 2**30  # the study's SNAP index of a human genome


@pytest.mark.parametrize(
    ("memory_gib", "index_gib", "group"),
    [
        (16, 29, 8),  # 29 GiB > 40 % of 4 x 16 GiB (25.6): only all 8 nodes (51.2) hold it
        (24, 29, 4),  # > 40 % of 2 x 24 GiB (19.2), <= 40 % of 4 x 24 GiB (38.4): the study's
        (48, 29, 2),  # <= 40 % of 2 x 48 GiB (38.4)
        (96, 29, 1),  # <= 40 % of one 96 GiB node
        (16, 6, 1),  # a bwa index of a human genome (6 GiB) on 16 GiB nodes: one node each
        (8, 100, None),  # not even all 8 x 8 GiB
    ],
)
def test_fitting_group_of_nodes(memory_gib: int, index_gib: int, group: int | None) -> None:
    """The fewest consecutive nodes (a divisor of 8) whose memory holds the index in 40 %."""
    assert advisor.fitting_group(synthetic(8, memory_gib), index_gib * 2**30) == group


def test_the_study_layout_snap_over_groups_of_four() -> None:
    """8 nodes x 24 GiB, SNAP's 29 GiB index, 64 threads, auto: 2 instances x 32 threads, each
    bound to its 4 nodes' CPUs with its memory interleaved over them, groups in the record."""
    topo = synthetic(8, 24)
    host = hosts.host_config_from_dict({"strategy": {"alignment": "auto"}})
    plan = planner.plan_step(host, topo, "alignment", 64, SNAP_HUMAN_INDEX, aligner="snap")
    assert plan.strategy == "instances" and plan.reasons["instance_nodes"] == 4
    assert plan.groups == ((0, 1, 2, 3), (4, 5, 6, 7)) and plan.threads == (32, 32)
    assert plan.nodes == (None, None)  # no single node: a group each
    assert plan.slots[1].cpus == tuple(range(64, 128))
    assert plan.prefix(0) == ["numactl", "--cpunodebind=0-3", "--interleave=0-3"]
    assert plan.reasons["groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert "<= 40% of 4 nodes (98304 MiB), > 40% of fewer nodes" in plan.reasons["why"]
    # On 16 GiB nodes only all 8 hold it: auto interleaves; `instances` makes one instance over
    # all of them (the same placement, bound to their CPUs).
    assert planner.plan_step(
        host, synthetic(8, 16), "alignment", 64, SNAP_HUMAN_INDEX
    ).strategy == ("interleave")
    inst = hosts.host_config_from_dict({"strategy": {"alignment": "instances"}})
    one = planner.plan_step(inst, synthetic(8, 16), "alignment", 64, SNAP_HUMAN_INDEX)
    assert one.groups == (tuple(range(8)),) and one.threads == (64,)
    assert one.prefix(0) == ["numactl", "--cpunodebind=0-7", "--interleave=0-7"]
    assert "<= 40% of 8 nodes (131072 MiB)" in one.reasons["groups_why"]
    none_fit = planner.plan_step(inst, synthetic(8, 8), "alignment", 64, 100 * 2**30)
    assert none_fit.groups == one.groups  # not even all 8 x 8 GiB: one instance over all
    assert "> 40% of even all 8 nodes" in none_fit.reasons["groups_why"]


def test_instance_nodes_in_the_host_file(tmp_path: Path) -> None:
    """instance_nodes per step or aligner (the aligner's wins); under auto a set value makes
    the step run as instances; a size that does not divide the nodes fails naming the key."""
    topo = synthetic(8, 64)
    data = {
        "topology": topo.to_dict(),
        "strategy": {"alignment": "auto", "methylation": "instances"},
        "instance_nodes": {"alignment": 2, "snap": 4, "methylation": 8},
        "instances_per_node": 2,
    }
    host = hosts.host_config_from_dict(data)
    assert host.instance_nodes_for("alignment", "snap") == 4
    assert host.instance_nodes_for("alignment", "bwa") == 2
    snap = planner.plan_step(host, topo, "alignment", 64, 0, aligner="snap")
    assert snap.strategy == "instances"  # auto, with a group size set
    assert snap.groups == ((0, 1, 2, 3),) * 2 + ((4, 5, 6, 7),) * 2  # 2 instances per group
    assert snap.threads == (16,) * 4
    assert "instance_nodes: 4 in the host file" in snap.reasons["why"]
    bwa = planner.plan_step(host, topo, "alignment", 64, 0, aligner="bwa")
    assert bwa.groups[::2] == ((0, 1), (2, 3), (4, 5), (6, 7))
    calls = planner.plan_step(host, topo, "methylation", 8, 0)
    assert calls.groups == (tuple(range(8)),) * 2 and calls.threads == (4, 4)
    assert planner.split_threads(topo, 10, 1, 4) == [5, 5]
    data["instance_nodes"] = {"snap": 3}
    path = write_host(tmp_path, data)
    with pytest.raises(hosts.HostConfigError, match=r"instance_nodes\.snap: .*groups of 3 node"):
        hosts.check_host_against_machine(hosts.load_host_config(path), topo)
    data["instance_nodes"] = {"star": 2}
    with pytest.raises(hosts.HostConfigError, match=r"instance_nodes: Additional .*'star'"):
        hosts.load_host_config(write_host(tmp_path, data))
    # Its keys are the steps and the config's aligners.
    config = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    keys = hosts.load_schema()["properties"]["instance_nodes"]["properties"]
    assert list(keys) == [*hosts.STEPS, *config["properties"]["aligner"]["enum"]]


def test_group_processes_are_recorded_with_their_nodes(tmp_path: Path) -> None:
    """A process over a group: its command binds the group, its log line and record name
    every node of it."""
    from numapore.execution.launch import StepRun, plan_processes, write_record

    topo = synthetic(4, 8)
    host = hosts.host_config_from_dict({"strategy": {"alignment": "instances"}})
    plan = planner.plan_step(host, topo, "alignment", 8, 10 * 2**30)  # > 40 % of 16 GiB
    (proc,) = plan_processes(plan, lambda i, o, t: f"cat {i} > {o}", [tmp_path / "i"],
                             [tmp_path / "o"], tmp_path)  # fmt: skip
    assert proc.node == (0, 1, 2, 3) and len(plan.slots) == 1
    assert proc.command.startswith("numactl --cpunodebind=0-3 --interleave=0-3 ")
    assert probe.format_policy({"policy": "interleave"}, proc.node).startswith("asked nodes=0-3")
    record = tmp_path / "r.json"
    write_record(record, plan, StepRun([proc], 1.0, 1.0))
    saved = json.loads(record.read_text())
    assert saved["processes"][0]["node"] == [0, 1, 2, 3]
    assert saved["reasons"]["instance_nodes"] == 4


# --- command building -------------------------------------------------------------------------


def minimap2_shard(i: int, n: int, t: int) -> list[str]:
    """A realistic per-shard alignment command."""
    return ["minimap2", "-ax", "map-ont", "-t", str(t), "ref.mmi", f"reads.{i}-of-{n}.fastq"]


@pytest.mark.parametrize("host", EXAMPLE_HOSTS)
@pytest.mark.parametrize("step", hosts.STEPS)
@pytest.mark.parametrize("strategy", hosts.STRATEGIES)
def test_plans_for_every_host_step_strategy(
    topologies: dict[str, topology.Topology], host: str, step: str, strategy: str
) -> None:
    """Each strategy yields the documented numactl form on every example host and step."""
    topo = topologies[host]
    threads = len(topo.cpus)
    tool = ["minimap2", "-t", str(threads), "ref.mmi", "reads.fastq"]
    if strategy == "auto":
        with pytest.raises(ValueError, match="must be resolved first"):
            planner.plan_strategy(topo, step, strategy, threads)
        return
    plan = planner.plan_strategy(topo, step, strategy, threads)
    assert (plan.step, plan.strategy, sum(plan.threads)) == (step, strategy, threads)
    nodes = topology.format_cpulist(topo.node_ids)
    if strategy == "none":
        assert plan.commands(tool) == [tool] and plan.nodes == (None,)
    elif strategy == "interleave":
        assert plan.commands(tool) == [["numactl", f"--interleave={nodes}", *tool]]
    elif strategy == "localalloc":
        assert plan.commands(tool) == [["numactl", "--localalloc", *tool]]
    else:
        with pytest.raises(ValueError, match="several commands"):
            plan.commands(tool)
        assert list(plan.nodes) == list(topo.node_ids)
        assert sum(plan.threads) == threads
        n = len(topo.nodes)
        commands = plan.commands(minimap2_shard)
        for k, (slot, cmd) in enumerate(zip(plan.slots, commands, strict=True)):
            node, cpus, t = slot.node, slot.cpus, slot.threads
            assert cpus == topo.node(node).cpus and t == len(cpus)
            assert cmd == [
                "numactl",
                f"--cpunodebind={node}",
                f"--membind={node}",
                *minimap2_shard(k, n, t),
            ]
        assert commands == [
            plan.command(k, minimap2_shard(k, n, t)) for k, t in enumerate(plan.threads)
        ]


def test_opteron_instances_alignment_64_threads(topologies: dict[str, topology.Topology]) -> None:
    """The study's case: 8 bound minimap2 processes of 8 threads, one per die."""
    plan = planner.plan_strategy(topologies["opteron-6376"], "alignment", "instances", 64)
    assert [(s.node, topology.format_cpulist(s.cpus), s.threads) for s in plan.slots] == [
        (0, "0-7", 8),
        (1, "8-15", 8),
        (2, "32-39", 8),
        (3, "40-47", 8),
        (4, "16-23", 8),
        (5, "24-31", 8),
        (6, "48-55", 8),
        (7, "56-63", 8),
    ]
    assert plan.commands(minimap2_shard)[2][:3] == ["numactl", "--cpunodebind=2", "--membind=2"]


def test_instances_per_node_and_uneven_threads(topologies: dict[str, topology.Topology]) -> None:
    """Several instances per node share its threads; leftovers go to the first shards."""
    xeon = topologies["xeon-2socket"]
    plan = planner.plan_strategy(xeon, "alignment", "instances", 64, instances_per_node=2)
    assert [(s.node, s.threads) for s in plan.slots] == [(0, 16), (0, 16), (1, 16), (1, 16)]
    assert plan.commands(minimap2_shard)[3][-1] == "reads.3-of-4.fastq"
    assert planner.split_threads(topologies["opteron-6376"], 10) == [2, 2, 1, 1, 1, 1, 1, 1]
    assert planner.split_threads(topologies["opteron-6376"], 4) == [1] * 8  # min one each
    assert planner.split_threads(xeon, 7, 3) == [2, 1, 1, 1, 1, 1]
    with pytest.raises(ValueError):
        planner.split_threads(xeon, 0)


def test_string_commands(topologies: dict[str, topology.Topology]) -> None:
    """Shell strings get a text prefix; pipelines run under bash so every stage is bound."""
    opt = topologies["opteron-6376"]

    def single_command(strategy: str, command: str) -> str:
        """The one command of a single-process plan on the Opteron."""
        return planner.plan_strategy(opt, "alignment", strategy, 64).command(0, command)

    simple = "minimap2 -t 64 ref.mmi reads.fastq > out.sam 2> log.txt"
    assert single_command("none", simple) == simple
    assert single_command("interleave", simple) == "numactl --interleave=0-7 " + simple
    piped = "minimap2 -t 64 ref.mmi 'a b.fastq' | samtools sort -o out.bam"
    got = single_command("localalloc", piped)
    assert shlex.split(got) == ["numactl", "--localalloc", "bash", "-o", "pipefail", "-c", piped]
    quoted = "echo 'a | b' > x"  # the pipe is quoted: a simple command
    assert single_command("localalloc", quoted) == "numactl --localalloc " + quoted
    inst = planner.plan_strategy(opt, "alignment", "instances", 64).commands(
        lambda i, n, t: f"tool -t {t} shard{i} | gzip > o{i}"
    )
    assert shlex.split(inst[1])[:3] == ["numactl", "--cpunodebind=1", "--membind=1"]
    assert shlex.split(inst[1])[-1] == "tool -t 8 shard1 | gzip > o1"


def test_plan_argument_errors(topologies: dict[str, topology.Topology]) -> None:
    """Missing shard builders, unknown strategies and steps are reported."""
    topo = topologies["xeon-2socket"]
    with pytest.raises(ValueError, match="needs shard_command"):
        planner.plan_strategy(topo, "alignment", "instances", 4).commands(["x"])
    with pytest.raises(ValueError, match="unknown strategy"):
        planner.plan_strategy(topo, "alignment", "spread", 4)
    with pytest.raises(ValueError, match="unknown step"):
        planner.plan_strategy(topo, "assembly", "none", 4)
    with pytest.raises(ValueError, match="unknown step 'conversion'"):
        planner.plan_strategy(topo, "conversion", "none", 4)  # runs without numactl
    with pytest.raises(ValueError, match="several commands"):
        planner.plan_strategy(topo, "alignment", "instances", 4).commands(["x"])
    with pytest.raises(ValueError, match="several commands"):
        planner.plan_strategy(topo, "methylation", "none", 4, pool=2).commands(["x"])
    plan = planner.plan_strategy(topo, "methylation", "interleave", 6)
    assert plan.commands(minimap2_shard) == [
        ["numactl", "--interleave=0-1", *minimap2_shard(0, 1, 6)]
    ]


# --- real numactl on this machine -------------------------------------------------------------


def test_numactl_commands_run_here(machine: topology.Topology) -> None:
    """The literal forms from the brief run with the real numactl."""
    node = machine.node_ids[0]
    assert run(["numactl", f"--interleave={node}", "true"]).returncode == 0
    res = run(["numactl", f"--cpunodebind={node}", f"--membind={node}", "cat", "/proc/self/status"])
    assert res.returncode == 0
    allowed = probe.parse_proc_status(res.stdout)["Cpus_allowed_list"]
    assert set(allowed) <= set(machine.node(node).cpus)


@pytest.mark.parametrize("strategy", ["none", "interleave", "localalloc", "instances"])
def test_planned_commands_run_here(machine: topology.Topology, strategy: str) -> None:
    """Every planned command runs under real numactl and numactl --show reports its policy."""
    show = ["numactl", "--show"]
    plan = planner.plan_strategy(machine, "alignment", strategy, 2)
    expected = {"none": "default", "interleave": "interleave", "localalloc": "local"}
    for cmd in plan.commands(lambda i, n, t: show):
        res = run(cmd)
        assert res.returncode == 0, res.stderr
        shown = probe.parse_numactl_show(res.stdout)
        assert shown["policy"] == expected.get(strategy, "bind")
        if strategy == "interleave":
            assert shown["interleavemask"] == list(machine.node_ids)
    for i, slot in enumerate(plan.slots if strategy == "instances" else ()):
        res = run([*plan.prefix(i), "cat", "/proc/self/status"])
        assert set(probe.parse_proc_status(res.stdout)["Cpus_allowed_list"]) <= set(slot.cpus)


def test_planned_pipeline_string_runs_here(machine: topology.Topology, tmp_path: Path) -> None:
    """A pipeline string from the planner runs in bash and both stages inherit the policy."""
    cmd = "numactl --show | grep -c '^policy: interleave' > " + shlex.quote(str(tmp_path / "n"))
    planned = planner.plan_strategy(machine, "alignment", "interleave", 1).command(0, cmd)
    res = run(planned)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "n").read_text().strip() == "1"


def test_policy_in_force_under_numactl(machine: topology.Topology) -> None:
    """policy_in_force, run under a real binding, reports bind, its node and its CPUs."""
    node = machine.node_ids[-1]
    res = run(
        ["numactl", f"--cpunodebind={node}", f"--membind={node}"]
        + [PYTHON, "-m", "numapore.execution.probe", "policy", "--json"]
    )
    assert res.returncode == 0, res.stderr
    pol = json.loads(res.stdout)
    assert pol["policy"] == "bind" and pol["membind"] == [node]
    assert set(pol["cpus_allowed"]) <= set(machine.node(node).cpus)
    line = probe.format_policy(pol)
    assert f"policy=bind membind={node}" in line and "cpus_allowed=" in line
    here = probe.policy_in_force()
    assert here["pid"] == os.getpid() and here["policy"] in {"default", "bind", "interleave"}
    other = probe.policy_in_force(pid=1)  # another process: only what /proc shows
    assert "cpus_allowed" in other and "policy" not in other


def test_parse_numactl_show_variants() -> None:
    """numactl 2.0.16 output, including its missing newline under --localalloc."""
    local = "policy: local\npreferred node: physcpubind: 0 1 \ncpubind: 0 \nnodebind: 0 \n"
    local += "membind: 0 \npreferred: \n"
    assert probe.parse_numactl_show(local) == {
        "policy": "local",
        "preferred_node": "",
        "physcpubind": [0, 1],
        "cpubind": [0],
        "nodebind": [0],
        "membind": [0],
        "preferred": [],
    }
    inter = "policy: interleave\npreferred node: 0 (interleave next)\ninterleavemask: 0 1 \n"
    inter += "interleavenode: 0\nphyscpubind: 0 1 2 3 \ncpubind: 0 1 \nnodebind: 0 1 \n"
    inter += "membind: 0 1 \npreferred: 0 \n"
    got = probe.parse_numactl_show(inter)
    assert got["interleavemask"] == [0, 1] and got["preferred_node"] == "0 (interleave next)"
    status = "Name:\tcat\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n"
    assert probe.parse_proc_status(status) == {
        "Cpus_allowed_list": (0, 1),
        "Mems_allowed_list": (0,),
    }


# --- the 2-node NUMA guest (booted in test_numa_guest.py; here only what needs no boot) ----


def test_too_long_guest_command_is_refused_before_booting() -> None:
    """A command vng could not pass on the kernel command line is refused, saying why."""
    with pytest.raises(ValueError, match="write the script to a file"):
        numa_guest.run_in_numa_guest("echo " + "x" * numa_guest.MAX_COMMAND_BYTES, timeout=5)


def test_guest_tools_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without QEMU on PATH and no kernel, run_in_numa_guest says what to install."""
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("NUMAPORE_GUEST_KERNEL", "/nonexistent/vmlinuz")
    with pytest.raises(numa_guest.GuestToolsMissing) as err:
        numa_guest.run_in_numa_guest("true", timeout=5)
    msg = str(err.value)
    assert "qemu-system-x86_64 (Debian package qemu-system-x86)" in msg
    assert "read access to /nonexistent/vmlinuz" in msg
    assert "apt-get install --no-install-recommends qemu-system-x86 linux-image-amd64" in msg
