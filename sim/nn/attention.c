/* attention.c - the pieces of multi-head self-attention that are not dense
 * layers: the scores S = Q K^T (scaled), the row softmax and the output
 * A V, with their gradients dQ, dK, dA, dV. Every product is a GEMM per
 * (sample, head) through mts_nn_gemm, so the provider, FMAq and the tracer
 * see all six (ApproxTrain's AMMHA, with the gradients of the math). The
 * projections Q, K, V and the output one are token-wise dense layers
 * (nn_net.h). FMAq STE: identity, as for MatMul. */
#include <stdlib.h>
#include <string.h>

#include "mantis/fmath.h"
#include "mantis/nn_ops.h"
#include "mantis/nn_trace.h"
#include "nn_internal.h"

void mts_softmax_forward(int R, int W, const float *x, float *y)
{
    for (int r = 0; r < R; r++) mts_fm_softmax_row(W, x + (size_t)r * W, y + (size_t)r * W);
}

void mts_softmax_backward(int R, int W, const float *y, const float *dy, float *dx)
{
    for (int r = 0; r < R; r++)
        mts_fm_softmax_row_grad(W, y + (size_t)r * W, dy + (size_t)r * W, dx + (size_t)r * W);
}

/* The row softmax on threads, blocks of rows each (rows are independent:
 * same bits for any count; one thread below 2^16 elements). */
static int rows_threads(int threads, int R, int W) { return (double)R * W < 65536.0 || threads < 1 ? 1 : threads; }

void mts__softmax_forward_t(int threads, int R, int W, const float *x, float *y)
{
    int T = rows_threads(threads, R, W), rb = (R + T - 1) / T;
    (void)rb;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int t = 0; t < T; t++) {
        int r0 = t * rb, r1 = r0 + rb < R ? r0 + rb : R;
        if (r1 > r0) mts_softmax_forward(r1 - r0, W, x + (size_t)r0 * W, y + (size_t)r0 * W);
    }
}

void mts__softmax_backward_t(int threads, int R, int W, const float *y, const float *dy, float *dx)
{
    int T = rows_threads(threads, R, W), rb = (R + T - 1) / T;
    (void)rb;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int t = 0; t < T; t++) {
        int r0 = t * rb, r1 = r0 + rb < R ? r0 + rb : R;
        if (r1 > r0)
            mts_softmax_backward(r1 - r0, W, y + (size_t)r0 * W, dy + (size_t)r0 * W, dx + (size_t)r0 * W);
    }
}

/* Pointer arrays of the N*H per-(sample, head) GEMMs of a batch
 * (mts_nn_gemm_batch), in (n, h) order: one allocation, freed by the caller. */
typedef struct heads {
    const float **a, **b;
    float **c;
} heads;

static int heads_alloc(heads *h, int count, mts_err *err)
{
    void **m = malloc(sizeof(void *) * 3 * (size_t)(count > 0 ? count : 1));
    if (!m) return mts_fail(err, MTS_ENOMEM, "attention: out of memory for %d heads", count);
    h->a = (const float **)m;
    h->b = (const float **)(m + count);
    h->c = (float **)(m + 2 * (size_t)count);
    return MTS_OK;
}

/* With a tap or a tracer the GEMMs run one by one in the order below (both
 * see each as its own call, in that order); without, each kind of GEMM
 * runs as one batch over all (sample, head) pairs. Same bits either way. */
static int batched(const mts_nn_ctx *ctx) { return !ctx->tap && !ctx->tracer; }

/* Zeroes columns [c0, c0+w) of the N*T rows of a [N*T][ld] array. */
static void zero_cols(int rows, int ld, int c0, int w, float *a)
{
    for (int r = 0; r < rows; r++) memset(a + (size_t)r * ld + c0, 0, sizeof(float) * (size_t)w);
}

