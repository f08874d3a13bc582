/* qat.c - dense and conv layers through an integer multiplier, trained the
 * way the field trains them (docs/training.md, "Integer multipliers"):
 * quantization-aware forward (activations per tensor with the observer's
 * range, weights per output channel, the products from the design's table,
 * exact integer sums, zero-point correction, one rescale) and a choice of
 * backward (mts_int_bwd): the straight-through estimator in FP32, the
 * multiplier's own gradient tables, or every backward product through the
 * table as before. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "mantis/fmath.h"
#include "mantis/nn_ops.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

int mts_int_bwd_parse(const char *s, mts_int_bwd *b, mts_err *err)
{
    if (s && !strcmp(s, "ste")) *b = MTS_INT_BWD_STE;
    else if (s && !strcmp(s, "table")) *b = MTS_INT_BWD_TABLE;
    else if (s && !strcmp(s, "approx")) *b = MTS_INT_BWD_APPROX;
    else return mts_fail(err, MTS_EINVAL, "integer backward '%s': expected ste, table or approx", s ? s : "");
    return MTS_OK;
}

const char *mts_int_bwd_name(mts_int_bwd b)
{
    return b == MTS_INT_BWD_TABLE ? "table" : b == MTS_INT_BWD_APPROX ? "approx" : "ste";
}

static int nthreads(const mts_provider *p)
{
#ifdef _OPENMP
    return p && p->threads > 0 ? p->threads : omp_get_max_threads();
#else
    (void)p;
    return 1;
#endif
}

/* What a QAT op needs of its integer table: the table, the prepared
 * planes (the context's when they belong to this table, else built here)
 * and the per-channel weight quantizers. */
typedef struct qlayer {
    const mts_lut *lut;
    int bits, sg, threads;
    uint32_t mask;
    const mts_qtab *tab;
    mts_qtab own;
    mts_qparam *qw;  /* [out] */
} qlayer;

static int qlayer_open(qlayer *q, const mts_nn_ctx *ctx, const float *w, int out, int in, mts_err *err)
{
    memset(q, 0, sizeof *q);
    const mts_provider *p = ctx->fwd;
    if (!p || p->kind != MTS_PROV_INT || !p->lut || p->lut->kind != MTS_LUT_INT)
        return mts_fail(err, MTS_EINVAL, "quantization-aware layer: the forward provider is not an integer table");
    /* the integer sums run here on the CPU whatever p->device says (the
     * per-GEMM path of --device cuda, e.g. with per-layer multipliers: the
     * layer's float backward GEMMs still go where their provider says);
     * host pointers only (the device-pointer twins: gpu/qat.cu) */
    if (ctx->device != MTS_DEVICE_CPU)
        return mts_fail(err, MTS_EUNSUPPORTED, "quantization-aware layers of integer tables take host pointers "
                        "(on device pointers: gpu.h's mts_gpu_qdense_* / mts_gpu_qconv2d_*)");
    q->lut = p->lut;
    q->bits = p->lut->int_bits;
    q->sg = p->lut->int_signed != 0;
    q->mask = (1u << q->bits) - 1u;
    q->threads = nthreads(p);
    q->qw = malloc(sizeof *q->qw * (size_t)(out > 0 ? out : 1));
    if (!q->qw) return mts_fail(err, MTS_ENOMEM, "quantization-aware layer: out of memory");
    mts_qat_weight_params(w, out, in, q->bits, q->sg, q->qw);
    if (ctx->qtab && ctx->qtab->lut == p->lut) {
        q->tab = ctx->qtab;
        return MTS_OK;
    }
    q->tab = &q->own;
    return mts_qtab_init(&q->own, p->lut, err);
}

static void qlayer_close(qlayer *q)
{
    if (q->tab == &q->own) mts_qtab_free(&q->own);
    free(q->qw);
    memset(q, 0, sizeof *q);
}

