/* dispatch.c - mts_gemm: argument checks, operand quantization (RNE into the
 * provider's input format) and packing into dense [m][k] / [k][n] arrays,
 * then dispatch to the kernel family of the provider (docs/gemm.md). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "gemm_internal.h"
#include "gemm_simd.h"
#include "mantis/clock.h"
#include "mantis/gpu.h"

const char *mts_gemm_isa(void)
{
#if defined(__AVX512F__)
    return "avx512";
#elif defined(__AVX2__)
    return "avx2";
#else
    return "scalar";
#endif
}

static int resolve_threads(int threads)
{
#ifdef _OPENMP
    return threads > 0 ? threads : omp_get_num_procs();
#else
    (void)threads;
    return 1;
#endif
}

/* crow: the length of a row of the result as stored (n, or m for C^T). */
static int check_shapes(int transA, int transB, int m, int n, int k, const float *A, int lda,
                        const float *B, int ldb, const float *C, int ldc, int crow, mts_err *err)
{
    if (m < 0 || n < 0 || k < 0)
        return mts_fail(err, MTS_EINVAL, "gemm: shape m=%d n=%d k=%d, expected non-negative sizes", m, n, k);
    int arow = transA ? m : k, brow = transB ? k : n;
    if (lda < (arow > 1 ? arow : 1) || ldb < (brow > 1 ? brow : 1) || ldc < (crow > 1 ? crow : 1))
        return mts_fail(err, MTS_EINVAL,
                        "gemm: leading dimensions lda=%d ldb=%d ldc=%d, expected >= %d, %d, %d (one row)", lda,
                        ldb, ldc, arow, brow, crow);
    if ((m > 0 && n > 0 && !C) || (m > 0 && k > 0 && !A) || (k > 0 && n > 0 && !B))
        return mts_fail(err, MTS_EINVAL, "gemm: NULL matrix pointer for a non-empty operand");
    return MTS_OK;
}

/* The format operands are quantized to: in_fmt, or the implementation's own
 * when in_fmt is left all-zero. */
static int operand_format(const mts_provider *p, const mts_format *own, mts_format *f, mts_err *err)
{
    *f = p->in_fmt.M == 0 && p->in_fmt.E == 0 ? *own : p->in_fmt;
    return mts_format_check(f, err);
}

static int check_provider(const mts_provider *p, mts_err *err)
{
    int rc;
    if (!p) return mts_fail(err, MTS_EINVAL, "gemm: NULL provider");
    switch (p->kind) {
    case MTS_PROV_BLAS:
    case MTS_PROV_NATIVE: break;
    case MTS_PROV_LUT:
        if (!p->lut || p->lut->kind != MTS_LUT_FLOAT || !p->lut->entry ||
            p->lut->n != (size_t)1 << (2 * p->lut->fmt.M))
            return mts_fail(err, MTS_EINVAL, "gemm: LUT provider needs a float LUT with 2^(2M) entries");
        if ((rc = mts_format_check(&p->lut->fmt, err)) != MTS_OK) return rc;
        break;
    case MTS_PROV_MULOP:
        if (!p->mul || !p->mul->fn) return mts_fail(err, MTS_EINVAL, "gemm: MULOP provider without a mulop");
        break;
    case MTS_PROV_INT:
        if (!p->lut || p->lut->kind != MTS_LUT_INT || !p->lut->entry || p->lut->int_bits < 1 ||
            p->lut->int_bits > 8 || p->lut->n != (size_t)1 << (2 * p->lut->int_bits))
            return mts_fail(err, MTS_EINVAL, "gemm: INT provider needs an integer table of 1..8-bit operands");
        if (p->fmaq)
            return mts_fail(err, MTS_EINVAL, "gemm: FMAq accumulation needs a float provider, not INT");
        break;
    default: return mts_fail(err, MTS_EINVAL, "gemm: unknown provider kind %d", (int)p->kind);
    }
    if (p->fmaq) {
        if ((rc = mts_qfmt_check(&p->qprod, err)) != MTS_OK) return rc;
        if ((rc = mts_qfmt_check(&p->qacc, err)) != MTS_OK) return rc;
    }
    return MTS_OK;
}

/* One row of opX, quantized with mts_fmt_quantize(f, x, MTS_RNE) for an E8
 * IEEE format (same exponent range as FP32) at M < 23 bits, branch-free so
 * it vectorises: round the mantissa with the carry running
 * into the exponent (a carry out of the largest finite binade gives exactly
 * inf), NaN -> canonical NaN, inf kept, FP32 subnormals -> signed zero. */
static void quantize_row_e8(uint32_t *dst, const float *src, int cols, int M)
{
    for (int c = 0; c < cols; c++) dst[c] = gemm_q_e8(mts_f2u(src[c]), M);
}

static int is_e8(const mts_format *f) { return f->E == 8 && f->bias == 127 && f->ieee; }

/* 1 if any of the n words is an operand the SIMD kernels do not take
 * (gemm_exp_ok), written so that it vectorises. */
