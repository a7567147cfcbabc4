/*
 * cmd_mkmodel.c — `glim mkmodel`: write a synthetic GGUF of any size with
 * seeded random weights (src/synth/), for benchmarks and loader tests.
 *
 * --preset muse-glimmer-30b gives the real 30B shapes and the published
 * Q4_K_M mix (model.md §3.3); flags after it override single values.
 * --preset dflash-muse-glimmer-30b gives its DFlash drafter (runtime.md §1.1);
 * --like TARGET.gguf shapes a random drafter for any target (like_target).
 * --dry-run prints the tensor table and totals without writing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "synth/synth.h"

#define CMD "mkmodel"
#define LLAMA4_VOCAB "vocab/ggml-vocab-llama4.gguf"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: glim mkmodel [--preset NAME | --arch ARCH] [options] -o FILE\n"
            "       glim mkmodel --arch dflash --like TARGET.gguf [options] -o FILE\n\n"
            "Write a GGUF with seeded random weights, shaped as llama.cpp's loader expects.\n\n"
            "  --preset NAME      muse-glimmer-30b: the real 30B shapes, Q4_K_M mix, llama4 vocab\n"
            "                     dflash-muse-glimmer-30b: its DFlash drafter (5 layers, 32/8 heads,\n"
            "                     ffn 19968, taps 2,14,26,38,50, block 16, mask 201818), Q4_K, llama4 vocab\n"
            "  --arch ARCH        muse-glimmer | llama | dflash (default muse-glimmer)\n"
            "  --dim N            embedding width (n_embd)\n"
            "  --layers N         block count\n"
            "  --heads N          query heads;  --kv-heads N  key/value heads\n"
            "  --head-dim N       per-head width (default dim / heads, 128 in the preset)\n"
            "  --ffn N            feed-forward width\n"
            "  --window N         sliding window (muse-glimmer; dflash: default none, N > 0 makes\n"
            "                     every layer but the last sliding)\n"
            "  --swa-period N     layer i is global iff i %% N == N-1 (default 4: 3 sliding + 1 global;\n"
            "                     dflash: the number of layers)\n"
            "  --vocab V          llama4 (copy the Llama 4 tokenizer, 202048 tokens), FILE.gguf (copy\n"
            "                     its tokenizer.* keys), or a number N (no tokenizer, N token ids)\n"
            "  --type T           %s (default F32; preset Q4_K_M)\n"
            "  --ctx N            context_length written to the file\n"
            "  --rope-base F  --eps F  --logit-scale F  --softcap F  --q-norm F   (0 q-norm = 43.784/sqrt(head_dim))\n"
            "  --name S           general.name\n"
            "  --seed S           RNG seed (default 1)\n\n"
            "DFlash drafters (--arch dflash; no token_embd/output: the target's are used):\n"
            "  --like FILE.gguf   shape the drafter for this target: dim = its embedding_length, its\n"
            "                     heads, head_dim and ffn, kv-heads = the largest divisor of heads <= heads/4,\n"
            "                     5 layers, its context_length, its tokenizer.* keys, its matrix type\n"
            "                     (blk.0.ffn_up; F16 if not a plain type) unless --type\n"
            "  --target-layers L,L,...  stored tap ids (HF target_layer_ids + 1: the tapped layer's\n"
            "                     INPUT). Default for a target of L layers: n = min(5, L-1) taps\n"
            "                     round((k+0.5)*L/n), k = 0..n-1, clamped to 1..L-1\n"
            "  --block-size B     dflash.block_size, 2..64 (default 16)\n"
            "  --mask-token ID    tokenizer.ggml.mask_token_id (default: the target's, else its last id)\n"
            "\n"
            "  -t, --threads N    generator threads (default: online CPUs)\n"
            "  --unique-rows N    generate N rows per matrix and repeat them (benchmark files: same\n"
            "                     size and quant mix, written in seconds; default: every row its own)\n"
            "  -o, --output FILE  where to write (written atomically)\n"
            "  --dry-run          print the tensor table and total bytes; write nothing\n"
            "  -q, --quiet        no progress bar\n"
            "  -h, --help         this help\n\n"
            "Weights: norms 1 + 0.1*N(0,1), matrices N(0,1)/sqrt(fan_in), token_embd N(0,1)/sqrt(dim),\n"
            "output scaled so logits have a spread of about 3 before the soft-cap.\n",
            synth_ftype_names());
}

struct opts {
    struct synth_hparams hp;
    const struct synth_ftype *ft;
    const char *vocab;      /* NULL = no_vocab with hp.n_vocab ids */
    const char *like;       /* dflash: the target GGUF (also the vocab unless --vocab) */
    const char *out;
    unsigned long long seed;
    int  n_threads;
    int  unique_rows;       /* 0 = every row generated */
    int  like_embd;         /* the target's embedding_length (--like) */
    bool dry_run, quiet, head_dim_set;
    bool mask_auto;         /* dflash: mask id from the vocab (its mask token, else its last id) */
};

