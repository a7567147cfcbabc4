/*
 * cmd_quantize.c — `glim quantize IN OUT TYPE`: F32/F16/BF16 GGUF to a
 * llama.cpp type mix (Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q4_0).
 *
 * All metadata is copied except general.file_type (set to the mix's
 * llama_ftype) and general.quantization_version (2). Per-tensor types follow
 * llama.cpp's rules (src/quant/quantize.c). Tensors are quantized at write
 * time, one at a time over --threads threads, so memory stays at one tensor.
 * Progress goes to stderr; the per-tensor RMSE table to stdout.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "cli.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/quantize.h"

#define QUANTIZATION_VERSION 2   /* llama.cpp's GGML_QNT_VERSION */

static void usage(FILE *out)
{
    fprintf(out, "usage: glim quantize IN OUT TYPE [--threads N] [--pure] [--quiet]\n\n"
                 "Convert an F32/F16/BF16 GGUF into a quantized one with llama.cpp's type mixes.\n\n"
                 "  TYPE          %s\n"
                 "  --threads N   worker threads (default: online CPUs)\n"
                 "  --pure        every weight matrix gets the base type (no Q6_K for\n"
                 "                output / attn_v / ffn_down); 1-D tensors stay as they are\n"
                 "  --quiet       no progress bar and no RMSE table\n"
                 "  -h, --help    this help\n",
                 quantize_mix_names());
}

struct job {                       /* one tensor to quantize at write time */
    const struct gguf_tensor *t;   /* borrowed: lives as long as the input file */
    uint32_t type;
    int n_threads;
    struct quantize_stats st;
    bool done;
    struct run *run;
};

struct run {
    int64_t n_jobs, n_done;
    bool is_tty, is_quiet;
};

static void progress_bar(struct run *r, const char *name)
{
    if (r->is_quiet || !r->is_tty)
        return;
    int width = 30, fill = r->n_jobs ? (int)(width * r->n_done / r->n_jobs) : width;
    fprintf(stderr, "\r[%.*s%*s] %lld/%lld %-40.40s", fill, "##############################", width - fill,
            "", (long long)r->n_done, (long long)r->n_jobs, name);
    if (r->n_done == r->n_jobs)
        fputc('\n', stderr);
    fflush(stderr);
}

static int gen_tensor(void *ud, void *dst, size_t nbytes, struct glim_err *err)
{
    struct job *j = ud;
    int64_t n_per_row = j->t->ne[0], n_rows = j->t->n_elems / n_per_row;
    if (quant_row_bytes(j->type, n_per_row) * (size_t)n_rows != nbytes)
        return glim_fail(err, GLIM_EINVAL, "size mismatch for %s", quant_type_name(j->type));
    int rc = quantize_tensor(j->type, dst, j->t->type, j->t->data, n_rows, n_per_row, j->n_threads, &j->st, err);
    if (rc)
        return rc;
    j->done = true;
    j->run->n_done++;
    progress_bar(j->run, j->t->name);
    return GLIM_OK;
}

static int copy_metadata(struct gguf_writer *w, const struct gguf_file *f, uint32_t ftype)
{
    int rc = GLIM_OK;
    for (int64_t i = 0; i < gguf_kv_count(f) && !rc; i++) {
        const struct gguf_kv *kv = gguf_kv_at(f, i);
        if (strcmp(kv->key, "general.file_type") && strcmp(kv->key, "general.quantization_version"))
            rc = gguf_writer_add_kv_copy(w, kv);
    }
    if (!rc)
        rc = gguf_writer_add_u32(w, "general.quantization_version", QUANTIZATION_VERSION);
    if (!rc)
        rc = gguf_writer_add_u32(w, "general.file_type", ftype);
    return rc;
}

static void print_table(const struct gguf_file *f, const struct job *jobs, size_t out_bytes)
{
    double se = 0, sx = 0;
    int64_t n_q = 0, n_all = 0;
    printf("%-40s %-6s %-6s %12s %12s %10s\n", "tensor", "from", "to", "elements", "rmse", "rel_rmse");
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(f, i);
        const struct job *j = &jobs[i];
        n_all += t->n_elems;
        if (!j->done) {
            printf("%-40s %-6s %-6s %12lld %12s %10s\n", t->name, quant_type_name(t->type),
                   quant_type_name(t->type), (long long)t->n_elems, "copy", "-");
            continue;
        }
        double rmse = sqrt(j->st.sum_sq_err / (double)j->st.n);
        double rel = j->st.sum_sq_src > 0 ? sqrt(j->st.sum_sq_err / j->st.sum_sq_src) : 0;
        printf("%-40s %-6s %-6s %12lld %12.4e %10.5f\n", t->name, quant_type_name(t->type),
               quant_type_name(j->type), (long long)t->n_elems, rmse, rel);
        se += j->st.sum_sq_err;
        sx += j->st.sum_sq_src;
        n_q += j->st.n;
    }
    size_t in_bytes = gguf_file_size(f);
    printf("total: %lld of %lld elements quantized, rmse %.4e, rel_rmse %.5f\n", (long long)n_q,
           (long long)n_all, n_q ? sqrt(se / (double)n_q) : 0.0, sx > 0 ? sqrt(se / sx) : 0.0);
    printf("size: %.2f MiB -> %.2f MiB (%.3f bits per element)\n", (double)in_bytes / 1048576.0,
           (double)out_bytes / 1048576.0, n_all ? 8.0 * (double)out_bytes / (double)n_all : 0.0);
}

