// gemm.cu - the CUDA GEMM providers (gpu.h): NATIVE, LUT (E8, M <= 11),
// FMAq over NATIVE or LUT products, INT; device buffers and the host API.
//
// Exactness first (docs/gemm.md, "GPU"): one thread per output sums its
// products sequentially in k from +0 (or in mts_fmaq_dot's chunk order),
// every operation explicitly rounded (__fmul_rn/__fadd_rn; the file is built
// with -fmad=false as well), operands quantized with the rule of
// mts_fmt_quantize, products formed by device ports of mts_mul_classify /
// mts_mul_finish (AMSim, the "fp32" model) and of sim/arith/fmaq.c. Each
// device helper below names the CPU function it mirrors; a change there
// must be made here too (tests/test_gpu.cpp compares with mts_gemm_ref).
//
// Speed is not addressed yet: this is the plain 16x16 shared-memory tiled
// kernel with the per-product scalar path; the T[ia][ib] + Pa + Pb fast path
// of the issue and the bank-conflict work are not written.
#include <cuda_runtime.h>
#if defined(MTS_HAVE_CUBLAS)
#include <cublas_v2.h>
#include <dlfcn.h>
#endif

#include <mutex>
#include <unordered_map>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "mantis/gemm.h"
#include "mantis/gpu.h"
#include "mantis/intmul.h"