/* The quantizer of qat.h over x[0..n), as codes (out: uint8_t, the low
 * bits), dequantized values (Q_FAKE: float, (q - zp) * scale) or centred
 * values (Q_CENTRED: float, q - zp); AVX-512 16 lanes a step with the same
 * operations (FP32 multiply, round to nearest even, + zp, clamp, NaN -> zp),
 * the scalar mts_q_value for the rest. */
enum { Q_CODES = 0, Q_FAKE = 1, Q_CENTRED = 2 };
static void q_apply(const mts_qparam *q, const float *x, size_t n, int mode, uint32_t mask, void *out)
{
    size_t i = 0;
    uint8_t *oc = out;
    float *of = out;
#if defined(__AVX512F__)
    const __m512 inv = _mm512_set1_ps(q->inv), sc = _mm512_set1_ps(q->scale), zf = _mm512_set1_ps((float)q->zp),
                 lo = _mm512_set1_ps((float)q->qmin), hi = _mm512_set1_ps((float)q->qmax);
    const __m512i zi = _mm512_set1_epi32(q->zp), mi = _mm512_set1_epi32((int)mask);
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 t = _mm512_roundscale_ps(_mm512_mul_ps(v, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __mmask16 nan = _mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q);
        t = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(t, zf), lo), hi);
        __m512i c = _mm512_mask_mov_epi32(_mm512_cvtps_epi32(t), nan, zi); /* whole values: exact */
        if (mode == Q_CODES) _mm_storeu_si128((__m128i *)(oc + i), _mm512_cvtepi32_epi8(_mm512_and_si512(c, mi)));
        else {
            __m512 cf = _mm512_cvtepi32_ps(_mm512_sub_epi32(c, zi));
            _mm512_storeu_ps(of + i, mode == Q_FAKE ? _mm512_mul_ps(cf, sc) : cf);
        }
    }
#endif
    for (; i < n; i++) {
        int32_t c = mts_q_value(q, x[i]);
        if (mode == Q_CODES) oc[i] = (uint8_t)((uint32_t)c & mask);
        else if (mode == Q_FAKE) of[i] = mts_q_real(q, c);
        else of[i] = (float)(c - q->zp);
    }
}

/* Weight codes cw[out][in] and, for the GEMM, per-channel zero points and
 * scales (as doubles). */
static void weight_codes(const qlayer *q, const float *w, int out, int in, uint8_t *cw, int32_t *zw, double *sw)
{
    for (int o = 0; o < out; o++) {
        const mts_qparam *p = &q->qw[o];
        q_apply(p, w + (size_t)o * in, (size_t)in, Q_CODES, q->mask, cw + (size_t)o * in);
        zw[o] = p->zp;
        sw[o] = p->scale;
    }
}

/* Codes of x[0..n) with one quantizer. */
static void act_codes(const mts_qparam *qa, uint32_t mask, const float *x, size_t n, uint8_t *c)
{
    q_apply(qa, x, n, Q_CODES, mask, c);
}

/* The float provider of the STE and TABLE backward: ctx->bwd unless it is
 * an integer table (then native FP32 on its threads). */
static const mts_provider *float_bwd(const mts_nn_ctx *ctx, mts_provider *native)
{
    if (ctx->bwd && ctx->bwd->kind != MTS_PROV_INT) return ctx->bwd;
    memset(native, 0, sizeof *native);
    native->kind = MTS_PROV_NATIVE;
    native->threads = ctx->bwd ? ctx->bwd->threads : ctx->fwd ? ctx->fwd->threads : 0;
    return native;
}

/* dx[i] = 0 where x[i] was clipped by the quantizer (the STE's mask). */
static void clip_mask(const mts_qparam *qa, const float *x, size_t n, float *dx)
{
    for (size_t i = 0; i < n; i++)
        if (!mts_q_pass(qa, x[i])) dx[i] = 0.0f;
}

