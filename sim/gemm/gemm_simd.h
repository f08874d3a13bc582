/* gemm_simd.h - private to the files of sim/gemm/: one small vector vocabulary over
 * AVX-512 (16 lanes) or AVX2 (8 lanes), so each SIMD kernel is written once.
 * GEMM_SIMD is 0 when neither is available (the scalar kernel runs then).
 *
 * Exactness notes: every operation here is either integer or an IEEE FP32
 * operation whose rounding the kernels rely on explicitly; sim/ compiles its
 * gemm files with -ffp-contract=off so that mul + add is never fused. */
#ifndef MANTIS_GEMM_SIMD_H
#define MANTIS_GEMM_SIMD_H

#include <stdint.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#define GEMM_SIMD 1
#define GW 16
typedef __m512 vf;
typedef __m512i vi;
#define VF_LOAD(p) _mm512_loadu_ps(p)
#define VI_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define VF_STORE(p, v) _mm512_storeu_ps(p, v)
#define VI_STORE(p, v) _mm512_storeu_si512((void *)(p), v)
#define VF_SET1(x) _mm512_set1_ps(x)
#define VI_SET1(x) _mm512_set1_epi32((int)(x))
#define VF_ZERO() _mm512_setzero_ps()
#define VI_ZERO() _mm512_setzero_si512()
#define VI_OR(a, b) _mm512_or_si512(a, b)
#define VI_AND(a, b) _mm512_and_si512(a, b)
#define VI_MINU(a, b) _mm512_min_epu32(a, b)
#define VF_MUL(a, b) _mm512_mul_ps(a, b)
#define VF_ADD(a, b) _mm512_add_ps(a, b)
#define VF_GATHER(tab, idx) _mm512_i32gather_ps(idx, tab, 4)
#define VI_OF(v) _mm512_castps_si512(v)
#define VF_OF(v) _mm512_castsi512_ps(v)

/* t where t >= lo (unsigned), else 0 */
static inline vi vi_keep_ge(vi t, vi lo) { return _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(t, lo), t); }

/* a + b rounded toward zero (exact sum, one rounding): embedded rounding */
static inline vf vf_add_rtz(vf a, vf b) { return _mm512_add_round_ps(a, b, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }

#elif defined(__AVX2__)
#include <immintrin.h>
#define GEMM_SIMD 1
#define GW 8
typedef __m256 vf;
typedef __m256i vi;
#define VF_LOAD(p) _mm256_loadu_ps(p)
#define VI_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define VF_STORE(p, v) _mm256_storeu_ps(p, v)
#define VI_STORE(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define VF_SET1(x) _mm256_set1_ps(x)
#define VI_SET1(x) _mm256_set1_epi32((int)(x))
#define VF_ZERO() _mm256_setzero_ps()
#define VI_ZERO() _mm256_setzero_si256()
#define VI_OR(a, b) _mm256_or_si256(a, b)
#define VI_AND(a, b) _mm256_and_si256(a, b)
#define VI_MINU(a, b) _mm256_min_epu32(a, b)
#define VF_MUL(a, b) _mm256_mul_ps(a, b)
#define VF_ADD(a, b) _mm256_add_ps(a, b)
#define VF_GATHER(tab, idx) _mm256_i32gather_ps(tab, idx, 4)
#define VI_OF(v) _mm256_castps_si256(v)
#define VF_OF(v) _mm256_castsi256_ps(v)

static inline vi vi_keep_ge(vi t, vi lo)
{
    return _mm256_and_si256(t, _mm256_cmpeq_epi32(_mm256_max_epu32(t, lo), t));
}

/* The lanes below n, all bits set (n <= 0: none; n >= 8: all): masks of
 * partial vectors for maskload / maskstore. */
static inline vi vi_lanes(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* a + b rounded toward zero without a rounding-mode switch: s = RNE(a+b)
 * and its exact error e (TwoSum, Knuth); when e is non-zero and of the
 * opposite sign to s, RNE rounded away from zero and the toward-zero result
 * is s one ulp closer to zero, i.e. its bit pattern minus one. An overflow to
 * inf makes e NaN and keeps inf, which the accumulator quantizer saturates
 * exactly as it would FLT_MAX. */
static inline vf vf_add_rtz(vf a, vf b)
{
    vf s = _mm256_add_ps(a, b);
    vf bb = _mm256_sub_ps(s, a);
    vf e = _mm256_add_ps(_mm256_sub_ps(a, _mm256_sub_ps(s, bb)), _mm256_sub_ps(b, bb));
    vi away = _mm256_srai_epi32(_mm256_xor_si256(VI_OF(e), VI_OF(s)), 31);
    vi nz = VI_OF(_mm256_cmp_ps(e, _mm256_setzero_ps(), _CMP_NEQ_OQ));
    return VF_OF(_mm256_add_epi32(VI_OF(s), _mm256_and_si256(away, nz)));
}
#else
#define GEMM_SIMD 0
#endif

/* AVX-512 VBMI: 64 byte lookups in a 128-byte table per instruction. */
#if GEMM_SIMD && GW == 16
/* gemm_q_e8 on 16 lanes (M = 0: x unchanged), for a job whose B is read
 * unquantized (gemm_job.bround). The full form takes every input; the
 * clean form only zeros and normals that round to normals (a B with
 * bbad == 0), where the RNE step alone is exact: a zero stays its signed
 * zero (half < 2^drop). */
typedef struct vq_k {
    int on;
    __m128i drop;
    __m512i half, keep, one;
} vq_k;

static inline vq_k vq_consts(int M)
{
    vq_k c;
    c.on = M != 0;
    int drop = M ? 23 - M : 1;
    c.drop = _mm_cvtsi32_si128(drop);
    c.half = _mm512_set1_epi32((int)((1u << (drop - 1)) - 1u));
    c.keep = _mm512_set1_epi32((int)~((1u << drop) - 1u));
    c.one = _mm512_set1_epi32(1);
    return c;
}

static inline __m512i vq_clean(const vq_k *c, __m512i x)
{
    if (!c->on) return x;
    __m512i lsb = _mm512_and_si512(_mm512_srl_epi32(x, c->drop), c->one);
    return _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(x, c->half), lsb), c->keep);
}

