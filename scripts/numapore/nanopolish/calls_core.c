/* numapore's compiled call-table aggregator (cffi; built by calls_core_build.py).
 *
 * One pass over a nanopolish call-methylation table: every row is parsed in place and counted
 * into its group, keyed by (chromosome, start, end, num_motifs, sequence), in an open-addressing
 * hash table. What it counts per group is what group_counts in frequency.py counts with DuckDB:
 * numapore.nanopolish.frequency turns the groups into the same DataFrame. Memory holds the
 * groups (about 90 bytes and a sequence each), never the rows.
 *
 * The modBAM tagger (cc_call_group, cc_tag_read) is calls_modbam.c, compiled after this file
 * into the same module.
 */
#include <errno.h>
#include <libdeflate.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cffi: begin (frequency.py reads these) */
typedef struct {
    int64_t start, end, num_motifs, first_row; /* first_row: -1 when no call is confident */
    uint64_t hash, seq_off;
    uint32_t seq_len, chrom;
    uint32_t valid, methylated, failed, calls, strong, strong_unmethylated;
} cc_group;

typedef struct {
    cc_group *groups;
    int64_t ngroups;
    char *pool; /* the groups' sequences, one after another in group order */
    uint64_t pool_len;
    char **chroms; /* chromosome names by number, in first-seen order */
    int nchroms;
    int64_t rows;
    int64_t error_row; /* the data row (1-based) an error is about, 0 if none */
    char reason[256];
    /* private */
    uint32_t *slots;
    uint64_t nslots, groups_cap, pool_cap;
    int chroms_cap, last_chrom;
} cc_table;

typedef struct {
    /* in: one alignment record of the read, its SEQ and CIGAR as they are in the BAM */
    const char *chrom, *seq;
    const uint32_t *cigar; /* (operation, length) pairs, pysam's operation codes */
    int64_t chrom_len, seq_len, ncigar, ref_start;
    int reverse;
    /* out: whether it gets MM/ML, its sites, its MM skips and ML bytes in the tagger's buffers */
    int tagged;
    int64_t nsites, mm_off, mm_len, ml_off;
    /* private */
    int64_t scratch_off, blocks_off, nblocks, last_block;
    int on_call; /* on the contig and strand of the call being placed */
} cc_record;

/* what cc_call_group returns, and what is wrong with a bad line (cc_tagger.error) */
enum { CC_GROUP = 0, CC_MORE = 1, CC_END = 2 };
enum { CC_BAD_FIELDS = 1, CC_BAD_START = 2, CC_BAD_LLR = 3, CC_NO_MEMORY = 4, CC_BAD_CIGAR = 5 };

typedef struct {
    /* the motif: its literals (one length), the modified base's offset from the call's start
     * and the base SEQ carries there, per strand (0 forward, 1 reverse) */
    const char *const *literals;
    int nlit, lit_len, offset[2];
    char base[2];
    /* the call table's columns */
    int ncols, col_chrom, col_strand, col_start, col_llr, col_seq, col_name;
    /* sites left out, summed over reads */
    int64_t sites_unaligned, sites_other_base;
    /* the last read's MM skips (",n" each) and ML bytes, all its records one after another */
    char *mm;
    uint8_t *ml;
    /* a bad line: where it is (in the bytes given), its fields, what is wrong (CC_BAD_...) */
    int64_t error_at, error_len, error_fields;
    int error;
    /* private */
    int64_t mm_cap, ml_cap, scratch_cap, blocks_cap;
    int16_t *scratch;
    int64_t *blocks;
    const char **fields;
} cc_tagger;
/* cffi: end */

#define READ_BLOCK (8u << 20)

