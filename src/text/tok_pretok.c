/*
 * tok_pretok.c — pre-tokenizer split patterns (PCRE2 with UTF + UCP, JIT).
 *
 * A byte-level BPE vocabulary first cuts text into pieces with a regex; BPE
 * never merges across pieces. Matches and the gaps between them are both
 * pieces (HF `Split`, behaviour Isolated). Patterns are compiled with
 * PCRE2_MATCH_INVALID_UTF, so invalid UTF-8 in the text is never matched and
 * ends up in a gap piece, which BPE encodes byte by byte.
 *
 * The llama4 / gpt-4o pattern is OpenAI's o200k one, which keeps combining
 * marks (\p{M}) inside words; llama.cpp drops them and fails Hindi, Thai and
 * Khmer (../shared/testdata/PROVENANCE.md). A compiled pattern is shared by
 * all threads; the match data is per call.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <string.h>

#include "../base/alloc.h"
#include "tok_impl.h"

const char *const TOK_PATTERN_GPT2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char PATTERN_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char PATTERN_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char PATTERN_O200K[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* tokenizer.ggml.pre → pattern (names as llama.cpp's converter writes them) */
static const struct { const char *name, *pattern; } PRE_TABLE[] = {
    {"default", NULL}, {"gpt-2", NULL}, {"gpt2", NULL}, {"phi-2", NULL}, {"roberta-bpe", NULL},
    {"llama-bpe", PATTERN_LLAMA3}, {"llama3", PATTERN_LLAMA3}, {"llama-v3", PATTERN_LLAMA3},
    {"falcon3", PATTERN_LLAMA3}, {"pixtral", PATTERN_LLAMA3},
    {"qwen2", PATTERN_QWEN2}, {"deepseek-r1-qwen", PATTERN_QWEN2},
    {"llama4", PATTERN_O200K}, {"gpt-4o", PATTERN_O200K},
};

#define MAX_PATTERNS 8

struct tok_pretok {
    pcre2_code *code[MAX_PATTERNS];   /* owned */
    int         n;
};

void tok_pretok_free(struct tok_pretok *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++)
        pcre2_code_free(p->code[i]);
    glim_free(p);
}

int tok_pretok_new(const char *const *patterns, int n, struct tok_pretok **out, struct glim_err *err)
{
    if (n < 0 || n > MAX_PATTERNS)
        return glim_fail(err, GLIM_EUNSUPPORTED, "pre-tokenizer: %d split patterns (at most %d)", n, MAX_PATTERNS);
    struct tok_pretok *p = glim_calloc(1, sizeof *p);
    if (!p)
        return glim_fail(err, GLIM_ENOMEM, "pre-tokenizer: out of memory");
    for (int i = 0; i < n; i++) {
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *c = pcre2_compile((PCRE2_SPTR)patterns[i], PCRE2_ZERO_TERMINATED,
                                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
        if (!c) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ec, msg, sizeof msg);
            tok_pretok_free(p);
            return glim_fail(err, GLIM_EFORMAT, "pre-tokenizer pattern %d: %s at offset %zu", i,
                             (const char *)msg, (size_t)eo);
        }
        pcre2_jit_compile(c, PCRE2_JIT_COMPLETE);   /* no JIT (e.g. unsupported CPU): interpreter */
        p->code[p->n++] = c;
    }
    *out = p;
    return GLIM_OK;
}

int tok_pretok_for_name(const char *name, struct tok_pretok **out, struct glim_err *err)
{
    for (size_t i = 0; i < sizeof PRE_TABLE / sizeof PRE_TABLE[0]; i++) {
        if (strcmp(name, PRE_TABLE[i].name))
            continue;
        const char *pat = PRE_TABLE[i].pattern ? PRE_TABLE[i].pattern : TOK_PATTERN_GPT2;
        return tok_pretok_new(&pat, 1, out, err);
    }
    return glim_fail(err, GLIM_EUNSUPPORTED,
                     "tokenizer.ggml.pre: unknown pre-tokenizer '%s' (known: gpt-2, llama-bpe, qwen2, llama4, "
                     "gpt-4o and aliases); a tokenizer.json can be given instead", name);
}

struct split {
    const struct tok_pretok *p;
    pcre2_match_data *md[MAX_PATTERNS];
    tok_chunk_fn fn;
    void *ud;
    int   pcre_rc;   /* the PCRE2 error, if one stopped us */
};

static int split_level(struct split *sp, int level, const char *s, size_t n)
{
    if (level == sp->p->n)
        return n ? sp->fn(sp->ud, s, n) : GLIM_OK;
    size_t pos = 0, last = 0;
    int rc = GLIM_OK;
    while (pos < n && rc == GLIM_OK) {
        int m = pcre2_match(sp->p->code[level], (PCRE2_SPTR)s, n, pos, 0, sp->md[level], NULL);
        if (m == PCRE2_ERROR_NOMATCH)
            break;
        if (m < 0) {
            sp->pcre_rc = m;
            return GLIM_EINVAL;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sp->md[level]);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms || ms < pos) {   /* empty match: step one byte, the gap keeps it */
            pos = ms + 1;
            continue;
        }
        if (ms > last)
            rc = split_level(sp, level + 1, s + last, ms - last);
        if (rc == GLIM_OK)
            rc = split_level(sp, level + 1, s + ms, me - ms);
        pos = last = me;
    }
    if (rc == GLIM_OK && last < n)
        rc = split_level(sp, level + 1, s + last, n - last);
    return rc;
}

int tok_pretok_split(const struct tok_pretok *p, const char *s, size_t n, tok_chunk_fn fn, void *ud,
                     struct glim_err *err)
{
    struct split sp = {.p = p, .fn = fn, .ud = ud};
    int rc = GLIM_OK;
    for (int i = 0; i < p->n; i++)
        if (!(sp.md[i] = pcre2_match_data_create_from_pattern(p->code[i], NULL)))
            rc = GLIM_ENOMEM;
    if (rc == GLIM_OK)
        rc = split_level(&sp, 0, s, n);
    for (int i = 0; i < p->n; i++)
        pcre2_match_data_free(sp.md[i]);
    if (rc == GLIM_ENOMEM)
        return glim_fail(err, rc, "pre-tokenizer: out of memory");
    if (sp.pcre_rc) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(sp.pcre_rc, msg, sizeof msg);
        return glim_fail(err, GLIM_EINVAL, "pre-tokenizer: regex match failed: %s", (const char *)msg);
    }
    return rc;
}
