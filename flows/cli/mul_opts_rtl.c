/* mul_opts_rtl.c - opening --rtl FILE.v selections (include/mantis/rtl.h). */
#include <string.h>

#include "mantis/rtl.h"
#include "mul_opts.h"

int mulsel_rtl_opts(const mulsel *s, mts_rtl_opts *o, mts_err *err)
{
    memset(o, 0, sizeof *o);
    o->path = s->rtl;
    o->kind = MTS_RTL_AUTO;
    if (s->kind) {
        int rc = mts_rtl_kind_parse(s->kind, &o->kind, err);
        if (rc) return rc;
    }
    for (int i = 0; i < s->nparams; i++) o->param[o->nparams++] = s->params[i];
    o->int_sign = s->int_sign;
    return MTS_OK;
}

int mulsel_rtl_open(const mulsel *s, mulhandle *h, mts_err *err)
{
    mts_rtl_opts o;
    int rc = mulsel_rtl_opts(s, &o, err);
    if (rc) return rc;
    mts_rtl *r;
    rc = mts_rtl_open(&o, &r, err);
    if (rc) return rc;
    h->rtl = r;
    const mts_rtl_info *info = mts_rtl_get_info(r);
    if (info->kind == MTS_RTL_ACC) {
        h->is_acc = 1;
        return MTS_OK;
    }
    if (info->kind == MTS_RTL_INT) {
        /* integer designs are exhaustively tabulated once (2^16 pairs at most) */
        rc = mts_rtl_lut(r, &h->lut, err);
        h->is_int = 1;
    } else {
        rc = mts_rtl_mulop(r, &h->op, err);
    }
    if (rc) mulhandle_close(h);
    return rc;
}

void mulhandle_close(mulhandle *h)
{
    mts_lut_free(&h->lut);
    if (h->rtl) mts_rtl_close(h->rtl);
    h->rtl = NULL;
}
