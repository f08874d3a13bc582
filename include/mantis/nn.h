/* nn.h - the CPU training engine: layer ops, a small model-building API,
 * optimizers, and the training loop pieces used by `mantis train`.
 *
 * Design (llm.c style, so a CUDA backend can mirror it op for op):
 *  - Every op is a plain function on float arrays in NCHW layout with an
 *    explicit batch size N; the same op names will exist on the GPU.
 *  - Every multiply of a forward, weight-gradient or input-gradient GEMM goes
 *    through mts_gemm (gemm.h) with a caller-chosen mts_provider: `fwd` for
 *    the training forward pass, `bwd` for both backward GEMMs, `test` for
 *    evaluation. Elementwise ops, pooling, BatchNorm, softmax and the
 *    optimizer stay FP32, as in ApproxTrain (docs/training.md).
 *  - GEMM operand order (A x B, which matters for a non-commutative
 *    multiplier): forward activation x weight; weight gradient
 *    output-gradient x activation; input gradient output-gradient x weight.
 *  - Nothing depends on the thread count except inside mts_gemm, whose
 *    accumulation order is fixed (gemm.h), so results are bit-identical for
 *    any --threads. */
#ifndef MANTIS_NN_H
#define MANTIS_NN_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/gemm.h"
#include "mantis/rng.h"
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

/* DIFF thresholds (the paper gives no values): eps1 guards 0/0, eps2 binarises alpha. */
#define MTS_STE_DIFF_EPS1 1e-30
#define MTS_STE_DIFF_EPS2 0.5

/* Parses "identity", "rec-of", "imm-of", "imm-diff" (also "recursive/of",
 * "immediate/of", "immediate/diff"). */
int mts_ste_parse(const char *s, mts_ste *ste, mts_err *err);
const char *mts_ste_name(mts_ste ste);

/* The product the provider's GEMM forms for one operand pair (operands
 * quantized to p->in_fmt with RNE first, except native FP32 providers). */
uint32_t mts_prov_mul(const mts_provider *p, uint32_t a, uint32_t b);

/* STE mask of one FMAq dot product y = sum_i x[i]*w[i*ws] computed by
 * provider p (p->fmaq = 1) in mts_fmaq_dot order: mask[i] = 0 or 1 is the
 * factor "dy/d(x_i w_i)" of the chosen estimator. Recomputes the forward
 * accumulation (nothing is stored in the forward pass). Returns the
 * recomputed y (FP32 bits), which equals the forward GEMM output. */
uint32_t mts_ste_mask(const mts_provider *p, mts_ste ste, const float *x, const float *w, size_t n,
                      size_t ws, uint8_t *mask);

/* ------------------------------------------------ arithmetic choice */

/* One provider described as text, so a checkpoint can record it and
 * `mantis test` can reopen it. Multipliers: "fp32" (native FP32, our GEMM
 * kernel, fixed order), "blas" (OpenBLAS; order is BLAS's own), "bf16"
 * (= model "exact" at 8 exponent bits, 7 mantissa bits), or a registered C
 * model at (1,8,man_bits) or `format`, swept into a LUT with
 * mts_lut_generate (models that cannot be tabulated, or M > 11, run per
 * product as MULOP); or a LUT file. acc non-empty adds FMAq accumulation. */
typedef struct mts_arith_spec {
    char mul[64];
    char lut[512];
    char format[32];      /* "" : (1,8,man_bits) */
    int man_bits;         /* -1: 7 (23 for fp32) */
    char acc[16], prod[16]; /* FMAq formats "M7E4"; prod "" = same as acc */
    int acc_bias, prod_bias; /* -1: default 2^(E-1) */
    int chunk;            /* 0: 16 */
    int no_underflow;
} mts_arith_spec;

void mts_arith_spec_init(mts_arith_spec *s);

/* An opened provider with what it points to. Do not copy or move after
 * mts_arith_open (p.lut points into the struct). */
typedef struct mts_arith {
    mts_provider p;
    mts_lut lut;
    mts_mulop op;
    char desc[192];       /* e.g. "lut mbm e8m7 + fmaq M4E3b5/M4E3b5 chunk 16" */
} mts_arith;

int mts_arith_open(const mts_arith_spec *s, int threads, mts_arith *a, mts_err *err);
void mts_arith_close(mts_arith *a);
/* "key=value;..." text of a spec, and back (for checkpoints). */
void mts_arith_spec_str(const mts_arith_spec *s, char *buf, size_t n);
int mts_arith_spec_parse(const char *str, mts_arith_spec *s, mts_err *err);

/* ---------------------------------------------------- operand traces */

