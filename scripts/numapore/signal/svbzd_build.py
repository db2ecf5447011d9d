"""Build numapore's compiled svb-zd signal encoder (cffi, API mode) next to this file:

    PYTHONPATH=scripts .venv/bin/python -m numapore.signal.svbzd_build

./setup.sh runs it. numapore.signal.slow5.svb_zd_encode uses the module it builds
(numapore.signal._svbzd) and falls back on numpy without it: the same bytes (tests/test_convert.py
compares the two and both against slow5tools), about ten times slower (1 ms per 50,000-sample read).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import cffi

# Zigzag-delta then StreamVByte (1-4 bytes per value, 2-bit codes, 4 per control byte, lowest
# bits first), as slow5lib's svb-zd: uint32 count, control bytes, data bytes, little-endian.
C_SOURCE = r"""
#include <stdint.h>
#include <string.h>

static size_t svbzd_bound(size_t n) { return 4 + (n + 3) / 4 + 4 * n; }

static size_t svbzd_encode(const int16_t *in, size_t n, uint8_t *out) {
    uint8_t *control = out + 4, *data = control + (n + 3) / 4;
    int32_t prev = 0;
    out[0] = n & 0xFF; out[1] = (n >> 8) & 0xFF; out[2] = (n >> 16) & 0xFF; out[3] = n >> 24;
    memset(control, 0, (n + 3) / 4);
    for (size_t i = 0; i < n; i++) {
        int32_t delta = (int32_t)in[i] - prev;
        uint32_t z = ((uint32_t)delta << 1) ^ (uint32_t)(delta >> 31);
        unsigned code = (z > 0xFF) + (z > 0xFFFF) + (z > 0xFFFFFF);
        prev = in[i];
        control[i >> 2] |= (uint8_t)(code << ((i & 3) * 2));
        data[0] = (uint8_t)z;
        if (code > 0) data[1] = (uint8_t)(z >> 8);
        if (code > 1) data[2] = (uint8_t)(z >> 16);
        if (code > 2) data[3] = (uint8_t)(z >> 24);
        data += code + 1;
    }
    return (size_t)(data - out);
}
"""
C_DECLARATIONS = """
size_t svbzd_bound(size_t n);
size_t svbzd_encode(const int16_t *in, size_t n, uint8_t *out);
"""


PACKAGE = Path(__file__).resolve().parent


C_SHARED = re.compile(r"/\* cffi: begin .*?\*/\n(.*?)/\* cffi: end \*/", re.S)


def shared_declarations(source: str) -> str:
    """The C types a source shares with Python: its text between "/* cffi: begin ... */" and
    "/* cffi: end */" (so a build's cdef never carries a copy of them)."""
    found = C_SHARED.search(source)
    if found is None:
        raise ValueError("numapore: C source without /* cffi: begin/end */ markers")
    return found.group(1)


def compile_module(ffi: cffi.FFI, package: Path) -> Path:
    """Compile a cffi module (its cdef and source set) and copy it into package/; its path."""
    with tempfile.TemporaryDirectory(prefix="numapore-build-") as tmp:
        built = Path(ffi.compile(tmpdir=tmp))
        target = package / built.name
        shutil.copyfile(built, target)
    return target


def build(package: Path = PACKAGE) -> Path:
    """Compile the encoder into package/ (numapore/signal/_svbzd.*.so); return the module's path."""
    ffi = cffi.FFI()
    ffi.cdef(C_DECLARATIONS)
    ffi.set_source("numapore.signal._svbzd", C_SOURCE, extra_compile_args=["-O2"])
    return compile_module(ffi, package)


if __name__ == "__main__":
    print(f"built {build()}")
