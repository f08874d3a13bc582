// cuda_runtime.h - the CUDA emulation's stand-in for CUDA's header: with
// gpu/emu/ first on the include path, the host C++ compiler builds the
// .cu files of gpu/ unchanged (README.md). Qualifiers, built-in variables,
// the intrinsics Mantis's kernels may use, and the part of the runtime API
// they call; launches come through MTS_LAUNCH (gpu/launch.h). The
// execution model behind it (fibers, barriers, warps, streams, launch
// limits) is emu.cpp's.
//
// __noinline__ is not defined: libstdc++ spells the attribute that way.
// What is deliberately absent, so that using it fails to compile instead of
// giving bits the device would not give: the fast-math intrinsics (__expf,
// __fdividef, ...), textures, cooperative groups, CUDA graphs.
#ifndef MTS_EMU_CUDA_RUNTIME_H
#define MTS_EMU_CUDA_RUNTIME_H

#ifndef __cplusplus
#error "the CUDA emulation is C++ (gpu/emu/README.md)"
#endif

#ifndef MTS_GPU_EMU
#define MTS_GPU_EMU 1
#endif
// Device code paths of the shared headers (hd.h, fmath.h) are the ones
// compiled here, with the intrinsics below.
#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 900
#endif

#include <cfenv>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "emu.h"

// ------------------------------------------------------------ qualifiers

#define __host__
#define __device__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__
#define __managed__
// Block-scope shared memory: one static copy (blocks run one at a time),
// gathered in one section so that each block starts with it poisoned
// (0xFF bytes: NaN floats, -1 integers) as the device leaves it undefined.
#define __shared__ static __attribute__((section("mts_emu_smem")))

// --------------------------------------------------------- vector types

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

namespace mts_emu {
struct BlockInfo {
    uint3 idx;
    dim3 dim, grid;
};
// The running fiber's threadIdx and the running block. Plain globals, not
// thread_local: one kernel runs at a time (the runtime's lock), and GCC's
// UBSan miscompiles the null check of an extern thread_local's address.
extern const uint3 *g_tid;
extern BlockInfo g_block;
} // namespace mts_emu

#define threadIdx (*::mts_emu::g_tid)
#define blockIdx (::mts_emu::g_block.idx)
#define blockDim (::mts_emu::g_block.dim)
#define gridDim (::mts_emu::g_block.grid)
static constexpr int warpSize = 32;

// ------------------------------------------------- execution-model calls

namespace mts_emu {
enum BarrierKind { BAR_SYNC = 0, BAR_COUNT, BAR_AND, BAR_OR };
enum WarpOpKind {
    WOP_SYNC = 0,
    WOP_SHFL_IDX,
    WOP_SHFL_UP,
    WOP_SHFL_DOWN,
    WOP_SHFL_XOR,
    WOP_BALLOT,
    WOP_RED_ADD,
    WOP_RED_MIN,
    WOP_RED_MAX,
    WOP_RED_UMIN,
    WOP_RED_UMAX,
    WOP_RED_AND,
    WOP_RED_OR,
    WOP_RED_XOR,
    WOP_COUNT_
};
// __syncthreads and friends: the fiber waits until every thread of the
// block arrives at the same barrier; the result of the _count/_and/_or forms.
int block_barrier(int kind, int pred, const char *file, int line);
// A warp-level operation of the lanes in mask: each lane contributes value
// (and arg: the source lane, delta or lane mask; width), waits for the
// others, and gets its result.
uint64_t warp_op(int op, unsigned mask, uint64_t value, int arg, int width, const char *file, int line);
// Lets the other threads of the block run (__nanosleep): spin-waits on
// shared memory make progress instead of hanging the emulation.
void yield(const char *file, int line);
// The running block's dynamic shared memory.
void *dynamic_shared_base();
template <class T> T *dynamic_shared() { return static_cast<T *>(dynamic_shared_base()); }
// Reports a device-side fault (a __trap) and ends the launch with it.
[[noreturn]] void trap(const char *file, int line);

template <class T> uint64_t to_bits(T v)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "warp shuffles move 1 to 8 bytes");
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof v);
    return u;
}
template <class T> T from_bits(uint64_t u)
{
    T v;
    std::memcpy(&v, &u, sizeof v);
    return v;
}
} // namespace mts_emu

