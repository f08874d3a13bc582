/* dense.c - fully connected layer: forward and both gradients as GEMMs
 * through the providers, with the FMAq STE masks of the accumulator paper. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "mantis/fmath.h"
#include "mantis/nn_ops.h"
#include "mantis/nn_trace.h"

static int nthreads(const mts_provider *p)
{
#ifdef _OPENMP
    return p->threads > 0 ? p->threads : omp_get_max_threads();
#else
    (void)p;
    return 1;
#endif
}

int mts_dense_forward(const mts_nn_ctx *ctx, int N, int in, int out, const float *x, const float *w,
                      const float *b, float *y, mts_err *err)
{
    /* y = x * w^T: a = activation, b = weight; sum over in, in order */
    int rc = mts_nn_gemm(ctx, ctx->fwd, 0, 1, N, out, in, x, in, w, in, 0.0f, y, out, err);
    if (rc != MTS_OK) return rc;
    if (b)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < out; o++) y[(size_t)n * out + o] = mts_fm_canon(y[(size_t)n * out + o] + b[o]);
    return MTS_OK;
}

/* db[o] = sum over n of dy[n][o], FP32 in the fixed blocked order (fmath.h) */
static void bias_grad(int N, int out, const float *dy, float *db)
{
    for (int o = 0; o < out; o++) {
        mts_fm_sumf s;
        mts_fm_sumf_init(&s);
        for (int n = 0; n < N; n++) mts_fm_sumf_push(&s, dy[(size_t)n * out + o]);
        db[o] = mts_fm_sumf_sum(&s);
    }
}

/* Masked backward: the STE mask m[n][o][i] zeroes individual products, so
 * each gradient row is its own GEMM over masked operands (a masked operand
 * is replaced by 0, which the provider multiplies like any other value). */
static int dense_backward_masked(const mts_nn_ctx *ctx, int N, int in, int out, const float *x, const float *w,
                                 const float *dy, float *dx, float *dw, mts_err *err)
{
    const mts_provider *fwd = ctx->fwd;
    mts_ste ste = ctx->ste;
    size_t nm = (size_t)N * out * in;
    uint8_t *mask = malloc(nm);
    float *tmp = malloc(sizeof(float) * (size_t)(N > out ? N : out) * in);
    float *g = malloc(sizeof(float) * (size_t)N);
    int rc = MTS_OK;
    if (!mask || !tmp || !g) {
        rc = mts_fail(err, MTS_ENOMEM, "dense backward: out of memory for a %zu-byte STE mask", nm);
        goto done;
    }
    /* recompute the forward accumulation of every output: independent per
     * (n, o), so any thread split gives the same mask */
    int no = N * out;
#pragma omp parallel for schedule(static) num_threads(nthreads(fwd))
    for (int t = 0; t < no; t++) {
        int n = t / out, o = t % out;
        mts_ste_mask(fwd, ste, x + (size_t)n * in, w + (size_t)o * in, (size_t)in, 1,
                     mask + (size_t)t * in);
    }
    if (dx)
        for (int n = 0; n < N && rc == MTS_OK; n++) {
            const uint8_t *mn = mask + (size_t)n * out * in;
            for (size_t j = 0; j < (size_t)out * in; j++) tmp[j] = mn[j] ? w[j] : 0.0f;
            rc = mts_nn_gemm(ctx, ctx->bwd, 0, 0, 1, in, out, dy + (size_t)n * out, out, tmp, in, 0.0f,
                             dx + (size_t)n * in, in, err);
        }
    if (dw)
        for (int o = 0; o < out && rc == MTS_OK; o++) {
            for (int n = 0; n < N; n++) {
                const uint8_t *m = mask + ((size_t)n * out + o) * in;
                const float *xn = x + (size_t)n * in;
                float *tn = tmp + (size_t)n * in;
                for (int i = 0; i < in; i++) tn[i] = m[i] ? xn[i] : 0.0f;
                g[n] = dy[(size_t)n * out + o];
            }
            rc = mts_nn_gemm(ctx, ctx->bwd, 0, 0, 1, in, N, g, N, tmp, in, 0.0f, dw + (size_t)o * in, in, err);
        }
done:
    free(mask);
    free(tmp);
    free(g);
    return rc;
}

int mts_dense_backward(const mts_nn_ctx *ctx, int N, int in, int out, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *db, mts_err *err)
{
    const mts_provider *fwd = ctx->fwd;
    if (db) bias_grad(N, out, dy, db);
    if (fwd && fwd->fmaq && ctx->ste != MTS_STE_IDENTITY) {
        if (fwd->kind == MTS_PROV_INT)
            return mts_fail(err, MTS_EINVAL, "dense backward: STE %s needs a float provider, not an integer table",
                            mts_ste_name(ctx->ste));
        return dense_backward_masked(ctx, N, in, out, x, w, dy, dx, dw, err);
    }
    int rc = MTS_OK;
    /* dx[N][in] = dy[N][out] * w[out][in]: a = gradient, b = weight */
    if (dx) rc = mts_nn_gemm(ctx, ctx->bwd, 0, 0, N, in, out, dy, out, w, in, 0.0f, dx, in, err);
    /* dw[out][in] = dy^T * x: a = gradient, b = activation, sum over n in order */
    if (rc == MTS_OK && dw) rc = mts_nn_gemm(ctx, ctx->bwd, 1, 0, out, in, N, dy, out, x, in, 0.0f, dw, in, err);
    return rc;
}
