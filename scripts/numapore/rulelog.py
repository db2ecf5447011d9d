"""Logging for rule scripts: everything a script prints goes to the rule's log file."""

from __future__ import annotations

import sys


def redirect_to_log(snakemake) -> None:
    """Send stdout and stderr of a `script:` rule to its first log file (line-buffered)."""
    if snakemake.log:
        handle = open(snakemake.log[0], "w", buffering=1)
        sys.stdout = sys.stderr = handle
