/* front.c - the flat interface of nn_front.h: opaque multiplier handles
 * over mts_arith, and the layer ops called with them. Nothing is computed
 * here: opening delegates to nn_arith.h / verify.h, the ops to nn_ops.h. */
#include <fnmatch.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/gpu.h"
#include "mantis/json.h"
#include "mantis/nn_arith.h"
#include "mantis/nn_front.h"
#include "mantis/nn_ops.h"
#include "mantis/nn_optim.h"
#include "mantis/nn_train.h"
#include "mantis/rtl.h"
#include "mantis/verify.h"
#include "nn_internal.h"

/* What a multiplier was opened from, shared by the handles derived from it
 * (mts_front_mul_acc); freed with the last of them. */
typedef struct front_src {
    atomic_int refs;
    mts_arith a;              /* the multiplier, no FMAq; a.p is the base provider */
    mts_rtl *rtl;             /* a design a.p multiplies through (per_product), else NULL */
    int is_rtl, per_product;  /* a Verilog design; through the model (1) or its verified table (0) */
    mts_rtl_lut_report rep;   /* the design's detection and verification (table path) */
    mts_rtl_info info;        /* per_product: the detection */
    char path[1024];          /* the design */
    mts_gpu_qat *gq;          /* an integer table's device copy (quantization-aware layers on cuda), or NULL */
    int gq_grads;             /* gq holds the gradient tables too */
} front_src;

struct mts_front_mul {
    front_src *src;
    mts_provider p;  /* src->a.p with this handle's accumulation */
    char desc[256];
    int acc_rtl;     /* the accumulation is an accumulator design's, verified (acc_rep) */
    char acc_path[1024];
    mts_rtl_lut_report acc_rep;
};

static int new_src(front_src **out, mts_err *err)
{
    front_src *s = calloc(1, sizeof *s);
    if (!s) return mts_fail(err, MTS_ENOMEM, "out of memory");
    atomic_init(&s->refs, 1);
    *out = s;
    return MTS_OK;
}

static void src_release(front_src *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
    mts_arith_close(&s->a);
    if (s->rtl) mts_rtl_close(s->rtl);
    mts_gpu_qat_close(s->gq);
    free(s);
}

/* A handle over src (taking its reference) with the accumulation of acc. */
static int new_handle(front_src *src, const mts_arith_spec *acc, mts_front_mul **out, mts_err *err)
{
    mts_front_mul *m = calloc(1, sizeof *m);
    if (!m) {
        src_release(src);
        return mts_fail(err, MTS_ENOMEM, "out of memory");
    }
    m->src = src;
    m->p = src->a.p;
    snprintf(m->desc, sizeof m->desc, "%s", src->a.desc);
    int rc = mts_arith_acc(acc, &m->p, m->desc, sizeof m->desc, err);
    if (rc != MTS_OK) {
        mts_front_mul_free(m);
        return rc;
    }
    *out = m;
    return MTS_OK;
}

static int copy_field(char *dst, size_t n, const char *v, const char *what, mts_err *err)
{
    if (!v) v = "";
    if (strlen(v) >= n) return mts_fail(err, MTS_EINVAL, "%s '%.60s...' is too long (at most %zu bytes)", what, v, n - 1);
    memcpy(dst, v, strlen(v) + 1);
    return MTS_OK;
}

/* Opens spec's multiplier (its accumulator fields ignored) into a new source. */
static int open_spec_src(const mts_arith_spec *spec, front_src **out, mts_err *err)
{
    mts_arith_spec s = *spec;
    s.acc[0] = 0;
    front_src *src = NULL;
    int rc = new_src(&src, err);
    if (rc != MTS_OK) return rc;
    if ((rc = mts_arith_open(&s, 0, &src->a, err)) != MTS_OK) {
        free(src);
        return rc;
    }
    *out = src;
    return MTS_OK;
}

int mts_front_mul_open(const char *mul, const char *lut, const char *format, int man_bits, mts_front_mul **out,
                       mts_err *err)
{
    *out = NULL;
    mts_arith_spec s;
    mts_arith_spec_init(&s);
    int rc;
    if ((rc = copy_field(s.mul, sizeof s.mul, mul, "multiplier name", err)) ||
        (rc = copy_field(s.lut, sizeof s.lut, lut, "LUT path", err)) ||
        (rc = copy_field(s.format, sizeof s.format, format, "format", err)))
        return rc;
    if (!s.mul[0] && !s.lut[0]) return mts_fail(err, MTS_EINVAL, "give a multiplier name or a LUT file");
    if (s.mul[0] && s.lut[0]) return mts_fail(err, MTS_EINVAL, "give a multiplier name or a LUT file, not both");
    if (man_bits != -1 && (man_bits < 1 || man_bits > 23))
        return mts_fail(err, MTS_EINVAL, "man_bits %d: expected 1..23", man_bits);
    if (man_bits != -1 && s.format[0]) return mts_fail(err, MTS_EINVAL, "give a format or man_bits, not both");
    s.man_bits = man_bits;
    front_src *src = NULL;
    if ((rc = open_spec_src(&s, &src, err)) != MTS_OK) return rc;
    return new_handle(src, &s, out, err);
}

