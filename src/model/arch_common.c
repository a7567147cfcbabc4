/* arch_common.c — what the llama and muse-glimmer forwards share (see arch_common.h). */
#include "arch_common.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "../base/alloc.h"
#include "../quant/quant.h"
#include "../runtime/sampler.h"

static size_t carve(char *base, size_t *off, size_t nbytes, void **out)
{
    size_t at = (*off + 63) & ~(size_t)63;
    if (base)
        *out = base + at;
    *off = at + nbytes;
    return *off;
}

size_t arch_scratch_layout(const struct glim_model *m, int T, void *base, struct fwd_scratch *s)
{
    const struct model_hparams *hp = &m->hp;
    size_t E = hp->n_embd, QD = (size_t)hp->n_head * hp->head_dim,
           KD = (size_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff, f = sizeof(float);
    size_t off = 0;
    struct fwd_scratch tmp;
    if (!s)
        s = &tmp;
    char *b = base;
    carve(b, &off, T * E * f, (void **)&s->x);
    carve(b, &off, T * E * f, (void **)&s->h);
    carve(b, &off, T * QD * f, (void **)&s->q);
    carve(b, &off, T * QD * f, (void **)&s->g);
    carve(b, &off, T * QD * f, (void **)&s->a);
    carve(b, &off, T * KD * f, (void **)&s->k);
    carve(b, &off, T * KD * f, (void **)&s->v);
    carve(b, &off, T * E * f, (void **)&s->o);
    carve(b, &off, T * F * f, (void **)&s->f1);
    carve(b, &off, T * F * f, (void **)&s->f2);
    carve(b, &off, (size_t)ARCH_OUT_ROWS * hp->n_vocab * f, (void **)&s->logits);
    carve(b, &off, T * E * f, (void **)&s->embd);
    carve(b, &off, (size_t)T * (hp->n_rot / 2) * 2 * f, (void **)&s->rope_cs);
    s->cs_made = false;
    /* ids then positions, back to back: a step's inputs go up in one copy (arch_upload_inputs) */
    size_t end = carve(b, &off, 2 * (size_t)T * sizeof(int32_t), (void **)&s->ids);
    if (b)
        s->pos = s->ids + T;
    return end;
}

size_t arch_scratch_bytes(const struct glim_model *m, int n_tokens)
{
    return arch_scratch_layout(m, n_tokens, NULL, NULL);
}

int arch_upload_inputs(struct glim_model *m, const struct fwd_batch *b, struct fwd_scratch *s,
                       struct glim_err *err)
{
    enum { SMALL = 128 };   /* a decode or verify step: ids and positions in one copy */
    int32_t buf[2 * SMALL];
    struct backend *be = m->be;
    int T = b->n_tokens;
    for (int t = 0; t < T; t++) {
        if (b->tokens[t] < 0 || b->tokens[t] >= m->hp.n_vocab)
            return glim_fail(err, GLIM_EINVAL, "token id %d at index %d: expected 0..%d",
                             b->tokens[t], t, m->hp.n_vocab - 1);
    }
    if (T <= SMALL) {   /* s->pos follows s->ids (arch_scratch_layout): each upload waits for its copy */
        memcpy(buf, b->tokens, (size_t)T * sizeof(int32_t));
        for (int t = 0; t < T; t++)
            buf[T + t] = b->pos0 + t;
        return be->i->upload(be, s->ids, buf, 2 * (size_t)T * sizeof(int32_t), err);
    }
    int rc = be->i->upload(be, s->ids, b->tokens, (size_t)T * sizeof(int32_t), err);
    /* positions are uploaded in pieces through the small stack buffer */
    for (int t0 = 0; rc == GLIM_OK && t0 < T; t0 += 2 * SMALL) {
        int n = GLIM_MIN(2 * SMALL, T - t0);
        for (int i = 0; i < n; i++)
            buf[i] = b->pos0 + t0 + i;
        rc = be->i->upload(be, s->pos + t0, buf, (size_t)n * sizeof(int32_t), err);
    }
    return rc;
}

int arch_splice_embd(struct glim_model *m, const struct fwd_batch *b, struct fwd_scratch *s,
                     struct glim_err *err)
{
    if (!b->embd)
        return GLIM_OK;
    struct backend *be = m->be;
    int E = m->hp.n_embd;
    for (int t = 0; t < b->n_tokens; t++) {
        if (b->embd_mask && !b->embd_mask[t])
            continue;
        int rc = be->i->upload(be, s->x + (size_t)t * E, b->embd + (size_t)t * E,
                               (size_t)E * sizeof(float), err);
        if (rc != GLIM_OK)
            return rc;
    }
    return GLIM_OK;
}

bool arch_tapped(const struct fwd_batch *b, int il)
{
    for (int j = 0; j < b->n_taps; j++)
        if (b->tap_layers[j] == il)
            return true;
    return false;
}

int arch_tap(struct glim_model *m, const struct fwd_batch *b, int il, struct fwd_scratch *s,
             struct glim_err *err)
{
    struct backend *be = m->be;
    int E = m->hp.n_embd;
    for (int j = 0; j < b->n_taps; j++) {
        if (b->tap_layers[j] != il)
            continue;
        if (b->taps_on_backend) {   /* in stream order: no sync in the middle of the forward */
            be->i->copy_rows(be, b->taps + (size_t)j * E, (int64_t)b->n_taps * E, s->x, E, b->n_tokens, E);
            continue;
        }
        for (int t = 0; t < b->n_tokens; t++) {
            float *dst = b->taps + ((size_t)t * b->n_taps + j) * E;
            int rc = be->i->download(be, dst, s->x + (size_t)t * E, (size_t)E * sizeof(float), err);
            if (rc != GLIM_OK)
                return rc;
        }
    }
    return GLIM_OK;
}

/* Final norm, lm head and logit scale / soft-cap for rows [r0, r0+n) into s->logits. */
static void arch_head(struct glim_model *m, struct fwd_scratch *s, int r0, int n)
{
    const struct model_hparams *hp = &m->hp;
    struct backend *be = m->be;
    int E = hp->n_embd;
    be->i->rmsnorm(be, s->h, s->x + (size_t)r0 * E, &m->output_norm, n, E, hp->eps);
    be->i->matmul(be, s->logits, &m->output, s->h, n);
    if (hp->logit_scale != 1.0f || hp->softcap > 0)
        be->i->scale_softcap(be, s->logits, (int64_t)n * hp->n_vocab, hp->logit_scale, hp->softcap);
}

/* Rows r0.. (n of them, computed into s->logits) to the batch's outputs at row o: their picks
 * made on the backend when it can (no logits leave it), else their logits (and picks of them). */
static int arch_deliver(struct glim_model *m, const struct fwd_batch *b, struct fwd_scratch *s, int o, int n,
                        struct glim_err *err)
{
    struct backend *be = m->be;
    int V = m->hp.n_vocab;
    if (b->picks && be->i->argmax) {
        be->i->argmax(be, s->ids, s->logits, n, V, NULL);   /* the step's ids are spent by now */
        return be->i->download(be, b->picks + o, s->ids, (size_t)n * sizeof(int32_t), err);
    }
    if (!b->logits)
        return glim_fail(err, GLIM_EINVAL, "forward: picks without a logits buffer on the %s backend", be->i->name);
    float *dst = b->logits + (size_t)o * V;
    int rc = be->i->download(be, dst, s->logits, (size_t)n * V * sizeof(float), err);
    for (int r = 0; rc == GLIM_OK && b->picks && r < n; r++)
        b->picks[o + r] = sampler_argmax(dst + (size_t)r * V, V);
    return rc;
}

int arch_output(struct glim_model *m, const struct fwd_batch *b, struct fwd_scratch *s,
                struct glim_err *err)
{
    int T = b->n_tokens;
    for (int r0 = T - b->n_out; r0 < T; r0 += ARCH_OUT_ROWS) {
        int n = GLIM_MIN(ARCH_OUT_ROWS, T - r0);
        arch_head(m, s, r0, n);
        int rc = arch_deliver(m, b, s, r0 - (T - b->n_out), n, err);
        if (rc != GLIM_OK)
            return rc;
    }
    return GLIM_OK;
}

/* A single-token decode step without taps or image rows is captured once as a
 * backend graph (CUDA graphs) and replayed: the second such call of a session
 * captures, later ones launch. ids/pos were uploaded to fixed device buffers
 * before, so one graph serves every position. */
static bool graphable(const struct glim_model *m, const struct kv_cache *kv, const struct fwd_batch *b)
{
    return b->n_tokens == 1 && b->n_out == 1 && b->n_taps == 0 && !b->embd && !m->no_graph &&
           m->be->i->graph_begin && kv->graph_ok;
}

/* One pass of the body (run or captured): the RoPE table is made again in each */
static int run_body(arch_body_fn body, struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b,
                    struct fwd_scratch *s, struct glim_err *err)
{
    s->cs_made = false;
    return body(m, kv, b, s, err);
}

/* A one-token step's device work: body, head and, for a greedy step, the pick of the next
 * token into the step's own ids (positions + 1), which the next replay reads. */
static int step_ops(arch_body_fn body, struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b,
                    struct fwd_scratch *s, bool greedy, struct glim_err *err)
{
    int rc = run_body(body, m, kv, b, s, err);
    if (rc != GLIM_OK)
        return rc;
    arch_head(m, s, 0, 1);
    if (greedy)
        m->be->i->argmax(m->be, s->ids, s->logits, 1, m->hp.n_vocab, s->pos);
    return GLIM_OK;
}

/* step_ops, eagerly for the first such step of a session (*count), captured into the graph of
 * the step's class (graphs[graph_class]) on the first step of it after and replayed after: a
 * capture that fails leaves the session eager. */
static int decode_step(arch_body_fn body, struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b,
                       struct fwd_scratch *s, void **graphs, int64_t *count, bool greedy, struct glim_err *err)
{
    struct backend *be = m->be;
    int rc;
    if (!graphable(m, kv, b) || (*count)++ < 1)
        return step_ops(body, m, kv, b, s, greedy, err);
    int cls = be->i->graph_class ? be->i->graph_class(be, b->pos0) : 0;
    void **graph = &graphs[cls >= 0 && cls < BE_GRAPH_CLASSES ? cls : 0];
    if (!*graph) {
        if ((rc = be->i->graph_begin(be, err)) != GLIM_OK)
            return rc;
        int brc = step_ops(body, m, kv, b, s, greedy, err);
        rc = be->i->graph_end(be, graph, err);   /* always end the capture */
        if (brc != GLIM_OK || rc != GLIM_OK) {
            /* this step cannot be captured: stay eager for the session and run it now */
            kv->graph_ok = false;
            *graph = NULL;
            glim_err_clear(err);
            return step_ops(body, m, kv, b, s, greedy, err);
        }
    }
    return be->i->graph_launch(be, *graph, err);
}

int arch_finish(struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b, struct fwd_scratch *s,
                arch_body_fn body, struct glim_err *err)
{
    if (!graphable(m, kv, b)) {
        int rc = run_body(body, m, kv, b, s, err);
        if (rc != GLIM_OK)
            return rc;
        return b->n_out ? arch_output(m, b, s, err) : GLIM_OK;
    }
    int rc = decode_step(body, m, kv, b, s, kv->graph, &kv->n_decode, false, err);
    return rc != GLIM_OK ? rc : arch_deliver(m, b, s, 0, 1, err);
}

int arch_greedy_step(struct glim_model *m, struct kv_cache *kv, void *scratch, const int32_t *tok, int32_t pos,
                     const int32_t **dev_tok, struct glim_err *err)
{
    if (!m->arch->body || !m->be->i->argmax)
        return glim_fail(err, GLIM_EUNSUPPORTED, "greedy step: the %s arch on the %s backend has no device-side pick",
                         m->arch->name, m->be->i->name);
    struct fwd_scratch s;
    int32_t id = tok ? *tok : 0;
    struct fwd_batch b = {.n_tokens = 1, .tokens = &id, .pos0 = pos, .n_out = 1};
    arch_scratch_layout(m, 1, scratch, &s);
    int rc = tok ? arch_upload_inputs(m, &b, &s, err) : GLIM_OK;
    if (rc != GLIM_OK)
        return rc;
    *dev_tok = s.ids;
    return decode_step(m->arch->body, m, kv, &b, &s, kv->graph_greedy, &kv->n_greedy, true, err);
}

/* ys[i] = x . ws[i]^T for weights that share one input: one backend call when it can. */
static void matmul_n(struct backend *be, int n, float *const *ys, const struct be_weight *const *ws,
                     const float *x, int T)
{
    if (be->i->matmul_n) {
        be->i->matmul_n(be, n, ys, ws, x, T);
        return;
    }
    for (int i = 0; i < n; i++)
        be->i->matmul(be, ys[i], ws[i], x, T);
}

void arch_attend(struct glim_model *m, struct kv_cache *kv, int il, int T, int32_t pos0,
                 struct fwd_scratch *s, const struct attend_opts *o)
{
    const struct model_hparams *hp = &m->hp;
    const struct model_layer *L = &m->layers[il];
    struct backend *be = m->be;
    const struct backend_i *op = be->i;
    int H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim;

    /* q [T][H*D], k and v [T][Hkv*D], and the output gate [T][H*D] when there is one */
    float *ys[4] = {s->q, s->k, s->v, s->g};
    const struct be_weight *ws[4] = {&L->wq, &L->wk, &L->wv, o->gate};
    struct kv_layer *c = &kv->layers[il];
    struct be_attn_prep_args p = {
        .q = s->q, .k = s->k, .v = s->v, .eps = hp->eps,
        /* QK-norm: per head, before RoPE */
        .q_norm = L->q_norm.host ? &L->q_norm : NULL, .k_norm = L->k_norm.host ? &L->k_norm : NULL,
        .rope = o->rope, .neox = o->neox, .n_rot = hp->n_rot, .rope_base = o->rope_base,
        .k_cache = c->k, .v_cache = c->v, .kv_type = kv->type, .n_slots = c->n_slots,
        .n_tokens = T, .pos = s->pos, .n_head = H, .n_head_kv = Hkv, .head_dim = D, .pos_host0 = pos0,
    };
    int n = o->gate ? 4 : 3;
    bool in_attn = op->attention_prep != NULL;   /* the prep goes with attention, not the matmul */
    bool fold = o->pre && op->add_rmsnorm_attn && op->matmul_attn_prep && !in_attn;
    if (o->pre && !fold)   /* (first, as if the previous layer had run it) */
        arch_res_norm(be, o->pre, T);
    if (o->rope && op->rope_table && hp->n_rot >= 2) {   /* the step's angles once, not per layer and head */
        if (!s->cs_made || s->cs_base != o->rope_base) {
            op->rope_table(be, s->rope_cs, s->pos, T, hp->n_rot, o->rope_base);
            s->cs_made = true, s->cs_base = o->rope_base;
        }
        p.rope_cs = s->rope_cs;
    }
    if (fold) {   /* (after the angles, which attn_prep reads; they read nothing the residual writes) */
        op->add_rmsnorm_attn(be, o->pre, n, ys, ws, T, &p);
    } else if (op->matmul_attn_prep && !in_attn) {
        op->matmul_attn_prep(be, n, ys, ws, s->h, T, &p);
    } else {
        matmul_n(be, n, ys, ws, s->h, T);
        if (!in_attn)
            arch_attn_prep(be, &p);
    }
    struct be_attn_args a = {
        .out = s->a, .q = s->q, .k_cache = c->k, .v_cache = c->v, .kv_type = kv->type,
        .n_slots = c->n_slots, .n_tokens = T, .pos = s->pos, .pos_host0 = pos0,
        .n_head = H, .n_head_kv = Hkv, .head_dim = D,
        .window = o->window, .scale = hp->attn_scale, .block = o->block,
    };
    if (in_attn)
        op->attention_prep(be, &p, &a);   /* q and k are not read again */
    else
        op->attention(be, &a);
}

void arch_res_norm(struct backend *be, const struct be_res_norm *r, int T)
{
    const struct backend_i *op = be->i;
    if (r->h && op->add_rmsnorm) {
        op->add_rmsnorm(be, r->x, r->h, r->o, r->w_o, r->eps_o, r->w_h, r->eps_h, T, r->n);
        return;
    }
    op->rmsnorm(be, r->o, r->o, r->w_o, T, r->n, r->eps_o);
    op->add(be, r->x, r->o, (int64_t)T * r->n);
    if (r->h)
        op->rmsnorm(be, r->h, r->x, r->w_h, T, r->n, r->eps_h);
}

void arch_attn_prep(struct backend *be, const struct be_attn_prep_args *p)
{
    const struct backend_i *op = be->i;
    if (op->attn_prep) {
        op->attn_prep(be, p);
        return;
    }
    int T = p->n_tokens, D = p->head_dim;
    if (p->q && p->q_norm)
        op->rmsnorm(be, p->q, p->q, p->q_norm, (int64_t)T * p->n_head, D, p->eps);
    if (p->k_norm)
        op->rmsnorm(be, p->k, p->k, p->k_norm, (int64_t)T * p->n_head_kv, D, p->eps);
    if (p->rope) {
        if (p->q)
            op->rope(be, p->q, T, p->n_head, D, p->n_rot, p->pos, p->rope_base, p->neox);
        op->rope(be, p->k, T, p->n_head_kv, D, p->n_rot, p->pos, p->rope_base, p->neox);
    }
    op->kv_store(be, p->k_cache, p->v_cache, p->kv_type, p->n_slots, p->k, p->v, T, p->pos,
                 p->n_head_kv * D);
}

void arch_ffn(struct glim_model *m, int il, int T, struct fwd_scratch *s)
{
    const struct model_hparams *hp = &m->hp;
    const struct model_layer *L = &m->layers[il];
    struct backend *be = m->be;
    const struct backend_i *op = be->i;

    float *ys[2] = {s->f1, s->f2};
    const struct be_weight *ws[2] = {&L->ffn_gate, &L->ffn_up};
    if (op->matmul_ffn) {   /* the backend may run the whole FFN as one launch */
        const struct be_weight *w3[3] = {&L->ffn_gate, &L->ffn_up, &L->ffn_down};
        op->matmul_ffn(be, s->o, ys, w3, s->h, T, BE_GLU_SILU);
        return;
    }
    if (op->matmul_glu) {   /* SwiGLU folded into the down projection's input */
        if (op->matmul_pair_glu)
            op->matmul_pair_glu(be, ys, ws, s->h, T, BE_GLU_SILU);
        else
            matmul_n(be, 2, ys, ws, s->h, T);
        op->matmul_glu(be, s->o, &L->ffn_down, s->f2, s->f1, BE_GLU_SILU, T);
        return;
    }
    matmul_n(be, 2, ys, ws, s->h, T);
    op->swiglu(be, s->f1, s->f1, s->f2, (int64_t)T * hp->n_ff);
    op->matmul(be, s->o, &L->ffn_down, s->f1, T);
}

/* ---- loading ---------------------------------------------------------- */

static int need_pos(const struct glim_model *m, const char *what, uint32_t v, uint32_t max,
                    struct glim_err *err)
{
    if (v == 0 || v > max)
        return glim_fail(err, GLIM_EFORMAT, "%s.%s: expected 1..%u, got %u", m->hp.arch, what, max, v);
    return GLIM_OK;
}

int arch_read_common(struct glim_model *m, struct glim_err *err)
{
    struct model_hparams *hp = &m->hp;
    uint32_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0;
    uint32_t n_ctx = 0;
    int rc;
    if ((rc = model_get_u32(m, "embedding_length", &n_embd, true, err)) ||
        (rc = model_get_u32(m, "block_count", &n_layer, true, err)) ||
        (rc = model_get_u32(m, "attention.head_count", &n_head, true, err)) ||
        (rc = model_get_u32(m, "feed_forward_length", &n_ff, true, err)) ||
        (rc = model_get_u32(m, "context_length", &n_ctx, true, err)) ||
        (rc = model_get_f32(m, "attention.layer_norm_rms_epsilon", &hp->eps, true, err)))
        return rc;
    if ((rc = need_pos(m, "embedding_length", n_embd, 1u << 20, err)) ||
        (rc = need_pos(m, "block_count", n_layer, GLIM_MAX_LAYERS, err)) ||
        (rc = need_pos(m, "attention.head_count", n_head, 4096, err)) ||
        (rc = need_pos(m, "feed_forward_length", n_ff, 1u << 22, err)) ||
        (rc = need_pos(m, "context_length", n_ctx, 0x7fffffffu, err)))
        return rc;
    n_head_kv = n_head;
    if ((rc = model_get_u32(m, "attention.head_count_kv", &n_head_kv, false, err)))
        return rc;
    if ((rc = need_pos(m, "attention.head_count_kv", n_head_kv, n_head, err)))
        return rc;
    if (n_head % n_head_kv)
        return glim_fail(err, GLIM_EFORMAT, "attention.head_count %u is not a multiple of head_count_kv %u",
                         n_head, n_head_kv);
    head_dim = n_embd / n_head;
    if ((rc = model_get_u32(m, "attention.key_length", &head_dim, false, err)))
        return rc;
    uint32_t v_dim = head_dim;
    if ((rc = model_get_u32(m, "attention.value_length", &v_dim, false, err)))
        return rc;
    if ((rc = need_pos(m, "attention.key_length", head_dim, 1024, err)))
        return rc;
    if (v_dim != head_dim)
        return glim_fail(err, GLIM_EUNSUPPORTED, "attention.value_length %u != key_length %u", v_dim, head_dim);
    if (!(hp->eps > 0 && hp->eps < 1))
        return glim_fail(err, GLIM_EFORMAT, "attention.layer_norm_rms_epsilon: expected (0, 1), got %g",
                         (double)hp->eps);
    hp->n_embd = (int)n_embd, hp->n_layer = (int)n_layer, hp->n_head = (int)n_head;
    hp->n_head_kv = (int)n_head_kv, hp->head_dim = (int)head_dim, hp->n_ff = (int)n_ff;
    hp->n_ctx_train = n_ctx;
    hp->n_rot = hp->head_dim;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->logit_scale = 1.0f;
    /* vocabulary size: rows of token_embd (the metadata key, if any, must agree) */
    const struct gguf_tensor *te = model_tensor(m, "token_embd.weight");
    if (!te)
        return glim_fail(err, GLIM_EFORMAT, "required tensor 'token_embd.weight' is missing");
    if (te->ne[1] < 1 || te->ne[1] > 0x7fffffff)
        return glim_fail(err, GLIM_EFORMAT, "token_embd.weight: bad vocabulary size %lld", (long long)te->ne[1]);
    hp->n_vocab = (int)te->ne[1];
    uint32_t n_vocab = (uint32_t)hp->n_vocab;
    if ((rc = model_get_u32(m, "vocab_size", &n_vocab, false, err)))
        return rc;
    if ((int64_t)n_vocab != hp->n_vocab)
        return glim_fail(err, GLIM_EFORMAT, "%s.vocab_size %u disagrees with token_embd.weight rows %d",
                         hp->arch, n_vocab, hp->n_vocab);
    return GLIM_OK;
}

int arch_bind_layer_common(struct glim_model *m, int il, struct glim_err *err)
{
    const struct model_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, QD = (int64_t)hp->n_head * hp->head_dim,
            KD = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    const struct blk_tensor t[] = {
        {offsetof(struct model_layer, attn_norm), "attn_norm", E, 0},
        {offsetof(struct model_layer, wq), "attn_q", E, QD},
        {offsetof(struct model_layer, wk), "attn_k", E, KD},
        {offsetof(struct model_layer, wv), "attn_v", E, KD},
        {offsetof(struct model_layer, wo), "attn_output", QD, E},
        {offsetof(struct model_layer, ffn_norm), "ffn_norm", E, 0},
        {offsetof(struct model_layer, ffn_gate), "ffn_gate", E, F},
        {offsetof(struct model_layer, ffn_up), "ffn_up", E, F},
        {offsetof(struct model_layer, ffn_down), "ffn_down", F, E},
    };
    return model_bind_blk(m, il, t, (int)(sizeof t / sizeof t[0]), true, err);
}

int arch_forward(struct glim_model *m, struct kv_cache *kv, const struct fwd_batch *b, void *scratch,
                 struct glim_err *err)
{
    struct fwd_scratch s;
    arch_scratch_layout(m, b->n_tokens, scratch, &s);
    int rc = arch_upload_inputs(m, b, &s, err);
    if (rc != GLIM_OK)
        return rc;
    return arch_finish(m, kv, b, &s, m->arch->body, err);
}
