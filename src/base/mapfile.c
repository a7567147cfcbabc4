/* mapfile.c — read-only whole-file mapping (see mapfile.h). */
#include "mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int mapfile_open(struct mapfile *m, const char *path, struct glim_err *err)
{
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return glim_fail(err, GLIM_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return glim_fail(err, GLIM_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return glim_fail(err, GLIM_EIO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return glim_fail(err, GLIM_EIO, "%s: file too large to map", path);
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) {
        close(fd);
        return GLIM_OK;
    }
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);   /* the mapping keeps the file alive */
    if (p == MAP_FAILED)
        return glim_fail(err, GLIM_EIO, "%s: cannot map %zu bytes: %s", path, size, strerror(e));
    m->data = p;
    m->size = size;
    return GLIM_OK;
}

void mapfile_close(struct mapfile *m)
{
    if (!m)
        return;
    if (m->data)
        munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

const void *mapfile_range(const struct mapfile *m, uint64_t off, uint64_t len)
{
    if (off > m->size || len > m->size - off)
        return NULL;
    return m->data ? m->data + off : NULL;
}
