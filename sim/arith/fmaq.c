/* fmaq.c - the quantizer Q(M,E,b) of Eq. 2 of "Towards Cheaper Inference in
 * Deep Networks with Lower Bit-Width Accumulators", the quantized FMA (Eq. 4)
 * with an exact addition, chunked dot products and the packed Q code.
 * See include/mantis/fmaq.h for the contracts and docs/fmaq.md for the
 * choices made where the paper is ambiguous.
 *
 * The arithmetic (Q, the exact sum, Q_acc add) is arith_hd.h's, one copy
 * shared with the GPU: everything funnels into mts_q__round_hd, where a value
 * given exactly as sign * mag * 2^ue (mag a 64-bit integer) is judged and
 * rounded once, so there is a single definition of the rounding and range
 * rules. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "mantis/arith_hd.h"
#include "mantis/fmaq.h"
#include "mantis/fpbits.h"

uint32_t mts_q(const mts_qfmt *q, uint32_t x) { return mts_q_hd(q, x); }

uint32_t mts_qadd(const mts_qfmt *qacc, uint32_t a, uint32_t b) { return mts_qadd_hd(qacc, a, b); }

uint32_t mts_fmaq(const mts_qfmt *qprod, const mts_qfmt *qacc, uint32_t p, uint32_t s)
{
    return mts_fmaq_hd(qprod, qacc, p, s);
}

uint32_t mts_q_rof(const mts_qfmt *q) { return mts_q_rof_hd(q); }

uint32_t mts_q_ruf(const mts_qfmt *q) { return mts_q__pack_hd(0, -q->bias, 0, q->M); }

int mts_qfmt_check(const mts_qfmt *q, mts_err *err)
{
    if (q->E < 1 || q->E > 7)
        return mts_fail(err, MTS_EINVAL, "fmaq format: E = %d, expected 1..7 (E = 8 has more normal "
                        "exponents than FP32)", q->E);
    if (q->M < 1 || q->M > 23)
        return mts_fail(err, MTS_EINVAL, "fmaq format: M = %d, expected 1..23", q->M);
    if (q->bias > 126 || mts_q__emax_hd(q) > 127)
        return mts_fail(err, MTS_EINVAL, "fmaq format M%dE%d: bias %d puts exponents [%d, %d] outside "
                        "FP32's normal range [-126, 127]; expected bias in [%d, 126]",
                        q->M, q->E, q->bias, -q->bias, mts_q__emax_hd(q), (1 << q->E) - 128);
    if (q->underflow != 0 && q->underflow != 1)
        return mts_fail(err, MTS_EINVAL, "fmaq format: underflow = %d, expected 0 or 1", q->underflow);
    if (q->rnd != MTS_RTZ && q->rnd != MTS_RNE)
        return mts_fail(err, MTS_EINVAL, "fmaq format: rounding %d, expected MTS_RTZ or MTS_RNE",
                        (int)q->rnd);
    return MTS_OK;
}

int mts_qfmt_parse(const char *spec, int bias, mts_qfmt *q, mts_err *err)
{
    const char *p = spec;
    long M, E;
    char *end;

    if (!spec || toupper((unsigned char)*p) != 'M' || !isdigit((unsigned char)p[1]))
        goto bad;
    M = strtol(p + 1, &end, 10);
    if (toupper((unsigned char)*end) != 'E' || !isdigit((unsigned char)end[1])) goto bad;
    E = strtol(end + 1, &end, 10);
    if (*end != '\0' || M > 99 || E > 99) goto bad;
    q->M = (int)M;
    q->E = (int)E;
    /* out-of-range E gets bias 0 only so that the check below names E */
    q->bias = bias >= 0 ? bias : (E >= 1 && E <= 7) ? 1 << (E - 1) : 0;
    q->underflow = 1;
    q->rnd = MTS_RTZ;
    return mts_qfmt_check(q, err);
bad:
    return mts_fail(err, MTS_EINVAL, "fmaq format '%s': expected M<mantissa bits>E<exponent bits>, "
                    "e.g. M7E4", spec ? spec : "(null)");
}

void mts_qfmt_name(const mts_qfmt *q, char *buf, int n)
{
    snprintf(buf, (size_t)(n > 0 ? n : 0), "M%dE%db%d%s%s", q->M, q->E, q->bias,
             q->underflow ? "" : "-noUF", q->rnd == MTS_RNE ? "-rne" : "");
}

int mts_q_width(const mts_qfmt *q) { return 2 + q->E + q->M; }

