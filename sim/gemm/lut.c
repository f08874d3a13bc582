/* lut.c - LUT + AMSim GEMM, vectorised across n: table gathers
 * (AVX2/AVX-512), or for bf16-class tables in-register byte permutes
 * (AVX-512 VBMI) or byte shuffles (AVX2: the shuffle kernel below).
 *
 * AMSim's product of a and b (E = 8 IEEE formats) is
 *   sign(a)sign(b) 2^(ea-127) 2^(eb-127) * 2^adj (1.man)
 * where (adj, man) is the LUT entry of the mantissa pair. The kernel stores
 * the table as floats Tf = 2^adj (1.man) (0.0 for "zero" entries) and each
 * operand as its index part and its power of two S = sign 2^(e-127) (the bits
 * of x with the mantissa cleared; 0 for zero), and forms Tf * (Sa * Sb) with
 * two FP32 multiplies. Both are exact - hence equal to mts_amsim bit for bit -
 * whenever no intermediate or final value leaves FP32's normal range: this
 * holds when every table adjustment lies in [-2, 1] and every non-zero
 * operand has |unbiased exponent| <= 62 (products then lie in [2^-126,
 * 2^126)). Tiles touching any other operand (NaN, inf, huge, tiny) use the
 * scalar kernel; tables or formats outside the condition use it throughout.
 * The products then go into acc = acc + p in k order, like the native kernel.
 *
 * Byte path (AVX-512 VBMI, E8 tables with M <= 7, adj in {0,1}, mantissas of
 * at most 7 bits, no zero entries - e.g. bf16 "exact" and "mbm"): the row
 * of the table for a's mantissa is 128 bytes adj << 7 | man7 held in two
 * registers, one vpermt2b looks up 16 lanes, one integer add of Sa's bits
 * makes q = Sa * Tf (byte << 16 is adj << 23 | man << 16; gemm_simd.h), and
 * one FMA accumulates: acc = fma(q, Sb, acc) rounds acc + q*Sb once, and
 * q*Sb is the exact product p, so the result is acc + p rounded, the bits of
 * the add above - three instructions per 16 products instead of the four of
 * a multiply, an add and an add. A zero a uses an all-zero row (q = Sa, a
 * signed zero) and a zero b has Sb = +-0: both give the signed zero p. Same
 * exactness condition on operands. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_internal.h"
#include "gemm_simd.h"

/* ------------------------------------------------ derived-table cache
 * Every LUT GEMM call derives its kernel's table from the LUT's entries;
 * a convolution run in sample chunks makes dozens of calls per batch with
 * the same LUT (the transposed byte table takes 10 us to build, the float
 * one more). A few derived tables are kept beside a copy of the entries and
 * format they came from; a call whose LUT matches exactly (memcmp of every
 * entry, ~1 us for bf16) gets a copy of the kept table. Nothing is keyed on
 * an address, so a LUT edited in place or freed and reallocated is rebuilt.
 * Kept for the process (reachable from tc[]); one mutex. */
enum { TC_FLOAT, TC_BYTES, TC_BYTES_T, TC_SLOTS = 4 };
#define TC_MAX_N ((size_t)1 << 16) /* larger tables (M > 8) are built each call */

typedef struct {
    int kind;        /* TC_*; the slot is empty when tab is NULL */
    mts_format fmt;
    size_t n;        /* entries */
    uint32_t *entry; /* copy of the LUT's entries */
    void *tab;       /* the derived table, bytes long */
    size_t bytes;
} tc_slot;

static tc_slot tc[TC_SLOTS];
static unsigned tc_next; /* round-robin victim */
static pthread_mutex_t tc_mu = PTHREAD_MUTEX_INITIALIZER;

static int tc_match(const tc_slot *s, int kind, const mts_lut *lut, size_t bytes)
{
    return s->tab && s->kind == kind && s->n == lut->n && s->bytes == bytes &&
           !memcmp(&s->fmt, &lut->fmt, sizeof s->fmt) && !memcmp(s->entry, lut->entry, sizeof *s->entry * lut->n);
}

/* Copies the kept table of (kind, lut) into dst (bytes long); 0 on a miss. */
static int tc_get(int kind, const mts_lut *lut, void *dst, size_t bytes)
{
    int hit = 0;
    if (lut->n > TC_MAX_N) return 0;
    pthread_mutex_lock(&tc_mu);
    for (int i = 0; i < TC_SLOTS && !hit; i++)
        if (tc_match(&tc[i], kind, lut, bytes)) {
            memcpy(dst, tc[i].tab, bytes);
            hit = 1;
        }
    pthread_mutex_unlock(&tc_mu);
    return hit;
}

