/* nn_net.h - networks: a list of nodes in topological order (sequential
 * layers plus branches for residual blocks), the builders that append
 * them, allocation and initialisation, the forward and backward passes over
 * the layer ops (nn_ops.h), and the built-in models of examples/. */
#ifndef MANTIS_NN_NET_H
#define MANTIS_NN_NET_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/nn_ops.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MTS_L_INPUT = 0, MTS_L_DENSE, MTS_L_CONV, MTS_L_MAXPOOL, MTS_L_AVGPOOL, MTS_L_GAP, MTS_L_RELU,
    MTS_L_BN, MTS_L_ADD, MTS_L_FLATTEN, MTS_L_MATMUL,
    /* transformer nodes; token activations are c=1, h=T tokens, w=D */
    MTS_L_TOKDENSE, MTS_L_LAYERNORM, MTS_L_GELU, MTS_L_SOFTMAX, MTS_L_ATTN_QK, MTS_L_ATTN_AV, MTS_L_PATCHIFY,
    MTS_L_TOKENS, MTS_L_TOKPOOL
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
    size_t qoff;           /* dense, conv, tokdense: the input's quantization range observer
                              (MTS_QAT_STATE floats of net->state, after every BN state) */
    float *y, *dy;         /* activations and their gradients [batch][c*h*w] */
    float *aux;            /* layer norm: xhat */
    float *aux2;           /* BN: invstd then mean per channel; layer norm: invstd per row */
    int fused;             /* BN, residual add: the index of the ReLU, its only reader, whose output
                              it writes and whose backward it takes (0: none); that ReLU: 1
                              (mts_net_build) */
    int32_t *argmax;       /* max pool */
    char name[48];         /* "" : named by kind and ordinal (mts_net_layer_name) */
} mts_layer;

typedef struct mts_net {
    char name[32];
    int n, cap;
    mts_layer *l;
    int cursor;            /* node the next layer reads from */
    int batch;             /* activation capacity (samples) */
    float *param, *grad;   /* all trainable parameters, contiguous */
    size_t nparam;
    float *state;          /* BN running statistics, then the QAT range observers */
    size_t nstate;
    size_t nqstate;        /* of which the observers (the tail; a checkpoint written before them
                              has nstate - nqstate values) */
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

/* Forward of N <= batch samples x[N][c*h*w] with ctx->fwd; train selects BN
 * batch stats. A dense, conv or tokdense node whose forward provider is an
 * integer table runs quantization-aware (mts_qdense_forward /
 * mts_qconv2d_forward) with its input's range observer, which every
 * training forward updates (mts_qat_observe, whatever the provider) and
 * evaluation leaves frozen. Returns MTS_OK; the output is the
 * last node's y. */
int mts_net_forward(mts_net *net, const mts_nn_ctx *ctx, int train, int N, const float *x, mts_err *err);
/* Backward from dlast (gradient of the last node's output) with ctx->bwd
 * (and ctx->fwd, ctx->ste for the FMAq STE of dense layers); fills net->grad. */
int mts_net_backward(mts_net *net, const mts_nn_ctx *ctx, int N, const float *x, const float *dlast,
                     mts_err *err);
const float *mts_net_output(const mts_net *net);
int mts_net_outsize(const mts_net *net);

/* ------------------------------------------------ transformer builders
 * (token activations: c = 1, h = T tokens, w = D; see nn_ops.h) */

/* Image patches of p x p as tokens: c x h x w -> 1 x (h/p)(w/p) x c*p*p. */
int mts_net_patchify(mts_net *net, int p, mts_err *err);
/* Token-wise dense layer (the same weights for every token): 1 x T x in ->
 * 1 x T x units; one GEMM over all N*T tokens (mts_dense_forward with N*T rows). */
int mts_net_tokdense(mts_net *net, int units, mts_err *err);
/* Learned position embedding, with a class token prepended when cls = 1. */
int mts_net_tokens(mts_net *net, int cls, mts_err *err);
/* LayerNorm over w (eps 1e-5), GELU, row softmax over w. */
int mts_net_layernorm(mts_net *net, mts_err *err);
int mts_net_gelu(mts_net *net, mts_err *err);
int mts_net_softmax(mts_net *net, mts_err *err);
/* Scaled scores of `heads` heads from the cursor's 1 x T x 3D Q|K|V tokens:
 * H x T x T (scale 1/sqrt(D/heads)). */
int mts_net_attn_qk(mts_net *net, int heads, mts_err *err);
/* Attention output from the cursor's H x T x T probabilities and node
 * `qkv`'s V columns: 1 x T x D. */
int mts_net_attn_av(mts_net *net, int qkv, mts_err *err);
/* Multi-head self-attention on the cursor's 1 x T x D tokens: the nodes
 * PREFIX.qkv (token dense 3D: the Q, K, V projections side by side, each
 * output column its own dot product, so bit-identical to three dense
 * layers), PREFIX.qk, PREFIX.softmax, PREFIX.av and PREFIX.proj (token dense D).
 * Returns the last node. */
int mts_net_mhsa(mts_net *net, int heads, const char *prefix, mts_err *err);
/* Tokens -> one vector: MTS_TOKPOOL_MEAN or MTS_TOKPOOL_CLS (nn_ops.h). */
int mts_net_tokpool(mts_net *net, int mode, mts_err *err);

/* ------------------------------------------------ layer names
 * Names address layers for per-layer multipliers (--mul-layer). */

/* Names node `node` (at most 47 characters). */
int mts_net_set_name(mts_net *net, int node, const char *name, mts_err *err);
/* The node's name: its own, or its kind and 1-based ordinal among the
 * nodes of that kind ("conv3", "dense1"). */
void mts_net_layer_name(const mts_net *net, int node, char *buf, size_t n);
/* Kind as text ("conv", "tokdense", "attn_qk", ...). */
const char *mts_layer_kind_name(mts_layer_kind k);
/* 1 if the node's forward or backward multiplies through a provider
 * (dense, conv, matmul, tokdense, attn_qk, attn_av). */
int mts_layer_multiplies(const mts_layer *l);
/* Marks match[i] = 1 for every multiplying node whose name matches the
 * glob `pattern` (fnmatch: * ? [...]); returns how many matched. */
int mts_net_match(const mts_net *net, const char *pattern, int *match);
/* The multiply-accumulates of one sample's forward pass in node `node`. */
uint64_t mts_net_layer_macs(const mts_net *net, int node);

/* Built-in models (examples/): "lenet300", "lenet5", "mlp1024", "resnet20",
 * "resnet18", "vit-tiny".
 * Builds (not allocates) the named model for input c x h x w and `classes`. */
int mts_nn_model_build(mts_net *net, const char *model, int c, int h, int w, int classes, mts_err *err);
const char *mts_nn_model_list(void);

#ifdef __cplusplus
}
#endif
#endif
