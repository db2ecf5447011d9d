/* numapore's compiled modBAM tagger (compiled after calls_core.c into the same cffi module:
 * calls_core_build.py), for numapore.nanopolish.modbam: one read's calls on its alignments,
 * from the call stream sorted by read name (cc_call_group, cc_tag_read): what read_sites and
 * mm_ml in modbam.py compute. */

/* The SAM ML byte of a call, as llr_to_ml in calls.py: p = logistic(llr) (through tanh, no
 * overflow), N = ceil(256 p) - 1 clamped to a byte, N >= 128 exactly when llr > 0. The same
 * libm tanh and the same double operations give Python's byte for every double. */
int cc_llr_to_ml(double llr) {
    double p = 0.5 * (1 + tanh(llr / 2));
    double c = ceil(256 * p) - 1;
    int n = c < 0 ? 0 : c > 255 ? 255 : (int)c;
    if (llr > 0) return n < 128 ? 128 : n;
    return n > 127 ? 127 : n;
}

/* A log-likelihood ratio: a decimal number, [+-]digits[.digits][e[+-]digits] (CALL_LLR in
 * modbam.py), correctly rounded as Python's float() rounds it. */
static int parse_llr(const char *s, const char *e, double *out) {
    const char *p = s;
    int digits = 0;
    if (p < e && (*p == '+' || *p == '-')) p++;
    for (; p < e && *p >= '0' && *p <= '9'; p++) digits++;
    if (p < e && *p == '.')
        for (p++; p < e && *p >= '0' && *p <= '9'; p++) digits++;
    if (!digits) return -1;
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        const char *exponent = p;
        for (; p < e && *p >= '0' && *p <= '9'; p++) {}
        if (p == exponent) return -1;
    }
    if (p != e) return -1;
    if (e - s < 64) return parse_double(s, e, out);
    char *copy = malloc((size_t)(e - s) + 1); /* a long one: strtod reads it whole */
    if (!copy) return -1;
    memcpy(copy, s, (size_t)(e - s));
    copy[e - s] = 0;
    *out = strtod(copy, NULL);
    free(copy);
    return 0;
}

/* Split the line [p, e) at its tabs: its field count; the starts of the first ncols fields in
 * t->fields, and, when it has exactly ncols, fields[ncols] = e + 1 (field i ends at
 * fields[i + 1] - 1). */
static int64_t split_line(cc_tagger *t, const char *p, const char *e) {
    int64_t n = 0;
    for (;;) {
        if (n < t->ncols) t->fields[n] = p;
        n++;
        const char *tab = memchr(p, '\t', (size_t)(e - p));
        if (!tab) break;
        p = tab + 1;
    }
    if (n == t->ncols) t->fields[n] = e + 1;
    return n;
}

static int bad_line(cc_tagger *t, const char *buf, const char *p, const char *e, int64_t nf,
                    int what) {
    t->error_at = p - buf;
    t->error_len = e - p;
    t->error_fields = nf;
    t->error = what;
    return -1;
}

static int ready_fields(cc_tagger *t) {
    if (!t->fields && !(t->fields = malloc((size_t)(t->ncols + 1) * sizeof *t->fields))) {
        t->error = CC_NO_MEMORY;
        return -1;
    }
    return 0;
}

/* The first read's calls in buf[0..n) (the call stream sorted by read name; blank lines
 * skipped, CRLF read as LF): CC_GROUP with the blank bytes before them (*skip), the read name
 * (buf[*name_at..+*name_len]) and the bytes of its lines (*group_len, from *skip); CC_MORE when
 * buf may end inside them (not eof); CC_END when nothing is left (eof); -1 for a line without
 * the header's field count (t->error...). Every line read is checked, the next read's first
 * line included. */
int cc_call_group(cc_tagger *t, const char *buf, int64_t n, int eof, int64_t *skip,
                  int64_t *name_at, int64_t *name_len, int64_t *group_len) {
    if (ready_fields(t)) return -1;
    const char *p = buf, *end = buf + n, *group = NULL, *name = NULL;
    int64_t length = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            if (!eof) return CC_MORE;
            nl = end;
        }
        const char *stop = (nl > p && nl[-1] == '\r') ? nl - 1 : nl; /* CRLF as LF */
        if (stop > p) {
            int64_t nf = split_line(t, p, stop);
            if (nf != t->ncols) return bad_line(t, buf, p, stop, nf, CC_BAD_FIELDS);
            const char *f = t->fields[t->col_name];
            int64_t f_len = t->fields[t->col_name + 1] - 1 - f;
            if (!group) {
                group = p;
                name = f;
                length = f_len;
            } else if (f_len != length || memcmp(f, name, (size_t)length) != 0) {
                end = p; /* the next read starts here */
                break;
            }
        }
        p = nl + (nl < end);
    }
    if (p == buf + n && !eof) return CC_MORE; /* the read may go on in the next bytes */
    if (!group) {
        *skip = n;
        return CC_END;
    }
    *skip = group - buf;
    *name_at = name - buf;
    *name_len = length;
    *group_len = end - group;
    return CC_GROUP;
}

