"""The pipeline's steps as their rules run them (numapore.execution.steps), and probes of
numapore's topology detection and instance plans, for the emulated 2-node guest of
tests/test_numa_guest.py: every part in ONE Python process.

Under software emulation a Python start that imports pysam and numapore takes about two minutes
(most of it reading the libraries through the guest's shared file system), so the guest runs
this file once with a plan naming the parts, instead of a process per part. Each part writes
`<name>.out` in the plan's folder, ending `exit=0` (or the traceback and `exit=1`), and its start
and end to `guest_timing.txt`. The short-read part runs on this host too (its `none` baseline):
`python guest_driver.py short CASES.json OUT`.

Host files are read on the host: the plan's folder holds `hosts.pickle`, each host file the plan
names loaded by load_host_config there (parsing and schema validation do not depend on the
machine; in the guest, importing PyYAML and jsonschema for them cost more than a step's work).
The check of a host against the machine's layout still runs in the guest, in each step.

Snakemake itself is left out: under emulation it needs minutes just to start, and every job would
pay that again.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pysam
from numapore.compare import tune_strategy
from numapore.compare.measure import MIN_MEASURABLE_S
from numapore.execution import probe
from numapore.execution.hosts import HostConfig, load_host_config
from numapore.execution.io_modes import IO_MODES
from numapore.execution.plan import plan_strategy
from numapore.execution.shards import settle_read_groups
from numapore.execution.steps import run_alignment, run_methylation
from numapore.execution.topology import detect_topology

# Host files loaded on the host (the plan's hosts.pickle), by the path the plan names.
LOADED_HOSTS: dict[str, HostConfig] = {}
# What each planned instance runs: the CPUs and memory policy it was given.
BINDING_PROBE = "grep allowed_list /proc/self/status; numactl --show | grep -e ^policy -e ^membind"


def host_config(path: str) -> HostConfig:
    """The host file at path as load_host_config reads it (loaded on the host when listed)."""
    return LOADED_HOSTS.get(path) or load_host_config(path)


def topology(out: str) -> None:
    """numapore's probe CLI, `topology --json`, its output to the file out."""
    with open(out, "w") as fh, redirect_stdout(fh):
        code = probe.main(["topology", "--json"])
    if code:
        raise RuntimeError(f"numapore probe topology --json: exit {code}")


def planned(out: str) -> None:
    """The planner's instance commands for this machine's layout (alignment, 2 threads), each
    running BINDING_PROBE under its node's binding; their output to the file out."""
    plan = plan_strategy(detect_topology(), "alignment", "instances", 2)
    commands = plan.commands(lambda i, n, th: BINDING_PROBE)
    with open(out, "w") as fh:
        for slot, command in zip(plan.slots, commands, strict=True):
            fh.write(f"--- node {slot.node} threads {slot.threads}\n")
            fh.flush()
            subprocess.run(command, shell=True, check=True, stdout=fh)


def small_inputs(inputs: str) -> tuple[Path, Path, Path]:
    """The reference, minimap2 index and reads the host's `none` run prepared (its folder)."""
    inputs_dir = Path(inputs)
    ref = inputs_dir / "results/references/region/region.fa"
    mmi = inputs_dir / "results/references/region/minimap2/region.map-ont.mmi"
    return ref, mmi, inputs_dir / "results/small/reads/fast5/small.fasta"


def steps(inputs: str, out: str, host: str, aligned: str = "", called: str = "") -> None:
    """The align and call_methylation steps on the inputs the host's `none` run prepared
    (inputs: its folder), under the host file's strategy. aligned, called: folders where the
    step already ran so on the same reads (the tuning's cells of that strategy: slice.bam and
    its record; calls.tsv and record.json), taken instead of running it again."""
    out_dir, config = Path(out), host_config(host)
    out_dir.mkdir(parents=True)
    ref, mmi, reads = small_inputs(inputs)
    if aligned:
        for name, to in (("slice.bam", "aln.bam"), ("slice.run.json", "align.run.json")):
            (out_dir / to).write_bytes((Path(aligned) / name).read_bytes())
    else:
        with open(out_dir / "align.log", "w") as log, redirect_stderr(log):
            run_alignment(config, "minimap2", str(mmi), [mmi], reads, out_dir / "aln.bam", 2,
                          out_dir / "align.run.json")  # fmt: skip
    pysam.index(str(out_dir / "aln.bam"))
    if called:
        for name, to in (("calls.tsv", "calls.tsv"), ("record.json", "call_methylation.run.json")):
            (out_dir / to).write_bytes((Path(called) / name).read_bytes())
        return
    with open(out_dir / "call_methylation.log", "w") as log, redirect_stderr(log):
        run_methylation(config, reads, out_dir / "aln.bam", ref, out_dir / "calls.tsv", 2, 20,
                        config.io_mode, 2, out_dir / "call_methylation.run.json")  # fmt: skip


