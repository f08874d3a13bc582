// gemm.cu - the CUDA GEMM providers (gpu.h): NATIVE, LUT (any float
// table format, M <= 11), FMAq over NATIVE or LUT products, INT; device
// buffers and the host API.
//
// Exactness first (docs/gemm.md, "GPU"): one thread per output sums its
// products sequentially in k from +0 (or in mts_fmaq_dot's chunk order),
// every operation explicitly rounded (the file is built with -fmad=false as
// well). The arithmetic is the CPU's own: operand quantization, the
// special-case rules, AMSim's entry decoding, the "fp32" model, FMAq's
// quantize/add, the INT correction and the store rule are the host/device
// functions of include/mantis/arith_hd.h, which cmodel/ and sim/ call too;
// nothing here restates a rule (tests/test_gpu.cpp compares with
// mts_gemm_ref, on a GPU and under the CUDA emulation, gpu/emu/).
//
// Three numbered kernels (llm.c style), each validated against mts_gemm_ref
// (tests/test_gpu.cpp runs every check through each):
//   kernel 1  gemm_kernel: the readable reference. One thread per output,
//             16x16 operand tiles in shared memory, the scalar product of
//             arith_hd.h per multiply.
//   kernel 2  gemm2_kernel: 64x64 outputs per block, 4x4 per thread,
//             operands quantized once per tile as they are staged in shared
//             memory. For bf16-like tables (E8, bias 127, IEEE; entries with
//             no zero flag, exponent adjustment 0..22, mantissa not all ones)
//             the product is two FP32 multiplies: s = sa * sb (the operands'
//             signs and powers of two) and p = s * T'[ia][ib] with T' the
//             table's entries as floats in [1, 2^23) held in shared memory
//             (M <= 7) - exact, see lutf_product. Other providers use the
//             scalar product of kernel 1 on the staged operands.
//   kernel 3  gemm3_kernel: long sums over few outputs (weight gradients):
//             per 8x4 outputs one warp adds the current products in order
//             while the others form the next ones into shared memory (their
//             operands read a step ahead); two layouts of that work, K3Col
//             (seven warps, a thread per k and column) and K3Row (five or
//             ten, a thread per k).
// Each output is still one thread's sequential sum in k from +0, so every
// kernel gives the bits of mts_gemm_ref whatever the tiling.
#include <cuda_runtime.h>
#if defined(MTS_HAVE_CUBLAS)
#include <cublas_v2.h>
#endif
#include <dlfcn.h>

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <unordered_map>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "launch.h"
#include "mantis/arith_hd.h"
#include "mantis/gemm.h"
#include "mantis/gpu.h"
#include "mantis/intmul.h"
#include "mantis/ste_hd.h"

namespace {

const int TILE = 16;

// ------------------------------------------------------------ errors

int cuda_fail(mts_err *err, cudaError_t e, const char *what)
{
    if (e == cudaErrorMemoryAllocation) return mts_fail(err, MTS_ENOMEM, "gpu: %s: out of device memory", what);
    return mts_fail(err, MTS_EIO, "gpu: %s: %s", what, cudaGetErrorString(e));
}

// 1 when AddressSanitizer runs in this process (its runtime defines
// __asan_init; this file itself is not instrumented, and a link-time
// reference would meet the instrumented objects' hidden one). Under the
// emulation the "device" starts under ASan like any host code.
bool under_asan()
{
#if defined(MTS_GPU_EMU)
    return false;
#else
    return dlsym(RTLD_DEFAULT, "__asan_init") != nullptr;
#endif
}

// live and peak device bytes allocated through mts_gpu_alloc
std::mutex g_mu;
std::unordered_map<void *, size_t> g_sizes;
size_t g_live = 0, g_peak = 0;

// ------------------------------------------------------------ kernels

enum Prod { PROD_F32 = 0, PROD_FP32M = 1, PROD_LUT = 2 };

struct Job {
    int m, n, k, transA, transB, lda, ldb, ldc;
    const float *A, *B;
    float *C;
    float beta;
    int prod, fmaq, chunk;
    int quant;         // LUT: operands rounded (RNE) to qin as they are read
    mts_format qin;    // LUT: the operand format (in_fmt, or the table's)
    mts_format lutf;   // LUT: the table's format (AMSim truncates to it)
    const uint32_t *T; // LUT entries on the device
    mts_qfmt qprod, qacc;
    int qrtz;          // FMAq, both quantizers RTZ: kernels 2 and 3 take fq_*'s 32-bit form
    mts_qrtz rprod, racc; // (its constants)
    const float *Tf;   // kernel 2, bf16-like tables: the entries as floats (lutf_table)
    int tf_n;          // entries in Tf
    mts_gpu_batch bt;  // blockIdx.z: GEMM z of the batch (batch_ptr)
};

// GEMM z's operand of a batch: base + (z / inner) * outer stride + (z % inner) * inner stride.
template <class T> __device__ inline T *batch_ptr(T *base, const mts_gpu_batch &bt, size_t so, size_t si)
{
    unsigned z = blockIdx.z;
    return base + (size_t)(z / (unsigned)bt.inner) * so + (size_t)(z % (unsigned)bt.inner) * si;
}

// FMAq's steps in kernels 2 and 3: with RTZ quantizers (the default) the
// 32-bit form of arith_hd.h (mts_fmaq_rtz_hd: Q is a mask, a min and a
// flush; the sum one __fadd_rz), which gives mts_fmaq_hd's bits for every
// product p and every sum s these kernels hold (+0 or Q_acc's outputs);
// the 64-bit exact form otherwise. Kernel 1 keeps the exact form: it is the
// readable reference.
__device__ inline uint32_t fq_prod(const Job &g, uint32_t p)
{
    return g.qrtz ? mts_q_rtz_hd(&g.rprod, p) : mts_q_hd(&g.qprod, p);
}
__device__ inline uint32_t fq_add(const Job &g, uint32_t a, uint32_t b)
{
    return g.qrtz ? mts_qadd_rtz_hd(&g.racc, a, b) : mts_qadd_hd(&g.qacc, a, b);
}
__device__ inline uint32_t fq_fmaq(const Job &g, uint32_t p, uint32_t s) { return fq_add(g, fq_prod(g, p), s); }

// Element (r, c) of op(X) as bits, 0 outside rows x cols.
__device__ inline uint32_t load_raw(const float *X, int ld, int trans, int r, int c, int rows, int cols)
{
    if (r >= rows || c >= cols) return 0;
    return mts_f2u(trans ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c]);
}

// An operand as mts_gemm_ref quantizes it (LUT: RNE to the input format).
__device__ inline uint32_t quant_in(const Job &g, uint32_t x)
{
    return g.quant ? mts_fmt_quantize_hd(&g.qin, x, MTS_RNE) : x;
}

__device__ uint32_t load_op(const Job &g, const float *X, int ld, int trans, int r, int c, int rows, int cols)
{
    return quant_in(g, load_raw(X, ld, trans, r, c, rows, cols));
}

__device__ uint32_t product(const Job &g, uint32_t a, uint32_t b)
{
    if (g.prod == PROD_LUT) return mts_amsim_hd(&g.lutf, g.T, a, b);
    if (g.prod == PROD_FP32M) {
        const mts_format f32 = {8, 23, 127, 1}; // model "fp32": e8m23, RNE
        return mts_mul_exact_hd(&f32, MTS_OUT_RNE, a, b);
    }
    return mts_f2u(mts_fm_mul(mts_u2f(a), mts_u2f(b)));
}

// One thread per output C[i][j], a 16x16 block of outputs per thread block;
// operand tiles (quantized as they are read) in shared memory. The sum runs
// in k order in every thread: plain FP32 (acc = acc + p from +0) or FMAq's
// chunks (s = FMAq(p, s) from +0 per chunk, then y = Qacc(y + s)).
__global__ void gemm_kernel(Job g)
{
    __shared__ uint32_t As[TILE][TILE + 1], Bs[TILE][TILE + 1];
    int i = blockIdx.y * TILE + threadIdx.y, j = blockIdx.x * TILE + threadIdx.x;
    const float *A = batch_ptr(g.A, g.bt, g.bt.a_outer, g.bt.a_inner);
    const float *B = batch_ptr(g.B, g.bt, g.bt.b_outer, g.bt.b_inner);
    float *C = batch_ptr(g.C, g.bt, g.bt.c_outer, g.bt.c_inner);
    float acc = 0.0f;
    uint32_t y = 0, s = 0;
    int inchunk = 0, first = 1;
    for (int k0 = 0; k0 < g.k; k0 += TILE) {
        As[threadIdx.y][threadIdx.x] = load_op(g, A, g.lda, g.transA, i, k0 + threadIdx.x, g.m, g.k);
        Bs[threadIdx.y][threadIdx.x] = load_op(g, B, g.ldb, g.transB, k0 + threadIdx.y, j, g.k, g.n);
        __syncthreads();
        int kend = g.k - k0 < TILE ? g.k - k0 : TILE;
        for (int kk = 0; kk < kend; kk++) {
            uint32_t p = product(g, As[threadIdx.y][kk], Bs[kk][threadIdx.x]);
            if (!g.fmaq) {
                acc = mts_fm_add(acc, mts_u2f(p));
            } else {
                s = mts_fmaq_hd(&g.qprod, &g.qacc, p, s);
                if (++inchunk == g.chunk) {
                    y = first ? s : mts_qadd_hd(&g.qacc, y, s);
                    first = 0;
                    s = 0;
                    inchunk = 0;
                }
            }
        }
        __syncthreads();
    }
    if (i >= g.m || j >= g.n) return;
    if (g.fmaq) {
        if (inchunk) y = first ? s : mts_qadd_hd(&g.qacc, y, s);
        acc = mts_u2f(y);
    }
    mts_gemm_store_hd(&C[(size_t)i * g.ldc + j], g.beta, acc);
}

// The FMAq STE mask of y[n][o] = x[n][:] . w[o][:] (mts_ste_mask's replay,
// ste_hd.h's rules): one thread per output, its in mask bytes at
// mask[(n*out + o)*in], the products as this job's GEMM forms them.
__global__ void ste_mask_kernel(Job g, int ste, int N, int in, int out, const float *x, const float *w,
                                uint8_t *mask)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)N * out) return;
    const float *xn = x + (t / (size_t)out) * in, *wo = w + (t % (size_t)out) * in;
    uint8_t *m = mask + t * in;
    mts_ste_run r;
    mts_ste_begin_hd(&r, ste, &g.qacc);
    for (size_t c0 = 0; c0 < (size_t)in; c0 += (size_t)g.chunk) {
        size_t c1 = c0 + (size_t)g.chunk < (size_t)in ? c0 + (size_t)g.chunk : (size_t)in;
        for (size_t i = c0; i < c1; i++)
            m[i] = (uint8_t)mts_ste_term_hd(&r, &g.qprod, &g.qacc,
                                            product(g, quant_in(g, mts_f2u(xn[i])), quant_in(g, mts_f2u(wo[i]))), i);
        size_t z = mts_ste_chunk_end_hd(&r, &g.qacc, c0, c1);
        for (size_t i = c0; i < z; i++) m[i] = 0;
    }
    for (size_t i = 0; i < r.dead_end; i++) m[i] = 0;
}

// ------------------------------------------------------------ kernel 2

// 64x64 outputs per block of 256 threads, 4x4 per thread (rows ty + 16 r,
// columns tx + 16 c: a warp reads 2 A values and 16 consecutive B values of
// a staged row, no bank conflicts), k in steps of 16: the INT kernel's
// tiling and kernel 2's.
const int BM = 64, BN = 64, BK = 16, NT = 256, TM = 4, TN = 4;

