"""Run one heavy step under the host's execution strategy.

A step is an unchanged tool command (a shell string built per shard: input, output, threads).
The launcher decides how many processes run it and how each is started:
  none / interleave / localalloc  one process, with the numactl prefix of the strategy;
  instances                       one process per NUMA node (x instances_per_node), bound to it
                                  with numactl --cpunodebind=N --membind=N, on a shard of the input;
  a process pool (fast5-pool)     K processes with threads/K threads each, on K shards, so each
                                  has its own HDF5 library (and its own global lock).
Shards are split by read and merged in shard order (numapore.execution.shards), and every process
records
the NUMA policy it actually runs under, which goes to the job's log with its command line.
"""

from __future__ import annotations

import resource
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from numapore.execution.numa import (
    HOSTS_DIR,
    HostConfig,
    Topology,
    host_path,
    instance_slots,
    parse_numactl_show,
    parse_proc_status,
    plan_step,
    resolve_strategy,
)

# The host file used when none is named for this machine: layout read from the kernel.
FALLBACK_HOST = "single-node"

# Builds the tool command for one shard: (input path, output path, threads) -> shell string.
ToolCommand = Callable[[Path, Path, int], str]
# Splits the step's input into the given shard paths / merges shard outputs into one path.
Split = Callable[[Path, Sequence[Path]], object]
Merge = Callable[[Sequence[Path], Path], object]

# Run first inside every launched process: what the kernel says this process may use.
POLICY_PROBE = "{{ numactl --show; grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status; }} > {}"


def host_file_for(name: str, hosts_dir: Path = HOSTS_DIR) -> Path:
    """The host file for config `host`: a name or path, or 'auto' for this machine's own file
    (config/hosts/<hostname>.yaml) with the kernel-detected fallback when there is none."""
    if name != "auto":
        return host_path(name, hosts_dir)
    own = hosts_dir / f"{socket.gethostname().split('.')[0]}.yaml"
    return own if own.is_file() else host_path(FALLBACK_HOST, hosts_dir)


@dataclass(frozen=True)
class Process:
    """One process of a step: its shard, node binding (or None), threads and command line."""

    shard: int
    node: int | None
    threads: int
    command: str
    input: Path
    output: Path
    policy_file: Path


@dataclass(frozen=True)
class StepRun:
    """What ran for a step and what it cost: wall seconds and CPU seconds (user + system) of
    every process it started, measured exactly from the kernel's accounting of children."""

    processes: list[Process]
    wall_seconds: float
    cpu_seconds: float


@dataclass(frozen=True)
class StepLayout:
    """How a step runs: the concrete strategy, why, and how many processes with what threads."""

    step: str
    strategy: str
    reasons: dict
    nodes: tuple[int | None, ...]
    threads: tuple[int, ...]
    instances_per_node: int = 1


