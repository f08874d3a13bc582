/* conv.c - Conv2D as im2col + GEMM; backward as two GEMMs + col2im.
 *
 * The whole batch is unrolled into one col matrix [K][N*P] (K = cin*k*k,
 * P = oh*ow) so that each pass is a single GEMM whose reductions (over K
 * forward, over N*P for the weight gradient, over cout for the input
 * gradient) all run through the provider in its documented order. */
#include <stdlib.h>
#include <string.h>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

#include "mantis/fmath.h"
#include "mantis/mul.h"
#include "mantis/nn_ops.h"
#include "mantis/nn_trace.h"
#include "nn_internal.h"

int mts_conv_geom_init(mts_conv_geom *g, mts_err *err)
{
    if (g->cin < 1 || g->cout < 1 || g->k < 1 || g->stride < 1 || g->pad < 0)
        return mts_fail(err, MTS_EINVAL, "conv: bad geometry (cin %d cout %d k %d stride %d pad %d)", g->cin,
                        g->cout, g->k, g->stride, g->pad);
    int hp = g->h + 2 * g->pad, wp = g->w + 2 * g->pad;
    if (hp < g->k || wp < g->k)
        return mts_fail(err, MTS_EINVAL, "conv: %dx%d kernel larger than padded input %dx%d", g->k, g->k, hp, wp);
    g->oh = (hp - g->k) / g->stride + 1;
    g->ow = (wp - g->k) / g->stride + 1;
    return MTS_OK;
}

/* The readable references: one element at a time, bounds checked. */
void mts_im2col_ref(const mts_conv_geom *g, int N, const float *x, float *col)
{
    int k = g->k, P = g->oh * g->ow;
    size_t NP = (size_t)N * P;
    for (int ci = 0; ci < g->cin; ci++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                float *row = col + ((size_t)(ci * k + ky) * k + kx) * NP;
                for (int n = 0; n < N; n++) {
                    const float *xp = x + ((size_t)n * g->cin + ci) * g->h * g->w;
                    float *r = row + (size_t)n * P;
                    for (int oy = 0; oy < g->oh; oy++) {
                        int iy = oy * g->stride - g->pad + ky;
                        for (int ox = 0; ox < g->ow; ox++) {
                            int ix = ox * g->stride - g->pad + kx;
                            r[oy * g->ow + ox] =
                                (iy >= 0 && iy < g->h && ix >= 0 && ix < g->w) ? xp[iy * g->w + ix] : 0.0f;
                        }
                    }
                }
            }
}

/* dst = src with a NaN as 0x7FC00000 (mts_fm_canon): col2im's sums, so a
 * NaN has the bits of the GPU's twin (which returns its own NaN) and not
 * the payload x86's additions happened to keep. */
static void canon_copy(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = mts_fm_canon(src[i]);
}

void mts_col2im_ref(const mts_conv_geom *g, int N, const float *dcolT, float *dx)
{
    int k = g->k, P = g->oh * g->ow, K = g->cin * k * k;
    memset(dx, 0, sizeof(float) * (size_t)N * g->cin * g->h * g->w);
    for (int n = 0; n < N; n++)
        for (int ci = 0; ci < g->cin; ci++) {
            float *xp = dx + ((size_t)n * g->cin + ci) * g->h * g->w;
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++) {
                    int r = (ci * k + ky) * k + kx;
                    for (int oy = 0; oy < g->oh; oy++) {
                        int iy = oy * g->stride - g->pad + ky;
                        if (iy < 0 || iy >= g->h) continue;
                        for (int ox = 0; ox < g->ow; ox++) {
                            int ix = ox * g->stride - g->pad + kx;
                            if (ix < 0 || ix >= g->w) continue;
                            xp[iy * g->w + ix] += dcolT[((size_t)n * P + oy * g->ow + ox) * K + r];
                        }
                    }
                }
        }
    size_t nx = (size_t)N * g->cin * g->h * g->w;
    canon_copy(dx, dx, nx);
}

/* The fast forms below work on a zero-padded copy of the input (or, for
 * col2im, a zero-padded accumulator), so no copy or add checks bounds; every
 * plane is hp x wp = (h + 2 pad) x (w + 2 pad), and SLACK zero floats after
 * the last one let a copy read whole vectors past a row's end. */
#define SLACK 16
#define VW 8 /* floats per vector of the copies (AVX2 width: full rate on every AVX2/AVX-512 core) */

static size_t padded_size(const mts_conv_geom *g, int N)
{
    return (size_t)N * g->cin * (size_t)(g->h + 2 * g->pad) * (size_t)(g->w + 2 * g->pad) + SLACK;
}

static float *pad_input(const mts_conv_geom *g, int N, const float *x, mts_err *err)
{
    size_t hp = (size_t)g->h + 2 * (size_t)g->pad, wp = (size_t)g->w + 2 * (size_t)g->pad;
    float *xp = malloc(sizeof(float) * padded_size(g, N));
    if (!xp) {
        mts_fail(err, MTS_ENOMEM, "conv: out of memory (padded input of %d x %d x %zu x %zu)", N, g->cin, hp, wp);
        return NULL;
    }
    memset(xp, 0, sizeof(float) * padded_size(g, N));
    for (size_t pl = 0; pl < (size_t)N * g->cin; pl++)
        for (int iy = 0; iy < g->h; iy++)
            memcpy(xp + (pl * hp + (size_t)(iy + g->pad)) * wp + g->pad, x + (pl * g->h + (size_t)iy) * g->w,
                   sizeof(float) * (size_t)g->w);
    return xp;
}