/* Keeps a copy of tab, derived from lut (silently not, out of memory). */
static void tc_put(int kind, const mts_lut *lut, const void *tab, size_t bytes)
{
    if (lut->n > TC_MAX_N) return;
    uint32_t *e = malloc(sizeof *e * lut->n);
    void *t = malloc(bytes);
    if (!e || !t) {
        free(e);
        free(t);
        return;
    }
    memcpy(e, lut->entry, sizeof *e * lut->n);
    memcpy(t, tab, bytes);
    pthread_mutex_lock(&tc_mu);
    tc_slot *s = &tc[tc_next++ % TC_SLOTS];
    free(s->entry);
    free(s->tab);
    *s = (tc_slot){kind, lut->fmt, lut->n, e, t, bytes};
    pthread_mutex_unlock(&tc_mu);
}

static float *lut_table_build(const mts_lut *lut, float *Tf);

float *gemm_lut_table(const mts_lut *lut)
{
    const mts_format *f = &lut->fmt;
    if (f->E != 8 || f->bias != 127 || !f->ieee || f->M > 11) return NULL;
    float *Tf = gemm_ws_alloc(lut->n * sizeof *Tf, 0);
    if (!Tf || tc_get(TC_FLOAT, lut, Tf, lut->n * sizeof *Tf)) return Tf;
    if (!lut_table_build(lut, Tf)) return NULL;
    tc_put(TC_FLOAT, lut, Tf, lut->n * sizeof *Tf);
    return Tf;
}

/* Fills Tf; frees it and returns NULL when an adjustment is out of range. */
static float *lut_table_build(const mts_lut *lut, float *Tf)
{
    for (size_t i = 0; i < lut->n; i++) {
        uint32_t e = lut->entry[i];
        int adj = mts_lut_adj(e);
        if (e & MTS_LUT_ZERO) {
            Tf[i] = 0.0f;
            continue;
        }
        if (adj < -2 || adj > 1) {
            gemm_ws_free(Tf);
            return NULL;
        }
        Tf[i] = mts_u2f(((uint32_t)(adj + 127) << 23) | (e & MTS_LUT_MAN));
    }
    return Tf;
}

/* The byte adj << 7 | man7 of an entry that passed the check below. */
static inline unsigned char lut_byte(uint32_t x) { return (unsigned char)(((x >> 17) & 0x80u) | ((x >> 16) & 0x7Fu)); }

/* From the cache above when it has the table, else built: one branch-free
 * pass checks every entry (adj 0 or 1, no zero flag, 7 mantissa bits: all
 * bits of 0xFE80FFFF clear), then row r of the table is entries (r, c) for
 * all c, 16 at a time on AVX-512 (vpmovdb; 1.9 us for bf16), or entries
 * (c, r) one at a time when transposed (10 us). */
static unsigned char *lut_bytes_build(const mts_lut *lut, int transposed);

unsigned char *gemm_lut_bytes(const mts_lut *lut, int transposed)
{
    const mts_format *f = &lut->fmt;
    if (f->E != 8 || f->bias != 127 || !f->ieee || f->M > 7) return NULL;
    const size_t bytes = (((size_t)1 << f->M) + 1) * 128;
    int kind = transposed ? TC_BYTES_T : TC_BYTES;
    unsigned char *tb = gemm_ws_alloc(bytes, 0);
    if (tb && tc_get(kind, lut, tb, bytes)) return tb;
    gemm_ws_free(tb);
    if ((tb = lut_bytes_build(lut, transposed))) tc_put(kind, lut, tb, bytes);
    return tb;
}

static unsigned char *lut_bytes_build(const mts_lut *lut, int transposed)
{
    const mts_format *f = &lut->fmt;
    const size_t rows = (size_t)1 << f->M;
    const uint32_t *restrict e = lut->entry;
    uint32_t bad = 0;
    for (size_t i = 0; i < rows * rows; i++) bad |= e[i] & 0xFE80FFFFu;
    if (bad) return NULL;
    unsigned char *tb = gemm_ws_alloc((rows + 1) * 128, 1); /* last row: all zero, for a = 0 */
    if (!tb) return NULL;
    const size_t rs = transposed ? 1 : rows, cs = transposed ? rows : 1; /* entry (r, c) at e[r*rs + c*cs] */
    for (size_t r = 0; r < rows; r++) {
#if GEMM_SIMD && GW == 16
        if (!transposed) {
            for (size_t c = 0; c < rows; c += 16) {
                __mmask16 ld = rows - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (rows - c)) - 1u);
                __m512i x = _mm512_maskz_loadu_epi32(ld, e + r * rs + c);
                __m512i y = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(x, 17), _mm512_set1_epi32(0x80)),
                                            _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x7F)));
                _mm512_mask_cvtepi32_storeu_epi8(tb + r * 128 + c, ld, y);
            }
            continue;
        }