// Kernel 2's block tiles: BM_ x BN_ outputs, TM_ x TN_ per thread. Wide for
// large products; Narrow for n <= 16 (a ResNet conv's 16 output channels);
// Single (one output per thread, one warp per block) where the wide tiling
// gives too few blocks to fill the GPU - e.g. a weight gradient of 16 x 144
// outputs whose sums run over k = batch x pixels: each output is one
// thread's sequential sum (the order the bits depend on), so the only
// parallelism is across outputs and every one needs its own thread.
// BK_: the k step staged per barrier pair - 128 for Single, whose one-warp
// blocks would otherwise wait out a global load every 16 products of a
// long sum (measured on the H100: ResNet-20's weight gradients, sums over
// k = 131,072, took 84% of a step at 16).
template <int BM_, int BN_, int TM_, int TN_, int BK_> struct Tile {
    static const int bm = BM_, bn = BN_, tm = TM_, tn = TN_, bk = BK_, tx = BN_ / TN_, ty = BM_ / TM_, nt = tx * ty;
};
typedef Tile<64, 64, 4, 4, 16> Wide;
typedef Tile<256, 16, 4, 4, 16> Narrow;
typedef Tile<8, 4, 1, 1, 128> Single;
// Mid (plan kernel 13): n <= 32 (ResNet-20's 32-channel convs, where Wide
// leaves half its columns idle); Half (14): Wide's columns over a quarter of
// its rows, for products with too few outputs to give Wide two blocks an
// SM (ResNet-20's 64-channel forward convs: 8,192 x 64 outputs, 128 Wide
// blocks on 132 SMs), which would otherwise go to the long-sum kernel.
typedef Tile<128, 32, 4, 4, 16> Mid;
typedef Tile<32, 64, 2, 4, 16> Half;
// The table of kernel 2's bf16-like product in shared memory up to this many
// entries (M <= 7: 64 KiB); larger tables (M <= 11) are read from global
// memory (L2).
const int TF_SMEM_MAX = 16384;

// Product kinds of kernel 2: FP32 multiply (NATIVE); kernel 1's scalar
// product on the staged operands (any provider); the bf16-like table as
// floats in shared or global memory.
enum Pk { PK_F32 = 0, PK_SCALAR = 1, PK_LUTF_SMEM = 2, PK_LUTF_GLOBAL = 3 };

// One operand as kernel 2 stages it. PK_F32: as read; PK_SCALAR: as
// load_op quantizes it; PK_LUTF: the operand quantized (in_fmt, RNE) and
// truncated to the table's format as mts_mul_classify does (rule 1), split
// into *S = its sign and power of two (+-2^(e-127), +-0, +-inf, or the NaN
// itself) and *I = its table index part (mantissa bits, shifted by M for
// the row operand). Returns 1 when the operand is "safe": zero, inf, NaN or
// |e - 127| <= 50, so that every product of two safe operands is exact in
// FP32 without the range checks (lutf_product).
template <int PK>
__device__ inline int stage_op(const Job &g, uint32_t x, int row_operand, uint32_t *S, uint32_t *I)
{
    if (PK == PK_F32) {
        *S = x;
        return 1;
    }
    uint32_t q = quant_in(g, x);
    if (PK == PK_SCALAR) {
        *S = q;
        return 1;
    }
    q = mts_fmt_quantize_hd(&g.lutf, q, MTS_RTZ);
    uint32_t e = mts_f32_exp(q), ix = mts_f32_man(q) >> (23 - g.lutf.M);
    *S = mts_f32_isnan(q) ? q : (q & 0xFF800000u);
    // the row operand's index with its own bits XORed in below (PK_LUTF_SMEM):
    // T[a][b] is staged at (a << M) | (a ^ b), so lanes that look up one b
    // for different a fall into different banks (a ^ b = a | b without it)
    *I = row_operand ? (ix << g.lutf.M) | (PK == PK_LUTF_SMEM ? ix : 0) : ix;
    return e == 0 || e == 0xFF || (e >= 127 - 50 && e <= 127 + 50);
}

// The AMSim product of two staged operands of a bf16-like table (E8, bias
// 127, IEEE; entries with no zero flag, adjustment 0..22, mantissa field
// not all ones: lutf_table). AMSim's result is sign, exponent
// (ea-127)+(eb-127)+adj and the entry's mantissa, zero below 2^-126 and
// inf above the FP32 range; here s = sa*sb is that power of two (exact;
// below 2^-149 it is 0, and then so is AMSim's result as adj <= 22; above
// 2^127 it is inf, and so is AMSim's as adj >= 0), and p = s*T' with
// T' = 2^adj * 1.man is exact where the result is a normal FP32 number.
// Zero, inf and NaN operands follow the IEEE rules, which are rule 2's.
// Unchecked (both operands safe), p = s*T' is exact and normal. Checked,
// p is multiplied rounding toward zero: a result below 2^-126 stays below
// (flushed to the signed zero), one at or above 2^128 becomes FLT_MAX, which
// no exact product reaches (T' never has 23 mantissa ones), so it is inf.
// Kernel 3p's operands (plan kernels 15, 16): stage_op's S and I of a
// bf16-like table's operand packed in one word, S | I - S has no mantissa
// bits but a NaN's (which stays a NaN: the product is NaN either way, and
// every NaN result is made canonical where it is stored or quantized), or
// an FP32 subnormal's sign (its index bits then sit below a zero exponent,
// which stage_unpack reads back as the zero S). Formed once per operand
// element by prestage_kernel instead of once per use.
__device__ inline uint32_t stage_pack(const Job &g, uint32_t x)
{
    uint32_t S, I;
    stage_op<PK_LUTF_GLOBAL>(g, x, 0, &S, &I);
    return S | I;
}

// stage_op's results from a packed word w (row_operand and the swizzle as
// stage_op's).
template <int PK>
__device__ inline int stage_unpack(const Job &g, uint32_t w, int row_operand, uint32_t *S, uint32_t *I)
{
    uint32_t e = mts_f32_exp(w), ix = w & ((1u << g.lutf.M) - 1u);
    *S = e == 0xFF && (w & 0x7FFFFFu) ? w : (w & 0xFF800000u);
    *I = row_operand ? (ix << g.lutf.M) | (PK == PK_LUTF_SMEM ? ix : 0) : ix;
    return e == 0 || e == 0xFF || (e >= 127 - 50 && e <= 127 + 50);
}

// An operand of kernel 3 as stage_op forms it: from the raw element, or
// (PRE, bf16-like tables) from its packed word.
template <int PK, bool PRE>
__device__ inline int stage_in(const Job &g, uint32_t x, int row_operand, uint32_t *S, uint32_t *I)
{
    if (PRE && PK >= PK_LUTF_SMEM) return stage_unpack<PK>(g, x, row_operand, S, I);
    return stage_op<PK>(g, x, row_operand, S, I);
}

// Packs rows x k elements of an operand into Y[rows][k]: element (r, kk) of
// op(A) (b_operand 0: X as A, ld, trans) or of op(B)^T (1: X as B), so
// that kernel 3 reads both packed operands along k, coalesced.
__global__ void prestage_kernel(Job g, const float *X, int ld, int trans, int rows, int k, int b_operand,
                                uint32_t *Y)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)rows * (size_t)k) return;
    int r = (int)(t / (size_t)k), kk = (int)(t % (size_t)k);
    uint32_t x = b_operand ? load_raw(X, ld, trans, kk, r, k, rows) : load_raw(X, ld, trans, r, kk, rows, k);
    Y[t] = stage_pack(g, x);
}

template <bool CHECKED>
__device__ inline float lutf_product(const float *T, uint32_t sa, uint32_t ia, uint32_t sb, uint32_t ib)
{
    float s = mts_fm_mul(mts_u2f(sa), mts_u2f(sb));
    float t = T[ia ^ ib];
    if (!CHECKED) return mts_fm_mul(s, t);
    uint32_t u = mts_f2u(__fmul_rz(s, t));
    if ((u & 0x7F800000u) == 0) return mts_u2f(u & MTS_F32_SIGN);
    if ((u & 0x7FFFFFFFu) == 0x7F7FFFFFu) return mts_u2f((u & MTS_F32_SIGN) | MTS_F32_INF);
    return mts_u2f(u);
}

// The 16 products of one k step, accumulated: FP32 sums, or FMAq's chunk
// sums s (the chunk bookkeeping is the caller's: it is the same for every
// output of the thread).
template <int PK, bool FMAQ, bool CHECKED, class S>
__device__ inline void k2_step(const Job &g, const float *T, const uint32_t *a, const uint32_t *ai, const uint32_t *b,
                               const uint32_t *bi, float (&acc)[S::tm][S::tn], uint32_t (&s)[S::tm][S::tn])
{
    for (int r = 0; r < S::tm; r++)
        for (int c = 0; c < S::tn; c++) {
            float p;
            if (PK == PK_F32) p = mts_fm_mul(mts_u2f(a[r]), mts_u2f(b[c]));
            else if (PK == PK_SCALAR) p = mts_u2f(product(g, a[r], b[c]));
            else p = lutf_product<CHECKED>(T, a[r], ai[r], b[c], bi[c]);
            if (!FMAQ) {
                acc[r][c] = mts_fm_add(acc[r][c], p);
            } else {
                // (a NaN's payload may differ from AMSim's: Q_prod makes it canonical)
                s[r][c] = fq_fmaq(g, mts_f2u(p), s[r][c]);
            }
        }
}

