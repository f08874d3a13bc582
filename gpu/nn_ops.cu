// nn_ops.cu - CUDA twins of the layer ops (nn_ops.h) on device pointers,
// gpu.h "layer ops". Each kernel mirrors its CPU op's arithmetic operation
// by operation (explicitly rounded, built with -fmad=false); long reductions
// use the fixed blocked order of fmath.h with the very same helpers
// (mts_fm_sumd / mts_fm_sumf are host-and-device code): chunk sums in
// parallel, one thread per chunk, then the pairwise tree per row in one
// thread. Scatter-adds of the CPU (col2im, max/avg pool backward) become
// gathers that add the same terms in the same order from +0.
//
// Launched through MTS_LAUNCH (launch.h) on the default stream, in stream
// order (launch_check); they run under the CUDA emulation (gpu/emu/) in
// tests/test_gpu_emu.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "launch.h"
#include "mantis/fmath.h"
#include "mantis/gpu.h"
#include "mantis/optim_hd.h"

namespace {

// THREADS, blocks_for, launch_check: launch.h

// ------------------------------------------------ scratch of the twins
//
// The reductions' partial sums and the statistics of BN and softmax are
// short-lived device blocks. They come from a small cache of blocks (sizes
// rounded up to powers of two) that a call returns for the next one,
// instead of cudaMalloc / cudaFree per call (cudaFree synchronises the
// device; both cost more than the kernels of a small layer). A block is
// never shared: each call takes its own. mts_gpu_scratch_release frees the
// idle ones.
std::mutex g_scratch_mu;
std::multimap<size_t, void *> g_scratch_idle;     // capacity -> idle block
std::unordered_map<void *, size_t> g_scratch_cap; // every block of the cache -> capacity

void scratch_release_idle()
{
    std::multimap<size_t, void *> idle;
    {
        std::lock_guard<std::mutex> lk(g_scratch_mu);
        idle.swap(g_scratch_idle);
        for (auto &b : idle) g_scratch_cap.erase(b.second);
    }
    for (auto &b : idle) mts_gpu_free(b.second);
}

int scratch_alloc(void **p, size_t bytes, mts_err *err)
{
    *p = NULL;
    if (!bytes) return MTS_OK;
    size_t cap = 256;
    while (cap < bytes) cap *= 2;
    {
        std::lock_guard<std::mutex> lk(g_scratch_mu);
        auto it = g_scratch_idle.find(cap);
        if (it != g_scratch_idle.end()) {
            *p = it->second;
            g_scratch_idle.erase(it);
            return MTS_OK;
        }
    }
    int rc = mts_gpu_alloc(p, cap, err);
    if (rc == MTS_ENOMEM) { // the idle blocks back to the device, and once more
        scratch_release_idle();
        rc = mts_gpu_alloc(p, cap, err);
    }
    if (rc != MTS_OK) return rc;
    std::lock_guard<std::mutex> lk(g_scratch_mu);
    g_scratch_cap[*p] = cap;
    return MTS_OK;
}

void scratch_free(void *p)
{
    if (!p) return;
    std::lock_guard<std::mutex> lk(g_scratch_mu);
    auto it = g_scratch_cap.find(p);
    if (it != g_scratch_cap.end()) g_scratch_idle.emplace(it->second, p);
}

// --------------------------------------------- fixed-order row reductions

__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }

// Phase 1: part[r*m + c] = sequential sum from +0 of term(r, j) over chunk c.
template <class T, class Term> __global__ void chunk_sums(int rows, size_t n, size_t m, Term term, T *part)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)rows * m) return;
    int r = (int)(t / m);
    size_t c = t % m, j1 = (c + 1) * MTS_FM_CHUNK < n ? (c + 1) * MTS_FM_CHUNK : n;
    T s = 0;
    for (size_t j = c * MTS_FM_CHUNK; j < j1; j++) s = add(s, term(r, j));
    part[t] = s;
}

// Phase 2: the pairwise tree of fmath.h over each row's m chunk sums,
// level by level in parallel. An aligned run of TREE_SEG chunk sums is a
// whole subtree of that tree (an odd element at the end of a level moving
// up unchanged, as fmath.h's padding with +0), so a block reduces one run
// of row r into out[r * runs + run], and runs of the runs' sums follow
// until one sum per row is left. (Before: one
// thread per row walked fmath.h's streaming stack over all m sums - on the
// GPU about m global-load latencies in a row, a BatchNorm of ResNet-20's
// first stage m = 2,048.) Block b: row b / runs, run b % runs.
const int TREE_SEG = 1024;
__device__ __forceinline__ double finish(double x) { return x; }
__device__ __forceinline__ float finish(float x) { return mts_fm_canon(x); } // as mts_fm_sumf_sum
template <class T>
__global__ void __launch_bounds__(THREADS) tree_runs(size_t m, size_t runs, const T *part, T *out, int last)
{
    __shared__ T v[TREE_SEG];
    const int tid = threadIdx.x;
    const size_t r = blockIdx.x / runs, run = blockIdx.x % runs, base = run * TREE_SEG;
    int w = m - base < (size_t)TREE_SEG ? (int)(m - base) : TREE_SEG;
    for (int i = tid; i < w; i += THREADS) v[i] = part[r * m + base + i];
    __syncthreads();
    while (w > 1) { // one level: v[i] = v[2i] + v[2i+1], an odd last element up as it is
        const int pairs = w / 2;
        T a[TREE_SEG / 2 / THREADS > 0 ? TREE_SEG / 2 / THREADS : 1];
        for (int q = 0, i = tid; i < pairs; q++, i += THREADS) a[q] = add(v[2 * i], v[2 * i + 1]);
        T odd = v[w - 1];
        __syncthreads();
        for (int q = 0, i = tid; i < pairs; q++, i += THREADS) v[i] = a[q];
        if (tid == 0 && (w & 1)) v[pairs] = odd;
        __syncthreads();
        w = (w + 1) / 2;
    }
    if (tid == 0) {
        T x = w ? v[0] : T(0); // no terms: +0
        out[r * runs + run] = last ? finish(x) : x;
    }
}

