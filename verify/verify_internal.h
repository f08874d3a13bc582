/* verify_internal.h - internals of `mantis verify` shared by verify/verify*.c
 * (not public API; that is include/mantis/verify.h): comparisons, per-thread
 * mismatch sinks and the TestFloat-style report. Work is split over
 * MTS_PAR_WORKERS threads (mts_par_run), one per RTL model instance. */
#ifndef MANTIS_VERIFY_INTERNAL_H
#define MANTIS_VERIFY_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "mantis/par.h"
#include "mantis/rtl.h"
#include "mantis/verify.h"

#define VFY_MAX_CMP 4

/* One listed mismatch: operands and both results as hex codes, a class
 * ("special", "overflow", "underflow", "sign", "exponent", "mantissa", ...)
 * and the report line. */
typedef struct vfy_line {
    char a[24], b[24], dut[24], ref[24];
    char cls[16];
    char text[320];
} vfy_line;

/* A thread's collector for one comparison: counts everything, keeps the
 * first `cap` lines. Merged in thread order, so reports are deterministic. */
typedef struct vfy_sink {
    uint64_t cases, mismatches;
    int n, cap;
    vfy_line *line;
} vfy_sink;

typedef struct vfy_cmp {
    char name[96];
    uint64_t cases, mismatches;
    vfy_sink all; /* merged: counts plus the first max_report lines */
} vfy_cmp;

typedef struct vfy_ctx {
    mts_rtl *r;
    const mts_rtl_info *in;
    const mts_verify_opts *o;
    int max_report;
    vfy_cmp cmp[VFY_MAX_CMP];
    int ncmp;
    int not_repr;
    char note[600]; /* not-representable explanation */
} vfy_ctx;

/* verify_report.c */
int vfy_sink_init(vfy_sink *s, int cap);
void vfy_sink_free(vfy_sink *s);
/* Counts a mismatch; returns the slot to fill with its line while under the
 * cap, else NULL (so only listed mismatches are formatted). */
static inline vfy_line *vfy_sink_miss(vfy_sink *s)
{
    s->mismatches++;
    return s->n < s->cap ? &s->line[s->n++] : NULL;
}
/* Starts comparison `name`; returns its index or -1 when full. */
int vfy_cmp_begin(vfy_ctx *v, const char *name);
/* Adds a thread's sink into comparison i (and empties the sink). */
void vfy_cmp_merge(vfy_ctx *v, int i, vfy_sink *s);
/* Prints comparison i's listed lines and its count line. */
void vfy_cmp_report(vfy_ctx *v, int i);
/* TestFloat-style split of a (1,E,M) code: "3F80 +7F.00". */
void vfy_fmt_fcode(char *buf, size_t n, const mts_format *f, uint32_t code);
/* Split of an fmaq.h Q code: "0A3F +0A.3F", "Z-" zero flag, "NaN". */
void vfy_fmt_qcode(char *buf, size_t n, const mts_qfmt *q, uint32_t code);
/* Writes the JSON report to opts->json_out and/or, atomically, opts->json_path. */
int vfy_write_json(const vfy_ctx *v, mts_err *err);

/* verify_mul.c: SIG and FLOAT designs. */
int vfy_mul(vfy_ctx *v, mts_err *err);
/* verify_int.c */
int vfy_int(vfy_ctx *v, mts_err *err);
/* verify_acc.c */
int vfy_acc(vfy_ctx *v, mts_err *err);

/* Exponent pairs (unbiased) of the grid for format f: the normal range,
 * both extremes, and every sum where overflow or underflow can start,
 * including carries (+1) and below-one products (down to -(2M+1)).
 * Returns the count (at most max). */
int vfy_exp_grid(const mts_format *f, int (*pairs)[2], int max);

#endif
