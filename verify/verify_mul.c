/* verify_mul.c - verification of significand and float multiplier designs:
 * the design (through exactly what the mulop does) against its LUT + AMSim
 * and against a C model, on every mantissa pair at a grid of exponent pairs,
 * and on all pairs of special and boundary operands. Everything is compared
 * as codes of the design's format, so a float design that returns another
 * NaN payload or a subnormal is caught even where FP32 values would agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/amsim.h"
#include "mantis/fpbits.h"
#include "verify_internal.h"

#define MAX_GRID 256

static int grid_add(int (*p)[2], int n, int max, int ea, int eb, const mts_format *f)
{
    int emin = mts_fmt_emin(f), emax = mts_fmt_emax(f);
    if (ea < emin || ea > emax || eb < emin || eb > emax || n >= max) return n;
    for (int k = 0; k < n; k++)
        if (p[k][0] == ea && p[k][1] == eb) return n;
    p[n][0] = ea;
    p[n][1] = eb;
    return n + 1;
}

/* A sum S as a balanced pair and as a pair with one operand at an extreme. */
static int grid_sum(int (*p)[2], int n, int max, int S, int both, const mts_format *f)
{
    int emin = mts_fmt_emin(f), emax = mts_fmt_emax(f);
    int ea = S >= 0 ? S / 2 : -((-S + 1) / 2);
    if (ea > emax) ea = emax;
    if (ea < emin) ea = emin;
    if (S - ea > emax) ea = S - emax;
    if (S - ea < emin) ea = S - emin;
    n = grid_add(p, n, max, ea, S - ea, f);
    if (both) {
        int ex = S - emin < emax ? S - emin : emax;
        n = grid_add(p, n, max, ex, S - ex, f);
    }
    return n;
}

int vfy_exp_grid(const mts_format *f, int (*p)[2], int max)
{
    int emin = mts_fmt_emin(f), emax = mts_fmt_emax(f), M = f->M, n = 0;
    for (int k = 0; k <= 8; k++) n = grid_sum(p, n, max, 2 * emin + k * (2 * emax - 2 * emin) / 8, 0, f);
    n = grid_sum(p, n, max, 0, 1, f);
    for (int S = emax - 2; S <= emax + 2; S++) n = grid_sum(p, n, max, S, 1, f);        /* overflow, carry */
    for (int S = emin - 2; S <= emin + 2 * M + 3; S++) n = grid_sum(p, n, max, S, 1, f); /* underflow, below one */
    return n;
}

typedef struct {
    const mts_lut *lut;     /* AMSim through this table, or */
    const mts_model *model; /* this C model */
    const mts_format *f;
    const char *label;
    int cmp;                /* index in the context */
} vref;

static uint32_t vref_mul(const vref *r, uint32_t A, uint32_t B)
{
    return r->lut ? mts_amsim(r->lut, A, B) : mts_model_mul(r->model, r->f, A, B);
}

static int is_special_code(const mts_format *f, uint32_t c)
{
    uint32_t e = (c >> f->M) & ((1u << f->E) - 1u), m = c & ((1u << f->M) - 1u);
    if (e == 0) return 1;
    if (f->ieee) return e == (1u << f->E) - 1u;
    return e == (1u << f->E) - 1u && m == (1u << f->M) - 1u;
}

/* fo: the operands' format; fr: the results' format (FP32 for significand
 * designs, whose results are widened FP32 values; the design's format for
 * float designs, whose results are codes). */
static const char *mis_class(const mts_format *fo, const mts_format *fr, uint32_t ca, uint32_t cb, uint32_t dut,
                             uint32_t ref)
{
    if (is_special_code(fo, ca) || is_special_code(fo, cb)) return "special";
    uint32_t top = (1u << fr->E) - 1u, sbit = 1u << (fr->E + fr->M);
    uint32_t ed = (dut >> fr->M) & top, er = (ref >> fr->M) & top;
    uint32_t maxf = mts_fmt_encode(fr, mts_fmt_max_finite(fr)) & (sbit - 1u);
    if ((fr->ieee && (ed == top || er == top)) || (dut & (sbit - 1u)) == maxf || (ref & (sbit - 1u)) == maxf)
        return "overflow";
    if (ed == 0 || er == 0) return "underflow";
    if ((dut ^ ref) & sbit) return "sign";
    if (ed != er) return "exponent";
    return "mantissa";
}

