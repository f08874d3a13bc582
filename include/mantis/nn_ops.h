/* nn_ops.h - the layer ops of the training engine: the contract a CUDA
 * backend mirrors op for op (same names, same arguments, same results).
 *
 *  - Every op is a plain function on float arrays in NCHW layout with an
 *    explicit batch size N.
 *  - Ops that multiply take an mts_nn_ctx: the providers (gemm.h), the FMAq
 *    STE, the operand tracer and the device. Every multiply of a forward,
 *    weight-gradient or input-gradient GEMM goes through mts_gemm with
 *    ctx->fwd (forward ops; the test provider during evaluation) or ctx->bwd
 *    (both backward GEMMs). Elementwise ops, pooling, BatchNorm, softmax and
 *    the optimizer stay FP32, as in ApproxTrain (docs/training.md).
 *  - GEMM operand order (A x B, which matters for a non-commutative
 *    multiplier): forward activation x weight; weight gradient
 *    output-gradient x activation; input gradient output-gradient x weight.
 *  - Nothing depends on the thread count except inside mts_gemm, whose
 *    accumulation order is fixed (gemm.h), so results are bit-identical for
 *    any provider->threads.
 * All ops return MTS_OK or an error from mts_gemm / allocation. Backward ops
 * overwrite (not accumulate) their outputs; pass NULL for a gradient that is
 * not needed. */
#ifndef MANTIS_NN_OPS_H
#define MANTIS_NN_OPS_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/gemm.h"
#include "mantis/qat.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------- STE for FMAq */

/* Backward estimators for FMAq accumulation in dense layers (accumulator
 * paper, appendix D). Conv and MatMul layers always use IDENTITY. */
typedef enum {
    MTS_STE_IDENTITY = 0, /* d(FMAq)/d(inputs) = 1: plain backward GEMMs */
    MTS_STE_REC_OF = 1,   /* Recursive/OF: an overflow zeroes every earlier term it absorbs */
    MTS_STE_IMM_OF = 2,   /* Immediate/OF: a term is zeroed if its own FMAq overflowed */
    MTS_STE_IMM_DIFF = 3  /* Immediate/DIFF: zeroed if |z-s|/(|p|+eps1) <= eps2 (OF, UF, swamping) */
} mts_ste;

/* DIFF thresholds (the paper gives no values): eps1 guards 0/0, eps2
 * binarises alpha: MTS_STE_HD_DIFF_EPS1 = 1e-30, MTS_STE_HD_DIFF_EPS2 = 0.5
 * in ste_hd.h, where the estimators' rules are (one copy, CPU and GPU). */

/* Parses "identity", "rec-of", "imm-of", "imm-diff" (also "recursive/of",
 * "immediate/of", "immediate/diff"). */
int mts_ste_parse(const char *s, mts_ste *ste, mts_err *err);
const char *mts_ste_name(mts_ste ste);

/* STE mask of one FMAq dot product y = sum_i x[i]*w[i*ws] computed by
 * provider p (p->fmaq = 1) in mts_fmaq_dot order: mask[i] = 0 or 1 is the
 * factor "dy/d(x_i w_i)" of the chosen estimator. Recomputes the forward
 * accumulation (nothing is stored in the forward pass), with operands and
 * products as mts_prov_operand / mts_prov_mul (nn_arith.h) form them.
 * Returns the recomputed y (FP32 bits), which equals the forward GEMM output. */
uint32_t mts_ste_mask(const mts_provider *p, mts_ste ste, const float *x, const float *w, size_t n,
                      size_t ws, uint8_t *mask);

/* ------------------------------------------- integer multipliers */

/* The backward of a layer whose forward multiplier is an integer table
 * (quantization-aware training, docs/training.md):
 *  STE     both backward GEMMs in FP32 on the dequantized operands (fake-
 *          quantized x and w), the straight-through estimator through the
 *          quantizers (dx is 0 where x was clipped);
 *  TABLE   the multiplier's own gradients (mts_int_grad, qat.h): dx gets
 *          dT/da at each product's code pair, dw dT/db, scaled back to real
 *          units; the same clip mask;
 *  APPROX  both backward GEMMs through ctx->bwd as given (with an integer
 *          table: quantized per call, every product from the table), the
 *          behaviour before QAT, kept for study. */
typedef enum { MTS_INT_BWD_STE = 0, MTS_INT_BWD_TABLE = 1, MTS_INT_BWD_APPROX = 2 } mts_int_bwd;

