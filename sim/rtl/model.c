/* rtl_model.c - a loaded Verilated design: opening (detect, build, dlopen),
 * raw batch evaluation and sweeps on both cores, and the typed entry points
 * (mulop, integer, accumulator, LUT). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mantis/par.h"
#include "mantis/fs.h"
#include "mantis/fpbits.h"
#include "rtl_internal.h"

static int load(mts_rtl *r, mts_err *err)
{
    r->dl = dlopen(r->info.so_path, RTLD_NOW | RTLD_LOCAL);
    if (!r->dl) return mts_fail(err, MTS_ETOOL, "%s: cannot load the model: %s", r->info.so_path, dlerror());
    int (*abi)(void) = (int (*)(void))dlsym(r->dl, "mts_shim_abi");
    r->snew = (rtl_shim_new_fn)dlsym(r->dl, "mts_shim_new");
    r->sfree = (rtl_shim_free_fn)dlsym(r->dl, "mts_shim_free");
    r->seval = (rtl_shim_eval_fn)dlsym(r->dl, "mts_shim_eval");
    r->sgrid = (rtl_shim_grid_fn)dlsym(r->dl, "mts_shim_grid");
    if (!abi || !r->snew || !r->sfree || !r->seval || !r->sgrid || abi() != RTL_SHIM_ABI)
        return mts_fail(err, MTS_EFORMAT, "%s: not a Mantis model of shim ABI %d (delete the cache entry)",
                        r->info.so_path, RTL_SHIM_ABI);
    for (int t = 0; t < MTS_PAR_WORKERS; t++) {
        r->inst[t].h = r->snew();
        if (!r->inst[t].h) return mts_fail(err, MTS_ENOMEM, "%s: cannot create a model instance", r->info.so_path);
    }
    return MTS_OK;
}

static int64_t sext(uint64_t v, int bits)
{
    return ((v >> (bits - 1)) & 1u) ? (int64_t)v - ((int64_t)1 << bits) : (int64_t)v;
}

/* INT: sweeps every operand pair once and measures both readings against
 * the exact product (MRED over pairs whose exact product is not 0); an
 * undeclared, unforced signedness becomes the reading with the smaller one. */
static int measure_sign(mts_rtl *r, mts_err *err)
{
    mts_rtl_info *in = &r->info;
    int n = in->int_bits;
    size_t cnt = (size_t)1 << (2 * n);
    uint64_t *y = malloc(cnt * sizeof *y);
    if (!y) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", in->top);
    int rc = mts_rtl_sweep(r, n, 0, n, 0, y, err);
    double su = 0, ss = 0;
    uint64_t nu = 0, ns = 0;
    for (size_t k = 0; k < cnt && !rc; k++) {
        uint64_t i = k >> n, j = k & (((uint64_t)1 << n) - 1);
        int64_t eu = (int64_t)(i * j), es = sext(i, n) * sext(j, n);
        if (eu) su += fabs((double)((int64_t)y[k] - eu)) / (double)eu, nu++;
        if (es) ss += fabs((double)(sext(y[k], 2 * n) - es)) / fabs((double)es), ns++;
    }
    free(y);
    if (rc) return rc;
    in->mred_unsigned = nu ? su / (double)nu : 0;
    in->mred_signed = ns ? ss / (double)ns : 0;
    if (in->sign_src == MTS_RTL_SIGNSRC_DEFAULT) {
        in->int_signed = in->mred_signed < in->mred_unsigned;
        in->sign_src = MTS_RTL_SIGNSRC_INFERRED;
    }
    return MTS_OK;
}

