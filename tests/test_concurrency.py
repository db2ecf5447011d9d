"""Concurrency: jobs running at once share nothing writable. Two samples in one run (2 cores,
two jobs at a time) and, beside it, a run with another host strategy and I/O mode: every file any
process writes (strace -f: open for writing, rename, link) is written by one job only, the two
runs write disjoint sets of files, and the outputs are byte for byte those of the same runs made
one after the other. The two samples' run at once asks for the default target (the report's
jobs run at once too, traced); the same run one after the other for every output but the second
sample's report files (REPORT_RULES), the only ones not compared; the run beside it (strategy
instances, the first sample in a folder of its own) for the sample's alignment and methylation
outputs (targets). The runs are made once (runs_at_once), for the two tests that check them.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import forked_snakemake
from conftest import host_file
from reliability import project, small_data, snapshot, without_temporary

from project import snakemake_command

N_READS = 8
# Two jobs at a time on 2 cores: every heavy step asks for one thread (else each takes both).
ONE_THREAD = ["--set-threads", "fast5_to_blow5=1", "align=1", "call_methylation=1"]
# The report's rules (figures, provenance page, MultiQC): traced in the run at once; in the run
# one after the other only for the first sample's report files (a third of its CPU otherwise).
REPORT_RULES = [
    "report_alignment_qc", "report_methylation", "report_accounting", "report_accuracy",
    "report_provenance", "multiqc_custom_content", "multiqc",
    "report_calls_qc", "multiqc_calls_qc",
]  # fmt: skip
SYSCALLS = "openat,creat,rename,renameat,renameat2,link,linkat,symlink,symlinkat,chdir,"
SYSCALLS += "clone,clone3,fork,vfork,execve"
# Not the workflow's files: devices, the kernel, Python's own bytecode cache (written with a
# unique temporary name and renamed: safe to share by design).
IGNORED = re.compile(r"^/(dev|proc|sys)/|/__pycache__/")

_CHILD = re.compile(r"^\S+ (?:(?:clone3?|fork|vfork)\(|<\.\.\. \w+ resumed>).*\)\s+=\s+(\d+)$")
_EXEC = re.compile(r'^\S+ execve\("[^"]*", \[(.*?)\]')
_CWD = re.compile(r"AT_FDCWD<([^>]*)>")
_OPEN = re.compile(
    r'^\S+ (?:openat|creat)\(.*"((?:[^"\\]|\\.)*)", (O_[A-Z_|]+).*\)\s+=\s+\d+<(.+)>$'
)
_RENAME = re.compile(
    r'^\S+ (rename|link|symlink)\("(?:[^"\\]|\\.)*", "((?:[^"\\]|\\.)*)"\)\s+=\s+0'
)
_RENAMEAT = re.compile(
    r'^\S+ (?:renameat2?|linkat|symlinkat)\(.*(?:AT_FDCWD|\d+)<([^>]*)>, "((?:[^"\\]|\\.)*)"'
    r"(?:, [A-Z_|0]+)?\)\s+=\s+0"
)
_CHDIR = re.compile(r'^\S+ chdir\("((?:[^"\\]|\\.)*)"\)\s+=\s+0')


def traced(cmd: list[str], trace_dir: Path) -> list[str]:
    """cmd under strace -f (one trace file per process, fds decoded to paths). --seccomp-bpf:
    the processes stop only at the traced calls, not at every system call (the traced runs took
    about twice their CPU without it)."""
    trace_dir.mkdir(parents=True)
    return ["strace", "-f", "-ff", "--seccomp-bpf", "-ttt", "-y", "-qq", "-e", f"trace={SYSCALLS}",
            "-o", str(trace_dir / "p"), *cmd]  # fmt: skip


def written_paths(trace_dir: Path) -> dict[str, set[str]]:
    """From a strace -ff folder: each file written (absolute path) -> the jobs that wrote it.

    A job is a program Snakemake started (a direct child that ran execve) with all its
    descendants, named by its command line; Snakemake's own process and threads: 'snakemake'."""
    parent, command, writes = {}, {}, defaultdict(set)
    for path in trace_dir.glob("p.*"):
        pid = int(path.suffix[1:])
        cwd = None
        for line in path.read_text(errors="replace").splitlines():
            if m := _CHILD.match(line):
                parent[int(m.group(1))] = pid
            elif (m := _EXEC.match(line)) and pid not in command:
                command[pid] = m.group(1)[:200]
            if m := _CWD.search(line):
                cwd = m.group(1)
            if m := _CHDIR.match(line):
                cwd = str(Path(cwd or "/", m.group(1)).resolve())
            elif (m := _OPEN.match(line)) and re.search(r"O_WRONLY|O_RDWR|O_CREAT", m.group(2)):
                writes[pid].add(m.group(3))
            elif m := _RENAMEAT.match(line):
                writes[pid].add(str(Path(m.group(1), m.group(2))))
            elif (m := _RENAME.match(line)) and cwd:
                writes[pid].add(str(Path(cwd, m.group(2))))
    (root,) = {p for p in command if p not in parent}
    # Snakemake's own: its process and the threads (or forks) it made that ran no program; a
    # job may be started from one of its threads (the thread is then the job's parent).
    own = {root}
    while grown := {p for p, up in parent.items() if up in own and p not in command} - own:
        own |= grown

    def job(pid: int) -> str:
        """The job a process belongs to: its ancestor directly below Snakemake's own."""
        while pid not in own and parent.get(pid, root) not in own:
            pid = parent[pid]
        if pid in own or pid not in command:
            return "snakemake"
        return f"{pid}: {command[pid]}"

    by_path: dict[str, set[str]] = defaultdict(set)
    for pid, paths in writes.items():
        for p in paths:
            if not IGNORED.search(p):
                by_path[p].add(job(pid))
    return by_path


