/* net.c - networks as a list of nodes in topological order (sequential
 * layers plus branches for residual blocks): building, allocation,
 * deterministic initialisation, forward and backward passes. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/gemmdump.h"
#include "mantis/nn_net.h"
#include "mantis/rng.h"
#include "nn_internal.h"

#define POS_INIT 0.02f /* position embeddings start uniform in [-POS_INIT, POS_INIT] */

static size_t node_size(const mts_layer *l) { return (size_t)l->c * l->h * l->w; }

/* Nodes that quantize their input for an integer multiplier (qat.c). */
static int quantized_kind(mts_layer_kind k) { return k == MTS_L_DENSE || k == MTS_L_CONV || k == MTS_L_TOKDENSE; }

/* The input quantizer of node l for the integer table of ctx->fwd, or NULL
 * when ctx->fwd is no integer table (the node then runs the ops of the other
 * providers). When train, the node's observer is updated first, whatever
 * the provider: a float run's checkpoint then carries calibrated ranges for
 * evaluating it with an integer design (mantis test, the flow's infer mode). */
static const mts_qparam *node_qact(mts_net *net, const mts_layer *l, const mts_nn_ctx *ctx, int train,
                                   const float *x, size_t n, mts_qparam *q)
{
    if (!quantized_kind(l->kind)) return NULL;
    float *st = net->state + l->qoff;
    if (train) mts_qat_observe(st, x, n);
    const mts_provider *p = ctx->fwd;
    if (!p || p->kind != MTS_PROV_INT || !p->lut) return NULL;
    mts_qat_act_param(st, x, n, p->lut->int_bits, p->lut->int_signed, q);
    return q;
}

int mts_net_init(mts_net *net, const char *name, int c, int h, int w, mts_err *err)
{
    memset(net, 0, sizeof *net);
    snprintf(net->name, sizeof net->name, "%s", name);
    if (c < 1 || h < 1 || w < 1) return mts_fail(err, MTS_EINVAL, "net %s: bad input shape %dx%dx%d", name, c, h, w);
    net->cap = 16;
    net->l = calloc((size_t)net->cap, sizeof *net->l);
    if (!net->l) return mts_fail(err, MTS_ENOMEM, "net %s: out of memory", name);
    net->n = 1;
    net->l[0] = (mts_layer){.kind = MTS_L_INPUT, .in0 = -1, .in1 = -1, .c = c, .h = h, .w = w};
    return MTS_OK;
}

void mts_net_free(mts_net *net)
{
    if (net->l)
        for (int i = 0; i < net->n; i++) {
            mts_layer *l = &net->l[i];
            free(l->y);
            free(l->dy);
            free(l->aux);
            free(l->aux2);
            free(l->argmax);
        }
    free(net->l);
    free(net->param);
    free(net->grad);
    free(net->state);
    memset(net, 0, sizeof *net);
}

void mts_net_set_cursor(mts_net *net, int node) { net->cursor = node; }

static int push(mts_net *net, mts_layer l, mts_err *err)
{
    if (net->built) return mts_fail(err, MTS_EINVAL, "net %s: layers added after build", net->name);
    if (net->n == net->cap) {
        mts_layer *nl = realloc(net->l, sizeof *nl * (size_t)net->cap * 2);
        if (!nl) return mts_fail(err, MTS_ENOMEM, "net %s: out of memory", net->name);
        net->l = nl;
        net->cap *= 2;
    }
    if (l.in1 < 0) l.in1 = -1;
    net->l[net->n] = l;
    net->cursor = net->n;
    return net->n++;
}

static const mts_layer *cur(const mts_net *net) { return &net->l[net->cursor]; }

int mts_net_dense(mts_net *net, int units, mts_err *err)
{
    const mts_layer *in = cur(net);
    if (units < 1) return mts_fail(err, MTS_EINVAL, "net %s: dense with %d units", net->name, units);
    size_t fan = node_size(in);
    mts_layer l = {.kind = MTS_L_DENSE, .in0 = net->cursor, .in1 = -1, .c = units, .h = 1, .w = 1, .units = units};
    l.nweight = (size_t)units * fan;
    l.np = l.nweight + (size_t)units;
    return push(net, l, err);
}

int mts_net_conv(mts_net *net, int cout, int k, int stride, int pad, mts_err *err)
{
    const mts_layer *in = cur(net);
    mts_conv_geom g = {.cin = in->c, .h = in->h, .w = in->w, .cout = cout, .k = k, .stride = stride, .pad = pad};
    int rc = mts_conv_geom_init(&g, err);
    if (rc != MTS_OK) return rc;
    mts_layer l = {.kind = MTS_L_CONV, .in0 = net->cursor, .in1 = -1, .c = cout, .h = g.oh, .w = g.ow,
                   .k = k, .stride = stride, .pad = pad, .g = g};
    l.nweight = (size_t)cout * g.cin * k * k;
    l.np = l.nweight + (size_t)cout;
    return push(net, l, err);
}

