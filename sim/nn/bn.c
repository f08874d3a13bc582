/* bn.c - BatchNorm over (N, H, W) per channel, FP32 values with FP64
 * reductions (no catastrophic cancellation in the variance) in the fixed
 * blocked order of fmath.h over the terms in (n, h, w) order, which the GPU
 * twin implements too (docs/training.md).
 *
 * mts_bn_forward_ref / mts_bn_backward_ref are the readable references: one
 * term at a time through mts_fm_sumd_push. The fast forms compute the same
 * sequence of operations: where a plane holds whole chunks of the blocked
 * order (H*W a multiple of 64: every ResNet stage), eight chunks are summed
 * side by side, each its own FP64 chain (the chunk's sequential sum from +0,
 * the terms formed by the same FP64 operations), and the chunk sums go into
 * the pairwise tree in their order; the rest term by term. Elementwise
 * passes are the reference's FP32 expressions. The passes are bound by
 * memory at ResNet-20's sizes (8 MB per layer and pass at batch 128). */
#include <math.h>

#include "mantis/fmath.h"
#include "mantis/nn_ops.h"
#include "nn_internal.h"

void mts_bn_forward_ref(int train, int N, int C, int HW, const float *x, const float *gamma, const float *beta,
                        float *rmean, float *rvar, float mom, float eps, float *y, float *xhat, float *invstd)
{
    size_t cnt = (size_t)N * HW;
    for (int c = 0; c < C; c++) {
        float mean, var;
        if (train) {
            mts_fm_sumd acc;
            mts_fm_sumd_init(&acc);
            for (int n = 0; n < N; n++) {
                const float *xp = x + ((size_t)n * C + c) * HW;
                for (int i = 0; i < HW; i++) mts_fm_sumd_push(&acc, xp[i]);
            }
            double m = mts_fm_sumd_sum(&acc) / (double)cnt;
            mts_fm_sumd_init(&acc);
            for (int n = 0; n < N; n++) {
                const float *xp = x + ((size_t)n * C + c) * HW;
                for (int i = 0; i < HW; i++) mts_fm_sumd_push(&acc, (xp[i] - m) * (xp[i] - m));
            }
            double s2 = mts_fm_sumd_sum(&acc);
            mean = (float)m;
            var = (float)(s2 / (double)cnt);
            /* running variance uses the unbiased estimate, as PyTorch */
            float uvar = cnt > 1 ? (float)(s2 / (double)(cnt - 1)) : var;
            rmean[c] = (1.0f - mom) * rmean[c] + mom * mean;
            rvar[c] = (1.0f - mom) * rvar[c] + mom * uvar;
        } else {
            mean = rmean[c];
            var = rvar[c];
        }
        float is = 1.0f / sqrtf(var + eps);
        if (invstd) invstd[c] = is;
        for (int n = 0; n < N; n++) {
            size_t off = ((size_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                float h = (x[off + i] - mean) * is;
                if (xhat) xhat[off + i] = h;
                y[off + i] = gamma[c] * h + beta[c];
            }
        }
    }
}

void mts_bn_backward_ref(int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                         const float *invstd, float *dx, float *dgamma, float *dbeta)
{
    double cnt = (double)N * HW;
    for (int c = 0; c < C; c++) {
        mts_fm_sumd ag, agx;
        mts_fm_sumd_init(&ag);
        mts_fm_sumd_init(&agx);
        for (int n = 0; n < N; n++) {
            size_t off = ((size_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                mts_fm_sumd_push(&ag, dy[off + i]);
                mts_fm_sumd_push(&agx, (double)dy[off + i] * xhat[off + i]);
            }
        }
        double sg = mts_fm_sumd_sum(&ag), sgx = mts_fm_sumd_sum(&agx);
        if (dgamma) dgamma[c] = (float)sgx;
        if (dbeta) dbeta[c] = (float)sg;
        if (!dx) continue;
        /* dx = gamma*invstd*(dy - mean(dy) - xhat*mean(dy*xhat)) */
        float k = gamma[c] * invstd[c], mg = (float)(sg / cnt), mgx = (float)(sgx / cnt);
        for (int n = 0; n < N; n++) {
            size_t off = ((size_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) dx[off + i] = k * (dy[off + i] - mg - xhat[off + i] * mgx);
        }
    }
}

/* The terms of one channel's sums: the values (SUM_X), squared deviations
 * from m (SUM_SQ), or the output gradient and its product with xhat
 * (SUM_BWD, two sums). */
enum { SUM_X, SUM_SQ, SUM_BWD };

/* Pushes term j of plane pointers a (and b) into s[0] (and s[1]), as the
 * references do. */
static inline void push_term(int kind, const float *a, const float *b, int j, double m, mts_fm_sumd s[2])
{
    if (kind == SUM_X) mts_fm_sumd_push(&s[0], a[j]);
    else if (kind == SUM_SQ) mts_fm_sumd_push(&s[0], (a[j] - m) * (a[j] - m));
    else {
        mts_fm_sumd_push(&s[0], a[j]);
        mts_fm_sumd_push(&s[1], (double)a[j] * b[j]);
    }
}

/* The channel-c sums of kind over the terms in (n, i) order, in the blocked
 * order of fmath.h (s[0], s[1] initialised by the caller; their sums are
 * taken by the caller). */
static void channel_sums(int kind, int N, int C, int HW, int c, const float *a, const float *b, double m,
                         mts_fm_sumd s[2])
{
    int q0 = 0;
    /* planes of whole chunks: eight chunks a step, each its own FP64 chain
     * (independent adds, where one chain waits on the add latency for every
     * term) */
    const int cpp = HW / MTS_FM_CHUNK, nch = HW % MTS_FM_CHUNK ? 0 : N * cpp;
    for (; q0 + 8 <= nch; q0 += 8) {
        const float *pa[8], *pb[8];
        for (int q = 0; q < 8; q++) {
            int idx = q0 + q, n = idx / cpp, j = idx % cpp;
            size_t off = ((size_t)n * C + c) * HW + (size_t)j * MTS_FM_CHUNK;
            pa[q] = a + off;
            pb[q] = b ? b + off : NULL;
        }
        double l0[8] = {0}, l1[8] = {0};
        for (int i = 0; i < MTS_FM_CHUNK; i++)
            for (int q = 0; q < 8; q++) {
                double xv = pa[q][i];
                if (kind == SUM_X) l0[q] = l0[q] + xv;
                else if (kind == SUM_SQ) l0[q] = l0[q] + (xv - m) * (xv - m);
                else {
                    l0[q] = l0[q] + xv;
                    l1[q] = l1[q] + xv * (double)pb[q][i];
                }
            }
        for (int q = 0; q < 8; q++) {
            mts_fm__sumd_chunk(&s[0], l0[q]);
            if (kind == SUM_BWD) mts_fm__sumd_chunk(&s[1], l1[q]);
        }
    }
    /* the rest term by term, from the first term of chunk q0 */
    size_t t0 = (size_t)q0 * MTS_FM_CHUNK;
    for (int n = (int)(t0 / (size_t)HW); n < N; n++) {
        size_t off = ((size_t)n * C + c) * HW;
        int i0 = n == (int)(t0 / (size_t)HW) ? (int)(t0 % (size_t)HW) : 0;
        for (int i = i0; i < HW; i++) push_term(kind, a + off, b ? b + off : NULL, i, m, s);
    }
}

/* One channel of the forward pass (the reference's body, fast sums). */
static void fwd_channel(int c, int train, int N, int C, int HW, const float *x, const float *gamma,
                        const float *beta, float *rmean, float *rvar, float mom, float eps, float *y, float *xhat,
                        float *invstd)
{
    size_t cnt = (size_t)N * HW;
    float mean, var;
    if (train) {
        mts_fm_sumd s[2];
        mts_fm_sumd_init(&s[0]);
        channel_sums(SUM_X, N, C, HW, c, x, NULL, 0.0, s);
        double m = mts_fm_sumd_sum(&s[0]) / (double)cnt;
        mts_fm_sumd_init(&s[0]);
        channel_sums(SUM_SQ, N, C, HW, c, x, NULL, m, s);
        double s2 = mts_fm_sumd_sum(&s[0]);
        mean = (float)m;
        var = (float)(s2 / (double)cnt);
        float uvar = cnt > 1 ? (float)(s2 / (double)(cnt - 1)) : var;
        rmean[c] = (1.0f - mom) * rmean[c] + mom * mean;
        rvar[c] = (1.0f - mom) * rvar[c] + mom * uvar;
    } else {
        mean = rmean[c];
        var = rvar[c];
    }
    const float is = 1.0f / sqrtf(var + eps), gc = gamma[c], bc = beta[c];
    if (invstd) invstd[c] = is;
    for (int n = 0; n < N; n++) {
        size_t off = ((size_t)n * C + c) * HW;
        const float *xp = x + off;
        float *yp = y + off;
        if (xhat) {
            float *hp = xhat + off;
            for (int i = 0; i < HW; i++) {
                float h = (xp[i] - mean) * is;
                hp[i] = h;
                yp[i] = gc * h + bc;
            }
        } else
            for (int i = 0; i < HW; i++) yp[i] = gc * ((xp[i] - mean) * is) + bc;
    }
}

/* Channels are independent (each its own sums in its own order), so
 * threads that take whole channels leave every bit as one thread does. */
static int bn_threads(int threads, int N, int C, int HW)
{
    if ((double)N * C * HW < 65536.0) return 1; /* waking a team costs more */
    return threads < 1 ? 1 : threads > C ? C : threads;
}

void mts__bn_forward_t(int threads, int train, int N, int C, int HW, const float *x, const float *gamma,
                       const float *beta, float *rmean, float *rvar, float mom, float eps, float *y, float *xhat,
                       float *invstd)
{
    int T = bn_threads(threads, N, C, HW);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int c = 0; c < C; c++) fwd_channel(c, train, N, C, HW, x, gamma, beta, rmean, rvar, mom, eps, y, xhat, invstd);
}

void mts_bn_forward(int train, int N, int C, int HW, const float *x, const float *gamma, const float *beta,
                    float *rmean, float *rvar, float mom, float eps, float *y, float *xhat, float *invstd)
{
    mts__bn_forward_t(1, train, N, C, HW, x, gamma, beta, rmean, rvar, mom, eps, y, xhat, invstd);
}

static void bwd_channel(int c, int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                        const float *invstd, float *dx, float *dgamma, float *dbeta, int pz)
{
    double cnt = (double)N * HW;
    mts_fm_sumd s[2];
    mts_fm_sumd_init(&s[0]);
    mts_fm_sumd_init(&s[1]);
    channel_sums(SUM_BWD, N, C, HW, c, dy, xhat, 0.0, s);
    double sg = mts_fm_sumd_sum(&s[0]), sgx = mts_fm_sumd_sum(&s[1]);
    if (dgamma) dgamma[c] = (float)sgx;
    if (dbeta) dbeta[c] = (float)sg;
    if (!dx) return;
    const float k = gamma[c] * invstd[c], mg = (float)(sg / cnt), mgx = (float)(sgx / cnt);
    for (int n = 0; n < N; n++) {
        size_t off = ((size_t)n * C + c) * HW;
        const float *d = dy + off, *h = xhat + off;
        float *o = dx + off;
        if (pz)
            for (int i = 0; i < HW; i++) o[i] = 0.0f + k * (d[i] - mg - h[i] * mgx);
        else
            for (int i = 0; i < HW; i++) o[i] = k * (d[i] - mg - h[i] * mgx);
    }
}

void mts__bn_backward_t(int threads, int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                        const float *invstd, float *dx, float *dgamma, float *dbeta, int pz)
{
    int T = bn_threads(threads, N, C, HW);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int c = 0; c < C; c++) bwd_channel(c, N, C, HW, dy, gamma, xhat, invstd, dx, dgamma, dbeta, pz);
}

void mts_bn_backward(int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                     const float *invstd, float *dx, float *dgamma, float *dbeta)
{
    mts__bn_backward_t(1, N, C, HW, dy, gamma, xhat, invstd, dx, dgamma, dbeta, 0);
}
