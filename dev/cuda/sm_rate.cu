/*
 * sm_rate.cu — is an SM's share of the memory bandwidth a property of the SM (of its GPC), or
 * chance? The v5 pool split's trace (docs/PERFORMANCE.md, 2026-12-05) had each SM's warps end
 * together and the SMs 7-8 us apart on a ~50 us GEMV. If the slow SMs are the same ones run after
 * run, whatever addresses they read, and they sit in the larger GPCs, a split weighted per SM
 * could take that tail back; if not, nothing static can.
 *   gpc    which SMs share a GPC: the CTAs of a cluster always do (a cluster never spans GPCs),
 *          so clusters of 16, 8, 4 and 2 CTAs launched many times join their SMs' groups
 *          (union-find; a group may come out smaller than its GPC, never larger)
 *   rate   R runs of a read stream shaped like the FFN's gate/up GEMV (150 MB of 2304-byte
 *          records, 4 CTAs of 4 warps an SM, each warp two records in flight, an equal contiguous
 *          share a warp; run r hands the shares out rotated by r * 97 warps, so an SM reads other
 *          addresses each run): per SM the time from the run's first warp entry to its own last
 *          warp's end
 * Prints the groups, the SMs' ends (mean, spread over the runs), how well the even runs' per-SM
 * means predict the odd runs' (correlation: near 1, the SM; near 0, chance) and the mean end by
 * group size. A benchmark: prints, never asserts.
 *
 * Build and run (GPU machine): nvcc -arch=sm_90 -O3 -o /tmp/sm_rate dev/cuda/sm_rate.cu && /tmp/sm_rate [runs]
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"

#define REC 2304            /* a Q4_K T16 record: 16 rows x one super-block */
#define WARPS 4             /* a CTA, 4 CTAs an SM: v5's shape */
#define BYTES (150u << 20)  /* the gate/up pair of the 30B preset, ~150 MB */
#define MAX_SM 256

/* ---- gpc: each CTA notes its SM and stays a while, so the clusters spread over the SMs */
static __global__ void probe_kernel(unsigned *sm_of, unsigned spin_ns)
{
    if (threadIdx.x == 0)
        sm_of[blockIdx.x] = smid();
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < spin_ns) {
    }
}

static int uf_find(int *p, int x)
{
    while (p[x] != x)
        x = p[x] = p[p[x]];
    return x;
}

/* groups of SMs seen in one cluster; returns the number of SMs seen at all */
static int gpc_groups(int n_sm, int *parent, int *seen)
{
    for (int i = 0; i < n_sm; i++)
        parent[i] = i, seen[i] = 0;
    CHECK(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    /* 120 KB of shared memory each: one CTA an SM, so a cluster covers as many SMs as it has CTAs */
    CHECK(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 120 << 10));
    unsigned *d_sm;
    int most = 16 * n_sm;
    CHECK(cudaMalloc(&d_sm, most * sizeof(unsigned)));
    unsigned *h_sm = (unsigned *)malloc(most * sizeof(unsigned));
    const int sizes[] = {16, 8, 4, 2};
    for (int si = 0; si < 4; si++) {
        int cs = sizes[si];
        for (int rep = 0; rep < 24; rep++) {
            int clusters = (n_sm / cs) * (1 + rep % 3);   /* one wave, or waves that queue */
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeClusterDimension;
            attr[0].val.clusterDim.x = cs, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
            cfg.gridDim = dim3(clusters * cs);
            cfg.blockDim = dim3(32);
            cfg.dynamicSmemBytes = 120 << 10;
            cfg.attrs = attr, cfg.numAttrs = 1;
            if (cudaLaunchKernelEx(&cfg, probe_kernel, d_sm, (unsigned)(2000 + 700 * rep)) != cudaSuccess) {
                cudaGetLastError();
                printf("gpc: clusters of %d refused\n", cs);
                break;
            }
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(h_sm, d_sm, clusters * cs * sizeof(unsigned), cudaMemcpyDeviceToHost));
            for (int c = 0; c < clusters; c++)
                for (int j = 0; j < cs; j++) {
                    int a = (int)h_sm[c * cs], b = (int)h_sm[c * cs + j];
                    if (a >= n_sm || b >= n_sm)
                        continue;
                    seen[a] = seen[b] = 1;
                    parent[uf_find(parent, a)] = uf_find(parent, b);
                }
        }
    }
    cudaFree(d_sm);
    free(h_sm);
    int n_seen = 0;
    for (int i = 0; i < n_sm; i++)
        n_seen += seen[i];
    return n_seen;
}