int mts_front_mul_open_rule(const char *rule, mts_front_mul **out, mts_err *err)
{
    *out = NULL;
    mts_layer_rule r;
    int rc = mts_layer_rule_parse(rule, &r, err);
    if (rc != MTS_OK) return rc;
    front_src *src = NULL;
    if ((rc = open_spec_src(&r.spec, &src, err)) != MTS_OK) return rc;
    return new_handle(src, &r.spec, out, err);
}

typedef struct { const int32_t *t; int bits; } int_table;

static int32_t int_entry(void *ctx, int32_t a, int32_t b)
{
    const int_table *t = ctx;
    uint32_t mask = (1u << t->bits) - 1u;
    return t->t[(((uint32_t)a & mask) << t->bits) | ((uint32_t)b & mask)];
}

int mts_front_mul_open_int(const int32_t *products, int bits, int is_signed, const char *name, mts_front_mul **out,
                           mts_err *err)
{
    *out = NULL;
    if (bits < 1 || bits > 8) return mts_fail(err, MTS_EINVAL, "integer table: %d-bit operands (expected 1..8)", bits);
    int_table t = {products, bits};
    mts_lut lut;
    char nm[64];
    snprintf(nm, sizeof nm, "%s", name && *name ? name : "table");
    int rc = mts_lut_generate_int(bits, is_signed, int_entry, &t, nm, &lut, err);
    if (rc != MTS_OK) return rc;
    front_src *src = NULL;
    if ((rc = new_src(&src, err)) != MTS_OK) {
        mts_lut_free(&lut);
        return rc;
    }
    char what[160];
    snprintf(what, sizeof what, "int table %s (%d-bit %s)", nm, bits, is_signed ? "signed" : "unsigned");
    mts_arith_from_lut(&lut, 0, what, &src->a);
    mts_arith_spec none;
    mts_arith_spec_init(&none);
    return new_handle(src, &none, out, err);
}

/* The Verilator options of a design: path and "NAME=VALUE" overrides. */
static int rtl_opts(const char *path, const char *const *params, int nparams, mts_rtl_opts *o, mts_err *err)
{
    memset(o, 0, sizeof *o);
    if (!path || !*path) return mts_fail(err, MTS_EINVAL, "no Verilog file given");
    if (nparams < 0 || nparams > MTS_RTL_MAX_PARAMS)
        return mts_fail(err, MTS_EINVAL, "%d parameter overrides (at most %d)", nparams, MTS_RTL_MAX_PARAMS);
    o->path = path;
    o->kind = MTS_RTL_AUTO;
    for (int i = 0; i < nparams; i++) {
        if (!params[i] || !strchr(params[i], '='))
            return mts_fail(err, MTS_EINVAL, "parameter '%s': expected NAME=VALUE", params[i] ? params[i] : "");
        o->param[o->nparams++] = params[i];
    }
    return MTS_OK;
}

int mts_front_mul_open_rtl(const char *path, const char *const *params, int nparams, const char *kind, int sign,
                           int per_product, mts_front_mul **out, mts_err *err)
{
    *out = NULL;
    if (sign < 0 || sign > 2) return mts_fail(err, MTS_EINVAL, "sign %d: expected 0 (auto), 1 (signed), 2 (unsigned)", sign);
    mts_rtl_opts o;
    int rc = rtl_opts(path, params, nparams, &o, err);
    if (rc != MTS_OK) return rc;
    o.int_sign = (mts_rtl_sign)sign;
    if (kind && *kind && (rc = mts_rtl_kind_parse(kind, &o.kind, err)) != MTS_OK) return rc;
    front_src *src = NULL;
    if ((rc = new_src(&src, err)) != MTS_OK) return rc;
    src->is_rtl = 1;
    src->per_product = per_product != 0;
    snprintf(src->path, sizeof src->path, "%s", path);
    if (per_product) {
        rc = mts_arith_open_rtl(&o, 0, &src->a, &src->rtl, err);
        if (rc == MTS_OK) src->info = *mts_rtl_get_info(src->rtl);
    } else {
        mts_lut lut;
        rc = mts_rtl_lut_verified(&o, &lut, &src->rep, err);
        if (rc == MTS_OK) {
            char what[192];
            snprintf(what, sizeof what, "rtl %.150s (verified lut)", path);
            mts_arith_from_lut(&lut, 0, what, &src->a);
            src->info = src->rep.info;
        }
    }
    if (rc != MTS_OK) {
        free(src);
        return rc;
    }
    mts_arith_spec none;
    mts_arith_spec_init(&none);
    return new_handle(src, &none, out, err);
}

int mts_front_mul_acc(const mts_front_mul *base, const char *acc, const char *prod, int acc_bias, int prod_bias,
                      int chunk, int no_underflow, mts_front_mul **out, mts_err *err)
{
    *out = NULL;
    mts_arith_spec s;
    mts_arith_spec_init(&s);
    int rc;
    if ((rc = copy_field(s.acc, sizeof s.acc, acc, "accumulator format", err)) ||
        (rc = copy_field(s.prod, sizeof s.prod, prod, "product format", err)))
        return rc;
    if (acc_bias < -1 || acc_bias > 126 || prod_bias < -1 || prod_bias > 126)
        return mts_fail(err, MTS_EINVAL, "bias %d: expected 0..126 (or -1: the default)",
                        acc_bias < -1 || acc_bias > 126 ? acc_bias : prod_bias);
    if (chunk < 0 || chunk > (1 << 20)) return mts_fail(err, MTS_EINVAL, "chunk %d: expected 1..%d", chunk, 1 << 20);
    if (!s.acc[0] && s.prod[0]) return mts_fail(err, MTS_EINVAL, "a product format needs an accumulator format");
    s.acc_bias = acc_bias;
    s.prod_bias = prod_bias;
    s.chunk = chunk;
    s.no_underflow = no_underflow != 0;
    atomic_fetch_add(&base->src->refs, 1);
    return new_handle(base->src, &s, out, err);
}