/* A uniform random sample (reservoir, Algorithm L) of the operand pairs that
 * reach the multiplier in every GEMM of the layer ops while the tracer is
 * installed, restricted to GEMMs whose operand format equals fmt. Written in
 * the trace format of trace.h: kind MTS_TRACE_SIG (the M-bit mantissa
 * fractions a significand multiplier sees; pairs with a zero or special
 * operand never reach it and are left out) or MTS_TRACE_FLOAT (1+E+M-bit
 * codes, every pair). */
typedef struct mts_nn_tracer {
    size_t cap, have;
    uint64_t seen, next;   /* products streamed so far; index of the next one sampled */
    double W;              /* Algorithm L state */
    uint32_t *a, *b;       /* quantized operands (FP32 bits) */
    mts_rng rng;
    mts_format fmt;
    int kind;              /* mts_trace_kind */
} mts_nn_tracer;

int mts_nn_tracer_init(mts_nn_tracer *t, size_t samples, const mts_format *fmt, int kind, uint64_t seed,
                       mts_err *err);
void mts_nn_tracer_free(mts_nn_tracer *t);
/* Installs t (NULL: none) for the layer ops of this process. */
void mts_nn_set_tracer(mts_nn_tracer *t);
/* The operand format provider p quantizes to (e8m23 for native FP32). */
mts_format mts_prov_format(const mts_provider *p);
/* mts_gemm, with the installed tracer sampling its operand pairs first. */
int mts_nn_gemm(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
                const float *B, int ldb, float beta, float *C, int ldc, mts_err *err);
/* Writes the sample (atomically); records in stream order. */
int mts_nn_tracer_write(const mts_nn_tracer *t, const char *path, mts_err *err);

/* ------------------------------------------------------------- ops */

/* All ops: N = batch; arrays NCHW, row-major; return MTS_OK or an error from
 * mts_gemm / allocation. Backward ops overwrite (not accumulate) their
 * outputs; pass NULL for a gradient that is not needed. */

/* Dense: y[N][out] = x[N][in] * w[out][in]^T + b. */
int mts_dense_forward(const mts_provider *p, int N, int in, int out, const float *x, const float *w,
                      const float *b, float *y, mts_err *err);
/* dx = dy*w, dw = dy^T*x, db = column sums of dy (FP32, n order). With
 * fwd->fmaq and ste != IDENTITY the products are masked per (n, o, i) by the
 * STE of the forward accumulation (recomputed with fwd) before the bwd GEMMs. */
int mts_dense_backward(const mts_provider *bwd, const mts_provider *fwd, mts_ste ste, int N, int in,
                       int out, const float *x, const float *w, const float *dy, float *dx, float *dw,
                       float *db, mts_err *err);

/* Conv2D geometry: square kernel k, stride, zero padding. */
typedef struct mts_conv_geom {
    int cin, h, w;      /* input */
    int cout, k, stride, pad;
    int oh, ow;         /* output, filled by mts_conv_geom_init */
} mts_conv_geom;
int mts_conv_geom_init(mts_conv_geom *g, mts_err *err);

/* Forward: im2col of the whole batch into col[K][N*P] (K = cin*k*k,
 * P = oh*ow), one GEMM W[cout][K] x col, bias added in FP32. */
int mts_conv2d_forward(const mts_provider *p, const mts_conv_geom *g, int N, const float *x,
                       const float *w, const float *b, float *y, mts_err *err);
/* Backward: dW = dY[cout][N*P] x col^T (one GEMM, k = N*P); dcol = W^T x dY
 * (one GEMM, k = cout) then col2im adds overlapping taps in FP32 in a fixed
 * (channel, ky, kx, oy, ox) order; db = sums of dY in (n, p) order. */
int mts_conv2d_backward(const mts_provider *bwd, const mts_conv_geom *g, int N, const float *x,
                        const float *w, const float *dy, float *dx, float *dw, float *db, mts_err *err);

/* im2col of sample layout x[N][cin][h][w] into col[K][N*P]. */
void mts_im2col(const mts_conv_geom *g, int N, const float *x, float *col);
/* col2im: dx = sum of the taps of dcolT[N*P][K] (the input-gradient GEMM's
 * output layout), dx overwritten, in (n, ci, ky, kx, oy, ox) order. */
void mts_col2im(const mts_conv_geom *g, int N, const float *dcolT, float *dx);

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

/* Softmax cross-entropy, mean over the batch. Returns the loss; fills
 * dlogits = (softmax - onehot)/N and *correct (argmax == label). */
double mts_softmax_ce(int N, int classes, const float *logits, const uint8_t *labels, float *dlogits,
                      int *correct);