/* "ste", "table", "approx". */
int mts_int_bwd_parse(const char *s, mts_int_bwd *b, mts_err *err);
const char *mts_int_bwd_name(mts_int_bwd b);

/* ---------------------------------------------------------- context */

/* Where the ops run. A CUDA backend (gpu/) adds its device here. */
typedef enum { MTS_DEVICE_CPU = 0, MTS_DEVICE_CUDA = 1 /* = MTS_GPU_DEVICE_CUDA (gpu.h) */ } mts_device;

typedef struct mts_nn_tracer mts_nn_tracer; /* nn_trace.h */
typedef struct mts_gemm_tap mts_gemm_tap;   /* gemmdump.h */

/* Everything an op needs besides its arrays; passed by the caller to every
 * op that multiplies (no process-wide settings). The CPU ops refuse another
 * device with MTS_EUNSUPPORTED. */
typedef struct mts_nn_ctx {
    const mts_provider *fwd; /* forward GEMMs; the test provider during evaluation */
    const mts_provider *bwd; /* both backward GEMMs (may be NULL for forward-only use) */
    mts_ste ste;             /* FMAq STE of dense layers (with fwd->fmaq) */
    mts_nn_tracer *tracer;   /* NULL: none; else samples the operands of every GEMM */
    int device;              /* mts_device */
    mts_gemm_tap *tap;       /* NULL: none; else dumps one layer's forward GEMM (gemmdump.h) */
    /* Networks only (nn_net.h): per-node contexts, indexed by node; NULL
     * (or a NULL entry) runs that node with this context. How per-layer
     * multipliers (--mul-layer) reach the ops; the ops ignore it. */
    const struct mts_nn_ctx *const *node_ctx;
    /* Integer multipliers in dense and conv layers (fwd an INT provider):
     * qact, set per node by the net, is the quantizer of the layer's input
     * (NULL: the layer runs mts_gemm's per-call INT provider, as an op
     * called on its own does); int_bwd the backward; qtab and igrad the
     * forward table prepared (mts_qgemm) and its gradient tables (TABLE),
     * each used only when built from fwd's table (else made per call). */
    const mts_qparam *qact;
    int int_bwd;             /* mts_int_bwd */
    const mts_qtab *qtab;
    const mts_int_grad *igrad;
} mts_nn_ctx;

/* A CPU context with providers fwd and bwd, IDENTITY STE and no tracer. */
mts_nn_ctx mts_nn_ctx_cpu(const mts_provider *fwd, const mts_provider *bwd);

/* Keeps large freed blocks in glibc's heap for reuse (mmap threshold 32
 * MiB, trim threshold 512 MiB) instead of unmapping them, so the buffers a
 * training step allocates and frees every batch do not fault their pages in
 * again. Process-wide, once per process, glibc only (a no-op elsewhere); no
 * result depends on it. Called by mts_train_run and the front end's ops. */
void mts_nn_keep_buffers(void);

/* ------------------------------------------------------------- ops */

/* Dense: y[N][out] = x[N][in] * w[out][in]^T + b, through ctx->fwd. */
int mts_dense_forward(const mts_nn_ctx *ctx, int N, int in, int out, const float *x, const float *w,
                      const float *b, float *y, mts_err *err);
/* dx = dy*w, dw = dy^T*x (ctx->bwd), db = column sums of dy (FP32, n order).
 * With ctx->fwd->fmaq and ctx->ste != IDENTITY the products are masked per
 * (n, o, i) by the STE of the forward accumulation (recomputed with
 * ctx->fwd) before the bwd GEMMs. */
int mts_dense_backward(const mts_nn_ctx *ctx, int N, int in, int out, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *db, mts_err *err);

/* Quantization-aware dense forward through an integer table ctx->fwd:
 * x[N][in] quantized per tensor with *qa, w per output channel
 * (mts_qat_weight_params), y = the code GEMM (mts_qgemm: table products,
 * exact sums, zero-point correction, one rescale) + b in FP32. */
int mts_qdense_forward(const mts_nn_ctx *ctx, const mts_qparam *qa, int N, int in, int out, const float *x,
                       const float *w, const float *b, float *y, mts_err *err);
/* Its backward by ctx->int_bwd (mts_int_bwd): dx (masked by the STE's
 * clip), dw, db (as mts_dense_backward). STE and TABLE multiply in FP32
 * through ctx->bwd when it is a float provider, else the native one. */
