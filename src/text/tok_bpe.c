/*
 * tok_bpe.c — byte-level BPE (GPT-2 style), as used by `gpt2` GGUF
 * vocabularies and tokenizer.json files.
 *
 * Every byte stands for one printable code point (GPT-2's bytes_to_unicode:
 * printable Latin-1 bytes map to themselves, the other 68 to U+0100..U+0143),
 * so a token text like "Ġthe" is the bytes " the". A piece from the split
 * regex starts as one symbol per byte; the adjacent pair with the lowest merge
 * rank is merged until none is left (leftmost first on equal ranks, which is
 * what both HF tokenizers and tiktoken do). Merges are kept as a hash table
 * (left id, right id) → (rank, result id), so the loop never builds strings.
 */
#include <string.h>

#include "../base/alloc.h"
#include "tok_impl.h"
#include "utf8.h"

/* ---- byte ↔ code point ------------------------------------------------- */

static bool byte_is_self(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t tok_bpe_byte_cp(uint8_t b)
{
    if (byte_is_self(b))
        return b;
    if (b <= 0x20)
        return 256u + b;            /* 0x00..0x20 → U+0100..U+0120 */
    if (b <= 0xA0)
        return 256u + 33 + (b - 0x7Fu);  /* 0x7F..0xA0 → U+0121..U+0142 */
    return 256u + 67;               /* 0xAD → U+0143 */
}

int tok_bpe_cp_byte(uint32_t cp)
{
    if (cp < 256)
        return byte_is_self(cp) ? (int)cp : -1;
    if (cp <= 256 + 32)
        return (int)(cp - 256);
    if (cp <= 256 + 66)
        return (int)(cp - 256 - 33 + 0x7F);
    return cp == 256 + 67 ? 0xAD : -1;
}

int tok_bpe_bytes_init(struct tok_vocab *v, struct glim_err *err)
{
    (void)err;
    for (int b = 0; b < 256; b++) {
        char u[4];
        int n = utf8_encode(tok_bpe_byte_cp((uint8_t)b), u);
        v->byte_id[b] = tok_lookup(v, u, (size_t)n);
    }
    return GLIM_OK;
}

int tok_bpe_piece(const struct tok_vocab *v, const char *s, size_t n, struct strbuf *out)
{
    (void)v;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int k = utf8_decode(s + i, n - i, &cp);
        int b = k > 0 ? tok_bpe_cp_byte(cp) : -1;
        if (k == 0)
            k = 1;                                   /* stray byte: keep it */
        if (b >= 0) {
            char c = (char)b;
            if (strbuf_append(out, &c, 1))
                return GLIM_ENOMEM;
        } else if (strbuf_append(out, s + i, (size_t)k)) {
            return GLIM_ENOMEM;                      /* a char outside the map: as is */
        }
        i += (size_t)k;
    }
    return GLIM_OK;
}

/* ---- merge table ------------------------------------------------------- */

