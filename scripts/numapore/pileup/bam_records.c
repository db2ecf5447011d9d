/* The BAM reader's records (compiled after bam_core.c, into the pileup core's unit: see
 * core_build.py): a record's tags, sequence and CIGAR; the read names an interval has
 * seen; the skip counts; and the two walks over an interval's records, the pileup's
 * (pu_bam_chunk: each usable record tallied through tally.c's add_read_ops) and the
 * estimated threshold's sample (pu_bam_sample, through sample.c). */

/* a tag of the record's aux data: its type (0: absent) and where its value starts */
static int find_tag(const uint8_t *aux, const uint8_t *end, const char *tag, const uint8_t **val) {
    const uint8_t *p = aux;
    while (p + 3 <= end) {
        char type = (char)p[2];
        const uint8_t *v = p + 3;
        int64_t size;
        switch (type) {
        case 'A': case 'c': case 'C': size = 1; break;
        case 's': case 'S': size = 2; break;
        case 'i': case 'I': case 'f': size = 4; break;
        case 'd': size = 8; break;
        case 'Z': case 'H': {
            const uint8_t *z = memchr(v, 0, end - v);
            if (!z) return -1;
            size = z - v + 1;
            break;
        }
        case 'B': {
            if (v + 5 > end) return -1;
            char sub = (char)v[0];
            int64_t each = sub == 'c' || sub == 'C' ? 1 : sub == 's' || sub == 'S' ? 2
                         : sub == 'i' || sub == 'I' || sub == 'f' ? 4 : 0;
            if (!each) return -1;
            size = 5 + each * (int64_t)le32(v + 1);
            break;
        }
        default: return -1;
        }
        if (v + size > end) return -1;
        if (p[0] == tag[0] && p[1] == tag[1]) {
            *val = v;
            return type;
        }
        p = v + size;
    }
    return 0;
}

/* an integer tag's value (pysam's int for c C s S i I); 0 if it is not one */
static int int_tag(int type, const uint8_t *v, int64_t *out) {
    switch (type) {
    case 'c': *out = (int8_t)v[0]; return 1;
    case 'C': *out = v[0]; return 1;
    case 's': *out = (int16_t)(v[0] | v[1] << 8); return 1;
    case 'S': *out = (uint16_t)(v[0] | v[1] << 8); return 1;
    case 'i': *out = (int32_t)le32(v); return 1;
    case 'I': *out = le32(v); return 1;
    default: return 0;
    }
}

static void stats_text(pu_stats *st, const char *text, int64_t n) {
    if (st->listing_len + n > st->listing_cap) {
        st->listing_cap = (st->listing_len + n) * 2 + 4096;
        st->listing = grow(st->listing, st->listing_cap);
    }
    memcpy(st->listing + st->listing_len, text, n);
    st->listing_len += n;
}

static void stats_skip(pu_stats *st, int kind, const char *name, const char *reason) {
    if (!st->skipped[kind]++) {
        st->order[st->norder++] = kind;
        snprintf(st->example_name[kind], sizeof st->example_name[kind], "%s", name);
        snprintf(st->example_reason[kind], sizeof st->example_reason[kind], "%s", reason);
    }
}

static uint64_t name_hash(const char *name, int64_t len) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (int64_t i = 0; i < len; i++) h = (h ^ (uint8_t)name[i]) * 1099511628211ULL;
    return h;
}

/* where name is in the set's table, or the empty slot it would take */
static int64_t name_slot(const nameset *set, const char *name, int64_t len) {
    int64_t j = (int64_t)(name_hash(name, len) & (set->nslots - 1));
    for (; set->slots[j] >= 0; j = (j + 1) & (set->nslots - 1))
        if (!strcmp(set->arena + set->slots[j], name)) break;
    return j;
}

static int name_in(const nameset *set, const char *name, int64_t len) {
    return set->nslots && set->slots[name_slot(set, name, len)] >= 0;
}