/* Resolve "llama4" to the shared test data's vocab file; NULL if not found. */
static const char *llama4_path(char *buf, size_t n)
{
    struct stat st;
    const char *td = getenv("GLIM_TESTDATA");
    if (td && snprintf(buf, n, "%s/%s", td, LLAMA4_VOCAB) < (int)n && stat(buf, &st) == 0)
        return buf;
    /* <repo>/models/stories260K.gguf -> <repo>/../shared/testdata (as CMake's GLIM_TESTDATA) */
    const char *m = cli_default_model(), *slash = strrchr(m, '/');
    int dir = slash ? (int)(slash - m) : 0;
    if (snprintf(buf, n, "%.*s/../../shared/testdata/%s", dir, m, LLAMA4_VOCAB) < (int)n && stat(buf, &st) == 0)
        return buf;
    return NULL;
}

/* --like: a random drafter shaped for this target (synth_dflash_like; rules in usage) */
static int like_target(struct opts *o, const char *path)
{
    struct glim_err err = {0};
    struct gguf_file *f = NULL;
    uint32_t type = 0;
    int rc = gguf_open(path, &f, &err);
    if (!rc)
        rc = synth_dflash_like(f, &o->hp, &type, &err);
    gguf_close(f);
    if (rc) {
        fprintf(stderr, "glim " CMD ": --like: %s\n", err.msg);
        return rc == GLIM_EINVAL ? 2 : 1;
    }
    const struct synth_ftype *ft = synth_ftype_for_type(type);
    o->ft = ft ? ft : synth_ftype_find("F16");
    o->like_embd = o->hp.n_embd;
    o->head_dim_set = true;
    o->vocab = path;
    return 0;
}

static const char *flag_value(int argc, char **argv, const char *flag)
{
    const char *v = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], flag))
            v = argv[i + 1];
    return v;
}

/* first pass: --preset / --arch / --like pick the defaults every other flag overrides */
static int parse_base(int argc, char **argv, struct opts *o)
{
    const char *preset = flag_value(argc, argv, "--preset"), *arch = flag_value(argc, argv, "--arch");
    o->like = flag_value(argc, argv, "--like");
    int a = arch ? synth_arch_from_name(arch) : o->like ? SYNTH_ARCH_DFLASH : SYNTH_ARCH_MUSE_GLIMMER;
    if (a < 0) {
        fprintf(stderr, "glim " CMD ": --arch: expected muse-glimmer, llama or dflash, got '%s'\n", arch);
        return 2;
    }
    if (o->like && (preset || a != SYNTH_ARCH_DFLASH)) {
        fprintf(stderr, "glim " CMD ": --like makes a dflash drafter: it takes no --preset or other --arch\n");
        return 2;
    }
    synth_hparams_default((enum synth_arch)a, &o->hp);
    o->ft = synth_ftype_find("F32");
    o->mask_auto = a == SYNTH_ARCH_DFLASH;
    if (o->like)
        return like_target(o, o->like);
    if (preset) {
        struct glim_err err = {0};
        if (synth_preset(preset, &o->hp, &err)) {
            fprintf(stderr, "glim " CMD ": %s\n", err.msg);
            return 2;
        }
        bool draft = o->hp.arch == SYNTH_ARCH_DFLASH;
        o->ft = synth_ftype_find(draft ? "Q4_K" : "Q4_K_M");   /* runtime.md §1.1: Q4_K drafter */
        o->vocab = "llama4";
        o->head_dim_set = true;
        o->mask_auto = false;
        if (arch && a != (int)o->hp.arch) {
            fprintf(stderr, "glim " CMD ": --arch %s contradicts --preset %s\n", arch, preset);
            return 2;
        }
    }
    return 0;
}

