/*
 * gguf_write.c — GGUF v3 writer for quantize, mkmodel and test fixtures.
 *
 * DESIGN. Each key/value is serialized into its own small record when it is
 * added (so general.alignment can be replaced in place); tensors are kept as
 * descriptions plus a borrowed, copied or generated data source. The file is
 * laid out like llama.cpp's writer: header, kv records, tensor infos, zero
 * padding to the alignment, then each tensor's bytes padded to the alignment.
 * Data is streamed: at most one generated tensor is in memory at a time.
 * The output goes to "<path>.tmp.<pid>.<n>" and is renamed over <path> only
 * after a successful fsync, so a crash never leaves a half-written model.
 *
 * Add functions validate what the reader would reject (names, shapes, types,
 * duplicates) and return GLIM_EINVAL / GLIM_ENOMEM. One writer per thread.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "../base/alloc.h"
#include "../base/strbuf.h"
#include "../quant/quant.h"

#define MAX_TENSOR_NAME 63   /* llama.cpp's GGML_MAX_NAME (64) minus the NUL */
#define ALIGN_KEY "general.alignment"

struct wkv {
    char           *key;    /* owned */
    enum gguf_vtype type;
    struct strbuf   rec;    /* owned: the whole serialized record (key, type, value) */
};

struct wtensor {
    char              *name;    /* owned */
    uint32_t           type;
    int                n_dims;
    int64_t            ne[GGUF_MAX_DIMS];
    size_t             nbytes;
    uint64_t           offset;  /* relative to the data section; set at write time */
    const void        *data;    /* borrowed, or == owned */
    void              *owned;   /* owned copy when added with copy = true */
    gguf_tensor_gen_fn gen;     /* when data == NULL */
    void              *ud;
};

struct gguf_writer {
    struct wkv     *kv;       /* owned [n_kv] */
    size_t          n_kv, cap_kv;
    struct wtensor *t;        /* owned [n_t] */
    size_t          n_t, cap_t;
    uint32_t        alignment;
    int             sticky;   /* first error of a void setter; returned by gguf_writer_write */
};

struct gguf_writer *gguf_writer_new(void)
{
    struct gguf_writer *w = glim_calloc(1, sizeof *w);
    if (w)
        w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        glim_free(w->kv[i].key);
        strbuf_clear(&w->kv[i].rec);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        glim_free(w->t[i].name);
        glim_free(w->t[i].owned);
    }
    glim_free(w->kv);
    glim_free(w->t);
    glim_free(w);
}

/* ---- names ------------------------------------------------------------- */

/* valid UTF-8 (no overlongs, surrogates or code points above U+10FFFF) */
static bool utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char b = s[i];
        size_t len = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 ? 2 : 0;
        if (len == 0 || b > 0xf4 || len > n - i)
            return false;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
        if (len == 3 && ((b == 0xe0 && s[i + 1] < 0xa0) || (b == 0xed && s[i + 1] >= 0xa0)))
            return false;
        if (len == 4 && ((b == 0xf0 && s[i + 1] < 0x90) || (b == 0xf4 && s[i + 1] >= 0x90)))
            return false;
        i += len;
    }
    return true;
}

static bool name_ok(const char *s) { return s && *s && utf8_ok((const unsigned char *)s, strlen(s)); }

static struct wkv *kv_find(struct gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key))
            return &w->kv[i];
    return NULL;
}

/* ---- records ----------------------------------------------------------- */

static int put_u32(struct strbuf *sb, uint32_t v) { return strbuf_append(sb, (const char *)&v, 4); }
static int put_u64(struct strbuf *sb, uint64_t v) { return strbuf_append(sb, (const char *)&v, 8); }

static int put_str(struct strbuf *sb, const char *s, size_t n)
{
    int rc = put_u64(sb, n);
    return rc ? rc : strbuf_append(sb, s, n);
}

/* a new record "key, type" whose value the caller appends to the returned buffer */
static int kv_begin(struct gguf_writer *w, const char *key, enum gguf_vtype type, struct strbuf **rec)
{
    if (!name_ok(key))
        return GLIM_EINVAL;
    if (kv_find(w, key))
        return GLIM_EINVAL;   /* the reader rejects duplicate keys */
    if (!strcmp(key, ALIGN_KEY) && type != GGUF_VT_UINT32)
        return GLIM_EINVAL;   /* ... and an alignment of any other type */
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        struct wkv *p = glim_realloc(w->kv, cap * sizeof *p);
        if (!p)
            return GLIM_ENOMEM;
        w->kv = p, w->cap_kv = cap;
    }
    struct wkv *kv = &w->kv[w->n_kv];
    strbuf_init(&kv->rec);
    kv->type = type;
    if (!(kv->key = glim_strndup(key, strlen(key))))
        return GLIM_ENOMEM;
    if (put_str(&kv->rec, key, strlen(key)) || put_u32(&kv->rec, type)) {
        glim_free(kv->key);
        strbuf_clear(&kv->rec);
        return GLIM_ENOMEM;
    }
    w->n_kv++;
    *rec = &kv->rec;
    return GLIM_OK;
}

