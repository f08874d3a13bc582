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
// Speed is not addressed yet: this is the plain 16x16 shared-memory tiled
// kernel with the per-product scalar path; the T[ia][ib] + Pa + Pb fast path
// and the bank-conflict work are not written.
#include <cuda_runtime.h>
#if defined(MTS_HAVE_CUBLAS)
#include <cublas_v2.h>
#endif
#include <dlfcn.h>

#include <unistd.h>

#include <mutex>
#include <unordered_map>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "launch.h"
#include "mantis/arith_hd.h"
#include "mantis/gemm.h"
#include "mantis/gpu.h"
#include "mantis/intmul.h"

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
};

__device__ uint32_t load_op(const Job &g, const float *X, int ld, int trans, int r, int c, int rows, int cols)
{
    if (r >= rows || c >= cols) return 0;
    uint32_t x = mts_f2u(trans ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c]);
    return g.quant ? mts_fmt_quantize_hd(&g.qin, x, MTS_RNE) : x;
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
    float acc = 0.0f;
    uint32_t y = 0, s = 0;
    int inchunk = 0, first = 1;
    for (int k0 = 0; k0 < g.k; k0 += TILE) {
        As[threadIdx.y][threadIdx.x] = load_op(g, g.A, g.lda, g.transA, i, k0 + threadIdx.x, g.m, g.k);
        Bs[threadIdx.y][threadIdx.x] = load_op(g, g.B, g.ldb, g.transB, k0 + threadIdx.y, j, g.k, g.n);
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
    mts_gemm_store_hd(&g.C[(size_t)i * g.ldc + j], g.beta, acc);
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

} // namespace

// --------------------------------------------------------------- host

struct mts_gpu_gemm_plan {
    mts_provider p;
    uint32_t *T; // device copy of the float LUT entries, or NULL
    int32_t *Ti; // device copy of the integer table, or NULL
};

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
    if (pl->p.kind == MTS_PROV_LUT) { // operands as mts_gemm_ref quantizes them
        g.quant = 1;
        g.lutf = pl->p.lut->fmt;
        g.qin = pl->p.in_fmt.M == 0 && pl->p.in_fmt.E == 0 ? g.lutf : pl->p.in_fmt;
        g.T = pl->T;
    }
    if (g.fmaq) {
        g.qprod = pl->p.qprod;
        g.qacc = pl->p.qacc;
    }
    dim3 block(TILE, TILE), grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((m + TILE - 1) / TILE));
    MTS_LAUNCH(gemm_kernel, grid, block, 0, 0)(g);
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
        MTS_LAUNCH(gemm_int_kernel, grid, block, 0, 0)(m, n, k, (const uint32_t *)dia, (const uint32_t *)dib,
                                                       (const int64_t *)dsa, (const int64_t *)dsb, pl->Ti,
                                                       pa.zero_point, pb.zero_point, pa.scale * pb.scale, beta,
                                                       (float *)dC, ldc);
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
