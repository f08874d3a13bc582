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
 * passes are the reference's FP32 expressions. Every output that can be a
 * NaN (y, xhat, dx, dgamma, dbeta) is fmath.h's canonical NaN: with a NaN
 * statistic (an inf or NaN input) two NaNs of different signs meet in one
 * operation (gamma * invstd against the mean), and which one an x86
 * instruction passes on depends on the compiler's operand order.
 *
 * The net's forms (mts__bn_forward_t / mts__bn_backward_t) move less: the
 * backward recomputes xhat from the BN's input (kept by the net anyway)
 * instead of reading a stored copy, and a BN whose only reader is a ReLU
 * writes the ReLU's output itself and takes the ReLU's backward into its
 * own - every value formed by the same FP32 expression, so the same bits.
 * The sums form their terms along memory first and run the FP64 chains
 * through them after: on the development VM the chains, not the memory
 * traffic, were what the passes cost (docs/training.md, "BatchNorm"). */
#include <math.h>

#include "mantis/fmath.h"
#include "mantis/fpbits.h"
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
            rmean[c] = mts_fm_canon((1.0f - mom) * rmean[c] + mom * mean);
            rvar[c] = mts_fm_canon((1.0f - mom) * rvar[c] + mom * uvar);
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
                if (xhat) xhat[off + i] = mts_fm_canon(h);
                y[off + i] = mts_fm_canon(gamma[c] * h + beta[c]);
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
        if (dgamma) dgamma[c] = mts_fm_canon((float)sgx);
        if (dbeta) dbeta[c] = mts_fm_canon((float)sg);
        if (!dx) continue;
        /* dx = gamma*invstd*(dy - mean(dy) - xhat*mean(dy*xhat)) */
        float k = gamma[c] * invstd[c], mg = (float)(sg / cnt), mgx = (float)(sgx / cnt);
        for (int n = 0; n < N; n++) {
            size_t off = ((size_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) dx[off + i] = mts_fm_canon(k * (dy[off + i] - mg - xhat[off + i] * mgx));
        }
    }
}

/* The terms of one channel's forward sums: the values (SUM_X) or the
 * squared deviations from m (SUM_SQ). The backward's sums: bwd_sums. */
enum { SUM_X, SUM_SQ };

/* The channel-c sum of kind over the terms in (n, i) order, in the blocked
 * order of fmath.h (s initialised by the caller, its sum taken by the
 * caller). */
static void channel_sums(int kind, int N, int C, int HW, int c, const float *a, double m, mts_fm_sumd *s)
{
    int q0 = 0;
    /* planes of whole chunks: eight chunks a step, each its own FP64 chain
     * (independent adds, where one chain waits on the add latency for every
     * term) */
    const int cpp = HW / MTS_FM_CHUNK, nch = HW % MTS_FM_CHUNK ? 0 : N * cpp;
    for (; q0 + 8 <= nch; q0 += 8) {
        const float *pa[8];
        for (int q = 0; q < 8; q++) {
            int idx = q0 + q, n = idx / cpp, j = idx % cpp;
            pa[q] = a + ((size_t)n * C + c) * HW + (size_t)j * MTS_FM_CHUNK;
        }
        /* the terms first, along memory (vector code), then the chains
         * through them (as bwd_sums) */
        double t[8][MTS_FM_CHUNK], l0[8] = {0};
        for (int q = 0; q < 8; q++)
            for (int i = 0; i < MTS_FM_CHUNK; i++) {
                double xv = pa[q][i];
                t[q][i] = kind == SUM_X ? xv : (xv - m) * (xv - m);
            }
        for (int i = 0; i < MTS_FM_CHUNK; i++)
            for (int q = 0; q < 8; q++) l0[q] = l0[q] + t[q][i];
        for (int q = 0; q < 8; q++) mts_fm__sumd_chunk(s, l0[q]);
    }
    /* the rest term by term, from the first term of chunk q0 */
    size_t t0 = (size_t)q0 * MTS_FM_CHUNK;
    for (int n = (int)(t0 / (size_t)HW); n < N; n++) {
        const float *ap = a + ((size_t)n * C + c) * HW;
        int i0 = n == (int)(t0 / (size_t)HW) ? (int)(t0 % (size_t)HW) : 0;
        for (int i = i0; i < HW; i++) mts_fm_sumd_push(s, kind == SUM_X ? ap[i] : (ap[i] - m) * (ap[i] - m));
    }
}

/* One channel of the forward pass (the reference's body, fast sums). With
 * relu, y gets max(v, +0) of each result v as mts_relu_forward writes it
 * (the BN + ReLU pair of mts_net_forward, the BN's own output never
 * stored); mean (optional) keeps the mean for a backward from x. */
