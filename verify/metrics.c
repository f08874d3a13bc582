/* metrics.c - error metrics from exhaustive sweeps (include/mantis/metrics.h,
 * definitions in docs/metrics.md). */
#include <math.h>
#include <string.h>

#include "mantis/amsim.h"
#include "mantis/fpbits.h"
#include "mantis/intmul.h"
#include "mantis/json.h"
#include "mantis/metrics.h"

/* Neumaier's compensated summation: *sum + *c carries the running total. */
static void kahan_add(double *sum, double *c, double x)
{
    double t = *sum + x;
    if (fabs(*sum) >= fabs(x)) *c += (*sum - t) + x;
    else *c += (x - t) + *sum;
    *sum = t;
}

void mts_metrics_acc_init(mts_metrics_acc *a) { memset(a, 0, sizeof *a); }

void mts_metrics_acc_add(mts_metrics_acc *a, double approx, double ref)
{
    a->pairs++;
    if (approx == ref) {  /* also counts the zero-error pair's relative error below */
        if (ref != 0) a->rel_pairs++;
        return;
    }
    a->errors++;
    if (!isfinite(approx)) {  /* inf or NaN result: accounted for in _finish */
        a->nonfinite++;
        if (ref != 0) { a->rel_pairs++; a->nonfinite_rel++; }
        return;
    }
    double e = approx - ref, d = fabs(e);
    kahan_add(&a->sum_abs, &a->c_abs, d);
    kahan_add(&a->sum_err, &a->c_err, e);
    if (d > a->wce) a->wce = d;
    if (ref != 0) {
        double r = d / fabs(ref);
        a->rel_pairs++;
        kahan_add(&a->sum_rel, &a->c_rel, r);
        if (r > a->max_re) a->max_re = r;
    }
}

void mts_metrics_acc_finish(const mts_metrics_acc *a, double norm, mts_metrics *m)
{
    double n = (double)a->pairs, nr = (double)a->rel_pairs;
    m->pairs = a->pairs;
    m->errors = a->errors;
    m->rel_pairs = a->rel_pairs;
    m->nonfinite = a->nonfinite;
    m->norm = norm;
    m->error_rate = a->pairs ? (double)a->errors / n : 0;
    m->med = a->pairs ? (a->sum_abs + a->c_abs) / n : 0;
    m->nmed = m->med / norm;
    m->bias = a->pairs ? (a->sum_err + a->c_err) / n : 0;
    m->mred = a->rel_pairs ? (a->sum_rel + a->c_rel) / nr : 0;
    m->wce = a->wce;
    m->max_re = a->max_re;
    if (a->nonfinite) {  /* an inf/NaN result is infinitely far off, in unknown direction */
        m->med = m->nmed = m->wce = INFINITY;
        m->bias = NAN;
    }
    if (a->nonfinite_rel) m->mred = m->max_re = INFINITY;
}

/* The exact significand product (2^M + ma)(2^M + mb) with 2M fraction bits,
 * rounded to nearest even at M fraction bits of the normalised result, as
 * a double. Integer arithmetic: independent of any model code. */