template <int PK, bool FMAQ, class S>
__global__ void __launch_bounds__(S::nt) gemm2_kernel(Job g)
{
    __shared__ uint32_t As[S::bk][S::bm], Bs[S::bk][S::bn]; // staged operands (PK_LUTF: sign and power of two)
    // PK_LUTF: table index parts (one row otherwise: no static shared memory
    // the other product kinds do not use, which would cost them occupancy)
    constexpr int IK = PK >= PK_LUTF_SMEM ? S::bk : 1;
    __shared__ uint32_t Ai[IK][S::bm], Bi[IK][S::bn];
    MTS_DYNAMIC_SHARED(float, Ts);              // PK_LUTF_SMEM: the table
    const int tid = threadIdx.x, tx = tid % S::tx, ty = tid / S::tx;
    const int i0 = blockIdx.y * S::bm, j0 = blockIdx.x * S::bn;
    const float *A = batch_ptr(g.A, g.bt, g.bt.a_outer, g.bt.a_inner);
    const float *B = batch_ptr(g.B, g.bt, g.bt.b_outer, g.bt.b_inner);
    float *C = batch_ptr(g.C, g.bt, g.bt.c_outer, g.bt.c_inner);
    const float *T = g.Tf;
    if (PK == PK_LUTF_SMEM) {
        for (int t = tid; t < g.tf_n; t += S::nt) Ts[t ^ (t >> g.lutf.M)] = g.Tf[t]; // swizzled (stage_op)
        T = Ts; // made visible by the first barrier below
    }
    float acc[S::tm][S::tn];
    uint32_t y[S::tm][S::tn], s[S::tm][S::tn];
    for (int r = 0; r < S::tm; r++)
        for (int c = 0; c < S::tn; c++) acc[r][c] = 0.0f, y[r][c] = 0, s[r][c] = 0;
    int inchunk = 0, first = 1;
    for (int k0 = 0; k0 < g.k; k0 += S::bk) {
        int safe = 1;
        for (int t = tid; t < S::bm * S::bk; t += S::nt) { // A: rows i0.., columns k0..
            int row = g.transA ? t % S::bm : t / S::bk, kk = g.transA ? t / S::bm : t % S::bk;
            uint32_t x = load_raw(A, g.lda, g.transA, i0 + row, k0 + kk, g.m, g.k);
            safe &= stage_op<PK>(g, x, 1, &As[kk][row], IK > 1 ? &Ai[kk][row] : nullptr);
        }
        for (int t = tid; t < S::bk * S::bn; t += S::nt) { // B: rows k0.., columns j0..
            int col = g.transB ? t / S::bk : t % S::bn, kk = g.transB ? t % S::bk : t / S::bn;
            uint32_t x = load_raw(B, g.ldb, g.transB, k0 + kk, j0 + col, g.k, g.n);
            safe &= stage_op<PK>(g, x, 0, &Bs[kk][col], IK > 1 ? &Bi[kk][col] : nullptr);
        }
        safe = __syncthreads_and(safe);
        int kend = g.k - k0 < S::bk ? g.k - k0 : S::bk;
        for (int kk = 0; kk < kend; kk++) {
            uint32_t a[S::tm], ai[S::tm], b[S::tn], bi[S::tn];
            for (int r = 0; r < S::tm; r++) a[r] = As[kk][ty + S::ty * r], ai[r] = IK > 1 ? Ai[kk][ty + S::ty * r] : 0;
            for (int c = 0; c < S::tn; c++) b[c] = Bs[kk][tx + S::tx * c], bi[c] = IK > 1 ? Bi[kk][tx + S::tx * c] : 0;
            if (PK >= PK_LUTF_SMEM && !safe) k2_step<PK, FMAQ, true, S>(g, T, a, ai, b, bi, acc, s);
            else k2_step<PK, FMAQ, false, S>(g, T, a, ai, b, bi, acc, s);
            if (FMAQ && ++inchunk == g.chunk) {
                for (int r = 0; r < S::tm; r++)
                    for (int c = 0; c < S::tn; c++) {
                        y[r][c] = first ? s[r][c] : fq_add(g, y[r][c], s[r][c]);
                        s[r][c] = 0;
                    }
                first = 0;
                inchunk = 0;
            }
        }
        __syncthreads();
    }
    for (int r = 0; r < S::tm; r++)
        for (int c = 0; c < S::tn; c++) {
            int i = i0 + ty + S::ty * r, j = j0 + tx + S::tx * c;
            if (i >= g.m || j >= g.n) continue;
            float v = acc[r][c];
            if (FMAQ) v = mts_u2f(inchunk ? (first ? s[r][c] : fq_add(g, y[r][c], s[r][c])) : y[r][c]);
            mts_gemm_store_hd(&C[(size_t)i * g.ldc + j], g.beta, v);
        }
}

// INT: codes quantized on the host (row operand pre-shifted by the table
// width), exact int64 sums of table entries, the zero-point correction and
// one FP64 scale, as sim/gemm/int.c.
__global__ void gemm_int_kernel(int m, int n, int k, const uint32_t *ia, const uint32_t *ib, const int64_t *suma,
                                const int64_t *sumb, const int32_t *T, int32_t za, int32_t zb, double scale,
                                float beta, float *C, int ldc)
{
    int i = blockIdx.y * TILE + threadIdx.y, j = blockIdx.x * TILE + threadIdx.x;
    if (i >= m || j >= n) return;
    const uint32_t *ra = ia + (size_t)i * k, *cb = ib + (size_t)j * k;
    int64_t sab = 0;
    for (int kk = 0; kk < k; kk++) sab += T[ra[kk] | cb[kk]];
    int64_t acc = mts_qdot_correct_hd(sab, suma[i], sumb[j], (int64_t)k, za, zb);
    mts_gemm_store_hd(&C[(size_t)i * ldc + j], beta, mts_qdot_scale_hd(scale, acc));
}

// INT kernel 2: the same sums, 64x64 outputs per block and 4x4 per thread,
// code tiles in shared memory and the table too when its entries fit 16 bits
// (TE int16_t or uint16_t: an 8-bit table is 128 KiB then; TE int32_t reads
// it from global memory). ACC: int32_t when no partial sum can overflow it
// (the host checks k * max|entry|), else int64_t; integer sums in any order
// are the same sum. qa / qw given (the quantization-aware layers of
// gpu/qat.cu, quantizers on the device): the rows' zero point and scale from
// qa, column j's from qw[j], the scale (sa * sb) in FP64 as mts_qgemm's, in
// place of za, zb and scale.
template <typename TE, typename ACC>
__global__ void __launch_bounds__(256) gemm_int2_kernel(int m, int n, int k, const uint32_t *ia, const uint32_t *ib,
                                                        const int64_t *suma, const int64_t *sumb, const int32_t *T,
                                                        int tn, int nbits, int32_t za, int32_t zb, double scale,
                                                        const mts_qparam *qa, const mts_qparam *qw, float beta,
                                                        float *C, int ldc)
{
    __shared__ uint32_t As[BK][BM], Bs[BK][BN];
    MTS_DYNAMIC_SHARED(uint32_t, Tw); // one type per name for nvcc: the table's words, viewed as TE
    TE *Ts = reinterpret_cast<TE *>(Tw);
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
    const bool smem = sizeof(TE) == 2;
    if (smem)
        for (int t = tid; t < tn; t += NT) Ts[t ^ (t >> nbits)] = (TE)T[t]; // swizzled as the codes below
    ACC acc[TM][TN];
    for (int r = 0; r < TM; r++)
        for (int c = 0; c < TN; c++) acc[r][c] = 0;
    // this thread's codes of a k step, read a step ahead (as kernel 3's K3Regs)
    const int LQ = BM * BK / NT;
    uint32_t ra[LQ], rb[LQ];
    auto fetch = [&](int k0) {
        for (int q = 0; q < LQ; q++) { // codes are stored [row][k] for both operands
            int t = tid + q * NT, row = t / BK, kk = t % BK;
            bool in = k0 + kk < k;
            ra[q] = in && i0 + row < m ? ia[(size_t)(i0 + row) * k + k0 + kk] : 0;
            rb[q] = in && j0 + row < n ? ib[(size_t)(j0 + row) * k + k0 + kk] : 0;
        }
    };
    if (k > 0) fetch(0);
    for (int k0 = 0; k0 < k; k0 += BK) {
        for (int q = 0; q < LQ; q++) {
            int t = tid + q * NT, row = t / BK, kk = t % BK;
            As[kk][row] = smem ? ra[q] | (ra[q] >> nbits) : ra[q]; // T[a][b] at (a << n) | (a ^ b) in shared memory
            Bs[kk][row] = rb[q];
        }
        __syncthreads();
        if (k0 + BK < k) fetch(k0 + BK); // in flight while this step sums
        int kend = k - k0 < BK ? k - k0 : BK;
        for (int kk = 0; kk < kend; kk++) {
            uint32_t a[TM], b[TN];
            for (int r = 0; r < TM; r++) a[r] = As[kk][ty + 16 * r];
            for (int c = 0; c < TN; c++) b[c] = Bs[kk][tx + 16 * c];
            for (int r = 0; r < TM; r++)
                for (int c = 0; c < TN; c++) acc[r][c] += smem ? (ACC)Ts[a[r] ^ b[c]] : (ACC)T[a[r] | b[c]];
        }
        __syncthreads();
    }
    for (int r = 0; r < TM; r++)
        for (int c = 0; c < TN; c++) {
            int i = i0 + ty + 16 * r, j = j0 + tx + 16 * c;
            if (i >= m || j >= n) continue;
            int32_t zi = qw ? qa->zp : za, zj = qw ? qw[j].zp : zb;
            double sc = qw ? mts_fm_dmul((double)qa->scale, (double)qw[j].scale) : scale;
            int64_t v = mts_qdot_correct_hd((int64_t)acc[r][c], suma[i], sumb[j], (int64_t)k, zi, zj);
            mts_gemm_store_hd(&C[(size_t)i * ldc + j], beta, mts_qdot_scale_hd(sc, v));
        }
}