static inline __m512i vq_full(const vq_k *c, __m512i x)
{
    if (!c->on) return x;
    const __m512i expm = _mm512_set1_epi32((int)MTS_F32_EXP), manm = _mm512_set1_epi32((int)MTS_F32_MAN);
    __m512i r = vq_clean(c, x);
    __mmask16 zero = _mm512_testn_epi32_mask(x, expm);
    __mmask16 spec = _mm512_cmpeq_epi32_mask(_mm512_and_si512(x, expm), expm);
    __mmask16 nan = spec & _mm512_test_epi32_mask(x, manm);
    r = _mm512_mask_and_epi32(r, zero, x, _mm512_set1_epi32((int)MTS_F32_SIGN));
    r = _mm512_mask_mov_epi32(r, spec & (__mmask16)~nan, x);
    return _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32((int)MTS_F32_QNAN));
}

#endif

#if GEMM_SIMD && GW == 16 && defined(__AVX512VBMI__) && defined(__AVX512BW__)
#define GEMM_VBMI 1
/* The byte-table lookup of 16 lanes, as the float q = Sa * Tf with Tf = 2^adj
 * (1.man) the table entry of (a's row, b's mantissa in byte 2 of bidx): the
 * table byte adj << 7 | man7 shifted to bit 16 is exactly adj << 23 | man << 16,
 * so one integer add of the bits of Sa = sign 2^E (broadcast) forms
 * sign 2^(E+adj) (1.man). A zero a uses the all-zero row and keeps q = Sa, its
 * signed zero. The kernels then multiply q by Sb = sign 2^(eb-127) (a zero b:
 * its signed zero), exactly, or fuse that product into the accumulation
 * (vfmadd: one rounding of acc + q*Sb, the same as acc + p with p exact), so
 * a zero b needs no mask of its own. */
#define VBMI_BYTE2 0x4444444444444444ull /* byte 2 of each 32-bit lane */
static inline vf vf_lut_byte_q(__m512i tlo, __m512i thi, __m512i bidx, __m512i sa_bits)
{
    __m512i t = _mm512_maskz_permutex2var_epi8(VBMI_BYTE2, tlo, bidx, thi);
    return _mm512_castsi512_ps(_mm512_add_epi32(sa_bits, t));
}