/* undo the last kv_begin after its value failed to serialize */
static int kv_abort(struct gguf_writer *w, int rc)
{
    struct wkv *kv = &w->kv[--w->n_kv];
    glim_free(kv->key);
    strbuf_clear(&kv->rec);
    return rc;
}

static int add_scalar(struct gguf_writer *w, const char *key, enum gguf_vtype type, const void *v, size_t n)
{
    struct strbuf *rec;
    int rc = kv_begin(w, key, type, &rec);
    if (rc)
        return rc;
    rc = strbuf_append(rec, v, n);
    return rc ? kv_abort(w, rc) : GLIM_OK;
}

static bool valid_alignment(uint32_t a) { return a != 0 && (a & (a - 1)) == 0; }

int gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
    bool is_align = key && !strcmp(key, ALIGN_KEY);
    if (is_align && !valid_alignment(v))
        return GLIM_EINVAL;
    int rc = add_scalar(w, key, GGUF_VT_UINT32, &v, 4);
    if (!rc && is_align)
        w->alignment = v;
    return rc;
}

int gguf_writer_add_i32(struct gguf_writer *w, const char *key, int32_t v)
{
    return add_scalar(w, key, GGUF_VT_INT32, &v, 4);
}

int gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v)
{
    return add_scalar(w, key, GGUF_VT_FLOAT32, &v, 4);
}

int gguf_writer_add_bool(struct gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return add_scalar(w, key, GGUF_VT_BOOL, &b, 1);
}

int gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return GLIM_EINVAL;
    struct strbuf *rec;
    int rc = kv_begin(w, key, GGUF_VT_STRING, &rec);
    if (rc)
        return rc;
    rc = put_str(rec, v, strlen(v));
    return rc ? kv_abort(w, rc) : GLIM_OK;
}

/* array of fixed-size elements already in little-endian file layout */
static int add_arr_raw(struct gguf_writer *w, const char *key, enum gguf_vtype et, const void *v, uint64_t n,
                       size_t esz)
{
    if (n && !v)
        return GLIM_EINVAL;
    if (n > SIZE_MAX / esz)
        return GLIM_ENOMEM;
    struct strbuf *rec;
    int rc = kv_begin(w, key, GGUF_VT_ARRAY, &rec);
    if (rc)
        return rc;
    rc = put_u32(rec, et);
    if (!rc)
        rc = put_u64(rec, n);
    if (!rc)
        rc = strbuf_append(rec, v, (size_t)(n * esz));
    return rc ? kv_abort(w, rc) : GLIM_OK;
}

int gguf_writer_add_arr_i32(struct gguf_writer *w, const char *key, const int32_t *v, uint64_t n)
{
    return add_arr_raw(w, key, GGUF_VT_INT32, v, n, 4);
}

int gguf_writer_add_arr_f32(struct gguf_writer *w, const char *key, const float *v, uint64_t n)
{
    return add_arr_raw(w, key, GGUF_VT_FLOAT32, v, n, 4);
}

int gguf_writer_add_arr_bool(struct gguf_writer *w, const char *key, const bool *v, uint64_t n)
{
    if (n && !v)
        return GLIM_EINVAL;
    struct strbuf *rec;
    int rc = kv_begin(w, key, GGUF_VT_ARRAY, &rec);
    if (rc)
        return rc;
    rc = put_u32(rec, GGUF_VT_BOOL);
    if (!rc)
        rc = put_u64(rec, n);
    for (uint64_t i = 0; i < n && !rc; i++)   /* sizeof(bool) is not promised to be 1 */
        rc = strbuf_putc(rec, v[i] ? 1 : 0);
    return rc ? kv_abort(w, rc) : GLIM_OK;
}

int gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const char *const *v, uint64_t n)
{
    if (n && !v)
        return GLIM_EINVAL;
    for (uint64_t i = 0; i < n; i++)
        if (!v[i])
            return GLIM_EINVAL;
    struct strbuf *rec;
    int rc = kv_begin(w, key, GGUF_VT_ARRAY, &rec);
    if (rc)
        return rc;
    rc = put_u32(rec, GGUF_VT_STRING);
    if (!rc)
        rc = put_u64(rec, n);
    for (uint64_t i = 0; i < n && !rc; i++)
        rc = put_str(rec, v[i], strlen(v[i]));
    return rc ? kv_abort(w, rc) : GLIM_OK;
}

/* bytes of a kv's value as it lies in the mapping (already validated by the reader) */
static size_t kv_value_bytes(const struct gguf_kv *kv)
{
    static const uint8_t esz[GGUF_VT_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    uint64_t n;
    if (kv->type == GGUF_VT_STRING) {
        memcpy(&n, kv->data, 8);
        return 8 + (size_t)n;
    }
    if (kv->type != GGUF_VT_ARRAY)
        return esz[kv->type];
    if (kv->arr_type != GGUF_VT_STRING)
        return (size_t)kv->arr_n * esz[kv->arr_type];
    if (kv->arr_n == 0)
        return 0;
    /* elements are contiguous: from the first one to the end of the last */
    const uint8_t *last = kv->data + (kv->str_offs[kv->arr_n - 1] - kv->str_offs[0]);
    memcpy(&n, last, 8);
    return (size_t)(last - kv->data) + 8 + (size_t)n;
}

int gguf_writer_add_kv_copy(struct gguf_writer *w, const struct gguf_kv *kv)
{
    if (!kv || (unsigned)kv->type >= GGUF_VT_COUNT)
        return GLIM_EINVAL;
    if (!strcmp(kv->key, ALIGN_KEY)) {   /* keep w->alignment in step with the key */
        int64_t a;
        if (kv->type != GGUF_VT_UINT32 || gguf_kv_int(kv, &a))
            return GLIM_EINVAL;
        return gguf_writer_add_u32(w, kv->key, (uint32_t)a);
    }
    struct strbuf *rec;
    int rc = kv_begin(w, kv->key, kv->type, &rec);
    if (rc)
        return rc;
    if (kv->type == GGUF_VT_ARRAY) {
        rc = put_u32(rec, kv->arr_type);
        if (!rc)
            rc = put_u64(rec, kv->arr_n);
    }
    if (!rc)
        rc = strbuf_append(rec, (const char *)kv->data, kv_value_bytes(kv));
    return rc ? kv_abort(w, rc) : GLIM_OK;
}

void gguf_writer_set_alignment(struct gguf_writer *w, uint32_t align)
{
    if (!valid_alignment(align)) {
        if (!w->sticky)
            w->sticky = GLIM_EINVAL;
        return;
    }
    struct wkv *kv = kv_find(w, ALIGN_KEY);
    if (!kv) {
        int rc = gguf_writer_add_u32(w, ALIGN_KEY, align);
        if (rc && !w->sticky)
            w->sticky = rc;
        return;
    }
    /* the value is the record's last 4 bytes (type was checked when added) */
    memcpy(kv->rec.data + kv->rec.len - 4, &align, 4);
    w->alignment = align;
}

/* ---- tensors ----------------------------------------------------------- */

/* validates what the reader would reject; returns the byte size in *nbytes */
static int tensor_check(struct gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                        size_t *nbytes)
{
    if (!name_ok(name) || strlen(name) > MAX_TENSOR_NAME || !ne || n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return GLIM_EINVAL;
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return GLIM_EINVAL;
    const struct quant_traits *q = quant_traits(type);
    if (!q || q->block_elems <= 0)
        return GLIM_EINVAL;
    int64_t n_elems = 1;
    for (int d = 0; d < n_dims; d++)
        if (ne[d] < 1 || __builtin_mul_overflow(n_elems, ne[d], &n_elems))
            return GLIM_EINVAL;
    if (ne[0] % q->block_elems)
        return GLIM_EINVAL;
    uint64_t row, total;
    if (__builtin_mul_overflow((uint64_t)(ne[0] / q->block_elems), (uint64_t)q->block_bytes, &row) ||
        __builtin_mul_overflow(row, (uint64_t)(n_elems / ne[0]), &total) || total > SIZE_MAX)
        return GLIM_EINVAL;
    *nbytes = (size_t)total;
    return GLIM_OK;
}

static int tensor_push(struct gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                       size_t nbytes, struct wtensor **out)
{
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 16;
        struct wtensor *p = glim_realloc(w->t, cap * sizeof *p);
        if (!p)
            return GLIM_ENOMEM;
        w->t = p, w->cap_t = cap;
    }
    struct wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = glim_strndup(name, strlen(name))))
        return GLIM_ENOMEM;
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = nbytes;
    w->n_t++;
    *out = t;
    return GLIM_OK;
}

