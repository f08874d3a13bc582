/* qat.c - the quantizers of quantization-aware training and the gradient
 * tables of integer multipliers (include/mantis/qat.h, docs/training.md). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/qat.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

void mts_qparam_affine(float rmin, float rmax, int bits, int is_signed, mts_qparam *q)
{
    mts_qparam_affine_hd(rmin, rmax, bits, is_signed, q);
}

void mts_qparam_symmetric(float rmin, float rmax, int bits, mts_qparam *q) { mts_qparam_symmetric_hd(rmin, rmax, bits, q); }

/* Finite min and max of x[0..n); 0 when there is none. (Min and max are
 * exact, so the vector form's order does not matter.) */
static int finite_minmax(const float *x, size_t n, float *lo, float *hi)
{
    float a = INFINITY, b = -INFINITY;
    size_t i = 0;
#if defined(__AVX512F__)
    __m512 va = _mm512_set1_ps(INFINITY), vb = _mm512_set1_ps(-INFINITY);
    const __m512 inf = _mm512_set1_ps(INFINITY);
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __mmask16 fin = _mm512_cmp_ps_mask(_mm512_abs_ps(v), inf, _CMP_LT_OQ); /* not NaN, not +-inf */
        va = _mm512_mask_min_ps(va, fin, va, v);
        vb = _mm512_mask_max_ps(vb, fin, vb, v);
    }
    a = _mm512_reduce_min_ps(va);
    b = _mm512_reduce_max_ps(vb);
#elif defined(__AVX2__)
    const __m256 inf = _mm256_set1_ps(INFINITY), ninf = _mm256_set1_ps(-INFINITY);
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 va = inf, vb = ninf;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 fin = _mm256_cmp_ps(_mm256_and_ps(v, abs), inf, _CMP_LT_OQ); /* not NaN, not +-inf */
        va = _mm256_min_ps(va, _mm256_blendv_ps(inf, v, fin));
        vb = _mm256_max_ps(vb, _mm256_blendv_ps(ninf, v, fin));
    }
    float ta[8], tb[8];
    _mm256_storeu_ps(ta, va);
    _mm256_storeu_ps(tb, vb);
    for (int j = 0; j < 8; j++) { /* zeros' signs are normalised by mts_qat_minmax_end */
        a = ta[j] < a ? ta[j] : a;
        b = tb[j] > b ? tb[j] : b;
    }
#endif
    for (; i < n; i++) mts_qat_minmax_push(x[i], &a, &b);
    return mts_qat_minmax_end(a, b, lo, hi);
}

void mts_qat_observe(float *st, const float *x, size_t n)
{
    float lo, hi;
    if (finite_minmax(x, n, &lo, &hi)) mts_qat_observe_hd(st, lo, hi);
}

void mts_qat_act_param(const float *st, const float *x, size_t n, int bits, int is_signed, mts_qparam *q)
{
    float lo = 0.0f, hi = 0.0f;
    if (st && st[2] != 0.0f) {
        lo = st[0];
        hi = st[1];
    } else {
        finite_minmax(x, n, &lo, &hi);
    }
    mts_qparam_affine(lo, hi, bits, is_signed, q);
}

void mts_qat_weight_params(const float *w, int out, int in, int bits, int is_signed, mts_qparam *q)
{
    for (int o = 0; o < out; o++) {
        float lo = 0.0f, hi = 0.0f;
        finite_minmax(w + (size_t)o * in, (size_t)in, &lo, &hi);
        if (is_signed) mts_qparam_symmetric(lo, hi, bits, &q[o]);
        else mts_qparam_affine(lo, hi, bits, 0, &q[o]);
    }
}

/* ------------------------------------------------------ gradient tables */

int mts_int_grad_default_window(int bits) { return bits > 4 ? 1 << (bits - 4) : 1; }

void mts_int_grad_free(mts_int_grad *g)
{
    free(g->da);
    free(g->db);
    memset(g, 0, sizeof *g);
}

/* The gradient along one line of N table values f[0..N) in value order
 * (the definition of qat.h), into out[0..N). pre: N+1 prefix sums. */
static void line_grad(const int64_t *f, int N, int h, int64_t *pre, double *S, float *out)
{
    pre[0] = 0;
    for (int t = 0; t < N; t++) pre[t + 1] = pre[t] + f[t];
    for (int t = 0; t < N; t++) {
        int ht = h;
        if (ht > t) ht = t;
        if (ht > N - 1 - t) ht = N - 1 - t;
        S[t] = (double)(pre[t + ht + 1] - pre[t - ht]) / (double)(2 * ht + 1);
    }
    for (int t = 0; t < N; t++) {
        double g = t == 0 ? S[1] - S[0] : t == N - 1 ? S[N - 1] - S[N - 2] : (S[t + 1] - S[t - 1]) / 2.0;
        out[t] = (float)g;
    }
}

int mts_int_grad_build(const mts_lut *lut, int half_window, mts_int_grad *g, mts_err *err)
{
    memset(g, 0, sizeof *g);
    if (!lut || lut->kind != MTS_LUT_INT || !lut->entry || lut->int_bits < 1 || lut->int_bits > 8)
        return mts_fail(err, MTS_EINVAL, "gradient table: expected an integer table of 1..8-bit operands");
    if (half_window < 0) return mts_fail(err, MTS_EINVAL, "gradient table: half window %d < 0", half_window);
    int n = lut->int_bits, N = 1 << n, sg = lut->int_signed != 0;
    size_t tot = (size_t)N * N;
    g->lut = lut;
    g->bits = n;
    g->is_signed = sg;
    g->half_window = half_window;
    g->da = malloc(tot * sizeof *g->da);
    g->db = malloc(tot * sizeof *g->db);
    int64_t *f = malloc((size_t)N * sizeof *f), *pre = malloc((size_t)(N + 1) * sizeof *pre);
    double *S = malloc((size_t)N * sizeof *S);
    float *out = malloc((size_t)N * sizeof *out);
    if (!g->da || !g->db || !f || !pre || !S || !out) {
        free(f);
        free(pre);
        free(S);
        free(out);
        mts_int_grad_free(g);
        return mts_fail(err, MTS_ENOMEM, "gradient table: out of memory");
    }
    /* position t in value order has code (t + off) mod N: values start at -N/2 when signed */
    uint32_t off = sg ? (uint32_t)N / 2 : 0, mask = (uint32_t)N - 1;
    for (int line = 0; line < N; line++) {
        uint32_t fixed = ((uint32_t)line + off) & mask;
        /* d/da: a varies along the line, b fixed */
        for (int t = 0; t < N; t++) {
            uint32_t ca = ((uint32_t)t + off) & mask;
            f[t] = (int32_t)lut->entry[(ca << n) | fixed];
        }
        line_grad(f, N, half_window, pre, S, out);
        for (int t = 0; t < N; t++) g->da[((((uint32_t)t + off) & mask) << n) | fixed] = out[t];
        /* d/db: b varies, a fixed */
        for (int t = 0; t < N; t++) f[t] = (int32_t)lut->entry[(fixed << n) | (((uint32_t)t + off) & mask)];
        line_grad(f, N, half_window, pre, S, out);
        for (int t = 0; t < N; t++) g->db[(fixed << n) | (((uint32_t)t + off) & mask)] = out[t];
    }
    free(f);
    free(pre);
    free(S);
    free(out);
    return MTS_OK;
}
