/* A BAM reader for the pileup core (compiled with core.c into one cffi module): the
 * file, its BGZF blocks, its index and an interval's records in file order; what is done with
 * each record is in bam_records.c, compiled after this file.
 *
 * An interval's records are read here instead of through pysam: BGZF blocks inflated with
 * libdeflate (as samtools and modkit do; pysam's htslib inflates with zlib), each block's
 * CRC32 checked, an interval's stretches of the file found in the BAM index (BAI) and its
 * records overlapping [start, end) taken in file order as htslib's iterator takes them
 * (hts_itr_query, hts_itr_next, bam_endpos), and each usable one tallied by tally.c's
 * add_read_ops. What counting_compiled.py's pysam loop does per record is done the same way
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

/* an interval's counts, as counting_compiled.Stats holds them */
typedef struct {
    int64_t used;
    int64_t skipped[PU_NKINDS];            /* per kind: core.c's SKIP_*, 8 ml, 9 mn */
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

/* A set of read names kept as their 64-bit hashes (open addressing, 0 empty): the pileup's
 * test for a name seen twice in an interval, which sends the interval to Python (whose names
 * decide): a collision costs time, never bytes, and a deep interval's names are not kept
 * (tens of thousands of them were a tenth of a small pileup's memory). */
typedef struct {
    uint64_t *slots;
    int64_t nslots, n;
} hashset;

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
    /* read names: the interval's, as hashes (hashset); the threshold sample's, in one
     * interval and in all */
    hashset names;
    nameset local, seen;
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
    nameset *sets[2] = {&b->local, &b->seen};
    for (int i = 0; i < 2; i++) {
        free(sets[i]->arena);
        free(sets[i]->slots);
    }
    free(b->names.slots);
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
