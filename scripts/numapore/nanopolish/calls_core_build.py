"""numapore's compiled call-table aggregator (C through cffi, API mode):
numapore.nanopolish._calls_core.

`pip install .` builds it (setup.py's cffi_modules: this file's ffibuilder).
numapore.nanopolish.frequency uses it to count a call table's groups and, without it, DuckDB: the
same outputs (tests/test_calls_core.py), slower (50 M call rows: 47 s against about 130 s).
numapore.nanopolish.modbam tags the alignments with it and, without it, in Python: the same
BAM, about six times slower.
"""

from __future__ import annotations

from pathlib import Path

import cffi

from numapore.base.compiled import shared_declarations

PACKAGE = Path(__file__).resolve().parent
SOURCE = PACKAGE / "calls_core.c"
MODBAM_SOURCE = PACKAGE / "calls_modbam.c"  # the modBAM tagger, compiled after it, one unit
C_DECLARATIONS = """
int cc_aggregate(cc_table *t, const char *path, const int *where, int ncols, double threshold);
void cc_free(cc_table *t);
size_t cc_bgzf_block(const unsigned char *in, size_t n, unsigned char *out, int level);
int cc_llr_to_ml(double llr);
int cc_call_group(cc_tagger *t, const char *buf, int64_t n, int eof, int64_t *skip,
                  int64_t *name_at, int64_t *name_len, int64_t *group_len);
int cc_tag_read(cc_tagger *t, const char *calls, int64_t n, cc_record *rec, int nrec);
void cc_tagger_free(cc_tagger *t);
"""


def make_ffi() -> cffi.FFI:
    """The aggregator's cffi builder (its cdef and source set)."""
    source = SOURCE.read_text()
    ffi = cffi.FFI()
    ffi.cdef(shared_declarations(source) + C_DECLARATIONS)
    ffi.set_source(
        "numapore.nanopolish._calls_core",
        source + "\n" + MODBAM_SOURCE.read_text(),
        libraries=["deflate"],
        # no fused multiply-adds: cc_llr_to_ml must round as Python's llr_to_ml does
        extra_compile_args=["-O2", "-Wall", "-ffp-contract=off"],
    )
    return ffi


ffibuilder = make_ffi()
