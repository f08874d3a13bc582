/* fmaq.c - FMAq GEMM (quantized product and accumulator, chunked), the
 * order of mts_fmaq_dot, vectorised across n.
 *
 * Products are formed exactly as in the LUT kernel (gathers or byte
 * permutes) or, for native products (mts_model "fp32"), as a*b; with
 * operands limited to |exponent| <= 62 both are exact and normal
 * (lut.c). For RTZ
 * quantizers (the paper's, the default) FMAq needs no wide arithmetic:
 *  - Q(x) at M bits is a mask of the mantissa, then min() with R_OF's bits
 *    and a flush below R_UF's bits (vi_q_rtz);
 *  - Q_acc(exact q + s) = Q_acc(RTZ_24(q + s)): truncating an FP32 value
 *    already truncated toward zero at 24 bits to M < 24 bits is truncating
 *    the exact sum (nested grids, same binade), and a sum below 2^e stays
 *    below 2^e, so the flush decision is also unchanged. Exact cancellation
 *    gives +0 and -0 + -0 gives -0, as in mts_qadd. RTZ_24 is one AVX-512
 *    instruction (embedded rounding). AVX2 has no per-instruction rounding:
 *    with a LUT's products (exact, the same in any rounding mode) the sums
 *    run with MXCSR set to round toward zero, one vaddps each, MXCSR
 *    restored before the stores; native products are rounded to nearest,
 *    so there the sums use TwoSum (vf_add_rtz, gemm_simd.h).
 * RNE quantizers and the other operands take the scalar kernel (mts_fmaq). */
#include <stdlib.h>

#include "gemm_internal.h"
#include "gemm_simd.h"

#if GEMM_SIMD
#if GW == 16
#define MR 4
#else
#define MR 2 /* 16 AVX2 registers: two rows of (chunk sum, total) x 2 vectors */
#endif
#define NR (2 * GW)

int gemm_fmaq_nr(void) { return NR; }

typedef struct fmaq_ctx {
    const gemm_job *g;
    const gemm_lutpack *lp;
    int mode;                   /* FQ_NATIVE, FQ_GATHER, FQ_VBMI */
    uint32_t pkeep, prof, plo;  /* Q_prod: mantissa mask, R_OF bits, flush threshold bits */
    uint32_t akeep, arof, alo;  /* Q_acc */
} fmaq_ctx;

enum { FQ_NATIVE = 0, FQ_GATHER = 1, FQ_VBMI = 2 };

/* mode: how products are formed; ptrunc 0 when the products already have at
 * most M_prod mantissa bits (byte table, M_prod >= 7), so Q_prod's mask is
 * a no-op and is left out. */
