/* nn_internal.h - private to the files of sim/nn/: helpers shared by two files of
 * the training engine. Not a public header. */
#ifndef MANTIS_NN_INTERNAL_H
#define MANTIS_NN_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "mantis/fmath.h"
#include "mantis/gemm.h"
#include "mantis/nn_arith.h"
#include "mantis/nn_train.h"

#if defined(__AVX512F__)
#include <immintrin.h>
/* mts_fm_canon, 16 lanes: a NaN lane as 0x7FC00000 (act.c's GELU, conv.c's col2im). */
static inline __m512 nn_canon16(__m512 v)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v,
                                _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
}
#endif

/* BatchNorm's running-average momentum and epsilon, LayerNorm's epsilon
 * (net.c, gpunet.c). */
#define BN_MOMENTUM 0.1f
#define BN_EPS 1e-5f
#define LN_EPS 1e-5f /* LayerNorm */

/* mts_prov_mul with fp32 = mts_model_find("fp32") looked up once by the
 * caller, for the STE replay's inner loop (prov.c). */
uint32_t nn_prov_mul(const mts_provider *p, const mts_model *fp32, uint32_t a, uint32_t b);

/* Opens spec s with the caller's opener, or mts_arith_open when open is
 * NULL (driver.c; the train and test drivers). */
int nn_open_arith(mts_arith_open_fn open, void *ud, const mts_arith_spec *s, int threads, mts_arith *a,
                       mts_err *err);

/* Per-layer multipliers (layers.c): the rules, a provider set per rule
 * (forward, backward, test), and per-node contexts for mts_nn_ctx.node_ctx. */
typedef struct nn_layers {
    int n;                                  /* rules opened */
    mts_layer_rule rule[MTS_MAX_LAYER_RULES];
    mts_arith (*arith)[3];                  /* [rule][fwd, bwd, test] */
    mts_nn_ctx train[MTS_MAX_LAYER_RULES], eval[MTS_MAX_LAYER_RULES];
    int *assign;                            /* per node: the rule, or -1 */
    const mts_nn_ctx **train_nodes, **eval_nodes; /* per node: its context, or NULL */
    char desc[1024];                        /* "RULE: N layers (desc); ..." */
} nn_layers;

/* Parses the n rules, matches them to net's multiplying layers (a rule
 * that matches none is an error) and opens their providers (train = 0:
 * only the test ones). On error everything is closed. */
int nn_layers_open(nn_layers *L, const mts_net *net, const char *const *texts, int n, int train, int int_bwd,
                     mts_arith_open_fn open, void *ud, int threads, mts_err *err);
/* The rules' contexts: copies of train / eval (STE, tracer, device) with
 * the rule's providers; fills train_nodes / eval_nodes (either may be NULL). */
void nn_layers_bind(nn_layers *L, int nnodes, const mts_nn_ctx *train, const mts_nn_ctx *eval);
void nn_layers_close(nn_layers *L);

/* mts_bn_forward / mts_bn_backward with channels split among threads
 * (same bits for any count; one thread below 2^16 elements) (bn.c).
 * Forward: relu 1 writes max(v, +0) of each result v into y, as
 * mts_relu_forward would from the BN's output (which is not stored); mean
 * (optional, C floats) keeps each channel's mean for a backward from x.
 * Backward: xhat, or NULL to recompute it from the forward's input x and
 * mean (the same bits); ry non-NULL: dy is the gradient of the ReLU whose
 * output is ry, the BN's own gradient being ry > 0 ? +0 + dy : +0 (what
 * mts__relu_backward_t with pz writes); pz: dx = +0 + each result. */
void mts__bn_forward_t(int threads, int train, int relu, int N, int C, int HW, const float *x, const float *gamma,
                       const float *beta, float *rmean, float *rvar, float mom, float eps, float *y, float *xhat,
                       float *invstd, float *mean);
void mts__bn_backward_t(int threads, int N, int C, int HW, const float *dy, const float *ry, const float *gamma,
                        const float *xhat, const float *x, const float *mean, const float *invstd, float *dx,
                        float *dgamma, float *dbeta, int pz);

/* Elementwise passes of n floats split among threads (same bits for any
 * count; one thread below 2^16 elements) (act.c): ReLU forward and
 * backward (pz: +0 + each result, the first gradient of a node's dy),
 * y = a + b, dst += src, dst = +0 + dst and dst = +0 + src. */
void mts__relu_forward_t(int threads, size_t n, const float *x, float *y);
void mts__relu_backward_t(int threads, size_t n, const float *y, const float *dy, float *dx, int pz);
void mts__copy_pz_t(int threads, size_t n, const float *src, float *dst);
void mts__add_t(int threads, size_t n, const float *a, const float *b, float *y);
/* A residual add whose only reader is a ReLU (act.c; mts_net_build pairs
 * them): forward y = max(a + b, +0), the ReLU's output (mts__add_t then
 * mts__relu_forward_t); backward from the ReLU's output ry and gradient
 * dy: g = ry > 0 ? +0 + dy : +0 is the add's gradient (the ReLU's backward
 * with pz), dx = +0 + g for the add's first input (mts__copy_pz_t) and g
 * added into the second input's gradient sc (+0 + g when sc_first: its
 * first contribution), NaN canonical as mts__acc_t. */
void mts__add_relu_t(int threads, size_t n, const float *a, const float *b, float *y);
void mts__add_relu_backward_t(int threads, size_t n, const float *ry, const float *dy, float *dx, float *sc,
                              int sc_first);

/* An epoch's statistics (train.c): loss and correct count summed over n
 * samples since the clock read t0, at learning rate lr. */
void mts__epoch_stats(mts_epoch_stats *st, double t0, double loss, long correct, int n, float lr);
void mts__acc_t(int threads, size_t n, float *dst, const float *src);
void mts__plus_zero_t(int threads, size_t n, float *dst);

/* GELU (act.c), LayerNorm (layernorm.c) and the row softmax
 * (attention.c) on threads: blocks of elements, rows or columns whose
 * values do not depend on the split (same bits for any count). */
void mts__gelu_forward_t(int threads, size_t n, const float *x, float *y);
void mts__gelu_backward_t(int threads, size_t n, const float *x, const float *dy, float *dx);
void mts__layernorm_forward_t(int threads, int R, int D, const float *x, const float *gamma, const float *beta,
                              float eps, float *y, float *xhat, float *invstd);
void mts__layernorm_backward_t(int threads, int R, int D, const float *dy, const float *gamma, const float *xhat,
                               const float *invstd, float *dx, float *dgamma, float *dbeta);
void mts__softmax_forward_t(int threads, int R, int W, const float *x, float *y);
void mts__softmax_backward_t(int threads, int R, int W, const float *y, const float *dy, float *dx);

/* The threads of a context's ops: its forward provider's (0: all cores). */
int nn_threads(const mts_nn_ctx *ctx);

/* The backward provider next to forward provider fwd: when fwd is an
 * integer table and the integer backward (mts_int_bwd) is not APPROX, a
 * backward provider bwd that is an integer table too (the default: the
 * forward multiplier) is replaced by native FP32, what the STE and TABLE
 * backward multiply with; anything else is left as opened. (driver.c) */
int nn_int_bwd_arith(const mts_arith *fwd, int int_bwd, int threads, mts_arith *bwd, mts_err *err);

/* Puts opened provider a on device (0: CPU; MTS_GPU_DEVICE_CUDA: its GEMMs
 * run on the GPU, with the same results); MTS_EUNSUPPORTED when the GPU does
 * not take this provider (driver.c). */
int nn_arith_device(mts_arith *a, int device, mts_err *err);

#endif
