/* verify.h - `mantis verify`: is a Verilog design (rtl.h) bit-exact with the
 * LUT swept from it (through AMSim) and with a C model? The comparisons are
 * exhaustive where the operand space allows and seeded otherwise; every
 * mismatch is counted, the first few are listed TestFloat-style, and a JSON
 * report can be written for the flow (docs/rtl.md, "Verification"). */
#ifndef MANTIS_VERIFY_H
#define MANTIS_VERIFY_H

#include <stdint.h>
#include <stdio.h>
#include "mantis/rtl.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mts_verify_opts {
    const char *model;      /* --mul: also compare with this C model; NULL: none.
                               INT designs accept "exact" (mts_intmul_exact). */
    const char *lut_path;   /* --lut: compare with this table file instead of one swept from the design */
    int max_report;         /* mismatch lines listed per comparison (all are counted); < 0: 20 */
    uint64_t seed;          /* ACC formats above 13+13 bits: seeded random pairs */
    uint64_t samples;       /* how many (0: 2^22) */
    FILE *out;              /* the TestFloat-style report; NULL: none */
    const char *json_path;  /* machine-readable report, written atomically; NULL: none */
    FILE *json_out;         /* non-NULL: the same JSON written to this stream (the CLI's "--json -") */
    const char *design;     /* the file name shown in reports (NULL: the top module) */
} mts_verify_opts;

typedef struct mts_verify_result {
    int comparisons;        /* comparisons run */
    uint64_t cases;         /* operand pairs compared, over all comparisons */
    uint64_t mismatches;    /* pairs that differed */
    int not_representable;  /* FLOAT design refused as a LUT (its mantissa depends on the exponents) */
} mts_verify_result;

/* Compares the design with its LUT (+ AMSim) and, if opts->model, with a C
 * model (docs/rtl.md, "Verification"):
 *   SIG, FLOAT: every mantissa pair at a grid of exponent pairs covering the
 *     normal range and every overflow/underflow boundary (carry and below-one
 *     adjustments included), both sign combinations, plus all pairs of
 *     zero, subnormal, inf, NaN and boundary operands;
 *   INT: every operand pair, per-call evaluation against the table written
 *     to a file and read back;
 *   ACC: against mts_fmaq, every code pair when 2+E+M <= 13 for both
 *     operands, else opts->samples seeded random pairs.
 * Returns MTS_OK when the comparisons ran (res says whether they agreed),
 * or an error when they could not run. */
int mts_verify_rtl(mts_rtl *r, const mts_verify_opts *opts, mts_verify_result *res, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