static inline void fmaq_tile_body(const fmaq_ctx *c, int i0, int i1, int panel, int j0, int j1, const int mode,
                                  const int ptrunc)
{
    const gemm_job *g = c->g;
    const gemm_lutpack *lp = c->lp;
    const int K = g->k, chunk = g->chunk;
    const int raw = lp->rawb; /* byte tables only (FQ_VBMI) */
    const uint32_t *bi = mode != FQ_NATIVE && !raw ? lp->Bi + (size_t)panel * (size_t)K * NR : NULL;
    const float *bs = raw ? NULL : lp->Bs + (size_t)panel * (size_t)K * NR;
    const uint32_t *ai[MR];
    const float *as[MR];
    vi y[MR][2], s[MR][2];
    const vi pkeep = VI_SET1(c->pkeep), prof = VI_SET1(c->prof), plo = VI_SET1(c->plo);
    const vi akeep = VI_SET1(c->akeep), arof = VI_SET1(c->arof), alo = VI_SET1(c->alo);
    float out[NR];
#if GW == 8
    /* the sums in the hardware's toward-zero mode (header): the products
     * below are exact except native ones, which keep the caller's mode */
    const int csr_rtz = mode != FQ_NATIVE;
    const unsigned csr = _mm_getcsr();
    if (csr_rtz) _mm_setcsr((csr & ~(unsigned)_MM_ROUND_MASK) | _MM_ROUND_TOWARD_ZERO);
#define FQ_ADD(a, b) (csr_rtz ? VF_ADD(a, b) : vf_add_rtz(a, b))
#else
#define FQ_ADD(a, b) vf_add_rtz(a, b)
#endif
#if GEMM_VBMI
    const vbmi_rawb_k rk = vbmi_rawb_consts(mode == FQ_VBMI ? g->lut->fmt.M : 7);
    const vq_k q = vq_consts(g->bround); /* raw B has bbad == 0: the clean rounding */
    const uint32_t *braw = g->B + j0; /* raw: row kk of B at braw + kk * ldb */
    int left0 = j1 - j0, left1 = j1 - j0 - GW;
    const __mmask16 ld0 = left0 >= GW ? (__mmask16)0xFFFF : (__mmask16)((1u << left0) - 1u);
    const __mmask16 ld1 = left1 >= GW ? (__mmask16)0xFFFF : left1 <= 0 ? 0 : (__mmask16)((1u << left1) - 1u);
#endif

    for (int r = 0; r < MR; r++) {
        int i = i0 + r < i1 ? i0 + r : i1 - 1;
        ai[r] = mode != FQ_NATIVE ? lp->Ai + (size_t)i * (size_t)K : NULL;
        as[r] = lp->As + (size_t)i * (size_t)K;
        y[r][0] = y[r][1] = VI_ZERO();
    }
    for (int c0 = 0; c0 < K; c0 += chunk) {
        int c1 = K - c0 < chunk ? K : c0 + chunk;
        for (int r = 0; r < MR; r++) s[r][0] = s[r][1] = VI_ZERO();
        for (int kk = c0; kk < c1; kk++) {
            size_t o = (size_t)kk * NR;
            vf bs0, bs1;
            vi bi0 = VI_ZERO(), bi1 = VI_ZERO();
#if GEMM_VBMI
            if (mode == FQ_VBMI && raw) {
                const uint32_t *row = braw + (size_t)kk * g->ldb;
                if (kk + RAW_PF < K) { /* as lut.c: B's rows lie ldb floats apart */
                    _mm_prefetch((const char *)(row + (size_t)RAW_PF * g->ldb), _MM_HINT_T0);
                    _mm_prefetch((const char *)(row + (size_t)RAW_PF * g->ldb + GW), _MM_HINT_T0);
                }
                vbmi_raw_b(&rk, vq_clean(&q, _mm512_maskz_loadu_epi32(ld0, row)), &bi0, &bs0);
                vbmi_raw_b(&rk, vq_clean(&q, _mm512_maskz_loadu_epi32(ld1, row + GW)), &bi1, &bs1);
            } else
#endif
            {
                bs0 = VF_LOAD(bs + o);
                bs1 = VF_LOAD(bs + o + GW);
                if (mode != FQ_NATIVE) {
                    bi0 = VI_LOAD(bi + o);
                    bi1 = VI_LOAD(bi + o + GW);
                }
            }
            for (int r = 0; r < MR; r++) {
                vf sa = VF_SET1(as[r][kk]), p0, p1;
                if (mode == FQ_NATIVE) {
                    p0 = VF_MUL(sa, bs0);
                    p1 = VF_MUL(sa, bs1);
                }
#if GEMM_VBMI
                else if (mode == FQ_VBMI) {
                    const unsigned char *row = lp->TB + ai[r][kk];
                    __m512i tlo = _mm512_loadu_si512((const void *)row);
                    __m512i thi = _mm512_loadu_si512((const void *)(row + 64));
                    p0 = VF_MUL(vf_lut_byte_q(tlo, thi, bi0, VI_OF(sa)), bs0); /* exact: the product p */
                    p1 = VF_MUL(vf_lut_byte_q(tlo, thi, bi1, VI_OF(sa)), bs1);
                }
#endif
                else {
                    vi ia = VI_SET1(ai[r][kk]);
                    p0 = VF_MUL(VF_GATHER(lp->Tf, VI_OR(ia, bi0)), VF_MUL(sa, bs0));
                    p1 = VF_MUL(VF_GATHER(lp->Tf, VI_OR(ia, bi1)), VF_MUL(sa, bs1));
                }
                vf q0 = VF_OF(ptrunc ? vi_q_rtz(VI_OF(p0), pkeep, prof, plo) : vi_q_sat(VI_OF(p0), prof, plo));
                vf q1 = VF_OF(ptrunc ? vi_q_rtz(VI_OF(p1), pkeep, prof, plo) : vi_q_sat(VI_OF(p1), prof, plo));
                s[r][0] = vi_q_rtz(VI_OF(FQ_ADD(q0, VF_OF(s[r][0]))), akeep, arof, alo);
                s[r][1] = vi_q_rtz(VI_OF(FQ_ADD(q1, VF_OF(s[r][1]))), akeep, arof, alo);
            }
        }
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < 2; v++)
                y[r][v] = c0 == 0 ? s[r][v]
                                  : vi_q_rtz(VI_OF(FQ_ADD(VF_OF(y[r][v]), VF_OF(s[r][v]))), akeep, arof, alo);
    }
#undef FQ_ADD
#if GW == 8
    if (csr_rtz) _mm_setcsr(csr); /* before the stores: gemm_store_row may scale by beta */
#endif
    for (int r = 0; r < i1 - i0; r++) {
        const vf yv[2] = {VF_OF(y[r][0]), VF_OF(y[r][1])};
        if (gemm_store_row_v(g, i0 + r, j0, j1, yv, 2)) continue;
        VI_STORE(out, y[r][0]);
        VI_STORE(out + GW, y[r][1]);
        gemm_store_row(g, i0 + r, j0, j1, out);
    }
}