static int any_bad(const uint32_t *x, size_t n)
{
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t e = (x[i] >> 23) & 0xFFu;
        bad |= e == 0 ? (x[i] & MTS_F32_MAN) != 0 : e - (127u - 62u) > 124u;
    }
    return bad != 0;
}

/* 1 when some of the n floats of X, rounded to an E8 format (RNE, as the
 * quantize pass), may be an operand the SIMD kernels do not take
 * (gemm_exp_ok), read without writing them: the check a deferred B
 * (gemm_job.bround) still needs. Rounding may raise the exponent by one,
 * so a nonzero exponent outside [65, 188] counts: exact but for 189 that
 * does not carry and 64 that does, whose false alarms only send B through
 * packing (same bits, per-panel flags). Subnormals count too: the quantize
 * pass flushes them to zero, but the kernels' in-register rounding (the RNE
 * step alone, vq_clean) does not, and carries 0x007FFFFF into 2^-126. */
static int bad_rounded_in(const float *X, size_t i0, size_t i1)
{
    unsigned acc = 0;
    for (size_t i = i0; i < i1; i++) {
        uint32_t x;
        memcpy(&x, X + i, sizeof x);
        uint32_t e = (x >> 23) & 0xFFu;
        acc |= ((x & 0x7FFFFFFFu) != 0) & (e - 65u > 123u); /* e = 0: a subnormal */
    }
    return acc != 0;
}
static int any_bad_rounded(const float *X, size_t n, int threads)
{
    enum { BLK = 16384 };
    size_t nblk = (n + BLK - 1) / BLK;
    int bad = 0;
    if ((double)n < 65536.0 || threads <= 1) return bad_rounded_in(X, 0, n); /* no team: gemm_internal.h */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4) reduction(| : bad)
    for (size_t b = 0; b < nblk; b++) bad |= bad_rounded_in(X, b * BLK, b * BLK + BLK < n ? b * BLK + BLK : n);
    return bad;
}

int gemm_b_bad(const gemm_job *g)
{
    if (g->bbad >= 0) return g->bbad;
    const float *B = (const float *)(const void *)g->B;
    if (g->ldb == (size_t)g->n) return any_bad_rounded(B, (size_t)g->k * (size_t)g->n, g->threads);
    int bad = 0; /* rows ldb apart: row by row (a block of a wider matrix, no team) */
    for (int kk = 0; kk < g->k && !bad; kk++)
        bad = bad_rounded_in(B + (size_t)kk * g->ldb, 0, (size_t)g->n);
    return bad;
}

#if defined(__AVX2__) && !defined(__AVX512F__)
/* The 8 x 8 block t[w + c][h + r] (c, r < 8) transposed in registers: row r
 * (lanes c) stored to out + r * ld, its first nc words, for r < nr. */
static void transpose8_store(const uint32_t t[16][16], int h, int w, uint32_t *out, size_t ld, int nr, int nc)
{
    __m256 a[8], b[8];
    for (int c = 0; c < 8; c++) a[c] = _mm256_loadu_ps((const float *)(const void *)(t[w + c] + h));
    for (int c = 0; c < 8; c += 2) { /* 32-bit pairs */
        b[c] = _mm256_unpacklo_ps(a[c], a[c + 1]);
        b[c + 1] = _mm256_unpackhi_ps(a[c], a[c + 1]);
    }
    for (int c = 0; c < 8; c += 4) { /* 64-bit pairs: a[c + j] holds rows j, j + 4 (halves) of columns c..c + 3 */
        a[c] = _mm256_shuffle_ps(b[c], b[c + 2], 0x44);
        a[c + 1] = _mm256_shuffle_ps(b[c], b[c + 2], 0xEE);
        a[c + 2] = _mm256_shuffle_ps(b[c + 1], b[c + 3], 0x44);
        a[c + 3] = _mm256_shuffle_ps(b[c + 1], b[c + 3], 0xEE);
    }
    const __m256i m = vi_lanes(nc);
    for (int r = 0; r < 4 && r < nr; r++) /* row r: the low halves of a[r] (columns 0..3) and a[4 + r] (4..7) */
        _mm256_maskstore_ps((float *)(void *)(out + (size_t)r * ld), m,
                            _mm256_permute2f128_ps(a[r], a[4 + r], 0x20));
    for (int r = 4; r < 8 && r < nr; r++)
        _mm256_maskstore_ps((float *)(void *)(out + (size_t)r * ld), m,
                            _mm256_permute2f128_ps(a[r - 4], a[r], 0x31));
}
#endif

/* Rows [r0, r1) of a transposed opX (element (r, c) at X[c*ld + r]) in
 * blocks of 16 x 16: each column of X is read 16 contiguous floats at a
 * time and the block is written out transposed, instead of one strided read
 * per element (a 50176 x 25 weight-gradient operand read 25 scattered
 * streams). Same values as quantize_row_e8 on each row. */
#if defined(__AVX512F__)
#include <immintrin.h>
/* t[16][16] transposed in registers (4 shuffle stages), row r stored to
 * out + r * ld (its first nc words), for r < nr. */
