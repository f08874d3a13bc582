// test_nn_ctx.h - helpers of the layer-op tests: the op context (nn_ops.h)
// as a temporary for test calls (mts_dense_forward(NnCtx(&p, &p).get(), ...)
// lives until the end of the full expression, which covers the call), seeded
// random inputs and the native FP32 provider. Include outside extern "C".
#ifndef MANTIS_TEST_NN_CTX_H
#define MANTIS_TEST_NN_CTX_H

#include <cstring>
#include <vector>

extern "C" {
#include "mantis/nn.h"
}

struct NnCtx {
    mts_nn_ctx c;
    NnCtx(const mts_provider *fwd, const mts_provider *bwd, mts_ste ste = MTS_STE_IDENTITY)
        : c(mts_nn_ctx_cpu(fwd, bwd))
    {
        c.ste = ste;
    }
    const mts_nn_ctx *get() const { return &c; }
};

// n values uniform in [lo, hi) from the library's generator seeded with seed.
inline std::vector<float> rnd(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f)
{
    mts_rng r = {seed};
    std::vector<float> v(n);
    for (auto &x : v) x = lo + (hi - lo) * mts_rng_uniform(&r);
    return v;
}

// The native FP32 provider on one thread.
inline mts_provider native_prov()
{
    mts_provider p;
    memset(&p, 0, sizeof p);
    p.kind = MTS_PROV_NATIVE;
    p.threads = 1;
    return p;
}

#endif
