/* conv.c - Conv2D as im2col + GEMM; backward as two GEMMs + col2im.
 *
 * The whole batch is unrolled into one col matrix [K][N*P] (K = cin*k*k,
 * P = oh*ow) so that each pass is a single GEMM whose reductions (over K
 * forward, over N*P for the weight gradient, over cout for the input
 * gradient) all run through the provider in its documented order. */
#include <stdlib.h>
#include <string.h>

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

void mts_im2col(const mts_conv_geom *g, int N, const float *x, float *col)
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

void mts_col2im(const mts_conv_geom *g, int N, const float *dcolT, float *dx)
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
    /* t[N*P][cout] = col^T * w^T: a = activation, b = weight, sum over K in order */
    rc = mts_nn_gemm(ctx, ctx->fwd, 1, 1, (int)NP, g->cout, K, col, (int)NP, w, K, 0.0f, t, g->cout, err);
    if (rc == MTS_OK)
        for (int n = 0; n < N; n++)
            for (int co = 0; co < g->cout; co++) {
                float *yo = y + ((size_t)n * g->cout + co) * P;
                float bias = b ? b[co] : 0.0f;
                for (int q = 0; q < P; q++) yo[q] = t[((size_t)n * P + q) * g->cout + co] + bias;
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
    float *dyt = malloc(sizeof(float) * NP * C);
    float *col = dw ? malloc(sizeof(float) * NP * K) : NULL;
    float *dcol = dx ? malloc(sizeof(float) * NP * K) : NULL;
    int rc = MTS_OK;
    if (!dyt || (dw && !col) || (dx && !dcol)) {
        rc = mts_fail(err, MTS_ENOMEM, "conv backward: out of memory (%zu x %d matrices)", NP, K);
        goto done;
    }
    /* dyt[n*P+q][co]: the output gradient as the GEMMs' [N*P][cout] operand */
    for (int n = 0; n < N; n++)
        for (int co = 0; co < C; co++)
            for (int q = 0; q < P; q++) dyt[((size_t)n * P + q) * C + co] = dy[((size_t)n * C + co) * P + q];
    if (db)
        for (int co = 0; co < C; co++) {
            mts_fm_sumf s; /* the fixed blocked order of fmath.h, (n, p) order */
            mts_fm_sumf_init(&s);
            for (size_t j = 0; j < NP; j++) mts_fm_sumf_push(&s, dyt[j * C + co]);
            db[co] = mts_fm_sumf_sum(&s);
        }
    if (dw) {
        mts_im2col(g, N, x, col);
        /* dw[cout][K] = dyt^T * col^T: a = gradient, b = activation, sum over N*P in order */
        rc = mts_nn_gemm(ctx, ctx->bwd, 1, 1, C, K, (int)NP, dyt, C, col, (int)NP, 0.0f, dw, K, err);
    }
    if (rc == MTS_OK && dx) {
        /* dcol[N*P][K] = dyt * w: a = gradient, b = weight, sum over cout in order */
        rc = mts_nn_gemm(ctx, ctx->bwd, 0, 0, (int)NP, K, C, dyt, C, w, K, 0.0f, dcol, K, err);
        if (rc == MTS_OK) mts_col2im(g, N, dcol, dx);
    }
done:
    free(dyt);
    free(col);
    free(dcol);
    return rc;
}
