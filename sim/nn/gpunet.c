/* gpunet.c - device-resident training (nn_gpunet.h): mts_net_forward,
 * mts_net_backward, mts_opt_step and the batch loop of mts_train_epoch /
 * mts_evaluate over device buffers, node for node through the layer-op
 * twins of gpu.h (gpu/nn_ops.cu, gpu/nn_tx.cu). Each function below follows its CPU original line by
 * line (net.c, train.c, optim.c); where the CPU saves a pass (a first
 * gradient written straight into its destination), the same choice is made
 * here so that every value is the same sum in the same order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/clock.h"
#include "mantis/gpu.h"
#include "mantis/nn_gpunet.h"
#include "mantis/nn_train.h"
#include "nn_internal.h"

struct mts_gpunet {
    const mts_net *net;          /* shapes and offsets (the host copy's) */
    int batch;
    mts_gpu_gemm_plan *pf, *pb, *pt; /* forward, backward, test */
    mts_gpu_gemm_plan *pq;       /* an integer forward's float backward (qat.c's float_bwd) where pb is INT */
    mts_gpu_qat *qf, *qt;        /* the forward's and the test's integer tables (quantization-aware layers), or NULL */
    int int_bwd;                 /* mts_int_bwd of the quantization-aware layers */
    float *param, *grad, *m, *v, *state;
    uint8_t *wmask;              /* 1 where weight decay applies */
    float **y, **dy, **aux, **aux2;
    int32_t **argmax;
    float *tmp, *tmp2, *work;    /* gradient contributions (tmp2: a second input's); conv scratch */
    float *trx, *tex;            /* the data sets */
    uint8_t *try_, *tey, *labels;
    int32_t *order;
    int ntrain, ntest;
    unsigned char *seen;         /* per node, during backward */
    int profile;                 /* MANTIS_GPU_PROFILE set: time each node (mts_gpunet_profile) */
    int ste;                     /* dense layers' FMAq estimator (MTS_STE_IDENTITY: plain GEMMs) */
    double prof[MTS_L_TOKPOOL + 1][2]; /* seconds per node kind, forward / backward */
};

/* The profile's clock around one node: synchronised, so each node's time is
 * its own (a diagnostic: it costs the overlap of host and device). */
static double prof_now(const mts_gpunet *g)
{
    mts_err e;
    if (!g->profile) return 0.0;
    (void)mts_gpu_sync(&e);
    return mts_clock_now();
}

static size_t node_size(const mts_layer *l) { return (size_t)l->c * l->h * l->w; }

static int kind_ok(mts_layer_kind k)
{
    switch (k) {
    case MTS_L_INPUT:
    case MTS_L_DENSE:
    case MTS_L_CONV:
    case MTS_L_MAXPOOL:
    case MTS_L_AVGPOOL:
    case MTS_L_GAP:
    case MTS_L_RELU:
    case MTS_L_BN:
    case MTS_L_ADD:
    case MTS_L_FLATTEN:
    case MTS_L_MATMUL:
    case MTS_L_TOKDENSE:
    case MTS_L_LAYERNORM:
    case MTS_L_GELU:
    case MTS_L_SOFTMAX:
    case MTS_L_ATTN_QK:
    case MTS_L_ATTN_AV:
    case MTS_L_PATCHIFY:
    case MTS_L_TOKENS:
    case MTS_L_TOKPOOL: return 1;
    default: return 0;
    }
}

static int prov_ok(const mts_provider *p, const char *what, mts_err *err)
{
    if (!p) return mts_fail(err, MTS_EUNSUPPORTED, "no %s provider", what);
    mts_err e;
    if (mts_gpu_supports(p, &e) != MTS_OK) return mts_fail(err, MTS_EUNSUPPORTED, "%s provider: %s", what, e.msg);
    return MTS_OK;
}

static int has_node_ctx(const mts_nn_ctx *c, int n)
{
    if (!c->node_ctx) return 0;
    for (int i = 0; i < n; i++)
        if (c->node_ctx[i]) return 1;
    return 0;
}

