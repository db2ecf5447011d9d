/* numapore's compiled FAST5 reader and BLOW5 record encoder (built by fast5_core_build.py).
 *
 * One call (np5_read_file) opens a FAST5 file, walks its read groups the way
 * numapore.signal.fast5.read_fast5 does (groups in byte order, Analyses and PreviousReadInfo
 * skipped, attributes in HDF5 native order), routes every attribute to a primary field, an aux
 * column or the run's header with the same rules, reads the raw signal, and then either encodes
 * the BLOW5 records (output columns and every read's run known) or leaves the decoded reads for
 * Python. It handles the common case only: anything unusual (a type or value it does not
 * convert exactly like the Python reader, a missing field, a name or value SLOW5 cannot hold,
 * an unreadable file) returns NP5_FALLBACK with a reason, and Python reads that file with h5py,
 * so refusals and messages stay those of the Python reader.
 *
 * Gzip'd signal chunks are read raw (H5Dread_chunk) and inflated with libdeflate (the same
 * samples as HDF5's zlib filter, faster); other filters (VBZ through its registered plugin)
 * go through H5Dread. The svb-zd encoder (svbzd_encode) is prepended by the build. A file up
 * to a size bound is read whole into memory first (open_file: few large requests on slow
 * storage rather than a few small ones per object).
 *
 * A second call (np5_layout) gives numapore.signal.fast5.read_layout's answer for the census
 * (each read's id and whether it has a non-empty Signal, from the layout alone) under the same
 * rule: the usual single- and multi-read layouts here, anything else NP5_FALLBACK.
 */
#include <dlfcn.h>
#include <hdf5.h>
#include <libdeflate.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define NP5_ENCODED 0
#define NP5_DECODED 1
#define NP5_FALLBACK 2

/* slow5 aux types, in numapore.signal.fast5_core.TYPE_NAMES order */
enum { T_I8, T_I16, T_I32, T_I64, T_U8, T_U16, T_U32, T_U64, T_F32, T_F64, T_STR, T_ENUM };
/* kinds of a converted aux value */
enum { V_NONE, V_INT, V_UINT, V_DOUBLE, V_STR };

#define MAX_AUX 64
#define MAX_HEADER 256
#define MAX_RUNS 4096

/* cffi: begin (fast5_core_build.py hands these two types to cffi as they are) */
typedef struct {
    const char *name;
    int type;
    const char *labels; /* enum labels joined by '\n', else NULL */
    int kind;           /* V_* */
    int64_t i;
    uint64_t u;
    double d;
    const char *s;
} np5_aux;

typedef struct {
    const char *read_id;
    const char *run_id;
    double digitisation, offset, range, sampling_rate;
    const int16_t *signal;
    size_t nsamples;
    int naux;
    np5_aux *aux;
    int nheader;
    const char **header_names;
    const char **header_values;
    size_t blob_offset, blob_size; /* encoded record in the output buffer */
} np5_read;

typedef struct {
    const char *read_id;
    int has_signal; /* a non-empty Signal dataset */
} np5_layout_read;
/* cffi: end */

typedef struct arena_block {
    struct arena_block *next;
    size_t size, used;
    char data[];
} arena_block;

typedef struct {
    const char *name;
    int type;
    const char *labels;
} np5_field;

typedef struct {
    /* settings */
    int record_compression; /* 0 none, 1 zlib */
    int signal_compression; /* 0 none, 1 svb-zd */
    int has_schema;
    int nfields;
    np5_field fields[MAX_AUX];
    int nruns;
    const char *run_ids[MAX_RUNS];
    uint32_t run_groups[MAX_RUNS];
    /* results of the last call */
    int nreads, capreads;
    np5_read *reads;
    int nlayout, caplayout; /* np5_layout */
    np5_layout_read *layout;
    int groups;
    const char *reason;
    char reason_buf[256];
    unsigned char *out;
    size_t out_len, out_cap;
    /* scratch */
    arena_block *arena;   /* reset per call */
    arena_block *settings_arena; /* names of fields and runs */
    unsigned char *raw;
    size_t raw_cap;
    unsigned char *chunk;
    size_t chunk_cap;
    struct libdeflate_decompressor *inflater;
    z_stream zs;
    int zs_ready;
    hid_t fapl;
    /* files read whole (np5_read_file): see open_file */
    hid_t core_fapl;
    int64_t core_max; /* bytes; 0: never */
    hid_t kept;       /* a file read whole, open for the next call on it; -1: none */
    char *kept_path;
    struct stat kept_stat;
} np5_ctx;

/* ---------- memory ---------- */

static void *arena_alloc(arena_block **head, size_t n) {
    n = (n + 15) & ~(size_t)15;
    for (arena_block *b = *head; b; b = b->next)
        if (b->size - b->used >= n) {
            void *p = b->data + b->used;
            b->used += n;
            return p;
        }
    size_t size = n > (1 << 20) ? n : (1 << 20);
    arena_block *b = malloc(sizeof(arena_block) + size);
    if (!b) return NULL;
    b->size = size;
    b->used = n;
    b->next = *head;
    *head = b;
    return b->data;
}

static void arena_reset(arena_block **head) {
    /* keep the largest block, free the others (bounded memory across calls) */
    arena_block *keep = NULL;
    for (arena_block *b = *head, *next; b; b = next) {
        next = b->next;
        if (!keep || b->size > keep->size) {
            if (keep) free(keep);
            keep = b;
        } else {
            free(b);
        }
    }
    if (keep) {
        keep->used = 0;
        keep->next = NULL;
    }
    *head = keep;
}