#endif
        for (size_t c = 0; c < rows; c++) tb[r * 128 + c] = lut_byte(e[r * rs + c * cs]);
    }
    return tb;
}

#if GEMM_SIMD
/* Register tile: mr rows x nv vectors, nv <= NV (up to 64 columns on
 * AVX-512, 32 on AVX2). AVX-512 builds pick the tile per job (pick_tile):
 * 1 or 2 vectors when n is small (a weight gradient with n = 25 would
 * otherwise multiply 64 lanes per k, 39 of them padding), and 6 or 8 rows
 * with them when m is small (m = 6 output channels in 4-row tiles would
 * compute 8 rows and convert each B vector twice). The order of each
 * output's sum does not depend on the tile. */
#define NV 4
#define NR_MAX (NV * GW)
#if GW == 16
#define MR 4     /* rows with 4 vectors (and the default) */
#define MR_MAX 8 /* rows with 1 or 2 vectors: at most 16 accumulators */
#else
#define MR 2
#define MR_MAX 2
#endif
#define LUT_INLINE static inline __attribute__((always_inline))

int gemm_lut_nr(void) { return NR_MAX; }
int gemm_lut_quad(void) { return GEMM_VBMI; }

/* The tile (vectors nv, rows mr) of fewest instructions for a job: per k,
 * each vector of B costs about 4 loaded packed, 7 read unpacked (load,
 * prefetch, rounding and conversion in registers, once per row block: the
 * taller tile pays where B is unpacked, ResNet-20's 16 x 1024 x 144 forward
 * GEMM 213 -> 182 us and LeNet-5's 16 x 800 x 150 186 -> 137 us with 2
 * vectors of 8 rows instead of 4 of 4, 2026-11-26), each
 * row 3 (its table row and scale) plus 4 per vector (lookup, exponent add,
 * accumulate and a register copy), summed over every tile. The quad kernel
 * (4 x 4 with packed B and a byte table) costs 1 per k plus per row 6 (table
 * row, scale, parity, one lookup) and 11 for its four vectors (counted for
 * its first form, 3 shifts, 4 blends and 4 accumulates; the byte-shuffle form
 * that replaced it is a little cheaper). Ties go to the earlier (wider)
 * candidate. */
static void pick_tile(const gemm_job *g, int *nv_out, int *mr_out)
{
    const int m = g->m, n = g->n;
#if GW == 16
    static const int cand[][2] = {{4, 4}, {2, 4}, {2, 6}, {2, 8}, {1, 4}, {1, 8}};
    double cost = 1e300;
    for (size_t q = 0; q < sizeof cand / sizeof cand[0]; q++) {
        int nv = cand[q][0], mr = cand[q][1];
        int raw = gemm_want_rawb(g, mr, nv * GW), quad = GEMM_VBMI && nv == 4 && !raw;
        double per_k = quad ? 1 + mr * (6 + 11) : (raw ? 7 : 4) * nv + mr * (3 + 4 * nv);
        double c = (double)((n + nv * GW - 1) / (nv * GW)) * (double)((m + mr - 1) / mr) * per_k;
        if (c < cost) {
            cost = c;
            *nv_out = nv;
            *mr_out = mr;
        }
    }
#else
    (void)m;
    (void)n;
    *nv_out = NV;
    *mr_out = MR;
#endif
}

LUT_INLINE void store_tile(const gemm_job *g, vf acc[MR_MAX][NV], int i0, int i1, int j0, int j1, const int nv)
{
    float out[NR_MAX];
    for (int r = 0; r < i1 - i0; r++) {
        if (gemm_store_row_v(g, i0 + r, j0, j1, acc[r], nv)) continue;
        for (int v = 0; v < nv; v++) VF_STORE(out + v * GW, acc[r][v]);
        gemm_store_row(g, i0 + r, j0, j1, out);
    }
}

/* The accumulators of row i over columns [j0, j1) (nv vectors): +0, or C's
 * sums for mts_gemm_acc (gemm_job.cont). */
LUT_INLINE void start_row(const gemm_job *g, int i, int j0, int j1, const int nv, vf *acc)
{
    for (int v = 0; v < nv; v++) acc[v] = VF_ZERO();
    if (g->cont) {
        float out[NR_MAX] = {0};
        gemm_start_row(g, i, j0, j1, out);
        for (int v = 0; v < nv; v++) acc[v] = VF_LOAD(out + v * GW);
    }
}

/* The row pointers of a tile's mr rows (rows past m repeat the last one;
 * their results are dropped) and its accumulators (start_row). */
