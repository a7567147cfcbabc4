/*
 * tok_spm.c — SentencePiece-style tokenizer for `llama` GGUF vocabularies
 * (Llama 2, Phi-3, TinyLlamas), behaving as llama.cpp's SPM tokenizer does.
 *
 * Spaces become U+2581 "▁", and a span that starts the text or follows a
 * special token gets one "▁" in front (add_space_prefix). The text starts
 * as one symbol per UTF-8 character; the adjacent pair whose concatenation is
 * the token with the highest score merges first (leftmost on ties) until no
 * pair is a token. A symbol left that is not a token is emitted as its bytes'
 * <0xXX> tokens (byte fallback), or as unk if the vocabulary has none.
 * Only NORMAL and USER_DEFINED tokens take part: `<s>` typed as text stays text.
 */
#include <string.h>

#include "../base/alloc.h"
#include "tok_impl.h"
#include "utf8.h"

#define SPACE_MARK "\xE2\x96\x81"   /* U+2581 */

struct ssym {
    uint32_t start, n;      /* bytes of the escaped text; n == 0: merged away */
    int32_t  prev, next;
};

struct spm {
    const struct tok_vocab *v;
    const char      *text;
    struct ssym     *syms;
    struct tok_pair *heap;   /* merge queue; SPM fills key (-score) and size */
    size_t           n_heap;
};

static bool mergeable(const struct tok_vocab *v, int32_t id)
{
    return id >= 0 && (v->tokens[id].type == TOK_TYPE_NORMAL || v->tokens[id].type == TOK_TYPE_USER_DEFINED);
}

static void try_bigram(struct spm *c, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return;
    uint32_t size = c->syms[left].n + c->syms[right].n;
    int32_t id = tok_lookup(c->v, c->text + c->syms[left].start, size);
    if (mergeable(c->v, id)) {
        struct tok_pair x = {.key = -c->v->tokens[id].score, .left = left, .right = right, .size = size};
        tok_pair_push(c->heap, &c->n_heap, x);
    }
}

/* " a b" → "▁a▁b"; the caller frees */
static char *escape(const char *s, size_t n, bool add_prefix, size_t *out_n)
{
    char *e = glim_malloc(3 * n + 4);
    size_t k = 0;
    if (!e)
        return NULL;
    if (add_prefix)
        memcpy(e, SPACE_MARK, 3), k = 3;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ')
            memcpy(e + k, SPACE_MARK, 3), k += 3;
        else
            e[k++] = s[i];
    }
    *out_n = k;
    return e;
}

static int emit(struct spm *c, const struct ssym *sym, struct tok_ids *out)
{
    const struct tok_vocab *v = c->v;
    int32_t id = tok_lookup(v, c->text + sym->start, sym->n);
    if (mergeable(v, id))
        return tok_ids_push(out, id);
    for (uint32_t i = 0; i < sym->n; i++) {
        int32_t b = v->byte_id[(uint8_t)c->text[sym->start + i]];
        if (b < 0)
            b = v->unk;
        if (b >= 0 && tok_ids_push(out, b) != GLIM_OK)
            return GLIM_ENOMEM;
        if (b == v->unk && v->byte_id[(uint8_t)c->text[sym->start + i]] < 0)
            break;   /* one unk for the whole character, as sentencepiece */
    }
    return GLIM_OK;
}

int tok_spm_encode(const struct tok_vocab *v, const char *s, size_t n, bool add_prefix,
                   struct tok_ids *out, struct glim_err *err)
{
    size_t len = 0;
    if (n == 0 && !add_prefix)
        return GLIM_OK;
    if (n > (UINT32_MAX - 8) / 3)
        return glim_fail(err, GLIM_EINVAL, "tokenizer: text of %zu bytes is too long", n);
    struct spm c = {.v = v};
    char *text = escape(s, n, add_prefix, &len);
    c.text = text;
    c.syms = glim_malloc((len + 1) * sizeof *c.syms);
    c.heap = glim_malloc((2 * len + 2) * sizeof *c.heap);
    int rc = text && c.syms && c.heap ? GLIM_OK : GLIM_ENOMEM;
    int32_t n_sym = 0;
    for (size_t i = 0; rc == GLIM_OK && i < len; n_sym++) {
        uint32_t k = (uint32_t)GLIM_MIN((size_t)utf8_lead_len((uint8_t)text[i]), len - i);
        c.syms[n_sym] = (struct ssym){(uint32_t)i, k, n_sym - 1, i + k < len ? n_sym + 1 : -1};
        i += k;
    }
    for (int32_t i = 0; rc == GLIM_OK && i + 1 < n_sym; i++)
        try_bigram(&c, i, i + 1);
    while (rc == GLIM_OK && c.n_heap) {
        struct tok_pair b = tok_pair_pop(c.heap, &c.n_heap);
        struct ssym *l = &c.syms[b.left], *r = &c.syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue;
        l->n += r->n, r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            c.syms[r->next].prev = b.left;
        try_bigram(&c, l->prev, b.left);
        try_bigram(&c, b.left, l->next);
    }
    for (int32_t i = n_sym ? 0 : -1; rc == GLIM_OK && i >= 0; i = c.syms[i].next)
        rc = emit(&c, &c.syms[i], out);
    glim_free(text);
    glim_free(c.syms);
    glim_free(c.heap);
    return rc ? glim_fail(err, rc, "tokenizer: out of memory encoding %zu bytes", n) : GLIM_OK;
}

int tok_spm_piece(const char *s, size_t n, struct strbuf *out)
{
    size_t run = 0;
    for (size_t i = 0; i + 3 <= n;) {
        if (memcmp(s + i, SPACE_MARK, 3)) {
            i++;
            continue;
        }
        if (strbuf_append(out, s + run, i - run) || strbuf_append(out, " ", 1))
            return GLIM_ENOMEM;
        i += 3, run = i;
    }
    return strbuf_append(out, s + run, n - run);
}
