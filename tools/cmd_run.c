/*
 * cmd_run.c — `glim run`: tokenize a prompt (optionally through the model's
 * chat template), prefill, then sample and stream text to stdout until an
 * end-of-generation token or -n tokens. Stats go to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "glim.h"
#include "model/model.h"
#include "runtime/dflash.h"
#include "runtime/sampler.h"

#ifdef GLIM_HAVE_TEXT
#include "text/chat_prompt.h"
#include "text/tok.h"

static const char *USAGE =
    "usage: glim run [-m MODEL] [-p TEXT | -f FILE] [options]\n"
    "\n"
    "Generates text from a prompt and streams it to stdout.\n"
    "\n"
    "  -m, --model FILE     GGUF model (default: the embedded models/stories260K.gguf)\n"
    "  -p, --prompt TEXT    prompt (default: \"Once upon a time\")\n"
    "  -f, --file FILE      read the prompt from FILE\n"
    "  --chat               render the prompt as a user message with the model's chat template\n"
    "  --system TEXT        system message (with --chat)\n"
    "  -n N                 tokens to generate (default 128; stops earlier at end of generation)\n"
    "  --temp T             temperature, 0 = greedy (default 0.8)\n"
    "  --top-k K            (default 40; 0 = off)\n"
    "  --top-p P            (default 0.95; 1 = off)\n"
    "  --min-p P            (default 0.05; 0 = off)\n"
    "  --repeat-penalty R   (default 1 = off)\n"
    "  --seed S             RNG seed (default: random)\n"
    "  --ctx N              context size (default: the model's, at most 8192 here)\n"
    "  --threads N          CPU threads (default: physical cores)\n"
    "  --kernels ref|auto   scalar reference kernels or the fast ones (default auto)\n"
    "  --device cpu|cuda    backend (default: cuda when present)\n"
    "  --no-graph           do not replay decode steps as CUDA graphs\n"
    "  --tokenizer FILE     tokenizer.json for models whose GGUF has no vocabulary\n"
    "  --special            print control tokens as text\n"
    "  --draft FILE         DFlash draft GGUF: speculative decoding (lossless)\n"
    "  --block-length B     DFlash block length (2..draft block_size; default block_size)\n"
    "  --n-draft K          drafts verified per cycle (1..B-1; default B-1)\n";

struct run_opts {
    const char *model, *prompt, *file, *system, *device, *tokenizer, *draft;
    long long block_length, n_draft;
    bool chat, special, no_graph;
    long long n_predict, ctx, threads;
    int kernels;
    struct sampler_params sp;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse(int argc, char **argv, struct run_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        double d;
        long long n;
#define VAL() do { if (!(v = cli_value("run", argc, argv, &i))) return 2; } while (0)
#define FLT(lo, hi, dst) do { VAL(); if (!cli_float("run", a, v, lo, hi, &d)) return 2; dst = (float)d; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return -1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); o->model = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { VAL(); o->prompt = v; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { VAL(); o->file = v; }
        else if (!strcmp(a, "--system")) { VAL(); o->system = v; }
        else if (!strcmp(a, "--device")) { VAL(); o->device = v; }
        else if (!strcmp(a, "--no-graph")) o->no_graph = true;
        else if (!strcmp(a, "--tokenizer")) { VAL(); o->tokenizer = v; }
        else if (!strcmp(a, "--draft")) { VAL(); o->draft = v; }
        else if (!strcmp(a, "--block-length")) { VAL(); if (!cli_int("run", a, v, 2, DFLASH_MAX_BLOCK, &o->block_length)) return 2; }
        else if (!strcmp(a, "--n-draft")) { VAL(); if (!cli_int("run", a, v, 1, DFLASH_MAX_BLOCK - 1, &o->n_draft)) return 2; }
        else if (!strcmp(a, "--chat")) o->chat = true;
        else if (!strcmp(a, "--special")) o->special = true;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { VAL(); if (!cli_int("run", a, v, 0, 1 << 24, &o->n_predict)) return 2; }
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) { VAL(); if (!cli_int("run", a, v, 1, 0x7fffffff, &o->ctx)) return 2; }
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) { VAL(); if (!cli_int("run", a, v, 0, 1024, &o->threads)) return 2; }
        else if (!strcmp(a, "--temp")) FLT(0, 2, o->sp.temperature);
        else if (!strcmp(a, "--top-p")) FLT(0, 1, o->sp.top_p);
        else if (!strcmp(a, "--min-p")) FLT(0, 1, o->sp.min_p);
        else if (!strcmp(a, "--repeat-penalty")) FLT(0.01, 100, o->sp.repeat_penalty);
        else if (!strcmp(a, "--top-k")) { VAL(); if (!cli_int("run", a, v, 0, 1 << 30, &n)) return 2; o->sp.top_k = (int32_t)n; }
        else if (!strcmp(a, "--seed")) { VAL(); if (!cli_int("run", a, v, 0, INT64_MAX, &n)) return 2; o->sp.seed = (uint64_t)n; }
        else if (!strcmp(a, "--kernels")) {
            VAL();
            if (strcmp(v, "ref") && strcmp(v, "auto")) {
                fprintf(stderr, "glim run: --kernels: expected ref or auto, got '%s'\n", v);
                return 2;
            }
            o->kernels = strcmp(v, "ref") ? GLIM_KERNELS_AUTO : GLIM_KERNELS_REF;
        } else {
            fprintf(stderr, "glim run: unknown option '%s' (see glim run --help)\n", a);
            return 2;
        }
#undef VAL
#undef FLT
    }
    if (o->prompt && o->file) {
        fprintf(stderr, "glim run: give -p or -f, not both\n");
        return 2;
    }
    return 0;
}

/* The prompt as ids: raw text (BOS per the vocabulary) or a rendered chat. */
static int build_prompt(const struct run_opts *o, const struct glim_model *m, const struct tok_vocab *v,
                        const char *text, struct tok_ids *ids, struct glim_err *err)
{
    if (!o->chat)
        return tok_encode(v, text, strlen(text), TOK_ADD_SPECIAL, ids, err);
    return chat_encode_user_prompt(m->gguf, v, o->system, text, ids, err);
}

