/* fmath.h - the transcendental functions and fixed-order sums of training,
 * one implementation shared by the CPU ops (sim/nn) and their CUDA twins
 * (gpu/), so both backends produce the same bits (docs/training.md,
 * "Reproducibility contract").
 *
 * Why not expf/logf/tanhf: glibc's and CUDA's differ in the last bit on some
 * inputs, and a different bit in a loss gradient changes every later step.
 * These functions use only FP32 (or FP64) additions, subtractions and
 * multiplications, correctly rounded division (one per logf and tanhf), and
 * integer manipulation of the bit patterns. Every one of those operations is
 * correctly rounded (round to nearest even) on an x86-64 CPU (SSE, compiled
 * with -ffp-contract=off) and on an NVIDIA GPU (__fmul_rn/__fadd_rn/
 * __fdiv_rn, which CUDA never contracts into an FMA, with denormals kept:
 * no -ftz / --use_fast_math), so the results are identical on both. The
 * helpers mts_fm_mul/add/sub/div name each rounding explicitly.
 *
 * Accuracy (measured by tests/test_fmath.cpp against glibc over every FP32
 * input; see docs/training.md for the figures): expf and logf within 1 ulp,
 * tanhf within 2 ulp. Special values follow C99 Annex F: NaN in, NaN out;
 * expf(+inf) = +inf, expf(-inf) = +0, overflow to +inf, underflow through the
 * subnormals to +0; logf(+-0) = -inf, logf(x < 0) = NaN, logf(+inf) = +inf;
 * tanhf(+-0) = +-0, tanhf(+-inf) = +-1.
 *
 * The end of the file holds the non-GEMM arithmetic of the transformer ops
 * (GELU, row softmax, LayerNorm, whose square root is IEEE's correctly
 * rounded one on both sides), shared the same way.
 *
 * Header-only: every function is static inline and MTS_HD (host and device
 * under nvcc). */
#ifndef MANTIS_FMATH_H
#define MANTIS_FMATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mantis/hd.h"

/* ------------------------------------------- explicitly rounded ops */