/* add a name (NUL-terminated, len bytes) to the set: 1 if it was there already */
static int name_add(nameset *set, const char *name, int64_t len) {
    if (2 * (set->n + 1) > set->nslots) {
        int64_t n = set->nslots ? set->nslots * 2 : 1024;
        free(set->slots);
        set->slots = malloc(n * sizeof(int64_t));
        set->nslots = n;
        for (int64_t i = 0; i < n; i++) set->slots[i] = -1;
        for (int64_t at = 0; at < set->len; at += strlen(set->arena + at) + 1) {
            int64_t k = (int64_t)strlen(set->arena + at);
            set->slots[name_slot(set, set->arena + at, k)] = at;
        }
    }
    int64_t j = name_slot(set, name, len);
    if (set->slots[j] >= 0) return 1;
    if (set->len + len + 1 > set->cap) {
        set->cap = (set->len + len + 1) * 2 + 4096;
        set->arena = grow(set->arena, set->cap);
    }
    memcpy(set->arena + set->len, name, len + 1);
    set->slots[j] = set->len;
    set->len += len + 1;
    set->n++;
    return 0;
}

/* add a name's hash to the set: 1 if it was there already (the name, or a collision) */
static int hash_add(hashset *set, const char *name, int64_t len) {
    uint64_t h = name_hash(name, len) | 1; /* never 0, the empty slot */
    if (2 * (set->n + 1) > set->nslots) {
        int64_t n = set->nslots ? set->nslots * 2 : 1024;
        uint64_t *old = set->slots;
        set->slots = calloc(n, sizeof(uint64_t));
        if (!set->slots) abort();
        for (int64_t i = 0; i < set->nslots; i++)
            if (old[i]) {
                int64_t j = (int64_t)(old[i] & (n - 1));
                while (set->slots[j]) j = (j + 1) & (n - 1);
                set->slots[j] = old[i];
            }
        free(old);
        set->nslots = n;
    }
    int64_t j = (int64_t)(h & (set->nslots - 1));
    for (; set->slots[j]; j = (j + 1) & (set->nslots - 1))
        if (set->slots[j] == h) return 1;
    set->slots[j] = h;
    set->n++;
    return 0;
}

static void hash_clear(hashset *set) {
    if (set->nslots) memset(set->slots, 0, set->nslots * sizeof(uint64_t));
    set->n = 0;
}

/* keep only the set's first names, up to arena offset len (undo what came after) */
static void names_truncate(nameset *set, int64_t len) {
    int64_t n = 0; /* rebuilt: removing from an open-addressing table leaves gaps */
    for (int64_t at = 0; at < len; at += strlen(set->arena + at) + 1) n++;
    for (int64_t i = 0; i < set->nslots; i++) set->slots[i] = -1;
    set->len = len;
    set->n = n;
    for (int64_t at = 0; at < len; at += strlen(set->arena + at) + 1)
        set->slots[name_slot(set, set->arena + at, (int64_t)strlen(set->arena + at))] = at;
}

/* Whether a record overlaps [start, end) of tid (pileup_chunk's check before it finds an
 * interval's motif positions): 1, 0, or -1 if the BAM cannot be read here. */
int pu_bam_any(pu_bam *b, int tid, int64_t start, int64_t end) {
    query(b, tid, start, end);
    for (;;) {
        int64_t n = next_in_region(b);
        if (n <= 0) return (int)n;
        int32_t rtid = (int32_t)le32(b->rec), pos = (int32_t)le32(b->rec + 4);
        if (rtid < 0 || rtid > tid || (rtid == tid && pos >= end)) return 0;
        if (rtid == tid && record_end(b->rec, pos) > start) return 1;
    }
}

/* The record's MM and ML as get_mod_tags reads them: 0 with *mm and *ml (the B array) set,
 * or the skip kind with *why (reason holds it where it names values), or PU_DEFER for what
 * pysam must decide (MM not Z, or not ASCII) */
