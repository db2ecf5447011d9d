"""Host tuning of the alignment's NUMA strategy (`tune: on` on a host of more than one node):
the strategies that do not run the way `none` does on this host are measured on a slice of the
tuned sample's reads, against `none`, by the comparison's honest rule (numapore.compare.
recommend.beats), and the run's alignment uses the winner (checkpoint tune_host; the I/O mode's
tuning is numapore.compare.tuning; the shape both share, numapore.compare.tuner).

Candidates: the concrete strategies laid out as the align step lays them out (numapore.
execution.plan.plan_step; instances over the advisor's instance groups), less those whose
processes would run where none's run (the same threads, CPUs and memory placement, in the
comparison's words: numapore.compare.measure.placement): on one NUMA node, all of them.

The workflow imports this module at DAG time: it stays free of heavy imports.
"""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from numapore.base.errors import InputError
from numapore.compare import tuner
from numapore.execution import cluster
from numapore.execution.hosts import HostConfig
from numapore.inputs.kinds import DEFAULT_KIND
from numapore.execution.plan import StepPlan, plan_step
from numapore.execution.strategies import CONCRETE
from numapore.execution.topology import Topology, detect_topology, format_cpulist

# The simpler strategy every other is measured against, and the steps tuned: the alignment
# (every input kind) and nanopolish's calling (after its I/O mode, under the chosen mode).
BASELINE = "none"
STEP = "alignment"
STEPS = ("alignment", "methylation")
ONE_NODE = "nothing to tune: one node (every strategy runs as none does)"
# Where a tuning record holds each step's block.
RECORD_KEYS = {"alignment": "strategy", "methylation": "methylation_strategy"}
# The strategies' tuner: its differences from the other tuners (compare.tuner); its blocks go
# into the I/O mode's record and host file (compare.tuning).
STRATEGIES = tuner.Tuner(
    noun="strategy", cell_key="strategy", log_prefix="strategies: ", baseline=BASELINE
)


def why_not_tuned(host: HostConfig, step: str = STEP) -> str:
    """Why the run tunes no strategy of the step ('' when it does): one given on the command
    line, or a host of one NUMA node (its layout from the host file, else this machine's),
    where every strategy runs as none does."""
    if f"strategy.{step}" in host.overrides:
        return f"nothing to tune: --config strategy_{step}={host.strategy_for(step)}"
    if len((host.topology or detect_topology()).compute_nodes) <= 1:
        return ONE_NODE
    return ""


def with_strategy(host: HostConfig, strategy: str, step: str = STEP) -> HostConfig:
    """The host with a step's strategy set (the tuning's candidate or choice); 'instances:K':
    instances with K per node (split_name)."""
    name, per_node = split_name(strategy)
    host = replace(host, strategy={**host.strategy, step: name})
    return replace(host, instances_per_node=per_node) if per_node else host


def split_name(candidate: str) -> tuple[str, int]:
    """A candidate's strategy and its instances per node (0: the host file's): the thread split
    for instances is a candidate of its own, 'instances:2' (two instances on each node's or
    group's CPUs, each with half the threads)."""
    name, _, per_node = candidate.partition(":")
    return name, int(per_node or 0)


def split_candidates(host: HostConfig, topology: Topology, threads: int) -> list[str]:
    """The thread splits for instances measured beside the host file's: twice its instances per
    node, on more than one node (on one, instances is none's command), when every instance
    would still have a thread of its own (with fewer threads than instances, the extra ones
    would share CPUs: no candidate)."""
    more, nodes = 2 * host.instances_per_node, len(topology.compute_nodes)
    return [f"instances:{more}"] if nodes > 1 and threads >= more * nodes else []


def placement(plan: StepPlan) -> str:
    """Where a plan's processes would run (threads, allowed CPUs, memory placement), in the
    words the comparison uses for measured processes (compare.measure.placement): the same
    words, the same run."""
    topology = plan.topology
    memory = [n.id for n in topology.memory_nodes or topology.nodes]
    parts = []
    for slot in plan.slots:
        if len(memory) == 1:  # every policy places memory on the only node that has it
            where = f"node {memory[0]}"
        elif plan.strategy == "none":
            where = "default"
        elif plan.strategy == "localalloc":
            where = "local"
        elif plan.strategy == "interleave" or len(slot.nodes) > 1:
            where = f"interleave {format_cpulist(slot.nodes or memory)}"
        else:
            where = f"bind {slot.nodes[0]}"
        parts.append(f"{slot.threads}t cpus {format_cpulist(slot.cpus)} mem {where}")
    return "; ".join(sorted(parts))


