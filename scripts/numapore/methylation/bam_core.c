/* A BAM reader for the pileup core (compiled with pileup_core.c into one cffi module).
 *
 * An interval's records are read here instead of through pysam: BGZF blocks inflated with
 * libdeflate (as samtools and modkit do; pysam's htslib inflates with zlib), each block's
 * CRC32 checked, an interval's stretches of the file found in the BAM index (BAI) and its
 * records overlapping [start, end) taken in file order as htslib's iterator takes them
 * (hts_itr_query, hts_itr_next, bam_endpos), and each usable one tallied by pileup_core.c's
 * add_read_ops. What pileup_counting.py's pysam loop does per record is done the same way
 * here: the read listing, the haplotype filter, MM/Mm, ML/Ml and MN as get_mod_tags reads
 * them, the skip counts and their first example. Anything else (a repeated read name, a tag
 * of an unexpected type, a CIGAR kept in the CG tag, a malformed record) returns PU_DEFER,
 * and Python does the interval through pysam: the same bytes either way.
 */
#include <fcntl.h>
#include <libdeflate.h>
#include <unistd.h>

/* cffi: begin */
#define PU_DEFER 7
#define PU_NKINDS 10

/* an interval's counts, as pileup_counting.Stats holds them */
typedef struct {
    int64_t used;
    int64_t skipped[PU_NKINDS];            /* per kind: pileup_core's SKIP_*, 8 ml, 9 mn */
    int order[PU_NKINDS];                  /* kinds in the order they first appeared */
    int norder;
    char example_name[PU_NKINDS][256];     /* each kind's first read and reason */
    char example_reason[PU_NKINDS][160];
    char *listing;                         /* the read listing's lines (malloc'd) */
    int64_t listing_len, listing_cap;
} pu_stats;

typedef struct pu_bam pu_bam;
/* cffi: end */

#define KIND_ML 8
#define KIND_MN 9

/* a set of read names: an open-addressing table of offsets into an arena of the names */
typedef struct {
    char *arena;
    int64_t len, cap;
    int64_t *slots;
    int64_t nslots, n;
} nameset;

struct pu_bam {
    int fd;
    struct libdeflate_decompressor *inflater;
    uint8_t cdata[65536];
    uint8_t udata[65536];
    int64_t block_addr, next_addr; /* the block in udata (-1: none), the one after it */
    int ulen, upos;
    int32_t nref;
    int32_t *nintv;   /* per reference: the linear index */
    uint64_t **intv;
    int32_t *nbins;   /* per reference: its bins (ascending) and their chunks (u, v pairs) */
    uint32_t **bins;
    int64_t **bin_at; /* per bin: where its chunks start in chunks[], and one past the last */
    uint64_t **chunks;
    uint8_t *rec;
    int64_t rec_cap;
    char *seq;
    int64_t seq_cap;
    int64_t *ops;
    int64_t ops_cap;
    /* read names: the interval's; the threshold sample's, in one interval and in all */
    nameset names, local, seen;
    /* query()'s stretches, the one being read, and whether it was sought (0) or not (-1) */
    uint64_t *iter;
    int64_t niter, iter_cap, iter_i, iter_pos;
};

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

static int full_pread(int fd, uint8_t *buf, int64_t n, int64_t at) {
    int64_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, buf + got, n - got, at + got);
        if (k < 0) return -1;
        if (k == 0) break;
        got += k;
    }
    return (int)got;
}

/* the BGZF block at addr into udata; 0, 1 at the end of the file, -1 if it is not BGZF */
static int load_block(pu_bam *b, int64_t addr) {
    uint8_t *h = b->cdata;
    b->block_addr = -1; /* until the block is in */
    int got = full_pread(b->fd, h, 18, addr);
    if (got == 0) return 1;
    if (got != 18 || h[0] != 31 || h[1] != 139 || h[2] != 8 || !(h[3] & 4) || le32(h + 10) != 0x43420006u)
        return -1;
    /* XLEN 6 holding only the BC subfield: BSIZE is the block size - 1 */
    int bsize = (h[16] | h[17] << 8) + 1;
    if (bsize < 26 || full_pread(b->fd, h + 18, bsize - 18, addr + 18) != bsize - 18) return -1;
    uint32_t crc = le32(h + bsize - 8), isize = le32(h + bsize - 4);
    size_t out = 0;
    if (isize > 65536 || libdeflate_deflate_decompress(b->inflater, h + 18, bsize - 26, b->udata,
                                                       isize, &out) != LIBDEFLATE_SUCCESS ||
        out != isize || libdeflate_crc32(0, b->udata, isize) != crc)
        return -1;
    b->block_addr = addr;
    b->next_addr = addr + bsize;
    b->ulen = (int)isize;
    b->upos = 0;
    return 0;
}

