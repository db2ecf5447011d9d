/* The compiled pileup core, part 6: a record's calls for 0.6.1's --modified-bases counter
 * (modified_bases.read_calls, the same rules: modkit's BaseModsAdapter). At each listed
 * position the first code (in MM order) with the highest ML value, canonical 255 - the values'
 * sum (at least 0), canonical if above it, each call against its own threshold; unlisted bases
 * of an implicit group canonical at quality 255. Anything unusual (an MM entry or delta that
 * does not parse plainly, a position past the sequence, ML too short, more than MB_CODES
 * codes) returns MB_DEFER and read_calls reads the record in numpy, where its error is named:
 * the same calls either way, in one pass instead of numpy's dozens (that read was a third of
 * a --modified-bases pileup's time, measured with cProfile). */

#define MB_DEFER (-2)
#define MB_CODES 16

static int mb_base(char ch) {
    switch (ch) {
    case 'A': case 'a': return 0;
    case 'C': case 'c': return 1;
    case 'G': case 'g': return 2;
    case 'T': case 't': return 3;
    default: return 4;
    }
}

static float mb_prob(int q) { return ((float)q + 0.5f) / 256.0f; }

/* seq (n bases, BAM orientation; reverse: reverse-complemented here), MM and ML; thresholds
 * per base; nmod per-code thresholds (mod_codes: nmod codes of 12 bytes). Out: fwd (base
 * 0-3, 4 other, read orientation), kind (-1 no call, 0 canonical, 1 modified, 2 filtered),
 * code_at (the modified call's code: index into codes, -1 none), codes (12 bytes each) and
 * ncodes. Returns 0, or MB_DEFER. */
int pu_mb_calls(const char *seq, int64_t n, int reverse, const char *mm, const uint8_t *ml,
                int64_t nml, const float *thresholds, const char *mod_codes,
                const float *mod_values, int nmod, int8_t *fwd, int8_t *kind, int32_t *code_at,
                char *codes, int *ncodes) {
    int implicit[4] = {0, 0, 0, 0}, nc = 0, rc = 0;
    int32_t *tot = calloc(n + 1, sizeof(int32_t));
    int16_t *top = malloc((n + 1) * sizeof(int16_t));
    int8_t *top_code = malloc(n + 1);
    int64_t *where = malloc((n + 1) * sizeof(int64_t)); /* a base's positions, in order */
    if (!tot || !top || !top_code || !where) abort();
    for (int64_t i = 0; i < n; i++) {
        int b = mb_base(seq[reverse ? n - 1 - i : i]);
        fwd[i] = (int8_t)(reverse && b < 4 ? 3 - b : b);
        top[i] = -1;
    }
    int64_t pointer = 0;
    for (const char *p = mm; *p;) {
        const char *g_end = strchr(p, ';');
        if (!g_end) g_end = p + strlen(p);
        if (g_end == p) {
            p++;
            continue;
        }
        const char *h_end = memchr(p, ',', g_end - p);
        if (!h_end) h_end = g_end;
        int base = mb_base(*p);
        if (h_end - p < 3 || base == 4 || *p != "ACGT"[base] || p[1] != '+') goto defer;
        const char *spec = p + 2, *spec_end = h_end;
        char mode = spec_end[-1] == '.' || spec_end[-1] == '?' ? spec_end[-1] : 0;
        if (mode) spec_end--;
        if (spec_end == spec) goto defer;
        implicit[base] |= mode != '?';
        int digits = 1, ids[MB_CODES], ng = 0;
        for (const char *s = spec; s < spec_end; s++) digits &= *s >= '0' && *s <= '9';
        for (const char *s = spec; s < spec_end; s = digits ? spec_end : s + 1) {
            int len = digits ? (int)(spec_end - spec) : 1, k;
            if (len > 11 || ng >= MB_CODES) goto defer;
            for (k = 0; k < nc; k++)
                if ((int)strlen(codes + 12 * k) == len && !memcmp(codes + 12 * k, s, len)) break;
            if (k == nc) {
                if (nc >= MB_CODES) goto defer;
                memcpy(codes + 12 * nc, s, len);
                codes[12 * nc + len] = 0;
                nc++;
            }
            ids[ng++] = k;
        }
        /* the base's positions, then the deltas walked over them */
        int64_t nb = 0;
        for (int64_t i = 0; i < n; i++)
            if (fwd[i] == base) where[nb++] = i;
        int64_t at = -1;
        for (const char *d = h_end; d < g_end;) {
            d++; /* the comma */
            if (d >= g_end || *d < '0' || *d > '9') goto defer;
            int64_t v = 0;
            while (d < g_end && *d >= '0' && *d <= '9') {
                v = v * 10 + (*d++ - '0');
                if (v > n) goto defer;
            }
            if (d < g_end && *d != ',') goto defer;
            at += v + 1;
            if (at >= nb || pointer + ng > nml) goto defer;
            int64_t q = where[at];
            for (int j = 0; j < ng; j++) {
                int value = ml[pointer++];
                tot[q] += value;
                if (value > top[q]) {
                    top[q] = (int16_t)value;
                    top_code[q] = (int8_t)ids[j];
                }
            }
        }
        p = *g_end ? g_end + 1 : g_end;
    }
    float limits[MB_CODES][4];
    for (int k = 0; k < nc; k++)
        for (int b = 0; b < 4; b++) {
            limits[k][b] = thresholds[b];
            for (int m = 0; m < nmod; m++)
                if (!strcmp(mod_codes + 12 * m, codes + 12 * k)) limits[k][b] = mod_values[m];
        }
    for (int64_t i = 0; i < n; i++) {
        int b = fwd[i];
        code_at[i] = -1;
        kind[i] = -1;
        if (top[i] >= 0) {
            int canonical = 255 - (tot[i] < 255 ? tot[i] : 255);
            if (canonical > top[i]) kind[i] = mb_prob(canonical) >= thresholds[b] ? 0 : 2;
            else {
                kind[i] = mb_prob(top[i]) >= limits[top_code[i]][b] ? 1 : 2;
                code_at[i] = top_code[i];
            }
        } else if (b < 4 && implicit[b]) kind[i] = mb_prob(255) >= thresholds[b] ? 0 : 2;
    }
    *ncodes = nc;
    goto done;
defer:
    rc = MB_DEFER;
done:
    free(tot);
    free(top);
    free(top_code);
    free(where);
    return rc;
}
