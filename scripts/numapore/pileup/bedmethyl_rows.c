/* bedMethyl rows read in C for `numapore tobigwig` and `numapore stats` (compiled into the
 * pileup core after its other parts; uses nothing of theirs). Python's parse_line
 * (numapore.methylation.bedmethyl) stays the definition: a line C does not read exactly as it
 * would (not 18 plain fields, a number with a sign or spaces, a byte outside ASCII, a '\r') is
 * handed back to Python, which parses it or names the mistake. */

/* cffi: begin (types Python fills and reads) */
/* tobigwig's reading: the rows of the kept codes merged per position as modkit's
 * BedMethylStream does, each position's value written to out_* (one chromosome per batch) */
typedef struct {
    /* settings: the codes to keep, NUL-separated (codes_len bytes); negative strand values */
    const char *codes;
    int64_t codes_len;
    int negative;
    /* the batch: out_n positions of out_chrom (out_cap room); held: a position of the next
     * chromosome, waiting for the batch to be taken */
    int64_t *out_start;
    float *out_value;
    int64_t out_n, out_cap;
    char out_chrom[1024];
    int held;
    int64_t held_start;
    float held_value;
    char held_chrom[1024];
    /* after bm_read: 0 (go on), BM_PYTHON (the line at the end of what was consumed, bad_len
     * bytes with its newline, is Python's), or an error (BM_DUPLICATE, BM_OVERLAP,
     * BM_LONG_NAME) at line */
    int status;
    int64_t bad_len, line;
    /* whether a row was kept; the position being merged (its first row's fields) */
    int any;
    int has;
    char chrom[1024], code[64], strand[64];
    int64_t start, valid, n_canonical, n_mod;
} bm_track;
/* stats' sums over one region: per code met (up to 16, of up to 15 bytes) the sum of N_mod
 * and of N_valid_cov; the status and bad_len of the first region's are bm_sum_regions' */
typedef struct {
    int64_t min_coverage;
    char strand; /* '+', '-' or '.' (both) */
    const char *codes; /* NULL: every code, else NUL-separated, codes_len bytes */
    int64_t codes_len;
    int ncodes;
    char code[16][16];
    int64_t sum_mod[16], sum_valid[16];
    int status;
    int64_t bad_len;
} bm_sums;
/* why bm_read, bm_sum_regions stopped (status), or what bm_push returns */
enum { BM_PYTHON = 1, BM_DUPLICATE = -1, BM_OVERLAP = -2, BM_LONG_NAME = -3, BM_CODES = -4 };
/* cffi: end */

typedef struct {
    const char *p;
    int64_t n;
} bm_field;

/* The 18 fields of a line without its newline (tabs, or modkit 0.4.4's mixed delimiters:
 * columns 10-18 in the tenth tab field, single spaces between them), in one pass; 0 where
 * Python decides (another number of fields, a byte outside printable ASCII and tab). */
static int bm_fields(const char *line, int64_t n, bm_field f[18]) {
    int k = 0, spaces = 0;
    const char *s = line;
    bm_field extra[9];
    for (int64_t i = 0; i <= n; i++) {
        unsigned char ch = i < n ? (unsigned char)line[i] : '\t';
        if (ch == '\t') {
            if (k == 18) return 0;
            f[k++] = (bm_field){s, line + i - s};
            s = line + i + 1;
        } else if (ch == ' ' && k == 9) {
            if (spaces == 9) return 0;
            extra[spaces++] = (bm_field){s, line + i - s};
            s = line + i + 1;
        } else if (ch < 0x20 || ch >= 0x7f) {
            return 0;
        }
    }
    if (k == 10 && spaces == 8) { /* mixed: the tenth tab field held columns 10-18 */
        f[17] = f[9];
        for (int m = 0; m < 8; m++) f[9 + m] = extra[m];
        return 1;
    }
    return k == 18 && spaces == 0;
}