static void fmaq_tile(const gemm_job *g, void *vctx, int i0, int i1, int panel, int j0, int j1)
{
    const fmaq_ctx *c = vctx;
    int bad = c->lp->rawb ? 0 : c->lp->panbad[panel]; /* raw B: none in B (g->bbad) */
    for (int i = i0; i < i1; i++) bad |= c->lp->rowbad[i];
    if (bad) gemm_tile_scalar(g, i0, i1, j0, j1);
#if GEMM_VBMI
    else if (c->mode == FQ_VBMI && c->g->qprod.M >= 7) fmaq_tile_body(c, i0, i1, panel, j0, j1, FQ_VBMI, 0);
    else if (c->mode == FQ_VBMI) fmaq_tile_body(c, i0, i1, panel, j0, j1, FQ_VBMI, 1);
#endif
    else if (c->mode == FQ_GATHER) fmaq_tile_body(c, i0, i1, panel, j0, j1, FQ_GATHER, 1);
    else fmaq_tile_body(c, i0, i1, panel, j0, j1, FQ_NATIVE, 1);
}

#if GEMM_QUAD_W == 8
/* AVX2 with a byte table: the products of lut.c's shuffle kernel (its quad
 * layout, 32 lanes a panel, one lookup per row and k for all four vectors
 * instead of four gathers), then the sums above with MXCSR toward zero. One
 * row a tile: (chunk sum, total) x 4 vectors and the lookup's registers
 * fill the 16. */
#define SQ_NR 32
/* always inline: GCC outlined it (one copy, nvv a run-time argument) */
static inline __attribute__((always_inline)) void fmaq_shuf_body(const fmaq_ctx *c, int i, int panel, int j0, int j1,
                                                                  const int nc, const int nvv, const int ptrunc)
{
    const gemm_job *g = c->g;
    const gemm_lutpack *lp = c->lp;
    const int K = g->k, chunk = g->chunk;
    const unsigned char *bq = lp->Bq + (size_t)panel * (size_t)K * SQ_NR;
    const float *bs = lp->Bs + (size_t)panel * (size_t)K * SQ_NR;
    const uint32_t *ai = lp->Ai + (size_t)i * (size_t)K;
    const float *as = lp->As + (size_t)i * (size_t)K;
    const vi pkeep = VI_SET1(c->pkeep), prof = VI_SET1(c->prof), plo = VI_SET1(c->plo);
    const vi akeep = VI_SET1(c->akeep), arof = VI_SET1(c->arof), alo = VI_SET1(c->alo);
    __m256i ctl[4];
    gemm_shuf_ctl(ctl);
    vi y[4], s[4];
    for (int v = 0; v < 4; v++) y[v] = VI_ZERO();
    const unsigned csr = _mm_getcsr();
    _mm_setcsr((csr & ~(unsigned)_MM_ROUND_MASK) | _MM_ROUND_TOWARD_ZERO);
    for (int c0 = 0; c0 < K; c0 += chunk) {
        int c1 = K - c0 < chunk ? K : c0 + chunk;
        for (int v = 0; v < 4; v++) s[v] = VI_ZERO();
        for (int kk = c0; kk < c1; kk++) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(bq + (size_t)kk * SQ_NR));
            const __m256i s4 = _mm256_slli_epi16(x, 3), s5 = _mm256_slli_epi16(x, 2), s6 = _mm256_slli_epi16(x, 1);
            const __m256i t = gemm_shuf_lookup(lp->TB + ai[kk], x, s4, s5, s6, nc);
            const __m256i sa = VI_OF(VF_SET1(as[kk]));
            const float *bk = bs + (size_t)kk * SQ_NR;
            for (int v = 0; v < nvv; v++) {
                vf p = VF_MUL(gemm_shuf_q(t, ctl[v], sa), VF_LOAD(bk + 8 * v)); /* exact: the product */
                vf q = VF_OF(ptrunc ? vi_q_rtz(VI_OF(p), pkeep, prof, plo) : vi_q_sat(VI_OF(p), prof, plo));
                s[v] = vi_q_rtz(VI_OF(VF_ADD(q, VF_OF(s[v]))), akeep, arof, alo);
            }
        }
        for (int v = 0; v < nvv; v++)
            y[v] = c0 == 0 ? s[v] : vi_q_rtz(VI_OF(VF_ADD(VF_OF(y[v]), VF_OF(s[v]))), akeep, arof, alo);
    }
    _mm_setcsr(csr); /* before the stores: gemm_store_row may scale by beta */
    vf yv[4];
    float out[SQ_NR];
    for (int v = 0; v < 4; v++) yv[v] = VF_OF(y[v]);
    if (gemm_store_row_v(g, i, j0, j1, yv, nvv)) return;
    for (int v = 0; v < 4; v++) VF_STORE(out + 8 * v, yv[v]);
    gemm_store_row(g, i, j0, j1, out);
}

