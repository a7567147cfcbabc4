/*
 * quantize.c — searched K-quant row quantizers, a threaded tensor
 * quantizer that also measures its error, and llama.cpp's type mixes.
 *
 * DESIGN. The reference quantizers (quant_ref.c) take min/max scales. Here,
 * as in llama.cpp's make_qkx2_quants / make_qx_quants (ideas, not code),
 * each sub-block's scale is SEARCHED: a sweep of candidate inverse scales
 * around nmax/range, each giving codes by rounding, each refit by weighted
 * least squares; the candidate with the smallest weighted squared error wins.
 * Importance weights: |x| + rms(sub-block) for Q4_K/Q5_K (big weights matter
 * more, small ones still count), x^2 for Q6_K. After the 6/8-bit sub-block
 * scales are quantized, the codes are re-rounded against the scales actually
 * stored, and (glim's addition) each sub-block tries the stored scale/min
 * codes one step up and down and keeps the best, which can only lower the
 * weighted error.
 *
 * quantize_tensor splits rows over plain pthreads; each thread converts a
 * source row to f32, quantizes it, dequantizes the result and sums the error.
 * Stateless; any thread.
 */
#include "quantize.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "../base/alloc.h"
#include "quant_ref.h"

static int nearest(float v)
{
    return (int)lrintf(v);
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- asymmetric search (Q4_K, Q5_K): x ~ s*q - m, q in 0..nmax, m >= 0 ---- */

struct affine_params {
    int   nmax;     /* 15 or 31 */
    float rmin;     /* first candidate: (nmax + rmin) / range */
    float rdelta;   /* step between candidates */
    int   nstep;    /* candidates 0..nstep */
};

/* weighted squared error of x ~ s*q + b with q rounded against (s, b) */
static double affine_err(const float *x, const float *w, int n, int nmax, float s, float b)
{
    double err = 0;
    float is = s > 0 ? 1.0f / s : 0;
    for (int i = 0; i < n; i++) {
        int q = clampi(nearest((x[i] - b) * is), 0, nmax);
        double diff = (double)s * q + b - x[i];
        err += w[i] * diff * diff;
    }
    return err;
}

/* Returns the scale s (>= 0) and *neg_min = -b (>= 0) of the best candidate. */
static float search_affine(const float *x, const float *w, int n, const struct affine_params *p,
                           float *neg_min)
{
    float lo = x[0], hi = x[0];
    double sw = 0, swx = 0;
    for (int i = 0; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
        sw += w[i];
        swx += (double)w[i] * x[i];
    }
    if (lo > 0)
        lo = 0;   /* the stored min is subtracted, so the offset b can only be <= 0 */
    if (hi <= lo) {
        *neg_min = -lo;
        return 0;
    }
    float best_s = (hi - lo) / (float)p->nmax, best_b = lo;
    double best_err = affine_err(x, w, n, p->nmax, best_s, best_b);
    for (int k = 0; k <= p->nstep; k++) {
        float is = ((float)p->nmax + p->rmin + p->rdelta * (float)k) / (hi - lo);
        double swl = 0, swl2 = 0, swlx = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi(nearest(is * (x[i] - lo)), 0, p->nmax);
            swl += w[i] * (double)q;
            swl2 += w[i] * (double)q * q;
            swlx += w[i] * (double)q * x[i];
        }
        /* weighted least squares for (s, b) given the codes */
        double det = sw * swl2 - swl * swl;
        if (det <= 0)
            continue;
        double s = (sw * swlx - swx * swl) / det, b = (swl2 * swx - swl * swlx) / det;
        if (b > 0) {
            b = 0;
            s = swlx / swl2;
        }
        if (s <= 0)
            continue;
        double err = affine_err(x, w, n, p->nmax, (float)s, (float)b);
        if (err < best_err) {
            best_err = err;
            best_s = (float)s;
            best_b = (float)b;
        }
    }
    *neg_min = -best_b;
    return best_s;
}

/* Try the stored 6-bit scale/min codes one step either way; keep the pair
 * with the smallest weighted error against the stored d, dmin. */
