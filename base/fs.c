/* fs.c - whole-file reads, atomic writes, directories, paths and the cache
 * root (include/mantis/fs.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mantis/fs.h"

int mts_fs_read(const char *path, uint8_t **buf, size_t *len, mts_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return mts_fail(err, MTS_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap + 1); /* +1: the NUL after the data */
    while (b) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        uint8_t *nb = realloc(b, cap * 2 + 1);
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
    b[n] = 0;
    *buf = b;
    *len = n;
    return MTS_OK;
}

int mts_fs_write_atomic(const char *path, int n, const void *const *data, const size_t *len, mts_err *err)
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

int mts_fs_write_text(const char *path, const char *text, mts_err *err)
{
    const void *d[1] = {text};
    size_t l[1] = {strlen(text)};
    return mts_fs_write_atomic(path, 1, d, l, err);
}

int mts_fs_copy(const char *src, const char *dst, mts_err *err)
{
    uint8_t *buf;
    size_t len;
    int rc = mts_fs_read(src, &buf, &len, err);
    if (rc) return rc;
    const void *d[1] = {buf};
    rc = mts_fs_write_atomic(dst, 1, d, &len, err);
    free(buf);
    return rc;
}

int mts_fs_write_stream(const char *path, void (*fn)(FILE *f, void *ctx), void *ctx, mts_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    fn(m, ctx);
    int rc = fclose(m) ? mts_fail(err, MTS_ENOMEM, "%s: out of memory", path) : MTS_OK;
    const void *parts[1] = {buf};
    if (!rc) rc = mts_fs_write_atomic(path, 1, parts, &len, err);
    free(buf);
    return rc;
}

int mts_fs_mkdirs(const char *path, mts_err *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return mts_fail(err, MTS_EINVAL, "%s: path too long", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) && errno != EEXIST)
            return mts_fail(err, MTS_EIO, "%s: cannot create: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) && errno != EEXIST) return mts_fail(err, MTS_EIO, "%s: cannot create: %s", buf, strerror(errno));
    return MTS_OK;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int mts_fs_rmtree(const char *path) { return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) ? -1 : 0; }

int mts_fs_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

int mts_fs_pathf(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

int mts_fs_cache_dir(const char *sub, char *buf, size_t n, mts_err *err)
{
    const char *env;
    int rc;
    if ((env = getenv("MANTIS_CACHE")) && *env) rc = mts_fs_pathf(buf, n, "%s/%s", env, sub);
    else if ((env = getenv("XDG_CACHE_HOME")) && *env) rc = mts_fs_pathf(buf, n, "%s/mantis/%s", env, sub);
    else if ((env = getenv("HOME")) && *env) rc = mts_fs_pathf(buf, n, "%s/.cache/mantis/%s", env, sub);
    else rc = mts_fs_pathf(buf, n, "/tmp/mantis-cache/%s", sub);
    return rc ? mts_fail(err, MTS_EINVAL, "cache directory path too long (over %zu characters)", n - 1) : MTS_OK;
}
