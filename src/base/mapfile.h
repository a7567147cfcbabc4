/*
 * mapfile.h — a whole file mapped read-only, with bounds-checked access.
 *
 * Weights are never written, so the mapping is PROT_READ and private: a stray
 * store faults instead of corrupting a shared model. An empty file maps to
 * (NULL, 0) without calling mmap (mmap of length 0 fails).
 * Open/close on one thread; the mapped bytes may be read by any thread.
 */
#ifndef GLIM_MAPFILE_H
#define GLIM_MAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct mapfile {
    const uint8_t *data;   /* owned mapping; NULL when size == 0 */
    size_t         size;   /* file size in bytes at open time */
};

int  mapfile_open(struct mapfile *m,        /* OUT: filled on success, zeroed on failure */
                  const char *path,         /* regular file to map read-only */
                  struct glim_err *err);    /* GLIM_EIO with the path and strerror */
void mapfile_close(struct mapfile *m);      /* unmaps; zeroed struct or NULL ok */

/* Pointer to [off, off + len) or NULL when that range is not inside the file. */
const void *mapfile_range(const struct mapfile *m, uint64_t off, uint64_t len);

#endif
