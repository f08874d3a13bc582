/* models.c - the built-in models, written with the nn_net.h building API:
 *   lenet300  LeNet-300-100 (ApproxTrain Table III): 784-300-100-10, ReLU
 *   lenet5    LeNet-5 (ApproxTrain): conv 6@5x5 pad 2, maxpool 2, conv 16@5x5,
 *             maxpool 2, dense 120-84-10, ReLU
 *   mlp1024   the accumulator paper's MNIST MLP (appendix C.3): 4 dense
 *             layers, hidden width 1024, ReLU
 *   resnet20  CIFAR ResNet-20 (He et al. 2016): 3 stages x 3 basic blocks of
 *             16/32/64 channels, BN, global average pool. Downsampling
 *             shortcuts are 1x1 conv + BN ("option B"), not the original's
 *             zero padding ("option A"). */
#include <string.h>

#include "mantis/nn_net.h"

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

/* conv-BN-ReLU-conv-BN + shortcut, then ReLU. */
static int basic_block(mts_net *n, int ch, int stride, mts_err *e)
{
    int in = n->cursor;
    int in_c = n->l[in].c;
    TRY(mts_net_conv(n, ch, 3, stride, 1, e));
    TRY(mts_net_bn(n, e));
    TRY(mts_net_relu(n, e));
    TRY(mts_net_conv(n, ch, 3, 1, 1, e));
    int main_out;
    TRY(main_out = mts_net_bn(n, e));
    int shortcut = in;
    if (stride != 1 || in_c != ch) {
        mts_net_set_cursor(n, in);
        TRY(mts_net_conv(n, ch, 1, stride, 0, e));
        TRY(shortcut = mts_net_bn(n, e));
    }
    mts_net_set_cursor(n, main_out);
    TRY(mts_net_add(n, shortcut, e));
    TRY(mts_net_relu(n, e));
    return MTS_OK;
}

static int resnet20(mts_net *n, int classes, mts_err *e)
{
    TRY(mts_net_conv(n, 16, 3, 1, 1, e));
    TRY(mts_net_bn(n, e));
    TRY(mts_net_relu(n, e));
    static const int ch[3] = {16, 32, 64};
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < 3; b++) TRY(basic_block(n, ch[s], (s > 0 && b == 0) ? 2 : 1, e));
    TRY(mts_net_gap(n, e));
    TRY(mts_net_dense(n, classes, e));
    return MTS_OK;
}

static const struct {
    const char *name;
    int (*build)(mts_net *, int, mts_err *);
} models[] = {{"lenet300", lenet300}, {"lenet5", lenet5}, {"mlp1024", mlp1024}, {"resnet20", resnet20}};

const char *mts_nn_model_list(void) { return "lenet300, lenet5, mlp1024, resnet20"; }

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