// INT: the finite min and max of an operand (rows x cols; element (r, c) at
// X[r*ld + c], or X[c*ld + r] when xt) per block, into part[2*block] and
// part[2*block + 1]; +inf / -inf where a block saw nothing finite. Min and
// max are exact in any order; the host finishes them (gemm_int_dev).
const int RANGE_BLOCKS = 128;
__global__ void int_range_kernel(const float *X, int ld, int xt, int rows, int cols, float *part)
{
    __shared__ float lo_s[NT], hi_s[NT];
    float lo = INFINITY, hi = -INFINITY;
    size_t total = (size_t)rows * cols;
    for (size_t e = (size_t)blockIdx.x * NT + threadIdx.x; e < total; e += (size_t)gridDim.x * NT) {
        size_t r = e / cols, c = e % cols;
        float x = xt ? X[c * ld + r] : X[r * ld + c];
        if (x == x && x != INFINITY && x != -INFINITY) {
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
    }
    lo_s[threadIdx.x] = lo, hi_s[threadIdx.x] = hi;
    __syncthreads();
    for (int h = NT / 2; h > 0; h /= 2) {
        if ((int)threadIdx.x < h) {
            if (lo_s[threadIdx.x + h] < lo_s[threadIdx.x]) lo_s[threadIdx.x] = lo_s[threadIdx.x + h];
            if (hi_s[threadIdx.x + h] > hi_s[threadIdx.x]) hi_s[threadIdx.x] = hi_s[threadIdx.x + h];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) part[2 * blockIdx.x] = lo_s[0], part[2 * blockIdx.x + 1] = hi_s[0];
}

// INT: row r's codes (element (r, kk) as in int_range_kernel) and their
// sum, one block per row: codes[r*k + kk] = (q & mask) << shift (the row
// operand pre-shifted by the table width), sums[r] = the sum of q (exact
// in any order).
__global__ void int_quant_kernel(const float *X, int ld, int xt, int k, mts_affine p, int nbits, int shift,
                                 uint32_t *codes, int64_t *sums)
{
    __shared__ long long red[NT];
    size_t r = blockIdx.x;
    uint32_t mask = (1u << nbits) - 1u;
    long long s = 0;
    for (int kk = threadIdx.x; kk < k; kk += NT) {
        float x = xt ? X[(size_t)kk * ld + r] : X[r * ld + kk];
        int32_t q = mts_affine_quantize_hd(&p, (double)x);
        s += q;
        codes[r * k + kk] = ((uint32_t)q & mask) << shift;
    }
    red[threadIdx.x] = s;
    __syncthreads();
    for (int h = NT / 2; h > 0; h /= 2) {
        if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[r] = red[0];
}

} // namespace

// INT kernel 2 over prepared codes (gemm_int_dev's, or the quantization-aware
// layers' of gpu/qat.cu; launch.h): the entry and sum types from the table's
// range [ti_min, ti_max] and k. Launched on the default stream; the launch's
// own error.
cudaError_t mts_gpu__int2(const int32_t *T, int tn, int nbits, int32_t ti_min, int32_t ti_max, int m, int n, int k,
                          const uint32_t *ua, const uint32_t *ub, const int64_t *sa, const int64_t *sb, int32_t za,
                          int32_t zb, double sc, const mts_qparam *qa, const mts_qparam *qw, float beta, float *C,
                          int ldc)
{
    cudaError_t e = cudaSuccess;
    dim3 grid((unsigned)((n + BN - 1) / BN), (unsigned)((m + BM - 1) / BM));
    int64_t big = -(int64_t)ti_min > ti_max ? -(int64_t)ti_min : ti_max;
    bool wide = big * (int64_t)k > INT32_MAX;
    bool s16 = ti_min >= INT16_MIN && ti_max <= INT16_MAX;
    bool u16 = ti_min >= 0 && ti_max <= UINT16_MAX;
#define MTS_INT2(TE, ACC)                                                                                          \
    do {                                                                                                         \
        size_t smem = sizeof(TE) == 2 ? (size_t)tn * 2 : 0;                                                      \
        if (smem > 0) /* (see launch2) */                                                                        \
            e = cudaFuncSetAttribute(gemm_int2_kernel<TE, ACC>, cudaFuncAttributeMaxDynamicSharedMemorySize,     \
                                     (int)smem);                                                                 \
        if (e == cudaSuccess)                                                                                    \
            MTS_LAUNCH((gemm_int2_kernel<TE, ACC>), grid, dim3(NT), smem, 0)(m, n, k, ua, ub, sa, sb, T, tn, nbits, \
                                                                             za, zb, sc, qa, qw, beta, C, ldc);    \
    } while (0)
    if (s16 && !wide) MTS_INT2(int16_t, int32_t);
    else if (s16) MTS_INT2(int16_t, int64_t);
    else if (u16 && !wide) MTS_INT2(uint16_t, int32_t);
    else if (u16) MTS_INT2(uint16_t, int64_t);
    else if (!wide) MTS_INT2(int32_t, int32_t);
    else MTS_INT2(int32_t, int64_t);
#undef MTS_INT2
    return e;
}

// --------------------------------------------------------------- host

struct mts_gpu_gemm_plan {
    mts_provider p;
    uint32_t *T; // device copy of the float LUT entries, or NULL
    int32_t *Ti; // device copy of the integer table, or NULL
    float *Tf;   // kernel 2's bf16-like table (lutf_table), or NULL
    int kernel;  // mts_gpu_plan_set_kernel: 0 (default) chooses kernel 2's tile by shape
    int32_t ti_min, ti_max; // INT: the table's range (kernel 2's entry and sum types)
    void *ws;               // INT: codes, sums and ranges (gemm_int_dev), grown as needed
    size_t ws_cap;
};

extern "C" {
static int gemm_int_dev(const mts_gpu_gemm_plan *cpl, int transA, int transB, int m, int n, int k, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err);
}

namespace {

// Kernel 2's product table for a float LUT, when its product can be two FP32
// multiplies (lutf_product): format E8, bias 127, IEEE, and every entry
// without the zero flag, with an exponent adjustment in 0..22 and a
// mantissa field that is not all ones. Each entry becomes the float
// 2^adj * 1.man. Returns 0 (and leaves tf empty) when the table does not
// qualify; kernel 2 then uses the scalar product.
int lutf_table(const mts_lut *lut, std::vector<float> &tf)
{
    const mts_format &f = lut->fmt;
    if (f.E != 8 || f.bias != 127 || !f.ieee) return 0;
    tf.resize(lut->n);
    for (size_t i = 0; i < lut->n; i++) {
        uint32_t e = lut->entry[i];
        int adj = mts_lut_adj(e);
        if ((e & MTS_LUT_ZERO) || adj < 0 || adj > 22 || (e & MTS_LUT_MAN) == MTS_LUT_MAN) {
            tf.clear();
            return 0;
        }
        tf[i] = mts_u2f(((uint32_t)(127 + adj) << 23) | (e & MTS_LUT_MAN));
    }
    return 1;
}

// Launches kernel 2 with tile S for job g, once the opt-in shared memory of
// the table is granted.
template <int PK, bool FMAQ, class S> cudaError_t launch2(const Job &g)
{
    dim3 grid((unsigned)((g.n + S::bn - 1) / S::bn), (unsigned)((g.m + S::bm - 1) / S::bm),
              (unsigned)(g.bt.outer * g.bt.inner));
    size_t smem = PK == PK_LUTF_SMEM ? (size_t)g.tf_n * sizeof(float) : 0;
    // granted whenever there is any: the default limit is 48 KiB less the
    // kernel's static shared memory (34 KiB for the 256x16 tile), which the
    // emulation does not model
    if (smem > 0) {
        cudaError_t e = cudaFuncSetAttribute(gemm2_kernel<PK, FMAQ, S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem);
        if (e != cudaSuccess) return e;
    }
    MTS_LAUNCH((gemm2_kernel<PK, FMAQ, S>), grid, dim3(S::nt), smem, 0)(g);
    return cudaGetLastError();
}

// Job g's product kind and FMAq flag as the template arguments of
// L::run<PK, FMAQ>(g), for kernels 2 and 3 alike: FP32 multiplies; a
// bf16-like table as floats, in shared memory when it fits and the block
// has threads enough to stage it (smem_block), else read from global memory;
// the scalar product otherwise.
template <class L> cudaError_t by_product(const Job &g, bool smem_block)
{
    if (g.prod == PROD_F32) return L::template run<PK_F32, false>(g);
    if (g.prod == PROD_LUT && g.Tf) {
        if (g.tf_n <= TF_SMEM_MAX && smem_block)
            return g.fmaq ? L::template run<PK_LUTF_SMEM, true>(g) : L::template run<PK_LUTF_SMEM, false>(g);
        return g.fmaq ? L::template run<PK_LUTF_GLOBAL, true>(g) : L::template run<PK_LUTF_GLOBAL, false>(g);
    }
    return g.fmaq ? L::template run<PK_SCALAR, true>(g) : L::template run<PK_SCALAR, false>(g);
}

template <class S> struct Launch2 {
    template <int PK, bool FMAQ> static cudaError_t run(const Job &g) { return launch2<PK, FMAQ, S>(g); }
};

// Kernel 2 with tile S: the table in shared memory unless S's blocks are too
// small to pay for staging it (Single).
template <class S> cudaError_t launch2_tile(const Job &g) { return by_product<Launch2<S>>(g, S::nt >= 256); }

// Streaming multiprocessors of the current device (the tile choice).
int sm_count()
{
    static int n = 0;
    if (!n) {
        int dev = 0;
        cudaDeviceProp pr;
        if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&pr, dev) == cudaSuccess &&
            pr.multiProcessorCount > 0)
            n = pr.multiProcessorCount;
        else
            n = 1;
    }
    return n;
}

// ------------------------------------------------------------ kernel 3

// Long sums (plan kernels 5 to 12): few outputs, each a sum over a long k -
// a weight gradient's 16 x 144 outputs over k = batch x pixels = 131,072.
// In kernel 2's Single tile the 32 threads that own the sums also stage
// every operand and form every product, one warp per SM with nothing to
// hide its latencies. Here a block owns 8 x 4 outputs (K3Row: BM x 4): warp 0, a lane per
// output, adds the current step's products in k order - the very sequence
// of adds of kernel 1 (FMAq: mts_fmaq_hd split into its Q_prod and its
// accumulate), so the same bits - while the other warps form the next
// step's products into shared memory (for FMAq with Q_prod applied), their
// operands read into registers a step ahead (loads through a generic
// pointer are not moved past the shared-memory stores of the products, so
// a loop of load-then-store waits out one load latency per element). One
// barrier per step. Two layouts of the producers' work:
//   K3Col (plan kernel 5): seven producer warps, 56 k a step; a thread
//          owns one k and one output column: it stages that column's B
//          element and all eight A rows, and forms 8 products (each A
//          element is staged by four threads).
//   K3Row (plan kernels 6, 7, 8: 8, 4 or 2 rows of outputs a block): five
//          producer warps, 160 k a step; a thread owns one k: it stages
//          its A and 4 B elements once and forms all the block's products
//          (with 8 rows a third of K3Col's staging per product - the
//          quantizations of a LUT's operands - and a quarter of its
//          barriers; fewer rows give a weight gradient with few outputs
//          more blocks: ResNet-20's first stage has 72 of 8 x 4 outputs on
//          132 SMs, LeNet-5's first conv 7). Plan kernels 9 and 10: 4 or 2
//          rows with ten producer warps, 320 k a step (on an H100 a LUT's
//          K3Row block forms a step's products 3-4x slower than warp 0
//          adds them, by the 2026-11-27 timings: more warps to hide the
//          table lookups' latency).
// Warp 0's FP32 sums are unrolled 16 deep (nvcc's own choice was 4): the
// loads of 16 products go out before their adds, so the add chain, not a
// shared-memory load's latency every few adds, paces it.
const int L_BM = 8, L_BN = 4;

template <int PK, bool FMAQ>
__device__ inline uint32_t gemm3_product(const Job &g, const float *T, uint32_t sa, uint32_t ia, uint32_t sb,
                                         uint32_t ib, int safe)
{
    float p;
    if (PK == PK_F32) p = mts_fm_mul(mts_u2f(sa), mts_u2f(sb));
    else if (PK == PK_SCALAR) p = mts_u2f(product(g, sa, sb));
    else p = safe ? lutf_product<false>(T, sa, ia, sb, ib) : lutf_product<true>(T, sa, ia, sb, ib);
    return FMAQ ? fq_prod(g, mts_f2u(p)) : mts_f2u(p);
}

struct K3Col {
    // a step's products P[k][lane] (lane = row * 4 + column) at a row stride
    // of 36 words: the producers' writes (8 k x 4 columns a warp) and warp
    // 0's reads (one k, 32 lanes) both fall into 32 different banks
    static const int bm = L_BM, bk = 56, nt = 256, ps = 36;
    struct Regs {
        uint32_t a[L_BM], b;
    };
    // producer p's operands of the step at k0 (k = k0 + p / 4, column p % 4)
    static __device__ inline void fetch(const Job &g, const float *A, const float *B, int i0, int j0, int k0, int p,
                                        Regs &r)
    {
        const int k = k0 + p / L_BN, c = p % L_BN;
        r.b = load_raw(B, g.ldb, g.transB, k, j0 + c, g.k, g.n);
        for (int q = 0; q < L_BM; q++) r.a[q] = load_raw(A, g.lda, g.transA, i0 + q, k, g.m, g.k);
    }
    template <int PK, bool FMAQ>
    static __device__ inline void produce(const Job &g, const Regs &x, const float *T, int k0, int p,
                                          uint32_t (*P)[ps])
    {
        const int kk = p / L_BN, c = p % L_BN;
        if (k0 + kk >= g.k) return; // past the sum's end: warp 0 stops before it
        uint32_t sb, ib = 0;
        int safe_b = stage_op<PK>(g, x.b, 0, &sb, &ib);
        for (int r = 0; r < L_BM; r++) {
            uint32_t sa, ia = 0;
            int safe = stage_op<PK>(g, x.a[r], 1, &sa, &ia) && safe_b;
            P[kk][r * L_BN + c] = gemm3_product<PK, FMAQ>(g, T, sa, ia, sb, ib, safe);
        }
    }
};

template <int BM, int PW = 5, bool PRE = false> struct K3Row {
    // BM x 4 outputs a block (8, 4 or 2 rows: fewer rows, more blocks for
    // the few outputs of a small weight gradient), PW producer warps (5, or
    // 10: more warps to hide the table lookups' latency where a block has
    // an SM to itself, twice the k a step); row stride BM * 4 + 1 (odd): a
    // warp's writes (32 k, one lane's column) fall into 32 banks; warp 0's
    // reads (one k) are consecutive. P: 2 x bk x ps words, at most 43.5 KiB
    // (static shared memory stays under 48 KiB)
    static const int bm = BM, bk = 32 * PW, nt = 32 + 32 * PW, ps = BM * L_BN + 1;
    static_assert(2 * bk * ps * 4 <= 48 * 1024, "kernel 3's product buffers exceed static shared memory");
    struct Regs {
        uint32_t a[BM], b[L_BN];
    };
    // producer p's operands of the step at k0 (k = k0 + p)
    static __device__ inline void fetch(const Job &g, const float *A, const float *B, int i0, int j0, int k0, int p,
                                        Regs &r)
    {
        const int k = k0 + p;
        for (int c = 0; c < L_BN; c++) r.b[c] = load_raw(B, g.ldb, g.transB, k, j0 + c, g.k, g.n);
        for (int q = 0; q < BM; q++) r.a[q] = load_raw(A, g.lda, g.transA, i0 + q, k, g.m, g.k);
    }
    template <int PK, bool FMAQ>
    static __device__ inline void produce(const Job &g, const Regs &x, const float *T, int k0, int p,
                                          uint32_t (*P)[ps])
    {
        if (k0 + p >= g.k) return;
        uint32_t sb[L_BN], ib[L_BN];
        int safe_b[L_BN];
        for (int c = 0; c < L_BN; c++) {
            ib[c] = 0;
            safe_b[c] = stage_in<PK, PRE>(g, x.b[c], 0, &sb[c], &ib[c]);
        }
        for (int r = 0; r < BM; r++) {
            uint32_t sa, ia = 0;
            int safe_a = stage_in<PK, PRE>(g, x.a[r], 1, &sa, &ia);
            for (int c = 0; c < L_BN; c++)
                P[p][r * L_BN + c] = gemm3_product<PK, FMAQ>(g, T, sa, ia, sb[c], ib[c], safe_a && safe_b[c]);
        }
    }
    // FMAq's chunk sums (kernel 3c): producer p accumulates chunk c0 + p of
    // every output of the block - its products in k order, each Q_prod'd,
    // from +0 - into P[p] (the block's BM x 4 sums side by side, a chain each)
    template <int PK>
    static __device__ inline void chunk_sums(const Job &g, const float *A, const float *B, const float *T, int i0,
                                             int j0, int c0, int p, uint32_t (*P)[ps])
    {
        const long long kb = (long long)(c0 + p) * g.chunk; // (a chunk may be as long as an int)
        if (kb >= g.k) return;
        const int ke = g.k - kb < g.chunk ? g.k : (int)kb + g.chunk;
        uint32_t s[BM][L_BN];
        for (int r = 0; r < BM; r++)
            for (int c = 0; c < L_BN; c++) s[r][c] = 0;
        for (int k = (int)kb; k < ke; k++) {
            uint32_t sb[L_BN], ib[L_BN];
            int safe_b[L_BN];
            for (int c = 0; c < L_BN; c++) {
                ib[c] = 0;
                safe_b[c] = stage_op<PK>(g, load_raw(B, g.ldb, g.transB, k, j0 + c, g.k, g.n), 0, &sb[c], &ib[c]);
            }
#if !defined(MTS_GPU_EMU)
#pragma unroll // (s in registers, not a stack frame)
#endif
            for (int r = 0; r < BM; r++) {
                uint32_t sa, ia = 0;
                int safe_a = stage_op<PK>(g, load_raw(A, g.lda, g.transA, i0 + r, k, g.m, g.k), 1, &sa, &ia);
#if !defined(MTS_GPU_EMU)
#pragma unroll
#endif
                for (int c = 0; c < L_BN; c++)
                    s[r][c] = fq_add(g, gemm3_product<PK, true>(g, T, sa, ia, sb[c], ib[c], safe_a && safe_b[c]),
                                     s[r][c]);
            }
        }
        for (int r = 0; r < BM; r++)
            for (int c = 0; c < L_BN; c++) P[p][r * L_BN + c] = s[r][c];
    }
};

// Kernels 3 and 3c: a block's outputs (rows i0.., columns j0..), its
// batch entry's operands, and the table the products read - g's, or
// (PK_LUTF_SMEM) its copy in shared memory Ts, swizzled as stage_op
// indexes it, staged by the block's threads (all of them construct this:
// it holds a barrier).
template <int PK, class L> struct K3Block {
    int i0, j0;
    const float *A, *B, *T;
    float *C;
    __device__ K3Block(const Job &g, float *Ts, int tid)
        : i0(blockIdx.y * L::bm), j0(blockIdx.x * L_BN), A(batch_ptr(g.A, g.bt, g.bt.a_outer, g.bt.a_inner)),
          B(batch_ptr(g.B, g.bt, g.bt.b_outer, g.bt.b_inner)), T(g.Tf),
          C(batch_ptr(g.C, g.bt, g.bt.c_outer, g.bt.c_inner))
    {
        if constexpr (PK == PK_LUTF_SMEM) {
            for (int t = tid; t < g.tf_n; t += L::nt) Ts[t ^ (t >> g.lutf.M)] = g.Tf[t];
            __syncthreads();
            T = Ts;
        }
    }
};

template <int PK, bool FMAQ, class L>
__global__ void __launch_bounds__(L::nt) gemm3_kernel(Job g)
{
    __shared__ uint32_t P[2][L::bk][L::ps]; // products (bits), double-buffered
    MTS_DYNAMIC_SHARED(float, Ts);          // PK_LUTF_SMEM: the table, swizzled as stage_op indexes it
    const int tid = threadIdx.x;
    const K3Block<PK, L> blk(g, Ts, tid); // (blk.T: the table the products read)
    const int steps = (g.k + L::bk - 1) / L::bk;
    typename L::Regs x; // producers: the operands of the next step to be formed
    if (tid >= 32 && steps > 0) {
        L::fetch(g, blk.A, blk.B, blk.i0, blk.j0, 0, tid - 32, x);
        L::template produce<PK, FMAQ>(g, x, blk.T, 0, tid - 32, P[0]);
        if (steps > 1) L::fetch(g, blk.A, blk.B, blk.i0, blk.j0, L::bk, tid - 32, x);
    }
    __syncthreads();
    float acc = 0.0f;
    uint32_t y = 0, s = 0;
    int inchunk = 0, first = 1;
    for (int st = 0; st < steps; st++) {
        if (tid < L::bm * L_BN) { // warp 0: the sums, one lane per output
            const uint32_t(*Q)[L::ps] = P[st & 1];
            int kend = g.k - st * L::bk < L::bk ? g.k - st * L::bk : L::bk;
            if (!FMAQ) { // unrolled 16 deep (see above)
#if !defined(MTS_GPU_EMU) // (a host compiler warns of an unknown pragma)
#pragma unroll 16
#endif
                for (int kk = 0; kk < kend; kk++) acc = mts_fm_add(acc, mts_u2f(Q[kk][tid]));
            } else {
                for (int kk = 0; kk < kend; kk++) {
                    s = fq_add(g, Q[kk][tid], s);
                    if (++inchunk == g.chunk) {
                        y = first ? s : fq_add(g, y, s);
                        first = 0;
                        s = 0;
                        inchunk = 0;
                    }
                }
            }
        } else if (tid >= 32 && st + 1 < steps) {
            L::template produce<PK, FMAQ>(g, x, blk.T, (st + 1) * L::bk, tid - 32, P[(st + 1) & 1]);
            if (st + 2 < steps) // (waits out the barrier)
                L::fetch(g, blk.A, blk.B, blk.i0, blk.j0, (st + 2) * L::bk, tid - 32, x);
        }
        __syncthreads();
    }
    if (tid >= L::bm * L_BN) return; // (warp 0's lanes past the block's outputs: idle)
    int i = blk.i0 + tid / L_BN, j = blk.j0 + tid % L_BN;
    if (i >= g.m || j >= g.n) return;
    float v = acc;
    if (FMAQ) v = mts_u2f(inchunk ? (first ? s : fq_add(g, y, s)) : y);
    mts_gemm_store_hd(&blk.C[(size_t)i * g.ldc + j], g.beta, v);
}

// Kernel 3c, FMAq's long sums (plan kernels 11, 12; K3Row at 4 and 2 rows,
// ten producer warps): the chunk sums of mts_fmaq_dot are independent of
// each other (each starts from +0), so the producers form them, a chunk of
// every block output a thread (L::chunk_sums), and warp 0 only adds them
// up in order, y = Q_acc(y + s): a dependent chain of k / chunk adds
// instead of kernel 3's k + k / chunk, the same operations on the same
// values in the same order, so the same bits. A step is L::bk chunks.
template <int PK, class L>
__global__ void __launch_bounds__(L::nt, 2) gemm3c_kernel(Job g)
{
    __shared__ uint32_t P[2][L::bk][L::ps]; // chunk sums (bits), double-buffered
    MTS_DYNAMIC_SHARED(float, Ts);          // PK_LUTF_SMEM: the table, swizzled as stage_op indexes it
    const int tid = threadIdx.x;
    const K3Block<PK, L> blk(g, Ts, tid); // (blk.T: the table the products read)
    const int chunks = (int)(((long long)g.k + g.chunk - 1) / g.chunk), steps = (chunks + L::bk - 1) / L::bk;
    if (tid >= 32 && steps > 0) L::template chunk_sums<PK>(g, blk.A, blk.B, blk.T, blk.i0, blk.j0, 0, tid - 32, P[0]);
    __syncthreads();
    uint32_t y = 0;
    int first = 1;
    for (int st = 0; st < steps; st++) {
        if (tid < L::bm * L_BN) { // warp 0: the chunk sums' sum, one lane per output
            const uint32_t(*Q)[L::ps] = P[st & 1];
            int cend = chunks - st * L::bk < L::bk ? chunks - st * L::bk : L::bk;
            for (int c = 0; c < cend; c++) {
                y = first ? Q[c][tid] : fq_add(g, y, Q[c][tid]);
                first = 0;
            }
        } else if (tid >= 32 && st + 1 < steps) {
            L::template chunk_sums<PK>(g, blk.A, blk.B, blk.T, blk.i0, blk.j0, (st + 1) * L::bk, tid - 32,
                                       P[(st + 1) & 1]);
        }
        __syncthreads();
    }
    if (tid >= L::bm * L_BN) return;
    int i = blk.i0 + tid / L_BN, j = blk.j0 + tid % L_BN;
    if (i >= g.m || j >= g.n) return;
    mts_gemm_store_hd(&blk.C[(size_t)i * g.ldc + j], g.beta, mts_u2f(y));
}

// Launches kernel (3 or 3c) with layout L for job g (the table's shared
// memory opted in, as launch2).
template <class L> cudaError_t launch3_kernel(void (*kernel)(Job), const Job &g, bool lut_smem)
{
    dim3 grid((unsigned)((g.n + L_BN - 1) / L_BN), (unsigned)((g.m + L::bm - 1) / L::bm),
              (unsigned)(g.bt.outer * g.bt.inner));
    size_t smem = lut_smem ? (size_t)g.tf_n * sizeof(float) : 0;
    if (smem > 0) {
        cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    MTS_LAUNCH(kernel, grid, dim3(L::nt), smem, 0)(g);
    return cudaGetLastError();
}
template <int PK, bool FMAQ, class L> cudaError_t launch3(const Job &g)
{
    return launch3_kernel<L>(gemm3_kernel<PK, FMAQ, L>, g, PK == PK_LUTF_SMEM);
}

template <class L> struct Launch3 {
    template <int PK, bool FMAQ> static cudaError_t run(const Job &g) { return launch3<PK, FMAQ, L>(g); }
};

// Kernel 3c with layout L for an FMAq job; kernel 3 for the others (no
// chunks to split off: one FP32 sum).
template <class L> struct Launch3c {
    template <int PK, bool FMAQ> static cudaError_t run(const Job &g)
    {
        if constexpr (FMAQ) return launch3_kernel<L>(gemm3c_kernel<PK, L>, g, PK == PK_LUTF_SMEM);
        else return launch3<PK, false, L>(g);
    }
};
cudaError_t run_kernel3(const Job &g, int kernel)
{
    if (kernel == 6) return by_product<Launch3<K3Row<8>>>(g, true);
    if (kernel == 7) return by_product<Launch3<K3Row<4>>>(g, true);
    if (kernel == 8) return by_product<Launch3<K3Row<2>>>(g, true);
    if (kernel == 9) return by_product<Launch3<K3Row<4, 10>>>(g, true);
    if (kernel == 10) return by_product<Launch3<K3Row<2, 10>>>(g, true);
    if (kernel == 11) return by_product<Launch3c<K3Row<4, 10>>>(g, true);
    if (kernel == 12) return by_product<Launch3c<K3Row<2, 10>>>(g, true);
    if (kernel == 15) return by_product<Launch3<K3Row<4, 10, true>>>(g, true); // (g's operands packed)
    if (kernel == 16) return by_product<Launch3<K3Row<2, 10, true>>>(g, true);
    return by_product<Launch3<K3Col>>(g, true);
}

// Plan kernel `kernel`: kernel 2 with its tile (2 Wide, 3 Narrow, 4
// Single, 13 Mid, 14 Half), kernel 3 (5 K3Col; 6, 7, 8 K3Row with 8, 4, 2
// rows and five producer warps; 9, 10 K3Row with 4, 2 rows and ten), kernel
// 3c (11, 12: K3Row with 4, 2 rows and ten warps; kernel 3 without FMAq),
// or, for 0, what the shape asks for (pick_kernel).
const int L_LONG_K = 512;

// The layout the default gives a long sum. Without FMAq: K3Row at 4 rows
// where that still fills every SM with a block, else at 2 (the most
// blocks), both with ten producer warps (plan kernels 9, 10). Timed on an
// H100 (weight gradients, tests/gpu-check.sh, a356cd9): ResNet-20's first
// stage (16 x 144, k 131,072; 144 blocks at 4 rows) LUT 2.20 ms with
// kernel 9, 2.98 at 4 rows and five warps (7), 4.42 at 8 (6), 7.08 with
// K3Col (5); NATIVE 0.69 with 9 or 7; LeNet-5's conv1 (6 x 25) LUT 0.41 ms
// with 10, 0.74 with 8 (2 rows, five warps). Of 20 ResNet-20 LUT steps,
// conv backward took 0.77 s with 9 forced, 1.01 with 6/7/8 chosen by shape,
// 0.88 with 10 forced: the LUT products' latency bounds the producers, and
// ten warps hide more of it. With FMAq warp 0's chain of Q_acc adds bounds
// the sum instead, about 490 cycles a k whatever the layout (37 ms at 16 x
// 144, 14.8 at 6 x 25: the same time per k): where the sum has a step of
// chunks or more (320), kernel 3c at 2 rows (12: 7.8 and 1.3 ms; 11, at 4
// rows, 8.3 and 2.2); else (ResNet-20's 64-channel forward convs, k = 576:
// 36 chunks) the five-warp K3Row with the most rows that fills every SM,
// the most lanes of warp 0 adding (6, 7, 8): the ResNet-20 FMAq epoch on
// 5,120 images took 7.07 s with those, 8.79 with 9 and 10, 10.51 with 11
// (each run choosing so for all its long sums, the LUT backward's too).
// MANTIS_GPU_LONG_SUM = 5..12, 15 or 16 forces one layout (timing them
// against each other in whole trainings; 15 and 16, kernel 3 on packed
// operands, are not timed on a GPU yet and not chosen by default).
int long_sum_kernel(const Job &g, long long sms)
{
    static const int forced = [] {
        const char *e = getenv("MANTIS_GPU_LONG_SUM");
        if (!e || !*e || strlen(e) > 2) return 0;
        char *end;
        long v = strtol(e, &end, 10);
        return !*end && ((v >= 5 && v <= 12) || v == 15 || v == 16) ? (int)v : 0;
    }();
    if (forced) return forced;
    const long long cols = (g.n + L_BN - 1) / L_BN;
    auto fills = [&](int rows) { return cols * ((g.m + rows - 1) / rows) >= sms; };
    if (g.fmaq) {
        if (((long long)g.k + g.chunk - 1) / g.chunk >= K3Row<2, 10>::bk) return 12; // a step of chunks or more
        return fills(K3Row<8>::bm) ? 6 : fills(K3Row<4>::bm) ? 7 : 8;
    }
    return fills(K3Row<4, 10>::bm) ? 9 : 10;
}

// MANTIS_GPU_TILES=0 in the environment: the choice without Mid and Half
// (timing the two against each other in whole trainings).
bool tiles_off()
{
    static const bool off = [] {
        const char *e = getenv("MANTIS_GPU_TILES");
        return e && !strcmp(e, "0");
    }();
    return off;
}

// Plan kernel 0's choice for job g: Narrow for n <= 16 and Mid for n <= 32
// with a block per SM, Wide with two, Half with one, else kernel 3 for sums
// of L_LONG_K products or more (long_sum_kernel), Single for shorter ones.
int pick_kernel(const Job &g)
{
    long long sms = sm_count(), wide = (long long)((g.m + 63) / 64) * ((g.n + 63) / 64);
    long long half = (long long)((g.m + 31) / 32) * ((g.n + 63) / 64);
    if (g.n <= 16 && (g.m + 255) / 256 >= sms) return 3;
    if (!tiles_off() && g.n <= 32 && (g.m + 127) / 128 >= sms) return 13;
    if (wide >= 2 * sms) return 2;
    if (!tiles_off() && half >= sms) return 14;
    return g.k >= L_LONG_K ? long_sum_kernel(g, sms) : 4;
}

cudaError_t run_kernel2(const Job &g, int kernel)
{
    if (kernel == 2) return launch2_tile<Wide>(g);
    if (kernel == 3) return launch2_tile<Narrow>(g);
    if (kernel == 13) return launch2_tile<Mid>(g);
    if (kernel == 14) return launch2_tile<Half>(g);
    if (kernel >= 5) return run_kernel3(g, kernel); // (15, 16: with packed operands only)
    return launch2_tile<Single>(g);
}

// MANTIS_GPU_PROFILE (set, not "0"): every device GEMM timed between two
// synchronisations, by shape and kernel (mts_gpu_gemm_profile).
struct ProfRow {
    int m, n, k, ta, tb, batch, kernel, calls;
    double s;
};
std::mutex g_prof_mu;
std::vector<ProfRow> g_prof;
bool gemm_profiling()
{
    static const bool on = [] {
        const char *e = getenv("MANTIS_GPU_PROFILE");
        return e && *e && strcmp(e, "0") != 0;
    }();
    return on;
}
void prof_add(const Job &g, int kernel, double s)
{
    std::lock_guard<std::mutex> lk(g_prof_mu);
    int batch = g.bt.outer * g.bt.inner;
    for (ProfRow &r : g_prof)
        if (r.m == g.m && r.n == g.n && r.k == g.k && r.ta == g.transA && r.tb == g.transB && r.batch == batch &&
            r.kernel == kernel) {
            r.calls++, r.s += s;
            return;
        }
    g_prof.push_back(ProfRow{g.m, g.n, g.k, g.transA, g.transB, batch, kernel, 1, s});
}
double prof_clock()
{
    cudaDeviceSynchronize();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

} // namespace

extern "C" {

int mts_gpu_built(void) { return 1; }

int mts_gpu_probe(mts_gpu_info *info, mts_err *err)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        const char *why = e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none";
        if (under_asan() && access("/dev/nvidiactl", F_OK) == 0) // a driver, but the runtime did not start
            return mts_fail(err, MTS_EUNSUPPORTED,
                            "gpu: no CUDA device usable under AddressSanitizer (%s): a CUDA driver is present, but "
                            "CUDA's runtime does not start in a sanitizer build; test the GPU with a build without "
                            "sanitizers (tests/gpu-check.sh)",
                            why);
        return mts_fail(err, MTS_EUNSUPPORTED, "gpu: no CUDA device (%s)", why);
    }
    if (!info) return MTS_OK;
    int dev = 0;
    cudaDeviceProp pr;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess || (e = cudaGetDeviceProperties(&pr, dev)) != cudaSuccess)
        return cuda_fail(err, e, "device properties");
    std::memset(info, 0, sizeof *info);
    std::snprintf(info->name, sizeof info->name, "%.127s", pr.name);
    info->cc_major = pr.major;
    info->cc_minor = pr.minor;
    info->sm_count = pr.multiProcessorCount;
    info->smem_optin = pr.sharedMemPerBlockOptin;
    info->l2_bytes = (size_t)pr.l2CacheSize;
    if ((e = cudaMemGetInfo(&info->mem_free, &info->mem_total)) != cudaSuccess) return cuda_fail(err, e, "memory info");
    return MTS_OK;
}