static void polish_k4(const float *x, const float *w, int nmax, float d, float dmin, uint8_t *sc,
                      uint8_t *m)
{
    int best_sc = *sc, best_m = *m;
    double best = affine_err(x, w, 32, nmax, d * *sc, -dmin * *m);
    for (int ds = -1; ds <= 1; ds++)
        for (int dm = -1; dm <= 1; dm++) {
            int s = *sc + ds, mm = *m + dm;
            if ((ds == 0 && dm == 0) || s < 0 || s > 63 || mm < 0 || mm > 63)
                continue;
            double e = affine_err(x, w, 32, nmax, d * s, -dmin * mm);
            if (e < best) {
                best = e;
                best_sc = s;
                best_m = mm;
            }
        }
    *sc = (uint8_t)best_sc;
    *m = (uint8_t)best_m;
}

/* One 256-weight Q4_K/Q5_K super-block: search each sub-block of 32,
 * quantize scales/mins to 6 bits, polish, then final codes q[256]. */
static void k4_block_search(const float *x, const struct affine_params *p, uint16_t *pd,
                            uint16_t *pdmin, uint8_t sc[8], uint8_t m[8], uint8_t q[QK_K])
{
    float w[QK_K], scale[8], mins[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xs[l] * xs[l];
        float av = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[32 * j + l] = av + fabsf(xs[l]);
        scale[j] = search_affine(xs, w + 32 * j, 32, p, &mins[j]);
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, mins[j]);
    }
    *pd = f32_to_fp16(max_scale / 63.0f);
    *pdmin = f32_to_fp16(max_min / 63.0f);
    float d = fp16_to_f32(*pd), dmin = fp16_to_f32(*pdmin);
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(d > 0 ? clampi(nearest(scale[j] / d), 0, 63) : 0);
        m[j] = (uint8_t)(dmin > 0 ? clampi(nearest(mins[j] / dmin), 0, 63) : 0);
        polish_k4(x + 32 * j, w + 32 * j, p->nmax, d, dmin, &sc[j], &m[j]);
        float ds = d * sc[j], dm = dmin * m[j];
        for (int l = 0; l < 32; l++)
            q[32 * j + l] = (uint8_t)(ds > 0 ? clampi(nearest((x[32 * j + l] + dm) / ds), 0, p->nmax) : 0);
    }
}

static void k45_search_rows(const float *x, void *dst, int64_t n, const struct affine_params *p)
{
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint16_t d, dmin;
        uint8_t sc[8], m[8], q[QK_K];
        k4_block_search(x, p, &d, &dmin, sc, m, q);
        quant_k45_pack(dst, i, p->nmax, d, dmin, sc, m, q);
    }
}

void quantize_row_q4_k_search(const float *x, void *dst, int64_t n)
{
    static const struct affine_params p = {.nmax = 15, .rmin = -1.0f, .rdelta = 0.1f, .nstep = 20};
    k45_search_rows(x, dst, n, &p);
}

void quantize_row_q5_k_search(const float *x, void *dst, int64_t n)
{
    static const struct affine_params p = {.nmax = 31, .rmin = -0.5f, .rdelta = 0.1f, .nstep = 15};
    k45_search_rows(x, dst, n, &p);
}

/* ---- symmetric search (Q6_K): x ~ s*q, q in -32..31, weights x^2 ----
 * The value of largest magnitude maps near -32 (the side with one more
 * level) or near +31. For codes q the best scale is sum(wxq)/sum(wq^2) and the error
 * falls as sum(wxq)^2/sum(wq^2) rises, so candidates compare by that. */
static float search_symmetric(const float *x, int n)
{
    float amax = 0, vmax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            vmax = x[i];
        }
    if (amax < 1e-30f)
        return 0;
    double best_num = -1, best_den = 1, best_s = 0;
    for (int c = 0; c < 38; c++) {
        /* 19 candidates with vmax near -32, then 19 with vmax near +31
         * (the second side is glim's addition: it finds grids llama.cpp misses) */
        int k = c % 19 - 9;
        float is = c < 19 ? -(32.0f + 0.1f * (float)k) / vmax : (31.0f + 0.1f * (float)k) / vmax;
        double swlx = 0, swl2 = 0;
        for (int i = 0; i < n; i++) {
            int q = clampi(nearest(is * x[i]), -32, 31);
            double w = (double)x[i] * x[i];
            swlx += w * q * x[i];
            swl2 += w * q * q;
        }
        if (swl2 > 0 && swlx * swlx * best_den > best_num * swl2) {
            best_num = swlx * swlx;
            best_den = swl2;
            best_s = swlx / swl2;
        }
    }
    return (float)best_s;
}