namespace {

const uint32_t F32_SIGN = 0x80000000u, F32_INF = 0x7F800000u, F32_QNAN = 0x7FC00000u, F32_MAN = 0x007FFFFFu;
const uint32_t LUT_ZERO = 0x00800000u, LUT_MAN = 0x007FFFFFu;
const int TILE = 16;

// ------------------------------------------------------------ errors

int cuda_fail(mts_err *err, cudaError_t e, const char *what)
{
    if (e == cudaErrorMemoryAllocation) return mts_fail(err, MTS_ENOMEM, "gpu: %s: out of device memory", what);
    return mts_fail(err, MTS_EIO, "gpu: %s: %s", what, cudaGetErrorString(e));
}

// live and peak device bytes allocated through mts_gpu_alloc
std::mutex g_mu;
std::unordered_map<void *, size_t> g_sizes;
size_t g_live = 0, g_peak = 0;

// ------------------------------------------------- device arithmetic

__device__ __forceinline__ float u2f(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ uint32_t f2u(float f) { return __float_as_uint(f); }

// mts_fmt_quantize for an E8 IEEE format (bias 127) with M mantissa bits:
// NaN -> QNAN, zero and subnormal -> signed zero, inf kept, RNE or RTZ with
// the carry into the exponent (a carry out of the top binade gives inf).
__device__ uint32_t quantize_e8(uint32_t x, int M, int rne)
{
    uint32_t sign = x & F32_SIGN, e = (x >> 23) & 0xFFu;
    if (e == 0xFFu) return (x & F32_MAN) ? F32_QNAN : x;
    if (e == 0) return sign;
    if (M >= 23) return x;
    int drop = 23 - M;
    uint32_t keep = ~((1u << drop) - 1u);
    if (!rne) return x & keep;
    uint32_t half = (1u << (drop - 1)) - 1u;
    return (x + half + ((x >> drop) & 1u)) & keep;
}

// mts_mul_classify + mts_mul_finish for an E8 IEEE format at M bits, with
// the significand product given by the LUT entry (mts_amsim) ...
// Rules 1 and 2 (mts_mul_classify) at M bits: returns 1 with *special the
// result, or 0 with the sign, exponent sum and the truncated operands.
__device__ int classify_e8(int M, uint32_t a, uint32_t b, uint32_t *special, uint32_t *sign, int *e, uint32_t *qa,
                           uint32_t *qb)
{
    *sign = (a ^ b) & F32_SIGN;
    *qa = quantize_e8(a, M, 0), *qb = quantize_e8(b, M, 0);
    if ((*qa & 0x7FFFFFFFu) > F32_INF || (*qb & 0x7FFFFFFFu) > F32_INF) return *special = F32_QNAN, 1;
    uint32_t ea = (*qa >> 23) & 0xFFu, eb = (*qb >> 23) & 0xFFu;
    int za = ea == 0, zb = eb == 0, ia = ea == 0xFFu, ib = eb == 0xFFu;
    if (ia || ib) return *special = (za || zb) ? F32_QNAN : (*sign | F32_INF), 1;
    if (za || zb) return *special = *sign, 1;
    *e = (int)ea + (int)eb - 254;
    return 0;
}

__device__ uint32_t amsim_e8(const uint32_t *T, int M, uint32_t a, uint32_t b)
{
    uint32_t special, sign, qa, qb;
    int e;
    if (classify_e8(M, a, b, &special, &sign, &e, &qa, &qb)) return special;
    uint32_t ma = (qa & F32_MAN) >> (23 - M), mb = (qb & F32_MAN) >> (23 - M);
    uint32_t entry = T[(ma << M) | mb];
    if (entry & LUT_ZERO) return sign;
    int ex = e + (int)(int8_t)(entry >> 24);
    if (ex < -126) return sign;
    if (ex > 127) return sign | F32_INF;
    return sign | ((uint32_t)(ex + 127) << 23) | (entry & LUT_MAN);
}

// ... or by the exact product rounded to nearest even at 23 bits: the "fp32"
// model (IEEE FP32 multiply with flush-to-zero), FMAq's native products.
__device__ uint32_t fp32_model(uint32_t a, uint32_t b)
{
    uint32_t special, sign, qa, qb;
    int e;
    if (classify_e8(23, a, b, &special, &sign, &e, &qa, &qb)) return special;
    uint64_t sig = (uint64_t)((qa & F32_MAN) | 0x800000u) * (uint64_t)((qb & F32_MAN) | 0x800000u); // F = 46
    int p = 63 - __clzll((long long)sig), shift = p - 46, d = p - 23;
    uint64_t frac = sig >> d, rem = sig & ((1ull << d) - 1ull), half = 1ull << (d - 1);
    if (rem > half || (rem == half && (frac & 1ull))) {
        frac++;
        if (frac >> 24) {
            frac >>= 1;
            shift++;
        }
    }
    int ex = e + shift;
    if (ex < -126) return sign;
    if (ex > 127) return sign | F32_INF;
    return sign | ((uint32_t)(ex + 127) << 23) | ((uint32_t)frac & F32_MAN);
}

// ------------------------------------ FMAq: sim/arith/fmaq.c on the device

struct qf {
    int M, E, bias, underflow, rne;
};

__device__ int qemax(const qf &q) { return (1 << q.E) - 1 - q.bias; }
__device__ int qemin(const qf &q) { return q.underflow ? -q.bias : -126; }
__device__ uint32_t qpack(uint32_t sign, int e, uint32_t frac, int M)
{
    return sign | ((uint32_t)(e + 127) << 23) | (frac << (23 - M));
}
__device__ uint32_t rof_bits(const qf &q) { return qpack(0, qemax(q), (1u << q.M) - 1u, q.M); }

// fmaq.c quantize()
__device__ uint32_t q_quantize(const qf &q, uint32_t sign, uint64_t mag, int ue)
{
    int nb = 64 - __clzll((long long)mag);
    int e = ue + nb - 1, keep = q.M + 1;
    uint64_t sig;
    if (e < qemin(q)) return sign;
    if (nb > keep) {
        int sh = nb - keep;
        uint64_t rem = mag & ((1ull << sh) - 1u);
        sig = mag >> sh;
        if (q.rne) {
            uint64_t half = 1ull << (sh - 1);
            if (rem > half || (rem == half && (sig & 1u))) sig++;
            if (sig >> keep) {
                sig >>= 1;
                e++;
            }
        }
    } else {
        sig = mag << (keep - nb);
    }
    if (e > qemax(q)) return sign | rof_bits(q);
    return qpack(sign, e, (uint32_t)sig & ((1u << q.M) - 1u), q.M);
}

__device__ bool f_isnan(uint32_t x) { return (x & 0x7FFFFFFFu) > F32_INF; }
__device__ bool f_isinf(uint32_t x) { return (x & 0x7FFFFFFFu) == F32_INF; }
__device__ bool zero_or_sub(uint32_t x) { return ((x >> 23) & 0xFFu) == 0; }

// mts_q
__device__ uint32_t q_of(const qf &q, uint32_t x)
{
    if (f_isnan(x)) return F32_QNAN;
    if (f_isinf(x)) return (x & F32_SIGN) | rof_bits(q);
    if (zero_or_sub(x)) return x & F32_SIGN;
    return q_quantize(q, x & F32_SIGN, (uint64_t)((x & F32_MAN) | 0x800000u), (int)((x >> 23) & 0xFFu) - 150);
}

// fmaq.c exact_sum() (CLAMP 33)
__device__ uint32_t q_exact_sum(const qf &q, uint32_t a, uint32_t b)
{
    uint32_t xs = a & F32_SIGN, ys = b & F32_SIGN;
    uint64_t xm = (a & F32_MAN) | 0x800000u, ym = (b & F32_MAN) | 0x800000u;
    int xe = (int)((a >> 23) & 0xFFu) - 150, ye = (int)((b >> 23) & 0xFFu) - 150;
    int sw = xe < ye;
    uint32_t sa_sign = sw ? ys : xs, sb_sign = sw ? xs : ys;
    uint64_t sa = sw ? ym : xm, sb = sw ? xm : ym;
    int ea = sw ? ye : xe, eb = sw ? xe : ye;
    int d = ea - eb;
    if (d > 33) {
        sb = 1;
        eb = ea - 33;
        d = 33;
    }
    int64_t ma = -(int64_t)(sa_sign >> 31), mb = -(int64_t)(sb_sign >> 31);
    int64_t sum = (((int64_t)(sa << d)) ^ ma) - ma + ((((int64_t)sb) ^ mb) - mb);
    if (sum == 0) return 0;
    int64_t ms = -(int64_t)((uint64_t)sum >> 63);
    return q_quantize(q, (uint32_t)ms & F32_SIGN, (uint64_t)((sum ^ ms) - ms), eb);
}

// mts_qadd
__device__ uint32_t q_add(const qf &q, uint32_t a, uint32_t b)
{
    if (f_isnan(a) || f_isnan(b)) return F32_QNAN;
    if (f_isinf(a) || f_isinf(b)) {
        if (f_isinf(a) && f_isinf(b) && ((a ^ b) & F32_SIGN)) return F32_QNAN;
        return q_of(q, f_isinf(a) ? a : b);
    }
    bool za = zero_or_sub(a), zb = zero_or_sub(b);
    if (za && zb) return a & b & F32_SIGN;
    if (za) return q_of(q, b);
    if (zb) return q_of(q, a);
    return q_exact_sum(q, a, b);
}

// ------------------------------------------------------------ kernels

enum Prod { PROD_F32 = 0, PROD_FP32M = 1, PROD_LUT = 2 };

struct Job {
    int m, n, k, transA, transB, lda, ldb, ldc;
    const float *A, *B;
    float *C;
    float beta;
    int prod, fmaq, chunk;
    int qin_M;        // LUT: operand format's M (RNE); 23 or more: no quantization
    int lut_M;        // LUT: table format's M (AMSim truncates to it)
    const uint32_t *T; // LUT entries on the device
    qf qprod, qacc;
};

__device__ uint32_t load_op(const float *X, int ld, int trans, int r, int c, int rows, int cols, int qM)
{
    if (r >= rows || c >= cols) return 0;
    uint32_t x = f2u(trans ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c]);
    return qM < 23 ? quantize_e8(x, qM, 1) : x;
}

// gemm_store: beta 0 -> y; beta 1 -> C + y; else beta*C + y; NaN canonical.
__device__ void store(float *c, float beta, float y)
{
    float v = beta == 0.0f ? y : __fadd_rn(beta == 1.0f ? *c : __fmul_rn(beta, *c), y);
    if (v != v) v = u2f(F32_QNAN);
    *c = v;
}

__device__ uint32_t product(const Job &g, uint32_t a, uint32_t b)
{
    if (g.prod == PROD_LUT) return amsim_e8(g.T, g.lut_M, a, b);
    if (g.prod == PROD_FP32M) return fp32_model(a, b);
    return f2u(__fmul_rn(u2f(a), u2f(b)));
}

// One thread per output C[i][j], a 16x16 block of outputs per thread block;
// operand tiles (quantized as they are read) in shared memory. The sum runs
// in k order in every thread: plain FP32 (acc = acc + p from +0) or FMAq's
// chunks (s = FMAq(p, s) from +0 per chunk, then y = Qacc(y + s)).
__global__ void gemm_kernel(Job g)
{
    __shared__ uint32_t As[TILE][TILE + 1], Bs[TILE][TILE + 1];
    int i = blockIdx.y * TILE + threadIdx.y, j = blockIdx.x * TILE + threadIdx.x;
    int qM = g.prod == PROD_LUT ? g.qin_M : 23;
    float acc = 0.0f;
    uint32_t y = 0, s = 0;
    int inchunk = 0, first = 1;
    for (int k0 = 0; k0 < g.k; k0 += TILE) {
        As[threadIdx.y][threadIdx.x] = load_op(g.A, g.lda, g.transA, i, k0 + threadIdx.x, g.m, g.k, qM);
        Bs[threadIdx.y][threadIdx.x] = load_op(g.B, g.ldb, g.transB, k0 + threadIdx.y, j, g.k, g.n, qM);
        __syncthreads();
        int kend = g.k - k0 < TILE ? g.k - k0 : TILE;
        for (int kk = 0; kk < kend; kk++) {
            uint32_t p = product(g, As[threadIdx.y][kk], Bs[kk][threadIdx.x]);
            if (!g.fmaq) {
                acc = __fadd_rn(acc, u2f(p));
            } else {
                s = q_add(g.qacc, q_of(g.qprod, p), s);
                if (++inchunk == g.chunk) {
                    y = first ? s : q_add(g.qacc, y, s);
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
        if (inchunk) y = first ? s : q_add(g.qacc, y, s);
        acc = u2f(y);
    }
    store(&g.C[(size_t)i * g.ldc + j], g.beta, acc);
}

// INT: codes quantized on the host (row operand pre-shifted by the table
// width), exact int64 sums of table entries, zero-point correction
// (mts_qdot_correct) and one double scale, as sim/gemm/int.c.
__global__ void gemm_int_kernel(int m, int n, int k, const uint32_t *ia, const uint32_t *ib, const int64_t *suma,
                                const int64_t *sumb, const int32_t *T, int32_t za, int32_t zb, double scale,
                                float beta, float *C, int ldc)
{
    int i = blockIdx.y * TILE + threadIdx.y, j = blockIdx.x * TILE + threadIdx.x;
    if (i >= m || j >= n) return;
    const uint32_t *ra = ia + (size_t)i * k, *cb = ib + (size_t)j * k;
    int64_t sab = 0;
    for (int kk = 0; kk < k; kk++) sab += T[ra[kk] | cb[kk]];
    int64_t acc = sab - (int64_t)zb * suma[i] - (int64_t)za * sumb[j] + (int64_t)k * za * zb;
    store(&C[(size_t)i * ldc + j], beta, (float)__dmul_rn(scale, (double)acc));
}

} // namespace

// --------------------------------------------------------------- host

struct mts_gpu_gemm_plan {
    mts_provider p;
    uint32_t *T;    // device copy of the float LUT entries, or NULL
    int32_t *Ti;    // device copy of the integer table, or NULL
    int qin_M, lut_M;
};

extern "C" {

int mts_gpu_built(void) { return 1; }

int mts_gpu_probe(mts_gpu_info *info, mts_err *err)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return mts_fail(err, MTS_EUNSUPPORTED, "gpu: no CUDA device (%s)",
                        e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
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
    pl->qin_M = 23;
    pl->lut_M = 23;
    if (p->kind == MTS_PROV_LUT) {
        pl->lut_M = p->lut->fmt.M;
        pl->qin_M = p->in_fmt.M == 0 && p->in_fmt.E == 0 ? p->lut->fmt.M : p->in_fmt.M;
    }
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
    *plan = pl;
    return MTS_OK;
}

void mts_gpu_plan_close(mts_gpu_gemm_plan *plan)
{
    if (!plan) return;
    mts_gpu_free(plan->T);
    mts_gpu_free(plan->Ti);
    std::free(plan);
}

static qf to_qf(const mts_qfmt &q)
{
    qf r;
    r.M = q.M;
    r.E = q.E;
    r.bias = q.bias;
    r.underflow = q.underflow;
    r.rne = q.rnd == MTS_RNE;
    return r;
}

int mts_gpu_gemm_dev(const mts_gpu_gemm_plan *pl, int transA, int transB, int m, int n, int k, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    if (!pl) return mts_fail(err, MTS_EINVAL, "gpu: NULL GEMM plan");
    if (pl->p.kind == MTS_PROV_INT)
        return mts_fail(err, MTS_EUNSUPPORTED,
                        "gpu: the INT provider runs through mts_gpu_gemm (host pointers) only: its per-call "
                        "quantization ranges are computed on the host");
    if (m < 0 || n < 0 || k < 0) return mts_fail(err, MTS_EINVAL, "gpu gemm: negative shape %d x %d x %d", m, n, k);
    if (m == 0 || n == 0) return MTS_OK;
    Job g;
    std::memset(&g, 0, sizeof g);
    g.m = m, g.n = n, g.k = k, g.transA = transA, g.transB = transB, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
    g.A = A, g.B = B, g.C = C, g.beta = beta;
    g.fmaq = pl->p.fmaq ? 1 : 0;
    g.chunk = pl->p.chunk > 0 ? pl->p.chunk : 16;
    g.prod = pl->p.kind == MTS_PROV_LUT ? PROD_LUT : (g.fmaq ? PROD_FP32M : PROD_F32);
    g.qin_M = pl->qin_M;
    g.lut_M = pl->lut_M;
    g.T = pl->T;
    if (g.fmaq) {
        g.qprod = to_qf(pl->p.qprod);
        g.qacc = to_qf(pl->p.qacc);
    }
    dim3 block(TILE, TILE), grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((m + TILE - 1) / TILE));
    gemm_kernel<<<grid, block>>>(g);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    return e == cudaSuccess ? MTS_OK : cuda_fail(err, e, "GEMM kernel");
}

// Host-side INT quantization as sim/gemm/int.c, then the table kernel.
static int gemm_int_host(const mts_gpu_gemm_plan *pl, int transA, int transB, int m, int n, int k, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    const mts_lut *lut = pl->p.lut;
    mts_affine pa, pb;
    int rc;
    std::vector<uint32_t> ia((size_t)m * k), ib((size_t)n * k);
    std::vector<int64_t> suma(m), sumb(n);
    // the CPU provider's own quantizer: the same codes, sums and maps
    if ((rc = mts_gemm_int_quantize(lut->int_bits, lut->int_signed, 1, transA, transB, m, n, k, A, lda, B, ldb,
                                    ia.data(), ib.data(), suma.data(), sumb.data(), &pa, &pb, err)) != MTS_OK)
        return rc;
    void *dia = NULL, *dib = NULL, *dsa = NULL, *dsb = NULL, *dC = NULL;
    size_t cbytes = ((size_t)(m - 1) * ldc + n) * sizeof(float);
    if ((rc = mts_gpu_alloc(&dia, ia.size() * 4, err)) || (rc = mts_gpu_alloc(&dib, ib.size() * 4, err)) ||
        (rc = mts_gpu_alloc(&dsa, (size_t)m * 8, err)) || (rc = mts_gpu_alloc(&dsb, (size_t)n * 8, err)) ||
        (rc = mts_gpu_alloc(&dC, cbytes, err)) || (rc = mts_gpu_upload(dia, ia.data(), ia.size() * 4, err)) ||
        (rc = mts_gpu_upload(dib, ib.data(), ib.size() * 4, err)) ||
        (rc = mts_gpu_upload(dsa, suma.data(), (size_t)m * 8, err)) ||
        (rc = mts_gpu_upload(dsb, sumb.data(), (size_t)n * 8, err)) ||
        (beta != 0.0f && (rc = mts_gpu_upload(dC, C, cbytes, err))))
        goto done;
    {
        dim3 block(TILE, TILE), grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((m + TILE - 1) / TILE));
        gemm_int_kernel<<<grid, block>>>(m, n, k, (const uint32_t *)dia, (const uint32_t *)dib,
                                         (const int64_t *)dsa, (const int64_t *)dsb, pl->Ti, pa.zero_point,
                                         pb.zero_point, pa.scale * pb.scale, beta, (float *)dC, ldc);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e != cudaSuccess) rc = cuda_fail(err, e, "INT GEMM kernel");
        else rc = mts_gpu_download(C, dC, cbytes, err);
    }
done:
    mts_gpu_free(dia);
    mts_gpu_free(dib);
    mts_gpu_free(dsa);
    mts_gpu_free(dsb);
    mts_gpu_free(dC);
    return rc;
}

int mts_gpu_gemm(const mts_provider *p, int transA, int transB, int m, int n, int k, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc, mts_err *err)
{
    mts_gpu_gemm_plan *pl = NULL;
    int rc = mts_gpu_plan_open(p, &pl, err);
    if (rc != MTS_OK) return rc;
    if (m == 0 || n == 0) {
        mts_gpu_plan_close(pl);
        return MTS_OK;
    }
    if (p->kind == MTS_PROV_INT) {
        rc = gemm_int_host(pl, transA, transB, m, n, k, A, lda, B, ldb, beta, C, ldc, err);
        mts_gpu_plan_close(pl);
        return rc;
    }
    // the operands' spans in memory, row-major with their leading dimensions
    size_t arows = transA ? (size_t)k : (size_t)m, acols = transA ? (size_t)m : (size_t)k;
    size_t brows = transB ? (size_t)n : (size_t)k, bcols = transB ? (size_t)k : (size_t)n;
    size_t abytes = arows && acols ? ((arows - 1) * (size_t)lda + acols) * 4 : 0;
    size_t bbytes = brows && bcols ? ((brows - 1) * (size_t)ldb + bcols) * 4 : 0;
    size_t cbytes = ((size_t)(m - 1) * ldc + n) * 4;
    void *dA = NULL, *dB = NULL, *dC = NULL;
    if ((rc = mts_gpu_alloc(&dA, abytes, err)) || (rc = mts_gpu_alloc(&dB, bbytes, err)) ||
        (rc = mts_gpu_alloc(&dC, cbytes, err)) || (rc = mts_gpu_upload(dA, A, abytes, err)) ||
        (rc = mts_gpu_upload(dB, B, bbytes, err)) || (beta != 0.0f && (rc = mts_gpu_upload(dC, C, cbytes, err))) ||
        (rc = mts_gpu_gemm_dev(pl, transA, transB, m, n, k, (const float *)dA, lda, (const float *)dB, ldb, beta,
                               (float *)dC, ldc, err)))
        goto done;
    rc = mts_gpu_download(C, dC, cbytes, err);
done:
    mts_gpu_free(dA);
    mts_gpu_free(dB);
    mts_gpu_free(dC);
    mts_gpu_plan_close(pl);
    return rc;
}

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
