"""Runs shared by every test of one pytest invocation, across its xdist workers.

The suite has a time budget (tests/README.md). A workflow run is the expensive part of a test, so
a run that several tests look at is made once: the first worker that asks for it makes it under a
file lock, the others wait for the lock and reuse the folder. A run that failed fails every test
that asks for it, with the same message, without being tried again.
"""

from __future__ import annotations

import fcntl
import subprocess
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this pytest invocation sees (the parent of the workers' own
    base folders under xdist; the base folder itself without it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base


def shared_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]
) -> Path:
    """The folder of the run called name, made by make(folder) once per pytest invocation."""
    root = shared_root(tmp_path_factory)
    folder = root / f"shared-{name}"
    done, failed = folder / ".shared-run-done", folder / ".shared-run-failed"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if done.exists():
            return folder
        if failed.exists():
            pytest.fail(f"shared run {name} failed earlier in this session:\n{failed.read_text()}")
        folder.mkdir(exist_ok=True)
        try:
            make(folder)
        except BaseException as error:  # pytest.fail is a BaseException: record it too
            failed.write_text("".join(traceback.format_exception(error))[-6000:])
            raise
        done.touch()
    return folder


def keep_output(folder: Path, done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """Keep a run's stdout and stderr in folder (run.stdout, run.stderr): a test on the other
    worker reuses the run but not its process, and reads them back with kept_output."""
    (folder / "run.stdout").write_text(done.stdout)
    (folder / "run.stderr").write_text(done.stderr)
    return done


def kept_output(folder: Path) -> subprocess.CompletedProcess:
    """The output keep_output kept in folder."""
    out, err = ((folder / f"run.{stream}").read_text() for stream in ("stdout", "stderr"))
    return subprocess.CompletedProcess([], 0, out, err)
