"""The pipeline on a real Slurm cluster of several nodes: slurmctld, slurmdbd (MariaDB), munge and
one slurmd per node, each node in network and UTS namespaces of its own, started on this
machine by tests/slurm_cluster.py; jobs submitted through profiles/slurm and
snakemake-executor-plugin-slurm.

One run spread over the nodes of the `big` partition (a signal sample and a modBAM sample:
scattered alignment, methylation as NUMA instances on whole nodes, scattered pileup, a DMR
contrast of the two) ends with the bytes of the same run on one host, and sacct lists its jobs
on two nodes; another, on the `small` partition, loses a node while its job runs there (its
slurmd and every process killed): Slurm marks it down, the run submits the job again on the
other node and ends with the same bytes, its last lines naming the job lost and its rerun; then a
job that fails wherever it runs stops the run with one line naming it.

The three workflow runs (one host, spread, node lost) start together in one module fixture:
most of a Slurm run is waiting for jobs, and this machine's two CPUs serve all the nodes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import forked_snakemake
import pytest
import yaml
from conftest import REPO, ecoli_row, shortest_reads
from slurm_cluster import ACCOUNT, PARTITION, SlurmCluster, missing_programs, node_line
from test_modbam_kind import SUITE, calls_by_read, write_modbam_project

from numapore.execution.cluster import host_cpus, job_cpus, needs_whole_node, node_request
from numapore.execution.hosts import load_host_config
from numapore.execution.topology import detect_topology
from project import snakemake_command, write_project

# Two node types: `big` nodes (4 CPUs; the methylation's instances own one) for the spread run,
# `small` ones (2 CPUs) for the run that loses one (kept apart, so that the loss touches no job
# of the spread run). Both runs' jobs take at most 2 threads, as the run on one host: the
# aligner's and samtools' thread counts are written in the BAM headers.
NODES = [("big", 4), ("big", 4), ("small", 2), ("small", 2)]
CONTRAST = "native_vs_simulated"
DMR = f"results/dmr/{CONTRAST}/{CONTRAST}"
TARGETS = [f"{DMR}.dmrs.bed.gz.tbi", f"{DMR}.sites.tsv.gz.tbi"]
READS = 40  # the shortest reads of the shared E. coli set: a quick run
# The E. coli reads map to DH10B's 450-470 kb and 770-790 kb: the simulated modBAM sample is
# drawn from the second window, so that the contrast has sites covered in both samples.
WINDOW = "gi|170079663|ref|NC_010473.1|:770000-790000"
CONFIG = {
    "scatter": {"alignment": 2, "methylation": 2, "pileup": 2},
    "simulate": {
        "sim": {
            "kind": "modbam", "reference": "", "reads": 40, "seed": 3, "mean_length": 2000,
            "sd_length": 500, "region": WINDOW, "group": "simulated",
        }
    },
    "dmr": {"contrasts": [{"groups": ["native", "simulated"]}]},
}  # fmt: skip
# The site's account, as a user sets it for profiles/slurm (the partition: each run's own).
SITE_ENV = {"NUMAPORE_SLURM_ACCOUNT": ACCOUNT}
# Quick polling for the tests: the plugin's first status check 5 s after a job finished (default
# 40 s); it then backs off by 10 s per check while no job finished (most jobs here take 10-20 s).
POLLING = ["--slurm-init-seconds-before-status-checks", "5", "--seconds-between-status-checks", "5"]
# Rules that never go to Slurm in these runs (localrules of workflow/Snakefile).
LOCAL_RULES = {"split_alignments", "merge_methylation_calls"}
# The job whose node dies in the run that loses one.
LOST_COMMENT = "rule_call_methylation_wildcards_ecoli_minimap2_cpg_1-of-2"
LOST_JOB = "call_methylation (ecoli_minimap2_cpg_1-of-2)"
TIMEOUT = 900


def slurm_command(workdir: Path, *args: str) -> list[str]:
    """The command a user runs with the slurm profile (the repository's folder), in workdir."""
    return snakemake_command(workdir, None, *POLLING, *args, profile="slurm")


class Run:
    """A workflow command running in the background, its output in <workdir>/<name>.out."""

    def __init__(self, workdir: Path, cmd: list[str], env: dict[str, str], name: str = "run"):
        """Start cmd in the background with env."""
        self.workdir, self.cmd, self.env = workdir, cmd, env
        self.out = workdir / f"{name}.out"
        with open(self.out, "w") as handle:
            self.proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env)

    def wait(self, expect_success: bool = True) -> str:
        """Wait for the command; its output (pytest.fail with its tail when the exit is wrong)."""
        try:
            code = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"no end after {TIMEOUT} s: {' '.join(self.cmd)}\n{self.tail()}")
        if (code == 0) != expect_success:
            pytest.fail(f"exit {code} ({' '.join(self.cmd)}):\n{self.tail()}")
        return self.out.read_text()

    def tail(self) -> str:
        """The last lines of the output, for failure messages."""
        return "\n".join(self.out.read_text(errors="replace").splitlines()[-60:])

    def stop(self) -> None:
        """Terminate the command if it still runs (a failed test leaves nothing behind)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def lose_node_of_job(cluster: SlurmCluster, run: Run, comment: str) -> tuple[str, str]:
    """Once the job (by its plugin comment) runs its tool on a node, the node dies (its slurmd
    and every process in it killed); wait until Slurm marks it down, then boot it again.
    The lost Slurm job's id and the node."""
    rule, _, wildcards = comment.removeprefix("rule_").partition("_wildcards_")
    log = run.workdir / f"results/logs/{rule}/{wildcards.replace('_', '.')}.log"
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and run.proc.poll() is None:
        if log.exists():  # the job's step has started the tool
            queue = cluster.run("squeue", "-h", "-o", "%i|%k|%Z|%T|%N").stdout
            for line in queue.splitlines():
                jobid, job_comment, workdir, state, node = line.split("|")
                if job_comment == comment and Path(workdir) == run.workdir and state == "RUNNING":
                    cluster.kill_node(node)
                    cluster.wait_node_state(node, {"down*", "down"})
                    cluster.start_node(node)
                    cluster.wait_node_state(node, {"idle", "mix", "alloc"})
                    return jobid, node
        time.sleep(0.2)
    raise AssertionError(f"no running job {comment}:\n{run.tail()}")


