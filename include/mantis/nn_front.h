/* nn_front.h - a flat C interface to the training engine's multipliers and
 * layer ops for foreign-function callers (the Python package python/mantis
 * loads libmantis.so with ctypes): opaque handles, ints, strings and float
 * pointers only, so a caller never mirrors a struct layout that the C side
 * may change. Everything here delegates: multipliers are opened by
 * mts_arith_open / mts_arith_acc / mts_arith_open_rtl / mts_rtl_lut_verified
 * (the same code as `mantis train` and `mantis flow`), the ops are
 * mts_dense_*, mts_conv2d_* (or mts_convg_* for geometries it does not
 * take), mts_matmul_*, with the FMAq STE of mts_dense_backward, and every
 * product goes through mts_gemm. No function prints or exits.
 *
 * Per call: threads (the providers' threads, 0: all cores) and device (0:
 * the CPU; MTS_GPU_DEVICE_CUDA: the layer ops run on the CPU and every GEMM
 * on the GPU through mts_gemm's host-pointer path, as `mantis train
 * --device cuda` does; refused with the probe's message when the build has
 * no CUDA or no device is present, or the provider cannot run there).
 * Handles are immutable after opening and may be used from several threads
 * at once. Errors: the status codes of status.h with one line in err. */
#ifndef MANTIS_NN_FRONT_H
#define MANTIS_NN_FRONT_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One opened multiplier with its accumulation: a provider (gemm.h) and what
 * it points to, shared by reference between handles derived from it. */
typedef struct mts_front_mul mts_front_mul;

/* Opens a multiplier as mts_arith_open does for --mul/--lut (nn_arith.h):
 * mul a name (fp32, blas, bf16, a registered C model at (1,8,man_bits) or
 * format) or NULL/"" with lut a LUT file (float or integer table); format
 * NULL/"" and man_bits -1 for the defaults. No FMAq (mts_front_mul_acc). */
int mts_front_mul_open(const char *mul, const char *lut, const char *format, int man_bits, mts_front_mul **out,
                       mts_err *err);

/* Opens the SPEC of a --mul-layer rule "PATTERN=SPEC" (mts_layer_rule_parse:
 * MUL[,key=value...] with acc, prod, acc-bias, prod-bias, chunk, man-bits,
 * format, no-underflow), FMAq included. */
int mts_front_mul_open_rule(const char *rule, mts_front_mul **out, mts_err *err);

/* An integer multiplier from its table: products[(a << bits) | b] for the
 * bits-bit operand codes a, b (two's complement codes when is_signed),
 * 2^(2 bits) entries, bits 1..8; provider INT (gemm.h: affine quantization
 * per tensor). name labels the table. */
int mts_front_mul_open_int(const int32_t *products, int bits, int is_signed, const char *name, mts_front_mul **out,
                           mts_err *err);

/* A Verilog design (rtl.h). per_product 0: its table from
 * mts_rtl_lut_verified (swept, verified bit for bit against the design,
 * cached; the LUT or INT provider); 1: every product through the Verilated
 * model as `mantis train --rtl` (mts_arith_open_rtl; slow ground truth).
 * params "NAME=VALUE" overrides (nparams <= 16), kind NULL/"" to detect or
 * "sig"/"float"/"int", sign 0 auto / 1 signed / 2 unsigned (integer designs). */
int mts_front_mul_open_rtl(const char *path, const char *const *params, int nparams, const char *kind, int sign,
                           int per_product, mts_front_mul **out, mts_err *err);

/* A handle with base's multiplier and the accumulation mts_arith_acc sets
 * from these fields (acc NULL/"": FP32 accumulation, no FMAq; prod NULL/"":
 * the acc format; biases -1: 2^(E-1); chunk 0: 16). */
int mts_front_mul_acc(const mts_front_mul *base, const char *acc, const char *prod, int acc_bias, int prod_bias,
                      int chunk, int no_underflow, mts_front_mul **out, mts_err *err);

/* A handle with base's multiplier and the accumulation of an accumulator
 * design (rtl.h, ports p, s -> y): the design is verified against the FMAq
 * model (mts_rtl_acc_verified, cached) and its formats (Q_prod, Q_acc,
 * biases, underflow) become the FMAq settings, as `mantis flow` trains an
 * accumulator design; chunk 0: 16. MTS_EMISMATCH when the design differs
 * from FMAq, MTS_EINVAL for a design of another kind. */
int mts_front_mul_acc_rtl(const mts_front_mul *base, const char *path, const char *const *params, int nparams,
                          int chunk, mts_front_mul **out, mts_err *err);