static int pool(mts_net *net, mts_layer_kind kind, int k, int s, mts_err *err)
{
    const mts_layer *in = cur(net);
    if (k < 1 || s < 1 || in->h < k || in->w < k)
        return mts_fail(err, MTS_EINVAL, "net %s: %dx%d pool (stride %d) does not fit a %dx%d input", net->name, k,
                        k, s, in->h, in->w);
    mts_layer l = {.kind = kind, .in0 = net->cursor, .in1 = -1, .c = in->c, .h = mts_pool_out(in->h, k, s),
                   .w = mts_pool_out(in->w, k, s), .k = k, .stride = s};
    return push(net, l, err);
}

int mts_net_maxpool(mts_net *net, int k, int s, mts_err *err) { return pool(net, MTS_L_MAXPOOL, k, s, err); }
int mts_net_avgpool(mts_net *net, int k, int s, mts_err *err) { return pool(net, MTS_L_AVGPOOL, k, s, err); }

static int same_shape(mts_net *net, mts_layer_kind kind, mts_err *err)
{
    const mts_layer *in = cur(net);
    mts_layer l = {.kind = kind, .in0 = net->cursor, .in1 = -1, .c = in->c, .h = in->h, .w = in->w};
    if (kind == MTS_L_BN) {
        l.nweight = 0; /* gamma and beta take no weight decay */
        l.np = 2 * (size_t)in->c;
        l.ns = 2 * (size_t)in->c;
    }
    if (kind == MTS_L_GAP) l.h = l.w = 1;
    if (kind == MTS_L_FLATTEN) {
        l.c = in->c * in->h * in->w;
        l.h = l.w = 1;
    }
    return push(net, l, err);
}

int mts_net_gap(mts_net *net, mts_err *err) { return same_shape(net, MTS_L_GAP, err); }
int mts_net_relu(mts_net *net, mts_err *err) { return same_shape(net, MTS_L_RELU, err); }
int mts_net_bn(mts_net *net, mts_err *err) { return same_shape(net, MTS_L_BN, err); }
int mts_net_flatten(mts_net *net, mts_err *err) { return same_shape(net, MTS_L_FLATTEN, err); }

int mts_net_add(mts_net *net, int other, mts_err *err)
{
    const mts_layer *a = cur(net);
    if (other < 0 || other >= net->n) return mts_fail(err, MTS_EINVAL, "net %s: add of unknown node %d", net->name, other);
    const mts_layer *b = &net->l[other];
    if (a->c != b->c || a->h != b->h || a->w != b->w)
        return mts_fail(err, MTS_EINVAL, "net %s: residual add of %dx%dx%d and %dx%dx%d", net->name, a->c, a->h, a->w,
                        b->c, b->h, b->w);
    mts_layer l = {.kind = MTS_L_ADD, .in0 = net->cursor, .in1 = other, .c = a->c, .h = a->h, .w = a->w};
    return push(net, l, err);
}

int mts_net_matmul(mts_net *net, int other, mts_err *err)
{
    const mts_layer *a = cur(net);
    if (other < 0 || other >= net->n) return mts_fail(err, MTS_EINVAL, "net %s: matmul of unknown node %d", net->name, other);
    const mts_layer *b = &net->l[other];
    if (a->c != 1 || b->c != 1 || a->w != b->h)
        return mts_fail(err, MTS_EINVAL, "net %s: matmul of 1x%dx%d by %dx%dx%d", net->name, a->h, a->w, b->c, b->h,
                        b->w);
    mts_layer l = {.kind = MTS_L_MATMUL, .in0 = net->cursor, .in1 = other, .c = 1, .h = a->h, .w = b->w};
    return push(net, l, err);
}

/* ------------------------------------------------ transformer nodes */

static int need_tokens(mts_net *net, const char *what, mts_err *err)
{
    const mts_layer *in = cur(net);
    if (in->c != 1)
        return mts_fail(err, MTS_EINVAL, "net %s: %s needs tokens (1 x T x D), not %dx%dx%d", net->name, what, in->c,
                        in->h, in->w);
    return MTS_OK;
}

int mts_net_patchify(mts_net *net, int p, mts_err *err)
{
    const mts_layer *in = cur(net);
    if (p < 1 || in->h % p || in->w % p)
        return mts_fail(err, MTS_EINVAL, "net %s: %dx%d patches do not tile a %dx%d input", net->name, p, p, in->h,
                        in->w);
    mts_layer l = {.kind = MTS_L_PATCHIFY, .in0 = net->cursor, .in1 = -1, .c = 1, .h = (in->h / p) * (in->w / p),
                   .w = in->c * p * p, .k = p};
    return push(net, l, err);
}