def layout_step(
    host: HostConfig,
    topology: Topology,
    step: str,
    threads: int,
    index_bytes: int = 0,
    pool: int = 1,
) -> StepLayout:
    """Decide the strategy and the processes of a step (pool > 1: a process pool, unbound)."""
    strategy, reasons = resolve_strategy(host, step, topology, index_bytes)
    if strategy == "instances":
        slots = instance_slots(topology, threads, host.instances_per_node)
        nodes, shares = tuple(n.id for n, _ in slots), tuple(t for _, t in slots)
        return StepLayout(step, strategy, reasons, nodes, shares, host.instances_per_node)
    pool = max(1, pool)
    shares = [threads // pool + (1 if i < threads % pool else 0) for i in range(pool)]
    return StepLayout(step, strategy, reasons, (None,) * pool, tuple(max(1, s) for s in shares))


def plan_processes(
    layout: StepLayout,
    topology: Topology,
    tool: ToolCommand,
    inputs: Sequence[Path],
    outputs: Sequence[Path],
    workdir: Path,
) -> list[Process]:
    """The command line of every process, from the NUMA planner (numapore.execution.numa.plan_step):
    the strategy's numactl prefix around the policy probe and the unchanged tool command."""
    policy_files = [workdir / f"policy.{i + 1}.txt" for i in range(len(layout.nodes))]

    def shard_command(i: int, n: int, threads: int) -> str:
        """Policy probe, then the tool on shard i."""
        probe = POLICY_PROBE.format(shlex.quote(str(policy_files[i])))
        return f"{probe}; {tool(inputs[i], outputs[i], threads)}"

    if layout.strategy == "instances":
        plan = plan_step(
            topology, layout.step, "instances", sum(layout.threads),
            shard_command=shard_command, instances_per_node=layout.instances_per_node,
        )  # fmt: skip
        commands = [instance.command for instance in plan.instances]
    else:  # one process, or an unbound pool: each gets the strategy's prefix
        n = len(layout.threads)
        commands = [
            plan_step(
                topology, layout.step, layout.strategy, t, command=shard_command(i, n, t)
            ).command
            for i, t in enumerate(layout.threads)
        ]
    processes = []
    for i, (node, threads, command) in enumerate(
        zip(layout.nodes, layout.threads, commands, strict=True)
    ):
        if not command.startswith("numactl "):  # no prefix: still one shell with pipefail
            command = f"bash -o pipefail -c {shlex.quote(command)}"
        processes.append(Process(i, node, threads, command, inputs[i], outputs[i], policy_files[i]))
    return processes


Progress = Callable[[Sequence[Process]], str]


def run_processes(
    processes: Sequence[Process],
    log: IO[str],
    progress: Progress | None = None,
    interval: float = 30.0,
) -> None:
    """Start every process at once and wait for all; their messages stream into log, which
    must be a real file. Every interval seconds progress(processes) gives a line for the log and
    the terminal (a person following a long step). Fails naming the failed shards."""
    running = []
    for p in processes:
        print(f"[shard {p.shard + 1}] {p.command}", file=log, flush=True)
        running.append((p, subprocess.Popen(p.command, shell=True, stdout=log, stderr=log)))
    start = next_line = time.monotonic()
    while progress is not None and any(proc.poll() is None for _, proc in running):
        time.sleep(min(interval, 1.0))
        now = time.monotonic()
        if now - next_line >= interval and any(proc.poll() is None for _, proc in running):
            next_line = now
            line = f"[progress after {now - start:.0f} s] {progress(processes)}"
            for stream in dict.fromkeys((log, sys.__stderr__)):  # the log and the terminal
                print(line, file=stream, flush=True)
    failed = [f"shard {p.shard + 1} exited {code}" for p, proc in running if (code := proc.wait())]
    for p in processes:
        log.write(f"[shard {p.shard + 1}] {describe_policy(p)}\n")
    log.flush()
    if failed:
        raise RuntimeError(f"{', '.join(failed)} (its messages are in the log above)")


def describe_policy(process: Process) -> str:
    """The policy a process recorded, as one log line (node binding it asked for included)."""
    if not process.policy_file.is_file():
        return "policy: not recorded"
    text = process.policy_file.read_text()
    show = parse_numactl_show(text)
    status = parse_proc_status(text)
    cpus = ",".join(map(str, status.get("Cpus_allowed_list", ())))
    mems = ",".join(map(str, status.get("Mems_allowed_list", ())))
    membind = show.get("membind", "")
    membind = ",".join(map(str, membind)) if isinstance(membind, list) else membind
    asked = "" if process.node is None else f"asked node={process.node} "
    return (
        f"policy: {asked}policy={show.get('policy', '?')} membind={membind} "
        f"cpus_allowed={cpus} mems_allowed={mems} threads={process.threads}"
    )


def run_step(
    layout: StepLayout,
    topology: Topology,
    tool: ToolCommand,
    source: Path,
    output: Path,
    split: Split,
    merge: Merge,
    workdir: Path,
    shard_suffixes: tuple[str, str],
    log: IO[str] | None = None,
    progress: Progress | None = None,
) -> StepRun:
    """Run a step: split source into one shard per process, run them, merge into output.

    shard_suffixes: file endings of an input and an output shard (e.g. '.fasta', '.bam').
    log: where to report (default: the current sys.stderr, the rule's log in rule scripts).
    progress: a line on how far the processes are, printed every 30 s (run_processes).
    """
    log = log or sys.stderr
    workdir.mkdir(parents=True, exist_ok=True)
    n = len(layout.nodes)
    print(f"strategy: {layout.strategy} ({layout.reasons.get('why', '')})", file=log)
    print(f"processes: {n}, threads each: {list(layout.threads)}", file=log, flush=True)
    if n == 1:
        inputs, outputs = [source], [output]
    else:
        inputs = [workdir / f"in.{i + 1}{shard_suffixes[0]}" for i in range(n)]
        outputs = [workdir / f"out.{i + 1}{shard_suffixes[1]}" for i in range(n)]
        split(source, inputs)
    processes = plan_processes(layout, topology, tool, inputs, outputs, workdir)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run_processes(processes, log, progress)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    threads = sum(layout.threads)
    print(
        f"tool processes: wall {wall:.1f} s, CPU {cpu:.1f} s, "
        f"CPU utilisation {cpu / (wall * threads):.2f} of {threads} threads",
        file=log,
        flush=True,
    )
    if n > 1:
        merge(outputs, output)
    return StepRun(processes, wall, cpu)


def write_record(path: Path, layout: StepLayout, run: StepRun) -> None:
    """Write what ran as JSON: strategy, reasons, cost, and per process its command and policy."""
    import json

    record = {
        "strategy": layout.strategy,
        "reasons": layout.reasons,
        "threads": sum(layout.threads),
        "wall_seconds": round(run.wall_seconds, 3),
        "cpu_seconds": round(run.cpu_seconds, 3),
        "processes": [
            {
                "shard": p.shard + 1,
                "node": p.node,
                "threads": p.threads,
                "command": p.command,
                "policy": p.policy_file.read_text() if p.policy_file.is_file() else None,
            }
            for p in run.processes
        ],
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
