/* verify_rtl.c - mts_verify_rtl: dispatches on the design's kind, prints the
 * header and summary lines and writes the JSON report. */
#include <stdio.h>
#include <string.h>

#include "verify_internal.h"

static void header(const vfy_ctx *v)
{
    FILE *out = v->o->out;
    if (!out) return;
    const mts_rtl_info *in = v->in;
    char what[200] = "";
    if (in->kind == MTS_RTL_SIG || in->kind == MTS_RTL_FLOAT) {
        char f[40];
        mts_format_name(&in->fmt, f, sizeof f);
        snprintf(what, sizeof what, "format %s (E=%d, M=%d, bias %d)", f, in->fmt.E, in->fmt.M, in->fmt.bias);
    } else if (in->kind == MTS_RTL_INT) {
        int l = snprintf(what, sizeof what, "%d-bit %s operands (%s", in->int_bits,
                         in->int_signed ? "signed" : "unsigned", mts_rtl_signsrc_name(in->sign_src));
        if (in->mred_unsigned >= 0)
            snprintf(what + l, sizeof what - (size_t)l, "; MRED vs exact: %.4g%% unsigned, %.4g%% signed)",
                     100 * in->mred_unsigned, 100 * in->mred_signed);
        else
            snprintf(what + l, sizeof what - (size_t)l, ")");
    } else {
        char p[40], a[40];
        mts_qfmt_name(&in->qprod, p, sizeof p);
        mts_qfmt_name(&in->qacc, a, sizeof a);
        snprintf(what, sizeof what, "Q_prod %s, Q_acc %s", p, a);
    }
    fprintf(out, "verify %s: top %s, %s design %s[%d], %s[%d] -> %s[%d], %s (model %s)\n",
            v->o->design ? v->o->design : in->top, in->top, mts_rtl_kind_name(in->kind), in->in0, in->w0, in->in1,
            in->w1, in->out, in->wout, what, in->cache_hit ? "from the cache" : "built");
}

int mts_verify_rtl(mts_rtl *r, const mts_verify_opts *opts, mts_verify_result *res, mts_err *err)
{
    static vfy_ctx zero;
    vfy_ctx v = zero;
    v.r = r;
    v.in = mts_rtl_get_info(r);
    v.o = opts;
    v.max_report = opts->max_report < 0 ? 20 : opts->max_report;
    memset(res, 0, sizeof *res);
    header(&v);
    int rc;
    switch (v.in->kind) {
    case MTS_RTL_SIG:
    case MTS_RTL_FLOAT: rc = vfy_mul(&v, err); break;
    case MTS_RTL_INT: rc = vfy_int(&v, err); break;
    case MTS_RTL_ACC:
        if (opts->model || opts->lut_path) {
            rc = mts_fail(err, MTS_EINVAL, "accumulator designs are compared with the FMAq model only (no --mul/--lut)");
            break;
        }
        rc = vfy_acc(&v, err);
        break;
    default: rc = mts_fail(err, MTS_EINVAL, "unknown design kind");
    }
    if (!rc) {
        res->comparisons = v.ncmp;
        res->not_representable = v.not_repr;
        for (int i = 0; i < v.ncmp; i++) {
            res->cases += v.cmp[i].cases;
            res->mismatches += v.cmp[i].mismatches;
        }
        if (opts->out)
            fprintf(opts->out, "summary: %d comparison%s, %llu cases, %llu mismatches%s: %s\n", v.ncmp,
                    v.ncmp == 1 ? "" : "s", (unsigned long long)res->cases, (unsigned long long)res->mismatches,
                    v.not_repr ? ", not LUT-representable" : "",
                    res->mismatches || v.not_repr ? "MISMATCH" : "bit-exact");
        if (opts->json_path || opts->json_out) rc = vfy_write_json(&v, err);
    }
    for (int i = 0; i < v.ncmp; i++) vfy_sink_free(&v.cmp[i].all);
    return rc;
}
