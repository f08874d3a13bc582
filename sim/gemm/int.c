/* int.c - integer GEMMs through an n-bit product table.
 *
 * mts_qgemm works on codes: every product T(a, b) is read from the table,
 * the sums are exact (int64, so no order question arises), corrected for
 * the zero points (mts_qdot_correct) and scaled once per output,
 * y = (float)((sa_i * sb_j) * (double)acc). Two kernels compute it:
 *  - qk_scalar, the readable reference: one output at a time, each product
 *    lut->entry[(a << n) | b];
 *  - qk_vbmi (AVX-512 VBMI, 8-bit tables): the table's entries, offset by
 *    the smallest one so that they fit 16 bits, are split into a low and a
 *    high byte plane. For one row operand code r the 256 entries of either
 *    plane are four registers, and 64 column codes look them up with two
 *    masked two-source byte permutes (index bit 7 picks the register pair).
 *    Low and high bytes are summed in 16-bit lanes: each lane (an even and
 *    an odd column) whole, and its high byte (the odd column) shifted down,
 *    so the even column's sum is the difference (no shuffle in the loop); at
 *    most 256 steps of k before they are widened: 256 * 255 fits 16 bits.
 *    sum T = 256 * sum hi + sum lo + k * Tmin, exactly.
 *  - qm_avx2 (AVX2 builds, 8-bit tables that are an exact product plus a
 *    constant, T = a*b + dmin: the exact tables): sum T = sum a*b + k dmin,
 *    the products by vpmaddwd on the values as 16-bit pairs (two exact
 *    products summed into each 32-bit lane, widened to 64 bits every 16,384
 *    steps of k). Other 8-bit tables take the scalar kernel on AVX2 (a
 *    gather per 8 products measured slower than it on a Zen 3).
 * Either operand may index the table rows (the one with fewer rows does:
 * its code picks the registers, the other's codes run across the lanes);
 * the transposed planes serve the second operand, so a product is always
 * T(a, b) with a from the first operand, whatever the layout.
 *
 * gemm_int is the INT provider of mts_gemm (TFApprox): each float
 * operand is quantized per call with the affine map of intmul.h over its own
 * finite min/max (NaN -> zero point, +-inf -> the end codes,
 * mts_affine_quantize), then mts_qgemm with one scale and zero point per
 * operand: the formula of mts_qdot_float. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gemm_internal.h"
#include "gemm_simd.h"
#include "mantis/intmul.h"

/* ------------------------------------------------------------ the table */

/* The value of an n-bit code (sign-extended when signed). */
static inline int32_t code_value(uint32_t c, int bits, int sg)
{
    return sg && (c >> (bits - 1)) ? (int32_t)c - (1 << bits) : (int32_t)c;
}

/* Builds t's planes for the orientations in want (bit 0: rows by the first
 * operand, T[a][b]; bit 1: rows by the second, T[a][b] at [b][a]). */
static int qtab_build(mts_qtab *t, const mts_lut *lut, int want, mts_err *err)
{
    memset(t, 0, sizeof *t);
    if (!lut || lut->kind != MTS_LUT_INT || !lut->entry || lut->int_bits < 1 || lut->int_bits > 8 ||
        lut->n != (size_t)1 << (2 * lut->int_bits))
        return mts_fail(err, MTS_EINVAL, "integer GEMM: expected an integer table of 1..8-bit operands");
    t->lut = lut;
    t->bits = lut->int_bits;
    t->is_signed = lut->int_signed != 0;
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    const int32_t *e = (const int32_t *)lut->entry;
    for (size_t i = 0; i < lut->n; i++) {
        lo = e[i] < lo ? e[i] : lo;
        hi = e[i] > hi ? e[i] : hi;
    }
    t->tmin = lo;
    if (t->bits != 8) return MTS_OK; /* the scalar kernel only */
    /* the error against the exact product of the values: one byte plane when it spans at most 255 */
    int32_t dlo = INT32_MAX, dhi = INT32_MIN;
    for (uint32_t i = 0; i < 65536; i++) {
        int32_t d = e[i] - code_value(i >> 8, 8, t->is_signed) * code_value(i & 255, 8, t->is_signed);
        dlo = d < dlo ? d : dlo;
        dhi = d > dhi ? d : dhi;
    }
    if ((int64_t)dhi - dlo <= 255) {
        t->split = 1;
        t->dmin = dlo;
        t->dconst = dhi == dlo;
        if (t->dconst) return MTS_OK;
        t->dp = gemm_ws_alloc(2 * 65536, 0);
        if (!t->dp) {
            mts_qtab_free(t);
            return mts_fail(err, MTS_ENOMEM, "integer GEMM: out of memory for the table's error plane");
        }
        for (uint32_t a = 0; a < 256; a++)
            for (uint32_t b = 0; b < 256; b++) {
                uint32_t i = (a << 8) | b;
                uint8_t v = (uint8_t)(e[i] - code_value(a, 8, t->is_signed) * code_value(b, 8, t->is_signed) - dlo);
                if (want & 1) t->dp[i] = v;
                if (want & 2) t->dp[65536 + ((b << 8) | a)] = v;
            }
        t->dplanes = want;
        return MTS_OK;
    }
    if ((int64_t)hi - lo > 65535) return MTS_OK; /* the scalar kernel only */
    t->lo = gemm_ws_alloc(2 * 65536, 0);
    t->hi = gemm_ws_alloc(2 * 65536, 0);
    if (!t->lo || !t->hi) {
        mts_qtab_free(t);
        return mts_fail(err, MTS_ENOMEM, "integer GEMM: out of memory for the table's byte planes");
    }
    if (want & 1)
        for (size_t i = 0; i < 65536; i++) {
            uint32_t v = (uint32_t)(e[i] - lo);
            t->lo[i] = (uint8_t)v;
            t->hi[i] = (uint8_t)(v >> 8);
        }
    if (want & 2) /* [b][a], 16 rows of the table at a time (they stay cached) */
        for (uint32_t a0 = 0; a0 < 256; a0 += 16)
            for (uint32_t b = 0; b < 256; b++)
                for (uint32_t a = a0; a < a0 + 16; a++) {
                    uint32_t v = (uint32_t)(e[(a << 8) | b] - lo);
                    t->lo[65536 + ((b << 8) | a)] = (uint8_t)v;
                    t->hi[65536 + ((b << 8) | a)] = (uint8_t)(v >> 8);
                }
    t->planes = want;
    return MTS_OK;
}

int mts_qtab_init(mts_qtab *t, const mts_lut *lut, mts_err *err) { return qtab_build(t, lut, 3, err); }

