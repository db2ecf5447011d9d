"""numapore's output tables read back for tests' assertions."""

from __future__ import annotations

import os
from pathlib import Path


def read_table(path: str | os.PathLike) -> dict[tuple[str, str, str], str]:
    """An accounting TSV as {(stage, what, detail): reads}."""
    lines = Path(path).read_text().splitlines()[1:]
    out = {}
    for line in lines:
        stage, what, reads, detail = line.split("\t")
        out[(stage, what, detail)] = reads
    return out
