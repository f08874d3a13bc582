/* intmul.c - n-bit integer multipliers as tables, affine quantization and
 * the zero-point-corrected quantized dot product (include/mantis/intmul.h,
 * docs/metrics.md "Integer multipliers"). */
#include <math.h>
#include <stdio.h>

#include "mantis/arith_hd.h"
#include "mantis/intmul.h"

int32_t mts_int_min(const mts_intfmt *f) { return f->is_signed ? -(1 << (f->bits - 1)) : 0; }

int32_t mts_int_max(const mts_intfmt *f)
{
    return f->is_signed ? (1 << (f->bits - 1)) - 1 : (1 << f->bits) - 1;
}

int32_t mts_int_value(const mts_intfmt *f, int32_t code)
{
    uint32_t c = (uint32_t)code & ((1u << f->bits) - 1u);
    if (f->is_signed && (c >> (f->bits - 1))) return (int32_t)c - (1 << f->bits);
    return (int32_t)c;
}

int32_t mts_intmul_exact(void *ctx, int32_t a, int32_t b)
{
    const mts_intfmt *f = (const mts_intfmt *)ctx;
    return mts_int_value(f, a) * mts_int_value(f, b);  /* |product| <= 2^16: no overflow */
}

int mts_intmul_exact_lut(int bits, int is_signed, mts_lut *lut, mts_err *err)
{
    mts_intfmt f = {bits, is_signed ? 1 : 0};
    char name[32];
    if (bits < 1 || bits > 8)
        return mts_fail(err, MTS_EINVAL, "exact integer multiplier: %d-bit operands, expected 1..8", bits);
    snprintf(name, sizeof name, "exact-int%d%c", bits, f.is_signed ? 's' : 'u');
    return mts_lut_generate_int(bits, f.is_signed, mts_intmul_exact, &f, name, lut, err);
}

int mts_affine_from_range(double rmin, double rmax, int bits, int is_signed, mts_affine *p,
                          mts_err *err)
{
    if (bits < 1 || bits > 8)
        return mts_fail(err, MTS_EINVAL, "affine quantization: %d-bit codes, expected 1..8", bits);
    if (!isfinite(rmin) || !isfinite(rmax) || rmin > rmax)
        return mts_fail(err, MTS_EINVAL, "affine quantization: range [%g, %g], expected finite min <= max",
                        rmin, rmax);
    mts_intfmt f = {bits, is_signed ? 1 : 0};
    p->qmin = mts_int_min(&f);
    p->qmax = mts_int_max(&f);
    /* 0 must be exactly representable (TFApprox Eq. 1): widen the range */
    if (rmin > 0) rmin = 0;
    if (rmax < 0) rmax = 0;
    if (rmax == rmin) {  /* only 0 was seen: any scale works, zero maps to 0 when possible */
        p->scale = 1.0;
        p->zero_point = p->qmin > 0 ? p->qmin : (p->qmax < 0 ? p->qmax : 0);
        return MTS_OK;
    }
    p->scale = (rmax - rmin) / (double)(p->qmax - p->qmin);
    double zp = round((double)p->qmin - rmin / p->scale);
    if (zp < p->qmin) zp = p->qmin;
    if (zp > p->qmax) zp = p->qmax;
    p->zero_point = (int32_t)zp;
    return MTS_OK;
}

int32_t mts_affine_quantize(const mts_affine *p, double r)
{
    return mts_affine_quantize_hd(p, r); /* arith_hd.h: one copy with the GPU */
}

double mts_affine_dequantize(const mts_affine *p, int32_t q) { return p->scale * (double)(q - p->zero_point); }

int64_t mts_qdot_correct(int64_t s_ab, int64_t s_a, int64_t s_b, int64_t n, int32_t za, int32_t zb)
{
    return mts_qdot_correct_hd(s_ab, s_a, s_b, n, za, zb); /* arith_hd.h: one copy with the GPU */
}

static int check_operand(const mts_intfmt *f, int32_t v, const char *what, size_t i, mts_err *err)
{
    if (v < mts_int_min(f) || v > mts_int_max(f))
        return mts_fail(err, MTS_EINVAL, "quantized dot: %s[%zu] = %d outside the table's %d-bit %s range "
                        "[%d, %d]", what, i, v, f->bits, f->is_signed ? "signed" : "unsigned",
                        mts_int_min(f), mts_int_max(f));
    return MTS_OK;
}

static int check_lut(const mts_lut *lut, mts_err *err)
{
    if (!lut || lut->kind != MTS_LUT_INT || lut->int_bits < 1 || lut->int_bits > 8 || !lut->entry ||
        lut->n != (size_t)1 << (2 * lut->int_bits))
        return mts_fail(err, MTS_EINVAL, "quantized dot: expected an integer table (kind MTS_LUT_INT, "
                        "1..8-bit operands, 2^(2n) entries)");
    return MTS_OK;
}

int mts_qdot_int(const mts_lut *lut, const int32_t *qa, int32_t za, const int32_t *qb, int32_t zb,
                 size_t n, int64_t *out, mts_err *err)
{
    int rc;
    if ((rc = check_lut(lut, err)) != MTS_OK) return rc;
    mts_intfmt f = {lut->int_bits, lut->int_signed ? 1 : 0};
    if ((rc = check_operand(&f, za, "zero point a", 0, err)) != MTS_OK) return rc;
    if ((rc = check_operand(&f, zb, "zero point b", 0, err)) != MTS_OK) return rc;
    int64_t s_ab = 0, s_a = 0, s_b = 0;
    for (size_t i = 0; i < n; i++) {
        if ((rc = check_operand(&f, qa[i], "a", i, err)) != MTS_OK) return rc;
        if ((rc = check_operand(&f, qb[i], "b", i, err)) != MTS_OK) return rc;
        s_ab += mts_lut_int_mul(lut, qa[i], qb[i]);
        s_a += qa[i];
        s_b += qb[i];
    }
    *out = mts_qdot_correct(s_ab, s_a, s_b, (int64_t)n, za, zb);
    return MTS_OK;
}

int mts_qdot_float(const mts_lut *lut, const mts_affine *pa, const float *a, const mts_affine *pb,
                   const float *b, size_t n, double *out, mts_err *err)
{
    int rc;
    if ((rc = check_lut(lut, err)) != MTS_OK) return rc;
    mts_intfmt f = {lut->int_bits, lut->int_signed ? 1 : 0};
    if (pa->qmin != mts_int_min(&f) || pa->qmax != mts_int_max(&f) || pb->qmin != mts_int_min(&f) ||
        pb->qmax != mts_int_max(&f))
        return mts_fail(err, MTS_EINVAL, "quantized dot: code ranges [%d, %d] and [%d, %d] do not match "
                        "the table's operands [%d, %d]", pa->qmin, pa->qmax, pb->qmin, pb->qmax,
                        mts_int_min(&f), mts_int_max(&f));
    /* quantize and accumulate in one pass: no temporary arrays */
    int64_t s_ab = 0, s_a = 0, s_b = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t qa = mts_affine_quantize(pa, a[i]), qb = mts_affine_quantize(pb, b[i]);
        s_ab += mts_lut_int_mul(lut, qa, qb);
        s_a += qa;
        s_b += qb;
    }
    int64_t acc = mts_qdot_correct(s_ab, s_a, s_b, (int64_t)n, pa->zero_point, pb->zero_point);
    *out = pa->scale * pb->scale * (double)acc;
    return MTS_OK;
}