static int mod_tags(const uint8_t *aux, const uint8_t *rend, int32_t lseq, const uint8_t **mm,
                    const uint8_t **ml, const char **why, char *reason) {
    const uint8_t *v;
    int64_t value = 0;
    int type = find_tag(aux, rend, "MM", &v);
    if (!type) type = find_tag(aux, rend, "Mm", &v);
    if (type < 0 || (type && type != 'Z')) return PU_DEFER;
    if (!type) {
        *why = "no MM tag";
        return SKIP_MISSING;
    }
    for (const uint8_t *z = v; *z; z++)
        if (*z >= 0x80) return PU_DEFER; /* pysam's text decoding decides */
    *mm = v;
    type = find_tag(aux, rend, "ML", &v);
    if (!type) type = find_tag(aux, rend, "Ml", &v);
    if (type < 0) return PU_DEFER;
    if (!type) {
        *why = "no ML tag";
        return SKIP_MISSING;
    }
    if (type != 'B' || v[0] != 'C') {
        *why = "ML tag is not an array of uint8";
        return KIND_ML;
    }
    *ml = v;
    type = find_tag(aux, rend, "MN", &v);
    if (type < 0) return PU_DEFER;
    if (type && !int_tag(type, v, &value)) {
        *why = "MN tag is not an integer";
        return KIND_MN;
    }
    if (type && value != lseq) {
        snprintf(reason, 160, "MN tag length %lld and seq length %d differ", (long long)value,
                 lseq);
        *why = reason;
        return KIND_MN;
    }
    return 0;
}

/* The record's sequence as text into b->seq and its CIGAR into b->ops (operations, then
 * lengths); the number of operations, -1 for a CIGAR with a B (pu_add_read's "bad CIGAR"), -2
 * for an operation pysam does not name */
static const char SEQ_CODES[] = "=ACMGRSVTWYHKDBN";
static char SEQ_PAIRS[256][2]; /* a packed byte's two bases, as htslib decodes them */

__attribute__((constructor)) static void fill_seq_pairs(void) {
    for (int v = 0; v < 256; v++) {
        SEQ_PAIRS[v][0] = SEQ_CODES[v >> 4];
        SEQ_PAIRS[v][1] = SEQ_CODES[v & 15];
    }
}

static int64_t decode_record(pu_bam *b, const uint8_t *r, const uint8_t *packed, int32_t lseq) {
    int ncig = r[12] | r[13] << 8;
    const uint8_t *cig = r + 32 + r[8];
    if (lseq + 2 > b->seq_cap) {
        b->seq_cap = lseq + lseq / 2 + 64;
        b->seq = grow(b->seq, b->seq_cap);
    }
    for (int32_t i = 0; i < lseq; i += 2) memcpy(b->seq + i, SEQ_PAIRS[packed[i >> 1]], 2);
    b->seq[lseq] = 0;
    if (2 * (int64_t)ncig > b->ops_cap) {
        b->ops_cap = 2 * (int64_t)ncig + 64;
        b->ops = grow(b->ops, b->ops_cap * sizeof(int64_t));
    }
    int64_t *ops = b->ops, *lens = b->ops + ncig, nops = ncig;
    for (int i = 0; i < ncig; i++) {
        uint32_t cv = le32(cig + 4 * i);
        ops[i] = cv & 15;
        lens[i] = cv >> 4;
        if (ops[i] > 9) return -2;
        if (ops[i] == 9) nops = -1;
    }
    return nops;
}


/* One record of a region's walk, its fields where both walks (pu_bam_chunk, pu_bam_sample)
 * read them. */
typedef struct {
    const uint8_t *r, *rend, *packed, *aux;
    int32_t pos, lseq;
    int lname, ncig, flag;
} bam_rec;

enum { REC_END = 0, REC_NEXT = 1, REC_OUTSIDE = 2, REC_DEFER = -1 };

/* The next record of query(b, tid, start, end): REC_NEXT with its fields in *x, REC_OUTSIDE
 * for one to pass over (another reference, or ending before start), REC_END past the region,
 * REC_DEFER where pysam must read the interval (a damaged record, or its CIGAR in the CG
 * tag). */
