/*
 * tok_hf.c — vocabulary from a Hugging Face tokenizer.json (jansson), for
 * models whose GGUF carries no vocabulary.
 *
 * Supported: model BPE (vocab + merges as "a b" strings or [a, b] pairs,
 * ignore_merges), byte-level (a ByteLevel pre-tokenizer or decoder), split
 * patterns from Split{Regex|String, Isolated} and ByteLevel{use_regex}
 * inside an optional Sequence, added_tokens (special → CONTROL, else
 * USER_DEFINED). Not applied: normalizers (Qwen's NFC: text is assumed to be
 * NFC already). Anything else is refused with a message naming it, rather
 * than tokenized differently from the reference.
 *
 * BOS/EOS: a TemplateProcessing post-processor names the BOS; a
 * tokenizer_config.json next to the file (bos_token, eos_token,
 * add_bos_token, add_eos_token) overrides; otherwise well-known names.
 */
#include <jansson.h>
#include <string.h>

#include "../base/alloc.h"
#include "tok_impl.h"

#define MAX_PATS 8

struct hf_pre {
    const char *pats[MAX_PATS];   /* borrowed from the JSON, or static */
    char       *owned[MAX_PATS];  /* escaped literal patterns */
    int         n;
    bool        byte_level;
};

static int add_pattern(struct hf_pre *p, const char *pat, char *owned, struct glim_err *err)
{
    if (p->n >= MAX_PATS) {
        glim_free(owned);
        return glim_fail(err, GLIM_EUNSUPPORTED, "tokenizer.json: more than %d split patterns", MAX_PATS);
    }
    p->owned[p->n] = owned;
    p->pats[p->n++] = pat;
    return GLIM_OK;
}

/* Split with a literal string: \Q...\E unless the string holds "\E" */
static int split_literal(struct hf_pre *p, const char *s, struct glim_err *err)
{
    if (strstr(s, "\\E"))
        return glim_fail(err, GLIM_EUNSUPPORTED, "tokenizer.json: Split pattern string holds \\E");
    size_t n = strlen(s);
    char *q = glim_malloc(n + 5);
    if (!q)
        return glim_fail(err, GLIM_ENOMEM, "tokenizer.json: out of memory");
    snprintf(q, n + 5, "\\Q%s\\E", s);
    return add_pattern(p, q, q, err);
}

static int pre_split(struct hf_pre *p, const json_t *node, struct glim_err *err)
{
    const json_t *pat = json_object_get(node, "pattern");
    const char *behavior = json_string_value(json_object_get(node, "behavior"));
    const char *re = json_string_value(json_object_get(pat, "Regex"));
    const char *lit = json_string_value(json_object_get(pat, "String"));
    if (json_is_true(json_object_get(node, "invert")) || (behavior && strcmp(behavior, "Isolated")))
        return glim_fail(err, GLIM_EUNSUPPORTED, "tokenizer.json: Split behavior '%s'%s: only Isolated",
                         behavior ? behavior : "?", json_is_true(json_object_get(node, "invert")) ? " inverted" : "");
    if (re)
        return add_pattern(p, re, NULL, err);
    if (lit)
        return split_literal(p, lit, err);
    return glim_fail(err, GLIM_EFORMAT, "tokenizer.json: Split without pattern.Regex or pattern.String");
}