/* n bytes of the stream into dst: 0, 1 at the end of the file (nothing read), -1 otherwise */
static int read_bytes(pu_bam *b, uint8_t *dst, int64_t n) {
    int64_t done = 0;
    while (done < n) {
        if (b->upos >= b->ulen) {
            int rc = load_block(b, b->next_addr);
            if (rc) return rc == 1 && done == 0 ? 1 : -1;
            continue;
        }
        int64_t k = b->ulen - b->upos < n - done ? b->ulen - b->upos : n - done;
        memcpy(dst + done, b->udata + b->upos, k);
        b->upos += (int)k;
        done += k;
    }
    return 0;
}

static int seek_virtual(pu_bam *b, uint64_t voff) {
    int64_t addr = (int64_t)(voff >> 16);
    if (addr != b->block_addr && load_block(b, addr)) return -1;
    b->upos = (int)(voff & 0xffff);
    return b->upos <= b->ulen ? 0 : -1;
}

static uint8_t *read_file(const char *path, int64_t *size) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    off_t end = lseek(fd, 0, SEEK_END);
    uint8_t *data = end > 0 ? malloc(end) : NULL;
    if (data && full_pread(fd, data, end, 0) != end) {
        free(data);
        data = NULL;
    }
    close(fd);
    *size = end;
    return data;
}

static int bin_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* the BAI: per reference its bins with their chunks, and its linear index */
static int load_index(pu_bam *b, const char *path) {
    int64_t size = 0, at = 8;
    uint8_t *d = read_file(path, &size);
    if (!d || size < 8 || memcmp(d, "BAI\1", 4) || (int32_t)le32(d + 4) != b->nref) {
        free(d);
        return -1;
    }
    int32_t n1 = b->nref + 1;
    b->nintv = calloc(n1, sizeof(int32_t));
    b->intv = calloc(n1, sizeof(uint64_t *));
    b->nbins = calloc(n1, sizeof(int32_t));
    b->bins = calloc(n1, sizeof(uint32_t *));
    b->bin_at = calloc(n1, sizeof(int64_t *));
    b->chunks = calloc(n1, sizeof(uint64_t *));
    for (int32_t r = 0; r < b->nref; r++) {
        if (at + 4 > size) goto bad;
        int32_t nbin = (int32_t)le32(d + at);
        at += 4;
        if (nbin < 0) goto bad;
        /* two passes: sizes, then the (bin, first chunk) pairs sorted by bin */
        int64_t start = at, total = 0;
        for (int32_t i = 0; i < nbin; i++) {
            if (at + 8 > size) goto bad;
            int32_t nchunk = (int32_t)le32(d + at + 4);
            if (nchunk < 0 || at + 8 + 16 * (int64_t)nchunk > size) goto bad;
            total += nchunk;
            at += 8 + 16 * (int64_t)nchunk;
        }
        uint32_t *pairs = malloc((2 * (int64_t)nbin + 1) * sizeof(uint32_t) * 2);
        int64_t *offs = malloc((nbin + 1) * sizeof(int64_t));
        at = start;
        for (int32_t i = 0; i < nbin; i++) {
            pairs[2 * i] = le32(d + at);
            pairs[2 * i + 1] = (uint32_t)i;
            offs[i] = at;
            at += 8 + 16 * (int64_t)le32(d + at + 4);
        }
        qsort(pairs, nbin, 2 * sizeof(uint32_t), bin_cmp);
        b->nbins[r] = nbin;
        b->bins[r] = malloc((nbin + 1) * sizeof(uint32_t));
        b->bin_at[r] = malloc((nbin + 1) * sizeof(int64_t));
        b->chunks[r] = malloc((2 * total + 1) * sizeof(uint64_t));
        int64_t k = 0;
        for (int32_t i = 0; i < nbin; i++) {
            int64_t o = offs[pairs[2 * i + 1]];
            int32_t nchunk = (int32_t)le32(d + o + 4);
            b->bins[r][i] = pairs[2 * i];
            b->bin_at[r][i] = k;
            for (int32_t j = 0; j < nchunk; j++) {
                b->chunks[r][2 * k] = le64(d + o + 8 + 16 * j);
                b->chunks[r][2 * k + 1] = le64(d + o + 16 + 16 * j);
                k++;
            }
        }
        b->bin_at[r][nbin] = k;
        free(pairs);
        free(offs);
        if (at + 4 > size) goto bad;
        int32_t n = (int32_t)le32(d + at);
        at += 4;
        if (n < 0 || at + 8 * (int64_t)n > size) goto bad;
        b->nintv[r] = n;
        b->intv[r] = malloc((n + 1) * sizeof(uint64_t));
        for (int32_t i = 0; i < n; i++) b->intv[r][i] = le64(d + at + 8 * i);
        at += 8 * (int64_t)n;
    }
    free(d);
    return 0;
bad:
    free(d);
    return -1;
}