/* dst[0, n) = src[0, n). In whole vectors when they end before `end`: up
 * to VW - 1 floats after dst + n are then overwritten and after src + n
 * read. The callers write their output in increasing address order, so the
 * next copy overwrites the excess; reads stay inside the padded input. */
static inline void copy_over(float *dst, const float *src, int n, const float *end)
{
#if defined(__AVX2__)
    if (dst + (n + VW - 1) / VW * VW <= end) {
        for (int i = 0; i < n; i += VW) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
        return;
    }
#endif
    (void)end;
    memcpy(dst, src, sizeof(float) * (size_t)n);
}

/* The elements [*lo, *hi) of an n-float output row that come from an input
 * row of w floats shifted by `shift` (dst[i] = src[i + shift]): the others
 * lie in the padding. */
static inline void shifted_range(int n, int shift, int w, int *lo, int *hi)
{
    *lo = shift < 0 ? -shift : 0;
    *hi = w - shift < n ? w - shift : n;
}

/* dst[0, n) = row src shifted by `shift` with zeros outside it: dst[i] =
 * src[i + shift] where 0 <= i + shift < w, else +0 (every i when src is
 * NULL, a row in the padding). Nothing outside dst[0, n) is written and
 * nothing outside src[0, w) is read. */
static inline void copy_shifted(float *dst, const float *src, int n, int shift, int w)
{
    int lo, hi;
    shifted_range(n, shift, w, &lo, &hi);
    if (!src || hi <= lo) {
        memset(dst, 0, sizeof(float) * (size_t)n);
        return;
    }
    for (int i = 0; i < lo; i++) dst[i] = 0.0f;
    memcpy(dst + lo, src + lo + shift, sizeof(float) * (size_t)(hi - lo));
    for (int i = hi; i < n; i++) dst[i] = 0.0f;
}

#if defined(__AVX512F__)
#define ROW_VECS 8 /* rows of up to 128 floats in registers' reach; wider ones use copy_shifted */
#define ROW_LANES 16
/* The rows of one tap (ky, kx) at stride 1, n = ow floats each: the masks
 * of copy_shifted's lanes are the same for every row of the tap, so they
 * are computed once; each vector is stored whole (its lanes past n as +0)
 * where it ends before `end`, to be overwritten by the next row. */
typedef struct {
    int nv;
    __mmask16 ld[ROW_VECS], st[ROW_VECS];
} row_masks;

static void row_masks_init(row_masks *r, int n, int shift, int w)
{
    int lo, hi;
    shifted_range(n, shift, w, &lo, &hi);
    r->nv = (n + 15) / 16;
    for (int v = 0; v < r->nv; v++) {
        int a = lo - 16 * v, b = hi - 16 * v, e = n - 16 * v;
        a = a < 0 ? 0 : a;
        b = b > 16 ? 16 : b;
        e = e > 16 ? 16 : e;
        r->ld[v] = b > a ? (__mmask16)(((1u << b) - 1u) & ~((1u << a) - 1u)) : 0;
        r->st[v] = (__mmask16)((1u << e) - 1u);
    }
}

static inline void copy_masked(float *dst, const float *src, int shift, const row_masks *r, const float *end)
{
    for (int v = 0; v < r->nv; v++) {
        __m512 x = src ? _mm512_maskz_loadu_ps(r->ld[v], src + shift + 16 * v) : _mm512_setzero_ps();
        if (dst + 16 * (v + 1) <= end) _mm512_storeu_ps(dst + 16 * v, x);
        else _mm512_mask_storeu_ps(dst + 16 * v, r->st[v], x);
    }
}
#define ROW_MASKS 1
#elif defined(__AVX2__)
/* The same with 8-lane vectors and lane masks as vectors, for rows of up to
 * 16 floats: ResNet-20's forward im2col of 8- and 16-pixel rows took 0.35x
 * and 0.5x the time of copy_shifted (its memcpy call and zero loops per
 * row), its 32-pixel rows 1.1x (masked loads are slow on AMD cores; Zen 3,
 * 2026-11-27), so wider rows keep copy_shifted. */
#define ROW_VECS 2
#define ROW_LANES 8
typedef struct {
    int nv;
    __m256i ld[ROW_VECS], st[ROW_VECS];
} row_masks;

static void row_masks_init(row_masks *r, int n, int shift, int w)
{
    int lo, hi;
    shifted_range(n, shift, w, &lo, &hi);
    r->nv = (n + 7) / 8;
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int v = 0; v < r->nv; v++) { /* lanes [lo, hi) load, lanes below n store */
        __m256i ge_lo = _mm256_cmpgt_epi32(iota, _mm256_set1_epi32(lo - 8 * v - 1));
        r->ld[v] = _mm256_and_si256(ge_lo, _mm256_cmpgt_epi32(_mm256_set1_epi32(hi - 8 * v), iota));
        r->st[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * v), iota);
    }
}

static inline void copy_masked(float *dst, const float *src, int shift, const row_masks *r, const float *end)
{
    for (int v = 0; v < r->nv; v++) {
        __m256 x = src ? _mm256_maskload_ps(src + shift + 8 * v, r->ld[v]) : _mm256_setzero_ps();
        if (dst + 8 * (v + 1) <= end) _mm256_storeu_ps(dst + 8 * v, x);
        else _mm256_maskstore_ps(dst + 8 * v, r->st[v], x);
    }
}
#define ROW_MASKS 1
#endif

/* Same values as mts_im2col_ref: each output row (fixed tap, sample, oy) is
 * one copy of ow floats; at stride 1 from the input itself (the padding
 * written as zeros, no padded copy of the input), else from a zero-padded
 * copy. The matrix is written front to back. */
