/* numapore's compiled pileup core (cffi; built by pileup_core_build.py).
 *
 * The per-read work of numapore.methylation.pileup in C, with the same rules and the same
 * float32 arithmetic: a read's MM/ML into per-(MM strand, base) tables (modkit's implicit and
 * explicit modes, group combination and its conflicts), the edge filter, the --ignore
 * redistribution, the threshold call at each position (ties as Rust's max() over a hashbrown
 * map with FxHasher), and the tally of one interval's features per position and strand; then the
 * bedMethyl text of the interval (the simple layouts; motif labels and combined strands are left
 * to Python, which reads the counts). pileup.py's Python path gives the same bytes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cffi: begin */
/* PU_MAXC: mod codes in one run (more: pileup.py's Python path); PU_K: features per position
 * and strand at most, 10 + 4 * PU_MAXC (delete, fail, no call x 4, canonical x 4, code x base;
 * an interval's rows hold pu_ctx.k of them, its codes') */
#define PU_MAXC 8
#define PU_K 42

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
    /* the code registry: codes met, in order (letters or ChEBI numbers) */
    int ncodes;
    char codes[PU_MAXC][12];
    float code_thr[4][PU_MAXC];
    /* the interval */
    int64_t start, length;
    int32_t *counts;      /* length x 2 x k */
    int k;                /* features per position and strand: 10 + 4 x the codes it holds */
    int32_t *diff;        /* 64 keys x (length + 1), allocated as keys appear */
    uint64_t keys_used;   /* which of the 64 (strand, base, code) keys have a diff array */
    uint8_t *observed;    /* length x 2 x 4 code bit masks, from diff */
    const uint8_t *want;  /* per position: 1 if its tallies are read (NULL: every position) */
    /* sampled probabilities per canonical base */
    float *values[4];
    int64_t nvalues[4], cap_values[4];
    /* out: why a read was skipped */
    char reason[160];
    /* private scratch */
    void *scratch;
} pu_ctx;
/* cffi: end */

enum { SKIP_OK = 0, SKIP_MISSING, SKIP_ML_SHORT, SKIP_MM, SKIP_CONFLICT, SKIP_EMPTY,
       SKIP_IMPLICIT, SKIP_CODES };
#define NO_CALL (-2)
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
    uint8_t *fwd;       /* forward sequence */
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

/* complement_of as a table, filled on first use (prepare's per-base lookup) */
static uint8_t COMPLEMENT[256];
static int complement_ready = 0;

static uint8_t complement(uint8_t c) {
    if (!complement_ready) {
        for (int i = 0; i < 256; i++) COMPLEMENT[i] = complement_of((uint8_t)i);
        complement_ready = 1;
    }
    return COMPLEMENT[c];
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
    int64_t rows = c->length * 2;
    c->counts = grow(c->counts, (size_t)rows * k * sizeof(int32_t));
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
    if (c->counts && 10 + 4 * c->ncodes > c->k) widen(c, 10 + 4 * c->ncodes);
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
        s->fwd = grow(s->fwd, cap);
        for (int b = 0; b < 4; b++) s->base_pos[b] = grow(s->base_pos[b], cap * sizeof(int32_t));
        for (int st = 0; st < 2; st++) s->calls[st] = grow(s->calls[st], cap * sizeof(int16_t));
        s->gflags = grow(s->gflags, cap);
        s->canon = grow(s->canon, cap * sizeof(float));
        s->cap = cap;
    }
    return s;
}

static int fail(pu_ctx *c, int kind, const char *msg) {
    snprintf(c->reason, sizeof c->reason, "%s", msg);
    return kind;
}

static int is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; }

/* a delta list as modkit's nom parser reads it (see parse_deltas in pileup.py) */
static int parse_deltas(scratch_t *s, const char *p, const char *end, int64_t *n) {
    int64_t k = 0;
    for (;;) {
        const char *q = p;
        while (q < end && is_ws(*q)) q++;
        if (q >= end || *q < '0' || *q > '9') {
            if (!k) return -1;
            break;
        }
        int64_t v = 0;
        while (q < end && *q >= '0' && *q <= '9') v = v * 10 + (*q++ - '0');
        while (q < end && is_ws(*q)) q++;
        if (k >= s->delta_cap) {
            s->delta_cap = s->delta_cap * 2 + 256;
            s->deltas = grow(s->deltas, s->delta_cap * sizeof(int64_t));
        }
        s->deltas[k++] = v;
        p = q;
        if (p < end && *p == ',') p++;
        else break;
    }
    *n = k;
    return 0;
}

