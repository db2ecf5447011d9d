"""The NUMA strategies of the pipeline on a real 2-node machine: an emulated guest.

The workflow runs inside the guest with the `instances` and `interleave` strategies on a small
input (region.fa and a few reads); the policies each process recorded prove where it ran, and
the merged outputs equal the `none` strategy's run on this host.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from conftest import REPO, call_set, primary_mapped, run_workflow

from numapore.project import write_project

import numa_guest

BAM = "results/small/align/small.minimap2.bam"
CALLS = "results/small/methylation/small.minimap2.calls.tsv"
N_READS = 6


@pytest.fixture(scope="module")
def small_input(tmp_path_factory, ecoli_dir, minimap2_run) -> dict[str, str]:
    """A few reads that cover region.fa, their FAST5 files, and region.fa as the reference."""
    work = tmp_path_factory.mktemp("small_input")
    readdb = minimap2_run / "results/ecoli/reads/fast5/ecoli.fasta.index.readdb"
    fast5_of = dict(line.split("\t") for line in readdb.read_text().splitlines())
    import pysam

    region = ecoli_dir / "region.fa"
    with pysam.FastxFile(str(ecoli_dir / "reads.fasta")) as fastx:
        reads = {r.name: r.sequence for r in fastx}
    # Reads whose calls land in the region: take them from the baseline's alignments there.
    region_reads = sorted(_reads_on_region(region, reads, work))[:N_READS]
    (work / "reads.fasta").write_text("".join(f">{r}\n{reads[r]}\n" for r in region_reads))
    files = ",".join(fast5_of[r] for r in region_reads)
    return {"sample": "small", "fast5": files, "reads": str(work / "reads.fasta"),
            "reference": str(region)}  # fmt: skip


def _reads_on_region(region: Path, reads: dict[str, str], work: Path) -> set[str]:
    """Names of reads minimap2 maps to the region (primary, MAPQ >= 20)."""
    import subprocess

    (work / "all.fasta").write_text("".join(f">{n}\n{s}\n" for n, s in reads.items()))
    sam = subprocess.run(
        ["minimap2", "-ax", "map-ont", str(region), str(work / "all.fasta")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    names = set()
    for line in sam.splitlines():
        if line.startswith("@"):
            continue
        fields = line.split("\t")
        if int(fields[1]) & 0x904 == 0 and int(fields[4]) >= 20:
            names.add(fields[0])
    return names


def host_yaml(path: Path, strategy: str) -> Path:
    """A host file for the guest: layout detected there, one strategy for both steps."""
    path.write_text(yaml.safe_dump({
        "description": f"2-node NUMA guest, {strategy}",
        "topology": "auto",
        "strategy": {"alignment": strategy, "methylation": strategy, "conversion": "none"},
    }))  # fmt: skip
    return path


# Runs inside the guest: the align and call_methylation steps exactly as their rules run them
# (numapore.steps), on the inputs the host's `none` run prepared. Snakemake itself is left out:
# under software emulation it needs ~80 s just to start, and every job would pay that again.
GUEST_DRIVER = """
import sys
from pathlib import Path
import pysam
from numapore.steps import run_alignment, run_methylation
inputs, out, host, strategy = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
out.mkdir(parents=True)
ref = inputs / "results/references/region/region.fa"
mmi = inputs / "results/references/region/minimap2/region.map-ont.mmi"
reads = inputs / "results/small/reads/fast5/small.fasta"
with open(out / "align.log", "w") as log:
    sys.stderr = log
    run_alignment(host, "minimap2", str(mmi), [mmi], reads, out / "aln.bam", 2,
                  out / "align.run.json")
pysam.index(str(out / "aln.bam"))
with open(out / "call_methylation.log", "w") as log:
    sys.stderr = log
    run_methylation(host, reads, out / "aln.bam", ref, out / "calls.tsv", 2, 20, 2,
                    out / "call_methylation.run.json")
"""


@pytest.fixture(scope="module")
def guest_runs(tmp_path_factory, none_run) -> dict[str, Path]:
    """Boot the 2-node guest once; run both steps there with instances, then interleave."""
    if os.environ.get("NUMAPORE_SKIP_GUEST") == "1":
        pytest.skip("NUMAPORE_SKIP_GUEST=1")
    root = tmp_path_factory.mktemp("guest")
    driver = root / "driver.py"
    driver.write_text(GUEST_DRIVER)
    python = REPO / ".venv" / "bin" / "python"
    runs, commands = {}, []
    for strategy in ("instances", "interleave"):
        host = host_yaml(root / f"{strategy}.yaml", strategy)
        runs[strategy] = root / strategy
        commands.append(
            f"{python} {driver} {none_run} {runs[strategy]} {host} {strategy}"
            f" > {root}/{strategy}.out 2>&1; echo exit=$? >> {root}/{strategy}.out"
        )
    # The guest sees this machine's files read-only: results, caches, temporary files go to root.
    env = {"PYTHONPATH": str(REPO / "scripts"), "TMPDIR": str(root)}
    # Relative FAST5 paths in the read index resolve from the none run's folder.
    result = numa_guest.run_in_numa_guest(
        " ; ".join(commands), timeout=1800, rwdirs=(root,), env=env, cwd=none_run
    )
    for strategy in runs:
        out = root / f"{strategy}.out"
        text = out.read_text() if out.exists() else "(no output)"
        assert text.rstrip().endswith(
            "exit=0"
        ), f"{strategy} in guest:\n{text[-4000:]}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    return runs


@pytest.fixture(scope="module")
def none_run(tmp_path_factory, small_input) -> Path:
    """The whole workflow on the small input with the `none` strategy, on this host."""
    work = write_project(tmp_path_factory.mktemp("none"), [small_input])
    run_workflow(work, "--config", f"host={host_yaml(work / 'none.yaml', 'none')}")
    return work


def records(work: Path, step: str) -> dict:
    """The launcher's record of what ran for a step in the guest."""
    return json.loads((work / f"{step}.run.json").read_text())


def test_numa_guest_instances_ran_on_their_own_nodes(guest_runs):
    for step in ("align", "call_methylation"):
        record = records(guest_runs["instances"], step)
        assert record["strategy"] == "instances"
        assert [p["node"] for p in record["processes"]] == [0, 1]
        for i, proc in enumerate(record["processes"]):
            assert proc["command"].startswith(f"numactl --cpunodebind={i} --membind={i} ")
            policy = proc["policy"]
            assert "policy: bind" in policy
            assert f"membind: {i} " in policy
            assert f"Cpus_allowed_list:\t{i}\n" in policy


def test_numa_guest_interleave_spans_both_nodes(guest_runs):
    for step in ("align", "call_methylation"):
        (proc,) = records(guest_runs["interleave"], step)["processes"]
        assert proc["command"].startswith("numactl --interleave=0,1 ") or proc[
            "command"
        ].startswith("numactl --interleave=0-1 ")
        assert "policy: interleave" in proc["policy"]
        assert "interleavemask: 0 1" in proc["policy"]


@pytest.mark.parametrize("strategy", ["instances", "interleave"])
def test_numa_guest_outputs_equal_none(guest_runs, none_run, strategy):
    out = guest_runs[strategy]
    assert primary_mapped(out / "aln.bam") == primary_mapped(none_run / BAM)
    calls = call_set(out / "calls.tsv")
    assert calls and calls == call_set(none_run / CALLS)
