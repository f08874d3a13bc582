/* pack.c - operand packing for the SIMD LUT and FMAq kernels: A as
 * per-element (index part, power of two) pairs, B as column panels of NR
 * lanes (zero-padded past n) with the same split, plus per-row and
 * per-panel flags for operands the kernels do not take (lut.c has the
 * exactness argument). Native FMAq products keep a and b as they are.
 *
 * Two implementations with the same output bits: the scalar reference
 * (one element at a time, as the definitions read) and, on AVX-512 and
 * AVX2 builds, a vectorised one (16 or 8 elements per step; panels of NR
 * not a multiple of 8 take the reference on AVX2). tests/test_gemm_pack.cpp
 * compares them.
 *
 * For a swapped job (gemm_job.swap) the row operand is the caller's b: it
 * gets the plain mantissa index and the column operand the shifted one, so
 * the gather index stays ma << M | mb; the byte table is transposed. */
#include <stdlib.h>

#include "gemm_internal.h"
#include "gemm_simd.h"

void gemm_lutpack_free(gemm_lutpack *lp)
{
    if (!lp->shared) {
        gemm_ws_free(lp->Tf);
        gemm_ws_free(lp->TB);
    }
    gemm_ws_free(lp->Ai);
    gemm_ws_free(lp->As);
    gemm_ws_free(lp->Bi);
    gemm_ws_free(lp->Bq);
    gemm_ws_free(lp->Bs);
    gemm_ws_free(lp->rowbad);
    gemm_ws_free(lp->panbad);
    gemm_ws_free(lp->nnz);
    gemm_ws_free(lp->nzt);
    memset(lp, 0, sizeof *lp);
}

/* Tables and buffers of lp for job g; 1 when the LUT has no exact SIMD form. */
static int alloc_pack(const gemm_job *g, int NR, int vbmi, int rawb, gemm_lutpack *lp, mts_err *err)
{
    int lut = g->prod == GEMM_PROD_LUT;
    int npan = (g->n + NR - 1) / NR;
    size_t K = (size_t)g->k, m = (size_t)g->m, nb = (size_t)npan * K * (size_t)NR;

    memset(lp, 0, sizeof *lp);
    lp->NR = NR;
    if (lut && g->tabs) { /* a batch: derive each table once, then borrow it */
        gemm_tabs *t = g->tabs;
        lp->shared = 1;
        if (vbmi && !t->tried_tb[g->swap]) {
            t->tb[g->swap] = gemm_lut_bytes(g->lut, g->swap);
            t->tried_tb[g->swap] = 1;
        }
        if (vbmi) lp->TB = t->tb[g->swap];
        if (!lp->TB && !t->tried_tf) {
            t->tf = gemm_lut_table(g->lut);
            t->tried_tf = 1;
        }
        if (!lp->TB && !(lp->Tf = t->tf)) return 1;
    } else if (lut) {
        if (vbmi) lp->TB = gemm_lut_bytes(g->lut, g->swap);
        if (!lp->TB && !(lp->Tf = gemm_lut_table(g->lut))) return 1; /* no exact SIMD form */
    }
    lp->rawb = rawb && lp->TB && !gemm_b_bad(g);
    lp->quad = vbmi == 2 && lp->TB && !lp->rawb && GEMM_QUAD_W && NR == 4 * GEMM_QUAD_W;
    if (lp->quad && GEMM_QUAD_W == 16) nb *= 2; /* Bs holds Sb and 2 Sb */
    lp->As = gemm_ws_alloc(m * K * sizeof *lp->As, 0);
    lp->rowbad = gemm_ws_alloc(m, 1);
    int ok = lp->As && lp->rowbad;
    if (!lp->rawb) {
        lp->Bs = gemm_ws_alloc(nb * sizeof *lp->Bs, 0);
        lp->panbad = gemm_ws_alloc((size_t)npan, 1);
        ok = ok && lp->Bs && lp->panbad;
    }
    if (lut) {
        lp->Ai = gemm_ws_alloc(m * K * sizeof *lp->Ai, 0);
        ok = ok && lp->Ai;
        if (lp->quad) /* the lists of nonzeros only for lut.c's sparse kernel (VBMI) */
            ok = ok && (lp->Bq = gemm_ws_alloc((size_t)npan * K * (size_t)NR, 0)) &&
                 (GEMM_QUAD_W != 16 || (lp->nnz = gemm_ws_alloc(m * sizeof *lp->nnz, 1)));
        else if (!lp->rawb) ok = ok && (lp->Bi = gemm_ws_alloc(nb * sizeof *lp->Bi, 0));
    }
    if (!ok) {
        gemm_lutpack_free(lp);
        return mts_fail(err, MTS_ENOMEM, "gemm: out of memory packing operands (%d x %d x %d)", g->m, g->n, g->k);
    }
    return MTS_OK;
}