static int pre_collect(struct hf_pre *p, const json_t *node, int depth, struct glim_err *err)
{
    if (!node || json_is_null(node))
        return GLIM_OK;
    const char *type = json_string_value(json_object_get(node, "type"));
    if (!type || depth > 4)
        return glim_fail(err, GLIM_EFORMAT, "tokenizer.json: pre_tokenizer without a type");
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(node, "pretokenizers");
        size_t i;
        const json_t *e;
        json_array_foreach(list, i, e) {
            int rc = pre_collect(p, e, depth + 1, err);
            if (rc)
                return rc;
        }
        return GLIM_OK;
    }
    if (!strcmp(type, "Split"))
        return pre_split(p, node, err);
    if (!strcmp(type, "ByteLevel")) {
        p->byte_level = true;
        if (json_is_true(json_object_get(node, "add_prefix_space")))
            return glim_fail(err, GLIM_EUNSUPPORTED, "tokenizer.json: ByteLevel add_prefix_space is not supported");
        const json_t *use = json_object_get(node, "use_regex");
        return !use || json_is_true(use) ? add_pattern(p, TOK_PATTERN_GPT2, NULL, err) : GLIM_OK;
    }
    if (!strcmp(type, "Digits"))
        return add_pattern(p, json_is_true(json_object_get(node, "individual_digits")) ? "\\p{N}" : "\\p{N}+",
                           NULL, err);
    return glim_fail(err, GLIM_EUNSUPPORTED, "tokenizer.json: pre_tokenizer type '%s' is not supported", type);
}

static void pre_clear(struct hf_pre *p)
{
    for (int i = 0; i < p->n; i++)
        glim_free(p->owned[i]);
}

/* ---- tokens ------------------------------------------------------------ */

static int max_id(const json_t *vocab, const json_t *added, int64_t *out, struct glim_err *err)
{
    int64_t hi = -1;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)vocab, key, val) {
        int64_t id = json_integer_value(val);
        if (!json_is_integer(val) || id < 0 || id >= (1 << 26))
            return glim_fail(err, GLIM_EFORMAT, "tokenizer.json: model.vocab['%.40s']: expected an id 0..%d",
                             key, (1 << 26) - 1);
        hi = GLIM_MAX(hi, id);
    }
    size_t i;
    json_array_foreach(added, i, val) {
        const json_t *jid = json_object_get(val, "id");
        int64_t id = json_integer_value(jid);
        if (!json_is_integer(jid) || id < 0 || id >= (1 << 26) || !json_is_string(json_object_get(val, "content")))
            return glim_fail(err, GLIM_EFORMAT, "tokenizer.json: added_tokens[%zu]: expected id 0..%d and content",
                             i, (1 << 26) - 1);
        hi = GLIM_MAX(hi, id);
    }
    if (hi < 0)
        return glim_fail(err, GLIM_EFORMAT, "tokenizer.json: model.vocab is empty");
    *out = hi;
    return GLIM_OK;
}

static int load_tokens(struct tok_vocab *v, const json_t *vocab, const json_t *added, struct glim_err *err)
{
    const char *key;
    const json_t *val;
    for (int32_t id = 0; id < v->n_vocab; id++)
        v->tokens[id].type = TOK_TYPE_UNUSED;   /* holes stay unused, empty */
    json_object_foreach((json_t *)vocab, key, val) {
        int32_t id = (int32_t)json_integer_value(val);
        if (tok_set_text(v, id, key, strlen(key)) != GLIM_OK)
            return glim_fail(err, GLIM_ENOMEM, "tokenizer.json: out of memory");
        v->tokens[id].type = TOK_TYPE_NORMAL;
    }
    size_t i;
    json_array_foreach(added, i, val) {
        int32_t id = (int32_t)json_integer_value(json_object_get(val, "id"));
        const json_t *content = json_object_get(val, "content");
        if (tok_set_text(v, id, json_string_value(content), json_string_length(content)) != GLIM_OK)
            return glim_fail(err, GLIM_ENOMEM, "tokenizer.json: out of memory");
        v->tokens[id].type = json_is_true(json_object_get(val, "special")) ? TOK_TYPE_CONTROL : TOK_TYPE_USER_DEFINED;
    }
    return GLIM_OK;
}

