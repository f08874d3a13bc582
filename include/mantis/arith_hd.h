/* arith_hd.h - the scalar arithmetic of every product and every sum, one
 * copy for the CPU (C11, cmodel/ and sim/) and the GPU (CUDA, gpu/): static
 * inline functions qualified MTS_HD (hd.h). The library's functions of the
 * same name without _hd (format.h, mul.h, amsim.h, fmaq.h, intmul.h) call
 * these and keep their contracts, which are documented there; a change of
 * a rule is made here once and both sides follow (tests/test_gpu.cpp and
 * test_gpu_emu compare the GPU with the CPU bit for bit).
 *
 *   operands      mts_fmt_quantize_hd     any (1,E,M) format, RNE or RTZ
 *   products      mts_mul_classify_hd     rules 1 and 2 of mul.h
 *                 mts_mul_finish_hd       rule 3 (exponent after rounding)
 *                 mts_mul_pack_hd         significand -> FP32 bits
 *                 mts_sig_exact_hd        the exact significand ("fp32", "exact")
 *                 mts_amsim_entry_hd      AMSim's decoding of a LUT entry
 *                 mts_amsim_hd            AMSim on a table of entries
 *   FMAq          mts_q_hd, mts_qadd_hd, mts_fmaq_hd   (fmaq.h)
 *                 mts_q_rtz_hd, mts_qadd_rtz_hd, mts_fmaq_rtz_hd: the same
 *                 bits for RTZ quantizers without 64-bit arithmetic
 *   INT           mts_affine_quantize_hd  a real value's code (intmul.h)
 *                 mts_qdot_correct_hd     the zero-point correction (intmul.h)
 *   GEMM output   mts_gemm_store_hd       beta and the canonical NaN (gemm.h)
 *
 * Only integer operations on bit patterns, and FP32/FP64 operations named
 * by fmath.h's explicitly rounded helpers: the same bits on an x86-64 CPU
 * (-ffp-contract=off) and an NVIDIA GPU (-fmad=false). */
#ifndef MANTIS_ARITH_HD_H
#define MANTIS_ARITH_HD_H

#include <stdint.h>

#include "mantis/fmath.h"
#include "mantis/fmaq.h"
#include "mantis/format.h"
#include "mantis/fpbits.h"
#include "mantis/hd.h"
#include "mantis/intmul.h"
#include "mantis/lut.h"
#include "mantis/mul.h"

/* --------------------------------------------------------------- formats */

static inline MTS_HD int mts_fmt_emax_hd(const mts_format *f) { return (1 << f->E) - (f->ieee ? 2 : 1) - f->bias; }
static inline MTS_HD int mts_fmt_emin_hd(const mts_format *f) { return 1 - f->bias; }

/* Mantissa field (23-bit FP32 position) of the largest finite value. */
static inline MTS_HD uint32_t mts_fmt__max_man_hd(const mts_format *f)
{
    uint32_t ones = ((1u << f->M) - 1u) << (23 - f->M);
    /* saturating formats: all-ones mantissa at the top exponent is the NaN */
    return f->ieee ? ones : ones - (1u << (23 - f->M));
}

static inline MTS_HD uint32_t mts_fmt_max_finite_hd(const mts_format *f)
{
    return ((uint32_t)(mts_fmt_emax_hd(f) + 127) << 23) | mts_fmt__max_man_hd(f);
}

/* mts_fmt_quantize (format.h). */
static inline MTS_HD uint32_t mts_fmt_quantize_hd(const mts_format *f, uint32_t x, mts_round r)
{
    uint32_t sign = x & MTS_F32_SIGN;
    uint32_t e = mts_f32_exp(x);
    if (mts_f32_isnan(x)) return MTS_F32_QNAN;
    if (e == 0) return sign; /* zero and FP32 subnormals */
    if (e == 0xFF) return f->ieee ? (sign | MTS_F32_INF) : (sign | mts_fmt_max_finite_hd(f));
    int ue = (int)e - 127;
    uint32_t sig = (1u << 23) | mts_f32_man(x); /* 24-bit significand */
    int drop = 23 - f->M;
    if (drop > 0) {
        uint32_t rem = sig & ((1u << drop) - 1u);
        sig >>= drop;
        if (r == MTS_RNE) {
            uint32_t half = 1u << (drop - 1);
            if (rem > half || (rem == half && (sig & 1u))) sig++;
        }
        if (sig >> (f->M + 1)) { /* rounding carried into a new leading bit */
            sig >>= 1;
            ue++;
        }
        sig <<= drop;
    }
    uint32_t man = sig & MTS_F32_MAN;
    if (ue < mts_fmt_emin_hd(f)) return sign; /* flush after rounding */
    int emax = mts_fmt_emax_hd(f);
    if (ue > emax || (ue == emax && man > mts_fmt__max_man_hd(f))) {
        if (!f->ieee || r == MTS_RTZ) return sign | mts_fmt_max_finite_hd(f);
        return sign | MTS_F32_INF;
    }
    return sign | ((uint32_t)(ue + 127) << 23) | man;
}