static double product_rne(uint32_t ma, uint32_t mb, int M)
{
    uint64_t p = ((uint64_t)1 << M | ma) * ((uint64_t)1 << M | mb);  /* value p * 2^-2M in [1,4) */
    int sh = (p >> (2 * M + 1)) ? M + 1 : M;  /* bits dropped to keep M+1 significant bits */
    uint64_t q = p >> sh, rem = p & (((uint64_t)1 << sh) - 1u), half = (uint64_t)1 << (sh - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return ldexp((double)q, sh - 2 * M);
}

int mts_metrics_mulop(const mts_mulop *op, mts_metric_ref ref, mts_metrics *m, mts_err *err)
{
    const mts_format *f = &op->fmt;
    int M = f->M;
    if (M < 1 || M > 12)
        return mts_fail(err, MTS_EINVAL, "metrics %s: an exhaustive sweep takes M = 1..12 mantissa bits, "
                        "not %d", op->name, M);
    if (mts_fmt_emin(f) > 0 || mts_fmt_emax(f) < 1)
        return mts_fail(err, MTS_EINVAL, "metrics %s: the format's exponents [%d, %d] do not contain the "
                        "mid pair (operands in [1,2), products in [1,4))", op->name, mts_fmt_emin(f),
                        mts_fmt_emax(f));
    if (ref != MTS_REF_EXACT && ref != MTS_REF_RNE)
        return mts_fail(err, MTS_EINVAL, "metrics %s: unknown reference %d", op->name, (int)ref);

    mts_metrics_acc acc;
    mts_metrics_acc_init(&acc);
    uint32_t nm = 1u << M;
    for (uint32_t ma = 0; ma < nm; ma++) {
        uint32_t a = 0x3F800000u | (ma << (23 - M));  /* 1.ma * 2^0 */
        for (uint32_t mb = 0; mb < nm; mb++) {
            uint32_t b = 0x3F800000u | (mb << (23 - M));
            /* (M+1)-bit significands: the product has <= 2M+2 <= 26 bits, exact in double */
            double exact = (1.0 + ldexp(ma, -M)) * (1.0 + ldexp(mb, -M));
            double r = ref == MTS_REF_RNE ? product_rne(ma, mb, M) : exact;
            double approx = (double)mts_u2f(op->fn(op, a, b));
            mts_metrics_acc_add(&acc, approx, r);
        }
    }
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", op->name);
    m->is_int = 0;
    m->bits = M;
    m->ref = ref;
    /* Products of the (M+1)-bit significands lie in [1, 4): 4 = 2^2 plays the
     * role of EvoApproxLib's 2^(2n) (the bound of the output range). */
    mts_metrics_acc_finish(&acc, 4.0, m);
    return MTS_OK;
}

int mts_metrics_int_lut(const mts_lut *lut, mts_metrics *m, mts_err *err)
{
    if (!lut || lut->kind != MTS_LUT_INT || lut->int_bits < 1 || lut->int_bits > 8 || !lut->entry ||
        lut->n != (size_t)1 << (2 * lut->int_bits))
        return mts_fail(err, MTS_EINVAL, "metrics: expected an integer table (1..8-bit operands, "
                        "2^(2n) entries)");
    mts_intfmt f = {lut->int_bits, lut->int_signed ? 1 : 0};
    int n = f.bits;
    mts_metrics_acc acc;
    mts_metrics_acc_init(&acc);
    for (uint32_t ca = 0; ca < (1u << n); ca++) {
        for (uint32_t cb = 0; cb < (1u << n); cb++) {
            int32_t a = mts_int_value(&f, (int32_t)ca), b = mts_int_value(&f, (int32_t)cb);
            int32_t approx = (int32_t)lut->entry[(ca << n) | cb];
            mts_metrics_acc_add(&acc, (double)approx, (double)a * (double)b);
        }
    }
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", lut->model);
    m->is_int = 1;
    m->bits = n;
    m->is_signed = f.is_signed;
    m->ref = MTS_REF_EXACT;
    mts_metrics_acc_finish(&acc, ldexp(1.0, 2 * n), m);  /* EvoApproxLib: 2^(2n) */
    return MTS_OK;
}

int mts_metrics_lut(const mts_lut *lut, mts_metric_ref ref, mts_metrics *m, mts_err *err)
{
    if (lut && lut->kind == MTS_LUT_INT) return mts_metrics_int_lut(lut, m, err);
    if (!lut || lut->kind != MTS_LUT_FLOAT || !lut->entry)
        return mts_fail(err, MTS_EINVAL, "metrics: expected a float or integer table");
    mts_mulop op;
    mts_mulop_lut(&op, lut);
    return mts_metrics_mulop(&op, ref, m, err);
}

static const char *ref_name(const mts_metrics *m)
{
    if (m->is_int) return "a*b";
    return m->ref == MTS_REF_RNE ? "exact product, RNE at M bits" : "exact product";
}

void mts_metrics_print_text(FILE *f, const mts_metrics *m)
{
    fprintf(f, "multiplier:      %s\n", m->name);
    if (m->is_int)
        fprintf(f, "operands:        %d-bit %s integers\n", m->bits, m->is_signed ? "signed" : "unsigned");
    else
        fprintf(f, "operands:        M = %d mantissa bits, both in [1,2)\n", m->bits);
    fprintf(f, "reference:       %s\n", ref_name(m));
    fprintf(f, "pairs:           %llu\n", (unsigned long long)m->pairs);
    fprintf(f, "error rate:      %.9g (%llu pairs)\n", m->error_rate, (unsigned long long)m->errors);
    fprintf(f, "MED:             %.9g\n", m->med);
    fprintf(f, "NMED:            %.9g (MED / %g)\n", m->nmed, m->norm);
    fprintf(f, "MRED:            %.9g (over %llu pairs with non-zero reference)\n", m->mred,
            (unsigned long long)m->rel_pairs);
    fprintf(f, "WCE:             %.9g\n", m->wce);
    fprintf(f, "bias:            %.9g\n", m->bias);
    fprintf(f, "max rel. error:  %.9g\n", m->max_re);
    if (m->nonfinite) fprintf(f, "non-finite:      %llu results\n", (unsigned long long)m->nonfinite);
}

void mts_metrics_print_json(FILE *f, const mts_metrics *m)
{
    mts_jw w;
    mts_jw_init(&w, f);
    mts_jw_obj(&w, NULL, 0);
    mts_jw_str(&w, "name", m->name);
    mts_jw_str(&w, "kind", m->is_int ? "int" : "float");
    mts_jw_int(&w, "bits", m->bits);
    mts_jw_bool(&w, "signed", m->is_signed);
    mts_jw_str(&w, "reference", ref_name(m));
    mts_jw_uint(&w, "pairs", (unsigned long long)m->pairs);
    mts_jw_uint(&w, "errors", (unsigned long long)m->errors);
    mts_jw_uint(&w, "rel_pairs", (unsigned long long)m->rel_pairs);
    mts_jw_uint(&w, "nonfinite", (unsigned long long)m->nonfinite);
    const struct { const char *key; double v; } num[] = {
        {"error_rate", m->error_rate}, {"med", m->med}, {"norm", m->norm}, {"nmed", m->nmed},
        {"mred", m->mred},             {"wce", m->wce}, {"bias", m->bias}, {"max_re", m->max_re}};
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++) mts_jw_num(&w, num[i].key, num[i].v, NULL); /* null when not finite */
    mts_jw_end(&w);
}
