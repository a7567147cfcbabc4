/*
 * tok.c — the vocabulary: token table, text → id map, special tokens, GGUF
 * loading, encoding over special-token spans, decoding and streaming.
 *
 * DESIGN. A vocabulary owns one blob with all token texts and an open
 * addressing table from text to id (last id wins on duplicates, as in
 * llama.cpp). Encoding first cuts the text at special tokens — only those
 * the flags allow, so user text never yields a control id — and hands each
 * plain span to the SPM or BPE encoder. Everything is read-only after load,
 * so any thread may encode; per-call scratch lives on the caller's stack or
 * the heap of that call.
 */
#include "tok_impl.h"

#include <string.h>

#include "../base/alloc.h"
#include "../gguf/gguf.h"
#include "utf8.h"

/* ---- id lists ---------------------------------------------------------- */

void tok_ids_init(struct tok_ids *ids) { ids->data = NULL, ids->n = 0, ids->cap = 0; }

void tok_ids_clear(struct tok_ids *ids)
{
    glim_free(ids->data);
    tok_ids_init(ids);
}

int tok_ids_push(struct tok_ids *ids, int32_t id)
{
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *p = glim_realloc(ids->data, cap * sizeof *p);
        if (!p)
            return GLIM_ENOMEM;
        ids->data = p, ids->cap = cap;
    }
    ids->data[ids->n++] = id;
    return GLIM_OK;
}

/* ---- merge queue (tok_bpe.c, tok_spm.c) -------------------------------- */

static bool pair_before(const struct tok_pair *a, const struct tok_pair *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

void tok_pair_push(struct tok_pair *heap, size_t *n, struct tok_pair x)
{
    size_t i = (*n)++;
    while (i > 0 && pair_before(&x, &heap[(i - 1) / 2])) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = x;
}

struct tok_pair tok_pair_pop(struct tok_pair *heap, size_t *n)
{
    struct tok_pair top = heap[0], x = heap[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= m)
            break;
        if (k + 1 < m && pair_before(&heap[k + 1], &heap[k]))
            k++;
        if (!pair_before(&heap[k], &x))
            break;
        heap[i] = heap[k];
        i = k;
    }
    if (m)
        heap[i] = x;
    return top;
}

/* ---- building ---------------------------------------------------------- */

uint64_t tok_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

struct tok_vocab *tok_vocab_alloc(int32_t n_vocab)
{
    if (n_vocab <= 0 || n_vocab > (1 << 26))
        return NULL;
    struct tok_vocab *v = glim_calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->tokens = glim_calloc((size_t)n_vocab, sizeof *v->tokens);
    if (!v->tokens) {
        glim_free(v);
        return NULL;
    }
    v->n_vocab = n_vocab;
    v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = -1;
    for (int i = 0; i < 256; i++)
        v->byte_id[i] = -1;
    return v;
}

void tok_vocab_free(struct tok_vocab *v)
{
    if (!v)
        return;
    glim_free(v->tokens);
    glim_free(v->blob);
    glim_free(v->tmap);
    glim_free(v->mkey);
    glim_free(v->mrank);
    glim_free(v->mres);
    glim_free(v->spec_lens);
    tok_pretok_free(v->pre);
    glim_free(v);
}

int tok_set_text(struct tok_vocab *v, int32_t id, const char *s, size_t n)
{
    if (id < 0 || id >= v->n_vocab || n > UINT32_MAX / 2 || v->blob_len + n + 1 > UINT32_MAX)
        return GLIM_ERANGE;
    if (v->blob_len + n + 1 > v->blob_cap) {
        size_t cap = v->blob_cap ? v->blob_cap : 1 << 16;
        while (cap < v->blob_len + n + 1)
            cap *= 2;
        char *p = glim_realloc(v->blob, cap);
        if (!p)
            return GLIM_ENOMEM;
        v->blob = p, v->blob_cap = cap;
    }
    memcpy(v->blob + v->blob_len, s, n);
    v->blob[v->blob_len + n] = '\0';
    v->tokens[id].off = (uint32_t)v->blob_len;
    v->tokens[id].len = (uint32_t)n;
    v->blob_len += n + 1;
    return GLIM_OK;
}