int mts_gpunet_supports(const mts_net *net, const mts_nn_ctx *train, const mts_nn_ctx *eval, mts_err *err)
{
    for (int i = 0; i < net->n; i++)
        if (!kind_ok(net->l[i].kind)) {
            char nm[64];
            mts_net_layer_name(net, i, nm, sizeof nm);
            return mts_fail(err, MTS_EUNSUPPORTED, "layer %s (%s) has no device twin yet", nm,
                            mts_layer_kind_name(net->l[i].kind));
        }
    int rc;
    if (train && ((rc = prov_ok(train->fwd, "forward", err)) || (rc = prov_ok(train->bwd, "backward", err))))
        return rc;
    if ((rc = prov_ok(eval->fwd, "test", err))) return rc;
    if ((train && has_node_ctx(train, net->n)) || has_node_ctx(eval, net->n))
        return mts_fail(err, MTS_EUNSUPPORTED, "per-layer multipliers (--mul-layer)");
    if (train && train->tracer) return mts_fail(err, MTS_EUNSUPPORTED, "the operand trace (--trace-operands)");
    if ((train && train->tap) || eval->tap) return mts_fail(err, MTS_EUNSUPPORTED, "the GEMM tap");
    return MTS_OK;
}

/* ------------------------------------------------------------ open/close */

static int dalloc(void *pp, size_t bytes, mts_err *err)
{
    void **p = (void **)pp;
    return mts_gpu_alloc(p, bytes, err);
}

void mts_gpunet_close(mts_gpunet *g)
{
    if (!g) return;
    if (g->net)
        for (int i = 0; i < g->net->n; i++) {
            if (g->y && i > 0) mts_gpu_free(g->y[i]);
            if (g->dy) mts_gpu_free(g->dy[i]);
            if (g->aux) mts_gpu_free(g->aux[i]);
            if (g->aux2) mts_gpu_free(g->aux2[i]);
            if (g->argmax) mts_gpu_free(g->argmax[i]);
        }
    if (g->y) mts_gpu_free(g->y[0]);
    free(g->y);
    free(g->dy);
    free(g->aux);
    free(g->aux2);
    free(g->argmax);
    free(g->seen);
    void *bufs[] = {g->param, g->grad, g->m, g->v, g->state, g->wmask, g->tmp, g->tmp2, g->work,
                    g->trx, g->tex, g->try_, g->tey, g->labels, g->order};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) mts_gpu_free(bufs[i]);
    mts_gpu_plan_close(g->pf);
    mts_gpu_plan_close(g->pb);
    mts_gpu_plan_close(g->pt);
    mts_gpu_plan_close(g->pq);
    mts_gpu_qat_close(g->qf);
    mts_gpu_qat_close(g->qt);
    mts_gpu_scratch_release();
    free(g);
}

static int upload_set(const mts_dataset *d, int n, float **x, uint8_t **y, mts_err *err)
{
    size_t ss = (size_t)d->c * d->h * d->w;
    int rc;
    if ((rc = dalloc(x, ss * (size_t)n * sizeof(float), err)) || (rc = dalloc(y, (size_t)n, err)) ||
        (rc = mts_gpu_upload(*x, d->x, ss * (size_t)n * sizeof(float), err)) ||
        (rc = mts_gpu_upload(*y, d->y, (size_t)n, err)))
        return rc;
    return MTS_OK;
}

