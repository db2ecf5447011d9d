"""The pipeline on a real Slurm cluster: slurmctld, slurmd, slurmdbd (MariaDB) and munge started
on localhost by tests/slurm_cluster.py, jobs submitted through profiles/slurm and
snakemake-executor-plugin-slurm. End to end (sacct lists the jobs, the outputs equal a local
run's), and a Slurm job cancelled mid-run: the rerun of the same command resumes and finishes
with the outputs of an uninterrupted run.

The three workflow runs (local baseline, uninterrupted Slurm run, Slurm run to be cancelled)
start together in one module fixture: most of a Slurm run is waiting for jobs, and the node's two
CPUs serve both Slurm runs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import forked_snakemake
import pandas as pd
import pytest
import yaml
from conftest import REPO, call_set, ecoli_row, primary_mapped
from slurm_cluster import (
    ACCOUNT,
    PARTITION,
    SlurmCluster,
    missing_programs,
    node_line,
)
from test_modbam_kind import SUITE, calls_by_read, write_modbam_project
from test_workflow import shortest_reads

from numapore.execution.cluster import host_cpus, job_cpus, needs_whole_node, node_request
from numapore.execution.hosts import load_host_config
from numapore.execution.topology import detect_topology
from project import snakemake_command, write_project

BAM = "results/ecoli/align/ecoli.minimap2.bam"
CALLS = "results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv"
FREQUENCY = "results/ecoli/methylation/ecoli.minimap2.cpg.frequency.tsv"
# What the runs ask for: the outputs compared (the local and the uninterrupted run), and in the
# run to be cancelled also the bedMethyl (the pileup of the modBAM made from the calls: the jobs
# after call_methylation, which its rerun submits). Not the report and MultiQC (not tested here).
COMPARED = [BAM, CALLS, FREQUENCY]
TARGETS = [*COMPARED, "results/ecoli/methylation/ecoli.minimap2.cpg.bedmethyl.gz"]
READS = 40  # the shortest reads of the shared E. coli set: a quick run
SCATTER = {"scatter": {"alignment": 1, "methylation": 2}}
# Host tuning in the uninterrupted run: its job on the partition (the sample is too small to
# pay back measuring: the check is off, so that the job runs); not in the run to be cancelled,
# whose chain of Slurm jobs is the module's longest (each job costs tens of seconds of polling).
TUNED = {"tune": "on", "tuning": {"reads": 4, "check_payback": False}}
# The site's partition and account, as a user sets them for profiles/slurm.
SITE_ENV = {"NUMAPORE_SLURM_PARTITION": PARTITION, "NUMAPORE_SLURM_ACCOUNT": ACCOUNT}
# Quick polling for the tests: the plugin's first status check 5 s after a job finished (default
# 40 s); it then backs off by 10 s per check while no job finished (most jobs here take 10-20 s).
POLLING = ["--slurm-init-seconds-before-status-checks", "5", "--seconds-between-status-checks", "5"]
# Rules that never go to Slurm in these runs (localrules of workflow/Snakefile).
LOCAL_RULES = {"split_alignments", "merge_methylation_calls"}
TIMEOUT = 600


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


def cancel_running_shard(
    cluster: SlurmCluster, run: Run, shard: str, timeout: float = TIMEOUT
) -> str:
    """scancel the call_methylation job of a shard once nanopolish runs in it; its Slurm id."""
    log = run.workdir / f"results/logs/call_methylation/ecoli.minimap2.cpg.{shard}.log"
    comment = f"rule_call_methylation_wildcards_ecoli_minimap2_cpg_{shard}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and run.proc.poll() is None:
        if log.exists():  # the job's step has started the tool
            queue = cluster.run("squeue", "-h", "-o", "%i|%k|%Z|%T").stdout
            for line in queue.splitlines():
                jobid, job_comment, workdir, state = line.split("|")
                if job_comment == comment and Path(workdir) == run.workdir and state == "RUNNING":
                    cluster.run("scancel", jobid)
                    return jobid
        time.sleep(0.2)
    raise AssertionError(f"no running call_methylation job for shard {shard}:\n{run.tail()}")


class Canceller(threading.Thread):
    """cancel_running_shard in the background; join() returns the cancelled job's id."""

    def __init__(self, cluster: SlurmCluster, run: Run, shard: str):
        """A thread that will cancel the shard's job of run (start() it)."""
        super().__init__(daemon=True)
        self.args_ = (cluster, run, shard)
        self.jobid: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        """Thread body: record the job id or the error."""
        try:
            self.jobid = cancel_running_shard(*self.args_)
        except BaseException as err:  # re-raised in the test by join()
            self.error = err

    def join(self, timeout: float | None = TIMEOUT) -> str:
        """Wait for the cancellation; the cancelled job's id (its error re-raised)."""
        super().join(timeout)
        if self.error is not None:
            raise self.error
        assert self.jobid is not None, "the cancelling thread did not finish"
        return self.jobid


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