def shared_by_jobs(by_path: dict[str, set[str]]) -> dict[str, set[str]]:
    """Files written by more than one job (Snakemake's own bookkeeping process included)."""
    return {p: jobs for p, jobs in by_path.items() if len(jobs) > 1}


def test_written_paths_follow_processes_and_renames(tmp_path):
    script = "cd sub && echo a > a.tmp && mv a.tmp a.txt && (echo b > ../b.txt)"
    (tmp_path / "sub").mkdir()
    trace = tmp_path / "trace"
    subprocess.run(traced(["bash", "-c", script], trace), cwd=tmp_path, check=True)
    by_path = written_paths(trace)
    sub = tmp_path.resolve() / "sub"
    assert {str(sub / "a.tmp"), str(sub / "a.txt"), str(tmp_path.resolve() / "b.txt")} <= set(
        by_path
    )
    assert by_path[str(sub / "a.txt")] != {"snakemake"}  # written by mv, a child of bash
    # A program started from a thread is a job of its own, as one started by the main thread.
    code = "import subprocess as s, threading as t; r = t.Thread(target=s.run, args=(%r,)); "
    code += "r.start(); r.join(); s.run(%r)"
    code %= (["touch", "thread.txt"], ["touch", "main.txt"])
    subprocess.run(traced([sys.executable, "-c", code], trace / "t"), cwd=tmp_path, check=True)
    by_path = written_paths(trace / "t")
    for name in ("thread.txt", "main.txt"):
        (writer,) = by_path[str(tmp_path.resolve() / name)]
        assert writer.endswith('"touch", "' + name + '"'), writer


@pytest.fixture(scope="module")
def two_samples(tmp_path_factory, ecoli_dir):
    """Two samples of different reads."""
    root = tmp_path_factory.mktemp("two_samples")
    return {
        "alpha": small_data(root / "alpha", ecoli_dir, N_READS),
        "beta": small_data(root / "beta", ecoli_dir, N_READS, offset=N_READS),
    }


# The report's files of one sample (the default target's; report_figures in rules/common.smk).
REPORT_FILES = ["alignment_qc.png", "methylation.png", "accounting.png", "provenance.html"]
REPORT_FILES += ["cpg.calls_qc.png", "cpg.calls_qc.html"]  # the QC of the calls (rules/qc.smk)