static inline MTS_HD float mts_fm_mul(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
static inline MTS_HD float mts_fm_add(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
static inline MTS_HD float mts_fm_sub(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
static inline MTS_HD float mts_fm_div(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
static inline MTS_HD double mts_fm_dadd(double a, double b)
{
#if defined(__CUDA_ARCH__)
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
static inline MTS_HD double mts_fm_dmul(double a, double b)
{
#if defined(__CUDA_ARCH__)
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
static inline MTS_HD double mts_fm_dsub(double a, double b)
{
#if defined(__CUDA_ARCH__)
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}
static inline MTS_HD double mts_fm_ddiv(double a, double b)
{
#if defined(__CUDA_ARCH__)
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}
/* a + b rounded toward zero (FMAq's accumulator sums, arith_hd.h
 * mts_qadd_rtz_hd): __fadd_rz on the device; on the host (round to
 * nearest) TwoSum - s = RNE(a + b) and its exact error e; where e is
 * non-zero with the opposite sign, the exact sum lies between s and zero and
 * the result is s one ulp closer to zero, its bit pattern minus one. A sum
 * of finite operands that overflows is +-FLT_MAX, as the device's is; inf
 * and NaN operands give RNE's inf or NaN (a NaN's payload may differ). */
static inline MTS_HD float mts_fm_add_rz(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fadd_rz(a, b);
#else
    float s = a + b;
    uint32_t u;
    if (s - s != 0.0f) { /* inf or NaN */
        if (s == s && a - a == 0.0f && b - b == 0.0f) return s > 0.0f ? 3.40282347e38f : -3.40282347e38f;
        return s;
    }
    float bb = s - a;
    float e = (a - (s - bb)) + (b - bb);
    if (e == 0.0f || (e < 0.0f) == (s < 0.0f)) return s;
    memcpy(&u, &s, 4);
    u -= 1u; /* (s != 0: a zero sum is exact) */
    memcpy(&s, &u, 4);
    return s;
#endif
}
/* IEEE 754 requires a correctly rounded square root: sqrtf (one instruction
 * on x86-64) and __fsqrt_rn agree on every input. */
static inline MTS_HD float mts_fm_sqrt(float a)
{
#if defined(__CUDA_ARCH__)
    return __fsqrt_rn(a);
#else
    return sqrtf(a);
#endif
}

/* Round to the nearest whole value, ties to even (the default rounding
 * mode on both sides: nearbyintf on the host, rintf on the device). */
static inline MTS_HD float mts_fm_rint(float a)
{
#if defined(__CUDA_ARCH__)
    return rintf(a);
#else
    return nearbyintf(a);
#endif
}

static inline MTS_HD uint32_t mts_fm_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline MTS_HD float mts_fm_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---------------------------------------------------------- expf */

/* e^x. x = k ln2 + r with k = nearest integer to x log2(e) (found by adding
 * 1.5*2^23, which rounds to an integer: no conversion instruction), r by
 * Cody-Waite with ln2 split into a 16-bit head (k*head exact) and a tail;
 * e^r = 1 + (r + r^2 P(r)) with P the Taylor polynomial to r^8 (|r| <=
 * 0.35: truncation < 2^-28); then a multiply by 2^k built from bits, split
 * in two factors when 2^k is not a normal float so the only rounding is the
 * last multiply (subnormal results are rounded once, correctly). */
static inline MTS_HD float mts_fm_expf(float x)
{
    uint32_t ux = mts_fm_bits(x);
    if ((ux & 0x7F800000u) == 0x7F800000u) { /* NaN or inf */
        if (ux & 0x007FFFFFu) return mts_fm_add(x, x);
        return (ux >> 31) ? 0.0f : x;
    }
    if (x > 88.72284f) return mts_fm_float(0x7F800000u); /* e^x > FLT_MAX */
    if (x < -104.0f) return 0.0f;                          /* e^x < 2^-150 */
    const float shift = 12582912.0f;                       /* 1.5 * 2^23 */
    float t = mts_fm_add(mts_fm_mul(x, 1.44269502e+00f), shift);
    int k = (int)(mts_fm_bits(t) - mts_fm_bits(shift)); /* |k| <= 151 */
    float kf = mts_fm_sub(t, shift);
    const float ln2_hi = 6.93145752e-01f; /* 0x3f317200: 16 bits, kf*ln2_hi exact */
    const float ln2_lo = 1.42860677e-06f; /* 0x35bfbe8e: ln2 - ln2_hi */
    float r = mts_fm_sub(mts_fm_sub(x, mts_fm_mul(kf, ln2_hi)), mts_fm_mul(kf, ln2_lo));
    float p = 2.48015876e-05f;
    p = mts_fm_add(mts_fm_mul(p, r), 1.98412701e-04f);
    p = mts_fm_add(mts_fm_mul(p, r), 1.38888892e-03f);
    p = mts_fm_add(mts_fm_mul(p, r), 8.33333377e-03f);
    p = mts_fm_add(mts_fm_mul(p, r), 4.16666679e-02f);
    p = mts_fm_add(mts_fm_mul(p, r), 1.66666672e-01f);
    p = mts_fm_add(mts_fm_mul(p, r), 0.5f);
    float er = mts_fm_add(1.0f, mts_fm_add(r, mts_fm_mul(mts_fm_mul(r, r), p)));
    if (k > 127) /* 2^k = 2^127 * 2 */
        return mts_fm_mul(mts_fm_mul(er, mts_fm_float(0x7F000000u)), 2.0f);
    if (k < -126) /* 2^k = 2^(k+64) * 2^-64: first factor exact, one rounding */
        return mts_fm_mul(mts_fm_mul(er, mts_fm_float((uint32_t)(k + 64 + 127) << 23)),
                          mts_fm_float((uint32_t)(-64 + 127) << 23));
    return mts_fm_mul(er, mts_fm_float((uint32_t)(k + 127) << 23));
}

/* ---------------------------------------------------------- logf */

/* Natural logarithm: fdlibm's __ieee754_logf (Sun Microsystems, freely
 * redistributable), rewritten with the explicit operations above. x =
 * 2^k (1+f) with 1+f in [sqrt(2)/2, sqrt(2)); log(1+f) = f - hfsq +
 * s(hfsq + R(z)), s = f/(2+f) (the one division), R a minimax polynomial. */
static inline MTS_HD float mts_fm_logf(float x)
{
    const float ln2_hi = 6.9313812256e-01f, /* 0x3f317180 */
        ln2_lo = 9.0580006145e-06f,         /* 0x3717f7d1 */
        Lg1 = 6.6666662693e-01f,            /* 0x3f2aaaaa */
        Lg2 = 4.0000972152e-01f,            /* 0x3ecccce1 */
        Lg3 = 2.8498786688e-01f,            /* 0x3e91e9ee */
        Lg4 = 2.4279078841e-01f;            /* 0x3e789e26 */
    uint32_t ix = mts_fm_bits(x);
    int k = 0;
    if ((ix & 0x7FFFFFFFu) == 0) return mts_fm_float(0xFF800000u); /* log(+-0) = -inf */
    if ((ix & 0x7F800000u) == 0x7F800000u) {                       /* NaN, +-inf */
        if (ix & 0x007FFFFFu) return mts_fm_add(x, x);
        return (ix >> 31) ? mts_fm_float(0x7FC00000u) : x;
    }
    if (ix >> 31) return mts_fm_float(0x7FC00000u); /* log(x < 0) = NaN */
    if (ix < 0x00800000u) {                         /* subnormal: scale by 2^25 (exact) */
        k -= 25;
        x = mts_fm_mul(x, 33554432.0f);
        ix = mts_fm_bits(x);
    }
    k += (int)(ix >> 23) - 127;
    ix &= 0x007FFFFFu;
    uint32_t i = (ix + (0x95f64u << 3)) & 0x800000u;
    x = mts_fm_float(ix | (i ^ 0x3f800000u)); /* normalize x or x/2 */
    k += (int)(i >> 23);
    float f = mts_fm_sub(x, 1.0f);
    float dk = (float)k; /* |k| < 2^8: exact */
    if ((0x007FFFFFu & (0x8000u + ix)) < 0xc000u) { /* -2^-9 <= f < 2^-9 */
        if (f == 0.0f) {
            if (k == 0) return 0.0f;
            return mts_fm_add(mts_fm_mul(dk, ln2_hi), mts_fm_mul(dk, ln2_lo));
        }
        float R = mts_fm_mul(mts_fm_mul(f, f), mts_fm_sub(0.5f, mts_fm_mul(0.33333333333333333f, f)));
        if (k == 0) return mts_fm_sub(f, R);
        return mts_fm_sub(mts_fm_mul(dk, ln2_hi), mts_fm_sub(mts_fm_sub(R, mts_fm_mul(dk, ln2_lo)), f));
    }
    float s = mts_fm_div(f, mts_fm_add(2.0f, f));
    float z = mts_fm_mul(s, s);
    int32_t ii = (int32_t)ix - (int32_t)(0x6147au << 3);
    float w = mts_fm_mul(z, z);
    int32_t j = (int32_t)(0x6b851u << 3) - (int32_t)ix;
    float t1 = mts_fm_mul(w, mts_fm_add(Lg2, mts_fm_mul(w, Lg4)));
    float t2 = mts_fm_mul(z, mts_fm_add(Lg1, mts_fm_mul(w, Lg3)));
    ii |= j;
    float R = mts_fm_add(t2, t1);
    if (ii > 0) {
        float hfsq = mts_fm_mul(mts_fm_mul(0.5f, f), f);
        if (k == 0) return mts_fm_sub(f, mts_fm_sub(hfsq, mts_fm_mul(s, mts_fm_add(hfsq, R))));
        return mts_fm_sub(mts_fm_mul(dk, ln2_hi),
                          mts_fm_sub(mts_fm_sub(hfsq, mts_fm_add(mts_fm_mul(s, mts_fm_add(hfsq, R)),
                                                                 mts_fm_mul(dk, ln2_lo))),
                                     f));
    }
    if (k == 0) return mts_fm_sub(f, mts_fm_mul(s, mts_fm_sub(f, R)));
    return mts_fm_sub(mts_fm_mul(dk, ln2_hi),
                      mts_fm_sub(mts_fm_sub(mts_fm_mul(s, mts_fm_sub(f, R)), mts_fm_mul(dk, ln2_lo)), f));
}

/* --------------------------------------------------------- tanhf */

/* Hyperbolic tangent. |x| < 0.55: the odd Taylor series to x^19 (truncation
 * < 2^-30 relative); |x| < 9.1: 1 - 2/(e^(2|x|) + 1) with mts_fm_expf (the
 * one division); beyond, +-1 (1 - tanh < 2^-25 rounds to 1). */
static inline MTS_HD float mts_fm_tanhf(float x)
{
    uint32_t ux = mts_fm_bits(x);
    uint32_t sign = ux & 0x80000000u;
    float ax = mts_fm_float(ux & 0x7FFFFFFFu);
    if ((ux & 0x7F800000u) == 0x7F800000u) {
        if (ux & 0x007FFFFFu) return mts_fm_add(x, x);
        return mts_fm_float(sign | 0x3F800000u);
    }
    float r;
    if (ax < 0.55f) { /* on |x|, the sign put back below (keeps tanh(-0) = -0) */
        float z = mts_fm_mul(ax, ax);
        float p = -2.39129120e-04f;
        p = mts_fm_add(mts_fm_mul(p, z), 5.90027426e-04f);
        p = mts_fm_add(mts_fm_mul(p, z), -1.45583437e-03f);
        p = mts_fm_add(mts_fm_mul(p, z), 3.59212793e-03f);
        p = mts_fm_add(mts_fm_mul(p, z), -8.86323582e-03f);
        p = mts_fm_add(mts_fm_mul(p, z), 2.18694881e-02f);
        p = mts_fm_add(mts_fm_mul(p, z), -5.39682545e-02f);
        p = mts_fm_add(mts_fm_mul(p, z), 1.33333340e-01f);
        p = mts_fm_add(mts_fm_mul(p, z), -3.33333343e-01f);
        r = mts_fm_add(ax, mts_fm_mul(mts_fm_mul(ax, z), p));
    } else if (ax >= 9.1f) r = 1.0f;
    else r = mts_fm_sub(1.0f, mts_fm_div(2.0f, mts_fm_add(mts_fm_expf(mts_fm_add(ax, ax)), 1.0f)));
    return mts_fm_float(mts_fm_bits(r) | sign);
}

/* ------------------------------------------------- fixed-order sums */

/* The one summation order of every long reduction in training (BatchNorm
 * statistics and gradients, bias gradients, the loss), in FP32 or FP64:
 *   1. the terms t[0..n) are cut into chunks of MTS_FM_CHUNK consecutive
 *      terms (the last one shorter); each chunk is summed sequentially from
 *      +0: c = ((+0 + t[j0]) + t[j0+1]) + ...;
 *   2. the chunk sums c[0..m) are added pairwise, adjacent pairs level by
 *      level, (c0+c1), (c2+c3), ... then ((c0+c1)+(c2+c3)), ...; an odd
 *      element at the end of a level moves up unchanged (the same as padding
 *      m to a power of two with +0, which changes no chunk sum: a chunk sum
 *      is never -0). n == 0 gives +0.
 * A GPU does step 1 with one thread per chunk and step 2 as the usual
 * shared-memory tree; a CPU loop does it streaming, as below (a binary
 * counter of pending pair sums, no allocation). Use: _init, _push each term
 * in order, _sum. */
#define MTS_FM_CHUNK 64
#define MTS_FM_LEVELS 48 /* 2^48 chunks: more than any size_t count of terms here */

typedef struct mts_fm_sumd {
    double chunk;      /* the running sum of the current chunk */
    int in_chunk;      /* terms in it */
    uint64_t nchunks;  /* completed chunks pushed into the tree */
    int top;           /* entries on the stack */
    double stack[MTS_FM_LEVELS];
} mts_fm_sumd;

typedef struct mts_fm_sumf {
    float chunk;
    int in_chunk;
    uint64_t nchunks;
    int top;
    float stack[MTS_FM_LEVELS];
} mts_fm_sumf;

static inline MTS_HD void mts_fm_sumd_init(mts_fm_sumd *s)
{
    s->chunk = 0.0;
    s->in_chunk = 0;
    s->nchunks = 0;
    s->top = 0;
}

/* One chunk sum into the tree: pair it with the pending left siblings (one
 * per trailing 1 bit of the count of chunks so far). */
static inline MTS_HD void mts_fm__sumd_chunk(mts_fm_sumd *s, double c)
{
    for (uint64_t m = s->nchunks; m & 1u; m >>= 1) c = mts_fm_dadd(s->stack[--s->top], c);
    s->stack[s->top++] = c;
    s->nchunks++;
}

static inline MTS_HD void mts_fm_sumd_push(mts_fm_sumd *s, double t)
{
    s->chunk = mts_fm_dadd(s->chunk, t);
    if (++s->in_chunk == MTS_FM_CHUNK) {
        mts_fm__sumd_chunk(s, s->chunk);
        s->chunk = 0.0;
        s->in_chunk = 0;
    }
}

/* The sum of the terms pushed so far (s is left finished: init to reuse). */
static inline MTS_HD double mts_fm_sumd_sum(mts_fm_sumd *s)
{
    if (s->in_chunk) mts_fm__sumd_chunk(s, s->chunk);
    s->in_chunk = 0;
    if (s->top == 0) return 0.0;
    double r = s->stack[--s->top]; /* the right-most pending subtree */
    while (s->top > 0) r = mts_fm_dadd(s->stack[--s->top], r);
    return r;
}

/* A NaN as the one quiet NaN 0x7FC00000, anything else as it is. An x86
 * CPU propagates a NaN operand's payload and sign (and makes 0xFFC00000 of
 * inf - inf); an NVIDIA GPU returns 0x7FFFFFFF for every NaN result. The ops
 * whose outputs may be NaN store through this, on both sides, so their
 * bits agree (as mts_gemm's store rule does for the GEMMs). */
static inline MTS_HD float mts_fm_canon(float x) { return x != x ? mts_fm_float(0x7FC00000u) : x; }

static inline MTS_HD void mts_fm_sumf_init(mts_fm_sumf *s)
{
    s->chunk = 0.0f;
    s->in_chunk = 0;
    s->nchunks = 0;
    s->top = 0;
}

static inline MTS_HD void mts_fm__sumf_chunk(mts_fm_sumf *s, float c)
{
    for (uint64_t m = s->nchunks; m & 1u; m >>= 1) c = mts_fm_add(s->stack[--s->top], c);
    s->stack[s->top++] = c;
    s->nchunks++;
}

static inline MTS_HD void mts_fm_sumf_push(mts_fm_sumf *s, float t)
{
    s->chunk = mts_fm_add(s->chunk, t);
    if (++s->in_chunk == MTS_FM_CHUNK) {
        mts_fm__sumf_chunk(s, s->chunk);
        s->chunk = 0.0f;
        s->in_chunk = 0;
    }
}

static inline MTS_HD float mts_fm_sumf_sum(mts_fm_sumf *s)
{
    if (s->in_chunk) mts_fm__sumf_chunk(s, s->chunk);
    s->in_chunk = 0;
    if (s->top == 0) return 0.0f;
    float r = s->stack[--s->top];
    while (s->top > 0) r = mts_fm_add(s->stack[--s->top], r);
    return mts_fm_canon(r); /* a NaN sum: the same bits on the CPU and the GPU */
}

/* The sum of x[0, n) in the same order, hence the same bits, as pushing
 * each term into a fresh mts_fm_sumf and taking mts_fm_sumf_sum. Eight
 * chunks are summed side by side (independent add chains: one chain of n
 * adds waits on the add latency for every term), then go into the tree in
 * their order. */
static inline MTS_HD float mts_fm_sumf_array(const float *x, size_t n)
{
    enum { Q = 8 };
    mts_fm_sumf s;
    mts_fm_sumf_init(&s);
    size_t full = n / MTS_FM_CHUNK, c = 0;
    for (; c + Q <= full; c += Q) {
        const float *b = x + c * MTS_FM_CHUNK;
        float ch[Q];
        for (int q = 0; q < Q; q++) ch[q] = 0.0f;
        for (int i = 0; i < MTS_FM_CHUNK; i++)
            for (int q = 0; q < Q; q++) ch[q] = mts_fm_add(ch[q], b[q * MTS_FM_CHUNK + i]);
        for (int q = 0; q < Q; q++) mts_fm__sumf_chunk(&s, ch[q]);
    }
    for (size_t j = c * MTS_FM_CHUNK; j < n; j++) mts_fm_sumf_push(&s, x[j]);
    return mts_fm_sumf_sum(&s);
}

/* ------------------------------------------------ transformer rows */

/* The arithmetic of the transformer ops of nn_ops.h that is not a GEMM:
 * GELU, the row softmax and LayerNorm, one element or one row at a time.
 * The CPU ops (sim/nn/act.c, attention.c, layernorm.c) and their CUDA
 * twins (gpu/nn_tx.cu) both call these, so both round the same operations
 * in the same order. */


/* GELU, tanh form (Hendrycks & Gimpel): sqrt(2/pi) and the cubic's factor. */
#define MTS_FM_GELU_C 0.7978845608028654f
#define MTS_FM_GELU_A 0.044715f

/* tanh(sqrt(2/pi) (v + 0.044715 v^3)) */
static inline MTS_HD float mts_fm_gelu_tanh(float v)
{
    float c = mts_fm_mul(mts_fm_mul(mts_fm_mul(MTS_FM_GELU_A, v), v), v);
    return mts_fm_tanhf(mts_fm_mul(MTS_FM_GELU_C, mts_fm_add(v, c)));
}
/* 0.5 v (1 + t) */
static inline MTS_HD float mts_fm_gelu(float v)
{
    return mts_fm_canon(mts_fm_mul(mts_fm_mul(0.5f, v), mts_fm_add(1.0f, mts_fm_gelu_tanh(v))));
}
/* d GELU / dv = 0.5 (1 + t) + 0.5 v (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 v^2) */
static inline MTS_HD float mts_fm_gelu_grad(float v)
{
    float t = mts_fm_gelu_tanh(v);
    float l = mts_fm_mul(0.5f, mts_fm_add(1.0f, t));
    float r = mts_fm_mul(mts_fm_mul(mts_fm_mul(0.5f, v), mts_fm_sub(1.0f, mts_fm_mul(t, t))), MTS_FM_GELU_C);
    float q = mts_fm_add(1.0f, mts_fm_mul(mts_fm_mul(mts_fm_mul(3.0f, MTS_FM_GELU_A), v), v));
    return mts_fm_canon(mts_fm_add(l, mts_fm_mul(r, q)));
}

/* One row of the softmax: y = exp(x - max) / sum, the FP32 sum in j order
 * from +0 (y may be x). */
static inline MTS_HD void mts_fm_softmax_row(int W, const float *x, float *y)
{
    float mx = x[0], s = 0.0f;
    for (int j = 1; j < W; j++)
        if (x[j] > mx) mx = x[j];
    for (int j = 0; j < W; j++) {
        y[j] = mts_fm_expf(mts_fm_sub(x[j], mx));
        s = mts_fm_add(s, y[j]);
    }
    for (int j = 0; j < W; j++) y[j] = mts_fm_canon(mts_fm_div(y[j], s));
}
/* Its gradient: dx = y (dy - sum_j dy_j y_j), the sum in j order from +0. */
static inline MTS_HD void mts_fm_softmax_row_grad(int W, const float *y, const float *dy, float *dx)
{
    float s = 0.0f;
    for (int j = 0; j < W; j++) s = mts_fm_add(s, mts_fm_mul(dy[j], y[j]));
    for (int j = 0; j < W; j++) dx[j] = mts_fm_canon(mts_fm_mul(y[j], mts_fm_sub(dy[j], s)));
}

/* One row of LayerNorm over D values: mean and variance in double (sums in
 * d order from +0), invstd = 1/sqrtf(var + eps) (returned), xhat = (x -
 * mean) invstd, y = xhat gamma + beta. */
static inline MTS_HD float mts_fm_layernorm_row(int D, const float *x, const float *gamma, const float *beta,
                                                float eps, float *y, float *xhat)
{
    double s = 0.0, v = 0.0;
    for (int d = 0; d < D; d++) s = mts_fm_dadd(s, (double)x[d]);
    double mean = mts_fm_ddiv(s, (double)D);
    for (int d = 0; d < D; d++) {
        double c = mts_fm_dsub((double)x[d], mean);
        v = mts_fm_dadd(v, mts_fm_dmul(c, c));
    }
    float is = mts_fm_div(1.0f, mts_fm_sqrt(mts_fm_add((float)mts_fm_ddiv(v, (double)D), eps))), m = (float)mean;
    for (int d = 0; d < D; d++) {
        float h = mts_fm_mul(mts_fm_sub(x[d], m), is);
        xhat[d] = mts_fm_canon(h);
        y[d] = mts_fm_canon(mts_fm_add(mts_fm_mul(h, gamma[d]), beta[d]));
    }
    return is;
}
/* Column d of LayerNorm's parameter gradients over R rows of width D:
 * dgamma[d] = sum dy xhat, dbeta[d] = sum dy, in double, in row order. */
static inline MTS_HD void mts_fm_layernorm_col_grad(int R, int D, int d, const float *dy, const float *xhat,
                                                    float *dgamma, float *dbeta)
{
    double g = 0.0, b = 0.0;
    for (int r = 0; r < R; r++) {
        size_t o = (size_t)r * D + d;
        g = mts_fm_dadd(g, mts_fm_dmul((double)dy[o], (double)xhat[o]));
        b = mts_fm_dadd(b, (double)dy[o]);
    }
    dgamma[d] = mts_fm_canon((float)g);
    dbeta[d] = mts_fm_canon((float)b);
}
/* One row of LayerNorm's input gradient: with g = dy gamma (double),
 * dx = invstd/D (D g - sum g - xhat sum(g xhat)), the sums in d order. */
static inline MTS_HD void mts_fm_layernorm_row_grad(int D, const float *dy, const float *gamma, const float *xhat,
                                                    float invstd, float *dx)
{
    double sg = 0.0, sgh = 0.0;
    for (int d = 0; d < D; d++) {
        double g = mts_fm_dmul((double)dy[d], (double)gamma[d]);
        sg = mts_fm_dadd(sg, g);
        sgh = mts_fm_dadd(sgh, mts_fm_dmul(g, (double)xhat[d]));
    }
    double k = mts_fm_ddiv((double)invstd, (double)D);
    for (int d = 0; d < D; d++) {
        double g = mts_fm_dmul((double)dy[d], (double)gamma[d]);
        double t = mts_fm_dsub(mts_fm_dsub(mts_fm_dmul((double)D, g), sg), mts_fm_dmul((double)xhat[d], sgh));
        dx[d] = mts_fm_canon((float)mts_fm_dmul(k, t));
    }
}

#endif