// out[r] = the blocked sum over j < n of term(r, j) (T = float or double),
// out on the device.
template <class T, class Term> int reduce_rows(int rows, size_t n, Term term, T *out, mts_err *err)
{
    size_t m = (n + MTS_FM_CHUNK - 1) / MTS_FM_CHUNK, runs = (m + TREE_SEG - 1) / TREE_SEG;
    void *part = NULL, *next = NULL;
    if (rows <= 0) return MTS_OK;
    int rc = scratch_alloc(&part, (size_t)rows * (m ? m : 1) * sizeof(T), err);
    if (rc == MTS_OK && runs > 1) rc = scratch_alloc(&next, (size_t)rows * runs * sizeof(T), err);
    if (rc != MTS_OK) {
        scratch_free(part);
        return rc;
    }
    if (m)
        MTS_LAUNCH((chunk_sums<T, Term>), blocks_for((size_t)rows * m), THREADS, 0, 0)(rows, n, m, term, (T *)part);
    // the levels of runs: part -> next -> part ... (each level at most 1/TREE_SEG of the one before)
    T *src = (T *)part, *dst = (T *)next;
    while (m > (size_t)TREE_SEG) {
        runs = (m + TREE_SEG - 1) / TREE_SEG;
        MTS_LAUNCH(tree_runs<T>, (unsigned)(rows * runs), THREADS, 0, 0)(m, runs, src, dst, 0);
        T *t = src;
        src = dst;
        dst = t;
        m = runs;
    }
    MTS_LAUNCH(tree_runs<T>, (unsigned)rows, THREADS, 0, 0)(m, 1, src, out, 1);
    rc = launch_check(err, "reduction");
    scratch_free(part);
    scratch_free(next);
    return rc;
}

// Terms. dy[n][out] column o (dense bias gradient).
struct ColTerm {
    const float *dy;
    int out;
    __device__ float operator()(int o, size_t n) const { return dy[n * out + o]; }
};
// BatchNorm: element j = (n, i) of channel c in x[N][C][HW], as double.
struct BnX {
    const float *x;
    int C, HW;
    __device__ double operator()(int c, size_t j) const
    {
        return (double)x[((j / HW) * C + c) * HW + j % HW];
    }
};
struct BnVar {
    const float *x;
    const double *mean;
    int C, HW;
    __device__ double operator()(int c, size_t j) const
    {
        double d = __dsub_rn((double)x[((j / HW) * C + c) * HW + j % HW], mean[c]);
        return __dmul_rn(d, d);
    }
};
struct BnDyX {
    const float *dy, *xhat;
    int C, HW;
    __device__ double operator()(int c, size_t j) const
    {
        size_t o = ((j / HW) * C + c) * HW + j % HW;
        return __dmul_rn((double)dy[o], (double)xhat[o]);
    }
};
// Row o of a [rows][n] matrix (a conv's bias gradient over dyc[cout][N*P]).
struct RowTerm {
    const float *a;
    size_t n;
    __device__ float operator()(int o, size_t j) const { return a[(size_t)o * n + j]; }
};
struct Flat {
    const double *t;
    __device__ double operator()(int, size_t j) const { return t[j]; }
};

// ------------------------------------------------------------- kernels

__global__ void relu_fwd(size_t n, const float *x, float *y)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
__global__ void relu_bwd(size_t n, const float *y, const float *dy, float *dx)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}
// The masked STE backward's operands (mts_gpu_dense_backward_ste): the
// weights of each sample, w where the mask passes, else +0 (t over
// [N][out][in], the mask's own order) ...
__global__ void masked_rows(size_t n, size_t ow, const uint8_t *mask, const float *w, float *t)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t[i] = mask[i] ? w[i % ow] : 0.0f;
}
// ... and the activations of each output, t[o][n][i] = x[n][i] where the
// mask of product (n, o, i) passes, else +0.
__global__ void masked_cols(int N, int in, int out, const uint8_t *mask, const float *x, float *t)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x, ni = (size_t)N * in;
    if (j >= ni * out) return;
    size_t o = j / ni, r = j % ni, n = r / in, i = r % in;
    t[j] = mask[(n * out + o) * in + i] ? x[r] : 0.0f;
}

__global__ void bias_add(int N, int out, float *y, const float *b)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)N * out) y[i] = mts_fm_canon(__fadd_rn(y[i], b[i % out])); // NaN: the CPU's bits
}

// Softmax CE of one sample per thread: its loss term (double) and dlogits.
__global__ void softmax_ce_rows(int N, int classes, const float *logits, const uint8_t *labels, float *dlogits,
                                double *terms, int *ok)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float *z = logits + (size_t)n * classes;
    int am = 0;
    for (int c = 1; c < classes; c++)
        if (z[c] > z[am]) am = c;
    ok[n] = am == labels[n];
    float mx = z[am], s = 0.0f;
    for (int c = 0; c < classes; c++) s = __fadd_rn(s, mts_fm_expf(__fsub_rn(z[c], mx)));
    float lse = __fadd_rn(mx, mts_fm_logf(s));
    terms[n] = (double)__fsub_rn(lse, z[labels[n]]);
    if (dlogits)
        for (int c = 0; c < classes; c++)
            dlogits[(size_t)n * classes + c] =
                __fdiv_rn(__fsub_rn(mts_fm_expf(__fsub_rn(z[c], lse)), c == labels[n] ? 1.0f : 0.0f), (float)N);
}

