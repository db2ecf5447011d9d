"""Where nanopolish's HDF5 finds the VBZ filter plugin (MinKNOW's FAST5 signal compression).

HDF5 loads filter plugins only from the folders in HDF5_PLUGIN_PATH (default: its own plugin
folder), and only files named lib*.so*. The installs put the plugin elsewhere:
  Debian   libvbz-hdf-plugin0 installs /usr/lib/<arch>/libvbz_hdf_plugin.so.0, outside HDF5's
           plugin folder (/usr/lib/<arch>/hdf5/serial/plugins): the folder holds hundreds of
           other libraries, so a private folder with one symlink to the plugin is used instead;
  bioconda ont_vbz_hdf_plugin installs $CONDA_PREFIX/hdf5/lib/plugin/libvbz_hdf_plugin.so (its
           activation script sets HDF5_PLUGIN_PATH, which a non-activated env lacks).
A user's own HDF5_PLUGIN_PATH is kept first; HDF5's default folders follow it, since setting
the variable replaces them.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

PLUGIN_NAME = "libvbz_hdf_plugin.so"
# Plugin folders HDF5 searches by default (upstream build, Debian's serial build).
DEFAULT_PLUGIN_DIRS = ("/usr/local/hdf5/lib/plugin", "/usr/lib/*/hdf5/serial/plugins")
# Library folders where a distribution may install the versioned plugin (libvbz_hdf_plugin.so.0).
LIBRARY_DIRS = ("/usr/lib/*", "/usr/lib", "/usr/local/lib", "/usr/lib64")


def holds_vbz(folder: Path) -> bool:
    """True when HDF5 would load the VBZ plugin from folder (a file named libvbz_hdf_plugin.so*)."""
    return any(Path(p).is_file() for p in glob.glob(str(folder / f"{PLUGIN_NAME}*")))


def vbz_library(environ: Mapping[str, str], root: str = "/") -> Path | None:
    """The VBZ plugin library of a conda env or a system install (None when there is none)."""
    folders = []
    if environ.get("CONDA_PREFIX"):
        folders.append(Path(environ["CONDA_PREFIX"]) / "hdf5/lib/plugin")
    for pattern in DEFAULT_PLUGIN_DIRS + LIBRARY_DIRS:
        folders += sorted(Path(p) for p in glob.glob(os.path.join(root, pattern.lstrip("/"))))
    for folder in folders:
        for name in sorted(glob.glob(str(folder / f"{PLUGIN_NAME}*"))):
            if Path(name).is_file():
                return Path(name)
    return None


def vbz_plugin_file(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The VBZ plugin library HDF5 would use: the first in the user's HDF5_PLUGIN_PATH, else
    vbz_library's (a conda env or a system install); None when there is none."""
    own = [Path(p) for p in environ.get("HDF5_PLUGIN_PATH", "").split(os.pathsep) if p]
    for folder in own:
        for name in sorted(glob.glob(str(folder / f"{PLUGIN_NAME}*"))):
            if Path(name).is_file():
                return Path(name)
    return vbz_library(environ)


def hdf5_plugin_path(
    private_dir: Path, environ: Mapping[str, str] = os.environ, root: str = "/"
) -> str | None:
    """The HDF5_PLUGIN_PATH under which HDF5 finds the VBZ plugin (None: no plugin found and
    none set); a symlink named libvbz_hdf_plugin.so is made in private_dir when needed."""
    own = [Path(p) for p in environ.get("HDF5_PLUGIN_PATH", "").split(os.pathsep) if p]
    if any(holds_vbz(p) for p in own):
        return os.pathsep.join(map(str, own))
    library = vbz_library(environ, root)
    if library is None:
        return os.pathsep.join(map(str, own)) or None
    if library.name == PLUGIN_NAME:
        folder = library.parent
    else:  # a versioned library among the system's others: link it alone into a folder
        private_dir.mkdir(parents=True, exist_ok=True)
        link = private_dir / PLUGIN_NAME
        link.unlink(missing_ok=True)
        link.symlink_to(library)
        folder = private_dir
    defaults = [
        Path(p)
        for pattern in DEFAULT_PLUGIN_DIRS
        for p in sorted(glob.glob(os.path.join(root, pattern.lstrip("/"))))
    ]
    folders = own + [folder] + [d for d in defaults if d not in own and d != folder]
    return os.pathsep.join(map(str, folders))


@contextmanager
def vbz_plugin_env(log=None) -> Iterator[str | None]:
    """Set HDF5_PLUGIN_PATH so the tools started inside the block read VBZ-compressed FAST5;
    restore it after. Says in log when no plugin is installed (nanopolish will then fail on VBZ)."""
    before = os.environ.get("HDF5_PLUGIN_PATH")
    private_dir = Path(tempfile.mkdtemp(prefix="numapore-hdf5-plugins."))
    try:
        value = hdf5_plugin_path(private_dir)
        if value is None or not any(holds_vbz(Path(p)) for p in value.split(os.pathsep)):
            if log is not None:
                print(
                    "numapore: no VBZ HDF5 plugin found (Debian: libvbz-hdf-plugin0, bioconda: "
                    "ont_vbz_hdf_plugin); VBZ-compressed FAST5 cannot be read",
                    file=log,
                    flush=True,
                )
        elif log is not None:
            print(f"HDF5_PLUGIN_PATH={value}", file=log, flush=True)
        if value is not None:
            os.environ["HDF5_PLUGIN_PATH"] = value
        yield value
    finally:
        if before is None:
            os.environ.pop("HDF5_PLUGIN_PATH", None)
        else:
            os.environ["HDF5_PLUGIN_PATH"] = before
        shutil.rmtree(private_dir, ignore_errors=True)