/* --target-layers 2,14,26: 1..SYNTH_MAX_TAPS ids */
static bool taps_flag(const char *flag, const char *v, struct synth_hparams *hp)
{
    int n = 0;
    for (const char *p = v; *p;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 0 || x > (1 << 24) || n == SYNTH_MAX_TAPS || (*end && *end != ',')) {
            fprintf(stderr, "glim " CMD ": %s: expected 1..%d comma-separated layer ids, got '%s'\n", flag,
                    SYNTH_MAX_TAPS, v);
            return false;
        }
        hp->target_layers[n++] = (int)x;
        p = *end ? end + 1 : end;
    }
    hp->n_taps = n;
    if (!n)
        fprintf(stderr, "glim " CMD ": %s: expected at least one layer id\n", flag);
    return n > 0;
}

static bool int_flag(const char *flag, const char *v, int *out)
{
    long long x;
    if (!cli_int(CMD, flag, v, 1, 1 << 24, &x))
        return false;
    *out = (int)x;
    return true;
}

static bool float_flag(const char *flag, const char *v, double lo, float *out)
{
    double x;
    if (!cli_float(CMD, flag, v, lo, 1e30, &x))
        return false;
    *out = (float)x;
    return true;
}

/* one flag that takes a value; false = bad value (message printed) */
static bool parse_value(struct opts *o, const char *f, const char *v)
{
    struct synth_hparams *hp = &o->hp;
    long long x;
    if (!strcmp(f, "--dim")) return int_flag(f, v, &hp->n_embd);
    if (!strcmp(f, "--layers")) return int_flag(f, v, &hp->n_layer);
    if (!strcmp(f, "--heads")) return int_flag(f, v, &hp->n_head);
    if (!strcmp(f, "--kv-heads")) return int_flag(f, v, &hp->n_head_kv);
    if (!strcmp(f, "--head-dim")) return (o->head_dim_set = true), int_flag(f, v, &hp->head_dim);
    if (!strcmp(f, "--ffn")) return int_flag(f, v, &hp->n_ff);
    if (!strcmp(f, "--window")) return int_flag(f, v, &hp->n_swa);
    if (!strcmp(f, "--block-size")) return int_flag(f, v, &hp->block_size);
    if (!strcmp(f, "--target-layers")) return taps_flag(f, v, hp);
    if (!strcmp(f, "--mask-token")) {
        if (!cli_int(CMD, f, v, 0, INT32_MAX, &x))
            return false;
        hp->mask_token_id = (int32_t)x;
        o->mask_auto = false;
        return true;
    }
    if (!strcmp(f, "--swa-period")) return int_flag(f, v, &hp->swa_period);
    if (!strcmp(f, "--rope-base")) return float_flag(f, v, 1e-3, &hp->rope_base);
    if (!strcmp(f, "--eps")) return float_flag(f, v, 1e-30, &hp->eps);
    if (!strcmp(f, "--logit-scale")) return float_flag(f, v, 1e-6, &hp->logit_scale);
    if (!strcmp(f, "--softcap")) return float_flag(f, v, 0, &hp->softcap);
    if (!strcmp(f, "--q-norm")) return float_flag(f, v, 0, &hp->q_norm);
    if (!strcmp(f, "--name")) return snprintf(hp->name, sizeof hp->name, "%s", v), true;
    if (!strcmp(f, "--ctx")) {
        if (!cli_int(CMD, f, v, 1, 1 << 24, &x))
            return false;
        hp->n_ctx = x;
        return true;
    }
    if (!strcmp(f, "--seed")) {
        if (!cli_int(CMD, f, v, 0, INT64_MAX, &x))
            return false;
        o->seed = (unsigned long long)x;
        return true;
    }
    if (!strcmp(f, "-t") || !strcmp(f, "--threads")) return int_flag(f, v, &o->n_threads);
    if (!strcmp(f, "--unique-rows")) return int_flag(f, v, &o->unique_rows);
    if (!strcmp(f, "-o") || !strcmp(f, "--output")) return (o->out = v), true;
    if (!strcmp(f, "--preset") || !strcmp(f, "--arch") || !strcmp(f, "--like"))
        return true;   /* parse_base took them */
    if (!strcmp(f, "--type")) {
        if (!(o->ft = synth_ftype_find(v)))
            fprintf(stderr, "glim " CMD ": --type: expected %s, got '%s'\n", synth_ftype_names(), v);
        return o->ft != NULL;
    }
    if (!strcmp(f, "--vocab")) {
        char *end;
        long long n = strtoll(v, &end, 10);
        o->vocab = v;
        if (*v && !*end) {   /* a plain number: no tokenizer */
            o->vocab = NULL;
            return cli_int(CMD, f, v, 1, 1 << 24, &n) && (hp->n_vocab = (int)n, true);
        }
        return true;
    }
    fprintf(stderr, "glim " CMD ": unknown option '%s' (see glim " CMD " --help)\n", f);
    return false;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    int rc = parse_base(argc, argv, o);
    if (rc)
        return rc;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(f, "--dry-run")) {
            o->dry_run = true;
            continue;
        }
        if (!strcmp(f, "-q") || !strcmp(f, "--quiet")) {
            o->quiet = true;
            continue;
        }
        const char *v = cli_value(CMD, argc, argv, &i);
        if (!v || !parse_value(o, f, v))
            return 2;
    }
    if (!o->head_dim_set)
        o->hp.head_dim = o->hp.n_embd / o->hp.n_head;
    if (o->like && o->hp.n_embd != o->like_embd) {
        fprintf(stderr, "glim " CMD ": --dim %d: a drafter's width must equal the target's embedding_length %d\n",
                o->hp.n_embd, o->like_embd);
        return 2;
    }
    if (!o->out && !o->dry_run) {
        fprintf(stderr, "glim " CMD ": -o FILE is required (or --dry-run)\n");
        return 2;
    }
    if (o->n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->n_threads = n > 0 ? (int)n : 1;
    }
    return 0;
}

