/* cli_util.c - helpers shared by the CLI commands (cli_util.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"

int mts_is_help(const char *s) { return !strcmp(s, "--help") || !strcmp(s, "-h"); }

int mts_cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "mantis %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

int mts_cli_exit(int rc) { return rc == MTS_OK ? 0 : rc == MTS_EMISMATCH ? 1 : 2; }

int mts_cli_finish(const char *cmd, int rc)
{
    /* A report that did not reach stdout (a full disk, a closed pipe) is a failure, not a success. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        mts_cli_error(cmd, "cannot write to standard output: %s", strerror(errno ? errno : EIO));
        return rc ? rc : 2;
    }
    return rc;
}

double mts_cli_loadavg(void)
{
    double l = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1.0;
        fclose(f);
    }
    return l;
}
