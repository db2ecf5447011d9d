/* numapore's compiled pileup core (cffi; built by core_build.py), part 1 of 5: the
 * context (settings, the mod-code registry and thresholds, the interval's tallies), the types
 * every part shares and the per-read scratch.
 *
 * The per-read work of numapore.pileup.engine in C, with the same rules and the same
 * float32 arithmetic, laid out as modkit's pileup is: a read's calls from its MM/ML
 * (calls.c), one interval's tally (tally.c), the bedMethyl writer (text.c;
 * motif labels and combined strands of the generic layouts are left to Python, which reads the
 * counts), the estimated threshold's sample (sample.c), and the BAM reader
 * (bam_core.c, bam_records.c).
 * They compile as one unit in that order. pileup.py's Python path gives the same bytes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cffi: begin */
/* PU_MAXC: mod codes in one run (more: pileup.py's Python path); PU_K: features per position
 * and strand at most, 13 + 4 * PU_MAXC (delete, fail x 4, no call x 4, canonical x 4, code x
 * base; an interval's rows hold pu_ctx.k of them, its codes') */
#define PU_MAXC 8
#define PU_FIRST_AT_BASE 32
#define PU_FIRST_OF_READ 64
#define PU_K 45

typedef struct {
    /* settings (set by Python before use) */
    float per_base[4];
    int has_per_base[4];
    float default_threshold;
    int nper_mod;
    char per_mod_code[16][12];
    float per_mod_value[16];
    int ignore; /* code index redistributed (--ignore), -1 none */
    int edge_on, edge_start, edge_end, edge_inverted;
    int force_allow;
    int fail_by_base; /* modkit 0.6.1: a failed call is N_fail of its base's rows, N_diff of the
                         others' (0.4.4: N_fail of every row there) */
    /* the code registry: codes met, in order (letters or ChEBI numbers) */
    int ncodes;
    char codes[PU_MAXC][12];
    float code_thr[4][PU_MAXC];
    /* the interval */
    int64_t start, length;
    int32_t *counts;      /* nrows x 2 x k */
    int k;                /* features per position and strand: 13 + 4 x the codes it holds */
    int32_t *diff;        /* 64 keys x (nrows + 1), allocated as keys appear */
    uint64_t keys_used;   /* which of the 64 (strand, base, code) keys have a diff array */
    uint8_t *observed;    /* nrows x 2 x 4 code bit masks, from diff */
    const uint8_t *want;  /* per position: 1 if its tallies are read (NULL: every position) */
    /* the tallies' rows: with want (at pu_begin), one per wanted position (row_of), so that
     * a motif's interval holds its motif positions' only (a CpG interval a sixth of its
     * positions: the tallies were most of a small pileup's memory); else one per position */
    int64_t nrows;
    int32_t *rank;        /* with want, per position 0..length: the wanted positions before it */
    /* sampled probabilities per canonical base */
    float *values[4];
    int64_t nvalues[4], cap_values[4];
    /* with sample_states (numapore summary, sample-probs): per value its call's state, 0
     * canonical or 1 + the registry index of the most likely code, | PU_FIRST_AT_BASE on a
     * read's first value of the base, | PU_FIRST_OF_READ on its first value; and per base the
     * registry codes its sampled calls carry (bit k: code k) */
    int sample_states;
    uint8_t *states[4];
    uint32_t sampled_codes[4];
    /* with sample_in_region (numapore summary --region): only the calls whose reference
     * position is in [sample_from, sample_to) are sampled */
    int sample_in_region;
    int64_t sample_from, sample_to;
    /* out: why a read was skipped */
    char reason[160];
    /* private scratch */
    void *scratch;
} pu_ctx;
/* cffi: end */

/* a position and strand's features (pu_ctx.k of them): deletions, then per base (A, C, G, T)
 * failed calls, no calls and canonical calls, then per code one per base */
enum { F_DELETE = 0, F_FAIL = 1, F_NOCALL = 5, F_CANON = 9, F_CODES = 13 };

enum { SKIP_OK = 0, SKIP_MISSING, SKIP_ML_SHORT, SKIP_MM, SKIP_CONFLICT, SKIP_EMPTY,
       SKIP_IMPLICIT, SKIP_CODES };
