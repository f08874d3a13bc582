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
 * batch stats. Returns MTS_OK; the output is the last node's y. */
int mts_net_forward(mts_net *net, const mts_nn_ctx *ctx, int train, int N, const float *x, mts_err *err);
/* Backward from dlast (gradient of the last node's output) with ctx->bwd
 * (and ctx->fwd, ctx->ste for the FMAq STE of dense layers); fills net->grad. */
int mts_net_backward(mts_net *net, const mts_nn_ctx *ctx, int N, const float *x, const float *dlast,
                     mts_err *err);
const float *mts_net_output(const mts_net *net);
int mts_net_outsize(const mts_net *net);

/* Built-in models (examples/): "lenet300", "lenet5", "mlp1024", "resnet20".
 * Builds (not allocates) the named model for input c x h x w and `classes`. */
int mts_nn_model_build(mts_net *net, const char *model, int c, int h, int w, int classes, mts_err *err);
const char *mts_nn_model_list(void);

#ifdef __cplusplus
}
#endif
#endif
