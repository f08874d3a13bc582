/* verify_acc.c - verification of accumulator designs against the FMAq C
 * model: y = mts_q_encode(Q_acc, mts_fmaq(Q_prod, Q_acc, decode(p), decode(s)))
 * for every pair of codes when both operands have at most 13 bits (2^26
 * pairs), else for seeded random pairs (biased towards non-zero codes and
 * operands of similar exponents, where cancellation and carries happen). Codes, not values, are compared, so
 * the zero flag, the sign of zero and the NaN code are checked too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fmaq.h"
#include "mantis/rng.h"
#include "verify_internal.h"

#define CHUNK_BITS 20 /* pairs per design sweep: 2^20 (8 MiB of results) */

typedef struct {
    const mts_qfmt *qp, *qa;
    const uint32_t *x0, *x1; /* operands, or NULL: x0 = row | row0, x1 = column */
    const uint64_t *y;
    size_t n;
    int bits1;
    uint32_t row0;
    vfy_sink *sink; /* [MTS_PAR_WORKERS] */
} acc_job;

static void acc_line(vfy_line *l, const mts_qfmt *qp, const mts_qfmt *qa, uint32_t p, uint32_t s, uint32_t dut,
                     uint32_t ref)
{
    vfy_fmt_qcode(l->a, sizeof l->a, qp, p);
    vfy_fmt_qcode(l->b, sizeof l->b, qa, s);
    vfy_fmt_qcode(l->dut, sizeof l->dut, qa, dut);
    vfy_fmt_qcode(l->ref, sizeof l->ref, qa, ref);
    int E = qa->E, M = qa->M;
    uint32_t zflag = 1u << (E + M + 1), rest = (1u << (E + M)) - 1u;
    const char *cls = "mantissa";
    if (((p >> (qp->E + qp->M + 1)) & 1u) || (s & zflag)) cls = "special";
    else if ((dut & zflag) || (ref & zflag)) cls = "zero";
    else if ((dut & rest) == rest || (ref & rest) == rest) cls = "saturation";
    else if ((dut ^ ref) & (1u << (E + M))) cls = "sign";
    else if ((dut ^ ref) >> M) cls = "exponent";
    snprintf(l->cls, sizeof l->cls, "%s", cls);
    snprintf(l->text, sizeof l->text, "p=%s  s=%s  =>  rtl=%s  fmaq=%s  [%s]", l->a, l->b, l->dut, l->ref, cls);
}

static void acc_part(void *ctx, int t)
{
    const acc_job *j = ctx;
    size_t lo = j->n * (size_t)t / MTS_PAR_WORKERS, hi = j->n * (size_t)(t + 1) / MTS_PAR_WORKERS;
    vfy_sink *s = &j->sink[t];
    for (size_t i = lo; i < hi; i++) {
        uint32_t p = j->x0 ? j->x0[i] : (uint32_t)(i >> j->bits1) + j->row0;
        uint32_t q = j->x1 ? j->x1[i] : (uint32_t)(i & ((1u << j->bits1) - 1u));
        uint32_t ref = mts_q_encode(j->qa, mts_fmaq(j->qp, j->qa, mts_q_decode(j->qp, p), mts_q_decode(j->qa, q)));
        uint32_t dut = (uint32_t)j->y[i];
        s->cases++;
        if (dut != ref) {
            vfy_line *l = vfy_sink_miss(s);
            if (l) acc_line(l, j->qp, j->qa, p, q, dut, ref);
        }
    }
}

/* Random operands are evaluated on both model instances. */
typedef struct {
    mts_rtl *r;
    const uint32_t *x0, *x1;
    uint64_t *y;
    size_t n;
} eval_job;

static void eval_part(void *ctx, int t)
{
    eval_job *j = ctx;
    size_t lo = j->n * (size_t)t / MTS_PAR_WORKERS, hi = j->n * (size_t)(t + 1) / MTS_PAR_WORKERS;
    mts_rtl_eval(j->r, hi - lo, j->x0 + lo, j->x1 + lo, j->y + lo);
}

/* Buffers of one run: results y, and random operands x0, x1 (NULL when exhaustive). */
typedef struct {
    uint64_t *y;
    uint32_t *x0, *x1;
    vfy_sink sink[MTS_PAR_WORKERS];
} acc_bufs;

/* Every code pair, in design sweeps of 2^CHUNK_BITS pairs (whole rows of s). */
static int acc_exhaustive(vfy_ctx *v, int c, acc_bufs *b, mts_err *err)
{
    const mts_rtl_info *in = v->in;
    int w0 = in->w0, w1 = in->w1;
    int rb = w1 >= CHUNK_BITS ? 0 : CHUNK_BITS - w1; /* rows per sweep */
    if (rb > w0) rb = w0;
    for (uint32_t row0 = 0; row0 < (1u << w0); row0 += 1u << rb) {
        int rc = mts_rtl_sweep(v->r, rb, row0, w1, 0, b->y, err);
        if (rc) return rc;
        acc_job j = {&in->qprod, &in->qacc, NULL, NULL, b->y, (size_t)1 << (rb + w1), w1, row0, b->sink};
        mts_par_run(MTS_PAR_WORKERS, acc_part, &j);
        for (int t = 0; t < MTS_PAR_WORKERS; t++) vfy_cmp_merge(v, c, &b->sink[t]);
    }
    return MTS_OK;
}