#define NO_CALL ((int16_t)0xFEFE) /* two equal bytes: a read's calls start as a memset */
#define NO_CALL_BYTE 0xFE
#define FILTERED (-1)
#define CANONICAL 0
static const uint64_t FX_K = 0x517cc1b727220a95ULL;

/* one (MM strand, base) table of a read over its forward positions */
typedef struct {
    int exists;
    char mode; /* '?', '.', or 0 (no mode given) */
    int ncodes;
    int codes[PU_MAXC]; /* registry indices, insertion order */
    uint8_t *flags;     /* bit 0 has, bit 1 inferred */
    uint8_t *present;   /* bit j: codes[j] present */
    float *probs[PU_MAXC];
} table_t;

typedef struct {
    int64_t cap;        /* read length the buffers hold */
    table_t t[2][4];
    const uint8_t *seq; /* the read's sequence as stored, and whether it is reversed */
    int reverse;
    int32_t *next_want; /* with want: per position 0..length the first wanted one from it */
    int64_t next_cap;
    int32_t *base_pos[4];
    int64_t nbase[4];
    int16_t *calls[2];  /* per MM strand: the call at each forward position */
    uint8_t *gflags;    /* one group's own map */
    int64_t *qpos, *rpos;
    int64_t pair_cap;
    int64_t *deltas;
    int64_t delta_cap;
    float *canon;
} scratch_t;

static int base_index(uint8_t c) {
    switch (c) {
    case 'A': return 0;
    case 'C': return 1;
    case 'G': return 2;
    case 'T': return 3;
    default: return 4;
    }
}

static uint8_t complement_of(uint8_t c) {
    switch (c) {
    case 'A': return 'T'; case 'C': return 'G'; case 'G': return 'C'; case 'T': return 'A';
    case 'a': return 't'; case 'c': return 'g'; case 'g': return 'c'; case 't': return 'a';
    case 'R': return 'Y'; case 'Y': return 'R'; case 'K': return 'M'; case 'M': return 'K';
    case 'B': return 'V'; case 'V': return 'B'; case 'D': return 'H'; case 'H': return 'D';
    default: return c;
    }
}

/* complement_of as a table (prepare's per-base lookup), filled when the module loads: threads
 * read it at once */
static uint8_t COMPLEMENT[256];

__attribute__((constructor)) static void fill_complement(void) {
    for (int i = 0; i < 256; i++) COMPLEMENT[i] = complement_of((uint8_t)i);
}

static uint64_t fx_hash(const char *code) {
    int chebi = code[0] >= '0' && code[0] <= '9';
    uint64_t h = chebi ? FX_K : 0;
    uint64_t v = chebi ? strtoull(code, NULL, 10) : (uint64_t)(unsigned char)code[0];
    uint64_t rot = (h << 5) | (h >> 59);
    return (rot ^ v) * FX_K;
}

/* hashbrown's iteration order of codes (registry indices) inserted in order: see hash_order */
static void hash_order(const pu_ctx *c, const int *in, int n, int *out) {
    int buckets[8], nb = 4, i, j;
    for (i = 0; i < 8; i++) buckets[i] = -1;
    if (n >= 8) {
        memcpy(out, in, n * sizeof(int));
        return;
    }
    for (i = 0; i < n; i++) {
        if (i == 3) {
            int old[3], k = 0;
            for (j = 0; j < 4; j++)
                if (buckets[j] >= 0) old[k++] = buckets[j];
            nb = 8;
            for (j = 0; j < 8; j++) buckets[j] = -1;
            for (j = 0; j < k; j++) {
                int slot = (int)(fx_hash(c->codes[old[j]]) & (uint64_t)(nb - 1));
                while (buckets[slot] >= 0) slot = (slot + 1) & (nb - 1);
                buckets[slot] = old[j];
            }
        }
        int slot = (int)(fx_hash(c->codes[in[i]]) & (uint64_t)(nb - 1));
        while (buckets[slot] >= 0) slot = (slot + 1) & (nb - 1);
        buckets[slot] = in[i];
    }
    for (i = 0, j = 0; i < nb; i++)
        if (buckets[i] >= 0) out[j++] = buckets[i];
}

