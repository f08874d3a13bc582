/* matmul.c - batched MatMul of two activations (attention-style), each
 * sample one GEMM per pass through the provider. FMAq STE: identity. */
#include "mantis/nn_ops.h"
#include "mantis/nn_trace.h"

int mts_matmul_forward(const mts_nn_ctx *ctx, int N, int m, int k, int q, const float *a, const float *b,
                       float *c, mts_err *err)
{
    for (int n = 0; n < N; n++) {
        int rc = mts_nn_gemm(ctx, ctx->fwd, 0, 0, m, q, k, a + (size_t)n * m * k, k, b + (size_t)n * k * q, q,
                             0.0f, c + (size_t)n * m * q, q, err);
        if (rc != MTS_OK) return rc;
    }
    return MTS_OK;
}

int mts_matmul_backward(const mts_nn_ctx *ctx, int N, int m, int k, int q, const float *a, const float *b,
                        const float *dc, float *da, float *db, mts_err *err)
{
    for (int n = 0; n < N; n++) {
        const float *an = a + (size_t)n * m * k, *bn = b + (size_t)n * k * q, *dcn = dc + (size_t)n * m * q;
        int rc = MTS_OK;
        /* da[m][k] = dc[m][q] * b^T (b stored [k][q] = [n][k] for transB) */
        if (da) rc = mts_nn_gemm(ctx, ctx->bwd, 0, 1, m, k, q, dcn, q, bn, q, 0.0f, da + (size_t)n * m * k, k, err);
        /* db[k][q] = a^T * dc (operand order: activation, gradient) */
        if (rc == MTS_OK && db)
            rc = mts_nn_gemm(ctx, ctx->bwd, 1, 0, k, q, m, an, k, dcn, q, 0.0f, db + (size_t)n * k * q, q, err);
        if (rc != MTS_OK) return rc;
    }
    return MTS_OK;
}
