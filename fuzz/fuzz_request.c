/*
 * fuzz_request.c — libFuzzer target for the server's request parser:
 * oai_parse_request() + session-id resolution on arbitrary bytes. The first
 * byte picks the endpoint (chat or completions) and which session headers
 * are present. Any crash, leak or sanitizer report is a bug: a request is
 * a client's mistake, answered with a 4xx, never a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(GLIM_HAVE_SERVER) && defined(GLIM_HAVE_TEXT)
#include "server/srv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    struct srv_req r;
    struct api_error e = {0};
    int rc = oai_parse_request((const char *)data + 1, size - 1, mode & 1, "model", &r, &e);
    if (rc == 0) {
        rc = oai_session_resolve(&r, (mode & 2) ? "exec id" : NULL, (mode & 4) ? "plain-id" : NULL,
                                 (mode & 8) ? "affinity\x7f" : NULL, &e);
        (void)rc;
    } else if (e.status < 400 || e.status > 499) {
        __builtin_trap();   /* a parse failure must be a client error */
    }
    char *j = oai_error_json(&e);
    free(j);
    oai_req_clear(&r);
    return 0;
}
#else
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)data, (void)size;
    return 0;
}
#endif