static float threshold_for(const pu_ctx *c, int base, const char *code) {
    const char letters[4][2] = {"A", "C", "G", "T"};
    for (int i = 0; i < c->nper_mod; i++)
        if (!strcmp(c->per_mod_code[i], code)) return c->per_mod_value[i];
    for (int i = 0; i < c->nper_mod; i++)
        if (!strcmp(c->per_mod_code[i], letters[base])) return c->per_mod_value[i];
    return c->has_per_base[base] ? c->per_base[base] : c->default_threshold;
}

/* the registry index of a code (registered if new); -1 if the registry is full */
static void *grow(void *p, size_t size);

/* a code met within an interval: its tallies' rows widened to k features (the codes were
 * fewer at pu_begin; rows only as wide as the codes met keep the tallies in cache) */
static void widen(pu_ctx *c, int k) {
    int64_t rows = c->nrows * 2;
    c->counts = grow(c->counts, (size_t)(rows + 2) * k * sizeof(int32_t)); /* rows may be 0 */
    for (int64_t i = rows - 1; i >= 0; i--) {
        memmove(c->counts + i * k, c->counts + i * c->k, c->k * sizeof(int32_t));
        memset(c->counts + i * k + c->k, 0, (k - c->k) * sizeof(int32_t));
    }
    c->k = k;
}

int pu_code(pu_ctx *c, const char *code) {
    for (int i = 0; i < c->ncodes; i++)
        if (!strcmp(c->codes[i], code)) return i;
    if (c->ncodes >= PU_MAXC) return -1;
    int i = c->ncodes++;
    snprintf(c->codes[i], sizeof c->codes[i], "%s", code);
    for (int b = 0; b < 4; b++) c->code_thr[b][i] = threshold_for(c, b, code);
    if (c->counts && F_CODES + 4 * c->ncodes > c->k) widen(c, F_CODES + 4 * c->ncodes);
    return i;
}

static void *grow(void *p, size_t size) {
    void *q = realloc(p, size);
    if (!q) abort();
    return q;
}

static scratch_t *get_scratch(pu_ctx *c, int64_t n) {
    scratch_t *s = c->scratch;
    if (!s) s = c->scratch = calloc(1, sizeof(scratch_t));
    if (n > s->cap) {
        int64_t cap = n + n / 2 + 64;
        for (int st = 0; st < 2; st++)
            for (int b = 0; b < 4; b++) {
                table_t *t = &s->t[st][b];
                t->flags = grow(t->flags, cap);
                t->present = grow(t->present, cap);
                for (int j = 0; j < PU_MAXC; j++) t->probs[j] = grow(t->probs[j], cap * sizeof(float));
            }
        for (int b = 0; b < 4; b++) s->base_pos[b] = grow(s->base_pos[b], cap * sizeof(int32_t));
        for (int st = 0; st < 2; st++) s->calls[st] = grow(s->calls[st], cap * sizeof(int16_t));
        s->gflags = grow(s->gflags, cap);
        s->canon = grow(s->canon, cap * sizeof(float));
        s->cap = cap;
    }
    return s;
}

void pu_free(pu_ctx *c) {
    scratch_t *s = c->scratch;
    if (s) {
        for (int st = 0; st < 2; st++)
            for (int b = 0; b < 4; b++) {
                free(s->t[st][b].flags);
                free(s->t[st][b].present);
                for (int j = 0; j < PU_MAXC; j++) free(s->t[st][b].probs[j]);
            }
        free(s->next_want);
        for (int b = 0; b < 4; b++) free(s->base_pos[b]);
        free(s->calls[0]);
        free(s->calls[1]);
        free(s->gflags);
        free(s->qpos);
        free(s->rpos);
        free(s->deltas);
        free(s->canon);
        free(s);
    }
    free(c->counts);
    free(c->rank);
    free(c->diff);
    free(c->observed);
    for (int b = 0; b < 4; b++) free(c->values[b]);
    for (int b = 0; b < 4; b++) free(c->states[b]);
    memset(c, 0, sizeof *c);
}
