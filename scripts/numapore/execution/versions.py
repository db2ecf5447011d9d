"""The version of each tool a run may use, as the tool prints it: what the provenance page lists
and what a host tuning's cache key holds (a new version of a tool measures anew)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable

# How each tool tells its version (the aligners by their names in execution.aligners).
TOOL_VERSIONS = {
    "minimap2": ["minimap2", "--version"],
    "samtools": ["samtools", "--version"],
    "nanopolish": ["nanopolish", "--version"],
    "bwa": ["bwa"],  # its usage, with a 'Version: ' line
    "bowtie2": ["bowtie2", "--version"],
    "snap": ["snap-aligner"],  # its usage, after 'Welcome to SNAP version ...'
}


def tool_versions(tools: Iterable[str] = TOOL_VERSIONS) -> dict[str, str]:
    """Each tool's first line that names a version (else its first line of output), or why
    there is none (not on PATH)."""
    out = {}
    for tool in tools:
        command = TOOL_VERSIONS[tool]
        if shutil.which(command[0]) is None:
            out[tool] = "not on PATH in this job's environment"
            continue
        run = subprocess.run(command, capture_output=True, text=True, errors="replace")
        lines = [ln.strip() for ln in (run.stdout + run.stderr).splitlines() if ln.strip()]
        version = [ln for ln in lines if "version" in ln.lower()]
        out[tool] = (version or lines or ["(no output)"])[0]
    return out
