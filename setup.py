"""Build numapore's compiled parts (C through cffi) with the package: `pip install .` or
`pip install -e .` (pyproject.toml holds the metadata; cffi_modules needs this file)."""

import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

# The build files import numapore.base.compiled (the shared C declarations) from the source.
sys.path.insert(0, str(Path(__file__).resolve().parent / "scripts"))


class BuildCompiledParts(build_ext):
    """build_ext that, with NUMAPORE_COMPILED=optional (conda envs: envs/install-numapore.sh),
    installs the package without a compiled part it cannot build: its Python path runs."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if os.environ.get("NUMAPORE_COMPILED") == "optional":
            for extension in self.extensions:
                extension.optional = True


setup(
    cmdclass={"build_ext": BuildCompiledParts},
    cffi_modules=[
        "scripts/numapore/signal/svbzd_build.py:ffibuilder",
        "scripts/numapore/signal/fast5_core_build.py:ffibuilder",
        "scripts/numapore/nanopolish/calls_core_build.py:ffibuilder",
        "scripts/numapore/pileup/core_build.py:ffibuilder",
    ],
)
