/* tile.c - the portable scalar kernel (one output at a time, in the
 * documented order) and the OpenMP tile driver every kernel uses. The scalar
 * kernel is what non-SIMD builds run, and what SIMD kernels fall back to for
 * tiles whose operands they do not handle (NaN, inf, extreme exponents). */
#include "gemm_internal.h"

uint32_t gemm_dot(const gemm_job *g, int i, int j)
{
    size_t a = (size_t)i * g->lda, n = g->ldb;

    if (!g->fmaq) {
        float acc = g->cont ? *gemm_out(g, i, j) : 0.0f;
        for (int kk = 0; kk < g->k; kk++)
            acc = acc + mts_u2f(gemm_prod_rc(g, gemm_a(g, a + (size_t)kk), gemm_b(g, (size_t)kk * n + (size_t)j)));
        return mts_f2u(acc);
    }
    /* mts_fmaq_dot's order: chunks from +0, then chunk sums left to right */
    uint32_t y = 0;
    for (int c0 = 0; c0 < g->k; c0 += g->chunk) {
        int c1 = g->k - c0 < g->chunk ? g->k : c0 + g->chunk;
        uint32_t s = 0;
        for (int kk = c0; kk < c1; kk++)
            s = mts_fmaq(&g->qprod, &g->qacc,
                         gemm_prod_rc(g, gemm_a(g, a + (size_t)kk), gemm_b(g, (size_t)kk * n + (size_t)j)), s);
        y = c0 == 0 ? s : mts_qadd(&g->qacc, y, s);
    }
    return y;
}

void gemm_tile_scalar(const gemm_job *g, int i0, int i1, int j0, int j1)
{
    for (int i = i0; i < i1; i++)
        for (int j = j0; j < j1; j++)
            gemm_store(gemm_out(g, i, j), g->beta, mts_u2f(gemm_dot(g, i, j)));
}

/* Tile t of gemm_tiles' order: row block t % nrb of panel t / nrb. */
static inline void tile_at(const gemm_job *g, gemm_tile_fn fn, void *ctx, int MR, int NR, int nrb, long t)
{
    int panel = (int)(t / nrb), rb = (int)(t % nrb);
    int i0 = rb * MR, i1 = i0 + MR < g->m ? i0 + MR : g->m;
    int j0 = panel * NR, j1 = j0 + NR < g->n ? j0 + NR : g->n;
    fn(g, ctx, i0, i1, panel, j0, j1);
}

void gemm_tiles(const gemm_job *g, int MR, int NR, gemm_tile_fn fn, void *ctx)
{
    int nrb = (g->m + MR - 1) / MR, npan = (g->n + NR - 1) / NR;
    long ntiles = (long)nrb * npan;
    /* A job that stores transposed (swapped, or asked for C^T, not both:
     * gemm_out) writes the MR rows of a tile as adjacent floats of C, so the
     * row blocks of one panel share C's cache lines and must stay on one
     * thread (splitting them cost 6x on a k = 16 GEMM). */
    long unit = g->swap != g->ct ? nrb : 1;
    /* about 8 chunks per thread: every chunk taken is an atomic on a line
     * the cores pass back and forth, which cost more than the tiles of a
     * skinny GEMM when chunks were 2 tiles */
    long chunk = (ntiles + 8L * g->threads - 1) / (8L * g->threads);
    chunk = (chunk + unit - 1) / unit * unit;
    int threads = ntiles > chunk ? g->threads : 1;
    if (threads <= 1) { /* no team: gemm_internal.h, after gemm_tiles */
        for (long t = 0; t < ntiles; t++) tile_at(g, fn, ctx, MR, NR, nrb, t);
        return;
    }
    /* dynamic: a thread the OS preempts does not hold the others at the
     * barrier; which thread computes a tile never changes its bits */
#pragma omp parallel for num_threads(threads) schedule(dynamic, chunk)
    for (long t = 0; t < ntiles; t++) tile_at(g, fn, ctx, MR, NR, nrb, t);
}

static void scalar_tile(const gemm_job *g, void *ctx, int i0, int i1, int panel, int j0, int j1)
{
    (void)ctx;
    (void)panel;
    gemm_tile_scalar(g, i0, i1, j0, j1);
}

int gemm_scalar(const gemm_job *g, mts_err *err)
{
    (void)err;
    gemm_tiles(g, 4, 16, scalar_tile, NULL);
    return MTS_OK;
}