static void arena_free(arena_block **head) {
    for (arena_block *b = *head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    *head = NULL;
}

static char *arena_strndup(arena_block **head, const char *s, size_t n) {
    char *p = arena_alloc(head, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static char *arena_strdup(arena_block **head, const char *s) {
    return arena_strndup(head, s, strlen(s));
}

static int grow(unsigned char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap : 4096;
    while (cap2 < need) cap2 *= 2;
    unsigned char *p = realloc(*buf, cap2);
    if (!p) return -1;
    *buf = p;
    *cap = cap2;
    return 0;
}

/* ---------- context ---------- */

static int library_ready = 0;

static np5_ctx *np5_new(int record_compression, int signal_compression) {
    if (!library_ready) {
        H5open();
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* failures are reported by the Python reader */
        library_ready = 1;
    }
    np5_ctx *ctx = calloc(1, sizeof(np5_ctx));
    if (!ctx) return NULL;
    ctx->record_compression = record_compression;
    ctx->signal_compression = signal_compression;
    ctx->inflater = libdeflate_alloc_decompressor();
    ctx->fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* closing the file closes whatever a fallback left open */
    H5Pset_fclose_degree(ctx->fapl, H5F_CLOSE_STRONG);
    ctx->core_fapl = H5Pcopy(ctx->fapl);
    ctx->kept = -1;
    if (!ctx->inflater || ctx->fapl < 0 || ctx->core_fapl < 0 ||
        H5Pset_fapl_core(ctx->core_fapl, 1 << 20, 0) < 0) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

static void np5_free(np5_ctx *ctx) {
    if (!ctx) return;
    arena_free(&ctx->arena);
    arena_free(&ctx->settings_arena);
    free(ctx->reads);
    free(ctx->layout);
    free(ctx->out);
    free(ctx->raw);
    free(ctx->chunk);
    libdeflate_free_decompressor(ctx->inflater);
    if (ctx->zs_ready) deflateEnd(&ctx->zs);
    if (ctx->kept >= 0) H5Fclose(ctx->kept);
    free(ctx->kept_path);
    H5Pclose(ctx->core_fapl);
    H5Pclose(ctx->fapl);
    free(ctx);
}

static void np5_set_core_max(np5_ctx *ctx, int64_t bytes) { ctx->core_max = bytes; }

static int np5_add_field(np5_ctx *ctx, const char *name, int type, const char *labels) {
    if (ctx->nfields >= MAX_AUX) return -1;
    np5_field *f = &ctx->fields[ctx->nfields++];
    f->name = arena_strdup(&ctx->settings_arena, name);
    f->type = type;
    f->labels = labels ? arena_strdup(&ctx->settings_arena, labels) : NULL;
    ctx->has_schema = 1;
    return 0;
}

static void np5_set_schema_known(np5_ctx *ctx) { ctx->has_schema = 1; }

static int np5_add_run(np5_ctx *ctx, const char *run_id, uint32_t group) {
    if (ctx->nruns >= MAX_RUNS) return -1;
    ctx->run_ids[ctx->nruns] = arena_strdup(&ctx->settings_arena, run_id);
    ctx->run_groups[ctx->nruns++] = group;
    return 0;
}

static int find_run(np5_ctx *ctx, const char *run_id) {
    for (int i = 0; i < ctx->nruns; i++)
        if (strcmp(ctx->run_ids[i], run_id) == 0) return i;
    return -1;
}

/* Register an HDF5 filter plugin library (VBZ) with this HDF5: 0 on success. */
static int np5_register_filter(const char *library) {
    if (!library_ready) {
        H5open();
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        library_ready = 1;
    }
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return -1;
    const void *(*info)(void) = (const void *(*)(void))dlsym(handle, "H5PLget_plugin_info");
    if (!info) return -1;
    return H5Zregister(info()) < 0 ? -1 : 0;
}

/* ---------- the walk ---------- */

typedef struct {
    int kind; /* A_INT, A_FLOAT, A_STR, A_ENUM */
    int size, is_unsigned;
    int64_t i;
    uint64_t u;
    double d;
    const char *s;
    const char *labels; /* enum: sorted by value, joined by '\n' */
    int index;          /* enum: position of the value among the sorted values, -1 if none */
} attr_value;
enum { A_INT, A_FLOAT, A_STR, A_ENUM };

typedef struct {
    np5_ctx *ctx;
    np5_read *rd;
    const char *group; /* name of the group whose attributes are read */
    unsigned primary_seen;
    int saw_raw, ngroups, skip_header, nsignals, failed;
} walk;

static int fallback(np5_ctx *ctx, const char *reason) {
    if (!ctx->reason) ctx->reason = reason;
    return -1;
}

static int fallback_named(np5_ctx *ctx, const char *reason, const char *name) {
    if (!ctx->reason) {
        snprintf(ctx->reason_buf, sizeof ctx->reason_buf, "%s: %.120s", reason, name);
        ctx->reason = ctx->reason_buf;
    }
    return -1;
}

static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

/* Text the Python reader would take as is: valid UTF-8, no NUL, tab or line break. */
static int plain_text(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] == 0 || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') return 0;
    return valid_utf8((const unsigned char *)s, n);
}

static int read_string(walk *w, hid_t aid, hid_t ftype, attr_value *v) {
    np5_ctx *ctx = w->ctx;
    int ok = -1;
    hid_t mtype = H5Tcopy(ftype);
    if (mtype < 0) return fallback(ctx, "string type");
    if (H5Tis_variable_str(ftype) > 0) {
        char *text = NULL;
        if (H5Aread(aid, mtype, &text) >= 0) {
            const char *t = text ? text : "";
            size_t n = strlen(t);
            if (plain_text(t, n)) {
                v->s = arena_strndup(&ctx->arena, t, n);
                ok = v->s ? 0 : -1;
            } else {
                fallback(ctx, "string attribute with a tab, line break or non-UTF-8 bytes");
            }
            if (text) {
                hid_t space = H5Aget_space(aid);
                H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, &text);
                H5Sclose(space);
            }
        } else {
            fallback(ctx, "unreadable string attribute");
        }
    } else {
        size_t size = H5Tget_size(ftype);
        H5T_str_t pad = H5Tget_strpad(ftype);
        /* h5py reads fixed-length strings NULL-padded (numpy 'S'), then drops trailing NULs */
        if (pad == H5T_STR_SPACEPAD) {
            H5Tclose(mtype);
            return fallback(ctx, "space-padded string attribute");
        }
        H5Tset_strpad(mtype, H5T_STR_NULLPAD);
        char *buf = arena_alloc(&ctx->arena, size + 1);
        if (buf && H5Aread(aid, mtype, buf) >= 0) {
            size_t n = size;
            while (n > 0 && buf[n - 1] == 0) n--;
            buf[n] = 0;
            if (plain_text(buf, n)) {
                v->s = buf;
                ok = 0;
            } else {
                fallback(ctx, "string attribute with a NUL, tab, line break or non-UTF-8 bytes");
            }
        } else {
            fallback(ctx, "unreadable string attribute");
        }
    }
    H5Tclose(mtype);
    return ok;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int64_t value;
    const char *name;
} enum_member;

static int cmp_member(const void *a, const void *b) {
    return cmp_i64(&((const enum_member *)a)->value, &((const enum_member *)b)->value);
}

static int64_t as_i64(const unsigned char *p, size_t size, int is_signed) {
    switch (size) {
    case 1: return is_signed ? (int64_t) * (const int8_t *)p : (int64_t) * (const uint8_t *)p;
    case 2: return is_signed ? (int64_t) * (const int16_t *)p : (int64_t) * (const uint16_t *)p;
    case 4: return is_signed ? (int64_t) * (const int32_t *)p : (int64_t) * (const uint32_t *)p;
    default: return *(const int64_t *)p;
    }
}

static int read_enum(walk *w, hid_t aid, hid_t ftype, attr_value *v) {
    np5_ctx *ctx = w->ctx;
    int ok = -1;
    hid_t ntype = H5Tget_native_type(ftype, H5T_DIR_ASCEND);
    hid_t base = ntype >= 0 ? H5Tget_super(ntype) : -1;
    int n = ntype >= 0 ? H5Tget_nmembers(ntype) : -1;
    size_t size = base >= 0 ? H5Tget_size(base) : 0;
    int is_signed = base >= 0 && H5Tget_sign(base) == H5T_SGN_2;
    enum_member *members = NULL;
    if (n <= 0 || n > 4096 || (size != 1 && size != 2 && size != 4 && size != 8) ||
        (size == 8 && !is_signed)) {
        fallback(ctx, "enum attribute of an unusual base type");
        goto done;
    }
    members = arena_alloc(&ctx->arena, n * sizeof(enum_member));
    if (!members) goto done;
    size_t labels_len = 0;
    for (int k = 0; k < n; k++) {
        unsigned char raw[8] = {0};
        char *name = H5Tget_member_name(ntype, k);
        if (!name || H5Tget_member_value(ntype, k, raw) < 0) {
            if (name) H5free_memory(name);
            fallback(ctx, "enum member");
            goto done;
        }
        size_t len = strlen(name);
        int odd = len == 0 || strcmp(name, "TRUE") == 0 || strcmp(name, "FALSE") == 0;
        for (size_t c = 0; c < len; c++)
            odd |= (unsigned char)name[c] >= 0x80 || name[c] == '\n' || name[c] < 0x20;
        members[k].name = arena_strndup(&ctx->arena, name, len);
        members[k].value = as_i64(raw, size, is_signed);
        H5free_memory(name);
        /* h5py reads a FALSE/TRUE enum as a bool: left to the Python reader */
        if (odd || !members[k].name) {
            fallback(ctx, "enum attribute with unusual labels");
            goto done;
        }
        labels_len += len + 1;
    }
    unsigned char raw[8] = {0};
    if (H5Aread(aid, ntype, raw) < 0) {
        fallback(ctx, "unreadable enum attribute");
        goto done;
    }
    int64_t value = as_i64(raw, size, is_signed);
    qsort(members, n, sizeof(enum_member), cmp_member);
    char *labels = arena_alloc(&ctx->arena, labels_len + 1);
    if (!labels) goto done;
    char *p = labels;
    v->index = -1;
    for (int k = 0; k < n; k++) {
        size_t len = strlen(members[k].name);
        memcpy(p, members[k].name, len);
        p += len;
        *p++ = '\n';
        if (members[k].value == value && v->index < 0) v->index = k;
    }
    p[-1] = 0;
    v->labels = labels;
    v->i = value;
    v->u = (uint64_t)value;
    v->is_unsigned = 0;
    v->size = (int)size;
    ok = 0;
done:
    if (base >= 0) H5Tclose(base);
    if (ntype >= 0) H5Tclose(ntype);
    return ok;
}

/* Read one attribute: 1 with a value, 0 for a null dataspace (no value), -1 to fall back. */
static int read_attribute(walk *w, hid_t aid, attr_value *v) {
    np5_ctx *ctx = w->ctx;
    memset(v, 0, sizeof *v);
    hid_t space = H5Aget_space(aid);
    if (space < 0) return fallback(ctx, "attribute dataspace");
    H5S_class_t sclass = H5Sget_simple_extent_type(space);
    hssize_t npoints = H5Sget_simple_extent_npoints(space);
    H5Sclose(space);
    if (sclass == H5S_NULL) return 0;
    if (npoints != 1) return fallback(ctx, "attribute that is not a single value");
    hid_t ftype = H5Aget_type(aid);
    if (ftype < 0) return fallback(ctx, "attribute type");
    int rc = -1;
    H5T_class_t tclass = H5Tget_class(ftype);
    size_t size = H5Tget_size(ftype);
    if (tclass == H5T_INTEGER) {
        v->kind = A_INT;
        v->size = (int)size;
        v->is_unsigned = H5Tget_sign(ftype) == H5T_SGN_NONE;
        if (size != 1 && size != 2 && size != 4 && size != 8)
            fallback(ctx, "integer attribute of an unusual size");
        else if (v->is_unsigned)
            rc = H5Aread(aid, H5T_NATIVE_ULLONG, &v->u) < 0 ? -1 : 1;
        else
            rc = H5Aread(aid, H5T_NATIVE_LLONG, &v->i) < 0 ? -1 : 1;
        if (v->is_unsigned) v->i = (int64_t)v->u;
        else v->u = (uint64_t)v->i;
    } else if (tclass == H5T_FLOAT) {
        v->kind = A_FLOAT;
        v->size = (int)size;
        hid_t ntype = H5Tget_native_type(ftype, H5T_DIR_ASCEND);
        int standard = ntype >= 0 && (H5Tequal(ntype, H5T_NATIVE_FLOAT) > 0 ||
                                      H5Tequal(ntype, H5T_NATIVE_DOUBLE) > 0);
        if (ntype >= 0) H5Tclose(ntype);
        if (!standard || (size != 4 && size != 8))
            fallback(ctx, "float attribute of an unusual type");
        else
            rc = H5Aread(aid, H5T_NATIVE_DOUBLE, &v->d) < 0 ? -1 : 1;
    } else if (tclass == H5T_STRING) {
        v->kind = A_STR;
        rc = read_string(w, aid, ftype, v) < 0 ? -1 : 1;
    } else if (tclass == H5T_ENUM) {
        v->kind = A_ENUM;
        rc = read_enum(w, aid, ftype, v) < 0 ? -1 : 1;
    } else {
        fallback(ctx, "attribute of a type the compiled reader leaves to h5py");
    }
    H5Tclose(ftype);
    if (rc < 0) fallback(ctx, "unreadable attribute");
    return rc;
}

static const char *PRIMARY[] = {"digitisation", "offset", "range", "sampling_rate"};

static int known_aux_type(const char *name) {
    if (!strcmp(name, "start_time")) return T_U64;
    if (!strcmp(name, "read_number")) return T_I32;
    if (!strcmp(name, "start_mux")) return T_U8;
    if (!strcmp(name, "median_before")) return T_F64;
    if (!strcmp(name, "channel_number")) return T_STR;
    return -1;
}

static int header_group(const char *group) {
    return !strcmp(group, "") || !strcmp(group, "context_tags") || !strcmp(group, "tracking_id");
}

/* A header or column name SLOW5 can hold (numapore.signal.slow5.name_problem). */
static int good_name(const char *name) {
    if (!*name) return 0;
    for (const char *c = name; *c; c++)
        if (*c == '\t' || *c == '\n' || *c == '\r') return 0;
    return 1;
}

static int add_header(walk *w, const char *name, const char *text) {
    np5_read *rd = w->rd;
    if (!good_name(name)) return fallback_named(w->ctx, "header name SLOW5 cannot hold", name);
    for (int k = 0; k < rd->nheader; k++)
        if (!strcmp(rd->header_names[k], name)) {
            if (strcmp(rd->header_values[k], text))
                return fallback_named(w->ctx, "header attribute given twice", name);
            return 0;
        }
    if (rd->nheader >= MAX_HEADER) return fallback(w->ctx, "too many header attributes");
    rd->header_names[rd->nheader] = arena_strdup(&w->ctx->arena, name);
    rd->header_values[rd->nheader] = arena_strdup(&w->ctx->arena, text);
    rd->nheader++;
    return 0;
}

/* _header_value: strings as they are, floats with one decimal, integers and enums as numbers */
static int header_text(walk *w, const attr_value *v, char *buf, size_t n, const char **out) {
    switch (v->kind) {
    case A_STR: *out = v->s; return 0;
    case A_FLOAT:
        if (!isfinite(v->d)) return fallback(w->ctx, "non-finite float header attribute");
        snprintf(buf, n, "%.1f", v->d);
        break;
    case A_INT:
        if (v->is_unsigned) snprintf(buf, n, "%llu", (unsigned long long)v->u);
        else snprintf(buf, n, "%lld", (long long)v->i);
        break;
    default: snprintf(buf, n, "%lld", (long long)v->i); break; /* enum: its stored number */
    }
    *out = buf;
    return 0;
}

static int add_aux(walk *w, const char *name, int type, const char *labels, const np5_aux *value) {
    np5_read *rd = w->rd;
    if (!good_name(name)) return fallback_named(w->ctx, "column name SLOW5 cannot hold", name);
    for (int k = 0; k < rd->naux; k++)
        if (!strcmp(rd->aux[k].name, name))
            return fallback_named(w->ctx, "aux attribute given twice in one read", name);
    if (rd->naux >= MAX_AUX) return fallback(w->ctx, "too many aux attributes");
    np5_aux *a = &rd->aux[rd->naux++];
    *a = *value;
    a->name = arena_strdup(&w->ctx->arena, name);
    a->type = type;
    a->labels = labels;
    return 0;
}

/* The value of a known aux field converted to its fixed type (fast5._convert). */
static int known_aux_value(walk *w, int type, const attr_value *v, np5_aux *out) {
    memset(out, 0, sizeof *out);
    if (type == T_STR) {
        if (v->kind == A_STR) {
            out->kind = V_STR;
            out->s = v->s;
        } else if (v->kind == A_INT) {
            char buf[32];
            if (v->is_unsigned) snprintf(buf, sizeof buf, "%llu", (unsigned long long)v->u);
            else snprintf(buf, sizeof buf, "%lld", (long long)v->i);
            out->kind = V_STR;
            out->s = arena_strdup(&w->ctx->arena, buf);
        } else {
            return fallback(w->ctx, "text aux field stored as a float or enum");
        }
    } else if (type == T_F32 || type == T_F64) {
        if (v->kind == A_FLOAT) out->d = v->d;
        else if (v->kind == A_INT) out->d = v->is_unsigned ? (double)v->u : (double)v->i;
        else return fallback(w->ctx, "float aux field stored as text or enum");
        out->kind = V_DOUBLE;
    } else {
        if (v->kind != A_INT) return fallback(w->ctx, "integer aux field stored as float, text or enum");
        out->kind = v->is_unsigned ? V_UINT : V_INT;
        out->i = v->i;
        out->u = v->u;
    }
    return 0;
}

static int natural_type(const attr_value *v) {
    if (v->kind == A_STR) return T_STR;
    if (v->kind == A_ENUM) return T_ENUM;
    if (v->kind == A_FLOAT) return v->size == 4 ? T_F32 : T_F64;
    switch (v->size) {
    case 1: return v->is_unsigned ? T_U8 : T_I8;
    case 2: return v->is_unsigned ? T_U16 : T_I16;
    case 4: return v->is_unsigned ? T_U32 : T_I32;
    default: return v->is_unsigned ? T_U64 : T_I64;
    }
}

/* _ReadBuilder._route: one attribute of group w->group. */
static int route(walk *w, const char *name, const attr_value *v) {
    np5_read *rd = w->rd;
    for (int k = 0; k < 4; k++)
        if (!strcmp(name, PRIMARY[k])) {
            double d;
            if (v->kind == A_FLOAT) d = v->d;
            else if (v->kind == A_INT) d = v->is_unsigned ? (double)v->u : (double)v->i;
            else return fallback_named(w->ctx, "primary field not stored as a number", name);
            if (w->primary_seen & (1u << k))
                return fallback_named(w->ctx, "primary field given twice", name);
            w->primary_seen |= 1u << k;
            double *dst[] = {&rd->digitisation, &rd->offset, &rd->range, &rd->sampling_rate};
            *dst[k] = d;
            return 0;
        }
    if (!strcmp(name, "read_id")) {
        if (v->kind != A_STR) return fallback(w->ctx, "read_id not stored as text");
        if (w->primary_seen & 16) return fallback(w->ctx, "read_id given twice");
        w->primary_seen |= 16;
        rd->read_id = v->s;
        return 0;
    }
    if (!strcmp(name, "duration")) return 0; /* the signal length comes from the dataset */
    int type = known_aux_type(name);
    if (type >= 0) {
        np5_aux value;
        if (known_aux_value(w, type, v, &value) < 0) return -1;
        return add_aux(w, name, type, NULL, &value);
    }
    if (header_group(w->group) || !strcmp(name, "run_id") || !strcmp(name, "pore_type")) {
        char buf[64];
        const char *text;
        if (header_text(w, v, buf, sizeof buf, &text) < 0) return -1;
        return add_header(w, name, text);
    }
    if (!strcmp(name, "end_reason") && v->kind != A_ENUM)
        return fallback(w->ctx, "end_reason stored as a plain number or text");
    np5_aux value;
    memset(&value, 0, sizeof value);
    type = natural_type(v);
    switch (v->kind) {
    case A_STR: value.kind = V_STR; value.s = v->s; break;
    case A_FLOAT: value.kind = V_DOUBLE; value.d = v->d; break;
    case A_INT:
        value.kind = v->is_unsigned ? V_UINT : V_INT;
        value.i = v->i;
        value.u = v->u;
        break;
    default: /* enum: the label's position, or no value */
        value.kind = v->index < 0 ? V_NONE : V_INT;
        value.i = v->index;
        value.u = (uint64_t)v->index;
        break;
    }
    return add_aux(w, name, type, v->kind == A_ENUM ? v->labels : NULL, &value);
}

typedef struct {
    walk *w;
    hid_t loc;
} attr_walk;

static herr_t attribute_visitor(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
    (void)info;
    walk *w = data;
    if (!valid_utf8((const unsigned char *)name, strlen(name)))
        return fallback(w->ctx, "attribute name that is not UTF-8");
    hid_t aid = H5Aopen(loc, name, H5P_DEFAULT);
    if (aid < 0) return fallback(w->ctx, "attribute that cannot be opened");
    attr_value v;
    int rc = read_attribute(w, aid, &v);
    H5Aclose(aid);
    if (rc < 0) return -1;
    if (rc == 0) return 0; /* no value: nothing to route */
    return route(w, name, &v) < 0 ? -1 : 0;
}

static int visit_attributes(walk *w, hid_t oid, const char *group) {
    const char *saved = w->group;
    w->group = group;
    hsize_t idx = 0;
    herr_t rc = H5Aiterate2(oid, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, attribute_visitor, w);
    w->group = saved;
    if (rc < 0) return fallback(w->ctx, "attribute iteration");
    return 0;
}

typedef struct {
    const char *name;
    haddr_t addr; /* the object it links to (for H5Oopen_by_addr: no second name lookup) */
} link_entry;

typedef struct {
    np5_ctx *ctx;
    link_entry *links;
    int n, cap;
} link_list;

static herr_t link_visitor(hid_t gid, const char *name, const H5L_info_t *info, void *data) {
    (void)gid;
    link_list *l = data;
    if (info->type != H5L_TYPE_HARD) return fallback_named(l->ctx, "soft or external link", name);
    if (!valid_utf8((const unsigned char *)name, strlen(name)))
        return fallback(l->ctx, "group member name that is not UTF-8");
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        link_entry *links = arena_alloc(&l->ctx->arena, cap * sizeof(link_entry));
        if (!links) return -1;
        if (l->n) memcpy(links, l->links, l->n * sizeof(link_entry));
        l->links = links;
        l->cap = cap;
    }
    l->links[l->n].addr = info->u.address;
    l->links[l->n].name = arena_strdup(&l->ctx->arena, name);
    return l->links[l->n++].name ? 0 : -1;
}

static int cmp_link(const void *a, const void *b) {
    return strcmp(((const link_entry *)a)->name, ((const link_entry *)b)->name);
}

/* The members of a group in byte order (all of them hard links), else fall back. */
static int list_links(np5_ctx *ctx, hid_t gid, link_list *l) {
    memset(l, 0, sizeof *l);
    l->ctx = ctx;
    hsize_t idx = 0;
    if (H5Literate(gid, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, link_visitor, l) < 0)
        return fallback(ctx, "group listing");
    if (l->n > 1) qsort(l->links, l->n, sizeof(link_entry), cmp_link);
    return 0;
}

static int skipped_group(const char *name) {
    return !strcmp(name, "Analyses") || !strcmp(name, "PreviousReadInfo");
}

static int read_signal(walk *w, hid_t ds) {
    np5_ctx *ctx = w->ctx;
    np5_read *rd = w->rd;
    if (w->nsignals++) return fallback(ctx, "two Signal datasets in one read");
    int rc = -1;
    hid_t ftype = H5Dget_type(ds), space = H5Dget_space(ds), dcpl = H5Dget_create_plist(ds);
    if (ftype < 0 || space < 0 || dcpl < 0) {
        fallback(ctx, "Signal dataset");
        goto done;
    }
    if (H5Tget_class(ftype) != H5T_INTEGER || H5Tget_size(ftype) != 2 ||
        H5Tget_sign(ftype) != H5T_SGN_2) {
        fallback(ctx, "Signal that is not int16");
        goto done;
    }
    hssize_t npoints = H5Sget_simple_extent_npoints(space);
    if (npoints <= 0) {
        fallback(ctx, "empty Signal");
        goto done;
    }
    size_t n = (size_t)npoints;
    int16_t *signal = arena_alloc(&ctx->arena, n * 2);
    if (!signal) goto done;
    int ndims = H5Sget_simple_extent_ndims(space);
    int direct = H5Pget_layout(dcpl) == H5D_CHUNKED && ndims == 1 &&
                 H5Tget_order(ftype) == H5T_ORDER_LE && H5Pget_nfilters(dcpl) == 1;
    if (direct) {
        unsigned flags;
        size_t nelmts = 0;
        unsigned cd[8];
        direct = H5Pget_filter2(dcpl, 0, &flags, &nelmts, cd, 0, NULL, NULL) == H5Z_FILTER_DEFLATE;
    }
    hsize_t chunk = 0;
    if (direct) direct = H5Pget_chunk(dcpl, 1, &chunk) == 1 && chunk > 0;
    int done_direct = 0;
    if (direct) {
        size_t chunk_bytes = (size_t)chunk * 2;
        done_direct = 1;
        for (hsize_t start = 0; start < n && done_direct; start += chunk) {
            hsize_t offset = start, stored = 0;
            uint32_t mask = 0;
            if (H5Dget_chunk_storage_size(ds, &offset, &stored) < 0 || stored == 0 ||
                grow(&ctx->chunk, &ctx->chunk_cap, stored + chunk_bytes) < 0 ||
                H5Dread_chunk(ds, H5P_DEFAULT, &offset, &mask, ctx->chunk) < 0) {
                done_direct = 0;
                break;
            }
            size_t want = (n - start < chunk ? n - start : chunk) * 2;
            unsigned char *spare = ctx->chunk + stored;
            if (mask & 1) { /* stored without the deflate filter */
                if (stored < want) done_direct = 0;
                else memcpy((char *)signal + start * 2, ctx->chunk, want);
                continue;
            }
            size_t got = 0;
            unsigned char *dst = want == chunk_bytes ? (unsigned char *)signal + start * 2 : spare;
            if (libdeflate_zlib_decompress(ctx->inflater, ctx->chunk, stored, dst, chunk_bytes,
                                           &got) != LIBDEFLATE_SUCCESS ||
                got < want) {
                done_direct = 0;
                break;
            }
            if (dst == spare) memcpy((char *)signal + start * 2, spare, want);
        }
    }
    if (!done_direct && H5Dread(ds, H5T_NATIVE_SHORT, H5S_ALL, H5S_ALL, H5P_DEFAULT, signal) < 0) {
        fallback(ctx, "unreadable Signal (a VBZ plugin missing?)");
        goto done;
    }
    rd->signal = signal;
    rd->nsamples = n;
    rc = 0;
done:
    if (ftype >= 0) H5Tclose(ftype);
    if (space >= 0) H5Sclose(space);
    if (dcpl >= 0) H5Pclose(dcpl);
    return rc;
}

static int visit_children(walk *w, hid_t gid);

/* _Fast5Walker.visit: a group's attributes, then its members. */
static int visit_group(walk *w, hid_t gid, const char *name) {
    w->ngroups++;
    if (!strcmp(name, "Raw")) w->saw_raw = 1;
    int hdr = !strcmp(name, "context_tags") || !strcmp(name, "tracking_id");
    if (!(hdr && w->skip_header) && visit_attributes(w, gid, name) < 0) return -1;
    return visit_children(w, gid);
}

static int visit_children(walk *w, hid_t gid) {
    link_list l;
    if (list_links(w->ctx, gid, &l) < 0) return -1;
    for (int k = 0; k < l.n; k++) {
        const char *name = l.links[k].name;
        if (skipped_group(name)) continue;
        hid_t oid = H5Oopen(gid, name, H5P_DEFAULT);
        if (oid < 0) return fallback_named(w->ctx, "member that cannot be opened", name);
        H5I_type_t type = H5Iget_type(oid);
        int rc = 0;
        if (type == H5I_GROUP) rc = visit_group(w, oid, name);
        else if (type == H5I_DATASET && !strcmp(name, "Signal")) rc = read_signal(w, oid);
        H5Oclose(oid);
        if (rc < 0) return -1;
    }
    return 0;
}

/* An object's attribute by name: 1 and it open (the caller closes it), 0 when absent, -1 to
 * fall back (the lookup or the open failed). */
static int open_attribute(np5_ctx *ctx, hid_t oid, const char *name, hid_t *aid) {
    htri_t has = H5Aexists(oid, name);
    if (has < 0) return fallback_named(ctx, "attribute lookup", name);
    if (!has) return 0;
    *aid = H5Aopen(oid, name, H5P_DEFAULT);
    return *aid < 0 ? fallback_named(ctx, "attribute that cannot be opened", name) : 1;
}

/* _peek_run_id: 1 and the run_id text, 0 without a run_id attribute, -1 to fall back. */
static int peek_run_id(walk *w, hid_t oid, const char **run_id) {
    hid_t aid = -1;
    int found = open_attribute(w->ctx, oid, "run_id", &aid);
    if (found <= 0) return found;
    attr_value v;
    int rc = read_attribute(w, aid, &v);
    H5Aclose(aid);
    if (rc <= 0 || v.kind != A_STR) return fallback(w->ctx, "run_id that is not text");
    *run_id = v.s;
    return 1;
}

static np5_read *new_read(np5_ctx *ctx, const np5_read *root) {
    if (ctx->nreads == ctx->capreads) {
        int cap = ctx->capreads ? 2 * ctx->capreads : 64;
        np5_read *reads = realloc(ctx->reads, cap * sizeof(np5_read));
        if (!reads) return NULL;
        ctx->reads = reads;
        ctx->capreads = cap;
    }
    np5_read *rd = &ctx->reads[ctx->nreads++];
    memset(rd, 0, sizeof *rd);
    rd->aux = arena_alloc(&ctx->arena, MAX_AUX * sizeof(np5_aux));
    rd->header_names = arena_alloc(&ctx->arena, MAX_HEADER * sizeof(char *));
    rd->header_values = arena_alloc(&ctx->arena, MAX_HEADER * sizeof(char *));
    if (!rd->aux || !rd->header_names || !rd->header_values) return NULL;
    if (root) {
        rd->nheader = root->nheader;
        memcpy(rd->header_names, root->header_names, root->nheader * sizeof(char *));
        memcpy(rd->header_values, root->header_values, root->nheader * sizeof(char *));
    }
    return rd;
}

/* _skip_known: a read of a known run keeps its run_id and skips its header groups. */
static int skip_known(walk *w, const char *run_id) {
    if (!run_id || find_run(w->ctx, run_id) < 0) return 0;
    w->skip_header = 1;
    for (int k = 0; k < w->rd->nheader; k++)
        if (!strcmp(w->rd->header_names[k], "run_id")) {
            w->rd->header_values[k] = run_id;
            return 0;
        }
    return add_header(w, "run_id", run_id);
}

/* _finish: a complete read, or fall back (the Python reader rejects it with the reason). */
static int finish(walk *w) {
    np5_read *rd = w->rd;
    if (!w->saw_raw) return fallback(w->ctx, "read without a Raw group");
    if ((w->primary_seen & 31) != 31 || !rd->signal)
        return fallback(w->ctx, "read lacking a primary field or its signal");
    rd->run_id = NULL;
    for (int k = 0; k < rd->nheader; k++)
        if (!strcmp(rd->header_names[k], "run_id")) rd->run_id = rd->header_values[k];
    if (!rd->run_id) return fallback(w->ctx, "read without a run_id");
    const char *id = rd->read_id;
    if (!*id || *id == '#' || *id == '@') return fallback(w->ctx, "read id SLOW5 cannot hold");
    if (strlen(id) > 65535) return fallback(w->ctx, "read id too long");
    return 0;
}

static int read_root(walk *w, hid_t fid, np5_read *root) {
    /* the root builder: root attributes become header attributes (others: Python reader) */
    w->rd = root;
    w->group = "";
    hsize_t idx = 0;
    if (H5Aiterate2(fid, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, attribute_visitor, w) < 0)
        return fallback(w->ctx, "root attributes");
    if (root->naux || w->primary_seen) return fallback(w->ctx, "read fields among root attributes");
    return 0;
}

/* fast5._is_multi_read from the root's members alone: single-read (Raw or UniqueGlobalKey),
 * multi-read (read_* groups); neither: told by file_type/file_version (the callers fall back). */
static void top_layout(const link_list *top, int *single, int *multi) {
    *single = *multi = 0;
    for (int k = 0; k < top->n; k++) {
        const char *name = top->links[k].name;
        *single |= !strcmp(name, "Raw") || !strcmp(name, "UniqueGlobalKey");
        *multi |= !strncmp(name, "read_", 5);
    }
}

/* Keep the read groups of a multi-read file's root members (in order); return how many. */
static int keep_read_groups(link_list *top) {
    int n = 0;
    for (int k = 0; k < top->n; k++)
        if (!skipped_group(top->links[k].name)) top->links[n++] = top->links[k];
    return top->n = n;
}

static int walk_file(np5_ctx *ctx, hid_t fid, int start, int stop) {
    walk w;
    memset(&w, 0, sizeof w);
    w.ctx = ctx;
    np5_read root;
    memset(&root, 0, sizeof root);
    root.aux = arena_alloc(&ctx->arena, MAX_AUX * sizeof(np5_aux));
    root.header_names = arena_alloc(&ctx->arena, MAX_HEADER * sizeof(char *));
    root.header_values = arena_alloc(&ctx->arena, MAX_HEADER * sizeof(char *));
    if (!root.aux || !root.header_names || !root.header_values) return -1;
    if (read_root(&w, fid, &root) < 0) return -1;
    link_list top;
    if (list_links(ctx, fid, &top) < 0) return -1;
    int single, multi;
    top_layout(&top, &single, &multi);
    if (single) {
        ctx->groups = 1;
        memset(&w, 0, sizeof w);
        w.ctx = ctx;
        w.rd = new_read(ctx, &root);
        if (!w.rd) return -1;
        if (ctx->nruns && H5Lexists(fid, "UniqueGlobalKey", H5P_DEFAULT) > 0 &&
            H5Lexists(fid, "UniqueGlobalKey/tracking_id", H5P_DEFAULT) > 0) {
            hid_t oid = H5Oopen(fid, "UniqueGlobalKey/tracking_id", H5P_DEFAULT);
            if (oid < 0) return fallback(ctx, "tracking_id");
            const char *run_id = NULL;
            int rc = peek_run_id(&w, oid, &run_id);
            H5Oclose(oid);
            if (rc < 0 || skip_known(&w, rc ? run_id : NULL) < 0) return -1;
        }
        if (visit_children(&w, fid) < 0) return -1;
        if (!w.ngroups) return fallback(ctx, "empty FAST5");
        return finish(&w);
    }
    if (!multi) return fallback(ctx, "layout told by file_type/file_version");
    int ngroups = keep_read_groups(&top);
    ctx->groups = ngroups;
    if (stop < 0 || stop > ngroups) stop = ngroups;
    for (int k = start; k < stop; k++) {
        const char *name = top.links[k].name;
        memset(&w, 0, sizeof w);
        w.ctx = ctx;
        w.rd = new_read(ctx, &root);
        if (!w.rd) return -1;
        hid_t gid = H5Oopen(fid, name, H5P_DEFAULT);
        if (gid < 0) return fallback_named(ctx, "read group that cannot be opened", name);
        int rc = 0;
        if (H5Iget_type(gid) != H5I_GROUP) rc = fallback_named(ctx, "read member not a group", name);
        if (rc == 0 && ctx->nruns) {
            const char *run_id = NULL;
            int found = peek_run_id(&w, gid, &run_id);
            if (found == 0 && H5Lexists(gid, "tracking_id", H5P_DEFAULT) > 0) {
                hid_t tid = H5Oopen(gid, "tracking_id", H5P_DEFAULT);
                found = tid < 0 ? fallback(ctx, "tracking_id") : peek_run_id(&w, tid, &run_id);
                if (tid >= 0) H5Oclose(tid);
            }
            rc = found < 0 ? -1 : skip_known(&w, found ? run_id : NULL);
        }
        if (rc == 0) rc = visit_group(&w, gid, name);
        H5Oclose(gid);
        if (rc < 0 || finish(&w) < 0) return -1;
    }
    return 0;
}

/* ---------- layout (numapore.signal.fast5.read_layout) ---------- */

static int add_layout(np5_ctx *ctx, const char *read_id, int has_signal) {
    if (ctx->nlayout == ctx->caplayout) {
        int cap = ctx->caplayout ? 2 * ctx->caplayout : 64;
        np5_layout_read *layout = realloc(ctx->layout, cap * sizeof(np5_layout_read));
        if (!layout) return -1;
        ctx->layout = layout;
        ctx->caplayout = cap;
    }
    ctx->layout[ctx->nlayout].read_id = read_id;
    ctx->layout[ctx->nlayout++].has_signal = has_signal;
    return 0;
}

/* The object a member of gid links to: 1 and it open, 0 when there is no such link, -1 to
 * fall back (a soft or external link: the Python reader follows or refuses those its own way).
 * The common case (the link is there) takes one lookup: its info, then the object by address. */
static int open_hard_link(np5_ctx *ctx, hid_t gid, const char *name, hid_t *out) {
    H5L_info_t info;
    if (H5Lget_info(gid, name, &info, H5P_DEFAULT) < 0) {
        htri_t has = H5Lexists(gid, name, H5P_DEFAULT);
        return has == 0 ? 0 : fallback_named(ctx, "link lookup", name);
    }
    if (info.type != H5L_TYPE_HARD) return fallback_named(ctx, "soft or external link", name);
    hid_t oid = H5Oopen_by_addr(gid, info.u.address);
    if (oid < 0) return fallback_named(ctx, "member that cannot be opened", name);
    *out = oid;
    return 1;
}

/* A member of gid that must be a hard-linked group: as open_hard_link, and -1 for another
 * kind of object. */
static int open_member_group(np5_ctx *ctx, hid_t gid, const char *name, hid_t *out) {
    int found = open_hard_link(ctx, gid, name, out);
    if (found > 0 && H5Iget_type(*out) != H5I_GROUP) {
        H5Oclose(*out);
        return fallback_named(ctx, "member that is not a group", name);
    }
    return found;
}

/* fast5._has_signal: 1 when group holds a non-empty Signal dataset, 0 if not, -1 to fall back. */
static int layout_signal(np5_ctx *ctx, hid_t gid) {
    hid_t oid = -1;
    int rc = open_hard_link(ctx, gid, "Signal", &oid);
    if (rc <= 0) return rc;
    if (H5Iget_type(oid) == H5I_DATASET) {
        hid_t space = H5Dget_space(oid);
        hssize_t npoints = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
        if (space >= 0) H5Sclose(space);
        rc = npoints < 0 ? fallback(ctx, "Signal dataspace") : npoints > 0;
    } else {
        rc = 0; /* a group or a named type: no signal */
    }
    H5Oclose(oid);
    return rc;
}

/* fast5._attribute(oid, "read_id") as text: 1 and the text, 0 when absent or empty (null
 * dataspace), -1 to fall back: anything but a scalar string _text takes as it is. */
static int layout_read_id(walk *w, hid_t oid, const char **text) {
    hid_t aid = -1;
    int found = open_attribute(w->ctx, oid, "read_id", &aid);
    if (found <= 0) return found;
    hid_t space = H5Aget_space(aid);
    H5S_class_t sclass = space < 0 ? H5S_NO_CLASS : H5Sget_simple_extent_type(space);
    if (space >= 0) H5Sclose(space);
    attr_value v;
    int rc = sclass == H5S_NULL ? 0 : -1;
    if (sclass == H5S_SCALAR) rc = read_attribute(w, aid, &v);
    H5Aclose(aid);
    if (rc < 0 || (rc == 1 && v.kind != A_STR))
        return fallback(w->ctx, "read_id that is not a scalar string");
    if (rc == 1) *text = v.s;
    return rc;
}

/* fast5._multi_read_layout: the read_id of the group's Raw, else (absent or empty) the group's
 * name without read_. */
static int multi_read_layout(walk *w, hid_t gid, const char *name) {
    np5_ctx *ctx = w->ctx;
    hid_t raw = -1;
    int has_raw = open_member_group(ctx, gid, "Raw", &raw);
    if (has_raw < 0) return -1;
    const char *read_id = NULL;
    int has_signal = 0, rc = 0;
    if (has_raw) {
        rc = layout_read_id(w, raw, &read_id);
        has_signal = rc < 0 ? -1 : layout_signal(ctx, raw);
        H5Oclose(raw);
    }
    if (rc < 0 || has_signal < 0) return -1;
    if (!rc || !*read_id) read_id = strncmp(name, "read_", 5) ? name : name + 5;
    return add_layout(ctx, read_id, has_signal);
}

/* fast5._single_read_layout: Raw/Reads/<name>'s read_id (an empty one stays empty), else its
 * name. */
static int single_read_layout(walk *w, hid_t gid, const char *name) {
    const char *read_id = NULL;
    int rc = layout_read_id(w, gid, &read_id);
    if (rc < 0) return -1;
    if (!rc && !plain_text(name, strlen(name)))
        return fallback_named(w->ctx, "read name with a tab or line break", name);
    int has_signal = layout_signal(w->ctx, gid);
    if (has_signal < 0) return -1;
    return add_layout(w->ctx, rc ? read_id : name, has_signal);
}

/* Each read of members (all of them hard-linked groups) of gid, through one_read. */
static int layout_reads(walk *w, hid_t gid, const link_list *members,
                        int (*one_read)(walk *, hid_t, const char *)) {
    for (int k = 0; k < members->n; k++) {
        const char *name = members->links[k].name;
        hid_t oid = H5Oopen_by_addr(gid, members->links[k].addr);
        if (oid < 0) return fallback_named(w->ctx, "read group that cannot be opened", name);
        int rc = H5Iget_type(oid) == H5I_GROUP
                     ? one_read(w, oid, name)
                     : fallback_named(w->ctx, "read member not a group", name);
        H5Oclose(oid);
        if (rc < 0) return -1;
    }
    return 0;
}

/* fast5.read_layout on an open file (the layout told by its groups alone, else fall back). */
static int layout_file(np5_ctx *ctx, hid_t fid) {
    walk w;
    memset(&w, 0, sizeof w);
    w.ctx = ctx;
    link_list top;
    if (list_links(ctx, fid, &top) < 0) return -1;
    int single, multi;
    top_layout(&top, &single, &multi);
    if (single) {
        hid_t raw = -1, reads = -1;
        int found = open_member_group(ctx, fid, "Raw", &raw);
        if (found > 0) {
            found = open_member_group(ctx, raw, "Reads", &reads);
            H5Oclose(raw);
        }
        if (found <= 0) return found; /* no Raw/Reads: no reads */
        link_list members;
        int rc = list_links(ctx, reads, &members);
        if (rc == 0) rc = layout_reads(&w, reads, &members, single_read_layout);
        H5Oclose(reads);
        return rc;
    }
    if (!multi) return fallback(ctx, "layout told by file_type/file_version");
    keep_read_groups(&top);
    return layout_reads(&w, fid, &top, multi_read_layout);
}

/* The reads of a FAST5 file from its layout alone (numapore.signal.fast5.read_layout): 0 and
 * ctx->layout[0, nlayout), or NP5_FALLBACK with ctx->reason. */
static int np5_layout(np5_ctx *ctx, const char *path) {
    arena_reset(&ctx->arena);
    ctx->nlayout = 0;
    ctx->reason = NULL;
    hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, ctx->fapl);
    if (fid < 0) {
        fallback(ctx, "cannot open as HDF5");
        return NP5_FALLBACK;
    }
    int rc = layout_file(ctx, fid);
    H5Fclose(fid);
    if (rc < 0) {
        fallback(ctx, "out of memory");
        return NP5_FALLBACK;
    }
    return 0;
}

