"""Host files (config/hosts/<name>.yaml): finding one, validating it against
workflow/schemas/host.schema.yaml (which carries the defaults), the host object the steps take,
and the check of its layout against the machine a job runs on."""

from __future__ import annotations

import copy
import logging
import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numapore.base.resources import schema_path, shipped_hosts_dir
from numapore.execution.io_modes import NAMES as IO_MODE_NAMES
from numapore.execution.strategies import NAMES
from numapore.execution.topology import (
    NumaError,
    Node,
    Topology,
    TopologyError,
    default_distance,
    detect_topology,
    format_cpulist,
    parse_cpulist,
)

log = logging.getLogger("numapore.execution.hosts")

SCHEMA_PATH = schema_path("host.schema.yaml")
# The host files shipped with the package; a user's own config/hosts/ (under the directory
# Snakemake runs in, like config/) is searched first.
SHIPPED_HOSTS_DIR = shipped_hosts_dir()
# The host file used when none is named for this machine: layout read from the kernel.
FALLBACK_HOST = "single-node"

STEPS = ("alignment", "methylation")
STRATEGIES = NAMES  # numapore.execution.strategies
IO_MODES = IO_MODE_NAMES  # numapore.execution.io_modes


class HostConfigError(NumaError):
    """A host file is missing, malformed, or does not match the machine."""


@dataclass(frozen=True)
class HostConfig:
    """A loaded host file: explicit topology (None = auto) and the per-step NUMA settings."""

    name: str
    path: Path | None
    topology: Topology | None
    strategy: Mapping[str, str] = field(default_factory=dict)
    instances_per_node: int = 1
    # Nodes each instance spans, by step or aligner name (the host file's instance_nodes);
    # absent: the advisor's rule (numapore.execution.advisor.instance_group).
    instance_nodes: Mapping[str, int] = field(default_factory=dict)
    io_mode: str = "fast5"
    io_processes: int | None = None
    description: str = ""
    # The pileup's split and threads ({regions, threads}: what host tuning chose); empty: the
    # config's scatter.pileup regions, each job with the run's cores.
    pileup: Mapping[str, int] = field(default_factory=dict)
    # Settings given on the command line over the file's (with_overrides): 'io_mode',
    # 'strategy.alignment', 'strategy.methylation' -> value; only those that differ.
    overrides: Mapping[str, str] = field(default_factory=dict)

    def strategy_for(self, step: str) -> str:
        """Configured strategy for a step (may be 'auto')."""
        if step not in STEPS:
            raise ValueError(f"unknown step {step!r}; steps are {', '.join(STEPS)}")
        return self.strategy[step]

    def instance_nodes_for(self, step: str, aligner: str | None = None) -> int | None:
        """The nodes each instance of a step spans as the host file sets them (the aligner's
        setting over the step's), or None: chosen from the index size."""
        if step not in STEPS:
            raise ValueError(f"unknown step {step!r}; steps are {', '.join(STEPS)}")
        if aligner is not None and aligner in self.instance_nodes:
            return self.instance_nodes[aligner]
        return self.instance_nodes.get(step)


# ---------------------------------------------------------------------------------------------
# Command-line overrides (--config io_mode=... strategy=...)

# The config keys that override a host file's settings, and the setting each one sets.
OVERRIDE_KEYS = {
    "io_mode": ("io_mode",),
    "strategy": tuple(f"strategy.{step}" for step in STEPS),
    **{f"strategy_{step}": (f"strategy.{step}",) for step in STEPS},
}


def config_overrides(config: Mapping[str, Any]) -> dict[str, str]:
    """The host settings the config overrides ('io_mode', 'strategy.<step>' -> value) from its
    keys io_mode, strategy (both steps) and strategy_<step> (that step; wins over strategy);
    an empty or absent key overrides nothing."""
    settings: dict[str, str] = {}
    for key, targets in OVERRIDE_KEYS.items():  # strategy before strategy_<step>
        if config.get(key):
            settings |= dict.fromkeys(targets, str(config[key]))
    return settings


