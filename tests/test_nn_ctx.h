// test_nn_ctx.h - the op context (nn_ops.h) as a temporary for test calls:
// mts_dense_forward(NnCtx(&p, &p).get(), ...) lives until the end of the
// full expression, which covers the call.
#ifndef MANTIS_TEST_NN_CTX_H
#define MANTIS_TEST_NN_CTX_H

#include "mantis/nn.h"

struct NnCtx {
    mts_nn_ctx c;
    NnCtx(const mts_provider *fwd, const mts_provider *bwd, mts_ste ste = MTS_STE_IDENTITY)
        : c(mts_nn_ctx_cpu(fwd, bwd))
    {
        c.ste = ste;
    }
    const mts_nn_ctx *get() const { return &c; }
};

#endif
