/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader and the code that reads
 * a GGUF's metadata first: the tokenizer vocabulary and the model loader.
 * A model file is untrusted input: whatever its bytes, loading must end in an
 * error return, never a crash, an out-of-bounds read or a leak.
 *
 * Byte 0 picks the mode, the rest is the file image:
 *   mode 0  gguf_open_mem, then every accessor over every key and tensor;
 *           each tensor's bytes must lie inside the image.
 *   mode 1  mode 0, then tok_vocab_from_gguf and an encode/decode round.
 *   mode 2  the image as a file (memfd) through glim_model_load on the
 *           reference CPU kernels: hyperparameters, tensors, vocabulary.
 * Seeds (byte 0 = mode, then a small real model):
 *   glim mkmodel --arch muse-glimmer --dim 32 --layers 2 --heads 2 --kv-heads 1 --head-dim 16 \
 *       --ffn 64 --window 8 --vocab 64 --ctx 64 --type Q8_0 -o m.gguf
 *   for m in 0 1 2; do (printf "\\x0$m"; cat m.gguf) > seeds/m_$m; done
 * Run: build-fuzz/fuzz/fuzz_gguf -max_len=110000 -timeout=20 corpus seeds
 * (2026-12-02: 13.2 M runs in 600 s from muse-glimmer Q8_0/F32 seeds, then 300 s more with a
 * llama Q8_0 seed carrying the stories260K vocabulary: no finding.)
 */
#define _GNU_SOURCE   /* memfd_create */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "glim.h"
#include "gguf/gguf.h"
#ifdef GLIM_HAVE_TEXT
#include "text/tok.h"
#endif

/* read every value through the public accessors (arrays: the first 64 elements) */
static void walk(const struct gguf_file *f, size_t size)
{
    for (int64_t i = 0; i < gguf_kv_count(f); i++) {
        const struct gguf_kv *kv = gguf_kv_at(f, i);
        if (!kv || !kv->key || gguf_kv_find(f, kv->key) == NULL)
            abort();
        int64_t iv;
        double dv;
        const char *s;
        size_t n;
        (void)gguf_kv_int(kv, &iv);
        (void)gguf_kv_float(kv, &dv);
        if (gguf_kv_str(kv, &s, &n) == GLIM_OK && n)   /* ASan checks the string's bounds */
            (void)(((const volatile char *)s)[0] + ((const volatile char *)s)[n - 1]);
        if (kv->type == GGUF_VT_ARRAY)
            for (uint64_t k = 0; k < kv->arr_n && k < 64; k++) {
                (void)gguf_arr_int(kv, k, &iv);
                (void)gguf_arr_float(kv, k, &dv);
                (void)gguf_arr_str(kv, k, &s, &n);
            }
    }
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor *t = gguf_tensor_at(f, i);
        if (!t || !t->name || gguf_tensor_find(f, t->name) == NULL)
            abort();
        if (gguf_data_offset(f) + t->offset + t->nbytes > size)
            abort();   /* the reader must have refused a tensor outside the file */
        if (t->nbytes)   /* touch the first and last byte: ASan checks the bounds */
            (void)(((const volatile uint8_t *)t->data)[0] + ((const volatile uint8_t *)t->data)[t->nbytes - 1]);
    }
}

#ifdef GLIM_HAVE_TEXT
static void vocab(const struct gguf_file *f)
{
    struct tok_vocab *v = NULL;
    if (tok_vocab_from_gguf(f, &v, NULL) != GLIM_OK)
        return;
    static const char text[] = "Hello <|eot|> world\n\t12345 ÿ€";
    struct tok_ids ids;
    struct strbuf sb;
    tok_ids_init(&ids);
    strbuf_init(&sb);
    if (tok_encode(v, text, sizeof text - 1, TOK_PARSE_SPECIAL, &ids, NULL) == GLIM_OK)
        (void)tok_decode(v, ids.data, ids.n, 0, &sb);
    tok_ids_clear(&ids);
    strbuf_clear(&sb);
    tok_vocab_free(v);
}
#endif

static void load_model(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz.gguf", 0);
    if (fd < 0)
        abort();   /* setup, not input */
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0)
            abort();
        done += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    struct glim_model_params p;
    glim_model_params_init(&p);
    p.n_threads = 1;
    p.kernels = GLIM_KERNELS_REF;
    p.device = "cpu";
    struct glim_model *m = NULL;
    struct glim_err err = {0};
    if (glim_model_load(path, &p, &m, &err) == GLIM_OK)
        glim_model_free(m);
    else if (getenv("FUZZ_GGUF_VERBOSE"))   /* checking a seed corpus: why a file was refused */
        fprintf(stderr, "fuzz_gguf: %s\n", err.msg);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 3;
    data++, size--;
    if (mode == 2) {
        load_model(data, size);
        return 0;
    }
    struct gguf_file *f = NULL;
    if (gguf_open_mem(data, size, "fuzz", &f, NULL) != GLIM_OK)
        return 0;
    walk(f, size);
#ifdef GLIM_HAVE_TEXT
    if (mode == 1)
        vocab(f);
#endif
    gguf_close(f);
    return 0;
}
