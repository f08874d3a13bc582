/* intmul.h - n-bit integer multipliers (TFApprox style) and the affine
 * quantization around them.
 *
 * An integer multiplier in Mantis is a full product table (mts_lut of kind
 * MTS_LUT_INT, see lut.h) over n-bit operands, n <= 8. Real values reach it
 * through the affine map r = scale * (q - zero_point) of the TFApprox paper
 * (Eq. 1, after Jacob et al. 2018), and a dot product of two quantized
 * vectors is corrected for the zero points with integer sums:
 *   sum (qa-za)(qb-zb) = sum qa*qb - zb*sum qa - za*sum qb + n*za*zb.
 * Documented in docs/metrics.md, section "Integer multipliers". */
#ifndef MANTIS_INTMUL_H
#define MANTIS_INTMUL_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/lut.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Operand type of an integer multiplier: n bits, two's complement or not. */
typedef struct mts_intfmt {
    int bits;      /* 1..8 */
    int is_signed; /* 1: values -2^(n-1)..2^(n-1)-1; 0: 0..2^n-1 */
} mts_intfmt;

/* Smallest and largest operand value of f. */
int32_t mts_int_min(const mts_intfmt *f);
int32_t mts_int_max(const mts_intfmt *f);

/* The value of the low f->bits bits of code (sign-extended when signed).
 * Accepts a code (0..2^n-1) or a value already in range alike, since both
 * have the same low bits. */
int32_t mts_int_value(const mts_intfmt *f, int32_t code);

/* The exact product a*b of the operands' values (mts_int_value of each).
 * ctx must point to the mts_intfmt. Matches the callback type of
 * mts_lut_generate_int, which is how the exact table is built. */
int32_t mts_intmul_exact(void *ctx, int32_t a, int32_t b);

/* Builds the exact n-bit product table (signed or unsigned) through
 * mts_lut_generate_int; the table is named "exact-int<n>s" / "exact-int<n>u"
 * (the one name for it: `mantis lutgen --int-exact` builds it here). */
int mts_intmul_exact_lut(int bits, int is_signed, mts_lut *lut, mts_err *err);

/* Product of operand values a, b through an integer table: the entry at
 * index (code(a) << n) | code(b), read as int32. a and b must be operand
 * values of the table's type (checked by the callers below, not here). */
static inline int32_t mts_lut_int_mul(const mts_lut *lut, int32_t a, int32_t b)
{
    uint32_t mask = (1u << lut->int_bits) - 1u;
    return (int32_t)lut->entry[(((uint32_t)a & mask) << lut->int_bits) | ((uint32_t)b & mask)];
}

/* Affine quantization parameters: r = scale * (q - zero_point). */
typedef struct mts_affine {
    double scale;       /* > 0 */
    int32_t zero_point; /* in [qmin, qmax]: the code of the real value 0 */
    int32_t qmin, qmax; /* code range, e.g. [0, 255] or [-128, 127] */
} mts_affine;

/* Parameters from an observed range [rmin, rmax] for n-bit codes (unsigned
 * [0, 2^n-1] or signed [-2^(n-1), 2^(n-1)-1], as TFApprox uses for uint8 /
 * int8): the range is first widened to contain 0 so that 0 is exact, then
 * scale = (rmax - rmin) / (qmax - qmin) and zero_point = round(qmin -
 * rmin/scale) (half away from zero) clamped to [qmin, qmax]. rmin = rmax =
 * 0 gives scale 1. MTS_EINVAL for non-finite bounds, rmin > rmax or bits
 * outside 1..8. */
int mts_affine_from_range(double rmin, double rmax, int bits, int is_signed, mts_affine *p,
                          mts_err *err);

/* q = clamp(round(r / scale) + zero_point, qmin, qmax), round half away from
 * zero; NaN -> zero_point. */
int32_t mts_affine_quantize(const mts_affine *p, double r);

/* r = scale * (q - zero_point). */
double mts_affine_dequantize(const mts_affine *p, int32_t q);

/* The zero-point correction: given S_ab = sum qa*qb, S_a = sum qa,
 * S_b = sum qb over n terms, returns sum (qa-za)(qb-zb)
 * = S_ab - zb*S_a - za*S_b + n*za*zb (exact in int64 for n < 2^31). */
int64_t mts_qdot_correct(int64_t s_ab, int64_t s_a, int64_t s_b, int64_t n, int32_t za, int32_t zb);

/* Quantized dot product through an integer table: *out = sum over i of
 * (qa[i]-za)(qb[i]-zb), with every qa[i]*qb[i] taken from lut (so an
 * approximate table gives the approximate result) and the zero points
 * corrected with mts_qdot_correct. MTS_EINVAL if lut is not MTS_LUT_INT or
 * an operand or zero point is outside the table's operand range (the
 * message names the index). */
int mts_qdot_int(const mts_lut *lut, const int32_t *qa, int32_t za, const int32_t *qb, int32_t zb,
                 size_t n, int64_t *out, mts_err *err);

/* The real-valued dot product of a and b the way TFApprox computes it:
 * quantize each operand with pa / pb, mts_qdot_int through lut, then
 * dequantize: *out = pa->scale * pb->scale * sum (qa-za)(qb-zb).
 * The code ranges of pa and pb must match the table's operand type. */
int mts_qdot_float(const mts_lut *lut, const mts_affine *pa, const float *a, const mts_affine *pb,
                   const float *b, size_t n, double *out, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