// BatchNorm statistics of channel c from the blocked sums (one thread per channel).
__global__ void bn_stats(int C, size_t cnt, const double *s1, const double *s2, float *rmean, float *rvar, float mom,
                         float eps, float *mean_out, float *istd_out, int train)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float mean, var;
    if (train) {
        double m = __ddiv_rn(s1[c], (double)cnt);
        mean = (float)m;
        var = (float)__ddiv_rn(s2[c], (double)cnt);
        float uvar = cnt > 1 ? (float)__ddiv_rn(s2[c], (double)(cnt - 1)) : var;
        rmean[c] = mts_fm_canon(__fadd_rn(__fmul_rn(__fsub_rn(1.0f, mom), rmean[c]), __fmul_rn(mom, mean)));
        rvar[c] = mts_fm_canon(__fadd_rn(__fmul_rn(__fsub_rn(1.0f, mom), rvar[c]), __fmul_rn(mom, uvar)));
    } else {
        mean = rmean[c];
        var = rvar[c];
    }
    mean_out[c] = mean;
    istd_out[c] = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
}
__global__ void bn_apply(int N, int C, int HW, const float *x, const float *gamma, const float *beta,
                         const float *mean, const float *is, float *y, float *xhat)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C * HW) return;
    int c = (int)((i / HW) % C);
    float h = __fmul_rn(__fsub_rn(x[i], mean[c]), is[c]);
    if (xhat) xhat[i] = mts_fm_canon(h); // NaN: the CPU's bits (bn.c)
    y[i] = mts_fm_canon(__fadd_rn(__fmul_rn(gamma[c], h), beta[c]));
}
__global__ void bn_dx(int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                      const float *invstd, const double *sg, const double *sgx, float *dx)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C * HW) return;
    int c = (int)((i / HW) % C);
    double cnt = (double)N * HW;
    float k = __fmul_rn(gamma[c], invstd[c]), mg = (float)__ddiv_rn(sg[c], cnt), mgx = (float)__ddiv_rn(sgx[c], cnt);
    dx[i] = mts_fm_canon(__fmul_rn(k, __fsub_rn(__fsub_rn(dy[i], mg), __fmul_rn(xhat[i], mgx))));
}
__global__ void div_d(int n, const double *a, double d, double *q)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) q[i] = __ddiv_rn(a[i], d);
}
// BatchNorm's d-gamma / d-beta: the sums as floats, a NaN canonical (bn.c)
__global__ void d2f(int n, const double *a, float *b)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = mts_fm_canon((float)a[i]);
}

// Pooling: one thread per output (forward) or per input element (backward gathers).
__global__ void maxpool_fwd(int N, int C, int H, int W, int k, int s, int oh, int ow, const float *x, float *y,
                            int32_t *argmax)
{
    size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= (size_t)N * C * oh * ow) return;
    size_t pl = o / ((size_t)oh * ow);
    int q = (int)(o % ((size_t)oh * ow)), oy = q / ow, ox = q % ow;
    const float *xp = x + pl * H * W;
    int best = oy * s * W + ox * s;
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            int i = (oy * s + ky) * W + ox * s + kx;
            if (xp[i] > xp[best]) best = i;
        }
    y[o] = xp[best];
    argmax[o] = best;
}
// Windows covering input row iy: oy in [lo, hi] (none when lo > hi).
__device__ void cover(int iy, int k, int s, int oh, int *lo, int *hi)
{
    *lo = iy < k ? 0 : (iy - k) / s + 1;
    *hi = iy / s < oh - 1 ? iy / s : oh - 1;
}
__global__ void maxpool_bwd(int N, int C, int H, int W, int k, int s, int oh, int ow, const float *dy,
                            const int32_t *argmax, float *dx)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C * H * W) return;
    size_t pl = i / ((size_t)H * W);
    int p = (int)(i % ((size_t)H * W)), iy = p / W, ix = p % W, y0, y1, x0, x1;
    cover(iy, k, s, oh, &y0, &y1);
    cover(ix, k, s, ow, &x0, &x1);
    float a = 0.0f; // the CPU adds the windows' gradients in output order
    for (int oy = y0; oy <= y1; oy++)
        for (int ox = x0; ox <= x1; ox++) {
            size_t o = pl * oh * ow + (size_t)oy * ow + ox;
            if (argmax[o] == p) a = __fadd_rn(a, dy[o]);
        }
    dx[i] = mts_fm_canon(a); // NaN: the CPU's bits (pool.c)
}
__global__ void avgpool_fwd(int N, int C, int H, int W, int k, int s, int oh, int ow, const float *x, float *y)
{
    size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= (size_t)N * C * oh * ow) return;
    size_t pl = o / ((size_t)oh * ow);
    int q = (int)(o % ((size_t)oh * ow)), oy = q / ow, ox = q % ow;
    const float *xp = x + pl * H * W;
    float a = 0.0f, inv = __fdiv_rn(1.0f, (float)(k * k));
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) a = __fadd_rn(a, xp[(oy * s + ky) * W + ox * s + kx]);
    y[o] = mts_fm_canon(__fmul_rn(a, inv));
}
__global__ void avgpool_bwd(int N, int C, int H, int W, int k, int s, int oh, int ow, const float *dy, float *dx)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C * H * W) return;
    size_t pl = i / ((size_t)H * W);
    int p = (int)(i % ((size_t)H * W)), iy = p / W, ix = p % W, y0, y1, x0, x1;
    cover(iy, k, s, oh, &y0, &y1);
    cover(ix, k, s, ow, &x0, &x1);
    float a = 0.0f, inv = __fdiv_rn(1.0f, (float)(k * k));
    for (int oy = y0; oy <= y1; oy++)
        for (int ox = x0; ox <= x1; ox++) a = __fadd_rn(a, __fmul_rn(dy[pl * oh * ow + (size_t)oy * ow + ox], inv));
    dx[i] = mts_fm_canon(a);
}
__global__ void gap_fwd(size_t planes, int HW, const float *x, float *y)
{
    size_t pl = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (pl >= planes) return;
    float a = 0.0f;
    for (int i = 0; i < HW; i++) a = __fadd_rn(a, x[pl * HW + i]);
    y[pl] = mts_fm_canon(__fdiv_rn(a, (float)HW));
}
__global__ void gap_bwd(size_t planes, int HW, const float *dy, float *dx)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= planes * HW) return;
    dx[i] = mts_fm_canon(__fdiv_rn(dy[i / HW], (float)HW));
}

