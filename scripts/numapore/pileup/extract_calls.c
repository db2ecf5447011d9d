/* `numapore extract-calls`' rows in C (compiled last into the pileup core's unit, see
 * core_build.py): the records starting in a span of a contig, read by bam_core.c, each read's
 * MM/ML through calls.c's read_tables, and per call the 23 columns modkit 0.6.1's `extract
 * calls` writes, as numapore.modbam.extract's CallWriter writes them (without --motif: its
 * motif column stays there). Whatever that Python decides differently (a record the reader
 * cannot take, a CIGAR with B, no sequence, an N or ninth code in MM) returns XC_DEFER and
 * Python does the span: the same bytes either way (tests/test_extract_compiled.py). Half of the
 * Python command's time was the rows' text, half the per-read numpy (cProfile). */

#define XC_DEFER (-1)

/* cffi: begin */
#define XC_NO_FILTERING 1
#define XC_PASS_ONLY 2
#define XC_MAPPED_ONLY 4

/* a span's rows (text, len) and the writer's scratch */
typedef struct {
    char *text;
    int64_t len, cap;
    int64_t *refmap; /* per query position its reference position, -1 none */
    int64_t refmap_cap;
} pu_xbuf;
/* cffi: end */

#define XC_F32_CACHE 4096

/* f32 texts as Rust's Display writes them, by bit pattern (calls' probabilities repeat) */
static struct {
    uint32_t bits;
    int len; /* 0: empty slot */
    char text[48];
} xc_f32_cache[XC_F32_CACHE];

static void xc_reserve(pu_xbuf *o, int64_t more) {
    if (o->len + more > o->cap) {
        o->cap = (o->len + more) * 2 + 65536;
        o->text = grow(o->text, o->cap);
    }
}

static void xc_put(pu_xbuf *o, const char *s, int64_t n) {
    xc_reserve(o, n);
    memcpy(o->text + o->len, s, n);
    o->len += n;
}

static void xc_char(pu_xbuf *o, char ch) {
    xc_reserve(o, 1);
    o->text[o->len++] = ch;
}