int mts_net_tokdense(mts_net *net, int units, mts_err *err)
{
    int rc = need_tokens(net, "a token dense layer", err);
    if (rc != MTS_OK) return rc;
    const mts_layer *in = cur(net);
    if (units < 1) return mts_fail(err, MTS_EINVAL, "net %s: token dense with %d units", net->name, units);
    mts_layer l = {.kind = MTS_L_TOKDENSE, .in0 = net->cursor, .in1 = -1, .c = 1, .h = in->h, .w = units,
                   .units = units};
    l.nweight = (size_t)units * in->w;
    l.np = l.nweight + (size_t)units;
    return push(net, l, err);
}

int mts_net_tokens(mts_net *net, int cls, mts_err *err)
{
    int rc = need_tokens(net, "a position embedding", err);
    if (rc != MTS_OK) return rc;
    const mts_layer *in = cur(net);
    cls = cls ? 1 : 0;
    mts_layer l = {.kind = MTS_L_TOKENS, .in0 = net->cursor, .in1 = -1, .c = 1, .h = in->h + cls, .w = in->w,
                   .k = cls};
    l.np = (size_t)(in->h + 2 * cls) * in->w; /* pos[T'][D], then cls[D] */
    return push(net, l, err);
}

int mts_net_layernorm(mts_net *net, mts_err *err)
{
    const mts_layer *in = cur(net);
    mts_layer l = {.kind = MTS_L_LAYERNORM, .in0 = net->cursor, .in1 = -1, .c = in->c, .h = in->h, .w = in->w};
    l.np = 2 * (size_t)in->w; /* gamma, beta: no weight decay */
    return push(net, l, err);
}

int mts_net_gelu(mts_net *net, mts_err *err) { return same_shape(net, MTS_L_GELU, err); }
int mts_net_softmax(mts_net *net, mts_err *err) { return same_shape(net, MTS_L_SOFTMAX, err); }

int mts_net_attn_qk(mts_net *net, int heads, mts_err *err)
{
    int rc = need_tokens(net, "attention", err);
    if (rc != MTS_OK) return rc;
    const mts_layer *in = cur(net);
    if (heads < 1 || in->w % (3 * heads))
        return mts_fail(err, MTS_EINVAL, "net %s: %d heads do not divide Q|K|V tokens of width %d", net->name, heads,
                        in->w);
    mts_layer l = {.kind = MTS_L_ATTN_QK, .in0 = net->cursor, .in1 = -1, .c = heads, .h = in->h, .w = in->h,
                   .units = heads};
    return push(net, l, err);
}

int mts_net_attn_av(mts_net *net, int qkv, mts_err *err)
{
    const mts_layer *a = cur(net);
    if (qkv < 0 || qkv >= net->n) return mts_fail(err, MTS_EINVAL, "net %s: attention of unknown node %d", net->name, qkv);
    const mts_layer *v = &net->l[qkv];
    if (v->c != 1 || a->h != v->h || a->w != v->h || v->w % (3 * a->c))
        return mts_fail(err, MTS_EINVAL, "net %s: attention probabilities %dx%dx%d do not fit Q|K|V tokens 1x%dx%d",
                        net->name, a->c, a->h, a->w, v->h, v->w);
    mts_layer l = {.kind = MTS_L_ATTN_AV, .in0 = net->cursor, .in1 = qkv, .c = 1, .h = v->h, .w = v->w / 3,
                   .units = a->c};
    return push(net, l, err);
}

int mts_net_tokpool(mts_net *net, int mode, mts_err *err)
{
    int rc = need_tokens(net, "token pooling", err);
    if (rc != MTS_OK) return rc;
    const mts_layer *in = cur(net);
    if (mode != MTS_TOKPOOL_MEAN && mode != MTS_TOKPOOL_CLS)
        return mts_fail(err, MTS_EINVAL, "net %s: token pooling mode %d", net->name, mode);
    mts_layer l = {.kind = MTS_L_TOKPOOL, .in0 = net->cursor, .in1 = -1, .c = in->w, .h = 1, .w = 1, .k = mode};
    return push(net, l, err);
}

int mts_net_set_name(mts_net *net, int node, const char *name, mts_err *err)
{
    if (node < 0 || node >= net->n) return mts_fail(err, MTS_EINVAL, "net %s: name for unknown node %d", net->name, node);
    if (strlen(name) >= sizeof net->l[node].name)
        return mts_fail(err, MTS_EINVAL, "net %s: layer name '%s' is too long", net->name, name);
    snprintf(net->l[node].name, sizeof net->l[node].name, "%s", name);
    return node;
}

/* Appends one node named PREFIX.SUFFIX (the builder's result passes through). */
static int named(mts_net *net, int node, const char *prefix, const char *suffix, mts_err *err)
{
    char nm[64];
    if (node < 0) return node;
    snprintf(nm, sizeof nm, "%s.%s", prefix, suffix);
    return mts_net_set_name(net, node, nm, err);
}

