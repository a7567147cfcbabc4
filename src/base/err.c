/* err.c — glim_err: a status code plus a one-line message owned by the caller's struct. */
#include "err.h"

#include <stdarg.h>
#include <string.h>

static const char *const STATUS_NAMES[GLIM_STATUS_COUNT] = {
    [GLIM_OK] = "OK",
    [GLIM_EINVAL] = "EINVAL",
    [GLIM_ENOMEM] = "ENOMEM",
    [GLIM_EIO] = "EIO",
    [GLIM_EFORMAT] = "EFORMAT",
    [GLIM_EUNSUPPORTED] = "EUNSUPPORTED",
    [GLIM_ERANGE] = "ERANGE",
    [GLIM_EBACKEND] = "EBACKEND",
    [GLIM_ECANCELED] = "ECANCELED",
    [GLIM_ENOTFOUND] = "ENOTFOUND",
};

const char *glim_status_name(int code)
{
    if (code < 0 || code >= GLIM_STATUS_COUNT || !STATUS_NAMES[code])
        return "EUNKNOWN";
    return STATUS_NAMES[code];
}

int glim_fail(struct glim_err *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

int glim_err_prefix(struct glim_err *err, const char *fmt, ...)
{
    if (!err)
        return GLIM_EINVAL;
    char head[GLIM_ERR_MSG_MAX], old[GLIM_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* both halves fit in the buffer by construction; truncation is fine */
    size_t n = strlen(head);
    if (n > sizeof err->msg - 3)
        n = sizeof err->msg - 3;
    memcpy(err->msg, head, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3, m = strnlen(old, room);
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = '\0';
    return err->code;
}

void glim_err_clear(struct glim_err *err)
{
    if (!err)
        return;
    err->code = GLIM_OK;
    err->msg[0] = '\0';
}