static void transpose16_store(const uint32_t t[16][16], uint32_t *out, size_t ld, int nr, int nc)
{
    __m512i a[16], b[16];
    for (int i = 0; i < 16; i++) a[i] = _mm512_loadu_si512((const void *)t[i]);
    for (int i = 0; i < 16; i += 2) { /* 32-bit pairs */
        b[i] = _mm512_unpacklo_epi32(a[i], a[i + 1]);
        b[i + 1] = _mm512_unpackhi_epi32(a[i], a[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* 64-bit pairs */
        a[i] = _mm512_unpacklo_epi64(b[i], b[i + 2]);
        a[i + 1] = _mm512_unpackhi_epi64(b[i], b[i + 2]);
        a[i + 2] = _mm512_unpacklo_epi64(b[i + 1], b[i + 3]);
        a[i + 3] = _mm512_unpackhi_epi64(b[i + 1], b[i + 3]);
    }
    /* now a[4g + c], 128-bit lane L, holds column 4L + c of rows 4g..4g+3;
     * gather the four row groups of each column into one vector */
    __m512i out_v[16];
    for (int c = 0; c < 4; c++) {
        __m512i plo = _mm512_shuffle_i32x4(a[c], a[c + 4], 0x44), phi = _mm512_shuffle_i32x4(a[c], a[c + 4], 0xEE);
        __m512i qlo = _mm512_shuffle_i32x4(a[c + 8], a[c + 12], 0x44), qhi = _mm512_shuffle_i32x4(a[c + 8], a[c + 12], 0xEE);
        out_v[c] = _mm512_shuffle_i32x4(plo, qlo, 0x88);      /* column c */
        out_v[4 + c] = _mm512_shuffle_i32x4(plo, qlo, 0xDD);  /* column 4 + c */
        out_v[8 + c] = _mm512_shuffle_i32x4(phi, qhi, 0x88);  /* column 8 + c */
        out_v[12 + c] = _mm512_shuffle_i32x4(phi, qhi, 0xDD); /* column 12 + c */
    }
    __mmask16 m = nc >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nc) - 1u);
    for (int r = 0; r < nr; r++) _mm512_mask_storeu_epi32(out + (size_t)r * ld, m, out_v[r]);
}
#endif

/* Rows [r0, r1) of a transposed opX (element (r, c) at X[c*ld + r]) in
 * blocks of 16 x 16: 16 columns of X are read 16 contiguous floats at a
 * time, quantized to M mantissa bits (M < 0: FP32 as given, the native
 * provider's operands), and the block is transposed in registers on
 * AVX-512 and AVX2 builds (AVX2: four 8 x 8 blocks; its scalar transpose
 * behind a memcpy per column was 9% of a one-thread FP32 ResNet-20 epoch),
 * instead of one strided read per element (a 50176 x 25
 * weight-gradient operand read 25 scattered streams). Same values as
 * quantize_row_e8 on each row. */
static void block_t(uint32_t *dst, const float *X, int ld, int r0, int r1, int cols, int M)
{
    enum { B = 16 };
    uint32_t t[B][B];
    memset(t, 0, sizeof t);
#if defined(__AVX512F__)
    const vq_k q = vq_consts(M < 0 ? 0 : M);
#endif
    for (int rb = r0; rb < r1; rb += B) {
        int nr = r1 - rb < B ? r1 - rb : B;
        for (int c0 = 0; c0 < cols; c0 += B) {
            int nc = cols - c0 < B ? cols - c0 : B;
#if defined(__AVX512F__)
            const __mmask16 ld16 = (__mmask16)((1u << nr) - 1u);
            for (int c = 0; c < nc; c++) { /* gemm_q_e8 on 16 lanes: vq_full */
                __m512i v = _mm512_maskz_loadu_epi32(ld16, X + (size_t)(c0 + c) * (size_t)ld + (size_t)rb);
                _mm512_storeu_si512((void *)t[c], M < 0 ? v : vq_full(&q, v));
            }
            transpose16_store((const uint32_t(*)[B])t, dst + (size_t)rb * (size_t)cols + (size_t)c0, (size_t)cols, nr, nc);
#elif defined(__AVX2__)
            const __m256i lo8 = vi_lanes(nr), hi8 = vi_lanes(nr - 8);
            for (int c = 0; c < nc; c++) { /* lanes past nr load +0 and are never stored */
                const float *src = X + (size_t)(c0 + c) * (size_t)ld + (size_t)rb;
                __m256i a = nr >= 8 ? _mm256_loadu_si256((const __m256i *)(const void *)src)
                                    : _mm256_maskload_epi32((const int *)(const void *)src, lo8);
                __m256i b = nr >= 16 ? _mm256_loadu_si256((const __m256i *)(const void *)(src + 8))
                            : nr > 8 ? _mm256_maskload_epi32((const int *)(const void *)(src + 8), hi8)
                                     : _mm256_setzero_si256();
                _mm256_storeu_si256((__m256i *)(void *)t[c], a);
                _mm256_storeu_si256((__m256i *)(void *)(t[c] + 8), b);
            }
            if (M >= 0) /* vectorises: gemm_q_e8 is one expression */
                for (int c = 0; c < nc; c++)
                    for (int r = 0; r < B; r++) t[c][r] = gemm_q_e8(t[c][r], M);
            for (int h = 0; h < B; h += 8)     /* rows rb + h .. */
                for (int w = 0; w < nc; w += 8) /* columns c0 + w .. */
                    transpose8_store((const uint32_t(*)[B])t, h, w,
                                     dst + (size_t)(rb + h) * (size_t)cols + (size_t)(c0 + w), (size_t)cols, nr - h,
                                     nc - w);
#else
            for (int c = 0; c < nc; c++) {
                const float *src = X + (size_t)(c0 + c) * (size_t)ld + (size_t)rb;
                if (M < 0) memcpy(t[c], src, sizeof(float) * (size_t)nr);
                else quantize_row_e8(t[c], src, nr, M);
            }
            for (int r = 0; r < nr; r++)
                for (int c = 0; c < nc; c++) dst[(size_t)(rb + r) * (size_t)cols + (size_t)(c0 + c)] = t[c][r];
#endif
        }
    }
}

