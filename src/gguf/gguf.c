/*
 * gguf.c — bounds-checked GGUF reader (v2, v3, little-endian).
 *
 * DESIGN. One forward pass over the header with a cursor that cannot read
 * past the end. Every count is compared with the bytes left before anything
 * is allocated for it, so a hostile file costs at most a small constant times
 * its own size in memory. Values stay in the mapping; only key and tensor
 * names are copied (NUL-terminated), plus one offset table per string array
 * so that gguf_arr_str is O(1) on 200k-token vocabularies. Names are indexed
 * by a hash table, which also finds duplicates in linear time.
 *
 * Decisions where the format leaves room (tests/test_gguf.c checks each):
 *   - versions 2 and 3 only (v1 used 32-bit counts); a byte-swapped version
 *     means a big-endian file: both are GLIM_EUNSUPPORTED;
 *   - keys and tensor names: non-empty, no NUL byte, valid UTF-8;
 *   - nested arrays are rejected (no model uses them; they only cost memory);
 *   - BOOL values must be 0 or 1;
 *   - tensor dims are 1..INT64_MAX (a zero-element tensor is rejected), the
 *     element count must fit int64 and the byte size size_t;
 *   - general.alignment must be a UINT32, nonzero power of two;
 *   - tensor data ranges must be inside the file and must not overlap.
 *
 * Every error is GLIM_EFORMAT (or GLIM_EUNSUPPORTED) with one line:
 *   "<file>: <item>: <field> (at offset N): <what was wrong>".
 * Single-threaded open; the handle is read-only afterwards.
 */
#include "gguf.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../base/alloc.h"
#include "../base/mapfile.h"
#include "../quant/quant.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads little-endian fields with memcpy; a big-endian host needs byte swaps"
#endif

/* Smallest possible encodings, used to bound counts before allocating:
 * kv = key length (8) + 1 key byte + type (4) + 1 value byte;
 * tensor info = name length (8) + 1 name byte + n_dims (4) + one dim (8) + type (4) + offset (8). */
#define MIN_KV_BYTES 14u
#define MIN_TENSOR_INFO_BYTES 33u

/* bytes per element of each fixed-size value type; 0 = variable (string) or array */
static const uint8_t VT_SIZE[GGUF_VT_COUNT] = {
    [GGUF_VT_UINT8] = 1,  [GGUF_VT_INT8] = 1,    [GGUF_VT_UINT16] = 2, [GGUF_VT_INT16] = 2,
    [GGUF_VT_UINT32] = 4, [GGUF_VT_INT32] = 4,   [GGUF_VT_FLOAT32] = 4, [GGUF_VT_BOOL] = 1,
    [GGUF_VT_UINT64] = 8, [GGUF_VT_INT64] = 8,   [GGUF_VT_FLOAT64] = 8,
};

static const char *const VT_NAME[GGUF_VT_COUNT] = {
    [GGUF_VT_UINT8] = "u8",    [GGUF_VT_INT8] = "i8",     [GGUF_VT_UINT16] = "u16",
    [GGUF_VT_INT16] = "i16",   [GGUF_VT_UINT32] = "u32",  [GGUF_VT_INT32] = "i32",
    [GGUF_VT_FLOAT32] = "f32", [GGUF_VT_BOOL] = "bool",   [GGUF_VT_STRING] = "str",
    [GGUF_VT_ARRAY] = "arr",   [GGUF_VT_UINT64] = "u64",  [GGUF_VT_INT64] = "i64",
    [GGUF_VT_FLOAT64] = "f64",
};

/* open-addressing table of name -> index; slot holds index + 1, 0 = empty */
struct name_index {
    int64_t *slot;   /* owned */
    size_t   mask;   /* capacity - 1 (capacity is a power of two) */
};

struct gguf_file {
    char              *path;        /* owned: the name used in messages */
    struct mapfile     map;         /* owned; zero for gguf_open_mem */
    const uint8_t     *base;        /* borrowed: the mapping or the caller's buffer */
    size_t             size;
    uint32_t           version;
    size_t             alignment;
    size_t             data_offset;
    int64_t            n_kv;
    struct gguf_kv    *kv;          /* owned [n_kv] */
    int64_t            n_tensors;
    struct gguf_tensor *tensors;    /* owned [n_tensors] */
    uint64_t          *info_offs;   /* owned [n_tensors]: file offset of each tensor info (messages) */
    struct name_index  kv_index, tensor_index;
};

/* the parse state: where we are and what item we are in (for messages) */
struct cursor {
    struct gguf_file *f;
    size_t            pos;
    char              item[200];   /* "kv 3 'general.name'", "tensor 'x' (info at offset N)" */
    struct glim_err  *err;
};

/* ---- messages ---------------------------------------------------------- */

static int cur_fail(struct cursor *c, int code, size_t at, const char *field, const char *fmt, ...)
    GLIM_PRINTF(5, 6);