static bool vocab_eog(void *ud, int32_t id) { return tok_is_eog(ud, id); }

/* Where generated tokens come from: the plain sampler loop or DFlash cycles. */
struct gen_src {
    struct glim_session *s;
    struct sampler      *smp;
    struct dflash       *df;
    float               *logits;
    int                  V;
    bool                 first;
};

static int next_token(struct gen_src *g, const struct tok_vocab *v, int32_t *id, bool *eog, struct glim_err *err)
{
    if (g->df)
        return dflash_next(g->df, id, eog, err);
    int rc = GLIM_OK;
    if (!g->first)   /* feed the previous token, then sample */
        rc = glim_session_eval(g->s, id, 1, g->logits, 1, err);
    g->first = false;
    if (rc == GLIM_OK)
        rc = sampler_sample(g->smp, g->logits, g->V, id, err);
    if (rc == GLIM_OK) {
        *eog = tok_is_eog(v, *id);
        if (!*eog)
            sampler_accept(g->smp, *id);
    }
    return rc;
}

/* Plain greedy decoding (no penalties, no draft) through glim_session_greedy: the tokens
 * next_token would give, with the pick on the device where the backend has one. */
struct greedy_sink {
    const struct tok_vocab *v;
    struct tok_stream      *ts;
    struct strbuf          *text;
    long long               n_gen;
    int                     rc;
    struct glim_err        *err;
};

/* prints a token; non-zero (stop) at an end-of-generation token or a failure */
static int greedy_emit(void *ud, int32_t id)
{
    struct greedy_sink *k = ud;
    k->n_gen++;
    if (tok_is_eog(k->v, id))
        return 1;
    strbuf_reset(k->text);
    if ((k->rc = tok_stream_feed(k->ts, id, k->text)) != GLIM_OK)
        return 1;
    fwrite(k->text->data ? k->text->data : "", 1, k->text->len, stdout);
    fflush(stdout);
    return 0;
}

