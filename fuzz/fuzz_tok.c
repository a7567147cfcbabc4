/*
 * fuzz_tok.c — libFuzzer target for the tokenizers.
 *
 * Input byte 0 picks what to do with the rest:
 *   mode 0..5  encode the bytes with one of three vocabularies (stories260K
 *              SPM, GPT-2 BPE, Llama 4 BPE with the Muse Glimmer table),
 *              with or without TOK_PARSE_SPECIAL; decode the ids again.
 *              Byte-level BPE must give the bytes back exactly.
 *   mode 6     the bytes are int32 ids: decode them, and stream them through
 *              tok_stream, whose output must always be valid UTF-8.
 *   mode 7     the bytes are a tokenizer.json: load it, encode a fixed text.
 * Vocabularies load once (first call). Run:
 *   build-fuzz/fuzz/fuzz_tok -max_len=4096 -timeout=10 [corpus dir]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GLIM_HAVE_TEXT
#include "gguf/gguf.h"
#include "text/tok.h"
#include "text/utf8.h"

static struct tok_vocab *V[3];

static struct tok_vocab *load(const char *path, bool muse)
{
    struct gguf_file *f = NULL;
    struct tok_vocab *v = NULL;
    struct glim_err err = {0};
    if (gguf_open(path, &f, &err) != GLIM_OK || tok_vocab_from_gguf(f, &v, &err) != GLIM_OK ||
        (muse && tok_vocab_apply_muse_glimmer(v, &err) != GLIM_OK)) {
        fprintf(stderr, "fuzz_tok: %s: %s\n", path, err.msg);
        abort();   /* setup, not input: the harness is broken */
    }
    gguf_close(f);
    return v;
}

static void setup(void)
{
    if (V[0])
        return;
    V[0] = load(GLIM_SRC "/models/stories260K.gguf", false);
    V[1] = load(GLIM_TESTDATA "/vocab/ggml-vocab-gpt-2.gguf", false);
    V[2] = load(GLIM_TESTDATA "/vocab/ggml-vocab-llama4.gguf", true);
}

static void encode_decode(const struct tok_vocab *v, const char *s, size_t n, unsigned flags, bool strict)
{
    struct tok_ids ids;
    struct strbuf sb;
    tok_ids_init(&ids);
    strbuf_init(&sb);
    if (tok_encode(v, s, n, flags, &ids, NULL) != GLIM_OK)
        abort();   /* only ENOMEM may fail, and the fuzzer has memory */
    for (size_t i = 0; i < ids.n; i++)
        if (ids.data[i] < 0 || ids.data[i] >= tok_n_vocab(v))
            abort();
    if (tok_decode(v, ids.data, ids.n, TOK_DECODE_SPECIAL, &sb) != GLIM_OK)
        abort();
    if (strict && tok_kind(v) == TOK_KIND_BPE && (sb.len != n || (n && memcmp(sb.data, s, n))))
        abort();   /* byte-level BPE loses nothing */
    if (!(flags & TOK_PARSE_SPECIAL))
        for (size_t i = 0; i < ids.n; i++)
            if (tok_is_control(v, ids.data[i]))
                abort();   /* user text never yields a control token */
    strbuf_clear(&sb);
    tok_ids_clear(&ids);
}

static void decode_ids(const struct tok_vocab *v, const uint8_t *d, size_t n)
{
    size_t n_ids = n / 4;
    int32_t *ids = malloc(n_ids ? n_ids * sizeof *ids : 1);
    struct strbuf sb, st;
    struct tok_stream s;
    strbuf_init(&sb);
    strbuf_init(&st);
    memcpy(ids, d, n_ids * 4);
    tok_decode(v, ids, n_ids, 0, &sb);   /* out-of-range ids: GLIM_ERANGE, no crash */
    tok_stream_init(&s, v, TOK_DECODE_SPECIAL);
    for (size_t i = 0; i < n_ids; i++)
        tok_stream_feed(&s, ids[i] % (tok_n_vocab(v) + 8), &st);
    tok_stream_flush(&s, &st);
    if (!utf8_valid(st.data ? st.data : "", st.len))
        abort();
    strbuf_clear(&sb);
    strbuf_clear(&st);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    setup();
    unsigned mode = data[0] & 7;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    if (mode < 6) {
        encode_decode(V[mode % 3], s, n, mode >= 3 ? TOK_PARSE_SPECIAL : 0, true);
    } else if (mode == 6) {
        decode_ids(V[(data[0] >> 3) % 3], data + 1, n);
    } else {
        struct tok_vocab *v = NULL;
        if (tok_vocab_from_json_mem(s, n, &v, NULL) == GLIM_OK) {
            encode_decode(v, "Hello world, héllo 🦙 <|x|>", 30, TOK_PARSE_SPECIAL, false);
            tok_vocab_free(v);
        }
    }
    return 0;
}
#else
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)data, (void)size;
    return 0;
}
#endif
