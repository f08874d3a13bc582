// qat.cu - CUDA twins of quantization-aware training with an integer table
// (sim/nn/qat.c, cmodel/qat.c; gpu.h "quantization-aware layers"): the
// range observer, the quantizers (qat_hd.h, the CPU's one copy), the
// forward's code sums and the three backward rules.
//
// Why the bits match the CPU's: the forward's sums are integers (the table
// entries and the codes' values, exact in any order), after which each
// output is mts_qgemm's one formula, (float)((sa * sb) * (double)acc); the
// TABLE backward's float sums run in the CPU's term order (tsum_scalar), one
// thread per output; STE and APPROX reuse the float twins (nn_ops.cu) on the
// same operands as the CPU. Two forms of the forward: kernel 1, one thread
// per output (the readable reference), and kernel 2 (the default), the
// codes laid out for gemm.cu's tiled INT kernel 2 (table in shared memory,
// 64 x 64 outputs a block) with the quantizers read on the device. The
// TABLE backward is one thread per output (not tuned).
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "launch.h"
#include "mantis/fmath.h"
#include "mantis/gpu.h"
#include "mantis/qat.h"
#include "mantis/qat_hd.h"

struct mts_gpu_qat {
    int bits, sg;
    uint32_t mask;
    int kernel;             // the forward's: 1 readable, 2 tiled (mts_gpu_qat_set_kernel)
    int32_t tmin, tmax;     // the entries' range (kernel 2's entry and sum types)
    int32_t *T;     // [2^bits][2^bits] table entries
    float *da, *db; // the TABLE backward's gradient tables (qat.h), or NULL
};

namespace {

// ------------------------------------------------------------ quantizers

// Finite min and max per chunk of MTS_FM_CHUNK values (exact: any order).
__global__ void minmax_chunks(size_t n, size_t m, const float *x, float *lo, float *hi)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= m) return;
    size_t j1 = (c + 1) * MTS_FM_CHUNK < n ? (c + 1) * MTS_FM_CHUNK : n;
    float a = INFINITY, b = -INFINITY;
    for (size_t j = c * MTS_FM_CHUNK; j < j1; j++) mts_qat_minmax_push(x[j], &a, &b);
    lo[c] = a;
    hi[c] = b;
}

// The chunks' pairs folded (mts_qat_minmax_end's rule) by the THREADS
// threads of one block, each over a strided share, then a tree in shared
// memory (min and max of finite values are exact in any order, and
// mts_qat_minmax_end makes a zero +0 whichever zero came first); the result
// in thread 0: 0 when none is finite. (One thread walking all m pairs waited
// out a global load per pair: m = 32,768 for a ResNet-20 activation.)
__device__ int fold_chunks(size_t m, const float *lo, const float *hi, float *a, float *b)
{
    __shared__ float su[THREADS], sv[THREADS];
    const int tid = threadIdx.x;
    float u = INFINITY, v = -INFINITY;
    for (size_t c = tid; c < m; c += THREADS) {
        if (lo[c] < u) u = lo[c];
        if (hi[c] > v) v = hi[c];
    }
    su[tid] = u;
    sv[tid] = v;
    __syncthreads();
    for (int h = THREADS / 2; h > 0; h /= 2) {
        if (tid < h) {
            if (su[tid + h] < su[tid]) su[tid] = su[tid + h];
            if (sv[tid + h] > sv[tid]) sv[tid] = sv[tid + h];
        }
        __syncthreads();
    }
    return tid == 0 && mts_qat_minmax_end(su[0], sv[0], a, b);
}

// mts_qat_observe: one block of THREADS.
__global__ void __launch_bounds__(THREADS) observe_k(size_t m, const float *lo, const float *hi, float *st)
{
    float a, b;
    if (fold_chunks(m, lo, hi, &a, &b)) mts_qat_observe_hd(st, a, b);
}

// mts_qat_act_param: the observed range once seen, else x's own; one block
// of THREADS.
__global__ void __launch_bounds__(THREADS) act_param_k(const float *st, size_t m, const float *lo, const float *hi,
                                                       int bits, int sg, mts_qparam *q)
{
    float a = 0.0f, b = 0.0f;
    if (st && st[2] != 0.0f) a = st[0], b = st[1];
    else fold_chunks(m, lo, hi, &a, &b); // (every thread: the block's barriers)
    if (threadIdx.x == 0) mts_qparam_affine_hd(a, b, bits, sg, q);
}

