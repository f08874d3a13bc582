/* ctx.c - the context every multiplying layer op takes (nn_ops.h). */
#include "mantis/nn_ops.h"
#include "nn_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

mts_nn_ctx mts_nn_ctx_cpu(const mts_provider *fwd, const mts_provider *bwd)
{
    mts_nn_ctx c = {.fwd = fwd, .bwd = bwd, .ste = MTS_STE_IDENTITY, .tracer = NULL, .device = MTS_DEVICE_CPU, .tap = NULL};
    return c;
}

int nn_threads(const mts_nn_ctx *ctx)
{
    int t = ctx && ctx->fwd ? ctx->fwd->threads : 1;
#ifdef _OPENMP
    if (t <= 0) t = omp_get_num_procs();
#else
    t = 1;
#endif
    return t < 1 ? 1 : t;
}