/* MM/ML into the read's tables (read_mod_tables and _combine_group in pileup.py) */
static int read_tables(pu_ctx *c, scratch_t *s, int64_t n, const char *mm, const uint8_t *ml,
                       int64_t nml) {
    for (int st = 0; st < 2; st++)
        for (int b = 0; b < 4; b++) s->t[st][b].exists = 0;
    int have_pos[4] = {0, 0, 0, 0};
    int64_t pointer = 0;
    const char *p = mm;
    while (*p) {
        const char *g_end = strchr(p, ';');
        if (!g_end) g_end = p + strlen(p);
        if (g_end == p) { p++; continue; }
        const char *h_end = memchr(p, ',', g_end - p);
        if (!h_end) h_end = g_end;
        if (h_end == p || !strchr("ACGTUN", *p)) return fail(c, SKIP_MM, "invalid MM: bad fundamental base");
        char fb = *p == 'U' ? 'T' : *p;
        if (h_end - p < 2 || (p[1] != '+' && p[1] != '-')) return fail(c, SKIP_MM, "invalid MM: bad strand");
        int strand = p[1] == '-';
        const char *h = p + 2;
        int gcodes[PU_MAXC], ng = 0, chebi = 0;
        char mode = 0;
        if (h < h_end && *h >= '0' && *h <= '9') {
            char num[12];
            int k = 0;
            while (h < h_end && *h >= '0' && *h <= '9') {
                if (k < 11) num[k++] = *h;
                h++;
            }
            num[k] = 0;
            char clean[12];
            snprintf(clean, sizeof clean, "%llu", strtoull(num, NULL, 10));
            int idx = pu_code(c, clean);
            if (idx < 0) return fail(c, SKIP_CODES, "too many mod codes");
            gcodes[ng++] = idx;
            chebi = 1;
        }
        for (; h < h_end; h++) {
            if (*h == '?' || *h == '.') mode = *h;
            else if (*h >= '0' && *h <= '9') return fail(c, SKIP_MM, "invalid MM: digit mod code");
            else if (chebi) return fail(c, SKIP_MM, "invalid MM: ChEBI and letter codes");
            else {
                char one[2] = {*h, 0};
                int idx = pu_code(c, one);
                if (idx < 0 || ng >= PU_MAXC) return fail(c, SKIP_CODES, "too many mod codes");
                gcodes[ng++] = idx;
            }
        }
        int64_t nd = 0;
        if (h_end < g_end && parse_deltas(s, h_end + 1, g_end, &nd))
            return fail(c, SKIP_MM, "invalid MM delta list");
        if (fb == 'N') return fail(c, SKIP_CODES, "N fundamental base"); /* Python path */
        int fbi = base_index((uint8_t)fb);
        if (!have_pos[fbi]) {
            /* without a branch per base (the bases of a read are as good as random) */
            int64_t k = 0;
            int32_t *out = s->base_pos[fbi];
            const uint8_t *fwd = s->fwd, want = (uint8_t)fb;
            for (int64_t i = 0; i < n; i++) {
                out[k] = (int32_t)i;
                k += fwd[i] == want;
            }
            s->nbase[fbi] = k;
            have_pos[fbi] = 1;
        }
        int64_t end = pointer + nd * ng;
        if (end > nml) {
            snprintf(c->reason, sizeof c->reason, "ML array too short, need %lld have %lld",
                     (long long)end, (long long)nml);
            return SKIP_ML_SHORT;
        }
        /* the group's own map: listed positions, then implicit canonical ones; every map and
         * table of this base is read at the base's positions only (bp, nb) */
        const int32_t *bp = s->base_pos[fbi];
        const int64_t nb = s->nbase[fbi];
        uint8_t *gf = s->gflags;
        for (int64_t k = 0; k < nb; k++) gf[bp[k]] = 0;
        int64_t idx = -1;
        for (int64_t k = 0; k < nd; k++) {
            idx += s->deltas[k] + 1;
            if (idx >= s->nbase[fbi]) return fail(c, SKIP_MM, "MM delta list refers to positions beyond end of seq");
            gf[s->base_pos[fbi][idx]] = 1;
        }
        int implicit = mode != '?';
        if (implicit)
            for (int64_t k = 0; k < s->nbase[fbi]; k++) {
                int32_t q = s->base_pos[fbi][k];
                if (!gf[q]) gf[q] = 3;
            }
        if (!nd && !(implicit && s->nbase[fbi])) {
            pointer = end;
            p = *g_end ? g_end + 1 : g_end;
            continue;
        }
        table_t *t = &s->t[strand][fbi];
        if (!t->exists) {
            t->exists = 1;
            t->mode = mode;
            t->ncodes = 0;
            for (int64_t k = 0; k < nb; k++) t->flags[bp[k]] = t->present[bp[k]] = 0;
        } else if (t->mode != mode) {
            t->mode = '.';
        }
        int slot[PU_MAXC];
        for (int j = 0; j < ng; j++) {
            int k;
            for (k = 0; k < t->ncodes; k++)
                if (t->codes[k] == gcodes[j]) break;
            if (k == t->ncodes) {
                if (k >= PU_MAXC) return fail(c, SKIP_CODES, "too many mod codes");
                t->codes[t->ncodes++] = gcodes[j];
                for (int64_t i = 0; i < nb; i++) t->probs[k][bp[i]] = 0.0f;
            }
            slot[j] = k;
        }
        int any_overlap = 0;
        for (int64_t k = 0; k < nb; k++) {
            int32_t q = bp[k];
            if (!gf[q]) continue;
            if (t->flags[q] & 1) {
                if (((t->flags[q] >> 1) & 1) != ((gf[q] >> 1) & 1))
                    return fail(c, SKIP_CONFLICT, "explicit and inferred calls at the same position");
                any_overlap = 1;
            }
        }
        idx = -1;
        for (int64_t k = 0; k < nd; k++) {
            idx += s->deltas[k] + 1;
            int32_t q = s->base_pos[fbi][idx];
            for (int j = 0; j < ng; j++) {
                float pr = ((float)ml[pointer + k * ng + j] + 0.5f) / 256.0f;
                t->probs[slot[j]][q] = t->probs[slot[j]][q] + pr;
            }
        }
        uint8_t bits = 0;
        for (int j = 0; j < ng; j++) bits |= (uint8_t)(1u << slot[j]);
        for (int64_t k = 0; k < nb; k++)
            if (gf[bp[k]]) t->present[bp[k]] |= bits;
        if (any_overlap) {
            int order[PU_MAXC], cidx[PU_MAXC];
            hash_order(c, t->codes, t->ncodes, order);
            for (int j = 0; j < t->ncodes; j++)
                for (int k = 0; k < t->ncodes; k++)
                    if (t->codes[k] == order[j]) cidx[j] = k;
            for (int64_t k = 0; k < nb; k++) {
                int32_t q = bp[k];
                if (!(gf[q] && (t->flags[q] & 1))) continue;
                float total = 0.0f;
                for (int j = 0; j < t->ncodes; j++)
                    if (t->present[q] & (1u << cidx[j])) total = total + t->probs[cidx[j]][q];
                if (total > 1.01f) return fail(c, SKIP_CONFLICT, "probabilities at a position sum to more than 1");
            }
        }
        for (int64_t k = 0; k < nb; k++) t->flags[bp[k]] |= gf[bp[k]];
        pointer = end;
        p = *g_end ? g_end + 1 : g_end;
    }
    int any = 0;
    for (int st = 0; st < 2; st++)
        for (int b = 0; b < 4; b++)
            if (s->t[st][b].exists) any = 1;
    if (!any) return fail(c, SKIP_EMPTY, "no modified base information");
    return SKIP_OK;
}