// mts_qat_weight_params: one thread per output channel of w[out][in].
__global__ void weight_params_k(int out, int in, const float *w, int bits, int sg, mts_qparam *q)
{
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= out) return;
    float a = INFINITY, b = -INFINITY, lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < in; i++) mts_qat_minmax_push(w[(size_t)o * in + i], &a, &b);
    mts_qat_minmax_end(a, b, &lo, &hi);
    if (sg) mts_qparam_symmetric_hd(lo, hi, bits, &q[o]);
    else mts_qparam_affine_hd(lo, hi, bits, 0, &q[o]);
}

// Element i of x quantized with q[i / per] (per = n: one quantizer; per =
// in: w's channels): its code's low bits, or its dequantized value.
__global__ void codes_k(size_t n, size_t per, const float *x, const mts_qparam *q, uint32_t mask, uint8_t *c)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = (uint8_t)((uint32_t)mts_q_value_hd(&q[i / per], x[i]) & mask);
}
__global__ void fake_k(size_t n, size_t per, const float *x, const mts_qparam *q, float *xh)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) xh[i] = mts_q_real_hd(&q[i / per], mts_q_value_hd(&q[i / per], x[i]));
}

// The straight-through estimator's mask: dx = 0 where x was clipped.
__global__ void clip_k(size_t n, const float *x, const mts_qparam *q, float *dx)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && !mts_q_pass_hd(q, x[i])) dx[i] = 0.0f;
}

// ----------------------------------------------------------- the forward

// Code of im2col element (tap r = (ci, ky, kx), column q = (n, oy, ox)):
// the input's code, or pad outside it (the zero point's code: the real 0,
// pad_code).
__device__ inline uint32_t col_code(const mts_conv_geom &g, const uint8_t *cx, uint32_t pad, int r, size_t q)
{
    int P = g.oh * g.ow, n = (int)(q / (size_t)P), oq = (int)(q % (size_t)P);
    int ci = r / (g.k * g.k), ky = (r / g.k) % g.k, kx = r % g.k;
    int iy = oq / g.ow * g.stride - g.pad + ky, ix = oq % g.ow * g.stride - g.pad + kx;
    if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return pad;
    return cx[(((size_t)n * g.cin + ci) * g.h + iy) * g.w + ix];
}

__device__ inline uint32_t pad_code(const mts_qparam *qa, int bits) { return (uint32_t)qa->zp & ((1u << bits) - 1u); }

// One output of the code GEMM (mts_qgemm): the table's sum and both
// operands' value sums over k, the zero-point correction, the rescale.
__device__ inline float qout(int64_t s, int64_t sa, int64_t sb, int k, const mts_qparam &qa, const mts_qparam &qb)
{
    int64_t acc = s - (int64_t)qb.zp * sa - (int64_t)qa.zp * sb + (int64_t)k * qa.zp * qb.zp;
    return (float)mts_fm_dmul(mts_fm_dmul((double)qa.scale, (double)qb.scale), (double)acc);
}

// y[n][o] = codes of x[n][:] (a) against w[o][:] (b), + b[o].
__global__ void qdense_fwd_k(int N, int in, int out, const uint8_t *cx, const uint8_t *cw, const mts_qparam *qa,
                             const mts_qparam *qw, const int32_t *T, int bits, int sg, const float *b, float *y)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)N * out) return;
    int n = (int)(t / out), o = (int)(t % out);
    const uint8_t *a = cx + (size_t)n * in, *w = cw + (size_t)o * in;
    int64_t s = 0, sa = 0, sb = 0;
    for (int i = 0; i < in; i++) {
        s += T[((uint32_t)a[i] << bits) | w[i]];
        sa += mts_q_code_value(a[i], bits, sg);
        sb += mts_q_code_value(w[i], bits, sg);
    }
    float v = qout(s, sa, sb, in, *qa, qw[o]);
    y[t] = b ? mts_fm_canon(mts_fm_add(v, b[o])) : v; // NaN: the CPU's bits (qat.c)
}