int mts_qdense_backward(const mts_nn_ctx *ctx, const mts_qparam *qa, int N, int in, int out, const float *x,
                        const float *w, const float *dy, float *dx, float *dw, float *db, mts_err *err);

/* Conv2D geometry: square kernel k, stride, zero padding. */
typedef struct mts_conv_geom {
    int cin, h, w;      /* input */
    int cout, k, stride, pad;
    int oh, ow;         /* output, filled by mts_conv_geom_init */
} mts_conv_geom;
int mts_conv_geom_init(mts_conv_geom *g, mts_err *err);

/* Forward: im2col of the whole batch into col[K][N*P] (K = cin*k*k,
 * P = oh*ow), one GEMM W[cout][K] x col through ctx->fwd, bias added in FP32. */
int mts_conv2d_forward(const mts_nn_ctx *ctx, const mts_conv_geom *g, int N, const float *x,
                       const float *w, const float *b, float *y, mts_err *err);
/* Backward (ctx->bwd): dW = dY[cout][N*P] x col^T (one GEMM, k = N*P; col^T
 * built directly by mts_im2col_t);
 * dcol = W^T x dY (one GEMM, k = cout) then col2im adds overlapping taps in
 * FP32 in a fixed (channel, ky, kx, oy, ox) order; db = sums of dY in (n, p)
 * order. */
int mts_conv2d_backward(const mts_nn_ctx *ctx, const mts_conv_geom *g, int N, const float *x,
                        const float *w, const float *dy, float *dx, float *dw, float *db, mts_err *err);

/* Quantization-aware conv forward and backward through an integer table
 * (as mts_qdense_*): the input quantized per tensor with *qa (padding is
 * the real 0, the zero point's code), weights per output channel. */
int mts_qconv2d_forward(const mts_nn_ctx *ctx, const mts_qparam *qa, const mts_conv_geom *g, int N,
                        const float *x, const float *w, const float *b, float *y, mts_err *err);
int mts_qconv2d_backward(const mts_nn_ctx *ctx, const mts_qparam *qa, const mts_conv_geom *g, int N,
                         const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                         mts_err *err);

/* Conv2D of general geometry (PyTorch's nn.Conv2d): kernel kh x kw, stride
 * sh x sw, zero padding ph x pw on each side, dilation dh x dw, groups.
 * Weights w[cout][cin/groups][kh][kw]; group gr maps input channels
 * [gr*cin/G, (gr+1)*cin/G) to output channels [gr*cout/G, (gr+1)*cout/G).
 * Per group the GEMMs, operand orders and sums of mts_conv2d_* (forward
 * col^T x W^T over K = (ci, ky, kx); dW = dY x col^T over (n, oy, ox);
 * dcol = dY^T x W over the group's output channels, then col2im adding each
 * input pixel's taps in (ky, kx) order from +0; db in fmath.h's blocked
 * order over (n, p)), so a geometry mts_conv2d_* accepts gives its bits.
 * The readable form: no chunking (sim/nn/convg.c). */
typedef struct mts_convg_geom {
    int cin, h, w;        /* input */
    int cout, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int oh, ow;           /* output, filled by mts_convg_geom_init */
} mts_convg_geom;
/* Checks the geometry (positive sizes, groups dividing both channel counts,
 * the dilated kernel within the padded input) and fills oh, ow. MTS_EINVAL. */
int mts_convg_geom_init(mts_convg_geom *g, mts_err *err);
int mts_convg_forward(const mts_nn_ctx *ctx, const mts_convg_geom *g, int N, const float *x, const float *w,
                      const float *b, float *y, mts_err *err);
/* dx overwritten (may be NULL), dw, db (may be NULL), all through ctx->bwd. */
int mts_convg_backward(const mts_nn_ctx *ctx, const mts_convg_geom *g, int N, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *db, mts_err *err);

/* im2col of sample layout x[N][cin][h][w] into col[K][N*P]. MTS_OK, or
 * MTS_ENOMEM (a zero-padded copy of x is made: no copy checks bounds). */
