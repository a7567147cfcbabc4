/*
 * cmd_bench.c — `glim bench`: prompt and decode throughput in llama-bench's
 * shapes (pp512, tg128, "pp512 @ d4096"), printed as its markdown table or
 * its JSON field names, so numbers compare directly with llama.cpp.
 *
 * Each test gets a fresh session: the depth prefill runs once, untimed; one
 * warm-up (the whole prompt for pp, two tokens for tg: the first decode step runs
 * eagerly and the second captures the decode graph where the backend has one, so
 * every timed step replays it, as llama-bench's one-token warm-up captures
 * llama.cpp's CUDA graph); then -r repetitions,
 * each truncating the session back to the depth first. Token ids are random
 * (seeded), as in llama-bench. Decode tests also report the bytes of weights
 * read per token (every matrix but token_embd, plus one token_embd row) and
 * the bandwidth that implies; with --membw, as a fraction of the machine's
 * measured read bandwidth (src/synth/membw.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "glim.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "backend/backend.h"
#include "synth/membw.h"

#define CMD "bench"
#define MAX_VALS 16

static void usage(FILE *out)
{
    fprintf(out,
            "usage: glim bench [-m MODEL] [-p N,..] [-n N,..] [-d N,..] [-r N] [-t N,..] [options]\n"
            "       glim bench --membw [-t N] [-r N] [--membw-mib N]\n\n"
            "Prompt (ppN) and decode (tgN) throughput with llama-bench's test shapes and columns.\n\n"
            "  -m, --model FILE   GGUF model (default: %s)\n"
            "  -p, --n-prompt N   prompt tokens, comma list (default 512; 0 = no pp test)\n"
            "  -n, --n-gen N      decode steps, comma list (default 128; 0 = no tg test)\n"
            "  -d, --n-depth N    run at context depth N (N tokens prefilled first, untimed; default 0)\n"
            "  -r, --repetitions N  timed repetitions after one warm-up (default 5)\n"
            "  -t, --threads N    threads, comma list (default: glim's default, physical cores)\n"
            "  --device D         cpu | cuda (default: glim's default)\n"
            "  --kernels K        auto | ref (default auto)\n"
            "  --no-graph         do not replay decode steps as CUDA graphs\n"
            "  --greedy           tg: each step picks the next token itself (glim run --temp 0's\n"
            "                     decoding: on CUDA the logits stay on the GPU and a step is queued\n"
            "                     before the last one's token is seen) instead of evaluating random\n"
            "                     ids and downloading their logits as llama-bench does\n"
            "  --json             print a JSON array (llama-bench field names) instead of the table\n"
            "  -o md|json         same as llama-bench's -o\n"
            "  --membw            measure memory read bandwidth; alone: only that, with a model:\n"
            "                     also report decode as a fraction of it\n"
            "  --membw-mib N      buffer for --membw (default max(8 x LLC, 1024 MiB))\n"
            "  --seed S           seed of the random token ids (default 1)\n"
            "  -h, --help         this help\n",
            cli_default_model());
}

struct vals {
    long long v[MAX_VALS];
    int n;
};

struct opts {
    const char *model;
    struct vals prompt, gen, depth, threads;
    int  reps;
    const char *device;
    int  kernels;
    bool json, membw, model_given, no_graph, greedy;
    long long membw_mib;
    unsigned long long seed;
};

/* "512" or "128,512": each in lo..hi */
static bool parse_vals(const char *flag, const char *text, long long lo, long long hi, struct vals *out)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    out->n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_VALS) {
            fprintf(stderr, "glim " CMD ": %s: at most %d values\n", flag, MAX_VALS);
            return false;
        }
        if (!cli_int(CMD, flag, tok, lo, hi, &out->v[out->n++]))
            return false;
    }
    if (out->n == 0)
        fprintf(stderr, "glim " CMD ": %s: expected a value\n", flag);
    return out->n > 0;
}