void mts_qtab_free(mts_qtab *t)
{
    gemm_ws_free(t->lo);
    gemm_ws_free(t->hi);
    gemm_ws_free(t->dp);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------ helpers */

/* What the epilogue needs of one operand, per row: zero point, scale and
 * the sum of the values of its codes (mts_qdot_correct's S_a / S_b). */
typedef struct qside {
    int32_t *zp;
    double *sc;
    int64_t *sum;
} qside;

static int qside_make(const mts_qopd *o, int rows, int k, int bits, int sg, qside *q)
{
    q->zp = malloc(sizeof *q->zp * (size_t)rows);
    q->sc = malloc(sizeof *q->sc * (size_t)rows);
    q->sum = calloc((size_t)rows, sizeof *q->sum);
    if (!q->zp || !q->sc || !q->sum) return 0;
    for (int r = 0; r < rows; r++) {
        q->zp[r] = o->zp ? o->zp[r] : o->zp1;
        q->sc[r] = o->scale ? o->scale[r] : o->scale1;
    }
    if (o->kmajor && bits == 8) /* byte values: loops the compiler vectorises */
        for (int kk = 0; kk < k; kk++) {
            const uint8_t *c = o->code + (size_t)kk * o->ld;
            if (sg)
                for (int r = 0; r < rows; r++) q->sum[r] += (int8_t)c[r];
            else
                for (int r = 0; r < rows; r++) q->sum[r] += c[r];
        }
    else if (o->kmajor)
        for (int kk = 0; kk < k; kk++) {
            const uint8_t *c = o->code + (size_t)kk * o->ld;
            for (int r = 0; r < rows; r++) q->sum[r] += code_value(c[r], bits, sg);
        }
    else
        for (int r = 0; r < rows; r++) {
            const uint8_t *c = o->code + (size_t)r * o->ld;
            int64_t v = 0;
            for (int kk = 0; kk < k; kk++) v += code_value(c[kk], bits, sg);
            q->sum[r] = v;
        }
    return 1;
}

static void qside_free(qside *q)
{
    free(q->zp);
    free(q->sc);
    free(q->sum);
}

/* Row-major codes of o (rows x k): o's own array, or *tmp holding a copy
 * when o is k-major. NULL when out of memory. */
static const uint8_t *row_major(const mts_qopd *o, int rows, int k, uint8_t **tmp)
{
    *tmp = NULL;
    if (!o->kmajor) return o->code;
    uint8_t *t = gemm_ws_alloc((size_t)rows * (size_t)k + 1, 0);
    if (!t) return NULL;
    for (int kk = 0; kk < k; kk++)
        for (int r = 0; r < rows; r++) t[(size_t)r * k + kk] = o->code[(size_t)kk * o->ld + r];
    *tmp = t;
    return t;
}

#define QM_AVX2 (GEMM_SIMD && GW == 8) /* the exact-product kernel (AVX2 builds) */

#if GEMM_VBMI || QM_AVX2 /* its callers: the byte-table and exact-product kernels below */
/* Outputs of one row r of the row operand against columns j0 .. j0+jn of
 * the column operand, from their table sums t[c] (offset included): the
 * zero-point correction and the rescale of every output, then the stores.
 * swap: the row operand is the caller's b (so output (i, j) = (j0+c, r)). */
static void q_epilogue(const qside *R, const qside *Cs, int r, int j0, int jn, int k, const int64_t *t, int swap,
                       int ct, float beta, float *C, int ldc, float *out)
{
    int64_t zr = R->zp[r], Sr = R->sum[r], kz = (int64_t)k * zr;
    double sr = R->sc[r];
    const int32_t *zc = Cs->zp + j0;
    const int64_t *Sc = Cs->sum + j0;
    const double *sc = Cs->sc + j0;
    /* mts_qdot_correct, symmetric in its operands: t - zc Sr - zr Sc + k zr zc */
    for (int c = 0; c < jn; c++) {
        int64_t acc = t[c] - (int64_t)zc[c] * Sr - zr * Sc[c] + kz * (int64_t)zc[c];
        out[c] = (float)((sr * sc[c]) * (double)acc);
    }
    if (swap == ct) { /* the outputs of a row of the result, side by side */
        float *dst = swap ? C + (size_t)r * (size_t)ldc + (size_t)j0 : C + (size_t)r * (size_t)ldc + (size_t)j0;
        if (beta == 0.0f) memcpy(dst, out, sizeof(float) * (size_t)jn);
        else
            for (int c = 0; c < jn; c++) gemm_store(dst + c, beta, out[c]);
    } else {
        for (int c = 0; c < jn; c++) gemm_store(C + (size_t)(j0 + c) * (size_t)ldc + (size_t)r, beta, out[c]);
    }
}
#endif

/* ------------------------------------------------ the scalar reference */

/* One output at a time: s = sum of lut->entry[(a << n) | b], then the
 * correction and the rescale of mts_qdot_float's formula. */
static void qk_scalar(const mts_qtab *t, int threads, int ct, int m, int n, int k, const uint8_t *ca,
                      const uint8_t *cb, size_t lda, size_t ldb, const qside *A, const qside *B, float beta, float *C,
                      int ldc)
{
    const uint32_t *e = t->lut->entry;
    int bits = t->bits;
    uint32_t mask = (1u << bits) - 1u;
    (void)threads;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4)
    for (int i = 0; i < m; i++) {
        const uint8_t *ra = ca + (size_t)i * lda;
        for (int j = 0; j < n; j++) {
            const uint8_t *rb = cb + (size_t)j * ldb;
            int64_t s = 0;
            for (int kk = 0; kk < k; kk++) s += (int32_t)e[((ra[kk] & mask) << bits) | (rb[kk] & mask)];
            int64_t acc = mts_qdot_correct(s, A->sum[i], B->sum[j], (int64_t)k, A->zp[i], B->zp[j]);
            float y = (float)((A->sc[i] * B->sc[j]) * (double)acc);
            gemm_store(ct ? &C[(size_t)j * (size_t)ldc + (size_t)i] : &C[(size_t)i * (size_t)ldc + (size_t)j], beta, y);
        }
    }
}

/* ------------------------------------------------ the byte-plane kernel */

/* Whether the code GEMM runs its transposed form (the second operand's
 * codes pick the table rows): when the first operand has more rows. */
#define QK_SWAP(m, n) ((m) > (n))

#if GEMM_VBMI
#define QK_NV 4                   /* vectors of 64 columns per row pass */
#define QK_COLS (64 * QK_NV)
#define QK_KSTEP 256              /* k steps summed in 16 bits: 256 * 255 < 65536 */

/* Table sums of one row code sequence r[0..k) against the column codes
 * P[kk*ldp + j] of columns j0 .. j0+jn (jn <= QK_COLS): out[c] = 256 *
 * (sum of high bytes) + (sum of low bytes) for column j0 + c. */
