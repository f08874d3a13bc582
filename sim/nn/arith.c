/* arith.c - turns an arithmetic choice written as text (mts_arith_spec)
 * into an mts_provider: LUT sweep of a C model, LUT file, native FP32,
 * OpenBLAS, plus FMAq accumulation. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/nn_arith.h"
#include "mantis/parse.h"
#include "mantis/rtl.h"

void mts_arith_spec_init(mts_arith_spec *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->mul, sizeof s->mul, "fp32");
    s->man_bits = -1;
    s->acc_bias = s->prod_bias = -1;
}

void mts_arith_close(mts_arith *a)
{
    mts_qtab_free(&a->qtab);
    mts_int_grad_free(&a->igrad);
    mts_lut_free(&a->lut);
    memset(a, 0, sizeof *a);
}

int mts_arith_int_prepare(mts_arith *a, int grads, mts_err *err)
{
    const mts_lut *t = a->p.lut;
    if (a->p.kind != MTS_PROV_INT || !t) return MTS_OK;
    int rc = a->qtab.lut == t ? MTS_OK : mts_qtab_init(&a->qtab, t, err);
    if (rc == MTS_OK && grads && a->igrad.lut != t)
        rc = mts_int_grad_build(t, mts_int_grad_default_window(t->int_bits), &a->igrad, err);
    return rc;
}

static int open_mul(const mts_arith_spec *s, mts_arith *a, mts_err *err)
{
    mts_provider *p = &a->p;
    int rc;
    if (s->lut[0]) {
        mts_lut t;
        if ((rc = mts_lut_load(s->lut, &t, err)) != MTS_OK) return rc;
        char what[192];
        snprintf(what, sizeof what, "lut file %.150s", s->lut);
        mts_arith_from_lut(&t, 0, what, a);
        return MTS_OK;
    }
    if (!strcmp(s->mul, "fp32") || !strcmp(s->mul, "native")) {
        p->kind = MTS_PROV_NATIVE;
        snprintf(a->desc, sizeof a->desc, "native fp32");
        return MTS_OK;
    }
    if (!strcmp(s->mul, "blas")) {
        p->kind = MTS_PROV_BLAS;
        snprintf(a->desc, sizeof a->desc, "openblas fp32");
        return MTS_OK;
    }
    const char *model = s->mul;
    mts_format f;
    if (!strcmp(model, "bf16")) {
        model = "exact";
        f = mts_format_e8(7);
    } else if (s->format[0]) {
        if ((rc = mts_format_parse(s->format, &f, err)) != MTS_OK) return rc;
    } else {
        f = mts_format_e8(s->man_bits >= 0 ? s->man_bits : 7);
    }
    if ((rc = mts_mulop_model(&a->op, model, &f, err)) != MTS_OK) return rc;
    char fn[32];
    mts_format_name(&f, fn, sizeof fn);
    if (f.M <= 11) {
        mts_err e2;
        rc = mts_lut_generate(&a->op, &a->lut, &e2);
        if (rc == MTS_OK) {
            p->kind = MTS_PROV_LUT;
            p->lut = &a->lut;
            snprintf(a->desc, sizeof a->desc, "lut %s %s", model, fn);
            return MTS_OK;
        }
        if (rc != MTS_ENOTLUT) return mts_fail(err, rc, "%s", e2.msg);
    }
    /* not tabulable (or too wide for a table): every product through the model */
    p->kind = MTS_PROV_MULOP;
    p->mul = &a->op;
    snprintf(a->desc, sizeof a->desc, "mulop %s %s", model, fn);
    return MTS_OK;
}

int mts_arith_open(const mts_arith_spec *s, int threads, mts_arith *a, mts_err *err)
{
    memset(a, 0, sizeof *a);
    int rc = open_mul(s, a, err);
    if (rc != MTS_OK) {
        mts_arith_close(a);
        return rc;
    }
    a->p.threads = threads;
    if ((rc = mts_arith_acc(s, &a->p, a->desc, sizeof a->desc, err)) != MTS_OK) mts_arith_close(a);
    return rc;
}

int mts_arith_acc(const mts_arith_spec *s, mts_provider *p, char *desc, size_t n, mts_err *err)
{
    p->chunk = s->chunk > 0 ? s->chunk : 16;
    p->fmaq = 0;
    if (!s->acc[0]) return MTS_OK;
    if (p->kind == MTS_PROV_INT)
        return mts_fail(err, MTS_EINVAL, "--acc needs a float multiplier, not an integer table");
    mts_qfmt qacc, qprod;
    int rc;
    if ((rc = mts_qfmt_parse(s->acc, s->acc_bias, &qacc, err)) != MTS_OK ||
        (rc = mts_qfmt_parse(s->prod[0] ? s->prod : s->acc, s->prod_bias, &qprod, err)) != MTS_OK)
        return rc;
    p->qacc = qacc;
    p->qprod = qprod;
    p->qacc.underflow = p->qprod.underflow = !s->no_underflow;
    p->fmaq = 1;
    char qa[48], qp[48];
    mts_qfmt_name(&p->qacc, qa, sizeof qa);
    mts_qfmt_name(&p->qprod, qp, sizeof qp);
    size_t l = strnlen(desc, n);
    if (l < n) snprintf(desc + l, n - l, " + fmaq acc %s prod %s chunk %d", qa, qp, p->chunk);
    return MTS_OK;
}

