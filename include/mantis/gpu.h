/* gpu.h - the CUDA half of mts_gemm (gpu/): device discovery, device
 * buffers, a device-pointer GEMM for a training engine that keeps its data
 * on the device, and the host-pointer path mts_gemm takes for a provider
 * with device == MTS_GPU_DEVICE_CUDA.
 *
 * Contract: every GPU provider returns the bits mts_gemm_ref returns
 * (gemm.h: one thread per output summing sequentially in k, no split-k, no
 * atomics, no FMA contraction, the same operand quantization and special
 * cases). Providers on the GPU: NATIVE, LUT (E8 IEEE formats, M <= 11),
 * FMAq over NATIVE or LUT products, INT (host-pointer path only). MULOP
 * (C models, RTL in the loop) and BLAS stay on the CPU.
 *
 * Errors (one line in err): built without CUDA and no CUDA device
 * (MTS_EUNSUPPORTED), provider not available on the GPU (MTS_EUNSUPPORTED),
 * out of device memory with the size asked (MTS_ENOMEM), a CUDA runtime
 * error (MTS_EIO, with CUDA's message). Thread-safe for distinct buffers;
 * uses the current CUDA device of the calling thread (device 0 unless the
 * caller chose another). */
#ifndef MANTIS_GPU_H
#define MANTIS_GPU_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/gemm.h"
#include "mantis/nn_ops.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Value of mts_provider.device (and mts_nn_ctx.device) for the GPU. */
#define MTS_GPU_DEVICE_CUDA 1

/* 1 if this build compiled the CUDA code (nvcc found at configure time). */
int mts_gpu_built(void);

typedef struct mts_gpu_info {
    char name[128];
    int cc_major, cc_minor, sm_count;
    size_t mem_total, mem_free;  /* bytes */
    size_t smem_optin;           /* shared memory per block a kernel may opt in to */
    size_t l2_bytes;
} mts_gpu_info;

/* MTS_OK (info filled when not NULL) when a CUDA device can be used; else
 * MTS_EUNSUPPORTED: "built without CUDA" or "no CUDA device (...)". */
int mts_gpu_probe(mts_gpu_info *info, mts_err *err);

/* MTS_OK if provider p can run on the GPU, else MTS_EUNSUPPORTED naming why
 * ("provider MULOP is not available on the GPU ..."). Needs no device. */
int mts_gpu_supports(const mts_provider *p, mts_err *err);

/* The device of --device / the config key `device`: "cpu" -> 0, "cuda" ->
 * MTS_GPU_DEVICE_CUDA when a device can be used (else the probe's
 * MTS_EUNSUPPORTED: built without CUDA / no CUDA device), "auto" -> the GPU
 * when one can be used, else the CPU; NULL means "auto". MTS_EINVAL for
 * another name. */
int mts_gpu_resolve_device(const char *name, int *device, mts_err *err);

/* Device memory. mts_gpu_alloc: *dptr = bytes of device memory (bytes == 0
 * gives NULL); MTS_ENOMEM names the size asked and the free memory. */
int mts_gpu_alloc(void **dptr, size_t bytes, mts_err *err);
void mts_gpu_free(void *dptr);
int mts_gpu_upload(void *dst, const void *src, size_t bytes, mts_err *err);
int mts_gpu_download(void *dst, const void *src, size_t bytes, mts_err *err);
/* Peak device memory allocated through mts_gpu_alloc since the start (bytes). */
size_t mts_gpu_peak_bytes(void);

/* A provider prepared for the device: its tables uploaded once. */
typedef struct mts_gpu_gemm_plan mts_gpu_gemm_plan;
int mts_gpu_plan_open(const mts_provider *p, mts_gpu_gemm_plan **plan, mts_err *err);
void mts_gpu_plan_close(mts_gpu_gemm_plan *plan);
/* Which GEMM kernel the plan runs (gpu/gemm.cu): 1, the readable reference
 * (one thread per output); 2, 3, 4, 13, 14, the tiled kernel with its 64x64,
 * 256x16, 8x4 (one output per thread), 128x32 or 32x64 block tile; 5 to 12,
 * the long-sum kernel
 * (products formed by the other warps while one sums: 5 seven warps, 8x4
 * outputs a block, a thread per k and output column; 6, 7, 8 five warps,
 * 8x4, 4x4 or 2x4 outputs, a thread per k and all the block's outputs; 9,
 * 10 ten warps, 4x4 or 2x4 outputs; 11, 12 as 9, 10, but with FMAq a
 * thread forms a whole chunk's sums and the one warp adds the chunk sums;
 * 15, 16 as 9, 10 on operands packed beforehand, stage and index of a
 * bf16-like table's operand in one word - others, and batches, run 9, 10);
 * 0 (the default), the kernel and tile the shape asks for (13 and 14 not
 * with MANTIS_GPU_TILES=0; for long sums 9 or 10 by the output count; with
 * FMAq 12 for 320 chunks or more, else 6, 7 or 8; or MANTIS_GPU_LONG_SUM's
 * 5..12, 15, 16). All give mts_gemm_ref's bits; MTS_EINVAL for another number. */