static void qk_row(const uint8_t *plo, const uint8_t *phi, const uint8_t *r, int k, const uint8_t *P, size_t ldp,
                   int j0, int jn, int64_t *out)
{
    __mmask64 lm[QK_NV];
    for (int v = 0; v < QK_NV; v++) {
        int left = jn - 64 * v;
        lm[v] = left >= 64 ? ~(__mmask64)0 : left > 0 ? (((__mmask64)1 << left) - 1) : 0;
    }
    int32_t L[QK_COLS], H[QK_COLS];
    memset(L, 0, sizeof L);
    memset(H, 0, sizeof H);
    for (int k0 = 0; k0 < k; k0 += QK_KSTEP) {
        int k1 = k - k0 < QK_KSTEP ? k : k0 + QK_KSTEP;
        /* per plane: w, the 16-bit lanes summed whole (even column + 256 x odd column, mod 2^16),
         * and o, the odd columns' bytes; the even columns' sums are w - 256 o (mod 2^16), exact
         * since they stay below 2^16. Named registers, not arrays: GCC kept arrays in memory. */
        __m512i lw0 = _mm512_setzero_si512(), lw1 = lw0, lw2 = lw0, lw3 = lw0, lo0 = lw0, lo1 = lw0, lo2 = lw0,
                lo3 = lw0, hw0 = lw0, hw1 = lw0, hw2 = lw0, hw3 = lw0, ho0 = lw0, ho1 = lw0, ho2 = lw0, ho3 = lw0;
        for (int kk = k0; kk < k1; kk++) {
            const uint8_t *tl = plo + ((size_t)r[kk] << 8), *th = phi + ((size_t)r[kk] << 8);
            __m512i L0 = _mm512_loadu_si512(tl), L1 = _mm512_loadu_si512(tl + 64);
            __m512i L2 = _mm512_loadu_si512(tl + 128), L3 = _mm512_loadu_si512(tl + 192);
            __m512i H0 = _mm512_loadu_si512(th), H1 = _mm512_loadu_si512(th + 64);
            __m512i H2 = _mm512_loadu_si512(th + 128), H3 = _mm512_loadu_si512(th + 192);
            const uint8_t *p = P + (size_t)kk * ldp + j0;
            /* one vector of 64 columns: entries 0..127 where index bit 7 is clear (the index passes
             * through elsewhere), then 128..255 where it is set, for either plane */
#define QK_VEC(V)                                                                                                  \
    do {                                                                                                           \
        __m512i idx = _mm512_maskz_loadu_epi8(lm[V], p + 64 * (V));                                               \
        __mmask64 up = _mm512_movepi8_mask(idx);                                                                   \
        __m512i l = _mm512_mask2_permutex2var_epi8(L2, _mm512_mask2_permutex2var_epi8(L0, idx, ~up, L1), up, L3); \
        __m512i h = _mm512_mask2_permutex2var_epi8(H2, _mm512_mask2_permutex2var_epi8(H0, idx, ~up, H1), up, H3); \
        lw##V = _mm512_add_epi16(lw##V, l);                                                                        \
        lo##V = _mm512_add_epi16(lo##V, _mm512_srli_epi16(l, 8));                                                  \
        hw##V = _mm512_add_epi16(hw##V, h);                                                                        \
        ho##V = _mm512_add_epi16(ho##V, _mm512_srli_epi16(h, 8));                                                  \
    } while (0)
            QK_VEC(0);
            QK_VEC(1);
            QK_VEC(2);
            QK_VEC(3);
#undef QK_VEC
        }
        __m512i lw[QK_NV] = {lw0, lw1, lw2, lw3}, lo_[QK_NV] = {lo0, lo1, lo2, lo3}, hw[QK_NV] = {hw0, hw1, hw2, hw3},
                ho[QK_NV] = {ho0, ho1, ho2, ho3};
        /* widen: 16-bit lane q of the even sums is column 2q, of the odd ones 2q + 1. unpacklo/hi
         * interleave them per 128-bit block (block g: columns 16g .. 16g+7, and 16g+8 .. 16g+15), and
         * a two-source permute of 64-bit units puts 32 columns in order */
        const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
        const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
        for (int v = 0; v < QK_NV; v++) {
            __m512i le = _mm512_sub_epi16(lw[v], _mm512_slli_epi16(lo_[v], 8));
            __m512i he = _mm512_sub_epi16(hw[v], _mm512_slli_epi16(ho[v], 8));
            __m512i ul = _mm512_unpacklo_epi16(le, lo_[v]), uh = _mm512_unpackhi_epi16(le, lo_[v]);
            __m512i vl = _mm512_unpacklo_epi16(he, ho[v]), vh = _mm512_unpackhi_epi16(he, ho[v]);
            __m512i l0 = _mm512_permutex2var_epi64(ul, first, uh), l1 = _mm512_permutex2var_epi64(ul, second, uh);
            __m512i h0 = _mm512_permutex2var_epi64(vl, first, vh), h1 = _mm512_permutex2var_epi64(vl, second, vh);
            int32_t *Lb = L + 64 * v, *Hb = H + 64 * v;
            __m512i w[4] = {_mm512_cvtepu16_epi32(_mm512_castsi512_si256(l0)),
                            _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(l0, 1)),
                            _mm512_cvtepu16_epi32(_mm512_castsi512_si256(l1)),
                            _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(l1, 1))};
            __m512i x[4] = {_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h0)),
                            _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h0, 1)),
                            _mm512_cvtepu16_epi32(_mm512_castsi512_si256(h1)),
                            _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h1, 1))};
            for (int q = 0; q < 4; q++) {
                _mm512_storeu_si512(Lb + 16 * q, _mm512_add_epi32(_mm512_loadu_si512(Lb + 16 * q), w[q]));
                _mm512_storeu_si512(Hb + 16 * q, _mm512_add_epi32(_mm512_loadu_si512(Hb + 16 * q), x[q]));
            }
        }
    }
    for (int c = 0; c < jn; c++) out[c] = (int64_t)H[c] * 256 + L[c];
}

/* Tile tI of qk_vbmi: by column chunk, so its codes stay cached. */
static inline void qk_tile(const uint8_t *plo, const uint8_t *phi, int64_t ktmin, int ct, int swap, int rows, int cols,
                           int k, const uint8_t *R, size_t ldr, const uint8_t *P, size_t ldp, const qside *Rs,
                           const qside *Cs, float beta, float *C, int ldc, long tI, int64_t *s, float *out)
{
    int r = (int)(tI % rows), j0 = (int)(tI / rows) * QK_COLS;
    int jn = cols - j0 < QK_COLS ? cols - j0 : QK_COLS;
    qk_row(plo, phi, R + (size_t)r * ldr, k, P, ldp, j0, jn, s);
    for (int c = 0; c < jn; c++) s[c] += ktmin;
    q_epilogue(Rs, Cs, r, j0, jn, k, s, swap, ct, beta, C, ldc, out);
}