/* Rows [16 blk, 16 blk + 16) of pack; 1 when want_bad and one is bad. */
static int pack_rows(uint32_t *dst, const float *X, int ld, int trans, int rows, int cols, const mts_format *qf,
                     const mts_format *rtz, int want_bad, int blk)
{
    int fast = qf && !rtz && is_e8(qf) && qf->M < 23;
    int asis = !qf && !rtz; /* FP32 operands used as given: copied (rows) or transposed in blocks */
    int r0 = blk * 16, r1 = r0 + 16 < rows ? r0 + 16 : rows;
    if (fast && trans) block_t(dst, X, ld, r0, r1, cols, qf->M);
    else if (asis && trans) block_t(dst, X, ld, r0, r1, cols, -1);
    else if (asis)
        for (int r = r0; r < r1; r++)
            memcpy(dst + (size_t)r * (size_t)cols, X + (size_t)r * (size_t)ld, sizeof(float) * (size_t)cols);
    else
        for (int r = r0; r < r1; r++) {
            uint32_t *row = dst + (size_t)r * (size_t)cols;
            if (fast) {
                quantize_row_e8(row, X + (size_t)r * (size_t)ld, cols, qf->M);
                continue;
            }
            for (int c = 0; c < cols; c++) {
                uint32_t x = mts_f2u(gemm_at(X, ld, trans, r, c));
                if (qf) x = mts_fmt_quantize(qf, x, MTS_RNE);
                if (rtz) x = mts_fmt_quantize(rtz, x, MTS_RTZ);
                row[c] = x;
            }
        }
    return want_bad && any_bad(dst + (size_t)r0 * (size_t)cols, (size_t)(r1 - r0) * (size_t)cols);
}

/* Reads opX (rows x cols) into a dense array, quantizing each element:
 * qf NULL keeps FP32; rtz (LUT) additionally truncates into the LUT's
 * format as AMSim's rule 1 does, so kernels may index the table directly.
 * With want_bad, returns 1 when some element is one the SIMD kernels do
 * not take (0 otherwise, and always 0 without). Threads only where the
 * array is large enough to pay for waking them. */
static int pack(uint32_t *dst, const float *X, int ld, int trans, int rows, int cols, const mts_format *qf,
                const mts_format *rtz, int threads, int want_bad)
{
    int bad = 0;
    int nblk = (rows + 15) / 16;
    if ((double)rows * cols < 65536.0 || threads <= 1) { /* no team: gemm_internal.h */
        for (int blk = 0; blk < nblk; blk++) bad |= pack_rows(dst, X, ld, trans, rows, cols, qf, rtz, want_bad, blk);
        return bad;
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4) reduction(| : bad)
    for (int blk = 0; blk < nblk; blk++) bad |= pack_rows(dst, X, ld, trans, rows, cols, qf, rtz, want_bad, blk);
    return bad;
}

/* Padded size of x in tiles of t. */
static double padded(int x, int t) { return (double)((x + t - 1) / t) * t; }

/* Cost of one job layout in vector products (16 lanes): the kernels
 * vectorise across n and tile MR = 4 rows, so per k step a job does
 * padded(n, 16) / 16 of them for each of padded(m, 4) rows, plus a row's
 * own loads (its A element, its table row: about ROW_COST products), plus
 * writing its B panel when B is packed (many row blocks; see
 * gemm_want_rawb), plus the operands the quantize pass reads across
 * rows (tA: A stored [k][m]; tB: B stored [n][k]) at about TRANSPOSE_COST
 * products an element. The constants were fitted on LeNet-5's GEMMs
 * (AVX-512 LUT kernel, 2026-11-23); the choice never changes a result.
 * The LUT kernel's quad form (VBMI, 64-column tiles: n >= 64) shares one
 * lookup and its row loads among four vectors, so a row costs it about
 * ROW_COST_QUAD (fitted on LeNet-300-100's GEMMs, 2026-11-26: the 64 x 300
 * x 784 forward pass runs in 0.87 ms as 300 x 64 against 1.06 ms). */