class NodeKiller(threading.Thread):
    """lose_node_of_job in the background; join() returns the lost job's id and node."""

    def __init__(self, cluster: SlurmCluster, run: Run, comment: str):
        """A thread that will kill the node of run's job (start() it)."""
        super().__init__(daemon=True)
        self.args_ = (cluster, run, comment)
        self.lost: tuple[str, str] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        """Thread body: record the lost job or the error."""
        try:
            self.lost = lose_node_of_job(*self.args_)
        except BaseException as err:  # re-raised in the test by join()
            self.error = err

    def join(self, timeout: float | None = TIMEOUT) -> tuple[str, str]:
        """Wait for the loss; the lost job's id and node (the thread's error re-raised)."""
        super().join(timeout)
        if self.error is not None:
            raise self.error
        assert self.lost is not None, "the node-killing thread did not finish"
        return self.lost


def instances_host(path: Path) -> Path:
    """A host file with this machine's layout written out and the instances strategy for
    methylation (2 per node): its jobs must own the node."""
    host = {
        "description": "test: this machine, methylation as NUMA instances",
        "topology": detect_topology().to_dict(),
        "strategy": {"alignment": "none", "methylation": "instances"},
        "instances_per_node": 2,
        "io_mode": "fast5",
    }
    path.write_text(yaml.safe_dump(host))
    return path


def submitted_jobs(output: str) -> dict[str, str]:
    """Slurm job id -> rule of every job a run submitted, from Snakemake's output."""
    found = re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/rule_(\w+)/", output)
    return dict(found)


def result_files(work: Path) -> dict[str, bytes]:
    """Every file under results/ but the logs and benchmarks (which say when and where each
    job ran): path -> bytes."""
    files = {}
    for path in sorted((work / "results").rglob("*")):
        relative = path.relative_to(work).as_posix()
        if path.is_file() and not relative.startswith(("results/logs/", "results/benchmarks/")):
            files[relative] = path.read_bytes()
    return files


