/*
 * utf8.h — UTF-8 validation, decoding and encoding (RFC 3629: no overlongs,
 * no surrogates, nothing above U+10FFFF). Pure functions; any thread.
 *
 * Text from users and token pieces is (ptr, len) and may be invalid or end
 * in the middle of a character; these helpers never read past len.
 */
#ifndef GLIM_UTF8_H
#define GLIM_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length announced by a lead byte: 1..4, or 1 for a byte that cannot start a
 * sequence (continuation byte, 0xF8+) so callers always make progress. */
int utf8_lead_len(uint8_t lead);

/* Decode one valid sequence at s: bytes used (1..4) and *cp, or 0 if the
 * bytes at s are invalid or run past len (*cp untouched). */
int utf8_decode(const char *s, size_t len, uint32_t *cp);

/* Encode cp (<= 0x10FFFF) into out; returns bytes written (1..4), 0 if cp is invalid. */
int utf8_encode(uint32_t cp, char out[4]);

bool utf8_valid(const char *s, size_t len);

/* Bytes at the end of s that are a proper prefix of a valid sequence (0..3):
 * a streaming decoder holds these back until the next piece arrives. */
size_t utf8_incomplete_tail(const char *s, size_t len);

#endif
