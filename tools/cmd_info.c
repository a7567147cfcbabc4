/*
 * cmd_info.c — `glim info`: what is inside a GGUF file.
 *
 * Prints a summary, one line per metadata key (`key  type  value`, long
 * strings and arrays abbreviated), the tensor table and the bytes per type.
 * A malformed file gets the reader's one-line message on stderr and exit 1.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#define SHOW_STR_MAX 64     /* characters of a string value before "..." */
#define SHOW_ARR_WIDTH 72   /* characters of array elements before "..." */

static void usage(FILE *out)
{
    fprintf(out, "usage: glim info [-m MODEL] [--tensors-only | --no-tensors]\n\n"
                 "Print a GGUF file's header, metadata and tensor table.\n\n"
                 "  -m, --model FILE   GGUF file (default: %s)\n"
                 "  --tensors-only     print only the tensor table and totals\n"
                 "  --no-tensors       print only the summary and metadata\n"
                 "  -h, --help         this help\n",
                 cli_default_model());
}

/* string with control characters escaped, cut after max visible characters */
static int put_escaped(const char *s, size_t n, size_t max)
{
    int w = 0;
    size_t i = 0;
    for (; i < n && (size_t)w < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n')
            w += printf("\\n");
        else if (ch == '\t')
            w += printf("\\t");
        else if (ch < 0x20 || ch == 0x7f)
            w += printf("\\x%02x", ch);
        else {
            putchar(ch);
            w += (ch & 0xc0) != 0x80;   /* count UTF-8 lead bytes only */
        }
    }
    /* finish a UTF-8 sequence we started so the terminal sees whole characters */
    while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80)
        putchar(s[i++]);
    if (i < n)
        w += printf("...");
    return w;
}

static int put_scalar(const struct gguf_kv *kv)
{
    int64_t iv;
    double fv;
    const char *s;
    size_t n;
    if (kv->type == GGUF_VT_BOOL)
        return printf("%s", kv->data[0] ? "true" : "false");
    if (gguf_kv_int(kv, &iv) == GLIM_OK)
        return printf("%lld", (long long)iv);
    if (kv->type == GGUF_VT_UINT64) {   /* above INT64_MAX */
        uint64_t u;
        memcpy(&u, kv->data, 8);
        return printf("%llu", (unsigned long long)u);
    }
    if (gguf_kv_float(kv, &fv) == GLIM_OK)   /* shortest form that round-trips the stored width */
        return printf(kv->type == GGUF_VT_FLOAT32 ? "%.7g" : "%.17g", fv);
    if (gguf_kv_str(kv, &s, &n) == GLIM_OK)
        return put_escaped(s, n, SHOW_STR_MAX);
    return printf("?");
}

static int put_element(const struct gguf_kv *kv, uint64_t i)
{
    int64_t iv;
    double fv;
    const char *s;
    size_t n;
    if (kv->arr_type == GGUF_VT_BOOL && gguf_arr_int(kv, i, &iv) == GLIM_OK)
        return printf("%s", iv ? "true" : "false");
    if (kv->arr_type == GGUF_VT_STRING && gguf_arr_str(kv, i, &s, &n) == GLIM_OK)
        return put_escaped(s, n, 24);
    if (gguf_arr_int(kv, i, &iv) == GLIM_OK)
        return printf("%lld", (long long)iv);
    if (gguf_arr_float(kv, i, &fv) == GLIM_OK)
        return printf("%.6g", fv);
    return printf("?");
}

static void put_array(const struct gguf_kv *kv)
{
    int w = printf("[%llu]", (unsigned long long)kv->arr_n);
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        if (w > SHOW_ARR_WIDTH) {
            printf(" ...");
            return;
        }
        w += printf(i ? ", " : " ");
        w += put_element(kv, i);
    }
}