def same_bytes(work: Path, reference: Path) -> None:
    """The same result files as the reference run's, byte for byte."""
    got, expected = result_files(work), result_files(reference)
    assert sorted(got) == sorted(expected)
    differing = [name for name in expected if got[name] != expected[name]]
    assert not differing, differing


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A four-node Slurm cluster on this machine for this module (two `big`, two `small`)."""
    missing = missing_programs()
    if missing:
        pytest.fail(f"Slurm test cluster needs {', '.join(missing)}: run ./setup.sh --tests")
    with SlurmCluster(tmp_path_factory.mktemp("slurm"), nodes=NODES) as running:
        yield running


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory, ecoli_dir, dh10b):
    """The three runs, started together: on one host, spread over the big nodes (methylation
    as NUMA instances, whole nodes), and on the small nodes, one of which dies while the
    methylation's shard 1 runs there."""
    root = tmp_path_factory.mktemp("slurm_runs")
    reads = shortest_reads(ecoli_dir / "reads.fasta", root / "short.fasta", READS)
    rows = [{**ecoli_row(ecoli_dir, dh10b, reads), "group": "native"}]
    config = yaml.safe_load(yaml.safe_dump(CONFIG))
    config["simulate"]["sim"]["reference"] = str(dh10b)
    host = str(instances_host(root / "instances.yaml"))
    local = write_project(root / "local", rows, {**config, "host": host})
    # The shards' merge with profiles/slurm's thread (samtools writes its command in the BAM).
    merge = ["--set-threads", "merge_alignment_shards=1"]
    spread = write_project(root / "spread", rows, config)
    lost = write_project(root / "lost", rows, config)
    env = {**cluster.env, **SITE_ENV}
    started = SimpleNamespace(
        local=Run(local, snakemake_command(local, 2, *TARGETS, *merge), dict(os.environ)),
        spread=Run(
            spread,
            slurm_command(spread, "--max-threads", "2", *TARGETS),
            {**env, "NUMAPORE_SLURM_PARTITION": "big", "NUMAPORE_HOST": host},
        ),
        lost=Run(
            lost,
            slurm_command(lost, "--max-threads", "2", *TARGETS),
            {**env, "NUMAPORE_SLURM_PARTITION": "small"},
        ),
    )
    started.killer = NodeKiller(cluster, started.lost, LOST_COMMENT)
    started.killer.start()
    try:
        yield started
    finally:
        for run in (started.local, started.spread, started.lost):
            run.stop()


def run_jobs(cluster: SlurmCluster, output: str) -> tuple[dict[str, dict], dict[str, str]]:
    """The run's jobs as sacct lists them (under its run id: the job name) and as Snakemake
    says it submitted them (job id -> rule)."""
    found = re.search(r"SLURM run ID: (\S+)", output)
    assert found, f"not a Slurm run:\n{output[-3000:]}"
    jobs = {j["JobID"]: j for j in cluster.jobs() if j["JobName"] == found.group(1)}
    return jobs, submitted_jobs(output)


