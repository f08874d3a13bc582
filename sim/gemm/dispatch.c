/* dispatch.c - mts_gemm: argument checks, operand quantization (RNE into the
 * provider's input format) and packing into dense [m][k] / [k][n] arrays,
 * then dispatch to the kernel family of the provider (docs/gemm.md). */
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "gemm_internal.h"
#include "mantis/gpu.h"

const char *mts_gemm_isa(void)
{
#if defined(__AVX512F__)
    return "avx512";
#elif defined(__AVX2__)
    return "avx2";
#else
    return "scalar";
#endif
}

static int resolve_threads(int threads)
{
#ifdef _OPENMP
    return threads > 0 ? threads : omp_get_num_procs();
#else
    (void)threads;
    return 1;
#endif
}

static int check_shapes(int transA, int transB, int m, int n, int k, const float *A, int lda,
                        const float *B, int ldb, const float *C, int ldc, mts_err *err)
{
    if (m < 0 || n < 0 || k < 0)
        return mts_fail(err, MTS_EINVAL, "gemm: shape m=%d n=%d k=%d, expected non-negative sizes", m, n, k);
    int arow = transA ? m : k, brow = transB ? k : n;
    if (lda < (arow > 1 ? arow : 1) || ldb < (brow > 1 ? brow : 1) || ldc < (n > 1 ? n : 1))
        return mts_fail(err, MTS_EINVAL,
                        "gemm: leading dimensions lda=%d ldb=%d ldc=%d, expected >= %d, %d, %d (one row)", lda,
                        ldb, ldc, arow, brow, n);
    if ((m > 0 && n > 0 && !C) || (m > 0 && k > 0 && !A) || (k > 0 && n > 0 && !B))
        return mts_fail(err, MTS_EINVAL, "gemm: NULL matrix pointer for a non-empty operand");
    return MTS_OK;
}

/* The format operands are quantized to: in_fmt, or the implementation's own
 * when in_fmt is left all-zero. */
static int operand_format(const mts_provider *p, const mts_format *own, mts_format *f, mts_err *err)
{
    *f = p->in_fmt.M == 0 && p->in_fmt.E == 0 ? *own : p->in_fmt;
    return mts_format_check(f, err);
}

static int check_provider(const mts_provider *p, mts_err *err)
{
    int rc;
    if (!p) return mts_fail(err, MTS_EINVAL, "gemm: NULL provider");
    switch (p->kind) {
    case MTS_PROV_BLAS:
    case MTS_PROV_NATIVE: break;
    case MTS_PROV_LUT:
        if (!p->lut || p->lut->kind != MTS_LUT_FLOAT || !p->lut->entry ||
            p->lut->n != (size_t)1 << (2 * p->lut->fmt.M))
            return mts_fail(err, MTS_EINVAL, "gemm: LUT provider needs a float LUT with 2^(2M) entries");
        if ((rc = mts_format_check(&p->lut->fmt, err)) != MTS_OK) return rc;
        break;
    case MTS_PROV_MULOP:
        if (!p->mul || !p->mul->fn) return mts_fail(err, MTS_EINVAL, "gemm: MULOP provider without a mulop");
        break;
    case MTS_PROV_INT:
        if (!p->lut || p->lut->kind != MTS_LUT_INT || !p->lut->entry || p->lut->int_bits < 1 ||
            p->lut->int_bits > 8 || p->lut->n != (size_t)1 << (2 * p->lut->int_bits))
            return mts_fail(err, MTS_EINVAL, "gemm: INT provider needs an integer table of 1..8-bit operands");
        if (p->fmaq)
            return mts_fail(err, MTS_EINVAL, "gemm: FMAq accumulation needs a float provider, not INT");
        break;
    default: return mts_fail(err, MTS_EINVAL, "gemm: unknown provider kind %d", (int)p->kind);
    }
    if (p->fmaq) {
        if ((rc = mts_qfmt_check(&p->qprod, err)) != MTS_OK) return rc;
        if ((rc = mts_qfmt_check(&p->qacc, err)) != MTS_OK) return rc;
    }
    return MTS_OK;
}

/* One row of opX, quantized with mts_fmt_quantize(f, x, MTS_RNE) for an E8
 * IEEE format (same exponent range as FP32) at M < 23 bits, branch-free so
 * the contiguous case vectorises: round the mantissa with the carry running
 * into the exponent (a carry out of the largest finite binade gives exactly
 * inf), NaN -> canonical NaN, inf kept, FP32 subnormals -> signed zero. */