LUT_INLINE void tile_rows(const gemm_lutpack *c, const gemm_job *g, int i0, int i1, int j0, int j1, const int mr,
                          const int nv, const uint32_t *ai[MR_MAX], const float *as[MR_MAX], vf acc[MR_MAX][NV])
{
    const int K = g->k;
    for (int r = 0; r < mr; r++) {
        int i = i0 + r < i1 ? i0 + r : i1 - 1;
        ai[r] = c->Ai + (size_t)i * (size_t)K;
        as[r] = c->As + (size_t)i * (size_t)K;
        start_row(g, i, j0, j1, nv, acc[r]);
    }
}

/* Gather path: products Tf[ma << M | mb] * (Sa * Sb). */
LUT_INLINE void lut_tile_gather(const gemm_lutpack *c, const gemm_job *g, int i0, int i1, int panel, int j0, int j1,
                            const int nv, const int mr)
{
    const int K = g->k, nr = nv * GW;
    const uint32_t *bi = c->Bi + (size_t)panel * (size_t)K * nr;
    const float *bs = c->Bs + (size_t)panel * (size_t)K * nr;
    const uint32_t *ai[MR_MAX];
    const float *as[MR_MAX];
    vf acc[MR_MAX][NV];

    tile_rows(c, g, i0, i1, j0, j1, mr, nv, ai, as, acc);
    for (int kk = 0; kk < K; kk++) {
        size_t o = (size_t)kk * nr;
        vi bix[NV];
        vf bsx[NV];
        for (int v = 0; v < nv; v++) {
            bix[v] = VI_LOAD(bi + o + v * GW);
            bsx[v] = VF_LOAD(bs + o + v * GW);
        }
        for (int r = 0; r < mr; r++) {
            vi ia = VI_SET1(ai[r][kk]);
            vf sa = VF_SET1(as[r][kk]);
            for (int v = 0; v < nv; v++)
                acc[r][v] = VF_ADD(acc[r][v], VF_MUL(VF_GATHER(c->Tf, VI_OR(ia, bix[v])), VF_MUL(sa, bsx[v])));
        }
    }
    store_tile(g, acc, i0, i1, j0, j1, nv);
}

#if GEMM_VBMI
/* Byte-table path: 16 lookups per permute instruction, no memory gathers. */
LUT_INLINE void lut_tile_vbmi(const gemm_lutpack *c, const gemm_job *g, int i0, int i1, int panel, int j0, int j1,
                          const int nv, const int raw, const int mr)
{
    const int K = g->k, nr = nv * GW;
    const uint32_t *bi = raw ? NULL : c->Bi + (size_t)panel * (size_t)K * nr;
    const float *bs = raw ? NULL : c->Bs + (size_t)panel * (size_t)K * nr;
    const uint32_t *braw = g->B + j0; /* raw: row kk of B at braw + kk * ldb */
    const vbmi_rawb_k rk = vbmi_rawb_consts(g->lut->fmt.M);
    const vq_k q = vq_consts(g->bround); /* raw B has bbad == 0: the clean rounding */
    __mmask16 ld[NV]; /* raw: the lanes of each vector inside [j0, j1) */
    for (int v = 0; v < NV; v++) {
        int left = j1 - j0 - v * GW;
        ld[v] = left >= GW ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
    }
    const uint32_t *ai[MR_MAX];
    const float *as[MR_MAX];
    vf acc[MR_MAX][NV];

    tile_rows(c, g, i0, i1, j0, j1, mr, nv, ai, as, acc);
    for (int kk = 0; kk < K; kk++) {
        size_t o = (size_t)kk * nr;
        vi bix[NV];
        vf bsx[NV];
        for (int v = 0; v < nv; v++) {
            if (raw) {
                /* rows of B lie ldb floats apart (a page apart for a convolution's
                 * [K][N*P] operand): fetch RAW_PF rows ahead */
                if (kk + RAW_PF < K)
                    _mm_prefetch((const char *)(braw + (size_t)(kk + RAW_PF) * g->ldb + v * GW), _MM_HINT_T0);
                __m512i x = vq_clean(&q, _mm512_maskz_loadu_epi32(ld[v], braw + (size_t)kk * g->ldb + v * GW));
                vbmi_raw_b(&rk, x, &bix[v], &bsx[v]);
                continue;
            }
            bix[v] = VI_LOAD(bi + o + v * GW);
            bsx[v] = VF_LOAD(bs + o + v * GW);
        }
        for (int r = 0; r < mr; r++) {
            const unsigned char *row = c->TB + ai[r][kk];
            __m512i tlo = _mm512_loadu_si512((const void *)row), thi = _mm512_loadu_si512((const void *)(row + 64));
            __m512i sa = VI_OF(VF_SET1(as[r][kk]));
            for (int v = 0; v < nv; v++)
                acc[r][v] = _mm512_fmadd_ps(vf_lut_byte_q(tlo, thi, bix[v], sa), bsx[v], acc[r][v]);
        }
    }
    store_tile(g, acc, i0, i1, j0, j1, nv);
}