const char *tok_text(const struct tok_vocab *v, int32_t id) { return v->blob + v->tokens[id].off; }

int32_t tok_lookup(const struct tok_vocab *v, const char *s, size_t n)
{
    if (!v->tmap)
        return -1;
    for (uint64_t i = tok_hash(s, n) & v->tmap_mask;; i = (i + 1) & v->tmap_mask) {
        uint32_t e = v->tmap[i];
        if (e == 0)
            return -1;
        const struct tok_token *t = &v->tokens[e - 1];
        if (t->len == n && !memcmp(v->blob + t->off, s, n))
            return (int32_t)(e - 1);
    }
}

int tok_vocab_index(struct tok_vocab *v)
{
    size_t cap = 1024;
    while (cap < (size_t)v->n_vocab * 2)
        cap *= 2;
    glim_free(v->tmap);
    v->tmap = glim_calloc(cap, sizeof *v->tmap);
    if (!v->tmap)
        return GLIM_ENOMEM;
    v->tmap_mask = (uint32_t)(cap - 1);
    for (int32_t id = 0; id < v->n_vocab; id++) {
        const struct tok_token *t = &v->tokens[id];
        if (t->len == 0)
            continue;
        const char *s = v->blob + t->off;
        uint64_t i = tok_hash(s, t->len) & v->tmap_mask;
        for (;; i = (i + 1) & v->tmap_mask) {
            uint32_t e = v->tmap[i];
            if (e == 0 || (v->tokens[e - 1].len == t->len && !memcmp(v->blob + v->tokens[e - 1].off, s, t->len)))
                break;
        }
        v->tmap[i] = (uint32_t)id + 1;   /* a duplicate text: the later id wins */
    }
    return GLIM_OK;
}

/* Types that are cut out of the text as whole tokens before the encoder runs. */
static bool is_matchable(uint8_t type, unsigned flags)
{
    if (type == TOK_TYPE_USER_DEFINED)
        return true;
    return (flags & TOK_PARSE_SPECIAL) && (type == TOK_TYPE_CONTROL || type == TOK_TYPE_UNKNOWN);
}

static int specials_build(struct tok_vocab *v)
{
    bool seen[256] = {0};
    int n = 0;
    memset(v->spec_first, 0, sizeof v->spec_first);
    v->has_user_defined = false;
    for (int32_t id = 0; id < v->n_vocab; id++) {
        const struct tok_token *t = &v->tokens[id];
        if (t->len == 0 || !is_matchable(t->type, TOK_PARSE_SPECIAL))
            continue;
        v->has_user_defined |= t->type == TOK_TYPE_USER_DEFINED;
        uint8_t b = (uint8_t)v->blob[t->off];
        v->spec_first[b >> 3] |= (uint8_t)(1u << (b & 7));
        if (t->len < 256 && !seen[t->len]) {   /* a special of 256+ bytes is never cut out */
            seen[t->len] = true;
            n++;
        }
    }
    glim_free(v->spec_lens);
    v->spec_lens = NULL;
    v->n_spec_lens = 0;
    if (n == 0)
        return GLIM_OK;
    v->spec_lens = glim_malloc((size_t)n * sizeof *v->spec_lens);
    if (!v->spec_lens)
        return GLIM_ENOMEM;
    for (int i = 255, k = 0; i > 0; i--)   /* longest first, as llama.cpp tries them */
        if (seen[i])
            v->spec_lens[k++] = i;
    v->n_spec_lens = n;
    return GLIM_OK;
}

static void eog_put(struct tok_vocab *v, int32_t id)
{
    if (id < 0 || id >= v->n_vocab || v->n_eog >= TOK_MAX_EOG)
        return;
    for (int i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id)
            return;
    v->eog[v->n_eog++] = id;
}