int mts_front_mul_acc_rtl(const mts_front_mul *base, const char *path, const char *const *params, int nparams,
                          int chunk, mts_front_mul **out, mts_err *err)
{
    *out = NULL;
    if (chunk < 0 || chunk > (1 << 20)) return mts_fail(err, MTS_EINVAL, "chunk %d: expected 1..%d", chunk, 1 << 20);
    mts_rtl_opts o;
    int rc = rtl_opts(path, params, nparams, &o, err);
    if (rc != MTS_OK) return rc;
    o.kind = MTS_RTL_ACC;
    mts_rtl_lut_report rep;
    if ((rc = mts_rtl_acc_verified(&o, &rep, err)) != MTS_OK) return rc;
    /* the design's formats, as the flow trains an accumulator design */
    mts_arith_spec s;
    mts_arith_spec_init(&s);
    snprintf(s.acc, sizeof s.acc, "M%dE%d", rep.info.qacc.M, rep.info.qacc.E);
    snprintf(s.prod, sizeof s.prod, "M%dE%d", rep.info.qprod.M, rep.info.qprod.E);
    s.acc_bias = rep.info.qacc.bias;
    s.prod_bias = rep.info.qprod.bias;
    s.no_underflow = !rep.info.qacc.underflow;
    s.chunk = chunk;
    atomic_fetch_add(&base->src->refs, 1);
    if ((rc = new_handle(base->src, &s, out, err)) != MTS_OK) return rc;
    (*out)->acc_rtl = 1;
    (*out)->acc_rep = rep;
    snprintf((*out)->acc_path, sizeof (*out)->acc_path, "%s", path);
    size_t l = strlen((*out)->desc);
    snprintf((*out)->desc + l, sizeof (*out)->desc - l, " (rtl %.120s, verified)", path);
    return MTS_OK;
}

void mts_front_mul_free(mts_front_mul *m)
{
    if (!m) return;
    src_release(m->src);
    free(m);
}

const char *mts_front_mul_desc(const mts_front_mul *m) { return m->desc; }

static const char *kind_name(mts_prov_kind k)
{
    switch (k) {
    case MTS_PROV_BLAS: return "blas";
    case MTS_PROV_NATIVE: return "native";
    case MTS_PROV_LUT: return "lut";
    case MTS_PROV_MULOP: return "mulop";
    case MTS_PROV_INT: return "int";
    }
    return "?";
}

static void json_key_str(FILE *f, const char *key, const char *v)
{
    fprintf(f, ", \"%s\": ", key);
    mts_json_write_str(f, v);
}

size_t mts_front_mul_info(const mts_front_mul *m, char *buf, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        if (n) buf[0] = 0;
        return 0;
    }
    const mts_provider *p = &m->p;
    const front_src *s = m->src;
    char fmt[40];
    mts_format pf = mts_prov_format(p);
    mts_format_name(&pf, fmt, sizeof fmt);
    fprintf(f, "{\"kind\": \"%s\"", kind_name(p->kind));
    json_key_str(f, "desc", m->desc);
    json_key_str(f, "format", p->kind == MTS_PROV_INT ? "" : fmt);
    fprintf(f, ", \"fmaq\": %s", p->fmaq ? "true" : "false");
    if (p->fmaq) {
        char qa[48], qp[48];
        mts_qfmt_name(&p->qacc, qa, sizeof qa);
        mts_qfmt_name(&p->qprod, qp, sizeof qp);
        json_key_str(f, "acc", qa);
        json_key_str(f, "prod", qp);
        fprintf(f, ", \"underflow\": %s", p->qacc.underflow ? "true" : "false");
    }
    fprintf(f, ", \"chunk\": %d", p->chunk > 0 ? p->chunk : 16);
    if (p->lut) {
        json_key_str(f, "table", p->lut->model);
        if (p->lut->kind == MTS_LUT_INT)
            fprintf(f, ", \"int_bits\": %d, \"int_signed\": %s", p->lut->int_bits, p->lut->int_signed ? "true" : "false");
    }
    if (s->is_rtl) {
        const mts_rtl_info *in = &s->info;
        json_key_str(f, "rtl", s->path);
        json_key_str(f, "rtl_top", in->top);
        json_key_str(f, "rtl_kind", mts_rtl_kind_name(in->kind));
        json_key_str(f, "rtl_hash", in->hash);
        fprintf(f, ", \"rtl_model_cached\": %s, \"per_product\": %s", in->cache_hit ? "true" : "false",
                s->per_product ? "true" : "false");
        if (!s->per_product) {
            fprintf(f, ", \"lut_cached\": %s, \"verify_cases\": %llu, \"verify_mismatches\": %llu",
                    s->rep.lut_cache_hit ? "true" : "false", (unsigned long long)s->rep.cases,
                    (unsigned long long)s->rep.mismatches);
            json_key_str(f, "lut_path", s->rep.lut_path);
            json_key_str(f, "verify_report", s->rep.json_path);
        }
    }
    if (m->acc_rtl) {
        json_key_str(f, "acc_rtl", m->acc_path);
        json_key_str(f, "acc_rtl_top", m->acc_rep.info.top);
        fprintf(f, ", \"acc_verify_cases\": %llu, \"acc_verify_mismatches\": %llu, \"acc_verify_cached\": %s",
                (unsigned long long)m->acc_rep.cases, (unsigned long long)m->acc_rep.mismatches,
                m->acc_rep.lut_cache_hit ? "true" : "false");
        json_key_str(f, "acc_verify_report", m->acc_rep.json_path);
    }
    fprintf(f, "}");
    fclose(f);
    if (n) snprintf(buf, n, "%s", text ? text : "");
    free(text);
    return len;
}