/* Quad path (byte tables, packed B, 4 rows x 64 columns): a 128-entry
 * permute costs the same for 64 bytes as for the 16 the path above uses, so
 * here one permute per row and k looks up all 64 lanes of the panel: Bq
 * holds vector v's mantissas in byte v of each lane, and vector v's bytes
 * are moved to byte 2 and merged into the row's scale (a masked vpshufb for
 * vectors 0, 1 and 3, which measured 15% faster than shift + blend: the
 * shifts share one port with half the FMAs; a blend for vector 2). The merge
 * replaces byte 2 of Sa's bits, which holds the exponent's low bit, so the
 * packing clears that bit from As (Sa' = Sa / 2^(ea & 1)) and keeps it in
 * Ai's bit 0, which picks Sb or 2 Sb from Bs: q = Sa' Tf is exact and
 * normal as before and q * (2^(ea & 1) Sb) is the exact product p, so the
 * FMA gives the bits of acc + p. A zero a reads the all-zero row (q = its
 * signed zero). Per 16 products: a quarter of a permute, a byte shuffle or
 * blend and an FMA, against a permute, an add and an FMA above. */
#define QUAD_BLEND(sa, x) _mm512_castsi512_ps(_mm512_mask_blend_epi8(VBMI_BYTE2, sa, x))
/* byte v of each lane moved to byte 2 and merged into sa: vpshufb within 128-bit lanes */
#define QUAD_SHUF(sa, x, ctl) _mm512_castsi512_ps(_mm512_mask_shuffle_epi8(sa, VBMI_BYTE2, x, ctl))
/* The quad kernels' vpshufb controls: byte 2 of lane j takes byte
 * 4 (j % 4) + v of its 128-bit lane (ctl[2] unused: vector 2 is blended). */
static inline void quad_ctl(__m512i ctl[4])
{
    for (int v = 0; v < 4; v++) {
        int lanes[16];
        for (int j = 0; j < 16; j++) lanes[j] = (int)(0x80008080u | (uint32_t)(4 * (j % 4) + v) << 16);
        ctl[v] = _mm512_loadu_si512((const void *)lanes);
    }
}

/* nvv: the vectors of the panel that hold columns of C (the last panel of a
 * job whose n is not a multiple of 64 has fewer): the others are padding,
 * never stored, so their lookups' merges and FMAs are left out. */
LUT_INLINE void lut_tile_quad(const gemm_lutpack *c, const gemm_job *g, int i0, int i1, int panel, int j0, int j1,
                              const int nvv)
{
    const int K = g->k;
    const unsigned char *bq = c->Bq + (size_t)panel * (size_t)K * 64;
    const float *bs = c->Bs + (size_t)panel * (size_t)K * 128;
    const uint32_t *ai[MR_MAX];
    const float *as[MR_MAX];
    vf acc[MR_MAX][NV];

    tile_rows(c, g, i0, i1, j0, j1, MR, NV, ai, as, acc);
    __m512i ctl[4];
    quad_ctl(ctl);
    for (int kk = 0; kk < K; kk++) {
        const __m512i x = _mm512_loadu_si512((const void *)(bq + (size_t)kk * 64));
        const float *bk = bs + (size_t)kk * 128;
        for (int r = 0; r < MR; r++) {
            uint32_t off = ai[r][kk];
            const unsigned char *row = c->TB + (off & ~1u);
            const float *sb = bk + 64 * (off & 1u);
            __m512i t = _mm512_permutex2var_epi8(_mm512_loadu_si512((const void *)row), x,
                                                 _mm512_loadu_si512((const void *)(row + 64)));
            __m512i sa = VI_OF(VF_SET1(as[r][kk]));
            acc[r][0] = _mm512_fmadd_ps(QUAD_SHUF(sa, t, ctl[0]), VF_LOAD(sb), acc[r][0]);
            if (nvv > 1) acc[r][1] = _mm512_fmadd_ps(QUAD_SHUF(sa, t, ctl[1]), VF_LOAD(sb + 16), acc[r][1]);
            if (nvv > 2) acc[r][2] = _mm512_fmadd_ps(QUAD_BLEND(sa, t), VF_LOAD(sb + 32), acc[r][2]);
            if (nvv > 3) acc[r][3] = _mm512_fmadd_ps(QUAD_SHUF(sa, t, ctl[3]), VF_LOAD(sb + 48), acc[r][3]);
        }
    }
    store_tile(g, acc, i0, i1, j0, j1, nvv);
}

