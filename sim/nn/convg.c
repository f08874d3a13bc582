/* convg.c - Conv2D of general geometry (PyTorch's nn.Conv2d: rectangular
 * kernel, per-axis stride, zero padding and dilation, groups) as im2col +
 * GEMM per group, backward as two GEMMs + col2im per group.
 *
 * The readable form of conv.c's mapping: per group the same GEMMs, operand
 * order and sums as mts_conv2d_* (forward col^T x W^T summing over
 * K = (ci, ky, kx); weight gradient dY x col^T summing over N*P in (n, oy,
 * ox) order; input gradient dY^T x W summing over the group's output
 * channels, then each input pixel adds its taps in (ky, kx) order from +0),
 * so a geometry both accept gives the same bits. No chunking and no
 * vectorised copies: the front end (nn_front.h) sends the geometries
 * mts_conv2d_* accepts there. */
#include <stdlib.h>
#include <string.h>

#include "mantis/fmath.h"
#include "mantis/nn_ops.h"
#include "mantis/nn_trace.h"

int mts_convg_geom_init(mts_convg_geom *g, mts_err *err)
{
    if (g->cin < 1 || g->cout < 1 || g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->ph < 0 || g->pw < 0 ||
        g->dh < 1 || g->dw < 1 || g->groups < 1 || g->h < 1 || g->w < 1)
        return mts_fail(err, MTS_EINVAL,
                        "conv: bad geometry (cin %d cout %d kernel %dx%d stride %dx%d padding %dx%d dilation %dx%d "
                        "groups %d input %dx%d)",
                        g->cin, g->cout, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw, g->groups, g->h,
                        g->w);
    if (g->cin % g->groups || g->cout % g->groups)
        return mts_fail(err, MTS_EINVAL, "conv: %d groups do not divide %d input and %d output channels", g->groups,
                        g->cin, g->cout);
    long eh = (long)g->dh * (g->kh - 1) + 1, ew = (long)g->dw * (g->kw - 1) + 1;
    long hp = (long)g->h + 2L * g->ph, wp = (long)g->w + 2L * g->pw;
    if (hp < eh || wp < ew)
        return mts_fail(err, MTS_EINVAL, "conv: dilated %ldx%ld kernel larger than padded input %ldx%ld", eh, ew, hp,
                        wp);
    g->oh = (int)((hp - eh) / g->sh + 1);
    g->ow = (int)((wp - ew) / g->sw + 1);
    return MTS_OK;
}

/* Tap (ky, kx) of output pixel (oy, ox): input row and column, or -1
 * outside the input (a padding zero). */
static int tap_row(const mts_convg_geom *g, int oy, int ky)
{
    int iy = oy * g->sh - g->ph + ky * g->dh;
    return iy >= 0 && iy < g->h ? iy : -1;
}
static int tap_col(const mts_convg_geom *g, int ox, int kx)
{
    int ix = ox * g->sw - g->pw + kx * g->dw;
    return ix >= 0 && ix < g->w ? ix : -1;
}

/* Group gr's column matrix: col[(ci, ky, kx)][n*P + oy*ow + ox] (trans 0)
 * or its transpose colT[n*P + ...][(ci, ky, kx)] (trans 1). */
static void im2col_group(const mts_convg_geom *g, int N, int gr, const float *x, float *col, int trans)
{
    int cg = g->cin / g->groups, P = g->oh * g->ow, Kg = cg * g->kh * g->kw;
    size_t NP = (size_t)N * P;
    for (int ci = 0; ci < cg; ci++)
        for (int ky = 0; ky < g->kh; ky++)
            for (int kx = 0; kx < g->kw; kx++) {
                size_t r = ((size_t)ci * g->kh + ky) * g->kw + kx;
                for (int n = 0; n < N; n++) {
                    const float *xp = x + ((size_t)n * g->cin + (size_t)gr * cg + ci) * g->h * g->w;
                    for (int oy = 0; oy < g->oh; oy++) {
                        int iy = tap_row(g, oy, ky);
                        for (int ox = 0; ox < g->ow; ox++) {
                            int ix = tap_col(g, ox, kx);
                            float v = iy >= 0 && ix >= 0 ? xp[(size_t)iy * g->w + ix] : 0.0f;
                            size_t c = (size_t)n * P + (size_t)oy * g->ow + ox;
                            if (trans) col[c * Kg + r] = v;
                            else col[r * NP + c] = v;
                        }
                    }
                }
            }
}

