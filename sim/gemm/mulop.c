/* mulop.c - the MULOP provider: any mts_mulop per product (C models,
 * RTL-in-the-loop). There is no fast path: the product is an opaque call, so
 * the scalar kernel runs it, in parallel unless the mulop is serial. */
#include "gemm_internal.h"

int gemm_mulop(const gemm_job *g, mts_err *err)
{
    /* an RTL model instance is one piece of hardware: never call it from two threads */
    if (g->mul->serial) {
        gemm_job one = *g;
        one.threads = 1;
        return gemm_scalar(&one, err);
    }
    return gemm_scalar(g, err);
}