static int edge_keeps(const pu_ctx *c, int64_t q, int64_t n) {
    if (!c->edge_on) return 1;
    int inside = q >= c->edge_start && q < n - c->edge_end;
    return c->edge_inverted ? !inside : inside;
}

/* A table's codes after --ignore (hash order) as (table slot) indices; their count. The
 * probabilities at position q are then prob_at(). */
static int table_order(const pu_ctx *c, const table_t *t, int *slots) {
    int order[PU_MAXC], others[PU_MAXC], no = 0;
    hash_order(c, t->codes, t->ncodes, order);
    for (int j = 0; j < t->ncodes; j++)
        if (order[j] != c->ignore) others[no++] = order[j];
    int final[PU_MAXC];
    if (c->ignore >= 0) hash_order(c, others, no, final);
    else memcpy(final, others, no * sizeof(int));
    for (int j = 0; j < no; j++)
        for (int k = 0; k < t->ncodes; k++)
            if (t->codes[k] == final[j]) slots[j] = k;
    return no;
}

static int ignore_slot(const pu_ctx *c, const table_t *t) {
    if (c->ignore < 0) return -1;
    for (int k = 0; k < t->ncodes; k++)
        if (t->codes[k] == c->ignore) return k;
    return -1;
}

/* probabilities of the ordered codes at q (after redistribution); presence bits in *pres */
static void probs_at(const table_t *t, const int *slots, int no, int ig, int64_t q, float *out,
                     unsigned *pres) {
    unsigned bits = 0;
    float share = 0.0f;
    if (ig >= 0) {
        float marginal = (t->present[q] >> ig) & 1 ? t->probs[ig][q] : 0.0f;
        float n_other = 1.0f;
        for (int j = 0; j < no; j++)
            if ((t->present[q] >> slots[j]) & 1) n_other = n_other + 1.0f;
        share = marginal / n_other;
    }
    for (int j = 0; j < no; j++) {
        if ((t->present[q] >> slots[j]) & 1) {
            bits |= 1u << j;
            out[j] = ig >= 0 ? t->probs[slots[j]][q] + share : t->probs[slots[j]][q];
        } else {
            out[j] = 0.0f;
        }
    }
    *pres = bits;
}

static int mode_ok(const pu_ctx *c, const scratch_t *s) {
    if (c->force_allow) return 1;
    for (int st = 0; st < 2; st++)
        for (int b = 0; b < 4; b++)
            if (s->t[st][b].exists && s->t[st][b].mode == 0) return 0;
    return 1;
}

static int prepare(pu_ctx *c, scratch_t *s, int reverse, const char *seq, int64_t n) {
    if (!reverse) {
        memcpy(s->fwd, seq, n);
        return 0;
    }
    complement('A');
    for (int64_t i = 0; i < n; i++) s->fwd[i] = COMPLEMENT[(uint8_t)seq[n - 1 - i]];
    (void)c;
    return 0;
}

/* The calls of a read (ReadCache::add_record): fills s->calls[strand] (NO_CALL where none) and
 * *keys with its (reference strand, base, code) bits. */