int mts_gpu_alloc(void **dptr, size_t bytes, mts_err *err)
{
    *dptr = NULL;
    if (bytes == 0) return MTS_OK;
    int rc = mts_gpu_probe(NULL, err);
    if (rc != MTS_OK) return rc;
    cudaError_t e = cudaMalloc(dptr, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); // clear the sticky-free error state of the runtime
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        *dptr = NULL;
        return mts_fail(err, MTS_ENOMEM, "gpu: out of device memory allocating %zu bytes (%zu of %zu bytes free)",
                        bytes, fr, tot);
    }
    if (e != cudaSuccess) {
        *dptr = NULL;
        return cuda_fail(err, e, "cudaMalloc");
    }
    std::lock_guard<std::mutex> lk(g_mu);
    g_sizes[*dptr] = bytes;
    g_live += bytes;
    if (g_live > g_peak) g_peak = g_live;
    return MTS_OK;
}

void mts_gpu_free(void *dptr)
{
    if (!dptr) return;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        auto it = g_sizes.find(dptr);
        if (it != g_sizes.end()) {
            g_live -= it->second;
            g_sizes.erase(it);
        }
    }
    cudaFree(dptr);
}

size_t mts_gpu_peak_bytes(void)
{
    std::lock_guard<std::mutex> lk(g_mu);
    return g_peak;
}