/* One instance per table width, panel width and Q_prod form. */
static void fmaq_tile_shuf(const gemm_job *g, void *vctx, int i0, int i1, int panel, int j0, int j1)
{
    const fmaq_ctx *c = vctx;
    const int M = g->lut->fmt.M, nc = M <= 4 ? 1 : 1 << (M - 4), nvv = (j1 - j0 + 7) / 8, pt = g->qprod.M < 7;
    for (int i = i0; i < i1; i++) {
        if (c->lp->panbad[panel] || c->lp->rowbad[i]) {
            gemm_tile_scalar(g, i, i + 1, j0, j1);
            continue;
        }
#define SQ_NVV(NC, PT)                                                                                                 \
    do {                                                                                                               \
        if (nvv == 1) fmaq_shuf_body(c, i, panel, j0, j1, NC, 1, PT);                                                  \
        else if (nvv == 2) fmaq_shuf_body(c, i, panel, j0, j1, NC, 2, PT);                                             \
        else if (nvv == 3) fmaq_shuf_body(c, i, panel, j0, j1, NC, 3, PT);                                             \
        else fmaq_shuf_body(c, i, panel, j0, j1, NC, 4, PT);                                                           \
    } while (0)
#define SQ_NC(PT)                                                                                                      \
    do {                                                                                                               \
        if (nc == 1) SQ_NVV(1, PT);                                                                                    \
        else if (nc == 2) SQ_NVV(2, PT);                                                                               \
        else if (nc == 4) SQ_NVV(4, PT);                                                                               \
        else SQ_NVV(8, PT);                                                                                            \
    } while (0)
        if (pt) SQ_NC(1);
        else SQ_NC(0);
#undef SQ_NC
#undef SQ_NVV
    }
}

/* 1 when the job's LUT has a byte table (gemm_lut_bytes' condition). */
static int fmaq_byte_table(const gemm_job *g)
{
    unsigned char *tb = gemm_lut_bytes(g->lut, g->swap);
    gemm_ws_free(tb);
    return tb != NULL;
}
#endif

/* The constants of vi_q_rtz / vi_q_sat (gemm_simd.h) for format q: those of
 * the scalar form, mts_q_rtz_hd (arith_hd.h). */
static void qconsts(const mts_qfmt *q, uint32_t *keep, uint32_t *rof, uint32_t *lo)
{
    mts_qrtz c = mts_qrtz_hd(q);
    *keep = c.keep | (GEMM_Q_KEEP_SIGN ? 0x80000000u : 0u);
    *rof = c.rof;
    *lo = GEMM_Q_KEEP_SIGN ? c.lo << 1 : c.lo; /* (shifted: compared with the magnitude shifted left) */
}

int gemm_fmaq(const gemm_job *g, mts_err *err)
{
    gemm_lutpack lp;
    int rc;

    if (g->qprod.rnd != MTS_RTZ || g->qacc.rnd != MTS_RTZ || (g->prod != GEMM_PROD_LUT && g->prod != GEMM_PROD_FP32M))
        return gemm_scalar(g, err);
    fmaq_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.lp = &lp;
    qconsts(&g->qprod, &c.pkeep, &c.prof, &c.plo);
    qconsts(&g->qacc, &c.akeep, &c.arof, &c.alo);
#if GEMM_QUAD_W == 8
    if (g->prod == GEMM_PROD_LUT && fmaq_byte_table(g)) {
        rc = gemm_lutpack_make(g, SQ_NR, 2, 0, &lp, err);
        if (rc != MTS_OK) return rc; /* 1 is not possible: the table has a byte form */
        if (lp.quad) {
            gemm_tiles(g, 1, SQ_NR, fmaq_tile_shuf, &c);
            gemm_lutpack_free(&lp);
            return MTS_OK;
        }
        gemm_lutpack_free(&lp); /* not expected: packed B with a byte table is the quad layout */
    }
#endif
    rc = gemm_lutpack_make(g, NR, GEMM_VBMI, gemm_want_rawb(g, MR, NR), &lp, err);
    if (rc == 1) return gemm_scalar(g, err); /* LUT without an exact SIMD form */
    if (rc != MTS_OK) return rc;
    c.mode = g->prod == GEMM_PROD_FP32M ? FQ_NATIVE : lp.TB ? FQ_VBMI : FQ_GATHER;
    gemm_tiles(g, MR, NR, fmaq_tile, &c);
    gemm_lutpack_free(&lp);
    return MTS_OK;
}
#else
int gemm_fmaq_nr(void) { return 0; }
int gemm_fmaq(const gemm_job *g, mts_err *err) { return gemm_scalar(g, err); }
#endif