#define ROW_COST 3.0
#define ROW_COST_QUAD 1.0
#define TRANSPOSE_COST 1.0
/* A job whose outputs go down C's columns (a plain mts_gemm_t, a swapped
 * mts_gemm) writes each tile row across many cache lines (and, with C's
 * rows 4 KiB apart, a convolution's input gradient of 1024 pixels per
 * chunk, into one set of the L1 cache), and cannot store a row with
 * vector stores (gemm_store_row_v). Per output, once; twice for FP32
 * products, whose vector product is the cheaper. ResNet-20's 1024 x 144 x
 * 16 input gradient took 570 us stored down the columns and 130 us swapped
 * (LUT), its 192 x 576 x 64 one 270 us and 185 us (FP32); LeNet-300-100's
 * 64 x 100 x 300 forward GEMM stays swapped, 100 us against 120 us (LUT,
 * 2026-11-26). */
#define STORE_COST 1.0
#define STORE_COST_F32 2.0
static double layout_cost(int m, int n, int k, int tA, int tB, int quad)
{
    double row = quad && n >= 64 ? ROW_COST_QUAD : ROW_COST;
    double per_k = padded(m, 4) * (row + padded(n, 16) / 16.0) + ((m + 3) / 4 > 4 ? padded(n, 16) : 0.0);
    double transposed = (tA ? (double)m : 0.0) + (tB ? (double)n : 0.0);
    return (per_k + TRANSPOSE_COST * transposed) * k;
}

/* 1 when the transposed problem C^T = op(B)^T op(A)^T is clearly cheaper:
 * a GEMM with n = 6 (a convolution's output channels against batch x
 * pixels) would leave most lanes padding, and a weight gradient
 * dW = dY^T col^T reads both operands across rows where its transposed
 * problem reads neither. */
static int swap_pays(const gemm_job *g, int transA, int transB)
{
    int nr = g->fmaq ? gemm_fmaq_nr() : g->prod == GEMM_PROD_LUT ? gemm_lut_nr() : gemm_native_nr();
    if (nr == 0) return 0; /* scalar build: one output at a time either way */
    /* the LUT kernel's quad form: a bf16-class table on a VBMI build */
    int quad = !g->fmaq && g->prod == GEMM_PROD_LUT && gemm_lut_quad() && g->lut->fmt.E == 8 && g->lut->fmt.M <= 7;
    double plain = layout_cost(g->m, g->n, g->k, transA, transB, quad);
    double swapped = layout_cost(g->n, g->m, g->k, !transB, !transA, quad);
    /* the layout that stores C's columns (gemm_out) pays per output */
    double st = (g->prod == GEMM_PROD_F32 && !g->fmaq ? STORE_COST_F32 : STORE_COST) * g->m * g->n;
    if (g->ct) plain += st;
    else swapped += st;
    return swapped < 0.9 * plain;
}

