/* The compiled pileup core, part 5 of 5: the estimated threshold's sample (core_build.py
 * compiles core.c, calls.c, tally.c, text.c, sample.c,
 * bam_core.c and bam_records.c as one unit, in that order: each part uses the types and
 * functions of the parts before it). A record's most likely probability per canonical base, as
 * modkit samples them to estimate the threshold (bam_core.c's sampler calls sample_read_ops for
 * its records). */

/* One record's sampled probabilities (the most likely state's, per canonical base) appended to
 * c->values (ReadIdsToBaseModProbs for one record, without --include-positions); with ops
 * (its CIGAR, aligned at ref_start) only the calls on aligned bases, and with
 * c->sample_in_region only those whose reference position is in the region. Returns 1 if it
 * gave any, 0 if not, <0 on error. */
static int sample_read_ops(pu_ctx *c, int reverse, const char *seq, int64_t n, const char *mm,
                           const uint8_t *ml, int64_t nml, const int64_t *ops,
                           const int64_t *lens, int64_t nops, int64_t ref_start);

int pu_sample_read(pu_ctx *c, int reverse, const char *seq, int64_t n, const char *mm,
                   const uint8_t *ml, int64_t nml, const char *cigar, int64_t ncig_max,
                   int64_t ref_start) {
    if (!cigar) return sample_read_ops(c, reverse, seq, n, mm, ml, nml, NULL, NULL, 0, 0);
    int64_t *ops = malloc((ncig_max + 1) * 2 * sizeof(int64_t)), *lens = ops + ncig_max + 1;
    int64_t nops = parse_cigar(NULL, cigar, 0, ops, lens);
    int rc = sample_read_ops(c, reverse, seq, n, mm, ml, nml, ops, lens, nops, ref_start);
    free(ops);
    return rc;
}

/* pu_sample_read over the CIGAR's operations (ops NULL: every position; nops < 0: a CIGAR
 * that does not parse, no position aligned) */
static int sample_read_ops(pu_ctx *c, int reverse, const char *seq, int64_t n, const char *mm,
                           const uint8_t *ml, int64_t nml, const int64_t *ops,
                           const int64_t *lens, int64_t nops, int64_t ref_start) {
    scratch_t *s = get_scratch(c, n);
    prepare(c, s, reverse, seq, n);
    int rc = read_tables(c, s, n, mm, ml, nml);
    if (rc == SKIP_CODES) return -1;
    if (rc) return 0;
    if (c->edge_on && (n <= c->edge_start || n <= c->edge_end)) return 0;
    uint8_t *aligned = NULL;
    if (ops) {
        /* only the forward positions aligned to the reference (M, =, X), and in the region */
        aligned = s->gflags;
        memset(aligned, 0, n);
        int64_t q = 0, r = ref_start;
        int in_region = c->sample_in_region;
        for (int64_t k = 0; k < nops; k++) {
            if (ops[k] == 0 || ops[k] == 7 || ops[k] == 8) {
                for (int64_t i = 0; i < lens[k] && q + i < n; i++)
                    if (!in_region || (r + i >= c->sample_from && r + i < c->sample_to))
                        aligned[reverse ? n - 1 - (q + i) : q + i] = 1;
                q += lens[k];
                r += lens[k];
            } else if (ops[k] == 1 || ops[k] == 4) {
                q += lens[k];
            } else if (ops[k] == 2 || ops[k] == 3) {
                r += lens[k];
            }
        }
    }
    int added = 0, first_of_read = PU_FIRST_OF_READ;
    int first_at_base[4] = {PU_FIRST_AT_BASE, PU_FIRST_AT_BASE, PU_FIRST_AT_BASE, PU_FIRST_AT_BASE};
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
                int any = 0, best = -1;
                for (int j = 0; j < no; j++)
                    if ((pres >> j) & 1) {
                        total = total + pr[j];
                        if (!any || pr[j] > mx) mx = pr[j];
                        if (pr[j] == mx) best = j; /* Rust's max_by: the last of equals */
                        any = 1;
                    }
                float can = 1.0f - total;
                float v = any && mx > can ? mx : can;
                if (c->nvalues[tb] >= c->cap_values[tb]) {
                    c->cap_values[tb] = c->cap_values[tb] * 2 + 4096;
                    c->values[tb] = grow(c->values[tb], c->cap_values[tb] * sizeof(float));
                    if (c->sample_states) c->states[tb] = grow(c->states[tb], c->cap_values[tb]);
                }
                if (c->sample_states) {
                    int state = any && mx > can ? 1 + t->codes[slots[best]] : 0;
                    c->states[tb][c->nvalues[tb]] =
                        (uint8_t)(state | first_at_base[tb] | first_of_read);
                    first_at_base[tb] = first_of_read = 0;
                    for (int j = 0; j < no; j++)
                        if ((pres >> j) & 1) c->sampled_codes[tb] |= 1u << t->codes[slots[j]];
                }
                c->values[tb][c->nvalues[tb]++] = v;
                got = 1;
            }
            added |= got;
        }
    return added;
}

