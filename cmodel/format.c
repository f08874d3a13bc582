/* format.c - the format table and FP32 <-> (1,E,M) conversions.
 * Every limit is derived from (E, M, bias, ieee); nothing is format-specific.
 * The limits and the quantizer are arith_hd.h's (one copy with the GPU). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/arith_hd.h"
#include "mantis/format.h"
#include "mantis/fpbits.h"

typedef struct {
    const char *name;
    mts_format f;
} named_format;

static const named_format formats[] = {
    {"fp32", {8, 23, 127, 1}},
    {"bf16", {8, 7, 127, 1}},
    {"fp16", {5, 10, 15, 1}},
    {"fp8e4m3", {4, 3, 7, 0}},
    {"fp8e5m2", {5, 2, 15, 1}},
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

mts_format mts_format_e8(int M)
{
    mts_format f = {8, M, 127, 1};
    return f;
}

int mts_fmt_emax(const mts_format *f) { return mts_fmt_emax_hd(f); }
int mts_fmt_emin(const mts_format *f) { return mts_fmt_emin_hd(f); }
uint32_t mts_fmt_max_finite(const mts_format *f) { return mts_fmt_max_finite_hd(f); }

int mts_format_check(const mts_format *f, mts_err *err)
{
    if (f->E < 2 || f->E > 8)
        return mts_fail(err, MTS_EINVAL, "exponent width E=%d: expected 2..8", f->E);
    if (f->M < 1 || f->M > 23)
        return mts_fail(err, MTS_EINVAL, "mantissa width M=%d: expected 1..23", f->M);
    if (!f->ieee && f->M < 2)
        return mts_fail(err, MTS_EINVAL, "saturating format needs M >= 2 (the all-ones mantissa is NaN)");
    /* in 64 bits: a bias near INT_MIN/INT_MAX (a corrupt header) must not wrap into range */
    long long emax = (1ll << f->E) - (f->ieee ? 2 : 1) - (long long)f->bias, emin = 1 - (long long)f->bias;
    if (emax > 127 || emin < -126)
        return mts_fail(err, MTS_EINVAL,
                        "bias %d puts exponents [%lld, %lld] outside FP32's normal range [-126, 127]", f->bias,
                        emin, emax);
    return MTS_OK;
}

/* Reads the decimal digits at *s (at most 3: every valid width has 1 or 2)
 * into *v and advances *s; 0 when there are none or too many. */
static int width_digits(const char **s, int *v)
{
    int n = 0;
    *v = 0;
    while (isdigit((unsigned char)**s)) {
        if (++n > 3) return 0;
        *v = *v * 10 + (**s - '0');
        (*s)++;
    }
    return n > 0;
}

int mts_format_parse(const char *name, mts_format *f, mts_err *err)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if (!strcasecmp(name, formats[i].name)) {
            *f = formats[i].f;
            return MTS_OK;
        }
    /* eXmY, digits only (no sign, no spaces), widths checked before any shift */
    const char *p = name;
    int E, M;
    if ((*p == 'e' || *p == 'E') && (p++, width_digits(&p, &E)) && (*p == 'm' || *p == 'M') &&
        (p++, width_digits(&p, &M)) && *p == '\0') {
        f->E = E;
        f->M = M;
        f->ieee = 1;
        f->bias = E >= 2 && E <= 8 ? (1 << (E - 1)) - 1 : 0; /* out of range: check names E */
        return mts_format_check(f, err);
    }
    return mts_fail(err, MTS_EINVAL,
                    "unknown format '%s': expected fp32, bf16, fp16, fp8e4m3, fp8e5m2 or eXmY (e.g. e8m5)", name);
}

void mts_format_name(const mts_format *f, char *buf, int n)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if (!memcmp(&formats[i].f, f, sizeof *f)) {
            snprintf(buf, (size_t)n, "%s", formats[i].name);
            return;
        }
    int dflt = f->bias == (1 << (f->E - 1)) - 1;
    if (dflt && f->ieee)
        snprintf(buf, (size_t)n, "e%dm%d", f->E, f->M);
    else
        snprintf(buf, (size_t)n, "e%dm%db%d%s", f->E, f->M, f->bias, f->ieee ? "" : "sat");
}

/* the rule lives in arith_hd.h, shared with the GPU */
uint32_t mts_fmt_quantize(const mts_format *f, uint32_t x, mts_round r) { return mts_fmt_quantize_hd(f, x, r); }

uint32_t mts_fmt_encode(const mts_format *f, uint32_t x)
{
    uint32_t sbit = (x >> 31) << (f->E + f->M);
    uint32_t eones = (1u << f->E) - 1u, mones = (1u << f->M) - 1u;
    if (mts_f32_isnan(x))
        return f->ieee ? (eones << f->M) | (1u << (f->M - 1)) : (eones << f->M) | mones;
    if (mts_f32_isinf(x)) return sbit | (eones << f->M); /* only ieee formats hold inf */
    uint32_t e = mts_f32_exp(x);
    if (e == 0) return sbit;
    uint32_t ec = (uint32_t)((int)e - 127 + f->bias);
    return sbit | (ec << f->M) | (mts_f32_man(x) >> (23 - f->M));
}

uint32_t mts_fmt_decode(const mts_format *f, uint32_t code)
{
    uint32_t sign = ((code >> (f->E + f->M)) & 1u) << 31;
    uint32_t eones = (1u << f->E) - 1u, mones = (1u << f->M) - 1u;
    uint32_t ec = (code >> f->M) & eones, mc = code & mones;
    if (f->ieee && ec == eones) return mc ? MTS_F32_QNAN : (sign | MTS_F32_INF);
    if (!f->ieee && ec == eones && mc == mones) return MTS_F32_QNAN;
    if (ec == 0) return sign; /* zero; subnormal codes read as zero */
    return sign | ((uint32_t)((int)ec - f->bias + 127) << 23) | (mc << (23 - f->M));
}
