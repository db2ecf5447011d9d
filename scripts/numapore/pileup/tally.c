/* The compiled pileup core, part 3 of 5: one interval's tally (core_build.py compiles
 * core.c, calls.c, tally.c, text.c, sample.c, bam_core.c and
 * bam_records.c as one unit, in that order: each part uses the types and functions of the parts
 * before it). An interval's counts per position, strand and feature; a read added through its
 * CIGAR (add_read_ops, which bam_core.c's records come through too); the mod codes observed per
 * position. */

/* start an interval: its rows (one per wanted position with c->want), the tallies zeroed */
int pu_begin(pu_ctx *c, int64_t start, int64_t length) {
    c->start = start;
    c->length = length;
    c->k = F_CODES + 4 * (c->ncodes > 0 ? c->ncodes : 1);
    c->nrows = length;
    if (c->want) {
        c->rank = grow(c->rank, (size_t)(length + 1) * sizeof(int32_t));
        c->nrows = 0;
        for (int64_t p = 0; p < length; p++) {
            c->rank[p] = (int32_t)c->nrows;
            c->nrows += c->want[p] != 0;
        }
        c->rank[length] = (int32_t)c->nrows;
        scratch_t *s = get_scratch(c, 0);
        if (length + 1 > s->next_cap) {
            s->next_cap = length + 1;
            s->next_want = grow(s->next_want, (size_t)s->next_cap * sizeof(int32_t));
        }
        s->next_want[length] = (int32_t)length;
        for (int64_t p = length - 1; p >= 0; p--)
            s->next_want[p] = c->want[p] ? (int32_t)p : s->next_want[p + 1];
    }
    c->counts = grow(c->counts, (size_t)(c->nrows + 1) * 2 * c->k * sizeof(int32_t));
    memset(c->counts, 0, (size_t)c->nrows * 2 * c->k * sizeof(int32_t));
    c->diff = grow(c->diff, (size_t)64 * (c->nrows + 1) * sizeof(int32_t));
    c->keys_used = 0;
    c->observed = grow(c->observed, (size_t)(c->nrows + 1) * 8);
    return 0;
}

/* the tallies' rows before position p (0..length) of the interval */
static int64_t rank_of(const pu_ctx *c, int64_t p) {
    return c->want ? c->rank[p] : p;
}

/* the tallies' row of position p of the interval (-1: not tallied) */
static int64_t row_of(const pu_ctx *c, int64_t p) {
    return !c->want ? p : c->want[p] ? c->rank[p] : -1;
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
 * to the coverage of every key the read calls at its rows: a difference array per key, made
 * when a key first appears. */
static void add_segment(pu_ctx *c, uint64_t keys, int64_t a, int64_t bnd) {
    if (a < 0) a = 0;
    if (bnd > c->length) bnd = c->length;
    if (a >= bnd) return;
    a = rank_of(c, a); /* over the tallies' rows */
    bnd = rank_of(c, bnd);
    if (a >= bnd) return;
    for (int key = 0; key < 64; key++)
        if ((keys >> key) & 1) {
            int32_t *diff = c->diff + (size_t)key * (c->nrows + 1);
            if (!((c->keys_used >> key) & 1)) {
                memset(diff, 0, (c->nrows + 1) * sizeof(int32_t));
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

/* the feature a call (FILTERED, CANONICAL or 1 + code) of a base counts in */
static int call_feature(int call, int base) {
    if (call == FILTERED) return F_FAIL + base;
    return call == CANONICAL ? F_CANON + base : F_CODES + 4 * (call - 1) + base;
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
            /* with want, from one wanted position to the next (next_want) */
            const int32_t *next = c->want ? s->next_want : NULL;
            const int64_t shift = r - start;
            if (next && a < bnd) a = next[a + shift] - shift;
            for (int64_t i = a; i < bnd; i = next ? next[i + 1 + shift] - shift : i + 1) {
                int64_t qq = q + i, rr = r + i - start;
                if (next) rr = c->rank[rr];
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
                    counts[(rr * 2 + strand) * stride + F_NOCALL + b]++;
                    continue;
                }
                if (pc != NO_CALL) counts[(rr * 2 + strand) * stride + call_feature(pc, b)]++;
                if (nc != NO_CALL)
                    counts[(rr * 2 + (1 - strand)) * stride + call_feature(nc, 3 - b)]++;
            }
            q += len;
            r += len;
        } else if (op == 2) {
            int64_t a = r < start ? start - r : 0, bnd = r + len > end ? end - r : len;
            const int32_t *next = c->want ? s->next_want : NULL;
            const int64_t shift = r - start;
            if (next && a < bnd) a = next[a + shift] - shift;
            for (int64_t i = a; i < bnd; i = next ? next[i + 1 + shift] - shift : i + 1) {
                int64_t row = row_of(c, r + i - start);
                if (row >= 0) counts[(row * 2 + strand) * stride + F_DELETE]++;
            }
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

/* the observed code masks (rows x 2 strands x 4 bases, bit per code) from the diff arrays */
int pu_observe(pu_ctx *c) {
    memset(c->observed, 0, (size_t)c->nrows * 8);
    for (int key = 0; key < 64; key++) {
        if (!((c->keys_used >> key) & 1)) continue;
        int st = key / (4 * PU_MAXC), b = (key / PU_MAXC) % 4, code = key % PU_MAXC;
        int32_t run = 0, *d = c->diff + (size_t)key * (c->nrows + 1);
        for (int64_t row = 0; row < c->nrows; row++) {
            run += d[row];
            if (run > 0) c->observed[row * 8 + st * 4 + b] |= (uint8_t)(1u << code);
        }
    }
    return 0;
}

/* an upper bound on the rows pu_text writes (positions and strands with calls x codes) */
int64_t pu_rows_bound(pu_ctx *c, int combine_mods) {
    int64_t rows = 0, per = combine_mods ? 1 : (c->ncodes ? c->ncodes : 1);
    for (int64_t i = 0; i < c->nrows * 2; i++) {
        const int32_t *f = c->counts + i * c->k;
        for (int b = 0; b < 4; b++) {
            int64_t calls = f[F_CANON + b];
            for (int k = 0; k < c->ncodes; k++) calls += f[F_CODES + 4 * k + b];
            if (calls) rows += per;
        }
    }
    return rows;
}
