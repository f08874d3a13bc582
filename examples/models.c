/* models.c - the built-in models, written with the nn_net.h building API:
 *   lenet300  LeNet-300-100 (ApproxTrain Table III): 784-300-100-10, ReLU
 *   lenet5    LeNet-5 (ApproxTrain): conv 6@5x5 pad 2, maxpool 2, conv 16@5x5,
 *             maxpool 2, dense 120-84-10, ReLU
 *   mlp1024   the accumulator paper's MNIST MLP (appendix C.3): 4 dense
 *             layers, hidden width 1024, ReLU
 *   resnet20  CIFAR ResNet-20 (He et al. 2016): 3 stages x 3 basic blocks of
 *             16/32/64 channels, BN, global average pool. Downsampling
 *             shortcuts are 1x1 conv + BN ("option B"), not the original's
 *             zero padding ("option A").
 *   resnet18  CIFAR ResNet-18 (ApproxTrain Table III; the CIFAR form of He
 *             et al.: 3x3 stem of 64 channels, no max pool): 4 stages x 2
 *             basic blocks of 64/128/256/512 channels, BN, global average
 *             pool, shortcuts as resnet20
 *   vit-tiny  a small Vision Transformer: 7x7 patches (16 tokens on 28x28),
 *             width 64, 4 heads, 4 pre-LN blocks with MLP 128 (GELU),
 *             learned position embedding, mean pooling, LayerNorm, dense
 * ResNet layers are named conv1, layerS.B.conv1/conv2/shortcut, fc; ViT
 * layers patch, blockB.attn.{qkv,qk,softmax,av,proj}, blockB.mlp.{fc1,fc2},
 * head (mantis train --model M --list-layers). */
#include <stdio.h>
#include <string.h>

#include "mantis/nn_net.h"
#include "mantis/nn_train.h"

#define TRY(x)                      \
    do {                            \
        int rc_ = (x);              \
        if (rc_ < 0) return rc_;    \
    } while (0)

static int lenet300(mts_net *n, int classes, mts_err *e)
{
    TRY(mts_net_dense(n, 300, e));
    TRY(mts_net_relu(n, e));
    TRY(mts_net_dense(n, 100, e));
    TRY(mts_net_relu(n, e));
    TRY(mts_net_dense(n, classes, e));
    return MTS_OK;
}

static int lenet5(mts_net *n, int classes, mts_err *e)
{
    TRY(mts_net_conv(n, 6, 5, 1, 2, e));
    TRY(mts_net_relu(n, e));
    TRY(mts_net_maxpool(n, 2, 2, e));
    TRY(mts_net_conv(n, 16, 5, 1, 0, e));
    TRY(mts_net_relu(n, e));
    TRY(mts_net_maxpool(n, 2, 2, e));
    TRY(mts_net_dense(n, 120, e));
    TRY(mts_net_relu(n, e));
    TRY(mts_net_dense(n, 84, e));
    TRY(mts_net_relu(n, e));
    TRY(mts_net_dense(n, classes, e));
    return MTS_OK;
}

static int mlp1024(mts_net *n, int classes, mts_err *e)
{
    for (int i = 0; i < 3; i++) {
        TRY(mts_net_dense(n, 1024, e));
        TRY(mts_net_relu(n, e));
    }
    TRY(mts_net_dense(n, classes, e));
    return MTS_OK;
}

/* Names node `node` "PREFIX.SUFFIX" (or PREFIX alone with suffix NULL). */
static int name(mts_net *n, int node, const char *prefix, const char *suffix, mts_err *e)
{
    char nm[64];
    if (node < 0) return node;
    if (suffix) snprintf(nm, sizeof nm, "%s.%s", prefix, suffix);
    else snprintf(nm, sizeof nm, "%s", prefix);
    return mts_net_set_name(n, node, nm, e);
}

/* conv-BN-ReLU-conv-BN + shortcut, then ReLU; convs named PREFIX.conv1,
 * PREFIX.conv2, PREFIX.shortcut. */
static int basic_block(mts_net *n, int ch, int stride, const char *prefix, mts_err *e)
{
    int in = n->cursor;
    int in_c = n->l[in].c;
    TRY(name(n, mts_net_conv(n, ch, 3, stride, 1, e), prefix, "conv1", e));
    TRY(mts_net_bn(n, e));
    TRY(mts_net_relu(n, e));
    TRY(name(n, mts_net_conv(n, ch, 3, 1, 1, e), prefix, "conv2", e));
    int main_out;
    TRY(main_out = mts_net_bn(n, e));
    int shortcut = in;
    if (stride != 1 || in_c != ch) {
        mts_net_set_cursor(n, in);
        TRY(name(n, mts_net_conv(n, ch, 1, stride, 0, e), prefix, "shortcut", e));
        TRY(shortcut = mts_net_bn(n, e));
    }
    mts_net_set_cursor(n, main_out);
    TRY(mts_net_add(n, shortcut, e));
    TRY(mts_net_relu(n, e));
    return MTS_OK;
}

/* CIFAR ResNet: 3x3 stem, `stages` stages of `blocks` basic blocks with
 * ch[s] channels (stride 2 at the start of every stage but the first), GAP, fc. */
static int resnet(mts_net *n, int stages, int blocks, const int *ch, int classes, mts_err *e)
{
    TRY(name(n, mts_net_conv(n, ch[0], 3, 1, 1, e), "conv1", NULL, e));
    TRY(mts_net_bn(n, e));
    TRY(mts_net_relu(n, e));
    for (int s = 0; s < stages; s++)
        for (int b = 0; b < blocks; b++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", s + 1, b);
            TRY(basic_block(n, ch[s], (s > 0 && b == 0) ? 2 : 1, prefix, e));
        }
    TRY(mts_net_gap(n, e));
    TRY(name(n, mts_net_dense(n, classes, e), "fc", NULL, e));
    return MTS_OK;
}