/* Appends column kk of a row (Ai entry ai, As entry as) to the lists at o. */
static inline void list_add(gemm_lutpack *lp, size_t *o, size_t kk, uint32_t ai, float as)
{
    lp->nzt[*o] = ai & ~1u;
    lp->nzb[*o] = (uint32_t)(512 * kk + 256 * (ai & 1u));
    lp->nzs[*o] = as;
    ++*o;
}

/* Row i's nonzero elements (those not reading the all-zero row) into the
 * lists at offset i * K, in column order. */
static void list_row(gemm_lutpack *lp, size_t i, size_t K, uint32_t zero_row)
{
    const uint32_t *ai = lp->Ai + i * K;
    const float *as = lp->As + i * K;
    size_t o = i * K;
    for (size_t kk = 0; kk < K; kk++)
        if (ai[kk] != zero_row) list_add(lp, &o, kk, ai[kk], as[kk]);
}

#if GEMM_SIMD && GW == 16
/* list_row, 16 columns a step: each field compressed in a register and
 * stored whole (the lists have 16 entries of slack past the last row, and
 * rows are listed in order, so what a store writes past a row's entries
 * the next row overwrites). */
static void list_row_fast(gemm_lutpack *lp, size_t i, size_t K, uint32_t zero_row)
{
    const uint32_t *ai = lp->Ai + i * K;
    const float *as = lp->As + i * K;
    const __m512i zr = _mm512_set1_epi32((int)zero_row), one = _mm512_set1_epi32(1), step = _mm512_set1_epi32(16 * 512);
    __m512i kb = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                    _mm512_set1_epi32(512));
    size_t o = i * K, k0 = 0;
    for (; k0 + 16 <= K; k0 += 16, kb = _mm512_add_epi32(kb, step)) {
        __m512i x = _mm512_loadu_si512((const void *)(ai + k0));
        __mmask16 nz = _mm512_cmpneq_epi32_mask(x, zr);
        __m512i b = _mm512_or_si512(kb, _mm512_slli_epi32(_mm512_and_si512(x, one), 8));
        _mm512_storeu_si512((void *)(lp->nzt + o), _mm512_maskz_compress_epi32(nz, _mm512_andnot_si512(one, x)));
        _mm512_storeu_si512((void *)(lp->nzb + o), _mm512_maskz_compress_epi32(nz, b));
        _mm512_storeu_ps(lp->nzs + o, _mm512_maskz_compress_ps(nz, _mm512_loadu_ps(as + k0)));
        o += (size_t)__builtin_popcount(nz);
    }
    for (size_t kk = k0; kk < K; kk++)
        if (ai[kk] != zero_row) list_add(lp, &o, kk, ai[kk], as[kk]);
}
#endif

/* Quad layout: the lists of nonzero elements from Ai and As (a zero a
 * reads the all-zero row) when the job's A is sparse enough; nnz is already
 * filled. simd 0: the reference loop. */
static int sparse_lists(const gemm_job *g, gemm_lutpack *lp, int simd, mts_err *err)
{
    size_t K = (size_t)g->k, m = (size_t)g->m, plane = m * K + 16;
    double total = 0.0;
    if (!lp->nnz) return MTS_OK;
    for (size_t i = 0; i < m; i++) total += lp->nnz[i];
    if (total > GEMM_SPARSE_FRAC * (double)m * (double)K) return MTS_OK;
    if (K > UINT32_MAX / 512 || !(lp->nzt = gemm_ws_alloc(3 * plane * sizeof *lp->nzt, 0))) {
        gemm_lutpack_free(lp);
        return mts_fail(err, MTS_ENOMEM, "gemm: out of memory listing nonzeros (%d x %d)", g->m, g->k);
    }
    lp->nzb = lp->nzt + plane;
    lp->nzs = (float *)(void *)(lp->nzt + 2 * plane);
    const uint32_t zero_row = (uint32_t)(((size_t)1 << g->lut->fmt.M) * 128u);
    for (size_t i = 0; i < m; i++) {
#if GEMM_SIMD && GW == 16
        if (simd) {
            list_row_fast(lp, i, K, zero_row);
            continue;
        }
#endif
        (void)simd;
        list_row(lp, i, K, zero_row);
    }
    return MTS_OK;
}

/* How an operand stands with the kernels: 0 taken, else its GEMM_BAD_*
 * flag (rowbad and panbad or them over a row or panel; relax_ranges). */
static inline int op_flag(uint32_t x)
{
    uint32_t e = mts_f32_exp(x);
    if (e == 0) return (x & MTS_F32_MAN) ? GEMM_BAD_SPECIAL : 0;
    if (e == 255) return GEMM_BAD_SPECIAL;
    return gemm_exp_ok(x) ? 0 : GEMM_BAD_RANGE;
}

/* Biased exponent bounds of a job's nonzero normal operands (empty: lo >
 * hi). */
typedef struct exp_range {
    int lo, hi;
} exp_range;
#define EXP_EMPTY {255, 0}

