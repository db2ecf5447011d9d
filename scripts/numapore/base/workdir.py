"""The run's working directory: resuming after a kill, and clear messages when it cannot be
written (read-only, full).

Snakemake leaves its lock files behind when it is killed (SIGKILL, node failure), and the next
run of the same command then refuses to start until `--unlock`. Every numapore run holds an
exclusive flock(2) on .snakemake/numapore.run.lock for its lifetime; the kernel drops it when the
process dies however it dies, so a run that gets the flock knows no other numapore run is alive in
this directory and that any Snakemake lock files there are stale.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import os
import shutil
import threading
from pathlib import Path
from typing import IO

RUN_LOCK = "numapore.run.lock"
# Errors that mean "this filesystem cannot take the output", not "the step is wrong".
WRITE_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EDQUOT}


def release_stale_locks(workdir: Path = Path(".")) -> tuple[IO | None, list[Path]]:
    """Take this run's flock; if no other run holds it, remove Snakemake's leftover lock files.

    Returns the open lock file (keep it open for the whole run; None when another numapore run
    holds the flock, and then nothing is removed) and the lock files removed."""
    meta = workdir / ".snakemake"
    meta.mkdir(exist_ok=True)
    handle = open(meta / RUN_LOCK, "a")  # noqa: SIM115 - held open for the process lifetime
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None, []
    stale = sorted((meta / "locks").glob("*.lock"))
    for path in stale:
        path.unlink(missing_ok=True)
    return handle, stale


def remove_dead_shadows(shadow: Path) -> list[Path]:
    """Remove the job folders in Snakemake's shadow folder (call before any job starts, holding
    the run's flock: Snakemake removes a job's folder when the job ends, so any there now is a
    killed job's, with its partial outputs); return them."""
    jobs = sorted(p for p in shadow.iterdir() if p.is_dir()) if shadow.is_dir() else []
    for path in jobs:
        shutil.rmtree(path, ignore_errors=True)
    return jobs


def results_folder_problem(folder: Path) -> str | None:
    """Why folder (results/) cannot hold the results before anything is written, or None."""
    if folder.exists() and not folder.is_dir():
        where = folder.resolve()
        return f"{where} is a file, not a folder: numapore writes its results there; move it away"
    return None


def check_writable(folder: Path) -> None:
    """Fail with an OSError naming folder and the reason (read-only, no space) if a small file
    cannot be written in it."""
    probe = folder / f".numapore-write-test.{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as handle:
            handle.write(b"numapore\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as err:
        raise OSError(err.errno, f"cannot write in {folder.resolve()}: {err.strerror}") from None
    finally:
        try:
            probe.unlink(missing_ok=True)
        except OSError:
            pass


def write_problem(folder: Path, min_free: int = 1 << 20) -> str | None:
    """Why folder's filesystem cannot take more output ('Read-only file system', 'No space left
    on device' when under min_free bytes are free), naming the folder; None when it can."""
    folder = folder.resolve()
    stat = os.statvfs(folder)
    if stat.f_flag & os.ST_RDONLY:
        return f"{folder}: Read-only file system"
    free = stat.f_bavail * stat.f_frsize
    if free < min_free:
        return f"{folder}: No space left on device ({free} bytes free on its filesystem)"
    return None


def describe_write_error(err: OSError, outputs: list[str]) -> str | None:
    """A one-line message for an OSError that means the disk cannot take the output (full,
    read-only, over quota), naming the file (or the job's outputs); None for other errors."""
    if err.errno not in WRITE_ERRNOS:
        return None
    where = err.filename or ", ".join(outputs) or "its output"
    return f"numapore: cannot write {where}: {os.strerror(err.errno)}"


def prepare_exit() -> int:
    """Let the finished run's process end at once: cancel pending timers, freeze the GC heap."""
    # Snakemake's job rate limiter starts a 1 s threading.Timer after every scheduling round to
    # look again; the last one outlives the run, and as it is not a daemon thread the
    # interpreter waits for it before exiting: up to a second added to every run.
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    for timer in timers:
        timer.cancel()
    # The interpreter's last garbage collections walk every object of the run (Snakemake,
    # pandas, sqlalchemy...): about 0.45 s. Frozen objects are skipped and left to the OS;
    # files, locks and the log are closed explicitly, not by the collector.
    gc.freeze()
    return len(timers)