/* Names that end a generation whatever the metadata says (llama.cpp's list,
 * minus `<|eom|>`: Muse Glimmer continues through it, runtime.md §4.3). */
static void eog_build(struct tok_vocab *v)
{
    static const char *const names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
        "<|end_of_text|>", "<|eom_id|>", "<EOT>", "<|return|>", "<|call|>", "_<EOT>",
    };
    v->n_eog = 0;
    eog_put(v, v->eos);
    eog_put(v, v->eot);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int32_t id = tok_lookup(v, names[i], strlen(names[i]));
        if (id >= 0 && v->tokens[id].type == TOK_TYPE_CONTROL)
            eog_put(v, id);
    }
}

static void spm_bytes_init(struct tok_vocab *v)
{
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        v->byte_id[b] = tok_lookup(v, name, 6);
    }
}

int tok_vocab_finish(struct tok_vocab *v, struct glim_err *err)
{
    if ((!v->tmap && tok_vocab_index(v) != GLIM_OK) || specials_build(v) != GLIM_OK)
        return glim_fail(err, GLIM_ENOMEM, "tokenizer: out of memory building the token map");
    if (v->kind == TOK_KIND_SPM)
        spm_bytes_init(v);
    else if (tok_bpe_bytes_init(v, err) != GLIM_OK)
        return err ? err->code : GLIM_EFORMAT;
    eog_build(v);
    return GLIM_OK;
}

/* ---- GGUF -------------------------------------------------------------- */

/* An optional id key: absent → keep *id; present but out of range → -1. */
static int gguf_id(const struct gguf_file *f, const char *key, int32_t n_vocab, int32_t *id,
                   struct glim_err *err)
{
    uint32_t u;
    int rc = gguf_get_u32(f, key, &u, err);
    if (rc == GLIM_ENOTFOUND)
        return GLIM_OK;
    if (rc != GLIM_OK)
        return rc;
    *id = u < (uint32_t)n_vocab ? (int32_t)u : -1;
    return GLIM_OK;
}

static int gguf_flag(const struct gguf_file *f, const char *key, bool *out, struct glim_err *err)
{
    int rc = gguf_get_bool(f, key, out, err);
    return rc == GLIM_ENOTFOUND ? GLIM_OK : rc;
}

static int gguf_tokens(struct tok_vocab *v, const struct gguf_file *f, const struct gguf_kv *toks,
                       struct glim_err *err)
{
    const struct gguf_kv *scores = NULL, *types = NULL;
    int rc = gguf_get_arr(f, "tokenizer.ggml.scores", &scores, err);
    if (rc != GLIM_OK && rc != GLIM_ENOTFOUND)
        return rc;
    rc = gguf_get_arr(f, "tokenizer.ggml.token_type", &types, err);
    if (rc != GLIM_OK && rc != GLIM_ENOTFOUND)
        return rc;
    if ((scores && scores->arr_n != toks->arr_n) || (types && types->arr_n != toks->arr_n))
        return glim_fail(err, GLIM_EFORMAT, "%s: tokenizer.ggml.scores/token_type: expected %llu entries",
                         gguf_path(f), (unsigned long long)toks->arr_n);
    for (int32_t id = 0; id < v->n_vocab; id++) {
        const char *s;
        size_t n;
        double score = 0;
        int64_t type = TOK_TYPE_NORMAL;
        if (gguf_arr_str(toks, (uint64_t)id, &s, &n) != GLIM_OK ||
            (scores && gguf_arr_float(scores, (uint64_t)id, &score) != GLIM_OK) ||
            (types && gguf_arr_int(types, (uint64_t)id, &type) != GLIM_OK))
            return glim_fail(err, GLIM_EFORMAT, "%s: tokenizer.ggml token %d: unreadable entry",
                             gguf_path(f), id);
        if (tok_set_text(v, id, s, n) != GLIM_OK)
            return glim_fail(err, GLIM_ENOMEM, "%s: token %d: text does not fit", gguf_path(f), id);
        v->tokens[id].score = (float)score;
        v->tokens[id].type = (uint8_t)(type >= 0 && type <= TOK_TYPE_BYTE ? type : TOK_TYPE_NORMAL);
    }
    return GLIM_OK;
}