/* Open the vocab GGUF (if any) and take n_vocab from its token count. */
static int open_vocab(struct opts *o, struct gguf_file **vf)
{
    *vf = NULL;
    if (!o->vocab)
        return 0;
    char buf[4096];
    const char *path = o->vocab;
    if (!strcmp(path, "llama4") && !(path = llama4_path(buf, sizeof buf))) {
        fprintf(stderr, "glim " CMD ": --vocab llama4: %s not found (set GLIM_TESTDATA, or pass "
                        "--vocab FILE.gguf or --vocab 202048 for no tokenizer)\n", LLAMA4_VOCAB);
        return 1;
    }
    struct glim_err err = {0};
    if (gguf_open(path, vf, &err)) {
        fprintf(stderr, "glim " CMD ": --vocab: %s\n", err.msg);
        return 1;
    }
    if (o->like && o->vocab == o->like)
        return 0;   /* the target: any tokenizer (no_vocab too), vocab size read by like_target */
    const struct gguf_kv *toks = gguf_kv_find(*vf, "tokenizer.ggml.tokens");
    if (!toks || toks->type != GGUF_VT_ARRAY || toks->arr_n == 0 || toks->arr_n > (1u << 24)) {
        fprintf(stderr, "glim " CMD ": --vocab %s: no usable tokenizer.ggml.tokens array\n", path);
        return 1;
    }
    o->hp.n_vocab = (int)toks->arr_n;
    return 0;
}

/* dflash: the vocabulary's own mask token if it has one, else its last id */
static void pick_mask(struct opts *o, const struct gguf_file *vocab)
{
    uint32_t id;
    if (!o->mask_auto)
        return;
    if (vocab && gguf_get_u32(vocab, "tokenizer.ggml.mask_token_id", &id, NULL) == GLIM_OK)
        o->hp.mask_token_id = (int32_t)GLIM_MIN(id, (uint32_t)INT32_MAX);
    else
        o->hp.mask_token_id = o->hp.n_vocab - 1;
}