/* The kernel over the job: R (rows x k codes, row-major, ldr: the row
 * operand), P (the column operand's codes, [k][ldp]); swap says R is the
 * caller's b. */
static void qk_vbmi(const mts_qtab *t, int threads, int ct, int swap, int rows, int cols, int k, const uint8_t *R,
                    size_t ldr, const uint8_t *P, size_t ldp, const qside *Rs, const qside *Cs, float beta, float *C,
                    int ldc)
{
    const uint8_t *plo = t->lo + (swap ? 65536 : 0), *phi = t->hi + (swap ? 65536 : 0);
    int nch = (cols + QK_COLS - 1) / QK_COLS;
    long tiles = (long)rows * nch;
    int64_t ktmin = (int64_t)k * t->tmin;
    if (threads <= 1) { /* no team (gemm_internal.h, after gemm_tiles) */
        int64_t s[QK_COLS];
        float out[QK_COLS];
        for (long tI = 0; tI < tiles; tI++)
            qk_tile(plo, phi, ktmin, ct, swap, rows, cols, k, R, ldr, P, ldp, Rs, Cs, beta, C, ldc, tI, s, out);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        int64_t s[QK_COLS];
        float out[QK_COLS];
#pragma omp for schedule(dynamic, 4)
        for (long tI = 0; tI < tiles; tI++)
            qk_tile(plo, phi, ktmin, ct, swap, rows, cols, k, R, ldr, P, ldp, Rs, Cs, beta, C, ldc, tI, s, out);
    }
}
#endif

#if GEMM_VBMI && defined(__AVX512VNNI__)
#define QS_COLS 128 /* columns per row pass of the split kernel: 8 VNNI vectors, 2 lookup vectors */

/* The split kernel, for tables whose error D = T - a*b spans at most 255:
 * sum T = sum a*b (VNNI: vpdpbusd multiplies 4 unsigned by 4 signed bytes
 * per 32-bit lane, exactly) + sum (D - dmin) (one byte plane, the lookup and
 * the 16-bit sums of qk_row) + k dmin. The exact products need the row
 * operand's bytes unsigned and the column operand's signed: an unsigned
 * table's column codes go in as c - 128 (c ^ 0x80) and 128 sum(row values)
 * is added back; a signed table's row codes go in as v + 128 and 128
 * sum(column values) is taken off. P4: the column operand's adjusted codes
 * [k/4][columns][4] (zeros past k); rw: the row's adjusted codes, 4 to a
 * 32-bit word (zeros past k). Out: the table sums of columns j0 .. j0+jn. */
static void qs_row(const mts_qtab *t, const uint8_t *dpl, const uint8_t *r, const uint32_t *rw, int k, const uint8_t *P,
                   size_t ldp, const uint8_t *P4, size_t ld4, int j0, int jn, int64_t *out)
{
    __mmask64 lm[2];
    for (int v = 0; v < 2; v++) {
        int left = jn - 64 * v;
        lm[v] = left >= 64 ? ~(__mmask64)0 : left > 0 ? (((__mmask64)1 << left) - 1) : 0;
    }
    int64_t prod[QS_COLS];
    int32_t L[QS_COLS];
    memset(prod, 0, sizeof prod);
    memset(L, 0, sizeof L);
    int nq = (k + 3) / 4, lookups = !t->dconst;
    for (int q0 = 0; q0 < nq; q0 += QK_KSTEP / 4) { /* 256 steps of k: the 16-bit sums' limit */
        int q1 = nq - q0 < QK_KSTEP / 4 ? nq : q0 + QK_KSTEP / 4;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        __m512i w0 = a0, o0 = a0, w1 = a0, o1 = a0;
        for (int q = q0; q < q1; q++) {
            __m512i rb = _mm512_set1_epi32((int)rw[q]);
            const uint8_t *p4 = P4 + (size_t)q * ld4 + (size_t)j0 * 4;
            a0 = _mm512_dpbusd_epi32(a0, rb, _mm512_loadu_si512(p4));
            a1 = _mm512_dpbusd_epi32(a1, rb, _mm512_loadu_si512(p4 + 64));
            a2 = _mm512_dpbusd_epi32(a2, rb, _mm512_loadu_si512(p4 + 128));
            a3 = _mm512_dpbusd_epi32(a3, rb, _mm512_loadu_si512(p4 + 192));
            a4 = _mm512_dpbusd_epi32(a4, rb, _mm512_loadu_si512(p4 + 256));
            a5 = _mm512_dpbusd_epi32(a5, rb, _mm512_loadu_si512(p4 + 320));
            a6 = _mm512_dpbusd_epi32(a6, rb, _mm512_loadu_si512(p4 + 384));
            a7 = _mm512_dpbusd_epi32(a7, rb, _mm512_loadu_si512(p4 + 448));
            if (!lookups) continue;
            int kend = 4 * q + 4 < k ? 4 * q + 4 : k;
            for (int kk = 4 * q; kk < kend; kk++) {
                const uint8_t *tl = dpl + ((size_t)r[kk] << 8);
                __m512i D0 = _mm512_loadu_si512(tl), D1 = _mm512_loadu_si512(tl + 64);
                __m512i D2 = _mm512_loadu_si512(tl + 128), D3 = _mm512_loadu_si512(tl + 192);
                const uint8_t *p = P + (size_t)kk * ldp + j0;
                __m512i i0 = _mm512_maskz_loadu_epi8(lm[0], p), i1 = _mm512_maskz_loadu_epi8(lm[1], p + 64);
                __mmask64 u0 = _mm512_movepi8_mask(i0), u1 = _mm512_movepi8_mask(i1);
                __m512i l0 = _mm512_mask2_permutex2var_epi8(D2, _mm512_mask2_permutex2var_epi8(D0, i0, ~u0, D1), u0, D3);
                __m512i l1 = _mm512_mask2_permutex2var_epi8(D2, _mm512_mask2_permutex2var_epi8(D0, i1, ~u1, D1), u1, D3);
                w0 = _mm512_add_epi16(w0, l0);
                o0 = _mm512_add_epi16(o0, _mm512_srli_epi16(l0, 8));
                w1 = _mm512_add_epi16(w1, l1);
                o1 = _mm512_add_epi16(o1, _mm512_srli_epi16(l1, 8));
            }
        }
        __m512i acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
        for (int v = 0; v < 8; v++) {
            int32_t x[16];
            _mm512_storeu_si512(x, acc[v]);
            for (int c = 0; c < 16; c++) prod[16 * v + c] += x[c];
        }
        if (!lookups) continue;
        /* the error plane's 16-bit sums into columns, as qk_row widens its planes */
        const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
        const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
        __m512i ws[2] = {w0, w1}, os[2] = {o0, o1};
        for (int v = 0; v < 2; v++) {
            __m512i e = _mm512_sub_epi16(ws[v], _mm512_slli_epi16(os[v], 8));
            __m512i ul = _mm512_unpacklo_epi16(e, os[v]), uh = _mm512_unpackhi_epi16(e, os[v]);
            __m512i c0 = _mm512_permutex2var_epi64(ul, first, uh), c1 = _mm512_permutex2var_epi64(ul, second, uh);
            int32_t *Lb = L + 64 * v;
            __m512i y[4] = {_mm512_cvtepu16_epi32(_mm512_castsi512_si256(c0)),
                            _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(c0, 1)),
                            _mm512_cvtepu16_epi32(_mm512_castsi512_si256(c1)),
                            _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(c1, 1))};
            for (int qq = 0; qq < 4; qq++)
                _mm512_storeu_si512(Lb + 16 * qq, _mm512_add_epi32(_mm512_loadu_si512(Lb + 16 * qq), y[qq]));
        }
    }
    for (int c = 0; c < jn; c++) out[c] = prod[c] + L[c];
}

