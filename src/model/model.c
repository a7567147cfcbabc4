/*
 * model.c — load a GGUF model: pick the architecture from
 * general.architecture, create the backend, let the arch read its
 * hyperparameters and bind its tensors (shapes checked against them).
 * Afterwards the model is read-only. Caller's thread.
 */
#include "model.h"

#include <math.h>
#include <string.h>

#include "../base/alloc.h"
#include "../quant/quant.h"


static const struct arch_ops *const ARCHES[] = {&arch_muse_glimmer, &arch_llama};

void glim_model_params_init(struct glim_model_params *p)
{
    memset(p, 0, sizeof *p);
}

const struct gguf_tensor *model_tensor(const struct glim_model *m, const char *name)
{
    return gguf_tensor_find(m->gguf, name);
}

static const char *TYPES_WE_RUN = "F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q5_K/Q6_K";

int model_bind(struct glim_model *m, struct be_weight *w, const char *name, int64_t k, int64_t n,
               bool required, struct glim_err *err)
{
    const struct gguf_tensor *t = model_tensor(m, name);
    memset(w, 0, sizeof *w);
    if (!t) {
        if (!required)
            return GLIM_OK;
        return glim_fail(err, GLIM_EFORMAT, "%s: required tensor '%s' is missing",
                         gguf_path(m->gguf), name);
    }
    if (!quant_type_computable(t->type))
        return glim_fail(err, GLIM_EUNSUPPORTED, "tensor '%s': expected type %s, got %s", name,
                         TYPES_WE_RUN, quant_type_name(t->type));
    bool ok = n == 0 ? (t->ne[0] == k && t->n_elems == k)
                     : (t->ne[0] == k && t->ne[1] == n && t->n_elems == k * n);
    if (!ok) {
        if (n == 0)
            return glim_fail(err, GLIM_EFORMAT,
                             "tensor '%s': expected shape [%lld] from the metadata, got [%lld, %lld]",
                             name, (long long)k, (long long)t->ne[0], (long long)t->ne[1]);
        return glim_fail(err, GLIM_EFORMAT,
                         "tensor '%s': expected shape [%lld, %lld] from the metadata, got [%lld, %lld]",
                         name, (long long)k, (long long)n, (long long)t->ne[0], (long long)t->ne[1]);
    }
    if (n == 0 && t->type != GLIM_TYPE_F32)
        return glim_fail(err, GLIM_EUNSUPPORTED, "tensor '%s': expected a F32 vector, got %s", name,
                         quant_type_name(t->type));
    w->name = t->name;
    w->type = t->type;
    w->k = k;
    w->n = n == 0 ? 1 : n;
    w->nbytes = t->nbytes;
    w->host = t->data;
    int rc = m->be->i->weight_init(m->be, w, err);
    if (rc != GLIM_OK)
        return glim_err_prefix(err, "tensor '%s'", name);
    m->weight_bytes += t->nbytes;
    return GLIM_OK;
}

int model_bind_blk(struct glim_model *m, int il, const struct blk_tensor *t, int n_t, bool required,
                   struct glim_err *err)
{
    char name[96];
    for (int i = 0; i < n_t; i++) {
        struct be_weight *w = (struct be_weight *)((char *)&m->layers[il] + t[i].field);
        snprintf(name, sizeof name, "blk.%d.%s.weight", il, t[i].suffix);
        int rc = model_bind(m, w, name, t[i].k, t[i].n, required, err);
        if (rc != GLIM_OK)
            return rc;
    }
    return GLIM_OK;
}

static int key_fail(const struct glim_model *m, const char *key, struct glim_err *err)
{
    return glim_fail(err, GLIM_EFORMAT, "%s: required metadata key '%s' is missing",
                     gguf_path(m->gguf), key);
}

int model_get_u32(const struct glim_model *m, const char *suffix, uint32_t *out, bool required,
                  struct glim_err *err)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", m->hp.arch, suffix);
    int rc = gguf_get_u32(m->gguf, key, out, err);
    if (rc == GLIM_ENOTFOUND)
        return required ? key_fail(m, key, err) : GLIM_OK;
    return rc;
}

int model_get_f32(const struct glim_model *m, const char *suffix, float *out, bool required,
                  struct glim_err *err)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", m->hp.arch, suffix);
    int rc = gguf_get_f32(m->gguf, key, out, err);
    if (rc == GLIM_ENOTFOUND)
        return required ? key_fail(m, key, err) : GLIM_OK;
    return rc;
}

static int make_backend(const struct glim_model_params *p, struct backend **be, struct glim_err *err)
{
    const char *dev = p->device;
    if (!dev || !*dev)
        dev = backend_cuda_available() ? "cuda" : "cpu";
    if (!strcmp(dev, "cuda")) {
        int rc = backend_cuda_new(0, be, err);
        if (rc == GLIM_OK && p->kernels == GLIM_KERNELS_REF)
            backend_cuda_set_exact(*be, true);   /* exact dequant, f32 activations */
        return rc;
    }
    if (strcmp(dev, "cpu"))
        return glim_fail(err, GLIM_EINVAL, "--device: expected cpu or cuda, got '%s'", dev);
    if (p->kernels == GLIM_KERNELS_REF)
        return backend_cpu_ref_new(p->n_threads, be, err);
    return backend_cpu_new(p->n_threads, be, err);
}

static void free_weight(struct glim_model *m, struct be_weight *w)
{
    if (w->host && m->be)
        m->be->i->weight_clear(m->be, w);
}

