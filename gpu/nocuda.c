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

size_t mts_gpu_gemm_profile(char *buf, size_t n)
{
    if (n) buf[0] = 0;
    return 0;
}
int mts_gpu_plan_open(const mts_provider *p, mts_gpu_gemm_plan **plan, mts_err *err)
{
    *plan = NULL;
    int rc = mts_gpu_supports(p, err); /* as the CUDA build: the provider is judged first */
    return rc != MTS_OK ? rc : NOCUDA(err);
}
void mts_gpu_plan_close(mts_gpu_gemm_plan *plan) { (void)plan; }
int mts_gpu_plan_set_kernel(mts_gpu_gemm_plan *plan, int kernel, mts_err *err)
{
    (void)plan, (void)kernel;
    return NOCUDA(err);
}
int mts_gpu_gemm_dev_batched(const mts_gpu_gemm_plan *plan, const mts_gpu_batch *bt, int transA, int transB, int m,
                             int n, int k, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                             int ldc, mts_err *err)
{
    (void)plan, (void)bt, (void)transA, (void)transB, (void)m, (void)n, (void)k, (void)A, (void)lda, (void)B;
    (void)ldb, (void)beta, (void)C, (void)ldc;
    return NOCUDA(err);
}
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
    (void)transA, (void)transB, (void)m, (void)n, (void)k, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
    int rc = mts_gpu_supports(p, err);
    return rc != MTS_OK ? rc : NOCUDA(err);
}
int mts_gpu_sgemm_cublas(int m, int n, int k, const float *A, const float *B, float *C, mts_err *err)
{
    (void)m, (void)n, (void)k, (void)A, (void)B, (void)C;
    return NOCUDA(err);
}
int mts_gpu_sync(mts_err *err) { return NOCUDA(err); }

/* the layer-op twins (gpu/nn_ops.cu, gpu/nn_tx.cu): arguments unused, same answer */
#define NOCUDA_OP(decl) \
    decl                \
    {                   \
        return NOCUDA(err); \
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
NOCUDA_OP(int mts_gpu_relu_forward(size_t n, const float *x, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_relu_backward(size_t n, const float *y, const float *dy, float *dx, mts_err *err))
NOCUDA_OP(int mts_gpu_dense_forward(const mts_gpu_gemm_plan *fwd, int N, int in, int out, const float *x,
                                    const float *w, const float *b, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_dense_backward(const mts_gpu_gemm_plan *bwd, int N, int in, int out, const float *x,
                                     const float *w, const float *dy, float *dx, float *dw, float *db, mts_err *err))
NOCUDA_OP(int mts_gpu_ste_mask(const mts_gpu_gemm_plan *fwd, int ste, int N, int in, int out, const float *x,
                               const float *w, uint8_t *mask, mts_err *err))
NOCUDA_OP(int mts_gpu_dense_backward_ste(const mts_gpu_gemm_plan *fwd, const mts_gpu_gemm_plan *bwd, int ste, int N,
                                         int in, int out, const float *x, const float *w, const float *dy, float *dx,
                                         float *dw, float *db, mts_err *err))
NOCUDA_OP(int mts_gpu_softmax_ce(int N, int classes, const float *logits, const uint8_t *labels, float *dlogits,
                                 double *loss, int *correct, mts_err *err))
NOCUDA_OP(int mts_gpu_bn_forward(int train, int N, int C, int HW, const float *x, const float *gamma,
                                 const float *beta, float *rmean, float *rvar, float mom, float eps, float *y,
                                 float *xhat, float *invstd, mts_err *err))
NOCUDA_OP(int mts_gpu_bn_backward(int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                                  const float *invstd, float *dx, float *dgamma, float *dbeta, mts_err *err))
NOCUDA_OP(int mts_gpu_maxpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y,
                                      int32_t *argmax, mts_err *err))
NOCUDA_OP(int mts_gpu_maxpool_backward(int N, int C, int H, int W, int k, int s, const float *dy,
                                       const int32_t *argmax, float *dx, mts_err *err))
NOCUDA_OP(int mts_gpu_avgpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y,
                                      mts_err *err))
NOCUDA_OP(int mts_gpu_avgpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, float *dx,
                                       mts_err *err))
