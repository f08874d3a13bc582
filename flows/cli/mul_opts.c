/* mul_opts.c - parsing and opening of the multiplier-selection options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "mul_opts.h"

const char mulsel_help[] =
    "  --mul NAME        a C model (mantis models lists them)\n"
    "  --man-bits M      mantissa bits of the (1,8,M) format (default 7 = bfloat16; fp32: 23)\n"
    "  --format F        format instead of --man-bits: fp32 bf16 fp16 fp8e4m3 fp8e5m2 eXmY\n"
    "  --lut FILE        a Mantis LUT file (float or integer table)\n"
    "  --rtl FILE.v      a Verilog design (drop-in contract, docs/rtl.md)\n"
    "  --param K=V       override a Verilog parameter (repeatable)\n"
    "  --kind K          design kind when widths are ambiguous: sig float int acc\n"
    "  --signed, --unsigned  how an integer design's operands are read (default: declared\n"
    "                    MANTIS_SIGNED, else the reading closer to the exact product)\n";

void mulsel_init(mulsel *s)
{
    memset(s, 0, sizeof *s);
    s->man_bits = -1;
}

static int value(int argc, char **argv, int *i, const char **out, mts_err *err)
{
    if (*i + 1 >= argc) return mts_fail(err, MTS_EINVAL, "option %s needs a value", argv[*i]);
    *out = argv[++*i];
    return 1;
}

int mulsel_arg(mulsel *s, int argc, char **argv, int *i, mts_err *err)
{
    const char *a = argv[*i], *v = NULL;
    if (!strcmp(a, "--mul")) return value(argc, argv, i, &s->mul, err);
    if (!strcmp(a, "--lut")) return value(argc, argv, i, &s->lut, err);
    if (!strcmp(a, "--rtl")) return value(argc, argv, i, &s->rtl, err);
    if (!strcmp(a, "--format")) return value(argc, argv, i, &s->format, err);
    if (!strcmp(a, "--kind")) return value(argc, argv, i, &s->kind, err);
    if (!strcmp(a, "--signed") || !strcmp(a, "--unsigned")) { /* flags: no value */
        s->int_sign = a[2] == 's' ? MTS_RTL_SIGN_SIGNED : MTS_RTL_SIGN_UNSIGNED;
        return 1;
    }
    if (!strcmp(a, "--param")) {
        int rc = value(argc, argv, i, &v, err);
        if (rc < 0) return rc;
        if (!strchr(v, '=')) return mts_fail(err, MTS_EINVAL, "--param '%s': expected NAME=VALUE", v);
        if (s->nparams == MTS_RTL_MAX_PARAMS) return mts_fail(err, MTS_EINVAL, "too many --param (max %d)", MTS_RTL_MAX_PARAMS);
        s->params[s->nparams++] = v;
        return 1;
    }
    if (!strcmp(a, "--man-bits")) {
        int rc = value(argc, argv, i, &v, err);
        if (rc < 0) return rc;
        long m;
        if (mts_parse_int(v, 1, 23, &m))
            return mts_fail(err, MTS_EINVAL, "--man-bits '%s': expected an integer 1..23", v);
        s->man_bits = (int)m;
        return 1;
    }
    return 0;
}


int mulsel_open(const mulsel *s, mulhandle *h, mts_err *err)
{
    memset(h, 0, sizeof *h);
    int given = !!s->mul + !!s->lut + !!s->rtl;
    if (given != 1)
        return mts_fail(err, MTS_EINVAL, "give exactly one of --mul NAME, --lut FILE or --rtl FILE.v");
    if (s->lut) {
        int rc = mts_lut_load(s->lut, &h->lut, err);
        if (rc) return rc;
        if (h->lut.kind == MTS_LUT_INT)
            h->is_int = 1;
        else
            mts_mulop_lut(&h->op, &h->lut);
        return MTS_OK;
    }
    if (s->rtl) return mulsel_rtl_open(s, h, err);
    mts_format f;
    if (s->format && s->man_bits >= 0)
        return mts_fail(err, MTS_EINVAL, "give --format or --man-bits, not both");
    if (s->format) {
        int rc = mts_format_parse(s->format, &f, err);
        if (rc) return rc;
    } else {
        f = mts_format_e8(s->man_bits >= 0 ? s->man_bits : !strcmp(s->mul, "fp32") ? 23 : 7);
    }
    return mts_mulop_model(&h->op, s->mul, &f, err);
}

int mulsel_arith_open(void *ud, const mts_arith_spec *s, int threads, mts_arith *a, mts_err *err)
{
    mulsel_arith *m = ud;
    if (!m->sel || !m->sel->rtl || strcmp(s->mul, "rtl")) return mts_arith_open(s, threads, a, err);
    if (m->n == 3) return mts_fail(err, MTS_EINVAL, "--rtl: more than 3 instances");
    mulhandle *h = &m->h[m->n++]; /* counted now: a failed open may hold a half-open handle */
    memset(h, 0, sizeof *h);
    memset(a, 0, sizeof *a);
    mts_rtl_opts o;
    int rc = mulsel_rtl_opts(m->sel, &o, err);
    if (rc) return rc;
    mts_rtl *r = NULL;
    rc = mts_arith_open_rtl(&o, threads, a, &r, err); /* the library's opener (Python's too) */
    h->rtl = r; /* the design outlives a: closed by mulsel_arith_close */
    return rc;
}

void mulsel_arith_close(mulsel_arith *m)
{
    for (int i = 0; i < m->n; i++) mulhandle_close(&m->h[i]);
    m->n = 0;
}

int mul_layers_arg(mul_layers *m, int argc, char **argv, int *i, mts_err *err)
{
    const char *v = NULL;
    if (strcmp(argv[*i], "--mul-layer")) return 0;
    if (value(argc, argv, i, &v, err) < 0) return -1;
    if (m->n == MTS_MAX_LAYER_RULES) return mts_fail(err, MTS_EINVAL, "at most %d --mul-layer rules", MTS_MAX_LAYER_RULES);
    mts_layer_rule r;
    if (mts_layer_rule_parse(v, &r, err) != MTS_OK) return -1;
    m->rule[m->n++] = v;
    return 1;
}