/* Tile tI of qs_vbmi (rw: the calling thread's row words, *lastr the row
 * they hold). */
static inline void qs_tile(const mts_qtab *t, const uint8_t *dpl, int ct, int swap, int rows, int cols, int k, int nq,
                           int sg, const uint8_t *R, size_t ldr, const uint8_t *P, size_t ldp, const uint8_t *P4,
                           size_t ld4, uint32_t *rw, int *lastr, const qside *Rs, const qside *Cs, float beta, float *C,
                           int ldc, long tI, int64_t *s, float *out)
{
    int r = (int)(tI % rows), j0 = (int)(tI / rows) * QS_COLS; /* by column chunk: its codes stay cached */
    int jn = cols - j0 < QS_COLS ? cols - j0 : QS_COLS;
    const uint8_t *rc = R + (size_t)r * ldr;
    if (r != *lastr) { /* the row's codes, 4 to a word, adjusted for vpdpbusd's unsigned operand */
        for (int q = 0; q < nq; q++) {
            uint32_t w = 0;
            for (int u = 0; u < 4; u++) {
                int kk = 4 * q + u;
                uint32_t c = kk < k ? (uint32_t)(uint8_t)(rc[kk] ^ (sg ? 0x80 : 0)) : 0;
                w |= c << (8 * u);
            }
            rw[q] = w;
        }
        *lastr = r;
    }
    qs_row(t, dpl, rc, rw, k, P, ldp, P4, ld4, j0, jn, s);
    /* back to the values' products, then the error's offset */
    for (int c = 0; c < jn; c++) {
        int64_t fix = sg ? -128 * Cs->sum[j0 + c] : 128 * Rs->sum[r];
        s[c] += fix + (int64_t)k * t->dmin;
    }
    q_epilogue(Rs, Cs, r, j0, jn, k, s, swap, ct, beta, C, ldc, out);
}

/* The split kernel over the job (as qk_vbmi): Rs / Cs the operands' sums. */
static void qs_vbmi(const mts_qtab *t, int threads, int ct, int swap, int rows, int cols, int k, const uint8_t *R,
                    size_t ldr, const uint8_t *P, size_t ldp, const uint8_t *P4, size_t ld4, uint32_t *rws,
                    const qside *Rs, const qside *Cs, float beta, float *C, int ldc)
{
    const uint8_t *dpl = t->dp ? t->dp + (swap ? 65536 : 0) : NULL;
    int nch = (cols + QS_COLS - 1) / QS_COLS, nq = (k + 3) / 4, sg = t->is_signed;
    long tiles = (long)rows * nch;
    if (threads <= 1) { /* no team (gemm_internal.h, after gemm_tiles) */
        int64_t s[QS_COLS];
        float out[QS_COLS];
        int lastr = -1;
        for (long tI = 0; tI < tiles; tI++)
            qs_tile(t, dpl, ct, swap, rows, cols, k, nq, sg, R, ldr, P, ldp, P4, ld4, rws, &lastr, Rs, Cs, beta, C, ldc,
                    tI, s, out);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        int64_t s[QS_COLS];
        float out[QS_COLS];
        int me = 0;
#ifdef _OPENMP
        me = omp_get_thread_num();
#endif
        uint32_t *rw = rws + (size_t)me * (size_t)(nq + 1); /* this thread's row words */
        int lastr = -1;
#pragma omp for schedule(dynamic, 4)
        for (long tI = 0; tI < tiles; tI++)
            qs_tile(t, dpl, ct, swap, rows, cols, k, nq, sg, R, ldr, P, ldp, P4, ld4, rw, &lastr, Rs, Cs, beta, C, ldc,
                    tI, s, out);
    }
}
#endif

#if QM_AVX2
#define QM_NV 4                 /* vectors of 8 columns per row pass */
#define QM_COLS (8 * QM_NV)
#define QM_QSTEP 8192           /* pairs of k summed in 32 bits: 8192 * 2 * 255 * 255 < 2^31 */

/* The values of one row's codes in 16-bit pairs, one 32-bit word per two
 * steps of k (the last one's high half 0 when k is odd). */
static void qm_row_words(const uint8_t *r, int k, int sg, uint32_t *rw)
{
    for (int q = 0; q < (k + 1) / 2; q++) {
        int32_t lo = code_value(r[2 * q], 8, sg), hi = 2 * q + 1 < k ? code_value(r[2 * q + 1], 8, sg) : 0;
        rw[q] = (uint32_t)(uint16_t)(int16_t)lo | (uint32_t)(uint16_t)(int16_t)hi << 16;
    }
}

/* Tile tI of qm_avx2: sum a*b of row tI % rows against QM_COLS columns
 * of P2 ([k/2][ld2 columns][2] 16-bit values, zeros past k and the
 * columns), then the table's constant and the epilogue. */
