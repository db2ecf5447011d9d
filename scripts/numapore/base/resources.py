"""The package's data files: the workflow's JSON schemas and the stock host files.

They live in the repository at workflow/schemas/ and config/hosts/; numapore/data/ links to
them, and `pip install .` copies them into the installed package (package data), so an installed
numapore finds them wherever it runs, without climbing out of its own folder. Paths are resolved:
in a checkout (pip install -e .) messages name workflow/schemas and config/hosts themselves.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

DATA = Path(str(files("numapore") / "data"))


def schema_path(name: str) -> Path:
    """The JSON schema name (e.g. 'host.schema.yaml') shipped with the package."""
    return (DATA / "schemas").resolve() / name


def shipped_hosts_dir() -> Path:
    """The folder of the stock host files (single-node.yaml, ...) shipped with the package."""
    return (DATA / "hosts").resolve()
