/* layernorm.c - LayerNorm over the last dimension (FP32 values, double
 * statistics in a fixed order, as BatchNorm). */
#include <math.h>

#include "mantis/nn_ops.h"

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

void mts_layernorm_backward(int R, int D, const float *dy, const float *gamma, const float *xhat,
                            const float *invstd, float *dx, float *dgamma, float *dbeta)
{
    for (int d = 0; d < D; d++) {
        double g = 0.0, b = 0.0;
        for (int r = 0; r < R; r++) {
            g += (double)dy[(size_t)r * D + d] * xhat[(size_t)r * D + d];
            b += dy[(size_t)r * D + d];
        }
        dgamma[d] = (float)g;
        dbeta[d] = (float)b;
    }
    if (!dx) return;
    for (int r = 0; r < R; r++) {
        const float *dr = dy + (size_t)r * D, *hr = xhat + (size_t)r * D;
        /* dx = invstd/D (D g - sum g - xhat sum(g xhat)), g = dy gamma */
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