/* -------------------------------------------------------------- products */

/* mts_mul_classify (mul.h): rules 1 and 2. */
static inline MTS_HD int mts_mul_classify_hd(const mts_format *f, uint32_t a, uint32_t b, mts_mul_in *in)
{
    /* Rule 1: operands into the format by truncation (NaN kept, subnormal -> 0). */
    uint32_t qa = mts_fmt_quantize_hd(f, a, MTS_RTZ), qb = mts_fmt_quantize_hd(f, b, MTS_RTZ);
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

/* mts_mul_finish (mul.h): rule 3, the exponent judged after normalisation
 * and rounding. */
static inline MTS_HD uint32_t mts_mul_finish_hd(const mts_format *f, uint32_t sign, int exp, uint32_t man)
{
    if (exp < mts_fmt_emin_hd(f)) return sign;
    int emax = mts_fmt_emax_hd(f);
    if (exp > emax) return f->ieee ? (sign | MTS_F32_INF) : (sign | mts_fmt_max_finite_hd(f));
    if (!f->ieee && exp == emax && man > (mts_fmt_max_finite_hd(f) & MTS_F32_MAN))
        return sign | mts_fmt_max_finite_hd(f);
    return sign | ((uint32_t)(exp + 127) << 23) | man;
}

/* mts_mul_pack (mul.h). */
static inline MTS_HD uint32_t mts_mul_pack_hd(const mts_format *f, uint32_t sign, int e, uint64_t sig, int F,
                                              mts_outprec prec)
{
    if (sig == 0) return sign;
    int p = 63 - mts_clz64(sig); /* leading one at 2^(p-F) */
    int shift = p - F;           /* exponent contribution of the significand */
    int ob = prec == MTS_OUT_FULL ? (p < 23 ? p : 23) : f->M;
    uint64_t frac; /* ob+1 bits: leading one then ob mantissa bits */
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
    return mts_mul_finish_hd(f, sign, e + shift, man);
}

/* (1.ma)(1.mb) exactly, *F = 2M fraction bits: the significand of the
 * models "fp32", "exact", "exact-wide" and "trunc" (cmodel/models.c). */
static inline MTS_HD uint64_t mts_sig_exact_hd(uint32_t ma, uint32_t mb, int M, int *F)
{
    *F = 2 * M;
    return ((1ull << M) | ma) * ((1ull << M) | mb);
}

/* The exact product of a and b in format f rounded per prec: model "fp32"
 * at e8m23 with MTS_OUT_RNE (IEEE FP32 multiply with flush-to-zero, FMAq's
 * native products). */
static inline MTS_HD uint32_t mts_mul_exact_hd(const mts_format *f, mts_outprec prec, uint32_t a, uint32_t b)
{
    mts_mul_in in;
    if (mts_mul_classify_hd(f, a, b, &in)) return in.special;
    int F;
    uint64_t sig = mts_sig_exact_hd(in.ma, in.mb, f->M, &F);
    return mts_mul_pack_hd(f, in.sign, in.e, sig, F, prec);
}

/* AMSim after the lookup (sim/arith/amsim.c): the classified pair's LUT
 * entry -> the product (zero flag, exponent adjustment, rule 3). */
static inline MTS_HD uint32_t mts_amsim_entry_hd(const mts_format *f, const mts_mul_in *in, uint32_t entry)
{
    if (entry & MTS_LUT_ZERO) return in->sign;
    return mts_mul_finish_hd(f, in->sign, in->e + mts_lut_adj(entry), entry & MTS_LUT_MAN);
}

/* mts_amsim (amsim.h) on the entries T of a float LUT of format f. */
static inline MTS_HD uint32_t mts_amsim_hd(const mts_format *f, const uint32_t *T, uint32_t a, uint32_t b)
{
    mts_mul_in in;
    if (mts_mul_classify_hd(f, a, b, &in)) return in.special;
    return mts_amsim_entry_hd(f, &in, T[(in.ma << f->M) | in.mb]);
}

/* ----------------------------------------------------------------- FMAq */

/* Exponent difference beyond which the smaller addend of an exact sum is
 * replaced by a same-signed stand-in 2^(ea-CLAMP) (in units of the larger
 * operand's significand LSB). Any value that small changes no rounding
 * decision of Q; see mts_q__exact_sum_hd and docs/fmaq.md (needs >= 25). */
#define MTS_Q_CLAMP 33

static inline MTS_HD int mts_q__emax_hd(const mts_qfmt *q) { return (1 << q->E) - 1 - q->bias; }

/* Smallest exponent that survives: -bias with underflow, FP32's -126 without. */
static inline MTS_HD int mts_q__emin_hd(const mts_qfmt *q) { return q->underflow ? -q->bias : -126; }

static inline MTS_HD uint32_t mts_q__pack_hd(uint32_t sign, int e, uint32_t frac, int M)
{
    return sign | ((uint32_t)(e + 127) << 23) | (frac << (23 - M));
}

/* R_OF, mts_q_rof (fmaq.h). */
static inline MTS_HD uint32_t mts_q_rof_hd(const mts_qfmt *q)
{
    return mts_q__pack_hd(0, mts_q__emax_hd(q), (1u << q->M) - 1u, q->M);
}

/* Q of sign * mag * 2^ue, mag > 0: everything funnels into this one
 * rounding. The zero/flush decision is made on the exact value (Eq. 2
 * compares |x| with R_UF before rounding); the overflow decision after
 * rounding, which for RTZ and RNE alike equals Eq. 2's "|x| >= R_OF ->
 * R_OF" because R_OF is the largest value of Q. */
static inline MTS_HD uint32_t mts_q__round_hd(const mts_qfmt *q, uint32_t sign, uint64_t mag, int ue)
{
    int nb = 64 - mts_clz64(mag); /* bit length: mag in [2^(nb-1), 2^nb) */
    int e = ue + nb - 1;          /* floor(log2 |x|) */
    int keep = q->M + 1;          /* significant bits kept, hidden one included */
    uint64_t sig;

    if (e < mts_q__emin_hd(q)) return sign; /* underflow: signed zero */
    if (nb > keep) {
        int sh = nb - keep;
        uint64_t rem = mag & ((1ull << sh) - 1u);
        sig = mag >> sh;
        if (q->rnd == MTS_RNE) {
            uint64_t half = 1ull << (sh - 1);
            if (rem > half || (rem == half && (sig & 1u))) sig++;
            if (sig >> keep) { /* rounded up to the next binade */
                sig >>= 1;
                e++;
            }
        }
    } else {
        sig = mag << (keep - nb);
    }
    if (e > mts_q__emax_hd(q)) return sign | mts_q_rof_hd(q);
    return mts_q__pack_hd(sign, e, (uint32_t)sig & ((1u << q->M) - 1u), q->M);
}

/* Splits a finite non-zero normal FP32 value into sign, 24-bit significand
 * and the exponent of its LSB (value = sig * 2^ue). */
static inline MTS_HD void mts_q__unpack_hd(uint32_t x, uint32_t *sign, uint64_t *sig, int *ue)
{
    *sign = x & MTS_F32_SIGN;
    *sig = (uint64_t)(mts_f32_man(x) | 0x00800000u);
    *ue = (int)mts_f32_exp(x) - 150;
}

static inline MTS_HD int mts_q__zero_or_sub_hd(uint32_t x) { return mts_f32_exp(x) == 0; }

/* mts_q (fmaq.h). */
static inline MTS_HD uint32_t mts_q_hd(const mts_qfmt *q, uint32_t x)
{
    uint32_t sign;
    uint64_t sig;
    int ue;

    if (mts_f32_isnan(x)) return MTS_F32_QNAN;
    if (mts_f32_isinf(x)) return (x & MTS_F32_SIGN) | mts_q_rof_hd(q);
    if (mts_q__zero_or_sub_hd(x)) return x & MTS_F32_SIGN; /* subnormals are zero (mul.h rule 1) */
    mts_q__unpack_hd(x, &sign, &sig, &ue);
    return mts_q__round_hd(q, sign, sig, ue);
}

/* Q(a + b) for finite non-zero normal a, b, with the sum formed exactly.
 *
 * Let a have the larger LSB exponent (ea >= eb, d = ea - eb). For d <= CLAMP
 * the sum sa*2^d +- sb fits in 24 + CLAMP + 1 = 58 bits and is exact. For
 * d > CLAMP >= 25, |b| < 2^(eb+24) <= 2^(ea-2) = g, a quarter of a's LSB.
 * Then |a+b| >= 2^(ea+22), so every point where Q's result can change near
 * a+b (a value of Q at M <= 23 bits, a rounding midpoint, a power of two,
 * R_UF, R_OF, 2^-126) is a multiple of g, as is a itself. The open interval
 * between a and a +- g holds no such point, so Q is constant on it: any
 * stand-in with b's sign and a magnitude below g gives the same result.
 * We use 1 * 2^(ea-CLAMP). */
static inline MTS_HD uint32_t mts_q__exact_sum_hd(const mts_qfmt *q, uint32_t a, uint32_t b)
{
    uint32_t xs, ys;
    uint64_t xm, ym;
    int xe, ye;
    mts_q__unpack_hd(a, &xs, &xm, &xe);
    mts_q__unpack_hd(b, &ys, &ym, &ye);
    /* a := the operand with the larger LSB exponent (selects, not a branch:
     * which addend is larger is unpredictable in a dot product) */
    int sw = xe < ye;
    uint32_t sa_sign = sw ? ys : xs, sb_sign = sw ? xs : ys;
    uint64_t sa = sw ? ym : xm, sb = sw ? xm : ym;
    int ea = sw ? ye : xe, eb = sw ? xe : ye;
    int d = ea - eb;
    if (d > MTS_Q_CLAMP) {
        sb = 1;
        eb = ea - MTS_Q_CLAMP;
        d = MTS_Q_CLAMP;
    }
    /* signed magnitudes; written without branches because the signs of
     * accumulated terms are unpredictable (the scalar FMAq is benchmarked) */
    int64_t ma = -(int64_t)(sa_sign >> 31), mb = -(int64_t)(sb_sign >> 31); /* 0 or -1 */
    int64_t sum = (((int64_t)(sa << d)) ^ ma) - ma + ((((int64_t)sb) ^ mb) - mb);
    if (sum == 0) return 0; /* exact cancellation: +0 in RTZ and RNE (IEEE 754) */
    int64_t ms = -(int64_t)((uint64_t)sum >> 63); /* 0 or -1 */
    return mts_q__round_hd(q, (uint32_t)ms & MTS_F32_SIGN, (uint64_t)((sum ^ ms) - ms), eb);
}

/* mts_qadd (fmaq.h): Q_acc(a + b), the sum exact before the one rounding. */
static inline MTS_HD uint32_t mts_qadd_hd(const mts_qfmt *qacc, uint32_t a, uint32_t b)
{
    if (mts_f32_isnan(a) || mts_f32_isnan(b)) return MTS_F32_QNAN;
    if (mts_f32_isinf(a) || mts_f32_isinf(b)) {
        if (mts_f32_isinf(a) && mts_f32_isinf(b) && ((a ^ b) & MTS_F32_SIGN)) return MTS_F32_QNAN;
        return mts_q_hd(qacc, mts_f32_isinf(a) ? a : b);
    }
    int za = mts_q__zero_or_sub_hd(a), zb = mts_q__zero_or_sub_hd(b);
    if (za && zb) return a & b & MTS_F32_SIGN; /* -0 only when both are -0 */
    if (za) return mts_q_hd(qacc, b);
    if (zb) return mts_q_hd(qacc, a);
    return mts_q__exact_sum_hd(qacc, a, b);
}

/* mts_fmaq (fmaq.h): Q_acc(Q_prod(p) + s). */
static inline MTS_HD uint32_t mts_fmaq_hd(const mts_qfmt *qprod, const mts_qfmt *qacc, uint32_t p, uint32_t s)
{
    return mts_qadd_hd(qacc, mts_q_hd(qprod, p), s);
}

/* FMAq with round-toward-zero quantizers (the paper's, the default) in
 * 32-bit operations - the GPU kernels' form; sim/gemm/fmaq.c vectorises the
 * same argument:
 *  - Q(x) at M bits keeps M mantissa bits (a mask), then the smaller of that
 *    magnitude and R_OF's bits, flushed to the signed zero below lo (R_UF's
 *    bits, or FP32's smallest normal without underflow). Truncation keeps
 *    the binade, so the truncated magnitude decides as |x| does; an inf's
 *    bits exceed R_OF's (it saturates, as mts_q_hd's does), a subnormal's
 *    are below lo, a NaN becomes 0x7FC00000.
 *  - Q_acc(exact a + b) = Q_acc(RTZ_24(a + b)): truncating toward zero at M
 *    <= 23 bits a value already truncated toward zero at 24 bits is
 *    truncating the exact value (nested grids, same binade); a sum below a
 *    power of two stays below it, so the flush decision is unchanged; a sum
 *    of normal operands that is subnormal is exact; one past FP32's range
 *    is FLT_MAX, which saturates as the exact sum would. Exact cancellation
 *    gives +0 and -0 + -0 gives -0, mts_qadd_hd's zeros.
 * mts_qadd_rtz_hd equals mts_qadd_hd for operands that are zeros, normals,
 * infs or NaNs - not FP32 subnormals, which mts_qadd_hd counts as zero and
 * an RTZ add does not; every output of Q is such an operand. Hence
 * mts_fmaq_rtz_hd(p, s) = mts_fmaq_hd(p, s) for every p and every s that is
 * +0 or an output of Q_acc (FMAq's sums), and the chunk combination y +
 * s goes through mts_qadd_rtz_hd. For qfmt with rnd == MTS_RTZ only
 * (mts_qrtz_hd's caller checks). */
typedef struct mts_qrtz {
    uint32_t keep; /* mantissa mask (sign excluded) */
    uint32_t rof;  /* R_OF's bits */
    uint32_t lo;   /* the smallest magnitude's bits that survives */
} mts_qrtz;

static inline MTS_HD mts_qrtz mts_qrtz_hd(const mts_qfmt *q)
{
    mts_qrtz c;
    c.keep = ~((1u << (23 - q->M)) - 1u) & 0x7FFFFFFFu;
    c.rof = mts_q_rof_hd(q);
    c.lo = q->underflow ? mts_q__pack_hd(0, -q->bias, 0, q->M) : 0x00800000u;
    return c;
}

static inline MTS_HD uint32_t mts_q_rtz_hd(const mts_qrtz *c, uint32_t x)
{
    uint32_t a = x & 0x7FFFFFFFu, t = a & c->keep;
    if (a > 0x7F800000u) return MTS_F32_QNAN;
    t = t < c->rof ? t : c->rof;
    return (x & MTS_F32_SIGN) | (t < c->lo ? 0u : t);
}

static inline MTS_HD uint32_t mts_qadd_rtz_hd(const mts_qrtz *qacc, uint32_t a, uint32_t b)
{
    return mts_q_rtz_hd(qacc, mts_fm_bits(mts_fm_add_rz(mts_fm_float(a), mts_fm_float(b))));
}

static inline MTS_HD uint32_t mts_fmaq_rtz_hd(const mts_qrtz *qprod, const mts_qrtz *qacc, uint32_t p, uint32_t s)
{
    return mts_qadd_rtz_hd(qacc, mts_q_rtz_hd(qprod, p), s);
}

/* ------------------------------------------------------------------ INT */

/* mts_qdot_correct (intmul.h): sum (qa-za)(qb-zb) from the integer sums. */
/* mts_affine_quantize (intmul.h): round(r / scale), half away from zero,
 * plus the zero point, clamped to [qmin, qmax]; NaN -> the zero point. */
static inline MTS_HD int32_t mts_affine_quantize_hd(const mts_affine *p, double r)
{
    if (r != r) return p->zero_point;
    double q = mts_fm_dadd(round(mts_fm_ddiv(r, p->scale)), (double)p->zero_point);
    if (q < p->qmin) return p->qmin;
    if (q > p->qmax) return p->qmax;
    return (int32_t)q;
}

static inline MTS_HD int64_t mts_qdot_correct_hd(int64_t s_ab, int64_t s_a, int64_t s_b, int64_t n, int32_t za,
                                                 int32_t zb)
{
    return s_ab - (int64_t)zb * s_a - (int64_t)za * s_b + n * (int64_t)za * (int64_t)zb;
}

/* The INT provider's output: the corrected sum scaled once in FP64, then
 * rounded to FP32 (mts_qdot_float's formula, sim/gemm/int.c). */
static inline MTS_HD float mts_qdot_scale_hd(double scale, int64_t acc)
{
    return (float)mts_fm_dmul(scale, (double)acc);
}

/* --------------------------------------------------------- GEMM output */

/* Stores y into *c with beta (gemm.h): beta 0 -> y (C is not read); beta 1
 * -> C + y; else beta*C + y; a NaN result as the canonical 0x7FC00000. */
static inline MTS_HD void mts_gemm_store_hd(float *c, float beta, float y)
{
    float v = beta == 0.0f ? y : mts_fm_add(beta == 1.0f ? *c : mts_fm_mul(beta, *c), y);
    if (v != v) v = mts_u2f(MTS_F32_QNAN);
    *c = v;
}

#endif
