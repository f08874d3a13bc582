/* conv.c - Conv2D as im2col + GEMM; backward as two GEMMs + col2im.
 *
 * The whole batch is unrolled into one col matrix [K][N*P] (K = cin*k*k,
 * P = oh*ow) so that each pass is a single GEMM whose reductions (over K
 * forward, over N*P for the weight gradient, over cout for the input
 * gradient) all run through the provider in its documented order. */
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "mantis/fmath.h"
#include "mantis/nn_ops.h"
#include "mantis/nn_trace.h"

int mts_conv_geom_init(mts_conv_geom *g, mts_err *err)
{
    if (g->cin < 1 || g->cout < 1 || g->k < 1 || g->stride < 1 || g->pad < 0)
        return mts_fail(err, MTS_EINVAL, "conv: bad geometry (cin %d cout %d k %d stride %d pad %d)", g->cin,
                        g->cout, g->k, g->stride, g->pad);
    int hp = g->h + 2 * g->pad, wp = g->w + 2 * g->pad;
    if (hp < g->k || wp < g->k)
        return mts_fail(err, MTS_EINVAL, "conv: %dx%d kernel larger than padded input %dx%d", g->k, g->k, hp, wp);
    g->oh = (hp - g->k) / g->stride + 1;
    g->ow = (wp - g->k) / g->stride + 1;
    return MTS_OK;
}

/* The readable references: one element at a time, bounds checked. */
void mts_im2col_ref(const mts_conv_geom *g, int N, const float *x, float *col)
{
    int k = g->k, P = g->oh * g->ow;
    size_t NP = (size_t)N * P;
    for (int ci = 0; ci < g->cin; ci++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                float *row = col + ((size_t)(ci * k + ky) * k + kx) * NP;
                for (int n = 0; n < N; n++) {
                    const float *xp = x + ((size_t)n * g->cin + ci) * g->h * g->w;
                    float *r = row + (size_t)n * P;
                    for (int oy = 0; oy < g->oh; oy++) {
                        int iy = oy * g->stride - g->pad + ky;
                        for (int ox = 0; ox < g->ow; ox++) {
                            int ix = ox * g->stride - g->pad + kx;
                            r[oy * g->ow + ox] =
                                (iy >= 0 && iy < g->h && ix >= 0 && ix < g->w) ? xp[iy * g->w + ix] : 0.0f;
                        }
                    }
                }
            }
}

void mts_col2im_ref(const mts_conv_geom *g, int N, const float *dcolT, float *dx)
{
    int k = g->k, P = g->oh * g->ow, K = g->cin * k * k;
    memset(dx, 0, sizeof(float) * (size_t)N * g->cin * g->h * g->w);
    for (int n = 0; n < N; n++)
        for (int ci = 0; ci < g->cin; ci++) {
            float *xp = dx + ((size_t)n * g->cin + ci) * g->h * g->w;
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++) {
                    int r = (ci * k + ky) * k + kx;
                    for (int oy = 0; oy < g->oh; oy++) {
                        int iy = oy * g->stride - g->pad + ky;
                        if (iy < 0 || iy >= g->h) continue;
                        for (int ox = 0; ox < g->ow; ox++) {
                            int ix = ox * g->stride - g->pad + kx;
                            if (ix < 0 || ix >= g->w) continue;
                            xp[iy * g->w + ix] += dcolT[((size_t)n * P + oy * g->ow + ox) * K + r];
                        }
                    }
                }
        }
}

/* The output columns [*lo, *hi) whose tap kx lands inside the input row
 * (ix = ox*stride - pad + kx in [0, w)); the rest read padding. */
static void tap_range(const mts_conv_geom *g, int kx, int *lo, int *hi)
{
    int a = g->pad - kx, b = g->w + g->pad - kx; /* ox*stride in [a, b) */
    int l = a <= 0 ? 0 : (a + g->stride - 1) / g->stride;
    int h = b <= 0 ? 0 : (b + g->stride - 1) / g->stride;
    *lo = l < g->ow ? l : g->ow;
    *hi = h < g->ow ? h : g->ow;
    if (*hi < *lo) *hi = *lo;
}

/* Same values as mts_im2col_ref: the bounds are hoisted out of the pixel
 * loop so each output row is a zero fill and a (strided) copy. */
void mts_im2col(const mts_conv_geom *g, int N, const float *x, float *col)
{
    int k = g->k, P = g->oh * g->ow, ow = g->ow, s = g->stride;
    size_t NP = (size_t)N * P;
    for (int ci = 0; ci < g->cin; ci++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                float *row = col + ((size_t)(ci * k + ky) * k + kx) * NP;
                int lo, hi;
                tap_range(g, kx, &lo, &hi);
                for (int n = 0; n < N; n++) {
                    const float *xp = x + ((size_t)n * g->cin + ci) * g->h * g->w;
                    for (int oy = 0; oy < g->oh; oy++) {
                        float *r = row + (size_t)n * P + (size_t)oy * ow;
                        int iy = oy * s - g->pad + ky;
                        if (iy < 0 || iy >= g->h || lo == hi) {
                            memset(r, 0, sizeof *r * (size_t)ow);
                            continue;
                        }
                        const float *src = xp + (size_t)iy * g->w + (lo * s - g->pad + kx);
                        for (int ox = 0; ox < lo; ox++) r[ox] = 0.0f;
                        if (s == 1) memcpy(r + lo, src, sizeof *r * (size_t)(hi - lo));
                        else
                            for (int ox = lo; ox < hi; ox++) r[ox] = src[(size_t)(ox - lo) * s];
                        for (int ox = hi; ox < ow; ox++) r[ox] = 0.0f;
                    }
                }
            }
}