/* "<file>: <item>: <field> (at offset N): <msg>" */
static int cur_fail(struct cursor *c, int code, size_t at, const char *field, const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return glim_fail(c->err, code, "%s: %s%s%s (at offset %zu): %s", c->f->path, c->item,
                     c->item[0] ? ": " : "", field, at, msg);
}

static int cur_oom(struct cursor *c, const char *what)
{
    return glim_fail(c->err, GLIM_ENOMEM, "%s: out of memory for %s", c->f->path, what);
}

/* printable, bounded copy of a name for messages */
static void clip_name(char *dst, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 1 < cap; s++)
        dst[n++] = (*s >= 0x20 && *s < 0x7f) || (unsigned char)*s >= 0x80 ? *s : '?';
    dst[n] = '\0';
    if (*s && cap > 4)
        memcpy(dst + cap - 4, "...", 4);
}

/* ---- primitive reads: each checks the bytes left first ----------------- */

static size_t cur_left(const struct cursor *c) { return c->f->size - c->pos; }

static int cur_need(struct cursor *c, uint64_t n, const char *field)
{
    if (n > cur_left(c))
        return cur_fail(c, GLIM_EFORMAT, c->pos, field,
                        "needs %llu bytes, only %zu left before end of file (size %zu)",
                        (unsigned long long)n, cur_left(c), c->f->size);
    return GLIM_OK;
}

static int cur_u32(struct cursor *c, const char *field, uint32_t *out)
{
    int rc = cur_need(c, 4, field);
    if (rc)
        return rc;
    memcpy(out, c->f->base + c->pos, 4);
    c->pos += 4;
    return GLIM_OK;
}

static int cur_u64(struct cursor *c, const char *field, uint64_t *out)
{
    int rc = cur_need(c, 8, field);
    if (rc)
        return rc;
    memcpy(out, c->f->base + c->pos, 8);
    c->pos += 8;
    return GLIM_OK;
}

/* a GGUF string: u64 length then bytes; returns (ptr, len) inside the buffer */
static int cur_str(struct cursor *c, const char *field, const char **ptr, size_t *len)
{
    size_t at = c->pos;
    uint64_t n;
    int rc = cur_u64(c, field, &n);
    if (rc)
        return rc;
    if (n > cur_left(c))
        return cur_fail(c, GLIM_EFORMAT, at, field,
                        "string length %llu runs past end of file (%zu bytes left, size %zu)",
                        (unsigned long long)n, cur_left(c), c->f->size);
    *ptr = (const char *)c->f->base + c->pos;
    *len = (size_t)n;
    c->pos += (size_t)n;
    return GLIM_OK;
}

/* ---- names: UTF-8 check and the hash index ----------------------------- */

/* length of the valid UTF-8 sequence at s (1..4), or 0 when invalid */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    if (len == 0 || s[0] > 0xf4 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (len == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0)))
        return 0;   /* overlong, or a UTF-16 surrogate */
    if (len == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90)))
        return 0;   /* overlong, or above U+10FFFF */
    return len;
}

/* NULL when (s, n) is a usable key/tensor name, else what is wrong with it */
static const char *name_problem(const char *s, size_t n)
{
    if (n == 0)
        return "empty name";
    if (memchr(s, '\0', n))
        return "name contains a NUL byte";
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0)
            return "name is not valid UTF-8";
        i += k;
    }
    return NULL;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int index_init(struct name_index *ix, int64_t n)
{
    size_t cap = 8;
    while (cap < (size_t)n * 2)
        cap *= 2;
    ix->slot = glim_calloc(cap, sizeof *ix->slot);
    ix->mask = cap - 1;
    return ix->slot ? GLIM_OK : GLIM_ENOMEM;
}

typedef const char *(*name_at_fn)(const struct gguf_file *f, int64_t i);

static const char *kv_name_at(const struct gguf_file *f, int64_t i) { return f->kv[i].key; }
static const char *tensor_name_at(const struct gguf_file *f, int64_t i) { return f->tensors[i].name; }

/* slot for name: the one holding it, or the empty one where it would go */
static size_t index_slot(const struct gguf_file *f, const struct name_index *ix, name_at_fn name_at,
                         const char *name)
{
    size_t i = name_hash(name) & ix->mask;
    while (ix->slot[i] && strcmp(name_at(f, ix->slot[i] - 1), name) != 0)
        i = (i + 1) & ix->mask;
    return i;
}

static int64_t index_find(const struct gguf_file *f, const struct name_index *ix, name_at_fn name_at,
                          const char *name)
{
    if (!ix->slot)
        return -1;
    return ix->slot[index_slot(f, ix, name_at, name)] - 1;
}

/* adds entry idx; returns the index of an earlier entry with the same name, or -1 */
static int64_t index_add(const struct gguf_file *f, struct name_index *ix, name_at_fn name_at, int64_t idx)
{
    size_t s = index_slot(f, ix, name_at, name_at(f, idx));
    if (ix->slot[s])
        return ix->slot[s] - 1;
    ix->slot[s] = idx + 1;
    return -1;
}

