/* act.c - activations: ReLU and GELU (FP32). */
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "mantis/nn_ops.h"
#include "nn_internal.h"

void mts_relu_forward(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void mts_relu_backward(size_t n, const float *y, const float *dy, float *dx)
{
    /* the output decides: y > 0 exactly where x > 0 */
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* Elementwise passes on threads: each element's value does not depend on
 * which thread computes it. Blocks of 16 KiB keep threads on whole lines. */
#define EW_MIN 65536
#define EW_BLK 4096
static int ew_threads(int threads, size_t n) { return n < EW_MIN || threads < 1 ? 1 : threads; }

void mts__relu_forward_t(int threads, size_t n, const float *x, float *y)
{
    int T = ew_threads(threads, n);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (size_t b = 0; b < n; b += EW_BLK) mts_relu_forward(n - b < EW_BLK ? n - b : EW_BLK, x + b, y + b);
}

void mts__relu_backward_t(int threads, size_t n, const float *y, const float *dy, float *dx, int pz)
{
    int T = ew_threads(threads, n);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (size_t b = 0; b < n; b += EW_BLK) {
        size_t e = n - b < EW_BLK ? n - b : EW_BLK;
        if (!pz) mts_relu_backward(e, y + b, dy + b, dx + b);
        else /* +0 + the gradient: a -0 from dy becomes +0 */
            for (size_t i = b; i < b + e; i++) dx[i] = y[i] > 0.0f ? 0.0f + dy[i] : 0.0f;
    }
}

void mts__copy_pz_t(int threads, size_t n, const float *src, float *dst)
{
    int T = ew_threads(threads, n);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (size_t i = 0; i < n; i++) dst[i] = mts_fm_canon(0.0f + src[i]);
}

void mts__add_t(int threads, size_t n, const float *a, const float *b, float *y)
{
    int T = ew_threads(threads, n);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (size_t i = 0; i < n; i++) y[i] = mts_fm_canon(a[i] + b[i]);
}

void mts__add_relu_t(int threads, size_t n, const float *a, const float *b, float *y)
{
    int T = ew_threads(threads, n);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (size_t i = 0; i < n; i++) {
        float v = a[i] + b[i]; /* a NaN sum: +0 either way, canonical or not */
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

void mts__add_relu_backward_t(int threads, size_t n, const float *ry, const float *dy, float *dx, float *sc,
                              int sc_first)
{
    int T = ew_threads(threads, n);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (size_t i = 0; i < n; i++) {
        float v = 0.0f + dy[i], g = ry[i] > 0.0f ? v : 0.0f; /* the ReLU's backward (pz) */
        dx[i] = mts_fm_canon(0.0f + g);
        sc[i] = mts_fm_canon((sc_first ? 0.0f : sc[i]) + g);
    }
}

void mts__acc_t(int threads, size_t n, float *dst, const float *src)
{
    int T = ew_threads(threads, n);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (size_t i = 0; i < n; i++) dst[i] = mts_fm_canon(dst[i] + src[i]);
}

void mts__plus_zero_t(int threads, size_t n, float *dst)
{
    int T = ew_threads(threads, n);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (size_t i = 0; i < n; i++) dst[i] = mts_fm_canon(0.0f + dst[i]);
}

/* GELU, tanh form (Hendrycks & Gimpel): the definitions of one element (the
 * value and the derivative) are fmath.h's, shared with the CUDA twin
 * (gpu/nn_tx.cu). */
#if defined(__AVX512F__)
/* mts_fm_tanhf (fmath.h) on 16 lanes: every branch of the scalar function
 * evaluated with the same FP32 operations in the same order (separate
 * multiplies and adds, the one correctly rounded division), and each lane's
 * own result picked by blends. Where the exponential's branch is taken,
 * 2|x| lies in [1.1, 18.2), so mts_fm_expf's normal path (no overflow, no
 * underflow, 2^k a normal number) is the only one it needs. */
static inline __m512 tanh16(__m512 x)
{
#define MUL _mm512_mul_ps
#define ADD _mm512_add_ps
#define SUB _mm512_sub_ps
#define C(v) _mm512_set1_ps(v)
    const __m512i ux = _mm512_castps_si512(x);
    const __m512i sign = _mm512_and_si512(ux, _mm512_set1_epi32((int)0x80000000u));
    const __m512 ax = _mm512_castsi512_ps(_mm512_and_si512(ux, _mm512_set1_epi32(0x7FFFFFFF)));
    /* |x| < 0.55: odd polynomial */
    __m512 z = MUL(ax, ax), p = C(-2.39129120e-04f);
    p = ADD(MUL(p, z), C(5.90027426e-04f));
    p = ADD(MUL(p, z), C(-1.45583437e-03f));
    p = ADD(MUL(p, z), C(3.59212793e-03f));
    p = ADD(MUL(p, z), C(-8.86323582e-03f));
    p = ADD(MUL(p, z), C(2.18694881e-02f));
    p = ADD(MUL(p, z), C(-5.39682545e-02f));
    p = ADD(MUL(p, z), C(1.33333340e-01f));
    p = ADD(MUL(p, z), C(-3.33333343e-01f));
    const __m512 rs = ADD(ax, MUL(MUL(ax, z), p));
    /* else 1 - 2 / (e^(2|x|) + 1), e^y as mts_fm_expf's normal path */
    const __m512 y = ADD(ax, ax), shift = C(12582912.0f);
    const __m512 t = ADD(MUL(y, C(1.44269502e+00f)), shift);
    const __m512i k = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(shift));
    const __m512 kf = SUB(t, shift);
    const __m512 r = SUB(SUB(y, MUL(kf, C(6.93145752e-01f))), MUL(kf, C(1.42860677e-06f)));
    __m512 q = C(2.48015876e-05f);
    q = ADD(MUL(q, r), C(1.98412701e-04f));
    q = ADD(MUL(q, r), C(1.38888892e-03f));
    q = ADD(MUL(q, r), C(8.33333377e-03f));
    q = ADD(MUL(q, r), C(4.16666679e-02f));
    q = ADD(MUL(q, r), C(1.66666672e-01f));
    q = ADD(MUL(q, r), C(0.5f));
    const __m512 er = ADD(C(1.0f), ADD(r, MUL(MUL(r, r), q)));
    const __m512 e = MUL(er, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23)));
    const __m512 rl = SUB(C(1.0f), _mm512_div_ps(C(2.0f), ADD(e, C(1.0f))));
    __m512 res = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, C(9.1f), _CMP_GE_OQ), rl, C(1.0f));
    res = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, C(0.55f), _CMP_LT_OQ), res, rs);
    res = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(res), sign));
    /* inf: +-1; NaN: x + x */
    const __mmask16 special = _mm512_cmpeq_epi32_mask(_mm512_and_si512(ux, _mm512_set1_epi32(0x7F800000)),
                                                      _mm512_set1_epi32(0x7F800000));
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    res = _mm512_mask_blend_ps(special, res, _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_set1_epi32(0x3F800000))));
    return _mm512_mask_blend_ps(nan, res, ADD(x, x));
}

