/* The compiled pileup core, part 4 of 5: the bedMethyl writer (core_build.py compiles
 * core.c, calls.c, tally.c, text.c, sample.c, bam_core.c and
 * bam_records.c as one unit, in that order: each part uses the types and functions of the parts
 * before it). An interval's rows as text: the simple layouts (pu_text), motif rows with combined
 * strands (pu_text_combined) and folded ones (pu_text_folded), every row through put_row. */

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

/* a percentage (finite, 0 <= pct < 2^40) as printf's "%.2f" writes it: the float's exact
 * value rounded to hundredths, halves to even (printf was a tenth of the text's time) */
static char *put_pct(char *o, float pct) {
    uint32_t u;
    memcpy(&u, &pct, sizeof u);
    int biased = (int)(u >> 23 & 255);
    uint64_t mant = u & 0x7FFFFF, hundredths;
    if (biased) mant |= 0x800000;
    else biased = 1; /* zero or subnormal */
    int shift = 150 - biased; /* pct = mant / 2^shift */
    if (shift <= 0) {
        hundredths = (mant << -shift) * 100;
    } else if (shift >= 40) { /* below 2^-16: 0.00 */
        hundredths = 0;
    } else {
        uint64_t scaled = mant * 100, half = 1ULL << (shift - 1);
        uint64_t rest = scaled & ((1ULL << shift) - 1);
        hundredths = scaled >> shift;
        if (rest > half || (rest == half && (hundredths & 1))) hundredths++;
    }
    o = put_int(o, (int64_t)(hundredths / 100));
    *o++ = '.';
    *o++ = (char)('0' + hundredths / 10 % 10);
    *o++ = (char)('0' + hundredths % 10);
    return o;
}

/* the rows of one position and strand: (code: registry index, or -1 - base with combine_mods)
 * and base, unsorted; their number */
static int rows_at(const pu_ctx *c, int64_t p, int s, int combine_mods, int *rcode, int *rbase) {
    p = row_of(c, p);
    if (p < 0) return 0;
    const int32_t *f = c->counts + (p * 2 + s) * c->k;
    int nr = 0;
    for (int b = 0; b < 4; b++) {
        int64_t calls = f[F_CANON + b];
        for (int k = 0; k < c->ncodes; k++) calls += f[F_CODES + 4 * k + b];
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
    p = row_of(c, p); /* rows_at found rows there: p has a row */
    const int32_t *f = c->counts + (p * 2 + s) * c->k;
    int64_t mods = 0, other_bases = 0, fails = 0, other_fails = 0;
    for (int k = 0; k < c->ncodes; k++) mods += f[F_CODES + 4 * k + b];
    for (int ob = 0; ob < 4; ob++) {
        fails += f[F_FAIL + ob];
        if (ob == b) continue;
        other_fails += f[F_FAIL + ob];
        other_bases += f[F_NOCALL + ob] + f[F_CANON + ob];
        for (int k = 0; k < c->ncodes; k++) other_bases += f[F_CODES + 4 * k + ob];
    }
    v[0] = f[F_CANON + b] + mods;
    v[1] = code < 0 ? mods : f[F_CODES + 4 * code + b];
    v[2] = f[F_CANON + b];
    v[3] = code < 0 ? 0 : mods - v[1];
    v[4] = f[F_DELETE];
    v[5] = c->fail_by_base ? f[F_FAIL + b] : fails;
    v[6] = other_bases + (c->fail_by_base ? other_fails : 0);
    v[7] = f[F_NOCALL + b];
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
    o = put_pct(o, pct);
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

/* 0.6.1's --combine-strands text (folded_rows in counting_compiled.py): for each entry in order (a +
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
        int64_t at = neg[e] < 0 ? -1 : row_of(c, pos[e]), from_at = neg[e] < 0 ? -1 : row_of(c, neg[e]);
        if (at < 0 || from_at < 0) continue;
        int32_t *to = c->counts + (at * 2) * c->k, *from = c->counts + (from_at * 2 + 1) * c->k;
        for (int k = 0; k < c->k; k++) {
            to[k] += from[k];
            from[k] = 0;
        }
        for (int b = 0; b < 4; b++) c->observed[at * 8 + b] |= c->observed[from_at * 8 + 4 + b];
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