/* Sparse form of the quad kernel: each row runs over its nonzero elements
 * of A only (gemm_lutpack.nzt). A left-out a is a signed zero, whose
 * product adds +-0 to the row's sum; that sum starts at +0 and RNE never
 * makes it -0 (x + -x is +0), so the addition changes nothing and every
 * output keeps the bits of the dense order. The lookup, merge and FMA are
 * the quad kernel's, but a packed row of B now serves one row, not four:
 * per product it measured about 1.15x the quad kernel (300 x 784 x 64,
 * 2026-11-26), hence GEMM_SPARSE_FRAC. Two rows run side by side (their
 * lists in step, then the longer one's rest), which measured 4% faster
 * than one. Tiles of SPARSE_MR rows keep a transposed store's rows
 * together (gemm_tiles). */
#define SPARSE_MR 16

/* The state shared by one tile's rows. */
typedef struct sparse_k {
    const unsigned char *TB, *bq; /* table; the panel's Bq */
    const float *bs;              /* the panel's Bs */
    __m512i ctl[4];               /* as lut_tile_quad's */
} sparse_k;

/* One product of a row, its t-th nonzero: acc[0..3] += its 64 lanes (as
 * lut_tile_quad). */
LUT_INLINE void sparse_step(const sparse_k *s, const gemm_lutpack *c, size_t t, vf acc[4])
{
    const unsigned char *row = s->TB + c->nzt[t];
    const uint32_t b = c->nzb[t];
    const float *sb = (const float *)(const void *)((const char *)s->bs + b);
    __m512i x = _mm512_permutex2var_epi8(_mm512_loadu_si512((const void *)row),
                                         _mm512_loadu_si512((const void *)(s->bq + ((b >> 3) & ~63u))),
                                         _mm512_loadu_si512((const void *)(row + 64)));
    __m512i sa = VI_OF(VF_SET1(c->nzs[t]));
    acc[0] = _mm512_fmadd_ps(QUAD_SHUF(sa, x, s->ctl[0]), VF_LOAD(sb), acc[0]);
    acc[1] = _mm512_fmadd_ps(QUAD_SHUF(sa, x, s->ctl[1]), VF_LOAD(sb + 16), acc[1]);
    acc[2] = _mm512_fmadd_ps(QUAD_BLEND(sa, x), VF_LOAD(sb + 32), acc[2]);
    acc[3] = _mm512_fmadd_ps(QUAD_SHUF(sa, x, s->ctl[3]), VF_LOAD(sb + 48), acc[3]);
}

LUT_INLINE void sparse_store(const gemm_job *g, int i, int j0, int j1, const vf acc[4])
{
    float out[64] __attribute__((aligned(64)));
    if (gemm_store_row_v(g, i, j0, j1, acc, 4)) return;
    for (int v = 0; v < 4; v++) VF_STORE(out + 16 * v, acc[v]);
    gemm_store_row(g, i, j0, j1, out);
}

static void lut_tile_sparse(const gemm_job *g, void *vctx, int i0, int i1, int panel, int j0, int j1)
{
    const gemm_lutpack *c = vctx;
    const size_t K = (size_t)g->k;
    if (c->panbad[panel]) {
        gemm_tile_scalar(g, i0, i1, j0, j1);
        return;
    }
    sparse_k s;
    s.TB = c->TB;
    s.bq = c->Bq + (size_t)panel * K * 64;
    s.bs = c->Bs + (size_t)panel * K * 128;
    quad_ctl(s.ctl);
    for (int i = i0; i < i1;) {
        if (c->rowbad[i]) {
            gemm_tile_scalar(g, i, i + 1, j0, j1);
            i++;
            continue;
        }
        size_t e = (size_t)i * K, end = e + (size_t)c->nnz[i];
        vf a[4];
        start_row(g, i, j0, j1, 4, a);
        if (i + 1 < i1 && !c->rowbad[i + 1]) { /* rows i and i + 1 side by side */
            size_t f = (size_t)(i + 1) * K, fend = f + (size_t)c->nnz[i + 1];
            vf b[4];
            start_row(g, i + 1, j0, j1, 4, b);
            for (; e < end && f < fend; e++, f++) {
                sparse_step(&s, c, e, a);
                sparse_step(&s, c, f, b);
            }
            for (; f < fend; f++) sparse_step(&s, c, f, b);
            sparse_store(g, i + 1, j0, j1, b);
            for (; e < end; e++) sparse_step(&s, c, e, a);
            sparse_store(g, i, j0, j1, a);
            i += 2;
            continue;
        }
        for (; e < end; e++) sparse_step(&s, c, e, a);
        sparse_store(g, i, j0, j1, a);
        i++;
    }
}
#endif

