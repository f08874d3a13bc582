// nn_tx.cu - CUDA twins of the transformer ops of nn_ops.h (LayerNorm,
// GELU, the row softmax, MatMul, the attention products, patchify, the
// tokens layer, token pooling) on device pointers, gpu.h "transformer ops".
// The token-wise dense layer (MTS_L_TOKDENSE) is the dense twin of
// nn_ops.cu over N*T rows, as on the CPU.
//
// The same bits as the CPU ops by construction:
//  - GELU, the softmax rows and the LayerNorm rows and columns call the very
//    helpers of fmath.h that the CPU ops call (mts_fm_gelu,
//    mts_fm_softmax_row, mts_fm_layernorm_row, ...): one element, row or
//    column per thread, each sum in the CPU's order;
//  - every product goes through mts_gpu_gemm_dev with the CPU's shapes,
//    leading dimensions and operand order (one GEMM per sample or per
//    (sample, head), as sim/nn/matmul.c and attention.c call mts_gemm /
//    mts_gemm_batch, whose bits are mts_gemm_ref's for each GEMM);
//  - the remaining FP32 arithmetic (the attention scale, the position
//    embedding's sums, the token mean) is spelled out beside its CPU line
//    with explicitly rounded operations (-fmad=false), sums in the CPU's
//    order from +0.
//
// Launched through MTS_LAUNCH (launch.h): they run under the CUDA emulation
// (gpu/emu/) in tests/test_gpu_emu. Correctness first: one GEMM launch per
// (sample, head); no fused or batched kernels yet.
#include <cuda_runtime.h>

#include <cstring>

#include "launch.h"
#include "mantis/fmath.h"
#include "mantis/gpu.h"

namespace {

// THREADS, blocks_for, launch_check: launch.h

// ------------------------------------------------------------- kernels

__global__ void gelu_fwd(size_t n, const float *x, float *y)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = mts_fm_gelu(x[i]);
}
__global__ void gelu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dx[i] = mts_fm_canon(mts_fm_mul(dy[i], mts_fm_gelu_grad(x[i]))); // dy * d(GELU)/dx, as act.c
}

// Row softmax: one row per thread.
__global__ void softmax_fwd(int R, int W, const float *x, float *y)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < R) mts_fm_softmax_row(W, x + (size_t)r * W, y + (size_t)r * W);
}
__global__ void softmax_bwd(int R, int W, const float *y, const float *dy, float *dx)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < R) mts_fm_softmax_row_grad(W, y + (size_t)r * W, dy + (size_t)r * W, dx + (size_t)r * W);
}

// LayerNorm: rows (forward, input gradient) and columns (dgamma, dbeta) per thread.
__global__ void layernorm_fwd(int R, int D, const float *x, const float *gamma, const float *beta, float eps,
                              float *y, float *xhat, float *invstd)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < R)
        invstd[r] = mts_fm_layernorm_row(D, x + (size_t)r * D, gamma, beta, eps, y + (size_t)r * D,
                                         xhat + (size_t)r * D);
}
__global__ void layernorm_cols(int R, int D, const float *dy, const float *xhat, float *dgamma, float *dbeta)
{
    int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d < D) mts_fm_layernorm_col_grad(R, D, d, dy, xhat, dgamma, dbeta);
}
__global__ void layernorm_dx(int R, int D, const float *dy, const float *gamma, const float *xhat,
                             const float *invstd, float *dx)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < R)
        mts_fm_layernorm_row_grad(D, dy + (size_t)r * D, gamma, xhat + (size_t)r * D, invstd[r], dx + (size_t)r * D);
}

// a[i] = a[i] * s (the attention scale, FP32 as attention.c) or, with src,
// a[i] = src[i] * s.
__global__ void scale_k(size_t n, const float *src, float s, float *a)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = mts_fm_canon(mts_fm_mul(src ? src[i] : a[i], s)); // NaN: the CPU's bits
}
// Columns [c0, c0+w) of rows x ld set to +0 (attention.c's zero_cols).
__global__ void zero_cols_k(int rows, int ld, int c0, int w, float *a)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)rows * w) a[(i / w) * ld + c0 + i % w] = 0.0f;
}