static bool is_flag(const char *f, const char *a, const char *b)
{
    return !strcmp(f, a) || (b && !strcmp(f, b));
}

static bool parse_value(struct opts *o, const char *f, const char *v)
{
    long long x;
    if (is_flag(f, "-m", "--model")) return (o->model = v, o->model_given = true);
    if (is_flag(f, "-p", "--n-prompt")) return parse_vals(f, v, 0, 1 << 20, &o->prompt);
    if (is_flag(f, "-n", "--n-gen")) return parse_vals(f, v, 0, 1 << 20, &o->gen);
    if (is_flag(f, "-d", "--n-depth")) return parse_vals(f, v, 0, 1 << 24, &o->depth);
    if (is_flag(f, "-t", "--threads")) return parse_vals(f, v, 1, 1024, &o->threads);
    if (is_flag(f, "-r", "--repetitions")) return cli_int(CMD, f, v, 1, 1000, &x) && (o->reps = (int)x, true);
    if (is_flag(f, "--membw-mib", NULL)) return cli_int(CMD, f, v, 1, 1 << 20, &o->membw_mib);
    if (is_flag(f, "--seed", NULL))
        return cli_int(CMD, f, v, 0, INT64_MAX, &x) && (o->seed = (unsigned long long)x, true);
    if (is_flag(f, "--device", NULL)) {
        if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
            fprintf(stderr, "glim " CMD ": --device: expected cpu or cuda, got '%s'\n", v);
            return false;
        }
        return (o->device = v, true);
    }
    if (is_flag(f, "--kernels", NULL)) {
        if (strcmp(v, "ref") && strcmp(v, "auto")) {
            fprintf(stderr, "glim " CMD ": --kernels: expected ref or auto, got '%s'\n", v);
            return false;
        }
        return (o->kernels = strcmp(v, "ref") ? GLIM_KERNELS_AUTO : GLIM_KERNELS_REF, true);
    }
    if (is_flag(f, "-o", "--output")) {
        if (strcmp(v, "md") && strcmp(v, "json")) {
            fprintf(stderr, "glim " CMD ": -o: expected md or json, got '%s'\n", v);
            return false;
        }
        return (o->json = !strcmp(v, "json"), true);
    }
    fprintf(stderr, "glim " CMD ": unknown option '%s' (see glim " CMD " --help)\n", f);
    return false;
}

/* 0 = go on, -1 = help printed, 2 = usage error */
static int parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.model = cli_default_model(), .prompt = {{512}, 1}, .gen = {{128}, 1},
                       .depth = {{0}, 1}, .threads = {{0}, 1}, .reps = 5, .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (is_flag(f, "-h", "--help")) {
            usage(stdout);
            return -1;
        }
        if (is_flag(f, "--json", NULL)) {
            o->json = true;
            continue;
        }
        if (is_flag(f, "--membw", NULL)) {
            o->membw = true;
            continue;
        }
        if (is_flag(f, "--no-graph", NULL)) {
            o->no_graph = true;
            continue;
        }
        if (is_flag(f, "--greedy", NULL)) {
            o->greedy = true;
            continue;
        }
        const char *v = cli_value(CMD, argc, argv, &i);
        if (!v || !parse_value(o, f, v))
            return 2;
    }
    return 0;
}

/* ---- what the file says: size, params, description, bytes per decode token ---- */

struct model_facts {
    char     desc[128];        /* llama-bench's model column: "<arch> <params> <ftype>" */
    uint64_t size_bytes;       /* all tensor bytes (llama_model_size) */
    uint64_t n_params;
    uint64_t bytes_per_token;  /* weights read per decode token */
};

static const char *ftype_name(int64_t ft)
{
    switch (ft) {   /* llama.cpp llama_model_ftype_name */
    case 0: return "all F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 7: return "Q8_0";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 32: return "BF16";
    default: return "?";
    }
}