def candidates(
    host: HostConfig, topology: Topology, threads: int, index_bytes: int, aligner: str | None,
    step: str = STEP, pool: int = 1,
) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """The strategies to measure, none first, and those left out with why: each concrete
    strategy planned as the step plans it (the methylation step: index_bytes the genome's,
    pool its I/O mode's nanopolish processes), and instances with another thread split
    (split_candidates); one whose processes run as none's do is the same
    command as none here (on one node: every one), and one that runs as another candidate does
    (instances over a group of all the nodes, as interleave) is measured once."""
    names = [*CONCRETE, *split_candidates(host, topology, threads)]
    plans = {
        name: plan_step(with_strategy(host, name, step), topology, step, threads, index_bytes,
                        pool, aligner=aligner)
        for name in names
    }  # fmt: skip
    kept: dict[str, str] = {}  # strategy -> its placement
    dropped = {}
    for name, plan in plans.items():
        where = placement(plan)
        same = next((k for k, w in kept.items() if w == where), None)
        if same is None:
            kept[name] = where
        else:
            dropped[name] = f"runs as {same} does on this host ({where})"
    return list(kept), dropped


def decide(walls: dict[str, Sequence[float]], min_measurable: float) -> tuple[str, str]:
    """The strategy to run and why: the fastest median among those that beat none by the
    honest rule (recommend.beats), else none; none's cells must each run min_measurable s."""
    return STRATEGIES.decide(walls, min_measurable)


class ReadSlice:
    """The first reads of a sample in a folder of their own (FASTA/FASTQ, uncompressed; reads2:
    their R2 mates, for pairs)."""

    def __init__(
        self, workdir: Path, reads: Path, count: int, total: int, reads2: Path | None = None
    ) -> None:
        self.workdir, self.reads, self.count, self.total = workdir, reads, count, total
        self.reads2 = reads2


def first_records(reads: Path, reference: Path | None) -> Iterator[str]:
    """A sample's reads as FASTA/FASTQ records, in file order: a FASTA/FASTQ file's (gzipped or
    not) as they are; a modBAM's (BAM/CRAM) as its staging writes them, by samtools fastq with
    their tags in the headers (numapore.inputs.modbam_reads), so that the slice aligns as the
    align job's reads do."""
    import pysam

    from numapore.inputs.kinds import MODBAM_SUFFIXES
    from numapore.inputs.modbam_reads import reference_names, samtools_fastq

    if not reads.name.lower().endswith(MODBAM_SUFFIXES):
        with pysam.FastxFile(str(reads)) as fastx:
            yield from (str(record) for record in fastx)
        return
    every = not reference_names(reads)  # an unaligned modBAM: every record is a read
    process = samtools_fastq(reads, reference or Path(), 1, every_record=every)
    try:
        text = io.TextIOWrapper(io.BufferedReader(process.stdout), errors="replace")
        lines = (line.rstrip("\n") for line in text)
        yield from ("\n".join(record) for record in zip(lines, lines, lines, lines, strict=False))
        if process.wait():  # read to its end: samtools said why it stopped
            error = process.stderr.read().decode(errors="replace").strip().splitlines()
            raise InputError(f"reads file {reads}: samtools fastq: {(error or ['failed'])[-1]}")
    finally:
        if process.poll() is None:  # the caller stopped before the end of the file
            process.kill()
        process.wait()


def first_reads(
    folder: Path, reads: Path, want: int, reads2: Path | None = None,
    reference: Path | None = None,
) -> ReadSlice:  # fmt: skip
    """The sample's first `want` reads into folder/slice.<fasta|fastq> (a pair's R2 mates into
    folder/slice.2.fastq), with the sample's count of reads (the whole run's size the cap is
    set against). reference: a modBAM's (a CRAM is decoded against it)."""
    from numapore.inputs.kinds import MODBAM_SUFFIXES
    from numapore.inputs.sheet import reads_format

    folder.mkdir(parents=True)
    fmt = "fastq" if reads.name.lower().endswith(MODBAM_SUFFIXES) else reads_format(reads)
    out = folder / f"slice.{fmt.removesuffix('.gz')}"
    count = total = 0
    with open(out, "w") as handle:
        for record in first_records(reads, reference):
            total += 1
            if count < want:
                handle.write(record + "\n")
                count += 1
    out2 = None
    if reads2 is not None:  # the R2 mates of the same pairs (R2 is in R1's order)
        out2 = folder / f"slice.2.{fmt.removesuffix('.gz')}"
        with open(out2, "w") as handle:
            for _, record in zip(range(count), first_records(reads2, reference), strict=False):
                handle.write(record + "\n")
    return ReadSlice(folder, out, count, total, out2)


def measure(cut: ReadSlice, strategy: str, cell: Path, align: Callable) -> dict[str, float]:
    """One cell: the slice aligned under the strategy (align(reads, bam, strategy): the align
    step's function, numapore.execution.steps.run_alignment), split and merge included."""
    cell.mkdir(parents=True)
    start = time.monotonic()
    align(cut.reads, cell / "slice.bam", strategy)
    return {"wall_s": round(time.monotonic() - start, 3)}