int mts_front_mul_products(const mts_front_mul *m, size_t n, const float *a, const float *b, float *y, mts_err *err)
{
    if (m->p.kind == MTS_PROV_INT)
        return mts_fail(err, MTS_EINVAL,
                        "an integer table has no per-pair product of floats (operands are quantized per tensor)");
    const uint32_t *ua = (const uint32_t *)(const void *)a, *ub = (const uint32_t *)(const void *)b;
    uint32_t *uy = (uint32_t *)(void *)y;
    for (size_t i = 0; i < n; i++) uy[i] = mts_prov_mul(&m->p, ua[i], ub[i]);
    return MTS_OK;
}

int mts_front_device_check(int device, const mts_front_mul *fwd, const mts_front_mul *bwd, mts_err *err)
{
    if (device == 0) return MTS_OK;
    if (device != MTS_GPU_DEVICE_CUDA) return mts_fail(err, MTS_EINVAL, "device %d: expected 0 (cpu) or cuda", device);
    int rc = mts_gpu_probe(NULL, err);
    if (rc != MTS_OK) return rc;
    if (fwd && (rc = mts_gpu_supports(&fwd->p, err)) != MTS_OK) return rc;
    if (bwd && (rc = mts_gpu_supports(&bwd->p, err)) != MTS_OK) return rc;
    return MTS_OK;
}

int mts_front_match(const char *pattern, const char *name) { return fnmatch(pattern, name, 0) == 0; }

/* This call's providers: the handles' with threads and device set. */
static int call_ctx(const mts_front_mul *fwd, const mts_front_mul *bwd, int threads, int device, mts_provider *pf,
                    mts_provider *pb, mts_nn_ctx *ctx, mts_err *err)
{
    int rc = mts_front_device_check(device, fwd, bwd, err);
    if (rc != MTS_OK) return rc;
    if (threads < 0) return mts_fail(err, MTS_EINVAL, "threads %d: expected >= 0", threads);
    if (fwd) {
        *pf = fwd->p;
        pf->threads = threads;
        pf->device = device;
    }
    if (bwd) {
        *pb = bwd->p;
        pb->threads = threads;
        pb->device = device;
    }
    *ctx = mts_nn_ctx_cpu(fwd ? pf : NULL, bwd ? pb : NULL);
    mts_nn_keep_buffers(); /* PyTorch's per-batch tensors too */
    return MTS_OK;
}

int mts_front_gemm(const mts_front_mul *m, int ref, int threads, int device, int transA, int transB, int M, int N,
                   int K, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                   mts_err *err)
{
    mts_provider p, unused;
    mts_nn_ctx ctx;
    int rc = call_ctx(m, NULL, threads, ref ? 0 : device, &p, &unused, &ctx, err);
    if (rc != MTS_OK) return rc;
    return (ref ? mts_gemm_ref : mts_gemm)(&p, transA, transB, M, N, K, A, lda, B, ldb, beta, C, ldc, err);
}

static int check_sizes(int a, int b, int c, int d, mts_err *err)
{
    if (a < 1 || b < 1 || c < 1 || d < 1) return mts_fail(err, MTS_EINVAL, "empty or negative size (%d, %d, %d, %d)", a, b, c, d);
    return MTS_OK;
}

int mts_front_dense_forward(const mts_front_mul *fwd, int threads, int device, int N, int in, int out, const float *x,
                            const float *w, const float *b, float *y, mts_err *err)
{
    mts_provider pf, pb;
    mts_nn_ctx ctx;
    int rc = call_ctx(fwd, NULL, threads, device, &pf, &pb, &ctx, err);
    if (rc == MTS_OK) rc = check_sizes(N, in, out, 1, err);
    return rc != MTS_OK ? rc : mts_dense_forward(&ctx, N, in, out, x, w, b, y, err);
}

int mts_front_dense_backward(const mts_front_mul *fwd, const mts_front_mul *bwd, int ste, int threads, int device,
                             int N, int in, int out, const float *x, const float *w, const float *dy, float *dx,
                             float *dw, float *db, mts_err *err)
{
    mts_provider pf, pb;
    mts_nn_ctx ctx;
    if (ste < MTS_STE_IDENTITY || ste > MTS_STE_IMM_DIFF) return mts_fail(err, MTS_EINVAL, "STE %d: unknown", ste);
    int rc = call_ctx(fwd, bwd, threads, device, &pf, &pb, &ctx, err);
    if (rc == MTS_OK) rc = check_sizes(N, in, out, 1, err);
    if (rc != MTS_OK) return rc;
    ctx.ste = (mts_ste)ste;
    return mts_dense_backward(&ctx, N, in, out, x, w, dy, dx, dw, db, err);
}