/* No general.file_type: the type most 2-D tensors have, as llama.cpp guesses it */
static void guess_ftype(const struct gguf_file *f, char *buf, size_t size)
{
    int count[GLIM_TYPE_COUNT] = {0}, best = GLIM_TYPE_F32;
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(f, i);
        if (t->n_dims >= 2 && t->type < GLIM_TYPE_COUNT && ++count[t->type] > count[best])
            best = (int)t->type;
    }
    snprintf(buf, size, "%s%s (guessed)", best == GLIM_TYPE_F32 ? "all " : "", quant_type_name((uint32_t)best));
}

static void params_label(uint64_t n, char *buf, size_t size)
{
    if (n >= 1000000000ull)
        snprintf(buf, size, "%.1fB", (double)n / 1e9);
    else if (n >= 1000000ull)
        snprintf(buf, size, "%.0fM", (double)n / 1e6);
    else
        snprintf(buf, size, "%.0fK", (double)n / 1e3);
}

static int read_facts(const char *path, struct model_facts *mf)
{
    struct gguf_file *f = NULL;
    struct glim_err err = {0};
    if (gguf_open(path, &f, &err)) {
        fprintf(stderr, "glim " CMD ": %s\n", err.msg);
        return 1;
    }
    memset(mf, 0, sizeof *mf);
    const struct gguf_tensor *embd = gguf_tensor_find(f, "token_embd.weight");
    bool tied = !gguf_tensor_find(f, "output.weight");
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(f, i);
        mf->size_bytes += t->nbytes;
        mf->n_params += (uint64_t)t->n_elems;
        if (t != embd)
            mf->bytes_per_token += t->nbytes;
    }
    /* the embedding lookup reads one row; a tied output reads the whole table */
    if (embd)
        mf->bytes_per_token += tied ? embd->nbytes : quant_row_bytes(embd->type, embd->ne[0]);
    const char *arch = "?";
    size_t arch_len = 1;
    int64_t ft = -1;
    gguf_get_str(f, "general.architecture", &arch, &arch_len, NULL);
    gguf_get_i64(f, "general.file_type", &ft, NULL);
    char plabel[32], fname[48];
    params_label(mf->n_params, plabel, sizeof plabel);
    if (ft >= 0)
        snprintf(fname, sizeof fname, "%s", ftype_name(ft));
    else
        guess_ftype(f, fname, sizeof fname);
    snprintf(mf->desc, sizeof mf->desc, "%.*s %s %s", (int)GLIM_MIN(arch_len, 40), arch, plabel, fname);
    gguf_close(f);
    return 0;
}

/* ---- running one test ---- */

struct result {
    int      n_prompt, n_gen, n_depth, n_threads;
    bool     greedy;     /* tg by glim_session_greedy */
    int      n_samples;
    double   samples_ns[1000];
    double   avg_ns, stddev_ns, avg_ts, stddev_ts;
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s)   /* xorshift64*; token ids only */
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

static void random_ids(int32_t *ids, int n, int32_t n_vocab, uint64_t *rng)
{
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(rng_next(rng) % (uint64_t)n_vocab);
}

/* pp: one eval of n_prompt tokens (logits of the last); tg: n_gen evals of one token, or
 * (greedy) n_gen steps from one random id, each picking the next */
static int run_once(struct glim_session *s, const struct result *r, int32_t *ids, float *logits,
                    int32_t n_vocab, uint64_t *rng, int n_tg, struct glim_err *err)
{
    if (r->n_prompt > 0) {
        random_ids(ids, r->n_prompt, n_vocab, rng);
        return glim_session_eval(s, ids, r->n_prompt, logits, 1, err);
    }
    if (r->greedy) {
        int n = 0;
        random_ids(ids, 1, n_vocab, rng);
        int rc = glim_session_greedy(s, ids[0], n_tg, ids, NULL, NULL, &n, err);
        return rc == GLIM_OK && n != n_tg ? glim_fail(err, GLIM_ERANGE, "greedy: %d of %d steps", n, n_tg) : rc;
    }
    for (int i = 0; i < n_tg; i++) {
        random_ids(ids, 1, n_vocab, rng);
        int rc = glim_session_eval(s, ids, 1, logits, 1, err);
        if (rc)
            return rc;
    }
    return GLIM_OK;
}