/* The packed B fields of one vector of 16 quantized operands x, formed in
 * registers for an unpacked B (gemm_lutpack.rawb): the table index in byte 2
 * of each lane (the M mantissa bits, shifted down to bit 16 and masked) and
 * the power of two sign 2^(e-127) (x with its mantissa cleared; a zero x
 * gives its signed zero). Same values as pack.c's Bi and Bs for operands
 * that pass gemm_exp_ok. */
#define RAW_PF 8 /* rows of an unpacked B prefetched ahead of the one in use */
typedef struct vbmi_rawb_k {
    unsigned shift; /* 7 - M: the right shift that brings the mantissa (bits 23-M..22) to bit 16 */
    __m512i idxm;   /* (2^M - 1) << 16 */
} vbmi_rawb_k;

static inline vbmi_rawb_k vbmi_rawb_consts(int M)
{
    vbmi_rawb_k c;
    c.shift = (unsigned)(7 - M);
    c.idxm = _mm512_set1_epi32((int)(((1u << M) - 1u) << 16));
    return c;
}

static inline void vbmi_raw_b(const vbmi_rawb_k *c, __m512i x, __m512i *bidx, __m512 *bs)
{
    /* the maskz form: GCC 12 C++ warns on the plain one's undefined source */
    *bidx = _mm512_and_si512(_mm512_maskz_srli_epi32((__mmask16)0xFFFF, x, c->shift), c->idxm);
    *bs = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xFF800000u)));
}
#else
#define GEMM_VBMI 0
#endif

/* Lanes of a vector in the quad layout of byte tables (pack.c, lut.c): 16
 * on VBMI builds (vpermt2b looks up 64 lanes), 8 on AVX2 builds with FMA
 * (vpshufb looks up 32), 0 where no kernel reads it. A quad panel is four
 * such vectors: NR = 4 GEMM_QUAD_W. */
#if GEMM_VBMI
#define GEMM_QUAD_W 16
#elif GEMM_SIMD && GW == 8 && defined(__FMA__)
#define GEMM_QUAD_W 8
#else
#define GEMM_QUAD_W 0
#endif

#if GEMM_QUAD_W == 8
/* The AVX2 lookups of a byte table's quad layout (lut.c has the scheme;
 * fmaq.c reads the same layout). The 32 bytes of table row `row` at the
 * indexes x (bits 0..6; nc = 2^M / 16 chunks of 16 entries, at least 1);
 * s4..s6 are x shifted left 3, 2, 1 within 16-bit lanes, so that bit 4, 5,
 * 6 of each byte is its top bit, which vpblendvb reads. */
static inline __m256i gemm_shuf_lookup(const unsigned char *row, __m256i x, __m256i s4, __m256i s5, __m256i s6,
                                       const int nc)
{
#define SHUF_T(c) _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(row + 16 * (c)))), x)
    __m256i r = SHUF_T(0);
    if (nc == 1) return r;
    r = _mm256_blendv_epi8(r, SHUF_T(1), s4);
    if (nc == 2) return r;
    r = _mm256_blendv_epi8(r, _mm256_blendv_epi8(SHUF_T(2), SHUF_T(3), s4), s5);
    if (nc == 4) return r;
    __m256i h = _mm256_blendv_epi8(_mm256_blendv_epi8(SHUF_T(4), SHUF_T(5), s4),
                                   _mm256_blendv_epi8(SHUF_T(6), SHUF_T(7), s4), s5);
    return _mm256_blendv_epi8(r, h, s6);
#undef SHUF_T
}

/* vpshufb controls: byte 2 of lane j takes byte 4 (j % 4) + v of its
 * 128-bit half (vector v's entry), the other bytes are zeroed. */
static inline void gemm_shuf_ctl(__m256i ctl[4])
{
    for (int v = 0; v < 4; v++)
        ctl[v] = _mm256_add_epi32(_mm256_set1_epi32((int)(0x80008080u | (uint32_t)v << 16)),
                                  _mm256_setr_epi32(0, 4 << 16, 8 << 16, 12 << 16, 0, 4 << 16, 8 << 16, 12 << 16));
}

/* q = Sa Tf for vector v of a lookup t (ctl: its control; sa: Sa's bits),
 * exact and normal (vf_lut_byte_q's argument). */
static inline __m256 gemm_shuf_q(__m256i t, __m256i ctl, __m256i sa)
{
    return _mm256_castsi256_ps(_mm256_add_epi32(sa, _mm256_shuffle_epi8(t, ctl)));
}
#endif