def test_a_run_spread_over_the_nodes_ends_with_the_bytes_of_a_one_host_run(runs, cluster):
    runs.local.wait()
    output = runs.spread.wait()
    jobs, submitted = run_jobs(cluster, output)
    # sacct (slurmdbd) lists exactly the jobs the run submitted, all done, with the partition
    # and account the profile took from the environment, on at least two of its nodes.
    assert set(jobs) == set(submitted), (jobs, submitted)
    for jobid, job in jobs.items():
        assert job["State"] == "COMPLETED", job
        assert job["Comment"].startswith(f"rule_{submitted[jobid]}"), job
        assert (job["Partition"], job["Account"]) == ("big", ACCOUNT), job
    nodes = {job["NodeList"] for job in jobs.values()}
    assert len(nodes) >= 2 and nodes <= set(cluster.partitions["big"]), nodes
    rules = set(submitted.values())
    assert {"minimap2_index", "nanopolish_index", "align", "call_methylation"} <= rules
    assert {"simulate_modbam_reads", "stage_modbam_reads", "pileup_shard", "dmr_test"} <= rules
    assert not rules & LOCAL_RULES
    by_rule = {rule: [j for j, r in submitted.items() if r == rule] for rule in rules}
    assert len(by_rule["align"]) == 4 and len(by_rule["pileup_shard"]) == 4
    # Methylation in 2 chunks, each its own job; the instances strategy owns the whole node
    # (--exclusive: all its CPUs, at least every CPU of the host file's layout), the alignment
    # (strategy none) shares it.
    cpus = len(detect_topology().cpus)
    assert len(by_rule["call_methylation"]) == 2
    for jobid in by_rule["call_methylation"]:
        shown = cluster.run("scontrol", "show", "job", jobid).stdout
        assert "OverSubscribe=NO" in shown and f"CPUs/Task={cpus}" in shown, shown
        assert int(jobs[jobid]["AllocCPUS"]) == cluster.nodes[jobs[jobid]["NodeList"]].cpus
    for jobid in by_rule["align"]:
        assert "OverSubscribe=OK" in cluster.run("scontrol", "show", "job", jobid).stdout
    # Inside each of them the launcher ran 2 bound instances (numactl, as on a NUMA host).
    records = sorted((runs.spread.workdir / "results/logs/call_methylation").glob("*.run.json"))
    assert len(records) == 2
    for record in records:
        launched = yaml.safe_load(record.read_text())
        assert launched["strategy"] == "instances" and len(launched["processes"]) == 2
    same_bytes(runs.spread.workdir, runs.local.workdir)


def test_a_node_lost_mid_run_its_job_reruns_elsewhere_to_the_same_bytes(runs, cluster):
    jobid, node = runs.killer.join()
    output = runs.lost.wait()
    jobs, submitted = run_jobs(cluster, output)
    # Slurm marked the node down and the job NODE_FAIL; the plugin said so and Snakemake
    # submitted the job again, on the partition's other node; every other job ran once.
    assert f"SLURM-job '{jobid}' failed due to a node failure" in output, output[-3000:]
    assert jobs[jobid]["State"] == "NODE_FAIL" and jobs[jobid]["NodeList"] == node
    tries = [j for j in jobs.values() if j["Comment"] == LOST_COMMENT]
    assert [t["JobID"] for t in tries][0] == jobid and len(tries) == 2, tries
    rerun = tries[1]
    assert rerun["State"] == "COMPLETED", rerun
    assert rerun["NodeList"] in cluster.partitions["small"] and rerun["NodeList"] != node
    others = [j for j in jobs.values() if j["Comment"] != LOST_COMMENT]
    assert all(j["State"] == "COMPLETED" for j in others), others
    assert len({j["Comment"] for j in others}) == len(others)
    # The run's last lines name the job lost and its rerun.
    said = (
        f"numapore: job {LOST_JOB} lost with its node (Slurm job {jobid} on {node}: NODE_FAIL); "
        f"rerun as Slurm job {rerun['JobID']} on {rerun['NodeList']}: COMPLETED"
    )
    assert said in output.splitlines()[-20:], output[-3000:]
    assert sorted(submitted) == sorted(jobs)
    # Nothing of the lost job left behind, nothing partial: the files and bytes of one host.
    runs.local.wait()
    same_bytes(runs.lost.workdir, runs.local.workdir)
    # A job that fails wherever it runs (its input broken after the run: the simulated sample's
    # bedMethyl, which the contrast's counts read): tried on the partition as often as the
    # profile allows, then the run stops with one line naming it and where each try failed.
    bedmethyl = runs.lost.workdir / "results/sim/methylation/sim.minimap2.cpg.bedmethyl.gz"
    bedmethyl.write_bytes(b"not a bedMethyl file\n")
    again = Run(runs.lost.workdir, runs.lost.cmd, runs.lost.env, name="broken").wait(False)
    failed, _ = run_jobs(cluster, again)
    tries = [j for j in failed.values() if j["State"] == "FAILED"]
    assert len(tries) == 2 and tries[0]["Comment"] == tries[1]["Comment"], failed
    rule, _, wildcards = tries[0]["Comment"].removeprefix("rule_").partition("_wildcards_")
    assert rule == "dmr_counts", tries
    each = "; ".join(f"Slurm job {j['JobID']} on {j['NodeList']}: FAILED" for j in tries)
    named = [line for line in again.splitlines() if line.startswith("numapore: job ")]
    assert named == [
        f"numapore: job {rule} ({wildcards}) failed on every node it ran on ({each}); its "
        f"Slurm logs: .snakemake/slurm_logs/rule_{rule}/"
    ], again[-3000:]