static double symmetric_err(const float *x, int n, float s)
{
    double err = 0;
    float is = s != 0 ? 1.0f / s : 0;
    for (int i = 0; i < n; i++) {
        int q = clampi(nearest(x[i] * is), -32, 31);
        double diff = (double)s * q - x[i];
        err += (double)x[i] * x[i] * diff * diff;
    }
    return err;
}

void quantize_row_q6_k_search(const float *x, void *dst, int64_t n)
{
    struct block_q6_k *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float scale[16], amax = 0, vmax = 0;
        for (int j = 0; j < 16; j++) {
            scale[j] = search_symmetric(x + 16 * j, 16);
            if (fabsf(scale[j]) > amax) {
                amax = fabsf(scale[j]);
                vmax = scale[j];
            }
        }
        /* 8-bit sub-scales: the largest maps to -128 (d keeps the sign),
         * or to -127 when one of the other sign is nearly as large, since
         * +128 does not exist */
        float other = 0;
        for (int j = 0; j < 16; j++)
            if (scale[j] * vmax < 0)
                other = fmaxf(other, fabsf(scale[j]));
        float levels = other * 128.0f > amax * 127.5f ? -127.0f : -128.0f;
        b[i].d = f32_to_fp16(amax > 0 ? vmax / levels : 0);
        float d = fp16_to_f32(b[i].d);
        int8_t q[QK_K];
        for (int j = 0; j < 16; j++) {
            const float *xs = x + 16 * j;
            int s = d != 0 ? clampi(nearest(scale[j] / d), -128, 127) : 0;
            double best = symmetric_err(xs, 16, d * (float)s);
            for (int ds = -1; ds <= 1; ds += 2) {   /* polish: one step either way */
                int t = s + ds;
                double e = t >= -128 && t <= 127 ? symmetric_err(xs, 16, d * (float)t) : INFINITY;
                if (e < best) {
                    best = e;
                    s = t;
                }
            }
            b[i].scales[j] = (int8_t)s;
            float ds = d * (float)s, ids = ds != 0 ? 1.0f / ds : 0;
            for (int l = 0; l < 16; l++)
                q[16 * j + l] = (int8_t)(ds != 0 ? clampi(nearest(xs[l] * ids), -32, 31) : 0);
        }
        quant_q6k_codes_pack(&b[i], q);
    }
}

quant_from_f32_fn quantize_row_fn(uint32_t type)
{
    switch (type) {
    case GLIM_TYPE_Q4_K: return quantize_row_q4_k_search;
    case GLIM_TYPE_Q5_K: return quantize_row_q5_k_search;
    case GLIM_TYPE_Q6_K: return quantize_row_q6_k_search;
    default: {
        const struct quant_traits *t = quant_traits(type);
        return t ? t->from_f32 : NULL;
    }
    }
}

/* ---- whole tensors, rows split over threads ---- */

struct qt_job {
    const struct quant_traits *src_t, *dst_t;
    quant_from_f32_fn quantize;
    const uint8_t *src;
    uint8_t *dst;
    size_t src_row_bytes, dst_row_bytes;
    int64_t n_per_row, r0, r1;
    struct quantize_stats st;
    int64_t bad_row;   /* first row with NaN/inf, -1 if none */
    int rc;            /* GLIM_OK, GLIM_ENOMEM or GLIM_EINVAL (bad_row) */
};

static void *qt_worker(void *arg)
{
    struct qt_job *j = arg;
    float *row = glim_malloc((size_t)j->n_per_row * 2 * sizeof(float));
    if (!row) {
        j->rc = GLIM_ENOMEM;
        return NULL;
    }
    float *deq = row + j->n_per_row;
    for (int64_t r = j->r0; r < j->r1; r++) {
        uint8_t *out = j->dst + (size_t)r * j->dst_row_bytes;
        j->src_t->to_f32(j->src + (size_t)r * j->src_row_bytes, row, j->n_per_row);
        for (int64_t i = 0; i < j->n_per_row; i++)
            if (!isfinite(row[i])) {
                j->bad_row = r;
                j->rc = GLIM_EINVAL;
                goto done;
            }
        j->quantize(row, out, j->n_per_row);
        j->dst_t->to_f32(out, deq, j->n_per_row);
        for (int64_t i = 0; i < j->n_per_row; i++) {
            double e = (double)row[i] - deq[i];
            j->st.sum_sq_err += e * e;
            j->st.sum_sq_src += (double)row[i] * row[i];
        }
        j->st.n += j->n_per_row;
    }
done:
    glim_free(row);
    return NULL;
}