/* The geometry, and whether mts_conv2d_* takes it (*simple, filling sg). */
static int conv_geom(int cin, int h, int w, int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                     int groups, mts_convg_geom *g, int *simple, mts_conv_geom *sg, mts_err *err)
{
    *g = (mts_convg_geom){cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups, 0, 0};
    int rc = mts_convg_geom_init(g, err);
    if (rc != MTS_OK) return rc;
    *simple = groups == 1 && kh == kw && sh == sw && ph == pw && dh == 1 && dw == 1;
    if (*simple) {
        *sg = (mts_conv_geom){cin, h, w, cout, kh, sh, ph, 0, 0};
        rc = mts_conv_geom_init(sg, err);
    }
    return rc;
}

int mts_front_conv2d_shape(int cin, int h, int w, int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                           int dw, int groups, int *oh, int *ow, mts_err *err)
{
    mts_convg_geom g;
    mts_conv_geom sg;
    int simple;
    int rc = conv_geom(cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups, &g, &simple, &sg, err);
    if (rc != MTS_OK) return rc;
    *oh = g.oh;
    *ow = g.ow;
    return MTS_OK;
}

int mts_front_conv2d_forward(const mts_front_mul *fwd, int threads, int device, int N, int cin, int h, int w,
                             int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int groups,
                             const float *x, const float *wt, const float *b, float *y, mts_err *err)
{
    mts_provider pf, pb;
    mts_nn_ctx ctx;
    mts_convg_geom g;
    mts_conv_geom sg;
    int simple;
    int rc = call_ctx(fwd, NULL, threads, device, &pf, &pb, &ctx, err);
    if (rc == MTS_OK) rc = check_sizes(N, 1, 1, 1, err);
    if (rc == MTS_OK) rc = conv_geom(cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups, &g, &simple, &sg, err);
    if (rc != MTS_OK) return rc;
    return simple ? mts_conv2d_forward(&ctx, &sg, N, x, wt, b, y, err) : mts_convg_forward(&ctx, &g, N, x, wt, b, y, err);
}

int mts_front_conv2d_backward(const mts_front_mul *fwd, const mts_front_mul *bwd, int threads, int device, int N,
                              int cin, int h, int w, int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                              int dw, int groups, const float *x, const float *wt, const float *dy, float *dx,
                              float *dwt, float *db, mts_err *err)
{
    mts_provider pf, pb;
    mts_nn_ctx ctx;
    mts_convg_geom g;
    mts_conv_geom sg;
    int simple;
    int rc = call_ctx(fwd, bwd, threads, device, &pf, &pb, &ctx, err);
    if (rc == MTS_OK) rc = check_sizes(N, 1, 1, 1, err);
    if (rc == MTS_OK) rc = conv_geom(cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups, &g, &simple, &sg, err);
    if (rc != MTS_OK) return rc;
    return simple ? mts_conv2d_backward(&ctx, &sg, N, x, wt, dy, dx, dwt, db, err)
                  : mts_convg_backward(&ctx, &g, N, x, wt, dy, dx, dwt, db, err);
}

/* ------------------------------------------- quantization-aware layers */

static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;

/* The context of a quantization-aware call: the integer table's prepared
 * planes and gradient tables (built on the first call, kept with the
 * multiplier's source, as the driver keeps them with its arith), the
 * backward rule. */
static int q_ctx(const mts_front_mul *fwd, const mts_front_mul *bwd, int int_bwd, int threads, int device,
                 mts_provider *pf, mts_provider *pb, mts_nn_ctx *ctx, mts_err *err)
{
    if (!fwd || fwd->p.kind != MTS_PROV_INT || !fwd->p.lut)
        return mts_fail(err, MTS_EINVAL, "quantization-aware layer: the forward multiplier is not an integer table");
    if (int_bwd != MTS_INT_BWD_STE && int_bwd != MTS_INT_BWD_TABLE && int_bwd != MTS_INT_BWD_APPROX)
        return mts_fail(err, MTS_EINVAL, "integer backward %d: expected ste (0), table (1) or approx (2)", int_bwd);
    int rc = call_ctx(fwd, bwd, threads, device, pf, pb, ctx, err);
    if (rc != MTS_OK || device) return rc; /* the device path (below) needs none of the CPU's tables */
    mts_arith *a = &fwd->src->a;
    pthread_mutex_lock(&q_mu);
    rc = mts_arith_int_prepare(a, int_bwd == MTS_INT_BWD_TABLE, err);
    pthread_mutex_unlock(&q_mu);
    if (rc != MTS_OK) return rc;
    ctx->int_bwd = int_bwd;
    ctx->qtab = &a->qtab;
    ctx->igrad = &a->igrad;
    return MTS_OK;
}

void mts_front_qat_observe(float *st, const float *x, size_t n) { mts_qat_observe(st, x, n); }