static int read_calls(pu_ctx *c, scratch_t *s, int reverse, int64_t n, uint64_t *keys,
                      int *has_strand) {
    *keys = 0;
    has_strand[0] = has_strand[1] = 0;
    int trimmable = !c->edge_on || !(n <= c->edge_start || n <= c->edge_end);
    int added = 0;
    for (int st = 0; st < 2; st++) {
        for (int b = 0; b < 4; b++) {
            table_t *t = &s->t[st][b];
            if (!t->exists || !trimmable) continue;
            /* the table's positions are its base's (read_tables) */
            const int32_t *bp = s->base_pos[b];
            const int64_t nb = s->nbase[b];
            int64_t kept = 0;
            for (int64_t k = 0; k < nb; k++)
                if ((t->flags[bp[k]] & 1) && edge_keeps(c, bp[k], n)) kept++;
            if (!kept) continue;
            if (!has_strand[st]) {
                for (int64_t q = 0; q < n; q++) s->calls[st][q] = NO_CALL;
                has_strand[st] = 1;
            }
            int slots[PU_MAXC], no = table_order(c, t, slots), ig = ignore_slot(c, t);
            int tb = st == 0 ? b : 3 - b;
            float thr[PU_MAXC], can_thr = c->has_per_base[tb] ? c->per_base[tb] : c->default_threshold;
            for (int j = 0; j < no; j++) thr[j] = c->code_thr[tb][t->codes[slots[j]]];
            unsigned seen = 0;
            for (int64_t k = 0; k < nb; k++) {
                int64_t q = bp[k];
                if (!((t->flags[q] & 1) && edge_keeps(c, q, n))) continue;
                float pr[PU_MAXC];
                unsigned pres;
                probs_at(t, slots, no, ig, q, pr, &pres);
                seen |= pres;
                float total = 0.0f;
                for (int j = 0; j < no; j++)
                    if ((pres >> j) & 1) total = total + pr[j];
                float can = 1.0f - total;
                int best = FILTERED;
                float best_p = -INFINITY;
                for (int j = 0; j < no; j++)
                    if (((pres >> j) & 1) && pr[j] >= thr[j] && pr[j] >= best_p) {
                        best = t->codes[slots[j]] + 1;
                        best_p = pr[j];
                    }
                if (can >= can_thr && can >= best_p) best = CANONICAL;
                s->calls[st][q] = (int16_t)best;
            }
            int ref_strand = st ^ (reverse ? 1 : 0);
            for (int j = 0; j < no; j++)
                if ((seen >> j) & 1) *keys |= 1ULL << ((ref_strand * 4 + tb) * PU_MAXC + t->codes[slots[j]]);
            added = 1;
        }
    }
    return added ? SKIP_OK : fail(c, SKIP_EMPTY, "no usable calls");
}

/* start an interval: zero the tallies */
int pu_begin(pu_ctx *c, int64_t start, int64_t length) {
    c->start = start;
    c->length = length;
    c->k = 10 + 4 * (c->ncodes > 0 ? c->ncodes : 1);
    c->counts = grow(c->counts, (size_t)length * 2 * c->k * sizeof(int32_t));
    memset(c->counts, 0, (size_t)length * 2 * c->k * sizeof(int32_t));
    c->diff = grow(c->diff, (size_t)64 * (length + 1) * sizeof(int32_t));
    c->keys_used = 0;
    c->observed = grow(c->observed, (size_t)length * 8);
    return 0;
}

static int64_t parse_cigar(scratch_t *s, const char *cigar, int64_t ref_start, int64_t *ops,
                           int64_t *lens) {
    int64_t k = 0;
    (void)s;
    (void)ref_start;
    const char *p = cigar;
    while (*p) {
        int64_t v = 0;
        while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
        char op = *p ? *p++ : 0;
        int code = op == 'M' ? 0 : op == 'I' ? 1 : op == 'D' ? 2 : op == 'N' ? 3 : op == 'S' ? 4
                 : op == 'H' ? 5 : op == 'P' ? 6 : op == '=' ? 7 : op == 'X' ? 8 : -1;
        if (code < 0) return -1;
        ops[k] = code;
        lens[k++] = v;
    }
    return k;
}

/* A covered segment [a, bnd) of the interval (positions from its start, clipped to it) adds one
 * to the coverage of every key the read calls: a difference array per key, made when a key
 * first appears. */
static void add_segment(pu_ctx *c, uint64_t keys, int64_t a, int64_t bnd) {
    if (a < 0) a = 0;
    if (bnd > c->length) bnd = c->length;
    if (a >= bnd) return;
    for (int key = 0; key < 64; key++)
        if ((keys >> key) & 1) {
            int32_t *diff = c->diff + (size_t)key * (c->length + 1);
            if (!((c->keys_used >> key) & 1)) {
                memset(diff, 0, (c->length + 1) * sizeof(int32_t));
                c->keys_used |= 1ULL << key;
            }
            diff[a]++;
            diff[bnd]--;
        }
}

static int add_read_ops(pu_ctx *c, int reverse, int64_t ref_start, const int64_t *ops,
                        const int64_t *lens, int64_t nops, const char *seq, int64_t n,
                        const char *mm, const uint8_t *ml, int64_t nml);

/* One read of the interval: its calls tallied at the positions [start, start + length).
 * Returns 0, or a skip kind with c->reason set. */
int pu_add_read(pu_ctx *c, int reverse, int64_t ref_start, const char *cigar, int64_t ncig_max,
                const char *seq, int64_t n, const char *mm, const uint8_t *ml, int64_t nml) {
    int64_t *ops = malloc(ncig_max * 2 * sizeof(int64_t)), *lens = ops + ncig_max;
    int64_t nops = parse_cigar(NULL, cigar, ref_start, ops, lens);
    int rc = add_read_ops(c, reverse, ref_start, ops, lens, nops, seq, n, mm, ml, nml);
    free(ops);
    return rc;
}

