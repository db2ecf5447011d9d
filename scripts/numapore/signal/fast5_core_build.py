"""numapore's compiled FAST5 reader (C through cffi, API mode): numapore.signal._fast5_core.

`pip install .` builds it (setup.py's cffi_modules: this file's ffibuilder). It links Debian's
HDF5 (libhdf5-dev), libdeflate (libdeflate-dev) and zlib; the C source is fast5_core.c plus the
svb-zd encoder of svbzd_build.py. numapore.signal.fast5_core uses it and, without it, converts
with the Python reader alone (numapore.signal.fast5, h5py): the same bytes
(tests/test_fast5_core.py), slower.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import cffi

from numapore.base.compiled import shared_declarations
from numapore.signal.svbzd_build import C_SOURCE as SVBZD_SOURCE

PACKAGE = Path(__file__).resolve().parent
SOURCE = PACKAGE / "fast5_core.c"
# np5_aux, np5_read and np5_layout_read come from fast5_core.c itself (between its "cffi:"
# markers); Python reads these fields of np5_ctx and leaves the rest opaque.
C_DECLARATIONS = """
typedef struct {
    int nreads;
    np5_read *reads;
    int nlayout;
    np5_layout_read *layout;
    int groups;
    const char *reason;
    unsigned char *out;
    size_t out_len;
    ...;
} np5_ctx;

np5_ctx *np5_new(int record_compression, int signal_compression);
void np5_free(np5_ctx *ctx);
int np5_add_field(np5_ctx *ctx, const char *name, int type, const char *labels);
void np5_set_schema_known(np5_ctx *ctx);
void np5_set_core_max(np5_ctx *ctx, int64_t bytes);
int np5_add_run(np5_ctx *ctx, const char *run_id, uint32_t group);
int np5_register_filter(const char *library);
int np5_read_file(np5_ctx *ctx, const char *path, int start, int stop);
int np5_layout(np5_ctx *ctx, const char *path);
const char *np5_type_name(int type);
"""


def hdf5_flags() -> tuple[list[str], list[str]]:
    """Include and library folders of Debian's HDF5 (serial build), from pkg-config if there."""
    try:
        out = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "hdf5"], capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = ["-I/usr/include/hdf5/serial", "-L/usr/lib/x86_64-linux-gnu/hdf5/serial"]
    includes = [f[2:] for f in out if f.startswith("-I")]
    libdirs = [f[2:] for f in out if f.startswith("-L")]
    return includes, libdirs


def make_ffi() -> cffi.FFI:
    """The reader's cffi builder (its cdef and source set)."""
    includes, libdirs = hdf5_flags()
    source = SOURCE.read_text()
    ffi = cffi.FFI()
    ffi.cdef(shared_declarations(source) + C_DECLARATIONS)
    ffi.set_source(
        "numapore.signal._fast5_core",
        SVBZD_SOURCE + "\n" + source,
        include_dirs=includes,
        library_dirs=libdirs,
        runtime_library_dirs=libdirs,
        libraries=["hdf5", "deflate", "z", "dl"],
        extra_compile_args=["-O2", "-Wall", "-Wno-unused-function"],
    )
    return ffi


ffibuilder = make_ffi()
