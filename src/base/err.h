/*
 * err.h — status codes with a message, and the few helpers every room uses.
 * Any thread may call these.
 */
#ifndef GLIM_ERR_H
#define GLIM_ERR_H

#include "glim.h"

#include <stdio.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define GLIM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GLIM_PRINTF(a, b)
#endif

/* Fill err (if not NULL) with code and a formatted one-line message;
 * returns code so a failure takes one line: `return glim_fail(err, ...)`. */
int glim_fail(struct glim_err *err, int code, const char *fmt, ...) GLIM_PRINTF(3, 4);

/* Prefix an existing message: "ctx: old message". Returns err->code. */
int glim_err_prefix(struct glim_err *err, const char *fmt, ...) GLIM_PRINTF(2, 3);

void glim_err_clear(struct glim_err *err);

/* Internal invariants only (never on input); stays on in release builds. */
#define GLIM_ASSERT(c)                                                             \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "%s:%d: internal error: assertion '%s' failed\n",      \
                    __FILE__, __LINE__, #c);                                       \
            abort();                                                               \
        }                                                                          \
    } while (0)

#define GLIM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GLIM_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
