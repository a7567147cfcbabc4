/*
 * gguf_fixtures.h — build GGUF byte images by hand, field by field, so tests
 * can write files that the writer refuses to produce (broken on purpose).
 * Header-only; include from one test source. Aborts only on test-side OOM.
 */
#ifndef GLIM_GGUF_FIXTURES_H
#define GLIM_GGUF_FIXTURES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct img {
    uint8_t *p;
    size_t   n, cap;
};

static void img_put(struct img *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            fprintf(stderr, "gguf_fixtures: out of memory\n");
            exit(1);
        }
        b->p = p, b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void img_u8(struct img *b, uint8_t v) { img_put(b, &v, 1); }
static void img_u32(struct img *b, uint32_t v) { img_put(b, &v, 4); }
static void img_u64(struct img *b, uint64_t v) { img_put(b, &v, 8); }
static void img_zeros(struct img *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        img_u8(b, 0);
}
static void img_pad(struct img *b, size_t align) { img_zeros(b, (align - b->n % align) % align); }
static void img_free(struct img *b) { free(b->p), b->p = NULL, b->n = b->cap = 0; }

/* raw string: explicit length so tests can embed NULs or bad UTF-8 */
static void img_strn(struct img *b, const char *s, size_t n)
{
    img_u64(b, n);
    img_put(b, s, n);
}
static void img_str(struct img *b, const char *s) { img_strn(b, s, strlen(s)); }

static void img_header(struct img *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    img_put(b, "GGUF", 4);
    img_u32(b, version);
    img_u64(b, n_tensors);
    img_u64(b, n_kv);
}

static void img_kv_u32(struct img *b, const char *key, uint32_t v)
{
    img_str(b, key);
    img_u32(b, 4);   /* GGUF_VT_UINT32 */
    img_u32(b, v);
}

static void img_kv_str(struct img *b, const char *key, const char *v)
{
    img_str(b, key);
    img_u32(b, 8);   /* GGUF_VT_STRING */
    img_str(b, v);
}

/* tensor info: name, n_dims, ne[n_dims], type, offset */
static void img_tensor(struct img *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                       uint64_t offset)
{
    img_str(b, name);
    img_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        img_u64(b, ne[d]);
    img_u32(b, type);
    img_u64(b, offset);
}

#endif