static void run_jobs(struct qt_job *jobs, int nth)
{
    pthread_t tid[256];
    bool started[256] = {false};
    for (int t = 1; t < nth; t++)
        started[t] = pthread_create(&tid[t], NULL, qt_worker, &jobs[t]) == 0;
    qt_worker(&jobs[0]);
    for (int t = 1; t < nth; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        else
            qt_worker(&jobs[t]);   /* no thread: do its share here */
    }
}

int quantize_tensor(uint32_t dst_type, void *dst, uint32_t src_type, const void *src, int64_t n_rows,
                    int64_t n_per_row, int n_threads, struct quantize_stats *st, struct glim_err *err)
{
    const struct quant_traits *src_t = quant_traits(src_type), *dst_t = quant_traits(dst_type);
    quant_from_f32_fn fn = quantize_row_fn(dst_type);
    if (!src_t || !src_t->to_f32)
        return glim_fail(err, GLIM_EINVAL, "cannot read source type %s", quant_type_name(src_type));
    if (!dst_t || !dst_t->to_f32 || !fn)
        return glim_fail(err, GLIM_EINVAL, "cannot quantize to type %s", quant_type_name(dst_type));
    size_t src_rb = quant_row_bytes(src_type, n_per_row), dst_rb = quant_row_bytes(dst_type, n_per_row);
    if (n_rows < 0 || n_per_row <= 0 || !src_rb || !dst_rb)
        return glim_fail(err, GLIM_EINVAL, "rows of %lld elements do not fit %s/%s blocks",
                         (long long)n_per_row, quant_type_name(src_type), quant_type_name(dst_type));
    int nth = n_threads < 1 ? 1 : n_threads > 256 ? 256 : n_threads;
    if (nth > n_rows)
        nth = n_rows > 0 ? (int)n_rows : 1;
    struct qt_job jobs[256];
    int64_t per = (n_rows + nth - 1) / nth;
    for (int t = 0; t < nth; t++) {
        jobs[t] = (struct qt_job){.src_t = src_t, .dst_t = dst_t, .quantize = fn, .src = src, .dst = dst,
                                  .src_row_bytes = src_rb, .dst_row_bytes = dst_rb, .n_per_row = n_per_row,
                                  .r0 = GLIM_MIN(n_rows, per * t), .r1 = GLIM_MIN(n_rows, per * (t + 1)),
                                  .bad_row = -1};
    }
    run_jobs(jobs, nth);
    struct quantize_stats sum = {0, 0, 0};
    for (int t = 0; t < nth; t++) {
        if (jobs[t].rc == GLIM_ENOMEM)
            return glim_fail(err, GLIM_ENOMEM, "out of memory for a row of %lld floats",
                             (long long)n_per_row);
        if (jobs[t].rc)
            return glim_fail(err, GLIM_EINVAL, "row %lld holds a NaN or infinity",
                             (long long)jobs[t].bad_row);
        sum.sum_sq_err += jobs[t].st.sum_sq_err;
        sum.sum_sq_src += jobs[t].st.sum_sq_src;
        sum.n += jobs[t].st.n;
    }
    if (st)
        *st = sum;
    return GLIM_OK;
}

/* ---- mixes and per-tensor rules ---- */

/* llama_ftype values: Q4_0 2, Q8_0 7, Q4_K_M 15, Q5_K_M 17, Q6_K 18 */
static const struct quantize_mix MIXES[] = {
    {"Q4_K_M", 15, GLIM_TYPE_Q4_K, true},
    {"Q5_K_M", 17, GLIM_TYPE_Q5_K, true},
    {"Q6_K", 18, GLIM_TYPE_Q6_K, false},
    {"Q8_0", 7, GLIM_TYPE_Q8_0, false},
    {"Q4_0", 2, GLIM_TYPE_Q4_0, false},
};

static bool name_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return false;
    return *a == *b;
}