static int resnet20(mts_net *n, int classes, mts_err *e)
{
    static const int ch[3] = {16, 32, 64};
    return resnet(n, 3, 3, ch, classes, e);
}

static int resnet18(mts_net *n, int classes, mts_err *e)
{
    static const int ch[4] = {64, 128, 256, 512};
    return resnet(n, 4, 2, ch, classes, e);
}

/* Pre-LN transformer encoder: x + MHSA(LN(x)), then x + MLP(LN(x)). */
#define VIT_PATCH 7
#define VIT_WIDTH 64
#define VIT_HEADS 4
#define VIT_BLOCKS 4
#define VIT_MLP 128

static int vit_tiny(mts_net *n, int classes, mts_err *e)
{
    TRY(mts_net_patchify(n, VIT_PATCH, e));
    TRY(name(n, mts_net_tokdense(n, VIT_WIDTH, e), "patch", NULL, e));
    int x;
    TRY(x = mts_net_tokens(n, 0, e));
    for (int b = 0; b < VIT_BLOCKS; b++) {
        char p[32], q[40];
        snprintf(p, sizeof p, "block%d", b);
        TRY(name(n, mts_net_layernorm(n, e), p, "ln1", e));
        snprintf(q, sizeof q, "%s.attn", p);
        TRY(mts_net_mhsa(n, VIT_HEADS, q, e));
        TRY(x = mts_net_add(n, x, e));
        TRY(name(n, mts_net_layernorm(n, e), p, "ln2", e));
        TRY(name(n, mts_net_tokdense(n, VIT_MLP, e), p, "mlp.fc1", e));
        TRY(mts_net_gelu(n, e));
        TRY(name(n, mts_net_tokdense(n, VIT_WIDTH, e), p, "mlp.fc2", e));
        TRY(x = mts_net_add(n, x, e));
    }
    TRY(name(n, mts_net_layernorm(n, e), "norm", NULL, e));
    TRY(mts_net_tokpool(n, MTS_TOKPOOL_MEAN, e));
    TRY(name(n, mts_net_dense(n, classes, e), "head", NULL, e));
    return MTS_OK;
}

static const struct {
    const char *name;
    int (*build)(mts_net *, int, mts_err *);
} models[] = {{"lenet300", lenet300}, {"lenet5", lenet5},     {"mlp1024", mlp1024},
              {"resnet20", resnet20}, {"resnet18", resnet18}, {"vit-tiny", vit_tiny}};

/* The recipe each model trains well with (docs/training.md, "Default
 * recipes"): what `mantis train` uses for the optimizer options a user does
 * not give. */
static const struct {
    const char *name;
    mts_train_recipe r;
} recipes[] = {
    /* opt, lr, momentum, wd, gamma, sched, step_size, batch */
    {"lenet300", {MTS_OPT_SGD, 0.01, 0.9, 0, 0.95, MTS_SCHED_CONST, 1, 64,
                  "measured: 97.7% MNIST in 5 epochs (docs/training.md)"}},
    {"lenet5", {MTS_OPT_SGD, 0.01, 0.9, 0, 0.95, MTS_SCHED_CONST, 1, 64,
                "measured: 98.4% MNIST in 3 epochs (docs/training.md)"}},
    {"mlp1024", {MTS_OPT_ADAM, 1e-3, 0.9, 0, 0.95, MTS_SCHED_STEP, 1, 16,
                 "the accumulator paper's: Adam 1e-3, StepLR 0.95, batch 16 (92.6% MNIST, 10,000 images, 1 epoch)"}},
    {"resnet20", {MTS_OPT_SGD, 0.05, 0.9, 5e-4, 0.95, MTS_SCHED_COSINE, 1, 64,
                  "He et al. 2016 (SGD 0.1 at batch 128, momentum 0.9) at batch 64, cosine, wd 5e-4; not measured here"}},
    {"resnet18", {MTS_OPT_SGD, 0.05, 0.9, 5e-4, 0.95, MTS_SCHED_COSINE, 1, 64,
                  "the common CIFAR ResNet-18 recipe (SGD 0.1 at batch 128, wd 5e-4, cosine) at batch 64; not measured here"}},
    {"vit-tiny", {MTS_OPT_ADAM, 0.002, 0.9, 0, 0.95, MTS_SCHED_COSINE, 1, 32,
                  "measured: 98.1% MNIST in 4 epochs (docs/training.md)"}},
};
_Static_assert(sizeof recipes / sizeof recipes[0] == sizeof models / sizeof models[0], "one recipe per model");

int mts_nn_model_recipe(const char *model, mts_train_recipe *r, mts_err *err)
{
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
        if (!strcmp(model, recipes[i].name)) {
            *r = recipes[i].r;
            return MTS_OK;
        }
    return mts_fail(err, MTS_EINVAL, "unknown model '%s' (expected one of: %s)", model, mts_nn_model_list());
}

const char *mts_nn_model_list(void) { return "lenet300, lenet5, mlp1024, resnet20, resnet18, vit-tiny"; }

int mts_nn_model_build(mts_net *net, const char *model, int c, int h, int w, int classes, mts_err *err)
{
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (!strcmp(model, models[i].name)) {
            int rc = mts_net_init(net, model, c, h, w, err);
            if (rc == MTS_OK) rc = models[i].build(net, classes, err);
            if (rc < 0) {
                mts_net_free(net);
                return rc;
            }
            return MTS_OK;
        }
    return mts_fail(err, MTS_EINVAL, "unknown model '%s' (expected one of: %s)", model, mts_nn_model_list());
}