static void mis_line(vfy_line *l, const mts_format *fo, const mts_format *fr, uint32_t ca, uint32_t cb,
                     uint32_t dut, uint32_t ref, const char *label)
{
    vfy_fmt_fcode(l->a, sizeof l->a, fo, ca);
    vfy_fmt_fcode(l->b, sizeof l->b, fo, cb);
    vfy_fmt_fcode(l->dut, sizeof l->dut, fr, dut);
    vfy_fmt_fcode(l->ref, sizeof l->ref, fr, ref);
    snprintf(l->cls, sizeof l->cls, "%s", mis_class(fo, fr, ca, cb, dut, ref));
    snprintf(l->text, sizeof l->text, "a=%s  b=%s  =>  rtl=%s  %s=%s  [%s]", l->a, l->b, l->dut, label, l->ref,
             l->cls);
}

/* The result of a reference in the form the design's results are compared
 * in, and whether the design can hold it at all: significand designs give
 * FP32 values (compared as such); float designs give codes, and a reference
 * value with more mantissa bits than the code holds can never match. */
static uint32_t ref_result(const mts_format *f, int sig, uint32_t v, int *fits)
{
    *fits = 1;
    if (sig) return v;
    uint32_t c = mts_fmt_encode(f, v);
    if (!mts_f32_isnan(v) && mts_fmt_decode(f, c) != v) *fits = 0;
    return c;
}

/* One operand pair (codes ca, cb of format f; A, B their FP32 values)
 * against one reference: counted into s, and formatted only if it is a
 * mismatch that will be listed. fr: the results' format. */
static void compare(vfy_sink *s, const vref *ref, const mts_format *f, const mts_format *fr, int sig, uint32_t ca,
                    uint32_t cb, uint32_t A, uint32_t B, uint32_t dut)
{
    int fits;
    uint32_t want = ref_result(f, sig, vref_mul(ref, A, B), &fits);
    s->cases++;
    if (dut == want && fits) return;
    vfy_line *l = vfy_sink_miss(s);
    if (l) mis_line(l, f, fr, ca, cb, dut, want, ref->label);
}

/* One grid point: every mantissa pair at exponents (ea, eb), signs (sa, sb). */
typedef struct {
    const mts_format *f;
    int sig;                /* SIG design: P holds significands, else Y holds result codes */
    const uint64_t *P, *Y;
    int ea, eb;
    uint32_t sa, sb;
    int nref;
    const vref *ref;
    vfy_sink (*sink)[MTS_PAR_WORKERS];
} grid_job;

static void grid_part(void *ctx, int t)
{
    const grid_job *j = ctx;
    const mts_format *f = j->f;
    int M = f->M;
    uint32_t n = 1u << M, lo = n * (uint32_t)t / MTS_PAR_WORKERS, hi = n * (uint32_t)(t + 1) / MTS_PAR_WORKERS;
    uint32_t ha = (j->sa << (f->E + M)) | ((uint32_t)(j->ea + f->bias) << M);
    uint32_t hb = (j->sb << (f->E + M)) | ((uint32_t)(j->eb + f->bias) << M);
    mts_format f32 = mts_format_e8(23);
    const mts_format *fr = j->sig ? &f32 : f;
    for (uint32_t ma = lo; ma < hi; ma++)
        for (uint32_t mb = 0; mb < n; mb++) {
            uint32_t ca = ha | ma, cb = hb | mb;
            uint32_t A = mts_fmt_decode(f, ca), B = mts_fmt_decode(f, cb), dut;
            if (j->sig) {
                /* exactly what the mulop does, with the design's output for this pair
                 * taken from the sweep (saturating formats have a NaN code at emax) */
                mts_mul_in mi;
                if (mts_mul_classify(f, A, B, &mi)) dut = mi.special;
                else dut = mts_mul_pack(f, mi.sign, mi.e, j->P[(mi.ma << M) | mi.mb], 2 * M, MTS_OUT_FULL);
            } else {
                dut = (uint32_t)j->Y[(ma << M) | mb];
            }
            for (int r = 0; r < j->nref; r++) compare(&j->sink[r][t], &j->ref[r], f, fr, j->sig, ca, cb, A, B, dut);
        }
}