void mts_arith_from_lut(mts_lut *lut, int threads, const char *what, mts_arith *a)
{
    memset(a, 0, sizeof *a);
    a->lut = *lut;
    memset(lut, 0, sizeof *lut);
    a->p.lut = &a->lut;
    a->p.kind = a->lut.kind == MTS_LUT_INT ? MTS_PROV_INT : MTS_PROV_LUT;
    a->p.threads = threads;
    a->p.chunk = 16;
    snprintf(a->desc, sizeof a->desc, "%s", what);
}

int mts_arith_open_rtl(const mts_rtl_opts *o, int threads, mts_arith *a, mts_rtl **rtl, mts_err *err)
{
    memset(a, 0, sizeof *a);
    *rtl = NULL;
    mts_rtl *r;
    int rc = mts_rtl_open(o, &r, err);
    if (rc != MTS_OK) return rc;
    const mts_rtl_info *info = mts_rtl_get_info(r);
    if (info->kind == MTS_RTL_ACC) {
        mts_rtl_close(r);
        return mts_fail(err, MTS_EINVAL,
                        "%s: an accumulator design is not a multiplier (train it as --mul exact with --acc in its formats)",
                        o->path);
    }
    if (info->kind == MTS_RTL_INT) {
        /* integer designs are exhaustively tabulated once (2^16 pairs at most) */
        mts_lut t;
        rc = mts_rtl_lut(r, &t, err);
        if (rc == MTS_OK) mts_arith_from_lut(&t, threads, "", a);
    } else {
        rc = mts_rtl_mulop(r, &a->op, err);
        a->p.kind = MTS_PROV_MULOP;
        a->p.mul = &a->op;
        a->p.threads = threads;
        a->p.chunk = 16;
    }
    if (rc != MTS_OK) {
        mts_arith_close(a);
        mts_rtl_close(r);
        return rc;
    }
    snprintf(a->desc, sizeof a->desc, "rtl %.180s", o->path);
    *rtl = r;
    return MTS_OK;
}

void mts_arith_spec_str(const mts_arith_spec *s, char *buf, size_t n)
{
    snprintf(buf, n, "mul=%s;lut=%s;format=%s;man_bits=%d;acc=%s;prod=%s;acc_bias=%d;prod_bias=%d;chunk=%d;no_uf=%d",
             s->mul, s->lut, s->format, s->man_bits, s->acc, s->prod, s->acc_bias, s->prod_bias, s->chunk,
             s->no_underflow);
}

/* A whole decimal int (optional '-', digits, nothing else, no overflow); -1 if not. */
static int spec_int(const char *v, int *out)
{
    long x;
    if (mts_parse_int(v, INT_MIN, INT_MAX, &x)) return -1;
    *out = (int)x;
    return 0;
}

int mts_arith_spec_parse(const char *str, mts_arith_spec *s, mts_err *err)
{
    mts_arith_spec_init(s);
    s->mul[0] = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", str);
    for (char *save = NULL, *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
        char *v = strchr(kv, '=');
        if (!v) return mts_fail(err, MTS_EFORMAT, "arithmetic spec '%s': '%s' is not key=value", str, kv);
        *v++ = 0;
        int bad = 0;
        if (!strcmp(kv, "mul")) snprintf(s->mul, sizeof s->mul, "%s", v);
        else if (!strcmp(kv, "lut")) snprintf(s->lut, sizeof s->lut, "%s", v);
        else if (!strcmp(kv, "format")) snprintf(s->format, sizeof s->format, "%s", v);
        else if (!strcmp(kv, "man_bits")) bad = spec_int(v, &s->man_bits);
        else if (!strcmp(kv, "acc")) snprintf(s->acc, sizeof s->acc, "%s", v);
        else if (!strcmp(kv, "prod")) snprintf(s->prod, sizeof s->prod, "%s", v);
        else if (!strcmp(kv, "acc_bias")) bad = spec_int(v, &s->acc_bias);
        else if (!strcmp(kv, "prod_bias")) bad = spec_int(v, &s->prod_bias);
        else if (!strcmp(kv, "chunk")) bad = spec_int(v, &s->chunk);
        else if (!strcmp(kv, "no_uf")) bad = spec_int(v, &s->no_underflow);
        else return mts_fail(err, MTS_EFORMAT, "arithmetic spec '%s': unknown key '%s'", str, kv);
        if (bad) return mts_fail(err, MTS_EFORMAT, "arithmetic spec '%s': %s='%s' is not an integer", str, kv, v);
    }
    return MTS_OK;
}
