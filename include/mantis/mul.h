/* mul.h - floating-point multipliers: the special-case rules, the shared
 * significand-to-float packing, the C models and their registry.
 *
 * A multiplier in Mantis is a function on FP32 bit patterns in a format
 * (1,E,M). Every path (C models, AMSim, LUTs, RTL wrappers, GPU) uses the two
 * functions below for what is not the significand product, so the rules live
 * in one place (docs/arithmetic.md):
 *   1. operands: NaN -> NaN; subnormal -> zero; mantissa truncated to M bits;
 *   2. NaN in -> 0x7FC00000; inf x 0 -> 0x7FC00000; inf x finite -> signed inf;
 *      zero x finite -> signed zero (sign = xor of signs);
 *   3. the significand product (any value in [0,4), possibly below 1.0 or 0)
 *      is normalised and rounded per the model's output precision, and only
 *      then is the exponent judged: above emax -> signed inf (ieee formats) or
 *      +-max finite (saturating formats); below emin -> signed zero. */
#ifndef MANTIS_MUL_H
#define MANTIS_MUL_H

#include <stdint.h>
#include "mantis/format.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Output precision of a significand product. */
typedef enum {
    MTS_OUT_RNE = 0,  /* rounded to nearest even at M bits */
    MTS_OUT_RTZ = 1,  /* truncated (toward zero) at M bits */
    MTS_OUT_FULL = 2  /* every bit the approximation produces (RTZ past 23) */
} mts_outprec;

/* Classification of an operand pair after rule 1. */
typedef struct mts_mul_in {
    uint32_t sign;  /* result sign, 0 or 0x80000000 */
    int e;          /* sum of unbiased exponents of the finite non-zero operands */
    uint32_t ma;    /* a's mantissa fraction, M bits (right aligned) */
    uint32_t mb;    /* b's mantissa fraction, M bits */
    uint32_t special; /* if nonzero: the final result, rule 2 decided it */
} mts_mul_in;

/* Rule 1 and 2: classify operands a, b (FP32 bits) for format f. Returns 1
 * when in->special holds the final result (bit pattern, even for +0 = 0
 * returned as in->special = 0 with return 1), else 0 and fills e, ma, mb. */
int mts_mul_classify(const mts_format *f, uint32_t a, uint32_t b, mts_mul_in *in);

/* Rule 3: pack sign * sig * 2^(e - F) into FP32 bits of format f, where sig is
 * an unsigned fixed-point significand with F fraction bits (0 <= sig < 2^63),
 * rounded per prec at f->M bits. sig = 0 gives signed zero. */
uint32_t mts_mul_pack(const mts_format *f, uint32_t sign, int e, uint64_t sig, int F,
                      mts_outprec prec);

/* Rule 3's exponent judgement, shared by packing and AMSim: the normalised,
 * rounded product sign * 1.man * 2^exp (man in FP32 field position) as FP32
 * bits of format f: signed zero below emin, inf or saturation above emax. */
uint32_t mts_mul_finish(const mts_format *f, uint32_t sign, int exp, uint32_t man);

/* A significand function: the product of (1.ma)(1.mb), with M-bit fractions,
 * as a fixed-point value with *F fraction bits. This is exactly what the
 * drop-in RTL "significand multiplier" computes (F = 2M). */
typedef uint64_t (*mts_sigfn)(uint32_t ma, uint32_t mb, int M, int *F);

/* A registered C model. */
typedef struct mts_model {
    const char *name;
    const char *summary;  /* one line for --help and reports */
    mts_outprec prec;     /* output precision, applied by mts_mul_pack */
    int min_m, max_m;     /* supported mantissa widths */
    mts_sigfn sig;
} mts_model;

/* Looks a model up by name; NULL if none. */
const mts_model *mts_model_find(const char *name);
/* The registry: returns the i-th model or NULL past the end. */
const mts_model *mts_model_at(int i);

/* Multiplies a*b with model m in format f (FP32 bit patterns in and out). */
uint32_t mts_model_mul(const mts_model *m, const mts_format *f, uint32_t a, uint32_t b);

/* A multiplier as an opaque callable: what lutgen, verify, metrics and the
 * training providers take, so C models, LUTs and Verilated RTL are
 * interchangeable. fn returns op's product of a and b as FP32 bits; impl is
 * the implementation's own state (a model, a LUT, an RTL handle), not owned. */
typedef struct mts_mulop {
    uint32_t (*fn)(const struct mts_mulop *op, uint32_t a, uint32_t b);
    const void *impl;
    mts_format fmt;
    char name[64];
    int serial; /* nonzero: fn is not thread-safe (one RTL model instance) */
} mts_mulop;

/* Binds registered model `model` at format f into op. MTS_EINVAL names the
 * known models when `model` is unknown or f->M is outside its range. */
int mts_mulop_model(mts_mulop *op, const char *model, const mts_format *f, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