static void qm_tile(const mts_qtab *t, int ct, int swap, int rows, int cols, int k, const uint8_t *R, size_t ldr,
                    const int16_t *P2, size_t ld2, uint32_t *rw, int *lastr, const qside *Rs, const qside *Cs,
                    float beta, float *C, int ldc, long tI, int64_t *s, float *out)
{
    int r = (int)(tI % rows), j0 = (int)(tI / rows) * QM_COLS; /* by column chunk: its values stay cached */
    int jn = cols - j0 < QM_COLS ? cols - j0 : QM_COLS, nq = (k + 1) / 2;
    if (r != *lastr) {
        qm_row_words(R + (size_t)r * ldr, k, t->is_signed, rw);
        *lastr = r;
    }
    int64_t sum[QM_COLS] = {0};
    for (int q0 = 0; q0 < nq; q0 += QM_QSTEP) {
        int q1 = nq - q0 < QM_QSTEP ? nq : q0 + QM_QSTEP;
        __m256i acc[QM_NV];
        for (int v = 0; v < QM_NV; v++) acc[v] = _mm256_setzero_si256();
        for (int q = q0; q < q1; q++) {
            const __m256i rb = _mm256_set1_epi32((int)rw[q]);
            const int16_t *p = P2 + ((size_t)q * ld2 + (size_t)j0) * 2;
            for (int v = 0; v < QM_NV; v++)
                acc[v] = _mm256_add_epi32(acc[v], _mm256_madd_epi16(rb, _mm256_loadu_si256((const __m256i *)(const void *)(p + 16 * v))));
        }
        int32_t x[QM_COLS];
        for (int v = 0; v < QM_NV; v++) _mm256_storeu_si256((__m256i *)(void *)(x + 8 * v), acc[v]);
        for (int c = 0; c < QM_COLS; c++) sum[c] += x[c];
    }
    for (int c = 0; c < jn; c++) s[c] = sum[c] + (int64_t)k * t->dmin;
    q_epilogue(Rs, Cs, r, j0, jn, k, s, swap, ct, beta, C, ldc, out);
}

/* The exact-product kernel over the job (as qk_vbmi); rws: (k + 1) / 2 + 1
 * row words for each thread. */
static void qm_avx2(const mts_qtab *t, int threads, int ct, int swap, int rows, int cols, int k, const uint8_t *R,
                    size_t ldr, const int16_t *P2, size_t ld2, uint32_t *rws, const qside *Rs, const qside *Cs,
                    float beta, float *C, int ldc)
{
    int nch = (cols + QM_COLS - 1) / QM_COLS, nw = (k + 1) / 2 + 1;
    long tiles = (long)rows * nch;
    if (threads <= 1) { /* no team (gemm_internal.h, after gemm_tiles) */
        int64_t s[QM_COLS];
        float out[QM_COLS];
        int lastr = -1;
        for (long tI = 0; tI < tiles; tI++)
            qm_tile(t, ct, swap, rows, cols, k, R, ldr, P2, ld2, rws, &lastr, Rs, Cs, beta, C, ldc, tI, s, out);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        int64_t s[QM_COLS];
        float out[QM_COLS];
        int me = 0;
#ifdef _OPENMP
        me = omp_get_thread_num();
#endif
        uint32_t *rw = rws + (size_t)me * (size_t)nw; /* this thread's row words */
        int lastr = -1;
#pragma omp for schedule(dynamic, 4)
        for (long tI = 0; tI < tiles; tI++)
            qm_tile(t, ct, swap, rows, cols, k, R, ldr, P2, ld2, rw, &lastr, Rs, Cs, beta, C, ldc, tI, s, out);
    }
}
#endif