static void summarize(struct result *r)
{
    int n = r->n_samples, n_tok = r->n_prompt + r->n_gen;
    double sum_ns = 0, sum_ts = 0, ss_ns = 0, ss_ts = 0;
    for (int i = 0; i < n; i++) {
        sum_ns += r->samples_ns[i];
        sum_ts += 1e9 * n_tok / r->samples_ns[i];
    }
    r->avg_ns = sum_ns / n;
    r->avg_ts = sum_ts / n;
    for (int i = 0; i < n; i++) {
        double ts = 1e9 * n_tok / r->samples_ns[i];
        ss_ns += (r->samples_ns[i] - r->avg_ns) * (r->samples_ns[i] - r->avg_ns);
        ss_ts += (ts - r->avg_ts) * (ts - r->avg_ts);
    }
    r->stddev_ns = n > 1 ? sqrt(ss_ns / (n - 1)) : 0;   /* sample sd, as llama-bench */
    r->stddev_ts = n > 1 ? sqrt(ss_ts / (n - 1)) : 0;
}

struct bench_ctx {
    struct glim_model *m;
    struct glim_session_params sp;
    struct glim_session *s;    /* owned */
    int32_t *ids;              /* owned [n_max] */
    float   *logits;           /* owned [n_vocab] */
    int32_t  n_vocab;
    int      n_max;
    uint64_t rng;
};

/* A fresh session with n_depth random tokens prefilled (untimed, in chunks). */
static int fresh_session(struct bench_ctx *c, int n_depth, struct glim_err *err)
{
    glim_session_free(c->s);
    c->s = NULL;
    int rc = glim_session_new(c->m, &c->sp, &c->s, err);
    for (int done = 0; !rc && done < n_depth;) {
        int k = GLIM_MIN(n_depth - done, c->n_max);
        random_ids(c->ids, k, c->n_vocab, &c->rng);
        rc = glim_session_eval(c->s, c->ids, k, NULL, 0, err);
        done += k;
    }
    return rc;
}

/* Back to the depth: a truncate, or (when the window ring cannot rewind that
 * far) a new session, as llama-bench does for every repetition. Untimed. */
static int rewind_to_depth(struct bench_ctx *c, int n_depth, struct glim_err *err)
{
    struct glim_err ignored = {0};
    if (glim_session_truncate(c->s, n_depth, &ignored) == GLIM_OK)
        return GLIM_OK;
    return fresh_session(c, n_depth, err);
}