int mts_im2col(const mts_conv_geom *g, int N, const float *x, float *col, mts_err *err);
/* The same values transposed: colT[N*P][K] (the weight gradient's operand). */
int mts_im2col_t(const mts_conv_geom *g, int N, const float *x, float *colT, mts_err *err);
/* col2im: dx = sum of the taps of dcolT[N*P][K] (the input-gradient GEMM's
 * output layout), dx overwritten; each input pixel sums its taps in (ky, kx)
 * order from +0. MTS_OK, or MTS_ENOMEM (sums go through a zero-padded
 * accumulator). */
int mts_col2im(const mts_conv_geom *g, int N, const float *dcolT, float *dx, mts_err *err);
/* The same sums, in the same order, from the [K][N*P] layout (what
 * mts_gemm_t writes for the input-gradient GEMM). */
int mts_col2im_rows(const mts_conv_geom *g, int N, const float *dcol, float *dx, mts_err *err);
/* The readable one-element-at-a-time forms of the two above (same values,
 * same bits): the references tests/test_nn.cpp checks the fast ones against. */
void mts_im2col_ref(const mts_conv_geom *g, int N, const float *x, float *col);
void mts_col2im_ref(const mts_conv_geom *g, int N, const float *dcolT, float *dx);

/* Max / average pooling, window k, stride s, no padding (floor). argmax
 * (int32 per output, index into the input plane) is saved for backward. */
int mts_pool_out(int in, int k, int s);
void mts_maxpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y, int32_t *argmax);
void mts_maxpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, const int32_t *argmax,
                          float *dx);
void mts_avgpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y);
void mts_avgpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, float *dx);
/* Global average pool: y[N][C] = mean over H*W. */
void mts_gap_forward(int N, int C, int HW, const float *x, float *y);
void mts_gap_backward(int N, int C, int HW, const float *dy, float *dx);

void mts_relu_forward(size_t n, const float *x, float *y);
void mts_relu_backward(size_t n, const float *y, const float *dy, float *dx);

/* BatchNorm over (N, H, W) per channel. train = 1: batch statistics (double
 * sums, fixed order), running stats updated with momentum mom; saves
 * xhat[N*C*HW] and invstd[C] for backward. train = 0: running stats. */
void mts_bn_forward(int train, int N, int C, int HW, const float *x, const float *gamma, const float *beta,
                    float *rmean, float *rvar, float mom, float eps, float *y, float *xhat, float *invstd);
void mts_bn_backward(int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                     const float *invstd, float *dx, float *dgamma, float *dbeta);
/* The readable references of the two (one term at a time through
 * mts_fm_sumd_push): the same bits, tested against them. */
void mts_bn_forward_ref(int train, int N, int C, int HW, const float *x, const float *gamma, const float *beta,
                        float *rmean, float *rvar, float mom, float eps, float *y, float *xhat, float *invstd);
void mts_bn_backward_ref(int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                         const float *invstd, float *dx, float *dgamma, float *dbeta);

/* Softmax cross-entropy, mean over the batch. Returns the loss; fills
 * dlogits = (softmax - onehot)/N and *correct (argmax == label). */
double mts_softmax_ce(int N, int classes, const float *logits, const uint8_t *labels, float *dlogits,
                      int *correct);

/* MatMul per sample: c[n][m][q] = a[n][m][k] x b[n][k][q] (ctx->fwd);
 * backward da = dc x b^T, db = a^T x dc (ctx->bwd). */
int mts_matmul_forward(const mts_nn_ctx *ctx, int N, int m, int k, int q, const float *a, const float *b,
                       float *c, mts_err *err);
int mts_matmul_backward(const mts_nn_ctx *ctx, int N, int m, int k, int q, const float *a, const float *b,
                        const float *dc, float *da, float *db, mts_err *err);


/* ------------------------------------------------ transformer ops
 * Token activations are [N][T][D] (T tokens of width D per sample). The
 * elementwise ops (LayerNorm, GELU, softmax, embeddings, pooling) are FP32
 * like BatchNorm and ReLU; the attention products go through the provider.
 * Their arithmetic (tanh, exp, the square root, the sums) is fmath.h's,
 * which the CUDA twins (gpu/nn_tx.cu) call too, so that CPU and GPU agree. */

/* LayerNorm over the last dimension D of R rows: mean and variance in
 * double (fixed order), invstd = 1/sqrtf(var + eps), xhat = (x - mean) *
 * invstd, y = xhat * gamma + beta. Saves xhat[R*D] and invstd[R]. */
void mts_layernorm_forward(int R, int D, const float *x, const float *gamma, const float *beta, float eps,
                           float *y, float *xhat, float *invstd);
