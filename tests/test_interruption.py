"""Interruption: Snakemake and all its jobs killed (SIGKILL to the process group) at seeded random
points of the conversion, alignment and methylation steps, and the same command rerun each time,
ends in the outputs of an uninterrupted run byte for byte; after every kill no file under its
final name is partial (scripts write under .tmp.<name> and rename, and so do shell rules with
mv); Snakemake's incomplete markers name exactly what was running.

The kill points differ in the code they interrupt: first each step's job while its tool writes
(partial files under temporary names, a shadow folder, a scratch folder of shards), then the run
is completed and checked; then one kill as the last step's job starts (the jobs before it just
recorded as done, its shadow folder being made), and the final run. The runs ask for the steps'
outputs and the frequency table, not the report (nothing of it is killed here).

Byte for byte includes the BAM: its @PG header lines hold the tools' command lines, whose paths
are relative to the project folder and the same in every run (numapore.base.atomic's temporary names
carry no process id). Logs and benchmarks (timings) are not compared.
"""

from __future__ import annotations

import base64
import gc
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import forked_snakemake
from conftest import host_file
from reliability import debris, project, small_data, snapshot, without_temporary

from numapore.base.atomic import atomic_output, atomic_outputs, scratch_dir, temp_name
from project import snakemake_command
from numapore.base.workdir import (
    RUN_LOCK,
    prepare_exit,
    release_stale_locks,
    remove_dead_shadows,
)

N_READS = 30
# Seeded: NUMAPORE_KILL_SEED=<seed> repeats a run's kill times; the seed is printed.
SEED = int(os.environ.get("NUMAPORE_KILL_SEED", random.randrange(1_000_000)))
STEP_RULES = {
    "conversion": "fast5_to_blow5",
    "alignment": "align",
    "methylation": "call_methylation",
}
# A kill inside each step's job, then one as the last step's job starts (the module's docstring).
N_KILLS = len(STEP_RULES) + 1
# A step is done once its outputs are there (they appear complete or not at all).
STEP_OUTPUTS = {
    "conversion": ["results/ecoli/signal/ecoli.blow5", "results/ecoli/signal/ecoli.blow5.idx"],
    "alignment": ["results/ecoli/align/ecoli.minimap2.bam"],
    "methylation": ["results/ecoli/methylation/ecoli.minimap2.cpg.calls.tsv"],
}
# What every run here asks for: the steps' outputs and, after the calls, the frequency table.
TARGETS = [
    *(path for paths in STEP_OUTPUTS.values() for path in paths),
    "results/ecoli/methylation/ecoli.minimap2.cpg.frequency.tsv",
]
RULE_LINE = re.compile(r"^(?:local)?rule (\w+):")


def session_processes(sid: int) -> list[str]:
    """Live (non-zombie) processes of a session: 'pid state command'."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(f"{pid} {fields[0]} {stat.split(' (', 1)[1].split(')')[0]}")
    return found


def incomplete_markers(work: Path) -> list[str]:
    """The outputs Snakemake has marked incomplete (jobs started, not finished)."""
    folder = work / ".snakemake" / "incomplete"
    if not folder.is_dir():
        return []
    return sorted(base64.b64decode(p.name).decode() for p in folder.iterdir() if p.is_file())


def run_and_kill(cmd: list[str], rule: str, delay_fraction: float, durations: dict) -> dict:
    """Run cmd in its own session; once `rule` starts, wait delay_fraction of its measured
    duration and SIGKILL the whole process group. Returns what happened."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    started, lines = threading.Event(), []

    def read() -> None:
        """Collect Snakemake's output; flag the target rule's start."""
        for line in proc.stdout:
            lines.append(line)
            match = RULE_LINE.match(line)
            if match and match.group(1) == rule:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while not started.wait(0.05):
        if proc.poll() is not None:
            reader.join()
            return {"killed": False, "returncode": proc.returncode, "output": "".join(lines)}
    delay = delay_fraction * durations[rule]
    time.sleep(delay)
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    reader.join(timeout=10)
    deadline = time.monotonic() + 10
    while session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {
        "killed": killed,
        "delay": delay,
        "returncode": proc.returncode,
        "survivors": session_processes(proc.pid),
        "rules": [m.group(1) for line in lines if (m := RULE_LINE.match(line))],
        "output": "".join(lines),
    }


def benchmark_seconds(work: Path, rule: str) -> float:
    """Wall seconds of a rule's (single) job from its benchmark file."""
    (path,) = (work / "results/benchmarks" / rule).glob("*.tsv")
    return float(path.read_text().splitlines()[1].split("\t")[0])