void mts_front_mul_free(mts_front_mul *m);

/* The provider's description (mts_arith.desc, e.g. "lut mbm e8m7 + fmaq
 * acc ... chunk 16"); valid while m is. */
const char *mts_front_mul_desc(const mts_front_mul *m);

/* A JSON object describing m (kind, format, FMAq settings, table, and for
 * designs the detection, cache and verification facts) into buf (n bytes,
 * NUL-terminated, truncated when short). Returns the length it needs. */
size_t mts_front_mul_info(const mts_front_mul *m, char *buf, size_t n);

/* y[i] = the product the provider's GEMM forms for a[i], b[i]
 * (mts_prov_mul: operands quantized as mts_gemm packs them). MTS_EINVAL for
 * an integer table (its operands are quantized per tensor, not per pair). */
int mts_front_mul_products(const mts_front_mul *m, size_t n, const float *a, const float *b, float *y, mts_err *err);

/* mts_gemm (ref 0) or mts_gemm_ref (ref 1) through m's provider, arguments
 * as gemm.h. */
int mts_front_gemm(const mts_front_mul *m, int ref, int threads, int device, int transA, int transB, int M, int N,
                   int K, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                   mts_err *err);

/* MTS_OK when providers fwd and bwd (either may be NULL) can run with this
 * device: always for 0; for MTS_GPU_DEVICE_CUDA a CUDA build, a device
 * (mts_gpu_probe) and providers the GPU takes (mts_gpu_supports). Every op
 * below checks this first. */
int mts_front_device_check(int device, const mts_front_mul *fwd, const mts_front_mul *bwd, mts_err *err);

/* 1 when name matches the glob pattern as --mul-layer matches layer names
 * (fnmatch(3), no flags), else 0. */
int mts_front_match(const char *pattern, const char *name);

/* ------------------------------------------------------------- ops
 * Shapes and operand orders as nn_ops.h. fwd: the forward provider (the
 * test provider in evaluation); bwd: both backward GEMMs; ste: mts_ste of
 * mts_dense_backward (recomputed with fwd). Outputs are overwritten;
 * gradients not wanted are NULL. */

/* y[N][out] = x[N][in] w[out][in]^T + b (b may be NULL): mts_dense_forward. */
int mts_front_dense_forward(const mts_front_mul *fwd, int threads, int device, int N, int in, int out, const float *x,
                            const float *w, const float *b, float *y, mts_err *err);
int mts_front_dense_backward(const mts_front_mul *fwd, const mts_front_mul *bwd, int ste, int threads, int device,
                             int N, int in, int out, const float *x, const float *w, const float *dy, float *dx,
                             float *dw, float *db, mts_err *err);

/* Conv2D x[N][cin][h][w] * w[cout][cin/groups][kh][kw] -> y[N][cout][oh][ow]
 * (mts_convg_geom's geometry; oh, ow as mts_convg_geom_init computes them):
 * mts_conv2d_* when the geometry is theirs (square kernel, equal strides and
 * paddings, no dilation, one group), mts_convg_* otherwise; same bits. */
int mts_front_conv2d_forward(const mts_front_mul *fwd, int threads, int device, int N, int cin, int h, int w,
                             int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int groups,
                             const float *x, const float *wt, const float *b, float *y, mts_err *err);
int mts_front_conv2d_backward(const mts_front_mul *fwd, const mts_front_mul *bwd, int threads, int device, int N,
                              int cin, int h, int w, int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                              int dw, int groups, const float *x, const float *wt, const float *dy, float *dx,
                              float *dwt, float *db, mts_err *err);
/* The output size (oh, ow) of that geometry, or MTS_EINVAL naming what is wrong. */
int mts_front_conv2d_shape(int cin, int h, int w, int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                           int dw, int groups, int *oh, int *ow, mts_err *err);

/* Quantization-aware dense and conv with an integer forward table, as
 * `mantis train` runs every dense and conv layer of an integer design
 * (qat.c: mts_qdense_* / mts_qconv2d_*, docs/training.md "Integer
 * multipliers"): the activations quantized with the range of st (the
 * layer's observer, MTS_QAT_STATE floats; NULL: x's own range each call),
 * which a forward with train moves first (mts_qat_observe); the weights
 * per output channel. The backward by int_bwd (MTS_INT_BWD_STE, _TABLE or
 * _APPROX, mts_int_bwd): STE and TABLE take their float GEMMs from bwd, or
 * native FP32 where bwd is an integer table, as `mantis train`. device 0:
 * the CPU (qat.c); MTS_GPU_DEVICE_CUDA: the arrays stay host arrays, each
 * call uploads them and runs gpu/qat.cu's twins (the same bits; the
 * table's device copy kept per multiplier, calls serialized); the
 * observer's training step runs on the host either way. Conv only in
 * mts_conv2d_*'s geometries (else MTS_EUNSUPPORTED naming what is not).
 * MTS_EINVAL when fwd is not an integer table. The table's prepared planes
 * and gradient tables are built once per multiplier. */