int mts_rtl_open(const mts_rtl_opts *opts, mts_rtl **out, mts_err *err)
{
    *out = NULL;
    if (!opts) return mts_fail(err, MTS_EINVAL, "mts_rtl_open: no options");
    if (opts->nparams < 0 || opts->nparams > MTS_RTL_MAX_PARAMS)
        return mts_fail(err, MTS_EINVAL, "at most %d --param overrides, not %d", MTS_RTL_MAX_PARAMS, opts->nparams);
    const char *tdir = getenv("TMPDIR");
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/mantis-rtl-XXXXXX", tdir && *tdir ? tdir : "/tmp");
    if (!mkdtemp(tmp)) return mts_fail(err, MTS_EIO, "%s: cannot create a scratch directory", tmp);
    rtl_design *d = calloc(1, sizeof *d);
    mts_rtl *r = calloc(1, sizeof *r);
    int rc = d && r ? MTS_OK : mts_fail(err, MTS_ENOMEM, "out of memory");
    if (!rc) rc = rtl_detect(opts, tmp, d, err);
    if (!rc) d->info.mred_unsigned = d->info.mred_signed = -1;
    if (!rc && opts->detect_only) {
        mts_fs_rmtree(tmp);
        r->info = d->info;
        for (int t = 0; t < MTS_PAR_WORKERS; t++) pthread_mutex_init(&r->inst[t].mu, NULL);
        free(d);
        *out = r;
        return MTS_OK;
    }
    if (!rc) rc = rtl_build(opts, d, err);
    mts_fs_rmtree(tmp);
    if (!rc) {
        r->info = d->info;
        for (int t = 0; t < MTS_PAR_WORKERS; t++) pthread_mutex_init(&r->inst[t].mu, NULL);
        rc = load(r, err);
        if (!rc && r->info.kind == MTS_RTL_INT) rc = measure_sign(r, err);
        if (rc) {
            mts_rtl_close(r);
            r = NULL;
        }
    } else {
        free(r);
        r = NULL;
    }
    free(d);
    *out = r;
    return rc;
}

void mts_rtl_close(mts_rtl *r)
{
    if (!r) return;
    for (int t = 0; t < MTS_PAR_WORKERS; t++) {
        if (r->inst[t].h) r->sfree(r->inst[t].h);
        pthread_mutex_destroy(&r->inst[t].mu);
    }
    if (r->dl) dlclose(r->dl);
    free(r);
}

const mts_rtl_info *mts_rtl_get_info(const mts_rtl *r) { return &r->info; }

/* Locks a free instance (any), else waits for instance 0. */
static int grab(mts_rtl *r)
{
    for (int t = 0; t < MTS_PAR_WORKERS; t++)
        if (pthread_mutex_trylock(&r->inst[t].mu) == 0) return t;
    pthread_mutex_lock(&r->inst[0].mu);
    return 0;
}

void mts_rtl_eval(mts_rtl *r, size_t n, const uint32_t *x0, const uint32_t *x1, uint64_t *y)
{
    if (!r->dl) { /* detect_only handle: no model to run */
        memset(y, 0, n * sizeof *y);
        return;
    }
    int t = grab(r);
    r->seval(r->inst[t].h, n, x0, x1, y);
    pthread_mutex_unlock(&r->inst[t].mu);
}

static uint64_t eval1(mts_rtl *r, uint32_t x0, uint32_t x1)
{
    uint64_t y;
    mts_rtl_eval(r, 1, &x0, &x1, &y);
    return y;
}

typedef struct {
    mts_rtl *r;
    uint32_t n0, or0, or1;
    int bits1;
    uint64_t *y;
} sweep_job;

/* Thread t sweeps its half of the rows on instance t. */
static void sweep_part(void *ctx, int t)
{
    sweep_job *j = ctx;
    uint32_t lo = (uint32_t)((uint64_t)j->n0 * (uint32_t)t / MTS_PAR_WORKERS);
    uint32_t hi = (uint32_t)((uint64_t)j->n0 * (uint32_t)(t + 1) / MTS_PAR_WORKERS);
    if (hi <= lo) return;
    pthread_mutex_lock(&j->r->inst[t].mu);
    j->r->sgrid(j->r->inst[t].h, lo, hi - lo, j->or0, j->bits1, j->or1, j->y + ((size_t)lo << j->bits1));
    pthread_mutex_unlock(&j->r->inst[t].mu);
}