# ---------------------------------------------------------------------------------------------
# The pieces, without a cluster


def test_modbam_staging_streams_into_its_align_job_on_slurm(cluster, tmp_path):
    """A modBAM sample on Slurm: its staging and align jobs are one Slurm job (a pipe group with
    the align job's CPUs; Snakemake sums the group's threads), and every read is realigned with
    the input's calls."""
    work = write_modbam_project(tmp_path / "run", ["unmapped"])
    bam = "results/unmapped/align/unmapped.minimap2.bam"
    command = slurm_command(work, "--max-threads", "2", bam)
    out = Run(work, command, {**cluster.env, **SITE_ENV, "NUMAPORE_SLURM_PARTITION": "big"}).wait()
    assert re.search(r"SLURM jobid \d+ \(log: \S*/group_\S*_align_stage_modbam_reads/", out), out
    got = calls_by_read(work / bam)
    source = calls_by_read(SUITE["unmapped"])
    assert got and got == {read: source[read] for read in got}
    assert not (work / "results/unmapped/reads/modbam/unmapped.fastq").exists()


@pytest.mark.parametrize(
    "host, step, whole_node, cpus",
    [
        ("opteron-6376", "alignment", True, 64),  # instances on 8 nodes
        ("xeon-2socket", "alignment", True, 64),  # auto on a 2-node layout: may pick instances
        ("xeon-2socket", "methylation", True, 64),  # interleave spreads over every node
        ("single-node", "methylation", True, None),  # auto, layout unknown until the job runs
        ("shared-node", "alignment", False, None),
        ("shared-node", "methylation", False, None),
    ],
)
def test_whole_node_request_follows_the_host_file(host, step, whole_node, cpus):
    config = load_host_config(host)
    assert needs_whole_node(config, step) is whole_node
    assert host_cpus(config) == cpus
    assert node_request(config, step) == ("--exclusive" if whole_node else None)
    assert job_cpus(config, step, 8) == (max(8, cpus or 0) if whole_node else 8)


def test_conversion_is_not_a_host_file_step():
    """The FAST5 conversion runs without numactl: a host file has no strategy for it."""
    with pytest.raises(ValueError, match="unknown step 'conversion'"):
        needs_whole_node(load_host_config("xeon-2socket"), "conversion")


def job_resources(dry_run: str, rule: str) -> list[str]:
    """The `resources:` lines of a rule's (or checkpoint's) jobs in a dry run's output."""
    blocks = re.findall(rf"^(?:rule|checkpoint) {rule}:\n((?:    .*\n)+)", dry_run, re.M)
    return [line for block in blocks for line in block.splitlines() if "resources:" in line]