/* 0 ok, 2 usage; fills the positional arguments and options */
static int parse_args(int argc, char **argv, const char *pos[3], long long *threads, bool *pure, bool *quiet)
{
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            const char *v = cli_value("quantize", argc, argv, &i);
            if (!v || !cli_int("quantize", a, v, 1, 256, threads))
                return 2;
        } else if (!strcmp(a, "--pure")) {
            *pure = true;
        } else if (!strcmp(a, "--quiet")) {
            *quiet = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "glim quantize: unknown option '%s' (see --help)\n", a);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "glim quantize: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (n_pos != 3) {
        usage(stderr);
        return 2;
    }
    return 0;
}

int cmd_quantize(int argc, char **argv)
{
    const char *pos[3] = {NULL, NULL, NULL};
    long long threads = sysconf(_SC_NPROCESSORS_ONLN);
    bool pure = false, quiet = false;
    int prc = parse_args(argc, argv, pos, &threads, &pure, &quiet);
    if (prc)
        return prc < 0 ? 0 : prc;
    const struct quantize_mix *mix = quantize_mix_find(pos[2]);
    if (!mix) {
        fprintf(stderr, "glim quantize: TYPE: expected one of %s, got '%s'\n", quantize_mix_names(), pos[2]);
        return 2;
    }
    if (threads < 1)
        threads = 1;

    struct glim_err err = {0};
    struct gguf_file *f = NULL;
    struct gguf_writer *w = NULL;
    struct job *jobs = NULL;
    const char **names = NULL;
    int status = 1;
    if (gguf_open(pos[0], &f, &err)) {
        fprintf(stderr, "glim quantize: %s\n", err.msg);
        goto done;
    }
    int64_t n = gguf_tensor_count(f);
    jobs = glim_calloc((size_t)(n ? n : 1), sizeof *jobs);
    names = glim_calloc((size_t)(n ? n : 1), sizeof *names);
    w = gguf_writer_new();
    if (!jobs || !names || !w || copy_metadata(w, f, mix->ftype)) {
        fprintf(stderr, "glim quantize: out of memory copying metadata\n");
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        names[i] = gguf_tensor_at(f, i)->name;
    struct quantize_plan plan;
    quantize_plan_init(&plan, mix, pure, names, n);
    struct run run = {.is_tty = isatty(2), .is_quiet = quiet};
    for (int64_t i = 0; i < n; i++) {
        const struct gguf_tensor *t = gguf_tensor_at(f, i);
        uint32_t type = quantize_plan_type(&plan, t->name, t->n_dims, t->ne, t->type);
        int rc;
        if (type == t->type) {
            rc = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes, false);
        } else {
            jobs[i] = (struct job){.t = t, .type = type, .n_threads = (int)threads, .run = &run};
            run.n_jobs++;
            rc = gguf_writer_add_tensor_gen(w, t->name, type, t->n_dims, t->ne, gen_tensor, &jobs[i]);
        }
        if (rc) {
            fprintf(stderr, "glim quantize: tensor '%s': cannot add as %s (%s)\n", t->name,
                    quant_type_name(type), glim_status_name(rc));
            goto done;
        }
    }
    if (gguf_writer_write(w, pos[1], NULL, NULL, &err)) {
        fprintf(stderr, "\nglim quantize: %s\n", err.msg);
        goto done;
    }
    if (!quiet) {
        struct gguf_file *o = NULL;
        size_t out_bytes = 0;
        if (!gguf_open(pos[1], &o, NULL))
            out_bytes = gguf_file_size(o);
        gguf_close(o);
        printf("%s: %s (general.file_type %u)%s\n", pos[1], mix->name, mix->ftype, pure ? ", pure" : "");
        print_table(f, jobs, out_bytes);
    }
    status = 0;
done:
    gguf_writer_free(w);
    glim_free(jobs);
    glim_free(names);
    gguf_close(f);
    return status;
}
