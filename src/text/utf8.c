/* utf8.c — strict UTF-8 helpers (see utf8.h). */
#include "utf8.h"

int utf8_lead_len(uint8_t lead)
{
    if (lead < 0x80)
        return 1;
    if (lead >= 0xC2 && lead <= 0xDF)
        return 2;
    if (lead >= 0xE0 && lead <= 0xEF)
        return 3;
    if (lead >= 0xF0 && lead <= 0xF4)
        return 4;
    return 1;
}

/* Allowed range of the second byte given the lead (RFC 3629 table). */
static bool second_ok(uint8_t lead, uint8_t b)
{
    if (lead == 0xE0)
        return b >= 0xA0 && b <= 0xBF;   /* no overlongs */
    if (lead == 0xED)
        return b >= 0x80 && b <= 0x9F;   /* no surrogates */
    if (lead == 0xF0)
        return b >= 0x90 && b <= 0xBF;
    if (lead == 0xF4)
        return b >= 0x80 && b <= 0x8F;   /* <= U+10FFFF */
    return b >= 0x80 && b <= 0xBF;
}

int utf8_decode(const char *s, size_t len, uint32_t *cp)
{
    if (len == 0)
        return 0;
    const uint8_t *u = (const uint8_t *)s;
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    int n = utf8_lead_len(u[0]);
    if (n == 1 || (size_t)n > len || !second_ok(u[0], u[1]))
        return 0;
    uint32_t c = u[0] & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (u[i] & 0x3F);
    }
    *cp = c;
    return n;
}

int utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF)
        return 0;
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool utf8_valid(const char *s, size_t len)
{
    size_t i = 0;
    uint32_t cp;
    while (i < len) {
        int n = utf8_decode(s + i, len - i, &cp);
        if (n == 0)
            return false;
        i += (size_t)n;
    }
    return true;
}

size_t utf8_incomplete_tail(const char *s, size_t len)
{
    const uint8_t *u = (const uint8_t *)s;
    /* the lead byte of an unfinished sequence is at most 3 bytes from the end */
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        uint8_t b = u[len - back];
        if ((b & 0xC0) == 0x80)
            continue;                      /* continuation: keep looking for the lead */
        int n = utf8_lead_len(b);
        if (n == 1 || (size_t)n <= back)
            return 0;                      /* ASCII, invalid lead, or already complete */
        if (back >= 2 && !second_ok(b, u[len - back + 1]))
            return 0;                      /* can never become valid */
        return back;
    }
    return 0;
}
