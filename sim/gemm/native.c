/* native.c - native FP32 multiply through our own kernel ("ATnG" of
 * ApproxTrain: the same blocking and order as the LUT kernel, with a*b in
 * place of the lookup), vectorised across n. Per output: acc = +0, then
 * acc = acc + fl(a*b) for k ascending (mul and add, never fused). */
#include <stdlib.h>

#include "gemm_internal.h"
#include "gemm_simd.h"

#if GEMM_SIMD
#define MR 4
#define NR (2 * GW)

int gemm_native_nr(void) { return NR; }

typedef struct native_ctx {
    const float *Bp; /* [panel][k][NR], zero-padded past n; NULL: B read as it is (gemm_want_rawb) */
} native_ctx;

/* One row of B's panel: packed, or the lanes of B's row inside [j0, j1)
 * (masked loads; padding lanes read as +0, as packing pads). */
static inline void load_b(const gemm_job *g, const float *bp, int kk, int j0, int j1, vf *b0, vf *b1)
{
    if (bp) {
        *b0 = VF_LOAD(bp + (size_t)kk * NR);
        *b1 = VF_LOAD(bp + (size_t)kk * NR + GW);
        return;
    }
    const float *row = (const float *)g->B + (size_t)kk * g->ldb + j0;
    int w = j1 - j0;
    if (w == NR) {
        *b0 = VF_LOAD(row);
        *b1 = VF_LOAD(row + GW);
        return;
    }
#if GW == 16
    __mmask16 m0 = w >= GW ? (__mmask16)0xFFFF : (__mmask16)((1u << w) - 1u);
    __mmask16 m1 = w - GW >= GW ? (__mmask16)0xFFFF : w <= GW ? 0 : (__mmask16)((1u << (w - GW)) - 1u);
    *b0 = _mm512_maskz_loadu_ps(m0, row);
    *b1 = _mm512_maskz_loadu_ps(m1, row + GW);
#else
    float t[NR] = {0};
    for (int j = 0; j < w; j++) t[j] = row[j];
    *b0 = VF_LOAD(t);
    *b1 = VF_LOAD(t + GW);
#endif
}

static void native_tile(const gemm_job *g, void *vctx, int i0, int i1, int panel, int j0, int j1)
{
    const native_ctx *c = vctx;
    const int K = g->k;
    const float *bp = c->Bp ? c->Bp + (size_t)panel * (size_t)K * NR : NULL;
    const float *a[MR];
    vf acc[MR][2];
    float out[NR];

    for (int r = 0; r < MR; r++) { /* rows past m repeat the last row; results dropped */
        int i = i0 + r < i1 ? i0 + r : i1 - 1;
        a[r] = (const float *)g->A + (size_t)i * g->lda; /* FP32 products: never rounded (around 0) */
        acc[r][0] = acc[r][1] = VF_ZERO();
        if (g->cont) { /* mts_gemm_acc: go on from C's sums */
            memset(out, 0, sizeof out);
            gemm_start_row(g, i, j0, j1, out);
            acc[r][0] = VF_LOAD(out);
            acc[r][1] = VF_LOAD(out + GW);
        }
    }
    for (int kk = 0; kk < K; kk++) {
        vf b0, b1;
        load_b(g, bp, kk, j0, j1, &b0, &b1);
        for (int r = 0; r < MR; r++) {
            vf av = VF_SET1(a[r][kk]);
            acc[r][0] = VF_ADD(acc[r][0], VF_MUL(av, b0));
            acc[r][1] = VF_ADD(acc[r][1], VF_MUL(av, b1));
        }
    }
    for (int r = 0; r < i1 - i0; r++) {
        if (gemm_store_row_v(g, i0 + r, j0, j1, acc[r], 2)) continue;
        VF_STORE(out, acc[r][0]);
        VF_STORE(out + GW, acc[r][1]);
        gemm_store_row(g, i0 + r, j0, j1, out);
    }
}

/* Panel p of B (NR columns, zero past n) into Bp. */
static void pack_b_panel(const gemm_job *g, float *Bp, size_t K, int p)
{
    int w = g->n - p * NR < NR ? g->n - p * NR : NR;
    for (size_t kk = 0; kk < K; kk++) {
        float *dst = Bp + ((size_t)p * K + kk) * NR;
        const float *src = (const float *)g->B + kk * g->ldb + (size_t)p * NR;
        if (w == NR) { /* whole vectors: a memcpy call per 64 bytes cost more than the copy */
            for (int v = 0; v < NR; v += GW) VF_STORE(dst + v, VF_LOAD(src + v));
            continue;
        }
        memcpy(dst, src, sizeof *dst * (size_t)w);
        for (int jj = w; jj < NR; jj++) dst[jj] = 0.0f;
    }
}

int gemm_native(const gemm_job *g, mts_err *err)
{
    int npan = (g->n + NR - 1) / NR;
    size_t K = (size_t)g->k;
    float *Bp = NULL;
    if (!gemm_want_rawb(g, MR, NR)) {
        if (!(Bp = gemm_ws_alloc((size_t)npan * K * NR * sizeof *Bp, 0)))
            return mts_fail(err, MTS_ENOMEM, "gemm: out of memory packing B (%d x %d)", g->k, g->n);
        int threads = (double)npan * K * NR < 65536.0 ? 1 : g->threads; /* waking a team costs more */
        if (threads <= 1) /* no team: gemm_internal.h */
            for (int p = 0; p < npan; p++) pack_b_panel(g, Bp, K, p);
        else
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
            for (int p = 0; p < npan; p++) pack_b_panel(g, Bp, K, p);
    }
    native_ctx c = {Bp};
    gemm_tiles(g, MR, NR, native_tile, &c);
    gemm_ws_free(Bp);
    return MTS_OK;
}
#else
int gemm_native_nr(void) { return 0; }
int gemm_native(const gemm_job *g, mts_err *err) { return gemm_scalar(g, err); }
#endif