/* A field as an integer (optional '-', 1 to 18 digits); 0 where Python decides. */
static int bm_int(bm_field f, int64_t *out) {
    int64_t i = 0, v = 0;
    int neg = f.n > 0 && f.p[0] == '-';
    i = neg;
    if (f.n - i < 1 || f.n - i > 18) return 0;
    for (; i < f.n; i++) {
        if (f.p[i] < '0' || f.p[i] > '9') return 0;
        v = v * 10 + (f.p[i] - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

/* The code of a name field (before any comma), and whether it is among codes (NUL-separated);
 * codes NULL: every code. */
static int bm_code_kept(bm_field name, const char *codes, int64_t codes_len, bm_field *code) {
    const char *comma = memchr(name.p, ',', name.n);
    *code = (bm_field){name.p, comma ? comma - name.p : name.n};
    if (!codes) return 1;
    for (const char *c = codes; c < codes + codes_len;) {
        int64_t len = (int64_t)strlen(c);
        if (len == code->n && !memcmp(c, code->p, len)) return 1;
        c += len + 1;
    }
    return 0;
}

/* Whether a line is skipped as Python's kept_rows skips it: blank, or '#' first after
 * leading whitespace. */
static int bm_skipped(const char *line, int64_t n) {
    int64_t i = 0;
    while (i < n && (line[i] == ' ' || (line[i] >= '\t' && line[i] <= '\r') ||
                     (line[i] >= 0x1c && line[i] <= 0x1f)))
        i++;
    return i == n || line[i] == '#';
}

static int bm_same(bm_field f, const char *s) {
    return (int64_t)strlen(s) == f.n && !memcmp(s, f.p, f.n);
}

static void bm_copy(char *dst, bm_field f) {
    memcpy(dst, f.p, f.n);
    dst[f.n] = 0;
}

/* the merged position's value: f32(N_mod / N_valid_cov) * +-100 in float32 */
static void bm_emit(bm_track *t) {
    float fraction = t->valid ? (float)((double)t->n_mod / (double)t->valid) : NAN;
    int minus = t->negative && (!strcmp(t->strand, "-") || !strcmp(t->strand, "."));
    float value = (float)((double)fraction * (minus ? -100.0 : 100.0));
    if (t->out_n > 0 && strcmp(t->out_chrom, t->chrom)) {
        t->held = 1;
        t->held_start = t->start;
        t->held_value = value;
        strcpy(t->held_chrom, t->chrom);
        return;
    }
    if (t->out_n == 0) strcpy(t->out_chrom, t->chrom);
    t->out_start[t->out_n] = t->start;
    t->out_value[t->out_n++] = value;
}

/* One kept row into the merge (tobigwig's position_values): 0, or an error. */
int bm_push(bm_track *t, const char *chrom, int64_t nchrom, int64_t start, const char *code,
            int64_t ncode, const char *strand, int64_t nstrand, int64_t valid,
            int64_t n_mod, int64_t n_canonical) {
    bm_field c = {chrom, nchrom}, k = {code, ncode}, s = {strand, nstrand};
    if (nchrom >= 1024 || ncode >= 64 || nstrand >= 64) return BM_LONG_NAME;
    t->any = 1;
    if (t->has) {
        int same_place = t->start == start && bm_same(c, t->chrom);
        if (same_place && bm_same(s, t->strand)) {
            if (bm_same(k, t->code)) return BM_DUPLICATE;
            if (valid != t->valid) return BM_OVERLAP;
            if (n_canonical == t->n_canonical) t->n_mod += n_mod;
            return 0;
        }
        if (same_place) {
            if (valid <= t->valid) return 0;
        } else {
            bm_emit(t);
        }
    }
    bm_copy(t->chrom, c);
    bm_copy(t->code, k);
    bm_copy(t->strand, s);
    t->start = start;
    t->valid = valid;
    t->n_canonical = n_canonical;
    t->n_mod = n_mod;
    t->has = 1;
    return 0;
}

/* The rows of buf (whole lines) into the merge, until the batch must be taken (full, or a
 * position of another chromosome held), a line is Python's, or an error: the bytes consumed
 * (t->status says why it stopped; t->line counts the lines read). */
int64_t bm_read(bm_track *t, const char *buf, int64_t len) {
    const char *p = buf, *end = buf + len;
    t->status = 0;
    while (p < end && !t->held && t->out_n < t->out_cap) {
        const char *nl = memchr(p, '\n', end - p);
        int64_t n = (nl ? nl : end) - p, next = n + (nl != NULL);
        bm_field f[18], code;
        int64_t start, valid, n_mod, n_canonical, other;
        if (bm_skipped(p, n)) {
            t->line++;
            p += next;
            continue;
        }
        int plain = bm_fields(p, n, f) && bm_int(f[1], &start) && bm_int(f[9], &valid) &&
                    bm_int(f[11], &n_mod) && bm_int(f[12], &n_canonical);
        for (int k = 13; plain && k < 18; k++) plain = bm_int(f[k], &other);
        if (!plain) {
            t->status = BM_PYTHON;
            t->bad_len = next;
            break;
        }
        t->line++;
        if (bm_code_kept(f[3], t->codes, t->codes_len, &code)) {
            int rc = bm_push(t, f[0].p, f[0].n, start, code.p, code.n, f[5].p, f[5].n, valid,
                             n_mod, n_canonical);
            if (rc) {
                t->status = rc;
                break;
            }
        }
        p += next;
    }
    return p - buf;
}

/* The last position into the batch (after the last bm_read). */
void bm_finish(bm_track *t) {
    if (t->has) bm_emit(t);
    t->has = 0;
}

/* After the batch was taken: empty, holding the held position if any. */
void bm_take(bm_track *t) {
    t->out_n = 0;
    if (t->held) {
        strcpy(t->out_chrom, t->held_chrom);
        t->out_start[0] = t->held_start;
        t->out_value[0] = t->held_value;
        t->out_n = 1;
        t->held = 0;
    }
}

/* One row into stats' sums (region_counts): 0, or BM_CODES past 16 codes. */
int bm_sum_row(bm_sums *s, const char *code, int64_t ncode, const char *strand, int64_t nstrand,
               int64_t valid, int64_t n_mod) {
    if (valid < s->min_coverage) return 0;
    if (s->strand != '.' && !(nstrand == 1 && (strand[0] == s->strand || strand[0] == '.')))
        return 0;
    int k = 0;
    while (k < s->ncodes && !((int64_t)strlen(s->code[k]) == ncode &&
                              !memcmp(s->code[k], code, ncode)))
        k++;
    if (k == s->ncodes) {
        if (k == 16 || ncode >= 16) return BM_CODES;
        memcpy(s->code[k], code, ncode);
        s->code[k][ncode] = 0;
        s->sum_mod[k] = s->sum_valid[k] = 0;
        s->ncodes++;
    }
    s->sum_mod[k] += n_mod;
    s->sum_valid[k] += valid;
    return 0;
}

/* stats' sums of n regions over the lines of one query spanning them (regions sorted by start,
 * each with its own sums; reach[k]: the largest end of regions 0 to k; *lo: the first region
 * a row may still overlap, 0 at the query's start): a row goes into each region it overlaps
 * by its columns 2 and 3, as tabix overlaps them. The bytes consumed; sums[0].status says why
 * it stopped before the end (BM_PYTHON: bad_len bytes of a line for Python, or BM_CODES). */
int64_t bm_sum_regions(bm_sums *sums, const int64_t *starts, const int64_t *ends,
                       const int64_t *reach, int64_t n, int64_t *lo, const char *buf,
                       int64_t len) {
    const char *p = buf, *end = buf + len;
    sums[0].status = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', end - p);
        int64_t size = (nl ? nl : end) - p, next = size + (nl != NULL);
        bm_field f[18], code;
        int64_t start, stop, valid, n_mod, other;
        int plain = bm_fields(p, size, f) && bm_int(f[1], &start) && bm_int(f[2], &stop) &&
                    bm_int(f[9], &valid) && bm_int(f[11], &n_mod);
        for (int k = 12; plain && k < 18; k++) plain = bm_int(f[k], &other);
        if (!plain) {
            sums[0].status = BM_PYTHON;
            sums[0].bad_len = next;
            break;
        }
        while (*lo < n && reach[*lo] <= start) (*lo)++;
        if (bm_code_kept(f[3], sums[0].codes, sums[0].codes_len, &code))
            for (int64_t k = *lo; k < n && starts[k] < stop; k++) {
                if (ends[k] <= start) continue;
                if (bm_sum_row(&sums[k], code.p, code.n, f[5].p, f[5].n, valid, n_mod)) {
                    sums[0].status = BM_CODES;
                    return p - buf;
                }
            }
        p += next;
    }
    return p - buf;
}