// y[n][co][p]: the im2col codes of column (n, p) against w[co][:], + bias.
__global__ void qconv_fwd_k(mts_conv_geom g, int N, const uint8_t *cx, const uint8_t *cw, const mts_qparam *qa,
                            const mts_qparam *qw, const int32_t *T, int bits, int sg, const float *b, float *y)
{
    int P = g.oh * g.ow, K = g.cin * g.k * g.k;
    uint32_t pad = pad_code(qa, bits);
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)N * g.cout * P) return;
    int p = (int)(t % P), co = (int)((t / P) % g.cout);
    size_t n = t / ((size_t)P * g.cout), q = n * P + p;
    const uint8_t *w = cw + (size_t)co * K;
    int64_t s = 0, sa = 0, sb = 0;
    for (int r = 0; r < K; r++) {
        uint32_t a = col_code(g, cx, pad, r, q);
        s += T[(a << bits) | w[r]];
        sa += mts_q_code_value(a, bits, sg);
        sb += mts_q_code_value(w[r], bits, sg);
    }
    y[t] = mts_fm_canon(mts_fm_add(qout(s, sa, sb, K, *qa, qw[co]), b ? b[co] : 0.0f));
}

// Kernel 2's operands: rows of codes as words, the row operand's shifted by
// the table width (gemm.cu's layout), and each row's sum of code values.
__global__ void rows2_k(int rows, int k, const uint8_t *c, int shift, int bits, int sg, uint32_t *u, int64_t *sum)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    int64_t s = 0;
    for (int i = 0; i < k; i++) {
        uint32_t v = c[(size_t)r * k + i];
        u[(size_t)r * k + i] = v << shift;
        s += mts_q_code_value(v, bits, sg);
    }
    sum[r] = s;
}
// The same for the im2col codes of a convolution: row q = column (n, p) of
// col, its K taps in (ci, ky, kx) order.
__global__ void conv_rows2_k(mts_conv_geom g, int N, const uint8_t *cx, const mts_qparam *qa, int bits, int sg,
                             uint32_t *u, int64_t *sum)
{
    int K = g.cin * g.k * g.k;
    size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= (size_t)N * g.oh * g.ow) return;
    uint32_t pad = pad_code(qa, bits);
    int64_t s = 0;
    for (int r = 0; r < K; r++) {
        uint32_t a = col_code(g, cx, pad, r, q);
        u[q * K + r] = a << bits;
        s += mts_q_code_value(a, bits, sg);
    }
    sum[q] = s;
}

// ------------------------------------------------- the TABLE backward
// Each sum is qat.c's tsum_scalar for one lane: from +0, in term order,
// acc = acc + d * ((G[(a << bits) | b] - z) * s), every operation rounded.
__device__ inline float tterm(float acc, float d, float g, float z, float s)
{
    return mts_fm_add(acc, mts_fm_mul(d, mts_fm_mul(mts_fm_sub(g, z), s)));
}

// dx[n][i] = sum over o of dy[n][o] * dT/da at (x[n][i], w[o][i]), in weight units.
__global__ void tdense_dx_k(int N, int in, int out, const uint8_t *cx, const uint8_t *cw, const mts_qparam *qw,
                            const float *G, int bits, const float *dy, float *dx)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)N * in) return;
    int n = (int)(t / in), i = (int)(t % in);
    uint32_t a = (uint32_t)cx[t] << bits;
    float acc = 0.0f;
    for (int o = 0; o < out; o++)
        acc = tterm(acc, dy[(size_t)n * out + o], G[a | cw[(size_t)o * in + i]], (float)qw[o].zp, qw[o].scale);
    dx[t] = acc;
}