int mts_gpu_plan_set_kernel(mts_gpu_gemm_plan *plan, int kernel, mts_err *err);

/* A diagnostic: with MANTIS_GPU_PROFILE=1 in the environment, every device
 * GEMM (mts_gpu_gemm_dev*) runs between two synchronisations and is counted
 * by shape and kernel; writes "MxNxK[:AB] kKERNEL C calls S s, ..." (the
 * most time first, since the process started) into buf (n bytes,
 * truncated) and returns its length; 0 when not profiling or nothing ran. */
size_t mts_gpu_gemm_profile(char *buf, size_t n);

/* mts_gemm's contract on device pointers (A, B, C on the device; shapes and
 * leading dimensions as gemm.h). Asynchronous: the GEMM is queued on the
 * default stream after earlier work; a copy to the host or mts_gpu_sync waits
 * for it and reports a fault while it ran. INT plans quantize on the
 * device with per-call ranges (sim/gemm/int.c's), which waits for the
 * operands: INT's call returns once its codes are computed. */
int mts_gpu_gemm_dev(const mts_gpu_gemm_plan *plan, int transA, int transB, int m, int n, int k, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err);

/* A batch of outer x inner GEMMs of one shape in one launch (attention's
 * per-sample, per-head products): GEMM (o, i) reads A + o*a_outer +
 * i*a_inner (elements), the same for B and C. Each GEMM's bits are
 * mts_gpu_gemm_dev's. */
typedef struct mts_gpu_batch {
    int outer, inner; /* outer * inner <= 65535 */
    size_t a_outer, a_inner, b_outer, b_inner, c_outer, c_inner;
} mts_gpu_batch;

/* mts_gpu_gemm_dev for each GEMM of bt (NULL: one GEMM; INT: one after another, each quantized
 * with its own ranges as mts_gemm_batch does). */
int mts_gpu_gemm_dev_batched(const mts_gpu_gemm_plan *plan, const mts_gpu_batch *bt, int transA, int transB, int m,
                             int n, int k, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                             int ldc, mts_err *err);

/* mts_gemm with host pointers on the GPU: uploads, runs, downloads (what
 * mts_gemm calls when p->device == MTS_GPU_DEVICE_CUDA). */
int mts_gpu_gemm(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc, mts_err *err);

/* cuBLAS SGEMM (FP32, TF32 off) on device pointers, row-major as mts_gemm,
 * beta 0, no transposes: the baseline of `mantis bench gemm --device cuda`.
 * MTS_EUNSUPPORTED when the build has no cuBLAS. */
int mts_gpu_sgemm_cublas(int m, int n, int k, const float *A, const float *B, float *C, mts_err *err);

/* Device synchronisation and a device-side timer for benchmarks: seconds
 * between two calls of mts_gpu_sync (host wall time after synchronising). */
int mts_gpu_sync(mts_err *err);

/* ----------------------------------------------- layer ops (gpu/nn_ops.cu)
 *
 * CUDA twins of the ops of nn_ops.h on device pointers: the same name with
 * mts_gpu_ in front, the same arguments (a GEMM plan instead of the
 * context; err last) and, by contract, the same bits as the CPU op,
 * including the fixed blocked order of fmath.h for every long reduction.
 * tests/test_gpu.cpp compares each with its CPU twin, under the emulation
 * and on a device (run on an H100, gpu/README.md "Status"). The twins of
 * nn_ops.cu are asynchronous as mts_gpu_gemm_dev: queued on the default
 * stream in order; a result that comes back to the host (softmax CE's loss,
 * mts_gpu_nonfinite) and every copy to the host or mts_gpu_sync wait for
 * the work before them and report a fault it caused. */