/* Special and boundary operand codes of format f. */
static int special_codes(const mts_format *f, uint32_t *c)
{
    int n = 0, E = f->E, M = f->M;
    uint32_t sbit = 1u << (E + M), eones = (1u << E) - 1u, mones = (1u << M) - 1u;
    uint32_t one = (uint32_t)f->bias << M;
    c[n++] = 0;                         /* +0 */
    c[n++] = sbit;                      /* -0 */
    c[n++] = 1;                         /* smallest subnormal code */
    c[n++] = sbit | mones;              /* largest subnormal code, negative */
    if (f->ieee) {
        c[n++] = eones << M;            /* +inf */
        c[n++] = sbit | (eones << M);   /* -inf */
        c[n++] = (eones << M) | (1u << (M - 1)); /* canonical NaN */
        c[n++] = sbit | (eones << M) | 1u;       /* signalling-style NaN, negative */
    } else {
        c[n++] = (eones << M) | mones;  /* the NaN */
        c[n++] = sbit | (eones << M) | mones;
    }
    c[n++] = one;                       /* 1.0 */
    c[n++] = sbit | one | mones;        /* -1.11..1 */
    c[n++] = mts_fmt_encode(f, mts_fmt_max_finite(f));          /* max finite */
    c[n++] = sbit | mts_fmt_encode(f, mts_fmt_max_finite(f));
    c[n++] = 1u << M;                   /* smallest normal */
    c[n++] = sbit | (1u << M) | mones;
    c[n++] = (1u << M) | (mones & 0x5555u);
    c[n++] = ((eones - 1u) << M) | (mones & 0xAAAAu);  /* near the top */
    return n;
}

/* The references: the LUT (--lut, or swept from the design; a float design
 * that is not LUT-representable is noted and gets none) and the C model
 * --mul. On success *lut is owned by the caller (free it even if unused). */
static int load_refs(vfy_ctx *v, mts_lut *lut, vref *ref, int *nref, mts_err *err)
{
    const mts_format *f = &v->in->fmt;
    FILE *out = v->o->out;
    int have_lut = 0, rc;
    *nref = 0;
    memset(lut, 0, sizeof *lut);
    if (v->o->lut_path) {
        rc = mts_lut_load(v->o->lut_path, lut, err);
        if (rc) return rc;
        if (lut->kind != MTS_LUT_FLOAT || memcmp(&lut->fmt, f, sizeof *f)) {
            char a[40], b[40] = "";
            mts_format_name(f, a, sizeof a);
            if (lut->kind == MTS_LUT_FLOAT) mts_format_name(&lut->fmt, b, sizeof b);
            mts_lut_free(lut);
            return mts_fail(err, MTS_EINVAL, "%s: a float LUT of format %s is needed for this design, not %s",
                            v->o->lut_path, a, lut->kind == MTS_LUT_FLOAT ? b : "an integer table");
        }
        have_lut = 1;
    } else {
        rc = mts_rtl_lut(v->r, lut, err);
        if (rc == MTS_ENOTLUT) {
            v->not_repr = 1;
            snprintf(v->note, sizeof v->note, "not LUT-representable: %s", err ? err->msg : "");
            if (out) fprintf(out, "rtl vs lut: not LUT-representable: %s\n", err ? err->msg : "");
        } else if (rc) {
            return rc;
        } else {
            have_lut = 1;
        }
    }
    if (have_lut) ref[(*nref)++] = (vref){lut, NULL, f, "lut", vfy_cmp_begin(v, "rtl vs lut (AMSim)")};
    if (v->o->model) {
        const mts_model *m = mts_model_find(v->o->model);
        mts_mulop probe;
        rc = mts_mulop_model(&probe, v->o->model, f, err); /* names the models, checks M */
        if (rc) {
            mts_lut_free(lut);
            return rc;
        }
        char name[96];
        snprintf(name, sizeof name, "rtl vs model %s", m->name);
        ref[(*nref)++] = (vref){NULL, m, f, m->name, vfy_cmp_begin(v, name)};
    }
    for (int r = 0; r < *nref; r++)
        if (ref[r].cmp < 0) {
            mts_lut_free(lut);
            return mts_fail(err, MTS_ENOMEM, "out of memory");
        }
    return MTS_OK;
}

/* Every mantissa pair at every exponent pair of the grid (count in *ng):
 * significand designs are swept once (their products do not depend on the
 * exponents), float designs once per grid point. buf holds 2^(2M) results. */
