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
 *    Low and high bytes are summed in 16-bit lanes (even and odd columns
 *    apart, with an AND and a shift, so no shuffle), at most 256 steps of k
 *    before they are widened into int64 sums: 256 * 255 fits 16 bits.
 *    sum T = 256 * sum hi + sum lo + k * Tmin, exactly.
 * Either operand may index the table rows (the one with fewer rows does:
 * its code picks the registers, the other's codes run across the lanes);
 * the transposed planes serve the second operand, so a product is always
 * T(a, b) with a from the first operand, whatever the layout.
 *
 * mts__gemm_int is the INT provider of mts_gemm (TFApprox): each float
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

int mts_qtab_init(mts_qtab *t, const mts_lut *lut, mts_err *err)
{
    memset(t, 0, sizeof *t);
    if (!lut || lut->kind != MTS_LUT_INT || !lut->entry || lut->int_bits < 1 || lut->int_bits > 8 ||
        lut->n != (size_t)1 << (2 * lut->int_bits))
        return mts_fail(err, MTS_EINVAL, "integer GEMM: expected an integer table of 1..8-bit operands");
    t->lut = lut;
    t->bits = lut->int_bits;
    t->is_signed = lut->int_signed != 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < lut->n; i++) {
        int64_t v = (int32_t)lut->entry[i];
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    t->tmin = (int32_t)lo;
    if (t->bits != 8 || hi - lo > 65535) return MTS_OK; /* the scalar kernel only */
    t->lo = mts__gemm_ws_alloc(2 * 65536, 0);
    t->hi = mts__gemm_ws_alloc(2 * 65536, 0);
    if (!t->lo || !t->hi) {
        mts_qtab_free(t);
        return mts_fail(err, MTS_ENOMEM, "integer GEMM: out of memory for the table's byte planes");
    }
    /* plane 0: rows by the first operand's code (T[a][b]); plane 1: rows by the second's (T[a][b] at [b][a]) */
    for (uint32_t a = 0; a < 256; a++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t e = (uint32_t)((int64_t)(int32_t)lut->entry[(a << 8) | b] - lo);
            t->lo[(a << 8) | b] = (uint8_t)e;
            t->hi[(a << 8) | b] = (uint8_t)(e >> 8);
            t->lo[65536 + ((b << 8) | a)] = (uint8_t)e;
            t->hi[65536 + ((b << 8) | a)] = (uint8_t)(e >> 8);
        }
    t->planes = 1;
    return MTS_OK;
}

void mts_qtab_free(mts_qtab *t)
{
    mts__gemm_ws_free(t->lo);
    mts__gemm_ws_free(t->hi);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------ helpers */

/* The value of an n-bit code (sign-extended when signed). */
static inline int32_t code_value(uint32_t c, int bits, int sg)
{
    return sg && (c >> (bits - 1)) ? (int32_t)c - (1 << bits) : (int32_t)c;
}

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
    if (o->kmajor)
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
    uint8_t *t = mts__gemm_ws_alloc((size_t)rows * (size_t)k + 1, 0);
    if (!t) return NULL;
    for (int kk = 0; kk < k; kk++)
        for (int r = 0; r < rows; r++) t[(size_t)r * k + kk] = o->code[(size_t)kk * o->ld + r];
    *tmp = t;
    return t;
}

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
    const __m512i m8 = _mm512_set1_epi16(0x00FF);
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
        __m512i le[QK_NV], lo_[QK_NV], he[QK_NV], ho[QK_NV];
        for (int v = 0; v < QK_NV; v++) le[v] = lo_[v] = he[v] = ho[v] = _mm512_setzero_si512();
        for (int kk = k0; kk < k1; kk++) {
            const uint8_t *tl = plo + ((size_t)r[kk] << 8), *th = phi + ((size_t)r[kk] << 8);
            __m512i L0 = _mm512_loadu_si512(tl), L1 = _mm512_loadu_si512(tl + 64);
            __m512i L2 = _mm512_loadu_si512(tl + 128), L3 = _mm512_loadu_si512(tl + 192);
            __m512i H0 = _mm512_loadu_si512(th), H1 = _mm512_loadu_si512(th + 64);
            __m512i H2 = _mm512_loadu_si512(th + 128), H3 = _mm512_loadu_si512(th + 192);
            const uint8_t *p = P + (size_t)kk * ldp + j0;
            for (int v = 0; v < QK_NV; v++) {
                __m512i idx = _mm512_maskz_loadu_epi8(lm[v], p + 64 * v);
                __mmask64 up = _mm512_movepi8_mask(idx); /* index bit 7: entries 128..255 */
                /* entries 0..127 where bit 7 is clear (the index passes through elsewhere), then 128..255 */
                __m512i l = _mm512_mask2_permutex2var_epi8(L0, idx, ~up, L1);
                l = _mm512_mask2_permutex2var_epi8(L2, l, up, L3);
                __m512i h = _mm512_mask2_permutex2var_epi8(H0, idx, ~up, H1);
                h = _mm512_mask2_permutex2var_epi8(H2, h, up, H3);
                le[v] = _mm512_add_epi16(le[v], _mm512_and_si512(l, m8));
                lo_[v] = _mm512_add_epi16(lo_[v], _mm512_srli_epi16(l, 8));
                he[v] = _mm512_add_epi16(he[v], _mm512_and_si512(h, m8));
                ho[v] = _mm512_add_epi16(ho[v], _mm512_srli_epi16(h, 8));
            }
        }
        /* widen: 16-bit lane q of the even sums is column 2q, of the odd ones 2q + 1. unpacklo/hi
         * interleave them per 128-bit block (block g: columns 16g .. 16g+7, and 16g+8 .. 16g+15), and
         * a two-source permute of 64-bit units puts 32 columns in order */
        const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
        const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
        for (int v = 0; v < QK_NV; v++) {
            __m512i ul = _mm512_unpacklo_epi16(le[v], lo_[v]), uh = _mm512_unpackhi_epi16(le[v], lo_[v]);
            __m512i vl = _mm512_unpacklo_epi16(he[v], ho[v]), vh = _mm512_unpackhi_epi16(he[v], ho[v]);
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
    (void)threads;
#pragma omp parallel num_threads(threads)
    {
        int64_t s[QK_COLS];
        float out[QK_COLS];
#pragma omp for schedule(dynamic, 4)
        for (long tI = 0; tI < tiles; tI++) {
            int r = (int)(tI / nch), j0 = (int)(tI % nch) * QK_COLS;
            int jn = cols - j0 < QK_COLS ? cols - j0 : QK_COLS;
            qk_row(plo, phi, R + (size_t)r * ldr, k, P, ldp, j0, jn, s);
            for (int c = 0; c < jn; c++) s[c] += ktmin;
            q_epilogue(Rs, Cs, r, j0, jn, k, s, swap, ct, beta, C, ldc, out);
        }
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
    uint8_t *ta = NULL, *tb = NULL, *P = NULL;
    int rc = MTS_OK, okA = qside_make(a, m, k, t->bits, t->is_signed, &A), okB = qside_make(b, n, k, t->bits, t->is_signed, &B);
    if (!okA || !okB) {
        rc = mts_fail(err, MTS_ENOMEM, "integer GEMM: out of memory (%d x %d x %d)", m, n, k);
        goto done;
    }
#if GEMM_VBMI
    if (!scalar_only && t->planes && k > 0) {
        /* the operand with more rows runs across the lanes */
        int swap = m > n;
        int rows = swap ? n : m, cols = swap ? m : n;
        const mts_qopd *Ro = swap ? b : a, *Co = swap ? a : b;
        const uint8_t *R = row_major(Ro, rows, k, swap ? &tb : &ta);
        size_t ldr = Ro->kmajor ? (size_t)k : Ro->ld, ldp = Co->ld;
        const uint8_t *Pc = Co->code;
        if (!Co->kmajor) { /* pack [k][cols] */
            P = mts__gemm_ws_alloc((size_t)k * (size_t)cols + 1, 0);
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
    mts__gemm_ws_free(ta);
    mts__gemm_ws_free(tb);
    mts__gemm_ws_free(P);
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

int mts__gemm_int(const mts_lut *lut, int threads, int scalar_only, int ct, int transA, int transB, int m, int n,
                  int k, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  mts_err *err)
{
    mts_affine pa, pb;
    mts_qtab t;
    int rc;
    double lo, hi;
    size_t K = (size_t)k;
    uint8_t *ca = mts__gemm_ws_alloc((size_t)m * K + 1, 0), *cb = mts__gemm_ws_alloc((size_t)n * K + 1, 0);
    memset(&t, 0, sizeof t);
    if (!ca || !cb) {
        rc = mts_fail(err, MTS_ENOMEM, "gemm: out of memory quantizing INT operands (%d x %d x %d)", m, n, k);
        goto done;
    }
    finite_range(A, lda, transA, m, k, &lo, &hi);
    if ((rc = mts_affine_from_range(lo, hi, lut->int_bits, lut->int_signed, &pa, err)) != MTS_OK) goto done;
    finite_range(B, ldb, transB, k, n, &lo, &hi);
    if ((rc = mts_affine_from_range(lo, hi, lut->int_bits, lut->int_signed, &pb, err)) != MTS_OK) goto done;
    uint32_t mask = (1u << lut->int_bits) - 1u;
    (void)threads;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8) if ((size_t)m * K > 65536)
    for (int i = 0; i < m; i++)
        for (int kk = 0; kk < k; kk++)
            ca[(size_t)i * K + (size_t)kk] = (uint8_t)((uint32_t)mts_affine_quantize(&pa, gemm_at(A, lda, transA, i, kk)) & mask);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8) if ((size_t)n * K > 65536)
    for (int j = 0; j < n; j++)
        for (int kk = 0; kk < k; kk++)
            cb[(size_t)j * K + (size_t)kk] = (uint8_t)((uint32_t)mts_affine_quantize(&pb, gemm_at(B, ldb, transB, kk, j)) & mask);
    if ((rc = mts_qtab_init(&t, lut, err)) != MTS_OK) goto done;
    mts_qopd qa = {ca, K, NULL, pa.zero_point, NULL, pa.scale, 0}, qb = {cb, K, NULL, pb.zero_point, NULL, pb.scale, 0};
    rc = mts_qgemm(&t, threads, scalar_only, ct, m, n, k, &qa, &qb, beta, C, ldc, err);
done:
    mts_qtab_free(&t);
    mts__gemm_ws_free(ca);
    mts__gemm_ws_free(cb);
    return rc;
}