/* Fake-quantized copies: xh = dequant(quant(x)) with one quantizer, wh per channel. */
static void fake_act(const mts_qparam *qa, const float *x, size_t n, float *xh)
{
    q_apply(qa, x, n, Q_FAKE, 0, xh);
}
static void fake_weights(const qlayer *q, const float *w, int out, int in, float *wh)
{
    for (int o = 0; o < out; o++) q_apply(&q->qw[o], w + (size_t)o * in, (size_t)in, Q_FAKE, 0, wh + (size_t)o * in);
}

/* The gradient tables of the forward table: the context's, or built here. */
static int grad_tables(const mts_nn_ctx *ctx, mts_int_grad *own, const mts_int_grad **g, mts_err *err)
{
    if (ctx->igrad && ctx->igrad->lut == ctx->fwd->lut && ctx->igrad->da) {
        *g = ctx->igrad;
        return MTS_OK;
    }
    *g = own;
    return mts_int_grad_build(ctx->fwd->lut, mts_int_grad_default_window(ctx->fwd->lut->int_bits), own, err);
}

/* ------------------------------------------- the TABLE backward's sums
 * One kernel for the four gradient sums of the TABLE backward: for lanes
 * j in [0, len) and terms t in [0, T), in t order from +0,
 *   r[j] = sum_t d(t, j) * ((G[(a(t, j) << bits) | b(t, j)] - z(t)) * s(t))
 * with a(t, j) = A[t*as + j], b(t, j) = B[t*bs + j*bl], d(t, j) = D[t*ds +
 * j*dl], z(t) = Z[t*zs], s(t) = S[t*zs]: each product is the operand's
 * gradient factor in real units times the other GEMM operand, rounded to
 * FP32, then added, as the FP32 GEMMs of the STE backward do (so the exact
 * table gives their bits). */
typedef struct tsum {
    const float *G;
    int bits;
    const uint8_t *A;
    size_t as;
    const uint8_t *B;
    size_t bs, bl;
    const float *D;
    size_t ds, dl;
    const float *Z, *S;
    size_t zs;
} tsum;

/* The readable form, lane by lane. */
static void tsum_scalar(const tsum *k, int T, int len, float *r)
{
    for (int j = 0; j < len; j++) {
        float acc = 0.0f;
        for (int t = 0; t < T; t++) {
            uint32_t ia = k->A[(size_t)t * k->as + (size_t)j], ib = k->B[(size_t)t * k->bs + (size_t)j * k->bl];
            float f = (k->G[(ia << k->bits) | ib] - k->Z[(size_t)t * k->zs]) * k->S[(size_t)t * k->zs];
            acc = acc + k->D[(size_t)t * k->ds + (size_t)j * k->dl] * f;
        }
        r[j] = acc;
    }
}

#if defined(__AVX512F__)
#define TS_NV 8 /* vectors of 16 lanes held in registers across the terms */
/* The same sums, 16 lanes a vector, gathers of the table (the same
 * operations in the same order per lane). */