/* The tanh of GELU's argument, 16 lanes (mts_fm_gelu_tanh). */
static inline __m512 gelu_tanh16(__m512 v)
{
    return tanh16(MUL(C(MTS_FM_GELU_C), ADD(v, MUL(MUL(MUL(C(MTS_FM_GELU_A), v), v), v))));
}
#endif

/* The fast forms below compute mts_fm_gelu / mts_fm_gelu_grad 16 elements a step
 * on AVX-512 (the same operations in the same order: same bits, tested
 * against the definitions over a sweep of every 4093rd bit pattern). */
void mts_gelu_forward(size_t n, const float *x, float *y)
{
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i), t = gelu_tanh16(v);
        _mm512_storeu_ps(y + i, nn_canon16(MUL(MUL(C(0.5f), v), ADD(C(1.0f), t))));
    }
#endif
    for (; i < n; i++) y[i] = mts_fm_gelu(x[i]);
}

void mts_gelu_backward(size_t n, const float *x, const float *dy, float *dx)
{
    size_t i = 0;
#if defined(__AVX512F__)
    const float a3 = 3.0f * MTS_FM_GELU_A;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i), t = gelu_tanh16(v);
        __m512 d = ADD(MUL(C(0.5f), ADD(C(1.0f), t)),
                       MUL(MUL(MUL(MUL(C(0.5f), v), SUB(C(1.0f), MUL(t, t))), C(MTS_FM_GELU_C)),
                           ADD(C(1.0f), MUL(MUL(C(a3), v), v))));
        _mm512_storeu_ps(dx + i, nn_canon16(MUL(_mm512_loadu_ps(dy + i), d)));
    }
#endif
    for (; i < n; i++) dx[i] = mts_fm_canon(dy[i] * mts_fm_gelu_grad(x[i]));
}

void mts__gelu_forward_t(int threads, size_t n, const float *x, float *y)
{
    int T = ew_threads(threads, n);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (size_t b = 0; b < n; b += EW_BLK) mts_gelu_forward(n - b < EW_BLK ? n - b : EW_BLK, x + b, y + b);
}

void mts__gelu_backward_t(int threads, size_t n, const float *x, const float *dy, float *dx)
{
    int T = ew_threads(threads, n);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (size_t b = 0; b < n; b += EW_BLK) mts_gelu_backward(n - b < EW_BLK ? n - b : EW_BLK, x + b, dy + b, dx + b);
}
