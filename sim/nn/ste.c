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
#include "mantis/ste_hd.h"
#include "nn_internal.h"

_Static_assert(MTS_STE_IDENTITY == MTS_STE_HD_IDENTITY && MTS_STE_REC_OF == MTS_STE_HD_REC_OF &&
                   MTS_STE_IMM_OF == MTS_STE_HD_IMM_OF && MTS_STE_IMM_DIFF == MTS_STE_HD_IMM_DIFF,
               "ste_hd.h repeats nn_ops.h's mts_ste values");

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
    mts_ste_run r;
    mts_ste_begin_hd(&r, (int)ste, &p->qacc);
    for (size_t c0 = 0; c0 < n; c0 += chunk) {
        size_t c1 = c0 + chunk < n ? c0 + chunk : n;
        for (size_t i = c0; i < c1; i++)
            mask[i] = (uint8_t)mts_ste_term_hd(&r, &p->qprod, &p->qacc,
                                               nn_prov_mul(p, fp32, mts_f2u(x[i]), mts_f2u(w[i * ws])), i);
        size_t z = mts_ste_chunk_end_hd(&r, &p->qacc, c0, c1);
        memset(mask + c0, 0, z - c0);
    }
    memset(mask, 0, r.dead_end);
    return r.total;
}
