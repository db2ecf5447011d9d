"""numapore's compiled svb-zd signal encoder (cffi, API mode): numapore.signal._svbzd.

`pip install .` builds it (setup.py's cffi_modules: this file's ffibuilder).
numapore.signal.slow5.svb_zd_encode uses it and falls back on numpy without it: the same bytes
(tests/test_convert.py compares the two and both against slow5tools), about ten times slower
(1 ms per 50,000-sample read).
"""

from __future__ import annotations

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


def make_ffi() -> cffi.FFI:
    """The encoder's cffi builder (its cdef and source set)."""
    ffi = cffi.FFI()
    ffi.cdef(C_DECLARATIONS)
    ffi.set_source("numapore.signal._svbzd", C_SOURCE, extra_compile_args=["-O2"])
    return ffi


ffibuilder = make_ffi()