/* pu_add_read over the CIGAR's operations (0-8: MIDNSHP=X) and lengths (bam_core.c's reader
 * gives them from the record); nops < 0: a CIGAR that does not parse */
static int add_read_ops(pu_ctx *c, int reverse, int64_t ref_start, const int64_t *ops,
                        const int64_t *lens, int64_t nops, const char *seq, int64_t n,
                        const char *mm, const uint8_t *ml, int64_t nml) {
    scratch_t *s = get_scratch(c, n);
    uint64_t keys = 0;
    int has[2] = {0, 0}, rc = SKIP_MISSING;
    /* a read modkit skips (its tags, mode or calls) still counts as no call (and deletions)
     * wherever it is aligned: only its calls and codes are left out */
    if (mm) {
        prepare(c, s, reverse, seq, n);
        rc = read_tables(c, s, n, mm, ml, nml);
        if (rc == SKIP_CODES) return rc;
        if (!rc && !mode_ok(c, s)) rc = fail(c, SKIP_IMPLICIT, "MM has no mode ('.'/'?')");
        if (!rc) rc = read_calls(c, s, reverse, n, &keys, has);
        if (rc) {
            keys = 0;
            has[0] = has[1] = 0;
        }
    }
    if (nops < 0) return fail(c, SKIP_MM, "bad CIGAR");
    int64_t start = c->start, end = c->start + c->length;
    int strand = reverse ? 1 : 0;
    int64_t q = 0, r = ref_start, seg_start = ref_start;
    int32_t *counts = c->counts; /* after read_tables: a new code widens them */
    const int64_t stride = c->k;
    for (int64_t k = 0; k < nops; k++) {
        int64_t op = ops[k], len = lens[k];
        if (op == 0 || op == 7 || op == 8) {
            int64_t a = r < start ? start - r : 0, bnd = r + len > end ? end - r : len;
            const uint8_t *want = c->want;
            for (int64_t i = a; i < bnd; i++) {
                int64_t qq = q + i, rr = r + i - start;
                if (want && !want[rr]) continue;
                int b = base_index((uint8_t)seq[qq]);
                if (b == 4) continue;
                int64_t qf = qq;
                if (reverse) {
                    b = 3 - b;
                    qf = n - 1 - qq;
                }
                int pc = has[0] ? s->calls[0][qf] : NO_CALL;
                int nc = has[1] ? s->calls[1][qf] : NO_CALL;
                if (pc == NO_CALL && nc == NO_CALL) {
                    counts[(rr * 2 + strand) * stride + 2 + b]++;
                    continue;
                }
                if (pc != NO_CALL) {
                    int kind = pc == FILTERED ? 1 : pc == CANONICAL ? 6 + b : 10 + 4 * (pc - 1) + b;
                    counts[(rr * 2 + strand) * stride + kind]++;
                }
                if (nc != NO_CALL) {
                    int pb = 3 - b;
                    int kind = nc == FILTERED ? 1 : nc == CANONICAL ? 6 + pb : 10 + 4 * (nc - 1) + pb;
                    counts[(rr * 2 + (1 - strand)) * stride + kind]++;
                }
            }
            q += len;
            r += len;
        } else if (op == 2) {
            int64_t a = r < start ? start - r : 0, bnd = r + len > end ? end - r : len;
            for (int64_t i = a; i < bnd; i++)
                if (!c->want || c->want[r + i - start]) counts[((r + i - start) * 2 + strand) * stride]++;
            r += len;
        } else if (op == 3) {
            /* a skip ends a covered segment */
            if (keys) add_segment(c, keys, seg_start - start, r - start);
            r += len;
            seg_start = r;
        } else if (op == 1 || op == 4) {
            q += len;
        }
    }
    if (keys) add_segment(c, keys, seg_start - start, r - start);
    return rc;
}

/* the observed code masks (length x 2 strands x 4 bases, bit per code) from the diff arrays */
int pu_observe(pu_ctx *c) {
    memset(c->observed, 0, (size_t)c->length * 8);
    for (int key = 0; key < 64; key++) {
        if (!((c->keys_used >> key) & 1)) continue;
        int st = key / (4 * PU_MAXC), b = (key / PU_MAXC) % 4, code = key % PU_MAXC;
        int32_t run = 0, *d = c->diff + (size_t)key * (c->length + 1);
        for (int64_t p = 0; p < c->length; p++) {
            run += d[p];
            if (run > 0) c->observed[p * 8 + st * 4 + b] |= (uint8_t)(1u << code);
        }
    }
    return 0;
}

/* an upper bound on the rows pu_text writes (positions and strands with calls x codes) */
int64_t pu_rows_bound(pu_ctx *c, int combine_mods) {
    int64_t rows = 0, per = combine_mods ? 1 : (c->ncodes ? c->ncodes : 1);
    for (int64_t i = 0; i < c->length * 2; i++) {
        const int32_t *f = c->counts + i * c->k;
        for (int b = 0; b < 4; b++) {
            int64_t calls = f[6 + b];
            for (int k = 0; k < c->ncodes; k++) calls += f[10 + 4 * k + b];
            if (calls) rows += per;
        }
    }
    return rows;
}