static int check_grid(vfy_ctx *v, const vref *ref, int nref, uint64_t *buf, vfy_sink (*sink)[MTS_PAR_WORKERS],
                      int *ng, mts_err *err)
{
    const mts_format *f = &v->in->fmt;
    int M = f->M, sig = v->in->kind == MTS_RTL_SIG;
    int grid[MAX_GRID][2];
    *ng = vfy_exp_grid(f, grid, MAX_GRID);
    if (sig) {
        int rc = mts_rtl_sweep(v->r, M, 0, M, 0, buf, err);
        if (rc) return rc;
    }
    for (int g = 0; g < *ng && nref; g++) {
        grid_job j = {f, sig, buf, buf, grid[g][0], grid[g][1], (uint32_t)g & 1u, ((uint32_t)g >> 1) & 1u,
                      nref, ref, sink};
        if (!sig) {
            uint32_t oa = (j.sa << (f->E + M)) | ((uint32_t)(j.ea + f->bias) << M);
            uint32_t ob = (j.sb << (f->E + M)) | ((uint32_t)(j.eb + f->bias) << M);
            int rc = mts_rtl_sweep(v->r, M, oa, M, ob, buf, err);
            if (rc) return rc;
        }
        mts_par_run(MTS_PAR_WORKERS, grid_part, &j);
        for (int r = 0; r < nref; r++)
            for (int t = 0; t < MTS_PAR_WORKERS; t++) vfy_cmp_merge(v, ref[r].cmp, &sink[r][t]);
    }
    return MTS_OK;
}

/* Every pair of special and boundary operands (count in *ns), through the
 * mulop for significand designs and as raw codes for float designs, into
 * the thread-0 sinks. */
static int check_specials(vfy_ctx *v, const vref *ref, int nref, vfy_sink (*sink)[MTS_PAR_WORKERS], int *ns,
                          mts_err *err)
{
    const mts_format *f = &v->in->fmt;
    int sig = v->in->kind == MTS_RTL_SIG;
    uint32_t sc[32];
    *ns = special_codes(f, sc);
    mts_format f32 = mts_format_e8(23);
    mts_mulop op;
    int rc = mts_rtl_mulop(v->r, &op, err);
    if (rc) return rc;
    for (int x = 0; x < *ns; x++)
        for (int y = 0; y < *ns; y++) {
            uint32_t ca = sc[x], cb = sc[y], A = mts_fmt_decode(f, ca), B = mts_fmt_decode(f, cb), dut;
            if (sig) {
                dut = op.fn(&op, A, B);
            } else {
                uint64_t yv;
                mts_rtl_eval(v->r, 1, &ca, &cb, &yv); /* raw codes: payloads and subnormals reach the design */
                dut = (uint32_t)yv;
            }
            for (int r = 0; r < nref; r++) compare(&sink[r][0], &ref[r], f, sig ? &f32 : f, sig, ca, cb, A, B, dut);
        }
    return MTS_OK;
}

int vfy_mul(vfy_ctx *v, mts_err *err)
{
    const mts_rtl_info *in = v->in;
    int M = in->fmt.M, rc;
    if (M > 11)
        return mts_fail(err, MTS_EINVAL, "%s: verification sweeps mantissa pairs of M <= 11 bits, not %d", in->top, M);
    vref ref[2];
    int nref;
    mts_lut lut;
    rc = load_refs(v, &lut, ref, &nref, err);
    if (rc) return rc;

    size_t npairs = (size_t)1 << (2 * M);
    uint64_t *buf = malloc(npairs * sizeof *buf);
    vfy_sink sink[2][MTS_PAR_WORKERS];
    memset(sink, 0, sizeof sink);
    int bad = !buf, ng = 0, ns = 0;
    for (int r = 0; r < nref; r++)
        for (int t = 0; t < MTS_PAR_WORKERS; t++) bad |= vfy_sink_init(&sink[r][t], v->max_report);
    if (bad)
        rc = mts_fail(err, MTS_ENOMEM, "out of memory for %zu pairs", npairs);
    if (!rc) rc = check_grid(v, ref, nref, buf, sink, &ng, err);
    if (!rc) rc = check_specials(v, ref, nref, sink, &ns, err);
    if (!rc) {
        for (int r = 0; r < nref; r++) {
            vfy_cmp_merge(v, ref[r].cmp, &sink[r][0]);
            vfy_cmp_report(v, ref[r].cmp);
        }
        if (v->o->out && nref)
            fprintf(v->o->out, "  (%d exponent pairs x %zu mantissa pairs, plus %d x %d special operands)\n", ng,
                    npairs, ns, ns);
    }
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < MTS_PAR_WORKERS; t++) vfy_sink_free(&sink[r][t]);
    free(buf);
    mts_lut_free(&lut);
    return rc;
}
