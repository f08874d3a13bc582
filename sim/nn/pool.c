/* pool.c - max, average and global average pooling (FP32, no GEMM). */
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "mantis/fmath.h"
#include "mantis/nn_ops.h"

int mts_pool_out(int in, int k, int s) { return in < k ? 0 : (in - k) / s + 1; }

#if defined(__AVX512F__)
/* 2x2 windows at stride 2, 16 outputs per step: the four candidates of each
 * window in raster order through the same select chain as the loop below
 * (an ordered greater-than: a NaN is never greater). */
static void maxpool_2x2(int N, int C, int H, int W, const float *x, float *y, int32_t *argmax)
{
    int oh = H / 2, ow = W / 2;
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    const __m512i lane2 = _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
    for (size_t pl = 0; pl < (size_t)N * C; pl++) {
        const float *xp = x + pl * H * W;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox += 16) {
                int n = ow - ox < 16 ? ow - ox : 16, in = 2 * n; /* outputs, and input floats per row */
                __mmask16 mo = (__mmask16)((1u << n) - 1u);
                __mmask16 m0 = (__mmask16)(in >= 16 ? 0xFFFFu : (1u << in) - 1u);
                __mmask16 m1 = (__mmask16)(in > 16 ? (1u << (in - 16)) - 1u : 0u);
                const float *r0 = xp + (size_t)(2 * oy) * W + 2 * ox, *r1 = r0 + W;
                __m512 a0 = _mm512_maskz_loadu_ps(m0, r0), a1 = _mm512_maskz_loadu_ps(m1, r0 + 16);
                __m512 b0 = _mm512_maskz_loadu_ps(m0, r1), b1 = _mm512_maskz_loadu_ps(m1, r1 + 16);
                __m512i i0 = _mm512_add_epi32(_mm512_set1_epi32(2 * oy * W + 2 * ox), lane2);
                __m512 bv = _mm512_permutex2var_ps(a0, ev, a1);
                __m512i bi = i0;
                __m512 c = _mm512_permutex2var_ps(a0, od, a1);
                __mmask16 gt = _mm512_cmp_ps_mask(c, bv, _CMP_GT_OQ);
                bv = _mm512_mask_mov_ps(bv, gt, c);
                bi = _mm512_mask_mov_epi32(bi, gt, _mm512_add_epi32(i0, _mm512_set1_epi32(1)));
                c = _mm512_permutex2var_ps(b0, ev, b1);
                gt = _mm512_cmp_ps_mask(c, bv, _CMP_GT_OQ);
                bv = _mm512_mask_mov_ps(bv, gt, c);
                bi = _mm512_mask_mov_epi32(bi, gt, _mm512_add_epi32(i0, _mm512_set1_epi32(W)));
                c = _mm512_permutex2var_ps(b0, od, b1);
                gt = _mm512_cmp_ps_mask(c, bv, _CMP_GT_OQ);
                bv = _mm512_mask_mov_ps(bv, gt, c);
                bi = _mm512_mask_mov_epi32(bi, gt, _mm512_add_epi32(i0, _mm512_set1_epi32(W + 1)));
                size_t o = pl * oh * ow + (size_t)oy * ow + ox;
                _mm512_mask_storeu_ps(y + o, mo, bv);
                _mm512_mask_storeu_epi32(argmax + o, mo, bi);
            }
    }
}
#endif

void mts_maxpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y, int32_t *argmax)
{
    int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
#if defined(__AVX512F__)
    if (k == 2 && s == 2) {
        maxpool_2x2(N, C, H, W, x, y, argmax);
        return;
    }
#endif
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
        for (int o = 0; o < oh * ow; o++) { /* a NaN as 0x7FC00000 (mts_fm_canon): the GPU twin's bits */
            float *d = &dx[pl * H * W + argmax[pl * oh * ow + o]];
            *d = mts_fm_canon(*d + dy[pl * oh * ow + o]);
        }
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
                y[pl * oh * ow + (size_t)oy * ow + ox] = mts_fm_canon(a * inv);
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
                    for (int kx = 0; kx < k; kx++) {
                        float *d = &dx[pl * H * W + (size_t)(oy * s + ky) * W + ox * s + kx];
                        *d = mts_fm_canon(*d + g);
                    }
            }
}

void mts_gap_forward(int N, int C, int HW, const float *x, float *y)
{
    for (size_t pl = 0; pl < (size_t)N * C; pl++) {
        float a = 0.0f;
        for (int i = 0; i < HW; i++) a += x[pl * HW + i];
        y[pl] = mts_fm_canon(a / (float)HW);
    }
}

void mts_gap_backward(int N, int C, int HW, const float *dy, float *dx)
{
    for (size_t pl = 0; pl < (size_t)N * C; pl++) {
        float g = mts_fm_canon(dy[pl] / (float)HW);
        for (int i = 0; i < HW; i++) dx[pl * HW + i] = g;
    }
}