int mts_gpu_relu_forward(size_t n, const float *x, float *y, mts_err *err);
int mts_gpu_relu_backward(size_t n, const float *y, const float *dy, float *dx, mts_err *err);
/* Dense: forward, and backward with the IDENTITY STE (plain GEMMs). */
int mts_gpu_dense_forward(const mts_gpu_gemm_plan *fwd, int N, int in, int out, const float *x, const float *w,
                          const float *b, float *y, mts_err *err);
int mts_gpu_dense_backward(const mts_gpu_gemm_plan *bwd, int N, int in, int out, const float *x, const float *w,
                           const float *dy, float *dx, float *dw, float *db, mts_err *err);
/* The FMAq STE masks of dense's forward y[N][out] = x[N][in] w[out][in]^T
 * through fwd (an FMAq float provider): mask[(n*out + o)*in + i] = 1 when
 * product (n, o, i) passes estimator ste (MTS_STE_REC_OF, _IMM_OF,
 * _IMM_DIFF; mts_ste_mask's replay, ste_hd.h), one device thread per
 * output. mask: N*out*in bytes on the device. */
int mts_gpu_ste_mask(const mts_gpu_gemm_plan *fwd, int ste, int N, int in, int out, const float *x, const float *w,
                     uint8_t *mask, mts_err *err);
/* Dense backward with a masked STE (mts_dense_backward when ctx->fwd is
 * FMAq and ctx->ste is not IDENTITY): the masks above, then per sample
 * dx[n] = dy[n] (mask_n . w) and per output dw[o] = dy[:, o] (mask_o . x)
 * as batched GEMMs through bwd, the CPU's shapes and operand order; db as
 * mts_gpu_dense_backward. Device scratch: N*out*in bytes and twice as many
 * floats. */
int mts_gpu_dense_backward_ste(const mts_gpu_gemm_plan *fwd, const mts_gpu_gemm_plan *bwd, int ste, int N, int in,
                               int out, const float *x, const float *w, const float *dy, float *dx, float *dw,
                               float *db, mts_err *err);
/* Softmax CE: labels on the device; *loss (the batch mean) and *correct
 * come back to the host. */
int mts_gpu_softmax_ce(int N, int classes, const float *logits, const uint8_t *labels, float *dlogits, double *loss,
                       int *correct, mts_err *err);
/* BatchNorm: rmean/rvar on the device, updated as on the CPU. */
int mts_gpu_bn_forward(int train, int N, int C, int HW, const float *x, const float *gamma, const float *beta,
                       float *rmean, float *rvar, float mom, float eps, float *y, float *xhat, float *invstd,
                       mts_err *err);
int mts_gpu_bn_backward(int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                        const float *invstd, float *dx, float *dgamma, float *dbeta, mts_err *err);
int mts_gpu_maxpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y, int32_t *argmax,
                            mts_err *err);
int mts_gpu_maxpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, const int32_t *argmax,
                             float *dx, mts_err *err);
int mts_gpu_avgpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y, mts_err *err);
int mts_gpu_avgpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, float *dx, mts_err *err);
int mts_gpu_gap_forward(int N, int C, int HW, const float *x, float *y, mts_err *err);
int mts_gpu_gap_backward(int N, int C, int HW, const float *dy, float *dx, mts_err *err);
/* im2col / col2im of nn_ops.h (col2im as a gather in the CPU's tap order). */
int mts_gpu_im2col(const mts_conv_geom *g, int N, const float *x, float *col, mts_err *err);
int mts_gpu_col2im(const mts_conv_geom *g, int N, const float *dcolT, float *dx, mts_err *err);
/* One optimizer step over n parameters, elementwise as mts_opt_step:
 * wmask[j] = 1 where weight decay applies (NULL: everywhere); Adam's bias
 * corrections bc1 = 1 - beta1^t, bc2 = 1 - beta2^t come from the host (FP64,
 * as the CPU computes them). m, v on the device. */
int mts_gpu_sgd_step(size_t n, float *param, const float *grad, float *m, const uint8_t *wmask, float lr,
                     float momentum, float wd, mts_err *err);
int mts_gpu_adam_step(size_t n, float *param, const float *grad, float *m, float *v, const uint8_t *wmask, float lr,
                      float beta1, float beta2, float eps, float wd, double bc1, double bc2, mts_err *err);

