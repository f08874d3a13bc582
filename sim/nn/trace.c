/* trace.c - operand traces of training: a uniform sample of the operand
 * pairs that reach the multiplier, for power estimation from real
 * workloads (synth --power-trace; trace format in include/mantis/trace.h).
 *
 * Reservoir sampling with Li's Algorithm L: the products of a GEMM are a
 * stream of m*n*k pairs; only the sampled positions are decoded, so tracing
 * costs O(samples * log) rather than a pass over every product. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fpbits.h"
#include "mantis/gemmdump.h"
#include "mantis/nn_arith.h"
#include "mantis/nn_trace.h"
#include "mantis/trace.h"

/* uniform in (0, 1): never 0, so its log is finite */
static double u01(mts_rng *r) { return ((double)(mts_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

static void advance(mts_nn_tracer *t)
{
    t->W *= exp(log(u01(&t->rng)) / (double)t->cap);
    t->next += (uint64_t)floor(log(u01(&t->rng)) / log1p(-t->W)) + 1;
}

int mts_nn_tracer_init(mts_nn_tracer *t, size_t samples, const mts_format *fmt, int kind, uint64_t seed,
                       mts_err *err)
{
    memset(t, 0, sizeof *t);
    if (samples < 1) return mts_fail(err, MTS_EINVAL, "trace: sample count must be >= 1");
    if (kind != MTS_TRACE_SIG && kind != MTS_TRACE_FLOAT)
        return mts_fail(err, MTS_EINVAL, "trace: kind %d, expected significand or float", kind);
    t->a = malloc(sizeof(uint32_t) * samples);
    t->b = malloc(sizeof(uint32_t) * samples);
    if (!t->a || !t->b) {
        mts_nn_tracer_free(t);
        return mts_fail(err, MTS_ENOMEM, "trace: out of memory for %zu samples", samples);
    }
    t->cap = samples;
    t->fmt = *fmt;
    t->kind = kind;
    t->rng.s = mts_rng_derive(seed, 0x7472616365ull); /* "trace" */
    t->W = 1.0;
    /* positions 0..cap-1 fill the reservoir; Algorithm L picks the next one after them */
    t->next = samples - 1;
    advance(t);
    return MTS_OK;
}

void mts_nn_tracer_free(mts_nn_tracer *t)
{
    free(t->a);
    free(t->b);
    memset(t, 0, sizeof *t);
}

static void record(mts_nn_tracer *t, const mts_provider *p, size_t slot, uint64_t off, int transA, int transB,
                   int n, int k, const float *A, int lda, const float *B, int ldb)
{
    int i = (int)(off / ((uint64_t)n * k)), j = (int)(off / (uint64_t)k % (uint64_t)n), kk = (int)(off % (uint64_t)k);
    float a = transA ? A[(size_t)kk * lda + i] : A[(size_t)i * lda + kk];
    float b = transB ? B[(size_t)j * ldb + kk] : B[(size_t)kk * ldb + j];
    t->a[slot] = mts_prov_operand(p, mts_f2u(a));
    t->b[slot] = mts_prov_operand(p, mts_f2u(b));
}

static void sample(mts_nn_tracer *t, const mts_provider *p, int transA, int transB, int m, int n, int k,
                   const float *A, int lda, const float *B, int ldb)
{
    mts_format f = mts_prov_format(p);
    if (memcmp(&f, &t->fmt, sizeof f) || p->kind == MTS_PROV_INT) return;
    uint64_t start = t->seen, end = start + (uint64_t)m * n * k;
    /* filling: every pair is taken until the reservoir is full (have == seen) */
    while (t->have < t->cap && (uint64_t)t->have < end) {
        size_t slot = t->have++;
        record(t, p, slot, (uint64_t)slot - start, transA, transB, n, k, A, lda, B, ldb);
    }
    /* then Algorithm L: the pair at position next replaces a random slot */
    while (t->have == t->cap && t->next < end) {
        size_t slot = (size_t)mts_rng_below(&t->rng, (uint32_t)t->cap);
        record(t, p, slot, t->next - start, transA, transB, n, k, A, lda, B, ldb);
        advance(t);
    }
    t->seen = end;
}

/* mts_nn_gemm (ct 0) and mts_nn_gemm_t (ct 1). */
static int nn_gemm(const mts_nn_ctx *ctx, const mts_provider *p, int ct, int transA, int transB, int m, int n, int k,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    if (ctx->device != MTS_DEVICE_CPU)
        return mts_fail(err, MTS_EUNSUPPORTED, "nn: device %d is not the CPU; these ops run on the CPU only",
                        ctx->device);
    if (ctx->tap && m > 0 && n > 0 && k > 0) mts_gemm_tap_see(ctx->tap, transA, transB, m, n, k, A, lda, B, ldb);
    if (ctx->tracer && m > 0 && n > 0 && k > 0) sample(ctx->tracer, p, transA, transB, m, n, k, A, lda, B, ldb);
    return ct ? mts_gemm_t(p, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err)
              : mts_gemm(p, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
}

int mts_nn_gemm(const mts_nn_ctx *ctx, const mts_provider *p, int transA, int transB, int m, int n, int k,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    return nn_gemm(ctx, p, 0, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
}

int mts_nn_gemm_t(const mts_nn_ctx *ctx, const mts_provider *p, int transA, int transB, int m, int n, int k,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    return nn_gemm(ctx, p, 1, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
}

int mts_nn_gemm_batch(const mts_nn_ctx *ctx, const mts_provider *p, int count, int transA, int transB, int m, int n,
                      int k, const float *const *A, int lda, const float *const *B, int ldb, float beta,
                      float *const *C, int ldc, mts_err *err)
{
    if (ctx->device != MTS_DEVICE_CPU)
        return mts_fail(err, MTS_EUNSUPPORTED, "nn: device %d is not the CPU; these ops run on the CPU only",
                        ctx->device);
    if (!ctx->tap && !ctx->tracer)
        return mts_gemm_batch(p, count, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
    for (int b = 0; b < count; b++) {
        int rc = nn_gemm(ctx, p, 0, transA, transB, m, n, k, A[b], lda, B[b], ldb, beta, C[b], ldc, err);
        if (rc != MTS_OK) return rc;
    }
    return MTS_OK;
}

int mts_nn_gemm_acc(const mts_nn_ctx *ctx, const mts_provider *p, int transA, int transB, int m, int n, int k,
                    const float *A, int lda, const float *B, int ldb, float *C, int ldc, mts_err *err)
{
    if (ctx->device != MTS_DEVICE_CPU)
        return mts_fail(err, MTS_EUNSUPPORTED, "nn: device %d is not the CPU; these ops run on the CPU only",
                        ctx->device);
    if (ctx->tap && m > 0 && n > 0 && k > 0) mts_gemm_tap_see(ctx->tap, transA, transB, m, n, k, A, lda, B, ldb);
    if (ctx->tracer && m > 0 && n > 0 && k > 0) sample(ctx->tracer, p, transA, transB, m, n, k, A, lda, B, ldb);
    return mts_gemm_acc(p, transA, transB, m, n, k, A, lda, B, ldb, C, ldc, err);
}

int mts_nn_tracer_write(const mts_nn_tracer *t, const char *path, mts_err *err)
{
    size_t n = t->have;
    uint64_t *a = malloc(sizeof(uint64_t) * (n ? n : 1)), *b = malloc(sizeof(uint64_t) * (n ? n : 1));
    if (!a || !b) {
        free(a);
        free(b);
        return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    }
    mts_trace_info info;
    memset(&info, 0, sizeof info);
    info.kind = (uint32_t)t->kind;
    size_t c = 0;
    if (t->kind == MTS_TRACE_SIG) {
        info.width_a = info.width_b = (uint32_t)t->fmt.M;
        for (size_t i = 0; i < n; i++) {
            uint32_t ea = (t->a[i] >> 23) & 0xFF, eb = (t->b[i] >> 23) & 0xFF;
            if (ea == 0 || eb == 0 || ea == 0xFF || eb == 0xFF) continue; /* never reaches the significand multiplier */
            a[c] = (t->a[i] & MTS_F32_MAN) >> (23 - t->fmt.M);
            b[c] = (t->b[i] & MTS_F32_MAN) >> (23 - t->fmt.M);
            c++;
        }
    } else {
        info.width_a = info.width_b = (uint32_t)(1 + t->fmt.E + t->fmt.M);
        info.exp_bits = (uint32_t)t->fmt.E;
        for (size_t i = 0; i < n; i++, c++) {
            a[c] = mts_fmt_encode(&t->fmt, t->a[i]);
            b[c] = mts_fmt_encode(&t->fmt, t->b[i]);
        }
    }
    int rc = mts_trace_write(path, &info, c, a, b, err);
    free(a);
    free(b);
    return rc;
}