static void print_plan(const struct opts *o, const struct synth_plan *p)
{
    const struct synth_hparams *hp = &o->hp;
    printf("%s: %s, dim %d, %d layers, %d/%d heads x %d, ffn %d, vocab %d, ctx %lld, type %s\n",
           hp->name, synth_arch_name(hp->arch), hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv,
           hp->head_dim, hp->n_ff, hp->n_vocab, (long long)hp->n_ctx, o->ft->name);
    if (hp->arch == SYNTH_ARCH_DFLASH) {
        printf("dflash: block_size %d, mask_token_id %d, window %d, target_layers", hp->block_size,
               (int)hp->mask_token_id, hp->n_swa);
        for (int k = 0; k < hp->n_taps; k++)
            printf("%s%d", k ? "," : " ", hp->target_layers[k]);
        printf("\n");
    }
    printf("%-40s %-6s %-18s %14s\n", "tensor", "type", "shape", "bytes");
    for (int i = 0; i < p->n; i++) {
        const struct synth_tensor *t = &p->t[i];
        char shape[48];
        if (t->n_dims == 1)
            snprintf(shape, sizeof shape, "[%lld]", (long long)t->ne[0]);
        else
            snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)t->ne[0], (long long)t->ne[1]);
        printf("%-40s %-6s %-18s %14zu\n", t->name, quant_type_name(t->type), shape, t->nbytes);
    }
    printf("total: %d tensors, %lld params, %zu bytes (%.2f GB, %.2f GiB)\n", p->n, (long long)p->n_params,
           p->total_bytes, (double)p->total_bytes / 1e9, (double)p->total_bytes / (1u << 30));
}

struct progress {
    double t0, last;
    bool   on;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress_cb(void *ud, int64_t done, int64_t total)
{
    struct progress *pr = ud;
    double t = now_s();
    if (!pr->on || (done < total && t - pr->last < 0.1))
        return;
    pr->last = t;
    int width = 30, fill = total ? (int)(width * done / total) : width;
    fprintf(stderr, "\rmkmodel [%.*s%*s] %3d%%  %.2f / %.2f GB  %.0f MB/s ", fill,
            "##############################", width - fill, "", total ? (int)(100 * done / total) : 100,
            (double)done / 1e9, (double)total / 1e9, (double)done / 1e6 / GLIM_MAX(t - pr->t0, 1e-9));
    if (done == total)
        fputc('\n', stderr);
}

int cmd_mkmodel(int argc, char **argv)
{
    struct opts o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    struct gguf_file *vocab = NULL;
    if ((rc = open_vocab(&o, &vocab)))
        return rc;
    pick_mask(&o, vocab);
    struct synth_plan plan = {0};
    struct glim_err err = {0};
    if (synth_plan_build(&o.hp, o.ft, &plan, &err)) {
        fprintf(stderr, "glim " CMD ": %s\n", err.msg);
        gguf_close(vocab);
        return err.code == GLIM_EINVAL ? 2 : 1;
    }
    if (o.dry_run) {
        print_plan(&o, &plan);
    } else {
        struct progress pr = {.t0 = now_s(), .on = !o.quiet && isatty(2)};
        struct synth_write_opts wo = {.seed = o.seed, .n_threads = o.n_threads, .unique_rows = o.unique_rows,
                                      .vocab = vocab, .progress = progress_cb, .progress_ud = &pr};
        if (synth_write(o.out, &o.hp, o.ft, &plan, &wo, &err)) {
            fprintf(stderr, "glim " CMD ": %s\n", err.msg);
            rc = 1;
        } else {
            printf("wrote %s: %s %s, %d tensors, %lld params, %zu tensor bytes in %.1f s\n", o.out,
                   synth_arch_name(o.hp.arch), o.ft->name, plan.n, (long long)plan.n_params,
                   plan.total_bytes, now_s() - pr.t0);
        }
    }
    synth_plan_clear(&plan);
    gguf_close(vocab);
    return rc;
}