/* ---------- encoding ---------- */

static const char *TYPE_NAMES[] = {"int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
                                   "uint32_t", "uint64_t", "float", "double", "char*", "enum"};

static int put(np5_ctx *ctx, size_t *len, const void *data, size_t n) {
    if (grow(&ctx->raw, &ctx->raw_cap, *len + n) < 0) return -1;
    memcpy(ctx->raw + *len, data, n);
    *len += n;
    return 0;
}

/* Pack one aux value like struct.pack (a value out of its column's range: fall back). */
static int put_aux(np5_ctx *ctx, size_t *len, const np5_field *f, const np5_aux *a) {
    if (f->type == T_STR) {
        const char *s = a && a->kind == V_STR ? a->s : "";
        uint64_t n = strlen(s);
        return put(ctx, len, &n, 8) < 0 ? -1 : put(ctx, len, s, n);
    }
    if (f->type == T_F32 || f->type == T_F64) {
        double d = a && a->kind != V_NONE ? a->d : NAN;
        if (f->type == T_F64) return put(ctx, len, &d, 8);
        float x = (float)d;
        if (isinf(x) && !isinf(d)) return fallback(ctx, "value too large for a float column");
        return put(ctx, len, &x, 4);
    }
    static const int64_t lo[] = {INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN, 0, 0, 0, 0};
    static const uint64_t hi[] = {INT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX,
                                  UINT8_MAX, UINT16_MAX, UINT32_MAX, UINT64_MAX};
    static const int size[] = {1, 2, 4, 8, 1, 2, 4, 8};
    int t = f->type == T_ENUM ? T_U8 : f->type;
    uint64_t bits;
    if (!a || a->kind == V_NONE) {
        bits = hi[t]; /* slow5lib's missing-value sentinel: the type's maximum */
    } else if (a->kind == V_UINT) {
        if (a->u > hi[t]) return fallback(ctx, "value out of its column's range");
        bits = a->u;
    } else {
        if (a->i < lo[t] || (a->i > 0 && (uint64_t)a->i > hi[t]))
            return fallback(ctx, "value out of its column's range");
        bits = (uint64_t)a->i;
    }
    return put(ctx, len, &bits, size[t]); /* little-endian host */
}