int mts_gpunet_open(mts_gpunet **out, const mts_net *net, const mts_opt *opt, const mts_provider *fwd,
                    const mts_provider *bwd, const mts_provider *test, int ste, int int_bwd,
                    const mts_dataset *train, int ntrain, const mts_dataset *test_set, int ntest, mts_err *err)
{
    *out = NULL;
    if (!net->built) return mts_fail(err, MTS_EINVAL, "gpunet: net %s is not built", net->name);
    mts_gpunet *g = calloc(1, sizeof *g);
    if (!g) return mts_fail(err, MTS_ENOMEM, "gpunet: out of memory");
    g->net = net;
    g->batch = net->batch;
    g->ste = train && fwd && fwd->fmaq ? ste : MTS_STE_IDENTITY;
    const char *pe = getenv("MANTIS_GPU_PROFILE");
    g->profile = pe && *pe && strcmp(pe, "0") != 0;
    g->ntrain = !train ? 0 : ntrain < train->n ? ntrain : train->n;
    g->ntest = ntest < test_set->n ? ntest : test_set->n;
    int n = net->n, rc;
    size_t np = net->nparam, B = (size_t)net->batch;
    g->y = calloc((size_t)n, sizeof *g->y);
    g->dy = calloc((size_t)n, sizeof *g->dy);
    g->aux = calloc((size_t)n, sizeof *g->aux);
    g->aux2 = calloc((size_t)n, sizeof *g->aux2);
    g->argmax = calloc((size_t)n, sizeof *g->argmax);
    g->seen = calloc((size_t)n, 1);
    uint8_t *mask = calloc(np ? np : 1, 1);
    if (!g->y || !g->dy || !g->aux || !g->aux2 || !g->argmax || !g->seen || !mask) {
        free(mask);
        mts_gpunet_close(g);
        return mts_fail(err, MTS_ENOMEM, "gpunet: out of memory");
    }
    for (int i = 0; i < n; i++) memset(mask + net->l[i].poff, 1, net->l[i].nweight);
    if ((train && ((rc = mts_gpu_plan_open(fwd, &g->pf, err)) || (rc = mts_gpu_plan_open(bwd, &g->pb, err)))) ||
        (rc = mts_gpu_plan_open(test, &g->pt, err)))
        goto fail;
    /* integer tables: the quantization-aware layers' tables (qat.c), and
     * the float backward of STE and TABLE (native FP32 when the backward
     * provider is an integer table, as qat.c's float_bwd) */
    g->int_bwd = int_bwd;
    if (train && fwd->kind == MTS_PROV_INT) {
        if ((rc = mts_gpu_qat_open(fwd->lut, int_bwd == MTS_INT_BWD_TABLE, &g->qf, err))) goto fail;
        if (int_bwd != MTS_INT_BWD_APPROX && bwd->kind == MTS_PROV_INT) {
            mts_provider native;
            memset(&native, 0, sizeof native);
            native.kind = MTS_PROV_NATIVE;
            if ((rc = mts_gpu_plan_open(&native, &g->pq, err))) goto fail;
        }
    }
    if (test->kind == MTS_PROV_INT && (rc = mts_gpu_qat_open(test->lut, 0, &g->qt, err))) goto fail;
    if ((rc = dalloc(&g->param, np * 4, err)) || (rc = dalloc(&g->state, net->nstate * 4, err)) ||
        (rc = mts_gpu_upload(g->param, net->param, np * 4, err)) ||
        (rc = mts_gpu_upload(g->state, net->state, net->nstate * 4, err)))
        goto fail;
    if (train && ((rc = dalloc(&g->grad, np * 4, err)) || (rc = dalloc(&g->m, np * 4, err)) ||
                  (rc = dalloc(&g->v, np * 4, err)) || (rc = dalloc(&g->wmask, np, err)) ||
                  (rc = mts_gpu_upload(g->m, opt->m, np * 4, err)) ||
                  (rc = mts_gpu_upload(g->v, opt->v, np * 4, err)) ||
                  (rc = mts_gpu_upload(g->wmask, mask, np, err))))
        goto fail;
    size_t maxsz = 0, work = 0;
    for (int i = 0; i < n; i++) {
        const mts_layer *l = &net->l[i];
        size_t sz = node_size(l) * B;
        if (sz > maxsz) maxsz = sz;
        if ((rc = dalloc(&g->y[i], sz * 4, err))) goto fail;
        if (train && i > 0 && (rc = dalloc(&g->dy[i], sz * 4, err))) goto fail;
        if (l->kind == MTS_L_BN &&
            ((rc = dalloc(&g->aux[i], sz * 4, err)) || (rc = dalloc(&g->aux2[i], (size_t)l->c * 4, err))))
            goto fail;
        if (l->kind == MTS_L_MAXPOOL && (rc = dalloc(&g->argmax[i], sz * 4, err))) goto fail;
        if (l->kind == MTS_L_LAYERNORM && /* xhat, and invstd per row (mts_net_build) */
            ((rc = dalloc(&g->aux[i], sz * 4, err)) || (rc = dalloc(&g->aux2[i], B * l->c * l->h * 4, err))))
            goto fail;
        if (l->kind == MTS_L_CONV) {
            size_t wk = mts_gpu_conv2d_work(&l->g, net->batch);
            if (wk > work) work = wk;
        }
    }
    if ((rc = dalloc(&g->work, work * 4, err)) || (rc = upload_set(test_set, g->ntest, &g->tex, &g->tey, err)))
        goto fail;
    if (train && ((rc = dalloc(&g->tmp, maxsz * 4, err)) || (rc = dalloc(&g->tmp2, maxsz * 4, err)) ||
                  (rc = dalloc(&g->labels, B, err)) ||
                  (rc = dalloc(&g->order, (size_t)(g->ntrain + 1) * 4, err)) ||
                  (rc = upload_set(train, g->ntrain, &g->trx, &g->try_, err))))
        goto fail;
    free(mask);
    *out = g;
    return MTS_OK;
fail:
    free(mask);
    mts_gpunet_close(g);
    return rc;
}