def benchmark_start(work: Path, rule: str) -> float:
    """When a rule's (single) job started: its benchmark file's time less its wall seconds."""
    (path,) = (work / "results/benchmarks" / rule).glob("*.tsv")
    return path.stat().st_mtime - benchmark_seconds(work, rule)


def test_killed_runs_resume_to_the_uninterrupted_outputs(tmp_path, ecoli_dir):
    print(f"kill seed: {SEED} (NUMAPORE_KILL_SEED={SEED} repeats these kill times)")
    rng = random.Random(SEED)
    data = small_data(tmp_path / "data", ecoli_dir, N_READS)
    host = host_file(tmp_path / "host.yaml", io_mode="slow5")
    # The uninterrupted run, keeping temp() files so that any file of a killed run can be
    # compared with it; its benchmarks give the step durations the kill times are drawn from.
    base = project(tmp_path / "baseline", {"ecoli": data})
    cmd = snakemake_command(base, 2, "--config", f"host={host}")
    forked_snakemake.run([*cmd, "--notemp", "--", *TARGETS], check=True, capture_output=True)
    expected = snapshot(base)
    durations = {r: benchmark_seconds(base, r) for r in STEP_RULES.values()}
    print(f"measured step durations (s): {durations}")

    work = project(tmp_path / "killed", {"ecoli": data})
    cmd = [*snakemake_command(work, 2, "--config", f"host={host}"), "--", *TARGETS]
    # The steps in the order the run starts them (Snakemake may align before it converts): a
    # step that already ran when the kill lands in an earlier one could never be killed.
    order = sorted(STEP_RULES, key=lambda step: benchmark_start(base, STEP_RULES[step]))
    print(f"steps in run order: {order}")
    kills, completions = [], 0
    killed_this_round: set[str] = set()
    for _attempt in range(4 * N_KILLS):
        inside = {k for k, delay, _ in kills if delay > 0}  # steps killed while their job ran
        if inside == set(STEP_RULES) and any(delay == 0 for _, delay, _ in kills):
            break
        todo = [s for s in order if not all((work / p).exists() for p in STEP_OUTPUTS[s])]
        todo = [s for s in todo if s not in killed_this_round]
        if not todo:  # each step killed once (or done): let the run finish, check, start over
            # A step that ran before the kill landed in another (Snakemake orders independent
            # steps differently from run to run) comes first in the next round.
            never = [s for s in order if s not in {k for k, _, _ in kills}]
            order = never + [s for s in order if s not in never]
            finish = forked_snakemake.run(cmd, capture_output=True, text=True)
            assert finish.returncode == 0, finish.stdout[-3000:] + finish.stderr[-3000:]
            assert snapshot(work) == without_temporary(expected)
            shutil.rmtree(work / "results")
            shutil.rmtree(work / ".snakemake")
            completions += 1
            killed_this_round.clear()
            continue
        # Each step within its measured duration (its tool writing), the first not yet killed so
        # in run order; then the last step as its job starts (a delay of 0: measured times vary
        # with the machine's load, and a kill timed after a job could land after the run's end).
        if inside != set(STEP_RULES):
            step = next((s for s in todo if s not in inside), todo[0])
            fraction = rng.uniform(0.1, 0.9)
        else:
            step, fraction = todo[-1], 0.0
        result = run_and_kill(cmd, STEP_RULES[step], fraction, durations)
        assert not result.get("survivors"), f"seed {SEED}: jobs outlived the kill: {result}"
        killed_this_round.add(step)
        if not result["killed"]:
            assert result["returncode"] == 0, result["output"][-3000:]
            continue
        running = incomplete_markers(work)
        kills.append((step, round(result["delay"], 2), running))
        print(f"kill {len(kills)}: {step} +{result['delay']:.2f} s, running: {running}")
        # Nothing under a final name is partial: every result file there is the baseline's.
        now = snapshot(work)
        partial = [k for k, v in now.items() if expected.get(k) != v]
        assert (
            not partial
        ), f"seed {SEED}: partial or wrong files after kill {len(kills)}: {partial}"
        # Snakemake marked what it had started; rerun-incomplete (default profile) reruns it.
        assert set(running) <= set(expected), running
    inside = {k for k, delay, _ in kills if delay > 0}
    assert inside == set(STEP_RULES), f"seed {SEED}: steps killed while their job ran: {kills}"
    assert len(kills) >= N_KILLS and any(delay == 0 for _, delay, _ in kills), kills
    assert {step for step, _, _ in kills} == set(STEP_RULES), kills
    assert completions >= 1  # a complete run checked between the rounds
    final_run = forked_snakemake.run(cmd, capture_output=True, text=True)
    assert final_run.returncode == 0, final_run.stdout[-3000:] + final_run.stderr[-3000:]
    final = snapshot(work)
    assert final == without_temporary(expected)
    assert not incomplete_markers(work)
    assert not debris(work), debris(work)
    # Killed jobs' shadow folders (partial outputs) went at the next run's start.
    assert not list((work / "results/.snakemake/shadow").glob("*"))
    print(f"{len(kills)} kills, {completions} runs completed and checked in between")


