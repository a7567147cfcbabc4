/*
 * cmd_eval.c — `glim eval`: run token ids through a model, write the logits
 * of every position (little-endian f32 [n][n_vocab], the goldens' format),
 * optionally continue greedily. This is how correctness is checked: keep
 * the interface stable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "glim.h"
#include "model/model.h"
#include "runtime/dflash.h"

static const char *USAGE =
    "usage: glim eval [-m MODEL] (--tokens 1,2,3 | --tokens-file F) [options]\n"
    "\n"
    "Runs the ids through the model and writes the logits of every position.\n"
    "\n"
    "  -m, --model FILE      GGUF model (default: the embedded models/stories260K.gguf)\n"
    "  --tokens LIST         comma- or space-separated token ids\n"
    "  --tokens-file F       file with ids (comma/space/newline separated)\n"
    "  --chunk N             prefill chunk size (default 512)\n"
    "  --one-by-one          feed one token per forward (same as --chunk 1)\n"
    "  --logits-out FILE     write f32 logits [n][n_vocab] of every evaluated position\n"
    "                        (prompt, then each fed generated token)\n"
    "  --generate N          append N greedy tokens and print their ids\n"
    "  --ctx N               context size (default: the model's context_length)\n"
    "  --threads N           CPU threads (default: physical cores)\n"
    "  --kernels ref|auto    ref = scalar reference kernels (exact dequant, f32)\n"
    "  --device cpu|cuda     backend (default: cuda when present)\n"
    "  --no-graph            do not replay decode steps as CUDA graphs\n"
    "  --kv-type f32|f16|bf16  KV cache type (default: f32 with ref kernels, else f16)\n"
    "  --draft FILE          DFlash draft GGUF: speculative greedy decoding for --generate\n"
    "  --block-length B      DFlash block length (2..draft block_size; default block_size)\n"
    "  --n-draft K           drafts verified per cycle (1..B-1; default B-1)\n"
    "  -q, --quiet           do not print the memory plan\n";

struct eval_opts {
    const char *model, *tokens, *tokens_file, *logits_out, *device, *draft;
    long long chunk, generate, ctx, threads, block_length, n_draft;
    int kernels, kv_type;
    bool verbose, quiet, no_graph;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_kv_type(const char *v)
{
    if (!strcmp(v, "f32") || !strcmp(v, "F32")) return GLIM_KV_F32;
    if (!strcmp(v, "f16") || !strcmp(v, "F16")) return GLIM_KV_F16;
    if (!strcmp(v, "bf16") || !strcmp(v, "BF16")) return GLIM_KV_BF16;
    return -1;
}

/* 0 ok, 1 error, 2 usage; -1 = --help printed */
static int parse(int argc, char **argv, struct eval_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
#define VAL() do { if (!(v = cli_value("eval", argc, argv, &i))) return 2; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return -1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); o->model = v; }
        else if (!strcmp(a, "--tokens")) { VAL(); o->tokens = v; }
        else if (!strcmp(a, "--tokens-file")) { VAL(); o->tokens_file = v; }
        else if (!strcmp(a, "--logits-out")) { VAL(); o->logits_out = v; }
        else if (!strcmp(a, "--device")) { VAL(); o->device = v; }
        else if (!strcmp(a, "--no-graph")) o->no_graph = true;
        else if (!strcmp(a, "--draft")) { VAL(); o->draft = v; }
        else if (!strcmp(a, "--block-length")) { VAL(); if (!cli_int("eval", a, v, 2, DFLASH_MAX_BLOCK, &o->block_length)) return 2; }
        else if (!strcmp(a, "--n-draft")) { VAL(); if (!cli_int("eval", a, v, 1, DFLASH_MAX_BLOCK - 1, &o->n_draft)) return 2; }
        else if (!strcmp(a, "--one-by-one")) o->chunk = 1;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) o->quiet = true;
        else if (!strcmp(a, "--chunk")) { VAL(); if (!cli_int("eval", a, v, 1, 65536, &o->chunk)) return 2; }
        else if (!strcmp(a, "--generate")) { VAL(); if (!cli_int("eval", a, v, 0, 1 << 24, &o->generate)) return 2; }
        else if (!strcmp(a, "--ctx")) { VAL(); if (!cli_int("eval", a, v, 1, 0x7fffffff, &o->ctx)) return 2; }
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) { VAL(); if (!cli_int("eval", a, v, 0, 1024, &o->threads)) return 2; }
        else if (!strcmp(a, "--kernels")) {
            VAL();
            if (strcmp(v, "ref") && strcmp(v, "auto")) {
                fprintf(stderr, "glim eval: --kernels: expected ref or auto, got '%s'\n", v);
                return 2;
            }
            o->kernels = strcmp(v, "ref") ? GLIM_KERNELS_AUTO : GLIM_KERNELS_REF;
        } else if (!strcmp(a, "--kv-type")) {
            VAL();
            if ((o->kv_type = parse_kv_type(v)) < 0) {
                fprintf(stderr, "glim eval: --kv-type: expected f32, f16 or bf16, got '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "glim eval: unknown option '%s' (see glim eval --help)\n", a);
            return 2;
        }
#undef VAL
    }
    if (o->draft && o->logits_out) {
        fprintf(stderr, "glim eval: --logits-out is not available with --draft\n");
        return 2;
    }
    if (!o->tokens == !o->tokens_file) {
        fprintf(stderr, "glim eval: give exactly one of --tokens or --tokens-file\n");
        return 2;
    }
    return 0;
}