static void tsum_avx512(const tsum *k, int T, int len, float *r)
{
    const __m128i bits = _mm_cvtsi32_si128(k->bits);
    for (int j0 = 0; j0 < len; j0 += 16 * TS_NV) {
        int nv = (len - j0 + 15) / 16;
        if (nv > TS_NV) nv = TS_NV;
        __mmask16 last = (__mmask16)((len - j0 - 16 * (nv - 1)) >= 16 ? 0xFFFF
                                                                      : (1u << (len - j0 - 16 * (nv - 1))) - 1u);
        __m512 acc[TS_NV];
        for (int v = 0; v < TS_NV; v++) acc[v] = _mm512_setzero_ps();
        for (int t = 0; t < T; t++) {
            const uint8_t *a = k->A + (size_t)t * k->as + j0, *b = k->B + (size_t)t * k->bs + (size_t)j0 * k->bl;
            const float *d = k->D + (size_t)t * k->ds + (size_t)j0 * k->dl;
            __m512 z = _mm512_set1_ps(k->Z[(size_t)t * k->zs]), sc = _mm512_set1_ps(k->S[(size_t)t * k->zs]);
            __m512i bb = _mm512_set1_epi32(*b);
            __m512 dd = _mm512_set1_ps(*d);
            for (int v = 0; v < nv; v++) {
                __mmask16 m = v == nv - 1 ? last : 0xFFFF;
                __m512i ia = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, a + 16 * v));
                if (k->bl) bb = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, b + 16 * v));
                __m512i idx = _mm512_or_si512(_mm512_sll_epi32(ia, bits), bb);
                __m512 g = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, k->G, 4);
                __m512 f = _mm512_mul_ps(_mm512_sub_ps(g, z), sc);
                if (k->dl) dd = _mm512_maskz_loadu_ps(m, d + 16 * v);
                acc[v] = _mm512_add_ps(acc[v], _mm512_mul_ps(dd, f));
            }
        }
        for (int v = 0; v < nv; v++) _mm512_mask_storeu_ps(r + j0 + 16 * v, v == nv - 1 ? last : 0xFFFF, acc[v]);
    }
}
#endif

static void tsum_run(const tsum *k, int scalar_only, int T, int len, float *r)
{
#if defined(__AVX512F__)
    if (!scalar_only) {
        tsum_avx512(k, T, len, r);
        return;
    }
#endif
    (void)scalar_only;
    tsum_scalar(k, T, len, r);
}

/* ----------------------------------------------------------------- dense */

int mts_qdense_forward(const mts_nn_ctx *ctx, const mts_qparam *qa, int N, int in, int out, const float *x,
                       const float *w, const float *b, float *y, mts_err *err)
{
    qlayer q;
    int rc = qlayer_open(&q, ctx, w, out, in, err);
    size_t nx = (size_t)N * in, nw = (size_t)out * in;
    uint8_t *cx = malloc(nx + 1), *cw = malloc(nw + 1);
    int32_t *zw = malloc(sizeof *zw * (size_t)(out + 1));
    double *sw = malloc(sizeof *sw * (size_t)(out + 1));
    if (rc == MTS_OK && (!cx || !cw || !zw || !sw)) rc = mts_fail(err, MTS_ENOMEM, "dense forward: out of memory");
    if (rc == MTS_OK) {
        act_codes(qa, q.mask, x, nx, cx);
        weight_codes(&q, w, out, in, cw, zw, sw);
        /* y = x * w^T: a = activation, b = weight */
        mts_qopd A = {cx, (size_t)in, NULL, qa->zp, NULL, qa->scale, 0}, B = {cw, (size_t)in, zw, 0, sw, 0.0, 0};
        rc = mts_qgemm(q.tab, q.threads, ctx->fwd->scalar_only, 0, N, out, in, &A, &B, 0.0f, y, out, err);
    }
    if (rc == MTS_OK && b)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < out; o++) y[(size_t)n * out + o] = mts_fm_canon(y[(size_t)n * out + o] + b[o]);
    qlayer_close(&q);
    free(cx);
    free(cw);
    free(zw);
    free(sw);
    return rc;
}

/* The TABLE backward of a dense layer: each product's factor is the table's
 * gradient at its code pair, in real units; sums in the GEMMs' order
 * (dx over o, dw over n, each from +0). */