int mts_net_mhsa(mts_net *net, int heads, const char *prefix, mts_err *err)
{
    int rc = need_tokens(net, "attention", err);
    if (rc != MTS_OK) return rc;
    int D = cur(net)->w, qkv;
    if ((qkv = named(net, mts_net_tokdense(net, 3 * D, err), prefix, "qkv", err)) < 0) return qkv;
    if ((rc = named(net, mts_net_attn_qk(net, heads, err), prefix, "qk", err)) < 0 ||
        (rc = named(net, mts_net_softmax(net, err), prefix, "softmax", err)) < 0 ||
        (rc = named(net, mts_net_attn_av(net, qkv, err), prefix, "av", err)) < 0)
        return rc;
    return named(net, mts_net_tokdense(net, D, err), prefix, "proj", err);
}

static const char *const kind_names[] = {"input",   "dense",   "conv",     "maxpool",  "avgpool", "gap",
                                         "relu",    "bn",      "add",      "flatten",  "matmul",  "tokdense",
                                         "layernorm", "gelu",  "softmax",  "attn_qk",  "attn_av", "patchify",
                                         "tokens",  "tokpool"};

const char *mts_layer_kind_name(mts_layer_kind k)
{
    return (unsigned)k < sizeof kind_names / sizeof kind_names[0] ? kind_names[k] : "?";
}

int mts_layer_multiplies(const mts_layer *l)
{
    return l->kind == MTS_L_DENSE || l->kind == MTS_L_CONV || l->kind == MTS_L_MATMUL || l->kind == MTS_L_TOKDENSE ||
           l->kind == MTS_L_ATTN_QK || l->kind == MTS_L_ATTN_AV;
}

void mts_net_layer_name(const mts_net *net, int node, char *buf, size_t n)
{
    const mts_layer *l = &net->l[node];
    if (l->name[0]) {
        snprintf(buf, n, "%s", l->name);
        return;
    }
    int ord = 0;
    for (int i = 0; i <= node; i++) ord += net->l[i].kind == l->kind;
    snprintf(buf, n, "%s%d", mts_layer_kind_name(l->kind), ord);
}

int mts_net_match(const mts_net *net, const char *pattern, int *match)
{
    int count = 0;
    for (int i = 1; i < net->n; i++) {
        char nm[64];
        if (!mts_layer_multiplies(&net->l[i])) continue;
        mts_net_layer_name(net, i, nm, sizeof nm);
        if (!fnmatch(pattern, nm, 0)) {
            match[i] = 1;
            count++;
        }
    }
    return count;
}

uint64_t mts_net_layer_macs(const mts_net *net, int node)
{
    const mts_layer *l = &net->l[node];
    if (!mts_layer_multiplies(l)) return 0;
    if (l->kind == MTS_L_CONV) return (uint64_t)l->nweight * l->h * l->w;
    if (l->kind == MTS_L_DENSE) return l->nweight;
    if (l->kind == MTS_L_TOKDENSE) return (uint64_t)l->nweight * l->h;
    const mts_layer *a = &net->l[l->in0];
    if (l->kind == MTS_L_MATMUL) return (uint64_t)a->h * a->w * l->w;
    /* attention: H heads of T x T x dh */
    if (l->kind == MTS_L_ATTN_QK) return (uint64_t)l->h * l->w * (a->w / 3);
    return (uint64_t)l->h * l->h * l->w;
}

/* Kaiming uniform (bound sqrt(6/fan_in); Xavier for token dense layers), one RNG stream per layer so that
 * adding a layer does not change the others' initial weights. */
static void init_params(mts_net *net, uint64_t seed)
{
    for (int i = 1; i < net->n; i++) {
        mts_layer *l = &net->l[i];
        float *p = net->param + l->poff;
        if (l->kind == MTS_L_DENSE || l->kind == MTS_L_CONV || l->kind == MTS_L_TOKDENSE) {
            size_t fan = l->nweight / (size_t)(l->kind == MTS_L_CONV ? l->g.cout : l->units);
            /* token dense layers (transformers): Xavier uniform, bound
             * sqrt(6/(fan_in+fan_out)), as ViT; keeps the attention logits
             * small at the start */
            float bound = l->kind == MTS_L_TOKDENSE ? sqrtf(6.0f / (float)(fan + (size_t)l->units))
                                                    : sqrtf(6.0f / (float)fan);
            mts_rng r = {mts_rng_derive(seed, (uint64_t)i)};
            for (size_t j = 0; j < l->nweight; j++) p[j] = (2.0f * mts_rng_uniform(&r) - 1.0f) * bound;
            memset(p + l->nweight, 0, sizeof(float) * (l->np - l->nweight));
        } else if (l->kind == MTS_L_BN) {
            for (int c = 0; c < l->c; c++) {
                p[c] = 1.0f;
                p[l->c + c] = 0.0f;
                net->state[l->soff + c] = 0.0f;
                net->state[l->soff + l->c + c] = 1.0f;
            }
        } else if (l->kind == MTS_L_LAYERNORM) {
            for (int d = 0; d < l->w; d++) {
                p[d] = 1.0f;
                p[l->w + d] = 0.0f;
            }
        } else if (l->kind == MTS_L_TOKENS) {
            size_t npos = (size_t)l->h * l->w; /* the class token starts at 0 */
            mts_rng r = {mts_rng_derive(seed, (uint64_t)i)};
            for (size_t j = 0; j < npos; j++) p[j] = (2.0f * mts_rng_uniform(&r) - 1.0f) * POS_INIT;
            memset(p + npos, 0, sizeof(float) * (l->np - npos));
        }
    }
}