int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                           const void *data, size_t nbytes, bool copy)
{
    size_t want;
    int rc = tensor_check(w, name, type, n_dims, ne, &want);
    if (rc)
        return rc;
    if (!data || nbytes != want)
        return GLIM_EINVAL;
    void *owned = NULL;
    if (copy) {
        if (!(owned = glim_malloc(nbytes)))
            return GLIM_ENOMEM;
        memcpy(owned, data, nbytes);
    }
    struct wtensor *t;
    if ((rc = tensor_push(w, name, type, n_dims, ne, nbytes, &t))) {
        glim_free(owned);
        return rc;
    }
    t->owned = owned;
    t->data = owned ? owned : data;
    return GLIM_OK;
}

int gguf_writer_add_tensor_gen(struct gguf_writer *w, const char *name, uint32_t type, int n_dims,
                               const int64_t *ne, gguf_tensor_gen_fn gen, void *ud)
{
    size_t nbytes;
    int rc = tensor_check(w, name, type, n_dims, ne, &nbytes);
    if (rc)
        return rc;
    if (!gen)
        return GLIM_EINVAL;
    struct wtensor *t;
    if ((rc = tensor_push(w, name, type, n_dims, ne, nbytes, &t)))
        return rc;
    t->gen = gen;
    t->ud = ud;
    return GLIM_OK;
}

/* ---- output ------------------------------------------------------------ */

struct out {
    int         fd;
    const char *path;    /* the final path, for messages */
    uint8_t     buf[1 << 16];
    size_t      len;
};

/* raw write of n bytes (EINTR and short writes retried) */
static int out_raw(struct out *o, const uint8_t *p, size_t n, struct glim_err *err)
{
    while (n) {
        ssize_t k = write(o->fd, p, GLIM_MIN(n, (size_t)1 << 30));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return glim_fail(err, GLIM_EIO, "%s: write failed: %s", o->path, k < 0 ? strerror(errno) : "no progress");
        p += k, n -= (size_t)k;
    }
    return GLIM_OK;
}

static int out_flush(struct out *o, struct glim_err *err)
{
    int rc = out_raw(o, o->buf, o->len, err);
    o->len = 0;
    return rc;
}

static int out_put(struct out *o, const void *p, size_t n, struct glim_err *err)
{
    const uint8_t *s = p;
    if (n >= sizeof o->buf) {   /* big tensors skip the copy into the buffer */
        int rc = out_flush(o, err);
        return rc ? rc : out_raw(o, s, n, err);
    }
    while (n) {
        if (o->len == sizeof o->buf) {
            int rc = out_flush(o, err);
            if (rc)
                return rc;
        }
        size_t k = GLIM_MIN(n, sizeof o->buf - o->len);
        memcpy(o->buf + o->len, s, k);
        o->len += k, s += k, n -= k;
    }
    return GLIM_OK;
}

static int out_pad(struct out *o, uint64_t pos, size_t align, struct glim_err *err)
{
    static const uint8_t zeros[256];
    size_t pad = (size_t)((align - pos % align) % align);
    int rc = GLIM_OK;
    while (pad && !rc) {
        size_t k = GLIM_MIN(pad, sizeof zeros);
        rc = out_put(o, zeros, k, err);
        pad -= k;
    }
    return rc;
}

/* header, kv records and tensor infos; *pos = bytes written */
static int write_head(struct gguf_writer *w, struct out *o, uint64_t *pos, struct glim_err *err)
{
    uint32_t version = 3;
    uint64_t n_t = w->n_t, n_kv = w->n_kv, off = 0;
    int rc = out_put(o, "GGUF", 4, err);
    if (!rc)
        rc = out_put(o, &version, 4, err);
    if (!rc)
        rc = out_put(o, &n_t, 8, err);
    if (!rc)
        rc = out_put(o, &n_kv, 8, err);
    *pos = 24;
    for (size_t i = 0; i < w->n_kv && !rc; i++) {
        rc = out_put(o, w->kv[i].rec.data, w->kv[i].rec.len, err);
        *pos += w->kv[i].rec.len;
    }
    for (size_t i = 0; i < w->n_t && !rc; i++) {
        struct wtensor *t = &w->t[i];
        uint64_t nlen = strlen(t->name), ne[GGUF_MAX_DIMS];
        uint32_t nd = (uint32_t)t->n_dims;
        for (int d = 0; d < t->n_dims; d++)
            ne[d] = (uint64_t)t->ne[d];
        t->offset = off;
        off += t->nbytes + (w->alignment - t->nbytes % w->alignment) % w->alignment;
        rc = out_put(o, &nlen, 8, err);
        if (!rc) rc = out_put(o, t->name, nlen, err);
        if (!rc) rc = out_put(o, &nd, 4, err);
        if (!rc) rc = out_put(o, ne, 8 * nd, err);
        if (!rc) rc = out_put(o, &t->type, 4, err);
        if (!rc) rc = out_put(o, &t->offset, 8, err);
        *pos += 8 + nlen + 4 + 8 * nd + 4 + 8;
    }
    return rc;
}