// im2col: col[K][N*P], one thread per element.
__global__ void im2col_k(mts_conv_geom g, int N, const float *x, float *col)
{
    int P = g.oh * g.ow;
    size_t NP = (size_t)N * P, t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)g.cin * g.k * g.k * NP) return;
    int r = (int)(t / NP), q = (int)(t % NP), n = q / P, oq = q % P;
    int ci = r / (g.k * g.k), ky = (r / g.k) % g.k, kx = r % g.k, oy = oq / g.ow, ox = oq % g.ow;
    int iy = oy * g.stride - g.pad + ky, ix = ox * g.stride - g.pad + kx;
    col[t] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) ? x[(((size_t)n * g.cin + ci) * g.h + iy) * g.w + ix] : 0.0f;
}
// col2im as a gather: input pixel (n, ci, iy, ix) adds its taps in the CPU's
// (ky, kx, oy, ox) order from +0 (for fixed ky, kx at most one (oy, ox) hits it).
__global__ void col2im_k(mts_conv_geom g, int N, const float *dcolT, float *dx)
{
    int P = g.oh * g.ow, K = g.cin * g.k * g.k;
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)N * g.cin * g.h * g.w) return;
    int ix = (int)(t % g.w), iy = (int)((t / g.w) % g.h), ci = (int)((t / ((size_t)g.w * g.h)) % g.cin);
    int n = (int)(t / ((size_t)g.w * g.h * g.cin));
    float a = 0.0f;
    for (int ky = 0; ky < g.k; ky++) {
        int ty = iy + g.pad - ky;
        if (ty < 0 || ty % g.stride || ty / g.stride >= g.oh) continue;
        for (int kx = 0; kx < g.k; kx++) {
            int tx = ix + g.pad - kx;
            if (tx < 0 || tx % g.stride || tx / g.stride >= g.ow) continue;
            int r = (ci * g.k + ky) * g.k + kx, oy = ty / g.stride, ox = tx / g.stride;
            a = __fadd_rn(a, dcolT[((size_t)n * P + oy * g.ow + ox) * K + r]);
        }
    }
    dx[t] = mts_fm_canon(a); // NaN: the CPU's bits (conv.c)
}

// Optimizers: mts_opt_step's updates, optim_hd.h's one copy of them.
__global__ void sgd_k(size_t n, float *param, const float *grad, float *m, const uint8_t *wmask, float lr, float mom,
                      float wd)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) mts_sgd_hd(&param[j], grad[j], &m[j], lr, mom, wd, !wmask || wmask[j]);
}
__global__ void adam_k(size_t n, float *param, const float *grad, float *m, float *v, const uint8_t *wmask, float lr,
                       float b1, float b2, float eps, float wd, float bc1, float bc2)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) mts_adam_hd(&param[j], grad[j], &m[j], &v[j], lr, b1, b2, eps, wd, !wmask || wmask[j], bc1, bc2);
}


// --------------------------------------- device-resident training helpers

// Residual add and the gradient bookkeeping of mts_net_backward (act.c's
// mts__add_t, mts__acc_t, mts__copy_pz_t, mts__plus_zero_t).
__global__ void add_k(size_t n, const float *a, const float *b, float *y)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = mts_fm_canon(__fadd_rn(a[i], b[i])); // (NaN: the CPU's bits, fmath.h)
}
__global__ void acc_k(size_t n, float *dst, const float *src)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = mts_fm_canon(__fadd_rn(dst[i], src[i]));
}
// dst = +0 + src (src == dst: the in-place +0 of a first gradient)
__global__ void copy_pz_k(size_t n, const float *src, float *dst)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = mts_fm_canon(__fadd_rn(0.0f, src[i]));
}
__global__ void copy_k(size_t n, const float *src, float *dst)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}

// Batch gather: sample b of the batch is sample order[b0 + b] of the set.
__global__ void gather_k(int N, size_t ss, const float *x, const uint8_t *y, const int32_t *order, float *xb,
                         uint8_t *yb)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)N * ss) return;
    size_t b = t / ss, j = t % ss, s = (size_t)order[b];
    xb[t] = x[s * ss + j];
    if (j == 0) yb[b] = y[s];
}

// Conv output from the GEMM's [N*P][cout] result: y[n][co][q] = t + bias
// (conv.c's fwd_chunk: to[q] + bias, bias 0 without one).
__global__ void conv_out_k(int N, int cout, int P, const float *t, const float *b, float *y)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * cout * P) return;
    int q = (int)(i % P), co = (int)((i / P) % cout);
    size_t n = i / ((size_t)P * cout);
    y[i] = mts_fm_canon(__fadd_rn(t[(n * P + q) * cout + co], b ? b[co] : 0.0f));
}
// dyc[co][n*P + q] = dy[n][co][q] (conv.c's backward operand)
__global__ void conv_dyc_k(int N, int cout, int P, const float *dy, float *dyc)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * cout * P) return;
    int q = (int)(i % P), co = (int)((i / P) % cout);
    size_t n = i / ((size_t)P * cout);
    dyc[(size_t)co * N * P + n * P + q] = dy[i];
}

// Non-finite flags per chunk, then their OR in one block (no atomics; an
// OR in any order is the same: a strided share per thread, then the
// block's __syncthreads_or).
__global__ void nonfinite_chunks(size_t n, size_t m, const float *x, uint8_t *flag)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= m) return;
    size_t j1 = (c + 1) * MTS_FM_CHUNK < n ? (c + 1) * MTS_FM_CHUNK : n;
    unsigned bad = 0;
    for (size_t j = c * MTS_FM_CHUNK; j < j1; j++) bad |= (__float_as_uint(x[j]) & 0x7F800000u) == 0x7F800000u;
    flag[c] = (uint8_t)bad;
}
__global__ void __launch_bounds__(THREADS) or_flags(size_t m, const uint8_t *flag, int *out)
{
    int bad = 0;
    for (size_t c = threadIdx.x; c < m; c += THREADS) bad |= flag[c];
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) *out = bad != 0;
}

} // namespace

