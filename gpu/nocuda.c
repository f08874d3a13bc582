/* nocuda.c - gpu.h in a build without nvcc: every call that needs the
 * device answers "built without CUDA". */
#include "mantis/gpu.h"

#define NOCUDA(err) \
    mts_fail(err, MTS_EUNSUPPORTED, "gpu: built without CUDA (nvcc was not found when Mantis was configured)")

int mts_gpu_built(void) { return 0; }
int mts_gpu_probe(mts_gpu_info *info, mts_err *err)
{
    (void)info;
    return NOCUDA(err);
}
int mts_gpu_alloc(void **dptr, size_t bytes, mts_err *err)
{
    (void)bytes;
    *dptr = NULL;
    return NOCUDA(err);
}
void mts_gpu_free(void *dptr) { (void)dptr; }
int mts_gpu_upload(void *dst, const void *src, size_t bytes, mts_err *err)
{
    (void)dst, (void)src, (void)bytes;
    return NOCUDA(err);
}
int mts_gpu_download(void *dst, const void *src, size_t bytes, mts_err *err)
{
    (void)dst, (void)src, (void)bytes;
    return NOCUDA(err);
}
size_t mts_gpu_peak_bytes(void) { return 0; }
int mts_gpu_plan_open(const mts_provider *p, mts_gpu_gemm_plan **plan, mts_err *err)
{
    (void)p;
    *plan = NULL;
    return NOCUDA(err);
}
void mts_gpu_plan_close(mts_gpu_gemm_plan *plan) { (void)plan; }
int mts_gpu_gemm_dev(const mts_gpu_gemm_plan *plan, int transA, int transB, int m, int n, int k, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    (void)plan, (void)transA, (void)transB, (void)m, (void)n, (void)k, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return NOCUDA(err);
}
int mts_gpu_gemm(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    (void)p, (void)transA, (void)transB, (void)m, (void)n, (void)k, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    return NOCUDA(err);
}
int mts_gpu_sgemm_cublas(int m, int n, int k, const float *A, const float *B, float *C, mts_err *err)
{
    (void)m, (void)n, (void)k, (void)A, (void)B, (void)C;
    return NOCUDA(err);
}
int mts_gpu_sync(mts_err *err) { return NOCUDA(err); }