static int dense_table_grads(const mts_int_grad *G, const qlayer *q, const mts_qparam *qa, int N, int in, int out,
                             const uint8_t *cx, const uint8_t *cw, const float *dy, float *dx, float *dw, int scalar,
                             mts_err *err)
{
    int T = q->threads;
    (void)T;
    float *zw = malloc(sizeof *zw * (size_t)out), *sw = malloc(sizeof *sw * (size_t)out);
    if (!zw || !sw) {
        free(zw);
        free(sw);
        return mts_fail(err, MTS_ENOMEM, "dense backward: out of memory");
    }
    for (int o = 0; o < out; o++) zw[o] = (float)q->qw[o].zp, sw[o] = q->qw[o].scale;
    float za = (float)qa->zp, sa = qa->scale;
    if (dx) /* dx[n][i] = sum over o of dy[n][o] * dT/da: lanes i, terms o */
#pragma omp parallel for num_threads(T) schedule(static)
        for (int n = 0; n < N; n++) {
            tsum k = {G->da, q->bits, cx + (size_t)n * in, 0, cw, (size_t)in, 1, dy + (size_t)n * out, 1, 0, zw, sw, 1};
            tsum_run(&k, scalar, out, in, dx + (size_t)n * in);
        }
    if (dw) /* dw[o][i] = sum over n of dy[n][o] * dT/db: lanes i, terms n */
#pragma omp parallel for num_threads(T) schedule(static)
        for (int o = 0; o < out; o++) {
            tsum k = {G->db, q->bits, cx, (size_t)in, cw + (size_t)o * in, 0, 1, dy + o, (size_t)out, 0, &za, &sa, 0};
            tsum_run(&k, scalar, N, in, dw + (size_t)o * in);
        }
    free(zw);
    free(sw);
    return MTS_OK;
}

int mts_qdense_backward(const mts_nn_ctx *ctx, const mts_qparam *qa, int N, int in, int out, const float *x,
                        const float *w, const float *dy, float *dx, float *dw, float *db, mts_err *err)
{
    if (ctx->int_bwd == MTS_INT_BWD_APPROX)
        return mts_dense_backward(ctx, N, in, out, x, w, dy, dx, dw, db, err);
    mts_provider native;
    mts_nn_ctx fc = *ctx; /* plain FP32 backward GEMMs, identity STE */
    fc.fwd = fc.bwd = float_bwd(ctx, &native);
    fc.ste = MTS_STE_IDENTITY;
    qlayer q;
    int rc = qlayer_open(&q, ctx, w, out, in, err);
    size_t nx = (size_t)N * in, nw = (size_t)out * in;
    if (rc != MTS_OK) goto done0;
    if (ctx->int_bwd == MTS_INT_BWD_STE) {
        float *xh = malloc(sizeof *xh * (nx + 1)), *wh = malloc(sizeof *wh * (nw + 1));
        if (!xh || !wh) rc = mts_fail(err, MTS_ENOMEM, "dense backward: out of memory");
        else {
            fake_act(qa, x, nx, xh);
            fake_weights(&q, w, out, in, wh);
            rc = mts_dense_backward(&fc, N, in, out, xh, wh, dy, dx, dw, db, err);
        }
        free(xh);
        free(wh);
    } else {
        mts_int_grad own;
        const mts_int_grad *G;
        memset(&own, 0, sizeof own);
        uint8_t *cx = malloc(nx + 1), *cw = malloc(nw + 1);
        int32_t *zw = malloc(sizeof *zw * (size_t)(out + 1));
        double *sw = malloc(sizeof *sw * (size_t)(out + 1));
        if (!cx || !cw || !zw || !sw) rc = mts_fail(err, MTS_ENOMEM, "dense backward: out of memory");
        else rc = grad_tables(ctx, &own, &G, err);
        if (rc == MTS_OK) {
            act_codes(qa, q.mask, x, nx, cx);
            weight_codes(&q, w, out, in, cw, zw, sw);
            rc = dense_table_grads(G, &q, qa, N, in, out, cx, cw, dy, dx, dw, ctx->fwd->scalar_only, err);
            if (rc == MTS_OK && db) rc = mts_dense_backward(&fc, N, in, out, x, w, dy, NULL, NULL, db, err);
        }
        mts_int_grad_free(&own);
        free(cx);
        free(cw);
        free(zw);
        free(sw);
    }
    if (rc == MTS_OK && dx) clip_mask(qa, x, nx, dx);
done0:
    qlayer_close(&q);
    return rc;
}

/* ------------------------------------------------------------------ conv */

/* Centred codes of the input as floats, (q - zp): im2col then pads with 0,
 * the code of the real 0. */
