/* models.c - the C multiplier models and their registry. Each model is only
 * its significand function plus an output precision; classification and
 * packing (mul_core.c) are shared, so every model obeys the same special-case
 * rules. Definitions and sources: docs/models.md. */
#include <stdio.h>
#include <string.h>

#include "mantis/arith_hd.h"
#include "mantis/mul.h"

/* (1.ma)(1.mb) exactly: 2M fraction bits (arith_hd.h: the GPU's "fp32" too). */
static uint64_t sig_exact(uint32_t ma, uint32_t mb, int M, int *F) { return mts_sig_exact_hd(ma, mb, M, F); }

/* Mitchell (1962): log2(1+x) ~ x, so (1+x)(1+y) ~ 1+x+y when x+y < 1, else
 * 2(x+y). M fraction bits; exact in M bits, no rounding needed. */
static uint64_t sig_mitchell(uint32_t ma, uint32_t mb, int M, int *F)
{
    uint64_t s = (uint64_t)ma + mb;
    *F = M;
    return s < (1ull << M) ? (1ull << M) + s : s << 1;
}

/* Error-correction constant of the minimally biased multiplier, in units of
 * 2^-(M+1): C = sum of 2^-k for k = 4, 6, 8, ... <= M (the binary expansion of
 * ~1/12 truncated to M bits; 2^-4 + 2^-6 for bfloat16 as in ApproxTrain). */
static uint64_t mbm_corr(int M)
{
    uint64_t c = 0;
    for (int k = 4; k <= M; k += 2) c += 1ull << (M + 1 - k);
    return c;
}

/* Minimally biased multiplier (Saadat, Bokhari, Parameswaran, IEEE TCAD 2018)
 * as ApproxTrain's FPmultMBM_fast10/12/14/16 compute it (M = 1, 3, 5, 7),
 * generalised: set the last bit of each mantissa, add the mantissas
 * (Mitchell), add the correction C (C/2 when x+y >= 1), and skip the
 * correction when it would carry past 2. Units of 2^-(M+1). At M = 23 this is
 * NOT FPmultMBM_fast32, which keeps the last bit and uses C = 2^-4 + 2^-6
 * (docs/models.md). */
static uint64_t sig_mbm(uint32_t ma, uint32_t mb, int M, int *F)
{
    uint64_t one = 1ull << M, c = mbm_corr(M);
    uint64_t s = (uint64_t)(ma | 1u) + (mb | 1u); /* x' + y', units 2^-M */
    *F = M + 1;
    if (s < one) return (2 * one) + 2 * s + c;   /* 1 + S + C */
    uint64_t f = s - one;                        /* frac(x'+y') */
    if (2 * f + c / 2 >= 2 * one) return 4 * s;  /* corner: 2(x'+y'), uncorrected */
    return 4 * one + 4 * f + c;                  /* 2(1 + frac + C/2) */
}

static const mts_model models[] = {
    {"fp32", "IEEE FP32 multiply with flush-to-zero (exact product, RNE at 23 bits)", MTS_OUT_RNE, 23, 23,
     sig_exact},
    {"exact", "exact product rounded to nearest even at M bits", MTS_OUT_RNE, 1, 23, sig_exact},
    {"exact-wide", "exact product, all 2M+1 bits kept (low-precision inputs, FP32 output)", MTS_OUT_FULL, 1, 11,
     sig_exact},
    {"trunc", "exact product truncated (toward zero) at M bits", MTS_OUT_RTZ, 1, 23, sig_exact},
    {"mitchell", "Mitchell logarithmic: 1+x+y if x+y<1, else 2(x+y); exact in M bits", MTS_OUT_FULL, 1, 23,
     sig_mitchell},
    {"mbm",
     "minimally biased multiplier (Saadat et al. TCAD 2018), truncated at M bits; ApproxTrain's AFM at M=1,3,5,7 "
     "(bf16 AFM16 at 7), a generalisation elsewhere: at M=23 not its FP32 AFM32 (docs/models.md)",
     MTS_OUT_RTZ, 1, 23, sig_mbm},
};
#define N_MODELS ((int)(sizeof models / sizeof models[0]))

const mts_model *mts_model_at(int i) { return i >= 0 && i < N_MODELS ? &models[i] : NULL; }

const mts_model *mts_model_find(const char *name)
{
    for (int i = 0; i < N_MODELS; i++)
        if (!strcmp(models[i].name, name)) return &models[i];
    return NULL;
}

uint32_t mts_model_mul(const mts_model *m, const mts_format *f, uint32_t a, uint32_t b)
{
    mts_mul_in in;
    if (mts_mul_classify(f, a, b, &in)) return in.special;
    int F;
    uint64_t sig = m->sig(in.ma, in.mb, f->M, &F);
    return mts_mul_pack(f, in.sign, in.e, sig, F, m->prec);
}

static uint32_t model_fn(const mts_mulop *op, uint32_t a, uint32_t b)
{
    return mts_model_mul((const mts_model *)op->impl, &op->fmt, a, b);
}

int mts_mulop_model(mts_mulop *op, const char *model, const mts_format *f, mts_err *err)
{
    const mts_model *m = mts_model_find(model);
    if (!m) {
        char names[256] = "";
        for (int i = 0; i < N_MODELS; i++) {
            strncat(names, models[i].name, sizeof names - strlen(names) - 3);
            if (i + 1 < N_MODELS) strcat(names, ", ");
        }
        return mts_fail(err, MTS_EINVAL, "unknown multiplier '%s': expected one of %s", model, names);
    }
    int rc = mts_format_check(f, err);
    if (rc) return rc;
    if (f->M < m->min_m || f->M > m->max_m)
        return mts_fail(err, MTS_EINVAL, "multiplier '%s' supports %d..%d mantissa bits, not %d", model,
                        m->min_m, m->max_m, f->M);
    op->fn = model_fn;
    op->impl = m;
    op->fmt = *f;
    op->serial = 0;
    snprintf(op->name, sizeof op->name, "%s", m->name);
    return MTS_OK;
}