/* The transposed layout colT[N*P][K]: each output pixel's K taps are
 * contiguous (the weight gradient's B operand then needs no transposing
 * read). Each input row is first copied into a zero-padded buffer, so every
 * pixel's k taps of it are one unchecked copy of k floats (one masked
 * load/store on AVX-512); shapes beyond the buffer take the bounds-checked
 * loop. Same values as mts_im2col_ref, transposed. */
void mts_im2col_t(const mts_conv_geom *g, int N, const float *x, float *colT)
{
    enum { ROW_MAX = 1024 };
    int k = g->k, P = g->oh * g->ow, K = g->cin * k * k, s = g->stride, ow = g->ow;
    int wp = g->w + 2 * g->pad;
    if (k > 16 || wp > ROW_MAX) {
        for (int n = 0; n < N; n++)
            for (int oy = 0; oy < g->oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    float *dst = colT + ((size_t)n * P + (size_t)oy * ow + ox) * K;
                    for (int ci = 0; ci < g->cin; ci++)
                        for (int ky = 0; ky < k; ky++)
                            for (int kx = 0; kx < k; kx++, dst++) {
                                int iy = oy * s - g->pad + ky, ix = ox * s - g->pad + kx;
                                *dst = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w
                                           ? x[(((size_t)n * g->cin + ci) * g->h + iy) * g->w + ix]
                                           : 0.0f;
                            }
                }
        return;
    }
    float pr[ROW_MAX]; /* one input row with pad zeros each side */
    memset(pr, 0, sizeof pr);
#if defined(__AVX512F__)
    const __mmask16 km = (__mmask16)((1u << k) - 1u);
#endif
    for (int n = 0; n < N; n++)
        for (int ci = 0; ci < g->cin; ci++)
            for (int oy = 0; oy < g->oh; oy++)
                for (int ky = 0; ky < k; ky++) {
                    int iy = oy * s - g->pad + ky;
                    float *dst = colT + ((size_t)n * P + (size_t)oy * ow) * K + (size_t)(ci * k + ky) * k;
                    if (iy < 0 || iy >= g->h) {
                        for (int ox = 0; ox < ow; ox++) memset(dst + (size_t)ox * K, 0, sizeof *dst * (size_t)k);
                        continue;
                    }
                    memcpy(pr + g->pad, x + (((size_t)n * g->cin + ci) * g->h + iy) * g->w, sizeof *pr * (size_t)g->w);
                    for (int ox = 0; ox < ow; ox++) {
                        const float *src = pr + ox * s;
#if defined(__AVX512F__)
                        _mm512_mask_storeu_ps(dst + (size_t)ox * K, km, _mm512_maskz_loadu_ps(km, src));
#else
                        for (int kx = 0; kx < k; kx++) dst[(size_t)ox * K + kx] = src[kx];
#endif
                    }
                }
}

/* col2im over a tap matrix whose element (sample n, tap r, pixel p) lies at
 * src[n*ns + r*rs + p*ps]. Every input pixel receives its taps in the same
 * (ky, kx) order as mts_col2im_ref, so the sums equal it bit for bit; the
 * bounds are hoisted, and a strided row of taps (ps > 1) is first copied out
 * TB pixels at a time so the adds run over unit strides. */
static void col2im_any(const mts_conv_geom *g, int N, const float *src, size_t ns, size_t rs, size_t ps, float *dx)
{
    enum { TB = 256 };
    int k = g->k, ow = g->ow, s = g->stride;
    float buf[TB];
    memset(dx, 0, sizeof(float) * (size_t)N * g->cin * g->h * g->w);
    for (int n = 0; n < N; n++)
        for (int ci = 0; ci < g->cin; ci++) {
            float *xp = dx + ((size_t)n * g->cin + ci) * g->h * g->w;
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++) {
                    int r = (ci * k + ky) * k + kx, lo, hi;
                    tap_range(g, kx, &lo, &hi);
                    if (lo == hi) continue;
                    const float *d = src + (size_t)n * ns + (size_t)r * rs;
                    for (int oy = 0; oy < g->oh; oy++) {
                        int iy = oy * s - g->pad + ky;
                        if (iy < 0 || iy >= g->h) continue;
                        float *dst = xp + (size_t)iy * g->w + (lo * s - g->pad + kx);
                        const float *row = d + ((size_t)oy * ow + lo) * ps;
                        for (int o0 = 0; o0 < hi - lo; o0 += TB) {
                            int cnt = hi - lo - o0 < TB ? hi - lo - o0 : TB;
                            const float *v = row + (size_t)o0 * ps;
                            if (ps != 1) {
                                for (int q = 0; q < cnt; q++) buf[q] = v[(size_t)q * ps];
                                v = buf;
                            }
                            if (s == 1)
                                for (int q = 0; q < cnt; q++) dst[o0 + q] += v[q];
                            else
                                for (int q = 0; q < cnt; q++) dst[(size_t)(o0 + q) * s] += v[q];
                        }
                    }
                }
        }
}