static int gguf_merges(struct tok_vocab *v, const struct gguf_file *f, struct glim_err *err)
{
    const struct gguf_kv *m;
    int rc = gguf_get_arr(f, "tokenizer.ggml.merges", &m, err);
    if (rc == GLIM_ENOTFOUND)
        return glim_fail(err, GLIM_EFORMAT, "%s: tokenizer.ggml.model is gpt2 but tokenizer.ggml.merges is missing",
                         gguf_path(f));
    if (rc != GLIM_OK)
        return rc;
    if (tok_bpe_merges_init(v, m->arr_n, err) != GLIM_OK)
        return err ? err->code : GLIM_ENOMEM;
    for (uint64_t i = 0; i < m->arr_n && i < UINT32_MAX; i++) {
        const char *s;
        size_t n;
        if (gguf_arr_str(m, i, &s, &n) != GLIM_OK)
            return glim_fail(err, GLIM_EFORMAT, "%s: tokenizer.ggml.merges[%llu]: not a string",
                             gguf_path(f), (unsigned long long)i);
        /* "left right"; the split is the first space after byte 0 (parts never hold a raw space) */
        const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
        if (!sp)
            continue;
        if (tok_bpe_merge_add(v, s, (size_t)(sp - s), sp + 1, n - (size_t)(sp - s) - 1, (uint32_t)i) != GLIM_OK)
            return glim_fail(err, GLIM_ENOMEM, "%s: out of memory reading merges", gguf_path(f));
    }
    return GLIM_OK;
}

static bool str_is(const char *s, size_t n, const char *lit) { return n == strlen(lit) && !memcmp(s, lit, n); }

/* Special ids and flags; defaults as llama.cpp applies them per model type. */
static int gguf_specials(struct tok_vocab *v, const struct gguf_file *f, struct glim_err *err)
{
    if (v->kind == TOK_KIND_SPM) {
        v->bos = 1 < v->n_vocab ? 1 : -1, v->eos = 2 < v->n_vocab ? 2 : -1, v->unk = 0;
        v->add_bos = true, v->add_space_prefix = true;
    } else {
        v->bos = v->eos = 11 < v->n_vocab ? 11 : -1;
        const char *p = v->pre_name;
        v->add_bos = !strcmp(p, "llama-bpe") || !strcmp(p, "llama3") || !strcmp(p, "llama-v3") ||
                     !strcmp(p, "llama4");
        /* tiktoken-derived vocabularies take a whole piece that is a token as is */
        v->ignore_merges = v->add_bos || !strcmp(p, "gpt-4o");
    }
    int rc = GLIM_OK;
    if ((rc = gguf_id(f, "tokenizer.ggml.bos_token_id", v->n_vocab, &v->bos, err)) ||
        (rc = gguf_id(f, "tokenizer.ggml.eos_token_id", v->n_vocab, &v->eos, err)) ||
        (rc = gguf_id(f, "tokenizer.ggml.eot_token_id", v->n_vocab, &v->eot, err)) ||
        (rc = gguf_id(f, "tokenizer.ggml.eom_token_id", v->n_vocab, &v->eom, err)) ||
        (rc = gguf_id(f, "tokenizer.ggml.unknown_token_id", v->n_vocab, &v->unk, err)) ||
        (rc = gguf_id(f, "tokenizer.ggml.padding_token_id", v->n_vocab, &v->pad, err)) ||
        (rc = gguf_flag(f, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) ||
        (rc = gguf_flag(f, "tokenizer.ggml.add_eos_token", &v->add_eos, err)) ||
        (rc = gguf_flag(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err)))
        return rc;
    return GLIM_OK;
}

static int gguf_kind(const struct gguf_file *f, enum tok_kind *kind, struct glim_err *err)
{
    const char *s;
    size_t n;
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &s, &n, err);
    if (rc == GLIM_ENOTFOUND)
        return glim_fail(err, GLIM_ENOTFOUND, "%s: no vocabulary (tokenizer.ggml.model is absent); pass --tokenizer tokenizer.json",
                         gguf_path(f));
    if (rc != GLIM_OK)
        return rc;
    if (str_is(s, n, "llama")) {
        *kind = TOK_KIND_SPM;
        return GLIM_OK;
    }
    if (str_is(s, n, "gpt2")) {
        *kind = TOK_KIND_BPE;
        return GLIM_OK;
    }
    if (str_is(s, n, "no_vocab") || str_is(s, n, "none"))
        return glim_fail(err, GLIM_ENOTFOUND, "%s: no vocabulary (tokenizer.ggml.model = %.*s); pass --tokenizer tokenizer.json",
                         gguf_path(f), (int)n, s);
    return glim_fail(err, GLIM_EUNSUPPORTED, "%s: tokenizer.ggml.model: expected llama or gpt2, got '%.*s'",
                     gguf_path(f), (int)GLIM_MIN(n, 64), s);
}

