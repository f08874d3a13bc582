/* synth_util.c - small helpers of the synth flow: hashing, directories,
 * running external tools with their output kept in a log. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mantis/binio.h"
#include "synth_int.h"

uint64_t mts_fnv1a(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

int mts_mkdirs(const char *path, mts_err *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return mts_fail(err, MTS_EINVAL, "%s: path too long", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return mts_fail(err, MTS_EIO, "%s: cannot create: %s", buf, strerror(errno));
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

int mts_rm_rf(const char *path)
{
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void mts_shq(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    if (n + 1 < cap) buf[n++] = '\'';
    for (; *s && n + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(buf + n, "'\\''", 4);
            n += 4;
        } else {
            buf[n++] = *s;
        }
    }
    if (n + 1 < cap) buf[n++] = '\'';
    buf[n < cap ? n : cap - 1] = 0;
}

int mts_run_logged(const char *cmd, const char *log_path)
{
    size_t n = strlen(cmd) + strlen(log_path) * 4 + 64;
    char *full = malloc(n);
    if (!full) return 127;
    snprintf(full, n, "( %s ) > ", cmd);
    mts_shq(full, n, log_path);
    strncat(full, " 2>&1 < /dev/null", n - strlen(full) - 1);
    int st = system(full);
    free(full);
    if (st == -1) return 127;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int mts_log_first(const char *log_path, const char *const *markers, char *line, size_t cap)
{
    FILE *f = fopen(log_path, "r");
    if (!f) return 0;
    char buf[2048];
    int found = 0;
    while (!found && fgets(buf, sizeof buf, f))
        for (int i = 0; markers[i]; i++)
            if (strstr(buf, markers[i])) {
                buf[strcspn(buf, "\r\n")] = 0;
                snprintf(line, cap, "%s", buf);
                found = 1;
                break;
            }
    fclose(f);
    return found;
}

int mts_tool_exists(const char *tool)
{
    const char *path = getenv("PATH");
    if (!path) return 0;
    char dir[4096];
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        if (n && n < sizeof dir - 256) {
            snprintf(dir, sizeof dir, "%.*s/%s", (int)n, p, tool);
            if (access(dir, X_OK) == 0) return 1;
        }
        p += n;
        if (*p == ':') p++;
    }
    return 0;
}

int mts_write_text(const char *path, const char *text, mts_err *err)
{
    const void *d[1] = {text};
    size_t l[1] = {strlen(text)};
    return mts_write_atomic(path, 1, d, l, err);
}

int mts_bprintf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}
