"""Puts the package (scripts/) and the test helpers (tests/project.py) on the benchmarks' path."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for folder in (REPO / "scripts", REPO / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