/* ------------------------------------------ transformer ops (gpu/nn_tx.cu)
 *
 * The twins of nn_ops.h's transformer ops, under the same contract as the
 * layer ops above (same name with mts_gpu_, same arguments, a GEMM plan
 * where the CPU op takes the context, err last, the same bits). The
 * token-wise dense layer is mts_gpu_dense_* over N*T rows, as on the CPU.
 * GELU, softmax and LayerNorm call fmath.h's row helpers, which the CPU ops
 * call; MatMul and attention run one mts_gpu_gemm_dev per sample or per
 * (sample, head) with the CPU's shapes and operand order. */
int mts_gpu_layernorm_forward(int R, int D, const float *x, const float *gamma, const float *beta, float eps,
                              float *y, float *xhat, float *invstd, mts_err *err);
int mts_gpu_layernorm_backward(int R, int D, const float *dy, const float *gamma, const float *xhat,
                               const float *invstd, float *dx, float *dgamma, float *dbeta, mts_err *err);
int mts_gpu_gelu_forward(size_t n, const float *x, float *y, mts_err *err);
int mts_gpu_gelu_backward(size_t n, const float *x, const float *dy, float *dx, mts_err *err);
int mts_gpu_softmax_forward(int R, int W, const float *x, float *y, mts_err *err);
int mts_gpu_softmax_backward(int R, int W, const float *y, const float *dy, float *dx, mts_err *err);
int mts_gpu_matmul_forward(const mts_gpu_gemm_plan *fwd, int N, int m, int k, int q, const float *a, const float *b,
                           float *c, mts_err *err);
int mts_gpu_matmul_backward(const mts_gpu_gemm_plan *bwd, int N, int m, int k, int q, const float *a, const float *b,
                            const float *dc, float *da, float *db, mts_err *err);
/* The backward of the scores allocates N*H*T*T floats of device memory
 * for P = scale*ds (MTS_ENOMEM naming the size). */
int mts_gpu_attn_qk_forward(const mts_gpu_gemm_plan *fwd, int N, int T, int H, int dh, float scale, const float *qkv,
                            float *s, mts_err *err);
int mts_gpu_attn_qk_backward(const mts_gpu_gemm_plan *bwd, int N, int T, int H, int dh, float scale,
                             const float *qkv, const float *ds, float *dqkv, mts_err *err);
int mts_gpu_attn_av_forward(const mts_gpu_gemm_plan *fwd, int N, int T, int H, int dh, const float *a,
                            const float *qkv, float *y, mts_err *err);
int mts_gpu_attn_av_backward(const mts_gpu_gemm_plan *bwd, int N, int T, int H, int dh, const float *a,
                             const float *qkv, const float *dy, float *da, float *dqkv, mts_err *err);
int mts_gpu_patchify_forward(int N, int C, int Hh, int W, int p, const float *x, float *y, mts_err *err);
int mts_gpu_patchify_backward(int N, int C, int Hh, int W, int p, const float *dy, float *dx, mts_err *err);
int mts_gpu_tokens_forward(int N, int T, int D, const float *cls, const float *pos, const float *x, float *y,
                           mts_err *err);
int mts_gpu_tokens_backward(int N, int T, int D, int has_cls, const float *dy, float *dx, float *dpos, float *dcls,
                            mts_err *err);
int mts_gpu_tokpool_forward(int N, int T, int D, int mode, const float *x, float *y, mts_err *err);
int mts_gpu_tokpool_backward(int N, int T, int D, int mode, const float *dy, float *dx, mts_err *err);

/* ------------------------- device-resident training (gpu/nn_ops.cu)
 *
 * What sim/nn/gpunet.c needs beside the twins above to run a whole
 * training step on the device (the CPU ops they mirror in brackets). */
/* y = a + b elementwise (residual add, mts__add_t). */
int mts_gpu_add(size_t n, const float *a, const float *b, float *y, mts_err *err);
/* dst = dst + src (a later gradient contribution, mts__acc_t). */
int mts_gpu_acc(size_t n, float *dst, const float *src, mts_err *err);
/* dst = +0 + src; src == dst allowed (a first contribution, mts__copy_pz_t,
 * mts__plus_zero_t). */
int mts_gpu_copy_pz(size_t n, const float *src, float *dst, mts_err *err);
/* dst = src (n floats, device to device). */
int mts_gpu_copy(size_t n, const float *src, float *dst, mts_err *err);
/* dst = +0 (n floats). */
int mts_gpu_zero(size_t n, float *dst, mts_err *err);
/* The batch of samples order[0..N) of a device-resident data set x[][ss],
 * y[]: xb[b] = x[order[b]], yb[b] = y[order[b]] (order on the device). */