static int run_float(const mts_provider *p, gemm_job *g, int transA, int transB, const float *A, int lda,
                     const float *B, int ldb, mts_err *err)
{
    mts_format qf, *qfp = NULL, *rtz = NULL;
    int rc;

    g->fmaq = p->fmaq ? 1 : 0;
    g->qprod = p->qprod;
    g->qacc = p->qacc;
    g->chunk = p->chunk > 0 ? p->chunk : 16;
    g->lut = p->lut;
    g->mul = p->mul;
    g->f32 = mts_format_e8(23);
    g->fp32 = NULL;
    switch (p->kind) {
    case MTS_PROV_LUT:
        if ((rc = operand_format(p, &p->lut->fmt, &qf, err)) != MTS_OK) return rc;
        qfp = &qf;
        /* a wider in_fmt leaves bits AMSim truncates away: drop them here */
        if (memcmp(&qf, &p->lut->fmt, sizeof qf)) rtz = (mts_format *)&p->lut->fmt;
        g->prod = GEMM_PROD_LUT;
        break;
    case MTS_PROV_MULOP:
        if ((rc = operand_format(p, &p->mul->fmt, &qf, err)) != MTS_OK) return rc;
        qfp = &qf;
        g->prod = GEMM_PROD_MULOP;
        break;
    default: /* NATIVE, and BLAS asked for FMAq */
        g->prod = g->fmaq ? GEMM_PROD_FP32M : GEMM_PROD_F32;
        if (g->fmaq && !(g->fp32 = mts_model_find("fp32")))
            return mts_fail(err, MTS_EINVAL, "gemm: FMAq with native products needs the \"fp32\" model");
        break;
    }
    int swap = !p->scalar_only && g->prod != GEMM_PROD_MULOP && swap_pays(g, transA, transB);
    size_t na = (size_t)g->m * (size_t)g->k, nb = (size_t)g->k * (size_t)g->n;
    /* the job's B operand, k x n: op(B), or op(A)^T when swapped */
    const float *jb = swap ? A : B;
    int jtrans = swap ? !transA : transB, jld = swap ? lda : ldb;
    /* B stored [k][n] (rows ldb apart), and a rounding every reader can
     * apply (or none): the kernels read the caller's array, no copy is
     * written */
    int roundable = !rtz && (!qfp || (is_e8(qfp) && qfp->M < 23));
    int defer = !jtrans && roundable;
    /* the job's A, m x k: op(A), or op(B)^T when swapped; the same rule */
    const float *ja = swap ? B : A;
    int atrans = swap ? !transB : transA, ald = swap ? ldb : lda;
    int adefer = !atrans && roundable;
    if (swap) { /* Aq holds op(B)^T, Bq op(A)^T */
        size_t t = na;
        na = nb;
        nb = t;
    }
    uint32_t *Aq = adefer ? NULL : gemm_ws_alloc(na * sizeof *Aq, 0);
    uint32_t *Bq = defer ? NULL : gemm_ws_alloc(nb * sizeof *Bq, 0);
    if ((!adefer && !Aq) || (!defer && !Bq)) {
        gemm_ws_free(Aq);
        gemm_ws_free(Bq);
        return mts_fail(err, MTS_ENOMEM, "gemm: out of memory packing %zu + %zu operands", na, nb);
    }
    if (swap) {
        /* the transposed problem: rows of op(B)^T against columns of op(A)^T */
        int m = g->m;
        g->swap = 1;
        g->m = g->n;
        g->n = m;
    }
    if (adefer) {
        g->around = qfp ? qfp->M : 0;
        g->A = (const uint32_t *)(const void *)ja;
        g->lda = (size_t)ald;
    } else {
        pack(Aq, ja, ald, atrans, g->m, g->k, qfp, rtz, g->threads, 0);
        g->A = Aq;
        g->lda = (size_t)g->k;
    }
    if (defer) {
        g->bround = qfp ? qfp->M : 0;
        /* unrounded (FP32 products) B is never read raw (no byte table):
         * 1 keeps any reader on the packed, per-panel-checked path; a
         * rounded one is scanned only if a kernel asks (gemm_b_bad) */
        g->bbad = g->bround ? -1 : 1;
        g->B = (const uint32_t *)(const void *)jb;
        g->ldb = (size_t)jld;
    } else {
        g->bbad = pack(Bq, jb, jld, jtrans, g->k, g->n, qfp, rtz, g->threads, 1);
        g->B = Bq;
        g->ldb = (size_t)g->n;
    }

    if (g->prod == GEMM_PROD_MULOP) rc = gemm_mulop(g, err);
    else if (p->scalar_only) rc = gemm_scalar(g, err);
    else if (g->fmaq) rc = gemm_fmaq(g, err);
    else if (g->prod == GEMM_PROD_LUT) rc = gemm_lut(g, err);
    else rc = gemm_native(g, err);
    gemm_ws_free(Aq);
    gemm_ws_free(Bq);
    return rc;
}

/* Providers that write C themselves (the GPU) compute into a
 * temporary for mts_gemm_t, which is then stored transposed with beta. */
static int via_transpose(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    float *t = malloc(sizeof *t * ((size_t)m * (size_t)n + 1));
    if (!t) return mts_fail(err, MTS_ENOMEM, "gemm: out of memory for a %d x %d transposed result", m, n);
    int rc = mts_gemm(p, transA, transB, m, n, k, A, lda, B, ldb, 0.0f, t, n > 0 ? n : 1, err);
    if (rc == MTS_OK)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                gemm_store(&C[(size_t)j * (size_t)ldc + (size_t)i], beta, t[(size_t)i * (size_t)n + (size_t)j]);
    free(t);
    return rc;
}

/* ------------------------------------------------ the CPU GEMM profile
 * MANTIS_CPU_PROFILE (set, not "0", read once): every CPU GEMM timed and
 * counted by shape, layout and kernel family (mts_gemm_profile). Rows past
 * PROF_MAX distinct ones are counted in prof_more only. */
enum { PROF_MAX = 128 };
typedef struct {
    int m, n, k, ta, tb, ct, cont, swap;
    const char *path;
    long calls;
    double s;
} prof_row;
static prof_row prof_rows[PROF_MAX];
static int prof_n;
static long prof_more;
static int prof_on;
static pthread_mutex_t prof_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t prof_once = PTHREAD_ONCE_INIT;

static void prof_init(void)
{
    const char *e = getenv("MANTIS_CPU_PROFILE");
    prof_on = e && *e && strcmp(e, "0") != 0;
}

static int profiling(void)
{
    pthread_once(&prof_once, prof_init);
    return prof_on;
}