static uint64_t mix(uint64_t h) {
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

static uint64_t bytes_hash(const char *s, size_t n, uint64_t h) {
    uint64_t w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    w = 0;
    memcpy(&w, s, n);
    return mix(h ^ w ^ ((uint64_t)n << 56));
}

static int fail(cc_table *t, int64_t row, const char *what) {
    t->error_row = row;
    snprintf(t->reason, sizeof t->reason, "%s", what);
    return -1;
}

/* A whole field as a decimal integer; 0 on success. */
static int parse_int(const char *s, const char *e, int64_t *out) {
    int neg = 0;
    uint64_t v = 0;
    if (s < e && (*s == '-' || *s == '+')) neg = *s++ == '-';
    if (s == e || e - s > 18) return -1;
    for (; s < e; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A whole field as a double, correctly rounded (as Python's float() and strtod): plain decimals
 * with a mantissa below 2^53 are one exact division (Clinger's fast path), the rest strtod. */
static int parse_double(const char *s, const char *e, double *out) {
    const char *p = s;
    int neg = 0, frac = 0, digits = 0;
    uint64_t m = 0;
    if (p < e && (*p == '-' || *p == '+')) neg = *p++ == '-';
    for (; p < e && *p >= '0' && *p <= '9'; p++, digits++) m = m * 10 + (uint64_t)(*p - '0');
    if (p < e && *p == '.')
        for (p++; p < e && *p >= '0' && *p <= '9'; p++, digits++, frac++)
            m = m * 10 + (uint64_t)(*p - '0');
    if (p == e && digits > 0 && digits <= 15 && frac <= 22) {
        double v = (double)m / POW10[frac];
        *out = neg ? -v : v;
        return 0;
    }
    char buf[64];
    if (e - s == 0 || e - s >= (long)sizeof buf) return -1;
    memcpy(buf, s, (size_t)(e - s));
    buf[e - s] = 0;
    char *end;
    errno = 0;
    *out = strtod(buf, &end);
    return (*end == 0) ? 0 : -1;
}

static int chrom_number(cc_table *t, const char *s, size_t n, uint32_t *out) {
    /* few chromosomes, and the same one row after row: the last one first, then a scan */
    int last = t->last_chrom;
    if (last < t->nchroms && strlen(t->chroms[last]) == n && memcmp(t->chroms[last], s, n) == 0) {
        *out = (uint32_t)last;
        return 0;
    }
    for (int i = 0; i < t->nchroms; i++)
        if (strlen(t->chroms[i]) == n && memcmp(t->chroms[i], s, n) == 0) {
            *out = (uint32_t)(t->last_chrom = i);
            return 0;
        }
    if (t->nchroms == t->chroms_cap) {
        int cap = t->chroms_cap ? 2 * t->chroms_cap : 64;
        char **grown = realloc(t->chroms, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        t->chroms = grown;
        t->chroms_cap = cap;
    }
    char *name = malloc(n + 1);
    if (!name) return -1;
    memcpy(name, s, n);
    name[n] = 0;
    t->chroms[t->nchroms] = name;
    *out = (uint32_t)(t->last_chrom = t->nchroms++);
    return 0;
}

static int grow_slots(cc_table *t) {
    uint64_t n = t->nslots ? 2 * t->nslots : (1u << 16);
    uint32_t *slots = calloc(n, sizeof *slots);
    if (!slots) return -1;
    for (int64_t g = 0; g < t->ngroups; g++) {
        uint64_t i = t->groups[g].hash & (n - 1);
        while (slots[i]) i = (i + 1) & (n - 1);
        slots[i] = (uint32_t)(g + 1);
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return 0;
}

/* The group of a row's key, added (counts zero) if new; NULL when out of memory. */
static cc_group *group_of(cc_table *t, uint32_t chrom, int64_t start, int64_t end,
                          int64_t num_motifs, const char *seq, size_t seq_len, uint64_t h) {
    uint64_t mask = t->nslots - 1, i = h & mask;
    for (uint32_t s; (s = t->slots[i]); i = (i + 1) & mask) {
        cc_group *g = &t->groups[s - 1];
        if (g->hash == h && g->start == start && g->end == end && g->chrom == chrom &&
            g->num_motifs == num_motifs && g->seq_len == seq_len &&
            memcmp(t->pool + g->seq_off, seq, seq_len) == 0)
            return g;
    }
    if ((uint64_t)t->ngroups == t->groups_cap) {
        uint64_t cap = t->groups_cap ? 2 * t->groups_cap : (1u << 15);
        cc_group *grown = realloc(t->groups, cap * sizeof *grown);
        if (!grown || cap >= 0xffffffffu) return NULL;
        t->groups = grown;
        t->groups_cap = cap;
    }
    if (t->pool_len + seq_len > t->pool_cap) {
        uint64_t cap = t->pool_cap ? 2 * t->pool_cap : (1u << 20);
        while (cap < t->pool_len + seq_len) cap *= 2;
        char *grown = realloc(t->pool, cap);
        if (!grown) return NULL;
        t->pool = grown;
        t->pool_cap = cap;
    }
    cc_group *g = &t->groups[t->ngroups];
    memset(g, 0, sizeof *g);
    g->start = start;
    g->end = end;
    g->num_motifs = num_motifs;
    g->first_row = -1;
    g->hash = h;
    g->chrom = chrom;
    g->seq_off = t->pool_len;
    g->seq_len = (uint32_t)seq_len;
    memcpy(t->pool + t->pool_len, seq, seq_len);
    t->pool_len += seq_len;
    t->slots[i] = (uint32_t)(++t->ngroups);
    if ((uint64_t)t->ngroups * 2 > t->nslots && grow_slots(t)) return NULL;
    return &t->groups[t->ngroups - 1];
}

enum { F_CHROM, F_START, F_END, F_LLR, F_MOTIFS, F_SEQ, NFIELDS };

typedef struct {
    const char *seq;
    size_t seq_len;
    int64_t start, end, num_motifs;
    double llr;
    uint64_t hash;
    uint32_t chrom;
} cc_row;

static uint64_t key_hash(const cc_row *r) {
    uint64_t h = mix((uint64_t)r->start * 0x9e3779b97f4a7c15ULL ^ (uint64_t)r->end ^
                     ((uint64_t)r->chrom << 48) ^ ((uint64_t)r->num_motifs << 40));
    return bytes_hash(r->seq, r->seq_len, h);
}

/* One data row (no line end) parsed into r; 0, or -1 with t->reason set. */
static int parse_row(cc_table *t, const char *s, const char *e, const int *where, int ncols,
                     int64_t row, cc_row *r) {
    const char *field[NFIELDS], *fend[NFIELDS];
    int col = 0;
    for (const char *p = s;; col++) {
        const char *tab = memchr(p, '\t', (size_t)(e - p));
        const char *stop = tab ? tab : e;
        if (col < ncols && where[col] >= 0) {
            field[where[col]] = p;
            fend[where[col]] = stop;
        }
        if (!tab) break;
        p = tab + 1;
    }
    if (col + 1 != ncols) {
        char what[96];
        snprintf(what, sizeof what, "%d fields where the header has %d", col + 1, ncols);
        return fail(t, row, what);
    }
    if (parse_int(field[F_START], fend[F_START], &r->start) ||
        parse_int(field[F_END], fend[F_END], &r->end))
        return fail(t, row, "start or end is not an integer");
    if (parse_int(field[F_MOTIFS], fend[F_MOTIFS], &r->num_motifs))
        return fail(t, row, "num_motifs is not an integer");
    if (parse_double(field[F_LLR], fend[F_LLR], &r->llr))
        return fail(t, row, "log_lik_ratio is not a number");
    if (chrom_number(t, field[F_CHROM], (size_t)(fend[F_CHROM] - field[F_CHROM]), &r->chrom))
        return fail(t, row, "out of memory");
    r->seq = field[F_SEQ];
    r->seq_len = (size_t)(fend[F_SEQ] - field[F_SEQ]);
    r->hash = key_hash(r);
    return 0;
}

/* Count a parsed row into its group; 0, or -1 (out of memory). */
static int count_row(cc_table *t, const cc_row *r, double threshold) {
    cc_group *g = group_of(t, r->chrom, r->start, r->end, r->num_motifs, r->seq, r->seq_len,
                           r->hash);
    if (!g) return fail(t, t->rows + 1, "out of memory");
    /* nanopolish's script: a call counts when |llr| >= threshold x num_motifs (in doubles) */
    double size = fabs(r->llr);
    if (size >= threshold * (double)r->num_motifs) {
        g->valid++;
        g->methylated += r->llr > 0;
        if (g->first_row < 0) g->first_row = t->rows;
    } else {
        g->failed++;
    }
    g->calls++;
    if (size >= threshold) {
        g->strong++;
        g->strong_unmethylated += r->llr <= 0;
    }
    t->rows++;
    return 0;
}

#define BATCH 16

/* Count a batch of parsed rows, in order. The table is far larger than the caches: the slots,
 * groups and sequences the batch needs are prefetched a stage at a time, so their memory
 * latencies overlap instead of adding up row after row. */
static int count_batch(cc_table *t, const cc_row *rows, int n, double threshold) {
    uint64_t mask = t->nslots - 1;
    for (int i = 0; i < n; i++) __builtin_prefetch(&t->slots[rows[i].hash & mask]);
    for (int i = 0; i < n; i++) {
        uint32_t s = t->slots[rows[i].hash & mask];
        if (s) __builtin_prefetch(&t->groups[s - 1]);
    }
    for (int i = 0; i < n; i++) {
        uint32_t s = t->slots[rows[i].hash & mask];
        if (s) __builtin_prefetch(t->pool + t->groups[s - 1].seq_off);
    }
    for (int i = 0; i < n; i++)
        if (count_row(t, &rows[i], threshold)) return -1;
    return 0;
}

/* Aggregate the call table at path (its header line skipped): where[i] is what column i is
 * (F_CHROM ... F_SEQ, or -1 for a column not needed), ncols the header's column count.
 * Returns 0, or -1 with error_row and reason set; cc_free releases the table either way. */
int cc_aggregate(cc_table *t, const char *path, const int *where, int ncols, double threshold) {
    memset(t, 0, sizeof *t);
    if (grow_slots(t)) return fail(t, 0, "out of memory");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fail(t, 0, strerror(errno));
    char *buf = malloc(READ_BLOCK + 1);
    if (!buf) {
        close(fd);
        return fail(t, 0, "out of memory");
    }
    size_t have = 0;
    int header = 1, status = 0, pending = 0;
    cc_row batch[BATCH];
    for (;;) {
        ssize_t got = read(fd, buf + have, READ_BLOCK - have);
        if (got < 0) {
            status = fail(t, t->rows + 1, strerror(errno));
            break;
        }
        have += (size_t)got;
        int last = got == 0;
        char *p = buf, *end = buf + have;
        for (;;) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            if (!nl) {
                if (!last || p == end) break;
                nl = end; /* the last line has no line end */
            }
            char *stop = (nl > p && nl[-1] == '\r') ? nl - 1 : nl;
            if (header) {
                header = 0;
            } else if (stop > p) {
                if (parse_row(t, p, stop, where, ncols, t->rows + pending + 1, &batch[pending])) {
                    status = -1;
                    break;
                }
                if (++pending == BATCH) {
                    status = count_batch(t, batch, pending, threshold);
                    pending = 0;
                    if (status) break;
                }
            }
            p = nl + (nl < end);
        }
        /* the batch points into buf: counted before buf moves */
        if (!status && pending) status = count_batch(t, batch, pending, threshold);
        pending = 0;
        if (status || last) break;
        have = (size_t)(end - p);
        if (have == READ_BLOCK) {
            status = fail(t, t->rows + 1, "a line longer than 8 MiB");
            break;
        }
        memmove(buf, p, have);
    }
    free(buf);
    close(fd);
    free(t->slots); /* only lookups need them */
    t->slots = NULL;
    t->nslots = 0;
    return status;
}

void cc_free(cc_table *t) {
    free(t->groups);
    free(t->pool);
    free(t->slots);
    for (int i = 0; i < t->nchroms; i++) free(t->chroms[i]);
    free(t->chroms);
    memset(t, 0, sizeof *t);
}

/* v as decimal text at p (the MM tag's counts); the position after it. */
static char *put_int(char *p, int64_t v) {
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)(-v) : (uint64_t)v;
    if (v < 0) *p++ = '-';
    do tmp[n++] = (char)('0' + u % 10); while (u /= 10);
    while (n) *p++ = tmp[--n];
    return p;
}

#define BGZF_HEADER 18
#define BGZF_FOOTER 8

/* One BGZF block of in[0..n) (n <= 65280) into out (65536 bytes): deflate at level, BGZF's
 * gzip header and footer; its size. The compressor is the calling thread's own. */
size_t cc_bgzf_block(const unsigned char *in, size_t n, unsigned char *out, int level) {
    static __thread struct libdeflate_compressor *comp[13];
    if (!comp[level] && !(comp[level] = libdeflate_alloc_compressor(level))) return 0;
    size_t size = libdeflate_deflate_compress(comp[level], in, n, out + BGZF_HEADER,
                                              65536 - BGZF_HEADER - BGZF_FOOTER);
    if (size == 0) { /* incompressible: stored */
        if (!comp[0] && !(comp[0] = libdeflate_alloc_compressor(0))) return 0;
        size = libdeflate_deflate_compress(comp[0], in, n, out + BGZF_HEADER,
                                           65536 - BGZF_HEADER - BGZF_FOOTER);
        if (size == 0) return 0;
    }
    static const unsigned char header[16] = {31, 139, 8, 4, 0, 0, 0, 0, 0, 255, 6, 0, 66, 67, 2, 0};
    size_t total = BGZF_HEADER + size + BGZF_FOOTER;
    memcpy(out, header, 16);
    out[16] = (unsigned char)((total - 1) & 0xff);
    out[17] = (unsigned char)((total - 1) >> 8);
    uint32_t crc = libdeflate_crc32(0, in, n);
    unsigned char *f = out + BGZF_HEADER + size;
    for (int i = 0; i < 4; i++) {
        f[i] = (unsigned char)(crc >> (8 * i));
        f[4 + i] = (unsigned char)((uint32_t)n >> (8 * i));
    }
    return total;
}
