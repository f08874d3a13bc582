/* embed.c - the token side of a Vision Transformer (FP32 data movement and
 * sums): image patches as tokens, the learned position embedding with an
 * optional class token, and pooling of the tokens into one vector. */
#include <string.h>

#include "mantis/fmath.h"
#include "mantis/nn_ops.h"

void mts_patchify_forward(int N, int C, int Hh, int W, int p, const float *x, float *y)
{
    int gw = W / p, T = (Hh / p) * gw, F = C * p * p;
    for (int n = 0; n < N; n++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                for (int ky = 0; ky < p; ky++)
                    for (int kx = 0; kx < p; kx++)
                        y[((size_t)n * T + t) * F + (c * p + ky) * p + kx] =
                            x[(((size_t)n * C + c) * Hh + t / gw * p + ky) * W + t % gw * p + kx];
}

void mts_patchify_backward(int N, int C, int Hh, int W, int p, const float *dy, float *dx)
{
    /* patches do not overlap: every input pixel has exactly one source */
    int gw = W / p, T = (Hh / p) * gw, F = C * p * p;
    memset(dx, 0, sizeof(float) * (size_t)N * C * Hh * W);
    for (int n = 0; n < N; n++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                for (int ky = 0; ky < p; ky++)
                    for (int kx = 0; kx < p; kx++)
                        dx[(((size_t)n * C + c) * Hh + t / gw * p + ky) * W + t % gw * p + kx] =
                            dy[((size_t)n * T + t) * F + (c * p + ky) * p + kx];
}

void mts_tokens_forward(int N, int T, int D, const float *cls, const float *pos, const float *x, float *y)
{
    int off = cls ? 1 : 0, T2 = T + off;
    for (int n = 0; n < N; n++) {
        float *yn = y + (size_t)n * T2 * D;
        if (cls)
            for (int d = 0; d < D; d++) yn[d] = mts_fm_canon(cls[d] + pos[d]);
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++)
                yn[(size_t)(t + off) * D + d] = mts_fm_canon(x[((size_t)n * T + t) * D + d] + pos[(size_t)(t + off) * D + d]);
    }
}

void mts_tokens_backward(int N, int T, int D, int has_cls, const float *dy, float *dx, float *dpos, float *dcls)
{
    int off = has_cls ? 1 : 0, T2 = T + off;
    for (size_t i = 0; i < (size_t)T2 * D; i++) {
        float s = 0.0f;
        for (int n = 0; n < N; n++) s += dy[(size_t)n * T2 * D + i];
        dpos[i] = mts_fm_canon(s);
    }
    if (has_cls && dcls) memcpy(dcls, dpos, sizeof(float) * (size_t)D); /* cls and pos[0] enter as a sum */
    if (dx)
        for (int n = 0; n < N; n++)
            memcpy(dx + (size_t)n * T * D, dy + ((size_t)n * T2 + off) * D, sizeof(float) * (size_t)T * D);
}

void mts_tokpool_forward(int N, int T, int D, int mode, const float *x, float *y)
{
    for (int n = 0; n < N; n++)
        for (int d = 0; d < D; d++) {
            const float *xn = x + (size_t)n * T * D + d;
            if (mode == MTS_TOKPOOL_CLS) {
                y[(size_t)n * D + d] = xn[0];
                continue;
            }
            float s = 0.0f;
            for (int t = 0; t < T; t++) s += xn[(size_t)t * D];
            y[(size_t)n * D + d] = mts_fm_canon(s / (float)T);
        }
}

void mts_tokpool_backward(int N, int T, int D, int mode, const float *dy, float *dx)
{
    for (int n = 0; n < N; n++)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) {
                float g = dy[(size_t)n * D + d];
                dx[((size_t)n * T + t) * D + d] = mode == MTS_TOKPOOL_CLS ? (t == 0 ? g : 0.0f) : mts_fm_canon(g / (float)T);
            }
}