/* ------------------------------ quantization-aware layers on the device
 *
 * device == MTS_GPU_DEVICE_CUDA: the arrays are host copies (the Python
 * front stages CUDA tensors through the host, as mts_gemm's host-pointer
 * path does); each call uploads them, runs gpu/qat.cu's twins of qat.c's
 * ops (the same bits) and downloads the results. The table's device copy
 * is kept with the multiplier's source (opened by the first call; reopened
 * with the gradient tables by the first TABLE backward); q_mu is held for
 * the whole call, so no call runs on a table another one closes. */

/* Device arrays of one call, freed together. */
typedef struct q_dev {
    void *p[8];
    int n;
} q_dev;

/* *d = a device array of bytes (NULL for none), holding h's bytes when h != NULL. */
static int q_dev_array(q_dev *dv, const void *h, size_t bytes, int want, float **d, mts_err *err)
{
    *d = NULL;
    if (!want || !bytes) return MTS_OK;
    int rc = mts_gpu_alloc((void **)d, bytes, err);
    if (rc != MTS_OK) return rc;
    dv->p[dv->n++] = *d;
    return h ? mts_gpu_upload(*d, h, bytes, err) : MTS_OK;
}

static void q_dev_free(q_dev *dv)
{
    for (int i = 0; i < dv->n; i++) mts_gpu_free(dv->p[i]);
    dv->n = 0;
}

/* The device copy of fwd's table (with its gradient tables when grads); q_mu held. */
static int q_dev_table(const mts_front_mul *fwd, int grads, const mts_gpu_qat **q, mts_err *err)
{
    front_src *s = fwd->src;
    if (!s->gq || (grads && !s->gq_grads)) {
        mts_gpu_qat *nq = NULL;
        int rc = mts_gpu_qat_open(fwd->p.lut, grads, &nq, err);
        if (rc != MTS_OK) return rc;
        mts_gpu_qat_close(s->gq);
        s->gq = nq;
        s->gq_grads = grads;
    }
    *q = s->gq;
    return MTS_OK;
}

/* The backward's plan: bwd's for APPROX, else qat.c's float_bwd (bwd, or
 * native FP32 where bwd is an integer table or absent). */
static int q_dev_plan(const mts_front_mul *bwd, int int_bwd, mts_gpu_gemm_plan **pl, mts_err *err)
{
    mts_provider p;
    if (int_bwd == MTS_INT_BWD_APPROX && !bwd)
        return mts_fail(err, MTS_EINVAL, "quantization-aware backward approx: no backward multiplier");
    if (bwd && (int_bwd == MTS_INT_BWD_APPROX || bwd->p.kind != MTS_PROV_INT)) p = bwd->p;
    else {
        memset(&p, 0, sizeof p);
        p.kind = MTS_PROV_NATIVE;
    }
    p.threads = 1;
    p.device = 0;
    return mts_gpu_plan_open(&p, pl, err);
}

/* One quantization-aware call on the device: the forward (y the output)
 * or the backward (dx, dw, db the gradients, any NULL) of dense (g ==
 * NULL: N x in by out x in) or conv (g); N > 0 (check_sizes). */
typedef struct q_call {
    const mts_front_mul *fwd, *bwd;
    int backward, int_bwd;
    const mts_conv_geom *g;
    int N, in, out;
    const float *st, *x, *w, *b, *dy;
    float *y, *dx, *dw, *db;
} q_call;

static int q_dev_run(const q_call *c, mts_err *err)
{
    size_t nx, nw, ny;
    if (c->g) {
        nx = (size_t)c->N * c->g->cin * c->g->h * c->g->w;
        nw = (size_t)c->g->cout * c->g->cin * c->g->k * c->g->k;
        ny = (size_t)c->N * c->g->cout * c->g->oh * c->g->ow;
    } else {
        nx = (size_t)c->N * c->in;
        nw = (size_t)c->out * c->in;
        ny = (size_t)c->N * c->out;
    }
    size_t nb = c->g ? (size_t)c->g->cout : (size_t)c->out;
    int bwd = c->backward;
    q_dev dv = {{0}, 0};
    mts_gpu_gemm_plan *pl = NULL;
    const mts_gpu_qat *q = NULL;
    float *gst, *gx, *gw, *gb, *gdy, *gy, *gdx, *gdw, *gdb;
    pthread_mutex_lock(&q_mu);
    int rc = q_dev_table(c->fwd, bwd && c->int_bwd == MTS_INT_BWD_TABLE, &q, err);
    if (rc == MTS_OK && bwd) rc = q_dev_plan(c->bwd, c->int_bwd, &pl, err);
    if (rc == MTS_OK) rc = q_dev_array(&dv, c->st, MTS_QAT_STATE * sizeof(float), c->st != NULL, &gst, err);
    if (rc == MTS_OK) rc = q_dev_array(&dv, c->x, nx * sizeof(float), 1, &gx, err);
    if (rc == MTS_OK) rc = q_dev_array(&dv, c->w, nw * sizeof(float), 1, &gw, err);
    if (rc == MTS_OK) rc = q_dev_array(&dv, c->b, nb * sizeof(float), !bwd && c->b, &gb, err);
    if (rc == MTS_OK) rc = q_dev_array(&dv, c->dy, ny * sizeof(float), bwd, &gdy, err);
    if (rc == MTS_OK) rc = q_dev_array(&dv, NULL, ny * sizeof(float), !bwd, &gy, err);
    if (rc == MTS_OK) rc = q_dev_array(&dv, NULL, nx * sizeof(float), c->dx != NULL, &gdx, err);
    if (rc == MTS_OK) rc = q_dev_array(&dv, NULL, nw * sizeof(float), c->dw != NULL, &gdw, err);
    if (rc == MTS_OK) rc = q_dev_array(&dv, NULL, nb * sizeof(float), c->db != NULL, &gdb, err);
    if (rc == MTS_OK && !bwd)
        rc = c->g ? mts_gpu_qconv2d_forward(q, gst, c->g, c->N, gx, gw, gb, gy, err)
                  : mts_gpu_qdense_forward(q, gst, c->N, c->in, c->out, gx, gw, gb, gy, err);
    else if (rc == MTS_OK)
        rc = c->g ? mts_gpu_qconv2d_backward(q, c->int_bwd, pl, gst, c->g, c->N, gx, gw, gdy, gdx, gdw, gdb, NULL,
                                             err)
                  : mts_gpu_qdense_backward(q, c->int_bwd, pl, gst, c->N, c->in, c->out, gx, gw, gdy, gdx, gdw, gdb,
                                            err);
    if (rc == MTS_OK && gy) rc = mts_gpu_download(c->y, gy, ny * sizeof(float), err);
    if (rc == MTS_OK && gdx) rc = mts_gpu_download(c->dx, gdx, nx * sizeof(float), err);
    if (rc == MTS_OK && gdw) rc = mts_gpu_download(c->dw, gdw, nw * sizeof(float), err);
    if (rc == MTS_OK && gdb) rc = mts_gpu_download(c->db, gdb, nb * sizeof(float), err);
    mts_gpu_plan_close(pl);
    q_dev_free(&dv);
    pthread_mutex_unlock(&q_mu);
    return rc;
}

