/* fs.c - whole-file reads, atomic writes, directories, paths and the cache
 * root (include/mantis/fs.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "mantis/fs.h"
#include "mantis/proc.h"

/* Opens path for reading only if it is a regular file: O_NONBLOCK so that a
 * fifo without a writer cannot block the open, then fstat decides. */
static int open_regular(const char *path, int *fdp, mts_err *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return mts_fail(err, MTS_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = mts_fail(err, MTS_EIO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return mts_fail(err, MTS_EIO, "%s: not a regular file (%s); refusing to read it", path,
                         S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a fifo"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket"
                                                                                           : "a special file");
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *fdp = fd;
    return MTS_OK;
}

int mts_fs_read(const char *path, uint8_t **buf, size_t *len, mts_err *err)
{
    int fd = -1, rc = open_regular(path, &fd, err);
    if (rc) return rc;
    struct stat st;
    size_t cap = fstat(fd, &st) == 0 && st.st_size > 0 ? (size_t)st.st_size : 4096, n = 0;
    uint8_t *b = malloc(cap + 1); /* +1: the NUL after the data */
    int bad = 0;
    while (b) {
        if (n == cap) { /* the file grew while we read it */
            uint8_t *nb = cap > SIZE_MAX / 4 ? NULL : realloc(b, cap * 2 + 1);
            if (!nb) { free(b); b = NULL; break; }
            b = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, b + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) { bad = errno; break; }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (!b) return mts_fail(err, MTS_ENOMEM, "%s: out of memory reading file", path);
    if (bad) {
        free(b);
        return mts_fail(err, MTS_EIO, "%s: read error: %s", path, strerror(bad));
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return MTS_OK;
}

int mts_fs_check_output(const char *path, mts_err *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return mts_fail(err, MTS_EIO, "%s: exists and is not a regular file (%s); refusing to replace it", path,
                        S_ISDIR(st.st_mode) ? "a directory" : "a device, fifo or socket");
    return MTS_OK;
}

/* Fault injection for tests (docs/reliability.md): MANTIS_FAULT_WRITE=N makes
 * the Nth write, fsync or rename of this process's atomic writes fail with
 * ENOSPC ("N:eio": EIO; "N:kill": write half the bytes, then SIGKILL, as a
 * kill in the middle of a write would). Zero cost when unset. */
enum { FAULT_NONE, FAULT_FAIL, FAULT_KILL };
static int fault_now(void)
{
    static long count, at = -1;
    static int err_no, kill_it;
    if (at < 0) {
        const char *e = getenv("MANTIS_FAULT_WRITE");
        char *end = NULL;
        at = e && *e ? strtol(e, &end, 10) : 0;
        if (at < 0) at = 0;
        err_no = end && !strcmp(end, ":eio") ? EIO : ENOSPC;
        kill_it = end && !strcmp(end, ":kill");
    }
    if (at == 0 || ++count != at) return FAULT_NONE;
    errno = err_no;
    return kill_it ? FAULT_KILL : FAULT_FAIL;
}

static void fault_kill(void)
{
    raise(SIGKILL);
    _exit(137); /* not reached */
}

int mts_fs_write_atomic(const char *path, int n, const void *const *data, const size_t *len, mts_err *err)
{
    int rc = mts_fs_check_output(path, err);
    if (rc) return rc;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    /* O_EXCL: never write through something already lying at the temp name */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        rc = mts_fail(err, mts_status_of_errno(e), "%s: cannot create: %s", tmp, strerror(e));
        free(tmp);
        return rc;
    }
    const char *failed = NULL;
    for (int i = 0; i < n && !failed; i++) {
        const uint8_t *p = data[i];
        size_t left = len[i];
        while (left) {
            int fault = fault_now();
            if (fault == FAULT_KILL) {
                if (write(fd, p, left / 2) < 0) { /* half the bytes, then die: a torn temp file */ }
                fault_kill();
            }
            ssize_t w = fault ? -1 : write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                if (w == 0) errno = ENOSPC;
                failed = "write failed";
                break;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    int fault = failed ? FAULT_NONE : fault_now();
    if (fault == FAULT_KILL) fault_kill();
    if (!failed && (fault || fsync(fd) != 0)) failed = "cannot flush";
    int cerr = errno;
    if (close(fd) != 0 && !failed) failed = "cannot flush", cerr = errno;
    fault = failed ? FAULT_NONE : fault_now();
    if (fault == FAULT_KILL) fault_kill();
    if (!failed && (fault || rename(tmp, path) != 0)) failed = "cannot rename into place", cerr = errno;
    if (failed) {
        rc = mts_fail(err, mts_status_of_errno(cerr), "%s: %s: %s", path, failed, strerror(cerr));
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
            return mts_fail(err, mts_status_of_errno(errno), "%s: cannot create: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) && errno != EEXIST)
        return mts_fail(err, mts_status_of_errno(errno), "%s: cannot create: %s", buf, strerror(errno));
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

long long mts_fs_free_bytes(const char *path)
{
    struct statvfs v;
    if (statvfs(path, &v)) return -1;
    return (long long)(geteuid() == 0 ? v.f_bfree : v.f_bavail) * (long long)v.f_frsize;
}

int mts_fs_clean_stale_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        /* NAME.tmp.PID, as mts_fs_write_atomic names its temp files */
        const char *t = strstr(e->d_name, ".tmp.");
        if (!t) continue;
        while (strstr(t + 1, ".tmp.")) t = strstr(t + 1, ".tmp.");
        char *end;
        long pid = strtol(t + 5, &end, 10);
        if (t[5] < '1' || t[5] > '9' || *end || pid <= 0 || pid == (long)getpid()) continue;
        if (mts_proc_alive(pid)) continue; /* its writer may still be running */
        char p[4096];
        if (mts_fs_pathf(p, sizeof p, "%s/%s", dir, e->d_name) == 0 && unlink(p) == 0) removed++;
    }
    closedir(d);
    return removed;
}
