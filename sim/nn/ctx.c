/* ctx.c - the context every multiplying layer op takes (nn_ops.h). */
#include "mantis/nn_ops.h"

mts_nn_ctx mts_nn_ctx_cpu(const mts_provider *fwd, const mts_provider *bwd)
{
    mts_nn_ctx c = {.fwd = fwd, .bwd = bwd, .ste = MTS_STE_IDENTITY, .tracer = NULL, .device = MTS_DEVICE_CPU, .tap = NULL};
    return c;
}