int mts_rtl_sweep(mts_rtl *r, int bits0, uint32_t or0, int bits1, uint32_t or1, uint64_t *y, mts_err *err)
{
    if (!r->dl) return mts_fail(err, MTS_EINVAL, "%s: opened with detect_only, no model to run", r->info.top);
    if (bits0 < 0 || bits1 < 0 || bits0 + bits1 > 28 || bits0 > 31 || bits1 > 31)
        return mts_fail(err, MTS_EINVAL, "rtl sweep of 2^%d x 2^%d pairs: at most 2^28 in one call", bits0, bits1);
    sweep_job j = {r, 1u << bits0, or0, or1, bits1, y};
    mts_par_run(bits0 >= 1 ? MTS_PAR_WORKERS : 1, sweep_part, &j);
    return MTS_OK;
}

/* ---- typed entry points */

static uint32_t sig_mul(const mts_mulop *op, uint32_t a, uint32_t b)
{
    mts_rtl *r = (mts_rtl *)op->impl; /* evaluation changes model state, behind a lock */
    mts_mul_in in;
    if (mts_mul_classify(&op->fmt, a, b, &in)) return in.special;
    uint64_t p = eval1(r, in.ma, in.mb);
    return mts_mul_pack(&op->fmt, in.sign, in.e, p, 2 * op->fmt.M, MTS_OUT_FULL);
}

static uint32_t float_mul(const mts_mulop *op, uint32_t a, uint32_t b)
{
    mts_rtl *r = (mts_rtl *)op->impl;
    const mts_format *f = &op->fmt;
    uint32_t ca = mts_fmt_encode(f, mts_fmt_quantize(f, a, MTS_RTZ));
    uint32_t cb = mts_fmt_encode(f, mts_fmt_quantize(f, b, MTS_RTZ));
    return mts_fmt_decode(f, (uint32_t)eval1(r, ca, cb));
}

int mts_rtl_mulop(mts_rtl *r, mts_mulop *op, mts_err *err)
{
    if (!r->dl) return mts_fail(err, MTS_EINVAL, "%s: opened with detect_only, no model to run", r->info.top);
    if (r->info.kind != MTS_RTL_SIG && r->info.kind != MTS_RTL_FLOAT)
        return mts_fail(err, MTS_EINVAL, "%s: the design is of kind %s, not a float multiplier (sig or float)", r->info.top,
                        mts_rtl_kind_name(r->info.kind));
    memset(op, 0, sizeof *op);
    op->fn = r->info.kind == MTS_RTL_SIG ? sig_mul : float_mul;
    op->impl = r;
    op->fmt = r->info.fmt;
    op->serial = 0; /* fn locks a model instance per call */
    snprintf(op->name, sizeof op->name, "%s", r->info.name);
    return MTS_OK;
}

/* The entry of one significand product p (2M fraction bits), derived by the
 * same packing the mulop uses, at exponent 0 of FP32 (whose range holds
 * every adjustment, so the design's format never clips here). */
static uint32_t sig_entry(uint64_t p, int M)
{
    if (p == 0) return MTS_LUT_ZERO;
    mts_format f32 = mts_format_e8(23);
    uint32_t v = mts_mul_pack(&f32, 0, 0, p, 2 * M, MTS_OUT_FULL);
    int adj = (int)mts_f32_exp(v) - 127;
    return ((uint32_t)(adj & 0xFF) << 24) | mts_f32_man(v);
}

typedef struct {
    const uint64_t *y;
    int wout, is_signed;
} int_table;

static int32_t int_from_table(void *ctx, int32_t a, int32_t b)
{
    const int_table *t = ctx;
    int n = t->wout / 2;
    uint64_t v = t->y[(((uint32_t)a & ((1u << n) - 1u)) << n) | ((uint32_t)b & ((1u << n) - 1u))];
    if (t->is_signed && ((v >> (t->wout - 1)) & 1u)) return (int32_t)((int64_t)v - ((int64_t)1 << t->wout));
    return (int32_t)v;
}