static int gguf_pre(struct tok_vocab *v, const struct gguf_file *f, struct glim_err *err)
{
    const char *s = "default";
    size_t n = 7;
    int rc = gguf_get_str(f, "tokenizer.ggml.pre", &s, &n, err);
    if (rc != GLIM_OK && rc != GLIM_ENOTFOUND)
        return rc;
    if (n >= sizeof v->pre_name)
        return glim_fail(err, GLIM_EUNSUPPORTED, "%s: tokenizer.ggml.pre: unknown pre-tokenizer '%.*s'",
                         gguf_path(f), 40, s);
    memcpy(v->pre_name, s, n);
    v->pre_name[n] = '\0';
    if (memchr(v->pre_name, '\0', n))
        return glim_fail(err, GLIM_EFORMAT, "%s: tokenizer.ggml.pre holds a NUL byte", gguf_path(f));
    rc = tok_pretok_for_name(v->pre_name, &v->pre, err);
    return rc ? glim_err_prefix(err, "%s", gguf_path(f)) : GLIM_OK;
}

static bool gguf_is_muse(const struct gguf_file *f)
{
    const char *s;
    size_t n;
    return gguf_get_str(f, "general.architecture", &s, &n, NULL) == GLIM_OK && str_is(s, n, "muse-glimmer");
}

int tok_vocab_from_gguf(const struct gguf_file *f, struct tok_vocab **out, struct glim_err *err)
{
    enum tok_kind kind;
    const struct gguf_kv *toks;
    struct tok_vocab *v = NULL;
    int rc = gguf_kind(f, &kind, err);
    if (rc != GLIM_OK)
        return rc;
    rc = gguf_get_arr(f, "tokenizer.ggml.tokens", &toks, err);
    if (rc == GLIM_ENOTFOUND)
        return glim_fail(err, GLIM_ENOTFOUND, "%s: no vocabulary (tokenizer.ggml.tokens is absent)", gguf_path(f));
    if (rc != GLIM_OK)
        return rc;
    if (toks->arr_type != GGUF_VT_STRING || toks->arr_n == 0 || toks->arr_n > (1u << 26))
        return glim_fail(err, GLIM_EFORMAT, "%s: tokenizer.ggml.tokens: expected 1..%u strings, got %llu",
                         gguf_path(f), 1u << 26, (unsigned long long)toks->arr_n);
    v = tok_vocab_alloc((int32_t)toks->arr_n);
    if (!v)
        return glim_fail(err, GLIM_ENOMEM, "%s: out of memory for %llu tokens", gguf_path(f),
                         (unsigned long long)toks->arr_n);
    v->kind = kind;
    if ((rc = gguf_tokens(v, f, toks, err)) || (kind == TOK_KIND_BPE && (rc = gguf_pre(v, f, err))) ||
        (rc = gguf_specials(v, f, err)) || (rc = tok_vocab_index(v)))
        goto fail;
    if (kind == TOK_KIND_BPE && (rc = gguf_merges(v, f, err)))
        goto fail;
    if ((rc = tok_vocab_finish(v, err)))
        goto fail;
    if (gguf_is_muse(f) && kind == TOK_KIND_BPE && v->n_vocab >= 202048 &&
        (rc = tok_vocab_apply_muse_glimmer(v, err)))
        goto fail;
    *out = v;
    return GLIM_OK;
fail:
    if (rc == GLIM_ENOMEM && err && !err->msg[0])
        glim_fail(err, rc, "%s: out of memory loading the vocabulary", gguf_path(f));
    tok_vocab_free(v);
    return rc;
}

