/*
 * reasoning.h — Harmony header matching, the reasoning/visible split and the
 * content filter of runtime.md §4.6. Pure functions over (ptr, len) text;
 * any thread. toolcall.c builds its one-shot pipeline and its streaming
 * hold-back rules on these.
 */
#ifndef GLIM_REASONING_H
#define GLIM_REASONING_H

#include <stdbool.h>
#include <stddef.h>

#include "base/strbuf.h"

enum reasoning_match {
    REASONING_FAIL,      /* no header can start here, whatever text follows */
    REASONING_PARTIAL,   /* the text ran out while a header was still possible */
    REASONING_MATCH,
};

enum reasoning_hdr_kind {
    REASONING_HDR,       /* §4.6 HDR: not after [A-Za-z0-9_], `<|start|>assistant`?, \s?, to= ... */
    REASONING_HEADER_A,  /* §5.2 HEADER_A: `<|start|>assistant`?, one literal space, to= ... */
};

struct reasoning_hdr {
    size_t start, end;          /* [start, end) in the text */
    size_t recip, recip_len;    /* recipient after `to=` */
};

/* Try to match a header starting exactly at s[pos]. */
int reasoning_hdr_at(const char *s, size_t n, size_t pos, int kind, struct reasoning_hdr *out);

/* Python str.isspace() for ASCII bytes (\t\n\v\f\r, 0x1c-0x1f, space). */
bool reasoning_is_space(unsigned char c);

/* Split raw model output into reasoning (the `to=self` bodies joined by a
 * blank line) and visible text. *has_reasoning is false when there is no
 * self message; visible is the input unchanged when there is no header.
 * GLIM_OK or GLIM_ENOMEM. */
int reasoning_split(const char *s, size_t n,
                    struct strbuf *reasoning,   /* OUT: reset, then filled */
                    bool *has_reasoning,        /* OUT */
                    struct strbuf *visible);    /* OUT: reset, then filled */

/* Length of the control token the content filter deletes at s[i], or 0. */
size_t reasoning_stray_at(const char *s, size_t n, size_t i);

/* True if s[i..n) is non-empty and a proper prefix of such a control token:
 * the text ran out while one may still be arriving. */
bool reasoning_stray_is_partial(const char *s, size_t n, size_t i);

/* The content filter: drop headers and Harmony control tokens, trim, cut at
 * the first remaining special token of `specials` (the tokenizer's special
 * token strings; `<|start|>`, `<|message|>`, `<|eom|>` are never cut at).
 * GLIM_OK or GLIM_ENOMEM. */
int reasoning_content_filter(const char *s, size_t n,
                             const char *const *specials, int n_specials,  /* may be NULL, 0 */
                             struct strbuf *out);                          /* OUT: reset, filled */

#endif