extern "C" {

int mts_gpu_relu_forward(size_t n, const float *x, float *y, mts_err *err)
{
    if (!n) return MTS_OK;
    MTS_LAUNCH(relu_fwd, blocks_for(n), THREADS, 0, 0)(n, x, y);
    return launch_check(err, "relu forward");
}

int mts_gpu_relu_backward(size_t n, const float *y, const float *dy, float *dx, mts_err *err)
{
    if (!n) return MTS_OK;
    MTS_LAUNCH(relu_bwd, blocks_for(n), THREADS, 0, 0)(n, y, dy, dx);
    return launch_check(err, "relu backward");
}

int mts_gpu_dense_forward(const mts_gpu_gemm_plan *fwd, int N, int in, int out, const float *x, const float *w,
                          const float *b, float *y, mts_err *err)
{
    int rc = mts_gpu_gemm_dev(fwd, 0, 1, N, out, in, x, in, w, in, 0.0f, y, out, err);
    if (rc != MTS_OK || !b || !N || !out) return rc;
    MTS_LAUNCH(bias_add, blocks_for((size_t)N * out), THREADS, 0, 0)(N, out, y, b);
    return launch_check(err, "dense bias");
}

int mts_gpu_dense_backward(const mts_gpu_gemm_plan *bwd, int N, int in, int out, const float *x, const float *w,
                           const float *dy, float *dx, float *dw, float *db, mts_err *err)
{
    int rc = MTS_OK;
    if (db) rc = reduce_rows<float>(out, (size_t)N, ColTerm{dy, out}, db, err);
    if (rc == MTS_OK && dx) rc = mts_gpu_gemm_dev(bwd, 0, 0, N, in, out, dy, out, w, in, 0.0f, dx, in, err);
    if (rc == MTS_OK && dw) rc = mts_gpu_gemm_dev(bwd, 1, 0, out, in, N, dy, out, x, in, 0.0f, dw, in, err);
    return rc;
}

#define BATCH_MAX 65535 /* GEMMs in one mts_gpu_gemm_dev_batched call */
int mts_gpu_dense_backward_ste(const mts_gpu_gemm_plan *fwd, const mts_gpu_gemm_plan *bwd, int ste, int N, int in,
                               int out, const float *x, const float *w, const float *dy, float *dx, float *dw,
                               float *db, mts_err *err)
{
    int rc = MTS_OK;
    if (db) rc = reduce_rows<float>(out, (size_t)N, ColTerm{dy, out}, db, err);
    if (rc != MTS_OK || (!dx && !dw) || N <= 0 || in <= 0 || out <= 0) return rc;
    size_t nm = (size_t)N * out * in;
    void *mask = NULL, *tmp = NULL;
    if ((rc = scratch_alloc(&mask, nm, err)) || (rc = scratch_alloc(&tmp, nm * sizeof(float), err)) ||
        (rc = mts_gpu_ste_mask(fwd, ste, N, in, out, x, w, (uint8_t *)mask, err)))
        goto done;
    if (dx) { /* tmp[n][o][i] = w[o][i] where product (n, o, i) passes; dx[n] = dy[n] tmp[n] */
        MTS_LAUNCH(masked_rows, blocks_for(nm), THREADS, 0, 0)(nm, (size_t)out * in, (const uint8_t *)mask, w,
                                                               (float *)tmp);
        if ((rc = launch_check(err, "STE masked weights"))) goto done;
        for (int n0 = 0; n0 < N && rc == MTS_OK; n0 += BATCH_MAX) { /* a launch takes 65535 GEMMs */
            mts_gpu_batch bt = {N - n0 < BATCH_MAX ? N - n0 : BATCH_MAX, 1, (size_t)out, 0, (size_t)out * in, 0,
                                (size_t)in, 0};
            rc = mts_gpu_gemm_dev_batched(bwd, &bt, 0, 0, 1, in, out, dy + (size_t)n0 * out, out,
                                          (const float *)tmp + (size_t)n0 * out * in, in, 0.0f, dx + (size_t)n0 * in,
                                          in, err);
        }
        if (rc != MTS_OK) goto done;
    }
    if (dw) { /* tmp[o][n][i] = x[n][i] where product (n, o, i) passes; dw[o] = dy[:, o]^T tmp[o] */
        MTS_LAUNCH(masked_cols, blocks_for(nm), THREADS, 0, 0)(N, in, out, (const uint8_t *)mask, x, (float *)tmp);
        if ((rc = launch_check(err, "STE masked activations"))) goto done;
        for (int o0 = 0; o0 < out && rc == MTS_OK; o0 += BATCH_MAX) {
            mts_gpu_batch bt = {out - o0 < BATCH_MAX ? out - o0 : BATCH_MAX, 1, 1, 0, (size_t)N * in, 0, (size_t)in, 0};
            rc = mts_gpu_gemm_dev_batched(bwd, &bt, 1, 0, 1, in, N, dy + o0, out,
                                          (const float *)tmp + (size_t)o0 * N * in, in, 0.0f, dw + (size_t)o0 * in, in,
                                          err);
        }
    }
done:
    scratch_free(mask);
    scratch_free(tmp);
    return rc;
}

int mts_gpu_softmax_ce(int N, int classes, const float *logits, const uint8_t *labels, float *dlogits, double *loss,
                       int *correct, mts_err *err)
{
    if (N <= 0) {
        if (loss) *loss = 0.0;
        if (correct) *correct = 0;
        return MTS_OK;
    }
    void *terms = NULL, *ok = NULL, *sum = NULL;
    int rc;
    if ((rc = scratch_alloc(&terms, (size_t)N * sizeof(double), err)) ||
        (rc = scratch_alloc(&ok, (size_t)N * sizeof(int), err)) || (rc = scratch_alloc(&sum, sizeof(double), err)))
        goto done;
    MTS_LAUNCH(softmax_ce_rows, blocks_for((size_t)N), THREADS, 0, 0)(N, classes, logits, labels, dlogits,
                                                                     (double *)terms, (int *)ok);
    if ((rc = launch_check(err, "softmax cross-entropy")) ||
        (rc = reduce_rows<double>(1, (size_t)N, Flat{(const double *)terms}, (double *)sum, err)))
        goto done;
    {
        double s = 0.0;
        int *h = (int *)std::malloc((size_t)N * sizeof(int));
        if (!h) {
            rc = mts_fail(err, MTS_ENOMEM, "gpu softmax: out of host memory");
            goto done;
        }
        if ((rc = mts_gpu_download(&s, sum, sizeof s, err)) == MTS_OK &&
            (rc = mts_gpu_download(h, ok, (size_t)N * sizeof(int), err)) == MTS_OK) {
            int c = 0; // an integer count: exact in any order
            for (int n = 0; n < N; n++) c += h[n];
            if (correct) *correct = c;
            if (loss) *loss = s / N;
        }
        std::free(h);
    }
done:
    scratch_free(terms);
    scratch_free(ok);
    scratch_free(sum);
    return rc;
}

int mts_gpu_bn_forward(int train, int N, int C, int HW, const float *x, const float *gamma, const float *beta,
                       float *rmean, float *rvar, float mom, float eps, float *y, float *xhat, float *invstd,
                       mts_err *err)
{
    size_t cnt = (size_t)N * HW;
    void *s1 = NULL, *s2 = NULL, *mean = NULL, *is = NULL;
    int rc;
    if ((rc = scratch_alloc(&s1, (size_t)C * 8, err)) || (rc = scratch_alloc(&s2, (size_t)C * 8, err)) ||
        (rc = scratch_alloc(&mean, (size_t)C * 4, err)) || (rc = scratch_alloc(&is, (size_t)C * 4, err)))
        goto done;
    if (train) {
        // mean first (the variance's terms need it), as the CPU does
        if ((rc = reduce_rows<double>(C, cnt, BnX{x, C, HW}, (double *)s1, err))) goto done;
        void *m = NULL;
        if ((rc = scratch_alloc(&m, (size_t)C * 8, err))) goto done;
        // m[c] = s1[c] / cnt in double (correctly rounded, as the CPU), for the variance terms
        MTS_LAUNCH(div_d, blocks_for((size_t)C), THREADS, 0, 0)(C, (const double *)s1, (double)cnt, (double *)m);
        rc = launch_check(err, "batchnorm mean");
        if (rc == MTS_OK) rc = reduce_rows<double>(C, cnt, BnVar{x, (const double *)m, C, HW}, (double *)s2, err);
        scratch_free(m);
        if (rc) goto done;
    }
    MTS_LAUNCH(bn_stats, blocks_for((size_t)C), THREADS, 0, 0)(C, cnt, (const double *)s1, (const double *)s2, rmean,
                                                              rvar, mom, eps, (float *)mean, (float *)is, train);
    if ((rc = launch_check(err, "batchnorm statistics"))) goto done;
    if (invstd && (rc = cudaMemcpy(invstd, is, (size_t)C * 4, cudaMemcpyDeviceToDevice) == cudaSuccess
                            ? MTS_OK
                            : mts_fail(err, MTS_EIO, "gpu bn: copy failed")))
        goto done;
    MTS_LAUNCH(bn_apply, blocks_for((size_t)N * C * HW), THREADS, 0, 0)(N, C, HW, x, gamma, beta, (const float *)mean,
                                                                       (const float *)is, y, xhat);
    rc = launch_check(err, "batchnorm forward");
done:
    scratch_free(s1);
    scratch_free(s2);
    scratch_free(mean);
    scratch_free(is);
    return rc;
}

int mts_gpu_bn_backward(int N, int C, int HW, const float *dy, const float *gamma, const float *xhat,
                        const float *invstd, float *dx, float *dgamma, float *dbeta, mts_err *err)
{
    size_t cnt = (size_t)N * HW;
    void *sg = NULL, *sgx = NULL;
    int rc;
    if ((rc = scratch_alloc(&sg, (size_t)C * 8, err)) || (rc = scratch_alloc(&sgx, (size_t)C * 8, err)) ||
        (rc = reduce_rows<double>(C, cnt, BnX{dy, C, HW}, (double *)sg, err)) ||
        (rc = reduce_rows<double>(C, cnt, BnDyX{dy, xhat, C, HW}, (double *)sgx, err)))
        goto done;
    if (dgamma) MTS_LAUNCH(d2f, blocks_for((size_t)C), THREADS, 0, 0)(C, (const double *)sgx, dgamma);
    if (dbeta) MTS_LAUNCH(d2f, blocks_for((size_t)C), THREADS, 0, 0)(C, (const double *)sg, dbeta);
    if (dx)
        MTS_LAUNCH(bn_dx, blocks_for(cnt * C), THREADS, 0, 0)(N, C, HW, dy, gamma, xhat, invstd, (const double *)sg,
                                                             (const double *)sgx, dx);
    rc = launch_check(err, "batchnorm backward");
done:
    scratch_free(sg);
    scratch_free(sgx);
    return rc;
}

int mts_gpu_maxpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y, int32_t *argmax,
                            mts_err *err)
{
    int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
    size_t no = (size_t)N * C * oh * ow;
    if (!no) return MTS_OK;
    MTS_LAUNCH(maxpool_fwd, blocks_for(no), THREADS, 0, 0)(N, C, H, W, k, s, oh, ow, x, y, argmax);
    return launch_check(err, "maxpool forward");
}