const struct quantize_mix *quantize_mix_find(const char *name)
{
    if (!name)
        return NULL;
    if (name_eq(name, "Q4_K"))   /* llama-quantize's aliases */
        name = "Q4_K_M";
    else if (name_eq(name, "Q5_K"))
        name = "Q5_K_M";
    for (size_t i = 0; i < sizeof MIXES / sizeof MIXES[0]; i++)
        if (name_eq(MIXES[i].name, name))
            return &MIXES[i];
    return NULL;
}

const char *quantize_mix_names(void)
{
    return "Q4_K_M (= Q4_K), Q5_K_M (= Q5_K), Q6_K, Q8_0, Q4_0";
}

bool quantize_use_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static bool is_attn_v(const char *name)
{
    return strstr(name, "attn_v.weight") != NULL;
}

static bool is_ffn_down(const char *name)
{
    return strstr(name, "ffn_down") != NULL && ends_with(name, "weight");
}

void quantize_plan_init(struct quantize_plan *p, const struct quantize_mix *mix, bool is_pure,
                        const char *const *names, int64_t n_tensors)
{
    memset(p, 0, sizeof *p);
    p->mix = mix;
    p->is_pure = is_pure;
    for (int64_t i = 0; i < n_tensors; i++) {
        p->n_attn_v += is_attn_v(names[i]);
        p->n_ffn_down += is_ffn_down(names[i]);
        p->has_output |= !strcmp(names[i], "output.weight");
    }
}

/* weight matrices only: llama.cpp leaves 1-D tensors, norms, the MoE router
 * and position/type embeddings alone */
static bool is_quantizable(const char *name, int n_dims, uint32_t src_type)
{
    if (src_type != GLIM_TYPE_F32 && src_type != GLIM_TYPE_F16 && src_type != GLIM_TYPE_BF16)
        return false;
    return n_dims >= 2 && ends_with(name, "weight") && !strstr(name, "_norm.weight") &&
           !strstr(name, "ffn_gate_inp") && !strstr(name, "pos_embd") && !strstr(name, "token_types");
}

/* llama.cpp's rules for the mixes glim offers (llama_tensor_get_type) */
static uint32_t mix_rule(struct quantize_plan *p, const char *name, const int64_t *ne)
{
    uint32_t t = p->mix->base;
    bool is_output = !strcmp(name, "output.weight") ||
                     (!p->has_output && !strcmp(name, "token_embd.weight"));
    if (is_output) {
        if (ne[0] % QK_K)
            return GLIM_TYPE_Q8_0;
        return t == GLIM_TYPE_Q8_0 ? t : GLIM_TYPE_Q6_K;
    }
    if (is_attn_v(name)) {
        if (p->mix->is_m && quantize_use_more_bits(p->i_attn_v, p->n_attn_v))
            t = GLIM_TYPE_Q6_K;
        p->i_attn_v++;
    } else if (is_ffn_down(name)) {
        if (p->mix->is_m && quantize_use_more_bits(p->i_ffn_down, p->n_ffn_down))
            t = GLIM_TYPE_Q6_K;
        p->i_ffn_down++;
    } else if (strstr(name, "attn_qkv.weight") && p->mix->ftype == 15) {
        t = GLIM_TYPE_Q5_K;   /* Q4_K_M: fused QKV gets Q5_K */
    }
    return t;
}

uint32_t quantize_plan_type(struct quantize_plan *p, const char *name, int n_dims, const int64_t *ne,
                            uint32_t src_type)
{
    if (!is_quantizable(name, n_dims, src_type))
        return src_type;
    uint32_t t = p->is_pure ? p->mix->base : mix_rule(p, name, ne);
    /* Rows that do not divide into blocks: llama.cpp goes Q4_K->Q5_0,
     * Q5_K->Q5_1, Q6_K->Q8_0; glim has no Q5_0/Q5_1 kernels, so all go to
     * Q8_0, and to F16 when even 32 does not divide. */
    if (ne[0] % quant_traits(t)->block_elems) {
        if (t != GLIM_TYPE_Q8_0 && t != GLIM_TYPE_Q4_0)
            t = GLIM_TYPE_Q8_0;
        if (ne[0] % QK8_0)
            t = GLIM_TYPE_F16;
    }
    return t;
}
