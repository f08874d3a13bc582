/* pool.c - max, average and global average pooling (FP32, no GEMM). */
#include <string.h>

#include "mantis/nn_ops.h"

int mts_pool_out(int in, int k, int s) { return in < k ? 0 : (in - k) / s + 1; }

void mts_maxpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y, int32_t *argmax)
{
    int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
    for (size_t pl = 0; pl < (size_t)N * C; pl++) {
        const float *xp = x + pl * H * W;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                /* first maximum in raster order wins: a fixed tie rule (a NaN
                 * is never greater). Selects, not branches: which input wins
                 * is data, and a mispredicted branch per compare cost more
                 * than the rest of the pass. */
                int best = oy * s * W + ox * s;
                float bv = xp[best];
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) {
                        int i = (oy * s + ky) * W + ox * s + kx;
                        float v = xp[i];
                        int gt = v > bv;
                        best = gt ? i : best;
                        bv = gt ? v : bv;
                    }
                size_t o = pl * oh * ow + (size_t)oy * ow + ox;
                y[o] = bv;
                argmax[o] = best;
            }
    }
}

void mts_maxpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, const int32_t *argmax,
                          float *dx)
{
    int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
    memset(dx, 0, sizeof(float) * (size_t)N * C * H * W);
    for (size_t pl = 0; pl < (size_t)N * C; pl++)
        for (int o = 0; o < oh * ow; o++) dx[pl * H * W + argmax[pl * oh * ow + o]] += dy[pl * oh * ow + o];
}

void mts_avgpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y)
{
    int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
    float inv = 1.0f / (float)(k * k);
    for (size_t pl = 0; pl < (size_t)N * C; pl++) {
        const float *xp = x + pl * H * W;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                float a = 0.0f;
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) a += xp[(oy * s + ky) * W + ox * s + kx];
                y[pl * oh * ow + (size_t)oy * ow + ox] = a * inv;
            }
    }
}

void mts_avgpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, float *dx)
{
    int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
    float inv = 1.0f / (float)(k * k);
    memset(dx, 0, sizeof(float) * (size_t)N * C * H * W);
    for (size_t pl = 0; pl < (size_t)N * C; pl++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                float g = dy[pl * oh * ow + (size_t)oy * ow + ox] * inv;
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) dx[pl * H * W + (size_t)(oy * s + ky) * W + ox * s + kx] += g;
            }
}

void mts_gap_forward(int N, int C, int HW, const float *x, float *y)
{
    for (size_t pl = 0; pl < (size_t)N * C; pl++) {
        float a = 0.0f;
        for (int i = 0; i < HW; i++) a += x[pl * HW + i];
        y[pl] = a / (float)HW;
    }
}

void mts_gap_backward(int N, int C, int HW, const float *dy, float *dx)
{
    for (size_t pl = 0; pl < (size_t)N * C; pl++) {
        float g = dy[pl] / (float)HW;
        for (int i = 0; i < HW; i++) dx[pl * HW + i] = g;
    }
}