static int grow(void **buf, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return 0;
    int64_t n = *cap ? *cap : 1024;
    while (n < need) n *= 2;
    void *grown = realloc(*buf, (size_t)n * size);
    if (!grown) return -1;
    *buf = grown;
    *cap = n;
    return 0;
}

/* Whether block i of n (reference starts every 3 int64s of b) is the last one starting at or
 * before ref. */
static int last_start(const int64_t *b, int64_t n, int64_t i, int64_t ref) {
    return i < n && b[3 * i] <= ref && (i + 1 == n || b[3 * (i + 1)] > ref);
}

/* The query (SEQ) position a record aligns to reference position ref, -1 if none: the last
 * match block starting at or before ref (bisect_right, as AlignedBlocks.query in modbam.py),
 * tried first at the block of the record's previous site and the next one (sites come mostly
 * in reference order). */
static int64_t query_of(const cc_tagger *t, cc_record *r, int64_t ref) {
    const int64_t *b = t->blocks + 3 * r->blocks_off;
    int64_t n = r->nblocks, i = r->last_block;
    if (!last_start(b, n, i, ref)) {
        if (last_start(b, n, i + 1, ref)) {
            i++;
        } else {
            int64_t lo = 0, hi = n;
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (ref < b[3 * mid]) hi = mid;
                else lo = mid + 1;
            }
            i = lo - 1;
            if (i < 0) return -1;
        }
    }
    r->last_block = i;
    if (ref - b[3 * i] < b[3 * i + 2]) return b[3 * i + 1] + ref - b[3 * i];
    return -1;
}

/* The match blocks (reference start, query start, length) of every record, into t->blocks,
 * and every record's sites cleared; 0 or -1 (out of memory). */
static int prepare_records(cc_tagger *t, cc_record *rec, int nrec) {
    int64_t cigars = 0, bases = 0;
    for (int i = 0; i < nrec; i++) {
        cigars += rec[i].ncigar;
        bases += rec[i].seq_len;
    }
    if (grow((void **)&t->blocks, &t->blocks_cap, 3 * cigars + 3, sizeof *t->blocks) ||
        grow((void **)&t->scratch, &t->scratch_cap, bases + 1, sizeof *t->scratch))
        return -1;
    int64_t nb = 0, ns = 0;
    for (int i = 0; i < nrec; i++) {
        cc_record *r = &rec[i];
        r->tagged = 0;
        r->nsites = r->mm_off = r->mm_len = r->ml_off = 0;
        r->blocks_off = nb;
        r->last_block = 0;
        r->scratch_off = ns;
        memset(t->scratch + ns, 0xff, (size_t)r->seq_len * sizeof *t->scratch); /* -1: no site */
        ns += r->seq_len;
        int64_t ref = r->ref_start, query = 0;
        for (int64_t k = 0; k < r->ncigar; k++) {
            uint32_t op = r->cigar[2 * k], length = r->cigar[2 * k + 1];
            if (op == 0 || op == 7 || op == 8) { /* M, =, X */
                int64_t *b = t->blocks + 3 * nb++;
                b[0] = ref;
                b[1] = query;
                b[2] = length;
                ref += length;
                query += length;
            } else if (op == 1 || op == 4 || op == 6) { /* I, S, P (as pysam counts it) */
                query += length;
            } else if (op == 2 || op == 3) { /* D, N */
                ref += length;
            }
        }
        r->nblocks = nb - r->blocks_off;
    }
    return 0;
}

/* One site of a call: to the first record (in the order given) on the call's contig and strand
 * (on_call) that aligns a base to ref; a base other than the motif's counts as such, no base
 * anywhere as unaligned. 0, or -1 when the CIGAR goes past SEQ. */
static int place_site(cc_tagger *t, cc_record *rec, int nrec, int reverse, int64_t ref, int ml) {
    for (int i = 0; i < nrec; i++) {
        cc_record *r = &rec[i];
        if (!r->on_call) continue;
        int64_t q = query_of(t, r, ref);
        if (q < 0) continue;
        if (q >= r->seq_len) return -1;
        if (r->seq[q] == t->base[reverse]) {
            int16_t *site = t->scratch + r->scratch_off + q;
            if (*site < 0) { /* the first call of a site wins */
                *site = (int16_t)ml;
                r->nsites++;
            }
            r->tagged = 1;
        } else {
            t->sites_other_base++;
        }
        return 0;
    }
    t->sites_unaligned++;
    return 0;
}

/* A tagged record's MM skips and ML bytes, appended to t->mm and t->ml: its sites in the order
 * of the read as sequenced (SEQ reversed for a reverse alignment), each skip the motif bases
 * since the previous site (mm_ml in modbam.py). 0 or -1 (out of memory). */
