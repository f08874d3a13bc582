/* csv.h - the one CSV writer (RFC 4180) every table Mantis writes uses:
 * synth's result.csv and --csv, the flow's results.csv. A field is quoted
 * when it holds a comma, a double quote, CR or LF, or starts or ends with a
 * space; a quote inside is doubled. A number that is NaN or infinite is an
 * empty field (the documented token for "no value", as null is in JSON).
 * Rows end with "\n". */
#ifndef MANTIS_CSV_H
#define MANTIS_CSV_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mts_csvw {
    FILE *f;
    int col; /* fields written in the current row */
} mts_csvw;

void mts_csv_init(mts_csvw *w, FILE *f);
/* A text field (NULL: empty). */
void mts_csv_str(mts_csvw *w, const char *s);
/* A number printed with fmt (one double conversion; NULL: "%.17g");
 * NaN and +-inf: an empty field. */
void mts_csv_num(mts_csvw *w, double v, const char *fmt);
void mts_csv_int(mts_csvw *w, long long v);
void mts_csv_uint(mts_csvw *w, unsigned long long v);
/* Ends the row. */
void mts_csv_end(mts_csvw *w);
/* A whole row of text fields (a header): n fields, then the row's end. */
void mts_csv_row(mts_csvw *w, const char *const *fields, int n);

#ifdef __cplusplus
}
#endif
#endif
