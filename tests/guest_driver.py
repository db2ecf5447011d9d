"""The pipeline's steps as their rules run them (numapore.execution.steps), for the emulated 2-node
guest of tests/test_numa_guest.py: every part in ONE Python process.

Under software emulation a Python start that imports pysam and numapore takes about two minutes
(most of it reading the libraries through the guest's shared file system), so the guest runs
this file once with a plan naming the parts, instead of a process per part. Each part writes
`<name>.out` in the plan's folder, ending `exit=0` (or the traceback and `exit=1`), and its start
and end to `guest_timing.txt`. The short-read part runs on this host too (its `none` baseline):
`python guest_driver.py short CASES.json OUT`.

Snakemake itself is left out: under emulation it needs minutes just to start, and every job would
pay that again.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from contextlib import redirect_stderr
from pathlib import Path

import pysam
from numapore.execution.hosts import load_host_config
from numapore.execution.shards import settle_read_groups
from numapore.execution.steps import run_alignment, run_methylation


def steps(inputs: str, out: str, host: str) -> None:
    """The align and call_methylation steps on the inputs the host's `none` run prepared
    (inputs: its folder), under the host file's strategy."""
    inputs_dir, out_dir, config = Path(inputs), Path(out), load_host_config(host)
    out_dir.mkdir(parents=True)
    ref = inputs_dir / "results/references/region/region.fa"
    mmi = inputs_dir / "results/references/region/minimap2/region.map-ont.mmi"
    reads = inputs_dir / "results/small/reads/fast5/small.fasta"
    with open(out_dir / "align.log", "w") as log, redirect_stderr(log):
        run_alignment(config, "minimap2", str(mmi), [mmi], reads, out_dir / "aln.bam", 2,
                      out_dir / "align.run.json")  # fmt: skip
    pysam.index(str(out_dir / "aln.bam"))
    with open(out_dir / "call_methylation.log", "w") as log, redirect_stderr(log):
        run_methylation(config, reads, out_dir / "aln.bam", ref, out_dir / "calls.tsv", 2, 20,
                        config.io_mode, 2, out_dir / "call_methylation.run.json")  # fmt: skip


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
            run_alignment(load_host_config(case["host"]), case["aligner"], case["index"],
                          [Path(p) for p in case["index_files"]], Path(case["reads"]), bam, 2,
                          out_dir / f"{case['name']}.run.json", "short", Path(case["reads2"]),
                          case["sample"], mark_duplicates=True,
                          batch=case["batch"])  # fmt: skip
            settle_read_groups(bam, 2, log, duplicates=False)


def modbam(run: str, staged: str, out: str, host: str, *samples: str) -> None:
    """The modBAM samples' align step on the reads staged as the workflow stages them and the
    index of the baseline run (`none`, on the host)."""
    run_dir, staged_dir, out_dir = Path(run), Path(staged), Path(out)
    config = load_host_config(host)
    out_dir.mkdir(parents=True)
    (mmi,) = (run_dir / "results/references").glob("*/minimap2/*.map-ont.mmi")
    for name in samples:
        with open(out_dir / f"{name}.log", "w") as log, redirect_stderr(log):
            run_alignment(config, "minimap2", str(mmi), [mmi], staged_dir / f"{name}.fastq",
                          out_dir / f"{name}.bam", 2, out_dir / f"{name}.run.json", kind="modbam",
                          sample=name)  # fmt: skip


PARTS = {"steps": steps, "short": short, "modbam": modbam}


def run_plan(plan_file: Path) -> None:
    """Each part of the plan ([{"name", "part", "args"}]) in turn; one part's failure is written
    to its .out and the next part still runs."""
    folder = plan_file.parent
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
