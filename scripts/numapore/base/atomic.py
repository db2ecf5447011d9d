"""Outputs that are complete or absent: written under a temporary name, then renamed into place.

A job killed mid-write (SIGKILL, power cut of the scheduler, disk full) must never leave a file
under its final name that looks finished but is not. Every output the rule scripts write goes
through atomic_output: the data is written to a hidden name in the same folder and os.replace
(an atomic rename on one filesystem) gives it its final name only once it is complete.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

TEMP_PREFIX = ".tmp"


def temp_name(path: str | os.PathLike) -> Path:
    """The hidden temporary name of path in its own folder (.tmp.<name>): it keeps path's
    suffixes, so tools that choose a format from the file name (samtools, tabix) see the real
    one, and it is the same in every run, so a tool that records its command line (samtools'
    @PG header lines) writes the same bytes each time."""
    path = Path(path)
    return path.with_name(f"{TEMP_PREFIX}.{path.name}")


@contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside path to write; rename it to path when the block succeeds,
    delete it when the block fails. A leftover of a killed earlier attempt is removed first
    (safe: Snakemake never runs two jobs for the same output at once). A named pipe (Snakemake's
    pipe()) is yielded itself: what is written to it is read as it comes, never left as a file,
    and Snakemake fails its reader's job with the writer's. So is a character device (/dev/null,
    /dev/stdout), which a rename would replace with a file."""
    if Path(path).is_fifo() or Path(path).is_char_device():
        yield Path(path)
        return
    tmp = temp_name(path)
    tmp.unlink(missing_ok=True)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def scratch_dir(output: str | os.PathLike) -> Iterator[Path]:
    """A job's scratch folder beside output (.tmp.<name>.d: shards, policy probes), emptied of a
    killed earlier attempt's leftovers first and removed when the block ends."""
    folder = temp_name(output).with_name(temp_name(output).name + ".d")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def atomic_outputs(paths: Sequence[str | os.PathLike]) -> Iterator[list[Path]]:
    """atomic_output for several files: each is renamed into place only if the block succeeds."""
    with ExitStack() as stack:
        yield [stack.enter_context(atomic_output(p)) for p in paths]
