"""Disk full and read-only output: the run fails with a message naming the folder and the reason
('No space left on device', 'Read-only file system'), earlier outputs stay intact, nothing partial
appears under a final name, and once the disk is fixed the same command finishes the run.

results/ is a real small filesystem here (a tmpfs mounted by the test, which runs as root). The
run up to the alignments is made once (aligned_run) and copied onto each test's filesystem; the
failing and the resuming runs ask for the methylation outputs (LATER), not the report.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import forked_snakemake
from conftest import REPO, host_file
from reliability import BAM, CALLS, debris, project, small_data
from shared_runs import shared_run

from project import snakemake_command
from numapore.base.workdir import check_writable, describe_write_error, write_problem

N_READS = 20
ALIGNED = (
    [BAM, f"{BAM}.bai"]
    + [
        f"results/ecoli/align/ecoli.minimap2.{end}"
        for end in ("summary.tsv", "stats.txt", "flagstat.json", "flagstat.txt")
    ]
    + [  # the report's alignment figure needs only the alignments: built with them
        f"results/ecoli/report/ecoli.minimap2.alignment_qc.{end}" for end in ("png", "data.json")
    ]
)
READDB = "results/ecoli/reads/blow5/ecoli.fasta.index.readdb"
LATER = [CALLS, "results/ecoli/methylation/ecoli.minimap2.cpg.frequency.tsv"]


@pytest.fixture(scope="session")
def aligned_run(tmp_path_factory, ecoli_dir) -> Path:
    """The small project run up to its alignments and read index (slow5 I/O): made once, its
    folder holds run/ (the project), data/ and host.yaml."""

    def make(folder: Path) -> None:
        data = small_data(folder / "data", ecoli_dir, N_READS)
        work = project(folder / "run", {"ecoli": data})
        host = host_file(folder / "host.yaml", io_mode="slow5")
        done = run(work, host, *ALIGNED, READDB)
        assert done.returncode == 0, done.stderr[-3000:]

    return shared_run(tmp_path_factory, "disk_errors_aligned", make)


@pytest.fixture
def small_fs(tmp_path, aligned_run):
    """A copy of aligned_run's project whose results/ is a 32 MB tmpfs (holding the copied
    results); unmounted afterwards."""
    work = tmp_path / "run"
    shutil.copytree(
        aligned_run / "run", work, symlinks=True, ignore=shutil.ignore_patterns("results")
    )
    results = work / "results"
    results.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(results)],
        capture_output=True,
        text=True,
    )
    if mount.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs here (the test needs root): {mount.stderr}")
    try:
        shutil.copytree(aligned_run / "run" / "results", results, symlinks=True, dirs_exist_ok=True)
        yield work, aligned_run / "host.yaml"
    finally:
        subprocess.run(["umount", "-l", str(results)], check=False)


def run(work: Path, host: Path, *targets: str) -> subprocess.CompletedProcess:
    """Run the workflow (2 cores) in work, optionally up to the given targets."""
    cmd = snakemake_command(work, 2, "--config", f"host={host}")
    if targets:
        cmd += ["--", *targets]
    return forked_snakemake.run(cmd, capture_output=True, text=True)


def digests(work: Path, paths: list[str]) -> dict[str, str]:
    """SHA-256 of each file."""
    return {p: hashlib.sha256((work / p).read_bytes()).hexdigest() for p in paths}


def fill(folder: Path, leave: int = 0) -> None:
    """Fill folder's filesystem with a file until ENOSPC, then free `leave` bytes."""
    filler = folder / "filler"
    with open(filler, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * (1 << 16))
                handle.flush()
        except OSError as err:
            assert err.errno == 28, err
    if leave:
        os.truncate(filler, filler.stat().st_size - leave)


def test_full_disk_before_methylation_stops_with_reason_and_keeps_alignments(small_fs):
    work, host = small_fs
    before = digests(work, ALIGNED)
    fill(work / "results")
    result = run(work, host, *LATER)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "No space left on device" in out and str((work / "results").resolve()) in out, out
    assert digests(work, ALIGNED) == before
    assert not any((work / p).exists() for p in LATER) and not debris(work)
    (work / "results" / "filler").unlink()
    assert run(work, host, *LATER).returncode == 0  # the same command resumes once there is space
    assert digests(work, ALIGNED) == before and (work / CALLS).stat().st_size > 0


def test_disk_filling_during_methylation_fails_the_step_not_silently(small_fs):
    # nanopolish (like samtools writing to stdout) exits 0 when its writes fail; its table goes
    # through cat, which does not, so a call table cut short by a full disk is never kept.
    work, host = small_fs
    before = digests(work, ALIGNED)
    fill(work / "results", leave=48 * 1024)  # the call table of these reads is ~70 KB
    result = run(work, host, *LATER)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "No space left on device" in out and str((work / "results").resolve()) in out, out
    assert "Error in rule call_methylation" in out and "cat: write error" in out
    assert digests(work, ALIGNED) == before
    shards = list((work / "results/ecoli/methylation").rglob("*.calls.tsv"))
    assert not shards and not any((work / p).exists() for p in LATER) and not debris(work)
    (work / "results" / "filler").unlink()
    assert run(work, host, *LATER).returncode == 0
    assert (work / CALLS).read_text().count("\n") > 100


def test_read_only_results_stop_before_any_job(small_fs):
    work, host = small_fs
    before = digests(work, ALIGNED)
    results = str(work / "results")
    subprocess.run(["mount", "-o", "remount,ro", results], check=True)
    result = run(work, host, *LATER)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Read-only file system" in out and str((work / "results").resolve()) in out, out
    assert "localrule call_methylation" not in out  # stopped before any job started
    subprocess.run(["mount", "-o", "remount,rw", results], check=True)
    assert digests(work, ALIGNED) == before
    assert not any((work / p).exists() for p in LATER)
    assert run(work, host, *LATER).returncode == 0


def test_check_writable_and_write_problem_name_the_folder(tmp_path):
    check_writable(tmp_path / "results")  # creates it, leaves nothing behind
    assert not list((tmp_path / "results").iterdir())
    assert write_problem(tmp_path) is None
    assert "No space left on device" in write_problem(tmp_path, min_free=1 << 62)


def test_describe_write_error_only_for_disk_errors():
    full = OSError(28, "No space left on device")
    assert describe_write_error(full, ["a.tsv"]) == "numapore: cannot write a.tsv: " + (
        "No space left on device"
    )
    ro = OSError(30, "Read-only file system", "/x/b.bam")
    assert describe_write_error(ro, []) == "numapore: cannot write /x/b.bam: Read-only file system"
    assert describe_write_error(FileNotFoundError(2, "No such file"), ["a"]) is None


def test_rule_script_disk_error_is_reported_outside_the_log(tmp_path):
    # A rule script (redirect_to_log) failing on a full disk says so on the job's own stderr,
    # which Snakemake shows: the log may be on the full disk too.
    script = (
        "from types import SimpleNamespace\n"
        "from numapore.base.rulelog import redirect_to_log\n"
        f"redirect_to_log(SimpleNamespace(log=[{str(tmp_path / 'job.log')!r}], output=['o.tsv']))\n"
        "raise OSError(28, 'No space left on device')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO / "scripts"
    )
    assert result.returncode != 0
    assert "numapore: cannot write o.tsv: No space left on device" in result.stderr
    assert "OSError" in (tmp_path / "job.log").read_text()  # the traceback is in the log