int mts_im2col(const mts_conv_geom *g, int N, const float *x, float *col, mts_err *err)
{
    int k = g->k, oh = g->oh, ow = g->ow, s = g->stride, hp = g->h + 2 * g->pad, wp = g->w + 2 * g->pad;
    float *dst = col;
    if (s == 1) {
        const float *end = col + (size_t)g->cin * k * k * N * oh * ow;
        for (int ci = 0; ci < g->cin; ci++)
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++) {
                    const int shift = kx - g->pad;
#if defined(ROW_MASKS)
                    row_masks rm = {0};
                    const int vec = ow <= ROW_LANES * ROW_VECS;
                    if (vec) row_masks_init(&rm, ow, shift, g->w);
#endif
                    for (int n = 0; n < N; n++) {
                        const float *plane = x + ((size_t)n * g->cin + ci) * g->h * g->w;
                        for (int oy = 0; oy < oh; oy++, dst += ow) {
                            int iy = oy - g->pad + ky;
                            const float *src = iy >= 0 && iy < g->h ? plane + (size_t)iy * g->w : NULL;
#if defined(ROW_MASKS)
                            if (vec) {
                                copy_masked(dst, src, shift, &rm, end);
                                continue;
                            }
#endif
                            copy_shifted(dst, src, ow, shift, g->w);
                        }
                    }
                }
        (void)end;
        return MTS_OK;
    }
    float *xp = pad_input(g, N, x, err);
    if (!xp) return MTS_ENOMEM;
    for (int ci = 0; ci < g->cin; ci++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++)
                for (int n = 0; n < N; n++) {
                    const float *plane = xp + ((size_t)n * g->cin + ci) * hp * wp + kx;
                    for (int oy = 0; oy < oh; oy++, dst += ow) {
                        const float *src = plane + (size_t)(oy * s + ky) * wp;
                        for (int ox = 0; ox < ow; ox++) dst[ox] = src[(size_t)ox * s];
                    }
                }
    free(xp);
    return MTS_OK;
}

/* Rows [oy0, oy1) of one sample's transposed column matrix, channels [c0,
 * c1) only: per output pixel, one copy of k floats per (channel, ky) from
 * the sample's padded input xp, written front to back from dst (each
 * pixel's (c1 - c0) k k taps contiguous); copies stay below end. */
static float *im2col_t_rows(const mts_conv_geom *g, const float *xp, int oy0, int oy1, int c0, int c1, float *dst,
                            const float *end)
{
    int k = g->k, s = g->stride, hp = g->h + 2 * g->pad, wp = g->w + 2 * g->pad;
#if defined(__AVX2__)
    if (k == 3) { /* the loop below unrolled: a channel's three rows, one 8-float copy each */
        const size_t plane = (size_t)hp * wp;
        for (int oy = oy0; oy < oy1; oy++)
            for (int ox = 0; ox < g->ow; ox++) {
                const float *src = xp + (size_t)oy * s * wp + (size_t)ox * s + (size_t)c0 * plane;
                for (int ci = c0; ci < c1; ci++, src += plane, dst += 9) {
                    if (dst + 6 + VW > end) { /* the matrix's last floats: copy_over's exact tail */
                        for (int ky = 0; ky < 3; ky++) copy_over(dst + 3 * ky, src + (size_t)ky * wp, 3, end);
                        continue;
                    }
                    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + wp),
                           r2 = _mm256_loadu_ps(src + 2 * (size_t)wp);
                    _mm256_storeu_ps(dst, r0); /* each store's excess is overwritten by the next */
                    _mm256_storeu_ps(dst + 3, r1);
                    _mm256_storeu_ps(dst + 6, r2);
                }
            }
        return dst;
    }
#endif
    for (int oy = oy0; oy < oy1; oy++) {
        const float *rows = xp + (size_t)oy * s * wp; /* (ci, ky) = (0, 0) */
        for (int ox = 0; ox < g->ow; ox++)
            for (int ci = c0; ci < c1; ci++)
                for (int ky = 0; ky < k; ky++, dst += k) {
                    const float *src = rows + ((size_t)ci * hp + (size_t)ky) * wp + (size_t)ox * s;
                    copy_over(dst, src, k, end);
                }
    }
    return dst;
}

#if defined(__AVX512F__)
#define T_UNPADDED(g) ((g)->k == 3)
/* im2col_t_rows for 3 x 3 kernels from the sample's input x itself (no
 * padded copy): a channel's nine taps are three masked loads into one
 * register and one masked store; the masks, the same for every channel of
 * a pixel, leave out the taps in the padding (their lanes load +0) and are
 * never wider than the row, so nothing outside x is read. */
static float *im2col_t_rows3(const mts_conv_geom *g, const float *x, int oy0, int oy1, int c0, int c1, float *dst)
{
    const int s = g->stride, pad = g->pad, h = g->h, w = g->w;
    const size_t hw = (size_t)h * w;
    for (int oy = oy0; oy < oy1; oy++) {
        const int iy0 = oy * s - pad;
        for (int ox = 0; ox < g->ow; ox++) {
            const int ix0 = ox * s - pad;
            unsigned cm = 0; /* the kernel's columns inside the row */
            for (int kx = 0; kx < 3; kx++) cm |= (unsigned)(ix0 + kx >= 0 && ix0 + kx < w) << kx;
            __mmask16 m[3];
            const float *p[3]; /* row ky's taps land at lanes 3 ky .. 3 ky + 2: its address less 3 ky */
            for (int ky = 0; ky < 3; ky++) {
                int iy = iy0 + ky;
                m[ky] = iy >= 0 && iy < h ? (__mmask16)(cm << (3 * ky)) : 0;
                p[ky] = x + ((ptrdiff_t)iy * w + ix0 - 3 * ky) + (ptrdiff_t)c0 * (ptrdiff_t)hw;
            }
            for (int ci = c0; ci < c1; ci++, dst += 9) {
                size_t o = (size_t)(ci - c0) * hw;
                __m512 v = _mm512_maskz_loadu_ps(m[0], p[0] + o);
                v = _mm512_mask_loadu_ps(v, m[1], p[1] + o);
                v = _mm512_mask_loadu_ps(v, m[2], p[2] + o);
                _mm512_mask_storeu_ps(dst, 0x1FF, v);
            }
        }
    }
    return dst;
}
#else
#define T_UNPADDED(g) 0
static float *im2col_t_rows3(const mts_conv_geom *g, const float *x, int oy0, int oy1, int c0, int c1, float *dst)
{
    (void)g, (void)x, (void)oy0, (void)oy1, (void)c0, (void)c1;
    return dst;
}
#endif

