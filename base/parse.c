/* parse.c - strict parsing of numbers and number lists (include/mantis/parse.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/parse.h"

static int digit(char c) { return c >= '0' && c <= '9'; }

int mts_parse_int(const char *s, long lo, long hi, long *out)
{
    /* strtol alone skips leading spaces and takes "+5": the whole string must be the number */
    if (!s || !(s[0] == '-' ? digit(s[1]) : digit(s[0]))) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int mts_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !digit(s[0])) return -1; /* strtoull takes "-1" (as 2^64-1), " 1" and "+1" */
    int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    if (hex && !strchr("0123456789abcdefABCDEF", s[2] ? s[2] : '.')) return -1; /* "0x" alone, "0x-1" */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, hex ? 16 : 10);
    if (*end || errno) return -1;
    *out = (uint64_t)v;
    return 0;
}

int mts_parse_hex32(const char *s, uint32_t *out)
{
    if (!s) return -1;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
    size_t n = strlen(s);
    if (n == 0 || n > 8 || strspn(s, "0123456789abcdefABCDEF") != n) return -1;
    *out = (uint32_t)strtoul(s, NULL, 16);
    return 0;
}

int mts_parse_double(const char *s, double lo, double hi, double *out)
{
    if (!s) return -1;
    const char *m = s + (s[0] == '-');
    /* a digit or '.' first (after an optional '-'): no spaces, no '+', no "inf"/"nan" */
    if (!(digit(m[0]) || (m[0] == '.' && digit(m[1]))) || strpbrk(s, "xX")) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

int mts_parse_int_list(const char *s, int flags, long lo, long hi, long *out, int max, int *bad)
{
    int n = 0;
    if (bad) *bad = 0;
    if (!s) return -1;
    for (const char *p = s;;) {
        const char *comma = strchr(p, ','), *e = comma ? comma : p + strlen(p);
        if (flags & MTS_LIST_SPACES) {
            while (p < e && (*p == ' ' || *p == '\t')) p++;
            while (e > p && (e[-1] == ' ' || e[-1] == '\t')) e--;
        }
        char item[32];
        size_t len = (size_t)(e - p);
        long v;
        if (bad) *bad = n;
        if (len == 0 || len >= sizeof item) return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        if (mts_parse_int(item, lo, hi, &v)) return -1;
        if (n == max) return -2;
        out[n++] = v;
        if (!comma) return n;
        p = comma + 1;
    }
}