/* reads a name field, validates it and returns an owned NUL-terminated copy */
static int cur_name(struct cursor *c, const char *field, char **out)
{
    size_t at = c->pos, n = 0;
    const char *s = NULL;
    int rc = cur_str(c, field, &s, &n);
    if (rc)
        return rc;
    const char *why = name_problem(s, n);
    if (why)
        return cur_fail(c, GLIM_EFORMAT, at, field, "%s (length %zu)", why, n);
    if (!(*out = glim_strndup(s, n)))
        return cur_oom(c, field);
    return GLIM_OK;
}

/* ---- metadata ---------------------------------------------------------- */

/* skips n fixed-size values of type t; BOOL bytes must be 0 or 1 */
static int skip_fixed(struct cursor *c, enum gguf_vtype t, uint64_t n)
{
    size_t at = c->pos, esz = VT_SIZE[t];
    if (n > cur_left(c) / esz)
        return cur_fail(c, GLIM_EFORMAT, at, "value",
                        "%llu x %s (%zu bytes each) runs past end of file (%zu bytes left, size %zu)",
                        (unsigned long long)n, VT_NAME[t], esz, cur_left(c), c->f->size);
    if (t == GGUF_VT_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (c->f->base[at + i] > 1)
                return cur_fail(c, GLIM_EFORMAT, at + (size_t)i, "value",
                                "bool must be 0 or 1, got %u", c->f->base[at + i]);
    c->pos += (size_t)(n * esz);
    return GLIM_OK;
}

/* string array: validate every element and record where each one starts */
static int read_str_array(struct cursor *c, struct gguf_kv *kv)
{
    if (kv->arr_n > cur_left(c) / 8)
        return cur_fail(c, GLIM_EFORMAT, c->pos, "array count",
                        "%llu strings cannot fit in the %zu bytes left (size %zu)",
                        (unsigned long long)kv->arr_n, cur_left(c), c->f->size);
    if (kv->arr_n == 0)
        return GLIM_OK;
    uint64_t *offs = glim_malloc((size_t)kv->arr_n * sizeof *offs);
    if (!offs)
        return cur_oom(c, "string array offsets");
    kv->str_offs = offs;
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        offs[i] = c->pos;
        const char *s = NULL;
        size_t n = 0;
        char field[48];
        snprintf(field, sizeof field, "array element %llu", (unsigned long long)i);
        int rc = cur_str(c, field, &s, &n);
        if (rc)
            return rc;
    }
    return GLIM_OK;
}

static int read_array(struct cursor *c, struct gguf_kv *kv)
{
    size_t at = c->pos;
    uint32_t et;
    int rc = cur_u32(c, "array element type", &et);
    if (rc)
        return rc;
    if (et == GGUF_VT_ARRAY)
        return cur_fail(c, GLIM_EFORMAT, at, "array element type", "nested arrays are not supported");
    if (et >= GGUF_VT_COUNT)
        return cur_fail(c, GLIM_EFORMAT, at, "array element type",
                        "unknown value type %u (expected 0..%d)", et, GGUF_VT_COUNT - 1);
    kv->arr_type = (enum gguf_vtype)et;
    if ((rc = cur_u64(c, "array count", &kv->arr_n)))
        return rc;
    kv->data = c->f->base + c->pos;
    if (et == GGUF_VT_STRING)
        return read_str_array(c, kv);
    return skip_fixed(c, kv->arr_type, kv->arr_n);
}

static int read_value(struct cursor *c, struct gguf_kv *kv)
{
    size_t at = c->pos;
    uint32_t t;
    int rc = cur_u32(c, "value type", &t);
    if (rc)
        return rc;
    if (t >= GGUF_VT_COUNT)
        return cur_fail(c, GLIM_EFORMAT, at, "value type", "unknown value type %u (expected 0..%d)", t,
                        GGUF_VT_COUNT - 1);
    kv->type = (enum gguf_vtype)t;
    kv->offset = c->pos;
    kv->data = c->f->base + c->pos;
    if (t == GGUF_VT_ARRAY)
        return read_array(c, kv);
    if (t == GGUF_VT_STRING) {
        const char *s = NULL;
        size_t n = 0;
        return cur_str(c, "value", &s, &n);
    }
    return skip_fixed(c, kv->type, 1);
}

