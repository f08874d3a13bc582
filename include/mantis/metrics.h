/* metrics.h - error metrics of a multiplier from an exhaustive sweep.
 *
 * Float multipliers (any mts_mulop, so C models, LUTs and RTL alike) are
 * swept over all 2^(2M) mantissa pairs at the mid exponent pair (both
 * operands in [1, 2), unbiased exponent 0, positive), integer tables over all
 * 2^(2n) operand pairs. Each result is compared with a reference; the
 * definitions and the normalisation are in docs/metrics.md.
 *
 * Typical use (what `mantis metrics` does):
 *     mts_metrics m;
 *     if (mts_metrics_mulop(&op, MTS_REF_EXACT, &m, &err) != MTS_OK) ...
 *     mts_metrics_print_text(stdout, &m);   or   mts_metrics_print_json(stdout, &m);
 * and for a LUT file: mts_metrics_lut(&lut, MTS_REF_EXACT, &m, &err). */
#ifndef MANTIS_METRICS_H
#define MANTIS_METRICS_H

#include <stdint.h>
#include <stdio.h>
#include "mantis/lut.h"
#include "mantis/mul.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The reference a float result is compared with. */
typedef enum {
    MTS_REF_EXACT = 0, /* the infinitely precise product of the M-bit operands (exact in double) */
    MTS_REF_RNE = 1    /* that product rounded to nearest even at M bits: what an exact
                          multiplier of the format returns, so only the approximation counts */
} mts_metric_ref;

typedef struct mts_metrics {
    char name[64];       /* what was swept (mulop or LUT model name) */
    int is_int;          /* 1: integer table, 0: float multiplier */
    int bits;            /* int: operand width n; float: mantissa bits M */
    int is_signed;       /* int tables: two's complement operands */
    mts_metric_ref ref;  /* float: the reference used (int: always a*b) */
    uint64_t pairs;      /* operand pairs swept */
    uint64_t errors;     /* pairs whose result differs from the reference */
    uint64_t rel_pairs;  /* pairs with a non-zero reference (domain of MRED and max RE) */
    uint64_t nonfinite;  /* float: results that were inf or NaN (their distance is inf) */
    double error_rate;   /* errors / pairs */
    double med;          /* mean |approx - ref| */
    double norm;         /* normaliser of NMED: 2^(2n) (int), 4 (float, see docs) */
    double nmed;         /* med / norm */
    double mred;         /* mean |approx - ref| / |ref| over rel_pairs */
    double wce;          /* worst-case error: max |approx - ref| */
    double bias;         /* mean signed error: mean (approx - ref) */
    double max_re;       /* max |approx - ref| / |ref| over rel_pairs */
} mts_metrics;

/* Streaming accumulator: the one place the definitions live. Feed every
 * (approx, ref) pair with _add, then _finish with the NMED normaliser.
 * Sums are compensated (Neumaier), so the means do not depend on the order
 * of the sweep beyond the last bit. */
typedef struct mts_metrics_acc {
    uint64_t pairs, errors, rel_pairs, nonfinite, nonfinite_rel;
    double sum_abs, c_abs, sum_err, c_err, sum_rel, c_rel;
    double wce, max_re;
} mts_metrics_acc;

void mts_metrics_acc_init(mts_metrics_acc *a);
void mts_metrics_acc_add(mts_metrics_acc *a, double approx, double ref);
/* Fills every numeric field of *m from a (name/kind fields untouched);
 * with no pairs all metrics are 0. */
void mts_metrics_acc_finish(const mts_metrics_acc *a, double norm, mts_metrics *m);

/* Sweeps float multiplier op (M = op->fmt.M, 1..12: 2^(2M) calls) at the mid
 * exponent pair against reference ref. MTS_EINVAL for M outside 1..12 or a
 * format whose exponent range does not contain 0. */
int mts_metrics_mulop(const mts_mulop *op, mts_metric_ref ref, mts_metrics *m, mts_err *err);

/* Sweeps an integer table over all 2^(2n) pairs against the exact a*b of
 * the operand values. MTS_EINVAL if lut is not a well-formed MTS_LUT_INT. */
int mts_metrics_int_lut(const mts_lut *lut, mts_metrics *m, mts_err *err);

/* Any table: MTS_LUT_INT -> mts_metrics_int_lut (ref ignored); MTS_LUT_FLOAT
 * -> mts_metrics_mulop through AMSim (mts_mulop_lut). */
int mts_metrics_lut(const mts_lut *lut, mts_metric_ref ref, mts_metrics *m, mts_err *err);

/* Writes the metrics as aligned "key: value" lines, or as one JSON object
 * (keys as the struct fields; non-finite numbers as null) and a newline. */
void mts_metrics_print_text(FILE *f, const mts_metrics *m);
void mts_metrics_print_json(FILE *f, const mts_metrics *m);

#ifdef __cplusplus
}
#endif
#endif
