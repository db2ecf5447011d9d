"""Checkpoint tune_host: measure the I/O modes on a slice of the tuned sample (its first signal
files), and on a host of more than one NUMA node the alignment's strategies on its first reads
(a sample of any kind) and nanopolish calling's under the chosen I/O mode (numapore.compare.
tune_strategy), decide by the honest rule, write the tuning record (read by the run) and the
adoptable host file (numapore.compare.tuning)."""

import os
import sys
import time
from contextlib import nullcontext
from types import SimpleNamespace
from pathlib import Path

from numapore.base.atomic import scratch_dir
from numapore.base.rulelog import redirect_to_log
from numapore.compare.measure import MIN_MEASURABLE_S
from numapore.compare import tune_strategy, tuner, tuning
from numapore.execution.cluster import node_host_file
from numapore.execution.hosts import load_host_config
from numapore.execution.io_modes import IO_MODES
from numapore.execution.steps import run_alignment, run_methylation
from numapore.signal.fast5 import list_fast5

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
p = smk.params
settings, candidates = p.settings, p.candidates
host = load_host_config(node_host_file(p.host))  # the node's (config hosts:), else the run's
started = time.monotonic()
record = tuning.IO.record(smk.output.record, p.host, p.key) | {
    "candidates": candidates,
    "strategies_why": p.strategies_why,
}


def log(line):
    print(line, file=sys.stderr, flush=True)


def signal_storage():
    """The tuned sample's signal folders behind the emulated slow storage when the settings ask
    for it (what a user with a slow disk sees: the comparison's FUSE), else as they are."""
    storage = settings["storage"]
    if not (storage["latency_ms"] and smk.input.signal):
        return nullcontext()
    from numapore.compare.slowfs import mounted

    folders = sorted({Path(s).resolve().parent for s in smk.input.signal})
    sources = {f"source{i}": f for i, f in enumerate(folders)}
    return mounted(sources, storage["latency_ms"], storage["disks"])


def align(reads, bam):
    run_alignment(
        host, p.aligner, p.index, [Path(f) for f in smk.input.index], reads, bam, smk.threads,
        bam.with_suffix(".run.json"), kind=p.kind,
    )  # fmt: skip


def calls(reads, bam, mode, folder, strategy=None):
    """nanopolish's calls of the slice under the mode (and a calling strategy's candidate)."""
    run_host = tune_strategy.with_strategy(host, strategy, "methylation") if strategy else host
    run_methylation(
        run_host, reads, bam, Path(smk.input.reference), folder / "calls.tsv", smk.threads,
        p.min_mapq, mode, p.io_processes, folder / "record.json",
    )  # fmt: skip


def chosen_line(step, block):
    """What a step's strategy tuning chose, and why, in words (the log, the host file)."""
    chosen = block["strategy"] or f"the host file's {host.strategy_for(step)}"
    return f"{step}: {chosen}: {block['why']}"


with scratch_dir(smk.output.record) as work, signal_storage() as mount:
    work = Path(work)
    signal = [str(mount.path(Path(s).resolve())) if mount else s for s in smk.input.signal]

    def cut_at(n, folder=work):
        """A slice of n reads in a folder of its own, aligned and indexed."""
        cut = tuning.aligned_slice(
            folder / f"slice{n}", Path(smk.input.reads), signal, n, align, tuning.group_names
        )
        log(f"tuning: slice of {cut.count} of {cut.total} reads, {len(cut.files)} files")
        return cut

    if not candidates:  # the I/O mode is not tuned (numapore.workflow.tuning_plans.host_tuning)
        record |= {"io_mode": p.io_mode, "why": "not tuned (no raw signal, or given)"}
    elif len(candidates) < 2:
        record |= {"io_mode": candidates[0], "why": "the only I/O mode that reads the signal"}
    else:
        measured = tuning.tune(
            cut_at, settings["reads"], candidates, settings["repeats"], settings["share"],
            MIN_MEASURABLE_S, calls, p.io_processes, log, len(list_fast5(signal)), p.call_jobs,
            float(os.environ.get(tuning.SAVING_ENV) or 0),
        )  # fmt: skip
        cut = measured.pop("slice")
        record |= measured
        record["slice"] = {
            "sample": p.sample,
            "reads": cut.count,
            "total_reads": cut.total,
            "files": len(cut.files),
        }
        if measured["io_mode"] is None:
            record["io_mode"] = p.io_mode
    log(f"tuning: I/O mode {record['io_mode']}: {record['why']}")
    lines = []
    if (
        "alignment" in p.strategy_steps
    ):  # more than one NUMA node (numapore.workflow.tuning_plans.host_tuning)
        block = tune_strategy.tune_alignment(
            host, p.aligner, p.index, [Path(f) for f in smk.input.index], Path(smk.input.reads),
            smk.threads, work / "alignment", settings, MIN_MEASURABLE_S, kind=p.kind, log=log,
            reads2=Path(smk.input.reads2) if smk.input.get("reads2") else None,
            reference=Path(smk.input.reference),
        )  # fmt: skip
        block.pop("folder", None)
        record["strategy"] = block
        lines.append(chosen_line("alignment", block))
    if "methylation" in p.strategy_steps:  # nanopolish's, under the run's I/O mode
        mode = record["io_mode"]

        def calling_slice(n):
            """An aligned slice of n reads, its signal indexed as the run's mode reads it."""
            cut = cut_at(n, work / "calling")
            reads = tuning.indexed_reads(cut, mode, cut.workdir / mode, p.io_processes)
            return SimpleNamespace(
                reads=reads, bam=cut.bam, count=cut.count, total=cut.total, workdir=cut.workdir
            )

        block = tune_strategy.tune_calling(
            host, calling_slice, Path(smk.input.reference), smk.threads,
            IO_MODES[mode].nanopolish_processes(p.io_processes), settings, MIN_MEASURABLE_S,
            lambda piece, folder, strategy: calls(piece.reads, piece.bam, mode, folder, strategy),
            log,
        )  # fmt: skip
        block.pop("folder", None)
        block["io_mode"] = mode
        record["methylation_strategy"] = block
        lines.append(chosen_line("methylation", block))
    for line in lines:
        log(f"tuning: strategy of {line}")
    if lines:
        record["strategies_why"] = "; ".join(lines)
tuner.write(smk.output, record, tuning.host_yaml, p.host, started)