#if GEMM_SIMD && GW == 16 && defined(__AVX512DQ__)
/* Q(M,E,b) of fmaq.c for RTZ on finite FP32 bits x (no NaN, no inf): keep
 * M mantissa bits and the sign (mask keep), saturate the magnitude at R_OF
 * (vrangeps imm 0x02: the smaller magnitude, with the sign of x), flush
 * magnitudes below lo (R_UF, or the smallest FP32 normal without underflow)
 * to a signed zero. Truncation keeps the binade, so testing the truncated
 * value is testing x. */
static inline vi vi_q_sat(vi x, vi rof, vi lo2)
{
    vi t = _mm512_castps_si512(_mm512_range_ps(_mm512_castsi512_ps(x), _mm512_castsi512_ps(rof), 0x02));
    __mmask16 small = _mm512_cmplt_epu32_mask(_mm512_slli_epi32(t, 1), lo2);
    return _mm512_mask_and_epi32(t, small, t, _mm512_set1_epi32((int)0x80000000u));
}
static inline vi vi_q_rtz(vi x, vi keep, vi rof, vi lo2) { return vi_q_sat(VI_AND(x, keep), rof, lo2); }
/* keep includes the sign bit; lo2 is the flush threshold's bits shifted left by one */
#define GEMM_Q_KEEP_SIGN 1
#elif GEMM_SIMD
/* Q(M,E,b) of fmaq.c for RTZ on finite FP32 bits x (no NaN, no inf): keep
 * M mantissa bits, saturate above R_OF (bits rof), flush below lo (R_UF, or
 * the smallest FP32 normal without underflow), keep the sign. Truncation
 * keeps the binade, so comparing the truncated magnitude is comparing x. */
static inline vi vi_q_rtz(vi x, vi keep, vi rof, vi lo)
{
    vi sign = VI_AND(x, VI_SET1(0x80000000u));
    vi t = VI_MINU(VI_AND(x, keep), rof);
    /* t >= lo as a signed compare (one instruction fewer than vi_keep_ge):
     * t and lo are magnitudes, below 2^31 */
    vi ge = _mm256_cmpgt_epi32(t, _mm256_sub_epi32(lo, _mm256_set1_epi32(1)));
    return VI_OR(VI_AND(t, ge), sign);
}

/* vi_q_rtz for x that already has at most M mantissa bits: range only. */
static inline vi vi_q_sat(vi x, vi rof, vi lo)
{
    return vi_q_rtz(x, VI_SET1(0x7FFFFFFFu), rof, lo);
}
#define GEMM_Q_KEEP_SIGN 0
#endif

#if GEMM_SIMD && defined(MANTIS_GEMM_INTERNAL_H)
/* gemm_store_row's rule (gemm_internal.h) for a tile row held in nv
 * registers, when the job stores the row's outputs (i, j0 .. j1) side by
 * side in C (gemm_out: a plain mts_gemm or a swapped mts_gemm_t) with beta
 * 0: each lane as it is, a NaN as the canonical 0x7FC00000, masked stores at
 * the right edge; returns 1. Otherwise returns 0 and stores nothing: the
 * caller goes through gemm_store_row. Same bits, without the scalar loop
 * (a k = 16 convolution gradient spent as long storing as summing). */
static inline int gemm_store_row_v(const gemm_job *g, int i, int j0, int j1, const vf *acc, int nv)
{
    if (g->beta != 0.0f || g->swap != g->ct) return 0;
    float *c = g->C + (size_t)i * (size_t)g->ldc + (size_t)j0;
    for (int v = 0; v < nv; v++) {
        int left = j1 - j0 - v * GW;
        if (left <= 0) break;
#if GW == 16
        __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        __m512 x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(acc[v], acc[v], _CMP_UNORD_Q), acc[v],
                                        _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
        _mm512_mask_storeu_ps(c + v * GW, m, x);
#else
        __m256 x = _mm256_blendv_ps(acc[v], _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)),
                                    _mm256_cmp_ps(acc[v], acc[v], _CMP_UNORD_Q));
        if (left >= 8) _mm256_storeu_ps(c + v * GW, x);
        else
            _mm256_maskstore_ps(c + v * GW, vi_lanes(left), x);
#endif
    }
    return 1;
}
#endif

#endif