static int run_test(struct glim_model *m, const struct opts *o, struct result *r, struct glim_err *err)
{
    struct bench_ctx c = {.m = m, .n_vocab = glim_model_n_vocab(m),
                          .rng = o->seed * 0x9e3779b97f4a7c15ull + 1};
    c.n_max = GLIM_MAX(GLIM_MAX(r->n_prompt, r->n_gen), GLIM_MIN(r->n_depth, 512));
    c.ids = malloc((size_t)GLIM_MAX(c.n_max, 1) * sizeof *c.ids);
    /* page-locked on a GPU (one DMA a step); GLIM_BENCH_PAGEABLE=1: plain memory, to time the difference */
    const char *pageable = getenv("GLIM_BENCH_PAGEABLE");
    bool pin = !(pageable && strcmp(pageable, "1") == 0);
    size_t lbytes = (size_t)c.n_vocab * sizeof *c.logits;
    c.logits = pin ? glim_model_host_alloc(m, lbytes) : malloc(lbytes);
    glim_session_params_init(&c.sp);
    c.sp.n_ctx = (int64_t)r->n_depth + r->n_prompt + r->n_gen + 1;
    /* ring rows to rewind one repetition; the window, not the ring, sets the attention cost */
    c.sp.n_ring_extra = r->n_prompt + r->n_gen + 1;
    int rc = c.ids && c.logits ? fresh_session(&c, r->n_depth, err) : glim_fail(err, GLIM_ENOMEM, "out of memory");
    if (!rc)   /* warm-up: the whole prompt, or two decode steps (the eager one and the graph's capture) */
        rc = run_once(c.s, r, c.ids, c.logits, c.n_vocab, &c.rng, 2, err);
    for (int rep = 0; !rc && rep < o->reps; rep++) {
        if ((rc = rewind_to_depth(&c, r->n_depth, err)))
            break;
        double t0 = now_ns();
        rc = run_once(c.s, r, c.ids, c.logits, c.n_vocab, &c.rng, r->n_gen, err);
        r->samples_ns[r->n_samples++] = now_ns() - t0;
    }
    if (!rc)
        summarize(r);
    glim_session_free(c.s);
    free(c.ids);
    if (pin)
        glim_model_host_free(m, c.logits);
    else
        free(c.logits);
    return rc;
}

/* ---- output ---- */

static void test_name(const struct result *r, char *buf, size_t size)
{
    int n = r->n_prompt > 0 ? snprintf(buf, size, "pp%d", r->n_prompt)
                            : snprintf(buf, size, "tg%d%s", r->n_gen, r->greedy ? " greedy" : "");
    if (r->n_depth > 0 && n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " @ d%d", r->n_depth);
}

static void backend_name(const struct opts *o, char *buf, size_t size)
{
    const char *dev = o->device && !strcmp(o->device, "cuda") ? "CUDA" : "CPU";
    snprintf(buf, size, "%s%s", dev, o->kernels == GLIM_KERNELS_REF ? "-ref" : "");
}

static void print_header(void)
{
    printf("| %-30s | %10s | %10s | %-10s | %7s | %15s | %20s |\n", "model", "size", "params", "backend",
           "threads", "test", "t/s");
    printf("| ------------------------------ | ---------: | ---------: | ---------- | ------: | "
           "--------------: | -------------------: |\n");
}