static int load_merges(struct tok_vocab *v, const json_t *merges, struct glim_err *err)
{
    size_t i;
    const json_t *m;
    if (tok_bpe_merges_init(v, json_array_size(merges), err) != GLIM_OK)
        return err ? err->code : GLIM_ENOMEM;
    json_array_foreach(merges, i, m) {
        const char *l = NULL, *r = NULL;
        size_t nl = 0, nr = 0;
        if (json_is_string(m)) {   /* "left right" */
            const char *s = json_string_value(m);
            size_t n = json_string_length(m);
            const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
            if (sp)
                l = s, nl = (size_t)(sp - s), r = sp + 1, nr = n - nl - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2) {   /* ["left", "right"] */
            const json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
            l = json_string_value(a), nl = json_string_length(a);
            r = json_string_value(b), nr = json_string_length(b);
        }
        if (!l || !r)
            return glim_fail(err, GLIM_EFORMAT, "tokenizer.json: model.merges[%zu]: expected \"a b\" or [a, b]", i);
        if (tok_bpe_merge_add(v, l, nl, r, nr, (uint32_t)i) != GLIM_OK)
            return glim_fail(err, GLIM_ENOMEM, "tokenizer.json: out of memory");
    }
    return GLIM_OK;
}

/* ---- special ids ------------------------------------------------------- */

/* "bos_token": "<s>" | {"content": "<s>"} | null → id or -1 */
static int32_t config_token(const struct tok_vocab *v, const json_t *t)
{
    if (json_is_object(t))
        t = json_object_get(t, "content");
    return json_is_string(t) ? tok_lookup(v, json_string_value(t), json_string_length(t)) : -1;
}

static int32_t first_known(const struct tok_vocab *v, const char *const *names)
{
    for (; *names; names++) {
        int32_t id = tok_lookup(v, *names, strlen(*names));
        if (id >= 0)
            return id;
    }
    return -1;
}

static void post_processor_bos(struct tok_vocab *v, const json_t *post)
{
    const char *type = json_string_value(json_object_get(post, "type"));
    if (!type || strcmp(type, "TemplateProcessing"))
        return;
    const json_t *first = json_array_get(json_object_get(post, "single"), 0);
    const json_t *st = json_object_get(first, "SpecialToken");
    const json_t *id = json_object_get(st, "id");
    if (json_is_string(id)) {
        v->bos = tok_lookup(v, json_string_value(id), json_string_length(id));
        v->add_bos = v->bos >= 0;
    }
}

static void read_config(struct tok_vocab *v, const char *json_path)
{
    const char *slash = json_path ? strrchr(json_path, '/') : NULL;
    size_t dir = slash ? (size_t)(slash - json_path) + 1 : 0;
    char path[4096];
    if (!json_path || dir + 32 > sizeof path)
        return;
    snprintf(path, sizeof path, "%.*stokenizer_config.json", (int)dir, json_path);
    json_error_t je;
    json_t *cfg = json_load_file(path, 0, &je);
    if (!cfg)
        return;   /* optional */
    int32_t id = config_token(v, json_object_get(cfg, "bos_token"));
    if (id >= 0)
        v->bos = id;
    if ((id = config_token(v, json_object_get(cfg, "eos_token"))) >= 0)
        v->eos = id;
    if (json_is_boolean(json_object_get(cfg, "add_bos_token")))
        v->add_bos = json_is_true(json_object_get(cfg, "add_bos_token"));
    if (json_is_boolean(json_object_get(cfg, "add_eos_token")))
        v->add_eos = json_is_true(json_object_get(cfg, "add_eos_token"));
    json_decref(cfg);
}

