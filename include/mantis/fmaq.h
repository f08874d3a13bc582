/* fmaq.h - the quantized FMA of "Towards Cheaper Inference in Deep Networks
 * with Lower Bit-Width Accumulators" (Eq. 2 and 4), and chunked dot products.
 *
 * Q(M,E,b) differs from the IEEE-style formats of format.h: every exponent
 * code is a normal number (no inf/NaN, no subnormals), so magnitudes run from
 * R_UF = 2^-b to R_OF = 2^(2^E-1-b) * (2 - 2^-M). See docs/fmaq.md. */
#ifndef MANTIS_FMAQ_H
#define MANTIS_FMAQ_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/format.h"
#include "mantis/mul.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mts_qfmt {
    int M, E, bias;
    int underflow;  /* 1: |x| < R_UF flushes to zero; 0: keeps its exponent ("no UF") */
    mts_round rnd;  /* MTS_RTZ (the paper's floor by bit mask, default) or MTS_RNE */
} mts_qfmt;

/* Parses "M7E4" (also "m7e4") with the given bias (bias < 0: default 2^(E-1),
 * the paper's default, which gives the IEEE emax 2^(E-1)-1). Sets
 * underflow = 1 and rnd = MTS_RTZ; the caller may change both. MTS_EINVAL
 * names the spelling expected or the range check that failed. */
int mts_qfmt_parse(const char *spec, int bias, mts_qfmt *q, mts_err *err);

/* Q(x) on FP32 bit patterns (Eq. 2, docs/fmaq.md). NaN -> 0x7FC00000;
 * +-inf and |x| >= R_OF saturate to +-R_OF; |x| < R_UF (underflow on) or
 * |x| < 2^-126 (off; FP32 has no subnormals in Mantis) -> signed zero, judged
 * on x before rounding as Eq. 2 does; else the mantissa is cut (RTZ) or
 * rounded (RNE) to M bits at x's own exponent. */
uint32_t mts_q(const mts_qfmt *q, uint32_t x);

/* FMAq(p, s) = Q_acc(Q_prod(p) + s) where p is the multiplier's product and s
 * the running sum (already in Q_acc). The addition is exact before Q_acc
 * rounds (no double rounding): mts_qadd(qacc, mts_q(qprod, p), s). */
uint32_t mts_fmaq(const mts_qfmt *qprod, const mts_qfmt *qacc, uint32_t p, uint32_t s);

/* Checks 1<=E<=7, 1<=M<=23, underflow in {0,1}, rnd in {RNE,RTZ}, and that
 * every value of Q is an FP32 normal: -bias >= -126 and 2^E-1-bias <= 127
 * (so E = 8 is impossible: its 256 normal exponents exceed FP32's 254).
 * Every other function here assumes a format that passed this check.
 * Returns MTS_OK or MTS_EINVAL naming the field and its allowed range. */
int mts_qfmt_check(const mts_qfmt *q, mts_err *err);

/* Writes "M7E4b10" (plus "-noUF" when underflow is off, "-rne" for RNE). */
void mts_qfmt_name(const mts_qfmt *q, char *buf, int n);

/* The limits of Eq. 2 as positive FP32 bit patterns: R_OF = 2^(2^E-1-b) *
 * (2 - 2^-M), R_UF = 2^-b (the smallest non-zero magnitude when underflow
 * is on; with underflow off values down to FP32's 2^-126 survive). */
uint32_t mts_q_rof(const mts_qfmt *q);
uint32_t mts_q_ruf(const mts_qfmt *q);

/* Q_acc(a + b) with the sum formed exactly before the single rounding: the
 * "Q_acc add" of the second accumulation level. NaN in -> 0x7FC00000; an
 * inf operand saturates (inf - inf -> NaN); exact cancellation -> +0;
 * (-0) + (-0) -> -0. FP32 subnormal operands count as zero. */
uint32_t mts_qadd(const mts_qfmt *qacc, uint32_t a, uint32_t b);

/* Packed hardware code of a Q value, as the RTL accumulator stores it:
 * width 2+E+M bits, from the top: zero flag, sign, exp[E-1:0] = e + bias,
 * man[M-1:0]. Because every exponent code is a normal number, zero needs its
 * own flag: +-0 is {1, s, 0..0, 0..0}. Any other code with the zero flag set
 * decodes to NaN; encode writes NaN as all ones. Defined for underflow = 1: values
 * below R_UF have no exponent code, so encode treats underflow as on.
 * encode first applies Q (x need not already be a Q value); NaN -> all ones.
 * decode ignores bits above the width; it is exact and mts_q(decode(c)) ==
 * decode(c) for every non-NaN code. */
int mts_q_width(const mts_qfmt *q);
uint32_t mts_q_encode(const mts_qfmt *q, uint32_t x);
uint32_t mts_q_decode(const mts_qfmt *q, uint32_t code);

/* Reference dot product y = sum_i x[i]*w[i*wstride] in the documented order:
 * chunks of `chunk` consecutive terms (chunk >= 1), each accumulated
 * sequentially from 0 with FMAq; then the chunk sums are added left to right
 * with Q_acc adds: y = Qacc(...Qacc(Qacc(c0 + c1) + c2)... ). mul = NULL
 * means the exact FP32 product (mts_model "fp32"). n = 0 gives +0; chunk < 1
 * is treated as a single chunk. */
uint32_t mts_fmaq_dot(const mts_qfmt *qprod, const mts_qfmt *qacc, int chunk, const mts_mulop *mul,
                      const uint32_t *x, const uint32_t *w, size_t n, size_t wstride);

/* Reference GEMM, row-major: C[i*n+j] = mts_fmaq_dot(row i of A, column j of
 * B) for A m x k and B k x n, so every output follows the dot order above.
 * MTS_EINVAL for chunk < 1 or a format failing mts_qfmt_check. */
int mts_fmaq_gemm(const mts_qfmt *qprod, const mts_qfmt *qacc, int chunk, const mts_mulop *mul,
                  const uint32_t *A, const uint32_t *B, uint32_t *C, size_t m, size_t n, size_t k,
                  mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