int mts_gpunet_download(const mts_gpunet *g, mts_net *net, mts_opt *opt, mts_err *err)
{
    size_t np = g->net->nparam;
    int rc = MTS_OK;
    if (net && ((rc = mts_gpu_download(net->param, g->param, np * 4, err)) ||
                (rc = mts_gpu_download(net->state, g->state, g->net->nstate * 4, err))))
        return rc;
    if (opt && g->m &&
        ((rc = mts_gpu_download(opt->m, g->m, np * 4, err)) || (rc = mts_gpu_download(opt->v, g->v, np * 4, err))))
        return rc;
    return MTS_OK;
}

/* ------------------------------------------------------------- passes */

/* mts_net_forward: x0 is the input batch (node 0's output) on the device. */
static int forward(mts_gpunet *g, const mts_gpu_gemm_plan *plan, const mts_gpu_qat *q, int train, int N,
                   const float *x0, mts_err *err)
{
    const mts_net *net = g->net;
    for (int i = 1; i < net->n; i++) {
        const mts_layer *l = &net->l[i], *a = &net->l[l->in0];
        const float *A = l->in0 ? g->y[l->in0] : x0, *w = g->param + l->poff;
        float *Y = g->y[i];
        size_t sz = node_size(l) * (size_t)N;
        const float *st = g->state + l->qoff;
        int rc = MTS_OK;
        /* the range observer of a layer that multiplies (net.c's node_qact) */
        if (train && (l->kind == MTS_L_DENSE || l->kind == MTS_L_CONV || l->kind == MTS_L_TOKDENSE) &&
            (rc = mts_gpu_qat_observe(g->state + l->qoff, A, node_size(a) * (size_t)N, err)))
            return rc;
        double t0 = prof_now(g);
        switch (l->kind) {
        case MTS_L_DENSE:
            rc = q ? mts_gpu_qdense_forward(q, st, N, (int)node_size(a), l->units, A, w, w + l->nweight, Y, err)
                   : mts_gpu_dense_forward(plan, N, (int)node_size(a), l->units, A, w, w + l->nweight, Y, err);
            break;
        case MTS_L_CONV:
            rc = q ? mts_gpu_qconv2d_forward(q, st, &l->g, N, A, w, w + l->nweight, Y, err)
                   : mts_gpu_conv2d_forward(plan, &l->g, N, A, w, w + l->nweight, Y, g->work, err);
            break;
        case MTS_L_MAXPOOL:
            rc = mts_gpu_maxpool_forward(N, a->c, a->h, a->w, l->k, l->stride, A, Y, g->argmax[i], err);
            break;
        case MTS_L_AVGPOOL: rc = mts_gpu_avgpool_forward(N, a->c, a->h, a->w, l->k, l->stride, A, Y, err); break;
        case MTS_L_GAP: rc = mts_gpu_gap_forward(N, a->c, a->h * a->w, A, Y, err); break;
        case MTS_L_RELU: rc = mts_gpu_relu_forward(sz, A, Y, err); break;
        case MTS_L_BN:
            rc = mts_gpu_bn_forward(train, N, l->c, l->h * l->w, A, w, w + l->c, g->state + l->soff,
                                    g->state + l->soff + l->c, BN_MOMENTUM, BN_EPS, Y, g->aux[i], g->aux2[i], err);
            break;
        case MTS_L_ADD: rc = mts_gpu_add(sz, A, g->y[l->in1], Y, err); break;
        case MTS_L_FLATTEN: rc = mts_gpu_copy(sz, A, Y, err); break;
        case MTS_L_MATMUL: rc = mts_gpu_matmul_forward(plan, N, a->h, a->w, l->w, A, g->y[l->in1], Y, err); break;
        case MTS_L_TOKDENSE:
            rc = q ? mts_gpu_qdense_forward(q, st, N * a->h, a->w, l->units, A, w, w + l->nweight, Y, err)
                   : mts_gpu_dense_forward(plan, N * a->h, a->w, l->units, A, w, w + l->nweight, Y, err);
            break;
        case MTS_L_LAYERNORM:
            rc = mts_gpu_layernorm_forward(N * l->c * l->h, l->w, A, w, w + l->w, LN_EPS, Y, g->aux[i], g->aux2[i],
                                           err);
            break;
        case MTS_L_GELU: rc = mts_gpu_gelu_forward(sz, A, Y, err); break;
        case MTS_L_SOFTMAX: rc = mts_gpu_softmax_forward(N * l->c * l->h, l->w, A, Y, err); break;
        case MTS_L_ATTN_QK: {
            int dh = a->w / 3 / l->units;
            rc = mts_gpu_attn_qk_forward(plan, N, l->h, l->units, dh, 1.0f / sqrtf((float)dh), A, Y, err);
            break;
        }
        case MTS_L_ATTN_AV:
            rc = mts_gpu_attn_av_forward(plan, N, l->h, l->units, l->w / l->units, A, g->y[l->in1], Y, err);
            break;
        case MTS_L_PATCHIFY: rc = mts_gpu_patchify_forward(N, a->c, a->h, a->w, l->k, A, Y, err); break;
        case MTS_L_TOKENS:
            rc = mts_gpu_tokens_forward(N, a->h, a->w, l->k ? w + (size_t)l->h * l->w : NULL, w, A, Y, err);
            break;
        case MTS_L_TOKPOOL: rc = mts_gpu_tokpool_forward(N, a->h, a->w, l->k, A, Y, err); break;
        default: rc = mts_fail(err, MTS_EUNSUPPORTED, "gpunet: node %d has no device twin", i);
        }
        if (g->profile) g->prof[l->kind][0] += prof_now(g) - t0;
        if (rc != MTS_OK) return rc;
    }
    return MTS_OK;
}