static void quantize_row_e8(uint32_t *dst, const float *src, size_t stride, int cols, int M)
{
    const int drop = 23 - M;
    const uint32_t half = (1u << (drop - 1)) - 1u, keep = ~((1u << drop) - 1u);
#define Q_E8(x)                                                                                    \
    ((((x) & MTS_F32_EXP) == 0)             ? ((x) & MTS_F32_SIGN)                                \
     : (((x) & MTS_F32_EXP) == MTS_F32_EXP) ? (((x) & MTS_F32_MAN) ? MTS_F32_QNAN : (x))           \
                                            : (((x) + half + (((x) >> drop) & 1u)) & keep))
    if (stride == 1) {
        for (int c = 0; c < cols; c++) {
            uint32_t x = mts_f2u(src[c]);
            dst[c] = Q_E8(x);
        }
    } else {
        for (int c = 0; c < cols; c++) {
            uint32_t x = mts_f2u(src[(size_t)c * stride]);
            dst[c] = Q_E8(x);
        }
    }
#undef Q_E8
}

static int is_e8(const mts_format *f) { return f->E == 8 && f->bias == 127 && f->ieee; }

/* Reads opX (rows x cols) into a dense array, quantizing each element:
 * qf NULL keeps FP32; rtz (LUT) additionally truncates into the LUT's
 * format as AMSim's rule 1 does, so kernels may index the table directly. */
static void pack(uint32_t *dst, const float *X, int ld, int trans, int rows, int cols, const mts_format *qf,
                 const mts_format *rtz, int threads)
{
    (void)threads;
    int fast = qf && !rtz && is_e8(qf) && qf->M < 23;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
    for (int r = 0; r < rows; r++) {
        uint32_t *row = dst + (size_t)r * (size_t)cols;
        const float *src = trans ? X + r : X + (size_t)r * (size_t)ld;
        if (fast) {
            quantize_row_e8(row, src, trans ? (size_t)ld : 1, cols, qf->M);
            continue;
        }
        for (int c = 0; c < cols; c++) {
            uint32_t x = mts_f2u(gemm_at(X, ld, trans, r, c));
            if (qf) x = mts_fmt_quantize(qf, x, MTS_RNE);
            if (rtz) x = mts_fmt_quantize(rtz, x, MTS_RTZ);
            row[c] = x;
        }
    }
}

/* Padded size of x in tiles of t. */
static double padded(int x, int t) { return (double)((x + t - 1) / t) * t; }

/* 1 when the transposed problem costs the SIMD kernel fewer vector lanes:
 * the kernels vectorise across n in panels of NR columns and MR rows, so a
 * GEMM with n = 6 (a convolution's output channels) would leave most lanes
 * padding, while its m (batch x pixels) fills them. Per k step the cost is
 * the padded tile area plus packing the B panel (writes of its lanes). */
static int swap_pays(const gemm_job *g)
{
    int nr = g->fmaq ? mts__gemm_fmaq_nr() : g->prod == GEMM_PROD_LUT ? mts__gemm_lut_nr() : mts__gemm_native_nr();
    const int mr = 4;
    if (nr == 0 || g->n >= g->m) return 0;
    double plain = padded(g->m, mr) * padded(g->n, nr) / 16.0 + padded(g->n, nr);
    double swapped = padded(g->n, mr) * padded(g->m, nr) / 16.0 + padded(g->m, nr);
    return swapped < 0.9 * plain;
}