/* Pairs each BN node, and each residual add of two other nodes, with the
 * ReLU that is its only reader (ResNet's conv - BN - ReLU and add - ReLU):
 * the node then writes the ReLU's output and takes the ReLU's backward
 * into its own (bn.c, act.c), passes over the activations fewer each way.
 * The node's own y and dy are then never written. */
static void fuse_relu(mts_net *net)
{
    for (int i = 1; i < net->n; i++) {
        mts_layer *b = &net->l[i];
        int readers = 0, relu = 0;
        for (int j = i + 1; j < net->n; j++) {
            const mts_layer *r = &net->l[j];
            readers += (r->in0 == i) + (r->in1 == i);
            if (r->kind == MTS_L_RELU && r->in0 == i) relu = j;
        }
        int add = b->kind == MTS_L_ADD && b->in0 > 0 && b->in1 > 0 && b->in0 != b->in1;
        if ((b->kind == MTS_L_BN || add) && readers == 1 && relu) {
            b->fused = relu;
            net->l[relu].fused = 1;
        }
    }
}

int mts_net_build(mts_net *net, int batch, uint64_t seed, mts_err *err)
{
    if (net->built) return mts_fail(err, MTS_EINVAL, "net %s: built twice", net->name);
    if (batch < 1) return mts_fail(err, MTS_EINVAL, "net %s: batch %d", net->name, batch);
    size_t np = 0, ns = 0;
    for (int i = 0; i < net->n; i++) {
        net->l[i].poff = np;
        np += net->l[i].np;
        net->l[i].soff = ns;
        ns += net->l[i].ns;
    }
    /* the observers after every BN state, so an older checkpoint's state is a prefix */
    size_t nq = 0;
    for (int i = 0; i < net->n; i++)
        if (quantized_kind(net->l[i].kind)) {
            net->l[i].qoff = ns + nq;
            nq += MTS_QAT_STATE;
        }
    net->nparam = np;
    net->nstate = ns + nq;
    net->nqstate = nq;
    ns += nq;
    net->batch = batch;
    net->param = calloc(np ? np : 1, sizeof(float));
    net->grad = calloc(np ? np : 1, sizeof(float));
    net->state = calloc(ns ? ns : 1, sizeof(float));
    if (!net->param || !net->grad || !net->state) goto oom;
    for (int i = 0; i < net->n; i++) {
        mts_layer *l = &net->l[i];
        size_t sz = node_size(l) * (size_t)batch;
        l->y = calloc(sz, sizeof(float));
        l->dy = calloc(sz, sizeof(float));
        if (!l->y || !l->dy) goto oom;
        if (l->kind == MTS_L_BN && !(l->aux2 = calloc((size_t)l->c * 2, sizeof(float)))) goto oom;
        if (l->kind == MTS_L_MAXPOOL && !(l->argmax = calloc(sz, sizeof(int32_t)))) goto oom;
        if (l->kind == MTS_L_LAYERNORM) {
            l->aux = calloc(sz, sizeof(float));
            l->aux2 = calloc((size_t)batch * l->c * l->h, sizeof(float));
            if (!l->aux || !l->aux2) goto oom;
        }
    }
    fuse_relu(net);
    net->built = 1;
    init_params(net, seed);
    return MTS_OK;
oom:
    return mts_fail(err, MTS_ENOMEM, "net %s: out of memory for %zu parameters at batch %d", net->name, np, batch);
}

const float *mts_net_output(const mts_net *net) { return net->l[net->n - 1].y; }
int mts_net_outsize(const mts_net *net) { return (int)node_size(&net->l[net->n - 1]); }

/* The context of node i: its own (per-layer multipliers) or the net's. */
static const mts_nn_ctx *node_ctx(const mts_nn_ctx *ctx, int i)
{
    return ctx->node_ctx && ctx->node_ctx[i] ? ctx->node_ctx[i] : ctx;
}