/* net.c's add_grad: the first contribution of a pass is stored as +0 + g,
 * later ones are added in the order they come. */
static int add_grad(mts_gpunet *g, int node, const float *src, size_t n, mts_err *err)
{
    if (!g->seen[node]) {
        g->seen[node] = 1;
        return mts_gpu_copy_pz(n, src, g->dy[node], err);
    }
    return mts_gpu_acc(n, g->dy[node], src, err);
}

/* mts_net_backward from the last node's dy (the loss's gradient, written
 * there by the softmax twin). x0: the batch (node 0 needs no gradient). */
static int backward(mts_gpunet *g, int N, const float *x0, mts_err *err)
{
    const mts_net *net = g->net;
    memset(g->seen, 0, (size_t)net->n);
    g->seen[net->n - 1] = 1;
    for (int i = net->n - 1; i >= 1; i--) {
        const mts_layer *l = &net->l[i], *a = &net->l[l->in0];
        const float *A = l->in0 ? g->y[l->in0] : x0, *w = g->param + l->poff;
        float *gr = g->grad + l->poff, *DY = g->dy[i];
        size_t asz = node_size(a) * (size_t)N, sz = node_size(l) * (size_t)N;
        int rc = MTS_OK;
        if (!g->seen[i]) { /* no consumer gave this node a gradient: zero */
            if ((rc = mts_gpu_zero(sz, DY, err))) return rc;
            g->seen[i] = 1;
        }
        int direct = l->in0 > 0 && !g->seen[l->in0] && l->in1 != l->in0;
        float *dx = l->in0 > 0 ? (direct ? g->dy[l->in0] : g->tmp) : NULL;
        const float *st = g->state + l->qoff;
        /* the quantization-aware layers' backward plan (qat.c: the layer's
         * own for APPROX, else its float backward) */
        const mts_gpu_gemm_plan *qb = g->int_bwd != MTS_INT_BWD_APPROX && g->pq ? g->pq : g->pb;
        double t0 = prof_now(g);
        switch (l->kind) {
        case MTS_L_DENSE:
            if (g->qf) {
                rc = mts_gpu_qdense_backward(g->qf, g->int_bwd, qb, st, N, (int)node_size(a), l->units, A, w, DY, dx,
                                             gr, gr + l->nweight, err);
                break;
            }
            rc = g->ste != MTS_STE_IDENTITY
                     ? mts_gpu_dense_backward_ste(g->pf, g->pb, g->ste, N, (int)node_size(a), l->units, A, w, DY, dx,
                                                  gr, gr + l->nweight, err)
                     : mts_gpu_dense_backward(g->pb, N, (int)node_size(a), l->units, A, w, DY, dx, gr,
                                              gr + l->nweight, err);
            break;
        case MTS_L_CONV:
            rc = g->qf ? mts_gpu_qconv2d_backward(g->qf, g->int_bwd, qb, st, &l->g, N, A, w, DY, dx, gr,
                                                  gr + l->nweight, g->work, err)
                       : mts_gpu_conv2d_backward(g->pb, &l->g, N, A, w, DY, dx, gr, gr + l->nweight, g->work, err);
            break;
        case MTS_L_MAXPOOL:
            if (dx) rc = mts_gpu_maxpool_backward(N, a->c, a->h, a->w, l->k, l->stride, DY, g->argmax[i], dx, err);
            break;
        case MTS_L_AVGPOOL:
            if (dx) rc = mts_gpu_avgpool_backward(N, a->c, a->h, a->w, l->k, l->stride, DY, dx, err);
            break;
        case MTS_L_GAP:
            if (dx) rc = mts_gpu_gap_backward(N, a->c, a->h * a->w, DY, dx, err);
            break;
        case MTS_L_RELU:
            if (dx) rc = mts_gpu_relu_backward(sz, g->y[i], DY, dx, err);
            break;
        case MTS_L_BN:
            rc = mts_gpu_bn_backward(N, l->c, l->h * l->w, DY, w, g->aux[i], g->aux2[i], dx, gr, gr + l->c, err);
            break;
        case MTS_L_ADD:
            if (dx) rc = mts_gpu_copy(sz, DY, dx, err);
            if (rc == MTS_OK && l->in1 > 0) rc = add_grad(g, l->in1, DY, sz, err);
            break;
        case MTS_L_FLATTEN:
            if (dx) rc = mts_gpu_copy(sz, DY, dx, err);
            break;
        case MTS_L_MATMUL: {
            const mts_layer *b = &net->l[l->in1];
            rc = mts_gpu_matmul_backward(g->pb, N, a->h, a->w, l->w, A, g->y[l->in1], DY, dx,
                                         l->in1 > 0 ? g->tmp2 : NULL, err);
            if (rc == MTS_OK && l->in1 > 0) rc = add_grad(g, l->in1, g->tmp2, node_size(b) * (size_t)N, err);
            break;
        }
        case MTS_L_TOKDENSE:
            if (g->qf) {
                rc = mts_gpu_qdense_backward(g->qf, g->int_bwd, qb, st, N * a->h, a->w, l->units, A, w, DY, dx, gr,
                                             gr + l->nweight, err);
                break;
            }
            rc = g->ste != MTS_STE_IDENTITY
                     ? mts_gpu_dense_backward_ste(g->pf, g->pb, g->ste, N * a->h, a->w, l->units, A, w, DY, dx, gr,
                                                  gr + l->nweight, err)
                     : mts_gpu_dense_backward(g->pb, N * a->h, a->w, l->units, A, w, DY, dx, gr, gr + l->nweight,
                                              err);
            break;
        case MTS_L_LAYERNORM:
            rc = mts_gpu_layernorm_backward(N * l->c * l->h, l->w, DY, w, g->aux[i], g->aux2[i], dx, gr, gr + l->w,
                                            err);
            break;
        case MTS_L_GELU:
            if (dx) rc = mts_gpu_gelu_backward(sz, A, DY, dx, err);
            break;
        case MTS_L_SOFTMAX:
            if (dx) rc = mts_gpu_softmax_backward(N * l->c * l->h, l->w, g->y[i], DY, dx, err);
            break;
        case MTS_L_ATTN_QK: {
            int dh = a->w / 3 / l->units;
            if (dx)
                rc = mts_gpu_attn_qk_backward(g->pb, N, l->h, l->units, dh, 1.0f / sqrtf((float)dh), A, DY, dx, err);
            break;
        }
        case MTS_L_ATTN_AV: {
            const mts_layer *b = &net->l[l->in1];
            rc = mts_gpu_attn_av_backward(g->pb, N, l->h, l->units, l->w / l->units, A, g->y[l->in1], DY, dx,
                                          l->in1 > 0 ? g->tmp2 : NULL, err);
            if (rc == MTS_OK && l->in1 > 0) rc = add_grad(g, l->in1, g->tmp2, node_size(b) * (size_t)N, err);
            break;
        }
        case MTS_L_PATCHIFY:
            if (dx) rc = mts_gpu_patchify_backward(N, a->c, a->h, a->w, l->k, DY, dx, err);
            break;
        case MTS_L_TOKENS:
            rc = mts_gpu_tokens_backward(N, a->h, a->w, l->k, DY, dx, gr, l->k ? gr + (size_t)l->h * l->w : NULL, err);
            break;
        case MTS_L_TOKPOOL:
            if (dx) rc = mts_gpu_tokpool_backward(N, a->h, a->w, l->k, DY, dx, err);
            break;
        default: rc = mts_fail(err, MTS_EUNSUPPORTED, "gpunet: node %d has no device twin", i);
        }
        if (g->profile) g->prof[l->kind][1] += prof_now(g) - t0;
        if (rc != MTS_OK) return rc;
        if (!dx) continue;
        if (!direct) rc = mts_gpu_acc(asz, g->dy[l->in0], dx, err);
        else {
            /* net.c: a first gradient is +0 + dx, which the sums of conv,
             * pooling and our dense GEMMs already are (dx_never_neg_zero) */
            int never = l->kind == MTS_L_CONV || l->kind == MTS_L_MAXPOOL || l->kind == MTS_L_AVGPOOL ||
                        l->kind == MTS_L_DENSE || l->kind == MTS_L_TOKDENSE || l->kind == MTS_L_MATMUL;
            if (!never) rc = mts_gpu_copy_pz(asz, dx, dx, err);
            g->seen[l->in0] = 1;
        }
        if (rc != MTS_OK) return rc;
    }
    return MTS_OK;
}