static int write_tags(cc_tagger *t, cc_record *r, int64_t *mm_len, int64_t *ml_len) {
    if (grow((void **)&t->mm, &t->mm_cap, *mm_len + 24 * r->nsites + 1, 1) ||
        grow((void **)&t->ml, &t->ml_cap, *ml_len + r->nsites + 1, 1))
        return -1;
    const int16_t *site = t->scratch + r->scratch_off;
    const char base = t->base[r->reverse];
    char *mm = t->mm + *mm_len;
    uint8_t *ml = t->ml + *ml_len;
    int64_t rank = 0, previous = -1, n = r->seq_len;
    r->mm_off = *mm_len;
    r->ml_off = *ml_len;
    for (int64_t k = 0; k < n; k++) {
        int64_t q = r->reverse ? n - 1 - k : k;
        if (site[q] >= 0) {
            *mm++ = ',';
            mm = put_int(mm, rank - previous - 1);
            *ml++ = (uint8_t)site[q];
            previous = rank;
        }
        rank += r->seq[q] == base;
    }
    r->mm_len = mm - (t->mm + *mm_len);
    *mm_len += r->mm_len;
    *ml_len += r->nsites;
    return 0;
}

/* One read's calls (calls[0..n): its lines of the sorted call stream) on its records (the
 * mapped ones with a SEQ, primary first, then supplementary, then secondary): every motif site
 * of every call to the first record that aligns it, as read_sites in modbam.py; then each
 * tagged record's MM skips and ML bytes (write_tags). A read whose sites all fell on deletions
 * or other bases still tags its first record, without sites. 0, or -1 with t->error set. */
int cc_tag_read(cc_tagger *t, const char *calls, int64_t n, cc_record *rec, int nrec) {
    if (ready_fields(t)) return -1;
    if (prepare_records(t, rec, nrec)) return bad_line(t, calls, calls, calls, 0, CC_NO_MEMORY);
    const char *p = calls, *end = calls + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        const char *stop = (nl > p && nl[-1] == '\r') ? nl - 1 : nl;
        if (stop > p) {
            int64_t nf = split_line(t, p, stop);
            if (nf != t->ncols) return bad_line(t, calls, p, stop, nf, CC_BAD_FIELDS);
#define FIELD(col) t->fields[col], t->fields[(col) + 1] - 1
            int64_t start;
            double llr;
            if (parse_int(FIELD(t->col_start), &start)) /* CALL_START in modbam.py */
                return bad_line(t, calls, p, stop, nf, CC_BAD_START);
            if (parse_llr(FIELD(t->col_llr), &llr)) return bad_line(t, calls, p, stop, nf, CC_BAD_LLR);
            const char *strand = t->fields[t->col_strand];
            int reverse = t->fields[t->col_strand + 1] - 1 - strand == 1 && *strand == '-';
            const char *chrom = t->fields[t->col_chrom], *seq = t->fields[t->col_seq];
            int64_t chrom_len = t->fields[t->col_chrom + 1] - 1 - chrom;
            int64_t seq_len = t->fields[t->col_seq + 1] - 1 - seq;
#undef FIELD
            int ml = cc_llr_to_ml(llr);
            for (int i = 0; i < nrec; i++)
                rec[i].on_call = rec[i].reverse == reverse && rec[i].chrom_len == chrom_len &&
                                 memcmp(rec[i].chrom, chrom, (size_t)chrom_len) == 0;
            int64_t first = -1;
            for (int64_t at = 0; at + t->lit_len <= seq_len; at++)
                for (int k = 0; k < t->nlit; k++)
                    if (seq[at] == t->literals[k][0] &&
                        memcmp(seq + at, t->literals[k], (size_t)t->lit_len) == 0) {
                        if (first < 0) first = at;
                        int64_t ref = start + (at - first) + t->offset[reverse];
                        if (place_site(t, rec, nrec, reverse, ref, ml))
                            return bad_line(t, calls, p, stop, nf, CC_BAD_CIGAR);
                        break;
                    }
        }
        p = nl + (nl < end);
    }
    int any = 0;
    for (int i = 0; i < nrec; i++) any |= rec[i].tagged;
    if (!any && nrec) rec[0].tagged = 1;
    int64_t mm_len = 0, ml_len = 0;
    for (int i = 0; i < nrec; i++)
        if (rec[i].tagged && write_tags(t, &rec[i], &mm_len, &ml_len))
            return bad_line(t, calls, calls, calls, 0, CC_NO_MEMORY);
    return 0;
}

void cc_tagger_free(cc_tagger *t) {
    free(t->mm);
    free(t->ml);
    free(t->scratch);
    free(t->blocks);
    free((void *)t->fields);
    t->mm = NULL;
    t->ml = NULL;
    t->scratch = NULL;
    t->blocks = NULL;
    t->fields = NULL;
    t->mm_cap = t->ml_cap = t->scratch_cap = t->blocks_cap = 0;
}