int mts_net_forward(mts_net *net, const mts_nn_ctx *ctx, int train, int N, const float *x, mts_err *err)
{
    if (!net->built || N < 1 || N > net->batch)
        return mts_fail(err, MTS_EINVAL, "net %s: forward of %d samples (capacity %d)", net->name, N, net->batch);
    memcpy(net->l[0].y, x, sizeof(float) * node_size(&net->l[0]) * (size_t)N);
    char tapname[64]; /* the GEMM tap names layers as --mul-layer does (mts_net_layer_name) */
    const mts_nn_ctx *ctx0 = ctx;
    for (int i = 1; i < net->n; i++) {
        mts_layer *l = &net->l[i];
        ctx = node_ctx(ctx0, i);
        const mts_layer *a = &net->l[l->in0];
        const float *w = net->param + l->poff;
        size_t sz = node_size(l) * (size_t)N;
        int rc = MTS_OK;
        if (ctx->tap) {
            int gemm = mts_layer_multiplies(l);
            if (gemm) mts_net_layer_name(net, i, tapname, sizeof tapname);
            ctx->tap->cur = gemm ? tapname : NULL;
            ctx->tap->batch = N;
        }
        mts_qparam qp;
        const mts_qparam *qa = node_qact(net, l, ctx, train, a->y, node_size(a) * (size_t)N, &qp);
        switch (l->kind) {
        case MTS_L_DENSE:
            rc = qa ? mts_qdense_forward(ctx, qa, N, (int)node_size(a), l->units, a->y, w, w + l->nweight, l->y, err)
                    : mts_dense_forward(ctx, N, (int)node_size(a), l->units, a->y, w, w + l->nweight, l->y, err);
            break;
        case MTS_L_CONV:
            rc = qa ? mts_qconv2d_forward(ctx, qa, &l->g, N, a->y, w, w + l->nweight, l->y, err)
                    : mts_conv2d_forward(ctx, &l->g, N, a->y, w, w + l->nweight, l->y, err);
            break;
        case MTS_L_MAXPOOL: mts_maxpool_forward(N, a->c, a->h, a->w, l->k, l->stride, a->y, l->y, l->argmax); break;
        case MTS_L_AVGPOOL: mts_avgpool_forward(N, a->c, a->h, a->w, l->k, l->stride, a->y, l->y); break;
        case MTS_L_GAP: mts_gap_forward(N, a->c, a->h * a->w, a->y, l->y); break;
        case MTS_L_RELU:
            if (!l->fused) mts__relu_forward_t(nn_threads(ctx), sz, a->y, l->y); /* else: its BN or add wrote it */
            break;
        case MTS_L_BN:
            mts__bn_forward_t(nn_threads(ctx), train, l->fused > 0, N, l->c, l->h * l->w, a->y, w, w + l->c,
                              net->state + l->soff, net->state + l->soff + l->c, BN_MOMENTUM, BN_EPS,
                              l->fused ? net->l[l->fused].y : l->y, NULL, l->aux2, l->aux2 + l->c);
            break;
        case MTS_L_ADD:
            if (l->fused) mts__add_relu_t(nn_threads(ctx), sz, a->y, net->l[l->in1].y, net->l[l->fused].y);
            else mts__add_t(nn_threads(ctx), sz, a->y, net->l[l->in1].y, l->y);
            break;
        case MTS_L_FLATTEN: memcpy(l->y, a->y, sizeof(float) * sz); break;
        case MTS_L_MATMUL:
            rc = mts_matmul_forward(ctx, N, a->h, a->w, l->w, a->y, net->l[l->in1].y, l->y, err);
            break;
        case MTS_L_TOKDENSE:
            rc = qa ? mts_qdense_forward(ctx, qa, N * a->h, a->w, l->units, a->y, w, w + l->nweight, l->y, err)
                    : mts_dense_forward(ctx, N * a->h, a->w, l->units, a->y, w, w + l->nweight, l->y, err);
            break;
        case MTS_L_LAYERNORM:
            mts__layernorm_forward_t(nn_threads(ctx), N * l->c * l->h, l->w, a->y, w, w + l->w, LN_EPS, l->y,
                                     l->aux, l->aux2);
            break;
        case MTS_L_GELU: mts__gelu_forward_t(nn_threads(ctx), sz, a->y, l->y); break;
        case MTS_L_SOFTMAX: mts__softmax_forward_t(nn_threads(ctx), N * l->c * l->h, l->w, a->y, l->y); break;
        case MTS_L_ATTN_QK: {
            int dh = a->w / 3 / l->units;
            rc = mts_attn_qk_forward(ctx, N, l->h, l->units, dh, 1.0f / sqrtf((float)dh), a->y, l->y, err);
            break;
        }
        case MTS_L_ATTN_AV:
            rc = mts_attn_av_forward(ctx, N, l->h, l->units, l->w / l->units, a->y, net->l[l->in1].y, l->y, err);
            break;
        case MTS_L_PATCHIFY: mts_patchify_forward(N, a->c, a->h, a->w, l->k, a->y, l->y); break;
        case MTS_L_TOKENS:
            mts_tokens_forward(N, a->h, a->w, l->k ? w + (size_t)l->h * l->w : NULL, w, a->y, l->y);
            break;
        case MTS_L_TOKPOOL: mts_tokpool_forward(N, a->h, a->w, l->k, a->y, l->y); break;
        default: break;
        }
        if (ctx->tap) ctx->tap->cur = NULL;
        if (rc != MTS_OK) return rc;
    }
    return MTS_OK;
}