int mts_gpu_upload(void *dst, const void *src, size_t bytes, mts_err *err)
{
    if (!bytes) return MTS_OK;
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    return e == cudaSuccess ? MTS_OK : cuda_fail(err, e, "upload");
}

int mts_gpu_download(void *dst, const void *src, size_t bytes, mts_err *err)
{
    if (!bytes) return MTS_OK;
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? MTS_OK : cuda_fail(err, e, "download");
}

int mts_gpu_sync(mts_err *err)
{
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? MTS_OK : cuda_fail(err, e, "synchronize");
}

int mts_gpu_plan_open(const mts_provider *p, mts_gpu_gemm_plan **plan, mts_err *err)
{
    *plan = NULL;
    int rc = mts_gpu_supports(p, err);
    if (rc != MTS_OK) return rc;
    if ((rc = mts_gpu_probe(NULL, err)) != MTS_OK) return rc;
    mts_gpu_gemm_plan *pl = (mts_gpu_gemm_plan *)std::calloc(1, sizeof *pl);
    if (!pl) return mts_fail(err, MTS_ENOMEM, "gpu: out of host memory for a GEMM plan");
    pl->p = *p;
    if (p->kind == MTS_PROV_LUT || p->kind == MTS_PROV_INT) {
        size_t bytes = p->lut->n * sizeof(uint32_t);
        void *d = NULL;
        if ((rc = mts_gpu_alloc(&d, bytes, err)) != MTS_OK || (rc = mts_gpu_upload(d, p->lut->entry, bytes, err))) {
            mts_gpu_free(d);
            std::free(pl);
            return rc;
        }
        if (p->kind == MTS_PROV_LUT) pl->T = (uint32_t *)d;
        else pl->Ti = (int32_t *)d;
    }
    if (p->kind == MTS_PROV_INT && p->lut->n) {
        pl->ti_min = pl->ti_max = (int32_t)p->lut->entry[0];
        for (size_t i = 1; i < p->lut->n; i++) {
            int32_t v = (int32_t)p->lut->entry[i];
            pl->ti_min = v < pl->ti_min ? v : pl->ti_min;
            pl->ti_max = v > pl->ti_max ? v : pl->ti_max;
        }
    }
    std::vector<float> tf;
    if (p->kind == MTS_PROV_LUT && lutf_table(p->lut, tf)) {
        void *d = NULL;
        if ((rc = mts_gpu_alloc(&d, tf.size() * sizeof(float), err)) != MTS_OK ||
            (rc = mts_gpu_upload(d, tf.data(), tf.size() * sizeof(float), err)) != MTS_OK) {
            mts_gpu_free(d);
            mts_gpu_plan_close(pl);
            return rc;
        }
        pl->Tf = (float *)d;
    }
    pl->kernel = 0;
    *plan = pl;
    return MTS_OK;
}