void mts_col2im(const mts_conv_geom *g, int N, const float *dcolT, float *dx)
{
    size_t P = (size_t)g->oh * g->ow, K = (size_t)g->cin * g->k * g->k;
    col2im_any(g, N, dcolT, P * K, 1, K, dx);
}

void mts_col2im_rows(const mts_conv_geom *g, int N, const float *dcol, float *dx)
{
    size_t P = (size_t)g->oh * g->ow;
    col2im_any(g, N, dcol, P, (size_t)N * P, 1, dx);
}

int mts_conv2d_forward(const mts_nn_ctx *ctx, const mts_conv_geom *g, int N, const float *x,
                       const float *w, const float *b, float *y, mts_err *err)
{
    int K = g->cin * g->k * g->k, P = g->oh * g->ow;
    size_t NP = (size_t)N * P;
    float *col = malloc(sizeof(float) * NP * K);
    float *t = malloc(sizeof(float) * NP * g->cout);
    int rc;
    if (!col || !t) {
        rc = mts_fail(err, MTS_ENOMEM, "conv forward: out of memory (%zu x %d col matrix)", NP, K);
        goto done;
    }
    mts_im2col(g, N, x, col);
    /* col^T * w^T [N*P][cout], stored transposed as t[cout][N*P]: a =
     * activation, b = weight, sum over K in order */
    rc = mts_nn_gemm_t(ctx, ctx->fwd, 1, 1, (int)NP, g->cout, K, col, (int)NP, w, K, 0.0f, t, (int)NP, err);
    if (rc == MTS_OK)
        for (int n = 0; n < N; n++)
            for (int co = 0; co < g->cout; co++) {
                float *yo = y + ((size_t)n * g->cout + co) * P;
                const float *to = t + (size_t)co * NP + (size_t)n * P;
                float bias = b ? b[co] : 0.0f;
                for (int q = 0; q < P; q++) yo[q] = to[q] + bias;
            }
done:
    free(col);
    free(t);
    return rc;
}

int mts_conv2d_backward(const mts_nn_ctx *ctx, const mts_conv_geom *g, int N, const float *x,
                        const float *w, const float *dy, float *dx, float *dw, float *db, mts_err *err)
{
    int K = g->cin * g->k * g->k, P = g->oh * g->ow, C = g->cout;
    size_t NP = (size_t)N * P;
    float *dyc = malloc(sizeof(float) * NP * C);
    float *colT = dw ? malloc(sizeof(float) * NP * K) : NULL;
    float *dcol = dx ? malloc(sizeof(float) * NP * K) : NULL;
    int rc = MTS_OK;
    if (!dyc || (dw && !colT) || (dx && !dcol)) {
        rc = mts_fail(err, MTS_ENOMEM, "conv backward: out of memory (%zu x %d matrices)", NP, K);
        goto done;
    }
    /* dyc[co][n*P+q]: the output gradient as the GEMMs' [cout][N*P] operand
     * (rows of P copied whole; both GEMMs then read it without transposing) */
    for (int n = 0; n < N; n++)
        for (int co = 0; co < C; co++)
            memcpy(dyc + (size_t)co * NP + (size_t)n * P, dy + ((size_t)n * C + co) * P, sizeof(float) * (size_t)P);
    if (db)
        for (int co = 0; co < C; co++) {
            mts_fm_sumf s; /* the fixed blocked order of fmath.h, (n, p) order */
            mts_fm_sumf_init(&s);
            for (size_t j = 0; j < NP; j++) mts_fm_sumf_push(&s, dyc[(size_t)co * NP + j]);
            db[co] = mts_fm_sumf_sum(&s);
        }
    if (dw) {
        mts_im2col_t(g, N, x, colT);
        /* dw[cout][K] = dyc * colT: a = gradient, b = activation, sum over N*P in order */
        rc = mts_nn_gemm(ctx, ctx->bwd, 0, 0, C, K, (int)NP, dyc, (int)NP, colT, K, 0.0f, dw, K, err);
    }
    if (rc == MTS_OK && dx) {
        /* dyc^T * w [N*P][K], stored transposed as dcol[K][N*P]: a = gradient,
         * b = weight, sum over cout in order */
        rc = mts_nn_gemm_t(ctx, ctx->bwd, 1, 0, (int)NP, K, C, dyc, (int)NP, w, K, 0.0f, dcol, (int)NP, err);
        if (rc == MTS_OK) mts_col2im_rows(g, N, dcol, dx);
    }
done:
    free(dyc);
    free(colT);
    free(dcol);
    return rc;
}
