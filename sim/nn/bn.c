/* bn.c - BatchNorm over (N, H, W) per channel, FP32 values with double
 * reductions in a fixed order (deterministic, and no catastrophic
 * cancellation in the variance). */
#include <math.h>

#include "mantis/nn_ops.h"

void mts_bn_forward(int train, int N, int C, int HW, const float *x, const float *gamma, const float *beta,
                    float *rmean, float *rvar, float mom, float eps, float *y, float *xhat, float *invstd)
{
    size_t cnt = (size_t)N * HW;
    for (int c = 0; c < C; c++) {
        float mean, var;
        if (train) {
            double s = 0.0, s2 = 0.0;
            for (int n = 0; n < N; n++) {
                const float *xp = x + ((size_t)n * C + c) * HW;
                for (int i = 0; i < HW; i++) s += xp[i];
            }
            double m = s / (double)cnt;
            for (int n = 0; n < N; n++) {
                const float *xp = x + ((size_t)n * C + c) * HW;
                for (int i = 0; i < HW; i++) s2 += (xp[i] - m) * (xp[i] - m);
            }
            mean = (float)m;
            var = (float)(s2 / (double)cnt);
            /* running variance uses the unbiased estimate, as PyTorch */
            float uvar = cnt > 1 ? (float)(s2 / (double)(cnt - 1)) : var;
            rmean[c] = (1.0f - mom) * rmean[c] + mom * mean;
            rvar[c] = (1.0f - mom) * rvar[c] + mom * uvar;
        } else {
            mean = rmean[c];
            var = rvar[c];
        }
        float is = 1.0f / sqrtf(var + eps);
        if (invstd) invstd[c] = is;
        for (int n = 0; n < N; n++) {
            size_t off = ((size_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                float h = (x[off + i] - mean) * is;
                if (xhat) xhat[off + i] = h;
                y[off + i] = gamma[c] * h + beta[c];
            }
        }
    }
}

void mts_bn_backward(int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                     const float *invstd, float *dx, float *dgamma, float *dbeta)
{
    double cnt = (double)N * HW;
    for (int c = 0; c < C; c++) {
        double sg = 0.0, sgx = 0.0;
        for (int n = 0; n < N; n++) {
            size_t off = ((size_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                sg += dy[off + i];
                sgx += (double)dy[off + i] * xhat[off + i];
            }
        }
        if (dgamma) dgamma[c] = (float)sgx;
        if (dbeta) dbeta[c] = (float)sg;
        if (!dx) continue;
        /* dx = gamma*invstd*(dy - mean(dy) - xhat*mean(dy*xhat)) */
        float k = gamma[c] * invstd[c], mg = (float)(sg / cnt), mgx = (float)(sgx / cnt);
        for (int n = 0; n < N; n++) {
            size_t off = ((size_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) dx[off + i] = k * (dy[off + i] - mg - xhat[off + i] * mgx);
        }
    }
}