void mts_gpu_plan_close(mts_gpu_gemm_plan *plan)
{
    if (!plan) return;
    mts_gpu_free(plan->T);
    mts_gpu_free(plan->Ti);
    mts_gpu_free(plan->Tf);
    mts_gpu_free(plan->ws);
    std::free(plan);
}

int mts_gpu_plan_set_kernel(mts_gpu_gemm_plan *plan, int kernel, mts_err *err)
{
    if (!plan) return mts_fail(err, MTS_EINVAL, "gpu: NULL GEMM plan");
    if (kernel < 0 || kernel > 16) return mts_fail(err, MTS_EINVAL, "gpu: no GEMM kernel %d (0 to 16)", kernel);
    plan->kernel = kernel;
    return MTS_OK;
}

int mts_gpu_gemm_dev(const mts_gpu_gemm_plan *pl, int transA, int transB, int m, int n, int k, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    return mts_gpu_gemm_dev_batched(pl, NULL, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
}

// The arithmetic of plan pl's float provider in a zeroed job: the product
// kind, operand rounding, table and FMAq formats (no shape, no operands).
static void job_arith(const mts_gpu_gemm_plan *pl, Job *g)
{
    std::memset(g, 0, sizeof *g);
    g->fmaq = pl->p.fmaq ? 1 : 0;
    g->chunk = pl->p.chunk > 0 ? pl->p.chunk : 16;
    g->prod = pl->p.kind == MTS_PROV_LUT ? PROD_LUT : (g->fmaq ? PROD_FP32M : PROD_F32);
    if (pl->p.kind == MTS_PROV_LUT) { // operands as mts_gemm_ref quantizes them
        g->quant = 1;
        g->lutf = pl->p.lut->fmt;
        g->qin = pl->p.in_fmt.M == 0 && pl->p.in_fmt.E == 0 ? g->lutf : pl->p.in_fmt;
        g->T = pl->T;
    }
    if (g->fmaq) {
        g->qprod = pl->p.qprod;
        g->qacc = pl->p.qacc;
        g->qrtz = g->qprod.rnd == MTS_RTZ && g->qacc.rnd == MTS_RTZ;
        g->rprod = mts_qrtz_hd(&g->qprod);
        g->racc = mts_qrtz_hd(&g->qacc);
    }
}

// The plan's device workspace (INT's codes and sums, kernel 3p's packed
// operands) at least `need` bytes: grown, never shrunk (its contents are
// per call).
static int plan_ws(const mts_gpu_gemm_plan *cpl, size_t need, mts_err *err)
{
    mts_gpu_gemm_plan *pl = const_cast<mts_gpu_gemm_plan *>(cpl); // its workspace only
    if (need <= pl->ws_cap) return MTS_OK;
    mts_gpu_free(pl->ws);
    pl->ws = NULL;
    pl->ws_cap = 0;
    int rc = mts_gpu_alloc(&pl->ws, need, err);
    if (rc == MTS_OK) pl->ws_cap = need;
    return rc;
}

// Kernel 3p's packing: op(A) into Pa[m][k] and op(B)^T into Pb[n][k]
// (stage_pack) in the plan's workspace, grown as needed; g then reads
// them. MTS_OK, or an allocation's code.
static int prestage(const mts_gpu_gemm_plan *cpl, Job *g, mts_err *err)
{
    size_t na = (size_t)g->m * g->k, nb = (size_t)g->n * g->k;
    int rc = plan_ws(cpl, (na + nb) * 4, err);
    if (rc != MTS_OK) return rc;
    uint32_t *pa = (uint32_t *)cpl->ws, *pb = pa + na;
    if (na)
        MTS_LAUNCH(prestage_kernel, (unsigned)((na + NT - 1) / NT), NT, 0, 0)(*g, g->A, g->lda, g->transA, g->m,
                                                                               g->k, 0, pa);
    if (nb)
        MTS_LAUNCH(prestage_kernel, (unsigned)((nb + NT - 1) / NT), NT, 0, 0)(*g, g->B, g->ldb, g->transB, g->n,
                                                                               g->k, 1, pb);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_fail(err, e, "operand packing kernel");
    g->A = (const float *)pa, g->lda = g->k, g->transA = 0;
    g->B = (const float *)pb, g->ldb = g->k, g->transB = 1;
    return MTS_OK;
}

int mts_gpu_gemm_dev_batched(const mts_gpu_gemm_plan *pl, const mts_gpu_batch *bt, int transA, int transB, int m,
                             int n, int k, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                             int ldc, mts_err *err)
{
    if (!pl) return mts_fail(err, MTS_EINVAL, "gpu: NULL GEMM plan");
    mts_gpu_batch one;
    std::memset(&one, 0, sizeof one);
    one.outer = one.inner = 1;
    if (!bt) bt = &one;
    if (bt->outer < 0 || bt->inner < 0 || (long long)bt->outer * bt->inner > 65535)
        return mts_fail(err, MTS_EINVAL, "gpu gemm: a batch of %d x %d GEMMs (at most 65535 in all)", bt->outer,
                        bt->inner);
    if (m < 0 || n < 0 || k < 0) return mts_fail(err, MTS_EINVAL, "gpu gemm: negative shape %d x %d x %d", m, n, k);
    if (bt->outer == 0 || bt->inner == 0 || m == 0 || n == 0) return MTS_OK;
    if (pl->p.kind == MTS_PROV_INT) { // each GEMM quantized with its own ranges, as mts_gemm_batch: in turn
        int rc = MTS_OK;
        for (int z = 0; z < bt->outer * bt->inner && rc == MTS_OK; z++) {
            size_t zo = (size_t)(z / bt->inner), zi = (size_t)(z % bt->inner);
            rc = gemm_int_dev(pl, transA, transB, m, n, k, A + zo * bt->a_outer + zi * bt->a_inner, lda,
                              B + zo * bt->b_outer + zi * bt->b_inner, ldb, beta,
                              C + zo * bt->c_outer + zi * bt->c_inner, ldc, err);
        }
        return rc;
    }
    Job g;
    job_arith(pl, &g);
    g.m = m, g.n = n, g.k = k, g.transA = transA, g.transB = transB, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
    g.A = A, g.B = B, g.C = C, g.beta = beta;
    g.bt = *bt;
    cudaError_t e;
    const double t0 = gemm_profiling() ? prof_clock() : 0.0;
    int kernel = pl->kernel;
    if (kernel != 1) {
        g.Tf = pl->Tf;
        g.tf_n = pl->Tf ? (int)pl->p.lut->n : 0;
        if (kernel == 0) kernel = pick_kernel(g);
        if (kernel == 15 || kernel == 16) { // kernel 3p: operands packed first (bf16-like tables, one GEMM)
            if (!g.Tf || bt->outer * bt->inner != 1) kernel -= 6; // the same layout (9, 10), operands as they are
            else if (int rc = prestage(pl, &g, err)) return rc;
        }
        e = run_kernel2(g, kernel);
    } else {
        dim3 block(TILE, TILE), grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((m + TILE - 1) / TILE),
                                     (unsigned)(bt->outer * bt->inner));
        MTS_LAUNCH(gemm_kernel, grid, block, 0, 0)(g);
        e = cudaGetLastError();
    }
    if (gemm_profiling() && e == cudaSuccess) prof_add(g, kernel, prof_clock() - t0);
    // no synchronisation: the work is ordered on the default stream; a fault
    // while it runs is reported by the next copy or mts_gpu_sync
    return e == cudaSuccess ? MTS_OK : cuda_fail(err, e, "GEMM kernel");
}

size_t mts_gpu_gemm_profile(char *buf, size_t n)
{
    std::vector<ProfRow> rows;
    {
        std::lock_guard<std::mutex> lk(g_prof_mu);
        rows = g_prof;
    }
    std::sort(rows.begin(), rows.end(), [](const ProfRow &a, const ProfRow &b) { return a.s > b.s; });
    size_t k = 0;
    if (n) buf[0] = 0;
    for (const ProfRow &r : rows) {
        int w = std::snprintf(buf + k, k < n ? n - k : 0, "%s%dx%dx%d%s%s k%d %d calls %.3f s", k ? ", " : "",
                              r.m, r.n, r.k, r.ta || r.tb ? (r.ta ? ":t" : ":n") : "",
                              r.ta || r.tb ? (r.tb ? "t" : "n") : "", r.kernel, r.calls, r.s);
        if (w > 0) k += (size_t)w;
        if (r.batch > 1 && k < n) {
            w = std::snprintf(buf + k, n - k, " (batches of %d)", r.batch);
            if (w > 0) k += (size_t)w;
        }
    }
    return k < n ? k : (n ? n - 1 : 0);
}

int mts_gpu_ste_mask(const mts_gpu_gemm_plan *fwd, int ste, int N, int in, int out, const float *x, const float *w,
                     uint8_t *mask, mts_err *err)
{
    if (!fwd) return mts_fail(err, MTS_EINVAL, "gpu: NULL GEMM plan");
    if (!fwd->p.fmaq || fwd->p.kind == MTS_PROV_INT)
        return mts_fail(err, MTS_EINVAL, "gpu STE mask: the forward provider must be an FMAq float provider");
    if (ste < MTS_STE_HD_REC_OF || ste > MTS_STE_HD_IMM_DIFF)
        return mts_fail(err, MTS_EINVAL, "gpu STE mask: STE %d is not a masked estimator", ste);
    if (N < 0 || in < 0 || out < 0) return mts_fail(err, MTS_EINVAL, "gpu STE mask: negative shape");
    if (!N || !in || !out) return MTS_OK;
    Job g;
    job_arith(fwd, &g);
    size_t threads = (size_t)N * out;
    MTS_LAUNCH(ste_mask_kernel, (unsigned)((threads + 127) / 128), 128, 0, 0)(g, ste, N, in, out, x, w, mask);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? MTS_OK : cuda_fail(err, e, "STE mask kernel");
}