// Patchify: one thread per token feature (forward) or per pixel (backward,
// a gather: patches do not overlap; a pixel outside the grid of whole
// patches gets +0, what the CPU's memset leaves there).
__global__ void patchify_fwd(int N, int C, int Hh, int W, int p, const float *x, float *y)
{
    int gw = W / p, T = (Hh / p) * gw, F = C * p * p;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * T * F) return;
    int f = (int)(i % F), t = (int)((i / F) % T);
    size_t n = i / ((size_t)F * T);
    int c = f / (p * p), ky = (f / p) % p, kx = f % p;
    y[i] = x[((n * C + c) * Hh + t / gw * p + ky) * W + t % gw * p + kx];
}
__global__ void patchify_bwd(int N, int C, int Hh, int W, int p, const float *dy, float *dx)
{
    int gh = Hh / p, gw = W / p, T = gh * gw, F = C * p * p;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C * Hh * W) return;
    int ix = (int)(i % W), iy = (int)((i / W) % Hh), c = (int)((i / ((size_t)W * Hh)) % C);
    size_t n = i / ((size_t)W * Hh * C);
    if (iy / p >= gh || ix / p >= gw) {
        dx[i] = 0.0f;
        return;
    }
    int t = iy / p * gw + ix / p;
    dx[i] = dy[(n * T + t) * F + (c * p + iy % p) * p + ix % p];
}

// Tokens: y[n][t'][d] = (cls or x) + pos, one thread per output.
__global__ void tokens_fwd(int N, int T, int D, const float *cls, const float *pos, const float *x, float *y)
{
    int off = cls ? 1 : 0, T2 = T + off;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * T2 * D) return;
    int d = (int)(i % D), t2 = (int)((i / D) % T2);
    size_t n = i / ((size_t)D * T2);
    float v = t2 < off ? cls[d] : x[(n * T + (t2 - off)) * D + d];
    y[i] = mts_fm_canon(mts_fm_add(v, pos[(size_t)t2 * D + d]));
}
// dpos[i] = sum over n of dy[n][i], FP32 from +0 in n order (one thread per
// i); dcls (with a class token) = dpos[0..D).
__global__ void tokens_dpos(int N, int T2, int D, const float *dy, float *dpos, float *dcls)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T2 * D) return;
    float s = 0.0f;
    for (int n = 0; n < N; n++) s = mts_fm_add(s, dy[(size_t)n * T2 * D + i]);
    s = mts_fm_canon(s);
    dpos[i] = s;
    if (dcls && i < (size_t)D) dcls[i] = s;
}
__global__ void tokens_dx(int N, int T, int D, int off, const float *dy, float *dx)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * T * D) return;
    size_t n = i / ((size_t)T * D), r = i % ((size_t)T * D); // r = t*D + d
    dx[i] = dy[(n * (T + off) + off) * D + r];
}

// Token pooling: one thread per (n, d).
__global__ void tokpool_fwd(int N, int T, int D, int mode, const float *x, float *y)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * D) return;
    const float *xn = x + (i / D) * T * D + i % D;
    if (mode == MTS_TOKPOOL_CLS) {
        y[i] = xn[0];
        return;
    }
    float s = 0.0f;
    for (int t = 0; t < T; t++) s = mts_fm_add(s, xn[(size_t)t * D]);
    y[i] = mts_fm_canon(mts_fm_div(s, (float)T));
}
__global__ void tokpool_bwd(int N, int T, int D, int mode, const float *dy, float *dx)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * T * D) return;
    size_t n = i / ((size_t)T * D);
    int t = (int)((i / D) % T);
    float g = dy[n * D + i % D];
    dx[i] = mode == MTS_TOKPOOL_CLS ? (t == 0 ? g : 0.0f) : mts_fm_canon(mts_fm_div(g, (float)T));
}

int zero_cols(int rows, int ld, int c0, int w, float *a, mts_err *err)
{
    size_t n = (size_t)rows * w;
    if (!n) return MTS_OK;
    MTS_LAUNCH(zero_cols_k, blocks_for(n), THREADS, 0, 0)(rows, ld, c0, w, a);
    return launch_check(err, "attention: zeroing gradient columns");
}