/* ---- rate: warp w of n_w streams share (w + rot) % n_w of the records, two in flight, and stamps
 * its entry, end and SM */
static __device__ __forceinline__ uint4 ldw16(const void *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

static __global__ void __launch_bounds__(WARPS * 32, 4)
stream_kernel(const uint8_t *buf, long long n_rec, int rot, unsigned long long *stamp, unsigned *sink)
{
    int lane = threadIdx.x & 31;
    long long w = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5), n_w = (long long)gridDim.x * WARPS;
    long long s = (w + rot) % n_w, lo = s * n_rec / n_w, hi = (s + 1) * n_rec / n_w;
    unsigned long long t0 = now_ns();
    unsigned acc = 0;
    for (long long r = lo; r < hi; r += 2) {
        uint4 v[2][5];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const uint8_t *b = buf + (r + u < hi ? r + u : r) * REC;
#pragma unroll
            for (int c = 0; c < 4; c++)   /* the codes: 4 runs of 512 bytes */
                v[u][c] = ldw16(b + 512 * c + 16 * lane);
            v[u][4] = ldw16(b + 2048 + 16 * (lane & 15));   /* the 16 rows' headers */
        }
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int c = 0; c < 5; c++)
                acc ^= v[u][c].x + v[u][c].y * 3u + v[u][c].z * 5u + v[u][c].w * 7u;
    }
    if (acc == 0x9e3779b9u)   /* keeps the loads; practically never true */
        sink[0] = acc;
    if (lane == 0) {
        stamp[3 * w] = t0;
        stamp[3 * w + 1] = now_ns();
        stamp[3 * w + 2] = smid();
    }
}