// INT on device pointers, as sim/gemm/int.c (mts_gemm_int_quantize): each
// operand's finite range (int_range_kernel, finished on the host), the
// affine maps from it (mts_affine_from_range, on the host), the codes and
// their row sums on the device (int_quant_kernel, mts_affine_quantize_hd),
// then the table kernel. Workspace in the plan, grown as needed (a plan is
// used by one thread at a time).
static int gemm_int_dev(const mts_gpu_gemm_plan *cpl, int transA, int transB, int m, int n, int k, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    const mts_gpu_gemm_plan *pl = cpl;
    const mts_lut *lut = pl->p.lut;
    int nb = lut->int_bits, rc;
    size_t ca = (size_t)m * k * 4, cb = (size_t)n * k * 4;
    size_t need = ca + cb + ((size_t)m + n) * 8 + 4 * RANGE_BLOCKS * sizeof(float);
    if ((rc = plan_ws(pl, need, err)) != MTS_OK) return rc;
    char *w = (char *)pl->ws;
    int64_t *suma = (int64_t *)w, *sumb = suma + m; // (8-byte aligned first)
    uint32_t *ia = (uint32_t *)(sumb + n), *ib = (uint32_t *)((char *)ia + ca);
    float *part = (float *)((char *)ib + cb);
    // element (r, kk) of op(A) is A[r][kk] or, transposed, A[kk][r]; row j of op(B)^T the reverse
    size_t most = (size_t)(m > n ? m : n) * k;
    int blocks = most / NT + 1 < (size_t)RANGE_BLOCKS ? (int)(most / NT + 1) : RANGE_BLOCKS;
    MTS_LAUNCH(int_range_kernel, blocks, NT, 0, 0)(A, lda, transA, m, k, part);
    MTS_LAUNCH(int_range_kernel, blocks, NT, 0, 0)(B, ldb, !transB, n, k, part + 2 * RANGE_BLOCKS);
    float hp[4 * RANGE_BLOCKS];
    if ((rc = mts_gpu_download(hp, part, sizeof hp, err)) != MTS_OK) return rc; // (waits for the kernels)
    mts_affine pa, pb;
    for (int o = 0; o < 2; o++) {
        float a = INFINITY, b = -INFINITY;
        for (int i = 0; i < blocks; i++) {
            float lo = hp[2 * RANGE_BLOCKS * o + 2 * i], hi = hp[2 * RANGE_BLOCKS * o + 2 * i + 1];
            if (lo < a) a = lo;
            if (hi > b) b = hi;
        }
        double lo = a <= b ? a : 0.0, hi = a <= b ? b : 0.0; // nothing finite: [0, 0] (finite_range)
        if ((rc = mts_affine_from_range(lo, hi, nb, lut->int_signed, o ? &pb : &pa, err)) != MTS_OK) return rc;
    }
    MTS_LAUNCH(int_quant_kernel, m, NT, 0, 0)(A, lda, transA, k, pa, nb, nb, ia, suma);
    MTS_LAUNCH(int_quant_kernel, n, NT, 0, 0)(B, ldb, !transB, k, pb, nb, 0, ib, sumb);
    const uint32_t *ua = ia, *ub = ib;
    const int64_t *sa = suma, *sb = sumb;
    int32_t za = pa.zero_point, zb = pb.zero_point;
    double sc = pa.scale * pb.scale;
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_fail(err, e, "INT quantization kernels");
    if (pl->kernel == 1) { // (INT's kernel 2 has one tile: 64 x 64)
        dim3 block(TILE, TILE), grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((m + TILE - 1) / TILE));
        MTS_LAUNCH(gemm_int_kernel, grid, block, 0, 0)(m, n, k, ua, ub, sa, sb, pl->Ti, za, zb, sc, beta, C, ldc);
    } else {
        e = mts_gpu__int2(pl->Ti, (int)lut->n, nb, pl->ti_min, pl->ti_max, m, n, k, ua, ub, sa, sb, za, zb, sc, nullptr,
                          nullptr, beta, C, ldc);
    }
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? MTS_OK : cuda_fail(err, e, "INT GEMM kernel");
}

} // extern "C"

namespace {

// The host-pointer path's state, kept between calls (a training run calls
// mts_gpu_gemm thousands of times with the same few providers): the plans
// of the last providers seen, each owning a copy of its table (a caller may
// free or rewrite its own: a cached plan is used only when the provider's
// settings and table bytes are equal), and operand buffers that only grow.
struct CachedPlan {
    mts_provider key; // the provider's settings (plan_key)
    mts_lut lut;      // the plan's own copy of the table (entries in `entries`)
    std::vector<uint32_t> entries;
    mts_gpu_gemm_plan *plan = nullptr;
    unsigned long long used = 0;
};
const int PLAN_CACHE = 4;
std::mutex g_host_mu; // one host-pointer GEMM at a time: the buffers are shared
CachedPlan *g_plans[PLAN_CACHE];
unsigned long long g_tick;
void *g_buf[3];
size_t g_cap[3];

// What of a provider a GPU plan depends on besides its table, in a zeroed
// struct (so that equal settings compare equal byte for byte).
mts_provider plan_key(const mts_provider *p)
{
    mts_provider k;
    std::memset(&k, 0, sizeof k);
    k.kind = p->kind;
    k.in_fmt = p->in_fmt;
    k.fmaq = p->fmaq;
    if (p->fmaq) {
        k.qprod = p->qprod;
        k.qacc = p->qacc;
        k.chunk = p->chunk > 0 ? p->chunk : 16;
    }
    return k;
}

bool same_lut(const mts_lut *a, const mts_lut *b)
{
    if (!a || !b) return a == b;
    return a->kind == b->kind && std::memcmp(&a->fmt, &b->fmt, sizeof a->fmt) == 0 && a->int_bits == b->int_bits &&
           a->int_signed == b->int_signed && a->n == b->n &&
           std::memcmp(a->entry, b->entry, a->n * sizeof(uint32_t)) == 0;
}

// The cached plan for p (opened on a miss, the least recently used evicted).
int cached_plan(const mts_provider *p, mts_gpu_gemm_plan **out, mts_err *err)
{
    mts_provider key = plan_key(p);
    const mts_lut *lut = p->kind == MTS_PROV_LUT || p->kind == MTS_PROV_INT ? p->lut : nullptr;
    int slot = 0;
    for (int i = 0; i < PLAN_CACHE; i++) {
        CachedPlan *c = g_plans[i];
        if (c && std::memcmp(&c->key, &key, sizeof key) == 0 && same_lut(lut ? &c->lut : nullptr, lut)) {
            c->used = ++g_tick;
            *out = c->plan;
            return MTS_OK;
        }
        if (!g_plans[slot]) continue;
        if (!c || c->used < g_plans[slot]->used) slot = i;
    }
    CachedPlan *c = new (std::nothrow) CachedPlan;
    if (!c) return mts_fail(err, MTS_ENOMEM, "gpu: out of host memory for a GEMM plan");
    c->key = key;
    mts_provider q = *p;
    if (lut) {
        c->lut = *lut;
        c->entries.assign(lut->entry, lut->entry + lut->n);
        c->lut.entry = c->entries.data();
        q.lut = &c->lut;
    }
    int rc = mts_gpu_plan_open(&q, &c->plan, err);
    if (rc != MTS_OK) {
        delete c;
        return rc;
    }
    if (g_plans[slot]) {
        mts_gpu_plan_close(g_plans[slot]->plan);
        delete g_plans[slot];
    }
    g_plans[slot] = c;
    c->used = ++g_tick;
    *out = c->plan;
    return MTS_OK;
}

int host_gemm(const mts_gpu_gemm_plan *pl, int transA, int transB, int m, int n, int k, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc, mts_err *err);

// Device buffer i of at least bytes (grown, never shrunk).
int host_buffer(int i, size_t bytes, void **d, mts_err *err)
{
    if (bytes > g_cap[i]) {
        mts_gpu_free(g_buf[i]);
        g_buf[i] = nullptr;
        g_cap[i] = 0;
        int rc = mts_gpu_alloc(&g_buf[i], bytes, err);
        if (rc != MTS_OK) return rc;
        g_cap[i] = bytes;
    }
    *d = g_buf[i];
    return MTS_OK;
}

} // namespace

extern "C" {

int mts_gpu_gemm(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    int rc = mts_gpu_supports(p, err);
    if (rc != MTS_OK) return rc;
    if ((rc = mts_gpu_probe(NULL, err)) != MTS_OK) return rc;
    std::lock_guard<std::mutex> lk(g_host_mu);
    mts_gpu_gemm_plan *pl = NULL;
    if ((rc = cached_plan(p, &pl, err)) != MTS_OK) return rc;
    return host_gemm(pl, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
}

} // extern "C"

namespace {

// mts_gpu_gemm with p's plan, under g_host_mu: upload, GEMM, download.
int host_gemm(const mts_gpu_gemm_plan *pl, int transA, int transB, int m, int n, int k, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    int rc;
    if (m == 0 || n == 0) return MTS_OK;
    // the operands' spans in memory, row-major with their leading dimensions
    size_t arows = transA ? (size_t)k : (size_t)m, acols = transA ? (size_t)m : (size_t)k;
    size_t brows = transB ? (size_t)n : (size_t)k, bcols = transB ? (size_t)k : (size_t)n;
    size_t abytes = arows && acols ? ((arows - 1) * (size_t)lda + acols) * 4 : 0;
    size_t bbytes = brows && bcols ? ((brows - 1) * (size_t)ldb + bcols) * 4 : 0;
    size_t cbytes = ((size_t)(m - 1) * ldc + n) * 4;
    void *dA = NULL, *dB = NULL, *dC = NULL;
    if ((rc = host_buffer(0, abytes, &dA, err)) || (rc = host_buffer(1, bbytes, &dB, err)) ||
        (rc = host_buffer(2, cbytes, &dC, err)) || (rc = mts_gpu_upload(dA, A, abytes, err)) ||
        (rc = mts_gpu_upload(dB, B, bbytes, err)) || ((beta != 0.0f || (ldc > n && m > 1)) && (rc = mts_gpu_upload(dC, C, cbytes, err))) ||
        (rc = mts_gpu_gemm_dev(pl, transA, transB, m, n, k, (const float *)dA, lda, (const float *)dB, ldb, beta,
                               (float *)dC, ldc, err)))
        return rc;
    return mts_gpu_download(C, dC, cbytes, err);
}

} // namespace

extern "C" {

int mts_gpu_sgemm_cublas(int m, int n, int k, const float *A, const float *B, float *C, mts_err *err)
{
#if defined(MTS_HAVE_CUBLAS)
    // cuBLAS is loaded on first use: linked, its libraries (hundreds of MB)
    // would be mapped into every mantis process, for a benchmark baseline.
    static void *lib = NULL;
    static decltype(&cublasCreate_v2) create = NULL;
    static decltype(&cublasSetMathMode) set_mode = NULL;
    static decltype(&cublasSgemm_v2) sgemm = NULL;
    static cublasHandle_t h = NULL;
    if (!lib) {
        lib = dlopen(MTS_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!lib) return mts_fail(err, MTS_EUNSUPPORTED, "gpu: cannot load cuBLAS (%s)", dlerror());
        create = (decltype(create))dlsym(lib, "cublasCreate_v2");
        set_mode = (decltype(set_mode))dlsym(lib, "cublasSetMathMode");
        sgemm = (decltype(sgemm))dlsym(lib, "cublasSgemm_v2");
        if (!create || !set_mode || !sgemm) {
            dlclose(lib);
            lib = NULL;
            return mts_fail(err, MTS_EUNSUPPORTED, "gpu: %s lacks cublasCreate_v2/cublasSgemm_v2", MTS_CUBLAS_SONAME);
        }
    }
    if (!h && create(&h) != CUBLAS_STATUS_SUCCESS) return mts_fail(err, MTS_EIO, "gpu: cublasCreate failed");
    set_mode(h, CUBLAS_PEDANTIC_MATH); // FP32, no TF32
    const float one = 1.0f, zero = 0.0f;
    // row-major C = A B is column-major C^T = B^T A^T
    if (sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, n, A, k, &zero, C, n) != CUBLAS_STATUS_SUCCESS)
        return mts_fail(err, MTS_EIO, "gpu: cublasSgemm failed");
    return MTS_OK;
#else
    (void)m, (void)n, (void)k, (void)A, (void)B, (void)C;
    return mts_fail(err, MTS_EUNSUPPORTED, "gpu: built without cuBLAS (the cuBLAS baseline is not available)");
#endif
}

} // extern "C"