int mts_front_qdense_forward(const mts_front_mul *fwd, int threads, int device, float *st, int train, int N, int in,
                             int out, const float *x, const float *w, const float *b, float *y, mts_err *err);
int mts_front_qdense_backward(const mts_front_mul *fwd, const mts_front_mul *bwd, int int_bwd, int threads, int device,
                              const float *st, int N, int in, int out, const float *x, const float *w,
                              const float *dy, float *dx, float *dw, float *db, mts_err *err);
int mts_front_qconv2d_forward(const mts_front_mul *fwd, int threads, int device, float *st, int train, int N, int cin,
                              int h, int w, int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                              int groups, const float *x, const float *wt, const float *b, float *y, mts_err *err);
int mts_front_qconv2d_backward(const mts_front_mul *fwd, const mts_front_mul *bwd, int int_bwd, int threads,
                               int device, const float *st, int N, int cin, int h, int w, int cout, int kh, int kw,
                               int sh, int sw, int ph, int pw, int dh, int dw, int groups, const float *x,
                               const float *wt, const float *dy, float *dx, float *dwt, float *db, mts_err *err);

/* One training step of the range observer st over x[0..n) (mts_qat_observe):
 * what `mantis train` does for a layer whose training forward is not an
 * integer table but whose test multiplier is. */
void mts_front_qat_observe(float *st, const float *x, size_t n);

/* c[B][m][q] = a[B][m][k] b[B][k][q] per sample: mts_matmul_*. */
int mts_front_matmul_forward(const mts_front_mul *fwd, int threads, int device, int B, int m, int k, int q,
                             const float *a, const float *b, float *c, mts_err *err);
int mts_front_matmul_backward(const mts_front_mul *bwd, int threads, int device, int B, int m, int k, int q,
                              const float *a, const float *b, const float *dc, float *da, float *db, mts_err *err);

/* ------------------------------------------------- exact ops
 * `mantis train`'s own ReLU and max pooling, for a model that wants them
 * instead of PyTorch's (mantis.torch.approximate(..., library_ops=True)):
 * no multiplier, same results as PyTorch's but for the NaN rules below. */

/* y = x > 0 ? x : +0 (a NaN or -0 gives +0; PyTorch keeps both), n floats,
 * on threads (mts_relu_forward's rule, the trainer's threaded pass). */
void mts_front_relu_forward(int threads, size_t n, const float *x, float *y);
/* dx = y > 0 ? dy : +0, y the forward's output (PyTorch's threshold_backward). */
void mts_front_relu_backward(int threads, size_t n, const float *y, const float *dy, float *dx);

/* Max pooling of x[N][C][H][W], k x k windows at stride s, no padding:
 * y[N][C][oh][ow] with oh = (H - k) / s + 1 (floor), argmax the winner's
 * index within its H x W plane: the first maximum in raster order (PyTorch's
 * tie rule); a NaN is never greater than the running maximum, so it wins
 * only first in its window (PyTorch's maximum is any NaN). MTS_EINVAL
 * for a size below 1 or a window larger than the plane. mts_maxpool_*. */
int mts_front_maxpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y, int32_t *argmax,
                              mts_err *err);
/* dx[N][C][H][W] = the sum of dy over the outputs whose argmax each input is
 * (zero elsewhere), in output order. */
int mts_front_maxpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, const int32_t *argmax,
                               float *dx, mts_err *err);

/* ------------------------------------------------- optimizer
 * `mantis train`'s SGD step (mts_sgd_update) over count tensors, for a model
 * trained through the package (mantis.torch.SGD): tensor t is param[t],
 * grad[t] and buf[t] (its momentum, zero before the first step), n[t]
 * floats each; weight decay wd applied when decay is nonzero. Returns 1
 * when some parameter is now inf or NaN, else 0. */
int mts_front_sgd_step(int count, float *const *param, const float *const *grad, float *const *buf, const size_t *n,
                       int decay, float lr, float momentum, float wd);

#ifdef __cplusplus
}
#endif
#endif