static int write_tensor(struct gguf_writer *w, struct wtensor *t, struct out *o, struct glim_err *err)
{
    if (t->data) {
        int rc = out_put(o, t->data, t->nbytes, err);
        return rc ? rc : out_pad(o, t->nbytes, w->alignment, err);
    }
    void *buf = glim_malloc(t->nbytes);
    if (!buf)
        return glim_fail(err, GLIM_ENOMEM, "%s: tensor '%s': out of memory for %zu bytes", o->path, t->name,
                         t->nbytes);
    struct glim_err gerr = {0};
    int rc = t->gen(t->ud, buf, t->nbytes, &gerr);
    if (rc)
        rc = glim_fail(err, rc, "%s: tensor '%s': generator failed: %s", o->path, t->name,
                       gerr.msg[0] ? gerr.msg : glim_status_name(rc));
    else
        rc = out_put(o, buf, t->nbytes, err);
    glim_free(buf);
    return rc ? rc : out_pad(o, t->nbytes, w->alignment, err);
}

static int write_all(struct gguf_writer *w, struct out *o,
                     void (*progress)(void *ud, int64_t done, int64_t total), void *ud, struct glim_err *err)
{
    uint64_t pos;
    int rc = write_head(w, o, &pos, err);
    if (!rc)
        rc = out_pad(o, pos, w->alignment, err);
    int64_t total = 0, done = 0;
    for (size_t i = 0; i < w->n_t; i++)
        total += (int64_t)w->t[i].nbytes;
    if (progress && !rc)
        progress(ud, 0, total);
    for (size_t i = 0; i < w->n_t && !rc; i++) {
        rc = write_tensor(w, &w->t[i], o, err);
        done += (int64_t)w->t[i].nbytes;
        if (progress && !rc)
            progress(ud, done, total);
    }
    return rc ? rc : out_flush(o, err);
}

/* create "<path>.tmp.<pid>.<n>" exclusively; mode 0666 minus the umask, like a plain fopen */
static int open_tmp(const char *path, char *tmp, size_t cap, struct glim_err *err)
{
    static atomic_uint counter;
    for (int tries = 0; tries < 100; tries++) {
        snprintf(tmp, cap, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd >= 0 ? fd : -glim_fail(err, GLIM_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    }
    return -glim_fail(err, GLIM_EIO, "%s: cannot create a temporary file next to it", path);
}

int gguf_writer_write(struct gguf_writer *w, const char *path,
                      void (*progress)(void *ud, int64_t done, int64_t total), void *ud, struct glim_err *err)
{
    if (w->sticky)
        return glim_fail(err, w->sticky, "%s: an earlier writer call failed (%s; invalid alignment?)", path,
                         glim_status_name(w->sticky));
    size_t cap = strlen(path) + 64;
    char *tmp = glim_malloc(cap);
    struct out *o = glim_malloc(sizeof *o);
    int rc = GLIM_OK;
    if (!tmp || !o) {
        rc = glim_fail(err, GLIM_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    int fd = open_tmp(path, tmp, cap, err);
    if (fd < 0) {
        rc = -fd;
        goto done;
    }
    *o = (struct out){.fd = fd, .path = path, .len = 0};
    rc = write_all(w, o, progress, ud, err);
    if (!rc && fsync(fd) != 0)
        rc = glim_fail(err, GLIM_EIO, "%s: fsync failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && !rc)
        rc = glim_fail(err, GLIM_EIO, "%s: close failed: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0)
        rc = glim_fail(err, GLIM_EIO, "%s: rename from %s failed: %s", path, tmp, strerror(errno));
    if (rc)
        unlink(tmp);
done:
    glim_free(tmp);
    glim_free(o);
    return rc;
}