/* ---- Muse Glimmer (runtime.md §4.1) ------------------------------------ */

int tok_vocab_apply_muse_glimmer(struct tok_vocab *v, struct glim_err *err)
{
    static const struct { int32_t id; const char *text; } renamed[] = {
        {200022, "<|start|>"}, {200023, "<|message|>"}, {200091, "<|video|>"},
    };
    if (v->n_vocab < 202048 || v->kind != TOK_KIND_BPE)
        return glim_fail(err, GLIM_EINVAL, "Muse Glimmer vocabulary: expected a Llama 4 BPE vocabulary of "
                         "202048 tokens, got %d", v->n_vocab);
    for (size_t i = 0; i < sizeof renamed / sizeof renamed[0]; i++) {
        if (tok_set_text(v, renamed[i].id, renamed[i].text, strlen(renamed[i].text)) != GLIM_OK)
            return glim_fail(err, GLIM_ENOMEM, "Muse Glimmer vocabulary: out of memory");
        v->tokens[renamed[i].id].type = TOK_TYPE_CONTROL;
    }
    static const int32_t control[] = {200000, 200001, 200007, 200008, 200018, 200080, 200081, 200090, 200092};
    for (size_t i = 0; i < sizeof control / sizeof control[0]; i++)
        v->tokens[control[i]].type = TOK_TYPE_CONTROL;
    v->bos = 200000, v->eos = 200001, v->eot = 200008, v->eom = 200007, v->pad = 200018;
    v->add_bos = true;
    if (tok_vocab_index(v) != GLIM_OK || specials_build(v) != GLIM_OK)
        return glim_fail(err, GLIM_ENOMEM, "Muse Glimmer vocabulary: out of memory");
    eog_build(v);   /* {200001, 200008}; <|eom|> is not terminal (§4.3) */
    return GLIM_OK;
}

/* ---- encoding ---------------------------------------------------------- */

/* Id of the longest matchable special token at s, with its length. */
static int32_t match_special(const struct tok_vocab *v, const char *s, size_t n, unsigned flags, size_t *mlen)
{
    for (int i = 0; i < v->n_spec_lens; i++) {
        size_t len = (size_t)v->spec_lens[i];
        if (len > n)
            continue;
        int32_t id = tok_lookup(v, s, len);
        if (id >= 0 && is_matchable(v->tokens[id].type, flags)) {
            *mlen = len;
            return id;
        }
    }
    return -1;
}

static int encode_plain(const struct tok_vocab *v, const char *s, size_t n, bool prev_special,
                        struct tok_ids *out, struct glim_err *err)
{
    if (v->kind == TOK_KIND_SPM)
        return tok_spm_encode(v, s, n, v->add_space_prefix && prev_special, out, err);
    if (n == 0)
        return GLIM_OK;
    return tok_bpe_encode(v, s, n, out, err);
}

