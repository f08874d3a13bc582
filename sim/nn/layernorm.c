/* layernorm.c - LayerNorm over the last dimension (FP32 values, double
 * statistics in a fixed order, as BatchNorm); the arithmetic of a row is
 * fmath.h's, shared with the CUDA twin (gpu/nn_tx.cu). */
#include "mantis/nn_ops.h"
#include "nn_internal.h"

void mts_layernorm_forward(int R, int D, const float *x, const float *gamma, const float *beta, float eps,
                           float *y, float *xhat, float *invstd)
{
    for (int r = 0; r < R; r++)
        invstd[r] = mts_fm_layernorm_row(D, x + (size_t)r * D, gamma, beta, eps, y + (size_t)r * D,
                                         xhat + (size_t)r * D);
}

/* dgamma[d], dbeta[d] for columns [d0, d1): each a sum over the rows in order. */
static void ln_col_sums(int d0, int d1, int R, int D, const float *dy, const float *xhat, float *dgamma,
                        float *dbeta)
{
    for (int d = d0; d < d1; d++) mts_fm_layernorm_col_grad(R, D, d, dy, xhat, dgamma, dbeta);
}

/* dx of rows [r0, r1): dx = invstd/D (D g - sum g - xhat sum(g xhat)), g = dy gamma. */
static void ln_dx_rows(int r0, int r1, int D, const float *dy, const float *gamma, const float *xhat,
                       const float *invstd, float *dx)
{
    for (int r = r0; r < r1; r++)
        mts_fm_layernorm_row_grad(D, dy + (size_t)r * D, gamma, xhat + (size_t)r * D, invstd[r], dx + (size_t)r * D);
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
