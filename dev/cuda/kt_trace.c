/*
 * kt_trace.c — a kernel timeline without nsys (the GPU machine has none): a CUPTI activity
 * tracer loaded into any CUDA program with LD_PRELOAD. Every kernel (graph nodes included) is
 * recorded with its GPU start and end; at exit the records go to $KT_TRACE_OUT (default
 * kt_trace.csv) in the columns dev/cuda/timeline.py reads from `nsys stats -r cuda_gpu_trace`.
 * CONCURRENT_KERNEL records do not serialize the kernels, so PDL overlap stays visible.
 *
 *   cc -O2 -shared -fPIC -o libkt.so dev/cuda/kt_trace.c -I$CUPTI/include -L$CUPTI/lib64 -lcupti
 *   KT_TRACE_OUT=tl.csv LD_PRELOAD=$PWD/libkt.so glim bench ... -p 0 -n 48 -r 1
 *   python3 dev/cuda/timeline.py tl.csv
 *
 * A bench tool (dev/), not part of glim: it links CUPTI, which Debian does not package for us.
 */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KT_BUF (8u << 20)

static FILE *kt_out;
static unsigned long long kt_dropped;

#ifndef KT_KREC   /* the newest kernel record of the CUPTI at hand (gpu_bench.sh greps it) */
#define KT_KREC CUpti_ActivityKernel9
#endif

static void kt_fini(void);

static void CUPTIAPI kt_request(uint8_t **buf, size_t *size, size_t *max_records)
{
    static int registered;
    if (!registered) {   /* after the CUDA runtime's own exit handler: so this one runs first */
        registered = 1;
        atexit(kt_fini);
    }
    *buf = aligned_alloc(8, KT_BUF);
    *size = *buf ? KT_BUF : 0;
    *max_records = 0;
}

/* names are C++-mangled: timeline.py shortens them; quote them for the CSV */
static void kt_name(FILE *f, const char *n)
{
    fputc('"', f);
    for (; n && *n; n++)
        fputc(*n == '"' ? '\'' : *n, f);
    fputc('"', f);
}

static void CUPTIAPI kt_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    while (kt_out && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            continue;
        const KT_KREC *k = (const KT_KREC *)r;
        fprintf(kt_out, "%llu,%llu,%u,", (unsigned long long)k->start, (unsigned long long)(k->end - k->start),
                k->streamId);
        kt_name(kt_out, k->name);
        fputc('\n', kt_out);
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
        kt_dropped += dropped;
    free(buf);
}

static void kt_fini(void)
{
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (kt_out) {
        fclose(kt_out);
        kt_out = NULL;
    }
    if (kt_dropped)
        fprintf(stderr, "kt_trace: %llu records dropped\n", kt_dropped);
}

__attribute__((constructor)) static void kt_init(void)
{
    const char *path = getenv("KT_TRACE_OUT");
    kt_out = fopen(path ? path : "kt_trace.csv", "w");
    if (!kt_out) {
        perror("kt_trace");
        return;
    }
    fprintf(kt_out, "Start (ns),Duration (ns),Strm,Name\n");
    if (cuptiActivityRegisterCallbacks(kt_request, kt_complete) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        fprintf(stderr, "kt_trace: CUPTI activity tracing unavailable\n");
        return;
    }
}