/* MatMul per sample: c[n][m][q] = a[n][m][k] x b[n][k][q]; backward
 * da = dc x b^T, db = a^T x dc (all through the provider). */
int mts_matmul_forward(const mts_provider *p, int N, int m, int k, int q, const float *a, const float *b,
                       float *c, mts_err *err);
int mts_matmul_backward(const mts_provider *bwd, int N, int m, int k, int q, const float *a, const float *b,
                        const float *dc, float *da, float *db, mts_err *err);

/* ------------------------------------------------------- networks */

typedef enum {
    MTS_L_INPUT = 0, MTS_L_DENSE, MTS_L_CONV, MTS_L_MAXPOOL, MTS_L_AVGPOOL, MTS_L_GAP, MTS_L_RELU,
    MTS_L_BN, MTS_L_ADD, MTS_L_FLATTEN, MTS_L_MATMUL
} mts_layer_kind;

typedef struct mts_layer {
    mts_layer_kind kind;
    int in0, in1;          /* producing nodes (in1: ADD / MATMUL only), -1 none */
    int c, h, w;           /* per-sample output shape */
    int units, k, stride, pad;
    mts_conv_geom g;
    size_t poff, np;       /* parameters: net->param[poff .. poff+np) (weights then bias) */
    size_t nweight;        /* leading weights that take weight decay */
    size_t soff, ns;       /* non-trained state: BN running mean then var */
    float *y, *dy;         /* activations and their gradients [batch][c*h*w] */
    float *aux;            /* BN xhat */
    float *aux2;           /* BN invstd */
    int32_t *argmax;       /* max pool */
} mts_layer;

typedef struct mts_net {
    char name[32];
    int n, cap;
    mts_layer *l;
    int cursor;            /* node the next layer reads from */
    int batch;             /* activation capacity (samples) */
    float *param, *grad;   /* all trainable parameters, contiguous */
    size_t nparam;
    float *state;          /* BN running statistics */
    size_t nstate;
    mts_ste ste;           /* estimator for FMAq dense layers */
    int built;
} mts_net;

/* Creates an empty net whose input is c x h x w per sample. */
int mts_net_init(mts_net *net, const char *name, int c, int h, int w, mts_err *err);
void mts_net_free(mts_net *net);

/* Builders append one node reading from net->cursor and move the cursor to
 * it; they return the new node's index or a negative MTS_E* code (err says
 * which shape did not fit). */
int mts_net_dense(mts_net *net, int units, mts_err *err);   /* flattens its input */
int mts_net_conv(mts_net *net, int cout, int k, int stride, int pad, mts_err *err);
int mts_net_maxpool(mts_net *net, int k, int s, mts_err *err);
int mts_net_avgpool(mts_net *net, int k, int s, mts_err *err);
int mts_net_gap(mts_net *net, mts_err *err);
int mts_net_relu(mts_net *net, mts_err *err);
int mts_net_bn(mts_net *net, mts_err *err);
int mts_net_flatten(mts_net *net, mts_err *err);
/* Residual add of node `other` to the cursor (same shapes). */
int mts_net_add(mts_net *net, int other, mts_err *err);
/* MatMul of the cursor (c=1, h=m, w=k) by node `other` (c=1, h=k, w=q). */
int mts_net_matmul(mts_net *net, int other, mts_err *err);
/* Moves the cursor (to branch: residual shortcuts). */
void mts_net_set_cursor(mts_net *net, int node);

/* Allocates parameters and activations for up to `batch` samples and
 * initialises parameters from seed (Kaiming uniform for conv/dense weights,
 * bias 0, BN gamma 1 beta 0, running var 1). */
int mts_net_build(mts_net *net, int batch, uint64_t seed, mts_err *err);

/* Forward of N <= batch samples x[N][c*h*w]; train selects BN batch stats.
 * Returns MTS_OK; the output is the last node's y. */
int mts_net_forward(mts_net *net, const mts_provider *p, int train, int N, const float *x, mts_err *err);
/* Backward from dlast (gradient of the last node's output); fills net->grad. */
int mts_net_backward(mts_net *net, const mts_provider *bwd, const mts_provider *fwd, int N, const float *x,
                     const float *dlast, mts_err *err);
const float *mts_net_output(const mts_net *net);
int mts_net_outsize(const mts_net *net);

/* Built-in models (examples/): "lenet300", "lenet5", "mlp1024", "resnet20".
 * Builds (not allocates) the named model for input c x h x w and `classes`. */
int mts_nn_model_build(mts_net *net, const char *model, int c, int h, int w, int classes, mts_err *err);
const char *mts_nn_model_list(void);

/* ------------------------------------------------------ optimizers */