static int greedy_run(struct gen_src *g, struct greedy_sink *k, long long n_predict)
{
    enum { CHUNK = 1024 };   /* picks a call: each call's last pick feeds the next call */
    int32_t picks[CHUNK], id = 0;
    if (n_predict < 1 || glim_session_pos(g->s) >= glim_session_n_ctx(g->s))
        return GLIM_OK;
    int rc = sampler_sample(g->smp, g->logits, g->V, &id, k->err);   /* the first: from the prefill */
    if (rc != GLIM_OK || greedy_emit(k, id))
        return rc != GLIM_OK ? rc : k->rc;
    while (k->n_gen < n_predict && glim_session_pos(g->s) < glim_session_n_ctx(g->s)) {
        int n = 0, want = (int)GLIM_MIN(n_predict - k->n_gen, (long long)CHUNK);
        long long before = k->n_gen;
        if ((rc = glim_session_greedy(g->s, id, want, picks, greedy_emit, k, &n, k->err)) != GLIM_OK)
            return rc;
        if (k->rc != GLIM_OK || n == 0 || k->n_gen - before < want || tok_is_eog(k->v, picks[n - 1]))
            break;   /* stopped: end of generation, a failure, or the context end */
        id = picks[n - 1];
    }
    return k->rc;
}

static void print_stats(const struct gen_src *g, size_t n_prompt, long long n_gen, double t_prefill, double t_dec)
{
    fprintf(stderr, "prefill %.2f tok/s | decode %.2f tok/s (%lld tokens) | time to first token %.1f ms\n",
            n_prompt / (t_prefill > 0 ? t_prefill : 1e-9), n_gen / (t_dec > 0 ? t_dec : 1e-9), n_gen,
            t_prefill * 1e3);
    if (!g->df)
        return;
    const struct dflash_stats *st = dflash_get_stats(g->df);
    double acc = 0;
    for (int i = 0; i < st->n_rows; i++)
        acc += st->accepts_by_row[i];
    fprintf(stderr, "dflash: mean accepted length %.2f | draft %.1f ms | verify %.1f ms | %.2f tok/s\n",
            st->speculative_cycles ? acc / st->speculative_cycles : 0.0, st->draft_execute_ms,
            st->target_execute_ms, n_gen / (t_dec > 0 ? t_dec : 1e-9));
    dflash_stats_print(st, stderr);
}