def tune(
    cut_at: Callable[[int], ReadSlice],
    first: int,
    strategies: Sequence[str],
    repeats: int,
    share: float,
    min_measurable: float,
    align: Callable[[Path, Path, str], Any],
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """A first cell (none on the first `first` reads) sizes the slice or says that measuring
    would cost more than the cap (compare.tuner.slice_size), then every strategy is measured
    on the slice in alternating order (compare.tuner.order) and the rule decides. On the first
    cell's slice, that cell is none's first repeat. Returns the record's strategy block: the
    candidates, the first cell, the sizing, the cells, the walls, the choice (None: not
    measured) and why, and the slice's folder (`folder`, where each cell's BAM stays:
    <strategy>.r<repeat>/slice.bam)."""

    def cell(cut: ReadSlice, strategy: str, repeat: int) -> dict[str, float]:
        return measure(cut, strategy, cut.workdir / f"{strategy}.r{repeat}", align)

    cut, probe, want, sized = STRATEGIES.first_cell(
        cut_at, first, lambda cut: cell(cut, BASELINE, 1), len(strategies) * repeats, share,
        min_measurable, log,
    )  # fmt: skip
    result = {"candidates": list(strategies), "probe": {"reads": cut.count, **probe}}
    result |= {"sizing": sized, "cells": [], "walls": {s: [] for s in strategies}}
    if not want:
        return result | {"strategy": None, "why": sized, "reads": cut.count, "folder": cut.workdir}
    probed = cut.count
    if want > cut.count:
        cut = cut_at(want)
    done = {(BASELINE, 1): probe} if cut.count == probed else {}  # the first cell ran this one
    result["cells"], result["walls"] = STRATEGIES.run_cells(
        strategies, repeats, lambda s, repeat: cell(cut, s, repeat), log,
        f" on {cut.count} reads", done,
    )  # fmt: skip
    chosen, why = decide(result["walls"], min_measurable)
    return result | {"strategy": chosen, "why": why, "reads": cut.count, "folder": cut.workdir}


def step_candidates(
    host: HostConfig, step: str, threads: int, index_bytes: int, aligner: str | None, pool: int,
    given: Sequence[str],
) -> tuple[dict[str, Any], list[str]]:  # fmt: skip
    """A step's tuning block (its step, this machine's nodes checked against the host file) and
    the strategies to measure: `given`, else candidates() on a host of more than one node; an
    empty list, the block saying why, when there is nothing to measure."""
    from numapore.execution.hosts import check_host_against_machine

    topology = check_host_against_machine(host)
    block: dict[str, Any] = {"step": step, "nodes": len(topology.compute_nodes)}
    if given:
        return block, list(given)
    if len(topology.compute_nodes) <= 1:
        return block | {"candidates": [BASELINE], "strategy": None, "why": ONE_NODE}, []
    kept, block["dropped"] = candidates(host, topology, threads, index_bytes, aligner, step, pool)
    if len(kept) < 2:
        why = "nothing to tune: every strategy runs as none does on this host"
        return block | {"candidates": kept, "strategy": None, "why": why}, []
    return block, kept


def tune_alignment(
    host: HostConfig,
    aligner: str,
    index: str,
    index_files: Sequence[Path],
    reads: Path,
    threads: int,
    folder: Path,
    settings: dict[str, Any],
    min_measurable: float,
    kind: str = DEFAULT_KIND,
    log: Callable[[str], None] = print,
    reads2: Path | None = None,
    reference: Path | None = None,
    strategies: Sequence[str] = (),
) -> dict[str, Any]:
    """The alignment's strategy tuned on this machine (checkpoint tune_host; the emulated
    2-node guest's test calls it so): the candidates (candidates; `strategies`: those, none
    first, measured whatever the layout), each measured on the first reads of `reads` (and of
    reads2, a pair's mates; a modBAM's staged as its staging does, reference: its reference)
    by the align step's own function (numapore.execution.steps.run_alignment) with the input
    kind's options (settings: the tuning's reads, repeats, share), in folder. The record's
    strategy block: the step, the candidates, those left out and why, the cells, the walls,
    the choice (None: the host file's strategy runs) and why; `folder`: the slice's folder (a
    Path)."""
    from contextlib import redirect_stderr

    from numapore.execution.steps import run_alignment

    index_bytes = sum(Path(p).stat().st_size for p in index_files)
    block, kept = step_candidates(host, STEP, threads, index_bytes, aligner, 1, strategies)
    if not kept:
        return block
    slices: dict[Path, ReadSlice] = {}

    def align(cut: Path, bam: Path, strategy: str) -> None:
        """The align step under the strategy, its log beside the cell's BAM."""
        with open(bam.with_suffix(".log"), "w") as handle, redirect_stderr(handle):
            run_alignment(with_strategy(host, strategy), aligner, index, index_files, cut, bam,
                          threads, bam.with_suffix(".run.json"), kind=kind,
                          reads2=slices[cut].reads2)  # fmt: skip

    def cut_at(n: int) -> ReadSlice:
        cut = first_reads(folder / f"slice{n}", reads, n, reads2, reference)
        slices[cut.reads] = cut
        return cut

    measured = tune(
        cut_at, settings["reads"], kept, settings["repeats"], settings["share"],
        min_measurable, align, log,
    )  # fmt: skip
    return block | measured


def chosen(tuning_record: Path, step: str = STEP) -> str:
    """The step's strategy a tuning record chose; '' when it chose none of them (the host
    file's strategy runs: not measured, or nothing to tune)."""
    block = tuner.read_record(tuning_record).get(RECORD_KEYS[step]) or {}
    return block.get("strategy") or ""


def adopted(base: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """A host file's settings (base) with the strategies a tuning record chose (the adoptable
    host file's, compare.tuning.host_yaml). A host file holds one thread split for instances:
    the first step's that chose one."""
    data = json.loads(json.dumps(dict(base)))
    split = 0
    for step, key in RECORD_KEYS.items():
        if record.get(key, {}).get("strategy"):
            name, per_node = split_name(record[key]["strategy"])
            data.setdefault("strategy", {})[step] = name
            if per_node and not split:
                data["instances_per_node"] = split = per_node
    return data


def add_to_record(run_record: Path, tuning_record: Path, step: str = STEP) -> None:
    """Add the tuning behind a job's strategy to its run record: the tuning file, when it was
    measured, the choice, why and the walls (the alignment's under `tuning`; the calling's,
    whose `tuning` is its I/O mode's, under `strategy_tuning`)."""

    def picked(tuned: Mapping[str, Any]) -> dict[str, Any]:
        block = tuned.get(RECORD_KEYS[step]) or {}
        fields = ("strategy", "why", "walls", "candidates")
        return {"measured": tuned.get("measured")} | {k: block.get(k) for k in fields}

    key = "tuning" if step == STEP else "strategy_tuning"
    tuner.add_to_run_record(run_record, key, tuning_record, picked)


def tune_calling(
    host: HostConfig,
    cut_at: Callable[[int], Any],
    genome: Path,
    threads: int,
    pool: int,
    settings: dict[str, Any],
    min_measurable: float,
    call: Callable[[Any, Path, str], Any],
    log: Callable[[str], None] = print,
    strategies: Sequence[str] = (),
) -> dict[str, Any]:
    """nanopolish calling's strategy tuned on this machine under the run's I/O mode (checkpoint
    tune_host, after that mode is chosen): the candidates planned as the methylation step plans
    them (pool: the mode's nanopolish processes; `strategies`: those, none first, measured
    whatever the layout), each measured on an aligned slice whose signal is indexed for the
    mode (cut_at(n): a tuning.Slice with .reads beside their index) by call(slice, cell
    folder, strategy) (the step's own function, numapore.execution.steps.run_methylation).
    The record's methylation_strategy block, as tune_alignment's."""
    genome_bytes = genome.stat().st_size
    block, kept = step_candidates(
        host, "methylation", threads, genome_bytes, None, pool, strategies
    )
    if not kept:
        return block
    slices: dict[Path, Any] = {}

    def calls(reads: Path, out: Path, strategy: str) -> None:
        call(slices[reads], out.parent, strategy)

    def cut(n: int) -> Any:
        piece = cut_at(n)
        slices[piece.reads] = piece
        return piece

    measured = tune(
        cut, settings["reads"], kept, settings["repeats"], settings["share"], min_measurable,
        calls, log,
    )  # fmt: skip
    return block | measured


def node_tuning(
    tuned: str | None, record: str | None, step: str, folder: str | os.PathLike
) -> tuple[str | None, str | None]:
    """A step's tuned strategy on the node the job runs on, and the tuning record behind it
    (None, None: not tuned there). Tuning records are kept per node type (a partition:
    <folder>/partition-<name>.json). A job on the partition the run's tuning measured (or of a
    run without config hosts:) follows the run's (tuned, record); on another partition, its
    own partition's record when one was measured (by a run on that partition), else its host
    file's strategy."""
    partition = os.environ.get(cluster.JOB_PARTITION_ENV, "")
    if tuned is None or not (os.environ.get(cluster.NODE_HOST_ENV) and partition):
        return tuned, record
    name = tuner.partition_tuning_name(partition)
    if name == os.environ.get(tuner.NAME_ENV):
        return tuned, record
    own = Path(folder) / f"{name}.json"
    if not own.is_file():
        return None, None
    return chosen(own, step), str(own)
