/* cli.c — option value parsing shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool cli_int(const char *cmd, const char *flag, const char *val, long long lo, long long hi,
             long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (errno || end == val || *end != '\0') {
        fprintf(stderr, "glim %s: %s: expected an integer, got '%s'\n", cmd, flag, val);
        return false;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "glim %s: %s: expected %lld..%lld, got %lld\n", cmd, flag, lo, hi, v);
        return false;
    }
    *out = v;
    return true;
}

bool cli_float(const char *cmd, const char *flag, const char *val, double lo, double hi,
               double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end != '\0' || v != v) {
        fprintf(stderr, "glim %s: %s: expected a number, got '%s'\n", cmd, flag, val);
        return false;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "glim %s: %s: expected %g..%g, got %g\n", cmd, flag, lo, hi, v);
        return false;
    }
    *out = v;
    return true;
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "glim %s: %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

bool cli_parse_ids(const char *cmd, const char *text, int32_t **out, int *n)
{
    size_t cap = 16, cnt = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return false;
    const char *p = text;
    for (;;) {
        while (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
            p++;
        if (!*p)
            break;
        char *end = NULL;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            fprintf(stderr, "glim %s: token ids: expected non-negative integers, got '%.20s'\n", cmd, p);
            free(ids);
            return false;
        }
        if (cnt == cap) {
            int32_t *t = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!t) {
                free(ids);
                return false;
            }
            ids = t;
        }
        ids[cnt++] = (int32_t)v;
        p = end;
    }
    *out = ids;
    *n = (int)cnt;
    return true;
}

bool cli_read_file(const char *cmd, const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "glim %s: %s: %s\n", cmd, path, strerror(errno));
        return false;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            char *t = realloc(buf, cap *= 2);
            if (!t) {
                free(buf);
                buf = NULL;
            }
            buf = t;
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "glim %s: %s: read failed\n", cmd, path);
        free(buf);
        return false;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return true;
}

const char *cli_default_model(void)
{
    static const char *cands[] = {"models/stories260K.gguf", GLIM_DEFAULT_MODEL};
    struct stat st;
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        if (stat(cands[i], &st) == 0)
            return cands[i];
    return GLIM_DEFAULT_MODEL;
}