void pu_bam_close(pu_bam *b) {
    if (!b) return;
    if (b->fd >= 0) close(b->fd);
    if (b->inflater) libdeflate_free_decompressor(b->inflater);
    for (int32_t r = 0; b->intv && r < b->nref; r++) {
        free(b->intv[r]);
        free(b->bins[r]);
        free(b->bin_at[r]);
        free(b->chunks[r]);
    }
    free(b->intv);
    free(b->nintv);
    free(b->nbins);
    free(b->bins);
    free(b->bin_at);
    free(b->chunks);
    free(b->rec);
    free(b->seq);
    free(b->ops);
    nameset *sets[3] = {&b->names, &b->local, &b->seen};
    for (int i = 0; i < 3; i++) {
        free(sets[i]->arena);
        free(sets[i]->slots);
    }
    free(b->iter);
    free(b);
}

/* the BAM (its header read) and its BAI index; NULL if either cannot be read here */
pu_bam *pu_bam_open(const char *path, const char *index_path) {
    pu_bam *b = calloc(1, sizeof *b);
    uint8_t head[12];
    b->fd = open(path, O_RDONLY);
    b->inflater = libdeflate_alloc_decompressor();
    b->block_addr = -1;
    if (b->fd < 0 || !b->inflater || load_block(b, 0) || read_bytes(b, head, 8) ||
        memcmp(head, "BAM\1", 4))
        goto bad;
    /* the header text, then the references */
    for (int64_t skip = le32(head + 4); skip > 0;) {
        int64_t k = skip < 8 ? skip : 8;
        if (read_bytes(b, head, k)) goto bad;
        skip -= k;
    }
    if (read_bytes(b, head, 4)) goto bad;
    b->nref = (int32_t)le32(head);
    for (int32_t r = 0; r < b->nref; r++) {
        if (read_bytes(b, head, 4)) goto bad;
        for (int64_t skip = le32(head) + 4; skip > 0;) {
            int64_t k = skip < 8 ? skip : 8;
            if (read_bytes(b, head, k)) goto bad;
            skip -= k;
        }
    }
    if (load_index(b, index_path)) goto bad;
    return b;
bad:
    pu_bam_close(b);
    return NULL;
}

/* the next record into b->rec: its length, 0 at the end of the file, -1 if malformed */
static int64_t next_record(pu_bam *b) {
    uint8_t len4[4];
    int rc = read_bytes(b, len4, 4);
    if (rc) return rc == 1 ? 0 : -1;
    int64_t n = le32(len4);
    if (n < 32) return -1;
    if (n > b->rec_cap) {
        b->rec_cap = n + n / 2;
        b->rec = grow(b->rec, b->rec_cap);
    }
    return read_bytes(b, b->rec, n) ? -1 : n;
}

static int off_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The stretches of the file that hold the records overlapping [start, end) of reference tid,
 * as hts_itr_query finds them: the chunks of the bins overlapping it that end after the
 * linear index's bound (records before it end before start), sorted and merged, into
 * b->iter (b->niter (u, v) pairs); next_in_region reads them. */
static void query(pu_bam *b, int tid, int64_t start, int64_t end) {
    b->niter = b->iter_i = 0;
    b->iter_pos = -1;
    int64_t w = start >> 14, n = tid >= 0 && tid < b->nref ? b->nintv[tid] : 0;
    /* no record reaches a window past the linear index's last (an index writer sets every
     * window a record overlaps: hts_idx_push), so none overlaps [start, end) */
    if (w >= n || end <= start) return;
    uint64_t min_off = 0;
    for (; w >= 0 && !min_off; w--) min_off = b->intv[tid][w];
    /* the bins overlapping [start, end): reg2bins of the SAM specification */
    int64_t last = end - 1;
    static const int first_bin[6] = {0, 1, 9, 73, 585, 4681};
    static const int shift[6] = {29, 26, 23, 20, 17, 14};
    for (int level = 0; level < 6; level++) {
        uint32_t lo = first_bin[level] + (uint32_t)(start >> shift[level]);
        uint32_t hi = first_bin[level] + (uint32_t)(last >> shift[level]);
        int32_t a = 0, z = b->nbins[tid];
        while (a < z) { /* the first bin >= lo */
            int32_t m = (a + z) / 2;
            if (b->bins[tid][m] < lo) a = m + 1;
            else z = m;
        }
        for (; a < b->nbins[tid] && b->bins[tid][a] <= hi; a++)
            for (int64_t k = b->bin_at[tid][a]; k < b->bin_at[tid][a + 1]; k++) {
                uint64_t u = b->chunks[tid][2 * k], v = b->chunks[tid][2 * k + 1];
                if (v <= min_off) continue;
                if (2 * (b->niter + 1) > b->iter_cap) {
                    b->iter_cap = 2 * (b->niter + 1) * 2 + 64;
                    b->iter = grow(b->iter, b->iter_cap * sizeof(uint64_t));
                }
                b->iter[2 * b->niter] = u;
                b->iter[2 * b->niter + 1] = v;
                b->niter++;
            }
    }
    qsort(b->iter, b->niter, 2 * sizeof(uint64_t), off_cmp);
    int64_t m = 0;
    for (int64_t i = 0; i < b->niter; i++) {
        if (m && b->iter[2 * m - 1] >= b->iter[2 * i]) {
            if (b->iter[2 * i + 1] > b->iter[2 * m - 1]) b->iter[2 * m - 1] = b->iter[2 * i + 1];
            continue;
        }
        b->iter[2 * m] = b->iter[2 * i];
        b->iter[2 * m + 1] = b->iter[2 * i + 1];
        m++;
    }
    b->niter = m;
}