static void print_summary(const struct gguf_file *f)
{
    size_t size = gguf_file_size(f);
    printf("file:        %s\n", gguf_path(f));
    printf("version:     %u\n", gguf_version(f));
    printf("alignment:   %zu\n", gguf_alignment(f));
    printf("tensors:     %lld\n", (long long)gguf_tensor_count(f));
    printf("kv:          %lld\n", (long long)gguf_kv_count(f));
    printf("size:        %zu bytes (%.2f MiB)\n", size, (double)size / (1024.0 * 1024.0));
    printf("data offset: %zu\n", gguf_data_offset(f));
}

static void print_metadata(const struct gguf_file *f)
{
    int kw = 0;
    for (int64_t i = 0; i < gguf_kv_count(f); i++) {
        int n = (int)strlen(gguf_kv_at(f, i)->key);
        kw = n > kw ? n : kw;
    }
    kw = kw > 48 ? 48 : kw;
    printf("\nmetadata:\n");
    for (int64_t i = 0; i < gguf_kv_count(f); i++) {
        const struct gguf_kv *kv = gguf_kv_at(f, i);
        char type[24];
        if (kv->type == GGUF_VT_ARRAY)
            snprintf(type, sizeof type, "arr[%s]", gguf_vtype_name(kv->arr_type));
        else
            snprintf(type, sizeof type, "%s", gguf_vtype_name(kv->type));
        printf("  %-*s  %-9s  ", kw, kv->key, type);
        if (kv->type == GGUF_VT_ARRAY)
            put_array(kv);
        else
            put_scalar(kv);
        putchar('\n');
    }
}

static void print_tensors(const struct gguf_file *f)
{
    int nw = 4;
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        int n = (int)strlen(gguf_tensor_at(f, i)->name);
        nw = n > nw ? n : nw;
    }
    nw = nw > 64 ? 64 : nw;
    printf("\n  %-*s  %-7s  %-26s  %12s\n", nw, "name", "type", "shape", "bytes");
    size_t by_type[GLIM_TYPE_COUNT] = {0}, total = 0;
    int64_t n_by_type[GLIM_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(f, i);
        char shape[96];
        int len = snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < t->n_dims && len < (int)sizeof shape; d++)
            len += snprintf(shape + len, sizeof shape - (size_t)len, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
        if (len < (int)sizeof shape)
            snprintf(shape + len, sizeof shape - (size_t)len, "]");
        printf("  %-*s  %-7s  %-26s  %12zu\n", nw, t->name, quant_type_name(t->type), shape, t->nbytes);
        if (t->type < GLIM_TYPE_COUNT) {   /* the reader only accepts known ids */
            by_type[t->type] += t->nbytes;
            n_by_type[t->type]++;
        }
        total += t->nbytes;
    }
    printf("\nbytes by type:\n");
    for (int ty = 0; ty < GLIM_TYPE_COUNT; ty++)
        if (n_by_type[ty])
            printf("  %-7s  %5lld tensors  %14zu bytes\n", quant_type_name((uint32_t)ty),
                   (long long)n_by_type[ty], by_type[ty]);
    printf("  %-7s  %5lld tensors  %14zu bytes\n", "total", (long long)gguf_tensor_count(f), total);
}

int cmd_info(int argc, char **argv)
{
    const char *model = NULL;
    bool tensors = true, meta = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = cli_value("info", argc, argv, &i)))
                return 2;
        } else if (!strcmp(a, "--tensors-only")) {
            meta = false;
        } else if (!strcmp(a, "--no-tensors")) {
            tensors = false;
        } else if (a[0] != '-' && !model) {
            model = a;   /* `glim info FILE` works too */
        } else {
            fprintf(stderr, "glim info: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!meta && !tensors) {
        fprintf(stderr, "glim info: --tensors-only and --no-tensors exclude each other\n");
        return 2;
    }
    if (!model)
        model = cli_default_model();
    struct gguf_file *f = NULL;
    struct glim_err err = {0};
    if (gguf_open(model, &f, &err) != GLIM_OK) {
        fprintf(stderr, "glim info: %s\n", err.msg);
        return 1;
    }
    if (meta) {
        print_summary(f);
        print_metadata(f);
    }
    if (tensors)
        print_tensors(f);
    gguf_close(f);
    return 0;
}