inline void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    ::mts_emu::block_barrier(::mts_emu::BAR_SYNC, 0, file, line);
}
inline int __syncthreads_count(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return ::mts_emu::block_barrier(::mts_emu::BAR_COUNT, pred, file, line);
}
inline int __syncthreads_and(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return ::mts_emu::block_barrier(::mts_emu::BAR_AND, pred, file, line);
}
inline int __syncthreads_or(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return ::mts_emu::block_barrier(::mts_emu::BAR_OR, pred, file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(),
                       int line = __builtin_LINE())
{
    ::mts_emu::warp_op(::mts_emu::WOP_SYNC, mask, 0, 0, 32, file, line);
}
template <class T>
T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32, const char *file = __builtin_FILE(),
              int line = __builtin_LINE())
{
    using namespace ::mts_emu;
    return from_bits<T>(warp_op(WOP_SHFL_IDX, mask, to_bits(var), srcLane, width, file, line));
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32, const char *file = __builtin_FILE(),
                 int line = __builtin_LINE())
{
    using namespace ::mts_emu;
    return from_bits<T>(warp_op(WOP_SHFL_UP, mask, to_bits(var), (int)delta, width, file, line));
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32, const char *file = __builtin_FILE(),
                   int line = __builtin_LINE())
{
    using namespace ::mts_emu;
    return from_bits<T>(warp_op(WOP_SHFL_DOWN, mask, to_bits(var), (int)delta, width, file, line));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32, const char *file = __builtin_FILE(),
                  int line = __builtin_LINE())
{
    using namespace ::mts_emu;
    return from_bits<T>(warp_op(WOP_SHFL_XOR, mask, to_bits(var), laneMask, width, file, line));
}
inline unsigned __ballot_sync(unsigned mask, int pred, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE())
{
    return (unsigned)::mts_emu::warp_op(::mts_emu::WOP_BALLOT, mask, pred != 0, 0, 32, file, line);
}
inline int __any_sync(unsigned mask, int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return __ballot_sync(mask, pred, file, line) != 0;
}
inline int __all_sync(unsigned mask, int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return (__ballot_sync(mask, pred, file, line) & mask) == mask;
}
#define MTS_EMU_REDUCE(name, T, op)                                                                   \
    inline T name(unsigned mask, T value, const char *file = __builtin_FILE(), int line = __builtin_LINE()) \
    {                                                                                                 \
        return (T)::mts_emu::warp_op(op, mask, (uint64_t)(uint32_t)value, 0, 32, file, line);        \
    }
MTS_EMU_REDUCE(__reduce_add_sync, unsigned, ::mts_emu::WOP_RED_ADD)
MTS_EMU_REDUCE(__reduce_add_sync, int, ::mts_emu::WOP_RED_ADD)
MTS_EMU_REDUCE(__reduce_min_sync, unsigned, ::mts_emu::WOP_RED_UMIN)
MTS_EMU_REDUCE(__reduce_min_sync, int, ::mts_emu::WOP_RED_MIN)
MTS_EMU_REDUCE(__reduce_max_sync, unsigned, ::mts_emu::WOP_RED_UMAX)
MTS_EMU_REDUCE(__reduce_max_sync, int, ::mts_emu::WOP_RED_MAX)
MTS_EMU_REDUCE(__reduce_and_sync, unsigned, ::mts_emu::WOP_RED_AND)
MTS_EMU_REDUCE(__reduce_or_sync, unsigned, ::mts_emu::WOP_RED_OR)
MTS_EMU_REDUCE(__reduce_xor_sync, unsigned, ::mts_emu::WOP_RED_XOR)
#undef MTS_EMU_REDUCE
// The lanes of the caller's warp that have not exited (threads run as
// fibers, so every live lane counts as active: divergence is not modelled).
unsigned __activemask();
inline void __nanosleep(unsigned, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    ::mts_emu::yield(file, line);
}
// One fiber runs at a time: every store is visible to the next reader.
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}
[[noreturn]] inline void __trap(const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    ::mts_emu::trap(file, line);
}
template <class T> T __ldg(const T *p) { return *p; }