/* mts_opt_step: the same bias corrections (FP64 on the host), one pass
 * over every parameter with the decay mask; opt->nonfinite from the device. */
static int opt_step(mts_gpunet *g, mts_opt *o, float lr, mts_err *err)
{
    size_t np = g->net->nparam;
    o->t++;
    double bc1 = 1.0 - pow(o->beta1, (double)o->t), bc2 = 1.0 - pow(o->beta2, (double)o->t);
    int rc = o->kind == MTS_OPT_ADAM
                 ? mts_gpu_adam_step(np, g->param, g->grad, g->m, g->v, g->wmask, lr, o->beta1, o->beta2, o->eps,
                                     o->wd, bc1, bc2, err)
                 : mts_gpu_sgd_step(np, g->param, g->grad, g->m, g->wmask, lr, o->momentum, o->wd, err);
    int bad = 0;
    if (rc == MTS_OK) rc = mts_gpu_nonfinite(np, g->param, &bad, err);
    o->nonfinite = bad != 0;
    return rc;
}

/* ------------------------------------------------------------- epochs */

int mts_gpunet_train_epoch(mts_gpunet *g, mts_net *net, mts_opt *opt, int n, int batch, uint64_t seed, int epoch,
                           float lr, void (*progress)(void *pctx, int done, int total), void *pctx,
                           mts_epoch_stats *st, mts_err *err)
{
    int classes = mts_net_outsize(net), last = net->n - 1;
    size_t ss = node_size(&net->l[0]);
    if (!g->pf) return mts_fail(err, MTS_EINVAL, "gpunet: opened for evaluation only");
    if (n > g->ntrain) n = g->ntrain;
    if (batch > g->batch) batch = g->batch;
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!order) return mts_fail(err, MTS_ENOMEM, "train: out of memory for the order of %d samples", n);
    mts_epoch_order(seed, epoch, n, order);
    int rc = mts_gpu_upload(g->order, order, sizeof(int32_t) * (size_t)n, err);
    free(order);
    double t0 = mts_clock_now(), loss = 0.0;
    long correct = 0;
    for (int b0 = 0; b0 < n && rc == MTS_OK; b0 += batch) {
        int N = n - b0 < batch ? n - b0 : batch, ok = 0;
        double bl = 0.0;
        if ((rc = mts_gpu_gather(N, ss, g->trx, g->try_, g->order + b0, g->y[0], g->labels, err)) ||
            (rc = forward(g, g->pf, g->qf, 1, N, g->y[0], err)) ||
            (rc = mts_gpu_softmax_ce(N, classes, g->y[last], g->labels, g->dy[last], &bl, &ok, err)))
            break;
        loss += bl * N;
        correct += ok;
        if ((rc = backward(g, N, g->y[0], err)) || (rc = opt_step(g, opt, lr, err)) ||
            /* the logits, for a caller that watches the loss (the driver's divergence check) */
            (rc = mts_gpu_download(net->l[last].y, g->y[last], sizeof(float) * (size_t)N * classes, err)))
            break;
        if (progress) progress(pctx, b0 + N, n);
    }
    if (rc == MTS_OK && st) mts__epoch_stats(st, t0, loss, correct, n, lr);
    return rc;
}

