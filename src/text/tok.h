/*
 * tok.h — tokenizers: text → token ids → text.
 *
 * A tok_vocab is built once, from a GGUF's own `tokenizer.ggml.*` metadata
 * (SentencePiece-style `llama` or byte-level BPE `gpt2`) or from a Hugging
 * Face tokenizer.json (byte-level BPE), and is read-only afterwards: any
 * number of threads may encode and decode with it at the same time. It owns
 * all its memory; the gguf_file or JSON it came from may be closed.
 *
 * Encoding (tok_encode) APPENDS to a tok_ids list, so a prompt is built as a
 * list of spans, each with its own trust level:
 *
 *     tok_ids_init(&ids);
 *     tok_encode(v, tmpl, n, TOK_ADD_BOS | TOK_PARSE_SPECIAL, &ids, err);  // template text
 *     tok_encode(v, user, m, 0, &ids, err);                                // user text
 *
 * Control tokens (`<|start|>`, `<|eot|>` …) are recognised in the text only
 * with TOK_PARSE_SPECIAL. Without it, `<|eot|>` in user content is ordinary
 * text (several ids). Tokens the vocabulary marks USER_DEFINED (non-special
 * added tokens, e.g. Qwen's `<think>`) are always matched, as in Hugging Face.
 *
 * Decoding: tok_piece() gives a token's stored text; tok_decode() gives the
 * bytes the ids stand for (byte-level BPE mapped back to bytes, SentencePiece
 * `▁` → space and `<0xXX>` → that byte). Pieces may end inside a UTF-8
 * character; struct tok_stream holds such bytes back so that what it emits is
 * always valid UTF-8 (for SSE / JSON).
 *
 * Muse Glimmer: its vocabulary is Llama 4's with reserved slots renamed
 * (../shared/spec/runtime.md §4.1); tok_vocab_apply_muse_glimmer() applies
 * that table. tok_vocab_from_gguf() does it by itself when
 * general.architecture is "muse-glimmer".
 */
#ifndef GLIM_TOK_H
#define GLIM_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "../base/strbuf.h"

struct gguf_file;
struct tok_vocab;

enum tok_kind {
    TOK_KIND_SPM = 1,   /* SentencePiece-style: scores, ▁, <0xXX> byte fallback */
    TOK_KIND_BPE = 2,   /* byte-level BPE: merges with ranks, split regex */
};

/* Token types, numbered as tokenizer.ggml.token_type */
enum tok_type {
    TOK_TYPE_UNDEFINED = 0,
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
};

/* tok_encode flags */
enum {
    TOK_ADD_BOS = 1 << 0,          /* prepend BOS (if the vocabulary has one) */
    TOK_ADD_EOS = 1 << 1,          /* append EOS */
    TOK_ADD_SPECIAL = 1 << 2,      /* BOS/EOS as the vocabulary's add_bos/add_eos say */
    TOK_PARSE_SPECIAL = 1 << 3,    /* control-token text → its id: TRUSTED text only */
    TOK_NO_SPACE_PREFIX = 1 << 4,  /* SPM: this span continues earlier text; no leading ▁ */
};

/* tok_decode / tok_stream flags */
enum {
    TOK_DECODE_SPECIAL = 1 << 0,   /* control tokens decode to their text (else to nothing) */
    TOK_DECODE_STRIP_SPACE = 1 << 1, /* tok_decode only: drop the ▁ the SPM encoder prepended */
};

/* Growable list of ids; tok_encode appends. */
struct tok_ids {
    int32_t *data;   /* owned */
    size_t   n, cap;
};
void tok_ids_init(struct tok_ids *ids);
void tok_ids_clear(struct tok_ids *ids);                 /* frees */
int  tok_ids_push(struct tok_ids *ids, int32_t id);      /* GLIM_OK or GLIM_ENOMEM */

/* ---- loading ---------------------------------------------------------- */

/* From `tokenizer.ggml.*` (gguf-contract.md §1.3). GLIM_ENOTFOUND when the
 * file has no vocabulary (`no_vocab` or no tokens): pass a tokenizer.json. */
int  tok_vocab_from_gguf(const struct gguf_file *f,
                         struct tok_vocab **out,       /* OUT: untouched on failure */
                         struct glim_err *err);
/* From a Hugging Face tokenizer.json (model BPE with a ByteLevel pre-tokenizer
 * or decoder). A tokenizer_config.json beside it, if present, gives
 * bos/eos/add_bos. Added tokens: special → CONTROL, else USER_DEFINED. */