def test_profile_takes_partition_account_and_host_from_the_environment(tmp_path, ecoli_dir, dh10b):
    scatter = {"scatter": {"alignment": 1, "methylation": 2}}
    work = write_project(tmp_path / "run", [ecoli_row(ecoli_dir, dh10b)], scatter)
    env = {
        **os.environ,
        "NUMAPORE_SLURM_PARTITION": "long",
        "NUMAPORE_SLURM_ACCOUNT": "lab42",
        "NUMAPORE_HOST": str(instances_host(tmp_path / "instances.yaml")),
    }
    result = forked_snakemake.run(
        slurm_command(work, "--dry-run", "--cores", "8"), capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    methylation = job_resources(result.stdout, "call_methylation")
    align = job_resources(result.stdout, "align")
    assert len(methylation) == 2 and len(align) == 1, result.stdout
    for line in methylation + align:
        assert "slurm_partition=long" in line and "slurm_account=lab42" in line
    # The host file from NUMAPORE_HOST: methylation as instances owns the node, alignment not.
    assert all("slurm_extra=--exclusive" in line for line in methylation)
    assert all("cpus_per_task=8" in line for line in methylation)
    assert "slurm_extra" not in align[0] and "mem_mb=16000" in align[0]
    # A partition's host file for other machines (8 NUMA nodes, 64 CPUs, instances): the
    # submitting host only reads it (each job checks it on its node), and every heavy job asks
    # for a whole node of that layout.
    # With host tuning on: the layout's 8 nodes make the alignment's strategies a candidate, so
    # a tuning job is planned, on a whole node of the partition, its files named for the
    # partition (a node type: tuned once, whichever node measures and whatever host submits).
    # (--configfile: a --config would replace the profile's config.)
    env["NUMAPORE_HOST"] = "opteron-6376"
    tune = tmp_path / "tune.yaml"
    tune.write_text('tune: "on"\n')
    result = forked_snakemake.run(
        slurm_command(work, "--dry-run", "--cores", "8", "--configfile", str(tune)),
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for line in job_resources(result.stdout, "call_methylation") + job_resources(
        result.stdout, "align"
    ):
        assert "slurm_extra=--exclusive" in line and "cpus_per_task=64" in line
    assert "numapore: tuning: nothing measured yet: no results/tuning/partition-long.json" in output
    said = "tuning: strategies: the alignment's and the methylation's measured on the first reads"
    assert said in output
    tune_jobs = job_resources(result.stdout, "tune_host")
    assert len(tune_jobs) == 1, output
    tune_job = tune_jobs[0]
    assert "slurm_partition=long" in tune_job and "slurm_extra=--exclusive" in tune_job
    assert (
        "output: results/tuning/partition-long.json, results/tuning/partition-long.yaml" in output
    )
    # Checked here when the command line replaces the profile's config (host_check: local).
    result = forked_snakemake.run(
        slurm_command(work, "--dry-run", "--config", "host=opteron-6376"),
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert result.returncode != 0
    assert "opteron-6376.yaml does not match this machine" in result.stdout + result.stderr
    # Without the variables: no partition or account (the plugin asks Slurm), host shared-node.
    # Host tuning there: the cluster's default partition's tuning (this sample is too small to
    # pay back measuring its signal's I/O modes: nothing is measured, and the run says why).
    plain = {k: v for k, v in os.environ.items() if not k.startswith("NUMAPORE_")}
    result = forked_snakemake.run(
        slurm_command(work, "--dry-run", "--configfile", str(tune)),
        capture_output=True, text=True, env=plain,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "tuning: nothing measured yet: no results/tuning/partition-default.json" in output
    assert "numapore: tuning: not measured: " in output and "tune_host" not in result.stdout
    for line in job_resources(result.stdout, "call_methylation"):
        assert "slurm_partition" not in line and "slurm_account" not in line
        assert "slurm_extra" not in line


def local_rules() -> set[str]:
    """The rules workflow/Snakefile's localrules: block names."""
    snakefile = (REPO / "workflow" / "Snakefile").read_text()
    block = re.search(r"^localrules:\n((?:    \w+,\n)+)", snakefile, re.M)
    assert block, "workflow/Snakefile has no localrules: block"
    return set(re.findall(r"\w+", block.group(1)))


def rule_bodies() -> dict[str, str]:
    """Every rule of workflow/rules/*.smk: its name and the text of its body."""
    rules = {}
    for path in (REPO / "workflow" / "rules").glob("*.smk"):
        for name, body in re.findall(r"^rule (\w+):\n((?:(?:    .*)?\n)*)", path.read_text(), re.M):
            rules[name] = body
    return rules


def test_localrules_exist_and_none_has_shadow():
    local, rules = local_rules(), {**rule_bodies(), "all": ""}
    assert local <= set(rules), f"localrules names unknown rules: {local - set(rules)}"
    shadowed = {name for name in local if "    shadow:" in rules[name]}
    assert not shadowed, f"local rules with shadow (must be cluster jobs): {shadowed}"
    assert not local & {"align", "call_methylation", "nanopolish_index", "minimap2_index"}


def test_cluster_jobs_that_hold_no_core_get_a_thread_on_slurm():
    """A rule whose threads may be 0 locally (HOLDS_NO_CORE) would ask sbatch for
    --cpus-per-task=0, which Slurm refuses: each such cluster job is named in the Slurm
    profile's set-threads (the light ones run where Snakemake runs: localrules)."""
    # alignment_reports holds none where a later step runs beside it (alignment_reports_threads).
    may_hold_none = ("    threads: HOLDS_NO_CORE", "    threads: alignment_reports_threads")
    holding_none = {n for n, body in rule_bodies().items() if any(t in body for t in may_hold_none)}
    assert {"nanopolish_index", "alignment_reports", "read_accounting"} <= holding_none
    threads = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    cluster_jobs = holding_none - local_rules()
    assert {r: threads["set-threads"].get(r) for r in cluster_jobs} == dict.fromkeys(
        cluster_jobs, 1
    )


def test_cluster_jobs_with_the_run_cores_are_named_in_the_profile():
    """A rule whose threads are the run's cores asks sbatch for --cpus-per-task of nothing (a
    cluster run has no --cores) while its srun step asks for the cores of the submitting
    host: Slurm refuses the step. Each such cluster job is named in the profile's set-threads
    or asks for its CPUs itself (cpus_per_task)."""
    threads = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    named = set(threads["set-threads"])
    run_cores = {
        name
        for name, body in rule_bodies().items()
        if re.search(r"^    threads: (max\(1, )?RUN_CORES", body, re.M)
    }
    assert {"align", "simulate_modbam_reads", "pileup_haplotypes"} <= run_cores
    unnamed = {
        name
        for name in run_cores - local_rules() - named
        if "cpus_per_task=" not in rule_bodies()[name]
    }
    assert not unnamed, f"cluster jobs with the run's cores not in profiles/slurm: {unnamed}"


def test_node_line_describes_this_machine():
    line = node_line()
    assert line.startswith("NodeName=")
    assert f"CPUs={os.cpu_count()}" in line
    assert re.search(r"RealMemory=\d+", line)


# What a job on a partition runs: its partition's host file (config hosts:), checked on its node.
PARTITION_PICK = """
import json, os, sys
from numapore.base.errors import InputError
from numapore.execution.cluster import partition_hosts
config = {"hosts": {"numapore": "auto-node.yaml", "other": "xeon-2socket"}, "host_check": "jobs"}
try:
    print(json.dumps({"partition": os.environ["SLURM_JOB_PARTITION"],
                      "files": partition_hosts(config, "run.yaml", main_process=False)}))
except InputError as err:
    print(json.dumps({"partition": os.environ["SLURM_JOB_PARTITION"], "error": str(err)}))
"""


def test_a_job_takes_its_partitions_host_file(cluster, tmp_path):
    """The node in two partitions (the second made at run time: scontrol create): a real Slurm
    job on each takes its partition's host file from config hosts: (SLURM_JOB_PARTITION, as
    Slurm sets it) and checks it on its node: on `numapore`, a file of this machine's layout;
    on `other`, the shipped two-socket file, which this node is not: one line naming
    hosts.other."""
    (tmp_path / "auto-node.yaml").write_text("topology: auto\n")
    (tmp_path / "pick.py").write_text(PARTITION_PICK)
    cluster.run("scontrol", "create", "PartitionName=other", "Nodes=ALL", "State=UP")
    picked = {}
    try:
        for partition in (PARTITION, "other"):
            out = tmp_path / f"{partition}.out"
            cluster.run(
                "sbatch", "--wait", f"--partition={partition}", f"--chdir={tmp_path}",
                f"--output={out}", "--mem=500", "--wrap",
                f"{REPO / '.venv/bin/python'} {tmp_path / 'pick.py'}",
            )  # fmt: skip
            picked[partition] = json.loads(out.read_text().splitlines()[-1])
    finally:
        cluster.run("scontrol", "delete", "PartitionName=other")
    assert picked[PARTITION] == {
        "partition": PARTITION,
        "files": ["run.yaml", str(tmp_path / "auto-node.yaml"), "host"],
    }
    assert picked["other"]["partition"] == "other"
    error = picked["other"]["error"]
    assert error.startswith("config hosts.other: ") and "xeon-2socket.yaml does not match" in error