static uint64_t pair_hash(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

int tok_bpe_merges_init(struct tok_vocab *v, uint64_t n_merges, struct glim_err *err)
{
    size_t cap = 1024;
    while (cap < n_merges * 2 && cap < ((size_t)1 << 31))
        cap *= 2;
    if (n_merges * 2 > cap)
        return glim_fail(err, GLIM_EFORMAT, "tokenizer: %llu merges is too many", (unsigned long long)n_merges);
    v->mkey = glim_malloc(cap * sizeof *v->mkey);
    v->mrank = glim_malloc(cap * sizeof *v->mrank);
    v->mres = glim_malloc(cap * sizeof *v->mres);
    if (!v->mkey || !v->mrank || !v->mres)
        return glim_fail(err, GLIM_ENOMEM, "tokenizer: out of memory for %llu merges", (unsigned long long)n_merges);
    memset(v->mkey, 0xFF, cap * sizeof *v->mkey);
    v->mmask = (uint32_t)(cap - 1);
    return GLIM_OK;
}

int tok_bpe_merge_add(struct tok_vocab *v, const char *l, size_t nl, const char *r, size_t nr, uint32_t rank)
{
    char stack[256], *cat = stack;
    int32_t lid = tok_lookup(v, l, nl), rid = tok_lookup(v, r, nr);
    if (lid < 0 || rid < 0 || !v->mkey)
        return GLIM_OK;
    if (nl + nr > sizeof stack && !(cat = glim_malloc(nl + nr)))
        return GLIM_ENOMEM;
    memcpy(cat, l, nl);
    memcpy(cat + nl, r, nr);
    int32_t res = tok_lookup(v, cat, nl + nr);
    if (cat != stack)
        glim_free(cat);
    if (res < 0)
        return GLIM_OK;   /* HF rejects such a file; we just cannot use the merge */
    uint64_t key = (uint64_t)(uint32_t)lid << 32 | (uint32_t)rid;
    for (uint64_t i = pair_hash(key) & v->mmask;; i = (i + 1) & v->mmask) {
        if (v->mkey[i] == key)
            return GLIM_OK;   /* first (lowest) rank wins */
        if (v->mkey[i] == UINT64_MAX) {
            v->mkey[i] = key, v->mrank[i] = rank, v->mres[i] = res;
            return GLIM_OK;
        }
    }
}

/* Rank and result of merging lid+rid; false if they do not merge. */
static bool merge_find(const struct tok_vocab *v, int32_t lid, int32_t rid, uint32_t *rank, int32_t *res)
{
    if (lid < 0 || rid < 0 || !v->mkey)
        return false;
    uint64_t key = (uint64_t)(uint32_t)lid << 32 | (uint32_t)rid;
    for (uint64_t i = pair_hash(key) & v->mmask;; i = (i + 1) & v->mmask) {
        if (v->mkey[i] == key) {
            *rank = v->mrank[i], *res = v->mres[i];
            return true;
        }
        if (v->mkey[i] == UINT64_MAX)
            return false;
    }
}

/* ---- merge loop -------------------------------------------------------- */

struct sym {
    int32_t id;
    int32_t prev, next;   /* neighbours in the live list; -1 = none */
};

struct bpe_ctx {
    const struct tok_vocab *v;
    struct tok_ids  *out;
    struct sym      *syms;
    struct tok_pair *heap;     /* merge queue; BPE fills key (rank), lid, rid, res */
    char            *mapped;   /* piece in token-text form, for the whole-piece lookup */
    size_t           cap, n_heap;
};

static void try_pair(struct bpe_ctx *c, int32_t left, int32_t right)
{
    uint32_t rank;
    struct tok_pair x = {.left = left, .right = right, .lid = c->syms[left].id, .rid = c->syms[right].id};
    if (merge_find(c->v, x.lid, x.rid, &rank, &x.res)) {
        x.key = rank;
        tok_pair_push(c->heap, &c->n_heap, x);   /* n-1 at first, +1 net per merge: never above 2n */
    }
}

static int grow(struct bpe_ctx *c, size_t n)
{
    if (n <= c->cap)
        return GLIM_OK;
    size_t cap = GLIM_MAX(n, c->cap * 2);
    struct sym *s = glim_realloc(c->syms, cap * sizeof *s);
    if (s)
        c->syms = s;
    struct tok_pair *h = glim_realloc(c->heap, 2 * cap * sizeof *h);
    if (h)
        c->heap = h;
    char *m = glim_realloc(c->mapped, 2 * cap);
    if (m)
        c->mapped = m;
    if (!s || !h || !m)
        return GLIM_ENOMEM;
    c->cap = cap;
    return GLIM_OK;
}

/* Whole piece already a token (ignore_merges, as tiktoken and llama3 do)? */
static int32_t whole_piece(struct bpe_ctx *c, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)utf8_encode(tok_bpe_byte_cp((uint8_t)s[i]), c->mapped + k);
    return tok_lookup(c->v, c->mapped, k);
}

static int bpe_piece(void *ud, const char *s, size_t n)
{
    struct bpe_ctx *c = ud;
    const struct tok_vocab *v = c->v;
    if (n == 0)
        return GLIM_OK;
    if (n > INT32_MAX / 4 || grow(c, n) != GLIM_OK)
        return GLIM_ENOMEM;
    int32_t whole = v->ignore_merges || n == 1 ? whole_piece(c, s, n) : -1;
    if (whole >= 0)
        return tok_ids_push(c->out, whole);
    for (size_t i = 0; i < n; i++)
        c->syms[i] = (struct sym){v->byte_id[(uint8_t)s[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1};
    c->n_heap = 0;
    for (size_t i = 0; i + 1 < n; i++)
        try_pair(c, (int32_t)i, (int32_t)i + 1);
    while (c->n_heap) {
        struct tok_pair x = tok_pair_pop(c->heap, &c->n_heap);
        struct sym *l = &c->syms[x.left], *r = &c->syms[x.right];
        if (l->id != x.lid || r->id != x.rid || l->next != x.right)
            continue;   /* stale: one side merged since */
        l->id = x.res;
        l->next = r->next;
        if (r->next >= 0)
            c->syms[r->next].prev = x.left;
        r->id = -2;   /* dead */
        if (l->prev >= 0)
            try_pair(c, l->prev, x.left);
        if (l->next >= 0)
            try_pair(c, x.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = c->syms[i].next) {
        int32_t id = c->syms[i].id >= 0 ? c->syms[i].id : v->unk;   /* byte with no token */
        if (id >= 0 && tok_ids_push(c->out, id) != GLIM_OK)
            return GLIM_ENOMEM;
    }
    return GLIM_OK;
}

int tok_bpe_encode(const struct tok_vocab *v, const char *s, size_t n, struct tok_ids *out,
                   struct glim_err *err)
{
    struct bpe_ctx c = {.v = v, .out = out};
    int rc = v->pre ? tok_pretok_split(v->pre, s, n, bpe_piece, &c, err) : bpe_piece(&c, s, n);
    if (rc == GLIM_ENOMEM && err && err->code != GLIM_ENOMEM)
        glim_fail(err, rc, "tokenizer: out of memory encoding %zu bytes", n);
    glim_free(c.syms);
    glim_free(c.heap);
    glim_free(c.mapped);
    return rc;
}