void glim_model_free(struct glim_model *m)
{
    if (!m)
        return;
    if (m->layers) {
        for (int l = 0; l < m->hp.n_layer; l++) {
            struct be_weight *w = (struct be_weight *)&m->layers[l];
            for (size_t i = 0; i < sizeof m->layers[l] / sizeof *w; i++)
                free_weight(m, &w[i]);
        }
    }
    if (!m->target || m->owns_embd)
        free_weight(m, &m->tok_embd);
    free_weight(m, &m->output_norm);
    if (m->output.host != m->tok_embd.host && (!m->target || m->owns_output))
        free_weight(m, &m->output);
    free_weight(m, &m->fc);
    free_weight(m, &m->enc_norm);
    glim_free(m->layers);
    if (!m->target)
        backend_free(m->be);   /* a draft borrows its target's */
    gguf_close(m->gguf);
    glim_free(m);
}

int glim_model_load(const char *path, const struct glim_model_params *p, struct glim_model **out,
                    struct glim_err *err)
{
    struct glim_model_params defaults;
    if (!p) {
        glim_model_params_init(&defaults);
        p = &defaults;
    }
    struct glim_model *m = glim_calloc(1, sizeof *m);
    if (!m)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    m->verbose = p->verbose;
    m->no_graph = p->no_graph;
    int rc = gguf_open(path, &m->gguf, err);
    if (rc != GLIM_OK)
        goto fail;
    const char *arch;
    size_t arch_len;
    rc = gguf_get_str(m->gguf, "general.architecture", &arch, &arch_len, err);
    if (rc == GLIM_ENOTFOUND)
        rc = glim_fail(err, GLIM_EFORMAT, "%s: metadata key 'general.architecture' is missing", path);
    if (rc != GLIM_OK)
        goto fail;
    if (arch_len >= sizeof m->hp.arch) {
        rc = glim_fail(err, GLIM_EUNSUPPORTED, "%s: architecture name too long", path);
        goto fail;
    }
    memcpy(m->hp.arch, arch, arch_len);
    m->hp.arch[arch_len] = '\0';
    for (size_t i = 0; i < sizeof ARCHES / sizeof ARCHES[0]; i++) {
        const char *n = ARCHES[i]->name;
        /* upstream fixtures spell it muse_glimmer; treat both alike (model.md §3.4) */
        if (!strcmp(n, m->hp.arch) || (!strcmp(n, "muse-glimmer") && !strcmp(m->hp.arch, "muse_glimmer")))
            m->arch = ARCHES[i];
    }
    if (!m->arch && !strcmp(m->hp.arch, "dflash")) {
        rc = glim_fail(err, GLIM_EUNSUPPORTED, "%s: a dflash file is a draft model: pass it with --draft "
                       "next to its target", path);
        goto fail;
    }
    if (!m->arch) {
        rc = glim_fail(err, GLIM_EUNSUPPORTED,
                       "%s: general.architecture: expected muse-glimmer or llama, got '%s'", path,
                       m->hp.arch);
        goto fail;
    }
    rc = make_backend(p, &m->be, err);
    if (rc != GLIM_OK)
        goto fail;
    rc = m->arch->load_hparams(m, err);
    if (rc == GLIM_OK)
        rc = m->arch->load_tensors(m, err);
    if (rc != GLIM_OK) {
        if (err && !strstr(err->msg, path))
            glim_err_prefix(err, "%s", path);
        goto fail;
    }
    *out = m;
    return GLIM_OK;
fail:
    glim_model_free(m);
    return rc;
}

int glim_draft_load(struct glim_model *target, const char *path, struct glim_model **out,
                    struct glim_err *err)
{
    struct glim_model *d = glim_calloc(1, sizeof *d);
    if (!d)
        return glim_fail(err, GLIM_ENOMEM, "out of memory");
    d->target = target;
    d->be = target->be;
    d->verbose = target->verbose;
    d->arch = &arch_dflash;
    int rc = gguf_open(path, &d->gguf, err);
    const char *arch = NULL;
    size_t n = 0;
    if (rc == GLIM_OK)
        rc = gguf_get_str(d->gguf, "general.architecture", &arch, &n, err);
    if (rc == GLIM_OK && (n != 6 || memcmp(arch, "dflash", 6)))
        rc = glim_fail(err, GLIM_EUNSUPPORTED, "%s: general.architecture: expected dflash, got '%.*s'",
                       path, (int)GLIM_MIN(n, 64), arch);
    else if (rc == GLIM_ENOTFOUND)
        rc = glim_fail(err, GLIM_EFORMAT, "%s: metadata key 'general.architecture' is missing", path);
    if (rc == GLIM_OK) {
        strcpy(d->hp.arch, "dflash");
        rc = d->arch->load_hparams(d, err);
    }
    if (rc == GLIM_OK)
        rc = d->arch->load_tensors(d, err);
    if (rc != GLIM_OK) {
        if (err && !strstr(err->msg, path))
            glim_err_prefix(err, "%s", path);
        glim_model_free(d);
        return rc;
    }
    *out = d;
    return GLIM_OK;
}

void *glim_model_host_alloc(struct glim_model *m, size_t nbytes)
{
    struct backend *be = m->be;
    return be && be->i->host_alloc ? be->i->host_alloc(be, nbytes) : malloc(nbytes ? nbytes : 1);
}

void glim_model_host_free(struct glim_model *m, void *p)
{
    struct backend *be = m->be;
    if (be && be->i->host_free)
        be->i->host_free(be, p);
    else
        free(p);
}

int32_t glim_model_n_vocab(const struct glim_model *m) { return m->hp.n_vocab; }
int32_t glim_model_n_embd(const struct glim_model *m) { return m->hp.n_embd; }
int32_t glim_model_n_layer(const struct glim_model *m) { return m->hp.n_layer; }
int64_t glim_model_n_ctx_train(const struct glim_model *m) { return m->hp.n_ctx_train; }
const char *glim_model_arch(const struct glim_model *m) { return m->hp.arch; }
