/* lut_gen.c - mantissa LUT generation (ApproxTrain Algorithm 1, generalised).
 *
 * Unlike Algorithm 1 the exponent adjustment is not a carry bit: it is the
 * product's exponent minus the operands' exponent sum, any int8, so products
 * below 1.0 and exact zeros are representable. And a table is never taken on
 * trust: every entry is re-checked against the multiplier at several exponent
 * pairs and sign combinations through AMSim itself; a multiplier whose mantissa
 * depends on the exponents (or whose sign is not the xor) is refused, naming
 * an input pair where the table would be wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/amsim.h"
#include "mantis/fpbits.h"
#include "mantis/lut.h"

#define MAX_PAIRS 24

typedef struct {
    int ea, eb; /* unbiased exponents */
} epair;

static uint32_t make(int neg, int e, uint32_t m, int M)
{
    return (neg ? MTS_F32_SIGN : 0u) | ((uint32_t)(e + 127) << 23) | (m << (23 - M));
}

/* Probe exponent pairs: first the base pair (where entries are read, sum in
 * the middle of the range), then pairs whose operands sit at the extremes,
 * then pairs whose sums approach both ends of the range, where a product
 * overflows or underflows according to its adjustment. */
static int probe_pairs(const mts_format *f, epair *p)
{
    int emin = mts_fmt_emin(f), emax = mts_fmt_emax(f), t0 = (emin + emax) / 2, n = 0;
    p[n++] = (epair){t0 - t0 / 2, t0 / 2};
    int cand[] = {emin, emin + 1, emin + 2, (emin + emax) / 2 - 1, emax - 2, emax - 1, emax};
    int sums[] = {(emin + t0) / 2, (emax + t0) / 2, emin - 1, emin, emin + 1, emax - 1, emax, emax + 1};
    for (int ds = -1; ds <= 1; ds++)
        for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
            int ea = cand[i], eb = t0 + ds - ea, dup = 0;
            if (ea < emin || ea > emax || eb < emin || eb > emax) continue;
            for (int k = 0; k < n; k++) dup |= p[k].ea == ea && p[k].eb == eb;
            if (!dup && n < MAX_PAIRS - 8) p[n++] = (epair){ea, eb};
        }
    for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++) {
        int ea = sums[i] - sums[i] / 2, eb = sums[i] / 2;
        if (ea >= emin && ea <= emax && eb >= emin && eb <= emax) p[n++] = (epair){ea, eb};
    }
    return n;
}

typedef struct {
    long long idx; /* first failing entry index, -1 if none */
    char msg[sizeof(((mts_err *)0)->msg)];
} failure;

static void record(failure *fl, long long idx, const char *msg)
{
#pragma omp critical(mts_lutgen_fail)
    if (fl->idx < 0 || idx < fl->idx) {
        fl->idx = idx;
        snprintf(fl->msg, sizeof fl->msg, "%s", msg);
    }
}

/* Derives and checks one entry; returns 0 and *entry, or nonzero with msg. */
static int one_entry(const mts_mulop *op, const epair *pr, int np, uint32_t ma, uint32_t mb, uint32_t *entry,
                     char *msg, size_t mlen)
{
    const mts_format *f = &op->fmt;
    int M = f->M, emax = mts_fmt_emax(f);
    uint32_t a = make(0, pr[0].ea, ma, M), b = make(0, pr[0].eb, mb, M);
    uint32_t r = op->fn(op, a, b);
    int ebase = pr[0].ea + pr[0].eb;
    if (mts_f32_exp(r) == 0) {
        /* zero at mid exponents: an exact zero, or a product so small that it
         * underflowed; look again with the exponent sum as high as it goes */
        int eh = emax, el = emax - emax / 2;
        uint32_t ah = make(0, eh - el, ma, M), bh = make(0, el, mb, M), rh = op->fn(op, ah, bh);
        if (mts_f32_exp(rh) != 0 && mts_f32_exp(rh) != 0xFF) {
            r = rh;
            a = ah;
            b = bh;
            ebase = eh;
        }
    }
    if (mts_f32_isnan(r) || mts_f32_isinf(r)) {
        snprintf(msg, mlen, "%s: %08x * %08x = %08x is not finite although both exponents are mid-range",
                 op->name, a, b, r);
        return 1;
    }
    if (r & MTS_F32_SIGN) {
        snprintf(msg, mlen, "%s: %08x * %08x = %08x is negative for positive operands", op->name, a, b, r);
        return 1;
    }
    uint32_t e;
    if (mts_f32_exp(r) == 0) {
        e = MTS_LUT_ZERO;
    } else {
        int adj = (int)mts_f32_exp(r) - 127 - ebase;
        if (adj < -128 || adj > 127) {
            snprintf(msg, mlen, "%s: %08x * %08x = %08x: exponent adjustment %d outside int8", op->name, a, b, r,
                     adj);
            return 1;
        }
        e = ((uint32_t)(adj & 0xFF) << 24) | mts_f32_man(r);
    }
    /* the table must reproduce the multiplier at every probe */
    for (int k = 0; k < np; k++)
        for (int s = 0; s < (k == 0 ? 4 : 1); s++) {
            uint32_t x = make(s & 1, pr[k].ea, ma, M), y = make(s >> 1, pr[k].eb, mb, M);
            uint32_t want = op->fn(op, x, y), got = mts_amsim_entry(f, e, x, y);
            if (want != got) {
                snprintf(msg, mlen,
                         "%s is not LUT-representable: %08x * %08x = %08x, but the same mantissas at "
                         "%08x * %08x give table entry %08x, which predicts %08x (the mantissa depends on the "
                         "exponents or signs)",
                         op->name, x, y, want, a, b, e, got);
                return 1;
            }
        }
    *entry = e;
    return 0;
}