static void centred(const mts_qparam *qa, const float *x, size_t n, float *xc)
{
    q_apply(qa, x, n, Q_CENTRED, 0, xc);
}

/* Codes back from centred floats. */
static void codes_of(const float *xc, size_t n, int32_t zp, uint32_t mask, uint8_t *c)
{
    for (size_t i = 0; i < n; i++) c[i] = (uint8_t)((uint32_t)((int32_t)xc[i] + zp) & mask);
}

/* im2col of codes: xq[N][cin][h][w] into col[K][N*P] (K in (ci, ky, kx)
 * order, columns in (n, oy, ox) order, as mts_im2col), padding taps taking
 * the code pad (the zero point: the real 0). */
static void im2col_codes(const mts_conv_geom *g, int N, const uint8_t *xq, uint8_t pad, uint8_t *col)
{
    int P = g->oh * g->ow, s = g->stride;
    size_t NP = (size_t)N * P, plane = (size_t)g->h * g->w;
    for (int ci = 0; ci < g->cin; ci++)
        for (int ky = 0; ky < g->k; ky++)
            for (int kx = 0; kx < g->k; kx++) {
                uint8_t *row = col + ((size_t)(ci * g->k + ky) * g->k + kx) * NP;
                /* output columns ox whose input column ix = ox*s - pad + kx lies inside: [o0, o1) */
                int o0 = 0, o1 = g->ow;
                while (o0 < g->ow && o0 * s - g->pad + kx < 0) o0++;
                while (o1 > o0 && (o1 - 1) * s - g->pad + kx >= g->w) o1--;
                for (int n = 0; n < N; n++) {
                    const uint8_t *src = xq + ((size_t)n * g->cin + ci) * plane;
                    for (int oy = 0; oy < g->oh; oy++) {
                        uint8_t *d = row + (size_t)n * P + (size_t)oy * g->ow;
                        int iy = oy * s - g->pad + ky;
                        if (iy < 0 || iy >= g->h) {
                            memset(d, pad, (size_t)g->ow);
                            continue;
                        }
                        const uint8_t *sr = src + (size_t)iy * g->w;
                        for (int ox = 0; ox < o0; ox++) d[ox] = pad;
                        if (s == 1) memcpy(d + o0, sr + o0 - g->pad + kx, (size_t)(o1 - o0));
                        else
                            for (int ox = o0; ox < o1; ox++) d[ox] = sr[ox * s - g->pad + kx];
                        for (int ox = o1; ox < g->ow; ox++) d[ox] = pad;
                    }
                }
            }
}

int mts_qconv2d_forward(const mts_nn_ctx *ctx, const mts_qparam *qa, const mts_conv_geom *g, int N,
                        const float *x, const float *w, const float *b, float *y, mts_err *err)
{
    int K = g->cin * g->k * g->k, P = g->oh * g->ow, C = g->cout;
    size_t NP = (size_t)N * P, nx = (size_t)N * g->cin * g->h * g->w;
    qlayer q;
    int rc = qlayer_open(&q, ctx, w, C, K, err);
    float *t = malloc(sizeof *t * (NP * C + 1));
    uint8_t *cx = malloc(nx + 1), *ca = malloc(NP * K + 1), *cw = malloc((size_t)C * K + 1);
    int32_t *zw = malloc(sizeof *zw * (size_t)(C + 1));
    double *sw = malloc(sizeof *sw * (size_t)(C + 1));
    if (rc == MTS_OK && (!cx || !t || !ca || !cw || !zw || !sw))
        rc = mts_fail(err, MTS_ENOMEM, "conv forward: out of memory (%zu x %d codes)", NP, K);
    if (rc == MTS_OK) {
        act_codes(qa, q.mask, x, nx, cx);
        im2col_codes(g, N, cx, (uint8_t)((uint32_t)qa->zp & q.mask), ca);
        weight_codes(&q, w, C, K, cw, zw, sw);
        /* col^T x w^T [N*P][cout] stored transposed t[cout][N*P]: a = activation (col: k-major),
         * b = weight */
        mts_qopd A = {ca, NP, NULL, qa->zp, NULL, qa->scale, 1}, B = {cw, (size_t)K, zw, 0, sw, 0.0, 0};
        rc = mts_qgemm(q.tab, q.threads, ctx->fwd->scalar_only, 1, (int)NP, C, K, &A, &B, 0.0f, t, (int)NP, err);
    }
    if (rc == MTS_OK)
        for (int n = 0; n < N; n++)
            for (int co = 0; co < C; co++) {
                float *yo = y + ((size_t)n * C + co) * P;
                const float *to = t + (size_t)co * NP + (size_t)n * P;
                float bias = b ? b[co] : 0.0f;
                for (int p = 0; p < P; p++) yo[p] = mts_fm_canon(to[p] + bias);
            }
    qlayer_close(&q);
    free(cx);
    free(t);
    free(ca);
    free(cw);
    free(zw);
    free(sw);
    return rc;
}

