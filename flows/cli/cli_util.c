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

int mts_parse_hex32(const char *s, uint32_t *out)
{
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
    size_t n = strlen(s);
    if (n == 0 || n > 8 || strspn(s, "0123456789abcdefABCDEF") != n) return -1;
    *out = (uint32_t)strtoul(s, NULL, 16);
    return 0;
}

int mts_parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    /* strtol alone would skip leading spaces and take "+5": the whole string must be the number */
    if (!(s[0] == '-' ? s[1] >= '0' && s[1] <= '9' : s[0] >= '0' && s[0] <= '9')) return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int mts_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9') return -1; /* strtoull would take "-1", " 1" and "+1" */
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (*end || errno) return -1;
    *out = (uint64_t)v;
    return 0;
}

int mts_parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    if (!((s[0] >= '0' && s[0] <= '9') || s[0] == '.' || ((s[0] == '-' || s[0] == '+') && s[1] && s[1] != ' ')))
        return -1; /* no leading spaces; strtod's "inf"/"nan" spellings fail the range check or this */
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

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