int mts_gpunet_evaluate(mts_gpunet *g, int n, double *acc, mts_err *err)
{
    const mts_net *net = g->net;
    int classes = mts_net_outsize(net);
    size_t ss = node_size(&net->l[0]);
    if (n > g->ntest) n = g->ntest;
    long correct = 0;
    for (int b0 = 0; b0 < n; b0 += g->batch) {
        int N = n - b0 < g->batch ? n - b0 : g->batch, ok = 0;
        int rc = forward(g, g->pt, g->qt, 0, N, g->tex + (size_t)b0 * ss, err);
        if (rc == MTS_OK)
            rc = mts_gpu_softmax_ce(N, classes, g->y[net->n - 1], g->tey + b0, NULL, NULL, &ok, err);
        if (rc != MTS_OK) return rc;
        correct += ok;
    }
    *acc = n ? (double)correct / n : 0.0;
    return MTS_OK;
}

size_t mts_gpunet_profile(const mts_gpunet *g, char *buf, size_t n)
{
    size_t k = 0;
    if (n) buf[0] = 0;
    if (!g || !g->profile) return 0;
    for (int i = 0; i <= MTS_L_TOKPOOL; i++) {
        if (g->prof[i][0] <= 0.0 && g->prof[i][1] <= 0.0) continue;
        int w = snprintf(buf + k, k < n ? n - k : 0, "%s%s fwd %.3f s bwd %.3f s", k ? ", " : "",
                         mts_layer_kind_name((mts_layer_kind)i), g->prof[i][0], g->prof[i][1]);
        if (w > 0) k += (size_t)w;
    }
    return k;
}
