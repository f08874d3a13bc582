/* verify_report.c - mismatch collection and the report of `mantis verify`:
 * TestFloat style (one line per mismatch with operands and both results in
 * hex, split into sign/exponent/mantissa; listing stops after N but every
 * mismatch is counted; a summary line), plus a JSON report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/json.h"
#include "verify_internal.h"

int vfy_sink_init(vfy_sink *s, int cap)
{
    memset(s, 0, sizeof *s);
    s->cap = cap;
    if (cap > 0) {
        s->line = calloc((size_t)cap, sizeof *s->line);
        if (!s->line) return -1;
    }
    return 0;
}

void vfy_sink_free(vfy_sink *s)
{
    free(s->line);
    memset(s, 0, sizeof *s);
}

int vfy_cmp_begin(vfy_ctx *v, const char *name)
{
    if (v->ncmp == VFY_MAX_CMP) return -1;
    vfy_cmp *c = &v->cmp[v->ncmp];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    if (vfy_sink_init(&c->all, v->max_report)) return -1;
    return v->ncmp++;
}

void vfy_cmp_merge(vfy_ctx *v, int i, vfy_sink *s)
{
    vfy_cmp *c = &v->cmp[i];
    c->cases += s->cases;
    c->mismatches += s->mismatches;
    for (int k = 0; k < s->n && c->all.n < c->all.cap; k++) c->all.line[c->all.n++] = s->line[k];
    s->cases = s->mismatches = 0;
    s->n = 0;
}

void vfy_cmp_report(vfy_ctx *v, int i)
{
    FILE *out = v->o->out;
    if (!out) return;
    const vfy_cmp *c = &v->cmp[i];
    for (int k = 0; k < c->all.n; k++) fprintf(out, "  %s\n", c->all.line[k].text);
    if (c->mismatches > (uint64_t)c->all.n)
        fprintf(out, "  ... %llu more mismatches not listed (--max-report)\n",
                (unsigned long long)(c->mismatches - (uint64_t)c->all.n));
    fprintf(out, "%s: %llu cases, %llu mismatches%s\n", c->name, (unsigned long long)c->cases,
            (unsigned long long)c->mismatches, c->mismatches ? "" : " (bit-exact)");
}

static int hexw(int bits) { return (bits + 3) / 4; }

void vfy_fmt_fcode(char *buf, size_t n, const mts_format *f, uint32_t code)
{
    int E = f->E, M = f->M;
    uint32_t s = (code >> (E + M)) & 1u, e = (code >> M) & ((1u << E) - 1u), m = code & ((1u << M) - 1u);
    snprintf(buf, n, "%0*X %c%0*X.%0*X", hexw(1 + E + M), code, s ? '-' : '+', hexw(E), e, hexw(M), m);
}

void vfy_fmt_qcode(char *buf, size_t n, const mts_qfmt *q, uint32_t code)
{
    int E = q->E, M = q->M;
    uint32_t z = (code >> (E + M + 1)) & 1u, s = (code >> (E + M)) & 1u;
    uint32_t e = (code >> M) & ((1u << E) - 1u), m = code & ((1u << M) - 1u);
    if (z && (e || m))
        snprintf(buf, n, "%0*X NaN", hexw(2 + E + M), code);
    else if (z)
        snprintf(buf, n, "%0*X %c0", hexw(2 + E + M), code, s ? '-' : '+');
    else
        snprintf(buf, n, "%0*X %c%0*X.%0*X", hexw(2 + E + M), code, s ? '-' : '+', hexw(E), e, hexw(M), m);
}

static void json_body(const vfy_ctx *v, FILE *f)
{
    const mts_rtl_info *in = v->in;
    uint64_t cases = 0, mism = 0;
    for (int i = 0; i < v->ncmp; i++) {
        cases += v->cmp[i].cases;
        mism += v->cmp[i].mismatches;
    }
    char fmt[40] = "";
    if (in->kind == MTS_RTL_SIG || in->kind == MTS_RTL_FLOAT) mts_format_name(&in->fmt, fmt, sizeof fmt);
    mts_jw w;
    mts_jw_init(&w, f);
    mts_jw_obj(&w, NULL, 1);
    mts_jw_str(&w, "design", v->o->design ? v->o->design : in->top);
    mts_jw_str(&w, "top", in->top);
    mts_jw_str(&w, "kind", mts_rtl_kind_name(in->kind));
    mts_jw_str(&w, "format", fmt);
    mts_jw_bool(&w, "lut_representable", !v->not_repr);
    if (in->kind == MTS_RTL_INT) {
        mts_jw_int(&w, "int_signed", in->int_signed);
        mts_jw_str(&w, "sign_source", mts_rtl_signsrc_name(in->sign_src));
        if (in->mred_unsigned >= 0) {
            mts_jw_num(&w, "mred_unsigned", in->mred_unsigned, "%.6g");
            mts_jw_num(&w, "mred_signed", in->mred_signed, "%.6g");
        }
    }
    mts_jw_str(&w, "note", v->note);
    mts_jw_arr(&w, "comparisons", 1);
    for (int i = 0; i < v->ncmp; i++) {
        const vfy_cmp *c = &v->cmp[i];
        mts_jw_obj(&w, NULL, 0);
        mts_jw_str(&w, "name", c->name);
        mts_jw_uint(&w, "cases", (unsigned long long)c->cases);
        mts_jw_uint(&w, "mismatches", (unsigned long long)c->mismatches);
        mts_jw_arr(&w, "listed", 1);
        for (int k = 0; k < c->all.n; k++) {
            const vfy_line *l = &c->all.line[k];
            mts_jw_obj(&w, NULL, 0);
            mts_jw_str(&w, "a", l->a);
            mts_jw_str(&w, "b", l->b);
            mts_jw_str(&w, "rtl", l->dut);
            mts_jw_str(&w, "ref", l->ref);
            mts_jw_str(&w, "class", l->cls);
            mts_jw_end(&w);
        }
        mts_jw_end(&w);
        mts_jw_end(&w);
    }
    mts_jw_end(&w);
    mts_jw_uint(&w, "cases", (unsigned long long)cases);
    mts_jw_uint(&w, "mismatches", (unsigned long long)mism);
    mts_jw_str(&w, "result", (mism || v->not_repr) ? "mismatch" : "bit-exact");
    mts_jw_end(&w);
}

static void json_body_fn(FILE *f, void *v) { json_body(v, f); }

int vfy_write_json(const vfy_ctx *v, mts_err *err)
{
    if (v->o->json_out) json_body(v, v->o->json_out);
    if (!v->o->json_path) return MTS_OK;
    return mts_fs_write_stream(v->o->json_path, json_body_fn, (void *)v, err);
}