int  tok_vocab_from_json(const char *path, struct tok_vocab **out, struct glim_err *err);
/* Same from memory (tests, fuzzing); no tokenizer_config.json. */
int  tok_vocab_from_json_mem(const char *buf, size_t len, struct tok_vocab **out,
                             struct glim_err *err);
void tok_vocab_free(struct tok_vocab *v);                /* NULL ok */

/* Rename the Muse Glimmer control slots of a Llama 4 vocabulary (200022
 * `<|start|>`, 200023 `<|message|>`, 200091 `<|video|>`; runtime.md §4.1),
 * mark them CONTROL and set bos 200000, eos 200001, eot 200008, eom 200007,
 * eog = {200001, 200008}. GLIM_EINVAL if the vocabulary is smaller than 202048. */
int  tok_vocab_apply_muse_glimmer(struct tok_vocab *v, struct glim_err *err);

/* ---- encoding --------------------------------------------------------- */

/* Append the ids of text[0..len) (any bytes; invalid UTF-8 is encoded byte
 * by byte) to out. flags: TOK_* above. On failure out keeps what it had. */
int  tok_encode(const struct tok_vocab *v, const char *text, size_t len, unsigned flags,
                struct tok_ids *out, struct glim_err *err);

/* ---- pieces and decoding ---------------------------------------------- */

/* Stored text of id (GGUF/JSON form: `Ġ`, `▁`, `<0x0A>`); NULL if out of range. */
const char *tok_piece(const struct tok_vocab *v, int32_t id, size_t *len);
/* Append the bytes id stands for to out (may be part of a UTF-8 character). */
int  tok_piece_bytes(const struct tok_vocab *v, int32_t id, unsigned flags, struct strbuf *out);
/* Append the bytes of ids[0..n) to out: exact bytes, no replacement. */
int  tok_decode(const struct tok_vocab *v, const int32_t *ids, size_t n, unsigned flags,
                struct strbuf *out);

/* Streaming decoder: feed ids as they are generated; out only ever receives
 * complete, valid UTF-8 (invalid bytes become U+FFFD; a partial character
 * is held back until the next feed). Embed it; no allocation of its own. */
struct tok_stream {
    const struct tok_vocab *v;   /* borrowed */
    unsigned flags;              /* TOK_DECODE_SPECIAL */
    char     held[4];
    size_t   n_held;
};
void tok_stream_init(struct tok_stream *s, const struct tok_vocab *v, unsigned flags);
int  tok_stream_feed(struct tok_stream *s, int32_t id, struct strbuf *out);
/* End of stream: held bytes (an unfinished character) become U+FFFD. */
int  tok_stream_flush(struct tok_stream *s, struct strbuf *out);

/* ---- lookups ---------------------------------------------------------- */

int32_t       tok_n_vocab(const struct tok_vocab *v);
enum tok_kind tok_kind(const struct tok_vocab *v);
const char   *tok_pre_name(const struct tok_vocab *v);   /* "llama4", "tokenizer.json" … */
enum tok_type tok_type(const struct tok_vocab *v, int32_t id);  /* UNDEFINED if out of range */
bool          tok_is_control(const struct tok_vocab *v, int32_t id);
/* Exact text → id, or -1 (e.g. tok_find(v, "<|eot|>", 7)). */
int32_t       tok_find(const struct tok_vocab *v, const char *text, size_t len);

/* Special ids; -1 when the vocabulary has none */
int32_t tok_bos(const struct tok_vocab *v);
int32_t tok_eos(const struct tok_vocab *v);
int32_t tok_eot(const struct tok_vocab *v);
int32_t tok_eom(const struct tok_vocab *v);
int32_t tok_pad(const struct tok_vocab *v);
bool    tok_add_bos(const struct tok_vocab *v);    /* vocabulary default for TOK_ADD_SPECIAL */
bool    tok_add_eos(const struct tok_vocab *v);
/* End of generation: eos, eot and tokens named like an end of turn
 * (`<|eot_id|>`, `<|im_end|>`, `<|end_of_text|>` …). `<|eom|>` is not. */
bool    tok_is_eog(const struct tok_vocab *v, int32_t id);
/* Add an id to the end-of-generation set (e.g. a --eos-id flag); load time only. */
int     tok_eog_add(struct tok_vocab *v, int32_t id, struct glim_err *err);

#endif