static int code_cmp(const pu_ctx *c, int a, int b) {
    const char *x = c->codes[a], *y = c->codes[b];
    int xd = x[0] >= '0' && x[0] <= '9', yd = y[0] >= '0' && y[0] <= '9';
    if (xd != yd) return xd - yd;
    if (xd) {
        unsigned long long u = strtoull(x, NULL, 10), v = strtoull(y, NULL, 10);
        return (u > v) - (u < v);
    }
    return (unsigned char)x[0] - (unsigned char)y[0];
}

static char *put_int(char *o, int64_t v) {
    char tmp[24];
    int k = 0;
    if (v < 0) {
        *o++ = '-';
        v = -v;
    }
    do tmp[k++] = (char)('0' + v % 10); while (v /= 10);
    while (k) *o++ = tmp[--k];
    return o;
}

/* the rows of one position and strand: (code: registry index, or -1 - base with combine_mods)
 * and base, unsorted; their number */
static int rows_at(const pu_ctx *c, int64_t p, int s, int combine_mods, int *rcode, int *rbase) {
    const int32_t *f = c->counts + (p * 2 + s) * c->k;
    int nr = 0;
    for (int b = 0; b < 4; b++) {
        int64_t calls = f[6 + b];
        for (int k = 0; k < c->ncodes; k++) calls += f[10 + 4 * k + b];
        if (!calls) continue;
        if (combine_mods) {
            rcode[nr] = -1 - b;
            rbase[nr++] = b;
            continue;
        }
        uint8_t obs = c->observed[p * 8 + s * 4 + b];
        for (int k = 0; k < c->ncodes; k++)
            if ((obs >> k) & 1) {
                rcode[nr] = k;
                rbase[nr++] = b;
            }
    }
    return nr;
}

/* a row's counts: cov, mod, canonical, other mod, delete, fail, diff, no call */
static void row_values(const pu_ctx *c, int64_t p, int s, int code, int b, int64_t *v) {
    const int32_t *f = c->counts + (p * 2 + s) * c->k;
    int64_t mods = 0, other_bases = 0;
    for (int k = 0; k < c->ncodes; k++) mods += f[10 + 4 * k + b];
    for (int ob = 0; ob < 4; ob++) {
        if (ob == b) continue;
        other_bases += f[2 + ob] + f[6 + ob];
        for (int k = 0; k < c->ncodes; k++) other_bases += f[10 + 4 * k + ob];
    }
    v[0] = f[6 + b] + mods;
    v[1] = code < 0 ? mods : f[10 + 4 * code + b];
    v[2] = f[6 + b];
    v[3] = code < 0 ? 0 : mods - v[1];
    v[4] = f[0];
    v[5] = f[1];
    v[6] = other_bases;
    v[7] = f[2 + b];
}

static int key_cmp(const pu_ctx *c, int a, int b) {
    if (a < 0 || b < 0) return (a < 0 ? "ACGT"[-1 - a] : 0) - (b < 0 ? "ACGT"[-1 - b] : 0);
    return code_cmp(c, a, b);
}

/* The one bedMethyl row writer: chrom, pos, name (the code: registry index, or -1 - base with
 * combine_mods; then ",label" if label), strand, the row's counts v (cov, mod, canonical, other
 * mod, delete, fail, diff, no call; sep between columns 10 to 18); the end of what it wrote. */
static char *put_row(const pu_ctx *c, char *o, const char *chrom, size_t chrom_len, int64_t pos,
                     int code, const char *label, char strand, const int64_t *v, char sep) {
    memcpy(o, chrom, chrom_len);
    o += chrom_len;
    *o++ = '\t';
    o = put_int(o, pos);
    *o++ = '\t';
    o = put_int(o, pos + 1);
    *o++ = '\t';
    if (code < 0) *o++ = "ACGT"[-1 - code];
    else {
        size_t l = strlen(c->codes[code]);
        memcpy(o, c->codes[code], l);
        o += l;
    }
    if (label) {
        size_t l = strlen(label);
        *o++ = ',';
        memcpy(o, label, l);
        o += l;
    }
    *o++ = '\t';
    o = put_int(o, v[0]);
    *o++ = '\t';
    *o++ = strand;
    *o++ = '\t';
    o = put_int(o, pos);
    *o++ = '\t';
    o = put_int(o, pos + 1);
    memcpy(o, "\t255,0,0\t", 9);
    o += 9;
    o = put_int(o, v[0]);
    *o++ = sep;
    float frac = (float)v[1] / (float)v[0]; /* modkit's percent: f32 arithmetic */
    float pct = frac * 100.0f;
    o += snprintf(o, 32, "%.2f", (double)pct);
    for (int j = 1; j < 8; j++) {
        *o++ = sep;
        o = put_int(o, v[j]);
    }
    *o++ = '\n';
    return o;
}

/* sorts n row keys (with their bases, when rbase is not NULL) by code order */
static void sort_keys(const pu_ctx *c, int *keys, int *rbase, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && key_cmp(c, keys[j - 1], keys[j]) > 0; j--) {
            int t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t;
            if (rbase) {
                t = rbase[j]; rbase[j] = rbase[j - 1]; rbase[j - 1] = t;
            }
        }
}

/* The interval's bedMethyl text into out (cap bytes; returns the bytes written, or -(bytes
 * needed) if cap is too small): allowed is length x 2 (0/1), base_mask the bases with rows (bit
 * per base; 0.6's motif base), names per row the code alone. */