static int read_kvs(struct cursor *c)
{
    struct gguf_file *f = c->f;
    if (index_init(&f->kv_index, f->n_kv))
        return cur_oom(c, "key index");
    for (int64_t i = 0; i < f->n_kv; i++) {
        struct gguf_kv *kv = &f->kv[i];
        size_t at = c->pos;
        snprintf(c->item, sizeof c->item, "kv %lld", (long long)i);
        int rc = cur_name(c, "key", (char **)&kv->key);
        if (rc)
            return rc;
        char shown[96];
        clip_name(shown, sizeof shown, kv->key);
        snprintf(c->item, sizeof c->item, "kv %lld '%s'", (long long)i, shown);
        int64_t dup = index_add(f, &f->kv_index, kv_name_at, i);
        if (dup >= 0)
            return cur_fail(c, GLIM_EFORMAT, at, "key", "duplicate key (also kv %lld)", (long long)dup);
        if ((rc = read_value(c, kv)))
            return rc;
    }
    c->item[0] = '\0';
    return GLIM_OK;
}

static int read_alignment(struct cursor *c)
{
    struct gguf_file *f = c->f;
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_kv *kv = gguf_kv_find(f, "general.alignment");
    if (!kv)
        return GLIM_OK;
    snprintf(c->item, sizeof c->item, "kv 'general.alignment'");
    if (kv->type != GGUF_VT_UINT32)
        return cur_fail(c, GLIM_EFORMAT, kv->offset, "value", "expected u32, got %s", VT_NAME[kv->type]);
    uint32_t a;
    memcpy(&a, kv->data, 4);
    if (a == 0 || (a & (a - 1)) != 0)
        return cur_fail(c, GLIM_EFORMAT, kv->offset, "value", "alignment %u is not a nonzero power of two", a);
    f->alignment = a;
    c->item[0] = '\0';
    return GLIM_OK;
}

/* ---- tensor infos ------------------------------------------------------ */

static int read_dims(struct cursor *c, struct gguf_tensor *t)
{
    size_t at = c->pos;
    uint32_t nd;
    int rc = cur_u32(c, "n_dims", &nd);
    if (rc)
        return rc;
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return cur_fail(c, GLIM_EFORMAT, at, "n_dims", "%u is outside 1..%d", nd, GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    t->n_elems = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        at = c->pos;
        uint64_t v;
        if ((rc = cur_u64(c, "dim", &v)))
            return rc;
        if (v == 0 || v > INT64_MAX)
            return cur_fail(c, GLIM_EFORMAT, at, "dim", "ne[%u] = %llu is outside 1..INT64_MAX", d,
                            (unsigned long long)v);
        t->ne[d] = (int64_t)v;
        if (__builtin_mul_overflow(t->n_elems, t->ne[d], &t->n_elems))
            return cur_fail(c, GLIM_EFORMAT, at, "dim", "element count overflows at ne[%u] = %llu", d,
                            (unsigned long long)v);
    }
    return GLIM_OK;
}

/* type id, block divisibility and byte size */
static int read_type(struct cursor *c, struct gguf_tensor *t)
{
    size_t at = c->pos;
    int rc = cur_u32(c, "type", &t->type);
    if (rc)
        return rc;
    const struct quant_traits *q = quant_traits(t->type);
    if (!q || q->block_elems <= 0 || q->block_bytes <= 0)
        return cur_fail(c, GLIM_EFORMAT, at, "type", "unknown tensor type id %u", t->type);
    if (t->ne[0] % q->block_elems != 0)
        return cur_fail(c, GLIM_EFORMAT, at, "type", "row of %lld elements is not a multiple of the %s block size %d",
                        (long long)t->ne[0], q->name ? q->name : "?", q->block_elems);
    uint64_t row, nbytes;
    if (__builtin_mul_overflow((uint64_t)(t->ne[0] / q->block_elems), (uint64_t)q->block_bytes, &row) ||
        __builtin_mul_overflow(row, (uint64_t)(t->n_elems / t->ne[0]), &nbytes) || nbytes > SIZE_MAX)
        return cur_fail(c, GLIM_EFORMAT, at, "type", "byte size of %lld %s elements overflows",
                        (long long)t->n_elems, q->name ? q->name : "?");
    t->nbytes = (size_t)nbytes;
    return GLIM_OK;
}

static int read_tensor_info(struct cursor *c, int64_t i)
{
    struct gguf_file *f = c->f;
    struct gguf_tensor *t = &f->tensors[i];
    size_t info_at = c->pos;
    f->info_offs[i] = info_at;
    snprintf(c->item, sizeof c->item, "tensor %lld (info at offset %zu)", (long long)i, info_at);
    int rc = cur_name(c, "name", (char **)&t->name);
    if (rc)
        return rc;
    char shown[96];
    clip_name(shown, sizeof shown, t->name);
    snprintf(c->item, sizeof c->item, "tensor '%s' (info at offset %zu)", shown, info_at);
    int64_t dup = index_add(f, &f->tensor_index, tensor_name_at, i);
    if (dup >= 0)
        return cur_fail(c, GLIM_EFORMAT, info_at, "name", "duplicate tensor name (also tensor %lld)",
                        (long long)dup);
    if ((rc = read_dims(c, t)) || (rc = read_type(c, t)))
        return rc;
    size_t at = c->pos;
    if ((rc = cur_u64(c, "offset", &t->offset)))
        return rc;
    if (t->offset % f->alignment != 0)
        return cur_fail(c, GLIM_EFORMAT, at, "offset", "%llu is not a multiple of the alignment %zu",
                        (unsigned long long)t->offset, f->alignment);
    return GLIM_OK;
}