int mts_gpu_maxpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, const int32_t *argmax,
                             float *dx, mts_err *err)
{
    int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
    size_t ni = (size_t)N * C * H * W;
    if (!ni) return MTS_OK;
    MTS_LAUNCH(maxpool_bwd, blocks_for(ni), THREADS, 0, 0)(N, C, H, W, k, s, oh, ow, dy, argmax, dx);
    return launch_check(err, "maxpool backward");
}

int mts_gpu_avgpool_forward(int N, int C, int H, int W, int k, int s, const float *x, float *y, mts_err *err)
{
    int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
    size_t no = (size_t)N * C * oh * ow;
    if (!no) return MTS_OK;
    MTS_LAUNCH(avgpool_fwd, blocks_for(no), THREADS, 0, 0)(N, C, H, W, k, s, oh, ow, x, y);
    return launch_check(err, "avgpool forward");
}

int mts_gpu_avgpool_backward(int N, int C, int H, int W, int k, int s, const float *dy, float *dx, mts_err *err)
{
    int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
    size_t ni = (size_t)N * C * H * W;
    if (!ni) return MTS_OK;
    MTS_LAUNCH(avgpool_bwd, blocks_for(ni), THREADS, 0, 0)(N, C, H, W, k, s, oh, ow, dy, dx);
    return launch_check(err, "avgpool backward");
}

