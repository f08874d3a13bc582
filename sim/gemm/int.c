/* int.c - the integer provider (TFApprox): each operand tensor is
 * quantized per call with the affine map of intmul.h over its own finite
 * min/max (NaN -> zero point, +-inf -> the end codes, mts_affine_quantize),
 * every product qa*qb is read from the n-bit table, the sums are exact
 * int64 (so no order question arises), corrected for the zero points
 * (mts_qdot_correct) and scaled once: y = (float)(sa * sb * (double)sum),
 * the formula of mts_qdot_float. */
#include <math.h>
#include <stdlib.h>

#include "gemm_internal.h"
#include "mantis/intmul.h"

/* Finite min/max of opX (rows x cols); 0, 0 when there is none. */
static void finite_range(const float *X, int ld, int trans, int rows, int cols, double *lo, double *hi)
{
    double a = INFINITY, b = -INFINITY;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float x = gemm_at(X, ld, trans, r, c);
            if (isfinite(x)) {
                if (x < a) a = x;
                if (x > b) b = x;
            }
        }
    *lo = a <= b ? a : 0.0;
    *hi = a <= b ? b : 0.0;
}

int mts_gemm_int_quantize(int nbits, int is_signed, int threads, int transA, int transB, int m, int n, int k,
                          const float *A, int lda, const float *B, int ldb, uint32_t *ia, uint32_t *ib,
                          int64_t *suma, int64_t *sumb, mts_affine *pa, mts_affine *pb, mts_err *err)
{
    double lo, hi;
    int rc;
    uint32_t mask = (1u << nbits) - 1u;
    size_t K = (size_t)k;
    finite_range(A, lda, transA, m, k, &lo, &hi);
    if ((rc = mts_affine_from_range(lo, hi, nbits, is_signed, pa, err)) != MTS_OK) return rc;
    finite_range(B, ldb, transB, k, n, &lo, &hi);
    if ((rc = mts_affine_from_range(lo, hi, nbits, is_signed, pb, err)) != MTS_OK) return rc;
    (void)threads;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
    for (int i = 0; i < m; i++) {
        int64_t s = 0;
        for (int kk = 0; kk < k; kk++) {
            int32_t q = mts_affine_quantize(pa, gemm_at(A, lda, transA, i, kk));
            s += q;
            ia[(size_t)i * K + (size_t)kk] = ((uint32_t)q & mask) << nbits;
        }
        suma[i] = s;
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
    for (int j = 0; j < n; j++) {
        int64_t s = 0;
        for (int kk = 0; kk < k; kk++) {
            int32_t q = mts_affine_quantize(pb, gemm_at(B, ldb, transB, kk, j));
            s += q;
            ib[(size_t)j * K + (size_t)kk] = (uint32_t)q & mask;
        }
        sumb[j] = s;
    }
    return MTS_OK;
}

int mts__gemm_int(const mts_lut *lut, int threads, int transA, int transB, int m, int n, int k,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  mts_err *err)
{
    mts_affine pa, pb;
    int rc;
    size_t K = (size_t)k;
    uint32_t *ia = mts__gemm_ws_alloc((size_t)m * K * sizeof *ia, 0);
    uint32_t *ib = mts__gemm_ws_alloc((size_t)n * K * sizeof *ib, 0);
    int64_t *suma = mts__gemm_ws_alloc((size_t)m * sizeof *suma, 0);
    int64_t *sumb = mts__gemm_ws_alloc((size_t)n * sizeof *sumb, 0);
    if (!ia || !ib || !suma || !sumb) {
        rc = mts_fail(err, MTS_ENOMEM, "gemm: out of memory quantizing INT operands (%d x %d x %d)", m, n, k);
        goto done;
    }
    /* row operand: table row offset (code << n); column operand: code, stored [n][k] */
    if ((rc = mts_gemm_int_quantize(lut->int_bits, lut->int_signed, threads, transA, transB, m, n, k, A, lda, B, ldb,
                                    ia, ib, suma, sumb, &pa, &pb, err)) != MTS_OK)
        goto done;
    double scale = pa.scale * pb.scale;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
    for (int i = 0; i < m; i++) {
        const uint32_t *ra = ia + (size_t)i * K;
        for (int j = 0; j < n; j++) {
            const uint32_t *cb = ib + (size_t)j * K;
            int64_t sab = 0;
            for (size_t kk = 0; kk < K; kk++) sab += (int32_t)lut->entry[ra[kk] | cb[kk]];
            int64_t acc = mts_qdot_correct(sab, suma[i], sumb[j], (int64_t)k, pa.zero_point, pb.zero_point);
            gemm_store(&C[(size_t)i * (size_t)ldc + (size_t)j], beta, (float)(scale * (double)acc));
        }
    }
done:
    mts__gemm_ws_free(ia);
    mts__gemm_ws_free(ib);
    mts__gemm_ws_free(suma);
    mts__gemm_ws_free(sumb);
    return rc;
}
