/* amsim.h - AMSim: approximate FP multiplication through a mantissa LUT
 * (ApproxTrain Algorithm 2, corrected): the special-case rules of mul.h,
 * the exponent adjustment applied before the overflow/underflow decision,
 * NaN/inf handled. Bit-exact with the model the LUT was swept from. */
#ifndef MANTIS_AMSIM_H
#define MANTIS_AMSIM_H

#include <stdint.h>
#include "mantis/fpbits.h"
#include "mantis/lut.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Generic AMSim for any float LUT (any E, M, bias, ieee). */
uint32_t mts_amsim(const mts_lut *lut, uint32_t a, uint32_t b);

/* AMSim's step after the lookup: the product of a and b in format f given
 * their LUT entry (rules 2 and 3 of mul.h). lutgen uses it to prove that a
 * table reproduces its model. */
uint32_t mts_amsim_entry(const mts_format *f, uint32_t entry, uint32_t a, uint32_t b);

/* Fast path for IEEE formats with E = 8 and the default bias (bf16 and every
 * (1,8,M)): the hot loop of the GEMM kernels. Equal to mts_amsim bit for bit
 * (tested). entry = the LUT's entries, M = its mantissa width. */
static inline MTS_HD uint32_t mts_amsim_e8(const uint32_t *entry, int M, uint32_t a, uint32_t b)
{
    uint32_t ea = (a >> 23) & 0xFFu, eb = (b >> 23) & 0xFFu;
    uint32_t sign = (a ^ b) & MTS_F32_SIGN;
    if (ea == 0xFFu || eb == 0xFFu || ea == 0 || eb == 0) {
        /* rare: NaN, inf, zero, subnormal - one place decides (mul.h rules) */
        int nan = ((a & 0x7FFFFFFFu) > MTS_F32_INF) || ((b & 0x7FFFFFFFu) > MTS_F32_INF);
        int inf = (ea == 0xFFu) || (eb == 0xFFu);
        int zero = (ea == 0) || (eb == 0);
        if (nan || (inf && zero)) return MTS_F32_QNAN;
        return inf ? (sign | MTS_F32_INF) : sign;
    }
    uint32_t idx = ((a & MTS_F32_MAN) >> (23 - M) << M) | ((b & MTS_F32_MAN) >> (23 - M));
    uint32_t e = entry[idx];
    if (e & MTS_LUT_ZERO) return sign;
    int exp = (int)ea + (int)eb - 127 + (int)(int8_t)(e >> 24);
    if (exp >= 255) return sign | MTS_F32_INF;
    if (exp <= 0) return sign;
    return sign | ((uint32_t)exp << 23) | (e & MTS_LUT_MAN);
}

#ifdef __cplusplus
}
#endif
#endif