/* data ranges: inside the file (tensor order) */
static int check_ranges(struct cursor *c)
{
    struct gguf_file *f = c->f;
    size_t room = f->size - f->data_offset;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        struct gguf_tensor *t = &f->tensors[i];
        char shown[96];
        clip_name(shown, sizeof shown, t->name);
        if (t->offset > room)
            return glim_fail(c->err, GLIM_EFORMAT,
                             "%s: tensor '%s' (info at offset %llu): data offset %llu is past end of file "
                             "(data section [%zu, %zu))",
                             f->path, shown, (unsigned long long)f->info_offs[i], (unsigned long long)t->offset,
                             f->data_offset, f->size);
        if (t->nbytes > room - t->offset)
            return glim_fail(c->err, GLIM_EFORMAT,
                             "%s: tensor '%s' (info at offset %llu): data [%llu, %llu) runs past end of file "
                             "(size %zu)",
                             f->path, shown, (unsigned long long)f->info_offs[i],
                             (unsigned long long)f->data_offset + t->offset,
                             (unsigned long long)f->data_offset + t->offset + t->nbytes, f->size);
        t->data = f->base + f->data_offset + t->offset;
    }
    return GLIM_OK;
}

static int cmp_by_offset(const void *a, const void *b)
{
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
    const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* no two tensors share bytes: sort by offset, compare neighbours */
static int check_overlaps(struct cursor *c)
{
    struct gguf_file *f = c->f;
    if (f->n_tensors < 2)
        return GLIM_OK;
    const struct gguf_tensor **order = glim_malloc((size_t)f->n_tensors * sizeof *order);
    if (!order)
        return cur_oom(c, "tensor order");
    for (int64_t i = 0; i < f->n_tensors; i++)
        order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n_tensors, sizeof *order, cmp_by_offset);
    int rc = GLIM_OK;
    for (int64_t i = 1; i < f->n_tensors && !rc; i++) {
        const struct gguf_tensor *a = order[i - 1], *b = order[i];
        if (a->offset + a->nbytes > b->offset) {
            char na[80], nb[80];
            clip_name(na, sizeof na, a->name);
            clip_name(nb, sizeof nb, b->name);
            rc = glim_fail(c->err, GLIM_EFORMAT,
                           "%s: tensor '%s' (info at offset %llu): data [%llu, %llu) overlaps tensor '%s' at %llu",
                           f->path, nb, (unsigned long long)f->info_offs[b - f->tensors],
                           (unsigned long long)(f->data_offset + b->offset),
                           (unsigned long long)(f->data_offset + b->offset + b->nbytes), na,
                           (unsigned long long)(f->data_offset + a->offset));
        }
    }
    glim_free(order);
    return rc;
}

static int read_tensors(struct cursor *c)
{
    struct gguf_file *f = c->f;
    if (index_init(&f->tensor_index, f->n_tensors))
        return cur_oom(c, "tensor index");
    for (int64_t i = 0; i < f->n_tensors; i++) {
        int rc = read_tensor_info(c, i);
        if (rc)
            return rc;
    }
    c->item[0] = '\0';
    size_t pad = (f->alignment - c->pos % f->alignment) % f->alignment;
    if (pad > SIZE_MAX - c->pos)
        return cur_fail(c, GLIM_EFORMAT, c->pos, "data section", "start overflows");
    f->data_offset = c->pos + pad;
    if (f->n_tensors == 0) {   /* a vocab-only file may end without padding */
        f->data_offset = GLIM_MIN(f->data_offset, f->size);
        return GLIM_OK;
    }
    if (f->data_offset > f->size)
        return cur_fail(c, GLIM_EFORMAT, c->pos, "data section",
                        "starts at %zu (aligned to %zu), past end of file (size %zu)", f->data_offset,
                        f->alignment, f->size);
    int rc = check_ranges(c);
    return rc ? rc : check_overlaps(c);
}

/* ---- header and open --------------------------------------------------- */

