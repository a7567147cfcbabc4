/* strbuf.c — append buffer (kilo's abuf, with errors instead of exits). */
#include "strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"

void strbuf_init(struct strbuf *sb) { sb->data = NULL, sb->len = 0, sb->cap = 0; }

void strbuf_clear(struct strbuf *sb)
{
    glim_free(sb->data);
    strbuf_init(sb);
}

void strbuf_reset(struct strbuf *sb)
{
    sb->len = 0;
    if (sb->data)
        sb->data[0] = '\0';
}

static int grow(struct strbuf *sb, size_t extra)
{
    if (extra > SIZE_MAX - sb->len - 1)
        return GLIM_ENOMEM;
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap)
        return GLIM_OK;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = glim_realloc(sb->data, cap);
    if (!p)
        return GLIM_ENOMEM;
    sb->data = p, sb->cap = cap;
    return GLIM_OK;
}

int strbuf_append(struct strbuf *sb, const char *s, size_t n)
{
    if (grow(sb, n) != GLIM_OK)
        return GLIM_ENOMEM;
    if (n)
        memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
    return GLIM_OK;
}

int strbuf_puts(struct strbuf *sb, const char *s) { return strbuf_append(sb, s, strlen(s)); }
int strbuf_putc(struct strbuf *sb, char c) { return strbuf_append(sb, &c, 1); }

int strbuf_printf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return GLIM_EINVAL;
    if (grow(sb, (size_t)n) != GLIM_OK)
        return GLIM_ENOMEM;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
    return GLIM_OK;
}

const char *strbuf_cstr(const struct strbuf *sb) { return sb->data ? sb->data : ""; }