/* glim_session_greedy's on_token: print each id as it comes */
static int print_id(void *ud, int32_t tok)
{
    (void)ud;
    printf(" %d", tok);
    fflush(stdout);
    return 0;
}

/* --draft: prefill, then --generate tokens through DFlash cycles (greedy). */
static int run_draft(const struct eval_opts *o, struct glim_model *m, struct glim_session *s,
                     const int32_t *ids, int n_ids, struct glim_err *err)
{
    struct glim_model *d = NULL;
    struct dflash *df = NULL;
    struct dflash_params p;
    dflash_params_init(&p);
    p.block_length = (int)o->block_length, p.n_draft = (int)o->n_draft;
    /* GLIM_DFLASH_HOST_LOGITS=1 (bench knob): every row's logits to the host, picks made there */
    const char *hl = getenv("GLIM_DFLASH_HOST_LOGITS");
    p.logits_on_host = hl && strcmp(hl, "0") != 0;
    int rc = glim_draft_load(m, o->draft, &d, err);
    if (rc == GLIM_OK)
        rc = dflash_new(m, d, s, &p, &df, err);
    double t0 = now_s();
    if (rc == GLIM_OK)
        rc = dflash_prefill(df, ids, n_ids, err);
    double t1 = now_s();
    if (rc == GLIM_OK) {
        fprintf(stderr, "prompt: %d tokens in %.3f s (%.2f tok/s)\n", n_ids, t1 - t0, n_ids / (t1 - t0 + 1e-9));
        printf("generated:");
        for (long long g = 0; g < o->generate && rc == GLIM_OK; g++) {
            int32_t tok;
            bool eos;
            rc = dflash_next(df, &tok, &eos, err);
            if (rc == GLIM_OK)
                printf(" %d", tok);
        }
        printf("\n");
        fflush(stdout);
        double dt = now_s() - t1;
        const struct dflash_stats *st = dflash_get_stats(df);
        double acc = 0;
        for (int i = 0; i < st->n_rows; i++)
            acc += st->accepts_by_row[i];
        fprintf(stderr, "dflash: %lld cycles, mean accepted length %.2f, draft %.1f ms, verify %.1f ms, "
                        "%.2f tok/s\n", (long long)st->cycles,
                st->speculative_cycles ? acc / st->speculative_cycles : 0.0, st->draft_execute_ms,
                st->target_execute_ms, o->generate / (dt > 0 ? dt : 1e-9));
        dflash_stats_print(st, stderr);
    }
    dflash_free(df);
    glim_model_free(d);
    return rc;
}