#if GEMM_QUAD_W == 8
/* Shuffle path (AVX2 + FMA builds, the byte tables of the VBMI path): the
 * quad layout with 8-lane vectors (Bq: byte 4j + v holds the mantissa of
 * lane j of vector v, 32 lanes a panel). vpshufb looks up 16-byte tables,
 * so a lookup of the row of a's mantissa (2^M entries of 128 bytes) takes
 * nc = 2^M / 16 shuffles, one per 16 entries (nc = 1 when M <= 4), and a
 * blend tree on each index's bits 4..6 (nc - 1 vpblendvb, selected by the
 * byte's top bit: the index shifted left 3, 2 or 1 within 16-bit lanes) keeps
 * each lane's; the index's bit 7 is clear, so no lane is zeroed. Then per
 * vector v a second vpshufb moves byte v of each 32-bit lane to byte 2 and
 * zeroes the rest, one integer add of Sa's bits makes q = Sa Tf and one
 * FMA adds q Sb, the exact product (vf_lut_byte_q's argument, gemm_simd.h).
 * A zero a reads the all-zero row (q = Sa, its signed zero). Per 32
 * products and row: nc loads and shuffles, nc - 1 blends, then 4 shuffles,
 * adds and FMAs; the gather path's 4 gathers cost several times that. */
#define SHUF_MR 2 /* rows a tile; 1 measured no faster on a Zen 3 (512^3: 20.6-25.0 ms either way, noisy VM) */

/* nvv: the vectors of the panel holding columns of C (as lut_tile_quad). */
LUT_INLINE void lut_tile_shuf(const gemm_lutpack *c, const gemm_job *g, int i0, int i1, int panel, int j0, int j1,
                              const int nc, const int nvv)
{
    const int K = g->k;
    const unsigned char *bq = c->Bq + (size_t)panel * (size_t)K * 32;
    const float *bs = c->Bs + (size_t)panel * (size_t)K * 32;
    const uint32_t *ai[MR_MAX];
    const float *as[MR_MAX];
    vf acc[MR_MAX][NV];
    __m256i ctl[4];
    gemm_shuf_ctl(ctl);

    tile_rows(c, g, i0, i1, j0, j1, SHUF_MR, NV, ai, as, acc);
    for (int kk = 0; kk < K; kk++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(bq + (size_t)kk * 32));
        const __m256i s4 = _mm256_slli_epi16(x, 3), s5 = _mm256_slli_epi16(x, 2), s6 = _mm256_slli_epi16(x, 1);
        const float *bk = bs + (size_t)kk * 32;
        for (int r = 0; r < SHUF_MR; r++) {
            __m256i t = gemm_shuf_lookup(c->TB + ai[r][kk], x, s4, s5, s6, nc);
            __m256i sa = VI_OF(VF_SET1(as[r][kk]));
            for (int v = 0; v < nvv; v++)
                acc[r][v] = _mm256_fmadd_ps(gemm_shuf_q(t, ctl[v], sa),
                                            VF_LOAD(bk + 8 * v), acc[r][v]);
        }
    }
    store_tile(g, acc, i0, i1, j0, j1, nvv);
}

/* One instance per table width and panel width. */
static void lut_tile_shuf_at(const gemm_lutpack *c, const gemm_job *g, int i0, int i1, int panel, int j0, int j1)
{
    const int M = g->lut->fmt.M, nvv = (j1 - j0 + GW - 1) / GW;
    const int nc = M <= 4 ? 1 : 1 << (M - 4);
#define SHUF_NVV(NC)                                                                                                   \
    do {                                                                                                               \
        if (nvv == 1) lut_tile_shuf(c, g, i0, i1, panel, j0, j1, NC, 1);                                               \
        else if (nvv == 2) lut_tile_shuf(c, g, i0, i1, panel, j0, j1, NC, 2);                                          \
        else if (nvv == 3) lut_tile_shuf(c, g, i0, i1, panel, j0, j1, NC, 3);                                          \
        else lut_tile_shuf(c, g, i0, i1, panel, j0, j1, NC, 4);                                                        \
    } while (0)
    if (nc == 1) SHUF_NVV(1);
    else if (nc == 2) SHUF_NVV(2);
    else if (nc == 4) SHUF_NVV(4);
    else SHUF_NVV(8);
#undef SHUF_NVV
}
#endif

/* One instance per tile shape, so the loops over rows and vectors unroll
 * into registers. */
#define LUT_SHAPES(F, ...)                                                                                             \
    do {                                                                                                               \
        if (nv == 1 && mr == 8) F(__VA_ARGS__, 1, 8);                                                                  \
        else if (nv == 1) F(__VA_ARGS__, 1, MR);                                                                       \
        else if (nv == 2 && mr == 6) F(__VA_ARGS__, 2, 6);                                                             \
        else if (nv == 2 && mr == 8) F(__VA_ARGS__, 2, 8);                                                             \
        else if (nv == 2) F(__VA_ARGS__, 2, MR);                                                                       \
        else F(__VA_ARGS__, NV, MR);                                                                                   \
    } while (0)