static int encode_spans(const struct tok_vocab *v, const char *text, size_t len, unsigned flags,
                        struct tok_ids *out, struct glim_err *err)
{
    bool prev_special = !(flags & TOK_NO_SPACE_PREFIX);
    size_t start = 0, pos = 0;
    if (!(flags & TOK_PARSE_SPECIAL) && !v->has_user_defined)
        pos = len;   /* nothing can be cut out of this text */
    while (pos < len) {
        uint8_t b = (uint8_t)text[pos];
        size_t mlen = 0;
        int32_t id = -1;
        if (v->spec_first[b >> 3] & (1u << (b & 7)))
            id = match_special(v, text + pos, len - pos, flags, &mlen);
        if (id < 0) {
            pos++;
            continue;
        }
        int rc = pos > start ? encode_plain(v, text + start, pos - start, prev_special, out, err) : GLIM_OK;
        if (rc != GLIM_OK)
            return rc;
        if (tok_ids_push(out, id) != GLIM_OK)
            return glim_fail(err, GLIM_ENOMEM, "tokenizer: out of memory");
        pos += mlen, start = pos, prev_special = true;
    }
    return len > start ? encode_plain(v, text + start, len - start, prev_special, out, err) : GLIM_OK;
}

int tok_encode(const struct tok_vocab *v, const char *text, size_t len, unsigned flags,
               struct tok_ids *out, struct glim_err *err)
{
    size_t n0 = out->n;
    bool bos = (flags & TOK_ADD_BOS) || ((flags & TOK_ADD_SPECIAL) && v->add_bos);
    bool eos = (flags & TOK_ADD_EOS) || ((flags & TOK_ADD_SPECIAL) && v->add_eos);
    int rc = GLIM_OK;
    if (!text && len)
        return glim_fail(err, GLIM_EINVAL, "tok_encode: NULL text with length %zu", len);
    if (bos && v->bos >= 0 && tok_ids_push(out, v->bos) != GLIM_OK)
        rc = glim_fail(err, GLIM_ENOMEM, "tokenizer: out of memory");
    if (rc == GLIM_OK && len)
        rc = encode_spans(v, text, len, flags, out, err);
    if (rc == GLIM_OK && eos && v->eos >= 0 && tok_ids_push(out, v->eos) != GLIM_OK)
        rc = glim_fail(err, GLIM_ENOMEM, "tokenizer: out of memory");
    if (rc != GLIM_OK)
        out->n = n0;
    return rc;
}

/* ---- decoding ---------------------------------------------------------- */

const char *tok_piece(const struct tok_vocab *v, int32_t id, size_t *len)
{
    if (id < 0 || id >= v->n_vocab)
        return NULL;
    if (len)
        *len = v->tokens[id].len;
    return v->blob + v->tokens[id].off;
}

int tok_piece_bytes(const struct tok_vocab *v, int32_t id, unsigned flags, struct strbuf *out)
{
    if (id < 0 || id >= v->n_vocab)
        return GLIM_ERANGE;
    const struct tok_token *t = &v->tokens[id];
    const char *s = v->blob + t->off;
    switch (t->type) {
    case TOK_TYPE_CONTROL:
    case TOK_TYPE_UNKNOWN:
        return (flags & TOK_DECODE_SPECIAL) ? strbuf_append(out, s, t->len) : GLIM_OK;
    case TOK_TYPE_UNUSED:
        return GLIM_OK;
    case TOK_TYPE_USER_DEFINED:
        return strbuf_append(out, s, t->len);
    case TOK_TYPE_BYTE:
        if (v->kind == TOK_KIND_SPM && t->len == 6 && !memcmp(s, "<0x", 3)) {
            char c = (char)strtoul(s + 3, NULL, 16);
            return strbuf_append(out, &c, 1);
        }
        break;
    default:
        break;
    }
    return v->kind == TOK_KIND_SPM ? tok_spm_piece(s, t->len, out) : tok_bpe_piece(v, s, t->len, out);
}

int tok_decode(const struct tok_vocab *v, const int32_t *ids, size_t n, unsigned flags, struct strbuf *out)
{
    size_t start = out->len;
    for (size_t i = 0; i < n; i++) {
        int rc = tok_piece_bytes(v, ids[i], flags, out);
        if (rc != GLIM_OK)
            return rc;
    }
    /* the SPM encoder turned the start of the text into "▁..."; undo that once */
    if ((flags & TOK_DECODE_STRIP_SPACE) && v->kind == TOK_KIND_SPM && v->add_space_prefix &&
        out->len > start && out->data[start] == ' ') {
        memmove(out->data + start, out->data + start + 1, out->len - start - 1);
        out->data[--out->len] = '\0';
    }
    return GLIM_OK;
}