/* mts_im2col_t's matrix for input channels [c0, c1) only: colT[N*P][(c1 -
 * c0) k k], the columns of those channels' taps. */
static int im2col_t_channels(const mts_conv_geom *g, int N, const float *x, int c0, int c1, float *colT,
                             mts_err *err)
{
    size_t plane = (size_t)(g->h + 2 * g->pad) * (size_t)(g->w + 2 * g->pad), in = (size_t)g->cin * g->h * g->w;
    float *dst = colT, *end = colT + (size_t)N * g->oh * g->ow * (c1 - c0) * g->k * g->k;
    if (T_UNPADDED(g)) {
        for (int n = 0; n < N; n++) dst = im2col_t_rows3(g, x + (size_t)n * in, 0, g->oh, c0, c1, dst);
        return MTS_OK;
    }
    float *xp = pad_input(g, N, x, err);
    if (!xp) return MTS_ENOMEM;
    for (int n = 0; n < N; n++)
        dst = im2col_t_rows(g, xp + (size_t)n * g->cin * plane, 0, g->oh, c0, c1, dst, end);
    free(xp);
    return MTS_OK;
}

/* The transposed layout colT[N*P][K]: each output pixel's K taps are
 * contiguous (the weight gradient's B operand then needs no transposing
 * read); per pixel, one copy of k floats per (channel, ky) from the padded
 * input (3 x 3 kernels on AVX-512: from the input itself), front to back.
 * Same values as mts_im2col_ref, transposed. */
int mts_im2col_t(const mts_conv_geom *g, int N, const float *x, float *colT, mts_err *err)
{
    return im2col_t_channels(g, N, x, 0, g->cin, colT, err);
}

/* dst[0, n) += src[0, n) in whole vectors; the lanes past n add +0 to the
 * floats after dst + n. That leaves them unchanged: the accumulator starts
 * at +0 and only ever adds, so it never holds -0 (x + 0 = x for every other
 * x, NaN included). src is read with masks, never past src + n. */
static inline void add_over(float *dst, const float *src, int n)
{
#if defined(__AVX2__)
    int i = 0;
    for (; i + VW <= n; i += VW) _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), _mm256_loadu_ps(src + i)));
    if (i < n) {
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), _mm256_maskload_ps(src + i, m)));
    }
#else
    for (int i = 0; i < n; i++) dst[i] += src[i];
#endif
}

#if defined(__AVX512F__)
/* col2im from the [K][N*P] layout at stride 1, each input row's sums held in
 * registers: for RB padded rows at a time and each 16-lane chunk of them,
 * the taps (ky, kx) in order add one masked load each, of the tap's output
 * row placed at lane kx (lanes outside it load +0, which leaves a sum
 * unchanged: the sums start at +0 and never hold -0). Nothing reloads a
 * store just made, which the in-memory form does for every kx. */
#define RB 4
static int col2im_rows_s1(const mts_conv_geom *g, int N, const float *dcol, float *dx)
{
    enum { ROW_MAX = 4096 };
    int k = g->k, oh = g->oh, ow = g->ow, pad = g->pad, wp = g->w + 2 * pad, nc = (wp + 15) / 16;
    if (wp > ROW_MAX) return 0;
    size_t P = (size_t)oh * ow, NP = (size_t)N * P;
    float rb[RB][ROW_MAX];
    for (int n = 0; n < N; n++)
        for (int ci = 0; ci < g->cin; ci++)
            for (int iy0 = 0; iy0 < g->h; iy0 += RB) {
                int nr = g->h - iy0 < RB ? g->h - iy0 : RB;
                for (int c = 0; c < nc; c++) {
                    __m512 acc[RB];
                    for (int j = 0; j < RB; j++) acc[j] = _mm512_setzero_ps();
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) {
                            int lo = kx - 16 * c, hi = kx + ow - 16 * c;
                            lo = lo < 0 ? 0 : lo;
                            hi = hi > 16 ? 16 : hi;
                            if (hi <= lo) continue;
                            __mmask16 m = (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
                            const float *tap = dcol + (size_t)((ci * k + ky) * k + kx) * NP + (size_t)n * P +
                                               (ptrdiff_t)(16 * c - kx);
                            for (int j = 0; j < nr; j++) {
                                int oy = iy0 + j + pad - ky; /* padded row iy0 + j + pad */
                                if (oy < 0 || oy >= oh) continue;
                                acc[j] = _mm512_add_ps(acc[j], _mm512_maskz_loadu_ps(m, tap + (size_t)oy * ow));
                            }
                        }
                    for (int j = 0; j < nr; j++) /* a NaN sum as 0x7FC00000 (mts_fm_canon) */
                        _mm512_storeu_ps(rb[j] + 16 * c, nn_canon16(acc[j]));
                }
                for (int j = 0; j < nr; j++)
                    memcpy(dx + (((size_t)n * g->cin + ci) * g->h + (size_t)(iy0 + j)) * g->w, rb[j] + pad,
                           sizeof(float) * (size_t)g->w);
            }
    return 1;
}
#endif

