/* blas.c - the baseline provider: FP32 SGEMM through OpenBLAS, with
 * OpenBLAS's own (undocumented, thread-dependent) summation order. Built
 * only when CMake found OpenBLAS (MTS_HAVE_OPENBLAS); otherwise the provider
 * refuses with a message saying so. */
#include "gemm_internal.h"

#ifdef MTS_HAVE_OPENBLAS
#include <cblas.h>

/* from OpenBLAS (cblas.h of the netlib alternative does not declare it) */
void openblas_set_num_threads(int num_threads);

int mts_gemm_have_blas(void) { return 1; }

int gemm_blas(int threads, int transA, int transB, int m, int n, int k, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    (void)err;
    openblas_set_num_threads(threads);
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, k,
                1.0f, A, lda, B, ldb, beta, C, ldc);
    return MTS_OK;
}
#else
int mts_gemm_have_blas(void) { return 0; }

int gemm_blas(int threads, int transA, int transB, int m, int n, int k, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    (void)threads; (void)transA; (void)transB; (void)m; (void)n; (void)k;
    (void)A; (void)lda; (void)B; (void)ldb; (void)beta; (void)C; (void)ldc;
    return mts_fail(err, MTS_EUNSUPPORTED, "gemm: this build has no OpenBLAS (install libopenblas-dev and "
                    "re-run cmake) - use the native provider");
}
#endif