NOCUDA_OP(int mts_gpu_gap_forward(int N, int C, int HW, const float *x, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_gap_backward(int N, int C, int HW, const float *dy, float *dx, mts_err *err))
NOCUDA_OP(int mts_gpu_im2col(const mts_conv_geom *g, int N, const float *x, float *col, mts_err *err))
NOCUDA_OP(int mts_gpu_col2im(const mts_conv_geom *g, int N, const float *dcolT, float *dx, mts_err *err))
NOCUDA_OP(int mts_gpu_sgd_step(size_t n, float *param, const float *grad, float *m, const uint8_t *wmask, float lr,
                               float momentum, float wd, mts_err *err))
NOCUDA_OP(int mts_gpu_adam_step(size_t n, float *param, const float *grad, float *m, float *v,
                                const uint8_t *wmask, float lr, float beta1, float beta2, float eps, float wd,
                                double bc1, double bc2, mts_err *err))
NOCUDA_OP(int mts_gpu_layernorm_forward(int R, int D, const float *x, const float *gamma, const float *beta,
                                        float eps, float *y, float *xhat, float *invstd, mts_err *err))
NOCUDA_OP(int mts_gpu_layernorm_backward(int R, int D, const float *dy, const float *gamma, const float *xhat,
                                         const float *invstd, float *dx, float *dgamma, float *dbeta, mts_err *err))
NOCUDA_OP(int mts_gpu_gelu_forward(size_t n, const float *x, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_gelu_backward(size_t n, const float *x, const float *dy, float *dx, mts_err *err))
NOCUDA_OP(int mts_gpu_softmax_forward(int R, int W, const float *x, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_softmax_backward(int R, int W, const float *y, const float *dy, float *dx, mts_err *err))
NOCUDA_OP(int mts_gpu_matmul_forward(const mts_gpu_gemm_plan *fwd, int N, int m, int k, int q, const float *a,
                                     const float *b, float *c, mts_err *err))
NOCUDA_OP(int mts_gpu_matmul_backward(const mts_gpu_gemm_plan *bwd, int N, int m, int k, int q, const float *a,
                                      const float *b, const float *dc, float *da, float *db, mts_err *err))
NOCUDA_OP(int mts_gpu_attn_qk_forward(const mts_gpu_gemm_plan *fwd, int N, int T, int H, int dh, float scale,
                                      const float *qkv, float *s, mts_err *err))
NOCUDA_OP(int mts_gpu_attn_qk_backward(const mts_gpu_gemm_plan *bwd, int N, int T, int H, int dh, float scale,
                                       const float *qkv, const float *ds, float *dqkv, mts_err *err))
NOCUDA_OP(int mts_gpu_attn_av_forward(const mts_gpu_gemm_plan *fwd, int N, int T, int H, int dh, const float *a,
                                      const float *qkv, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_attn_av_backward(const mts_gpu_gemm_plan *bwd, int N, int T, int H, int dh, const float *a,
                                       const float *qkv, const float *dy, float *da, float *dqkv, mts_err *err))
NOCUDA_OP(int mts_gpu_patchify_forward(int N, int C, int Hh, int W, int p, const float *x, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_patchify_backward(int N, int C, int Hh, int W, int p, const float *dy, float *dx,
                                        mts_err *err))
NOCUDA_OP(int mts_gpu_tokens_forward(int N, int T, int D, const float *cls, const float *pos, const float *x,
                                     float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_tokens_backward(int N, int T, int D, int has_cls, const float *dy, float *dx, float *dpos,
                                      float *dcls, mts_err *err))
NOCUDA_OP(int mts_gpu_tokpool_forward(int N, int T, int D, int mode, const float *x, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_tokpool_backward(int N, int T, int D, int mode, const float *dy, float *dx, mts_err *err))
NOCUDA_OP(int mts_gpu_add(size_t n, const float *a, const float *b, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_acc(size_t n, float *dst, const float *src, mts_err *err))
NOCUDA_OP(int mts_gpu_copy_pz(size_t n, const float *src, float *dst, mts_err *err))
NOCUDA_OP(int mts_gpu_copy(size_t n, const float *src, float *dst, mts_err *err))
NOCUDA_OP(int mts_gpu_zero(size_t n, float *dst, mts_err *err))
NOCUDA_OP(int mts_gpu_gather(int N, size_t ss, const float *x, const uint8_t *y, const int32_t *order, float *xb,
                             uint8_t *yb, mts_err *err))
size_t mts_gpu_conv2d_work(const mts_conv_geom *g, int N) { return 0; }
void mts_gpu_scratch_release(void) {}
NOCUDA_OP(int mts_gpu_conv2d_forward(const mts_gpu_gemm_plan *fwd, const mts_conv_geom *g, int N, const float *x,
                                     const float *w, const float *b, float *y, float *work, mts_err *err))
NOCUDA_OP(int mts_gpu_conv2d_backward(const mts_gpu_gemm_plan *bwd, const mts_conv_geom *g, int N, const float *x,
                                      const float *w, const float *dy, float *dx, float *dw, float *db, float *work,
                                      mts_err *err))
NOCUDA_OP(int mts_gpu_qat_observe(float *st, const float *x, size_t n, mts_err *err))
NOCUDA_OP(int mts_gpu_nonfinite(size_t n, const float *x, int *any, mts_err *err))
NOCUDA_OP(int mts_gpu_qat_open(const mts_lut *lut, int grads, mts_gpu_qat **q, mts_err *err))
NOCUDA_OP(int mts_gpu_qat_set_kernel(mts_gpu_qat *q, int kernel, mts_err *err))
NOCUDA_OP(int mts_gpu_qdense_forward(const mts_gpu_qat *q, const float *st, int N, int in, int out, const float *x,
                                     const float *w, const float *b, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_qconv2d_forward(const mts_gpu_qat *q, const float *st, const mts_conv_geom *g, int N,
                                      const float *x, const float *w, const float *b, float *y, mts_err *err))
NOCUDA_OP(int mts_gpu_qdense_backward(const mts_gpu_qat *q, int int_bwd, const mts_gpu_gemm_plan *bwd,
                                      const float *st, int N, int in, int out, const float *x, const float *w,
                                      const float *dy, float *dx, float *dw, float *db, mts_err *err))
NOCUDA_OP(int mts_gpu_qconv2d_backward(const mts_gpu_qat *q, int int_bwd, const mts_gpu_gemm_plan *bwd,
                                       const float *st, const mts_conv_geom *g, int N, const float *x,
                                       const float *w, const float *dy, float *dx, float *dw, float *db, float *work,
                                       mts_err *err))
void mts_gpu_qat_close(mts_gpu_qat *q) { (void)q; }
#pragma GCC diagnostic pop
