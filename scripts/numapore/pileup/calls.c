/* The compiled pileup core, part 2 of 5: a read's calls (core_build.py compiles
 * core.c, calls.c, tally.c, text.c, sample.c, bam_core.c and
 * bam_records.c as one unit, in that order: each part uses the types and functions of the parts
 * before it). A read's MM/ML into per-(MM strand, base) tables (modkit's implicit and explicit
 * modes, group combination and its conflicts), the edge filter, the --ignore redistribution and
 * the threshold call at each forward position. */

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

/* the forward positions (ascending) of forward base fb in a read stored as seq (reversed:
 * its reverse complement), into out; their number. Eight bases a step: the bytes equal to the
 * base found with word arithmetic (a read's bases were a tenth of its calls' time). */
static int64_t base_positions(const uint8_t *seq, int64_t n, int reverse, uint8_t fb,
                              int32_t *out) {
    const uint8_t want = reverse ? COMPLEMENT[fb] : fb;
    const uint64_t ones = 0x0101010101010101ULL, low7 = 0x7F7F7F7F7F7F7F7FULL;
    int64_t k = 0, i = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ /* a word's first byte is its lowest */
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        if (!reverse) {
            memcpy(&w, seq + i, 8);
        } else { /* forward positions i..i+7 are seq[n-1-i] down to seq[n-8-i] */
            memcpy(&w, seq + n - 8 - i, 8);
            w = __builtin_bswap64(w);
        }
        uint64_t x = w ^ (ones * want); /* zero bytes where the base is */
        uint64_t hit = ~(((x & low7) + low7) | x) & ~low7; /* the high bit of each zero byte */
        while (hit) {
            out[k++] = (int32_t)(i + (__builtin_ctzll(hit) >> 3));
            hit &= hit - 1;
        }
    }
#endif
    for (; i < n; i++)
        if ((reverse ? seq[n - 1 - i] : seq[i]) == want) out[k++] = (int32_t)i;
    return k;
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
            s->nbase[fbi] = base_positions(s->seq, n, s->reverse, (uint8_t)fb, s->base_pos[fbi]);
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
        int implicit = mode != '?';
        /* unlisted positions: inferred canonical (3) in implicit mode, else none (0) */
        const uint8_t unlisted = implicit ? 3 : 0;
        for (int64_t k = 0; k < nb; k++) gf[bp[k]] = unlisted;
        int64_t idx = -1;
        for (int64_t k = 0; k < nd; k++) {
            idx += s->deltas[k] + 1;
            if (idx >= s->nbase[fbi]) return fail(c, SKIP_MM, "MM delta list refers to positions beyond end of seq");
            gf[s->base_pos[fbi][idx]] = 1;
        }
        if (!nd && !(implicit && s->nbase[fbi])) {
            pointer = end;
            p = *g_end ? g_end + 1 : g_end;
            continue;
        }
        table_t *t = &s->t[strand][fbi];
        int fresh = !t->exists;
        if (fresh) {
            t->exists = 1;
            t->mode = mode;
            t->ncodes = 0;
        } else if (t->mode != mode) {
            t->mode = '.';
        }
        int slot[PU_MAXC], added[PU_MAXC], nadded = 0;
        for (int j = 0; j < ng; j++) {
            int k;
            for (k = 0; k < t->ncodes; k++)
                if (t->codes[k] == gcodes[j]) break;
            if (k == t->ncodes) {
                if (k >= PU_MAXC) return fail(c, SKIP_CODES, "too many mod codes");
                t->codes[t->ncodes++] = gcodes[j];
                added[nadded++] = k;
            }
            slot[j] = k;
        }
        uint8_t bits = 0;
        for (int j = 0; j < ng; j++) bits |= (uint8_t)(1u << slot[j]);
        /* the new codes' probabilities zeroed; then one pass over the base's positions where
         * the table is new (nothing to overlap), two otherwise: the overlap checked, then
         * (after the probabilities are added) presence, the sum check and the flags */
        int any_overlap = 0;
        for (int j = 0; j < nadded; j++) {
            float *pr = t->probs[added[j]];
            for (int64_t k = 0; k < nb; k++) pr[bp[k]] = 0.0f;
        }
        if (fresh) {
            for (int64_t k = 0; k < nb; k++) {
                int32_t q = bp[k];
                t->flags[q] = gf[q];
                t->present[q] = gf[q] ? bits : 0;
            }
        } else {
            for (int64_t k = 0; k < nb; k++) {
                int32_t q = bp[k];
                if (gf[q] && (t->flags[q] & 1)) {
                    if (((t->flags[q] >> 1) & 1) != ((gf[q] >> 1) & 1))
                        return fail(c, SKIP_CONFLICT, "explicit and inferred calls at the same position");
                    any_overlap = 1;
                }
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
        if (!fresh) {
            int cidx[PU_MAXC];
            if (any_overlap) {
                int order[PU_MAXC];
                hash_order(c, t->codes, t->ncodes, order);
                for (int j = 0; j < t->ncodes; j++)
                    for (int k = 0; k < t->ncodes; k++)
                        if (t->codes[k] == order[j]) cidx[j] = k;
            }
            for (int64_t k = 0; k < nb; k++) {
                int32_t q = bp[k];
                if (!gf[q]) continue;
                t->present[q] |= bits;
                if (any_overlap && (t->flags[q] & 1)) {
                    float total = 0.0f;
                    for (int j = 0; j < t->ncodes; j++)
                        if (t->present[q] & (1u << cidx[j])) total = total + t->probs[cidx[j]][q];
                    if (total > 1.01f) return fail(c, SKIP_CONFLICT, "probabilities at a position sum to more than 1");
                }
                t->flags[q] |= gf[q];
            }
        }
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

/* the read's sequence as stored (read_tables finds the forward bases on it) */
static int prepare(pu_ctx *c, scratch_t *s, int reverse, const char *seq, int64_t n) {
    s->seq = (const uint8_t *)seq;
    s->reverse = reverse;
    (void)c;
    (void)n;
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
            int kept = 0;
            for (int64_t k = 0; k < nb && !kept; k++)
                kept = (t->flags[bp[k]] & 1) && edge_keeps(c, bp[k], n);
            if (!kept) continue;
            if (!has_strand[st]) {
                memset(s->calls[st], NO_CALL_BYTE, n * sizeof(int16_t));
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