int mts_attn_qk_forward(const mts_nn_ctx *ctx, int N, int T, int H, int dh, float scale, const float *qkv,
                        float *s, mts_err *err)
{
    int D = H * dh, ld = 3 * D, rc = MTS_OK;
    if (batched(ctx)) {
        heads hd = {0};
        if ((rc = heads_alloc(&hd, N * H, err)) != MTS_OK) return rc;
        for (int n = 0; n < N; n++)
            for (int h = 0; h < H; h++) {
                int b = n * H + h;
                hd.a[b] = qkv + (size_t)n * T * ld + h * dh;
                hd.b[b] = hd.a[b] + D;
                hd.c[b] = s + (size_t)b * T * T;
            }
        rc = mts_nn_gemm_batch(ctx, ctx->fwd, N * H, 0, 1, T, T, dh, hd.a, ld, hd.b, ld, 0.0f, hd.c, T, err);
        free(hd.a);
        if (rc == MTS_OK)
            for (size_t i = 0; i < (size_t)N * H * T * T; i++) s[i] = mts_fm_canon(s[i] * scale);
        return rc;
    }
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            const float *q = qkv + (size_t)n * T * ld + h * dh, *k = q + D;
            float *sh = s + ((size_t)n * H + h) * T * T;
            /* S[t][u] = sum_j Q[t][j] K[u][j]: a = Q, b = K (stored [u][j]: transB) */
            rc = mts_nn_gemm(ctx, ctx->fwd, 0, 1, T, T, dh, q, ld, k, ld, 0.0f, sh, T, err);
            if (rc != MTS_OK) return rc;
            for (size_t i = 0; i < (size_t)T * T; i++) sh[i] = mts_fm_canon(sh[i] * scale);
        }
    return MTS_OK;
}

int mts_attn_qk_backward(const mts_nn_ctx *ctx, int N, int T, int H, int dh, float scale, const float *qkv,
                         const float *ds, float *dqkv, mts_err *err)
{
    int D = H * dh, ld = 3 * D, rc = MTS_OK, B = batched(ctx) ? N * H : 1;
    float *p = malloc(sizeof(float) * (size_t)T * T * (size_t)B);
    if (!p) return mts_fail(err, MTS_ENOMEM, "attention backward: out of memory");
    zero_cols(N * T, ld, 2 * D, D, dqkv);
    if (B > 1) {
        heads hd = {0};
        if ((rc = heads_alloc(&hd, B, err)) != MTS_OK) {
            free(p);
            return rc;
        }
        for (size_t i = 0; i < (size_t)B * T * T; i++) p[i] = mts_fm_canon(ds[i] * scale);
        for (int b = 0; b < B; b++) {
            int n = b / H, h = b % H;
            hd.a[b] = p + (size_t)b * T * T;
            hd.b[b] = qkv + (size_t)n * T * ld + h * dh + D; /* K */
            hd.c[b] = dqkv + (size_t)n * T * ld + h * dh;    /* dQ */
        }
        /* dQ = P K: a = gradient, b = K */
        rc = mts_nn_gemm_batch(ctx, ctx->bwd, B, 0, 0, T, dh, T, hd.a, T, hd.b, ld, 0.0f, hd.c, ld, err);
        for (int b = 0; b < B; b++) {
            hd.b[b] -= D; /* Q */
            hd.c[b] += D; /* dK */
        }
        /* dK = P^T Q: a = gradient (transA), b = Q */
        if (rc == MTS_OK) rc = mts_nn_gemm_batch(ctx, ctx->bwd, B, 1, 0, T, dh, T, hd.a, T, hd.b, ld, 0.0f, hd.c, ld, err);
        free(hd.a);
        free(p);
        return rc;
    }
    for (int n = 0; n < N && rc == MTS_OK; n++)
        for (int h = 0; h < H && rc == MTS_OK; h++) {
            const float *q = qkv + (size_t)n * T * ld + h * dh, *k = q + D;
            const float *dsh = ds + ((size_t)n * H + h) * T * T;
            float *dq = dqkv + (size_t)n * T * ld + h * dh, *dk = dq + D;
            for (size_t i = 0; i < (size_t)T * T; i++) p[i] = mts_fm_canon(dsh[i] * scale);
            /* dQ[t][j] = sum_u P[t][u] K[u][j]: a = gradient, b = K */
            rc = mts_nn_gemm(ctx, ctx->bwd, 0, 0, T, dh, T, p, T, k, ld, 0.0f, dq, ld, err);
            /* dK[u][j] = sum_t P[t][u] Q[t][j]: a = gradient (P stored [t][u]: transA), b = Q */
            if (rc == MTS_OK) rc = mts_nn_gemm(ctx, ctx->bwd, 1, 0, T, dh, T, p, T, q, ld, 0.0f, dk, ld, err);
        }
    free(p);
    return rc;
}