/* The kernel family that runs provider p's CPU GEMMs (run_float's choice). */
static const char *prof_path(const mts_provider *p)
{
    if (p->kind == MTS_PROV_BLAS && !p->fmaq) return "blas";
    if (p->kind == MTS_PROV_INT) return p->scalar_only ? "int scalar" : "int";
    if (p->kind == MTS_PROV_MULOP) return "mulop";
    if (p->scalar_only) return "scalar";
    if (p->fmaq) return p->kind == MTS_PROV_LUT ? "fmaq lut" : "fmaq native";
    return p->kind == MTS_PROV_LUT ? "lut" : "native";
}

static void prof_add(const prof_row *r)
{
    pthread_mutex_lock(&prof_mu);
    int i = 0;
    while (i < prof_n && !(prof_rows[i].m == r->m && prof_rows[i].n == r->n && prof_rows[i].k == r->k &&
                           prof_rows[i].ta == r->ta && prof_rows[i].tb == r->tb && prof_rows[i].ct == r->ct &&
                           prof_rows[i].cont == r->cont && prof_rows[i].swap == r->swap &&
                           !strcmp(prof_rows[i].path, r->path)))
        i++;
    if (i == prof_n && prof_n < PROF_MAX) prof_rows[prof_n++] = (prof_row){r->m, r->n, r->k, r->ta, r->tb, r->ct,
                                                                           r->cont, r->swap, r->path, 0, 0.0};
    if (i < prof_n) {
        prof_rows[i].calls += r->calls;
        prof_rows[i].s += r->s;
    } else
        prof_more++;
    pthread_mutex_unlock(&prof_mu);
}

static int prof_cmp(const void *a, const void *b)
{
    double x = ((const prof_row *)a)->s, y = ((const prof_row *)b)->s;
    return x < y ? 1 : x > y ? -1 : 0;
}

size_t mts_gemm_profile(char *buf, size_t n)
{
    prof_row rows[PROF_MAX];
    pthread_mutex_lock(&prof_mu);
    int nr = prof_n;
    long more = prof_more;
    memcpy(rows, prof_rows, sizeof *rows * (size_t)nr);
    pthread_mutex_unlock(&prof_mu);
    qsort(rows, (size_t)nr, sizeof *rows, prof_cmp);
    size_t k = 0;
    if (n) buf[0] = '\0';
    for (int i = 0; i < nr; i++) {
        const prof_row *r = &rows[i];
        int w = snprintf(buf + k, k < n ? n - k : 0, "%s%dx%dx%d%s%s%s%s %s%s %ld calls %.3f s", k ? ", " : "", r->m,
                         r->n, r->k, r->ta || r->tb ? (r->ta ? ":t" : ":n") : "",
                         r->ta || r->tb ? (r->tb ? "t" : "n") : "", r->ct ? " C^T" : "", r->cont ? " acc" : "",
                         r->path, r->swap ? " swapped" : "", r->calls, r->s);
        if (w > 0) k += (size_t)w;
        if (k >= n) break;
    }
    if (more && k < n) {
        int w = snprintf(buf + k, n - k, "%s%ld calls of other shapes", k ? ", " : "", more);
        if (w > 0) k += (size_t)w;
    }
    return k < n ? k : (n ? n - 1 : 0);
}

static int gemm_cpu(const mts_provider *p, int ct, int cont, gemm_tabs *tabs, int transA, int transB, int m, int n,
                    int k, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc, int *swap,
                    mts_err *err);

/* mts_gemm (ct 0), mts_gemm_t (ct 1) and mts_gemm_acc (cont 1); tabs: a
 * batch's shared tables, or NULL. */