/* The fixed range (|e| <= 62 for each operand) is one split of what the
 * LUT kernels need: every nonzero a and b with |e| <= 120 and
 * ea + eb in [-124, 124], so that each step (Sa Sb, Sa Tf or Sa' Tf, times
 * 2^(ea & 1) Sb, with Tf in [2^-2, 2^2)) is an exact product in FP32's
 * normal range (docs/gemm.md). When the job's own ranges meet that, an
 * operand flagged only for the fixed range is taken after all: a gradient
 * of 2^-76 against activations above 2^-30 then stays on the fast path
 * (the fixed rule sent a growing share of LeNet-300-100's weight-gradient
 * rows to the scalar kernel as training went on). LUT products without
 * FMAq only (fmaq.c keeps the fixed rule), and B packed (raw B was checked
 * against the fixed rule: gemm_job.bbad). */
static void relax_ranges(const gemm_job *g, gemm_lutpack *lp, exp_range a, exp_range b)
{
    if (g->prod != GEMM_PROD_LUT || g->fmaq || lp->rawb) return;
    if (a.lo < 127 - 120 || a.hi > 127 + 120 || b.lo < 127 - 120 || b.hi > 127 + 120) return;
    if (a.lo <= a.hi && b.lo <= b.hi && (a.lo + b.lo - 254 < -124 || a.hi + b.hi - 254 > 124)) return;
    for (int i = 0; i < g->m; i++) lp->rowbad[i] &= GEMM_BAD_SPECIAL;
    for (int p = 0, npan = (g->n + lp->NR - 1) / lp->NR; p < npan; p++) lp->panbad[p] &= GEMM_BAD_SPECIAL;
}

/* x's biased exponent into r when x is normal and nonzero. */
static inline void range_add(exp_range *r, uint32_t x)
{
    int e = (int)mts_f32_exp(x);
    if (e == 0 || e == 255) return;
    if (e < r->lo) r->lo = e;
    if (e > r->hi) r->hi = e;
}

/* Scalar packing of one A element (row operand) x at offset o. */
static inline void pack_a1(const gemm_job *g, gemm_lutpack *lp, size_t o, uint32_t x, int M)
{
    if (g->prod != GEMM_PROD_LUT) {
        lp->As[o] = mts_u2f(x);
        return;
    }
    gemm_lut_split(x, M, !g->swap, &lp->Ai[o], &lp->As[o]);
    if (lp->TB) /* byte offset of the table row, or the all-zero row */
        lp->Ai[o] = mts_f32_exp(x) ? ((x & MTS_F32_MAN) >> (23 - M)) * 128u : (uint32_t)(((size_t)1 << M) * 128u);
    if (lp->quad && GEMM_QUAD_W == 16 && mts_f32_exp(x)) { /* the exponent's low bit moves from As to Ai's bit 0 */
        lp->Ai[o] |= (x >> 23) & 1u;
        lp->As[o] = mts_u2f(x & 0xFF000000u);
    }
}

int gemm_lutpack_make_scalar(const gemm_job *g, int NR, int vbmi, int rawb, gemm_lutpack *lp, mts_err *err)
{
    int rc = alloc_pack(g, NR, vbmi, rawb, lp, err);
    if (rc != MTS_OK) return rc;
    int lut = g->prod == GEMM_PROD_LUT, M = lut ? g->lut->fmt.M : 0;
    int npan = (g->n + NR - 1) / NR;
    size_t K = (size_t)g->k, m = (size_t)g->m;
    exp_range ra = EXP_EMPTY, rb = EXP_EMPTY;
    for (size_t i = 0; i < m; i++)
        for (size_t kk = 0; kk < K; kk++) {
            uint32_t x = gemm_a(g, i * g->lda + kk);
            pack_a1(g, lp, i * K + kk, x, M);
            lp->rowbad[i] |= (unsigned char)op_flag(x);
            range_add(&ra, x);
            if (lp->nnz && mts_f32_exp(x)) lp->nnz[i]++;
        }
    if ((rc = sparse_lists(g, lp, 0, err)) != MTS_OK) return rc;
    for (int p = 0; p < npan && !lp->rawb; p++) {
        int bad = 0, j0 = p * NR, w = g->n - j0 < NR ? g->n - j0 : NR; /* w real lanes, rest padding */
        for (size_t kk = 0; kk < K; kk++) {
            size_t o = ((size_t)p * K + kk) * (size_t)NR;
            size_t src = kk * g->ldb + (size_t)j0;
            for (int jj = 0; jj < NR; jj++) {
                uint32_t x = jj < w ? gemm_b(g, src + (size_t)jj) : 0;
                bad |= op_flag(x);
                range_add(&rb, x);
                if (lp->quad) { /* lane jj is lane jj % W of vector jj / W: byte 4 (jj % W) + jj / W */
                    const int W = NR / 4;
                    uint32_t idx;
                    float sb;
                    gemm_lut_split(x, M, 0, &idx, &sb);
                    lp->Bq[o + (size_t)(4 * (jj % W) + jj / W)] = (unsigned char)((x & MTS_F32_MAN) >> (23 - M));
                    if (W == 8) { /* AVX2: Sb alone */
                        lp->Bs[o + (size_t)jj] = sb;
                        continue;
                    }
                    lp->Bs[2 * o + (size_t)jj] = sb;
                    lp->Bs[2 * o + 64 + (size_t)jj] = sb * 2.0f;
                    continue;
                }
                if (!lut) {
                    lp->Bs[o + (size_t)jj] = mts_u2f(x);
                    continue;
                }
                gemm_lut_split(x, M, g->swap, &lp->Bi[o + (size_t)jj], &lp->Bs[o + (size_t)jj]);
                if (lp->TB) /* byte 2 of the lane holds the column operand's mantissa: the byte the permute reads */
                    lp->Bi[o + (size_t)jj] = ((x & MTS_F32_MAN) >> (23 - M)) << 16;
            }
        }
        lp->panbad[p] = (unsigned char)bad;
    }
    relax_ranges(g, lp, ra, rb);
    return MTS_OK;
}

