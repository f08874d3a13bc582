/* format.h - floating-point formats (1, E, M) with bias b, in one table.
 *
 * Every width, mask and limit derives from (E, M, bias, ieee). Values of any
 * format travel through Mantis as FP32 bit patterns holding a value that the
 * format can represent ("widened"); mts_fmt_encode/decode convert to and from
 * the packed 1+E+M-bit code that hardware sees.
 *
 * Special-value conventions (docs/arithmetic.md):
 *  - ieee = 1 (FP32, bf16, FP16, E5M2, any E8Mx): top exponent code is inf/NaN.
 *  - ieee = 0 (FP8 E4M3, OCP "fn"): no inf; the top exponent code holds normal
 *    numbers except S.1..1.1..1, the only NaN. Overflow saturates to +-max.
 *  - Subnormals are not used: every value below the smallest normal is zero. */
#ifndef MANTIS_FORMAT_H
#define MANTIS_FORMAT_H

#include <stdint.h>
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mts_format {
    int E;     /* exponent bits, 2..8 */
    int M;     /* mantissa (fraction) bits, 1..23 */
    int bias;  /* exponent bias; IEEE default 2^(E-1)-1 */
    int ieee;  /* 1: top exponent code is inf/NaN; 0: saturating, one NaN code */
} mts_format;

typedef enum { MTS_RNE = 0, MTS_RTZ = 1 } mts_round;

/* Named formats: "fp32", "bf16", "fp16", "fp8e4m3", "fp8e5m2", and the
 * generic spelling "eXmY" (IEEE-style, default bias), e.g. "e8m5".
 * Returns MTS_OK and fills *f, or MTS_EINVAL naming the accepted spellings. */
int mts_format_parse(const char *name, mts_format *f, mts_err *err);

/* The (1,8,M) IEEE-style format used by E=8 multipliers at M mantissa bits. */
mts_format mts_format_e8(int M);

/* Checks 2<=E<=8, 1<=M<=23, bias keeps every normal value inside FP32's
 * normal range. Returns MTS_OK or MTS_EINVAL with the reason. */
int mts_format_check(const mts_format *f, mts_err *err);

/* Writes the canonical name ("bf16", "e8m5", "e4m3b7nan") into buf. */
void mts_format_name(const mts_format *f, char *buf, int n);

/* Derived limits (unbiased exponents). */
int mts_fmt_emax(const mts_format *f);       /* largest exponent of a finite value */
int mts_fmt_emin(const mts_format *f);       /* exponent of the smallest normal: 1-bias */
uint32_t mts_fmt_max_finite(const mts_format *f); /* as FP32 bits, positive */

/* Converts an FP32 value to the nearest value of format f (returned widened
 * as FP32 bits) with rounding mode r. Rules: NaN -> 0x7FC00000; FP32
 * subnormal input -> signed zero; a result below the smallest normal ->
 * signed zero (flush after rounding); overflow -> inf (ieee, RNE), max finite
 * (ieee, RTZ, as IEEE 754 directs) or saturation to +-max (ieee = 0). */
uint32_t mts_fmt_quantize(const mts_format *f, uint32_t x, mts_round r);

/* Packs a value already representable in f (e.g. from mts_fmt_quantize) into
 * its 1+E+M-bit code; NaN -> the format's canonical NaN code. */
uint32_t mts_fmt_encode(const mts_format *f, uint32_t x);

/* Unpacks a 1+E+M-bit code into FP32 bits, exactly. Subnormal codes -> zero,
 * NaN codes -> 0x7FC00000, inf codes -> inf. */
uint32_t mts_fmt_decode(const mts_format *f, uint32_t code);

#ifdef __cplusplus
}
#endif
#endif