static void xc_int(pu_xbuf *o, int64_t v) {
    char tmp[24];
    int k = 0;
    uint64_t u = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    do {
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    xc_reserve(o, k + 1);
    if (v < 0) o->text[o->len++] = '-';
    while (k) o->text[o->len++] = tmp[--k];
}

/* x's text as rust_f32 (positions.py) writes it: the fewest decimals that read back as x,
 * rounded half up (Rust's tie rule), no exponent, no ".0" */
static int xc_format_f32(float x, char *out) {
    if (isnan(x)) return sprintf(out, "NaN");
    if (isinf(x)) return sprintf(out, x < 0 ? "-inf" : "inf");
    char exact[160];
    int neg = signbit(x) != 0;
    snprintf(exact, sizeof exact, "%.120f", fabs((double)x));
    char *dot = strchr(exact, '.');
    int whole = (int)(dot - exact), places = (int)strlen(dot + 1);
    for (int d = 0; d <= places; d++) {
        /* the digits up to d places, rounded half up at the next */
        char digits[170];
        int n = whole;
        memcpy(digits, exact, whole);
        memcpy(digits + n, dot + 1, d);
        n += d;
        if (d < places && dot[1 + d] >= '5') {
            int i = n - 1;
            while (i >= 0 && digits[i] == '9') digits[i--] = '0';
            if (i >= 0) digits[i]++;
            else {
                memmove(digits + 1, digits, n);
                digits[0] = '1';
                n++;
            }
        }
        char text[170];
        int k = 0;
        if (neg) text[k++] = '-';
        int w = n - d;
        memcpy(text + k, digits, w);
        k += w;
        if (d) {
            text[k++] = '.';
            memcpy(text + k, digits + w, d);
            k += d;
        }
        text[k] = 0;
        if (strtof(text, NULL) == x) {
            memcpy(out, text, k + 1);
            return k;
        }
    }
    return sprintf(out, "%.9g", (double)x);
}

static void xc_f32(pu_xbuf *o, float x) {
    uint32_t bits;
    memcpy(&bits, &x, 4);
    uint32_t slot = (bits * 2654435761u) >> 20; /* 12 bits: XC_F32_CACHE */
    if (xc_f32_cache[slot].len == 0 || xc_f32_cache[slot].bits != bits) {
        char text[200];
        int k = xc_format_f32(x, text);
        if (k >= (int)sizeof xc_f32_cache[slot].text) {
            xc_put(o, text, k);
            return;
        }
        memcpy(xc_f32_cache[slot].text, text, k + 1);
        xc_f32_cache[slot].len = k;
        xc_f32_cache[slot].bits = bits;
    }
    xc_put(o, xc_f32_cache[slot].text, xc_f32_cache[slot].len);
}

/* the text of rust_f32 for Python's tests of this formatter */
int pu_format_f32(float x, char *out) { return xc_format_f32(x, out); }

/* extract.py's COMPLEMENT (ACGTN and acgtn only) */
static char xc_complement(char ch) {
    switch (ch) {
    case 'A': return 'T'; case 'C': return 'G'; case 'G': return 'C'; case 'T': return 'A';
    case 'a': return 't'; case 'c': return 'g'; case 'g': return 'c'; case 't': return 'a';
    default: return ch;
    }
}

/* The k-mer of seq (n bases) around pos as padded() and its slice give it: `-` outside,
 * cut short past n + size / 2 */
static void xc_kmer(pu_xbuf *o, const char *seq, int64_t n, int64_t pos, int size, int flip) {
    int before = size % 2 == 0 ? size / 2 - 1 : size / 2;
    char k[64];
    int len = 0;
    for (int j = 0; j < size; j++) {
        int64_t p = pos - before + j;
        if (p >= n + size / 2) break;
        k[len++] = p < 0 || p >= n ? '-' : seq[p];
    }
    if (flip)
        for (int j = len - 1; j >= 0; j--) xc_char(o, xc_complement(k[j]));
    else
        xc_put(o, k, len);
}

/* the forward base at forward position i of the read prepare() holds (scratch_t keeps the
 * sequence as stored, reversed reads not complemented) */
static uint8_t xc_forward_base(const scratch_t *s, int64_t n, int64_t i) {
    return s->reverse ? COMPLEMENT[s->seq[n - 1 - i]] : s->seq[i];
}

/* the (MM strand, base) keys in the order Python's tables dict holds them: the MM groups'
 * order of first appearance, counting groups that make a table (deltas, or implicit with
 * the base in the read) */
static int xc_key_order(const char *mm, const scratch_t *s, int64_t n, int *order) {
    int nk = 0, count[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        int b = base_index(xc_forward_base(s, n, i));
        if (b < 4) count[b]++;
    }
    for (const char *p = mm; *p;) {
        const char *g_end = strchr(p, ';');
        if (!g_end) g_end = p + strlen(p);
        if (g_end - p >= 2) {
            const char *h_end = memchr(p, ',', g_end - p);
            if (!h_end) h_end = g_end;
            int b = base_index((uint8_t)(*p == 'U' ? 'T' : *p)), st = p[1] == '-';
            int deltas = h_end < g_end, implicit = h_end[-1] != '?';
            int key = st * 4 + b, seen = 0;
            for (int j = 0; j < nk; j++) seen |= order[j] == key;
            if (b < 4 && !seen && (deltas || (implicit && count[b])) && s->t[st][b].exists)
                order[nk++] = key;
        }
        p = *g_end ? g_end + 1 : g_end;
    }
    for (int st = 0; st < 2; st++) /* any left (not expected): table order */
        for (int b = 0; b < 4; b++) {
            int seen = 0;
            for (int j = 0; j < nk; j++) seen |= order[j] == st * 4 + b;
            if (s->t[st][b].exists && !seen) order[nk++] = st * 4 + b;
        }
    return nk;
}

/* What every row of a read repeats */
typedef struct {
    const char *name, *chrom, *seq, *ref;
    const uint8_t *qual; /* NULL: none (255) */
    int64_t n, ref_len, clip_start, clip_end, start, end;
    int reverse, mapped, flag;
} xc_read;

/* the read's rows: by forward position (descending for a reverse alignment), then the
 * tables in (base, strand) order */
static int64_t xc_read_rows(pu_ctx *c, scratch_t *s, const xc_read *rd, const int64_t *refmap,
                            const char *mm, int kmer, int options, pu_xbuf *o) {
    int order[8], nk = xc_key_order(mm, s, rd->n, order);
    /* per base the codes of both strands' tables (Python's codes_of_base), hash order */
    int codes[4][PU_MAXC], ncodes[4] = {0, 0, 0, 0};
    for (int j = 0; j < nk; j++) {
        int st = order[j] / 4, b = order[j] % 4;
        const table_t *t = &s->t[st][b];
        for (int k = 0; k < t->ncodes; k++) {
            int have = 0;
            for (int m = 0; m < ncodes[b]; m++) have |= codes[b][m] == t->codes[k];
            if (!have) codes[b][ncodes[b]++] = t->codes[k];
        }
    }
    int hashed[4][PU_MAXC], slot[2][4][PU_MAXC];
    for (int b = 0; b < 4; b++) {
        hash_order(c, codes[b], ncodes[b], hashed[b]);
        for (int st = 0; st < 2; st++)
            for (int m = 0; m < ncodes[b]; m++) {
                const table_t *t = &s->t[st][b];
                slot[st][b][m] = -1;
                for (int k = 0; k < t->ncodes; k++)
                    if (t->codes[k] == hashed[b][m]) slot[st][b][m] = k;
            }
    }
    int64_t rows = 0;
    const char *strand = rd->mapped ? (rd->reverse ? "-" : "+") : ".";
    for (int64_t i = 0; i < rd->n; i++) {
        int64_t q = rd->reverse ? rd->n - 1 - i : i; /* the forward position */
        int b = base_index(xc_forward_base(s, rd->n, q));
        for (int bb = 0; bb < 4; bb++)
            for (int st = 0; st < 2; st++) {
                const table_t *t = &s->t[st][bb];
                /* a table's positions are its base's (the fundamental base, read forward) */
                if (!t->exists || bb != b || !(t->flags[q] & 1)) continue;
                int inferred = (t->flags[q] >> 1) & 1, nc = ncodes[bb];
                int64_t ref_pos = refmap[rd->reverse ? rd->n - 1 - q : q];
                if (ref_pos < 0 && (options & XC_MAPPED_ONLY)) continue;
                float p[PU_MAXC], total = 0.0f;
                for (int m = 0; m < nc; m++) {
                    int k = slot[st][bb][m];
                    p[m] = k >= 0 && !inferred ? t->probs[k][q] : 0.0f;
                    total = total + p[m];
                }
                float can = 1.0f - total;
                /* modkit's argmax: a code only if more probable than canonical */
                int best = -1;
                float best_p = -INFINITY;
                for (int m = 0; m < nc; m++)
                    if (p[m] >= best_p) {
                        best = m;
                        best_p = p[m];
                    }
                int call = best >= 0 && best_p > can ? best : -1;
                float prob = call >= 0 ? best_p : can;
                int failed = 0;
                if (!(options & XC_NO_FILTERING)) {
                    /* the threshold call (of the MM base, as Python's g.calls(caller, g.base)) */
                    int passed = 0;
                    float pass_p = -INFINITY;
                    for (int m = 0; m < nc; m++)
                        if (p[m] >= c->code_thr[bb][hashed[bb][m]] && p[m] >= pass_p) {
                            passed = 1;
                            pass_p = p[m];
                        }
                    float can_thr = c->has_per_base[bb] ? c->per_base[bb] : c->default_threshold;
                    if (can >= can_thr && can >= pass_p) passed = 1;
                    failed = !passed;
                }
                if (failed && (options & XC_PASS_ONLY)) continue;
                char base = "ACGT"[bb], primary = st ? "TGCA"[bb] : base;
                int mod_ref_minus = st ^ rd->reverse;
                xc_put(o, rd->name, (int64_t)strlen(rd->name));
                xc_char(o, '\t');
                xc_int(o, q);
                xc_char(o, '\t');
                xc_int(o, ref_pos);
                xc_char(o, '\t');
                xc_put(o, rd->chrom, (int64_t)strlen(rd->chrom));
                xc_put(o, st ? "\t-\t" : "\t+\t", 3);
                xc_put(o, strand, 1);
                xc_char(o, '\t');
                xc_char(o, rd->mapped ? (mod_ref_minus ? '-' : '+') : '.');
                int64_t cells[5] = {rd->clip_start, rd->clip_end, rd->start, rd->end, rd->n};
                for (int k = 0; k < 5; k++) {
                    xc_char(o, '\t');
                    xc_int(o, cells[k]);
                }
                xc_char(o, '\t');
                xc_f32(o, prob);
                xc_char(o, '\t');
                if (call >= 0) xc_put(o, c->codes[hashed[bb][call]], (int64_t)strlen(c->codes[hashed[bb][call]]));
                else xc_char(o, '-');
                xc_char(o, '\t');
                xc_int(o, rd->qual ? rd->qual[rd->reverse ? rd->n - 1 - q : q] : 255);
                xc_char(o, '\t');
                if (rd->ref && ref_pos >= 0) xc_kmer(o, rd->ref, rd->ref_len, ref_pos, kmer, 0);
                else xc_char(o, '.');
                xc_char(o, '\t');
                xc_kmer(o, rd->seq, rd->n, q, kmer, st);
                xc_char(o, '\t');
                xc_char(o, base);
                xc_char(o, '\t');
                xc_char(o, primary);
                xc_put(o, failed ? "\ttrue" : "\tfalse", failed ? 5 : 6);
                xc_put(o, inferred ? "\ttrue" : "\tfalse", inferred ? 5 : 6);
                int within = rd->mapped && q >= rd->clip_start && q < rd->n - rd->clip_end;
                xc_put(o, within ? "\ttrue\t" : "\tfalse\t", within ? 6 : 7);
                xc_int(o, rd->flag);
                xc_char(o, '\n');
                rows++;
            }
    }
    return rows;
}

/* The rows of the primary records of tid starting in [start, end), in file order, appended
 * to out; ref: the contig's sequence (NULL: none), kmer: --kmer-size (1-50), options:
 * XC_*. Returns the rows, or XC_DEFER where Python must do the span (out then partial). */
int64_t pu_extract_span(pu_ctx *c, pu_bam *b, int tid, int64_t start, int64_t end,
                        const char *chrom, const char *ref, int64_t ref_len, int kmer,
                        int options, pu_xbuf *out) {
    query(b, tid, start, end);
    int64_t rows = 0;
    for (;;) {
        bam_rec x;
        int got = next_overlapping(b, tid, start, end, &x);
        if (got == REC_DEFER) return XC_DEFER;
        if (got == REC_END) break;
        if (got == REC_OUTSIDE || x.pos < start) continue; /* done in the span it starts in */
        int flag = x.flag, mapped = !(flag & 4);
        if (flag & 0xD00 || (!mapped && (options & XC_MAPPED_ONLY))) continue;
        const uint8_t *mm = NULL, *ml = NULL;
        const char *why = NULL;
        char reason[160];
        int kind = mod_tags(x.aux, x.rend, x.lseq, &mm, &ml, &why, reason);
        if (kind == PU_DEFER) return XC_DEFER;
        if (kind) continue; /* Python's ReadError: no rows */
        if (x.lseq <= 0 || (mapped && !x.ncig)) return XC_DEFER;
        int64_t nops = decode_record(b, x.r, x.packed, x.lseq);
        if (nops < 0) return XC_DEFER;
        int64_t n = x.lseq, *ops = b->ops, *lens = b->ops + x.ncig;
        int reverse = (flag & 16) != 0;
        scratch_t *s = get_scratch(c, n);
        prepare(c, s, reverse, b->seq, n);
        int rc = read_tables(c, s, n, (const char *)mm, ml + 5, (int64_t)le32(ml + 1));
        if (rc == SKIP_CODES) return XC_DEFER; /* an N base or a ninth code: Python's */
        if (rc) continue;                      /* Python's ReadError: no rows */
        if (n > out->refmap_cap) {
            out->refmap_cap = n + n / 2 + 64;
            out->refmap = grow(out->refmap, out->refmap_cap * sizeof(int64_t));
        }
        int64_t *refmap = out->refmap, clips[2] = {0, 0}, rpos = x.pos, qpos = 0;
        for (int64_t i = 0; i < n; i++) refmap[i] = -1;
        if (mapped) {
            for (int64_t k = 0; k < nops; k++) {
                int64_t op = ops[k], len = lens[k];
                if (op == 0 || op == 7 || op == 8) {
                    for (int64_t j = 0; j < len && qpos + j < n; j++) refmap[qpos + j] = rpos + j;
                    qpos += len;
                    rpos += len;
                } else if (op == 1 || op == 4) qpos += len;
                else if (op == 2 || op == 3) rpos += len;
            }
            for (int64_t k = 0; k < nops && ops[k] == 4; k++) clips[0] += lens[k];
            for (int64_t k = nops - 1; k >= 0 && ops[k] == 4; k--) clips[1] += lens[k];
        }
        /* the sequence as sequenced, complemented as extract.py's ReadFacts does */
        char *fwd = (char *)s->gflags; /* free until the next read_tables */
        for (int64_t i = 0; i < n; i++)
            fwd[i] = reverse ? xc_complement(b->seq[n - 1 - i]) : b->seq[i];
        const uint8_t *qual = x.packed + (n + 1) / 2;
        xc_read rd = {(const char *)x.r + 32, mapped ? chrom : ".", fwd, ref,
                      qual[0] == 0xff ? NULL : qual, n, ref_len,
                      reverse ? clips[1] : clips[0], reverse ? clips[0] : clips[1],
                      mapped ? x.pos : -1, mapped ? record_end(x.r, x.pos) : -1,
                      reverse, mapped, flag};
        if (!mapped) rd.clip_start = rd.clip_end = 0;
        rows += xc_read_rows(c, s, &rd, refmap, (const char *)mm, kmer, options, out);
    }
    return rows;
}

void pu_xbuf_free(pu_xbuf *o) {
    free(o->text);
    free(o->refmap);
    memset(o, 0, sizeof *o);
}
