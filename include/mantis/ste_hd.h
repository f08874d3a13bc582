/* ste_hd.h - the FMAq straight-through estimators' decisions (accumulator
 * paper, appendix D), one copy for the CPU (sim/nn/ste.c, mts_ste_mask) and
 * the GPU (gpu/gemm.cu, mts_gpu_ste_mask): a replay of one FMAq dot product
 * in mts_fmaq_dot's order - chunks of `chunk` terms accumulated from +0,
 * chunk sums added left to right - deciding for each term whether its
 * gradient passes. The callers form the products (as their GEMMs do) and
 * write the mask; the rules are here:
 *
 *   mts_ste_run s; mts_ste_begin_hd(&s, ste, qacc);
 *   for each chunk [c0, c1):
 *       for i in [c0, c1): mask[i] = mts_ste_term_hd(&s, qprod, qacc, product_i, i);
 *       zero mask[c0, mts_ste_chunk_end_hd(&s, qacc, c0, c1));
 *   zero mask[0, s.dead_end); the dot product is s.total.
 *
 * The DIFF test and the overflow tests run in FP64 through fmath.h's
 * explicitly rounded helpers (exact here: sums of two floats, products with
 * constants compared, not stored). */
#ifndef MANTIS_STE_HD_H
#define MANTIS_STE_HD_H

#include <stddef.h>
#include <stdint.h>

#include "mantis/arith_hd.h"
#include "mantis/fmath.h"
#include "mantis/hd.h"

/* The mts_ste values (nn_ops.h), repeated for device code, which does not
 * include the CPU's layer-op header; nn_ops.h checks they agree. */
#define MTS_STE_HD_IDENTITY 0
#define MTS_STE_HD_REC_OF 1
#define MTS_STE_HD_IMM_OF 2
#define MTS_STE_HD_IMM_DIFF 3
#define MTS_STE_HD_DIFF_EPS1 1e-30
#define MTS_STE_HD_DIFF_EPS2 0.5

typedef struct mts_ste_run {
    int ste;          /* MTS_STE_HD_* */
    double rof;       /* the largest accumulator magnitude */
    uint32_t s;       /* the chunk's running sum */
    uint32_t total;   /* the chunk sums so far (valid when have_total) */
    int have_total;
    size_t last_of;   /* REC_OF: the chunk's terms [c0, last_of) die */
    size_t dead_end;  /* REC_OF: terms [0, dead_end) die (a second-level overflow) */
} mts_ste_run;

static inline MTS_HD void mts_ste_begin_hd(mts_ste_run *r, int ste, const mts_qfmt *qacc)
{
    r->ste = ste;
    r->rof = (double)mts_u2f(mts_q_rof_hd(qacc));
    r->s = 0;
    r->total = 0;
    r->have_total = 0;
    r->last_of = 0;
    r->dead_end = 0;
}

/* Term i (in order) with product pr (FP32 bits, the forward GEMM's): 1
 * when its gradient passes the estimator, 0 when it is zeroed. */
static inline MTS_HD int mts_ste_term_hd(mts_ste_run *r, const mts_qfmt *qprod, const mts_qfmt *qacc, uint32_t pr,
                                         size_t i)
{
    uint32_t qp = mts_q_hd(qprod, pr);
    uint32_t z = mts_qadd_hd(qacc, qp, r->s); /* = mts_fmaq(qprod, qacc, pr, s) */
    int keep = 1;
    if (r->ste == MTS_STE_HD_IMM_DIFF) {
        double d = fabs(mts_fm_dsub((double)mts_u2f(z), (double)mts_u2f(r->s)));
        /* |z-s| / (|p| + eps1) > eps2, without the division */
        keep = d > mts_fm_dmul(MTS_STE_HD_DIFF_EPS2, mts_fm_dadd(fabs((double)mts_u2f(pr)), MTS_STE_HD_DIFF_EPS1));
    } else if (r->ste != MTS_STE_HD_IDENTITY) {
        double sum = mts_fm_dadd((double)mts_u2f(qp), (double)mts_u2f(r->s));
        keep = fabs(sum) < r->rof;
        if (!keep && r->ste == MTS_STE_HD_REC_OF) r->last_of = i + 1;
    }
    r->s = z;
    return keep;
}

/* Closes the chunk [c0, c1): its sum goes into the total (the second level,
 * T = Qacc(T + c), whose overflow kills every term so far under REC_OF).
 * Returns the end of the chunk's own zeroed prefix [c0, end) (c0: none). */
static inline MTS_HD size_t mts_ste_chunk_end_hd(mts_ste_run *r, const mts_qfmt *qacc, size_t c0, size_t c1)
{
    size_t end = r->ste == MTS_STE_HD_REC_OF && r->last_of > c0 ? r->last_of : c0;
    if (!r->have_total) {
        r->total = r->s;
        r->have_total = 1;
    } else {
        double sum = mts_fm_dadd((double)mts_u2f(r->total), (double)mts_u2f(r->s));
        if (r->ste == MTS_STE_HD_REC_OF && !(fabs(sum) < r->rof)) r->dead_end = c1;
        r->total = mts_qadd_hd(qacc, r->total, r->s);
    }
    r->s = 0;
    r->last_of = 0;
    return end;
}

#endif
