/*
 * toolcall_json.h — JSON text for tool-call arguments, written the way the
 * reference server's Python writes it (runtime.md §5.3): json.dumps with
 * ensure_ascii=False, allow_nan=False, ", " and ": " separators, floats in
 * repr form. No JSON library: src/chat must not depend on jansson.
 * Pure functions; any thread.
 */
#ifndef GLIM_TOOLCALL_JSON_H
#define GLIM_TOOLCALL_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "base/strbuf.h"

/* JSON string literal of s[0..n): invalid UTF-8 becomes U+FFFD. */
int toolcall_json_string(struct strbuf *out, const char *s, size_t n);

/* Python repr() of a finite double ("1.0", "0.5", "1e+16", "1e-05"). */
int toolcall_json_float(struct strbuf *out, double x);

enum toolcall_coerce {
    TOOLCALL_COERCE_OK,
    TOOLCALL_COERCE_NAN,     /* a nested non-finite number: json.dumps would refuse */
    TOOLCALL_COERCE_NOMEM,
};

/* coerce(raw, declared_type) of §5.3, appended as JSON. type NULL or
 * unknown means "JSON-parse, else the raw string". */
int toolcall_json_coerce(struct strbuf *out, const char *raw, size_t n, const char *type);

#endif
