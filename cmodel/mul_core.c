/* mul_core.c - the special-case rules and significand packing that every
 * multiplier path shares (rules listed in include/mantis/mul.h). */
#include "mantis/fpbits.h"
#include "mantis/mul.h"

int mts_mul_classify(const mts_format *f, uint32_t a, uint32_t b, mts_mul_in *in)
{
    /* Rule 1: operands into the format by truncation (NaN kept, subnormal -> 0). */
    uint32_t qa = mts_fmt_quantize(f, a, MTS_RTZ), qb = mts_fmt_quantize(f, b, MTS_RTZ);
    uint32_t sign = (a ^ b) & MTS_F32_SIGN;
    in->sign = sign;
    /* Rule 2. */
    if (mts_f32_isnan(qa) || mts_f32_isnan(qb)) {
        in->special = MTS_F32_QNAN;
        return 1;
    }
    int za = mts_f32_exp(qa) == 0, zb = mts_f32_exp(qb) == 0;
    int ia = mts_f32_isinf(qa), ib = mts_f32_isinf(qb);
    if (ia || ib) {
        in->special = (za || zb) ? MTS_F32_QNAN : (sign | MTS_F32_INF);
        return 1;
    }
    if (za || zb) {
        in->special = sign;
        return 1;
    }
    in->special = 0;
    in->e = (int)mts_f32_exp(qa) + (int)mts_f32_exp(qb) - 254;
    in->ma = mts_f32_man(qa) >> (23 - f->M);
    in->mb = mts_f32_man(qb) >> (23 - f->M);
    return 0;
}

static int msb64(uint64_t x) { return 63 - __builtin_clzll(x); }

uint32_t mts_mul_pack(const mts_format *f, uint32_t sign, int e, uint64_t sig, int F, mts_outprec prec)
{
    if (sig == 0) return sign;
    int p = msb64(sig);   /* leading one at 2^(p-F) */
    int shift = p - F;    /* exponent contribution of the significand */
    int ob = prec == MTS_OUT_FULL ? (p < 23 ? p : 23) : f->M;
    uint64_t frac;        /* ob+1 bits: leading one then ob mantissa bits */
    if (p > ob) {
        int d = p - ob;
        frac = sig >> d;
        uint64_t rem = sig & ((1ull << d) - 1ull), half = 1ull << (d - 1);
        if (prec == MTS_OUT_RNE && (rem > half || (rem == half && (frac & 1ull)))) {
            frac++;
            if (frac >> (ob + 1)) {
                frac >>= 1;
                shift++;
            }
        }
    } else {
        frac = sig << (ob - p);
    }
    uint32_t man = (uint32_t)(frac - (1ull << ob)) << (23 - ob);
    return mts_mul_finish(f, sign, e + shift, man);
}

uint32_t mts_mul_finish(const mts_format *f, uint32_t sign, int exp, uint32_t man)
{
    /* Rule 3: the exponent is judged after normalisation and rounding. */
    if (exp < mts_fmt_emin(f)) return sign;
    int emax = mts_fmt_emax(f);
    if (exp > emax) return f->ieee ? (sign | MTS_F32_INF) : (sign | mts_fmt_max_finite(f));
    if (!f->ieee && exp == emax && man > (mts_fmt_max_finite(f) & MTS_F32_MAN))
        return sign | mts_fmt_max_finite(f);
    return sign | ((uint32_t)(exp + 127) << 23) | man;
}