/* col2im over a tap matrix whose element (sample n, tap r, pixel p) lies at
 * src[n*ns + r*rs + p*ps], summed into a zero-padded accumulator: every
 * input pixel receives its taps in the same (ky, kx) order as
 * mts_col2im_ref (one tap per (ky, kx)), so the sums equal it bit for bit;
 * then the interior is copied to dx. */
static int col2im_any(const mts_conv_geom *g, int N, const float *src, size_t ns, size_t rs, size_t ps, float *dx,
                      mts_err *err)
{
    int k = g->k, ow = g->ow, s = g->stride, hp = g->h + 2 * g->pad, wp = g->w + 2 * g->pad;
    float *acc = calloc(padded_size(g, N), sizeof(float));
    if (!acc)
        return mts_fail(err, MTS_ENOMEM, "col2im: out of memory (padded input of %d x %d x %d x %d)", N, g->cin, hp,
                        wp);
    for (int n = 0; n < N; n++)
        for (int ci = 0; ci < g->cin; ci++) {
            float *plane = acc + ((size_t)n * g->cin + ci) * hp * wp;
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++) {
                    const float *d = src + (size_t)n * ns + (size_t)((ci * k + ky) * k + kx) * rs;
                    for (int oy = 0; oy < g->oh; oy++) {
                        float *dst = plane + (size_t)(oy * s + ky) * wp + kx;
                        const float *row = d + (size_t)oy * ow * ps;
                        if (s == 1 && ps == 1) add_over(dst, row, ow);
                        else
                            for (int ox = 0; ox < ow; ox++) dst[(size_t)ox * s] += row[(size_t)ox * ps];
                    }
                }
        }
    for (size_t pl = 0; pl < (size_t)N * g->cin; pl++)
        for (int iy = 0; iy < g->h; iy++)
            canon_copy(dx + (pl * g->h + (size_t)iy) * g->w, acc + (pl * hp + (size_t)(iy + g->pad)) * wp + g->pad,
                       (size_t)g->w);
    free(acc);
    return MTS_OK;
}

int mts_col2im(const mts_conv_geom *g, int N, const float *dcolT, float *dx, mts_err *err)
{
    size_t P = (size_t)g->oh * g->ow, K = (size_t)g->cin * g->k * g->k;
    return col2im_any(g, N, dcolT, P * K, 1, K, dx, err);
}

int mts_col2im_rows(const mts_conv_geom *g, int N, const float *dcol, float *dx, mts_err *err)
{
    size_t P = (size_t)g->oh * g->ow;
#if defined(__AVX512F__)
    if (g->stride == 1 && col2im_rows_s1(g, N, dcol, dx)) return MTS_OK;
#endif
    return col2im_any(g, N, dcol, P, (size_t)N * P, 1, dx, err);
}

/* Samples per GEMM call. A whole batch's col matrix (LeNet-5 conv1: 25 x
 * 50,176 floats, 5 MB) spills the L2 cache between im2col writing it and
 * the GEMM reading it; chunks of about CHUNK_BYTES stay in it. Chunking
 * splits only the GEMMs' column dimension (N*P), never the summed one, so
 * each output is the same sum in the same order. A tap or a tracer sees the
 * layer's GEMM whole, as documented (one call per pass). */
#define CHUNK_BYTES (512u << 10)
static int conv_chunk(const mts_nn_ctx *ctx, int N, int K, int P)
{
    if (ctx->tap || ctx->tracer) return N;
    size_t per = sizeof(float) * (size_t)K * (size_t)P;
    int nb = per ? (int)(CHUNK_BYTES / per) : N;
    return nb < 1 ? 1 : nb > N ? N : nb;
}

/* Threads that run whole chunks side by side, each chunk's GEMM on one
 * thread: one team per pass instead of a team per GEMM and packing step
 * (two threads were slower than one on LeNet-5 that way). 1: the chunks
 * run in turn, each GEMM threaded by its provider. OpenBLAS (its own
 * threads, a process-wide thread count), a serial mulop (one RTL model) and
 * devices keep that. */
static int chunk_threads(const mts_provider *p, int nchunks)
{
#ifdef _OPENMP
    if (nchunks < 2 || p->device != 0 ||
        (p->kind == MTS_PROV_MULOP && (!p->mul || p->mul->serial)))
        return 1;
    int t = p->threads > 0 ? p->threads : omp_get_num_procs();
    return t < nchunks ? t : nchunks;
#else
    (void)p;
    (void)nchunks;
    return 1;
#endif
}

/* Runs chunk(c, buffer set of its thread) for c in [0, nchunks) on T
 * threads; the first failing chunk's status and message are returned, the
 * same whatever the thread count. */
typedef int (*chunk_fn)(void *arg, int c, int slot, mts_err *err);
static int run_chunks(int nchunks, int T, chunk_fn fn, void *arg, mts_err *err)
{
    int first = nchunks, rc = MTS_OK;
    if (T <= 1) { /* in turn, no team: the GEMMs inside then are not nested regions (sim/gemm/gemm_internal.h) */
        for (int c = 0; c < nchunks && rc == MTS_OK; c++) rc = fn(arg, c, 0, err);
        return rc;
    }
#pragma omp parallel for num_threads(T) schedule(dynamic, 1)
    for (int c = 0; c < nchunks; c++) {
        mts_err e;
        int slot = 0;
#ifdef _OPENMP
        slot = omp_get_thread_num();
#endif
        int r = fn(arg, c, slot, &e);
        if (r != MTS_OK) {
#pragma omp critical(mts_conv_chunks)
            if (c < first) {
                first = c;
                rc = r;
                if (err) *err = e;
            }
        }
    }
    return rc;
}

