/* synth_util.c - small helpers of the synth flow. */
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

#include "mantis/hash.h"
#include "mantis/proc.h"
#include "mantis/fs.h"
#include "mantis/binio.h"
#include "synth_int.h"

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

int mts_bprintf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}