#if GEMM_SIMD && GW == 16
/* 16 operands at once: the vector forms of op_flag, gemm_lut_split and
 * the byte-table fields. */
typedef struct pack_k {
    __m512i man, expm, sgn, zero_row;
    int drop, M;
} pack_k;

/* The vector form of op_flag and range_add: the lanes (of ld) that are
 * GEMM_BAD_SPECIAL, and each normal lane's biased exponent into the
 * lane-wise bounds lo, hi. The fixed range needs no lanes of its own: a
 * row or panel has a normal operand outside it exactly when its bounds do
 * (flag_of). */
static inline void v_flags(const pack_k *c, __m512i x, __mmask16 ld, __mmask16 *spec, __m512i *lo, __m512i *hi)
{
    __m512i e = _mm512_srli_epi32(_mm512_and_si512(x, c->expm), 23);
    __mmask16 e0 = _mm512_testn_epi32_mask(x, c->expm), emax = _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255));
    __mmask16 sp = (emax | (e0 & _mm512_test_epi32_mask(x, c->man))) & ld;
    __mmask16 normal = (__mmask16)(~(e0 | emax) & ld);
    *spec |= sp;
    *lo = _mm512_mask_min_epu32(*lo, normal, *lo, e);
    *hi = _mm512_mask_max_epu32(*hi, normal, *hi, e);
}

/* A row's or panel's flags (op_flag's, or-ed) from v_flags' mask and the
 * bounds of its normal operands (lo > hi: none) */
static inline unsigned char flag_of(__mmask16 spec, int lo, int hi)
{
    int range = lo < 127 - 62 || hi > 127 + 62; /* gemm_exp_ok's range */
    return (unsigned char)((spec ? GEMM_BAD_SPECIAL : 0) | (range ? GEMM_BAD_RANGE : 0));
}

/* s = sign 2^(e-127), or the signed zero when e == 0 */
static inline __m512 v_pow2(const pack_k *c, __m512i x, __mmask16 *nz)
{
    *nz = _mm512_test_epi32_mask(x, c->expm);
    return _mm512_castsi512_ps(_mm512_mask_and_epi32(_mm512_and_si512(x, c->sgn), *nz, x, _mm512_set1_epi32((int)0xFF800000u)));
}

/* What packing one row of A found: its special lanes, nonzeros, and the
 * bounds of its normal operands' exponents. */
typedef struct a_row {
    __mmask16 spec;
    int nnz, lo, hi;
} a_row;

/* Row a (K operands, rounded by qk) of A into as and ai (ai untouched
 * without a LUT: as then holds the operands). The constants are copied to
 * locals and the outputs are restrict, so the loop keeps everything in
 * registers (in the OpenMP body they were reloaded every step). */