def tune(inputs: str, out: str, host: str, reads: str, call_reads: str) -> None:
    """Host tuning of the strategies as checkpoint tune_host runs it (numapore.compare.
    tune_strategy), one repeat, no cap: the alignment's (tune_alignment) on the first `reads`
    reads of the small input (the slice is the whole sample; its block to out/tuning.json,
    each cell's BAM in out/slice<n>/<strategy>.r1/), then nanopolish calling's (tune_calling,
    under the host file's I/O mode) on the first `call_reads` of them (nanopolish's cost here
    is per read: about 3 s each under emulation), none's cell's alignments of those reads and
    the reads as the `none` run indexed them (its block to out/calling.json, each cell's calls
    in out/calling/<strategy>.r1/)."""
    out_dir = Path(out)
    out_dir.mkdir(parents=True)
    ref, mmi, sample = small_inputs(inputs)
    config = host_config(host)
    settings = {"reads": int(reads), "repeats": 1, "share": float("inf")}
    block = tune_strategy.tune_alignment(config, "minimap2", str(mmi), [mmi], sample, 2,
                                         out_dir, settings, MIN_MEASURABLE_S)  # fmt: skip
    (out_dir / "tuning.json").write_text(json.dumps(block, indent=2, default=str))
    with pysam.FastxFile(str(sample)) as fastx:
        names = {record.name for _, record in zip(range(int(call_reads)), fastx, strict=False)}
    aligned = out_dir / "calling.bam"
    with pysam.AlignmentFile(str(Path(block["folder"]) / "none.r1/slice.bam")) as whole:
        with pysam.AlignmentFile(str(aligned), "wb", template=whole) as part:
            for record in whole:
                if record.query_name in names:
                    part.write(record)
    pysam.index(str(aligned))
    piece = SimpleNamespace(reads=sample, bam=aligned, count=len(names), total=block["reads"],
                            workdir=out_dir / "calling")  # fmt: skip
    settings["reads"] = len(names)

    def call(cut, folder, strategy):
        with open(folder / "call.log", "w") as log, redirect_stderr(log):
            run_methylation(tune_strategy.with_strategy(config, strategy, "methylation"),
                            cut.reads, cut.bam, ref, folder / "calls.tsv", 2, 20,
                            config.io_mode, 2, folder / "record.json")  # fmt: skip

    pool = IO_MODES[config.io_mode].nanopolish_processes(2)
    calling = tune_strategy.tune_calling(config, lambda n: piece, ref, 2, pool, settings,
                                         MIN_MEASURABLE_S, call)  # fmt: skip
    (out_dir / "calling.json").write_text(json.dumps(calling, indent=2, default=str))


def short(cases: str, out: str) -> None:
    """Each short-read case's alignment as the align rule runs it, then its read groups settled
    as the sample BAM's are (samtools merge moves RG tags to the end of a merged BAM's records,
    so the unsplit BAM goes through it too); duplicates are not marked here (which of equal
    fragments markdup marks follows SNAP's thread timing)."""
    out_dir = Path(out)
    out_dir.mkdir(parents=True)
    for case in json.loads(Path(cases).read_text()):
        bam = out_dir / f"{case['name']}.bam"
        with open(out_dir / f"{case['name']}.log", "w") as log, redirect_stderr(log):
            run_alignment(host_config(case["host"]), case["aligner"], case["index"],
                          [Path(p) for p in case["index_files"]], Path(case["reads"]), bam, 2,
                          out_dir / f"{case['name']}.run.json", "short", Path(case["reads2"]),
                          case["sample"], mark_duplicates=True,
                          batch=case["batch"])  # fmt: skip
            settle_read_groups(bam, 2, log, duplicates=False)


def modbam(run: str, staged: str, out: str, host: str, *samples: str) -> None:
    """The modBAM samples' align step on the reads staged as the workflow stages them and the
    index of the baseline run (`none`, on the host)."""
    run_dir, staged_dir, out_dir = Path(run), Path(staged), Path(out)
    config = host_config(host)
    out_dir.mkdir(parents=True)
    (mmi,) = (run_dir / "results/references").glob("*/minimap2/*.map-ont.mmi")
    for name in samples:
        with open(out_dir / f"{name}.log", "w") as log, redirect_stderr(log):
            run_alignment(config, "minimap2", str(mmi), [mmi], staged_dir / f"{name}.fastq",
                          out_dir / f"{name}.bam", 2, out_dir / f"{name}.run.json", kind="modbam",
                          sample=name)  # fmt: skip


PARTS = {"topology": topology, "planned": planned, "steps": steps, "tune": tune,
         "short": short, "modbam": modbam}  # fmt: skip


def run_plan(plan_file: Path) -> None:
    """Each part of the plan ([{"name", "part", "args"}]) in turn; one part's failure is written
    to its .out and the next part still runs."""
    folder = plan_file.parent
    LOADED_HOSTS.update(pickle.loads((folder / "hosts.pickle").read_bytes()))
    with open(folder / "guest_timing.txt", "a") as timing:
        timing.write(f"{time.time()} driver imported\n")
        for item in json.loads(plan_file.read_text()):
            timing.write(f"{time.time()} {item['name']}\n")
            timing.flush()
            with open(folder / f"{item['name']}.out", "w") as out:
                try:
                    with redirect_stderr(out):
                        PARTS[item["part"]](*item["args"])
                    out.write("exit=0\n")
                except Exception:
                    out.write(traceback.format_exc() + "exit=1\n")
        timing.write(f"{time.time()} driver done\n")


if __name__ == "__main__":
    if sys.argv[1] == "plan":
        run_plan(Path(sys.argv[2]))
    else:
        PARTS[sys.argv[1]](*sys.argv[2:])
