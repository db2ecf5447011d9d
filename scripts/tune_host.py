"""Checkpoint tune_host: measure the I/O modes on a slice of the tuned sample (its first signal
files), and on a host of more than one NUMA node the alignment's strategies on its first reads
(numapore.compare.tune_strategy; a sample of any kind), decide by the honest rule, write the
tuning record (read by the run) and the adoptable host file (numapore.compare.tuning)."""

import json
import sys
import time
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path

import yaml

from numapore.base.atomic import atomic_output, scratch_dir
from numapore.base.rulelog import redirect_to_log
from numapore.compare.measure import MIN_MEASURABLE_S
from numapore.compare import tune_strategy, tuning
from numapore.execution.hosts import load_host_config
from numapore.execution.steps import run_alignment, run_methylation
from numapore.signal.fast5 import list_fast5

smk = snakemake  # noqa: F821 (injected by the script directive)
redirect_to_log(smk)
p = smk.params
settings, candidates = p.settings, p.candidates
host = load_host_config(p.host)
started = time.monotonic()
record = {
    "format": tuning.FORMAT,
    "host": tuning.host_name(),  # the machine that measured (on a cluster, a partition's node)
    "name": Path(smk.output.record).stem,  # what the tuning holds for (tuning.tuning_name)
    "measured": datetime.now(UTC).isoformat(timespec="seconds"),
    "host_file": p.host,
    "key": p.key,
    "candidates": candidates,
    "strategies_why": p.strategies_why,
}


def log(line):
    print(line, file=sys.stderr, flush=True)


if not candidates:  # only the strategies are tuned (common.smk: tuning_plan)
    record |= {
        "io_mode": host.io_mode,
        "why": "not tuned: the host file's (no raw signal, or given)",
    }
elif len(candidates) < 2:
    record |= {"io_mode": candidates[0], "why": "the only I/O mode that reads the signal"}
else:
    with scratch_dir(smk.output.record) as work:
        work = Path(work)
        storage = settings["storage"]
        if storage["latency_ms"]:  # what a user with a slow disk sees (the comparison's FUSE)
            from numapore.compare.slowfs import mounted

            folders = sorted({Path(s).resolve().parent for s in smk.input.signal})
            mount_ctx = mounted(
                {f"source{i}": f for i, f in enumerate(folders)},
                storage["latency_ms"],
                storage["disks"],
            )
        else:
            mount_ctx = nullcontext()
        with mount_ctx as mount:
            signal = [str(mount.path(Path(s).resolve())) if mount else s for s in smk.input.signal]

            def align(reads, bam):
                run_alignment(
                    host, p.aligner, p.index, [Path(f) for f in smk.input.index], reads, bam,
                    smk.threads, bam.with_suffix(".run.json"), kind=p.kind,
                )  # fmt: skip

            def cut_at(n):
                """A slice of n reads in a folder of its own, aligned and indexed."""
                source = Path(smk.input.reads)
                cut = tuning.aligned_slice(
                    work / f"slice{n}", source, signal, n, align, tuning.group_names
                )
                log(f"tuning: slice of {cut.count} of {cut.total} reads, {len(cut.files)} files")
                return cut

            def calls(reads, bam, mode, folder):
                run_methylation(
                    host, reads, bam, Path(smk.input.reference), folder / "calls.tsv",
                    smk.threads, p.min_mapq, mode, p.io_processes, folder / "record.json",
                )  # fmt: skip

            measured = tuning.tune(
                cut_at, settings["reads"], candidates, settings["repeats"], settings["share"],
                MIN_MEASURABLE_S, calls, p.io_processes, log, len(list_fast5(signal)),
                p.call_jobs,
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
            record["io_mode"] = host.io_mode
if p.strategies:  # more than one NUMA node (common.smk: tuning_plan)
    with scratch_dir(smk.output.host) as work:
        block = tune_strategy.tune_alignment(
            host, p.aligner, p.index, [Path(f) for f in smk.input.index], Path(smk.input.reads),
            smk.threads, Path(work), settings, MIN_MEASURABLE_S, kind=p.kind, log=log,
            reads2=Path(smk.input.reads2) if smk.input.get("reads2") else None,
            reference=Path(smk.input.reference),
        )  # fmt: skip
    block.pop("folder", None)
    record["strategy"] = block
    chosen = block["strategy"] or f"the host file's {host.strategy_for(tune_strategy.STEP)}"
    record["strategies_why"] = f"alignment: {chosen}: {block['why']}"
    log(f"tuning: alignment strategy {chosen}: {block['why']}")
record["seconds"] = round(time.monotonic() - started, 2)
log(f"tuning: I/O mode {record['io_mode']}: {record['why']}")
base = yaml.safe_load(Path(p.host).read_text()) or {}
if record.get("strategy", {}).get("strategy"):
    base.setdefault("strategy", {})[tune_strategy.STEP] = record["strategy"]["strategy"]
with atomic_output(Path(smk.output.host)) as tmp:
    tmp.write_text(tuning.host_yaml(base, record, p.host))
with atomic_output(Path(smk.output.record)) as tmp:
    tmp.write_text(json.dumps(record, indent=2) + "\n")