static int run_eval(const struct eval_opts *o, const int32_t *ids, int n_ids)
{
    struct glim_err err = {0};
    struct glim_model_params mp;
    glim_model_params_init(&mp);
    mp.n_threads = (int)o->threads, mp.kernels = o->kernels, mp.device = o->device, mp.no_graph = o->no_graph;
    mp.verbose = !o->quiet;   /* the memory plan is printed at load */
    struct glim_model *m = NULL;
    struct glim_session *s = NULL;
    float *logits = NULL;
    FILE *out = NULL;
    int rc = 1;
    if (glim_model_load(o->model, &mp, &m, &err) != GLIM_OK)
        goto fail;
    struct glim_session_params sp;
    glim_session_params_init(&sp);
    sp.n_ctx = o->ctx, sp.n_chunk = (int)o->chunk, sp.kv_type = o->kv_type;
    if (glim_session_new(m, &sp, &s, &err) != GLIM_OK)
        goto fail;
    if (o->draft) {
        if (run_draft(o, m, s, ids, n_ids, &err) == GLIM_OK)
            rc = 0;
        goto fail;
    }
    int V = glim_model_n_vocab(m);
    logits = malloc((size_t)n_ids * V * sizeof(float));
    if (!logits) {
        err.code = GLIM_ENOMEM;
        snprintf(err.msg, sizeof err.msg, "out of memory for %d x %d logits", n_ids, V);
        goto fail;
    }
    if (o->logits_out && !(out = fopen(o->logits_out, "wb"))) {
        snprintf(err.msg, sizeof err.msg, "%s: cannot open for writing", o->logits_out);
        goto fail;
    }
    double t0 = now_s();
    if (glim_session_eval(s, ids, n_ids, logits, n_ids, &err) != GLIM_OK)
        goto fail;
    double dt = now_s() - t0;
    fprintf(stderr, "prompt: %d tokens in %.3f s (%.2f tok/s)\n", n_ids, dt, n_ids / (dt > 0 ? dt : 1e-9));
    if (out && fwrite(logits, sizeof(float), (size_t)n_ids * V, out) != (size_t)n_ids * V) {
        snprintf(err.msg, sizeof err.msg, "%s: write failed", o->logits_out);
        goto fail;
    }
    if (o->generate > 0) {
        int32_t tok = sampler_argmax(logits + (size_t)(n_ids - 1) * V, V);
        printf("generated:");
        t0 = now_s();
        if (!out) {   /* no logits wanted: the picks can stay on the backend (glim_session_greedy) */
            int32_t *picks = malloc((size_t)o->generate * sizeof *picks);
            int n = 0;
            print_id(NULL, tok);
            if (!picks || glim_session_greedy(s, tok, (int)o->generate - 1, picks, print_id, NULL, &n, &err)) {
                free(picks);
                printf("\n");
                if (!picks)
                    snprintf(err.msg, sizeof err.msg, "out of memory");
                goto fail;
            }
            free(picks);
            if (n < o->generate - 1) {   /* as the eval loop: running out of context is an error */
                printf("\n");
                snprintf(err.msg, sizeof err.msg, "the context (--ctx %lld) is full after %d generated tokens",
                         (long long)glim_session_n_ctx(s), n + 1);
                goto fail;
            }
        }
        for (long long g = 0; out && g < o->generate; g++) {
            printf(" %d", tok);
            fflush(stdout);
            if (g + 1 == o->generate)
                break;
            if (glim_session_eval(s, &tok, 1, logits, 1, &err) != GLIM_OK) {
                printf("\n");
                goto fail;
            }
            if (out && fwrite(logits, sizeof(float), V, out) != (size_t)V) {
                snprintf(err.msg, sizeof err.msg, "%s: write failed", o->logits_out);
                goto fail;
            }
            tok = sampler_argmax(logits, V);
        }
        printf("\n");
        fflush(stdout);   /* before the stats on stderr, where both go to one pipe */
        dt = now_s() - t0;
        if (o->generate > 1)
            fprintf(stderr, "decode: %lld tokens in %.3f s (%.2f tok/s)\n", o->generate - 1, dt,
                    (o->generate - 1) / (dt > 0 ? dt : 1e-9));
    }
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "glim eval: %s\n", err.msg[0] ? err.msg : "failed");
    if (out && fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "glim eval: %s: write failed\n", o->logits_out);
        rc = 1;
    }
    free(logits);
    glim_session_free(s);
    glim_model_free(m);
    return rc;
}

int cmd_eval(int argc, char **argv)
{
    struct eval_opts o = {0};
    int prc = parse(argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    if (!o.model)
        o.model = cli_default_model();
    int32_t *ids = NULL;
    int n_ids = 0;
    if (o.tokens_file) {
        char *text;
        size_t len;
        if (!cli_read_file("eval", o.tokens_file, &text, &len))
            return 1;
        bool ok = cli_parse_ids("eval", text, &ids, &n_ids);
        free(text);
        if (!ok)
            return 1;
    } else if (!cli_parse_ids("eval", o.tokens, &ids, &n_ids)) {
        return 2;
    }
    if (n_ids == 0) {
        fprintf(stderr, "glim eval: no token ids given\n");
        free(ids);
        return 2;
    }
    int rc = run_eval(&o, ids, n_ids);
    free(ids);
    return rc;
}
