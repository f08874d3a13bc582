/* nn_trace.h - operand traces of training: a uniform random sample
 * (reservoir, Li's Algorithm L) of the operand pairs that reach the
 * multiplier in the GEMMs of the layer ops, for power estimation from real
 * workloads (`mantis synth --power-trace`; file format in trace.h). */
#ifndef MANTIS_NN_TRACE_H
#define MANTIS_NN_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/format.h"
#include "mantis/nn_ops.h"
#include "mantis/rng.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The sample, restricted to GEMMs whose mts_prov_format (nn_arith.h) equals
 * fmt (INT providers are never sampled). Operands are kept as the multiplier
 * receives them (mts_prov_operand). Written as kind MTS_TRACE_SIG (the M-bit
 * mantissa fractions a significand multiplier sees; pairs with a zero or
 * special operand never reach it and are left out) or MTS_TRACE_FLOAT
 * (1+E+M-bit codes, every pair). Install it in an mts_nn_ctx (ctx->tracer). */
struct mts_nn_tracer {
    size_t cap, have;
    uint64_t seen, next;   /* products streamed so far; index of the next one sampled */
    double W;              /* Algorithm L state */
    uint32_t *a, *b;       /* operands as the multiplier receives them (FP32 bits) */
    mts_rng rng;
    mts_format fmt;
    int kind;              /* mts_trace_kind */
};

int mts_nn_tracer_init(mts_nn_tracer *t, size_t samples, const mts_format *fmt, int kind, uint64_t seed,
                       mts_err *err);
void mts_nn_tracer_free(mts_nn_tracer *t);
/* Writes the sample (atomically); records in stream order. */
int mts_nn_tracer_write(const mts_nn_tracer *t, const char *path, mts_err *err);

/* The GEMM every layer op calls: mts_gemm with provider p, after ctx's
 * tracer (if any) has sampled its operand pairs. MTS_EUNSUPPORTED for a
 * device other than the CPU. */
int mts_nn_gemm(const mts_nn_ctx *ctx, const mts_provider *p, int transA, int transB, int m, int n, int k,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err);
/* The same with the result stored transposed (mts_gemm_t, gemm.h). */
int mts_nn_gemm_t(const mts_nn_ctx *ctx, const mts_provider *p, int transA, int transB, int m, int n, int k,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err);
/* count GEMMs of one shape (mts_gemm_batch, gemm.h); with a tap or a
 * tracer, one mts_nn_gemm per entry in entry order instead, so they see
 * each GEMM as its own call. */
int mts_nn_gemm_batch(const mts_nn_ctx *ctx, const mts_provider *p, int count, int transA, int transB, int m, int n,
                      int k, const float *const *A, int lda, const float *const *B, int ldb, float beta,
                      float *const *C, int ldc, mts_err *err);
/* The same continuing C's sums along k (mts_gemm_acc, gemm.h). A GEMM split
 * along k is one GEMM to the bits, but not to a tap or a tracer, which would
 * see its parts: callers split only when ctx has neither. */
int mts_nn_gemm_acc(const mts_nn_ctx *ctx, const mts_provider *p, int transA, int transB, int m, int n, int k,
                    const float *A, int lda, const float *B, int ldb, float *C, int ldc, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
