/*
 * gguf.h — bounds-checked GGUF (v2, v3, little-endian) reader and a writer.
 *
 * The reader maps the file read-only and validates everything before use:
 * magic, version, counts against file size, string/array lengths, dimension
 * products, tensor types, data ranges, duplicates, alignment. Nothing is
 * copied except key and tensor names (NUL-terminated) and an offset table for
 * string arrays. A malformed file gives GLIM_EFORMAT with a one-line message
 * naming the file, the field and its byte offset.
 *
 * A gguf_file is read-only after gguf_open and may be shared by threads.
 */
#ifndef GLIM_GGUF_H
#define GLIM_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"

enum gguf_vtype {
    GGUF_VT_UINT8 = 0,
    GGUF_VT_INT8 = 1,
    GGUF_VT_UINT16 = 2,
    GGUF_VT_INT16 = 3,
    GGUF_VT_UINT32 = 4,
    GGUF_VT_INT32 = 5,
    GGUF_VT_FLOAT32 = 6,
    GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8,
    GGUF_VT_ARRAY = 9,
    GGUF_VT_UINT64 = 10,
    GGUF_VT_INT64 = 11,
    GGUF_VT_FLOAT64 = 12,
    GGUF_VT_COUNT
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

struct gguf_kv {
    const char     *key;       /* owned by the gguf_file, NUL-terminated */
    enum gguf_vtype type;
    enum gguf_vtype arr_type;  /* element type when type == ARRAY */
    uint64_t        arr_n;     /* element count when type == ARRAY */
    const uint8_t  *data;      /* borrowed: value bytes inside the mapping (for STRING: the u64 length) */
    uint64_t        offset;    /* file offset of the value (for messages) */
    const uint64_t *str_offs;  /* owned: for ARRAY of STRING, file offset of each element's length */
};

struct gguf_tensor {
    const char *name;            /* owned by the gguf_file */
    uint32_t    type;            /* enum glim_type */
    int         n_dims;
    int64_t     ne[GGUF_MAX_DIMS]; /* unused dims are 1 */
    int64_t     n_elems;
    uint64_t    offset;          /* relative to the data section */
    size_t      nbytes;
    const void *data;            /* borrowed: inside the read-only mapping */
};

struct gguf_file;

int  gguf_open(const char *path,          /* file to map read-only */
               struct gguf_file **out,    /* OUT: new handle; untouched on failure */
               struct glim_err *err);     /* OUT: code + message on failure; may be NULL */
/* Same over a caller-owned memory image (tests, fuzzing). buf must outlive the handle. */
int  gguf_open_mem(const void *buf, size_t size, const char *name,
                   struct gguf_file **out, struct glim_err *err);
void gguf_close(struct gguf_file *f);     /* NULL ok */

const char *gguf_path(const struct gguf_file *f);
uint32_t    gguf_version(const struct gguf_file *f);
size_t      gguf_alignment(const struct gguf_file *f);
size_t      gguf_data_offset(const struct gguf_file *f);
size_t      gguf_file_size(const struct gguf_file *f);

/* ---- metadata ---- */
int64_t               gguf_kv_count(const struct gguf_file *f);
const struct gguf_kv *gguf_kv_at(const struct gguf_file *f, int64_t i);
const struct gguf_kv *gguf_kv_find(const struct gguf_file *f, const char *key); /* NULL if absent */
const char           *gguf_vtype_name(enum gguf_vtype t);

/* Typed getters. Return GLIM_OK, GLIM_ENOTFOUND (absent; *out untouched) or
 * GLIM_EFORMAT (wrong type, with a message). Integers accept any integer
 * type whose value fits; floats accept F32/F64; bool accepts BOOL only. */
int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out, struct glim_err *err);
int gguf_get_i64(const struct gguf_file *f, const char *key, int64_t *out, struct glim_err *err);
int gguf_get_f32(const struct gguf_file *f, const char *key, float *out, struct glim_err *err);
int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out, struct glim_err *err);
/* string: (ptr, len) into the mapping, NOT NUL-terminated */
int gguf_get_str(const struct gguf_file *f, const char *key, const char **ptr, size_t *len,
                 struct glim_err *err);
/* array: the kv itself; the element accessors below read it */
int gguf_get_arr(const struct gguf_file *f, const char *key, const struct gguf_kv **out,
                 struct glim_err *err);

/* Scalar value of a kv (not an array) */
int gguf_kv_int(const struct gguf_kv *kv, int64_t *out);     /* GLIM_OK or GLIM_EFORMAT */
int gguf_kv_float(const struct gguf_kv *kv, double *out);
int gguf_kv_str(const struct gguf_kv *kv, const char **ptr, size_t *len);

/* Array elements; i < arr_n is the caller's job (checked: returns GLIM_ERANGE) */
int gguf_arr_int(const struct gguf_kv *kv, uint64_t i, int64_t *out);   /* integer or bool arrays */
int gguf_arr_float(const struct gguf_kv *kv, uint64_t i, double *out);  /* f32/f64 (and ints) */
int gguf_arr_str(const struct gguf_kv *kv, uint64_t i, const char **ptr, size_t *len);

/* ---- tensors ---- */
int64_t                   gguf_tensor_count(const struct gguf_file *f);
const struct gguf_tensor *gguf_tensor_at(const struct gguf_file *f, int64_t i);
const struct gguf_tensor *gguf_tensor_find(const struct gguf_file *f, const char *name);

/* ---- writer (quantize, mkmodel, test fixtures) ----
 * Keys and tensors are written in the order added. Tensor data is copied at
 * add time only when `copy` is true; otherwise the pointer must stay valid
 * until gguf_writer_write returns. */
struct gguf_writer;

struct gguf_writer *gguf_writer_new(void);       /* NULL on OOM */
void gguf_writer_free(struct gguf_writer *w);
void gguf_writer_set_alignment(struct gguf_writer *w, uint32_t align);   /* also writes general.alignment */
int gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_add_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v);
int gguf_writer_add_bool(struct gguf_writer *w, const char *key, bool v);
int gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *v);
int gguf_writer_add_arr_i32(struct gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
int gguf_writer_add_arr_f32(struct gguf_writer *w, const char *key, const float *v, uint64_t n);
int gguf_writer_add_arr_bool(struct gguf_writer *w, const char *key, const bool *v, uint64_t n);
int gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const char *const *v, uint64_t n);
/* copy a kv (any type, arrays included) from an open file */
int gguf_writer_add_kv_copy(struct gguf_writer *w, const struct gguf_kv *kv);
int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, int n_dims,
                           const int64_t *ne, const void *data, size_t nbytes, bool copy);
/* Tensor whose bytes are produced at write time (mkmodel's 17 GB files):
 * gen fills dst[0..nbytes) and returns GLIM_OK or an error code. */
typedef int (*gguf_tensor_gen_fn)(void *ud, void *dst, size_t nbytes, struct glim_err *err);
int gguf_writer_add_tensor_gen(struct gguf_writer *w, const char *name, uint32_t type, int n_dims,
                               const int64_t *ne, gguf_tensor_gen_fn gen, void *ud);
/* Write atomically (temp file + rename). progress may be NULL. */
int gguf_writer_write(struct gguf_writer *w, const char *path,
                      void (*progress)(void *ud, int64_t done, int64_t total), void *ud,
                      struct glim_err *err);

#endif