// dw[o][i] = sum over n of dy[n][o] * dT/db at (x[n][i], w[o][i]), in activation units.
__global__ void tdense_dw_k(int N, int in, int out, const uint8_t *cx, const uint8_t *cw, const mts_qparam *qa,
                            const float *G, int bits, const float *dy, float *dw)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)out * in) return;
    int o = (int)(t / in), i = (int)(t % in);
    uint32_t b = cw[t];
    float acc = 0.0f, z = (float)qa->zp, s = qa->scale;
    for (int n = 0; n < N; n++)
        acc = tterm(acc, dy[(size_t)n * out + o], G[((uint32_t)cx[(size_t)n * in + i] << bits) | b], z, s);
    dw[t] = acc;
}

// dW[co][r] = sum over columns q = (n, p) in order of dy[n][co][p] * dT/db.
__global__ void tconv_dw_k(mts_conv_geom g, int N, const uint8_t *cx, const uint8_t *cw, const mts_qparam *qa,
                           const float *G, int bits, const float *dy, float *dw)
{
    int P = g.oh * g.ow, K = g.cin * g.k * g.k;
    uint32_t pad = pad_code(qa, bits);
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)g.cout * K) return;
    int co = (int)(t / K), r = (int)(t % K);
    uint32_t b = cw[t];
    float acc = 0.0f, z = (float)qa->zp, s = qa->scale;
    size_t NP = (size_t)N * P;
    for (size_t q = 0; q < NP; q++) {
        size_t n = q / P;
        float d = dy[(n * g.cout + co) * P + q % P];
        acc = tterm(acc, d, G[(col_code(g, cx, pad, r, q) << bits) | b], z, s);
    }
    dw[t] = acc;
}

// dcol^T[q][r] = sum over co of dy[n][co][p] * dT/da (col2im then sums the taps).
__global__ void tconv_dcol_k(mts_conv_geom g, int N, const uint8_t *cx, const uint8_t *cw, const mts_qparam *qa,
                             const mts_qparam *qw, const float *G, int bits, const float *dy, float *dcolT)
{
    int P = g.oh * g.ow, K = g.cin * g.k * g.k;
    uint32_t pad = pad_code(qa, bits);
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)N * P * K) return;
    size_t q = t / K, n = q / P;
    int r = (int)(t % K), p = (int)(q % P);
    uint32_t a = col_code(g, cx, pad, r, q) << bits;
    float acc = 0.0f;
    for (int co = 0; co < g.cout; co++)
        acc = tterm(acc, dy[(n * g.cout + co) * P + p], G[a | cw[(size_t)co * K + r]], (float)qw[co].zp,
                    qw[co].scale);
    dcolT[t] = acc;
}

// ------------------------------------------------------ host helpers

// The quantizers and codes of one layer call, in one scratch block:
// qa (1), qw (out), the chunks' ranges, the codes of x and w.
struct QCall {
    void *blk = nullptr;
    mts_qparam *qa = nullptr, *qw = nullptr;
    uint8_t *cx = nullptr, *cw = nullptr;
    ~QCall() { mts_gpu__scratch_free(blk); }
};

size_t up8(size_t b) { return (b + 7) / 8 * 8; }

// Quantizers of x (n values, observer st or NULL) and w[out][in]; codes too when codes.
int qcall_open(QCall &c, const mts_gpu_qat *q, const float *st, const float *x, size_t n, const float *w, int out,
               int in, int codes, mts_err *err)
{
    size_t m = (n + MTS_FM_CHUNK - 1) / MTS_FM_CHUNK, nw = (size_t)out * in;
    size_t oqa = 0, oqw = up8(sizeof(mts_qparam)), olo = oqw + up8(sizeof(mts_qparam) * (size_t)out),
           ocx = olo + up8(2 * m * sizeof(float)), ocw = ocx + up8(codes ? n : 0), end = ocw + (codes ? nw : 0) + 8;
    int rc = mts_gpu__scratch_alloc(&c.blk, end, err);
    if (rc != MTS_OK) return rc;
    char *b = (char *)c.blk;
    c.qa = (mts_qparam *)(b + oqa);
    c.qw = (mts_qparam *)(b + oqw);
    float *lo = (float *)(b + olo), *hi = lo + m;
    if (m) MTS_LAUNCH(minmax_chunks, blocks_for(m), THREADS, 0, 0)(n, m, x, lo, hi);
    MTS_LAUNCH(act_param_k, 1, THREADS, 0, 0)(st, m, lo, hi, q->bits, q->sg, c.qa);
    if (out > 0) MTS_LAUNCH(weight_params_k, blocks_for((size_t)out), THREADS, 0, 0)(out, in, w, q->bits, q->sg, c.qw);
    if (codes) {
        c.cx = (uint8_t *)(b + ocx);
        c.cw = (uint8_t *)(b + ocw);
        if (n) MTS_LAUNCH(codes_k, blocks_for(n), THREADS, 0, 0)(n, n, x, c.qa, q->mask, c.cx);
        if (nw) MTS_LAUNCH(codes_k, blocks_for(nw), THREADS, 0, 0)(nw, (size_t)in, w, c.qw, q->mask, c.cw);
    }
    return launch_check(err, "quantizers");
}