/* the stream's virtual offset (at a block's end: the next block's start, as htslib's) */
static uint64_t tell_virtual(const pu_bam *b) {
    if (b->upos >= b->ulen) return (uint64_t)b->next_addr << 16;
    return (uint64_t)b->block_addr << 16 | (uint64_t)b->upos;
}

/* the next record of query()'s stretches into b->rec: its length, 0 after the last, -1 if
 * the file cannot be read here */
static int64_t next_in_region(pu_bam *b) {
    for (;;) {
        if (b->iter_i >= b->niter) return 0;
        if (b->iter_pos < 0) {
            if (seek_virtual(b, b->iter[2 * b->iter_i])) return -1;
            b->iter_pos = 0;
        }
        if (tell_virtual(b) >= b->iter[2 * b->iter_i + 1]) {
            b->iter_i++;
            b->iter_pos = -1;
            continue;
        }
        int64_t n = next_record(b);
        return n == 0 ? -1 : n; /* the index promised a record there */
    }
}

/* a record's end on the reference (htslib's bam_endpos); -1 for a CIGAR op it does not know */
static int64_t record_end(const uint8_t *r, int64_t pos) {
    int ncig = r[12] | r[13] << 8;
    const uint8_t *cig = r + 32 + r[8];
    int64_t rlen = 0;
    if (!((r[14] | r[15] << 8) & 4))
        for (int i = 0; i < ncig; i++) {
            uint32_t v = le32(cig + 4 * i);
            int op = v & 15;
            if (op == 0 || op == 2 || op == 3 || op == 7 || op == 8) rlen += v >> 4;
        }
    return pos + (rlen ? rlen : 1);
}

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
static int64_t decode_record(pu_bam *b, const uint8_t *r, const uint8_t *packed, int32_t lseq) {
    static const char SEQ_CODES[] = "=ACMGRSVTWYHKDBN";
    int ncig = r[12] | r[13] << 8;
    const uint8_t *cig = r + 32 + r[8];
    if (lseq + 1 > b->seq_cap) {
        b->seq_cap = lseq + lseq / 2 + 64;
        b->seq = grow(b->seq, b->seq_cap);
    }
    for (int32_t i = 0; i < lseq; i++)
        b->seq[i] = SEQ_CODES[(packed[i >> 1] >> ((~i & 1) << 2)) & 15];
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

/* One interval of pileup_counting's ChunkWorker.pileup_chunk_core: every record overlapping
 * [start, end) of tid listed (list_reads: mapped primary records starting in it, or all with
 * first) and, if usable and of the haplotype (hp_on: its HP tag equals hp), tallied by c
 * (pu_begin at the first; c->want set by the caller), counts into st. Returns 1 if a read was
 * tallied, 0 if none, PU_DEFER where Python must do the interval (st is then partial). */
int pu_bam_chunk(pu_ctx *c, pu_bam *b, int tid, int64_t start, int64_t end, int first,
                 int hp_on, int64_t hp, int list_reads, pu_stats *st) {
    query(b, tid, start, end);
    names_truncate(&b->names, 0);
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
        if (name_add(&b->names, name, lname - 1)) return PU_DEFER;
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

/* One sampling interval of pileup_thresholds' estimate (_process_records with the core):
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
        if (!kind && !(only_mapped && !ncig)) {
            int64_t nops = decode_record(b, r, packed, lseq), mark[4];
            if (nops < -1) goto defer;
            for (int k = 0; k < 4; k++) mark[k] = c->nvalues[k];
            got = sample_read_ops(c, flag & 16 ? 1 : 0, b->seq, lseq, (const char *)mm, ml + 5,
                                  (int64_t)le32(ml + 1), only_mapped ? b->ops : NULL,
                                  b->ops + ncig, nops);
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

/* The threshold sample's names over all intervals (pileup_thresholds' seen, for its pysam
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