int mts_convg_forward(const mts_nn_ctx *ctx, const mts_convg_geom *g, int N, const float *x, const float *w,
                      const float *b, float *y, mts_err *err)
{
    int G = g->groups, cg = g->cin / G, og = g->cout / G, P = g->oh * g->ow, Kg = cg * g->kh * g->kw;
    size_t NP = (size_t)N * P;
    float *col = malloc(sizeof(float) * NP * Kg), *t = malloc(sizeof(float) * NP * og);
    int rc = MTS_OK;
    if (!col || !t) {
        rc = mts_fail(err, MTS_ENOMEM, "conv forward: out of memory (%zu x %d col matrix)", NP, Kg);
        goto done;
    }
    for (int gr = 0; gr < G && rc == MTS_OK; gr++) {
        im2col_group(g, N, gr, x, col, 0);
        /* col^T * w_g^T [N*P][og], stored transposed as t[og][N*P]: a =
         * activation, b = weight, sum over Kg in (ci, ky, kx) order */
        rc = mts_nn_gemm_t(ctx, ctx->fwd, 1, 1, (int)NP, og, Kg, col, (int)NP, w + (size_t)gr * og * Kg, Kg, 0.0f, t,
                           (int)NP, err);
        for (int co = 0; co < og && rc == MTS_OK; co++) {
            int c = gr * og + co;
            float bias = b ? b[c] : 0.0f;
            for (int n = 0; n < N; n++) {
                float *yo = y + ((size_t)n * g->cout + c) * P;
                const float *to = t + (size_t)co * NP + (size_t)n * P;
                for (int q = 0; q < P; q++) yo[q] = mts_fm_canon(to[q] + bias);
            }
        }
    }
done:
    free(col);
    free(t);
    return rc;
}

int mts_convg_backward(const mts_nn_ctx *ctx, const mts_convg_geom *g, int N, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *db, mts_err *err)
{
    int G = g->groups, cg = g->cin / G, og = g->cout / G, P = g->oh * g->ow, Kg = cg * g->kh * g->kw, C = g->cout;
    size_t NP = (size_t)N * P;
    float *dyc = malloc(sizeof(float) * NP * C);
    float *col = (dw || dx) ? malloc(sizeof(float) * NP * Kg) : NULL;
    int rc = MTS_OK;
    if (!dyc || ((dw || dx) && !col)) {
        rc = mts_fail(err, MTS_ENOMEM, "conv backward: out of memory (%zu x %d matrices)", NP, Kg);
        goto done;
    }
    /* dyc[co][n*P + q]: the output gradient as the GEMMs' [cout][N*P] operand */
    for (int n = 0; n < N; n++)
        for (int co = 0; co < C; co++)
            memcpy(dyc + (size_t)co * NP + (size_t)n * P, dy + ((size_t)n * C + co) * P, sizeof(float) * (size_t)P);
    if (db) /* the fixed blocked order of fmath.h, (n, p) order */
        for (int co = 0; co < C; co++) db[co] = mts_fm_sumf_array(dyc + (size_t)co * NP, NP);
    if (dx) memset(dx, 0, sizeof(float) * (size_t)N * g->cin * g->h * g->w);
    for (int gr = 0; gr < G && rc == MTS_OK; gr++) {
        const float *dyg = dyc + (size_t)gr * og * NP, *wg = w + (size_t)gr * og * Kg;
        if (dw) {
            im2col_group(g, N, gr, x, col, 1);
            /* dw_g[og][Kg] = dyg * colT: a = gradient, b = activation, sum over N*P in (n, oy, ox) order */
            rc = mts_nn_gemm(ctx, ctx->bwd, 0, 0, og, Kg, (int)NP, dyg, (int)NP, col, Kg, 0.0f,
                             dw + (size_t)gr * og * Kg, Kg, err);
        }
        if (rc == MTS_OK && dx) {
            /* dyg^T * w_g [N*P][Kg], stored transposed as dcol[Kg][N*P]: a =
             * gradient, b = weight, sum over the group's og channels in order */
            rc = mts_nn_gemm_t(ctx, ctx->bwd, 1, 0, (int)NP, Kg, og, dyg, (int)NP, wg, Kg, 0.0f, col, (int)NP, err);
            /* col2im: each input pixel receives its taps in (ky, kx) order, from +0 */
            for (int n = 0; n < N && rc == MTS_OK; n++)
                for (int ci = 0; ci < cg; ci++) {
                    float *xp = dx + ((size_t)n * g->cin + (size_t)gr * cg + ci) * g->h * g->w;
                    for (int ky = 0; ky < g->kh; ky++)
                        for (int kx = 0; kx < g->kw; kx++) {
                            const float *row = col + (((size_t)ci * g->kh + ky) * g->kw + kx) * NP + (size_t)n * P;
                            for (int oy = 0; oy < g->oh; oy++) {
                                int iy = tap_row(g, oy, ky);
                                if (iy < 0) continue;
                                for (int ox = 0; ox < g->ow; ox++) {
                                    int ix = tap_col(g, ox, kx);
                                    if (ix >= 0) xp[(size_t)iy * g->w + ix] += row[(size_t)oy * g->ow + ox];
                                }
                            }
                        }
                    /* a NaN sum as 0x7FC00000, as conv.c's col2im (mts_fm_canon) */
                    for (size_t i = 0; i < (size_t)g->h * g->w; i++) xp[i] = mts_fm_canon(xp[i]);
                }
        }
    }
done:
    free(dyc);
    free(col);
    return rc;
}
