/* layernorm.c - LayerNorm over the last dimension (FP32 values, double
 * statistics in a fixed order, as BatchNorm). */
#include <math.h>

#include "mantis/nn_ops.h"
#include "nn_internal.h"

void mts_layernorm_forward(int R, int D, const float *x, const float *gamma, const float *beta, float eps,
                           float *y, float *xhat, float *invstd)
{
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * D;
        double s = 0.0, v = 0.0;
        for (int d = 0; d < D; d++) s += xr[d];
        double mean = s / D;
        for (int d = 0; d < D; d++) v += (xr[d] - mean) * (xr[d] - mean);
        float is = 1.0f / sqrtf((float)(v / D) + eps), m = (float)mean;
        invstd[r] = is;
        for (int d = 0; d < D; d++) {
            float h = (xr[d] - m) * is;
            xhat[(size_t)r * D + d] = h;
            y[(size_t)r * D + d] = h * gamma[d] + beta[d];
        }
    }
}

/* dgamma[d], dbeta[d] for columns [d0, d1): each a sum over the rows in order. */
static void ln_col_sums(int d0, int d1, int R, int D, const float *dy, const float *xhat, float *dgamma,
                        float *dbeta)
{
    for (int d = d0; d < d1; d++) {
        double g = 0.0, b = 0.0;
        for (int r = 0; r < R; r++) {
            g += (double)dy[(size_t)r * D + d] * xhat[(size_t)r * D + d];
            b += dy[(size_t)r * D + d];
        }
        dgamma[d] = (float)g;
        dbeta[d] = (float)b;
    }
}

/* dx of rows [r0, r1): dx = invstd/D (D g - sum g - xhat sum(g xhat)), g = dy gamma. */
static void ln_dx_rows(int r0, int r1, int D, const float *dy, const float *gamma, const float *xhat,
                       const float *invstd, float *dx)
{
    for (int r = r0; r < r1; r++) {
        const float *dr = dy + (size_t)r * D, *hr = xhat + (size_t)r * D;
        double sg = 0.0, sgh = 0.0;
        for (int d = 0; d < D; d++) {
            double g = (double)dr[d] * gamma[d];
            sg += g;
            sgh += g * hr[d];
        }
        for (int d = 0; d < D; d++) {
            double g = (double)dr[d] * gamma[d];
            dx[(size_t)r * D + d] = (float)((double)invstd[r] / D * (D * g - sg - hr[d] * sgh));
        }
    }
}

void mts_layernorm_backward(int R, int D, const float *dy, const float *gamma, const float *xhat,
                            const float *invstd, float *dx, float *dgamma, float *dbeta)
{
    ln_col_sums(0, D, R, D, dy, xhat, dgamma, dbeta);
    if (dx) ln_dx_rows(0, R, D, dy, gamma, xhat, invstd, dx);
}

/* The same on threads: the forward's rows and the input gradient's rows are
 * independent, and each column's dgamma / dbeta keeps its sum over the rows
 * in order, so any count gives the same bits (one thread below 2^16
 * elements). */
static int ln_threads(int threads, int R, int D) { return (double)R * D < 65536.0 || threads < 1 ? 1 : threads; }

void mts__layernorm_forward_t(int threads, int R, int D, const float *x, const float *gamma, const float *beta,
                              float eps, float *y, float *xhat, float *invstd)
{
    int T = ln_threads(threads, R, D), blk = (R + T - 1) / T;
    (void)blk;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int t = 0; t < T; t++) {
        int r0 = t * blk, r1 = r0 + blk < R ? r0 + blk : R;
        if (r1 > r0)
            mts_layernorm_forward(r1 - r0, D, x + (size_t)r0 * D, gamma, beta, eps, y + (size_t)r0 * D,
                                  xhat + (size_t)r0 * D, invstd + r0);
    }
}

void mts__layernorm_backward_t(int threads, int R, int D, const float *dy, const float *gamma, const float *xhat,
                               const float *invstd, float *dx, float *dgamma, float *dbeta)
{
    int T = ln_threads(threads, R, D), cb = (D + T - 1) / T, rb = (R + T - 1) / T;
    (void)cb;
    (void)rb;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int t = 0; t < T; t++) {
        int d0 = t * cb, d1 = d0 + cb < D ? d0 + cb : D;
        if (d1 > d0) ln_col_sums(d0, d1, R, D, dy, xhat, dgamma, dbeta);
    }
    if (!dx) return;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int t = 0; t < T; t++) {
        int r0 = t * rb, r1 = r0 + rb < R ? r0 + rb : R;
        if (r1 > r0) ln_dx_rows(r0, r1, D, dy, gamma, xhat, invstd, dx);
    }
}