int mts_gpu_gap_forward(int N, int C, int HW, const float *x, float *y, mts_err *err)
{
    size_t planes = (size_t)N * C;
    if (!planes) return MTS_OK;
    MTS_LAUNCH(gap_fwd, blocks_for(planes), THREADS, 0, 0)(planes, HW, x, y);
    return launch_check(err, "global average pool forward");
}

int mts_gpu_gap_backward(int N, int C, int HW, const float *dy, float *dx, mts_err *err)
{
    size_t planes = (size_t)N * C;
    if (!planes || !HW) return MTS_OK;
    MTS_LAUNCH(gap_bwd, blocks_for(planes * HW), THREADS, 0, 0)(planes, HW, dy, dx);
    return launch_check(err, "global average pool backward");
}

int mts_gpu_im2col(const mts_conv_geom *g, int N, const float *x, float *col, mts_err *err)
{
    size_t n = (size_t)g->cin * g->k * g->k * N * g->oh * g->ow;
    if (!n) return MTS_OK;
    MTS_LAUNCH(im2col_k, blocks_for(n), THREADS, 0, 0)(*g, N, x, col);
    return launch_check(err, "im2col");
}

int mts_gpu_col2im(const mts_conv_geom *g, int N, const float *dcolT, float *dx, mts_err *err)
{
    size_t n = (size_t)N * g->cin * g->h * g->w;
    if (!n) return MTS_OK;
    MTS_LAUNCH(col2im_k, blocks_for(n), THREADS, 0, 0)(*g, N, dcolT, dx);
    return launch_check(err, "col2im");
}

int mts_gpu_sgd_step(size_t n, float *param, const float *grad, float *m, const uint8_t *wmask, float lr,
                     float momentum, float wd, mts_err *err)
{
    if (!n) return MTS_OK;
    MTS_LAUNCH(sgd_k, blocks_for(n), THREADS, 0, 0)(n, param, grad, m, wmask, lr, momentum, wd);
    return launch_check(err, "sgd step");
}

int mts_gpu_adam_step(size_t n, float *param, const float *grad, float *m, float *v, const uint8_t *wmask, float lr,
                      float beta1, float beta2, float eps, float wd, double bc1, double bc2, mts_err *err)
{
    if (!n) return MTS_OK;
    // the CPU divides by (float)bc1 and (float)bc2
    MTS_LAUNCH(adam_k, blocks_for(n), THREADS, 0, 0)(n, param, grad, m, v, wmask, lr, beta1, beta2, eps, wd,
                                                    (float)bc1, (float)bc2);
    return launch_check(err, "adam step");
}


// ------------------------------------------ device-resident training

int mts_gpu_add(size_t n, const float *a, const float *b, float *y, mts_err *err)
{
    if (!n) return MTS_OK;
    MTS_LAUNCH(add_k, blocks_for(n), THREADS, 0, 0)(n, a, b, y);
    return launch_check(err, "residual add");
}

int mts_gpu_acc(size_t n, float *dst, const float *src, mts_err *err)
{
    if (!n) return MTS_OK;
    MTS_LAUNCH(acc_k, blocks_for(n), THREADS, 0, 0)(n, dst, src);
    return launch_check(err, "gradient sum");
}

int mts_gpu_copy_pz(size_t n, const float *src, float *dst, mts_err *err)
{
    if (!n) return MTS_OK;
    MTS_LAUNCH(copy_pz_k, blocks_for(n), THREADS, 0, 0)(n, src, dst);
    return launch_check(err, "gradient copy");
}

int mts_gpu_copy(size_t n, const float *src, float *dst, mts_err *err)
{
    if (!n) return MTS_OK;
    MTS_LAUNCH(copy_k, blocks_for(n), THREADS, 0, 0)(n, src, dst);
    return launch_check(err, "copy");
}

int mts_gpu_zero(size_t n, float *dst, mts_err *err)
{
    if (!n) return MTS_OK;
    cudaError_t e = cudaMemset(dst, 0, n * sizeof(float));
    return e == cudaSuccess ? MTS_OK : mts_fail(err, MTS_EIO, "gpu zero: %s", cudaGetErrorString(e));
}

int mts_gpu_gather(int N, size_t ss, const float *x, const uint8_t *y, const int32_t *order, float *xb, uint8_t *yb,
                   mts_err *err)
{
    if (N <= 0 || !ss) return MTS_OK;
    MTS_LAUNCH(gather_k, blocks_for((size_t)N * ss), THREADS, 0, 0)(N, ss, x, y, order, xb, yb);
    return launch_check(err, "batch gather");
}