static int read_header(struct cursor *c)
{
    struct gguf_file *f = c->f;
    if (f->size < 4 || memcmp(f->base, "GGUF", 4) != 0) {
        unsigned char m[4] = {0};
        memcpy(m, f->base, GLIM_MIN(f->size, (size_t)4));
        return cur_fail(c, GLIM_EFORMAT, 0, "magic", "expected 'GGUF', got %02x %02x %02x %02x (file size %zu)",
                        m[0], m[1], m[2], m[3], f->size);
    }
    c->pos = 4;
    int rc = cur_u32(c, "version", &f->version);
    if (rc)
        return rc;
    if (f->version != 2 && f->version != 3) {
        bool swapped = (f->version & 0xffff) == 0 && f->version != 0;
        return cur_fail(c, GLIM_EUNSUPPORTED, 4, "version", "%u is not supported (expected 2 or 3%s)", f->version,
                        swapped ? "; this looks like a big-endian file" : "");
    }
    uint64_t n_tensors, n_kv;
    if ((rc = cur_u64(c, "tensor count", &n_tensors)) || (rc = cur_u64(c, "kv count", &n_kv)))
        return rc;
    size_t left = cur_left(c);
    if (n_kv > left / MIN_KV_BYTES)
        return cur_fail(c, GLIM_EFORMAT, 16, "kv count", "%llu key/values cannot fit in the %zu bytes left",
                        (unsigned long long)n_kv, left);
    left -= (size_t)n_kv * MIN_KV_BYTES;
    if (n_tensors > left / MIN_TENSOR_INFO_BYTES)
        return cur_fail(c, GLIM_EFORMAT, 8, "tensor count", "%llu tensor infos cannot fit in the %zu bytes left",
                        (unsigned long long)n_tensors, left);
    f->n_kv = (int64_t)n_kv;
    f->n_tensors = (int64_t)n_tensors;
    f->kv = glim_calloc((size_t)n_kv, sizeof *f->kv);
    f->tensors = glim_calloc((size_t)n_tensors, sizeof *f->tensors);
    f->info_offs = glim_calloc((size_t)n_tensors, sizeof *f->info_offs);
    if (!f->kv || !f->tensors || !f->info_offs)
        return cur_oom(c, "tensor and kv tables");
    return GLIM_OK;
}

static int parse(struct gguf_file *f, struct glim_err *err)
{
    struct cursor c = {.f = f, .pos = 0, .err = err};
    c.item[0] = '\0';
    int rc = read_header(&c);
    if (!rc)
        rc = read_kvs(&c);
    if (!rc)
        rc = read_alignment(&c);
    if (!rc)
        rc = read_tensors(&c);
    return rc;
}

static struct gguf_file *file_new(const char *name, struct glim_err *err)
{
    struct gguf_file *f = glim_calloc(1, sizeof *f);
    if (f && !(f->path = glim_strndup(name, strlen(name)))) {
        glim_free(f);
        f = NULL;
    }
    if (!f)
        glim_fail(err, GLIM_ENOMEM, "%s: out of memory", name);
    return f;
}

int gguf_open_mem(const void *buf, size_t size, const char *name, struct gguf_file **out,
                  struct glim_err *err)
{
    static const uint8_t empty[1];
    if (!name)
        name = "<memory>";
    struct gguf_file *f = file_new(name, err);
    if (!f)
        return GLIM_ENOMEM;
    f->base = buf ? buf : empty;
    f->size = buf ? size : 0;
    int rc = parse(f, err);
    if (rc) {
        gguf_close(f);
        return rc;
    }
    *out = f;
    return GLIM_OK;
}

int gguf_open(const char *path, struct gguf_file **out, struct glim_err *err)
{
    struct gguf_file *f = file_new(path, err);
    if (!f)
        return GLIM_ENOMEM;
    int rc = mapfile_open(&f->map, path, err);
    if (rc)
        goto fail;
    static const uint8_t empty[1];
    f->base = f->map.data ? f->map.data : empty;
    f->size = f->map.size;
    if ((rc = parse(f, err)))
        goto fail;
    *out = f;
    return GLIM_OK;
fail:
    gguf_close(f);
    return rc;
}

void gguf_close(struct gguf_file *f)
{
    if (!f)
        return;
    for (int64_t i = 0; f->kv && i < f->n_kv; i++) {
        glim_free((void *)f->kv[i].key);
        glim_free((void *)f->kv[i].str_offs);
    }
    for (int64_t i = 0; f->tensors && i < f->n_tensors; i++)
        glim_free((void *)f->tensors[i].name);
    glim_free(f->kv);
    glim_free(f->tensors);
    glim_free(f->info_offs);
    glim_free(f->kv_index.slot);
    glim_free(f->tensor_index.slot);
    mapfile_close(&f->map);
    glim_free(f->path);
    glim_free(f);
}

/* ---- file accessors ---------------------------------------------------- */

const char *gguf_path(const struct gguf_file *f) { return f->path; }
uint32_t gguf_version(const struct gguf_file *f) { return f->version; }
size_t gguf_alignment(const struct gguf_file *f) { return f->alignment; }
size_t gguf_data_offset(const struct gguf_file *f) { return f->data_offset; }
size_t gguf_file_size(const struct gguf_file *f) { return f->size; }

int64_t gguf_kv_count(const struct gguf_file *f) { return f->n_kv; }

const struct gguf_kv *gguf_kv_at(const struct gguf_file *f, int64_t i)
{
    return i >= 0 && i < f->n_kv ? &f->kv[i] : NULL;
}