#define LUT_GATHER(c, g, i0, i1, panel, j0, j1, NVV, MRV) lut_tile_gather(c, g, i0, i1, panel, j0, j1, NVV, MRV)
#define LUT_VBMI(c, g, i0, i1, panel, j0, j1, RAW, NVV, MRV) lut_tile_vbmi(c, g, i0, i1, panel, j0, j1, NVV, RAW, MRV)

static void lut_tile(const gemm_job *g, void *vctx, int i0, int i1, int panel, int j0, int j1)
{
    const gemm_lutpack *c = vctx;
    int bad = c->rawb ? 0 : c->panbad[panel]; /* raw B: none in B (g->bbad) */
    for (int i = i0; i < i1; i++) bad |= c->rowbad[i];
    if (bad) {
        gemm_tile_scalar(g, i0, i1, j0, j1);
        return;
    }
    const int nv = c->NR / GW, mr = c->mr;
#if GW == 8
    (void)mr;
#endif
#if GEMM_VBMI
    if (c->TB) {
        if (c->quad) { /* the vectors holding columns [j0, j1) */
            int nvv = (j1 - j0 + GW - 1) / GW;
            if (nvv == 1) lut_tile_quad(c, g, i0, i1, panel, j0, j1, 1);
            else if (nvv == 2) lut_tile_quad(c, g, i0, i1, panel, j0, j1, 2);
            else if (nvv == 3) lut_tile_quad(c, g, i0, i1, panel, j0, j1, 3);
            else lut_tile_quad(c, g, i0, i1, panel, j0, j1, NV);
        }
        else if (c->rawb) LUT_SHAPES(LUT_VBMI, c, g, i0, i1, panel, j0, j1, 1);
        else LUT_SHAPES(LUT_VBMI, c, g, i0, i1, panel, j0, j1, 0);
        return;
    }
#elif GEMM_QUAD_W == 8
    if (c->quad) {
        lut_tile_shuf_at(c, g, i0, i1, panel, j0, j1);
        return;
    }
#endif
    if (!c->Tf) { /* a byte table without its layout: not asked for (gemm_lut) */
        gemm_tile_scalar(g, i0, i1, j0, j1);
        return;
    }
    LUT_SHAPES(LUT_GATHER, c, g, i0, i1, panel, j0, j1);
}

/* 1 when some row is flagged for the fixed exponent range alone. */
static int range_rows(const gemm_lutpack *lp, int m)
{
    for (int i = 0; i < m; i++)
        if (lp->rowbad[i] == GEMM_BAD_RANGE) return 1;
    return 0;
}

int gemm_lut(const gemm_job *g, mts_err *err)
{
    gemm_lutpack lp;
    int nv, mr;
    pick_tile(g, &nv, &mr);
    int nr = nv * GW;
    /* byte tables where a kernel reads them: VBMI (raw B too) or AVX2 (quad layout only) */
    int rc = gemm_lutpack_make(g, nr, GEMM_QUAD_W ? 2 : 0, GEMM_VBMI && gemm_want_rawb(g, mr, nr), &lp, err);
    if (rc == 1) return gemm_scalar(g, err); /* format or table outside the exact-product condition */
    if (rc != MTS_OK) return rc;
    if (lp.rawb && range_rows(&lp, g->m)) {
        /* rows only the fixed exponent rule rejects (a gradient of 2^-70):
         * pack B after all, so the packing learns B's range and can take
         * them, instead of the scalar kernel */
        gemm_lutpack_free(&lp);
        rc = gemm_lutpack_make(g, nr, GEMM_QUAD_W ? 2 : 0, 0, &lp, err);
        if (rc != MTS_OK) return rc; /* 1 is not possible: the table passed above */
    }
#if GEMM_QUAD_W == 8
    if (lp.quad) mr = SHUF_MR; /* the shuffle kernel's tiles (the gather path's otherwise) */
#endif
    lp.mr = mr;
#if GEMM_VBMI
    if (lp.nzt) /* A sparse enough: the quad kernel's sparse form */
        gemm_tiles(g, SPARSE_MR, nr, lut_tile_sparse, &lp);
    else
#endif
        gemm_tiles(g, mr, nr, lut_tile, &lp);
    gemm_lutpack_free(&lp);
    return MTS_OK;
}
#else
int gemm_lut_nr(void) { return 0; }
int gemm_lut_quad(void) { return 0; }
int gemm_lut(const gemm_job *g, mts_err *err) { return gemm_scalar(g, err); }
#endif