int mts_lut_generate(const mts_mulop *op, mts_lut *lut, mts_err *err)
{
    const mts_format *f = &op->fmt;
    int rc = mts_format_check(f, err);
    if (rc) return rc;
    if (f->M > 11)
        return mts_fail(err, MTS_EINVAL, "%s: LUTs hold M <= 11 mantissa bits (2^22 entries), not %d", op->name,
                        f->M);
    memset(lut, 0, sizeof *lut);
    size_t n = (size_t)1 << (2 * f->M);
    uint32_t *tab = malloc(n * sizeof *tab);
    if (!tab) return mts_fail(err, MTS_ENOMEM, "%s: cannot allocate %zu LUT entries", op->name, n);
    epair pr[MAX_PAIRS];
    int np = probe_pairs(f, pr);
    failure fl = {.idx = -1};
    long long total = (long long)n;
    uint32_t M = (uint32_t)f->M;
#pragma omp parallel for schedule(dynamic, 256) if (!op->serial)
    for (long long i = 0; i < total; i++) {
        char msg[sizeof fl.msg];
        if (one_entry(op, pr, np, (uint32_t)i >> M, (uint32_t)i & ((1u << M) - 1u), &tab[i], msg, sizeof msg))
            record(&fl, i, msg);
    }
    if (fl.idx >= 0) {
        free(tab);
        return mts_fail(err, MTS_ENOTLUT, "%s", fl.msg);
    }
    lut->kind = MTS_LUT_FLOAT;
    lut->fmt = *f;
    snprintf(lut->model, sizeof lut->model, "%s", op->name);
    lut->n = n;
    lut->entry = tab;
    return MTS_OK;
}

int mts_lut_generate_int(int nbits, int is_signed, int32_t (*fn)(void *ctx, int32_t a, int32_t b), void *ctx,
                         const char *name, mts_lut *lut, mts_err *err)
{
    if (nbits < 1 || nbits > 8)
        return mts_fail(err, MTS_EINVAL, "%s: integer tables take 1..8-bit operands, not %d", name, nbits);
    memset(lut, 0, sizeof *lut);
    size_t n = (size_t)1 << (2 * nbits);
    uint32_t *tab = malloc(n * sizeof *tab);
    if (!tab) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", name);
    uint32_t mask = (1u << nbits) - 1u;
    for (size_t i = 0; i < n; i++) {
        uint32_t ca = (uint32_t)(i >> nbits), cb = (uint32_t)i & mask;
        int32_t a = (int32_t)ca, b = (int32_t)cb;
        if (is_signed) { /* two's complement codes */
            if (ca >> (nbits - 1)) a -= 1 << nbits;
            if (cb >> (nbits - 1)) b -= 1 << nbits;
        }
        tab[i] = (uint32_t)fn(ctx, a, b);
    }
    lut->kind = MTS_LUT_INT;
    lut->int_bits = nbits;
    lut->int_signed = is_signed;
    snprintf(lut->model, sizeof lut->model, "%s", name);
    lut->n = n;
    lut->entry = tab;
    return MTS_OK;
}

void mts_lut_free(mts_lut *lut)
{
    free(lut->entry);
    lut->entry = NULL;
    lut->n = 0;
}