typedef enum { MTS_OPT_SGD = 0, MTS_OPT_ADAM = 1 } mts_opt_kind;
typedef enum { MTS_SCHED_CONST = 0, MTS_SCHED_STEP = 1, MTS_SCHED_COSINE = 2 } mts_sched_kind;

typedef struct mts_opt {
    mts_opt_kind kind;
    float lr, momentum, wd, beta1, beta2, eps;
    mts_sched_kind sched;
    int step_size;        /* STEP: epochs between decays */
    float gamma;          /* STEP: decay factor */
    int epochs;           /* COSINE: total epochs */
    uint64_t t;           /* steps taken (Adam bias correction) */
    float *m, *v;         /* momentum / Adam moments, nparam each */
    size_t n;
} mts_opt;

int mts_opt_init(mts_opt *o, size_t nparam, mts_err *err);
void mts_opt_free(mts_opt *o);
/* Learning rate of epoch e (0-based) under the schedule. */
float mts_opt_lr(const mts_opt *o, int epoch);
/* One update of net->param from net->grad at learning rate lr. Weight decay
 * applies to conv/dense weights only (not biases or BN). */
void mts_opt_step(mts_opt *o, mts_net *net, float lr);

/* ------------------------------------------------------------ data */

typedef struct mts_dataset {
    int n, c, h, w, classes;
    float *x;             /* n * c*h*w values in [0, 1] */
    uint8_t *y;
} mts_dataset;

/* IDX pair (images idx3 magic 0x00000803, labels idx1 0x00000801): checks
 * magic, dimensions, counts and file sizes; bytes scaled by 1/255. */
int mts_idx_load(const char *images, const char *labels, mts_dataset *d, mts_err *err);
/* CIFAR-10 binary: n files of 10000 records (1 label + 3072 bytes). */
int mts_cifar10_load(const char *const *files, int nfiles, mts_dataset *d, mts_err *err);
/* Loads "mnist", "fashion-mnist" (IDX in dir) or "cifar10" (dir holds
 * data_batch_1..5.bin, test_batch.bin): train = 1 training split. Values are
 * standardised per channel with the usual constants (MNIST 0.1307/0.3081,
 * Fashion-MNIST 0.2860/0.3530, CIFAR-10 per-channel). Missing or
 * malformed files give one line that says how to get the data. */
int mts_dataset_load(const char *name, const char *dir, int train, mts_dataset *d, mts_err *err);
void mts_dataset_free(mts_dataset *d);

/* -------------------------------------------------------- training */

typedef struct mts_epoch_stats {
    double train_loss, train_acc, test_acc, seconds, samples_per_s, lr;
} mts_epoch_stats;

/* Order of epoch e's samples: a Fisher-Yates shuffle seeded by (seed, e),
 * so it depends on nothing but these (resume needs no RNG state). */
void mts_epoch_order(uint64_t seed, int epoch, int n, int32_t *order);

/* One training epoch over the first `n` samples of d (n <= d->n) in
 * mts_epoch_order; progress(ctx, done, n) is called after each batch (may
 * be NULL). Fills loss/acc of st. */
int mts_train_epoch(mts_net *net, mts_opt *opt, const mts_provider *fwd, const mts_provider *bwd,
                    const mts_dataset *d, int n, int batch, uint64_t seed, int epoch, float lr,
                    void (*progress)(void *ctx, int done, int total), void *ctx, mts_epoch_stats *st,
                    mts_err *err);
/* Accuracy over the first n samples of d in batches (eval mode). */
int mts_evaluate(mts_net *net, const mts_provider *p, const mts_dataset *d, int n, double *acc, mts_err *err);

/* ------------------------------------------------------ checkpoints */

/* A checkpoint: header (magic "MTSCKPT\0", version, sizes), a config string
 * (opaque, what the run was started with), epoch, optimizer state, params,
 * BN state, the per-epoch history; CRC-32 of all preceding bytes at the end.
 * Written atomically. */
typedef struct mts_ckpt_meta {
    char config[1024];
    int epoch;            /* epochs completed */
    int nhist;
    mts_epoch_stats hist[1024];
} mts_ckpt_meta;

int mts_ckpt_save(const char *path, const mts_net *net, const mts_opt *opt, const mts_ckpt_meta *meta,
                  mts_err *err);
/* Loads into a built net (sizes must match) and an initialised opt (may be
 * NULL to skip optimizer state). Each malformation is its own message. */
int mts_ckpt_load(const char *path, mts_net *net, mts_opt *opt, mts_ckpt_meta *meta, mts_err *err);
/* Reads only the config string (to rebuild the net before mts_ckpt_load). */
int mts_ckpt_peek(const char *path, char *config, size_t n, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