static double corr(const double *a, const double *b, int n)
{
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++)
        ma += a[i] / n, mb += b[i] / n;
    for (int i = 0; i < n; i++) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0.0;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 20;
    if (runs < 2)
        runs = 2;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int n_sm = prop.multiProcessorCount;
    if (n_sm > MAX_SM) {
        fprintf(stderr, "%d SMs: at most %d\n", n_sm, MAX_SM);
        return 1;
    }
    printf("%s: %d SMs, L2 %d bytes\n", prop.name, n_sm, prop.l2CacheSize);

    static int parent[MAX_SM], seen[MAX_SM], group[MAX_SM], gsize[MAX_SM];
    int n_seen = gpc_groups(n_sm, parent, seen);
    int n_groups = 0;
    memset(gsize, 0, sizeof gsize);
    for (int i = 0; i < n_sm; i++)
        gsize[uf_find(parent, i)]++;
    for (int i = 0; i < n_sm; i++)
        group[i] = uf_find(parent, i);
    printf("gpc: %d SMs seen in clusters; groups (root: size):", n_seen);
    for (int i = 0; i < n_sm; i++)
        if (parent[i] == i) {
            printf(" %d:%d", i, gsize[i]);
            n_groups++;
        }
    printf("  (%d groups)\n", n_groups);

    long long n_rec = BYTES / REC;
    uint8_t *buf;
    CHECK(cudaMalloc(&buf, (size_t)n_rec * REC));
    CHECK(cudaMemset(buf, 0x5a, (size_t)n_rec * REC));
    int ctas = 4 * n_sm, n_w = ctas * WARPS;
    unsigned long long *d_st, *h_st = (unsigned long long *)malloc((size_t)n_w * 3 * sizeof *h_st);
    unsigned *d_sink;
    CHECK(cudaMalloc(&d_st, (size_t)n_w * 3 * sizeof *d_st));
    CHECK(cudaMalloc(&d_sink, 4));
    double *end = (double *)calloc((size_t)runs * n_sm, sizeof(double));   /* [run][sm] us */
    double span_sum = 0;
    for (int r = -1; r < runs; r++) {   /* r = -1: warm-up */
        stream_kernel<<<ctas, WARPS * 32>>>(buf, n_rec, r < 0 ? 0 : (r * 97) % n_w, d_st, d_sink);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        if (r < 0)
            continue;
        CHECK(cudaMemcpy(h_st, d_st, (size_t)n_w * 3 * sizeof *h_st, cudaMemcpyDeviceToHost));
        unsigned long long t0 = ~0ull, t1 = 0;
        for (int w = 0; w < n_w; w++) {
            t0 = h_st[3 * w] < t0 ? h_st[3 * w] : t0;
            t1 = h_st[3 * w + 1] > t1 ? h_st[3 * w + 1] : t1;
        }
        for (int w = 0; w < n_w; w++) {
            int sm = (int)h_st[3 * w + 2];
            double e = (double)(h_st[3 * w + 1] - t0) * 1e-3;
            if (sm < n_sm && e > end[(size_t)r * n_sm + sm])
                end[(size_t)r * n_sm + sm] = e;
        }
        span_sum += (double)(t1 - t0) * 1e-3;
    }
    double span = span_sum / runs;
    printf("rate: %d runs of %.1f MB, %d CTAs of %d warps: %.2f us a run (%.0f GB/s)\n", runs,
           n_rec * (double)REC / 1e6, ctas, WARPS, span, n_rec * (double)REC / (span * 1e3));

    double mean[MAX_SM], sd[MAX_SM], ev[MAX_SM], od[MAX_SM];
    double lo = 1e30, hi = 0;
    for (int s = 0; s < n_sm; s++) {
        double m = 0, q = 0, me = 0, mo = 0;
        for (int r = 0; r < runs; r++) {
            double e = end[(size_t)r * n_sm + s];
            m += e / runs;
            if (r & 1)
                mo += e / (runs / 2);
            else
                me += e / ((runs + 1) / 2);
        }
        for (int r = 0; r < runs; r++) {
            double d = end[(size_t)r * n_sm + s] - m;
            q += d * d / (runs - 1);
        }
        mean[s] = m, sd[s] = sqrt(q), ev[s] = me, od[s] = mo;
        lo = m < lo ? m : lo;
        hi = m > hi ? m : hi;
    }
    printf("rate: per-SM end, mean over runs: first %.2f, last %.2f us; correlation of the even and odd runs' "
           "per-SM means %.3f\n", lo, hi, corr(ev, od, n_sm));
    /* the mean end and its spread within groups of each size */
    for (int size = 1; size <= n_sm; size++) {
        double m = 0, mn = 1e30, mx = 0;
        int n = 0;
        for (int s = 0; s < n_sm; s++)
            if (gsize[group[s]] == size) {
                m += mean[s], n++;
                mn = mean[s] < mn ? mean[s] : mn;
                mx = mean[s] > mx ? mean[s] : mx;
            }
        if (n)
            printf("rate: SMs in groups of %2d: %3d SMs, end %.2f us (%.2f-%.2f)\n", size, n, m / n, mn, mx);
    }
    printf("rate: SM group end_mean end_sd\n");
    for (int s = 0; s < n_sm; s++)
        printf("sm %3d %3d %.2f %.2f\n", s, group[s], mean[s], sd[s]);
    cudaFree(buf);
    cudaFree(d_st);
    cudaFree(d_sink);
    free(h_st);
    free(end);
    return 0;
}