typedef struct {
    const mts_nn_ctx *ctx;
    const mts_provider *p; /* ctx->fwd or ctx->bwd, on one thread when chunks run side by side */
    const mts_conv_geom *g;
    int N, nb, K, P;
    const float *x, *w, *b, *dyc;
    float *y, *dx;
    float *col, *t; /* per slot: nb*P*K and nb*P*cout floats */
} conv_chunks;

/* Forward of samples [c*nb, c*nb + nc): im2col, the GEMM, bias. */
static int fwd_chunk(void *arg, int c, int slot, mts_err *err)
{
    const conv_chunks *a = arg;
    const mts_conv_geom *g = a->g;
    int n0 = c * a->nb, nc = a->N - n0 < a->nb ? a->N - n0 : a->nb, P = a->P, K = a->K;
    size_t NC = (size_t)nc * P, NB = (size_t)a->nb * P;
    float *col = a->col + (size_t)slot * NB * K, *t = a->t + (size_t)slot * NB * g->cout;
    int rc = mts_im2col(g, nc, a->x + (size_t)n0 * g->cin * g->h * g->w, col, err);
    if (rc != MTS_OK) return rc;
    /* col^T * w^T [nc*P][cout], stored transposed as t[cout][nc*P]: a =
     * activation, b = weight, sum over K in order. One sample's t is its
     * output y[n0][cout][P] itself: the GEMM writes there, the bias is added
     * in place (the same t + bias). */
    if (nc == 1) {
        float *y = a->y + (size_t)n0 * g->cout * P;
        rc = mts_nn_gemm_t(a->ctx, a->p, 1, 1, P, g->cout, K, col, P, a->w, K, 0.0f, y, P, err);
        if (rc != MTS_OK) return rc;
        for (int co = 0; co < g->cout; co++) {
            float *yo = y + (size_t)co * P, bias = a->b ? a->b[co] : 0.0f;
            for (int q = 0; q < P; q++) yo[q] = mts_fm_canon(yo[q] + bias);
        }
        return MTS_OK;
    }
    rc = mts_nn_gemm_t(a->ctx, a->p, 1, 1, (int)NC, g->cout, K, col, (int)NC, a->w, K, 0.0f, t, (int)NC, err);
    if (rc != MTS_OK) return rc;
    for (int n = 0; n < nc; n++)
        for (int co = 0; co < g->cout; co++) {
            float *yo = a->y + ((size_t)(n0 + n) * g->cout + co) * P;
            const float *to = t + (size_t)co * NC + (size_t)n * P;
            float bias = a->b ? a->b[co] : 0.0f;
            for (int q = 0; q < P; q++) yo[q] = mts_fm_canon(to[q] + bias);
        }
    return MTS_OK;
}

/* Input gradient of samples [c*nb, c*nb + nc): the GEMM into dcol, col2im. */
static int dx_chunk(void *arg, int c, int slot, mts_err *err)
{
    const conv_chunks *a = arg;
    const mts_conv_geom *g = a->g;
    int n0 = c * a->nb, nc = a->N - n0 < a->nb ? a->N - n0 : a->nb, P = a->P, K = a->K;
    size_t NC = (size_t)nc * P, NP = (size_t)a->N * P;
    float *dcol = a->col + (size_t)slot * a->nb * P * K;
    /* dyc^T * w [nc*P][K] of these samples, stored transposed as
     * dcol[K][nc*P]: a = gradient, b = weight, sum over cout in order */
    int rc = mts_nn_gemm_t(a->ctx, a->p, 1, 0, (int)NC, K, g->cout, a->dyc + (size_t)n0 * P, (int)NP, a->w, K, 0.0f,
                           dcol, (int)NC, err);
    if (rc != MTS_OK) return rc;
    return mts_col2im_rows(g, nc, dcol, a->dx + (size_t)n0 * g->cin * g->h * g->w, err);
}

/* Sets up a's chunking for provider p: chunk size, threads, a one-thread
 * copy of p in *p1 when they run side by side, and buffers for each thread
 * (col: K floats per column, t: tw per column; tw may be 0). */
static int chunks_init(conv_chunks *a, const mts_nn_ctx *ctx, const mts_provider *p, mts_provider *p1,
                       const mts_conv_geom *g, int N, int tw, int *nchunks, int *T)
{
    a->ctx = ctx;
    a->g = g;
    a->N = N;
    a->K = g->cin * g->k * g->k;
    a->P = g->oh * g->ow;
    a->nb = conv_chunk(ctx, N, a->K, a->P);
    *nchunks = (N + a->nb - 1) / a->nb;
    *T = chunk_threads(p, *nchunks);
    *p1 = *p;
    if (*T > 1) p1->threads = 1;
    a->p = p1;
    size_t NB = (size_t)a->nb * a->P;
    a->col = malloc(sizeof(float) * NB * a->K * (size_t)*T);
    a->t = tw ? malloc(sizeof(float) * NB * (size_t)tw * (size_t)*T) : NULL;
    return a->col && (!tw || a->t);
}

