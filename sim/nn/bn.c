/* bn.c - BatchNorm over (N, H, W) per channel, FP32 values with FP64
 * reductions (no catastrophic cancellation in the variance) in the fixed
 * blocked order of fmath.h over the terms in (n, h, w) order, which the GPU
 * twin implements too (docs/training.md). */
#include <math.h>

#include "mantis/fmath.h"
#include "mantis/nn_ops.h"

void mts_bn_forward(int train, int N, int C, int HW, const float *x, const float *gamma, const float *beta,
                    float *rmean, float *rvar, float mom, float eps, float *y, float *xhat, float *invstd)
{
    size_t cnt = (size_t)N * HW;
    for (int c = 0; c < C; c++) {
        float mean, var;
        if (train) {
            mts_fm_sumd acc;
            mts_fm_sumd_init(&acc);
            for (int n = 0; n < N; n++) {
                const float *xp = x + ((size_t)n * C + c) * HW;
                for (int i = 0; i < HW; i++) mts_fm_sumd_push(&acc, xp[i]);
            }
            double m = mts_fm_sumd_sum(&acc) / (double)cnt;
            mts_fm_sumd_init(&acc);
            for (int n = 0; n < N; n++) {
                const float *xp = x + ((size_t)n * C + c) * HW;
                for (int i = 0; i < HW; i++) mts_fm_sumd_push(&acc, (xp[i] - m) * (xp[i] - m));
            }
            double s2 = mts_fm_sumd_sum(&acc);
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
        mts_fm_sumd ag, agx;
        mts_fm_sumd_init(&ag);
        mts_fm_sumd_init(&agx);
        for (int n = 0; n < N; n++) {
            size_t off = ((size_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                mts_fm_sumd_push(&ag, dy[off + i]);
                mts_fm_sumd_push(&agx, (double)dy[off + i] * xhat[off + i]);
            }
        }
        double sg = mts_fm_sumd_sum(&ag), sgx = mts_fm_sumd_sum(&agx);
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
