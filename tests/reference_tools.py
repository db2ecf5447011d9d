"""Where the reference tools' own scripts are, to test numapore's outputs against them (not
against numapore's reading of their rules)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

REFERENCE_SCRIPT = "calculate_methylation_frequency.py"


def reference_frequency_script(nanopolish: str | None = None) -> Path:
    """nanopolish's calculate_methylation_frequency.py beside the nanopolish binary (Debian:
    /usr/lib/nanopolish; bioconda: bin/, share/nanopolish/scripts/); a clear error if absent."""
    binary = nanopolish or shutil.which("nanopolish")
    if binary is None:
        raise FileNotFoundError(
            f"numapore: cannot run nanopolish's {REFERENCE_SCRIPT}: nanopolish is not on PATH"
        )
    bindir = Path(binary).resolve().parent
    prefixes = [bindir.parent]
    if os.environ.get("CONDA_PREFIX"):
        prefixes.append(Path(os.environ["CONDA_PREFIX"]))
    places = [bindir / REFERENCE_SCRIPT]
    for prefix in prefixes:
        places += [
            prefix / "bin" / REFERENCE_SCRIPT,
            prefix / "lib" / "nanopolish" / REFERENCE_SCRIPT,
            prefix / "share" / "nanopolish" / "scripts" / REFERENCE_SCRIPT,
        ]
    for place in places:
        if place.is_file():
            return place
    raise FileNotFoundError(
        f"numapore: cannot run nanopolish's {REFERENCE_SCRIPT}: not found beside {binary} "
        f"(looked in {', '.join(map(str, dict.fromkeys(places)))}); this nanopolish install "
        "does not ship its scripts"
    )