const struct gguf_kv *gguf_kv_find(const struct gguf_file *f, const char *key)
{
    int64_t i = key ? index_find(f, &f->kv_index, kv_name_at, key) : -1;
    return i >= 0 ? &f->kv[i] : NULL;
}

const char *gguf_vtype_name(enum gguf_vtype t)
{
    return (unsigned)t < GGUF_VT_COUNT ? VT_NAME[t] : "?";
}

int64_t gguf_tensor_count(const struct gguf_file *f) { return f->n_tensors; }

const struct gguf_tensor *gguf_tensor_at(const struct gguf_file *f, int64_t i)
{
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const struct gguf_tensor *gguf_tensor_find(const struct gguf_file *f, const char *name)
{
    int64_t i = name ? index_find(f, &f->tensor_index, tensor_name_at, name) : -1;
    return i >= 0 ? &f->tensors[i] : NULL;
}

/* ---- value decoding ---------------------------------------------------- */

static bool is_int_type(enum gguf_vtype t)
{
    return t == GGUF_VT_UINT8 || t == GGUF_VT_INT8 || t == GGUF_VT_UINT16 || t == GGUF_VT_INT16 ||
           t == GGUF_VT_UINT32 || t == GGUF_VT_INT32 || t == GGUF_VT_UINT64 || t == GGUF_VT_INT64;
}

/* one integer (or bool) element at p; EFORMAT for other types or a u64 above INT64_MAX */
static int decode_int(enum gguf_vtype t, const uint8_t *p, int64_t *out)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            uint64_t u64; int64_t i64; } v;
    if (!is_int_type(t) && t != GGUF_VT_BOOL)
        return GLIM_EFORMAT;
    memcpy(&v, p, VT_SIZE[t]);
    switch (t) {
    case GGUF_VT_UINT8: case GGUF_VT_BOOL: *out = v.u8; break;
    case GGUF_VT_INT8: *out = v.i8; break;
    case GGUF_VT_UINT16: *out = v.u16; break;
    case GGUF_VT_INT16: *out = v.i16; break;
    case GGUF_VT_UINT32: *out = v.u32; break;
    case GGUF_VT_INT32: *out = v.i32; break;
    case GGUF_VT_INT64: *out = v.i64; break;
    default:
        if (v.u64 > INT64_MAX)
            return GLIM_EFORMAT;
        *out = (int64_t)v.u64;
    }
    return GLIM_OK;
}

static int decode_float(enum gguf_vtype t, const uint8_t *p, double *out)
{
    if (t == GGUF_VT_FLOAT32) {
        float x;
        memcpy(&x, p, 4);
        *out = x;
        return GLIM_OK;
    }
    if (t == GGUF_VT_FLOAT64) {
        memcpy(out, p, 8);
        return GLIM_OK;
    }
    return GLIM_EFORMAT;
}

int gguf_kv_int(const struct gguf_kv *kv, int64_t *out) { return decode_int(kv->type, kv->data, out); }
int gguf_kv_float(const struct gguf_kv *kv, double *out) { return decode_float(kv->type, kv->data, out); }

int gguf_kv_str(const struct gguf_kv *kv, const char **ptr, size_t *len)
{
    if (kv->type != GGUF_VT_STRING)
        return GLIM_EFORMAT;
    uint64_t n;
    memcpy(&n, kv->data, 8);   /* checked against the file at open */
    *ptr = (const char *)kv->data + 8;
    *len = (size_t)n;
    return GLIM_OK;
}

int gguf_arr_int(const struct gguf_kv *kv, uint64_t i, int64_t *out)
{
    if (kv->type != GGUF_VT_ARRAY)
        return GLIM_EFORMAT;
    if (i >= kv->arr_n)
        return GLIM_ERANGE;
    if (!is_int_type(kv->arr_type) && kv->arr_type != GGUF_VT_BOOL)
        return GLIM_EFORMAT;
    return decode_int(kv->arr_type, kv->data + i * VT_SIZE[kv->arr_type], out);
}

int gguf_arr_float(const struct gguf_kv *kv, uint64_t i, double *out)
{
    if (kv->type != GGUF_VT_ARRAY)
        return GLIM_EFORMAT;
    if (i >= kv->arr_n)
        return GLIM_ERANGE;
    const uint8_t *p = kv->data + i * (VT_SIZE[kv->arr_type] ? VT_SIZE[kv->arr_type] : 0);
    if (is_int_type(kv->arr_type)) {
        int64_t v = 0;
        if (decode_int(kv->arr_type, p, &v) == GLIM_OK) {
            *out = (double)v;
        } else {   /* a u64 above INT64_MAX is still a number */
            uint64_t u;
            memcpy(&u, p, 8);
            *out = (double)u;
        }
        return GLIM_OK;
    }
    return decode_float(kv->arr_type, p, out);
}

