/* ref.c - the naive reference of mts_gemm (gemm.h): a triple loop that
 * reads each operand, quantizes it as documented and forms every product
 * with the scalar function and every sum in the documented order. It shares
 * no code with the kernels beyond the scalar arithmetic they all define
 * themselves against (a*b, mts_amsim, mulop->fn, mts_fmaq_dot,
 * mts_qdot_float), so a kernel bug cannot hide in both. */
#include <math.h>
#include <stdlib.h>

#include "mantis/amsim.h"
#include "mantis/fpbits.h"
#include "mantis/gemm.h"
#include "mantis/intmul.h"

static float at(const float *X, int ld, int trans, int r, int c)
{
    return trans ? X[(size_t)c * (size_t)ld + (size_t)r] : X[(size_t)r * (size_t)ld + (size_t)c];
}

static void store(float *c, float beta, float y)
{
    float v;
    if (beta == 0.0f) v = y;
    else if (beta == 1.0f) v = *c + y;
    else v = beta * *c + y;
    if (isnan(v)) v = mts_u2f(MTS_F32_QNAN);
    *c = v;
}

/* The quantizer of operands: in_fmt, or the LUT's / mulop's own format. */
static mts_format operand_format(const mts_provider *p)
{
    if (p->in_fmt.M != 0 || p->in_fmt.E != 0) return p->in_fmt;
    return p->kind == MTS_PROV_LUT ? p->lut->fmt : p->mul->fmt;
}

static float range_bound(const float *X, int ld, int trans, int rows, int cols, int want_max)
{
    int seen = 0;
    float v = 0.0f;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float x = at(X, ld, trans, r, c);
            if (!isfinite(x)) continue;
            if (!seen || (want_max ? x > v : x < v)) v = x;
            seen = 1;
        }
    return v;
}

static int ref_int(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    mts_affine pa, pb;
    int rc, bits = p->lut->int_bits, sg = p->lut->int_signed;
    if ((rc = mts_affine_from_range(range_bound(A, lda, transA, m, k, 0), range_bound(A, lda, transA, m, k, 1),
                                    bits, sg, &pa, err)) != MTS_OK)
        return rc;
    if ((rc = mts_affine_from_range(range_bound(B, ldb, transB, k, n, 0), range_bound(B, ldb, transB, k, n, 1),
                                    bits, sg, &pb, err)) != MTS_OK)
        return rc;
    float *row = malloc((size_t)(k ? k : 1) * sizeof *row), *col = malloc((size_t)(k ? k : 1) * sizeof *col);
    if (!row || !col) {
        free(row);
        free(col);
        return mts_fail(err, MTS_ENOMEM, "gemm_ref: out of memory");
    }
    for (int i = 0; i < m && rc == MTS_OK; i++)
        for (int j = 0; j < n && rc == MTS_OK; j++) {
            double y;
            for (int kk = 0; kk < k; kk++) {
                row[kk] = at(A, lda, transA, i, kk);
                col[kk] = at(B, ldb, transB, kk, j);
            }
            rc = mts_qdot_float(p->lut, &pa, row, &pb, col, (size_t)k, &y, err);
            if (rc == MTS_OK) store(&C[(size_t)i * (size_t)ldc + (size_t)j], beta, (float)y);
        }
    free(row);
    free(col);
    return rc;
}

int mts_gemm_ref(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    if (!p || m < 0 || n < 0 || k < 0) return mts_fail(err, MTS_EINVAL, "gemm_ref: bad provider or shape");
    if (((p->kind == MTS_PROV_LUT || p->kind == MTS_PROV_INT) && (!p->lut || !p->lut->entry)) ||
        (p->kind == MTS_PROV_MULOP && (!p->mul || !p->mul->fn)))
        return mts_fail(err, MTS_EINVAL, "gemm_ref: provider without its table or mulop");
    if (p->kind == MTS_PROV_INT) return ref_int(p, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);

    int quant = p->kind == MTS_PROV_LUT || p->kind == MTS_PROV_MULOP;
    mts_format qf = quant ? operand_format(p) : mts_format_e8(23);
    mts_mulop lutop, *mul = NULL; /* the product as mts_fmaq_dot takes it; NULL: model "fp32" */
    if (p->kind == MTS_PROV_LUT) {
        mts_mulop_lut(&lutop, p->lut);
        mul = &lutop;
    } else if (p->kind == MTS_PROV_MULOP) {
        mul = (mts_mulop *)p->mul;
    }
    uint32_t *row = malloc((size_t)(k ? k : 1) * sizeof *row), *col = malloc((size_t)(k ? k : 1) * sizeof *col);
    if (!row || !col) {
        free(row);
        free(col);
        return mts_fail(err, MTS_ENOMEM, "gemm_ref: out of memory");
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            for (int kk = 0; kk < k; kk++) { /* operands, quantized with RNE */
                row[kk] = mts_f2u(at(A, lda, transA, i, kk));
                col[kk] = mts_f2u(at(B, ldb, transB, kk, j));
                if (quant) {
                    row[kk] = mts_fmt_quantize(&qf, row[kk], MTS_RNE);
                    col[kk] = mts_fmt_quantize(&qf, col[kk], MTS_RNE);
                }
            }
            float y;
            if (p->fmaq) {
                y = mts_u2f(mts_fmaq_dot(&p->qprod, &p->qacc, p->chunk > 0 ? p->chunk : 16, mul, row, col,
                                         (size_t)k, 1));
            } else {
                y = 0.0f;
                for (int kk = 0; kk < k; kk++) {
                    float prod = mul ? mts_u2f(mul->fn(mul, row[kk], col[kk]))
                                     : mts_u2f(row[kk]) * mts_u2f(col[kk]);
                    y = y + prod;
                }
            }
            store(&C[(size_t)i * (size_t)ldc + (size_t)j], beta, y);
        }
    free(row);
    free(col);
    return MTS_OK;
}