static void special_ids(struct tok_vocab *v, const json_t *root, const char *path)
{
    static const char *const bos[] = {"<|begin_of_text|>", "<|startoftext|>", "<s>", "<bos>", NULL};
    static const char *const eos[] = {"<|end_of_text|>", "<|endoftext|>", "<|return|>", "</s>", "<eos>", NULL};
    static const char *const eot[] = {"<|eot_id|>", "<|eot|>", "<|im_end|>", "<|end|>", "<end_of_turn>", NULL};
    static const char *const eom[] = {"<|eom_id|>", "<|eom|>", NULL};
    static const char *const pad[] = {"<|finetune_right_pad_id|>", "<|finetune_right_pad|>", "<pad>", NULL};
    v->bos = first_known(v, bos);
    v->eos = first_known(v, eos);
    v->eot = first_known(v, eot);
    v->eom = first_known(v, eom);
    v->pad = first_known(v, pad);
    post_processor_bos(v, json_object_get(root, "post_processor"));
    read_config(v, path);
}

/* ---- entry points ------------------------------------------------------ */

static int byte_level(const json_t *root, struct hf_pre *pre)
{
    const char *dec = json_string_value(json_object_get(json_object_get(root, "decoder"), "type"));
    return pre->byte_level || (dec && !strcmp(dec, "ByteLevel"));
}

static int from_root(const json_t *root, const char *path, struct tok_vocab **out, struct glim_err *err)
{
    const json_t *model = json_object_get(root, "model");
    const json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    const json_t *added = json_object_get(root, "added_tokens");
    const char *type = json_string_value(json_object_get(model, "type"));
    struct hf_pre pre = {0};
    struct tok_vocab *v = NULL;
    int64_t hi = -1;
    int rc;
    if ((type && strcmp(type, "BPE")) || !json_is_object(vocab) || !json_is_array(merges))
        return glim_fail(err, GLIM_EUNSUPPORTED, "tokenizer.json: model type '%s': expected BPE with vocab and merges",
                         type ? type : "?");
    if ((rc = pre_collect(&pre, json_object_get(root, "pre_tokenizer"), 0, err)))
        goto fail;
    if (!byte_level(root, &pre)) {
        rc = glim_fail(err, GLIM_EUNSUPPORTED, "tokenizer.json: only byte-level BPE is supported (no ByteLevel "
                       "pre_tokenizer or decoder)");
        goto fail;
    }
    if ((rc = max_id(vocab, added, &hi, err)))
        goto fail;
    if (!(v = tok_vocab_alloc((int32_t)hi + 1))) {
        rc = glim_fail(err, GLIM_ENOMEM, "tokenizer.json: out of memory for %lld tokens", (long long)hi + 1);
        goto fail;
    }
    v->kind = TOK_KIND_BPE;
    v->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    snprintf(v->pre_name, sizeof v->pre_name, "tokenizer.json");
    if ((rc = load_tokens(v, vocab, added, err)) || (rc = tok_pretok_new(pre.pats, pre.n, &v->pre, err)))
        goto fail;
    if (tok_vocab_index(v) != GLIM_OK) {
        rc = glim_fail(err, GLIM_ENOMEM, "tokenizer.json: out of memory");
        goto fail;
    }
    if ((rc = load_merges(v, merges, err)))
        goto fail;
    special_ids(v, root, path);
    if ((rc = tok_vocab_finish(v, err)))
        goto fail;
    pre_clear(&pre);
    *out = v;
    return GLIM_OK;
fail:
    pre_clear(&pre);
    tok_vocab_free(v);
    return rc;
}

int tok_vocab_from_json(const char *path, struct tok_vocab **out, struct glim_err *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return glim_fail(err, GLIM_EFORMAT, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    int rc = from_root(root, path, out, err);
    if (rc)
        glim_err_prefix(err, "%s", path);
    json_decref(root);
    return rc;
}

int tok_vocab_from_json_mem(const char *buf, size_t len, struct tok_vocab **out, struct glim_err *err)
{
    json_error_t je;
    json_t *root = json_loadb(buf, len, 0, &je);
    if (!root)
        return glim_fail(err, GLIM_EFORMAT, "tokenizer.json:%d:%d: %s", je.line, je.column, je.text);
    int rc = from_root(root, NULL, out, err);
    json_decref(root);
    return rc;
}