static int generate(const struct run_opts *o, struct glim_model *m, const struct tok_vocab *v,
                    const struct tok_ids *prompt, struct glim_err *err)
{
    struct glim_session_params sp;
    glim_session_params_init(&sp);
    int64_t n_need = (int64_t)prompt->n + o->n_predict;
    sp.n_ctx = o->ctx ? o->ctx : GLIM_MIN(glim_model_n_ctx_train(m), GLIM_MAX(n_need, 8192));
    struct gen_src g = {.V = glim_model_n_vocab(m), .first = true};
    struct glim_model *draft = NULL;
    g.logits = glim_model_host_alloc(m, (size_t)g.V * sizeof(float));   /* page-locked on a GPU */
    struct strbuf text;
    strbuf_init(&text);
    int rc = g.logits ? GLIM_OK : glim_fail(err, GLIM_ENOMEM, "out of memory");
    if (rc == GLIM_OK)
        rc = glim_session_new(m, &sp, &g.s, err);
    if (rc == GLIM_OK && o->draft) {
        struct dflash_params dp;
        dflash_params_init(&dp);
        dp.block_length = (int)o->block_length, dp.n_draft = (int)o->n_draft, dp.sp = o->sp;
        rc = glim_draft_load(m, o->draft, &draft, err);
        if (rc == GLIM_OK)
            rc = dflash_new(m, draft, g.s, &dp, &g.df, err);
        if (rc == GLIM_OK)
            dflash_set_eos(g.df, vocab_eog, (void *)v);
    } else if (rc == GLIM_OK) {
        rc = sampler_new(&o->sp, g.V, &g.smp, err);
        for (size_t i = 0; rc == GLIM_OK && i < prompt->n; i++)
            sampler_accept(g.smp, prompt->data[i]);
    }
    if (rc != GLIM_OK)
        goto done;
    fprintf(stderr, "Prompt tokens: %zu\n", prompt->n);
    double t0 = now_s();
    rc = g.df ? dflash_prefill(g.df, prompt->data, (int)prompt->n, err)
              : glim_session_eval(g.s, prompt->data, (int)prompt->n, g.logits, 1, err);
    if (rc != GLIM_OK)
        goto done;
    double t_first = now_s(), t_prefill = t_first - t0;
    struct tok_stream ts;
    tok_stream_init(&ts, v, o->special ? TOK_DECODE_SPECIAL : 0);
    long long n_gen = 0;
    int32_t id = 0;
    bool plain = !g.df && sampler_params_is_plain_greedy(&o->sp);
    if (plain) {
        struct greedy_sink k = {.v = v, .ts = &ts, .text = &text, .err = err};
        rc = greedy_run(&g, &k, o->n_predict);
        n_gen = k.n_gen;
        if (rc != GLIM_OK)
            goto done;
    }
    while (!plain && n_gen < o->n_predict &&
           glim_session_pos(g.s) < glim_session_n_ctx(g.s)) {
        bool eog = false;
        if ((rc = next_token(&g, v, &id, &eog, err)) != GLIM_OK)
            goto done;
        n_gen++;
        if (eog)
            break;
        strbuf_reset(&text);
        if ((rc = tok_stream_feed(&ts, id, &text)) != GLIM_OK)
            goto done;
        fwrite(text.data ? text.data : "", 1, text.len, stdout);
        fflush(stdout);
    }
    strbuf_reset(&text);
    tok_stream_flush(&ts, &text);
    fwrite(text.data ? text.data : "", 1, text.len, stdout);
    fputc('\n', stdout);
    print_stats(&g, prompt->n, n_gen, t_prefill, now_s() - t_first);
done:
    strbuf_clear(&text);
    sampler_free(g.smp);
    dflash_free(g.df);
    glim_model_free(draft);
    glim_session_free(g.s);
    glim_model_host_free(m, g.logits);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o = {0};
    sampler_params_init(&o.sp);
    o.sp.temperature = 0.8f, o.sp.top_k = 40, o.sp.top_p = 0.95f, o.sp.min_p = 0.05f;
    o.n_predict = 128;
    int prc = parse(argc, argv, &o);
    if (prc)
        return prc < 0 ? 0 : prc;
    if (!o.model)
        o.model = cli_default_model();
    char *file_text = NULL;
    size_t file_len = 0;
    if (o.file && !cli_read_file("run", o.file, &file_text, &file_len))
        return 1;
    const char *prompt = o.file ? file_text : o.prompt ? o.prompt : "Once upon a time";

    struct glim_err err = {0};
    struct glim_model_params mp;
    glim_model_params_init(&mp);
    mp.n_threads = (int)o.threads, mp.kernels = o.kernels, mp.device = o.device;
    mp.no_graph = o.no_graph;
    struct glim_model *m = NULL;
    struct tok_vocab *v = NULL;
    struct tok_ids ids;
    tok_ids_init(&ids);
    int rc = glim_model_load(o.model, &mp, &m, &err);
    if (rc == GLIM_OK)
        rc = o.tokenizer ? tok_vocab_from_json(o.tokenizer, &v, &err) : tok_vocab_from_gguf(m->gguf, &v, &err);
    if (rc == GLIM_OK && tok_n_vocab(v) > glim_model_n_vocab(m))
        rc = glim_fail(&err, GLIM_EINVAL, "tokenizer has %d tokens, the model only %d", tok_n_vocab(v),
                       glim_model_n_vocab(m));
    if (rc == GLIM_OK)
        rc = build_prompt(&o, m, v, prompt, &ids, &err);
    if (rc == GLIM_OK && ids.n == 0)
        rc = glim_fail(&err, GLIM_EINVAL, "the prompt is empty");
    if (rc == GLIM_OK)
        rc = generate(&o, m, v, &ids, &err);
    if (rc != GLIM_OK)
        fprintf(stderr, "glim run: %s\n", err.msg);
    tok_ids_clear(&ids);
    tok_vocab_free(v);
    glim_model_free(m);
    free(file_text);
    return rc == GLIM_OK ? 0 : 1;
}
#endif /* GLIM_HAVE_TEXT */