static int run_float(const mts_provider *p, gemm_job *g, int transA, int transB, const float *A, int lda,
                     const float *B, int ldb, mts_err *err)
{
    mts_format qf, *qfp = NULL, *rtz = NULL;
    int rc;

    g->fmaq = p->fmaq ? 1 : 0;
    g->qprod = p->qprod;
    g->qacc = p->qacc;
    g->chunk = p->chunk > 0 ? p->chunk : 16;
    g->lut = p->lut;
    g->mul = p->mul;
    g->f32 = mts_format_e8(23);
    g->fp32 = NULL;
    switch (p->kind) {
    case MTS_PROV_LUT:
        if ((rc = operand_format(p, &p->lut->fmt, &qf, err)) != MTS_OK) return rc;
        qfp = &qf;
        /* a wider in_fmt leaves bits AMSim truncates away: drop them here */
        if (memcmp(&qf, &p->lut->fmt, sizeof qf)) rtz = (mts_format *)&p->lut->fmt;
        g->prod = GEMM_PROD_LUT;
        break;
    case MTS_PROV_MULOP:
        if ((rc = operand_format(p, &p->mul->fmt, &qf, err)) != MTS_OK) return rc;
        qfp = &qf;
        g->prod = GEMM_PROD_MULOP;
        break;
    default: /* NATIVE, and BLAS asked for FMAq */
        g->prod = g->fmaq ? GEMM_PROD_FP32M : GEMM_PROD_F32;
        if (g->fmaq && !(g->fp32 = mts_model_find("fp32")))
            return mts_fail(err, MTS_EINVAL, "gemm: FMAq with native products needs the \"fp32\" model");
        break;
    }
    int swap = !p->scalar_only && g->prod != GEMM_PROD_MULOP && swap_pays(g);
    size_t na = (size_t)g->m * (size_t)g->k, nb = (size_t)g->k * (size_t)g->n;
    if (swap) { /* Aq holds op(B)^T, Bq op(A)^T */
        size_t t = na;
        na = nb;
        nb = t;
    }
    uint32_t *Aq = mts__gemm_ws_alloc(na * sizeof *Aq, 0), *Bq = mts__gemm_ws_alloc(nb * sizeof *Bq, 0);
    if (!Aq || !Bq) {
        mts__gemm_ws_free(Aq);
        mts__gemm_ws_free(Bq);
        return mts_fail(err, MTS_ENOMEM, "gemm: out of memory packing %zu + %zu operands", na, nb);
    }
    if (swap) {
        /* the transposed problem: rows of op(B)^T against columns of op(A)^T */
        int m = g->m;
        g->swap = 1;
        g->m = g->n;
        g->n = m;
        pack(Aq, B, ldb, !transB, g->m, g->k, qfp, rtz, g->threads);
        pack(Bq, A, lda, !transA, g->k, g->n, qfp, rtz, g->threads);
    } else {
        pack(Aq, A, lda, transA, g->m, g->k, qfp, rtz, g->threads);
        pack(Bq, B, ldb, transB, g->k, g->n, qfp, rtz, g->threads);
    }
    g->A = Aq;
    g->B = Bq;

    if (g->prod == GEMM_PROD_MULOP) rc = mts__gemm_mulop(g, err);
    else if (p->scalar_only) rc = mts__gemm_scalar(g, err);
    else if (g->fmaq) rc = mts__gemm_fmaq(g, err);
    else if (g->prod == GEMM_PROD_LUT) rc = mts__gemm_lut(g, err);
    else rc = mts__gemm_native(g, err);
    mts__gemm_ws_free(Aq);
    mts__gemm_ws_free(Bq);
    return rc;
}

int mts_gemm(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    int rc;
    if ((rc = check_provider(p, err)) != MTS_OK) return rc;
    if ((rc = check_shapes(transA, transB, m, n, k, A, lda, B, ldb, C, ldc, err)) != MTS_OK) return rc;
    if (p->device == MTS_GPU_DEVICE_CUDA) /* gpu/: same results; its errors name the missing piece */
        return mts_gpu_gemm(p, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
    if (p->device != 0) return mts_fail(err, MTS_EINVAL, "gemm: unknown device %d", p->device);
    if (m == 0 || n == 0) return MTS_OK;
    int threads = resolve_threads(p->threads);
    /* a thread team costs more than a small product (waking it, and its
     * workers spinning afterwards); results do not depend on the count */
    if ((double)m * n * k < 262144.0) threads = 1;
    if (k == 0) { /* empty sum: y = +0 for every provider */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) gemm_store(&C[(size_t)i * (size_t)ldc + (size_t)j], beta, 0.0f);
        return MTS_OK;
    }
    if (p->kind == MTS_PROV_BLAS && !p->fmaq)
        return mts__gemm_blas(threads, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
    if (p->kind == MTS_PROV_INT)
        return mts__gemm_int(p->lut, threads, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);

    gemm_job g;
    memset(&g, 0, sizeof g);
    g.m = m;
    g.n = n;
    g.k = k;
    g.beta = beta;
    g.C = C;
    g.ldc = ldc;
    g.threads = threads;
    return run_float(p, &g, transA, transB, A, lda, B, ldb, err);
}
