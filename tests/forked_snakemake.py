"""The real Snakemake (and numapore's own command line), started by forking this test process
instead of a new interpreter.

A `snakemake` start costs about 4 s of CPU on this machine, over half of it importing Snakemake
and collecting its plugins; the suite starts Snakemake about 150 times. Each pytest worker
imports Snakemake once (this module), and `run` forks a child that runs the same entry point
the `snakemake` console script runs (`snakemake.cli.main`) with the command's arguments,
working directory, environment and standard streams, as a fresh process would: default signal
handlers, no logging handler or warning filter of pytest's, its own exit functions only. The
child is this process's own, so its CPU counts in the suite's budget (tests/cpu_budget.py) as a
subprocess's does.

`run` takes the arguments of `subprocess.run` that the tests use and returns what it returns.
Commands that are not this repository's Snakemake, and runs that need a process of their own
(traced with strace, killed by a test, submitted to Slurm, another clone's workflow), go through
`subprocess.run`; so does every run with NUMAPORE_TEST_FORK=0 in the environment.

`numapore SUBCOMMAND ...` (the console script of this repository's .venv) is forked the same
way: the subcommand's module is imported here once (a pileup's start cost about 0.45 CPU s,
nearly all of it imports), and the child runs `numapore.cli.main`.

The child starts from this process's modules as they are: a test that monkeypatches numapore
and then runs the workflow must use `subprocess.run`, or the run would see the patch.
"""

from __future__ import annotations

import atexit
import importlib
import io
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import snakemake.cli

import numapore.cli

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(REPO / ".venv" / "bin" / "snakemake")
NUMAPORE = str(REPO / ".venv" / "bin" / "numapore")
ENABLED = os.environ.get("NUMAPORE_TEST_FORK", "1") != "0"
# What the console script leaves to a run: its plugins are collected once here (the argument
# parser lists every plugin's options), not in every child.
snakemake.cli.get_argument_parser()
# The module search path of a fresh `snakemake` process (not this one's, which has tests/).
_FRESH_PATH = [str(Path(SNAKEMAKE).parent)] + [
    p for p in sys.path if p and Path(p).resolve() != Path(__file__).resolve().parent
]
# The warning filters of a fresh interpreter (pytest changes them for its tests).
_FRESH_FILTERS = [
    ("default", None, DeprecationWarning, "__main__", 0),
    ("ignore", None, DeprecationWarning, None, 0),
    ("ignore", None, PendingDeprecationWarning, None, 0),
    ("ignore", None, ImportWarning, None, 0),
    ("ignore", None, ResourceWarning, None, 0),
]


def forkable(cmd: Sequence[str | os.PathLike], kwargs: Mapping[str, object]) -> bool:
    """Whether the command is this repository's Snakemake (or numapore) with arguments run
    handles."""
    handled = {"capture_output", "text", "timeout", "env", "cwd", "check", "stdout", "stderr"}
    streams = (None, subprocess.PIPE, subprocess.DEVNULL)
    return (
        ENABLED
        and bool(cmd)
        and str(cmd[0]) in (SNAKEMAKE, NUMAPORE)
        and set(kwargs) <= handled
        and kwargs.get("stdout") in streams
        and kwargs.get("stderr") in (*streams, subprocess.STDOUT)
    )


def run(cmd: Sequence[str | os.PathLike], **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, **kwargs) for this repository's Snakemake, forked (see above)."""
    if not forkable(cmd, kwargs):
        return subprocess.run(cmd, **kwargs)
    argv = [str(c) for c in cmd]
    if argv[0] == NUMAPORE and len(argv) > 1 and argv[1] in numapore.cli.SUBCOMMANDS:
        importlib.import_module(numapore.cli.SUBCOMMANDS[argv[1]][0])  # once per worker
    capture = bool(kwargs.get("capture_output"))
    out_mode = subprocess.PIPE if capture else kwargs.get("stdout")
    err_mode = subprocess.PIPE if capture else kwargs.get("stderr")
    out = tempfile.TemporaryFile() if out_mode == subprocess.PIPE else None
    err = tempfile.TemporaryFile() if err_mode == subprocess.PIPE else None
    null = os.open(os.devnull, os.O_RDWR)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(argv, kwargs, null, out, err, out_mode, err_mode)
    os.close(null)
    status = _wait(pid, kwargs.get("timeout"), argv, out, err, kwargs)
    returncode = os.waitstatus_to_exitcode(status)
    stdout, stderr = _read(out, kwargs), _read(err, kwargs)
    if kwargs.get("check") and returncode:
        raise subprocess.CalledProcessError(returncode, argv, stdout, stderr)
    return subprocess.CompletedProcess(argv, returncode, stdout, stderr)


def _child(argv, kwargs, null, out, err, out_mode, err_mode) -> None:
    """Become a fresh `snakemake` (or `numapore`) process with argv and exit with its
    status."""
    code = 1
    try:
        os.dup2(null, 0)
        if out_mode == subprocess.DEVNULL:
            os.dup2(null, 1)
        elif out is not None:
            os.dup2(out.fileno(), 1)
        if err_mode == subprocess.DEVNULL:
            os.dup2(null, 2)
        elif err_mode == subprocess.STDOUT:
            os.dup2(1, 2)
        elif err is not None:
            os.dup2(err.fileno(), 2)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), errors="backslashreplace", write_through=True
        )
        # snakemake.shell keeps the stdout its jobs inherit from its import (this process's):
        # the child's own, as a fresh process's import would keep it.
        sys.modules["snakemake.shell"].STDOUT = sys.stdout  # (snakemake.shell: its class)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        atexit._clear()  # pytest's and this process's exit functions are not the child's
        logging.root.handlers.clear()
        logging.root.setLevel(logging.WARNING)
        warnings.filters[:] = _FRESH_FILTERS
        warnings.showwarning = warnings._showwarning_orig
        if kwargs.get("cwd") is not None:
            os.chdir(kwargs["cwd"])
        if kwargs.get("env") is not None:
            os.environ.clear()
            os.environ.update(kwargs["env"])
        sys.argv = argv
        sys.path[:] = _FRESH_PATH
        try:
            if argv[0] == NUMAPORE:
                sys.exit(numapore.cli.main())
            snakemake.cli.main()
            code = 0
        except SystemExit as end:
            if end.code is None or isinstance(end.code, int):
                code = end.code or 0
            else:
                print(end.code, file=sys.stderr)
        threading._shutdown()  # as an interpreter's exit: the run's own threads end first
        atexit._run_exitfuncs()
        logging.shutdown()
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code)


def _wait(pid, timeout, argv, out, err, kwargs) -> int:
    """The child's wait status; TimeoutExpired (the child killed) after timeout seconds."""
    if timeout is None:
        return os.waitpid(pid, 0)[1]
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(argv, timeout, _read(out, kwargs), _read(err, kwargs))
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def _read(stream, kwargs) -> str | bytes | None:
    """What the child wrote to a captured stream, decoded when text was asked for."""
    if stream is None:
        return None
    stream.seek(0)
    data = stream.read()
    stream.close()
    if kwargs.get("text"):  # as subprocess decodes: the locale's encoding, universal newlines
        return io.TextIOWrapper(io.BytesIO(data)).read()
    return data