/* The activation quantizer of this call (net.c's node_qact: a training
 * forward moves the observer first, a backward reads it as it is). */
static void q_act(const mts_provider *pf, const float *st, const float *x, size_t n, mts_qparam *qa)
{
    mts_qat_act_param(st, x, n, pf->lut->int_bits, pf->lut->int_signed, qa);
}

int mts_front_qdense_forward(const mts_front_mul *fwd, int threads, int device, float *st, int train, int N, int in,
                             int out, const float *x, const float *w, const float *b, float *y, mts_err *err)
{
    mts_provider pf, pb;
    mts_nn_ctx ctx;
    mts_qparam qa;
    int rc = q_ctx(fwd, NULL, MTS_INT_BWD_STE, threads, device, &pf, &pb, &ctx, err);
    if (rc == MTS_OK) rc = check_sizes(N, in, out, 1, err);
    if (rc != MTS_OK) return rc;
    if (st && train) mts_qat_observe(st, x, (size_t)N * in);
    if (device) {
        q_call c = {.fwd = fwd, .N = N, .in = in, .out = out, .st = st, .x = x, .w = w, .b = b, .y = y};
        return q_dev_run(&c, err);
    }
    q_act(&pf, st, x, (size_t)N * in, &qa);
    return mts_qdense_forward(&ctx, &qa, N, in, out, x, w, b, y, err);
}

int mts_front_qdense_backward(const mts_front_mul *fwd, const mts_front_mul *bwd, int int_bwd, int threads, int device,
                              const float *st, int N, int in, int out, const float *x, const float *w,
                              const float *dy, float *dx, float *dw, float *db, mts_err *err)
{
    mts_provider pf, pb;
    mts_nn_ctx ctx;
    mts_qparam qa;
    int rc = q_ctx(fwd, bwd, int_bwd, threads, device, &pf, &pb, &ctx, err);
    if (rc == MTS_OK) rc = check_sizes(N, in, out, 1, err);
    if (rc != MTS_OK) return rc;
    if (device) {
        q_call c = {.fwd = fwd, .bwd = bwd, .backward = 1, .int_bwd = int_bwd, .N = N, .in = in, .out = out,
                    .st = st, .x = x, .w = w, .dy = dy, .dx = dx, .dw = dw, .db = db};
        return q_dev_run(&c, err);
    }
    q_act(&pf, st, x, (size_t)N * in, &qa);
    return mts_qdense_backward(&ctx, &qa, N, in, out, x, w, dy, dx, dw, db, err);
}

/* mts_conv2d_*'s geometry, or MTS_EUNSUPPORTED: qat.c has no grouped or dilated form. */
static int q_geom(int cin, int h, int w, int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                  int groups, mts_conv_geom *sg, mts_err *err)
{
    mts_convg_geom g;
    int simple, rc = conv_geom(cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups, &g, &simple, sg, err);
    if (rc == MTS_OK && !simple)
        rc = mts_fail(err, MTS_EUNSUPPORTED,
                      "quantization-aware conv: kernel %dx%d, stride %dx%d, padding %dx%d, dilation %dx%d, %d groups; "
                      "integer tables take square kernels with equal strides and padding, no dilation, one group "
                      "(mantis train's convolutions)",
                      kh, kw, sh, sw, ph, pw, dh, dw, groups);
    return rc;
}