/* 1 when node l's input gradient (with backward provider p) is never -0:
 * sums that start at +0 (the GEMMs of our kernels, col2im, the pools'
 * scatter-adds into zeros). Such a gradient written straight into a zeroed
 * dy needs no plus_zero; OpenBLAS's sums are its own. */
static int dx_never_neg_zero(const mts_layer *l, const mts_provider *p)
{
    switch (l->kind) {
    case MTS_L_CONV:
    case MTS_L_MAXPOOL:
    case MTS_L_AVGPOOL: return 1;
    case MTS_L_DENSE:
    case MTS_L_TOKDENSE:
    case MTS_L_MATMUL: return p->kind != MTS_PROV_BLAS;
    default: return 0;
    }
}

/* Adds the gradient g (n floats) into node b's dy in the documented way: the
 * first contribution of a pass is stored as +0 + g (dy was never zeroed),
 * later ones are added, in the order they come. */
static void add_grad(int threads, mts_layer *b, unsigned char *seen, int node, const float *g, size_t n)
{
    if (!seen[node]) { /* dy = +0 + g */
        memset(b->dy, 0, sizeof(float) * n);
        seen[node] = 1;
    }
    mts__acc_t(threads, n, b->dy, g);
}

/* Every node's dy is the sum of its consumers' contributions in the order
 * the pass reaches them (from the last node back), starting from +0. A node
 * whose dy has no contribution yet gets the first one written straight into
 * it (no zeroing pass, no copy from scratch); later ones go through scratch
 * and are added. Same bits as zeroing every dy and adding each in turn. */