static inline a_row pack_row_a(const pack_k *ck, const vq_k *qk, const uint32_t *a, size_t K, int lut, int tb,
                               int quad, int rshift, float *restrict as, uint32_t *restrict ai)
{
    const pack_k c = *ck;
    const vq_k q = *qk;
    const __m512i one = _mm512_set1_epi32(1), hi8 = _mm512_set1_epi32((int)0xFF000000u);
    __mmask16 spec = 0;
    __m512i lo = _mm512_set1_epi32(255), hi = _mm512_setzero_si512();
    int nnz = 0;
    for (size_t k0 = 0; k0 < K; k0 += 16) {
        __mmask16 ld = K - k0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (K - k0)) - 1u);
        __m512i x = vq_full(&q, _mm512_maskz_loadu_epi32(ld, a + k0)); /* lanes past k: +0 */
        v_flags(&c, x, ld, &spec, &lo, &hi);
        if (!lut) {
            _mm512_mask_storeu_epi32(as + k0, ld, x);
            continue;
        }
        __mmask16 nz;
        __m512 s = v_pow2(&c, x, &nz);
        __m512i man = _mm512_srli_epi32(_mm512_and_si512(x, c.man), (unsigned)c.drop);
        __m512i idx = tb ? _mm512_mask_mov_epi32(c.zero_row, nz, _mm512_slli_epi32(man, 7))
                         : _mm512_slli_epi32(man, (unsigned)rshift);
        if (quad) { /* as pack_a1: the exponent's low bit to Ai's bit 0 */
            idx = _mm512_mask_or_epi32(idx, nz, idx, _mm512_and_si512(_mm512_srli_epi32(x, 23), one));
            s = _mm512_castsi512_ps(_mm512_mask_and_epi32(VI_OF(s), nz, x, hi8));
        }
        _mm512_mask_storeu_ps(as + k0, ld, s);
        _mm512_mask_storeu_epi32(ai + k0, ld, idx);
        nnz += __builtin_popcount(nz & ld);
    }
    return (a_row){spec, nnz, (int)_mm512_reduce_min_epu32(lo), (int)_mm512_reduce_max_epu32(hi)};
}

/* Panel p of B for pack_fast (its exponent range into *blo, *bhi). */
static void pack_b_panel(const gemm_job *g, gemm_lutpack *lp, const pack_k *cp, const vq_k *qp, int lut, int nv,
                         int cshift, int NR, size_t K, int p, int *blo, int *bhi)
{
    const pack_k c = *cp;
    const vq_k q = *qp;
    __mmask16 spec = 0;
    __m512i lo = _mm512_set1_epi32(255), hi = _mm512_setzero_si512();
    int j0 = p * NR, w = g->n - j0 < NR ? g->n - j0 : NR;
    for (size_t kk = 0; kk < K; kk++) {
        size_t o = ((size_t)p * K + kk) * (size_t)NR;
        const uint32_t *src = g->B + kk * g->ldb + (size_t)j0;
        __m512i bq = _mm512_setzero_si512(); /* quad: vector v's mantissas in byte v of each lane */
        for (int v = 0; v < nv; v++) {
            int left = w - 16 * v;
            __mmask16 ld = left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
            __m512i x = vq_full(&q, _mm512_maskz_loadu_epi32(ld, src + 16 * v)); /* padding lanes: +0 */
            size_t ov = o + (size_t)(16 * v);
            v_flags(&c, x, (__mmask16)0xFFFF, &spec, &lo, &hi);
            if (!lut) {
                _mm512_storeu_si512((void *)(lp->Bs + ov), x);
                continue;
            }
            __mmask16 nz;
            __m512 s = v_pow2(&c, x, &nz);
            __m512i man = _mm512_srli_epi32(_mm512_and_si512(x, c.man), (unsigned)c.drop);
            if (lp->quad) {
                bq = _mm512_or_si512(bq, _mm512_sllv_epi32(man, _mm512_set1_epi32(8 * v)));
                _mm512_storeu_ps(lp->Bs + 2 * o + 16 * v, s);
                _mm512_storeu_ps(lp->Bs + 2 * o + 64 + 16 * v, _mm512_add_ps(s, s));
                continue;
            }
            _mm512_storeu_ps(lp->Bs + ov, s);
            _mm512_storeu_si512((void *)(lp->Bi + ov), _mm512_slli_epi32(man, lp->TB ? 16u : (unsigned)cshift));
        }
        if (lp->quad) _mm512_storeu_si512((void *)(lp->Bq + ((size_t)p * K + kk) * 64), bq);
    }
    int rlo = (int)_mm512_reduce_min_epu32(lo), rhi = (int)_mm512_reduce_max_epu32(hi);
    lp->panbad[p] = flag_of(spec, rlo, rhi);
    if (rlo < *blo) *blo = rlo;
    if (rhi > *bhi) *bhi = rhi;
}

/* Row i of A for pack_fast (its exponent range into *alo, *ahi). */
static inline void pack_a_at(const gemm_job *g, gemm_lutpack *lp, const pack_k *c, const vq_k *qa, int lut, int tb,
                             int quad, int rshift, size_t K, size_t i, int *alo, int *ahi)
{
    a_row r = pack_row_a(c, qa, g->A + i * g->lda, K, lut, tb, quad, rshift, lp->As + i * K,
                         lut ? lp->Ai + i * K : NULL);
    if (lp->nnz) lp->nnz[i] = r.nnz;
    lp->rowbad[i] = flag_of(r.spec, r.lo, r.hi);
    if (r.lo < *alo) *alo = r.lo;
    if (r.hi > *ahi) *ahi = r.hi;
}