/* The TABLE backward of a conv layer, in the orders of mts_conv2d_backward:
 * dW[co][k] sums over n*P in order, dcol[k][n*P] over cout in order (then
 * col2im as for every provider). caT: codes [N*P][K], ca: [K][N*P]. */
static int conv_table_grads(const mts_int_grad *G, const qlayer *q, const mts_qparam *qa, const mts_conv_geom *g,
                            int N, const uint8_t *caT, const uint8_t *ca, const uint8_t *cw, const float *dyc,
                            float *dx, float *dw, int scalar, mts_err *err)
{
    int K = g->cin * g->k * g->k, C = g->cout, T = q->threads;
    size_t NP = (size_t)N * g->oh * g->ow;
    (void)T;
    float za = (float)qa->zp, sa = qa->scale;
    float *zw = malloc(sizeof *zw * (size_t)C), *sw = malloc(sizeof *sw * (size_t)C);
    if (!zw || !sw) {
        free(zw);
        free(sw);
        return mts_fail(err, MTS_ENOMEM, "conv backward: out of memory");
    }
    for (int co = 0; co < C; co++) zw[co] = (float)q->qw[co].zp, sw[co] = q->qw[co].scale;
    if (dw) /* dW[co][k] = sum over (n, p) of dyc[co][np] * dT/db: lanes k, terms np */
#pragma omp parallel for num_threads(T) schedule(static)
        for (int co = 0; co < C; co++) {
            tsum k = {G->db, q->bits, caT, (size_t)K, cw + (size_t)co * K, 0, 1, dyc + (size_t)co * NP, 1, 0, &za, &sa, 0};
            tsum_run(&k, scalar, (int)NP, K, dw + (size_t)co * K);
        }
    float *dcol = dx ? malloc(sizeof *dcol * (NP * K + 1)) : NULL;
    if (!dx || !dcol) {
        free(zw);
        free(sw);
        return dx ? mts_fail(err, MTS_ENOMEM, "conv backward: out of memory (%zu x %d gradients)", NP, K) : MTS_OK;
    }
    /* dcol[k][np] = sum over co of dyc[co][np] * dT/da: lanes np (in blocks), terms co */
    size_t nb = (NP + 255) / 256;
#pragma omp parallel for num_threads(T) schedule(static)
    for (long kb = 0; kb < (long)K * (long)nb; kb++) {
        int k = (int)(kb / (long)nb);
        size_t p0 = (size_t)(kb % (long)nb) * 256, len = NP - p0 < 256 ? NP - p0 : 256;
        tsum t = {G->da, q->bits, ca + (size_t)k * NP + p0, 0, cw + k, (size_t)K, 0, dyc + p0, NP, 1, zw, sw, 1};
        tsum_run(&t, scalar, C, (int)len, dcol + (size_t)k * NP + p0);
    }
    int rc = mts_col2im_rows(g, N, dcol, dx, err);
    free(dcol);
    free(zw);
    free(sw);
    return rc;
}