// xh, wh: the fake-quantized operands of the STE backward (scratch of n + out*in floats).
int fake_operands(const mts_gpu_qat *q, const float *st, const float *x, size_t n, const float *w, int out, int in,
                  QCall &c, void **blk, float **xh, float **wh, mts_err *err)
{
    size_t nw = (size_t)out * in;
    int rc = qcall_open(c, q, st, x, n, w, out, in, 0, err);
    if (rc == MTS_OK) rc = mts_gpu__scratch_alloc(blk, (n + nw + 1) * sizeof(float), err);
    if (rc != MTS_OK) return rc;
    *xh = (float *)*blk;
    *wh = *xh + n;
    if (n) MTS_LAUNCH(fake_k, blocks_for(n), THREADS, 0, 0)(n, n, x, c.qa, *xh);
    if (nw) MTS_LAUNCH(fake_k, blocks_for(nw), THREADS, 0, 0)(nw, (size_t)in, w, c.qw, *wh);
    return launch_check(err, "fake quantization");
}

int clip(size_t n, const float *x, const mts_qparam *qa, float *dx, mts_err *err)
{
    if (!dx || !n) return MTS_OK;
    MTS_LAUNCH(clip_k, blocks_for(n), THREADS, 0, 0)(n, x, qa, dx);
    return launch_check(err, "quantizer clip mask");
}

// Kernel 2: y (rows x out, ldc out) from the row words ua / sums sa built by
// the caller and the weights' codes in c.
int forward2(const mts_gpu_qat *q, const QCall &c, int rows, int K, int out, const uint32_t *ua, const int64_t *sa,
             float *y, mts_err *err)
{
    void *blk = NULL;
    size_t nw = (size_t)out * K;
    int rc = mts_gpu__scratch_alloc(&blk, nw * 4 + (size_t)out * 8 + 8, err);
    if (rc != MTS_OK) return rc;
    int64_t *sb = (int64_t *)blk;
    uint32_t *ub = (uint32_t *)(sb + out);
    MTS_LAUNCH(rows2_k, blocks_for((size_t)out), THREADS, 0, 0)(out, K, c.cw, 0, q->bits, q->sg, ub, sb);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = mts_gpu__int2(q->T, 1 << (2 * q->bits), q->bits, q->tmin, q->tmax, rows, out, K, ua, ub, sa, sb, 0, 0, 0.0,
                          c.qa, c.qw, 0.0f, y, out);
    mts_gpu__scratch_free(blk);
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? MTS_OK : launch_check(err, "quantization-aware INT kernel 2");
}

int check_bwd(const mts_gpu_qat *q, int int_bwd, const mts_gpu_gemm_plan *bwd, mts_err *err)
{
    if (!q || !bwd) return mts_fail(err, MTS_EINVAL, "gpu quantization-aware backward: NULL table or plan");
    if (int_bwd != MTS_INT_BWD_STE && int_bwd != MTS_INT_BWD_TABLE && int_bwd != MTS_INT_BWD_APPROX)
        return mts_fail(err, MTS_EINVAL, "gpu quantization-aware backward: rule %d is not ste, table or approx",
                        int_bwd);
    if (int_bwd == MTS_INT_BWD_TABLE && !q->da)
        return mts_fail(err, MTS_EINVAL, "gpu quantization-aware backward: the table was opened without its "
                                         "gradient tables");
    return MTS_OK;
}

} // namespace