static int next_overlapping(pu_bam *b, int tid, int64_t start, int64_t end, bam_rec *x) {
    int64_t n = next_in_region(b);
    if (n < 0) return REC_DEFER;
    if (n == 0) return REC_END;
    const uint8_t *r = b->rec;
    int32_t rtid = (int32_t)le32(r), pos = (int32_t)le32(r + 4);
    if (rtid < 0 || rtid > tid || (rtid == tid && pos >= end)) return REC_END;
    int lname = r[8], ncig = r[12] | r[13] << 8;
    int32_t lseq = (int32_t)le32(r + 16);
    const uint8_t *cig = r + 32 + lname, *packed = cig + 4 * (int64_t)ncig;
    const uint8_t *aux = packed + (lseq + 1) / 2 + lseq;
    if (lname < 1 || lseq < 0 || aux > r + n || r[32 + lname - 1]) return REC_DEFER;
    /* htslib moves a CIGAR of more than 65,535 ops into the CG tag (kept here as lseq S and
     * an N): left to pysam */
    if (ncig == 2 && le32(cig) == ((uint32_t)lseq << 4 | 4) && (le32(cig + 4) & 15) == 3)
        return REC_DEFER;
    if (rtid != tid || record_end(r, pos) <= start) return REC_OUTSIDE;
    *x = (bam_rec){r, r + n, packed, aux, pos, lseq, lname, ncig, r[14] | r[15] << 8};
    return REC_NEXT;
}

/* One interval of counting_compiled's ChunkWorker.pileup_chunk_core: every record overlapping
 * [start, end) of tid listed (list_reads: mapped primary records starting in it, or all with
 * first) and, if usable and of the haplotype (hp_on: its HP tag equals hp), tallied by c
 * (pu_begin at the first; c->want set by the caller), counts into st. Returns 1 if a read was
 * tallied, 0 if none, PU_DEFER where Python must do the interval (st is then partial). */
int pu_bam_chunk(pu_ctx *c, pu_bam *b, int tid, int64_t start, int64_t end, int first,
                 int hp_on, int64_t hp, int list_reads, pu_stats *st) {
    query(b, tid, start, end);
    hash_clear(&b->names);
    int begun = 0;
    for (;;) {
        bam_rec x;
        int got_record = next_overlapping(b, tid, start, end, &x);
        if (got_record == REC_DEFER) return PU_DEFER;
        if (got_record == REC_END) break;
        if (got_record == REC_OUTSIDE) continue;
        const uint8_t *r = x.r, *rend = x.rend, *packed = x.packed, *aux = x.aux;
        int32_t pos = x.pos, lseq = x.lseq;
        int lname = x.lname, ncig = x.ncig, flag = x.flag;
        const char *name = (const char *)r + 32;
        const uint8_t *v;
        int64_t value = 0;
        int type;
        if (list_reads && !(flag & 0x904) && (first || pos >= start)) {
            int called = 0;
            for (int k = 0; k < 2; k++) {
                type = find_tag(aux, rend, k ? "Ml" : "ML", &v);
                if (type == 'B') called |= le32(v + 1) > 0;
                else if (type == 'Z') called |= v[0] != 0;
                else if (type == 'A') called = 1;
                else if (type) return PU_DEFER;
            }
            type = find_tag(aux, rend, "HP", &v);
            if (type < 0) return PU_DEFER;
            if (!int_tag(type, v, &value)) value = 0;
            char line[400];
            int k = snprintf(line, sizeof line, "%s\t%d\t%d\t%lld\n", name, r[9], called,
                             (long long)value);
            stats_text(st, line, k);
        }
        if (flag & 0xD04 || lseq <= 0) continue;
        if (hp_on) {
            type = find_tag(aux, rend, "HP", &v);
            if (type < 0) return PU_DEFER;
            if (!int_tag(type, v, &value)) value = 0;
            if (value != hp) continue;
        }
        if (!ncig) return PU_DEFER; /* pysam gives no CIGAR string */
        if (!begun) {
            pu_begin(c, start, end - start);
            begun = 1;
        }
        if (hash_add(&b->names, name, lname - 1)) return PU_DEFER;
        pu_stats scratch_stats;
        pu_stats *counted = first || pos >= start ? st : &scratch_stats;
        /* the tags as get_mod_tags reads them */
        const uint8_t *mm = NULL, *ml = NULL;
        const char *why = NULL;
        char reason[160];
        int kind = mod_tags(aux, rend, lseq, &mm, &ml, &why, reason);
        if (kind == PU_DEFER) return PU_DEFER;
        int64_t nops = decode_record(b, r, packed, lseq);
        if (nops < -1) return PU_DEFER;
        int64_t *ops = b->ops, *lens = b->ops + ncig;
        int reverse = (flag & 16) != 0;
        if (kind) {
            add_read_ops(c, reverse, pos, ops, lens, nops, b->seq, lseq, NULL, NULL, 0);
            if (counted == st) stats_skip(st, kind, name, why);
            continue;
        }
        int rc = add_read_ops(c, reverse, pos, ops, lens, nops, b->seq, lseq, (const char *)mm,
                              ml + 5, (int64_t)le32(ml + 1));
        if (rc == SKIP_CODES) return PU_DEFER;
        if (rc) {
            if (counted == st) stats_skip(st, rc, name, c->reason);
            continue;
        }
        if (counted == st) st->used++;
    }
    return begun;
}

