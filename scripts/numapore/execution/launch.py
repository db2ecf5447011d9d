"""The launcher: run one planned step (numapore.execution.plan) and record what ran.

A step is an unchanged tool command (a shell string built per shard: input, output, threads).
Its plan says how many processes run it and how each is started:
  none / interleave / localalloc  one process, with the numactl prefix of the strategy;
  instances                       one process per NUMA node (x instances_per_node), bound to it
                                  with numactl --cpunodebind=N --membind=N, on a shard of the input;
                                  or per group of nodes G (instance_nodes), with --cpunodebind=G
                                  --interleave=G;
  a process pool (fast5-pool)     K processes with threads/K threads each, on K shards, so each
                                  has its own HDF5 library (and its own global lock).
The launcher splits the input by read, starts every process, merges the outputs in shard order
(numapore.execution.shards), and logs the NUMA policy each process actually ran under.
"""

from __future__ import annotations

import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from numapore.execution.plan import StepPlan
from numapore.execution.probe import POLICY_PROBE, format_policy, read_policy

# Builds the tool command for one shard: (input path, output path, threads) -> shell string.
ToolCommand = Callable[[Path, Path, int], str]
# Splits the step's input into the given shard paths / merges shard outputs into one path.
Split = Callable[[Path, Sequence[Path]], object]
Merge = Callable[[Sequence[Path], Path], object]


@dataclass(frozen=True)
class Process:
    """One process of a step: its shard, node binding (a node, a group's nodes as a tuple, or
    None: unbound), threads and command line."""

    shard: int
    node: int | tuple[int, ...] | None
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


def plan_processes(
    plan: StepPlan,
    tool: ToolCommand,
    inputs: Sequence[Path],
    outputs: Sequence[Path],
    workdir: Path,
) -> list[Process]:
    """Every process of a planned step (numapore.execution.plan) with its command line: the
    strategy's numactl prefix around the policy probe and the unchanged tool command."""
    policy_files = [workdir / f"policy.{i + 1}.txt" for i in range(len(plan.slots))]

    def shard_command(i: int, n: int, threads: int) -> str:
        """Policy probe, then the tool on shard i."""
        probe = POLICY_PROBE.format(shlex.quote(str(policy_files[i])))
        return f"{probe}; {tool(inputs[i], outputs[i], threads)}"

    processes = []
    for i, (slot, command) in enumerate(zip(plan.slots, plan.commands(shard_command), strict=True)):
        if not command.startswith("numactl "):  # no prefix: still one shell with pipefail
            command = f"bash -o pipefail -c {shlex.quote(command)}"
        processes.append(
            Process(i, bound_to(slot.nodes), slot.threads, command, inputs[i], outputs[i],
                    policy_files[i])  # fmt: skip
        )
    return processes


def bound_to(nodes: tuple[int, ...]) -> int | tuple[int, ...] | None:
    """A process's binding as its record gives it: the node, the group's nodes, or None."""
    return None if not nodes else nodes[0] if len(nodes) == 1 else nodes


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
    while progress is not None and (alive := [proc for _, proc in running if proc.poll() is None]):
        # Woken by a process's end, not by polling: the step ends when its last process does.
        try:
            alive[0].wait(timeout=max(0.0, next_line + interval - time.monotonic()))
            continue
        except subprocess.TimeoutExpired:
            pass
        now = next_line = time.monotonic()
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
    """The policy a process recorded, as one log line (with the node it asked for)."""
    if not process.policy_file.is_file():
        return "policy: not recorded"
    policy = read_policy(process.policy_file.read_text())
    return "policy: " + format_policy(policy, process.node, process.threads)


def run_step(
    plan: StepPlan,
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
    n = len(plan.nodes)
    print(f"strategy: {plan.strategy} ({plan.reasons.get('why', '')})", file=log)
    print(f"processes: {n}, threads each: {list(plan.threads)}", file=log, flush=True)
    if n == 1:
        inputs, outputs = [source], [output]
    else:
        inputs = [workdir / f"in.{i + 1}{shard_suffixes[0]}" for i in range(n)]
        outputs = [workdir / f"out.{i + 1}{shard_suffixes[1]}" for i in range(n)]
        split(source, inputs)
    processes = plan_processes(plan, tool, inputs, outputs, workdir)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run_processes(processes, log, progress)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    threads = sum(plan.threads)
    print(
        f"tool processes: wall {wall:.1f} s, CPU {cpu:.1f} s, "
        f"CPU utilisation {cpu / (wall * threads):.2f} of {threads} threads",
        file=log,
        flush=True,
    )
    if n > 1:
        merge(outputs, output)
    return StepRun(processes, wall, cpu)


def write_record(
    path: Path,
    plan: StepPlan,
    run: StepRun,
    host_file: Path | None = None,
    io_mode: str | None = None,
    overrides: Mapping[str, str] | None = None,
) -> None:
    """Write what ran as JSON: the host file, the settings given on the command line over it
    (overrides), strategy, reasons, I/O mode (steps that read raw signal), cost, and per
    process its command and NUMA policy."""
    import json

    record = {
        "host_file": str(host_file) if host_file else None,
        "overrides": dict(overrides or {}),
        "strategy": plan.strategy,
        "io_mode": io_mode,
        "reasons": plan.reasons,
        "threads": sum(plan.threads),
        "wall_seconds": round(run.wall_seconds, 3),
        "cpu_seconds": round(run.cpu_seconds, 3),
        "processes": [
            {
                "shard": p.shard + 1,
                # A node's id, or a list of a group's nodes (an instance over several).
                "node": list(p.node) if isinstance(p.node, tuple) else p.node,
                "threads": p.threads,
                "command": p.command,
                "policy": p.policy_file.read_text() if p.policy_file.is_file() else None,
            }
            for p in run.processes
        ],
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
