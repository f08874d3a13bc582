/* mul_core.c - the special-case rules and significand packing that every
 * multiplier path shares (rules listed in include/mantis/mul.h; the code is
 * arith_hd.h's, one copy with the GPU). */
#include "mantis/arith_hd.h"
#include "mantis/mul.h"

int mts_mul_classify(const mts_format *f, uint32_t a, uint32_t b, mts_mul_in *in)
{
    return mts_mul_classify_hd(f, a, b, in);
}

uint32_t mts_mul_pack(const mts_format *f, uint32_t sign, int e, uint64_t sig, int F, mts_outprec prec)
{
    return mts_mul_pack_hd(f, sign, e, sig, F, prec);
}

uint32_t mts_mul_finish(const mts_format *f, uint32_t sign, int exp, uint32_t man)
{
    return mts_mul_finish_hd(f, sign, exp, man);
}