def test_atomic_output_renames_only_complete_files(tmp_path):
    target = tmp_path / "calls.tsv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text() == "old\n" and not temp_name(target).exists()
    temp_name(target).write_text("leftover of a killed attempt")
    with atomic_output(target) as tmp:
        assert tmp == tmp_path / ".tmp.calls.tsv" and not tmp.exists()
        tmp.write_text("new\n")
        assert target.read_text() == "old\n"
    assert target.read_text() == "new\n" and not tmp.exists()


def test_atomic_output_writes_a_device_in_place(tmp_path):
    """A character device (here a null device made beside the test, as /dev/null is) is
    written in place: a rename would replace the device with a regular file."""
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the kernel's null device
    with atomic_output(null) as tmp:
        assert tmp == null
        tmp.write_text("gone")
    assert null.is_char_device() and null.read_text() == ""
    assert sorted(tmp_path.iterdir()) == [null]


def test_atomic_outputs_all_or_none(tmp_path):
    paths = [tmp_path / "a.bed.gz", tmp_path / "a.bed.gz.tbi"]
    with pytest.raises(OSError):
        with atomic_outputs(paths) as temps:
            temps[0].write_text("x")
            raise OSError("disk full")
    assert not any(p.exists() for p in paths) and not list(tmp_path.iterdir())
    with atomic_outputs(paths) as temps:
        assert [t.name for t in temps] == [".tmp.a.bed.gz", ".tmp.a.bed.gz.tbi"]
        for t in temps:
            t.write_text(t.name)
    assert [p.read_text() for p in paths] == [".tmp.a.bed.gz", ".tmp.a.bed.gz.tbi"]


def test_scratch_dir_is_fresh_and_removed(tmp_path):
    output = tmp_path / "x.bam"
    stale = tmp_path / ".tmp.x.bam.d"
    stale.mkdir()
    (stale / "out.1.bam").write_text("from a killed attempt")
    with scratch_dir(output) as folder:
        assert folder == stale and not list(folder.iterdir())
    assert not stale.exists()


def test_stale_locks_are_removed_only_when_no_run_holds_the_flock(tmp_path):
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("results/x\n")
    # Another live process holds the run lock: the lock files are left alone.
    hold = "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
    hold += "print('held', flush=True); time.sleep(60)"
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(tmp_path / ".snakemake" / RUN_LOCK)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        handle, removed = release_stale_locks(tmp_path)
        assert handle is None and removed == [] and (locks / "0.output.lock").exists()
    finally:
        holder.kill()
        holder.wait()
    handle, removed = release_stale_locks(tmp_path)
    assert handle is not None and removed == [locks / "0.output.lock"]
    assert not list(locks.iterdir())
    handle.close()


def test_prepare_exit_cancels_pending_timers_and_freezes_the_heap():
    """A pending timer (as Snakemake's rate limiter leaves one) ends without firing, and the
    objects alive now are out of the collector's reach (the interpreter's final collections)."""
    fired = threading.Event()
    timer = threading.Timer(60, fired.set)
    timer.start()
    other = threading.Thread(target=fired.wait, args=(1,))  # not a timer: left alone
    other.start()
    try:
        assert prepare_exit() == 1
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    timer.join(5)
    assert not timer.is_alive() and not fired.is_set()
    other.join()


def test_killed_jobs_shadow_folders_are_removed(tmp_path):
    shadow = tmp_path / "results/.snakemake/shadow"
    assert remove_dead_shadows(shadow) == []
    (shadow / "tmpkilled").mkdir(parents=True)
    (shadow / "tmpkilled/calls.tsv").write_text("partial")
    assert remove_dead_shadows(shadow) == [shadow / "tmpkilled"] and not list(shadow.iterdir())