// ---------------------------------------------- explicitly rounded FP ops
// On the CPU (SSE, -ffp-contract=off, round to nearest even, denormals
// kept) each is one correctly rounded IEEE operation, as on the device.

// A NaN result is the GPU's 0x7FFFFFFF whatever the operands (an x86 CPU
// keeps an operand's payload and sign): code whose NaN bits would differ
// from the CPU's on a device differs here too.
inline float mts_emu_nan(float x)
{
    if (x == x) return x;
    unsigned u = 0x7FFFFFFFu;
    std::memcpy(&x, &u, 4);
    return x;
}
inline float __fadd_rn(float a, float b) { return mts_emu_nan(a + b); }
inline float __fsub_rn(float a, float b) { return mts_emu_nan(a - b); }
inline float __fmul_rn(float a, float b) { return mts_emu_nan(a * b); }
// toward zero: the exact product (a double holds it) rounded to nearest,
// then one step toward zero where that rounding went away from it
inline float __fmul_rz(float a, float b)
{
    double d = (double)a * (double)b;
    float f = (float)d;
    return mts_emu_nan(std::fabs((double)f) > std::fabs(d) ? std::nextafter(f, 0.0f) : f);
}
// toward zero: the host's own addition in its round-toward-zero mode (a
// different route from the shared headers' TwoSum form, mts_fm_add_rz's host
// branch); volatile keeps the add between the mode switches. The mode is
// per thread, as the emulated blocks are.
inline float __fadd_rz(float a, float b)
{
    volatile float x = a, y = b;
    int old = std::fegetround();
    std::fesetround(FE_TOWARDZERO);
    volatile float s = x + y;
    std::fesetround(old);
    return mts_emu_nan(s);
}
inline double mts_emu_dnan(double x)
{
    if (x == x) return x;
    unsigned long long u = 0x7FFFFFFFFFFFFFFFull;
    std::memcpy(&x, &u, 8);
    return x;
}
inline float __fdiv_rn(float a, float b) { return mts_emu_nan(a / b); }
inline float __fsqrt_rn(float a) { return mts_emu_nan(std::sqrt(a)); }
inline float __frcp_rn(float a) { return mts_emu_nan(1.0f / a); }
inline float __fmaf_rn(float a, float b, float c) { return mts_emu_nan(std::fma(a, b, c)); }
inline double __dadd_rn(double a, double b) { return mts_emu_dnan(a + b); }
inline double __dsub_rn(double a, double b) { return mts_emu_dnan(a - b); }
inline double __dmul_rn(double a, double b) { return mts_emu_dnan(a * b); }
inline double __ddiv_rn(double a, double b) { return mts_emu_dnan(a / b); }
inline double __dsqrt_rn(double a) { return mts_emu_dnan(std::sqrt(a)); }
inline double __fma_rn(double a, double b, double c) { return mts_emu_dnan(std::fma(a, b, c)); }
inline int __float2int_rn(float x) { return (int)std::nearbyint(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline float __int2float_rn(int x) { return (float)x; }
inline float __uint2float_rn(unsigned x) { return (float)x; }
inline float __double2float_rn(double x) { return mts_emu_nan((float)x); }

// ------------------------------------------------------- bit intrinsics

inline float __uint_as_float(unsigned u) { return ::mts_emu::from_bits<float>(u); }
inline unsigned __float_as_uint(float f) { return (unsigned)::mts_emu::to_bits(f); }
inline float __int_as_float(int i) { return ::mts_emu::from_bits<float>((uint32_t)i); }
inline int __float_as_int(float f) { return (int)(uint32_t)::mts_emu::to_bits(f); }
inline double __longlong_as_double(long long i) { return ::mts_emu::from_bits<double>((uint64_t)i); }
inline long long __double_as_longlong(double d) { return (long long)::mts_emu::to_bits(d); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x)
{
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

// Device min/max (CUDA declares them for device code; C++ has only std::).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// -------------------------------------------------------------- atomics
// One fiber runs at a time, so a read-modify-write is atomic as written;
// what the emulation shows is the order dependence: threads reach an
// atomic in the seeded order (a float atomicAdd sum changes with the seed).

#define MTS_EMU_ATOMIC(name, T, expr)           \
    inline T name(T *address, T val)            \
    {                                           \
        T old = *address;                       \
        *address = (expr);                      \
        return old;                             \
    }                                           \
    inline T name##_block(T *address, T val) { return name(address, val); } \
    inline T name##_system(T *address, T val) { return name(address, val); }
MTS_EMU_ATOMIC(atomicAdd, int, old + val)
MTS_EMU_ATOMIC(atomicAdd, unsigned, old + val)
MTS_EMU_ATOMIC(atomicAdd, unsigned long long, old + val)
MTS_EMU_ATOMIC(atomicAdd, float, old + val)
MTS_EMU_ATOMIC(atomicAdd, double, old + val)
MTS_EMU_ATOMIC(atomicSub, int, old - val)
MTS_EMU_ATOMIC(atomicSub, unsigned, old - val)
MTS_EMU_ATOMIC(atomicExch, int, val)
MTS_EMU_ATOMIC(atomicExch, unsigned, val)
MTS_EMU_ATOMIC(atomicExch, unsigned long long, val)
MTS_EMU_ATOMIC(atomicExch, float, val)
MTS_EMU_ATOMIC(atomicMin, int, val < old ? val : old)
MTS_EMU_ATOMIC(atomicMin, unsigned, val < old ? val : old)
MTS_EMU_ATOMIC(atomicMin, long long, val < old ? val : old)
MTS_EMU_ATOMIC(atomicMin, unsigned long long, val < old ? val : old)
MTS_EMU_ATOMIC(atomicMax, int, val > old ? val : old)
MTS_EMU_ATOMIC(atomicMax, unsigned, val > old ? val : old)
MTS_EMU_ATOMIC(atomicMax, long long, val > old ? val : old)
MTS_EMU_ATOMIC(atomicMax, unsigned long long, val > old ? val : old)
MTS_EMU_ATOMIC(atomicAnd, int, old & val)
MTS_EMU_ATOMIC(atomicAnd, unsigned, old & val)
MTS_EMU_ATOMIC(atomicAnd, unsigned long long, old & val)
MTS_EMU_ATOMIC(atomicOr, int, old | val)
MTS_EMU_ATOMIC(atomicOr, unsigned, old | val)
MTS_EMU_ATOMIC(atomicOr, unsigned long long, old | val)
MTS_EMU_ATOMIC(atomicXor, int, old ^ val)
MTS_EMU_ATOMIC(atomicXor, unsigned, old ^ val)
MTS_EMU_ATOMIC(atomicXor, unsigned long long, old ^ val)
MTS_EMU_ATOMIC(atomicInc, unsigned, old >= val ? 0u : old + 1u)
MTS_EMU_ATOMIC(atomicDec, unsigned, (old == 0u || old > val) ? val : old - 1u)
#undef MTS_EMU_ATOMIC
#define MTS_EMU_CAS(T)                                  \
    inline T atomicCAS(T *address, T compare, T val)    \
    {                                                   \
        T old = *address;                               \
        if (old == compare) *address = val;             \
        return old;                                     \
    }                                                   \
    inline T atomicCAS_block(T *address, T compare, T val) { return atomicCAS(address, compare, val); }
MTS_EMU_CAS(int)
MTS_EMU_CAS(unsigned)
MTS_EMU_CAS(unsigned long long)
MTS_EMU_CAS(unsigned short)
#undef MTS_EMU_CAS

// ------------------------------------------------------------ runtime API

enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchTimeout = 702,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9
};

struct CUstream_st;
struct CUevent_st;
typedef CUstream_st *cudaStream_t;
typedef CUevent_st *cudaEvent_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
typedef void (*cudaHostFn_t)(void *userData);

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int major, minor;
    int multiProcessorCount;
    int l2CacheSize;
    int maxThreadsPerMultiProcessor;
    size_t sharedMemPerBlockOptin;
    size_t sharedMemPerMultiprocessor;
    int concurrentKernels;
};

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaMalloc(void **ptr, size_t bytes);
template <class T> cudaError_t cudaMalloc(T **ptr, size_t bytes) { return cudaMalloc((void **)ptr, bytes); }
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemset(void *dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream = 0);
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

namespace mts_emu {
cudaError_t func_set_attribute(const void *fn, cudaFuncAttribute attr, int value);
}
template <class F> cudaError_t cudaFuncSetAttribute(F *fn, cudaFuncAttribute attr, int value)
{
    return ::mts_emu::func_set_attribute((const void *)fn, attr, value);
}
// __constant__ and __device__ variables are host variables here.
template <class T>
cudaError_t cudaMemcpyToSymbol(T &symbol, const void *src, size_t bytes, size_t offset = 0,
                               cudaMemcpyKind kind = cudaMemcpyHostToDevice)
{
    if (offset + bytes > sizeof(T) || (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
                                       kind != cudaMemcpyDefault))
        return cudaErrorInvalidValue;
    std::memcpy(reinterpret_cast<char *>(&symbol) + offset, src, bytes);
    return cudaSuccess;
}
template <class T>
cudaError_t cudaMemcpyFromSymbol(void *dst, const T &symbol, size_t bytes, size_t offset = 0,
                                 cudaMemcpyKind kind = cudaMemcpyDeviceToHost)
{
    if (offset + bytes > sizeof(T) || (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
                                       kind != cudaMemcpyDefault))
        return cudaErrorInvalidValue;
    std::memcpy(dst, reinterpret_cast<const char *>(&symbol) + offset, bytes);
    return cudaSuccess;
}

// ---------------------------------------------------------------- launch

namespace mts_emu {
// A launch, type-erased: run(closure) is one thread's call of the kernel.
struct Launch {
    const void *fn;
    const char *name, *file;
    int line;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    void *closure;
    void (*run)(void *closure);
    void (*destroy)(void *closure);
};
// Checks the configuration as the device does and runs (default stream) or
// queues (other streams) the launch; takes ownership of the closure.
void submit(const Launch &l);

template <class... P> struct Closure {
    void (*fn)(P...);
    std::tuple<typename std::decay<P>::type...> args;
    // each thread gets its own copies of the parameters, as on the device
    static void run(void *c)
    {
        Closure *k = static_cast<Closure *>(c);
        std::apply(k->fn, k->args);
    }
    static void destroy(void *c) { delete static_cast<Closure *>(c); }
};

template <class... P> struct Launcher {
    void (*fn)(P...);
    Launch l;
    template <class... A> void operator()(A &&...a) const
    {
        static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
        Launch x = l;
        // the arguments convert to the parameter types at the launch, by value
        x.closure = new Closure<P...>{fn, std::tuple<typename std::decay<P>::type...>(std::forward<A>(a)...)};
        x.run = &Closure<P...>::run;
        x.destroy = &Closure<P...>::destroy;
        submit(x);
    }
};

template <class... P>
Launcher<P...> launch(void (*fn)(P...), const char *name, const char *file, int line, dim3 grid, dim3 block,
                      size_t smem, cudaStream_t stream)
{
    return Launcher<P...>{fn, Launch{reinterpret_cast<const void *>(fn), name, file, line, grid, block, smem, stream,
                                     nullptr, nullptr, nullptr}};
}
template <class... P>
Launcher<P...> launch(void (*fn)(P...), const char *name, const char *file, int line, dim3 grid, dim3 block,
                      size_t smem, int stream)
{
    return launch(fn, name, file, line, grid, block, smem, (cudaStream_t)(intptr_t)stream);
}
} // namespace mts_emu

#endif
