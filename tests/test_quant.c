/*
 * test_quant.c — the traits table, fp16/bf16 conversions, hand-built blocks
 * decoded against hand-computed values, quantize/dequantize round trips with
 * error bounds per bit width, and the reference dots.
 */
#include "harness.h"

#include <stdint.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/quant_ref.h"

/* ---- seeded random numbers (xorshift64*, Box-Muller) ---- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float rng_gauss(void) { return test_rng_gauss(&rng_state); }

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- traits ---- */

static void test_traits_table(void)
{
    static const struct { int id; const char *name; int elems, bytes; } want[] = {
        {0, "F32", 1, 4},        {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
        {3, "Q4_1", 32, 20},     {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
        {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
        {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
        {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
        {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
        {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
        {23, "IQ4_XS", 256, 136},{24, "I8", 1, 1},         {25, "I16", 1, 2},
        {26, "I32", 1, 4},       {27, "I64", 1, 8},        {28, "F64", 1, 8},
        {29, "IQ1_M", 256, 56},  {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
        {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},
    };
    int n_listed = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct quant_traits *t = quant_traits((uint32_t)want[i].id);
        CHECK(t != NULL);
        if (!t)
            continue;
        CHECK(strcmp(t->name, want[i].name) == 0);
        CHECK_EQ(t->block_elems, want[i].elems);
        CHECK_EQ(t->block_bytes, want[i].bytes);
        CHECK_EQ(quant_type_from_name(want[i].name), want[i].id);
        CHECK((t->to_f32 == NULL) == (t->dot_f32 == NULL));
        CHECK_EQ(quant_type_computable((uint32_t)want[i].id), t->to_f32 != NULL);
    }
    for (uint32_t id = 0; id < 64; id++)
        n_listed += quant_traits(id) != NULL;
    CHECK_EQ(n_listed, (int)(sizeof want / sizeof want[0]));
    static const int removed[] = {4, 5, 31, 32, 33, 36, 37, 38, 40, 1000};
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
        CHECK(quant_traits((uint32_t)removed[i]) == NULL);
        CHECK(strcmp(quant_type_name((uint32_t)removed[i]), "?") == 0);
    }
    CHECK_EQ(quant_type_from_name("q4_k"), GLIM_TYPE_Q4_K);
    CHECK_EQ(quant_type_from_name("bf16"), GLIM_TYPE_BF16);
    CHECK_EQ(quant_type_from_name("Q4_K_"), -1);
    CHECK_EQ(quant_type_from_name("Q4"), -1);
    CHECK_EQ(quant_type_from_name(""), -1);
    static const int computable[] = {0, 1, 2, 8, 12, 13, 14, 30};
    for (size_t i = 0; i < sizeof computable / sizeof computable[0]; i++)
        CHECK(quant_type_computable((uint32_t)computable[i]));
    CHECK(!quant_type_computable(GLIM_TYPE_IQ2_XS));
    CHECK(!quant_type_computable(4));
    CHECK_EQ((long long)quant_row_bytes(GLIM_TYPE_Q4_K, 6656), 3744);
    CHECK_EQ((long long)quant_row_bytes(GLIM_TYPE_Q6_K, 19968), 16380);
    CHECK_EQ((long long)quant_row_bytes(GLIM_TYPE_Q8_0, 4096), 4352);
    CHECK_EQ((long long)quant_row_bytes(GLIM_TYPE_BF16, 6656), 13312);
    CHECK_EQ((long long)quant_row_bytes(GLIM_TYPE_Q4_K, 100), 0);
    CHECK_EQ((long long)quant_row_bytes(GLIM_TYPE_F32, -4), 0);
    CHECK_EQ((long long)quant_row_bytes(77, 256), 0);
}

/* ---- fp16 / bf16 ---- */

static void test_fp16_edges(void)
{
    CHECK_EQ(f32_to_fp16(0.0f), 0x0000);
    CHECK_EQ(f32_to_fp16(-0.0f), 0x8000);
    CHECK_EQ(f32_to_fp16(1.0f), 0x3c00);
    CHECK_EQ(f32_to_fp16(-2.0f), 0xc000);
    CHECK_EQ(f32_to_fp16(65504.0f), 0x7bff);            /* largest finite */
    CHECK_EQ(f32_to_fp16(65519.99f), 0x7bff);           /* just below the halfway point */
    CHECK_EQ(f32_to_fp16(65520.0f), 0x7c00);            /* tie rounds to even = inf */
    CHECK_EQ(f32_to_fp16(1e10f), 0x7c00);
    CHECK_EQ(f32_to_fp16(-INFINITY), 0xfc00);
    CHECK_EQ(f32_to_fp16(ldexpf(1, -24)), 0x0001);      /* smallest subnormal */
    CHECK_EQ(f32_to_fp16(ldexpf(1, -25)), 0x0000);      /* tie to even: 0 */
    CHECK_EQ(f32_to_fp16(ldexpf(3, -26)), 0x0001);      /* 0.75 ulp rounds up */
    CHECK_EQ(f32_to_fp16(ldexpf(3, -25)), 0x0002);      /* 1.5 ulp tie -> even 2 */
    CHECK_EQ(f32_to_fp16(ldexpf(5, -25)), 0x0002);      /* 2.5 ulp tie -> even 2 */
    CHECK_EQ(f32_to_fp16(ldexpf(1, -14)), 0x0400);      /* smallest normal */
    CHECK_EQ(f32_to_fp16(ldexpf(1023.5f, -24)), 0x0400);/* subnormal rounding up into normal */
    CHECK_EQ(f32_to_fp16(1.0f + ldexpf(1, -11)), 0x3c00);     /* tie -> even */
    CHECK_EQ(f32_to_fp16(1.0f + ldexpf(3, -11)), 0x3c02);     /* tie -> even (up) */
    CHECK_EQ(f32_to_fp16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)), 0x3c01);
    CHECK_EQ(f32_to_fp16(ldexpf(1, -140)), 0x0000);     /* f32 subnormal */
    CHECK(isnan(fp16_to_f32(f32_to_fp16(NAN))));
    CHECK(isnan(fp16_to_f32(0x7c01)));                  /* signalling NaN decodes as NaN */
    CHECK((f32_to_fp16(bits_f32(0x7f800001)) & 0x7fff) > 0x7c00);   /* tiny payload stays NaN */
    CHECK(isinf(fp16_to_f32(0x7c00)) && fp16_to_f32(0xfc00) < 0);
    CHECK_EQ(f32_bits(fp16_to_f32(0x8000)), 0x80000000u);
    CHECK(fp16_to_f32(0x0001) == ldexpf(1, -24));
    CHECK(fp16_to_f32(0x03ff) == ldexpf(1023, -24));
    CHECK(fp16_to_f32(0x3555) == 0x155 / 1024.0f * 0.25f + 0.25f);   /* exp 13, mant 0x155 */
}

/* Every finite half survives f32 and back; every midpoint between
 * neighbours rounds to the even one, and a hair off it to the nearer. */
static void test_fp16_exhaustive(void)
{
    int bad_roundtrip = 0, bad_mid = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint16_t hh = (uint16_t)h;
        if ((hh & 0x7c00) == 0x7c00 && (hh & 0x3ff))
            continue;   /* NaN */
        bad_roundtrip += f32_to_fp16(fp16_to_f32(hh)) != hh;
        if ((hh & 0x7fff) >= 0x7bff)
            continue;   /* no finite upper neighbour */
        double a = fp16_to_f32(hh), b = fp16_to_f32((uint16_t)(hh + 1));
        float mid = (float)((a + b) / 2);   /* exact: 12 significant bits */
        uint16_t even = (hh & 1) ? (uint16_t)(hh + 1) : hh;
        bad_mid += f32_to_fp16(mid) != even;
        float lo = nextafterf(mid, (float)a), hi = nextafterf(mid, (float)b);
        bad_mid += f32_to_fp16(lo) != hh;
        bad_mid += f32_to_fp16(hi) != (uint16_t)(hh + 1);
    }
    CHECK_EQ(bad_roundtrip, 0);
    CHECK_EQ(bad_mid, 0);
}

static void test_bf16(void)
{
    CHECK_EQ(f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ(f32_to_bf16(bits_f32(0x3f808000)), 0x3f80);   /* tie -> even (down) */
    CHECK_EQ(f32_to_bf16(bits_f32(0x3f818000)), 0x3f82);   /* tie -> even (up) */
    CHECK_EQ(f32_to_bf16(bits_f32(0x3f808001)), 0x3f81);
    CHECK_EQ(f32_to_bf16(bits_f32(0x3f807fff)), 0x3f80);
    CHECK_EQ(f32_to_bf16(bits_f32(0x7f7fffff)), 0x7f80);   /* max float rounds to inf */
    CHECK_EQ(f32_to_bf16(INFINITY), 0x7f80);
    CHECK_EQ(f32_to_bf16(-INFINITY), 0xff80);
    CHECK_EQ(f32_to_bf16(-0.0f), 0x8000);
    CHECK_EQ(f32_to_bf16(bits_f32(0x00000001)), 0x0000);   /* f32 subnormal */
    CHECK_EQ(f32_to_bf16(bits_f32(0x00018000)), 0x0002);   /* subnormal tie -> even */
    CHECK(isnan(bf16_to_f32(f32_to_bf16(NAN))));
    CHECK(isnan(bf16_to_f32(f32_to_bf16(bits_f32(0x7f800001)))));   /* payload in the low bits */
    CHECK(bf16_to_f32(0xc040) == -3.0f);
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++)
        if (((h >> 7) & 0xff) != 0xff)
            bad += f32_to_bf16(bf16_to_f32((uint16_t)h)) != h;
    CHECK_EQ(bad, 0);
}

/* ---- hand-built blocks ---- */

static void test_q4_0_block(void)
{
    struct block_q4_0 b;
    b.d = 0x3800;   /* 0.5 */
    for (int j = 0; j < 16; j++)
        b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    quant_traits(GLIM_TYPE_Q4_0)->to_f32(&b, y, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 0.5f * (float)(j - 8));
        CHECK(y[j + 16] == 0.5f * (float)(7 - j));
    }
}

static void test_q8_0_block(void)
{
    struct block_q8_0 b;
    b.d = 0xb400;   /* -0.25 */
    for (int j = 0; j < 32; j++)
        b.qs[j] = (int8_t)(j * 8 - 128);
    float y[32];
    quant_traits(GLIM_TYPE_Q8_0)->to_f32(&b, y, 32);
    for (int j = 0; j < 32; j++)
        CHECK(y[j] == -0.25f * (float)(j * 8 - 128));
}

/* scales/mins with high bits set in sub-blocks 4..7, packed by hand (6-bit rule) */
static const uint8_t K4_SC[8] = {1, 2, 3, 63, 17, 33, 48, 62};
static const uint8_t K4_M[8] = {0, 5, 63, 1, 20, 40, 63, 7};
static const uint8_t K4_PACKED[12] = {0x41, 0x82, 0xc3, 0xff, 0x40, 0x85, 0xff, 0x01,
                                      0x41, 0x81, 0xf0, 0x7e};

static void test_k4_scale_packing(void)
{
    uint8_t s[12];
    quant_k4_scales_pack(s, K4_SC, K4_M);
    CHECK(memcmp(s, K4_PACKED, 12) == 0);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        quant_k4_scale_min_get(K4_PACKED, j, &sc, &m);
        CHECK_EQ(sc, K4_SC[j]);
        CHECK_EQ(m, K4_M[j]);
    }
}

static void test_q4_k_block(void)
{
    struct block_q4_k b;
    b.d = 0x3800;      /* 0.5 */
    b.dmin = 0x3400;   /* 0.25 */
    memcpy(b.scales, K4_PACKED, 12);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            b.qs[32 * c + l] = (uint8_t)((l & 15) | (((l + c) & 15) << 4));
    float y[QK_K];
    quant_traits(GLIM_TYPE_Q4_K)->to_f32(&b, y, QK_K);
    int bad = 0;
    for (int t = 0; t < QK_K; t++) {
        int j = t / 32, l = t % 32, c = j / 2;
        int q = (j % 2 == 0) ? (l & 15) : ((l + c) & 15);
        float want = 0.5f * K4_SC[j] * (float)q - 0.25f * K4_M[j];
        bad += y[t] != want;
    }
    CHECK_EQ(bad, 0);
    CHECK(y[0] == 0.0f);                     /* sc 1, m 0, q 0 */
    CHECK(y[255] == 0.5f * 62 * 2 - 0.25f * 7);   /* t=255: j 7, l 31, c 3: q = 34 & 15 = 2 */
}

static void test_q5_k_block(void)
{
    struct block_q5_k b;
    b.d = 0x3c00;      /* 1.0 */
    b.dmin = 0x3800;   /* 0.5 */
    memcpy(b.scales, K4_PACKED, 12);
    for (int l = 0; l < 32; l++)
        b.qh[l] = (uint8_t)(l * 37 + 11);
    for (int i = 0; i < 128; i++)
        b.qs[i] = (uint8_t)(i * 13);
    float y[QK_K];
    quant_traits(GLIM_TYPE_Q5_K)->to_f32(&b, y, QK_K);
    int bad = 0;
    for (int t = 0; t < QK_K; t++) {
        int j = t / 32, l = t % 32, c = j / 2;
        uint8_t byte = b.qs[32 * c + l];
        int low = (j % 2 == 0) ? (byte & 15) : (byte >> 4);
        int q = low | (((b.qh[l] >> j) & 1) << 4);
        bad += y[t] != 1.0f * K4_SC[j] * (float)q - 0.5f * K4_M[j];
    }
    CHECK_EQ(bad, 0);
    /* one weight by hand: t = 200 -> j 6 (even: low nibble), l 8, c 3: qs[104] = 104*13
     * mod 256 = 72 = 0x48, low nibble 8; qh[8] = 8*37+11 mod 256 = 51 = 0b00110011,
     * bit 6 = 0 -> q = 8; w = 48*8 - 0.5*63 */
    CHECK(y[200] == 48.0f * 8 - 31.5f);
    /* t = 33 -> j 1, l 1: qs[1] = 13 = 0x0d, high nibble 0; qh[1] = 48 = 0b110000, bit 1 = 0 -> 0 */
    CHECK(y[33] == -2.5f);
    /* t = 36 -> j 1, l 4: qs[4] = 52 = 0x34, high 3; qh[4] = 159 = 0b10011111, bit 1 = 1 -> 19 */
    CHECK(y[36] == 2.0f * 19 - 2.5f);
}

static void test_q6_k_block(void)
{
    static const int8_t sc[16] = {-128, -1, 5, 127, 3, -7, 0, 1, -2, 9, 11, -13, 2, 4, 6, 8};
    struct block_q6_k b;
    memset(&b, 0, sizeof b);
    b.d = 0x3000;   /* 0.125 */
    memcpy(b.scales, sc, 16);
    b.ql[5] = 0x3a;
    b.qh[5] = 0xe4;          /* 11 10 01 00 */
    b.ql[64 + 10] = 0x5f;
    b.qh[32 + 10] = 0x1b;    /* 00 01 10 11 */
    float y[QK_K];
    quant_traits(GLIM_TYPE_Q6_K)->to_f32(&b, y, QK_K);
    /* expected codes (q - 32) at the touched positions, -32 everywhere else */
    int q[QK_K];
    for (int t = 0; t < QK_K; t++)
        q[t] = -32;
    q[5] = 0xa - 32;             /* ql[5] low, qh bits 0-1 = 0 */
    q[37] = (1 << 4) - 32;       /* ql[37] low = 0, qh bits 2-3 = 1 */
    q[69] = (3 | 2 << 4) - 32;   /* ql[5] high = 3, qh bits 4-5 = 2 */
    q[101] = (3 << 4) - 32;      /* ql[37] high = 0, qh bits 6-7 = 3 */
    q[138] = (0xf | 3 << 4) - 32;
    q[170] = (2 << 4) - 32;
    q[202] = (5 | 1 << 4) - 32;
    q[234] = -32;
    int bad = 0;
    for (int t = 0; t < QK_K; t++)
        bad += y[t] != 0.125f * (float)sc[t / 16] * (float)q[t];
    CHECK_EQ(bad, 0);
    CHECK(y[0] == 0.125f * -128 * -32);    /* negative scale, negative code */
    CHECK(y[138] == 0.125f * -2 * 31);
    CHECK(y[69] == 0.125f * 3 * 3);
}

/* ---- round trips and dots ---- */

struct rt_case {
    int   type;
    double max_rel_rmse;   /* RMSE(x - deq) / RMS(x) bound for N(0,1) data */
};

/* Bounds: a uniform quantizer with step s has error RMS s/sqrt(12). For
 * N(0,1) blocks: Q8_0 step ~ 2.5/127, Q4_0 ~ 2.5/8 (8 levels per side),
 * Q4_K ~ 4/15 per 32 (+6-bit scales), Q5_K ~ 4/31, Q6_K ~ 2.2/31 per 16
 * (+8-bit scales); the bounds below leave ~30% margin over measured. */
static const struct rt_case RT[] = {
    {GLIM_TYPE_F32, 0.0},    {GLIM_TYPE_F16, 3e-4},  {GLIM_TYPE_BF16, 2.5e-3},
    {GLIM_TYPE_Q8_0, 0.008}, {GLIM_TYPE_Q4_0, 0.13}, {GLIM_TYPE_Q4_K, 0.12},
    {GLIM_TYPE_Q5_K, 0.06},  {GLIM_TYPE_Q6_K, 0.03},
};

static void roundtrip_one(const struct rt_case *rc, int64_t n)
{
    const struct quant_traits *t = quant_traits((uint32_t)rc->type);
    size_t nb = quant_row_bytes((uint32_t)rc->type, n);
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    float *v = malloc((size_t)n * sizeof *v);
    void *q = malloc(nb);
    if (!x || !y || !v || !q) {
        CHECK(!"out of memory");
        goto out;
    }
    for (int64_t i = 0; i < n; i++) {
        x[i] = rng_gauss() * (1.0f + (float)(i / 256 % 3));   /* scale varies by block */
        v[i] = rng_gauss();
    }
    t->from_f32(x, q, n);
    t->to_f32(q, y, n);
    double se = 0, sx = 0, dref = 0, dabs = 0;
    for (int64_t i = 0; i < n; i++) {
        se += (double)(x[i] - y[i]) * (x[i] - y[i]);
        sx += (double)x[i] * x[i];
        dref += (double)y[i] * v[i];
        dabs += fabs((double)y[i] * v[i]);
    }
    double rel = sqrt(se / sx);
    if (rel > rc->max_rel_rmse || getenv("GLIM_TEST_VERBOSE"))
        fprintf(stderr, "  %s n=%lld: relative RMSE %.5f (bound %.5f)\n", t->name, (long long)n, rel,
                rc->max_rel_rmse);
    CHECK(rel <= rc->max_rel_rmse);
    if (rc->type != GLIM_TYPE_F32)
        CHECK(rel > 0);   /* a lossy format must lose something: catches a to_f32 that copies */
    /* _ref accumulates in double and rounds once: within 2 ulp of the
     * double dot, relative to the sum of |products| */
    double dot = t->dot_f32(q, v, n);
    CHECK_NEAR(dot, dref, 2.5e-7 * dabs + 1e-30);
out:
    free(x);
    free(y);
    free(v);
    free(q);
}

static void test_roundtrip_all(void)
{
    static const int64_t sizes[] = {256, 512, 4096, 256 * 7};
    for (size_t c = 0; c < sizeof RT / sizeof RT[0]; c++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            roundtrip_one(&RT[c], sizes[s]);
    /* the 32-element formats also at their own block multiples */
    roundtrip_one(&RT[3], 32);
    roundtrip_one(&RT[3], 96);
    roundtrip_one(&RT[4], 32);
    roundtrip_one(&RT[4], 160);
}

/* Q8_0 and Q4_0 have a hard per-weight bound: half a step (Q4_0: one step
 * at the clamped end); zero blocks stay exactly zero. */
static void test_block_error_bounds(void)
{
    float x[QK_K], y[QK_K];
    struct block_q8_0 b8[QK_K / 32];
    struct block_q4_0 b4[QK_K / 32];
    for (int i = 0; i < QK_K; i++)
        x[i] = rng_gauss() * 3;
    quant_q8_0_from_f32(x, b8, QK_K);
    quant_q8_0_to_f32(b8, y, QK_K);
    int bad = 0;
    for (int i = 0; i < QK_K; i++)
        bad += fabsf(x[i] - y[i]) > 0.5f * fp16_to_f32(b8[i / 32].d) * 1.01f + 1e-7f;
    CHECK_EQ(bad, 0);
    quant_q4_0_from_f32(x, b4, QK_K);
    quant_q4_0_to_f32(b4, y, QK_K);
    bad = 0;
    for (int i = 0; i < QK_K; i++)
        bad += fabsf(x[i] - y[i]) > fabsf(fp16_to_f32(b4[i / 32].d)) * 1.01f + 1e-7f;
    CHECK_EQ(bad, 0);
    memset(x, 0, sizeof x);
    for (size_t c = 0; c < sizeof RT / sizeof RT[0]; c++) {
        const struct quant_traits *t = quant_traits((uint32_t)RT[c].type);
        uint8_t buf[QK_K * 4];
        t->from_f32(x, buf, QK_K);
        t->to_f32(buf, y, QK_K);
        bad = 0;
        for (int i = 0; i < QK_K; i++)
            bad += y[i] != 0.0f;
        CHECK_EQ(bad, 0);
    }
}

int main(void)
{
    RUN(test_traits_table);
    RUN(test_fp16_edges);
    RUN(test_fp16_exhaustive);
    RUN(test_bf16);
    RUN(test_q4_0_block);
    RUN(test_q8_0_block);
    RUN(test_k4_scale_packing);
    RUN(test_q4_k_block);
    RUN(test_q5_k_block);
    RUN(test_q6_k_block);
    RUN(test_roundtrip_all);
    RUN(test_block_error_bounds);
    return DONE();
}