int mts_conv2d_forward(const mts_nn_ctx *ctx, const mts_conv_geom *g, int N, const float *x,
                       const float *w, const float *b, float *y, mts_err *err)
{
    conv_chunks a = {0};
    mts_provider p1;
    int nchunks, T, rc;
    if (!chunks_init(&a, ctx, ctx->fwd, &p1, g, N, g->cout, &nchunks, &T))
        rc = mts_fail(err, MTS_ENOMEM, "conv forward: out of memory (%d x %d col matrix, %d threads)",
                      a.nb * a.P, a.K, T);
    else {
        a.x = x;
        a.w = w;
        a.b = b;
        a.y = y;
        rc = run_chunks(nchunks, T, fwd_chunk, &a, err);
    }
    free(a.col);
    free(a.t);
    return rc;
}

/* The weight gradient's column matrix colT[N*P][K] is as large as the
 * layer's input times k^2 (75 MB for ResNet-20's first stage at batch 128),
 * built once and streamed from memory by the GEMM. Where the provider can
 * continue sums along k (mts_gemm_acc_ok), it is built and consumed in
 * chunks of about WG_BYTES instead (a band of output rows of one sample, or
 * whole samples), each GEMM going on from the sums of the one before: k =
 * N*P is cut, not reordered, so every output is the same sequence in (n, p)
 * order, bit for bit. Not with a tap or a tracer, which see the GEMM whole,
 * and not with OpenBLAS, whose sums are its own. */
#define WG_BYTES (256u << 10)
static int wgrad_chunks(const mts_nn_ctx *ctx) { return !ctx->tap && !ctx->tracer && mts_gemm_acc_ok(ctx->bwd); }

/* Threads that split the weight gradient's columns: each takes a range of
 * input channels (its taps (ci, ky, kx) are adjacent columns of dw) and
 * runs every chunk for them on its own, one thread per GEMM. Not an
 * integer table: it quantizes each operand over its whole, so a range's
 * columns would get their own scale and the result would follow the thread
 * count. */
static int wgrad_threads(const mts_provider *p, int cin)
{
#ifdef _OPENMP
    if (p->kind == MTS_PROV_INT || (p->kind == MTS_PROV_MULOP && (!p->mul || p->mul->serial))) return 1;
    int t = p->threads > 0 ? p->threads : omp_get_num_procs();
    return t < cin ? t : cin;
#else
    (void)p;
    (void)cin;
    return 1;
#endif
}

/* Channels [c0, c1) of dw: the chunks in (n, p) order, each built by
 * im2col_t_rows and summed on by the GEMM (the first starts from +0). */
static int wgrad_part(const mts_nn_ctx *ctx, const mts_provider *p, const mts_conv_geom *g, int N, const float *x,
                      const float *dyc, float *dw, int c0, int c1, mts_err *err)
{
    int k = g->k, oh = g->oh, ow = g->ow, P = oh * ow, K = g->cin * k * k, Kt = (c1 - c0) * k * k;
    size_t NP = (size_t)N * P, prow = (size_t)ow * Kt * sizeof(float); /* bytes of colT per output row */
    size_t plane = (size_t)(g->h + 2 * g->pad) * (size_t)(g->w + 2 * g->pad), in = (size_t)g->cin * g->h * g->w;
    int band = (int)(WG_BYTES / prow), ns = 1;
    if (band < 1) band = 1;
    if (band >= oh) { /* whole samples per chunk */
        band = oh;
        ns = (int)(WG_BYTES / (prow * (size_t)oh));
        ns = ns < 1 ? 1 : ns > N ? N : ns;
    }
    size_t cap = (size_t)ns * band * ow * Kt;
    float *colT = malloc(sizeof(float) * (cap + SLACK));
    int rc = MTS_OK;
    size_t q0 = 0;
    if (!colT) return mts_fail(err, MTS_ENOMEM, "conv backward: out of memory (%zu-float column chunk)", cap);
    for (int n0 = 0; n0 < N && rc == MTS_OK; n0 += ns) {
        int nn = N - n0 < ns ? N - n0 : ns;
        const float *xs = x + (size_t)n0 * in;
        float *xp = NULL; /* the padded copy, where the taps are copied from one */
        if (!T_UNPADDED(g) && !(xp = pad_input(g, nn, xs, err))) {
            rc = MTS_ENOMEM;
            break;
        }
        for (int oy0 = 0; oy0 < oh && rc == MTS_OK; oy0 += band) {
            int oy1 = oh - oy0 < band ? oh : oy0 + band;
            float *dst = colT;
            for (int j = 0; j < nn; j++)
                dst = xp ? im2col_t_rows(g, xp + (size_t)j * g->cin * plane, oy0, oy1, c0, c1, dst, colT + cap)
                         : im2col_t_rows3(g, xs + (size_t)j * in, oy0, oy1, c0, c1, dst);
            int kc = (int)(dst - colT) / Kt;
            /* dw[cout][c0 k k ..) (+)= dyc[:, q0 .. q0 + kc) * colT: a = gradient, b = activation */
            if (q0 == 0)
                rc = mts_nn_gemm(ctx, p, 0, 0, g->cout, Kt, kc, dyc, (int)NP, colT, Kt, 0.0f, dw + (size_t)c0 * k * k,
                                 K, err);
            else
                rc = mts_nn_gemm_acc(ctx, p, 0, 0, g->cout, Kt, kc, dyc + q0, (int)NP, colT, Kt,
                                     dw + (size_t)c0 * k * k, K, err);
            q0 += (size_t)kc;
        }
        free(xp);
    }
    free(colT);
    return rc;
}

/* The weight gradient split among T threads by input channels (a
 * channel's taps are adjacent columns of dw): range t is [cin t / T, cin
 * (t + 1) / T), run by run_chunks on one provider thread each (p1). */
