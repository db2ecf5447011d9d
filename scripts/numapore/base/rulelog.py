"""Logging for rule scripts: everything a script prints goes to the rule's log file."""

from __future__ import annotations

import sys

from numapore.base.errors import AccountingError, InputError
from numapore.base.workdir import describe_write_error


def redirect_to_log(snakemake) -> None:
    """Send stdout and stderr of a `script:` rule to its first log file (line-buffered)."""
    if snakemake.log:
        handle = open(snakemake.log[0], "w", buffering=1)
        sys.stdout = sys.stderr = handle
    outputs = [str(p) for p in snakemake.output]
    default_hook = sys.excepthook

    def hook(kind, err, tb) -> None:
        """A user's input problem (or counts that do not add up): one numapore: line, no
        traceback. A full or read-only disk: say so where Snakemake shows it (the log may be
        lost)."""
        if isinstance(err, (InputError, AccountingError)):
            print(f"numapore: {err}", file=sys.stderr, flush=True)
            return
        message = describe_write_error(err, outputs) if isinstance(err, OSError) else None
        if message:
            print(message, file=sys.__stderr__, flush=True)
        try:
            default_hook(kind, err, tb)
        except OSError:  # the log itself cannot be written
            pass

    sys.excepthook = hook


class LogAndTerminal:
    """A text stream writing to a rule's log (sys.stderr after redirect_to_log) and to the
    terminal Snakemake runs in, for progress a person follows on long steps."""

    def __init__(self, log=None, terminal=None) -> None:
        """Both streams, by default the redirected sys.stderr and the original one."""
        self.streams = [sys.stderr if log is None else log, terminal or sys.__stderr__]

    def write(self, text: str) -> int:
        """Write to both streams."""
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        """Flush both streams."""
        for stream in self.streams:
            stream.flush()