/* One sampling interval of thresholds' estimate (_process_records with the core):
 * records overlapping [start, end) of tid, primary and not duplicates, with a sequence
 * (mapped too with only_mapped or the edge filter), each read name once in the interval, until
 * budget (< 0: none) reads gave values; a read's values kept (c->values) if its name was not
 * sampled before (b->seen). Returns the reads that gave values, or -1 where pysam must sample
 * the interval (c->values and b->seen then as before the call). */
int64_t pu_bam_sample(pu_ctx *c, pu_bam *b, int tid, int64_t start, int64_t end, int64_t budget,
                      int only_mapped, int edge_on) {
    int64_t before[4], seen_len = b->seen.len, used = 0;
    for (int k = 0; k < 4; k++) before[k] = c->nvalues[k];
    query(b, tid, start, end);
    names_truncate(&b->local, 0);
    for (;;) {
        bam_rec x;
        int got_record = next_overlapping(b, tid, start, end, &x);
        if (got_record == REC_DEFER) goto defer;
        if (got_record == REC_END) break;
        if (got_record == REC_OUTSIDE) continue;
        const uint8_t *r = x.r, *rend = x.rend, *packed = x.packed, *aux = x.aux;
        int32_t lseq = x.lseq;
        int lname = x.lname, ncig = x.ncig, flag = x.flag;
        if (flag & 0xD00 || lseq <= 0) continue;
        if ((only_mapped || edge_on) && flag & 4) continue;
        if (budget >= 0 && used >= budget) break;
        const char *name = (const char *)r + 32;
        if (name_in(&b->local, name, lname - 1)) continue;
        int keep = !name_in(&b->seen, name, lname - 1);
        const uint8_t *mm = NULL, *ml = NULL;
        const char *why = NULL;
        char reason[160];
        int kind = mod_tags(aux, rend, lseq, &mm, &ml, &why, reason), got = 0;
        if (kind == PU_DEFER) goto defer;
        if (!kind && !((only_mapped || c->sample_in_region) && !ncig)) {
            int64_t nops = decode_record(b, r, packed, lseq), mark[4];
            if (nops < -1) goto defer;
            for (int k = 0; k < 4; k++) mark[k] = c->nvalues[k];
            int aligned_only = only_mapped || c->sample_in_region;
            got = sample_read_ops(c, flag & 16 ? 1 : 0, b->seq, lseq, (const char *)mm, ml + 5,
                                  (int64_t)le32(ml + 1), aligned_only ? b->ops : NULL,
                                  b->ops + ncig, nops, x.pos);
            if (got < 0) goto defer; /* Python's path for this read */
            if (!keep)
                for (int k = 0; k < 4; k++) c->nvalues[k] = mark[k];
        }
        name_add(&b->local, name, lname - 1);
        if (got) used++;
        if (keep) name_add(&b->seen, name, lname - 1);
    }
    return used;
defer:
    for (int k = 0; k < 4; k++) c->nvalues[k] = before[k];
    names_truncate(&b->seen, seen_len);
    return -1;
}

/* The threshold sample's names over all intervals (thresholds' seen, for its pysam
 * path): whether name is in (add: then added); the number of names with name NULL. */
int64_t pu_bam_seen(pu_bam *b, const char *name, int add) {
    if (!name) return b->seen.n;
    int64_t len = (int64_t)strlen(name);
    return add ? name_add(&b->seen, name, len) : name_in(&b->seen, name, len);
}

void pu_stats_free(pu_stats *st) {
    free(st->listing);
    st->listing = NULL;
    st->listing_len = st->listing_cap = 0;
}
