/* ste.c - straight-through estimators for FMAq accumulation
 * (accumulator paper, appendix D): recompute one dot product in the GEMM's
 * documented order (fmaq.h: chunks accumulated sequentially from 0, then
 * the chunk sums added left to right) and mark which products pass their
 * gradient. Nothing is stored in the forward pass. */
#include <math.h>
#include <string.h>

#include "mantis/fmaq.h"
#include "mantis/fpbits.h"
#include "mantis/nn_ops.h"
#include "nn_internal.h"

int mts_ste_parse(const char *s, mts_ste *ste, mts_err *err)
{
    static const struct { const char *name; mts_ste v; } names[] = {
        {"identity", MTS_STE_IDENTITY},     {"rec-of", MTS_STE_REC_OF},
        {"recursive/of", MTS_STE_REC_OF},   {"imm-of", MTS_STE_IMM_OF},
        {"immediate/of", MTS_STE_IMM_OF},   {"imm-diff", MTS_STE_IMM_DIFF},
        {"immediate/diff", MTS_STE_IMM_DIFF}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) {
            *ste = names[i].v;
            return MTS_OK;
        }
    return mts_fail(err, MTS_EINVAL, "unknown STE '%s' (expected identity, rec-of, imm-of or imm-diff)", s);
}

const char *mts_ste_name(mts_ste ste)
{
    switch (ste) {
    case MTS_STE_REC_OF: return "rec-of";
    case MTS_STE_IMM_OF: return "imm-of";
    case MTS_STE_IMM_DIFF: return "imm-diff";
    default: return "identity";
    }
}

uint32_t mts_ste_mask(const mts_provider *p, mts_ste ste, const float *x, const float *w, size_t n,
                      size_t ws, uint8_t *mask)
{
    size_t chunk = p->chunk > 0 ? (size_t)p->chunk : 16;
    const mts_model *fp32 = mts_model_find("fp32");
    double rof = (double)mts_u2f(mts_q_rof(&p->qacc)); /* the largest accumulator magnitude */
    uint32_t total = 0;
    int have_total = 0;
    /* Recursive: a chunk dies if any later second-level add overflowed, so
     * walk chunks, remember each chunk's range, and zero them afterwards. */
    size_t last_dead_end = 0; /* terms [0, last_dead_end) are zeroed by a second-level OF */
    for (size_t c0 = 0; c0 < n; c0 += chunk) {
        size_t c1 = c0 + chunk < n ? c0 + chunk : n;
        uint32_t s = 0;
        size_t last_of = 0; /* recursive: terms [c0, last_of) zeroed */
        for (size_t i = c0; i < c1; i++) {
            uint32_t pr = nn_prov_mul(p, fp32, mts_f2u(x[i]), mts_f2u(w[i * ws]));
            uint32_t qp = mts_q(&p->qprod, pr);
            uint32_t z = mts_qadd(&p->qacc, qp, s); /* = mts_fmaq(qprod, qacc, pr, s) */
            int keep = 1;
            if (ste == MTS_STE_IMM_DIFF) {
                double d = fabs((double)mts_u2f(z) - (double)mts_u2f(s));
                /* |z-s| / (|p| + eps1) > eps2, without the division */
                keep = d > MTS_STE_DIFF_EPS2 * (fabs((double)mts_u2f(pr)) + MTS_STE_DIFF_EPS1);
            } else if (ste != MTS_STE_IDENTITY) {
                double sum = (double)mts_u2f(qp) + (double)mts_u2f(s);
                keep = fabs(sum) < rof;
                if (!keep && ste == MTS_STE_REC_OF) last_of = i + 1;
            }
            mask[i] = (uint8_t)keep;
            s = z;
        }
        if (ste == MTS_STE_REC_OF) memset(mask + c0, 0, last_of > c0 ? last_of - c0 : 0);
        if (!have_total) {
            total = s;
            have_total = 1;
        } else {
            /* second level: T = Qacc(T + c); its OF kills every term so far */
            double sum = (double)mts_u2f(total) + (double)mts_u2f(s);
            if (ste == MTS_STE_REC_OF && !(fabs(sum) < rof)) last_dead_end = c1;
            total = mts_qadd(&p->qacc, total, s);
        }
    }
    if (ste == MTS_STE_REC_OF) memset(mask, 0, last_dead_end);
    return total;
}