static void fwd_channel(int c, int train, int relu, int N, int C, int HW, const float *x, const float *gamma,
                        const float *beta, float *rmean, float *rvar, float mom, float eps, float *y, float *xhat,
                        float *invstd, float *mean_out)
{
    size_t cnt = (size_t)N * HW;
    float mean, var;
    if (train) {
        mts_fm_sumd s;
        mts_fm_sumd_init(&s);
        channel_sums(SUM_X, N, C, HW, c, x, 0.0, &s);
        double m = mts_fm_sumd_sum(&s) / (double)cnt;
        mts_fm_sumd_init(&s);
        channel_sums(SUM_SQ, N, C, HW, c, x, m, &s);
        double s2 = mts_fm_sumd_sum(&s);
        mean = (float)m;
        var = (float)(s2 / (double)cnt);
        float uvar = cnt > 1 ? (float)(s2 / (double)(cnt - 1)) : var;
        rmean[c] = mts_fm_canon((1.0f - mom) * rmean[c] + mom * mean);
        rvar[c] = mts_fm_canon((1.0f - mom) * rvar[c] + mom * uvar);
    } else {
        mean = rmean[c];
        var = rvar[c];
    }
    const float is = 1.0f / sqrtf(var + eps), gc = gamma[c], bc = beta[c];
    if (invstd) invstd[c] = is;
    if (mean_out) mean_out[c] = mean;
    for (int n = 0; n < N; n++) {
        size_t off = ((size_t)n * C + c) * HW;
        const float *xp = x + off;
        float *yp = y + off;
        if (xhat) {
            float *hp = xhat + off;
            for (int i = 0; i < HW; i++) {
                float h = (xp[i] - mean) * is;
                hp[i] = mts_fm_canon(h);
                yp[i] = mts_fm_canon(gc * h + bc);
            }
        } else if (relu)
            for (int i = 0; i < HW; i++) {
                float v = gc * ((xp[i] - mean) * is) + bc;
                yp[i] = v > 0.0f ? v : 0.0f;
            }
        else
            for (int i = 0; i < HW; i++) yp[i] = mts_fm_canon(gc * ((xp[i] - mean) * is) + bc);
    }
}

/* Channels are independent (each its own sums in its own order), so
 * threads that take whole channels leave every bit as one thread does. */
static int bn_threads(int threads, int N, int C, int HW)
{
    if ((double)N * C * HW < 65536.0) return 1; /* waking a team costs more */
    return threads < 1 ? 1 : threads > C ? C : threads;
}

void mts__bn_forward_t(int threads, int train, int relu, int N, int C, int HW, const float *x, const float *gamma,
                       const float *beta, float *rmean, float *rvar, float mom, float eps, float *y, float *xhat,
                       float *invstd, float *mean)
{
    int T = bn_threads(threads, N, C, HW);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int c = 0; c < C; c++)
        fwd_channel(c, train, relu, N, C, HW, x, gamma, beta, rmean, rvar, mom, eps, y, xhat, invstd, mean);
}

void mts_bn_forward(int train, int N, int C, int HW, const float *x, const float *gamma, const float *beta,
                    float *rmean, float *rvar, float mom, float eps, float *y, float *xhat, float *invstd)
{
    mts__bn_forward_t(1, train, 0, N, C, HW, x, gamma, beta, rmean, rvar, mom, eps, y, xhat, invstd, NULL);
}

/* Where one channel's backward reads its terms: the output gradient d at
 * offset o is dy[o], or with ry (the fused BN + ReLU pair) the ReLU's
 * backward ry[o] > 0 ? +0 + dy[o] : +0 - what mts__relu_backward_t (pz)
 * would have written into the BN's dy; xhat h is xhat[o], or recomputed
 * from the BN's input by the forward's FP32 expression (x[o] - mean) *
 * invstd: the same bits as the kept xhat. */
typedef struct bn_src {
    const float *dy, *ry, *xhat, *x;
    float mean, is; /* the channel's mean (for x only) and invstd */
} bn_src;

#define BN_INLINE static inline __attribute__((always_inline))
BN_INLINE float src_d(const bn_src *s, size_t o, const int relu)
{
    float d = s->dy[o];
    if (!relu) return d;
    /* ry > 0 ? +0 + d : +0 as a mask of the bits, which vectorises (GCC 12
     * keeps the select a branch) */
    uint32_t keep = 0u - (uint32_t)(s->ry[o] > 0.0f);
    return mts_u2f(mts_f2u(0.0f + d) & keep);
}
BN_INLINE float src_h(const bn_src *s, size_t o, const int fromx)
{
    return fromx ? (s->x[o] - s->mean) * s->is : s->xhat[o];
}

/* The channel-c sums of d (s[0]) and d * h (s[1]) in the blocked order,
 * the chunks side by side as channel_sums sums them, each term formed
 * where it is read. */