def _setting(host: HostConfig, name: str) -> str:
    """A host's setting by override name."""
    return host.io_mode if name == "io_mode" else host.strategy_for(name.split(".", 1)[1])


def with_overrides(host: HostConfig, settings: Mapping[str, str]) -> HostConfig:
    """The host with settings (config_overrides) over its file's; the host's overrides name
    those that differ from the file."""
    from dataclasses import replace

    for name, value in settings.items():
        allowed = IO_MODES if name == "io_mode" else STRATEGIES
        if name not in ("io_mode", *(f"strategy.{s}" for s in STEPS)) or value not in allowed:
            raise HostConfigError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    changed = {k: v for k, v in settings.items() if _setting(host, k) != v}
    strategy = dict(host.strategy)
    strategy |= {k.split(".", 1)[1]: v for k, v in changed.items() if k.startswith("strategy.")}
    io_mode = changed.get("io_mode", host.io_mode)
    return replace(
        host, strategy=strategy, io_mode=io_mode, overrides={**host.overrides, **changed}
    )


def describe_overrides(host: HostConfig, settings: Mapping[str, str]) -> str:
    """What command-line settings do to a host file (before them), e.g. 'I/O mode slow5 (the
    host file's: fast5), strategy.alignment interleave (the host file's: none)'."""
    parts = []
    for name, value in settings.items():
        label = "I/O mode" if name == "io_mode" else f"{name.split('.', 1)[1]} strategy"
        old = _setting(host, name)
        parts.append(
            f"{label} {value} (" + (f"the host file's: {old})" if old != value else "as the file)")
        )
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------------
# Finding a host file


def host_dirs(workdir: Path | None = None) -> list[Path]:
    """Where host names are looked up: config/hosts/ of the working directory (the user's own),
    then the workflow's shipped config/hosts/."""
    own = (workdir or Path.cwd()).absolute() / "config" / "hosts"
    return list(dict.fromkeys([own, SHIPPED_HOSTS_DIR]))


def host_path(name_or_path: str | os.PathLike[str], dirs: Sequence[Path] | None = None) -> Path:
    """The host file for config `host`: a path, a name (<dir>/<name>.yaml, first of dirs that
    has it), or 'auto': this machine's own file (<hostname>.yaml), else single-node.yaml."""
    dirs = host_dirs() if dirs is None else list(dirs)
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.exists():
            raise HostConfigError(f"{p}: host file not found")
        return p
    if str(name_or_path) == "auto":
        own = _find(f"{socket.gethostname().split('.')[0]}.yaml", dirs)
        return own or host_path(FALLBACK_HOST, dirs)
    found = _find(f"{name_or_path}.yaml", dirs)
    if found is None:
        known = sorted({q.stem for d in dirs for q in d.glob("*.yaml")})
        looked = ", ".join(str(d / f"{name_or_path}.yaml") for d in dirs)
        raise HostConfigError(
            f"host {str(name_or_path)!r}: {looked} not found (known hosts: {', '.join(known)})"
        )
    return found


def _find(filename: str, dirs: Iterable[Path]) -> Path | None:
    """The first dirs/filename that is a file."""
    return next((d / filename for d in dirs if (d / filename).is_file()), None)


# ---------------------------------------------------------------------------------------------
# Loading and validation


def load_schema(path: Path = SCHEMA_PATH) -> dict[str, Any]:
    """Load the host-file JSON schema (YAML form)."""
    import yaml  # imported here so topology/policy work (e.g. in the guest) without PyYAML

    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _where(path: Sequence[Any]) -> str:
    """Render a jsonschema error path like strategy.alignment or topology.nodes[1].cpus."""
    text = ""
    for p in path:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else str(p))
    return text or "(top level)"