void tok_stream_init(struct tok_stream *s, const struct tok_vocab *v, unsigned flags)
{
    s->v = v, s->flags = flags, s->n_held = 0;
}

/* Append bytes[0..n) to out with every invalid sequence replaced by U+FFFD. */
static int append_valid(struct strbuf *out, const char *s, size_t n)
{
    size_t i = 0, run = 0;
    uint32_t cp;
    while (i < n) {
        int k = utf8_decode(s + i, n - i, &cp);
        if (k > 0) {
            i += (size_t)k;
            continue;
        }
        if (strbuf_append(out, s + run, i - run) || strbuf_append(out, "\xEF\xBF\xBD", 3))
            return GLIM_ENOMEM;
        run = ++i;
    }
    return strbuf_append(out, s + run, n - run);
}

int tok_stream_feed(struct tok_stream *s, int32_t id, struct strbuf *out)
{
    struct strbuf tmp;
    strbuf_init(&tmp);
    int rc = strbuf_append(&tmp, s->held, s->n_held);
    if (rc == GLIM_OK)
        rc = tok_piece_bytes(s->v, id, s->flags, &tmp);
    if (rc == GLIM_OK) {
        size_t hold = utf8_incomplete_tail(tmp.data, tmp.len);
        rc = append_valid(out, tmp.data, tmp.len - hold);
        if (hold)
            memcpy(s->held, tmp.data + tmp.len - hold, hold);
        s->n_held = hold;
    }
    strbuf_clear(&tmp);
    return rc;
}

int tok_stream_flush(struct tok_stream *s, struct strbuf *out)
{
    int rc = s->n_held ? strbuf_append(out, "\xEF\xBF\xBD", 3) : GLIM_OK;
    s->n_held = 0;
    return rc;
}

/* ---- lookups ----------------------------------------------------------- */

int32_t tok_n_vocab(const struct tok_vocab *v) { return v->n_vocab; }
enum tok_kind tok_kind(const struct tok_vocab *v) { return v->kind; }
const char *tok_pre_name(const struct tok_vocab *v) { return v->pre_name; }
int32_t tok_bos(const struct tok_vocab *v) { return v->bos; }
int32_t tok_eos(const struct tok_vocab *v) { return v->eos; }
int32_t tok_eot(const struct tok_vocab *v) { return v->eot; }
int32_t tok_eom(const struct tok_vocab *v) { return v->eom; }
int32_t tok_pad(const struct tok_vocab *v) { return v->pad; }
bool tok_add_bos(const struct tok_vocab *v) { return v->add_bos; }
bool tok_add_eos(const struct tok_vocab *v) { return v->add_eos; }

enum tok_type tok_type(const struct tok_vocab *v, int32_t id)
{
    return id >= 0 && id < v->n_vocab ? (enum tok_type)v->tokens[id].type : TOK_TYPE_UNDEFINED;
}

bool tok_is_control(const struct tok_vocab *v, int32_t id) { return tok_type(v, id) == TOK_TYPE_CONTROL; }

int32_t tok_find(const struct tok_vocab *v, const char *text, size_t len) { return tok_lookup(v, text, len); }

bool tok_is_eog(const struct tok_vocab *v, int32_t id)
{
    for (int i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id)
            return true;
    return false;
}

int tok_eog_add(struct tok_vocab *v, int32_t id, struct glim_err *err)
{
    if (id < 0 || id >= v->n_vocab)
        return glim_fail(err, GLIM_ERANGE, "end-of-generation id %d: expected 0..%d", id, v->n_vocab - 1);
    if (v->n_eog >= TOK_MAX_EOG && !tok_is_eog(v, id))
        return glim_fail(err, GLIM_ERANGE, "end-of-generation set is full (%d ids)", TOK_MAX_EOG);
    eog_put(v, id);
    return GLIM_OK;
}