int mts_gpu_gather(int N, size_t ss, const float *x, const uint8_t *y, const int32_t *order, float *xb, uint8_t *yb,
                   mts_err *err);
/* Conv2D (mts_conv2d_forward / backward, conv.c) as im2col, one
 * mts_gpu_gemm_dev per pass in the CPU's shapes and operand order (forward
 * col^T x W^T over K; dW = dY x col^T over N*P; dcol^T = dY^T x W over
 * cout, then the col2im gather) and the bias gradient in fmath.h's blocked
 * order, so the bits are the CPU's. work: mts_gpu_conv2d_work(g, N) floats
 * of device scratch, or NULL (allocated per call). */
size_t mts_gpu_conv2d_work(const mts_conv_geom *g, int N);
int mts_gpu_conv2d_forward(const mts_gpu_gemm_plan *fwd, const mts_conv_geom *g, int N, const float *x,
                           const float *w, const float *b, float *y, float *work, mts_err *err);
int mts_gpu_conv2d_backward(const mts_gpu_gemm_plan *bwd, const mts_conv_geom *g, int N, const float *x,
                            const float *w, const float *dy, float *dx, float *dw, float *db, float *work,
                            mts_err *err);
/* One training step of a range observer st[MTS_QAT_STATE] (on the device)
 * over x[0..n) (mts_qat_observe). */
int mts_gpu_qat_observe(float *st, const float *x, size_t n, mts_err *err);

/* Quantization-aware layers of an integer table (gpu/qat.cu): the twins of
 * mts_qdense_forward / backward and mts_qconv2d_forward / backward
 * (nn_ops.h), the same bits. A mts_gpu_qat holds the table on the device
 * and, opened with grads, its gradient tables (mts_int_grad_build with the
 * default half window, as the CPU's run builds them); open it once per run.
 * MTS_EINVAL for anything but an integer table of 1..8-bit operands. */
typedef struct mts_gpu_qat mts_gpu_qat;
int mts_gpu_qat_open(const mts_lut *lut, int grads, mts_gpu_qat **q, mts_err *err);
void mts_gpu_qat_close(mts_gpu_qat *q);
/* The forward's kernel: 1 one thread per output (the readable reference),
 * 2 gemm.cu's tiled INT kernel 2 on the codes (0 or not set: 2); the same
 * bits. MTS_EINVAL for another number. */
int mts_gpu_qat_set_kernel(mts_gpu_qat *q, int kernel, mts_err *err);
/* st: the layer's range observer on the device (its range once seen, else
 * x's own: mts_qat_act_param), or NULL (x's own); the weight quantizers per
 * output channel from w (mts_qat_weight_params). */
int mts_gpu_qdense_forward(const mts_gpu_qat *q, const float *st, int N, int in, int out, const float *x,
                           const float *w, const float *b, float *y, mts_err *err);
int mts_gpu_qconv2d_forward(const mts_gpu_qat *q, const float *st, const mts_conv_geom *g, int N, const float *x,
                            const float *w, const float *b, float *y, mts_err *err);
/* The backward by int_bwd (mts_int_bwd): APPROX is the plain backward
 * through bwd (the layer's backward plan, integer or float); STE runs bwd
 * on the fake-quantized operands; TABLE sums the gradient tables' terms in
 * the CPU's order (q opened with grads) and takes db from bwd; STE and
 * TABLE want a float bwd (qat.c's float_bwd) and clear dx where the
 * quantizer clipped x. work: as mts_gpu_conv2d_backward's. */
int mts_gpu_qdense_backward(const mts_gpu_qat *q, int int_bwd, const mts_gpu_gemm_plan *bwd, const float *st, int N,
                            int in, int out, const float *x, const float *w, const float *dy, float *dx, float *dw,
                            float *db, mts_err *err);
int mts_gpu_qconv2d_backward(const mts_gpu_qat *q, int int_bwd, const mts_gpu_gemm_plan *bwd, const float *st,
                             const mts_conv_geom *g, int N, const float *x, const float *w, const float *dy,
                             float *dx, float *dw, float *db, float *work, mts_err *err);
/* *any = 1 when some x[i] is inf or NaN, else 0 (to the host). */
int mts_gpu_nonfinite(size_t n, const float *x, int *any, mts_err *err);
/* The twins take their short-lived scratch (reduction partial sums, BN and
 * softmax statistics) from a cache of device blocks that outlives the call;
 * this frees the idle ones (device-resident training calls it at its end). */
void mts_gpu_scratch_release(void);

#ifdef __cplusplus
}
#endif
#endif