def same_results(work: Path, reference: Path) -> None:
    """Primary alignments, per-read calls (as sets) and site frequencies equal the reference's."""
    assert primary_mapped(work / BAM) == primary_mapped(reference / BAM)
    assert call_set(work / CALLS) == call_set(reference / CALLS)
    pd.testing.assert_frame_equal(
        pd.read_csv(work / FREQUENCY, sep="\t"), pd.read_csv(reference / FREQUENCY, sep="\t")
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A one-node Slurm cluster on localhost for this module."""
    missing = missing_programs()
    if missing:
        pytest.fail(f"Slurm test cluster needs {', '.join(missing)}: run ./setup.sh")
    with SlurmCluster(tmp_path_factory.mktemp("slurm")) as running:
        yield running


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory, ecoli_dir, dh10b):
    """The three runs, started together: local baseline, uninterrupted Slurm run (methylation
    as NUMA instances, whole nodes), Slurm run whose shard 1 call_methylation job is cancelled."""
    root = tmp_path_factory.mktemp("slurm_runs")
    reads = shortest_reads(ecoli_dir / "reads.fasta", root / "short.fasta", READS)
    rows = [ecoli_row(ecoli_dir, dh10b, reads)]
    slurm_env = {**cluster.env, **SITE_ENV}
    local = write_project(root / "local", rows)
    whole = write_project(root / "whole", rows, SCATTER | TUNED)
    killed = write_project(root / "killed", rows, SCATTER)
    host = str(instances_host(root / "instances.yaml"))
    started = SimpleNamespace(
        local=Run(local, snakemake_command(local, 2, *COMPARED), dict(os.environ)),
        whole=Run(
            whole,
            slurm_command(whole, "--max-threads", "2", *COMPARED),
            {**slurm_env, "NUMAPORE_HOST": host},
        ),
        killed=Run(killed, slurm_command(killed, "--max-threads", "1", *TARGETS), slurm_env),
    )
    started.canceller = Canceller(cluster, started.killed, "1-of-2")
    started.canceller.start()
    try:
        yield started
    finally:
        for run in (started.local, started.whole, started.killed):
            run.stop()


def test_pipeline_runs_through_slurm_and_matches_a_local_run(runs, cluster):
    runs.local.wait()
    output = runs.whole.wait()
    found = re.search(r"SLURM run ID: (\S+)", output)
    assert found, f"not a Slurm run:\n{output[-3000:]}"
    run_id = found.group(1)
    submitted = submitted_jobs(output)
    # sacct (slurmdbd) lists exactly the jobs the run submitted, under its run id, all done,
    # with the partition and account the profile took from the environment.
    jobs = {j["JobID"]: j for j in cluster.jobs() if j["JobName"] == run_id}
    assert set(jobs) == set(submitted), (jobs, submitted)
    for jobid, job in jobs.items():
        assert job["State"] == "COMPLETED", job
        assert job["Comment"].startswith(f"rule_{submitted[jobid]}"), job
        assert (job["Partition"], job["Account"]) == (PARTITION, ACCOUNT), job
    rules = set(submitted.values())
    assert {"minimap2_index", "nanopolish_index", "align", "call_methylation"} <= rules
    assert not rules & LOCAL_RULES
    # Methylation in 2 chunks, each its own job; the instances strategy owns the whole node
    # (--exclusive, every CPU of the host file's layout), the alignment (strategy none) shares it.
    cpus = len(detect_topology().cpus)
    by_rule = {rule: [j for j, r in submitted.items() if r == rule] for rule in rules}
    assert len(by_rule["call_methylation"]) == 2
    for jobid in by_rule["call_methylation"]:
        assert "OverSubscribe=NO" in cluster.run("scontrol", "show", "job", jobid).stdout
        assert int(jobs[jobid]["AllocCPUS"]) == cpus
    (align_job,) = by_rule["align"]
    assert "OverSubscribe=OK" in cluster.run("scontrol", "show", "job", align_job).stdout
    # Host tuning ran once, as a Slurm job on the partition's node, as the calling's node is
    # asked for (whole); its files named for the partition (the job parsed the workflow there
    # and found the same name); a later run on the partition reuses it without a job.
    (tune_job,) = by_rule["tune_host"]
    assert "OverSubscribe=NO" in cluster.run("scontrol", "show", "job", tune_job).stdout
    name = f"partition-{PARTITION}"
    record = json.loads((runs.whole.workdir / f"results/tuning/{name}.json").read_text())
    assert record["name"] == name and record["host"] == socket.gethostname().split(".")[0]
    assert record["io_mode"] in record["candidates"] and record["probe"]["reads"] == 4
    assert f"numapore: tuning: nothing measured yet: no results/tuning/{name}.json" in output
    again = forked_snakemake.run(
        [*runs.whole.cmd, "--dry-run"], cwd=runs.whole.workdir, capture_output=True, text=True,
        env=runs.whole.env,
    )  # fmt: skip
    said = again.stdout + again.stderr
    assert f"numapore: tuning: reusing results/tuning/{name}.json (measured " in said, said
    assert "tune_host" not in again.stdout and "Nothing to be done" in said
    # Inside each of them the launcher ran 2 bound instances (numactl, as on a NUMA host).
    records = sorted((runs.whole.workdir / "results/logs/call_methylation").glob("*.run.json"))
    assert len(records) == 2
    for record in records:
        launched = yaml.safe_load(record.read_text())
        assert launched["strategy"] == "instances" and len(launched["processes"]) == 2
    same_results(runs.whole.workdir, runs.local.workdir)


def test_cancelled_slurm_job_resumes_to_the_results_of_an_uninterrupted_run(runs, cluster):
    jobid = runs.canceller.join()
    first = runs.killed.wait(expect_success=False)
    assert f"SLURM-job '{jobid}' failed" in first and "CANCELLED" in first
    (cancelled,) = [j for j in cluster.jobs() if j["JobID"] == jobid]
    assert cancelled["State"].startswith("CANCELLED"), cancelled
    # The same command again: only the cancelled shard goes to Slurm again, then the merges, the
    # modBAM made from the merged calls (methylation_modbam, which also indexes it) and its
    # pileup into bedMethyl.
    rerun = Run(runs.killed.workdir, runs.killed.cmd, runs.killed.env, name="rerun").wait()
    again = list(submitted_jobs(rerun).values())
    assert again.count("call_methylation") == 1, rerun
    assert set(again) == {"call_methylation", "methylation_modbam", "pileup"}, rerun
    assert "rule_call_methylation/ecoli_minimap2_cpg_1-of-2/" in rerun
    runs.whole.wait()
    same_results(runs.killed.workdir, runs.whole.workdir)


# ---------------------------------------------------------------------------------------------
# The pieces, without a cluster


def test_modbam_staging_streams_into_its_align_job_on_slurm(cluster, tmp_path):
    """A modBAM sample on Slurm: its staging and align jobs are one Slurm job (a pipe group with
    the align job's CPUs; Snakemake sums the group's threads), and every read is realigned with
    the input's calls."""
    work = write_modbam_project(tmp_path / "run", ["unmapped"])
    bam = "results/unmapped/align/unmapped.minimap2.bam"
    command = slurm_command(work, "--max-threads", "2", bam)
    out = Run(work, command, {**cluster.env, **SITE_ENV}).wait()
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
    work = write_project(tmp_path / "run", [ecoli_row(ecoli_dir, dh10b)], SCATTER)
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
