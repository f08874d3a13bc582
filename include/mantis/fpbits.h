/* fpbits.h - FP32 bit-pattern helpers shared by every arithmetic path.
 * All Mantis arithmetic passes values as uint32_t FP32 bit patterns so that
 * nothing is ever rounded behind our back by the host FPU. */
#ifndef MANTIS_FPBITS_H
#define MANTIS_FPBITS_H

#include <stdint.h>
#include <string.h>

#include "mantis/hd.h"

#define MTS_F32_SIGN 0x80000000u
#define MTS_F32_EXP 0x7F800000u
#define MTS_F32_MAN 0x007FFFFFu
#define MTS_F32_QNAN 0x7FC00000u
#define MTS_F32_INF 0x7F800000u

static inline MTS_HD uint32_t mts_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline MTS_HD float mts_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline MTS_HD uint32_t mts_f32_exp(uint32_t x) { return (x >> 23) & 0xFFu; }
static inline MTS_HD uint32_t mts_f32_man(uint32_t x) { return x & MTS_F32_MAN; }
static inline MTS_HD int mts_f32_isnan(uint32_t x) { return (x & 0x7FFFFFFFu) > MTS_F32_INF; }
static inline MTS_HD int mts_f32_isinf(uint32_t x) { return (x & 0x7FFFFFFFu) == MTS_F32_INF; }

#endif
