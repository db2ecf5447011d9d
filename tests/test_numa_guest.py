"""numactl, numapore's NUMA code and the pipeline's strategies on a real 2-node machine.

One boot of an emulated 2-node guest (QEMU without KVM, ~1.5-2 min to boot) runs everything:
probes of numactl and of numapore's topology detection and instance plans, then the pipeline's
steps with the `instances` and `interleave` strategies on a small input (region.fa and a few
reads), their alignments those of the host tuning of the alignment's strategy (issue 45: every
strategy measured on the input, the choice one of them); the policies each process recorded
prove where it ran, and the merged outputs equal the `none` strategy's run on this host.
Short-read pairs too (issue 29): bwa as an instance per node on an odd number of pairs, and SNAP
under a host file whose nodes are smaller than its index: one instance over both nodes. modBAM
samples too: modkit's test modBAMs of the modBAM baseline run (tests/test_modbam_kind.py's)
realigned with one minimap2 per node. This is the only boot of the guest in the suite, and every
step in it runs in one Python process (tests/guest_driver.py: each start costs minutes under
emulation): a check that needs a 2-node machine adds a part there.
NUMAPORE_SKIP_GUEST=1 skips these tests (for quick local runs; CI runs them).
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import re
import subprocess
import time
from pathlib import Path

import pysam
import pytest
import yaml
from conftest import REPO, call_set, primary_mapped, run_workflow
import test_modbam_kind as modbam_tests
from test_modbam_kind import SUITE, calls_by_read, logged_pileup, pileup_again
from test_modbam_kind import records as sorted_records

from numapore.compare import tune_strategy
from numapore.compare.measure import MIN_MEASURABLE_S
from numapore.execution import probe
from numapore.execution.hosts import load_host_config
from numapore.inputs.modbam_reads import stage_modbam_reads
from project import write_project

import numa_guest

# The modBAM baseline run and its inputs: tests/test_modbam_kind.py's fixtures (one run).
baseline_run, baseline, variants = (
    modbam_tests.baseline_run,
    modbam_tests.baseline,
    modbam_tests.variants,
)

# Every part the guest runs, in one Python process (see its docstring).
GUEST_DRIVER = Path(__file__).resolve().parent / "guest_driver.py"
BAM = "results/small/align/small.minimap2.bam"
CALLS = "results/small/methylation/small.minimap2.cpg.calls.tsv"
N_READS = 6
# The calling's tuning in the guest: the first 2 of them (nanopolish: about 3 s a read there;
# instances gives each node's process one), whose calls are the instances and interleave steps'
# too.
N_CALL_READS = 2


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
    return {"sample": "small", "signal": files, "reads": str(work / "reads.fasta"),
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
        "strategy": {"alignment": strategy, "methylation": strategy},
    }))  # fmt: skip
    return path


@pytest.fixture(scope="module")
def guest(
    tmp_path_factory, none_run, short_cases, modbam_cases, baseline
) -> tuple[subprocess.CompletedProcess[str], dict[str, Path], dict[str, Path]]:
    """Boot the 2-node guest once: the probes, then the tuning of the alignment's strategy, then
    both steps with instances and interleave (their alignments: the tuning's cells), then the
    short-read cases (short_cases), then the modBAM samples (modbam_cases)."""
    if os.environ.get("NUMAPORE_SKIP_GUEST") == "1":
        pytest.skip("NUMAPORE_SKIP_GUEST=1")
    root = tmp_path_factory.mktemp("guest")
    # numapore's own probes first, in the driver's process: its topology detection, and the
    # planner's instance commands each probing the binding it runs under.
    probe_files = {"topology": root / "topology.json", "planned": root / "planned.txt"}
    runs: dict[str, Path] = {"tune": root / "tune"}
    plan = [{"name": name, "part": name, "args": [str(out)]} for name, out in probe_files.items()]
    # Host tuning of the alignment's strategy on the small input (every read: its slice), whose
    # instances and interleave cells are the align step of those strategies' runs below.
    hosts = {s: host_yaml(root / f"{s}.yaml", s) for s in ("instances", "interleave")}
    plan.append({"name": "tune", "part": "tune",
                 "args": [str(none_run), str(runs["tune"]), str(hosts["instances"]),
                          str(N_READS), str(N_CALL_READS)]})  # fmt: skip
    for strategy, host in hosts.items():
        runs[strategy] = root / strategy
        cell = runs["tune"] / f"slice{N_READS}" / f"{strategy}.r1"
        called = runs["tune"] / "calling" / f"{strategy}.r1"
        args = [str(none_run), str(runs[strategy]), str(host), str(cell), str(called)]
        plan.append({"name": strategy, "part": "steps", "args": args})
    runs["short"] = root / "short"
    plan.append({"name": "short", "part": "short",
                 "args": [str(short_cases / "cases.json"), str(runs["short"])]})  # fmt: skip
    runs["modbam"] = root / "modbam"
    plan.append({"name": "modbam", "part": "modbam",
                 "args": [str(baseline), str(modbam_cases), str(runs["modbam"]),
                          str(root / "instances.yaml"), *MODBAM_SAMPLES]})  # fmt: skip
    (root / "plan.json").write_text(json.dumps(plan))
    # The host files, loaded here (no PyYAML or jsonschema imports in the guest: guest_driver).
    loaded = [str(h) for h in hosts.values()]
    loaded += [case["host"] for case in json.loads((short_cases / "cases.json").read_text())]
    (root / "hosts.pickle").write_bytes(pickle.dumps({h: load_host_config(h) for h in loaded}))
    python = REPO / ".venv" / "bin" / "python"
    # The guest sees this machine's files read-only: results, caches, temporary files go to root.
    env = {"PYTHONPATH": str(REPO / "scripts"), "TMPDIR": str(root)}
    probes = PROBE_SCRIPT.replace("{pythonpath}", env["PYTHONPATH"]).replace(
        "{python}", str(python)
    )
    # The last line's exit code must come back through vng: the probe tests check it.
    script = root / "guest.sh"
    # Where the guest's time goes (seconds since the epoch: the boot, each part's start, the
    # end) in guest_timing.txt, for the suite's budget. All parts run in one Python process
    # (tests/guest_driver.py): under emulation each Python start costs about two minutes.
    stamp = f"echo $(date +%s.%N) {{}} >> {root}/guest_timing.txt"
    script.write_text("\n".join([
        stamp.format("probes"), probes,
        stamp.format("driver"),
        f"{python} {GUEST_DRIVER} plan {root / 'plan.json'} > {root}/driver.out 2>&1",
        stamp.format("end"), "echo '=== end'", "exit 7",
    ]) + "\n")  # fmt: skip
    # A file, not the text: vng hands a command over on the kernel command line (2 KiB at
    # most; a longer one hangs the guest). Relative FAST5 paths in the read index resolve
    # from the none run's folder.
    # Every guest check in this one boot (the two boots' 30 minutes each, less a boot): on a
    # machine busy with other work the script took more than 30 minutes under emulation.
    (root / "guest_timing.txt").write_text(f"{time.time()} boot\n")
    result = numa_guest.run_in_numa_guest(
        f"sh {script}", timeout=2700, rwdirs=(root,), env=env, cwd=none_run
    )
    with open(root / "guest_timing.txt", "a") as timing:
        timing.write(f"{time.time()} returned\n")
    driver_out = root / "driver.out"
    driver_text = driver_out.read_text() if driver_out.exists() else "(no driver output)"
    for part in [item["name"] for item in plan]:
        out = root / f"{part}.out"
        text = out.read_text() if out.exists() else "(no output)"
        assert text.rstrip().endswith("exit=0"), (
            f"{part} in guest:\n{text[-4000:]}\ndriver: {driver_text[-2000:]}\n"
            f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        )
    return result, runs, probe_files


@pytest.fixture(scope="module")
def guest_runs(guest) -> dict[str, Path]:
    """Where each strategy's pipeline run in the guest wrote its outputs and records."""
    return guest[1]


@pytest.fixture(scope="module")
def guest_probes(guest) -> dict[str, Path]:
    """The files of the probes run in the guest's driver (topology, planned)."""
    return guest[2]


@pytest.fixture(scope="module")
def none_run(tmp_path_factory, small_input) -> Path:
    """The workflow on the small input with the `none` strategy, on this host, up to the
    alignments and calls (with the references, reads and index the guest's steps read)."""
    work = write_project(tmp_path_factory.mktemp("none"), [small_input])
    host = host_yaml(work / "none.yaml", "none")
    run_workflow(work, "--config", f"host={host}", "--", BAM, CALLS)
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


def test_numa_guest_tuning_chooses_a_candidate_equal_to_none(guest_runs, none_run):
    """Host tuning of the alignment's and the calling's strategies on the 2-node guest (issue
    45), as checkpoint tune_host runs it: every strategy runs otherwise than none there, so all
    are measured, on the small input. One repeat (a run's least is 2) keeps the guest's time
    down: the choice follows the emulation's noise, so what is checked is that it is one of
    the candidates, by the honest rule on the walls measured; and every cell's alignment has
    the records of none's cell, byte for byte (minimap2 is deterministic), and none's those of
    the `none` run here; every calling cell's calls are the `none` run's."""
    tuned = json.loads((guest_runs["tune"] / "tuning.json").read_text())
    assert tuned["candidates"] == ["none", "interleave", "localalloc", "instances"]
    assert tuned["dropped"] == {} and tuned["reads"] == N_READS
    assert [(c["strategy"], c["repeat"]) for c in tuned["cells"]] == [
        (s, 1) for s in tuned["candidates"]
    ]
    walls = tuned["walls"]
    assert all(len(w) == 1 and w[0] > 0 for w in walls.values())
    assert tuned["strategy"] in tuned["candidates"]
    assert (tuned["strategy"], tuned["why"]) == tune_strategy.decide(walls, MIN_MEASURABLE_S)
    cells = Path(tuned["folder"])
    none = bam_records(cells / "none.r1/slice.bam")
    assert primary_mapped(cells / "none.r1/slice.bam") == primary_mapped(none_run / BAM)
    for strategy in tuned["candidates"]:
        record = json.loads((cells / f"{strategy}.r1/slice.run.json").read_text())
        assert record["strategy"] == strategy
        assert bam_records(cells / f"{strategy}.r1/slice.bam") == none, strategy
    # nanopolish calling's strategies, under the host file's I/O mode (fast5), on none's
    # alignments: all four measured, the rule's choice, and every cell's calls are the `none`
    # run's here (instances' and interleave's cells are those steps' calls below)
    calling = json.loads((guest_runs["tune"] / "calling.json").read_text())
    assert calling["step"] == "methylation" and calling["nodes"] == 2
    assert calling["reads"] == N_CALL_READS
    assert calling["candidates"] == tuned["candidates"] and calling["dropped"] == {}
    assert [(c["strategy"], c["repeat"]) for c in calling["cells"]] == [
        (s, 1) for s in calling["candidates"]
    ]
    assert calling["strategy"] in calling["candidates"]
    assert (calling["strategy"], calling["why"]) == tune_strategy.decide(
        calling["walls"], MIN_MEASURABLE_S
    )
    expected = call_set(none_run / CALLS, calling_reads(none_run))
    assert {call[2] for call in expected} == calling_reads(none_run)
    for strategy in calling["candidates"]:
        folder = Path(calling["folder"]) / f"{strategy}.r1"
        record = json.loads((folder / "record.json").read_text())
        assert (record["strategy"], record["io_mode"]) == (strategy, "fast5")
        assert call_set(folder / "calls.tsv") == expected, strategy


def calling_reads(none_run: Path) -> set[str]:
    """The reads the guest's calling cells call: the small input's first N_CALL_READS."""
    with pysam.FastxFile(str(none_run / "results/small/reads/fast5/small.fasta")) as fastx:
        return {record.name for _, record in zip(range(N_CALL_READS), fastx, strict=False)}


@pytest.mark.parametrize("strategy", ["instances", "interleave"])
def test_numa_guest_outputs_equal_none(guest_runs, none_run, strategy):
    """Each strategy's steps in the guest: its alignments of the small input (the tuning's
    cell), and its calls of the first N_CALL_READS reads (the calling tuning's cell), as none's
    on this host."""
    out = guest_runs[strategy]
    assert primary_mapped(out / "aln.bam") == primary_mapped(none_run / BAM)
    calls = call_set(out / "calls.tsv")
    assert calls and calls == call_set(none_run / CALLS, calling_reads(none_run))


# --- probes of numactl and numapore's NUMA code in the guest -------------------------------------

# The probes that need a process of their own: numactl's, and numapore's policy probe as a
# process started under numactl's binding (-S: no site-packages, which the probe does not use;
# each Python start costs tens of seconds under emulation). numapore's topology detection and
# instance plans are probed in the driver's process (guest_driver: topology, planned).
PROBE_SCRIPT = r"""
export PYTHONPATH={pythonpath} PYTHONDONTWRITEBYTECODE=1
echo '=== hardware'; numactl --hardware
echo '=== status'; numactl --cpunodebind=1 --membind=1 cat /proc/self/status
echo '=== show'; numactl --cpunodebind=1 --membind=1 numactl --show
echo '=== policy'; numactl --cpunodebind=1 --membind=1 \
    {python} -S -m numapore.execution.probe policy --json
"""


def _sections(text: str) -> dict[str, str]:
    """Split guest output into its '=== name' sections."""
    parts = re.split(r"^=== (\w+)\n", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.fixture(scope="module")
def guest_run(guest) -> subprocess.CompletedProcess[str]:
    """The guest's output: the probes' sections, then the pipeline's (in files)."""
    return guest[0]


def test_numa_guest_boots_with_two_nodes(guest_run: subprocess.CompletedProcess[str]) -> None:
    """The guest ran the whole script (exit code passed through) and numactl sees 2 nodes."""
    assert guest_run.returncode == 7, guest_run.stderr[-3000:]
    out = _sections(guest_run.stdout)
    assert "end" in out
    assert out["hardware"].startswith("available: 2 nodes (0-1)")


def test_numa_guest_topology_detection(guest_probes: dict[str, Path]) -> None:
    """numapore's own detection inside the guest (its probe CLI's `topology --json`) finds 2
    nodes with one CPU each."""
    topo = json.loads(guest_probes["topology"].read_text())
    assert topo["source"].startswith("sysfs")
    assert [(n["id"], n["cpus"]) for n in topo["nodes"]] == [(0, "0"), (1, "1")]
    assert [n["distances"] for n in topo["nodes"]] == [[10, 20], [20, 10]]
    assert all(800 < n["memory_mib"] <= 1024 for n in topo["nodes"])


def test_numa_guest_binding_to_node_1(guest_run: subprocess.CompletedProcess[str]) -> None:
    """--cpunodebind=1 --membind=1 confines CPUs to 1 and the memory policy to node 1."""
    # Mems_allowed_list in /proc is the cpuset's and stays 0-1 under --membind; the memory
    # binding is what numactl --show (get_mempolicy) reports.
    out = _sections(guest_run.stdout)
    status = probe.parse_proc_status(out["status"])
    assert status["Cpus_allowed_list"] == (1,)
    assert status["Mems_allowed_list"] == (0, 1)
    show = probe.parse_numactl_show(out["show"])
    assert show["policy"] == "bind" and show["membind"] == [1] and show["physcpubind"] == [1]
    pol = json.loads(out["policy"])
    assert pol["policy"] == "bind" and pol["membind"] == [1] and pol["cpus_allowed"] == [1]


def test_numa_guest_instances_bind_each_node(guest_probes: dict[str, Path]) -> None:
    """The planner's instance commands, run in the guest, each land on their own node."""
    text = guest_probes["planned"].read_text()
    blocks = re.split(r"^--- node (\d+) threads (\d+)\n", text, flags=re.MULTILINE)[1:]
    assert [(blocks[i], blocks[i + 1]) for i in range(0, len(blocks), 3)] == [
        ("0", "1"),
        ("1", "1"),
    ]
    for node, body in zip(blocks[0::3], blocks[2::3], strict=True):
        assert re.search(rf"^Cpus_allowed_list:\s+{node}$", body, re.MULTILINE)
        assert re.search(r"^policy: bind$", body, re.MULTILINE)
        assert re.search(rf"^membind: {node} $", body, re.MULTILINE)


# --- short reads (issue 29): instances per node, and one instance over a group of nodes -------

EXAMPLES = Path("/usr/share/doc/bowtie2/examples")  # Debian's bowtie2-examples (setup.sh)
LAMBDA_PAIRS = 5_000  # the first half of the 10,000 lambda pairs (renamed), and one more
PAIRS = LAMBDA_PAIRS + 1  # odd; 1.1 M bases
# bwa's -K for the case (config short_reads.bwa_batch_bases): batches of 0.5 M bases, so the
# pairs are 3 batches and the two shares both hold whole ones, with a tenth of the bases the
# default's 10 M would need (bwa under emulation is much of the guest's time).
BATCH = 500_000
SNAP_PAIRS = 2001  # pairs simulated from DH10B (art_illumina), whose SNAP index is 57 MiB
NODE_MIB = 32  # the node memory the SNAP case's host file declares: smaller than that index


def fastq_records(path: Path) -> list[list[str]]:
    """The 4-line records of a (gzip) FASTQ file."""
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    return [lines[i : i + 4] for i in range(0, len(lines), 4)]


def write_records(path: Path, records: list[list[str]]) -> Path:
    """Write FASTQ records."""
    path.write_text("".join("\n".join(r) + "\n" for r in records))
    return path


def lambda_pairs(folder: Path) -> tuple[Path, Path]:
    """The bowtie2 examples' first LAMBDA_PAIRS pairs, renamed, plus the first pair once more:
    PAIRS pairs (odd), plain FASTQ."""
    files = []
    for mates in ("reads_1", "reads_2"):
        pairs = fastq_records(EXAMPLES / "reads" / f"{mates}.fq.gz")
        out = [[f"@c0_{r[0][1:]}", *r[1:]] for r in pairs[:LAMBDA_PAIRS]]
        out.append([f"@odd_{pairs[0][0][1:]}", *pairs[0][1:]])
        files.append(write_records(folder / f"lambda_{mates}.fq", out))
    return files[0], files[1]


def dh10b_pairs(folder: Path, dh10b: Path) -> tuple[Path, Path]:
    """SNAP_PAIRS 2 x 150 pairs simulated from DH10B by art_illumina (HiSeq 2500 profile, fixed
    seed), named dh1, dh2, ..."""
    prefix = folder / "art"
    subprocess.run(
        ["art_illumina", "-ss", "HS25", "-i", str(dh10b), "-p", "-l", "150", "-f", "0.15",
         "-m", "300", "-s", "30", "-rs", "7", "-na", "-o", str(prefix)],
        check=True, capture_output=True,
    )  # fmt: skip
    files = []
    for mate in (1, 2):
        lines = Path(f"{prefix}{mate}.fq").read_text().splitlines()
        records = [lines[i : i + 4] for i in range(0, len(lines), 4)][:SNAP_PAIRS]
        assert len(records) == SNAP_PAIRS
        renamed = [[f"@dh{i + 1}/{mate}", *r[1:]] for i, r in enumerate(records)]
        files.append(write_records(folder / f"dh10b_{mate}.fq", renamed))
    return files[0], files[1]


def short_host(path: Path, strategy: str, node_mib: int | None = None) -> Path:
    """A host file for the short-read cases: alignment under strategy; with node_mib, the
    guest's layout written out with that much memory per node."""
    data: dict = {"description": f"2-node NUMA guest, {strategy}", "topology": "auto",
                  "strategy": {"alignment": strategy, "methylation": "none"}}  # fmt: skip
    if node_mib is not None:
        nodes = [{"id": i, "cpus": str(i), "memory_mib": node_mib} for i in (0, 1)]
        data["topology"] = {"nodes": nodes}
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def short_cases(tmp_path_factory, dh10b) -> Path:
    """The short-read cases' inputs, indexes (built by hand), host files and driver, and their
    `none` baselines run on this host (folder none/)."""
    folder = tmp_path_factory.mktemp("short")
    fasta = folder / "lambda.fa"
    fasta.write_bytes(gzip.decompress((EXAMPLES / "reference" / "lambda_virus.fa.gz").read_bytes()))
    subprocess.run(["bwa", "index", str(fasta)], check=True, capture_output=True)
    snap_index = folder / "dh10b.snap"
    subprocess.run(["snap-aligner", "index", str(dh10b), str(snap_index), "-t2"],
                   check=True, capture_output=True)  # fmt: skip
    snap_files = sorted(str(p) for p in snap_index.iterdir())
    assert sum(Path(p).stat().st_size for p in snap_files) > NODE_MIB * 2**20
    lam, dh = lambda_pairs(folder), dh10b_pairs(folder, dh10b)
    bwa_files = [f"{fasta}{x}" for x in (".amb", ".ann", ".bwt", ".pac", ".sa")]
    cases = {
        "bwa": (short_host(folder / "instances.yaml", "instances"), "bwa", str(fasta),
                bwa_files, lam, "lam"),
        "snap": (short_host(folder / "small-nodes.yaml", "instances", NODE_MIB), "snap",
                 str(snap_index), snap_files, dh, "dh"),
    }  # fmt: skip
    none = short_host(folder / "none.yaml", "none")

    def listed(host_of: dict[str, Path]) -> list[dict]:
        """The cases as the driver reads them, each under the host file host_of names."""
        return [
            {"name": name, "host": str(host_of[name]), "aligner": aligner, "index": index,
             "index_files": files, "reads": str(reads[0]), "reads2": str(reads[1]),
             "sample": sample, "batch": BATCH if aligner == "bwa" else 0}
            for name, (_, aligner, index, files, reads, sample) in cases.items()
        ]  # fmt: skip

    (folder / "cases.json").write_text(json.dumps(listed({n: c[0] for n, c in cases.items()})))
    (folder / "none.json").write_text(json.dumps(listed(dict.fromkeys(cases, none))))
    python = REPO / ".venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(REPO / "scripts")}
    argv = [
        str(python),
        str(GUEST_DRIVER),
        "short",
        str(folder / "none.json"),
        str(folder / "none"),
    ]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def bam_records(bam: Path) -> list[str]:
    """A BAM's records as text, in file order (no header: its @PG lines name the run)."""
    import pysam

    return pysam.view(str(bam)).splitlines()


def test_numa_guest_short_pairs_instances_equal_none(guest_runs, short_cases):
    """bwa as an instance per node on 5,001 pairs (odd) with -K 0.5 M: the pairs were cut into two
    shares of whole pairs and whole batches, each instance bound to its node, and the merged BAM
    holds the records of the `none` run on this host, in the same order; every pair's mates
    aligned together."""
    out = guest_runs["short"]
    record = json.loads((out / "bwa.run.json").read_text())
    assert record["strategy"] == "instances"
    assert [p["node"] for p in record["processes"]] == [0, 1]
    for i, proc in enumerate(record["processes"]):
        assert proc["command"].startswith(f"numactl --cpunodebind={i} --membind={i} ")
        assert f"membind: {i} " in proc["policy"] and f"Cpus_allowed_list:\t{i}\n" in proc["policy"]
    log = (out / "bwa.log").read_text()
    shares = [int(n) for n in log.split("pairs per process: [")[1].split("]")[0].split(",")]
    assert sum(shares) == PAIRS and all(shares), shares
    assert all(f" mem -K {BATCH} " in p["command"] for p in record["processes"])
    got = bam_records(out / "bwa.bam")
    assert got == bam_records(short_cases / "none" / "bwa.bam")
    mates: dict[str, list[int]] = {}
    for line in got:
        fields = line.split("\t")
        if not int(fields[1]) & 0x900:
            mates.setdefault(fields[0], []).append(int(fields[1]) & 0xC1)
    # Each fragment: a first and a last mate, both flagged paired: aligned as a pair.
    assert len(mates) == PAIRS and all(sorted(f) == [0x41, 0x81] for f in mates.values())


def test_numa_guest_snap_spans_both_nodes(guest_runs, short_cases):
    """SNAP's 57 MiB index under a host file of 32 MiB nodes, strategy instances: the plan makes
    one instance over both nodes (bound to both, its memory interleaved over them), its record
    says why, and its BAM holds the records of the `none` run on this host."""
    out = guest_runs["short"]
    record = json.loads((out / "snap.run.json").read_text())
    reasons = record["reasons"]
    assert record["strategy"] == "instances" and reasons["instance_nodes"] == 2
    assert reasons["groups"] == [[0, 1]] and reasons["group_memory_mib"] == 2 * NODE_MIB
    assert "> 40% of even all 2 nodes (64 MiB): one process per group of 2 nodes (1)" in (
        reasons["groups_why"]
    )
    (proc,) = record["processes"]
    assert proc["node"] == [0, 1] and proc["threads"] == 2
    assert proc["command"].startswith("numactl --cpunodebind=0-1 --interleave=0-1 snap") or proc[
        "command"
    ].startswith("numactl --cpunodebind=0-1 --interleave=0-1 bash")
    assert "policy: interleave" in proc["policy"] and "interleavemask: 0 1" in proc["policy"]
    assert "Cpus_allowed_list:\t0-1\n" in proc["policy"]
    got = bam_records(out / "snap.bam")
    # SNAP's two threads write their batches as they finish: records at one position may come
    # in another order, so the records are compared as a sorted list.
    assert sorted(got) == sorted(bam_records(short_cases / "none" / "snap.bam"))
    assert sum(not int(x.split("\t")[1]) & 0x900 for x in got) == 2 * SNAP_PAIRS


# --- modBAM samples: one minimap2 per node (moved from tests/test_modbam_kind.py) ---------------

# Two of the suite's modBAM samples (about 6 s each in the guest): the guest checks the align
# step's split per node and merge, which is the same for every sample once staged (staging, and
# the other samples' kinds of input, CRAM among them, are tests/test_modbam_kind.py's, here):
# duplicate-marked records, and a dorado 0.3.2 modBAM (other reads, other tags).
MODBAM_SAMPLES = ("duplicated", "dorado032")


@pytest.fixture(scope="module")
def modbam_cases(tmp_path_factory, baseline: Path) -> Path:
    """The modBAM samples' reads staged as the workflow stages them (to files here: the
    workflow streams them into its align job), and the guest's driver."""
    folder = tmp_path_factory.mktemp("modbam")
    sheet = (baseline / "config" / "samples.tsv").read_text().splitlines()[1:]
    sources = {name: Path(reads) for name, reads, _ in (line.split("\t") for line in sheet)}
    ladder = next(Path(line.split("\t")[2]) for line in sheet)
    for name in MODBAM_SAMPLES:
        stage_modbam_reads(sources[name], folder / f"{name}.fastq", ladder, 2)
    return folder


def test_numa_guest_modbam_instances_give_the_none_records(
    guest_runs, baseline: Path, variants, tmp_path: Path
) -> None:
    """On a real 2-node machine, strategy instances runs one aligner per node, bound to it; the
    merged modBAM has the `none` run's records, the input's calls, and the same bedMethyl."""
    out = guest_runs["modbam"]
    for name in MODBAM_SAMPLES:
        record = json.loads((out / f"{name}.run.json").read_text())
        assert record["strategy"] == "instances", name
        assert [p["node"] for p in record["processes"]] == [0, 1], name
        for node, process in enumerate(record["processes"]):
            assert process["command"].startswith(f"numactl --cpunodebind={node} --membind={node} ")
            assert "minimap2 -ax map-ont -y -Y -t 1 " in process["command"]
            assert f"membind: {node} " in process["policy"], process["policy"]
        bam = out / f"{name}.bam"
        none = baseline / f"results/{name}/align/{name}.minimap2.bam"
        assert sorted_records(bam) == sorted_records(none), name
        source = calls_by_read((SUITE | variants)[name])
        assert all(calls == source[read] for read, calls in calls_by_read(bam).items()), name
        bed = baseline / f"results/{name}/methylation/{name}.minimap2.cpg.bedmethyl.gz"
        options = logged_pileup(baseline, name, "minimap2")
        pysam.index(str(bam))
        again = pileup_again(bam, options, tmp_path / f"{name}.bed", cwd=baseline)
        assert again and again == gzip.decompress(bed.read_bytes()), name