int mts_attn_av_forward(const mts_nn_ctx *ctx, int N, int T, int H, int dh, const float *a, const float *qkv,
                        float *y, mts_err *err)
{
    int D = H * dh, ld = 3 * D, rc = MTS_OK;
    if (batched(ctx)) {
        heads hd = {0};
        if ((rc = heads_alloc(&hd, N * H, err)) != MTS_OK) return rc;
        for (int n = 0; n < N; n++)
            for (int h = 0; h < H; h++) {
                int b = n * H + h;
                hd.a[b] = a + (size_t)b * T * T;
                hd.b[b] = qkv + (size_t)n * T * ld + 2 * D + h * dh;
                hd.c[b] = y + (size_t)n * T * D + h * dh;
            }
        rc = mts_nn_gemm_batch(ctx, ctx->fwd, N * H, 0, 0, T, dh, T, hd.a, T, hd.b, ld, 0.0f, hd.c, D, err);
        free(hd.a);
        return rc;
    }
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            const float *ah = a + ((size_t)n * H + h) * T * T, *v = qkv + (size_t)n * T * ld + 2 * D + h * dh;
            /* Y[t][j] = sum_u A[t][u] V[u][j]: a = A, b = V */
            rc = mts_nn_gemm(ctx, ctx->fwd, 0, 0, T, dh, T, ah, T, v, ld, 0.0f, y + (size_t)n * T * D + h * dh, D, err);
            if (rc != MTS_OK) return rc;
        }
    return MTS_OK;
}

int mts_attn_av_backward(const mts_nn_ctx *ctx, int N, int T, int H, int dh, const float *a, const float *qkv,
                         const float *dy, float *da, float *dqkv, mts_err *err)
{
    int D = H * dh, ld = 3 * D, rc = MTS_OK;
    if (dqkv) zero_cols(N * T, ld, 0, 2 * D, dqkv);
    if (batched(ctx)) {
        heads hd = {0};
        int B = N * H;
        if ((rc = heads_alloc(&hd, B, err)) != MTS_OK) return rc;
        for (int b = 0; b < B; b++) { /* dA = dY V^T: a = gradient, b = V (transB) */
            int n = b / H, h = b % H;
            hd.a[b] = dy + (size_t)n * T * D + h * dh;
            hd.b[b] = qkv + (size_t)n * T * ld + 2 * D + h * dh;
            hd.c[b] = da ? da + (size_t)b * T * T : NULL;
        }
        if (da) rc = mts_nn_gemm_batch(ctx, ctx->bwd, B, 0, 1, T, T, dh, hd.a, D, hd.b, ld, 0.0f, hd.c, T, err);
        if (rc == MTS_OK && dqkv) { /* dV = A^T dY: a = A (transA), b = gradient */
            for (int b = 0; b < B; b++) {
                int n = b / H, h = b % H;
                hd.b[b] = hd.a[b];
                hd.a[b] = a + (size_t)b * T * T;
                hd.c[b] = dqkv + (size_t)n * T * ld + 2 * D + h * dh;
            }
            rc = mts_nn_gemm_batch(ctx, ctx->bwd, B, 1, 0, T, dh, T, hd.a, T, hd.b, D, 0.0f, hd.c, ld, err);
        }
        free(hd.a);
        return rc;
    }
    for (int n = 0; n < N && rc == MTS_OK; n++)
        for (int h = 0; h < H && rc == MTS_OK; h++) {
            const float *ah = a + ((size_t)n * H + h) * T * T, *v = qkv + (size_t)n * T * ld + 2 * D + h * dh;
            const float *dyh = dy + (size_t)n * T * D + h * dh;
            /* dA[t][u] = sum_j dY[t][j] V[u][j]: a = gradient, b = V (stored [u][j]: transB) */
            if (da) rc = mts_nn_gemm(ctx, ctx->bwd, 0, 1, T, T, dh, dyh, D, v, ld, 0.0f,
                                     da + ((size_t)n * H + h) * T * T, T, err);
            /* dV[u][j] = sum_t A[t][u] dY[t][j]: a = A (stored [t][u]: transA), b = gradient */
            if (rc == MTS_OK && dqkv)
                rc = mts_nn_gemm(ctx, ctx->bwd, 1, 0, T, dh, T, ah, T, dyh, D, 0.0f,
                                 dqkv + (size_t)n * T * ld + 2 * D + h * dh, ld, err);
        }
    return rc;
}