int mts_rtl_lut(mts_rtl *r, mts_lut *lut, mts_err *err)
{
    const mts_rtl_info *in = &r->info;
    memset(lut, 0, sizeof *lut);
    if (!r->dl) return mts_fail(err, MTS_EINVAL, "%s: opened with detect_only, no model to run", in->top);
    if (in->kind == MTS_RTL_FLOAT) {
        /* the general path: probes exponent pairs and refuses designs whose
         * mantissa depends on the exponents (lut_gen.c) */
        mts_mulop op;
        int rc = mts_rtl_mulop(r, &op, err);
        return rc ? rc : mts_lut_generate(&op, lut, err);
    }
    if (in->kind == MTS_RTL_SIG) {
        int M = in->fmt.M;
        if (M > 11) return mts_fail(err, MTS_EINVAL, "%s: LUTs hold M <= 11 mantissa bits, not %d", in->top, M);
        size_t n = (size_t)1 << (2 * M);
        uint64_t *y = malloc(n * sizeof *y);
        uint32_t *tab = malloc(n * sizeof *tab);
        if (!y || !tab) {
            free(y);
            free(tab);
            return mts_fail(err, MTS_ENOMEM, "%s: out of memory for %zu entries", in->top, n);
        }
        mts_rtl_sweep(r, M, 0, M, 0, y, err);
        for (size_t i = 0; i < n; i++) tab[i] = sig_entry(y[i], M);
        free(y);
        lut->kind = MTS_LUT_FLOAT;
        lut->fmt = in->fmt;
        snprintf(lut->model, sizeof lut->model, "%s", in->name);
        lut->n = n;
        lut->entry = tab;
        return MTS_OK;
    }
    if (in->kind == MTS_RTL_INT) {
        int nb = in->int_bits;
        uint64_t *y = malloc(((size_t)1 << (2 * nb)) * sizeof *y);
        if (!y) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", in->top);
        mts_rtl_sweep(r, nb, 0, nb, 0, y, err);
        int_table t = {y, in->wout, in->int_signed};
        int rc = mts_lut_generate_int(nb, in->int_signed, int_from_table, &t, in->name, lut, err);
        free(y);
        return rc;
    }
    return mts_fail(err, MTS_EINVAL, "%s: an accumulator has no product table", in->top);
}

int mts_rtl_int_mul(mts_rtl *r, int32_t a, int32_t b, int32_t *y, mts_err *err)
{
    const mts_rtl_info *in = &r->info;
    if (in->kind != MTS_RTL_INT || !r->dl)
        return mts_fail(err, MTS_EINVAL, "%s: the design is of kind %s, not an integer multiplier%s", in->top,
                        mts_rtl_kind_name(in->kind), r->dl ? "" : " with a model (detect_only)");
    int n = in->int_bits;
    int32_t lo = in->int_signed ? -(1 << (n - 1)) : 0, hi = in->int_signed ? (1 << (n - 1)) - 1 : (1 << n) - 1;
    if (a < lo || a > hi || b < lo || b > hi)
        return mts_fail(err, MTS_EINVAL, "%s: operands %d, %d outside the %d-bit %s range [%d, %d]", in->top, a, b, n,
                        in->int_signed ? "signed" : "unsigned", lo, hi);
    uint32_t m = (1u << n) - 1u;
    uint64_t v = eval1(r, (uint32_t)a & m, (uint32_t)b & m);
    if (in->int_signed && ((v >> (in->wout - 1)) & 1u)) *y = (int32_t)((int64_t)v - ((int64_t)1 << in->wout));
    else *y = (int32_t)v;
    return MTS_OK;
}

uint32_t mts_rtl_acc(mts_rtl *r, uint32_t p, uint32_t s)
{
    const mts_rtl_info *in = &r->info;
    if (in->kind != MTS_RTL_ACC || !r->dl) return MTS_F32_QNAN;
    uint32_t cp = mts_q_encode(&in->qprod, p), cs = mts_q_encode(&in->qacc, s);
    return mts_q_decode(&in->qacc, (uint32_t)eval1(r, cp, cs));
}