/* a float's bits as an unsigned key in the floats' order (no NaN among the values) */
static uint32_t float_key(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* the sampled values of a canonical base sorted ascending (the estimate's percentile reads
 * them in place: millions of floats, too many for Python objects), by their keys' bytes
 * (radix sort: qsort's comparisons were a twentieth of a pileup's time) */
void pu_sort_values(pu_ctx *c, int base) {
    int64_t n = c->nvalues[base];
    float *a = c->values[base], *tmp = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int shift = 0; shift < 32; shift += 8) {
        int64_t at[257] = {0};
        for (int64_t i = 0; i < n; i++) at[((float_key(a[i]) >> shift) & 255) + 1]++;
        for (int d = 0; d < 256; d++) at[d + 1] += at[d];
        for (int64_t i = 0; i < n; i++) tmp[at[(float_key(a[i]) >> shift) & 255]++] = a[i];
        float *swap = a;
        a = tmp;
        tmp = swap;
    }
    free(tmp); /* four passes: the sorted values are back in c->values[base] */
}

/* summary's and sample-probs' reading of a states sample (sample_states), without a copy or
 * numpy: a value's rank, the calls per state passing a threshold, the histogram. */

/* a float's key, ordered as the floats are */
static uint32_t sample_key(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* the rank-th smallest (from 0) sampled value of base: two passes counting the values by the
 * high, then the low 16 bits of their keys (the sample keeps its order, states beside values) */
float pu_sample_rank(pu_ctx *c, int base, int64_t rank) {
    const float *v = c->values[base];
    int64_t n = c->nvalues[base], *counts = calloc(65536, sizeof(int64_t));
    uint32_t high = 0, low = 0;
    for (int64_t i = 0; i < n; i++) counts[sample_key(v[i]) >> 16]++;
    while (high < 65535 && rank >= counts[high]) rank -= counts[high++];
    memset(counts, 0, 65536 * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
        uint32_t k = sample_key(v[i]);
        if (k >> 16 == high) counts[k & 0xffff]++;
    }
    while (low < 65535 && rank >= counts[low]) rank -= counts[low++];
    free(counts);
    uint32_t key = high << 16 | low, u = key & 0x80000000u ? key & 0x7fffffffu : ~key;
    float out;
    memcpy(&out, &u, 4);
    return out;
}

/* per state (32) the calls of base at or above threshold (pass) and below it (fail); flags:
 * the values with PU_FIRST_OF_READ and with PU_FIRST_AT_BASE */
void pu_sample_tally(pu_ctx *c, int base, float threshold, int64_t *pass, int64_t *fail,
                     int64_t *flags) {
    const float *v = c->values[base];
    const uint8_t *s = c->states[base];
    for (int64_t i = 0; i < c->nvalues[base]; i++) {
        int state = s[i] & 0x1f;
        if (v[i] >= threshold) pass[state]++;
        else fail[state]++;
        flags[0] += (s[i] & PU_FIRST_OF_READ) != 0;
        flags[1] += (s[i] & PU_FIRST_AT_BASE) != 0;
    }
}

/* per state (32) the calls of base in each of 256 bins of 1/256 (a probability of 1 in the
 * last): bins[state * 256 + bin] */
void pu_sample_histogram(pu_ctx *c, int base, int64_t *bins) {
    const float *v = c->values[base];
    const uint8_t *s = c->states[base];
    for (int64_t i = 0; i < c->nvalues[base]; i++) {
        int q = v[i] == 1.0f ? 255 : (int)floorf(v[i] * 256.0f);
        q = q < 0 ? 0 : q > 255 ? 255 : q;
        bins[(s[i] & 0x1f) * 256 + q]++;
    }
}
