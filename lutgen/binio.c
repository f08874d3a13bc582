/* binio.c - CRC-32, whole-file reads and atomic writes (include/mantis/binio.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mantis/binio.h"

uint32_t mts_crc32(uint32_t crc, const void *data, size_t n)
{
    static uint32_t table[256];
    static int ready; /* benign race: every thread writes identical values */
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const uint8_t *p = data;
    crc = ~crc;
    while (n--) crc = table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

int mts_read_file(const char *path, uint8_t **buf, size_t *len, mts_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return mts_fail(err, MTS_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    while (b) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        uint8_t *nb = realloc(b, cap * 2);
        if (!nb) { free(b); b = NULL; break; }
        b = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!b) return mts_fail(err, MTS_ENOMEM, "%s: out of memory reading file", path);
    if (bad) {
        free(b);
        return mts_fail(err, MTS_EIO, "%s: read error", path);
    }
    *buf = b;
    *len = n;
    return MTS_OK;
}

int mts_write_atomic(const char *path, int n, const void *const *data, const size_t *len, mts_err *err)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        int rc = mts_fail(err, MTS_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    for (int i = 0; i < n; i++) {
        const uint8_t *p = data[i];
        size_t left = len[i];
        while (left) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                int rc = mts_fail(err, MTS_EIO, "%s: write failed: %s", path, strerror(errno));
                close(fd);
                unlink(tmp);
                free(tmp);
                return rc;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    int unflushed = fsync(fd) != 0;
    if (close(fd) != 0) unflushed = 1;
    if (unflushed) {
        int rc = mts_fail(err, MTS_EIO, "%s: cannot flush: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return rc;
    }
    if (rename(tmp, path) != 0) {
        int rc = mts_fail(err, MTS_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return rc;
    }
    free(tmp);
    return MTS_OK;
}