/* dx (may be NULL), dgamma and dbeta (sums over rows in row order, in double). */
void mts_layernorm_backward(int R, int D, const float *dy, const float *gamma, const float *xhat,
                            const float *invstd, float *dx, float *dgamma, float *dbeta);

/* GELU, tanh form: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
 * Backward reads the input x. */
void mts_gelu_forward(size_t n, const float *x, float *y);
void mts_gelu_backward(size_t n, const float *x, const float *dy, float *dx);

/* Row softmax over the last dimension W of R rows: y = exp(x - max) / sum
 * (FP32 sum in order). Backward dx = y (dy - sum_j dy_j y_j). */
void mts_softmax_forward(int R, int W, const float *x, float *y);
void mts_softmax_backward(int R, int W, const float *y, const float *dy, float *dx);

/* Attention scores of multi-head self-attention. qkv[N][T][3D] holds the
 * Q, K and V projections side by side (D = H*dh; head h is columns
 * h*dh .. h*dh+dh-1 of each), s[N][H][T][T]. Per (n, h) one GEMM through
 * ctx->fwd, S = Q_h x K_h^T (operands Q, K; sum over dh), then s = scale*S
 * in FP32 (scale = 1/sqrt(dh), exact when dh is a power of 4). */
int mts_attn_qk_forward(const mts_nn_ctx *ctx, int N, int T, int H, int dh, float scale, const float *qkv,
                        float *s, mts_err *err);
/* From ds[N][H][T][T]: P = scale*ds (FP32), then per (n, h) through ctx->bwd
 * dQ_h = P x K_h (operands gradient, K; sum over keys) and dK_h = P^T x Q_h
 * (gradient, Q; sum over queries), written into dqkv[N][T][3D] (its V
 * columns are set to 0). */
int mts_attn_qk_backward(const mts_nn_ctx *ctx, int N, int T, int H, int dh, float scale, const float *qkv,
                         const float *ds, float *dqkv, mts_err *err);
/* Attention output: y[N][T][D], per (n, h) y_h = A_h x V_h through ctx->fwd
 * (operands A, V; sum over keys) with a[N][H][T][T] the softmax
 * probabilities and V_h from qkv. */
int mts_attn_av_forward(const mts_nn_ctx *ctx, int N, int T, int H, int dh, const float *a, const float *qkv,
                        float *y, mts_err *err);
/* Through ctx->bwd: dA_h = dY_h x V_h^T (operands gradient, V; sum over dh)
 * into da (may be NULL), dV_h = A_h^T x dY_h (operands A, gradient; sum over
 * queries) into the V columns of dqkv (may be NULL; its Q, K columns are set to 0). */
int mts_attn_av_backward(const mts_nn_ctx *ctx, int N, int T, int H, int dh, const float *a, const float *qkv,
                         const float *dy, float *da, float *dqkv, mts_err *err);

/* Patch tokens of images x[N][C][Hh][W] (Hh, W multiples of p): y[N][T][C*p*p]
 * with T = (Hh/p)(W/p) in raster order and features in (c, ky, kx) order.
 * A token-wise dense layer then embeds them (nn_net.h). Pure data movement. */
void mts_patchify_forward(int N, int C, int Hh, int W, int p, const float *x, float *y);
void mts_patchify_backward(int N, int C, int Hh, int W, int p, const float *dy, float *dx);

/* Learned position embedding with an optional class token: x[N][T][D] ->
 * y[N][T'][D], T' = T + (cls != NULL); with cls, token 0 is cls[D]; then
 * pos[T'][D] is added. Backward: dx (may be NULL), dpos and dcls (NULL
 * without a class token) as sums over the batch in n order. */
void mts_tokens_forward(int N, int T, int D, const float *cls, const float *pos, const float *x, float *y);
void mts_tokens_backward(int N, int T, int D, int has_cls, const float *dy, float *dx, float *dpos, float *dcls);

/* Token pooling x[N][T][D] -> y[N][D]: MTS_TOKPOOL_MEAN (mean over tokens,
 * FP32 sum in order, then / T) or MTS_TOKPOOL_CLS (token 0). */
enum { MTS_TOKPOOL_MEAN = 0, MTS_TOKPOOL_CLS = 1 };
void mts_tokpool_forward(int N, int T, int D, int mode, const float *x, float *y);
void mts_tokpool_backward(int N, int T, int D, int mode, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif
#endif