int64_t pu_text(pu_ctx *c, const char *chrom, const uint8_t *allowed, int base_mask,
                int combine_mods, int mixed, char *out, int64_t cap, int64_t *nrows) {
    char sep = mixed ? ' ' : '\t';
    size_t chrom_len = strlen(chrom);
    char *o = out, *lim = out + cap;
    int64_t rows = 0;
    for (int64_t p = 0; p < c->length; p++) {
        for (int s = 0; s < 2; s++) {
            if (!allowed[p * 2 + s]) continue;
            int rcode[4 * PU_MAXC], rbase[4 * PU_MAXC];
            int nr = rows_at(c, p, s, combine_mods, rcode, rbase);
            sort_keys(c, rcode, rbase, nr);
            for (int i = 0; i < nr; i++) {
                int64_t v[8];
                if (!((base_mask >> rbase[i]) & 1)) continue;
                row_values(c, p, s, rcode[i], rbase[i], v);
                if (lim - o < (int64_t)chrom_len + 200) return -((o - out) + (int64_t)chrom_len + 200 + 1);
                o = put_row(c, o, chrom, chrom_len, c->start + p, rcode[i], NULL, "+-"[s], v, sep);
                rows++;
            }
        }
    }
    *nrows = rows;
    return o - out;
}

/* --combine-strands text: for each entry (a + strand motif position pos[i] of motif idx[i],
 * its - strand partner neg[i], -1 if it has no rows there; pos_ok[i]: rows at pos), the rows of
 * both summed by code, strand '.', named code or code,label when labels are given. */
int64_t pu_text_combined(pu_ctx *c, const char *chrom, const int64_t *pos, const int32_t *idx,
                         const int64_t *neg, const uint8_t *pos_ok, int64_t n,
                         const char *const *labels, int nlabels, int combine_mods, int mixed,
                         char *out, int64_t cap, int64_t *nrows) {
    char sep = mixed ? ' ' : '\t';
    size_t chrom_len = strlen(chrom);
    char *o = out, *lim = out + cap;
    int64_t rows = 0;
    for (int64_t e = 0; e < n; e++) {
        int keys[PU_MAXC + 4], acc_keys[PU_MAXC + 4], nk = 0;
        int64_t acc[PU_MAXC + 4][8];
        for (int side = 0; side < 2; side++) {
            int64_t p = side ? neg[e] : pos[e];
            if (side ? p < 0 : !pos_ok[e]) continue;
            int rcode[4 * PU_MAXC], rbase[4 * PU_MAXC];
            int nr = rows_at(c, p, side, combine_mods, rcode, rbase);
            for (int i = 0; i < nr; i++) {
                int64_t v[8];
                row_values(c, p, side, rcode[i], rbase[i], v);
                int k;
                for (k = 0; k < nk; k++)
                    if (keys[k] == rcode[i]) break;
                if (k == nk) {
                    keys[nk] = acc_keys[nk] = rcode[i];
                    nk++;
                    memset(acc[k], 0, sizeof acc[k]);
                }
                for (int j = 0; j < 8; j++) acc[k][j] += v[j];
            }
        }
        sort_keys(c, keys, NULL, nk);
        for (int k = 0; k < nk; k++) {
            const int64_t *v = acc[0];
            for (int j = 0; j < nk; j++)
                if (keys[k] == acc_keys[j]) v = acc[j];
            const char *label = nlabels >= 2 ? labels[idx[e]] : NULL;
            if (lim - o < (int64_t)chrom_len + 200 + (label ? (int64_t)strlen(label) + 1 : 0))
                return -1;
            o = put_row(c, o, chrom, chrom_len, c->start + pos[e], keys[k], label, '.', v, sep);
            rows++;
        }
    }
    *nrows = rows;
    return o - out;
}

/* 0.6.1's --combine-strands text (folded_rows in pileup_counting.py): for each entry in order (a +
 * strand motif position pos[i] of motif idx[i]; neg[i] its - strand partner, -1 if it has no rows
 * there), the partner's tallies moved onto the + strand position first, then, at each distinct
 * + position with pos_ok, its rows of the bases in base_mask, sorted by code, once per motif of
 * the position, strand '.', named code or code,label when labels are given. */
int64_t pu_text_folded(pu_ctx *c, const char *chrom, const int64_t *pos, const int32_t *idx,
                       const int64_t *neg, const uint8_t *pos_ok, int64_t n,
                       const char *const *labels, int nlabels, int base_mask, int combine_mods,
                       char *out, int64_t cap, int64_t *nrows) {
    size_t chrom_len = strlen(chrom);
    char *o = out, *lim = out + cap;
    int64_t rows = 0;
    for (int64_t e = 0; e < n; e++) {
        if (neg[e] < 0) continue;
        int32_t *to = c->counts + (pos[e] * 2) * c->k, *from = c->counts + (neg[e] * 2 + 1) * c->k;
        for (int k = 0; k < c->k; k++) {
            to[k] += from[k];
            from[k] = 0;
        }
        for (int b = 0; b < 4; b++) c->observed[pos[e] * 8 + b] |= c->observed[neg[e] * 8 + 4 + b];
    }
    for (int64_t e = 0; e < n;) {
        int64_t last = e + 1;  /* the entries [e, last) share the position */
        while (last < n && pos[last] == pos[e]) last++;
        int64_t p = pos[e];
        if (pos_ok[e]) {
            int rcode[4 * PU_MAXC], rbase[4 * PU_MAXC];
            int nr = rows_at(c, p, 0, combine_mods, rcode, rbase);
            sort_keys(c, rcode, rbase, nr);
            for (int i = 0; i < nr; i++) {
                if (!((base_mask >> rbase[i]) & 1)) continue;
                int64_t v[8];
                row_values(c, p, 0, rcode[i], rbase[i], v);
                for (int64_t m = e; m < last; m++) {
                    const char *label = nlabels >= 2 ? labels[idx[m]] : NULL;
                    if (lim - o < (int64_t)chrom_len + 200 + (label ? (int64_t)strlen(label) + 1 : 0))
                        return -1;
                    o = put_row(c, o, chrom, chrom_len, c->start + p, rcode[i], label, '.', v, '\t');
                    rows++;
                }
            }
        }
        e = last;
    }
    *nrows = rows;
    return o - out;
}