static int same_labels(const char *a, const char *b) {
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

static int encode_read(np5_ctx *ctx, np5_read *rd) {
    /* conform_aux: every aux field of the read must be an output column of the same type */
    const np5_aux *values[MAX_AUX] = {0};
    for (int k = 0; k < rd->naux; k++) {
        int found = -1;
        for (int f = 0; f < ctx->nfields; f++)
            if (!strcmp(ctx->fields[f].name, rd->aux[k].name)) found = f;
        if (found < 0) return fallback(ctx, "aux field not among the output's columns");
        if (ctx->fields[found].type != rd->aux[k].type ||
            !same_labels(ctx->fields[found].labels, rd->aux[k].labels))
            return fallback(ctx, "aux field of another type than its column");
        values[found] = &rd->aux[k];
    }
    int run = find_run(ctx, rd->run_id);
    if (run < 0) return fallback(ctx, "run without a read group");
    size_t len = 0;
    uint16_t id_len = (uint16_t)strlen(rd->read_id);
    if (put(ctx, &len, &id_len, 2) < 0 || put(ctx, &len, rd->read_id, id_len) < 0) return -1;
    uint32_t rg = ctx->run_groups[run];
    double prim[4] = {rd->digitisation, rd->offset, rd->range, rd->sampling_rate};
    if (put(ctx, &len, &rg, 4) < 0 || put(ctx, &len, prim, 32) < 0) return -1;
    uint64_t sig_len;
    if (ctx->signal_compression) {
        size_t length_at = len;
        sig_len = 0;
        if (put(ctx, &len, &sig_len, 8) < 0) return -1;
        if (grow(&ctx->raw, &ctx->raw_cap, len + svbzd_bound(rd->nsamples)) < 0) return -1;
        sig_len = svbzd_encode(rd->signal, rd->nsamples, ctx->raw + len);
        memcpy(ctx->raw + length_at, &sig_len, 8); /* slow5lib stores the byte count */
        len += sig_len;
    } else {
        sig_len = rd->nsamples;
        if (put(ctx, &len, &sig_len, 8) < 0 || put(ctx, &len, rd->signal, 2 * rd->nsamples) < 0)
            return -1;
    }
    for (int f = 0; f < ctx->nfields; f++)
        if (put_aux(ctx, &len, &ctx->fields[f], values[f]) < 0) return -1;
    size_t bound = ctx->record_compression ? compressBound(len) : len;
    if (grow(&ctx->out, &ctx->out_cap, ctx->out_len + 8 + bound) < 0) return -1;
    unsigned char *dst = ctx->out + ctx->out_len;
    uint64_t size;
    if (ctx->record_compression) {
        if (!ctx->zs_ready) {
            memset(&ctx->zs, 0, sizeof ctx->zs);
            /* zlib.compress(raw): default level, 32 kB window, memLevel 8, default strategy */
            if (deflateInit2(&ctx->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, MAX_WBITS, 8,
                             Z_DEFAULT_STRATEGY) != Z_OK)
                return fallback(ctx, "zlib");
            ctx->zs_ready = 1;
        } else if (deflateReset(&ctx->zs) != Z_OK) {
            return fallback(ctx, "zlib");
        }
        ctx->zs.next_in = ctx->raw;
        ctx->zs.avail_in = (uInt)len;
        ctx->zs.next_out = dst + 8;
        ctx->zs.avail_out = (uInt)bound;
        if (deflate(&ctx->zs, Z_FINISH) != Z_STREAM_END) return fallback(ctx, "zlib");
        size = bound - ctx->zs.avail_out;
    } else {
        memcpy(dst + 8, ctx->raw, len);
        size = len;
    }
    memcpy(dst, &size, 8);
    rd->blob_offset = ctx->out_len;
    rd->blob_size = 8 + size;
    ctx->out_len += 8 + size;
    return 0;
}

/* ---------- entry point ---------- */

/* Files up to ctx->core_max bytes (numapore.signal.fast5_core.CORE_MAX_BYTES) are read whole
 * by HDF5's core driver, into memory without a backing store: one sequential read(), which
 * storage serves in large requests (FUSE: 1 MiB each). The default driver asks for each object
 * apart, ~18 requests of a few kB per read group: on NFS or a seek-bound disk each one costs a
 * latency. A file read whole stays open for the next call on the same, unchanged file (the
 * next slice of a multi-read file), so each reader process reads it once.
 * Memory: one file image per context (reader process), at most core_max bytes. */
static int same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static void forget_file(np5_ctx *ctx) {
    if (ctx->kept >= 0) H5Fclose(ctx->kept);
    ctx->kept = -1;
    free(ctx->kept_path);
    ctx->kept_path = NULL;
}

/* The file for a call (*whole: read whole by the core driver), or < 0. */
static hid_t open_file(np5_ctx *ctx, const char *path, int *whole) {
    struct stat st;
    int known = stat(path, &st) == 0;
    if (ctx->kept >= 0 && known && !strcmp(ctx->kept_path, path) &&
        same_file(&st, &ctx->kept_stat)) {
        hid_t fid = ctx->kept;
        ctx->kept = -1; /* the call keeps it again or closes it */
        *whole = 1;
        return fid;
    }
    forget_file(ctx);
    *whole = known && S_ISREG(st.st_mode) && st.st_size <= ctx->core_max;
    if (*whole) ctx->kept_stat = st;
    return H5Fopen(path, H5F_ACC_RDONLY, *whole ? ctx->core_fapl : ctx->fapl);
}

static int keep_file(np5_ctx *ctx, const char *path) {
    if (!ctx->kept_path || strcmp(ctx->kept_path, path)) {
        free(ctx->kept_path);
        ctx->kept_path = strdup(path);
    }
    return ctx->kept_path ? 0 : -1;
}

/* Read a FAST5 file (read groups [start, stop) of a multi-read file; stop < 0: to the end).
 * NP5_ENCODED: every read encoded (ctx->out, reads[i].blob_*); NP5_DECODED: reads decoded
 * for Python (output columns unknown, or a read of a run without a read group);
 * NP5_FALLBACK: ctx->reason says why the Python reader must read this file. */
static int np5_read_file(np5_ctx *ctx, const char *path, int start, int stop) {
    arena_reset(&ctx->arena);
    ctx->nreads = 0;
    ctx->groups = 0;
    ctx->out_len = 0;
    ctx->reason = NULL;
    int whole;
    hid_t fid = open_file(ctx, path, &whole);
    if (fid < 0) {
        fallback(ctx, "cannot open as HDF5");
        return NP5_FALLBACK;
    }
    int rc = walk_file(ctx, fid, start, stop);
    /* keep a file read whole while later read groups remain to be read (only the file itself
     * open: a fallback's leftovers are closed with it) */
    if (whole && rc == 0 && stop >= 0 && stop < ctx->groups &&
        H5Fget_obj_count(fid, H5F_OBJ_ALL) == 1 && keep_file(ctx, path) == 0)
        ctx->kept = fid;
    else
        H5Fclose(fid);
    if (rc < 0) {
        fallback(ctx, "out of memory");
        return NP5_FALLBACK;
    }
    int known = ctx->has_schema;
    for (int k = 0; k < ctx->nreads && known; k++) known = find_run(ctx, ctx->reads[k].run_id) >= 0;
    if (!known) return NP5_DECODED;
    for (int k = 0; k < ctx->nreads; k++)
        if (encode_read(ctx, &ctx->reads[k]) < 0) {
            fallback(ctx, "out of memory");
            return NP5_FALLBACK;
        }
    return NP5_ENCODED;
}

static const char *np5_type_name(int type) { return TYPE_NAMES[type]; }
