/* cli_util.c - helpers shared by the CLI commands (cli_util.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "mantis/fs.h"

int cli_is_help(const char *s) { return !strcmp(s, "--help") || !strcmp(s, "-h"); }

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "mantis %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

int cli_exit(int rc) { return mts_status_exit(rc); }

int cli_fail(const char *cmd, int code, const mts_err *err)
{
    cli_error(cmd, "%s", err->msg);
    return cli_exit(code);
}

int cli_output(const char *cmd, const char *out, void (*fn)(FILE *f, void *ctx), void *ctx)
{
    if (!out) return 0;
    if (!strcmp(out, "-")) {
        fn(stdout, ctx); /* a failed write shows in cli_finish */
        return 0;
    }
    mts_err err;
    int rc = mts_fs_write_stream(out, fn, ctx, &err);
    return rc ? cli_fail(cmd, rc, &err) : 0;
}

FILE *cli_text(const char *out1, const char *out2)
{
    return (out1 && !strcmp(out1, "-")) || (out2 && !strcmp(out2, "-")) ? stderr : stdout;
}

int cli_finish(const char *cmd, int rc)
{
    /* A report that did not reach stdout (a full disk, a closed pipe) is a failure, not a success. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(cmd, "cannot write to standard output: %s", strerror(errno ? errno : EIO));
        return rc ? rc : MTS_EXIT_ENV;
    }
    return rc;
}

double cli_loadavg(void)
{
    double l = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1.0;
        fclose(f);
    }
    return l;
}

int cli_idle_core(void)
{
    cpu_set_t set;
    double l = cli_loadavg();
    int cpus = sched_getaffinity(0, sizeof set, &set) ? (int)sysconf(_SC_NPROCESSORS_ONLN) : CPU_COUNT(&set);
    return l >= 0.0 && cpus > 0 && l < cpus - 0.5;
}