size_t mts_gpu_conv2d_work(const mts_conv_geom *g, int N)
{
    size_t NP = (size_t)N * g->oh * g->ow, K = (size_t)g->cin * g->k * g->k;
    return NP * (K + (size_t)g->cout);
}

// A caller's workspace, or one allocated for this call.
static int conv_work(const mts_conv_geom *g, int N, float **work, void **own, mts_err *err)
{
    *own = NULL;
    if (*work) return MTS_OK;
    int rc = scratch_alloc(own, mts_gpu_conv2d_work(g, N) * sizeof(float), err);
    *work = (float *)*own;
    return rc;
}

int mts_gpu_conv2d_forward(const mts_gpu_gemm_plan *fwd, const mts_conv_geom *g, int N, const float *x,
                           const float *w, const float *b, float *y, float *work, mts_err *err)
{
    int P = g->oh * g->ow, K = g->cin * g->k * g->k;
    size_t NP = (size_t)N * P;
    if (!NP) return MTS_OK;
    void *own;
    int rc = conv_work(g, N, &work, &own, err);
    if (rc != MTS_OK) return rc;
    float *col = work, *t = work + NP * K;
    // col^T * w^T [N*P][cout]: a = activation, b = weight, sum over K in order
    // (conv.c stores it transposed; the same outputs)
    if ((rc = mts_gpu_im2col(g, N, x, col, err)) == MTS_OK &&
        (rc = mts_gpu_gemm_dev(fwd, 1, 1, (int)NP, g->cout, K, col, (int)NP, w, K, 0.0f, t, g->cout, err)) ==
            MTS_OK) {
        MTS_LAUNCH(conv_out_k, blocks_for(NP * g->cout), THREADS, 0, 0)(N, g->cout, P, t, b, y);
        rc = launch_check(err, "conv output");
    }
    scratch_free(own);
    return rc;
}

int mts_gpu_conv2d_backward(const mts_gpu_gemm_plan *bwd, const mts_conv_geom *g, int N, const float *x,
                            const float *w, const float *dy, float *dx, float *dw, float *db, float *work,
                            mts_err *err)
{
    int P = g->oh * g->ow, K = g->cin * g->k * g->k, C = g->cout;
    size_t NP = (size_t)N * P;
    if (!NP) return MTS_OK;
    void *own;
    int rc = conv_work(g, N, &work, &own, err);
    if (rc != MTS_OK) return rc;
    float *dyc = work, *col = work + NP * C; // col, then dcol^T: NP * K floats
    MTS_LAUNCH(conv_dyc_k, blocks_for(NP * C), THREADS, 0, 0)(N, C, P, dy, dyc);
    rc = launch_check(err, "conv gradient layout");
    // db: the fixed blocked order of fmath.h over (n, p)
    if (rc == MTS_OK && db) rc = reduce_rows<float>(C, NP, RowTerm{dyc, NP}, db, err);
    // dw[cout][K] = dyc * col^T: a = gradient, b = activation, sum over N*P in order
    if (rc == MTS_OK && dw && (rc = mts_gpu_im2col(g, N, x, col, err)) == MTS_OK)
        rc = mts_gpu_gemm_dev(bwd, 0, 1, C, K, (int)NP, dyc, (int)NP, col, (int)NP, 0.0f, dw, K, err);
    // dcol^T[N*P][K] = dyc^T * w: a = gradient, b = weight, sum over cout; col2im
    if (rc == MTS_OK && dx && (rc = mts_gpu_gemm_dev(bwd, 1, 0, (int)NP, K, C, dyc, (int)NP, w, K, 0.0f, col, K,
                                                     err)) == MTS_OK)
        rc = mts_gpu_col2im(g, N, col, dx, err);
    scratch_free(own);
    return rc;
}

int mts_gpu_nonfinite(size_t n, const float *x, int *any, mts_err *err)
{
    size_t m = (n + MTS_FM_CHUNK - 1) / MTS_FM_CHUNK;
    *any = 0;
    if (!m) return MTS_OK;
    void *part = NULL;
    int rc = scratch_alloc(&part, m + sizeof(int) * 2, err);
    if (rc != MTS_OK) return rc;
    int *out = (int *)part;
    uint8_t *flag = (uint8_t *)part + sizeof(int) * 2;
    MTS_LAUNCH(nonfinite_chunks, blocks_for(m), THREADS, 0, 0)(n, m, x, flag);
    MTS_LAUNCH(or_flags, 1, THREADS, 0, 0)(m, flag, out);
    if ((rc = launch_check(err, "non-finite check")) == MTS_OK) rc = mts_gpu_download(any, out, sizeof(int), err);
    scratch_free(part);
    return rc;
}

void mts_gpu_scratch_release(void) { scratch_release_idle(); }

} // extern "C"

// The output passes of the dense and conv twins, for the other twins' files (launch.h).
int mts_gpu__bias_add(int N, int out, float *y, const float *b, mts_err *err)
{
    if (!N || !out) return MTS_OK;
    MTS_LAUNCH(bias_add, blocks_for((size_t)N * out), THREADS, 0, 0)(N, out, y, b);
    return launch_check(err, "bias");
}
int mts_gpu__conv_out(int N, int cout, int P, const float *t, const float *b, float *y, mts_err *err)
{
    size_t n = (size_t)N * cout * P;
    if (!n) return MTS_OK;
    MTS_LAUNCH(conv_out_k, blocks_for(n), THREADS, 0, 0)(N, cout, P, t, b, y);
    return launch_check(err, "conv output");
}

// The scratch cache for the other twins' files (launch.h).
int mts_gpu__scratch_alloc(void **p, size_t bytes, mts_err *err) { return scratch_alloc(p, bytes, err); }
void mts_gpu__scratch_free(void *p) { scratch_free(p); }