typedef struct {
    const mts_nn_ctx *ctx;
    const mts_provider *p1;
    const mts_conv_geom *g;
    int N, T;
    const float *x, *dyc;
    float *dw, *colT; /* colT: the whole-batch matrices, range t's at its channels' columns */
} wgrad_ranges;

/* Range t of the chunked weight gradient (wgrad_part). */
static int wgrad_range_chunked(void *arg, int t, int slot, mts_err *err)
{
    const wgrad_ranges *a = arg;
    (void)slot;
    int c0 = a->g->cin * t / a->T, c1 = a->g->cin * (t + 1) / a->T;
    return wgrad_part(a->ctx, a->p1, a->g, a->N, a->x, a->dyc, a->dw, c0, c1, err);
}

/* Range t of the whole-batch weight gradient: the range's column matrix,
 * then dw[cout][c0 k k ..) = dyc * colT: a = gradient, b = activation, sum
 * over N*P in order. */
static int wgrad_range_whole(void *arg, int t, int slot, mts_err *err)
{
    const wgrad_ranges *a = arg;
    const mts_conv_geom *g = a->g;
    (void)slot;
    int c0 = g->cin * t / a->T, c1 = g->cin * (t + 1) / a->T, kk = g->k * g->k, Kt = (c1 - c0) * kk;
    size_t NP = (size_t)a->N * g->oh * g->ow;
    float *ct = a->colT + NP * (size_t)c0 * kk;
    int rc = im2col_t_channels(g, a->N, a->x, c0, c1, ct, err);
    if (rc != MTS_OK) return rc;
    return mts_nn_gemm(a->ctx, a->p1, 0, 0, g->cout, Kt, (int)NP, a->dyc, (int)NP, ct, Kt, 0.0f,
                       a->dw + (size_t)c0 * kk, g->cin * kk, err);
}

/* The weight gradient: in chunks of k where the provider can go on from
 * its own sums (wgrad_chunks); else, for OpenBLAS and FMAq, whole-batch
 * GEMMs - one per thread's channel range with its own column matrix rather
 * than a team inside one GEMM, whose threads (OpenBLAS's) and ours would
 * spin against each other; with a tap or a tracer, or an integer table
 * (wgrad_threads), the layer's one GEMM.
 * Each output is one sum over N*P in order however it is split. */
static int conv_wgrad(const mts_nn_ctx *ctx, const mts_conv_geom *g, int N, const float *x, const float *dyc,
                      float *dw, mts_err *err)
{
    int chunked = wgrad_chunks(ctx), T = ctx->tap || ctx->tracer ? 1 : wgrad_threads(ctx->bwd, g->cin);
    mts_provider p1 = *ctx->bwd;
    if (T > 1) p1.threads = 1;
    wgrad_ranges a = {ctx, &p1, g, N, T, x, dyc, dw, NULL};
    if (chunked) return run_chunks(T, T, wgrad_range_chunked, &a, err);
    size_t NP = (size_t)N * g->oh * g->ow, K = (size_t)g->cin * g->k * g->k;
    if (!(a.colT = mts_gemm_ws_alloc(sizeof(float) * NP * K))) /* the ranges' matrices one after another */
        return mts_fail(err, MTS_ENOMEM, "conv backward: out of memory (%zu x %zu matrices)", NP, K);
    int rc = run_chunks(T, T, wgrad_range_whole, &a, err);
    mts_gemm_ws_free(a.colT);
    return rc;
}

int mts_conv2d_backward(const mts_nn_ctx *ctx, const mts_conv_geom *g, int N, const float *x,
                        const float *w, const float *dy, float *dx, float *dw, float *db, mts_err *err)
{
    int K = g->cin * g->k * g->k, P = g->oh * g->ow, C = g->cout, nchunks = 0, T = 1;
    size_t NP = (size_t)N * P;
    conv_chunks a = {0};
    mts_provider p1;
    /* from the GEMMs' workspace cache: tens of MB a layer, every step */
    float *dyc = mts_gemm_ws_alloc(sizeof(float) * NP * C);
    int dx_ok = !dx || chunks_init(&a, ctx, ctx->bwd, &p1, g, N, 0, &nchunks, &T);
    int rc = MTS_OK;
    if (!dyc || !dx_ok) {
        rc = mts_fail(err, MTS_ENOMEM, "conv backward: out of memory (%zu x %d matrices)", NP, K);
        goto done;
    }
    /* dyc[co][n*P+q]: the output gradient as the GEMMs' [cout][N*P] operand
     * (rows of P copied whole; both GEMMs then read it without transposing) */
    /* on the backward provider's threads, a channel each (copies and sums
     * per channel: no order depends on them) */
    int Tc = chunk_threads(ctx->bwd, (double)NP * C >= 65536.0 ? C : 1);
    (void)Tc;
#pragma omp parallel for num_threads(Tc) schedule(static) if (Tc > 1)
    for (int co = 0; co < C; co++) {
        for (int n = 0; n < N; n++)
            memcpy(dyc + (size_t)co * NP + (size_t)n * P, dy + ((size_t)n * C + co) * P, sizeof(float) * (size_t)P);
        if (db) /* the fixed blocked order of fmath.h, (n, p) order */
            db[co] = mts_fm_sumf_array(dyc + (size_t)co * NP, NP);
    }
    if (dw) rc = conv_wgrad(ctx, g, N, x, dyc, dw, err);
    if (rc == MTS_OK && dx) {
        a.w = w;
        a.dyc = dyc;
        a.dx = dx;
        rc = run_chunks(nchunks, T, dx_chunk, &a, err);
    }
done:
    mts_gemm_ws_free(dyc);
    free(a.col);
    return rc;
}
