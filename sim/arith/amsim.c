/* amsim.c - AMSim, ApproxTrain's Algorithm 2 corrected: NaN and inf follow
 * the rules of mul.h (the paper ignores them), and the exponent adjustment is
 * applied before the overflow/underflow decision (the paper checks overflow
 * before adding the carry, so a product that carries into the top exponent
 * became a wrong finite number). Also handles adjustments below zero and
 * exact-zero significand products, which Algorithm 1 cannot represent.
 * The decoding is arith_hd.h's (mts_amsim_hd), one copy with the GPU. */
#include <stdio.h>

#include "mantis/amsim.h"
#include "mantis/arith_hd.h"

uint32_t mts_amsim_entry(const mts_format *f, uint32_t entry, uint32_t a, uint32_t b)
{
    mts_mul_in in;
    if (mts_mul_classify_hd(f, a, b, &in)) return in.special;
    return mts_amsim_entry_hd(f, &in, entry);
}

uint32_t mts_amsim(const mts_lut *lut, uint32_t a, uint32_t b)
{
    return mts_amsim_hd(&lut->fmt, lut->entry, a, b);
}

static uint32_t lut_fn(const mts_mulop *op, uint32_t a, uint32_t b)
{
    return mts_amsim((const mts_lut *)op->impl, a, b);
}

void mts_mulop_lut(mts_mulop *op, const mts_lut *lut)
{
    op->fn = lut_fn;
    op->impl = lut;
    op->fmt = lut->fmt;
    op->serial = 0;
    snprintf(op->name, sizeof op->name, "lut:%.59s", lut->model);
}