int scale(size_t n, const float *src, float s, float *a, mts_err *err)
{
    if (!n) return MTS_OK;
    MTS_LAUNCH(scale_k, blocks_for(n), THREADS, 0, 0)(n, src, s, a);
    return launch_check(err, "attention scale");
}

} // namespace

extern "C" {

int mts_gpu_layernorm_forward(int R, int D, const float *x, const float *gamma, const float *beta, float eps,
                              float *y, float *xhat, float *invstd, mts_err *err)
{
    if (R <= 0) return MTS_OK;
    MTS_LAUNCH(layernorm_fwd, blocks_for((size_t)R), THREADS, 0, 0)(R, D, x, gamma, beta, eps, y, xhat, invstd);
    return launch_check(err, "layernorm forward");
}

int mts_gpu_layernorm_backward(int R, int D, const float *dy, const float *gamma, const float *xhat,
                               const float *invstd, float *dx, float *dgamma, float *dbeta, mts_err *err)
{
    if (D <= 0) return MTS_OK;
    MTS_LAUNCH(layernorm_cols, blocks_for((size_t)D), THREADS, 0, 0)(R, D, dy, xhat, dgamma, dbeta);
    if (dx && R > 0) MTS_LAUNCH(layernorm_dx, blocks_for((size_t)R), THREADS, 0, 0)(R, D, dy, gamma, xhat, invstd, dx);
    return launch_check(err, "layernorm backward");
}

int mts_gpu_gelu_forward(size_t n, const float *x, float *y, mts_err *err)
{
    if (!n) return MTS_OK;
    MTS_LAUNCH(gelu_fwd, blocks_for(n), THREADS, 0, 0)(n, x, y);
    return launch_check(err, "gelu forward");
}

int mts_gpu_gelu_backward(size_t n, const float *x, const float *dy, float *dx, mts_err *err)
{
    if (!n) return MTS_OK;
    MTS_LAUNCH(gelu_bwd, blocks_for(n), THREADS, 0, 0)(n, x, dy, dx);
    return launch_check(err, "gelu backward");
}

int mts_gpu_softmax_forward(int R, int W, const float *x, float *y, mts_err *err)
{
    if (R <= 0) return MTS_OK;
    MTS_LAUNCH(softmax_fwd, blocks_for((size_t)R), THREADS, 0, 0)(R, W, x, y);
    return launch_check(err, "softmax forward");
}

int mts_gpu_softmax_backward(int R, int W, const float *y, const float *dy, float *dx, mts_err *err)
{
    if (R <= 0) return MTS_OK;
    MTS_LAUNCH(softmax_bwd, blocks_for((size_t)R), THREADS, 0, 0)(R, W, y, dy, dx);
    return launch_check(err, "softmax backward");
}

// N x H GEMMs of one shape (per sample n and head h) in batched launches
// (mts_gpu_gemm_dev_batched: each GEMM's bits are a single call's, and
// their outputs are disjoint, so launching them together changes no bit);
// operand X of (n, h) at X + n * x_n + h * x_h.
static int gemm_nh(const mts_gpu_gemm_plan *pl, int N, int H, int ta, int tb, int m, int n, int k, const float *A,
                   int lda, size_t a_n, size_t a_h, const float *B, int ldb, size_t b_n, size_t b_h, float *C, int ldc,
                   size_t c_n, size_t c_h, mts_err *err)
{
    int per = H > 0 ? 65535 / H : 1;
    for (int n0 = 0; n0 < N; n0 += per) {
        mts_gpu_batch bt;
        std::memset(&bt, 0, sizeof bt);
        bt.outer = N - n0 < per ? N - n0 : per;
        bt.inner = H;
        bt.a_outer = a_n, bt.a_inner = a_h, bt.b_outer = b_n, bt.b_inner = b_h, bt.c_outer = c_n, bt.c_inner = c_h;
        int rc = mts_gpu_gemm_dev_batched(pl, &bt, ta, tb, m, n, k, A + (size_t)n0 * a_n, lda, B + (size_t)n0 * b_n,
                                          ldb, 0.0f, C + (size_t)n0 * c_n, ldc, err);
        if (rc != MTS_OK) return rc;
    }
    return MTS_OK;
}

// sim/nn/matmul.c, GEMM for GEMM (one batch of N).
int mts_gpu_matmul_forward(const mts_gpu_gemm_plan *fwd, int N, int m, int k, int q, const float *a, const float *b,
                           float *c, mts_err *err)
{
    return gemm_nh(fwd, N, 1, 0, 0, m, q, k, a, k, (size_t)m * k, 0, b, q, (size_t)k * q, 0, c, q, (size_t)m * q, 0,
                   err);
}

int mts_gpu_matmul_backward(const mts_gpu_gemm_plan *bwd, int N, int m, int k, int q, const float *a, const float *b,
                            const float *dc, float *da, float *db, mts_err *err)
{
    int rc = MTS_OK;
    // da[m][k] = dc[m][q] x b^T (operands gradient, b)
    if (da) rc = gemm_nh(bwd, N, 1, 0, 1, m, k, q, dc, q, (size_t)m * q, 0, b, q, (size_t)k * q, 0, da, k, (size_t)m * k, 0, err);
    // db[k][q] = a^T x dc (operands activation, gradient)
    if (rc == MTS_OK && db)
        rc = gemm_nh(bwd, N, 1, 1, 0, k, q, m, a, k, (size_t)m * k, 0, dc, q, (size_t)m * q, 0, db, q, (size_t)k * q, 0, err);
    return rc;
}

// sim/nn/attention.c: per (n, h), the same GEMMs.
int mts_gpu_attn_qk_forward(const mts_gpu_gemm_plan *fwd, int N, int T, int H, int dh, float scale_, const float *qkv,
                            float *s, mts_err *err)
{
    int D = H * dh, ld = 3 * D;
    size_t tt = (size_t)T * T, tl = (size_t)T * ld;
    // S = Q x K^T: a = Q, b = K (stored [u][j]: transB)
    int rc = gemm_nh(fwd, N, H, 0, 1, T, T, dh, qkv, ld, tl, dh, qkv + D, ld, tl, dh, s, T, H * tt, tt, err);
    return rc != MTS_OK ? rc : scale((size_t)N * H * T * T, NULL, scale_, s, err);
}

int mts_gpu_attn_qk_backward(const mts_gpu_gemm_plan *bwd, int N, int T, int H, int dh, float scale_,
                             const float *qkv, const float *ds, float *dqkv, mts_err *err)
{
    int D = H * dh, ld = 3 * D;
    size_t np = (size_t)N * H * T * T, tt = (size_t)T * T, tl = (size_t)T * ld;
    void *pv = NULL;
    int rc = mts_gpu_alloc(&pv, np * sizeof(float), err);
    if (rc != MTS_OK) return rc;
    float *p = (float *)pv;
    if ((rc = zero_cols(N * T, ld, 2 * D, D, dqkv, err)) == MTS_OK) rc = scale(np, ds, scale_, p, err); // P = scale*ds
    // dQ = P x K: a = gradient, b = K
    if (rc == MTS_OK) rc = gemm_nh(bwd, N, H, 0, 0, T, dh, T, p, T, H * tt, tt, qkv + D, ld, tl, dh, dqkv, ld, tl, dh, err);
    // dK = P^T x Q: a = gradient (transA), b = Q
    if (rc == MTS_OK)
        rc = gemm_nh(bwd, N, H, 1, 0, T, dh, T, p, T, H * tt, tt, qkv, ld, tl, dh, dqkv + D, ld, tl, dh, err);
    mts_gpu_free(pv); // (waits for the GEMMs: cudaFree synchronises)
    return rc;
}

int mts_gpu_attn_av_forward(const mts_gpu_gemm_plan *fwd, int N, int T, int H, int dh, const float *a,
                            const float *qkv, float *y, mts_err *err)
{
    int D = H * dh, ld = 3 * D;
    size_t tt = (size_t)T * T, tl = (size_t)T * ld, td = (size_t)T * D;
    // Y = A x V: a = A, b = V
    return gemm_nh(fwd, N, H, 0, 0, T, dh, T, a, T, H * tt, tt, qkv + 2 * D, ld, tl, dh, y, D, td, dh, err);
}

int mts_gpu_attn_av_backward(const mts_gpu_gemm_plan *bwd, int N, int T, int H, int dh, const float *a,
                             const float *qkv, const float *dy, float *da, float *dqkv, mts_err *err)
{
    int D = H * dh, ld = 3 * D, rc = MTS_OK;
    size_t tt = (size_t)T * T, tl = (size_t)T * ld, td = (size_t)T * D;
    if (dqkv) rc = zero_cols(N * T, ld, 0, 2 * D, dqkv, err);
    // dA = dY x V^T: a = gradient, b = V (transB)
    if (rc == MTS_OK && da)
        rc = gemm_nh(bwd, N, H, 0, 1, T, T, dh, dy, D, td, dh, qkv + 2 * D, ld, tl, dh, da, T, H * tt, tt, err);
    // dV = A^T x dY: a = A (transA), b = gradient
    if (rc == MTS_OK && dqkv)
        rc = gemm_nh(bwd, N, H, 1, 0, T, dh, T, a, T, H * tt, tt, dy, D, td, dh, dqkv + 2 * D, ld, tl, dh, err);
    return rc;
}

int mts_gpu_patchify_forward(int N, int C, int Hh, int W, int p, const float *x, float *y, mts_err *err)
{
    if (p <= 0) return mts_fail(err, MTS_EINVAL, "gpu patchify: patch size %d", p);
    size_t n = (size_t)N * ((Hh / p) * (W / p)) * C * p * p;
    if (!n) return MTS_OK;
    MTS_LAUNCH(patchify_fwd, blocks_for(n), THREADS, 0, 0)(N, C, Hh, W, p, x, y);
    return launch_check(err, "patchify forward");
}

int mts_gpu_patchify_backward(int N, int C, int Hh, int W, int p, const float *dy, float *dx, mts_err *err)
{
    if (p <= 0) return mts_fail(err, MTS_EINVAL, "gpu patchify: patch size %d", p);
    size_t n = (size_t)N * C * Hh * W;
    if (!n) return MTS_OK;
    MTS_LAUNCH(patchify_bwd, blocks_for(n), THREADS, 0, 0)(N, C, Hh, W, p, dy, dx);
    return launch_check(err, "patchify backward");
}

int mts_gpu_tokens_forward(int N, int T, int D, const float *cls, const float *pos, const float *x, float *y,
                           mts_err *err)
{
    size_t n = (size_t)N * (T + (cls ? 1 : 0)) * D;
    if (!n) return MTS_OK;
    MTS_LAUNCH(tokens_fwd, blocks_for(n), THREADS, 0, 0)(N, T, D, cls, pos, x, y);
    return launch_check(err, "tokens forward");
}

int mts_gpu_tokens_backward(int N, int T, int D, int has_cls, const float *dy, float *dx, float *dpos, float *dcls,
                            mts_err *err)
{
    int off = has_cls ? 1 : 0;
    size_t np = (size_t)(T + off) * D, nx = (size_t)N * T * D;
    if (np) MTS_LAUNCH(tokens_dpos, blocks_for(np), THREADS, 0, 0)(N, T + off, D, dy, dpos, has_cls ? dcls : NULL);
    if (dx && nx) MTS_LAUNCH(tokens_dx, blocks_for(nx), THREADS, 0, 0)(N, T, D, off, dy, dx);
    return launch_check(err, "tokens backward");
}

int mts_gpu_tokpool_forward(int N, int T, int D, int mode, const float *x, float *y, mts_err *err)
{
    size_t n = (size_t)N * D;
    if (!n) return MTS_OK;
    MTS_LAUNCH(tokpool_fwd, blocks_for(n), THREADS, 0, 0)(N, T, D, mode, x, y);
    return launch_check(err, "token pooling forward");
}

int mts_gpu_tokpool_backward(int N, int T, int D, int mode, const float *dy, float *dx, mts_err *err)
{
    size_t n = (size_t)N * T * D;
    if (!n) return MTS_OK;
    MTS_LAUNCH(tokpool_bwd, blocks_for(n), THREADS, 0, 0)(N, T, D, mode, dy, dx);
    return launch_check(err, "token pooling backward");
}

} // extern "C"