int mts_qgemm(const mts_qtab *t, int threads, int scalar_only, int ct, int m, int n, int k, const mts_qopd *a,
              const mts_qopd *b, float beta, float *C, int ldc, mts_err *err)
{
    if (!t || !t->lut || m < 0 || n < 0 || k < 0 || !a || !b || !C)
        return mts_fail(err, MTS_EINVAL, "integer GEMM: bad table or shape");
    if (m == 0 || n == 0) return MTS_OK;
#ifdef _OPENMP
    if (threads <= 0) threads = omp_get_max_threads();
#endif
    if (threads < 1 || (double)m * n * k < 262144.0) threads = 1;
    qside A, B;
    uint8_t *ta = NULL, *tb = NULL, *P = NULL, *P4 = NULL;
    uint32_t *rws = NULL;
    int rc = MTS_OK, okA = qside_make(a, m, k, t->bits, t->is_signed, &A), okB = qside_make(b, n, k, t->bits, t->is_signed, &B);
    if (!okA || !okB) {
        rc = mts_fail(err, MTS_ENOMEM, "integer GEMM: out of memory (%d x %d x %d)", m, n, k);
        goto done;
    }
#if GEMM_VBMI && defined(__AVX512VNNI__)
    if (!scalar_only && t->split && (t->dconst || (t->dplanes & (QK_SWAP(m, n) ? 2 : 1))) && k > 0) {
        int swap = QK_SWAP(m, n);
        int rows = swap ? n : m, cols = swap ? m : n, sg = t->is_signed;
        const mts_qopd *Ro = swap ? b : a, *Co = swap ? a : b;
        const uint8_t *R = row_major(Ro, rows, k, swap ? &tb : &ta);
        size_t ldp = Co->kmajor ? Co->ld : (size_t)cols, ncp = ((size_t)cols + QS_COLS - 1) / QS_COLS * QS_COLS;
        size_t nq = ((size_t)k + 3) / 4, ld4 = ncp * 4;
        P4 = gemm_ws_alloc(nq * ld4 + 64, 1);
        rws = gemm_ws_alloc(sizeof *rws * (nq + 1) * (size_t)threads, 0);
        const uint8_t *Pc = Co->code;
        if (!Co->kmajor) { /* [k][cols], what the error lookups read */
            P = gemm_ws_alloc((size_t)k * (size_t)cols + 64, 0);
            if (P)
                for (int j = 0; j < cols; j++) {
                    const uint8_t *c = Co->code + (size_t)j * Co->ld;
                    for (int kk = 0; kk < k; kk++) P[(size_t)kk * cols + (size_t)j] = c[kk];
                }
            Pc = P;
        }
        if (!R || !Pc || !P4 || !rws) {
            rc = mts_fail(err, MTS_ENOMEM, "integer GEMM: out of memory packing %d x %d codes", k, cols);
            goto done;
        }
        /* [k/4][columns][4], vpdpbusd's signed operand: an unsigned table's codes less 128 */
        uint8_t flip = sg ? 0 : 0x80;
        for (int kk = 0; kk < k; kk++) {
            const uint8_t *src = Pc + (size_t)kk * ldp;
            uint8_t *dst = P4 + (size_t)(kk / 4) * ld4 + (size_t)(kk % 4);
            for (int j = 0; j < cols; j++) dst[(size_t)j * 4] = src[j] ^ flip;
        }
        /* past k (and past the columns) P4 stays 0, as do the row words: those products are 0 */
        qs_vbmi(t, threads, ct, swap, rows, cols, k, R, Ro->kmajor ? (size_t)k : Ro->ld, Pc, ldp, P4, ld4, rws,
                swap ? &B : &A, swap ? &A : &B, beta, C, ldc);
        goto done;
    }
#endif
#if QM_AVX2
    if (!scalar_only && t->bits == 8 && t->split && t->dconst && k > 0) {
        int swap = QK_SWAP(m, n); /* as the kernels above: the operand with more rows across the lanes */
        int rows = swap ? n : m, cols = swap ? m : n, sg = t->is_signed;
        const mts_qopd *Ro = swap ? b : a, *Co = swap ? a : b;
        const uint8_t *R = row_major(Ro, rows, k, swap ? &tb : &ta);
        size_t nq = ((size_t)k + 1) / 2, ld2 = ((size_t)cols + QM_COLS - 1) / QM_COLS * QM_COLS;
        int16_t *P2 = gemm_ws_alloc(nq * ld2 * 2 * sizeof *P2, 1); /* zeros past k and the columns */
        rws = gemm_ws_alloc(sizeof *rws * (nq + 1) * (size_t)threads, 0);
        if (!R || !P2 || !rws) {
            gemm_ws_free(P2);
            rc = mts_fail(err, MTS_ENOMEM, "integer GEMM: out of memory packing %d x %d codes", k, cols);
            goto done;
        }
        for (int kk = 0; kk < k; kk++) /* [k/2][columns][2]: the values, k's pairs side by side */
            for (int j = 0; j < cols; j++) {
                uint8_t c = Co->kmajor ? Co->code[(size_t)kk * Co->ld + (size_t)j] : Co->code[(size_t)j * Co->ld + (size_t)kk];
                P2[((size_t)(kk / 2) * ld2 + (size_t)j) * 2 + (size_t)(kk % 2)] = (int16_t)code_value(c, 8, sg);
            }
        qm_avx2(t, threads, ct, swap, rows, cols, k, R, Ro->kmajor ? (size_t)k : Ro->ld, P2, ld2, rws, swap ? &B : &A,
                swap ? &A : &B, beta, C, ldc);
        gemm_ws_free(P2);
        goto done;
    }
#endif
#if GEMM_VBMI
    if (!scalar_only && (t->planes & (QK_SWAP(m, n) ? 2 : 1)) && k > 0) {
        /* the operand with more rows runs across the lanes (QK_SWAP) */
        int swap = QK_SWAP(m, n);
        int rows = swap ? n : m, cols = swap ? m : n;
        const mts_qopd *Ro = swap ? b : a, *Co = swap ? a : b;
        const uint8_t *R = row_major(Ro, rows, k, swap ? &tb : &ta);
        size_t ldr = Ro->kmajor ? (size_t)k : Ro->ld, ldp = Co->ld;
        const uint8_t *Pc = Co->code;
        if (!Co->kmajor) { /* pack [k][cols] */
            P = gemm_ws_alloc((size_t)k * (size_t)cols + 1, 0);
            if (P)
                for (int j = 0; j < cols; j++) {
                    const uint8_t *c = Co->code + (size_t)j * Co->ld;
                    for (int kk = 0; kk < k; kk++) P[(size_t)kk * cols + (size_t)j] = c[kk];
                }
            Pc = P;
            ldp = (size_t)cols;
        }
        if (!R || !Pc) {
            rc = mts_fail(err, MTS_ENOMEM, "integer GEMM: out of memory packing %d x %d codes", k, cols);
            goto done;
        }
        qk_vbmi(t, threads, ct, swap, rows, cols, k, R, ldr, Pc, ldp, swap ? &B : &A, swap ? &A : &B, beta, C, ldc);
        goto done;
    }
#endif
    (void)scalar_only;
    {
        const uint8_t *ca = row_major(a, m, k, &ta), *cb = row_major(b, n, k, &tb);
        if (!ca || !cb) {
            rc = mts_fail(err, MTS_ENOMEM, "integer GEMM: out of memory (%d x %d x %d)", m, n, k);
            goto done;
        }
        qk_scalar(t, threads, ct, m, n, k, ca, cb, a->kmajor ? (size_t)k : a->ld, b->kmajor ? (size_t)k : b->ld, &A,
                  &B, beta, C, ldc);
    }
done:
    qside_free(&A);
    qside_free(&B);
    gemm_ws_free(ta);
    gemm_ws_free(tb);
    gemm_ws_free(P);
    gemm_ws_free(P4);
    gemm_ws_free(rws);
    return rc;
}

/* ------------------------------------------------- the INT provider */

/* Finite min/max of opX (rows x cols); 0, 0 when there is none. */
static void finite_range(const float *X, int ld, int trans, int rows, int cols, double *lo, double *hi)
{
    double a = INFINITY, b = -INFINITY;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float x = gemm_at(X, ld, trans, r, c);
            if (isfinite(x)) {
                if (x < a) a = x;
                if (x > b) b = x;
            }
        }
    *lo = a <= b ? a : 0.0;
    *hi = a <= b ? b : 0.0;
}