static void print_row(const struct opts *o, const struct model_facts *mf, const struct result *r)
{
    char size[32], params[32], test[48], be[16], ts[48];
    double gib = (double)mf->size_bytes / (1u << 30);
    if (gib >= 1)
        snprintf(size, sizeof size, "%.2f GiB", gib);
    else
        snprintf(size, sizeof size, "%.2f MiB", (double)mf->size_bytes / (1u << 20));
    if (mf->n_params >= 1000000000ull)
        snprintf(params, sizeof params, "%.2f B", (double)mf->n_params / 1e9);
    else
        snprintf(params, sizeof params, "%.2f M", (double)mf->n_params / 1e6);
    test_name(r, test, sizeof test);
    backend_name(o, be, sizeof be);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", r->avg_ts, r->stddev_ts);
    printf("| %-30s | %10s | %10s | %-10s | %7d | %15s | %20s |\n", mf->desc, size, params, be, r->n_threads,
           test, ts);
    fflush(stdout);
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(const struct opts *o, const struct model_facts *mf, const struct result *r, bool first,
                       double membw_gbs)
{
    char be[16];
    backend_name(o, be, sizeof be);
    printf("%s  {\n    \"model_filename\": ", first ? "" : ",\n");
    json_str(o->model);
    printf(",\n    \"model_type\": ");
    json_str(mf->desc);
    printf(",\n    \"model_size\": %llu,\n    \"model_n_params\": %llu,\n    \"backends\": \"%s\",\n",
           (unsigned long long)mf->size_bytes, (unsigned long long)mf->n_params, be);
    printf("    \"n_threads\": %d,\n    \"n_prompt\": %d,\n    \"n_gen\": %d,\n    \"n_depth\": %d,\n",
           r->n_threads, r->n_prompt, r->n_gen, r->n_depth);
    if (r->greedy)
        printf("    \"greedy\": true,\n");
    printf("    \"avg_ns\": %.0f,\n    \"stddev_ns\": %.0f,\n    \"avg_ts\": %.6f,\n    \"stddev_ts\": %.6f,\n",
           r->avg_ns, r->stddev_ns, r->avg_ts, r->stddev_ts);
    printf("    \"samples_ns\": [");
    for (int i = 0; i < r->n_samples; i++)
        printf("%s%.0f", i ? ", " : " ", r->samples_ns[i]);
    printf(" ],\n    \"samples_ts\": [");
    for (int i = 0; i < r->n_samples; i++)
        printf("%s%.6f", i ? ", " : " ", 1e9 * (r->n_prompt + r->n_gen) / r->samples_ns[i]);
    printf(" ],\n    \"bytes_per_token\": %llu", (unsigned long long)mf->bytes_per_token);
    if (r->n_gen > 0) {
        double gbs = r->avg_ts * (double)mf->bytes_per_token / 1e9;
        printf(",\n    \"weight_read_gbs\": %.3f", gbs);
        if (membw_gbs > 0)
            printf(",\n    \"membw_gbs\": %.3f,\n    \"membw_fraction\": %.4f", membw_gbs, gbs / membw_gbs);
    }
    printf("\n  }");
    fflush(stdout);
}

static void print_decode_note(const struct model_facts *mf, const struct result *r, int n, double membw_gbs)
{
    printf("\ndecode reads %.3f GB of weights per token (every matrix but token_embd, plus one token_embd row)\n",
           (double)mf->bytes_per_token / 1e9);
    for (int i = 0; i < n; i++) {
        if (r[i].n_gen == 0)
            continue;
        char test[48];
        double gbs = r[i].avg_ts * (double)mf->bytes_per_token / 1e9;
        test_name(&r[i], test, sizeof test);
        printf("%s, %d threads: %.2f t/s x %.3f GB = %.2f GB/s", test, r[i].n_threads, r[i].avg_ts,
               (double)mf->bytes_per_token / 1e9, gbs);
        if (membw_gbs > 0)
            printf(" = %.0f%% of the measured %.2f GB/s read bandwidth", 100 * gbs / membw_gbs, membw_gbs);
        printf("\n");
    }
}

/* ---- membw ---- */

/* The GPU's copy bandwidth (read + write): the ceiling decode is compared with there. */
static int measure_membw_cuda(const struct opts *o, bool print, double *gbs)
{
    struct glim_err err = {0};
    char desc[256];
    if (backend_cuda_membw(gbs, &err)) {
        fprintf(stderr, "glim " CMD ": %s\n", err.msg);
        return 1;
    }
    backend_cuda_describe(desc, sizeof desc);
    if (print && o->json)
        printf("{ \"gpu\": \"%s\", \"copy_gbs\": %.1f }\n", desc, *gbs);
    else if (print)
        printf("GPU: %s\ndevice copy bandwidth: %.1f GB/s (bytes read + written, best of 5, 4 GiB)\n", desc, *gbs);
    return 0;
}

static int measure_membw(const struct opts *o, bool print, double *gbs)
{
    struct membw_result mr;
    struct glim_err err = {0};
    if (o->device && !strcmp(o->device, "cuda"))
        return measure_membw_cuda(o, print, gbs);
    int nth = (int)o->threads.v[0];
    if (membw_measure((size_t)o->membw_mib << 20, nth, o->reps, &mr, &err)) {
        fprintf(stderr, "glim " CMD ": %s\n", err.msg);
        return 1;
    }
    *gbs = mr.best_gbs;
    if (!print)
        return 0;
    if (o->json)
        printf("{ \"membw_best_gbs\": %.3f, \"membw_mean_gbs\": %.3f, \"buffer_bytes\": %zu, \"llc_bytes\": %zu, "
               "\"n_threads\": %d, \"repetitions\": %d }\n",
               mr.best_gbs, mr.mean_gbs, mr.buf_bytes, mr.llc_bytes, mr.n_threads, mr.n_reps);
    else
        printf("memory read bandwidth: %.2f GB/s best, %.2f GB/s mean (%d threads, %zu MiB buffer, "
               "LLC %zu MiB, best of %d)\n",
               mr.best_gbs, mr.mean_gbs, mr.n_threads, mr.buf_bytes >> 20, mr.llc_bytes >> 20, mr.n_reps);
    return 0;
}

/* ---- main ---- */

static int bench_threads(const struct opts *o, const struct model_facts *mf, int n_threads, double membw_gbs,
                         struct result *res, int *n_res, int cap, bool *first, struct glim_err *err)
{
    struct glim_model_params mp;
    glim_model_params_init(&mp);
    mp.n_threads = n_threads;
    mp.kernels = o->kernels;
    mp.device = o->device;
    mp.no_graph = o->no_graph;
    struct glim_model *m = NULL;
    double t0 = now_ns();
    int rc = glim_model_load(o->model, &mp, &m, err);
    if (!rc && !o->json)   /* stderr: the table on stdout stays llama-bench's */
        fprintf(stderr, "glim " CMD ": model loaded in %.2f s\n", (now_ns() - t0) * 1e-9);
    int shown_threads = n_threads > 0 ? n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int d = 0; !rc && d < o->depth.n; d++) {
        for (int k = 0; !rc && k < o->prompt.n + o->gen.n; k++) {
            bool pp = k < o->prompt.n;
            int n = (int)(pp ? o->prompt.v[k] : o->gen.v[k - o->prompt.n]);
            if (n == 0 || *n_res == cap)
                continue;
            struct result *r = &res[*n_res];
            memset(r, 0, sizeof *r);
            *r = (struct result){.n_prompt = pp ? n : 0, .n_gen = pp ? 0 : n, .n_depth = (int)o->depth.v[d],
                                 .n_threads = shown_threads, .greedy = !pp && o->greedy};
            if ((rc = run_test(m, o, r, err)))
                break;
            if (o->json)
                print_json(o, mf, r, *first, membw_gbs);
            else
                print_row(o, mf, r);
            *first = false;
            (*n_res)++;
        }
    }
    glim_model_free(m);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    struct opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    double membw_gbs = 0;
    if (o.membw && !o.model_given)
        return measure_membw(&o, true, &membw_gbs);
    struct model_facts mf;
    if (read_facts(o.model, &mf))
        return 1;
    /* first, so the JSON records can carry the fraction */
    if (o.membw && measure_membw(&o, !o.json, &membw_gbs))
        return 1;
    enum { CAP = 256 };
    struct result *res = calloc(CAP, sizeof *res);
    if (!res)
        return 1;
    int n_res = 0;
    bool first = true;
    struct glim_err err = {0};
    if (o.json) {
        printf("[\n");
    } else {
        char desc[256];
        if (o.device && !strcmp(o.device, "cuda") && backend_cuda_describe(desc, sizeof desc) == GLIM_OK)
            printf("GPU: %s\n\n", desc);
        print_header();
    }
    for (int t = 0; !rc && t < o.threads.n; t++)
        rc = bench_threads(&o, &mf, (int)o.threads.v[t], membw_gbs, res, &n_res, CAP, &first, &err);
    if (rc)
        fprintf(stderr, "glim " CMD ": %s\n", err.msg);
    if (o.json)
        printf("\n]\n");
    else if (!rc)
        print_decode_note(&mf, res, n_res, membw_gbs);
    free(res);
    return rc ? 1 : 0;
}