int mts_net_backward(mts_net *net, const mts_nn_ctx *ctx, int N, const float *x, const float *dlast,
                     mts_err *err)
{
    (void)x; /* the input is kept in node 0 by the forward pass */
    if (!net->built || N < 1 || N > net->batch)
        return mts_fail(err, MTS_EINVAL, "net %s: backward of %d samples (capacity %d)", net->name, N, net->batch);
    size_t maxsz = 0;
    for (int i = 0; i < net->n; i++) {
        size_t s = node_size(&net->l[i]) * (size_t)N;
        if (s > maxsz) maxsz = s;
    }
    float *tmp = malloc(sizeof(float) * maxsz * 2);
    unsigned char *seen = calloc((size_t)net->n, 1);
    if (!tmp || !seen) {
        free(tmp);
        free(seen);
        return mts_fail(err, MTS_ENOMEM, "net %s: out of memory in backward", net->name);
    }
    memcpy(net->l[net->n - 1].dy, dlast, sizeof(float) * node_size(&net->l[net->n - 1]) * (size_t)N);
    seen[net->n - 1] = 1;
    float *tmp2 = tmp + maxsz;
    int rc = MTS_OK;
    const mts_nn_ctx *ctx0 = ctx;
    for (int i = net->n - 1; i >= 1 && rc == MTS_OK; i--) {
        mts_layer *l = &net->l[i];
        ctx = node_ctx(ctx0, i);
        mts_layer *a = &net->l[l->in0];
        const float *w = net->param + l->poff;
        float *g = net->grad + l->poff;
        size_t asz = node_size(a) * (size_t)N, sz = node_size(l) * (size_t)N;
        /* no consumer gave this node a gradient: zero (a BN or add paired
         * with its ReLU reads the ReLU's instead; the ReLU's own is zeroed) */
        if (!seen[i] && !(l->fused && l->kind != MTS_L_RELU)) {
            memset(l->dy, 0, sizeof(float) * sz);
            seen[i] = 1;
        }
        /* the input image needs no gradient; a first contribution goes
         * straight into the input's dy (not when the node reads it twice) */
        int direct = l->in0 > 0 && !seen[l->in0] && l->in1 != l->in0;
        float *dx = l->in0 > 0 ? (direct ? a->dy : tmp) : NULL;
        const int T = nn_threads(ctx);
        int pz = 0; /* the op made its direct output +0 + dx itself */
        mts_qparam qp; /* the forward's quantizer: the observer is not moved again */
        const mts_qparam *qa = node_qact(net, l, ctx, 0, a->y, asz, &qp);
        switch (l->kind) {
        case MTS_L_DENSE:
            rc = qa ? mts_qdense_backward(ctx, qa, N, (int)node_size(a), l->units, a->y, w, l->dy, dx, g,
                                          g + l->nweight, err)
                    : mts_dense_backward(ctx, N, (int)node_size(a), l->units, a->y, w, l->dy, dx, g, g + l->nweight,
                                         err);
            break;
        case MTS_L_CONV:
            rc = qa ? mts_qconv2d_backward(ctx, qa, &l->g, N, a->y, w, l->dy, dx, g, g + l->nweight, err)
                    : mts_conv2d_backward(ctx, &l->g, N, a->y, w, l->dy, dx, g, g + l->nweight, err);
            break;
        case MTS_L_MAXPOOL:
            if (dx) mts_maxpool_backward(N, a->c, a->h, a->w, l->k, l->stride, l->dy, l->argmax, dx);
            break;
        case MTS_L_AVGPOOL:
            if (dx) mts_avgpool_backward(N, a->c, a->h, a->w, l->k, l->stride, l->dy, dx);
            break;
        case MTS_L_GAP:
            if (dx) mts_gap_backward(N, a->c, a->h * a->w, l->dy, dx);
            break;
        case MTS_L_RELU:
            if (l->fused) dx = NULL; /* its BN or add takes this backward into its own */
            else if (dx) mts__relu_backward_t(T, sz, l->y, l->dy, dx, pz = direct);
            break;
        case MTS_L_BN: {
            const mts_layer *r = l->fused ? &net->l[l->fused] : NULL;
            mts__bn_backward_t(T, N, l->c, l->h * l->w, r ? r->dy : l->dy, r ? r->y : NULL, w, NULL, a->y,
                               l->aux2 + l->c, l->aux2, dx, g, g + l->c, pz = direct);
            break;
        }
        case MTS_L_ADD:
            if (l->fused && direct) {
                /* paired with its ReLU: both inputs' gradients from the ReLU's in one pass */
                const mts_layer *r = &net->l[l->fused];
                mts_layer *b = &net->l[l->in1];
                mts__add_relu_backward_t(T, sz, r->y, r->dy, dx, b->dy, !seen[l->in1]);
                seen[l->in1] = 1;
                pz = 1;
                break;
            }
            if (l->fused) mts__relu_backward_t(T, sz, net->l[l->fused].y, net->l[l->fused].dy, l->dy, 1);
            if (dx && direct) mts__copy_pz_t(T, sz, l->dy, dx);
            else if (dx) memcpy(dx, l->dy, sizeof(float) * sz);
            pz = direct;
            if (l->in1 > 0) add_grad(T, &net->l[l->in1], seen, l->in1, l->dy, sz);
            break;
        case MTS_L_FLATTEN:
            if (dx) memcpy(dx, l->dy, sizeof(float) * sz);
            break;
        case MTS_L_MATMUL: {
            mts_layer *b = &net->l[l->in1];
            rc = mts_matmul_backward(ctx, N, a->h, a->w, l->w, a->y, b->y, l->dy, dx, l->in1 > 0 ? tmp2 : NULL, err);
            if (rc == MTS_OK && l->in1 > 0) add_grad(T, b, seen, l->in1, tmp2, node_size(b) * (size_t)N);
            break;
        }
        case MTS_L_TOKDENSE:
            rc = qa ? mts_qdense_backward(ctx, qa, N * a->h, a->w, l->units, a->y, w, l->dy, dx, g, g + l->nweight,
                                          err)
                    : mts_dense_backward(ctx, N * a->h, a->w, l->units, a->y, w, l->dy, dx, g, g + l->nweight, err);
            break;
        case MTS_L_LAYERNORM:
            mts__layernorm_backward_t(T, N * l->c * l->h, l->w, l->dy, w, l->aux, l->aux2, dx, g, g + l->w);
            break;
        case MTS_L_GELU:
            if (dx) mts__gelu_backward_t(T, sz, a->y, l->dy, dx);
            break;
        case MTS_L_SOFTMAX:
            if (dx) mts__softmax_backward_t(T, N * l->c * l->h, l->w, l->y, l->dy, dx);
            break;
        case MTS_L_ATTN_QK: {
            int dh = a->w / 3 / l->units;
            if (dx) rc = mts_attn_qk_backward(ctx, N, l->h, l->units, dh, 1.0f / sqrtf((float)dh), a->y, l->dy, dx, err);
            break;
        }
        case MTS_L_ATTN_AV: {
            mts_layer *b = &net->l[l->in1];
            rc = mts_attn_av_backward(ctx, N, l->h, l->units, l->w / l->units, a->y, b->y, l->dy, dx,
                                      l->in1 > 0 ? tmp2 : NULL, err);
            if (rc == MTS_OK && l->in1 > 0) add_grad(T, b, seen, l->in1, tmp2, node_size(b) * (size_t)N);
            break;
        }
        case MTS_L_PATCHIFY:
            if (dx) mts_patchify_backward(N, a->c, a->h, a->w, l->k, l->dy, dx);
            break;
        case MTS_L_TOKENS:
            mts_tokens_backward(N, a->h, a->w, l->k, l->dy, dx, g, l->k ? g + (size_t)l->h * l->w : NULL);
            break;
        case MTS_L_TOKPOOL:
            if (dx) mts_tokpool_backward(N, a->h, a->w, l->k, l->dy, dx);
            break;
        default: break;
        }
        if (rc != MTS_OK || !dx) continue;
        if (!direct) mts__acc_t(T, asz, a->dy, dx);
        else {
            if (!pz && !dx_never_neg_zero(l, ctx->bwd)) mts__plus_zero_t(T, asz, a->dy);
            seen[l->in0] = 1;
        }
    }
    free(tmp);
    free(seen);
    return rc;
}
