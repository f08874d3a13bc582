/* csv.c - the CSV writer (include/mantis/csv.h). */
#include <math.h>
#include <string.h>

#include "mantis/csv.h"

void mts_csv_init(mts_csvw *w, FILE *f)
{
    w->f = f;
    w->col = 0;
}

static void sep(mts_csvw *w)
{
    if (w->col++) fputc(',', w->f);
}

void mts_csv_str(mts_csvw *w, const char *s)
{
    sep(w);
    if (!s || !*s) return;
    size_t n = strlen(s);
    if (!strpbrk(s, ",\"\r\n") && s[0] != ' ' && s[n - 1] != ' ') {
        fputs(s, w->f);
        return;
    }
    fputc('"', w->f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', w->f);
        fputc(*s, w->f);
    }
    fputc('"', w->f);
}

void mts_csv_num(mts_csvw *w, double v, const char *fmt)
{
    sep(w);
    if (isfinite(v)) fprintf(w->f, fmt ? fmt : "%.17g", v);
}

void mts_csv_int(mts_csvw *w, long long v)
{
    sep(w);
    fprintf(w->f, "%lld", v);
}

void mts_csv_uint(mts_csvw *w, unsigned long long v)
{
    sep(w);
    fprintf(w->f, "%llu", v);
}

void mts_csv_end(mts_csvw *w)
{
    fputc('\n', w->f);
    w->col = 0;
}

void mts_csv_row(mts_csvw *w, const char *const *fields, int n)
{
    for (int i = 0; i < n; i++) mts_csv_str(w, fields[i]);
    mts_csv_end(w);
}
