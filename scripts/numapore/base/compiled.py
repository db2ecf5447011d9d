"""The one place that decides whether numapore runs its compiled code (C through cffi) or the
pure-Python path that gives the same bytes.

The compiled modules are built when the package is installed (`pip install .`: setup.py's
cffi_modules, from the *_build.py files). A module that is not built, or every module when
NUMAPORE_PURE_PYTHON=1 is set, is None here, and its caller takes the Python path.
"""

from __future__ import annotations

import importlib
import os
import re
from types import ModuleType

PURE_PYTHON_ENV = "NUMAPORE_PURE_PYTHON"
# The compiled modules, by what they do (setup.py builds exactly these).
MODULES = {
    "svb-zd encoder": "numapore.signal._svbzd",
    "FAST5 reader": "numapore.signal._fast5_core",
    "call-table core": "numapore.nanopolish._calls_core",
    "pileup core": "numapore.pileup._pileup_core",
}


def pure_python() -> bool:
    """Whether NUMAPORE_PURE_PYTHON asks for the Python paths everywhere."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def load(name: str) -> ModuleType | None:
    """The compiled module name (its .ffi and .lib), or None when it is not built or the pure
    Python paths are asked for."""
    if pure_python():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def status() -> dict[str, str]:
    """What each compiled module is: the file it loads from, or why it is not used."""
    out = {}
    for what, name in MODULES.items():
        if pure_python():
            out[what] = f"Python path ({PURE_PYTHON_ENV} is set)"
            continue
        module = load(name)
        out[what] = module.__file__ if module is not None else "not built: Python path"
    return out


C_SHARED = re.compile(r"/\* cffi: begin .*?\*/\n(.*?)/\* cffi: end \*/", re.S)


def shared_declarations(source: str) -> str:
    """The C types a source shares with Python: its text between "/* cffi: begin ... */" and
    "/* cffi: end */" (so a build's cdef never carries a copy of them)."""
    found = C_SHARED.search(source)
    if found is None:
        raise ValueError("numapore: C source without /* cffi: begin/end */ markers")
    return found.group(1)