static void pack_fast(const gemm_job *g, gemm_lutpack *lp, int NR)
{
    int lut = g->prod == GEMM_PROD_LUT, M = lut ? g->lut->fmt.M : 0;
    int npan = (g->n + NR - 1) / NR, nv = NR / 16;
    size_t K = (size_t)g->k, m = (size_t)g->m;
    pack_k c;
    c.man = _mm512_set1_epi32((int)MTS_F32_MAN);
    c.expm = _mm512_set1_epi32((int)MTS_F32_EXP);
    c.sgn = _mm512_set1_epi32((int)MTS_F32_SIGN);
    c.zero_row = _mm512_set1_epi32((int)(((uint32_t)1 << M) * 128u));
    c.drop = 23 - M;
    c.M = M;
    const int rshift = g->swap ? 0 : M, cshift = g->swap ? M : 0; /* index shifts of row / column operands */

    const vq_k qa = vq_consts(g->around);
    int threads = (double)m * (double)K < 65536.0 ? 1 : g->threads; /* waking a team costs more */
    int alo = 255, ahi = 0, blo = 255, bhi = 0; /* exp_range of A and B (min and max commute: any split) */
    const int tb = lp->TB != NULL, quad = lp->quad;
    if (threads <= 1) /* no team: gemm_internal.h */
        for (size_t i = 0; i < m; i++) pack_a_at(g, lp, &c, &qa, lut, tb, quad, rshift, K, i, &alo, &ahi);
    else
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8) reduction(min : alo) reduction(max : ahi)
        for (size_t i = 0; i < m; i++) pack_a_at(g, lp, &c, &qa, lut, tb, quad, rshift, K, i, &alo, &ahi);
    if (lp->rawb) return;
    threads = (double)g->n * (double)K < 65536.0 ? 1 : g->threads;
    const vq_k q = vq_consts(g->bround);
    if (threads <= 1) /* no team: gemm_internal.h */
        for (int p = 0; p < npan; p++) pack_b_panel(g, lp, &c, &q, lut, nv, cshift, NR, K, p, &blo, &bhi);
    else
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(min : blo) reduction(max : bhi)
        for (int p = 0; p < npan; p++) pack_b_panel(g, lp, &c, &q, lut, nv, cshift, NR, K, p, &blo, &bhi);
    relax_ranges(g, lp, (exp_range){alo, ahi}, (exp_range){blo, bhi});
}
#endif

#if GEMM_SIMD && GW == 8
/* The AVX2 form of pack_fast: 8 operands at once, lane masks as vectors.
 * No quad parity and no lists of nonzeros here (both are for the VBMI
 * kernels): the quad layout of 8-lane vectors is Bq and Sb alone. */
typedef struct pack8_k {
    __m256i man, expm, sgn, hi9, zero_row;
    __m128i drop, rshift, cshift; /* shift counts */
    int on;                       /* rounding: M != 0 */
    __m128i qdrop;
    __m256i half, keep, one;
} pack8_k;

static inline __m256i v8_eq(__m256i a, __m256i b) { return _mm256_cmpeq_epi32(a, b); }

/* gemm_q_e8 on 8 lanes (M = 0: x unchanged) */
static inline __m256i v8_round(const pack8_k *c, __m256i x)
{
    if (!c->on) return x;
    const __m256i e = _mm256_and_si256(x, c->expm), zero = _mm256_setzero_si256();
    __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(x, c->qdrop), c->one);
    __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(x, c->half), lsb), c->keep);
    __m256i spec = v8_eq(e, c->expm), nan = _mm256_andnot_si256(v8_eq(_mm256_and_si256(x, c->man), zero), spec);
    r = _mm256_blendv_epi8(r, _mm256_and_si256(x, c->sgn), v8_eq(e, zero));
    r = _mm256_blendv_epi8(r, x, spec);
    return _mm256_blendv_epi8(r, _mm256_set1_epi32((int)MTS_F32_QNAN), nan);
}

/* v_flags on 8 lanes: special lanes or-ed into *spec, each normal lane's
 * biased exponent into the bounds lo, hi. Lanes of +0 (padding) add
 * nothing. */
static inline void v8_flags(const pack8_k *c, __m256i x, __m256i *spec, __m256i *lo, __m256i *hi)
{
    const __m256i zero = _mm256_setzero_si256();
    __m256i eb = _mm256_and_si256(x, c->expm), e = _mm256_srli_epi32(eb, 23);
    __m256i e0 = v8_eq(eb, zero), emax = v8_eq(eb, c->expm);
    __m256i manz = v8_eq(_mm256_and_si256(x, c->man), zero);
    *spec = _mm256_or_si256(*spec, _mm256_or_si256(emax, _mm256_andnot_si256(manz, e0)));
    __m256i normal = _mm256_andnot_si256(_mm256_or_si256(e0, emax), _mm256_set1_epi32(-1));
    *lo = _mm256_min_epu32(*lo, _mm256_blendv_epi8(_mm256_set1_epi32(255), e, normal));
    *hi = _mm256_max_epu32(*hi, _mm256_and_si256(e, normal));
}

static inline int v8_min(__m256i v)
{
    uint32_t t[8];
    _mm256_storeu_si256((__m256i *)(void *)t, v);
    uint32_t r = t[0];
    for (int i = 1; i < 8; i++) r = t[i] < r ? t[i] : r;
    return (int)r;
}