/* n random operand pairs from the stream *st, biased to where the
 * accumulator's hard cases are. */
static void draw_pairs(const mts_qfmt *qp, const mts_qfmt *qa, int w0, int w1, uint64_t *st, size_t n,
                       uint32_t *x0, uint32_t *x1)
{
    uint32_t m0 = w0 >= 32 ? ~0u : (1u << w0) - 1u, m1 = w1 >= 32 ? ~0u : (1u << w1) - 1u;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = mts_rng_splitmix64(st), r2 = mts_rng_splitmix64(st);
        x0[i] = (uint32_t)r & m0;
        x1[i] = (uint32_t)(r >> 32) & m1;
        /* half of all codes have the zero flag (nearly all NaN): keep 1 in 16 of them */
        if (r2 & 15u) x0[i] &= m0 >> 1;
        if ((r2 >> 4) & 15u) x1[i] &= m1 >> 1;
        /* 1 in 4: s's exponent near p's, so that cancellation and carries happen */
        if (((r2 >> 8) & 3u) == 0) {
            int ep = (int)((x0[i] >> qp->M) & ((1u << qp->E) - 1u)) - qp->bias;
            int es = ep + (int)((r2 >> 10) & 3u) - 1 + qa->bias;
            if (es >= 0 && es < (1 << qa->E))
                x1[i] = (x1[i] & ~(((1u << qa->E) - 1u) << qa->M)) | ((uint32_t)es << qa->M);
        }
    }
}

/* opts->samples seeded pairs (default 2^22), in chunks of 2^CHUNK_BITS. */
static void acc_random(vfy_ctx *v, int c, acc_bufs *b)
{
    const mts_rtl_info *in = v->in;
    size_t chunk = (size_t)1 << CHUNK_BITS;
    uint64_t st = v->o->seed, total = v->o->samples ? v->o->samples : (uint64_t)1 << 22;
    for (uint64_t done = 0; done < total;) {
        size_t n = total - done < chunk ? (size_t)(total - done) : chunk;
        draw_pairs(&in->qprod, &in->qacc, in->w0, in->w1, &st, n, b->x0, b->x1);
        eval_job ej = {v->r, b->x0, b->x1, b->y, n};
        mts_par_run(MTS_PAR_WORKERS, eval_part, &ej);
        acc_job j = {&in->qprod, &in->qacc, b->x0, b->x1, b->y, n, 0, 0, b->sink};
        mts_par_run(MTS_PAR_WORKERS, acc_part, &j);
        for (int t = 0; t < MTS_PAR_WORKERS; t++) vfy_cmp_merge(v, c, &b->sink[t]);
        done += n;
    }
}

int vfy_acc(vfy_ctx *v, mts_err *err)
{
    const mts_rtl_info *in = v->in;
    int exhaustive = in->w0 + in->w1 <= 26, rc = MTS_OK;
    char name[128], np[40], na[40];
    mts_qfmt_name(&in->qprod, np, sizeof np);
    mts_qfmt_name(&in->qacc, na, sizeof na);
    snprintf(name, sizeof name, "rtl vs fmaq (Q_prod %s, Q_acc %s, %s)", np, na, exhaustive ? "exhaustive" : "random");
    int c = vfy_cmp_begin(v, name);
    acc_bufs b;
    memset(&b, 0, sizeof b);
    size_t chunk = (size_t)1 << CHUNK_BITS;
    b.y = malloc(chunk * sizeof *b.y);
    b.x0 = exhaustive ? NULL : malloc(chunk * sizeof *b.x0);
    b.x1 = exhaustive ? NULL : malloc(chunk * sizeof *b.x1);
    int bad = c < 0 || !b.y || (!exhaustive && (!b.x0 || !b.x1));
    for (int t = 0; t < MTS_PAR_WORKERS; t++) bad |= vfy_sink_init(&b.sink[t], v->max_report);
    if (bad)
        rc = mts_fail(err, MTS_ENOMEM, "out of memory");
    else if (exhaustive)
        rc = acc_exhaustive(v, c, &b, err);
    else
        acc_random(v, c, &b);
    if (!rc) vfy_cmp_report(v, c);
    for (int t = 0; t < MTS_PAR_WORKERS; t++) vfy_sink_free(&b.sink[t]);
    free(b.y);
    free(b.x0);
    free(b.x1);
    return rc;
}