extern "C" {

int mts_gpu_qat_observe(float *st, const float *x, size_t n, mts_err *err)
{
    size_t m = (n + MTS_FM_CHUNK - 1) / MTS_FM_CHUNK;
    if (!m) return MTS_OK;
    void *part = NULL;
    int rc = mts_gpu__scratch_alloc(&part, 2 * m * sizeof(float), err);
    if (rc != MTS_OK) return rc;
    float *lo = (float *)part, *hi = lo + m;
    MTS_LAUNCH(minmax_chunks, blocks_for(m), THREADS, 0, 0)(n, m, x, lo, hi);
    MTS_LAUNCH(observe_k, 1, THREADS, 0, 0)(m, lo, hi, st);
    rc = launch_check(err, "range observer");
    mts_gpu__scratch_free(part);
    return rc;
}

void mts_gpu_qat_close(mts_gpu_qat *q)
{
    if (!q) return;
    mts_gpu_free(q->T);
    mts_gpu_free(q->da);
    mts_gpu_free(q->db);
    std::free(q);
}

int mts_gpu_qat_open(const mts_lut *lut, int grads, mts_gpu_qat **out, mts_err *err)
{
    *out = NULL;
    if (!lut || lut->kind != MTS_LUT_INT || !lut->entry || lut->int_bits < 1 || lut->int_bits > 8 ||
        lut->n != (size_t)1 << (2 * lut->int_bits))
        return mts_fail(err, MTS_EINVAL, "gpu quantization-aware layers: expected an integer table of 1..8-bit "
                                         "operands");
    mts_gpu_qat *q = (mts_gpu_qat *)std::calloc(1, sizeof *q);
    if (!q) return mts_fail(err, MTS_ENOMEM, "gpu quantization-aware layers: out of memory");
    q->bits = lut->int_bits;
    q->sg = lut->int_signed != 0;
    q->mask = (1u << q->bits) - 1u;
    q->kernel = 2;
    size_t n = (size_t)1 << (2 * q->bits);
    q->tmin = q->tmax = (int32_t)lut->entry[0];
    for (size_t i = 1; i < n; i++) {
        int32_t v = (int32_t)lut->entry[i];
        q->tmin = v < q->tmin ? v : q->tmin;
        q->tmax = v > q->tmax ? v : q->tmax;
    }
    int rc = mts_gpu_alloc((void **)&q->T, n * 4, err);
    if (rc == MTS_OK) rc = mts_gpu_upload(q->T, lut->entry, n * 4, err); // int32 bit patterns
    if (rc == MTS_OK && grads) {
        mts_int_grad g;
        rc = mts_int_grad_build(lut, mts_int_grad_default_window(q->bits), &g, err);
        if (rc == MTS_OK) rc = mts_gpu_alloc((void **)&q->da, n * 4, err);
        if (rc == MTS_OK) rc = mts_gpu_alloc((void **)&q->db, n * 4, err);
        if (rc == MTS_OK) rc = mts_gpu_upload(q->da, g.da, n * 4, err);
        if (rc == MTS_OK) rc = mts_gpu_upload(q->db, g.db, n * 4, err);
        mts_int_grad_free(&g);
    }
    if (rc != MTS_OK) {
        mts_gpu_qat_close(q);
        return rc;
    }
    *out = q;
    return MTS_OK;
}

int mts_gpu_qat_set_kernel(mts_gpu_qat *q, int kernel, mts_err *err)
{
    if (!q) return mts_fail(err, MTS_EINVAL, "gpu quantization-aware layers: NULL table");
    if (kernel < 0 || kernel > 2)
        return mts_fail(err, MTS_EINVAL, "gpu quantization-aware layers: no forward kernel %d (1 readable, 2 tiled; "
                                         "0 the default, 2)", kernel);
    q->kernel = kernel ? kernel : 2;
    return MTS_OK;
}

int mts_gpu_qdense_forward(const mts_gpu_qat *q, const float *st, int N, int in, int out, const float *x,
                           const float *w, const float *b, float *y, mts_err *err)
{
    if (!q) return mts_fail(err, MTS_EINVAL, "gpu quantization-aware dense: NULL table");
    if (N <= 0 || out <= 0) return MTS_OK;
    QCall c;
    int rc = qcall_open(c, q, st, x, (size_t)N * in, w, out, in, 1, err);
    if (rc != MTS_OK) return rc;
    size_t ny = (size_t)N * out;
    if (q->kernel == 1) {
        MTS_LAUNCH(qdense_fwd_k, blocks_for(ny), THREADS, 0, 0)(N, in, out, c.cx, c.cw, c.qa, c.qw, q->T, q->bits,
                                                                q->sg, b, y);
        return launch_check(err, "quantization-aware dense forward");
    }
    void *blk = NULL;
    if ((rc = mts_gpu__scratch_alloc(&blk, (size_t)N * in * 4 + (size_t)N * 8 + 8, err)) != MTS_OK) return rc;
    int64_t *sa = (int64_t *)blk;
    uint32_t *ua = (uint32_t *)(sa + N);
    MTS_LAUNCH(rows2_k, blocks_for((size_t)N), THREADS, 0, 0)(N, in, c.cx, q->bits, q->bits, q->sg, ua, sa);
    rc = launch_check(err, "quantization-aware dense codes");
    if (rc == MTS_OK) rc = forward2(q, c, N, in, out, ua, sa, y, err);
    if (rc == MTS_OK && b) rc = mts_gpu__bias_add(N, out, y, b, err);
    mts_gpu__scratch_free(blk);
    return rc;
}

int mts_gpu_qdense_backward(const mts_gpu_qat *q, int int_bwd, const mts_gpu_gemm_plan *bwd, const float *st, int N,
                            int in, int out, const float *x, const float *w, const float *dy, float *dx, float *dw,
                            float *db, mts_err *err)
{
    int rc = check_bwd(q, int_bwd, bwd, err);
    if (rc != MTS_OK) return rc;
    if (int_bwd == MTS_INT_BWD_APPROX) return mts_gpu_dense_backward(bwd, N, in, out, x, w, dy, dx, dw, db, err);
    size_t nx = (size_t)N * in, nw = (size_t)out * in;
    QCall c;
    if (int_bwd == MTS_INT_BWD_STE) {
        void *blk = NULL;
        float *xh = NULL, *wh = NULL;
        rc = fake_operands(q, st, x, nx, w, out, in, c, &blk, &xh, &wh, err);
        if (rc == MTS_OK) rc = mts_gpu_dense_backward(bwd, N, in, out, xh, wh, dy, dx, dw, db, err);
        mts_gpu__scratch_free(blk);
    } else {
        rc = qcall_open(c, q, st, x, nx, w, out, in, 1, err);
        if (rc == MTS_OK && dx && nx)
            MTS_LAUNCH(tdense_dx_k, blocks_for(nx), THREADS, 0, 0)(N, in, out, c.cx, c.cw, c.qw, q->da, q->bits, dy,
                                                                   dx);
        if (rc == MTS_OK && dw && nw)
            MTS_LAUNCH(tdense_dw_k, blocks_for(nw), THREADS, 0, 0)(N, in, out, c.cx, c.cw, c.qa, q->db, q->bits, dy,
                                                                   dw);
        if (rc == MTS_OK) rc = launch_check(err, "quantization-aware dense gradient tables");
        if (rc == MTS_OK && db) rc = mts_gpu_dense_backward(bwd, N, in, out, x, w, dy, NULL, NULL, db, err);
    }
    if (rc == MTS_OK) rc = clip(nx, x, c.qa, dx, err);
    return rc;
}

int mts_gpu_qconv2d_forward(const mts_gpu_qat *q, const float *st, const mts_conv_geom *g, int N, const float *x,
                            const float *w, const float *b, float *y, mts_err *err)
{
    if (!q) return mts_fail(err, MTS_EINVAL, "gpu quantization-aware conv: NULL table");
    int K = g->cin * g->k * g->k;
    size_t ny = (size_t)N * g->cout * g->oh * g->ow;
    if (!ny) return MTS_OK;
    QCall c;
    int rc = qcall_open(c, q, st, x, (size_t)N * g->cin * g->h * g->w, w, g->cout, K, 1, err);
    if (rc != MTS_OK) return rc;
    if (q->kernel == 1) {
        MTS_LAUNCH(qconv_fwd_k, blocks_for(ny), THREADS, 0, 0)(*g, N, c.cx, c.cw, c.qa, c.qw, q->T, q->bits, q->sg, b,
                                                               y);
        return launch_check(err, "quantization-aware conv forward");
    }
    // kernel 2 on the im2col codes: t[N*P][cout], then the output layout and the bias
    size_t NP = (size_t)N * g->oh * g->ow;
    void *blk = NULL;
    if ((rc = mts_gpu__scratch_alloc(&blk, NP * 8 + NP * K * 4 + ny * 4 + 8, err)) != MTS_OK) return rc;
    int64_t *sa = (int64_t *)blk;
    uint32_t *ua = (uint32_t *)(sa + NP);
    float *t = (float *)(ua + NP * K);
    MTS_LAUNCH(conv_rows2_k, blocks_for(NP), THREADS, 0, 0)(*g, N, c.cx, c.qa, q->bits, q->sg, ua, sa);
    rc = launch_check(err, "quantization-aware conv codes");
    if (rc == MTS_OK) rc = forward2(q, c, (int)NP, K, g->cout, ua, sa, t, err);
    if (rc == MTS_OK) rc = mts_gpu__conv_out(N, g->cout, g->oh * g->ow, t, b, y, err);
    mts_gpu__scratch_free(blk);
    return rc;
}

int mts_gpu_qconv2d_backward(const mts_gpu_qat *q, int int_bwd, const mts_gpu_gemm_plan *bwd, const float *st,
                             const mts_conv_geom *g, int N, const float *x, const float *w, const float *dy,
                             float *dx, float *dw, float *db, float *work, mts_err *err)
{
    int rc = check_bwd(q, int_bwd, bwd, err);
    if (rc != MTS_OK) return rc;
    if (int_bwd == MTS_INT_BWD_APPROX) return mts_gpu_conv2d_backward(bwd, g, N, x, w, dy, dx, dw, db, work, err);
    int K = g->cin * g->k * g->k, C = g->cout;
    size_t nx = (size_t)N * g->cin * g->h * g->w, NP = (size_t)N * g->oh * g->ow;
    if (!NP) return MTS_OK;
    QCall c;
    if (int_bwd == MTS_INT_BWD_STE) {
        void *blk = NULL;
        float *xh = NULL, *wh = NULL;
        rc = fake_operands(q, st, x, nx, w, C, K, c, &blk, &xh, &wh, err);
        if (rc == MTS_OK) rc = mts_gpu_conv2d_backward(bwd, g, N, xh, wh, dy, dx, dw, db, work, err);
        mts_gpu__scratch_free(blk);
    } else {
        void *dcol = NULL;
        rc = qcall_open(c, q, st, x, nx, w, C, K, 1, err);
        if (rc == MTS_OK && dw)
            MTS_LAUNCH(tconv_dw_k, blocks_for((size_t)C * K), THREADS, 0, 0)(*g, N, c.cx, c.cw, c.qa, q->db, q->bits,
                                                                            dy, dw);
        if (rc == MTS_OK && dx && (rc = mts_gpu__scratch_alloc(&dcol, NP * K * sizeof(float), err)) == MTS_OK) {
            MTS_LAUNCH(tconv_dcol_k, blocks_for(NP * K), THREADS, 0, 0)(*g, N, c.cx, c.cw, c.qa, c.qw, q->da, q->bits,
                                                                        dy, (float *)dcol);
            if ((rc = launch_check(err, "quantization-aware conv gradient tables")) == MTS_OK)
                rc = mts_gpu_col2im(g, N, (const float *)dcol, dx, err);
        }
        mts_gpu__scratch_free(dcol);
        if (rc == MTS_OK) rc = launch_check(err, "quantization-aware conv gradient tables");
        if (rc == MTS_OK && db) rc = mts_gpu_conv2d_backward(bwd, g, N, x, w, dy, NULL, NULL, db, work, err);
    }
    if (rc == MTS_OK) rc = clip(nx, x, c.qa, dx, err);
    return rc;
}

} // extern "C"