@pytest.fixture(scope="module")
def runs_at_once(tmp_path_factory, two_samples) -> dict:
    """The runs the two tests below check: the two samples with strategy interleave and slow5
    (ONE_THREAD), one after the other ('apart'), and sample alpha alone with strategy instances
    (2 per node) and fast5 ('sequential'); then the same two runs at once, each traced: the two
    samples' ('together', the default target) and alpha's ('beside'). Their folders, traces,
    exit codes and logs."""
    root = tmp_path_factory.mktemp("at_once")
    interleave = host_file(root / "interleave.yaml", "interleave", io_mode="slow5")
    instances = host_file(root / "instances.yaml", "instances", io_mode="fast5",
                          instances_per_node=2)  # fmt: skip
    together_cmd = ["--config", f"host={interleave}", *ONE_THREAD]
    beside_cmd = ["--config", f"host={instances}", "--", *targets("alpha")]
    run = functools.partial(forked_snakemake.run, check=True, capture_output=True)
    # One after the other: sample alpha's outputs and report files, then the rest (sample
    # beta's) but the report's (beta's report files are not made: a third of the run's CPU).
    apart = project(root / "apart", two_samples)
    alpha_reports = [f"results/alpha/report/alpha.minimap2.{name}" for name in REPORT_FILES]
    run([*snakemake_command(apart, 2, *together_cmd), "--", *targets("alpha"), *alpha_reports])
    run([*snakemake_command(apart, 2, *together_cmd, "--omit-from", *REPORT_RULES)])
    sequential = project(root / "sequential", {"alpha": two_samples["alpha"]})
    run(snakemake_command(sequential, 2, *beside_cmd))
    # Both at once, each traced.
    works = {
        "together": project(root / "together", two_samples),
        "beside": project(root / "beside", {"alpha": two_samples["alpha"]}),
    }
    args = {"together": together_cmd, "beside": beside_cmd}
    procs = {}
    for name, work in works.items():
        cmd = traced(snakemake_command(work, 2, *args[name]), root / f"trace-{name}")
        procs[name] = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    logs = {name: proc.communicate()[0] for name, proc in procs.items()}
    return {
        "apart": apart, "sequential": sequential, **works, "root": root, "logs": logs,
        "returncodes": {name: proc.returncode for name, proc in procs.items()},
    }  # fmt: skip


def test_two_samples_at_once_share_nothing_and_match_one_after_the_other(runs_at_once):
    runs = runs_at_once
    assert runs["returncodes"]["together"] == 0, runs["logs"]["together"][-6000:]
    at_once = snapshot(runs["together"])
    reports = {rel for rel in at_once if "/report/" in rel}
    alpha_reports = {rel for rel in reports if rel.startswith("results/alpha/")}
    assert alpha_reports and reports - alpha_reports, sorted(reports)
    one_by_one = snapshot(runs["apart"])
    # every file byte for byte, alpha's report included; beta's report is made at once only
    assert not (reports - alpha_reports) & set(one_by_one)
    compared = {rel: data for rel, data in at_once.items() if rel not in reports - alpha_reports}
    assert without_temporary(compared) == without_temporary(one_by_one)
    by_path = written_paths(runs["root"] / "trace-together")
    assert not shared_by_jobs(by_path), shared_by_jobs(by_path)
    jobs = {j for js in by_path.values() for j in js} - {"snakemake"}
    assert len(jobs) >= 2 * 6, jobs  # the per-sample jobs of both samples were traced
    # Two jobs did run at once (Snakemake's log: a second job started before the first ended).
    assert overlapping_jobs(runs["logs"]["together"]), runs["logs"]["together"][-2000:]


def targets(sample: str) -> list[str]:
    """The default target's files of one sample (minimap2)."""
    prefix = f"results/{sample}"
    return [
        f"{prefix}/align/{sample}.minimap2.bam.bai",
        f"{prefix}/align/{sample}.minimap2.stats.txt",
        f"{prefix}/align/{sample}.minimap2.summary.tsv",
        f"{prefix}/methylation/{sample}.minimap2.cpg.frequency.tsv",
        f"{prefix}/methylation/{sample}.minimap2.cpg.bedmethyl.gz.tbi",
    ]


def overlapping_jobs(log: str) -> bool:
    """True when Snakemake's output shows a job starting while another one runs."""
    running = 0
    for line in log.splitlines():
        if re.match(r"^(local)?rule \w+:", line) and not line.startswith("localrule all"):
            running += 1
            if running > 1:
                return True
        elif line.startswith("Finished jobid"):
            running -= 1
    return False


def test_two_strategies_at_once_share_nothing_and_match_sequential_runs(runs_at_once):
    """The two samples' run (strategy interleave, slow5) and alpha's beside it (instances,
    fast5), at once: each matches its run made alone, no file is written by two jobs of a run,
    and the two runs write disjoint sets of files."""
    runs = runs_at_once
    assert runs["returncodes"]["beside"] == 0, runs["logs"]["beside"][-3000:]
    assert snapshot(runs["beside"]) == snapshot(runs["sequential"])
    written = {
        name: written_paths(runs["root"] / f"trace-{name}") for name in ("together", "beside")
    }
    for name, by_path in written.items():
        assert not shared_by_jobs(by_path), (name, shared_by_jobs(by_path))
    both = set(written["together"]) & set(written["beside"])
    assert not both, sorted(both)[:20]