int mts_gemm_int_quantize(int nbits, int is_signed, int threads, int transA, int transB, int m, int n, int k,
                          const float *A, int lda, const float *B, int ldb, uint32_t *ia, uint32_t *ib,
                          int64_t *suma, int64_t *sumb, mts_affine *pa, mts_affine *pb, mts_err *err)
{
    double lo, hi;
    int rc;
    uint32_t mask = (1u << nbits) - 1u;
    size_t K = (size_t)k;
    finite_range(A, lda, transA, m, k, &lo, &hi);
    if ((rc = mts_affine_from_range(lo, hi, nbits, is_signed, pa, err)) != MTS_OK) return rc;
    finite_range(B, ldb, transB, k, n, &lo, &hi);
    if ((rc = mts_affine_from_range(lo, hi, nbits, is_signed, pb, err)) != MTS_OK) return rc;
    (void)threads;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
    for (int i = 0; i < m; i++) {
        int64_t s = 0;
        for (int kk = 0; kk < k; kk++) {
            int32_t q = mts_affine_quantize(pa, gemm_at(A, lda, transA, i, kk));
            s += q;
            ia[(size_t)i * K + (size_t)kk] = ((uint32_t)q & mask) << nbits;
        }
        suma[i] = s;
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
    for (int j = 0; j < n; j++) {
        int64_t s = 0;
        for (int kk = 0; kk < k; kk++) {
            int32_t q = mts_affine_quantize(pb, gemm_at(B, ldb, transB, kk, j));
            s += q;
            ib[(size_t)j * K + (size_t)kk] = (uint32_t)q & mask;
        }
        sumb[j] = s;
    }
    return MTS_OK;
}

/* Finite min/max of a stored matrix (rows of len floats, ld apart) into
 * *lo, *hi (kept when nothing finite is seen: the caller starts them at
 * +inf / -inf). */
static void stored_range(const float *X, size_t rows, size_t len, size_t ld, double *lo, double *hi)
{
    float a = INFINITY, b = -INFINITY;
#if defined(__AVX512F__)
    __m512 va = _mm512_set1_ps(INFINITY), vb = _mm512_set1_ps(-INFINITY);
    const __m512 inf = _mm512_set1_ps(INFINITY);
#endif
    for (size_t r = 0; r < rows; r++) {
        const float *x = X + r * ld;
        size_t c = 0;
#if defined(__AVX512F__)
        for (; c + 16 <= len; c += 16) {
            __m512 v = _mm512_loadu_ps(x + c);
            __mmask16 fin = _mm512_cmp_ps_mask(_mm512_abs_ps(v), inf, _CMP_LT_OQ); /* NaN, +-inf: no */
            va = _mm512_mask_min_ps(va, fin, va, v);
            vb = _mm512_mask_max_ps(vb, fin, vb, v);
        }
#endif
        for (; c < len; c++)
            if (isfinite(x[c])) {
                if (x[c] < a) a = x[c];
                if (x[c] > b) b = x[c];
            }
    }
#if defined(__AVX512F__)
    float ra = _mm512_reduce_min_ps(va), rb = _mm512_reduce_max_ps(vb);
    if (ra < a) a = ra;
    if (rb > b) b = rb;
#endif
    if (a < *lo) *lo = a;
    if (b > *hi) *hi = b;
}

/* Codes of x[0..n) with p (mts_affine_quantize: r / scale in double, round
 * half away from zero, + zero point, clamped; NaN -> zero point), their low
 * bits (mask) into out. */
static void quant_line(const mts_affine *p, const float *x, size_t n, uint8_t *out, uint32_t mask)
{
    size_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512VL__)
    const __m512d sc = _mm512_set1_pd(p->scale), half = _mm512_set1_pd(0.5), one = _mm512_set1_pd(1.0);
    const __m512d zp = _mm512_set1_pd((double)p->zero_point), qmin = _mm512_set1_pd((double)p->qmin),
                  qmax = _mm512_set1_pd((double)p->qmax);
    const __m256i m = _mm256_set1_epi32((int)mask), z = _mm256_set1_epi32(p->zero_point);
    for (; i + 8 <= n; i += 8) {
        __m512d v = _mm512_div_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), sc);
        __m512d t = _mm512_roundscale_pd(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        /* v - t is exact; a fraction of at least one half rounds away from zero */
        __mmask8 up = _mm512_cmp_pd_mask(_mm512_abs_pd(_mm512_sub_pd(v, t)), half, _CMP_GE_OQ);
        __mmask8 neg = _mm512_cmp_pd_mask(v, _mm512_setzero_pd(), _CMP_LT_OQ);
        t = _mm512_mask_add_pd(t, up & ~neg, t, one);
        t = _mm512_mask_sub_pd(t, up & neg, t, one);
        t = _mm512_min_pd(_mm512_max_pd(_mm512_add_pd(t, zp), qmin), qmax); /* inf clamps; NaN below */
        __mmask8 nan = _mm512_cmp_pd_mask(v, v, _CMP_UNORD_Q);
        __m256i q = _mm256_mask_mov_epi32(_mm512_cvtpd_epi32(t), nan, z);
        _mm_storel_epi64((__m128i *)(out + i), _mm256_cvtepi32_epi8(_mm256_and_si256(q, m)));
    }
#endif
    for (; i < n; i++) out[i] = (uint8_t)((uint32_t)mts_affine_quantize(p, x[i]) & mask);
}

int gemm_int(const mts_lut *lut, int threads, int scalar_only, int ct, int transA, int transB, int m, int n,
                  int k, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  mts_err *err)
{
    mts_affine pa, pb;
    mts_qtab t;
    int rc;
    size_t K = (size_t)k;
    /* codes in the operands' stored layouts: op(A) row-major unless transA
     * (then k-major), op(B) k-major unless transB */
    size_t ra = transA ? K : (size_t)m, la = transA ? (size_t)m : K;
    size_t rb = transB ? (size_t)n : K, lb = transB ? K : (size_t)n;
    uint8_t *ca = gemm_ws_alloc(ra * la + 1, 0), *cb = gemm_ws_alloc(rb * lb + 1, 0);
    memset(&t, 0, sizeof t);
    if (!ca || !cb) {
        rc = mts_fail(err, MTS_ENOMEM, "gemm: out of memory quantizing INT operands (%d x %d x %d)", m, n, k);
        goto done;
    }
    double lo = INFINITY, hi = -INFINITY;
    stored_range(A, ra, la, (size_t)lda, &lo, &hi);
    if (!(lo <= hi)) lo = hi = 0.0;
    if ((rc = mts_affine_from_range(lo, hi, lut->int_bits, lut->int_signed, &pa, err)) != MTS_OK) goto done;
    lo = INFINITY, hi = -INFINITY;
    stored_range(B, rb, lb, (size_t)ldb, &lo, &hi);
    if (!(lo <= hi)) lo = hi = 0.0;
    if ((rc = mts_affine_from_range(lo, hi, lut->int_bits, lut->int_signed, &pb, err)) != MTS_OK) goto done;
    uint32_t mask = (1u << lut->int_bits) - 1u;
    if (threads <= 1 || ra * la <= 65536) /* no team: gemm_internal.h */
        for (size_t r = 0; r < ra; r++) quant_line(&pa, A + r * (size_t)lda, la, ca + r * la, mask);
    else
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
        for (size_t r = 0; r < ra; r++) quant_line(&pa, A + r * (size_t)lda, la, ca + r * la, mask);
    if (threads <= 1 || rb * lb <= 65536)
        for (size_t r = 0; r < rb; r++) quant_line(&pb, B + r * (size_t)ldb, lb, cb + r * lb, mask);
    else
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
        for (size_t r = 0; r < rb; r++) quant_line(&pb, B + r * (size_t)ldb, lb, cb + r * lb, mask);
    if ((rc = qtab_build(&t, lut, QK_SWAP(m, n) ? 2 : 1, err)) != MTS_OK) goto done; /* the plane it reads */
    mts_qopd qa = {ca, la, NULL, pa.zero_point, NULL, pa.scale, transA},
             qb = {cb, lb, NULL, pb.zero_point, NULL, pb.scale, !transB};
    rc = mts_qgemm(&t, threads, scalar_only, ct, m, n, k, &qa, &qb, beta, C, ldc, err);
done:
    mts_qtab_free(&t);
    gemm_ws_free(ca);
    gemm_ws_free(cb);
    return rc;
}