int mts_qconv2d_backward(const mts_nn_ctx *ctx, const mts_qparam *qa, const mts_conv_geom *g, int N,
                         const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                         mts_err *err)
{
    if (ctx->int_bwd == MTS_INT_BWD_APPROX) return mts_conv2d_backward(ctx, g, N, x, w, dy, dx, dw, db, err);
    int K = g->cin * g->k * g->k, P = g->oh * g->ow, C = g->cout;
    size_t NP = (size_t)N * P, nx = (size_t)N * g->cin * g->h * g->w;
    mts_provider native;
    mts_nn_ctx fc = *ctx;
    fc.fwd = fc.bwd = float_bwd(ctx, &native);
    fc.ste = MTS_STE_IDENTITY;
    qlayer q;
    int rc = qlayer_open(&q, ctx, w, C, K, err);
    if (rc != MTS_OK) goto done0;
    if (ctx->int_bwd == MTS_INT_BWD_STE) {
        float *xh = malloc(sizeof *xh * (nx + 1)), *wh = malloc(sizeof *wh * ((size_t)C * K + 1));
        if (!xh || !wh) rc = mts_fail(err, MTS_ENOMEM, "conv backward: out of memory");
        else {
            fake_act(qa, x, nx, xh);
            fake_weights(&q, w, C, K, wh);
            rc = mts_conv2d_backward(&fc, g, N, xh, wh, dy, dx, dw, db, err);
        }
        free(xh);
        free(wh);
    } else {
        mts_int_grad own;
        const mts_int_grad *G;
        memset(&own, 0, sizeof own);
        float *xc = malloc(sizeof *xc * (nx + 1)), *col = malloc(sizeof *col * (NP * K + 1)),
              *dyc = malloc(sizeof *dyc * (NP * C + 1));
        uint8_t *caT = malloc(NP * K + 1), *ca = malloc(NP * K + 1), *cw = malloc((size_t)C * K + 1);
        int32_t *zw = malloc(sizeof *zw * (size_t)(C + 1));
        double *sw = malloc(sizeof *sw * (size_t)(C + 1));
        if (!xc || !col || !dyc || !caT || !ca || !cw || !zw || !sw)
            rc = mts_fail(err, MTS_ENOMEM, "conv backward: out of memory (%zu x %d codes)", NP, K);
        else rc = grad_tables(ctx, &own, &G, err);
        if (rc == MTS_OK) {
            centred(qa, x, nx, xc);
            rc = mts_im2col_t(g, N, xc, col, err);
            if (rc == MTS_OK) codes_of(col, NP * K, qa->zp, q.mask, caT);
            if (rc == MTS_OK && dx) rc = mts_im2col(g, N, xc, col, err);
            if (rc == MTS_OK && dx) codes_of(col, NP * K, qa->zp, q.mask, ca);
        }
        if (rc == MTS_OK) {
            weight_codes(&q, w, C, K, cw, zw, sw);
            for (int n = 0; n < N; n++)
                for (int co = 0; co < C; co++)
                    memcpy(dyc + (size_t)co * NP + (size_t)n * P, dy + ((size_t)n * C + co) * P, sizeof(float) * (size_t)P);
            rc = conv_table_grads(G, &q, qa, g, N, caT, ca, cw, dyc, dx, dw, ctx->fwd->scalar_only, err);
        }
        if (rc == MTS_OK && db) rc = mts_conv2d_backward(&fc, g, N, x, w, dy, NULL, NULL, db, err);
        mts_int_grad_free(&own);
        free(xc);
        free(col);
        free(dyc);
        free(caT);
        free(ca);
        free(cw);
        free(zw);
        free(sw);
    }
    if (rc == MTS_OK && dx) clip_mask(qa, x, nx, dx);
done0:
    qlayer_close(&q);
    return rc;
}
