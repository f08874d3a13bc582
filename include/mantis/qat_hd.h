/* qat_hd.h - the arithmetic of quantization-aware training (qat.h) that the
 * CPU (cmodel/qat.c, sim/nn/qat.c) and its CUDA twins (gpu/qat.cu) share:
 * the quantizer's parameters from a range, the quantizer, its dequantized
 * value and clipping test, the range observer's step. One copy, so both
 * backends give the same bits; only fmath.h's explicitly rounded FP32
 * operations (no contraction on either side). qat.h says what each means. */
#ifndef MANTIS_QAT_HD_H
#define MANTIS_QAT_HD_H

#include <float.h>
#include <stdint.h>

#include "mantis/fmath.h"
#include "mantis/hd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One quantizer: FP32 scale and its FP32 reciprocal (PyTorch multiplies by
 * inv = 1.0f / scale), the zero point and the code range [qmin, qmax]. */
typedef struct mts_qparam {
    float scale, inv;
    int32_t zp, qmin, qmax;
} mts_qparam;

/* Averaging constant of the activation ranges (PyTorch's
 * MovingAverageMinMaxObserver default). */
#define MTS_QAT_EMA 0.01f

/* Observer state, MTS_QAT_STATE floats kept with a layer (and in its
 * checkpoint): {min, max, seen}. seen = 0: nothing observed yet. */
#define MTS_QAT_STATE 3

static inline MTS_HD int mts_qat_finite(float x) { return (mts_fm_bits(x) & 0x7F800000u) != 0x7F800000u; }

/* The finite min and max of a sequence: start with a = +inf, b = -inf, push
 * each value (min and max are exact, so any order gives the same pair),
 * then end: 0 when nothing finite came, else 1 with +0 for either zero. */
static inline MTS_HD void mts_qat_minmax_push(float v, float *a, float *b)
{
    if (v < *a && v > -INFINITY) *a = v;
    if (v > *b && v < INFINITY) *b = v;
}
static inline MTS_HD int mts_qat_minmax_end(float a, float b, float *lo, float *hi)
{
    if (!(a <= b)) return 0;
    *lo = a == 0.0f ? 0.0f : a;
    *hi = b == 0.0f ? 0.0f : b;
    return 1;
}

/* The observer's step with a batch's finite range [lo, hi] (qat.h,
 * mts_qat_observe). */
static inline MTS_HD void mts_qat_observe_hd(float *st, float lo, float hi)
{
    if (st[2] == 0.0f) {
        st[0] = lo;
        st[1] = hi;
        st[2] = 1.0f;
        return;
    }
    st[0] = mts_fm_add(st[0], mts_fm_mul(MTS_QAT_EMA, mts_fm_sub(lo, st[0])));
    st[1] = mts_fm_add(st[1], mts_fm_mul(MTS_QAT_EMA, mts_fm_sub(hi, st[1])));
}

static inline MTS_HD void mts_qat_code_range(int bits, int is_signed, int32_t *qmin, int32_t *qmax)
{
    *qmin = is_signed ? -(1 << (bits - 1)) : 0;
    *qmax = is_signed ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
}

/* qat.h's mts_qparam_affine. */
static inline MTS_HD void mts_qparam_affine_hd(float rmin, float rmax, int bits, int is_signed, mts_qparam *q)
{
    mts_qat_code_range(bits, is_signed, &q->qmin, &q->qmax);
    float lo = mts_qat_finite(rmin) && rmin < 0.0f ? rmin : 0.0f;
    float hi = mts_qat_finite(rmax) && rmax > 0.0f ? rmax : 0.0f;
    float span = (float)(q->qmax - q->qmin);
    float s = mts_fm_div(mts_fm_sub(hi, lo), span);
    if (!(s >= FLT_EPSILON)) s = FLT_EPSILON;
    if (!mts_qat_finite(s)) s = mts_fm_div(FLT_MAX, span); /* an overflowing hi - lo */
    q->scale = s;
    q->inv = mts_fm_div(1.0f, s);
    float z = mts_fm_sub((float)q->qmin, mts_fm_rint(mts_fm_div(lo, s)));
    q->zp = z < (float)q->qmin ? q->qmin : z > (float)q->qmax ? q->qmax : (int32_t)z;
}

/* qat.h's mts_qparam_symmetric. */
static inline MTS_HD void mts_qparam_symmetric_hd(float rmin, float rmax, int bits, mts_qparam *q)
{
    q->qmax = (1 << (bits - 1)) - 1;
    q->qmin = -q->qmax;
    float a = mts_qat_finite(rmin) ? fabsf(rmin) : 0.0f, b = mts_qat_finite(rmax) ? fabsf(rmax) : 0.0f;
    float s = mts_fm_div(a > b ? a : b, (float)q->qmax);
    if (!(s >= FLT_EPSILON)) s = FLT_EPSILON;
    q->scale = s;
    q->inv = mts_fm_div(1.0f, s);
    q->zp = 0;
}

/* The quantizer: clamp(rint(x * inv) + zp, qmin, qmax); NaN gives zp. */
static inline MTS_HD int32_t mts_q_value_hd(const mts_qparam *q, float x)
{
    float t = mts_fm_rint(mts_fm_mul(x, q->inv));
    if (t != t) return q->zp;
    t = mts_fm_add(t, (float)q->zp); /* |t| beyond 2^24 is clamped anyway */
    if (t < (float)q->qmin) return q->qmin;
    if (t > (float)q->qmax) return q->qmax;
    return (int32_t)t;
}

/* The dequantized value (q - zp) * scale, one FP32 rounding. */
static inline MTS_HD float mts_q_real_hd(const mts_qparam *q, int32_t v)
{
    return mts_fm_mul((float)(v - q->zp), q->scale);
}

/* 1 when x quantizes without clamping (the STE's mask), 0 else and for NaN. */
static inline MTS_HD int mts_q_pass_hd(const mts_qparam *q, float x)
{
    float t = mts_fm_add(mts_fm_rint(mts_fm_mul(x, q->inv)), (float)q->zp);
    return t >= (float)q->qmin && t <= (float)q->qmax;
}

/* The value of an n-bit code (sign-extended when signed). */
static inline MTS_HD int32_t mts_q_code_value(uint32_t c, int bits, int is_signed)
{
    return is_signed && (c >> (bits - 1)) ? (int32_t)c - (1 << bits) : (int32_t)c;
}

#ifdef __cplusplus
}
#endif
#endif
