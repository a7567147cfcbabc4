/* strbuf.h — growable, always NUL-terminated byte buffer. Owner's thread only. */
#ifndef GLIM_STRBUF_H
#define GLIM_STRBUF_H

#include <stddef.h>

#include "err.h"

struct strbuf {
    char  *data;   /* owned; NULL until first append */
    size_t len, cap;
};

void strbuf_init(struct strbuf *sb);
void strbuf_clear(struct strbuf *sb);                                /* frees */
int  strbuf_append(struct strbuf *sb, const char *s, size_t n);     /* GLIM_OK or GLIM_ENOMEM */
int  strbuf_puts(struct strbuf *sb, const char *s);
int  strbuf_putc(struct strbuf *sb, char c);
int  strbuf_printf(struct strbuf *sb, const char *fmt, ...) GLIM_PRINTF(2, 3);
void strbuf_reset(struct strbuf *sb);                                /* len = 0, keeps memory */
const char *strbuf_cstr(const struct strbuf *sb);                   /* "" when empty */

#endif