int gguf_arr_str(const struct gguf_kv *kv, uint64_t i, const char **ptr, size_t *len)
{
    if (kv->type != GGUF_VT_ARRAY || kv->arr_type != GGUF_VT_STRING)
        return GLIM_EFORMAT;
    if (i >= kv->arr_n)
        return GLIM_ERANGE;
    /* kv->data is element 0, which starts at str_offs[0] in the file */
    const uint8_t *p = kv->data + (kv->str_offs[i] - kv->str_offs[0]);
    uint64_t n;
    memcpy(&n, p, 8);
    *ptr = (const char *)p + 8;
    *len = (size_t)n;
    return GLIM_OK;
}

/* ---- typed getters by key ---------------------------------------------- */

static int wrong_type(const struct gguf_file *f, const struct gguf_kv *kv, const char *want,
                      struct glim_err *err)
{
    char shown[96];
    clip_name(shown, sizeof shown, kv->key);
    return glim_fail(err, GLIM_EFORMAT, "%s: key '%s' (at offset %llu): expected %s, got %s%s%s", f->path,
                     shown, (unsigned long long)kv->offset, want, VT_NAME[kv->type],
                     kv->type == GGUF_VT_ARRAY ? " of " : "",
                     kv->type == GGUF_VT_ARRAY ? VT_NAME[kv->arr_type] : "");
}

/* A key's value, decoded by get_value. */
struct kv_value {
    const struct gguf_kv *kv;
    int64_t               i;   /* as: GGUF_VT_INT64 */
    double                f;   /* as: GGUF_VT_FLOAT64 */
    const char           *s;   /* as: GGUF_VT_STRING */
    size_t                n;
};

/* The one core of the typed getters. as picks the decoding: GGUF_VT_INT64 any
 * integer type that fits i64, GGUF_VT_FLOAT64 f32 or f64, GGUF_VT_STRING a
 * string, any other type exactly that type (the caller reads v->kv).
 * ENOTFOUND without a message when the key is absent (absence is often fine);
 * EFORMAT naming `want` when the value is another type. */
static int get_value(const struct gguf_file *f, const char *key, enum gguf_vtype as, const char *want,
                     struct kv_value *v, struct glim_err *err)
{
    *v = (struct kv_value){ .kv = gguf_kv_find(f, key) };
    const struct gguf_kv *kv = v->kv;
    if (!kv)
        return GLIM_ENOTFOUND;
    int rc;
    switch (as) {
    case GGUF_VT_INT64:
        rc = is_int_type(kv->type) ? decode_int(kv->type, kv->data, &v->i) : GLIM_EFORMAT;
        break;
    case GGUF_VT_FLOAT64: rc = decode_float(kv->type, kv->data, &v->f); break;
    case GGUF_VT_STRING: rc = gguf_kv_str(kv, &v->s, &v->n); break;
    default: rc = kv->type == as ? GLIM_OK : GLIM_EFORMAT;
    }
    return rc ? wrong_type(f, kv, want, err) : GLIM_OK;
}

int gguf_get_i64(const struct gguf_file *f, const char *key, int64_t *out, struct glim_err *err)
{
    struct kv_value v;
    int rc = get_value(f, key, GGUF_VT_INT64, "an integer that fits i64", &v, err);
    if (!rc)
        *out = v.i;
    return rc;
}

int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out, struct glim_err *err)
{
    struct kv_value v;
    int rc = get_value(f, key, GGUF_VT_INT64, "an integer that fits u32", &v, err);
    if (rc)
        return rc;
    if (v.i < 0 || v.i > UINT32_MAX)
        return glim_fail(err, GLIM_EFORMAT, "%s: key '%s' (at offset %llu): %lld does not fit u32", f->path, key,
                         (unsigned long long)v.kv->offset, (long long)v.i);
    *out = (uint32_t)v.i;
    return GLIM_OK;
}

int gguf_get_f32(const struct gguf_file *f, const char *key, float *out, struct glim_err *err)
{
    struct kv_value v;
    int rc = get_value(f, key, GGUF_VT_FLOAT64, "f32 or f64", &v, err);
    if (!rc)
        *out = (float)v.f;
    return rc;
}

int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out, struct glim_err *err)
{
    struct kv_value v;
    int rc = get_value(f, key, GGUF_VT_BOOL, "bool", &v, err);
    if (!rc)
        *out = v.kv->data[0] != 0;
    return rc;
}

int gguf_get_str(const struct gguf_file *f, const char *key, const char **ptr, size_t *len,
                 struct glim_err *err)
{
    struct kv_value v;
    int rc = get_value(f, key, GGUF_VT_STRING, "str", &v, err);
    if (!rc)
        *ptr = v.s, *len = v.n;
    return rc;
}

int gguf_get_arr(const struct gguf_file *f, const char *key, const struct gguf_kv **out,
                 struct glim_err *err)
{
    struct kv_value v;
    int rc = get_value(f, key, GGUF_VT_ARRAY, "arr", &v, err);
    if (!rc)
        *out = v.kv;
    return rc;
}
