/* cli_util.c - helpers shared by the CLI commands (cli_util.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* /proc/loadavg's 1-minute average (-1 if unknown) and tasks running now
 * (-1 if unknown). */
static void loadavg(double *l1, int *running)
{
    double l[3];
    int r = -1, total;
    *l1 = -1.0;
    *running = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    int got = fscanf(f, "%lf %lf %lf %d/%d", &l[0], &l[1], &l[2], &r, &total);
    fclose(f);
    if (got >= 1) *l1 = l[0];
    *running = got == 5 ? r : -1;
}

double cli_loadavg(void)
{
    double l;
    int r;
    loadavg(&l, &r);
    return l;
}

/* The tasks running now (/proc/loadavg's fourth field) less this
 * process's own (a library's threads may spin from before main: OpenBLAS's
 * yield in a loop), -1 if unknown. */
static int others_running(void)
{
    double l1;
    int running = -1, own = 0;
    loadavg(&l1, &running);
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[64], buf[512];
        if (e->d_name[0] == '.' || snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name) >= (int)sizeof path)
            continue;
        FILE *t = fopen(path, "r");
        if (!t) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, t);
        fclose(t);
        buf[n] = 0;
        const char *rp = strrchr(buf, ')'); /* the state follows the command name */
        own += rp && rp[1] == ' ' && rp[2] == 'R';
    }
    if (d) closedir(d);
    return running < 0 ? -1 : running - (own ? own : 1);
}

int cli_idle_core(void)
{
    cpu_set_t set;
    int others = others_running();
    /* the least of five looks 2 ms apart: the process that started this one
     * may still be running for a moment (a shell, subprocess.run) */
    for (int i = 0; i < 4 && others > 0; i++) {
        nanosleep(&(struct timespec){0, 2000000}, NULL);
        int r = others_running();
        if (r >= 0 && r < others) others = r;
    }
    int cpus = sched_getaffinity(0, sizeof set, &set) ? (int)sysconf(_SC_NPROCESSORS_ONLN) : CPU_COUNT(&set);
    return others >= 0 && cpus > 0 && others <= cpus - 2;
}
