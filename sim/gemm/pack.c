/* pack.c - operand packing for the SIMD LUT and FMAq kernels: A as
 * per-element (index part, power of two) pairs, B as column panels of NR
 * lanes (zero-padded past n) with the same split, plus per-row and
 * per-panel flags for operands the kernels do not take (lut.c has the
 * exactness argument). Native FMAq products keep a and b as they are. */
#include <stdlib.h>

#include "gemm_internal.h"

void mts__gemm_lutpack_free(gemm_lutpack *lp)
{
    mts__gemm_ws_free(lp->Tf);
    mts__gemm_ws_free(lp->TB);
    mts__gemm_ws_free(lp->Ai);
    mts__gemm_ws_free(lp->As);
    mts__gemm_ws_free(lp->Bi);
    mts__gemm_ws_free(lp->Bs);
    mts__gemm_ws_free(lp->Bm);
    mts__gemm_ws_free(lp->rowbad);
    mts__gemm_ws_free(lp->panbad);
    memset(lp, 0, sizeof *lp);
}

int mts__gemm_lutpack_make(const gemm_job *g, int NR, int vbmi, gemm_lutpack *lp, mts_err *err)
{
    int lut = g->prod == GEMM_PROD_LUT, M = lut ? g->lut->fmt.M : 0;
    int npan = (g->n + NR - 1) / NR, nv = NR / 16; /* NR <= 64 */
    size_t K = (size_t)g->k, m = (size_t)g->m, nb = (size_t)npan * K * (size_t)NR;

    memset(lp, 0, sizeof *lp);
    lp->NR = NR;
    if (lut) {
        if (vbmi) lp->TB = mts__gemm_lut_bytes(g->lut);
        if (!lp->TB && !(lp->Tf = mts__gemm_lut_table(g->lut))) return 1; /* no exact SIMD form */
    }
    lp->As = mts__gemm_ws_alloc(m * K * sizeof *lp->As, 0);
    lp->Bs = mts__gemm_ws_alloc(nb * sizeof *lp->Bs, 0);
    lp->rowbad = mts__gemm_ws_alloc(m, 1);
    lp->panbad = mts__gemm_ws_alloc((size_t)npan, 1);
    int ok = lp->As && lp->Bs && lp->rowbad && lp->panbad;
    if (lut) {
        lp->Ai = mts__gemm_ws_alloc(m * K * sizeof *lp->Ai, 0);
        lp->Bi = mts__gemm_ws_alloc(nb * sizeof *lp->Bi, 0);
        ok = ok && lp->Ai && lp->Bi;
        if (lp->TB) ok = ok && (lp->Bm = mts__gemm_ws_alloc((size_t)npan * K * (size_t)nv * sizeof *lp->Bm, 1));
    }
    if (!ok) {
        mts__gemm_lutpack_free(lp);
        return mts_fail(err, MTS_ENOMEM, "gemm: out of memory packing operands (%d x %d x %d)", g->m, g->n, g->k);
    }
    const uint32_t zero_row = (uint32_t)(((size_t)1 << M) * 128u);
#pragma omp parallel for num_threads(g->threads) schedule(dynamic, 8)
    for (size_t i = 0; i < m; i++)
        for (size_t kk = 0; kk < K; kk++) {
            size_t o = i * K + kk;
            uint32_t x = g->A[o];
            if (!lut) {
                lp->As[o] = mts_u2f(x);
            } else {
                mts__gemm_lut_split(x, M, 1, &lp->Ai[o], &lp->As[o]);
                if (lp->TB) lp->Ai[o] = mts_f32_exp(x) ? (lp->Ai[o] >> M) * 128u : zero_row;
            }
            if (!mts__gemm_exp_ok(x)) lp->rowbad[i] = 1;
        }
#pragma omp parallel for num_threads(g->threads) schedule(dynamic, 1)
    for (int p = 0; p < npan; p++) {
        int bad = 0, j0 = p * NR, w = g->n - j0 < NR ? g->n - j0 : NR; /* w real lanes, rest padding */
        for (size_t kk = 0; kk < K; kk++) {
            size_t o = ((size_t)p * K + kk) * (size_t)NR;
            const uint32_t *src = g->B + kk * (size_t)g->n + (size_t)j0;
            uint64_t mask[4] = {0, 0, 0, 0};
            for (int jj = 0; jj < NR; jj++) {
                uint32_t x = jj < w ? src[jj] : 0;
                bad |= !mts__gemm_exp_ok(x);
                if (!lut) {
                    lp->Bs[o + (size_t)jj] = mts_u2f(x);
                    continue;
                }
                mts__gemm_lut_split(x, M, 0, &lp->Bi[o + (size_t)jj], &lp->Bs[o + (size_t)jj]);
                if (lp->TB) {
                    lp->Bi[o + (size_t)jj] <<= 16; /* byte 2 of the lane: the byte the permute keeps */
                    if (mts_f32_exp(x)) mask[jj / 16] |= (uint64_t)1 << (4 * (jj % 16) + 2);
                }
            }
            if (lp->TB)
                for (int v = 0; v < nv && v < 4; v++) lp->Bm[((size_t)p * K + kk) * (size_t)nv + (size_t)v] = mask[v];
        }
        lp->panbad[p] = (unsigned char)bad;
    }
    return MTS_OK;
}
