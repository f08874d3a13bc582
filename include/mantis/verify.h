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

/* What mts_rtl_lut_verified did. */
typedef struct mts_rtl_lut_report {
    mts_rtl_info info;          /* the design as detected (info.cache_hit: its Verilated model was cached) */
    int lut_cache_hit;          /* 1: the verified table came from the LUT cache */
    uint64_t cases, mismatches; /* of the verification that admitted the table (read back on a cache hit) */
    char lut_path[1100];        /* the cached table (a Mantis LUT file) */
    char json_path[1100];       /* its verification report (mantis verify --json format) */
} mts_rtl_lut_report;

/* A design's table as `mantis flow` makes it, in one call: opens the design
 * (mts_rtl_open: Verilated model built or taken from its cache), sweeps
 * it into a table (mts_rtl_lut: float LUT for significand and float
 * designs, the integer table for integer ones), writes it, and verifies the
 * design against the table read back (mts_verify_rtl with lut_path). Only a
 * bit-exact table is returned and cached, under $MANTIS_CACHE/lut keyed by
 * the model's content hash, kind and integer reading; a cached entry is
 * used when its table's checksum and its report hold (else rebuilt).
 * MTS_EMISMATCH: the design differs from its table (the report is kept, the
 * message names it); MTS_ENOTLUT: not LUT-representable (one pair in hex);
 * MTS_EINVAL: an accumulator design; else mts_rtl_open's errors. On success
 * *lut is the caller's (mts_lut_free). Not thread-safe against itself in one
 * process for the same design (separate processes are: entries are published
 * with a rename). */
int mts_rtl_lut_verified(const mts_rtl_opts *o, mts_lut *lut, mts_rtl_lut_report *rep, mts_err *err);

/* The same for an accumulator design (y = Q_acc(p + s), rtl.h): opened,
 * verified against the FMAq model (mts_verify_rtl: every code pair up to
 * 13 + 13 bits, else seeded samples) and the report cached the same way
 * (no table; rep->lut_path empty). rep->info.qprod / qacc are the design's
 * formats: accumulating with them (mts_arith_acc) runs the model the design
 * was just proved equal to. MTS_EMISMATCH when it differs (report kept),
 * MTS_EINVAL for a design of another kind. */
int mts_rtl_acc_verified(const mts_rtl_opts *o, mts_rtl_lut_report *rep, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