def _describe_errors(data: Any, source: str, schema: Mapping[str, Any]) -> HostConfigError:
    """One HostConfigError line naming the file and every offending key with its reason."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
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
    return HostConfigError(f"{source}: invalid host file: " + "; ".join(lines))


def validate_host_data(data: Any, source: str) -> dict[str, Any]:
    """Validate parsed host-file data, filling in the schema's defaults as Snakemake's
    validate(set_default=True) does for the config; return the completed data or raise one
    HostConfigError line listing every error."""
    # jsonschema itself, not snakemake.utils.validate: every heavy job loads its host file,
    # and importing Snakemake for it cost 0.4 CPU s a job (about a minute under emulation).
    import jsonschema

    schema = load_schema()
    if not isinstance(data, dict):
        raise _describe_errors(data, source, schema)
    full = copy.deepcopy(data)
    if next(_with_defaults(jsonschema.Draft202012Validator)(schema).iter_errors(full), None):
        raise _describe_errors(data, source, schema)
    return full


def _with_defaults(validator_class: Any) -> Any:
    """A validator class that sets each missing property to its schema default while it
    validates (jsonschema's FAQ recipe, the one Snakemake's validate uses)."""
    import jsonschema

    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


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
        row = tuple(dist) if dist is not None else tuple(default_distance(n["id"], o) for o in ids)
        built.append(Node(n["id"], cpu_tuple, n["memory_mib"], row))
    return Topology(tuple(built), source)


def host_config_from_dict(
    data: Any, source: str = "<dict>", name: str | None = None, path: Path | None = None
) -> HostConfig:
    """Validate a parsed host file (defaults filled in by the schema) into a HostConfig."""
    full = validate_host_data({} if data is None else data, source)
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
        instance_nodes=dict(full["instance_nodes"]),
        io_mode=full["io_mode"],
        io_processes=full["io_processes"],
        description=full["description"],
        pileup=dict(full.get("pileup") or {}),
    )


def load_host_config(
    name_or_path: str | os.PathLike[str],
    dirs: Sequence[Path] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> HostConfig:
    """Find (host_path) and validate a host file into a HostConfig, with command-line settings
    (overrides: config_overrides) over the file's."""
    import yaml

    path = host_path(name_or_path, dirs)
    if path.is_dir():
        raise HostConfigError(f"{path}: host file is a folder, not a file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HostConfigError(f"{path}: host file cannot be read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise HostConfigError(f"{path}: not valid YAML: {exc}") from exc
    host = host_config_from_dict(data, source=str(path), name=path.stem, path=path)
    return with_overrides(host, overrides) if overrides else host


# ---------------------------------------------------------------------------------------------
# Checking a host file against the machine


def check_host_against_machine(host: HostConfig, machine: Topology | None = None) -> Topology:
    """The layout a host's jobs run on, checked against the machine (detected when None);
    raise HostConfigError naming each problem."""
    machine = machine if machine is not None else detect_topology()
    where = str(host.path) if host.path else host.name
    # `topology: auto` is the machine's own layout by definition.
    if host.topology is None:
        check_instance_nodes(host, machine, where)
        return machine
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
    check_instance_nodes(host, host.topology, where)
    for n in host.topology.nodes:
        real = machine.node(n.id).memory_mib
        if real and n.memory_mib > real * 1.05:
            log.warning(
                "%s: node %d declares %d MiB but the machine has %d MiB; advisor uses %d MiB",
                where, n.id, n.memory_mib, real, n.memory_mib,
            )  # fmt: skip
    return host.topology


def check_instance_nodes(host: HostConfig, topology: Topology, where: str) -> None:
    """Fail, naming the key, when an instance_nodes setting does not split the layout's nodes
    into equal groups."""
    for key, size in host.instance_nodes.items():
        try:
            topology.node_groups(size)
        except TopologyError as exc:
            raise HostConfigError(f"{where}: instance_nodes.{key}: {exc}") from None


def startup_check(
    name_or_path: str | os.PathLike[str],
    machine: Topology | None = None,
    dirs: Sequence[Path] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> tuple[HostConfig, Topology]:
    """Load a host file and check it against this machine; the workflow calls this before jobs."""
    host = load_host_config(name_or_path, dirs, overrides)
    topology = check_host_against_machine(host, machine)
    log.info("host %s (%s): %s", host.name, host.path, topology.summary())
    return host, topology
