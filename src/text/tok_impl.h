/*
 * tok_impl.h — what the tokenizer files share and nobody else sees.
 *
 * tok.c        vocabulary core (token table, text map, specials), GGUF loading,
 *              encode dispatch over special-token spans, decoding, streaming
 * tok_bpe.c    byte-level BPE: byte↔unicode map, merge table, merge loop
 * tok_spm.c    SentencePiece-style merge by score with byte fallback
 * tok_pretok.c split regexes (PCRE2, UTF+UCP, JIT) chosen by tokenizer.ggml.pre
 * tok_hf.c     tokenizer.json (jansson)
 */
#ifndef GLIM_TOK_IMPL_H
#define GLIM_TOK_IMPL_H

#include "tok.h"

struct tok_token {
    uint32_t off, len;   /* text = v->blob + off */
    float    score;      /* SPM merge priority */
    uint8_t  type;       /* enum tok_type */
};

struct tok_pretok;

#define TOK_MAX_EOG 16

struct tok_vocab {
    enum tok_kind     kind;
    int32_t           n_vocab;
    struct tok_token *tokens;        /* owned [n_vocab] */
    char             *blob;          /* owned: token texts, back to back */
    size_t            blob_len, blob_cap;

    uint32_t *tmap;                  /* owned: open addressing, id + 1 (0 = empty) */
    uint32_t  tmap_mask;

    /* BPE merges: (left id, right id) → rank and result id */
    uint64_t *mkey;                  /* owned; UINT64_MAX = empty */
    uint32_t *mrank;                 /* owned */
    int32_t  *mres;                  /* owned */
    uint32_t  mmask;

    int32_t byte_id[256];            /* BPE: id of the char byte b maps to; SPM: <0xXX>; -1 none */
    struct tok_pretok *pre;          /* owned; BPE only */
    char    pre_name[48];

    int32_t *spec_lens;              /* owned: distinct lengths of matchable specials, descending */
    int      n_spec_lens;
    uint8_t  spec_first[32];         /* bitmap of first bytes of matchable specials */
    bool     has_user_defined;  /* else text without TOK_PARSE_SPECIAL needs no scan */

    int32_t bos, eos, eot, eom, unk, pad;
    int32_t eog[TOK_MAX_EOG];
    int     n_eog;
    bool    add_bos, add_eos, add_space_prefix, ignore_merges;
};

/* ---- tok.c: building a vocabulary (loaders) ---- */
struct tok_vocab *tok_vocab_alloc(int32_t n_vocab);   /* zeroed tokens, ids -1; NULL on OOM */
int  tok_set_text(struct tok_vocab *v, int32_t id, const char *s, size_t n);
/* (re)build the text → id map; merges and lookups need it */
int  tok_vocab_index(struct tok_vocab *v);
/* after all texts and types are set: text map, specials, eog; bytes for SPM */
int  tok_vocab_finish(struct tok_vocab *v, struct glim_err *err);
int32_t tok_lookup(const struct tok_vocab *v, const char *s, size_t n);
const char *tok_text(const struct tok_vocab *v, int32_t id);
uint64_t tok_hash(const char *s, size_t n);

/* The merge queue of tok_bpe.c and tok_spm.c: a pair of adjacent symbols
 * that may merge. An entry goes stale when one side merges first; the
 * encoder checks for that when it pops it, and skips it. */
struct tok_pair {
    double   key;           /* lower pops first (BPE: merge rank, SPM: -score); ties: lower left */
    int32_t  left, right;   /* symbol indices */
    int32_t  lid, rid, res; /* BPE: the two ids when pushed, and the merged id */
    uint32_t size;          /* SPM: bytes of the pair when pushed */
};
/* Binary heap in heap[0 .. *n-1], the room sized by the caller. Pop needs *n > 0. */
void tok_pair_push(struct tok_pair *heap, size_t *n, struct tok_pair x);
struct tok_pair tok_pair_pop(struct tok_pair *heap, size_t *n);

/* ---- tok_bpe.c ---- */
/* Unicode code point that byte b stands for in byte-level BPE texts. */
uint32_t tok_bpe_byte_cp(uint8_t b);
/* Reverse: byte for a code point, or -1 if cp is not one of the 256. */
int  tok_bpe_cp_byte(uint32_t cp);
int  tok_bpe_merges_init(struct tok_vocab *v, uint64_t n_merges, struct glim_err *err);
/* Add merge "left right" with the next rank; ignored if a part is unknown. */
int  tok_bpe_merge_add(struct tok_vocab *v, const char *l, size_t nl, const char *r, size_t nr,
                       uint32_t rank);
int  tok_bpe_bytes_init(struct tok_vocab *v, struct glim_err *err);
int  tok_bpe_encode(const struct tok_vocab *v, const char *s, size_t n, struct tok_ids *out,
                    struct glim_err *err);
int  tok_bpe_piece(const struct tok_vocab *v, const char *s, size_t n, struct strbuf *out);

/* ---- tok_spm.c ---- */
int  tok_spm_encode(const struct tok_vocab *v, const char *s, size_t n, bool add_prefix,
                    struct tok_ids *out, struct glim_err *err);
int  tok_spm_piece(const char *s, size_t n, struct strbuf *out);

/* ---- tok_pretok.c ---- */
/* Split patterns applied in order, each splitting the pieces of the one before. */
int  tok_pretok_new(const char *const *patterns, int n, struct tok_pretok **out,
                    struct glim_err *err);
/* Patterns for a tokenizer.ggml.pre name; GLIM_EUNSUPPORTED if unknown. */
int  tok_pretok_for_name(const char *name, struct tok_pretok **out, struct glim_err *err);
void tok_pretok_free(struct tok_pretok *p);
typedef int (*tok_chunk_fn)(void *ud, const char *s, size_t n);
/* Call fn on every piece of s in order (matches and the gaps between them). */
int  tok_pretok_split(const struct tok_pretok *p, const char *s, size_t n, tok_chunk_fn fn,
                      void *ud, struct glim_err *err);
extern const char *const TOK_PATTERN_GPT2;

#endif
