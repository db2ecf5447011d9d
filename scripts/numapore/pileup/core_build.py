"""numapore's compiled pileup core (core.c and its parts through cffi, API mode):
numapore.pileup._pileup_core.

`pip install .` builds it (setup.py's cffi_modules: this file's ffibuilder).
numapore.pileup.engine uses it for
each read's calls, the interval's tally and its bedMethyl text and, without it, numpy: the same
bytes (tests/test_pileup_conformance.py runs both), slower. bam_core.c, compiled into the same
module, reads an interval's BAM records (BGZF through libdeflate) for it.
"""

from __future__ import annotations

from pathlib import Path

import cffi

from numapore.base.compiled import shared_declarations

PACKAGE = Path(__file__).resolve().parent
SOURCE = PACKAGE / "core.c"  # the context and shared types (part 1)
BAM_SOURCE = PACKAGE / "bam_core.c"  # its BAM reader, compiled after it into the same module
EXTRACT_SOURCE = PACKAGE / "extract_calls.c"  # extract-calls' rows, from the reader's records
# The parts, compiled as one unit in this order (each uses those before it): the context, a
# read's calls, the interval's tally, the bedMethyl writer, the threshold's sample, a record's
# calls for --modified-bases, the reader
# (the file and its index, then what is done with each record).
SOURCES = (
    [SOURCE]
    + [PACKAGE / f"{part}.c" for part in ("calls", "tally", "text", "sample", "modcalls")]
    + [BAM_SOURCE, PACKAGE / "bam_records.c"]
    + [PACKAGE / "bedmethyl_rows.c"]  # tobigwig's and stats' rows (uses no other part)
    + [PACKAGE / "focus.c"]  # one motif's positions in an interval
    + [EXTRACT_SOURCE]
)
C_DECLARATIONS = """
int pu_code(pu_ctx *c, const char *code);
int pu_begin(pu_ctx *c, int64_t start, int64_t length);
int pu_add_read(pu_ctx *c, int reverse, int64_t ref_start, const char *cigar, int64_t ncig_max,
                const char *seq, int64_t n, const char *mm, const uint8_t *ml, int64_t nml);
int pu_observe(pu_ctx *c);
int64_t pu_rows_bound(pu_ctx *c, int combine_mods);
int64_t pu_text(pu_ctx *c, const char *chrom, const uint8_t *allowed, int base_mask,
                int combine_mods, int mixed, char *out, int64_t cap, int64_t *nrows);
int64_t pu_text_combined(pu_ctx *c, const char *chrom, const int64_t *pos, const int32_t *idx,
                         const int64_t *neg, const uint8_t *pos_ok, int64_t n,
                         const char *const *labels, int nlabels, int combine_mods, int mixed,
                         char *out, int64_t cap, int64_t *nrows);
int64_t pu_text_folded(pu_ctx *c, const char *chrom, const int64_t *pos, const int32_t *idx,
                       const int64_t *neg, const uint8_t *pos_ok, int64_t n,
                       const char *const *labels, int nlabels, int base_mask, int combine_mods,
                       char *out, int64_t cap, int64_t *nrows);
int pu_sample_read(pu_ctx *c, int reverse, const char *seq, int64_t n, const char *mm,
                   const uint8_t *ml, int64_t nml, const char *cigar, int64_t ncig_max,
                   int64_t ref_start);
void pu_sort_values(pu_ctx *c, int base);
float pu_sample_rank(pu_ctx *c, int base, int64_t rank);
void pu_sample_tally(pu_ctx *c, int base, float threshold, int64_t *pass, int64_t *fail,
                     int64_t *flags);
void pu_sample_histogram(pu_ctx *c, int base, int64_t *bins);
int pu_mb_calls(const char *seq, int64_t n, int reverse, const char *mm, const uint8_t *ml,
                int64_t nml, const float *thresholds, const char *mod_codes,
                const float *mod_values, int nmod, int8_t *fwd, int8_t *kind, int32_t *code_at,
                char *codes, int *ncodes);
void pu_free(pu_ctx *c);
pu_bam *pu_bam_open(const char *path, const char *index_path);
void pu_bam_close(pu_bam *b);
int pu_bam_any(pu_bam *b, int tid, int64_t start, int64_t end);
int pu_bam_chunk(pu_ctx *c, pu_bam *b, int tid, int64_t start, int64_t end, int first,
                 int hp_on, int64_t hp, int list_reads, pu_stats *st);
void pu_stats_free(pu_stats *st);
int64_t pu_bam_sample(pu_ctx *c, pu_bam *b, int tid, int64_t start, int64_t end, int64_t budget,
                      int only_mapped, int edge_on);
int64_t pu_bam_seen(pu_bam *b, const char *name, int add);
int bm_push(bm_track *t, const char *chrom, int64_t nchrom, int64_t start, const char *code,
            int64_t ncode, const char *strand, int64_t nstrand, int64_t valid,
            int64_t n_mod, int64_t n_canonical);
int64_t bm_read(bm_track *t, const char *buf, int64_t len);
void bm_finish(bm_track *t);
void bm_take(bm_track *t);
int bm_sum_row(bm_sums *s, const char *code, int64_t ncode, const char *strand, int64_t nstrand,
               int64_t valid, int64_t n_mod);
int64_t bm_sum_regions(bm_sums *sums, const int64_t *starts, const int64_t *ends,
                       const int64_t *reach, int64_t n, int64_t *lo, const char *buf,
                       int64_t len);
int64_t pu_focus(const char *seq, int64_t seqlen, const uint8_t *fwd, const uint8_t *rev,
                 int mlen, int offset, int rev_offset, int64_t start, int64_t length,
                 uint8_t *allowed, uint8_t *want, int64_t *pos, int64_t *neg, uint8_t *pos_ok,
                 int keep_before);
int64_t pu_extract_span(pu_ctx *c, pu_bam *b, int tid, int64_t start, int64_t end,
                        const char *chrom, const char *ref, int64_t ref_len, int kmer,
                        int options, pu_xbuf *out);
int pu_format_f32(float x, char *out);
void pu_xbuf_free(pu_xbuf *o);
"""

ffibuilder = cffi.FFI()
ffibuilder.cdef(
    shared_declarations(SOURCE.read_text())
    + shared_declarations(BAM_SOURCE.read_text())
    + shared_declarations((PACKAGE / "bedmethyl_rows.c").read_text())
    + shared_declarations(EXTRACT_SOURCE.read_text())
    + C_DECLARATIONS
)
ffibuilder.set_source(
    "numapore.pileup._pileup_core",
    "\n".join(path.read_text() for path in SOURCES),
    # float32 arithmetic as Rust does it: no fused multiply-adds, no excess precision
    extra_compile_args=["-O2", "-Wall", "-ffp-contract=off"],
    libraries=["deflate", "m"],  # libdeflate (libdeflate-dev): BGZF blocks, as samtools
)
