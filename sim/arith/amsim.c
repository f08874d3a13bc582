/* amsim.c - AMSim, ApproxTrain's Algorithm 2 corrected: NaN and inf follow
 * the rules of mul.h (the paper ignores them), and the exponent adjustment is
 * applied before the overflow/underflow decision (the paper checks overflow
 * before adding the carry, so a product that carries into the top exponent
 * became a wrong finite number). Also handles adjustments below zero and
 * exact-zero significand products, which Algorithm 1 cannot represent. */
#include <stdio.h>

#include "mantis/amsim.h"

static uint32_t from_entry(const mts_format *f, const mts_mul_in *in, uint32_t entry)
{
    if (entry & MTS_LUT_ZERO) return in->sign;
    return mts_mul_finish(f, in->sign, in->e + mts_lut_adj(entry), entry & MTS_LUT_MAN);
}

uint32_t mts_amsim_entry(const mts_format *f, uint32_t entry, uint32_t a, uint32_t b)
{
    mts_mul_in in;
    if (mts_mul_classify(f, a, b, &in)) return in.special;
    return from_entry(f, &in, entry);
}

uint32_t mts_amsim(const mts_lut *lut, uint32_t a, uint32_t b)
{
    const mts_format *f = &lut->fmt;
    mts_mul_in in;
    if (mts_mul_classify(f, a, b, &in)) return in.special;
    return from_entry(f, &in, lut->entry[(in.ma << f->M) | in.mb]);
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