static inline int v8_max(__m256i v)
{
    uint32_t t[8];
    _mm256_storeu_si256((__m256i *)(void *)t, v);
    uint32_t r = t[0];
    for (int i = 1; i < 8; i++) r = t[i] > r ? t[i] : r;
    return (int)r;
}

/* The row or panel flag (op_flag's, or-ed) from v8_flags' outputs. */
static inline unsigned char v8_flag(__m256i spec, __m256i lo, __m256i hi, int *rlo, int *rhi)
{
    *rlo = v8_min(lo);
    *rhi = v8_max(hi);
    int range = *rlo < 127 - 62 || *rhi > 127 + 62; /* gemm_exp_ok's range */
    return (unsigned char)((_mm256_testz_si256(spec, spec) ? 0 : GEMM_BAD_SPECIAL) | (range ? GEMM_BAD_RANGE : 0));
}

/* s = sign 2^(e-127), or the signed zero when e == 0; *nz: e != 0 */
static inline __m256i v8_pow2(const pack8_k *c, __m256i x, __m256i *nz)
{
    *nz = _mm256_andnot_si256(v8_eq(_mm256_and_si256(x, c->expm), _mm256_setzero_si256()), _mm256_set1_epi32(-1));
    return _mm256_blendv_epi8(_mm256_and_si256(x, c->sgn), _mm256_and_si256(x, c->hi9), *nz);
}

/* Row i of A (pack_a1 for each element), its flag and exponent range. */
static void pack8_row_a(const gemm_job *g, gemm_lutpack *lp, const pack8_k *ck, int lut, size_t K, size_t i, int *alo,
                        int *ahi)
{
    const pack8_k c = *ck;
    const uint32_t *a = g->A + i * g->lda;
    float *restrict as = lp->As + i * K;
    uint32_t *restrict ai = lut ? lp->Ai + i * K : NULL;
    const int tb = lp->TB != NULL;
    __m256i spec = _mm256_setzero_si256(), lo = _mm256_set1_epi32(255), hi = _mm256_setzero_si256();
    for (size_t k0 = 0; k0 < K; k0 += 8) {
        int left = K - k0 >= 8 ? 8 : (int)(K - k0);
        __m256i ld = vi_lanes(left);
        __m256i x = v8_round(&c, _mm256_maskload_epi32((const int *)(const void *)(a + k0), ld)); /* past k: +0 */
        v8_flags(&c, x, &spec, &lo, &hi);
        if (!lut) {
            _mm256_maskstore_epi32((int *)(void *)(as + k0), ld, x);
            continue;
        }
        __m256i nz, s = v8_pow2(&c, x, &nz);
        __m256i man = _mm256_srl_epi32(_mm256_and_si256(x, c.man), c.drop);
        __m256i idx = tb ? _mm256_blendv_epi8(c.zero_row, _mm256_slli_epi32(man, 7), nz) : _mm256_sll_epi32(man, c.rshift);
        _mm256_maskstore_epi32((int *)(void *)(as + k0), ld, s);
        _mm256_maskstore_epi32((int *)(void *)(ai + k0), ld, idx);
    }
    int rlo, rhi;
    lp->rowbad[i] = v8_flag(spec, lo, hi, &rlo, &rhi);
    if (rlo < *alo) *alo = rlo;
    if (rhi > *ahi) *ahi = rhi;
}

/* Panel p of B (NR lanes, nv vectors), its flag and exponent range. */
static void pack8_b_panel(const gemm_job *g, gemm_lutpack *lp, const pack8_k *ck, int lut, int nv, int NR, size_t K,
                          int p, int *blo, int *bhi)
{
    const pack8_k c = *ck;
    __m256i spec = _mm256_setzero_si256(), lo = _mm256_set1_epi32(255), hi = _mm256_setzero_si256();
    int j0 = p * NR, w = g->n - j0 < NR ? g->n - j0 : NR;
    for (size_t kk = 0; kk < K; kk++) {
        size_t o = ((size_t)p * K + kk) * (size_t)NR;
        const uint32_t *src = g->B + kk * g->ldb + (size_t)j0;
        __m256i bq = _mm256_setzero_si256(); /* quad: vector v's mantissas in byte v of each lane */
        for (int v = 0; v < nv; v++) {
            int left = w - 8 * v;
            __m256i x = _mm256_setzero_si256(); /* padding lanes: +0 */
            if (left >= 8) x = _mm256_loadu_si256((const __m256i *)(const void *)(src + 8 * v));
            else if (left > 0) x = _mm256_maskload_epi32((const int *)(const void *)(src + 8 * v), vi_lanes(left));
            x = v8_round(&c, x);
            size_t ov = o + (size_t)(8 * v);
            v8_flags(&c, x, &spec, &lo, &hi);
            if (!lut) {
                _mm256_storeu_si256((__m256i *)(void *)(lp->Bs + ov), x);
                continue;
            }
            __m256i nz, s = v8_pow2(&c, x, &nz);
            __m256i man = _mm256_srl_epi32(_mm256_and_si256(x, c.man), c.drop);
            _mm256_storeu_si256((__m256i *)(void *)(lp->Bs + ov), s);
            if (lp->quad) {
                bq = _mm256_or_si256(bq, _mm256_sll_epi32(man, _mm_cvtsi32_si128(8 * v)));
                continue;
            }
            __m256i idx = lp->TB ? _mm256_slli_epi32(man, 16) : _mm256_sll_epi32(man, c.cshift);
            _mm256_storeu_si256((__m256i *)(void *)(lp->Bi + ov), idx);
        }
        if (lp->quad) _mm256_storeu_si256((__m256i *)(void *)(lp->Bq + o), bq);
    }
    int rlo, rhi;
    lp->panbad[p] = v8_flag(spec, lo, hi, &rlo, &rhi);
    if (rlo < *blo) *blo = rlo;
    if (rhi > *bhi) *bhi = rhi;
}