uint32_t mts_q_encode(const mts_qfmt *q, uint32_t x)
{
    mts_qfmt uq = *q;
    int M = q->M, E = q->E;
    uint32_t zflag = 1u << (E + M + 1), sbit = 1u << (E + M);

    uq.underflow = 1;  /* below R_UF there is no exponent code */
    if (mts_f32_isnan(x)) return 0xFFFFFFFFu >> (32 - mts_q_width(q)); /* all ones; width may be 32 */
    uint32_t v = mts_q(&uq, x);
    uint32_t sign = (v & MTS_F32_SIGN) ? sbit : 0;
    if ((v & 0x7FFFFFFFu) == 0) return zflag | sign;
    uint32_t ecode = (uint32_t)((int)mts_f32_exp(v) - 127 + q->bias);
    return sign | (ecode << M) | (mts_f32_man(v) >> (23 - M));
}

uint32_t mts_q_decode(const mts_qfmt *q, uint32_t code)
{
    int M = q->M, E = q->E;
    uint32_t sign = ((code >> (E + M)) & 1u) ? MTS_F32_SIGN : 0;
    uint32_t rest = code & ((1u << (E + M)) - 1u);
    uint32_t ecode = rest >> M, man = rest & ((1u << M) - 1u);

    if ((code >> (E + M + 1)) & 1u) return rest ? MTS_F32_QNAN : sign;
    return mts_q__pack_hd(sign, (int)ecode - q->bias, man, M);
}

/* The product of one term: the given multiplier, or the registered "fp32"
 * model (the one implementation of IEEE FP32 multiply with flush-to-zero). */
typedef struct prodfn {
    const mts_mulop *mul;
    const mts_model *fp32;
    mts_format f32;
} prodfn;

static prodfn prodfn_make(const mts_mulop *mul)
{
    prodfn p;
    p.mul = mul;
    p.fp32 = mul ? NULL : mts_model_find("fp32");
    p.f32 = mts_format_e8(23);
    return p;
}

static uint32_t prodfn_mul(const prodfn *p, uint32_t a, uint32_t b)
{
    if (p->mul) return p->mul->fn(p->mul, a, b);
    if (!p->fp32) return MTS_F32_QNAN;  /* registry without "fp32": visible, never silent */
    return mts_model_mul(p->fp32, &p->f32, a, b);
}

/* The documented order (docs/fmaq.md): chunk c covers terms [c*chunk,
 * min((c+1)*chunk, n)); within a chunk s starts at +0 and s = FMAq(p_i, s)
 * for i ascending; then y = c_0 and y = Q_acc(y + c_j) for j ascending. */
static uint32_t dot(const mts_qfmt *qprod, const mts_qfmt *qacc, size_t chunk, const prodfn *pf,
                    const uint32_t *x, const uint32_t *w, size_t n, size_t wstride)
{
    uint32_t y = 0;
    for (size_t c0 = 0; c0 < n; c0 += chunk) {
        size_t c1 = n - c0 < chunk ? n : c0 + chunk;
        uint32_t s = 0;
        for (size_t i = c0; i < c1; i++)
            s = mts_fmaq(qprod, qacc, prodfn_mul(pf, x[i], w[i * wstride]), s);
        y = c0 == 0 ? s : mts_qadd(qacc, y, s);
    }
    return y;
}

uint32_t mts_fmaq_dot(const mts_qfmt *qprod, const mts_qfmt *qacc, int chunk, const mts_mulop *mul,
                      const uint32_t *x, const uint32_t *w, size_t n, size_t wstride)
{
    prodfn pf = prodfn_make(mul);
    /* chunk < 1 has no meaning; treat it as one chunk (plain sequential FMAq) */
    size_t ch = chunk >= 1 ? (size_t)chunk : (n ? n : 1);
    return dot(qprod, qacc, ch, &pf, x, w, n, wstride);
}

int mts_fmaq_gemm(const mts_qfmt *qprod, const mts_qfmt *qacc, int chunk, const mts_mulop *mul,
                  const uint32_t *A, const uint32_t *B, uint32_t *C, size_t m, size_t n, size_t k,
                  mts_err *err)
{
    int rc;
    if (chunk < 1) return mts_fail(err, MTS_EINVAL, "fmaq gemm: chunk size %d, expected >= 1", chunk);
    if ((rc = mts_qfmt_check(qprod, err)) != MTS_OK) return rc;
    if ((rc = mts_qfmt_check(qacc, err)) != MTS_OK) return rc;
    prodfn pf = prodfn_make(mul);
    if (!mul && !pf.fp32) return mts_fail(err, MTS_EINVAL, "fmaq gemm: model \"fp32\" is not registered");
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            C[i * n + j] = dot(qprod, qacc, (size_t)chunk, &pf, A + i * k, B + j, k, n);
    return MTS_OK;
}