int mts_front_qconv2d_forward(const mts_front_mul *fwd, int threads, int device, float *st, int train, int N, int cin,
                              int h, int w, int cout, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                              int groups, const float *x, const float *wt, const float *b, float *y, mts_err *err)
{
    mts_provider pf, pb;
    mts_nn_ctx ctx;
    mts_conv_geom g;
    mts_qparam qa;
    int rc = q_ctx(fwd, NULL, MTS_INT_BWD_STE, threads, device, &pf, &pb, &ctx, err);
    if (rc == MTS_OK) rc = check_sizes(N, 1, 1, 1, err);
    if (rc == MTS_OK) rc = q_geom(cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups, &g, err);
    if (rc != MTS_OK) return rc;
    if (st && train) mts_qat_observe(st, x, (size_t)N * cin * h * w);
    if (device) {
        q_call c = {.fwd = fwd, .g = &g, .N = N, .st = st, .x = x, .w = wt, .b = b, .y = y};
        return q_dev_run(&c, err);
    }
    q_act(&pf, st, x, (size_t)N * cin * h * w, &qa);
    return mts_qconv2d_forward(&ctx, &qa, &g, N, x, wt, b, y, err);
}

int mts_front_qconv2d_backward(const mts_front_mul *fwd, const mts_front_mul *bwd, int int_bwd, int threads,
                               int device, const float *st, int N, int cin, int h, int w, int cout, int kh, int kw,
                               int sh, int sw, int ph, int pw, int dh, int dw, int groups, const float *x,
                               const float *wt, const float *dy, float *dx, float *dwt, float *db, mts_err *err)
{
    mts_provider pf, pb;
    mts_nn_ctx ctx;
    mts_conv_geom g;
    mts_qparam qa;
    int rc = q_ctx(fwd, bwd, int_bwd, threads, device, &pf, &pb, &ctx, err);
    if (rc == MTS_OK) rc = check_sizes(N, 1, 1, 1, err);
    if (rc == MTS_OK) rc = q_geom(cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups, &g, err);
    if (rc != MTS_OK) return rc;
    if (device) {
        q_call c = {.fwd = fwd, .bwd = bwd, .backward = 1, .int_bwd = int_bwd, .g = &g, .N = N, .st = st, .x = x,
                    .w = wt, .dy = dy, .dx = dx, .dw = dwt, .db = db};
        return q_dev_run(&c, err);
    }
    q_act(&pf, st, x, (size_t)N * cin * h * w, &qa);
    return mts_qconv2d_backward(&ctx, &qa, &g, N, x, wt, dy, dx, dwt, db, err);
}

int mts_front_matmul_forward(const mts_front_mul *fwd, int threads, int device, int B, int m, int k, int q,
                             const float *a, const float *b, float *c, mts_err *err)
{
    mts_provider pf, pb;
    mts_nn_ctx ctx;
    int rc = call_ctx(fwd, NULL, threads, device, &pf, &pb, &ctx, err);
    if (rc == MTS_OK) rc = check_sizes(B, m, k, q, err);
    return rc != MTS_OK ? rc : mts_matmul_forward(&ctx, B, m, k, q, a, b, c, err);
}

int mts_front_matmul_backward(const mts_front_mul *bwd, int threads, int device, int B, int m, int k, int q,
                              const float *a, const float *b, const float *dc, float *da, float *db, mts_err *err)
{
    mts_provider pf, pb;
    mts_nn_ctx ctx;
    int rc = call_ctx(NULL, bwd, threads, device, &pf, &pb, &ctx, err);
    if (rc == MTS_OK) rc = check_sizes(B, m, k, q, err);
    return rc != MTS_OK ? rc : mts_matmul_backward(&ctx, B, m, k, q, a, b, dc, da, db, err);
}

/* ------------------------------------------------------------- exact ops */

void mts_front_relu_forward(int threads, size_t n, const float *x, float *y) { mts__relu_forward_t(threads, n, x, y); }

void mts_front_relu_backward(int threads, size_t n, const float *y, const float *dy, float *dx)
{
    mts__relu_backward_t(threads, n, y, dy, dx, 0);
}

static int pool_check(int N, int C, int H, int W, int k, int s, mts_err *err)
{
    int rc = check_sizes(N, C, H, W, err);
    if (rc == MTS_OK) rc = check_sizes(k, s, 1, 1, err);
    if (rc == MTS_OK && (k > H || k > W))
        rc = mts_fail(err, MTS_EINVAL, "max pooling: a %dx%d window is larger than the %dx%d input", k, k, H, W);
    return rc;
}

int mts_front_maxpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y, int32_t *argmax,
                              mts_err *err)
{
    int rc = pool_check(N, C, H, W, k, s, err);
    if (rc == MTS_OK) mts_maxpool_forward(N, C, H, W, k, s, x, y, argmax);
    return rc;
}

int mts_front_maxpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, const int32_t *argmax,
                               float *dx, mts_err *err)
{
    int rc = pool_check(N, C, H, W, k, s, err);
    if (rc == MTS_OK) mts_maxpool_backward(N, C, H, W, k, s, dy, argmax, dx);
    return rc;
}

/* -------------------------------------------------------------- optimizer */

int mts_front_sgd_step(int count, float *const *param, const float *const *grad, float *const *buf, const size_t *n,
                       int decay, float lr, float momentum, float wd)
{
    int bad = 0;
    for (int t = 0; t < count; t++) bad |= mts_sgd_update(n[t], param[t], grad[t], buf[t], momentum, wd, decay, lr);
    return bad;
}