static pack8_k pack8_consts(int M, int round, int swap)
{
    pack8_k c;
    c.man = _mm256_set1_epi32((int)MTS_F32_MAN);
    c.expm = _mm256_set1_epi32((int)MTS_F32_EXP);
    c.sgn = _mm256_set1_epi32((int)MTS_F32_SIGN);
    c.hi9 = _mm256_set1_epi32((int)0xFF800000u);
    c.zero_row = _mm256_set1_epi32((int)(((uint32_t)1 << M) * 128u));
    c.drop = _mm_cvtsi32_si128(23 - M);
    c.rshift = _mm_cvtsi32_si128(swap ? 0 : M); /* index shifts of row / column operands */
    c.cshift = _mm_cvtsi32_si128(swap ? M : 0);
    c.on = round != 0;
    int qd = round ? 23 - round : 1;
    c.qdrop = _mm_cvtsi32_si128(qd);
    c.half = _mm256_set1_epi32((int)((1u << (qd - 1)) - 1u));
    c.keep = _mm256_set1_epi32((int)~((1u << qd) - 1u));
    c.one = _mm256_set1_epi32(1);
    return c;
}

static void pack_fast(const gemm_job *g, gemm_lutpack *lp, int NR)
{
    int lut = g->prod == GEMM_PROD_LUT, M = lut ? g->lut->fmt.M : 0;
    int npan = (g->n + NR - 1) / NR, nv = NR / 8;
    size_t K = (size_t)g->k, m = (size_t)g->m;
    const pack8_k ca = pack8_consts(M, g->around, g->swap), cb = pack8_consts(M, g->bround, g->swap);
    int threads = (double)m * (double)K < 65536.0 ? 1 : g->threads; /* waking a team costs more */
    int alo = 255, ahi = 0, blo = 255, bhi = 0; /* exp_range of A and B (min and max commute: any split) */
    if (threads <= 1) /* no team: gemm_internal.h */
        for (size_t i = 0; i < m; i++) pack8_row_a(g, lp, &ca, lut, K, i, &alo, &ahi);
    else
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8) reduction(min : alo) reduction(max : ahi)
        for (size_t i = 0; i < m; i++) pack8_row_a(g, lp, &ca, lut, K, i, &alo, &ahi);
    if (lp->rawb) return;
    threads = (double)g->n * (double)K < 65536.0 ? 1 : g->threads;
    if (threads <= 1) /* no team: gemm_internal.h */
        for (int p = 0; p < npan; p++) pack8_b_panel(g, lp, &cb, lut, nv, NR, K, p, &blo, &bhi);
    else
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(min : blo) reduction(max : bhi)
        for (int p = 0; p < npan; p++) pack8_b_panel(g, lp, &cb, lut, nv, NR, K, p, &blo, &bhi);
    relax_ranges(g, lp, (exp_range){alo, ahi}, (exp_range){blo, bhi});
}
#endif

int gemm_lutpack_make(const gemm_job *g, int NR, int vbmi, int rawb, gemm_lutpack *lp, mts_err *err)
{
#if GEMM_SIMD && GW == 16
    int rc = alloc_pack(g, NR, vbmi, rawb, lp, err);
    if (rc == MTS_OK) pack_fast(g, lp, NR);
    return rc == MTS_OK ? sparse_lists(g, lp, 1, err) : rc;
#elif GEMM_SIMD && GW == 8
    if (NR % 8) /* panels of part vectors: the reference */
        return gemm_lutpack_make_scalar(g, NR, vbmi, rawb, lp, err);
    int rc = alloc_pack(g, NR, vbmi, rawb, lp, err);
    if (rc == MTS_OK) pack_fast(g, lp, NR);
    return rc;
#else
    return gemm_lutpack_make_scalar(g, NR, vbmi, rawb, lp, err);
#endif
}