BN_INLINE void bwd_sums(const bn_src *src, int N, int C, int HW, int c, mts_fm_sumd s[2], const int relu,
                        const int fromx)
{
    int q0 = 0;
    const int cpp = HW / MTS_FM_CHUNK, nch = HW % MTS_FM_CHUNK ? 0 : N * cpp;
    for (; q0 + 8 <= nch; q0 += 8) {
        size_t po[8];
        for (int q = 0; q < 8; q++) {
            int idx = q0 + q, n = idx / cpp, j = idx % cpp;
            po[q] = ((size_t)n * C + c) * HW + (size_t)j * MTS_FM_CHUNK;
        }
        /* the terms first, a chunk at a time along memory (vector code),
         * then the chains through them: formed in the chain loop, the
         * terms' loads and arithmetic doubled its instructions */
        double td[8][MTS_FM_CHUNK], tp[8][MTS_FM_CHUNK];
        for (int q = 0; q < 8; q++)
            for (int i = 0; i < MTS_FM_CHUNK; i++) {
                float d = src_d(src, po[q] + i, relu);
                td[q][i] = d;
                tp[q][i] = (double)d * (double)src_h(src, po[q] + i, fromx);
            }
        double l0[8] = {0}, l1[8] = {0};
        for (int i = 0; i < MTS_FM_CHUNK; i++)
            for (int q = 0; q < 8; q++) {
                l0[q] = l0[q] + td[q][i];
                l1[q] = l1[q] + tp[q][i];
            }
        for (int q = 0; q < 8; q++) {
            mts_fm__sumd_chunk(&s[0], l0[q]);
            mts_fm__sumd_chunk(&s[1], l1[q]);
        }
    }
    size_t t0 = (size_t)q0 * MTS_FM_CHUNK;
    for (int n = (int)(t0 / (size_t)HW); n < N; n++) {
        size_t off = ((size_t)n * C + c) * HW;
        int i0 = n == (int)(t0 / (size_t)HW) ? (int)(t0 % (size_t)HW) : 0;
        for (int i = i0; i < HW; i++) {
            float d = src_d(src, off + i, relu);
            mts_fm_sumd_push(&s[0], d);
            mts_fm_sumd_push(&s[1], (double)d * src_h(src, off + i, fromx));
        }
    }
}

BN_INLINE void bwd_channel_k(int c, int N, int C, int HW, bn_src src, const float *gamma,
                             float *dx, float *dgamma, float *dbeta, int pz, const int relu, const int fromx)
{
    double cnt = (double)N * HW;
    mts_fm_sumd s[2];
    mts_fm_sumd_init(&s[0]);
    mts_fm_sumd_init(&s[1]);
    bwd_sums(&src, N, C, HW, c, s, relu, fromx);
    double sg = mts_fm_sumd_sum(&s[0]), sgx = mts_fm_sumd_sum(&s[1]);
    if (dgamma) dgamma[c] = mts_fm_canon((float)sgx);
    if (dbeta) dbeta[c] = mts_fm_canon((float)sg);
    if (!dx) return;
    const float k = gamma[c] * src.is, mg = (float)(sg / cnt), mgx = (float)(sgx / cnt);
    for (int n = 0; n < N; n++) {
        size_t off = ((size_t)n * C + c) * HW;
        float *o = dx + off;
        if (pz)
            for (int i = 0; i < HW; i++)
                o[i] = mts_fm_canon(0.0f + k * (src_d(&src, off + i, relu) - mg - src_h(&src, off + i, fromx) * mgx));
        else
            for (int i = 0; i < HW; i++)
                o[i] = mts_fm_canon(k * (src_d(&src, off + i, relu) - mg - src_h(&src, off + i, fromx) * mgx));
    }
}

/* One instance per source kind, so the term loads compile branch-free. */
static void bwd_channel(int c, int N, int C, int HW, bn_src s, const float *gamma, float *dx, float *dgamma,
                        float *dbeta, int pz)
{
    int relu = s.ry != NULL, fromx = s.xhat == NULL;
    if (relu && fromx) bwd_channel_k(c, N, C, HW, s, gamma, dx, dgamma, dbeta, pz, 1, 1);
    else if (relu) bwd_channel_k(c, N, C, HW, s, gamma, dx, dgamma, dbeta, pz, 1, 0);
    else if (fromx) bwd_channel_k(c, N, C, HW, s, gamma, dx, dgamma, dbeta, pz, 0, 1);
    else bwd_channel_k(c, N, C, HW, s, gamma, dx, dgamma, dbeta, pz, 0, 0);
}

void mts__bn_backward_t(int threads, int N, int C, int HW, const float *dy, const float *ry, const float *gamma,
                        const float *xhat, const float *x, const float *mean, const float *invstd, float *dx,
                        float *dgamma, float *dbeta, int pz)
{
    int T = bn_threads(threads, N, C, HW);
    (void)T;
#pragma omp parallel for num_threads(T) schedule(static) if (T > 1)
    for (int c = 0; c < C; c++) {
        bn_src s = {dy, ry, xhat, x, xhat ? 0.0f : mean[c], invstd[c]};
        bwd_channel(c, N, C, HW, s, gamma, dx, dgamma, dbeta, pz);
    }
}

void mts_bn_backward(int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                     const float *invstd, float *dx, float *dgamma, float *dbeta)
{
    mts__bn_backward_t(1, N, C, HW, dy, NULL, gamma, xhat, NULL, NULL, invstd, dx, dgamma, dbeta, 0);
}
