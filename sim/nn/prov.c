/* prov.c - what one provider does to one operand pair, as scalar code: the
 * operand format and quantization mts_gemm applies when it packs operands
 * (sim/gemm/dispatch.c), and the product its kernels form. The STE replay
 * (ste.c) and the operand tracer (trace.c) both go through these, so they
 * see exactly what the GEMM's multiplier sees. */
#include <string.h>

#include "mantis/amsim.h"
#include "mantis/fpbits.h"
#include "mantis/nn_arith.h"
#include "nn_internal.h"

/* The multiplier's own format, or NULL for providers that do not quantize. */
static const mts_format *own_format(const mts_provider *p)
{
    if (p->kind == MTS_PROV_LUT && p->lut) return &p->lut->fmt;
    if (p->kind == MTS_PROV_MULOP && p->mul) return &p->mul->fmt;
    return NULL;
}

static int in_fmt_unset(const mts_provider *p) { return p->in_fmt.M == 0 && p->in_fmt.E == 0; }

mts_format mts_prov_format(const mts_provider *p)
{
    const mts_format *own = own_format(p);
    if (!own) return mts_format_e8(23);
    /* AMSim reads only the LUT's bits; a mulop gets in_fmt's */
    if (p->kind == MTS_PROV_LUT || in_fmt_unset(p)) return *own;
    return p->in_fmt;
}

/* RNE into in_fmt (or the multiplier's own format when in_fmt is all-zero),
 * then, for a LUT read through a wider in_fmt, RTZ into the LUT's format. */
uint32_t mts_prov_operand(const mts_provider *p, uint32_t x)
{
    const mts_format *own = own_format(p);
    if (!own) return x;
    const mts_format *qf = in_fmt_unset(p) ? own : &p->in_fmt;
    x = mts_fmt_quantize(qf, x, MTS_RNE);
    if (p->kind == MTS_PROV_LUT && memcmp(qf, own, sizeof *qf)) x = mts_fmt_quantize(own, x, MTS_RTZ);
    return x;
}

uint32_t nn_prov_mul(const mts_provider *p, const mts_model *fp32, uint32_t a, uint32_t b)
{
    static const mts_format f32 = {8, 23, 127, 1};
    switch (p->kind) {
    case MTS_PROV_LUT: return mts_amsim(p->lut, mts_prov_operand(p, a), mts_prov_operand(p, b));
    case MTS_PROV_MULOP: return p->mul->fn(p->mul, mts_prov_operand(p, a), mts_prov_operand(p, b));
    default:
        if (p->fmaq && fp32) {
            /* fast path: normal operands with a normal host product give the
             * model's result (both are the exact product rounded RNE at 23
             * bits); zeros, subnormals, inf/NaN and over/underflow go to the model */
            uint32_t ea = (a >> 23) & 0xFFu, eb = (b >> 23) & 0xFFu;
            if (ea - 1u < 254u && eb - 1u < 254u) {
                uint32_t r = mts_f2u(mts_u2f(a) * mts_u2f(b)), er = (r >> 23) & 0xFFu;
                if (er - 1u < 254u) return r;
            }
            return mts_model_mul(fp32, &f32, a, b);
        }
        return mts_f2u(mts_u2f(a) * mts_u2f(b));
    }
}

uint32_t mts_prov_mul(const mts_provider *p, uint32_t a, uint32_t b)
{
    return nn_prov_mul(p, mts_model_find("fp32"), a, b);
}
