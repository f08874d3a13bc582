/* qat.h - quantization-aware training of integer multipliers: the
 * quantizer of the field's QAT (fake quantization as PyTorch's
 * FakeQuantize and TensorFlow Lite define it, after Jacob et al. 2018),
 * the moving-average range observer of activations, per-channel weight
 * parameters, and the gradient tables of an approximate multiplier
 * (difference-based, after Meng et al., DATE 2025).
 *
 * Codes and values: an n-bit code c is the low n bits of the operand value
 * q (two's complement when signed), as intmul.h and integer tables use it.
 * Real values are r = scale * (q - zp). docs/training.md, "Integer
 * multipliers: quantization-aware training". */
#ifndef MANTIS_QAT_H
#define MANTIS_QAT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "mantis/lut.h"
#include "mantis/qat_hd.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Asymmetric (affine) parameters from an observed range, as PyTorch's
 * MinMaxObserver computes them: the range is widened to contain 0
 * (lo = min(rmin, 0), hi = max(rmax, 0)), scale = (hi - lo) / (qmax - qmin)
 * in FP32, at least FLT_EPSILON, zp = qmin - nearbyintf(lo / scale)
 * clamped to [qmin, qmax]; codes [0, 2^n - 1] unsigned, [-2^(n-1),
 * 2^(n-1) - 1] signed. A non-finite bound counts as 0. */
void mts_qparam_affine(float rmin, float rmax, int bits, int is_signed, mts_qparam *q);

/* Symmetric parameters (signed weights, TensorFlow Lite's int8 rule):
 * zp = 0, the narrow range [-(2^(n-1) - 1), 2^(n-1) - 1] (-128 is never
 * used, so the range is symmetric), scale = max(|rmin|, |rmax|) / qmax in
 * FP32, at least FLT_EPSILON. */
void mts_qparam_symmetric(float rmin, float rmax, int bits, mts_qparam *q);

/* The quantizer: clamp(nearbyintf(x * inv) + zp, qmin, qmax) (round half to
 * even, FP32 multiply); NaN gives zp, +-inf the end codes. */
static inline int32_t mts_q_value(const mts_qparam *q, float x) { return mts_q_value_hd(q, x); }

/* The dequantized value (q - zp) * scale, one FP32 rounding. */
static inline float mts_q_real(const mts_qparam *q, int32_t v) { return mts_q_real_hd(q, v); }

/* The straight-through estimator's mask: 1 when x quantizes without
 * clamping (nearbyintf(x * inv) + zp in [qmin, qmax]), 0 outside (and for
 * NaN): the gradient of a clipped value is 0, as FakeQuantize's backward. */
static inline int mts_q_pass(const mts_qparam *q, float x) { return mts_q_pass_hd(q, x); }

/* --------------------------------------------- the range observer
 * (MTS_QAT_EMA, MTS_QAT_STATE: qat_hd.h) */

/* Training step of the observer: the finite min and max of x[0..n) update
 * st: the first batch sets them, later ones move them by MTS_QAT_EMA of the
 * difference (min += c * (bmin - min), FP32). A batch without a finite
 * value leaves st unchanged. */
void mts_qat_observe(float *st, const float *x, size_t n);

/* The activation quantizer of a layer: from the observed range when
 * st[2] != 0 (frozen during evaluation, updated by mts_qat_observe during
 * training), else from x's own finite min/max (a layer evaluated before any
 * training step). Asymmetric, bits/is_signed from the table. */
void mts_qat_act_param(const float *st, const float *x, size_t n, int bits, int is_signed, mts_qparam *q);

/* Per-output-channel weight quantizers of w[out][in]: symmetric
 * (mts_qparam_symmetric) for a signed table, asymmetric (mts_qparam_affine
 * over the channel's min/max) for an unsigned one; non-finite weights are
 * left out of the range. */
void mts_qat_weight_params(const float *w, int out, int in, int bits, int is_signed, mts_qparam *q);

/* ------------------------------------------ gradient tables */

/* The gradients of an n-bit integer table T(a, b) with respect to each
 * operand, in table units per operand unit, at every code pair: da[idx] =
 * dT/da and db[idx] = dT/db at idx = (code(a) << n) | code(b), as floats.
 *
 * Definition (the difference-based estimate of Meng et al., DATE 2025,
 * with centred windows): along the operand being differentiated, in value
 * order v_0 < ... < v_{N-1} (N = 2^n; for a signed table -2^(n-1) ..
 * 2^(n-1)-1, so no step crosses the wrap of the codes), the table is first
 * smoothed by a moving average over a window of half width h centred on
 * each point, shrunk symmetrically near the ends (h_t = min(h, t, N-1-t)):
 * S(t) = mean of T(v_s) over |s - t| <= h_t. Then G(t) = (S(t+1) -
 * S(t-1)) / 2 inside, S(1) - S(0) at t = 0 and S(N-1) - S(N-2) at N-1.
 * Window sums are exact integers and S(t) one double division, so an exact
 * table's gradients are exactly b and a everywhere, the ends included.
 * h = 0 is the plain central difference of neighbouring entries. */
typedef struct mts_int_grad {
    const mts_lut *lut;     /* the table it was built from (not owned) */
    int bits, is_signed, half_window;
    float *da, *db; /* 2^(2n) each */
} mts_int_grad;

/* The half window used when a caller does not choose one: max(1, 2^(n-4))
 * (16 for 8-bit tables, the paper's 8-bit setting). */
int mts_int_grad_default_window(int bits);

/* Builds g from an integer table (kind MTS_LUT_INT). MTS_EINVAL for a
 * float LUT or half_window < 0; MTS_ENOMEM. */
int mts_int_grad_build(const mts_lut *lut, int half_window, mts_int_grad *g, mts_err *err);
void mts_int_grad_free(mts_int_grad *g);

#ifdef __cplusplus
}
#endif
#endif
