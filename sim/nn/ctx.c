/* ctx.c - the context every multiplying layer op takes (nn_ops.h). */
#include "mantis/nn_ops.h"
#include "nn_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#include <pthread.h>
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

/* Every batch allocates and frees the same large buffers (a convolution's
 * gradient and column chunks, the backward pass's scratch, and in the
 * Python package PyTorch's output and gradient tensors: megabytes each).
 * glibc serves blocks above its mmap threshold with fresh mappings and
 * unmaps them on free, so every page of every such buffer faulted in again
 * each batch (7% of a ResNet-20 epoch in the kernel's page-fault path).
 * Raising the threshold to its maximum (32 MiB on 64-bit) and the trim
 * threshold keeps them in the heap for reuse. */
#if defined(__GLIBC__)
static void keep_buffers_once(void)
{
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
}
#endif

void mts_nn_keep_buffers(void)
{
#if defined(__GLIBC__)
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, keep_buffers_once);
#endif
}