static int gemm_run(const mts_provider *p, int ct, int cont, gemm_tabs *tabs, int transA, int transB, int m, int n, int k, const float *A,
                    int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    int rc;
    if ((rc = check_provider(p, err)) != MTS_OK) return rc;
    /* C^T is an n x m matrix: its row is m long */
    if ((rc = check_shapes(transA, transB, m, n, k, A, lda, B, ldb, C, ldc, ct ? m : n, err)) != MTS_OK) return rc;
    if (p->device == MTS_GPU_DEVICE_CUDA) /* gpu/: same results; its errors name the missing piece */
        return ct ? via_transpose(p, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err)
                  : mts_gpu_gemm(p, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
    if (p->device != 0) return mts_fail(err, MTS_EINVAL, "gemm: unknown device %d", p->device);
    if (m == 0 || n == 0 || (cont && k == 0)) return MTS_OK;
    if (!profiling())
        return gemm_cpu(p, ct, cont, tabs, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, NULL, err);
    prof_row r = {m, n, k, transA, transB, ct, cont, 0, prof_path(p), 1, 0.0};
    double t0 = mts_clock_now();
    rc = gemm_cpu(p, ct, cont, tabs, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, &r.swap, err);
    r.s = mts_clock_now() - t0;
    prof_add(&r);
    return rc;
}

/* gemm_run's CPU part, after the checks; *swap (unless NULL): 1 when the
 * kernels ran the transposed problem. */
static int gemm_cpu(const mts_provider *p, int ct, int cont, gemm_tabs *tabs, int transA, int transB, int m, int n,
                    int k, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc, int *swap,
                    mts_err *err)
{
    int threads = resolve_threads(p->threads);
    /* a thread team costs more than a small product (waking it, and its
     * workers spinning afterwards); results do not depend on the count */
    if ((double)m * n * k < 262144.0) threads = 1;
    if (k == 0) { /* empty sum: y = +0 for every provider */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                gemm_store(ct ? &C[(size_t)j * (size_t)ldc + (size_t)i] : &C[(size_t)i * (size_t)ldc + (size_t)j],
                           beta, 0.0f);
        return MTS_OK;
    }
    if (p->kind == MTS_PROV_BLAS && !p->fmaq) /* C^T = op(B)^T op(A)^T; FP32 products commute */
        return ct ? gemm_blas(threads, !transB, !transA, n, m, k, B, ldb, A, lda, beta, C, ldc, err)
                  : gemm_blas(threads, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
    if (p->kind == MTS_PROV_INT)
        return gemm_int(p->lut, threads, p->scalar_only, ct, transA, transB, m, n, k, A, lda, B, ldb, beta, C,
                             ldc, err);

    gemm_job g;
    memset(&g, 0, sizeof g);
    g.m = m;
    g.n = n;
    g.k = k;
    g.beta = beta;
    g.C = C;
    g.ldc = ldc;
    g.ct = ct;
    g.cont = cont;
    g.tabs = tabs;
    g.threads = threads;
    int rc = run_float(p, &g, transA, transB, A, lda, B, ldb, err);
    if (swap) *swap = g.swap;
    return rc;
}

int mts_gemm(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    return gemm_run(p, 0, 0, NULL, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
}

int mts_gemm_t(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    return gemm_run(p, 1, 0, NULL, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
}

int mts_gemm_acc_ok(const mts_provider *p)
{
    return p && !p->fmaq && p->device == 0 &&
           (p->kind == MTS_PROV_NATIVE || p->kind == MTS_PROV_LUT || p->kind == MTS_PROV_MULOP);
}

int mts_gemm_acc(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
                 const float *B, int ldb, float *C, int ldc, mts_err *err)
{
    int rc = check_provider(p, err);
    if (rc != MTS_OK) return rc;
    if (!mts_gemm_acc_ok(p))
        return mts_fail(err, MTS_EUNSUPPORTED,
                        "gemm: continuing sums needs FP32 accumulation on the CPU (NATIVE, LUT or MULOP without FMAq)");
    return gemm_run(p, 0, 1, NULL, transA, transB, m, n, k, A, lda, B, ldb, 0.0f, C, ldc, err);
}

int mts_gemm_batch(const mts_provider *p, int count, int transA, int transB, int m, int n, int k,
                   const float *const *A, int lda, const float *const *B, int ldb, float beta, float *const *C,
                   int ldc, mts_err *err)
{
    int rc = check_provider(p, err);
    if (rc != MTS_OK) return rc;
    if (count < 0) return mts_fail(err, MTS_EINVAL, "gemm: batch of %d GEMMs", count);
    if (count == 0) return MTS_OK;
    if (!A || !B || !C) return mts_fail(err, MTS_EINVAL, "gemm: NULL pointer array for a batch");
    /* small GEMMs side by side, one thread each; large ones in turn, each
     * on the provider's threads (results never depend on which) */
    int T = p->device ? 1 : resolve_threads(p->threads);
    if ((double)m * n * k >= 262144.0 || (p->kind == MTS_PROV_MULOP && p->mul && p->mul->serial)) T = 1;
    T = T < count ? T : count;
    enum { TMAX = 256 };
    T = T > TMAX ? TMAX : T;
    mts_provider p1 = *p;
    if (T > 1) p1.threads = 1;
    gemm_tabs tabs[TMAX];
    memset(tabs, 0, sizeof(gemm_tabs) * (size_t)T);
    int first = count;
    rc = MTS_OK;
    if (T == 1) { /* in turn, no team: gemm_internal.h */
        for (int b = 0; b < count && rc == MTS_OK; b++)
            rc = gemm_run(&p1, 0, 0, &tabs[0], transA, transB, m, n, k, A[b], lda, B[b], ldb, beta, C[b], ldc, err);
    } else {
#pragma omp parallel for num_threads(T) schedule(static)
        for (int b = 0; b < count; b++) {
            int t = 0;
#ifdef _OPENMP
            t = omp_get_thread_num();
#endif
            mts_err e;
            int r = gemm_run(&p1, 0, 0, &tabs[t], transA, transB, m, n, k, A[b], lda, B[b], ldb, beta, C[b], ldc,
                             &e);
            if (r != MTS_OK) {
#pragma omp critical(mts_gemm_batch)
                if (b < first) {
                    first = b;
                    rc = r;
                    if (err) *err = e;
                }
            }
        }
    }
    for (int t = 0; t < T; t++) {
        gemm_ws_free(tabs[t].tb[0]);
        gemm_ws_free(tabs[t].tb[1]);
        gemm_ws_free(tabs[t].tf);
    }
    return rc;
}