/* One record's sampled probabilities (the most likely state's, per canonical base) appended to
 * c->values (ReadIdsToBaseModProbs for one record, without --include-positions); aligned: the
 * forward positions to keep (NULL: all). Returns 1 if it gave any, 0 if not, <0 on error. */
static int sample_read_ops(pu_ctx *c, int reverse, const char *seq, int64_t n, const char *mm,
                           const uint8_t *ml, int64_t nml, const int64_t *ops,
                           const int64_t *lens, int64_t nops);

int pu_sample_read(pu_ctx *c, int reverse, const char *seq, int64_t n, const char *mm,
                   const uint8_t *ml, int64_t nml, const char *cigar, int64_t ncig_max) {
    if (!cigar) return sample_read_ops(c, reverse, seq, n, mm, ml, nml, NULL, NULL, 0);
    int64_t *ops = malloc((ncig_max + 1) * 2 * sizeof(int64_t)), *lens = ops + ncig_max + 1;
    int64_t nops = parse_cigar(NULL, cigar, 0, ops, lens);
    int rc = sample_read_ops(c, reverse, seq, n, mm, ml, nml, ops, lens, nops);
    free(ops);
    return rc;
}

/* pu_sample_read over the CIGAR's operations (ops NULL: every position; nops < 0: a CIGAR
 * that does not parse, no position aligned) */
static int sample_read_ops(pu_ctx *c, int reverse, const char *seq, int64_t n, const char *mm,
                           const uint8_t *ml, int64_t nml, const int64_t *ops,
                           const int64_t *lens, int64_t nops) {
    scratch_t *s = get_scratch(c, n);
    prepare(c, s, reverse, seq, n);
    int rc = read_tables(c, s, n, mm, ml, nml);
    if (rc == SKIP_CODES) return -1;
    if (rc) return 0;
    if (c->edge_on && (n <= c->edge_start || n <= c->edge_end)) return 0;
    uint8_t *aligned = NULL;
    if (ops) {
        /* only the forward positions aligned to the reference (M, =, X) */
        aligned = s->gflags;
        memset(aligned, 0, n);
        int64_t q = 0;
        for (int64_t k = 0; k < nops; k++) {
            if (ops[k] == 0 || ops[k] == 7 || ops[k] == 8) {
                for (int64_t i = 0; i < lens[k] && q + i < n; i++)
                    aligned[reverse ? n - 1 - (q + i) : q + i] = 1;
                q += lens[k];
            } else if (ops[k] == 1 || ops[k] == 4) {
                q += lens[k];
            }
        }
    }
    int added = 0;
    for (int st = 0; st < 2; st++)
        for (int b = 0; b < 4; b++) {
            table_t *t = &s->t[st][b];
            if (!t->exists) continue;
            int slots[PU_MAXC], no = table_order(c, t, slots), ig = ignore_slot(c, t);
            int tb = st == 0 ? b : 3 - b;
            int got = 0;
            const int32_t *bp = s->base_pos[b]; /* the table's positions (read_tables) */
            for (int64_t k = 0; k < s->nbase[b]; k++) {
                int64_t q = bp[k];
                if (!((t->flags[q] & 1) && edge_keeps(c, q, n) && (!aligned || aligned[q]))) continue;
                float pr[PU_MAXC];
                unsigned pres;
                probs_at(t, slots, no, ig, q, pr, &pres);
                float total = 0.0f, mx = -INFINITY;
                int any = 0;
                for (int j = 0; j < no; j++)
                    if ((pres >> j) & 1) {
                        total = total + pr[j];
                        if (!any || pr[j] > mx) mx = pr[j];
                        any = 1;
                    }
                float can = 1.0f - total;
                float v = any && mx > can ? mx : can;
                if (c->nvalues[tb] >= c->cap_values[tb]) {
                    c->cap_values[tb] = c->cap_values[tb] * 2 + 4096;
                    c->values[tb] = grow(c->values[tb], c->cap_values[tb] * sizeof(float));
                }
                c->values[tb][c->nvalues[tb]++] = v;
                got = 1;
            }
            added |= got;
        }
    return added;
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
        free(s->fwd);
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
    free(c->diff);
    free(c->observed);
    for (int b = 0; b < 4; b++) free(c->values[b]);
    memset(c, 0, sizeof *c);
}
