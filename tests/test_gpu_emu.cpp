// test_gpu_emu.cpp - the CUDA emulation's own tests (gpu/emu/README.md),
// linked only into test_gpu_emu (with test_gpu.cpp's tests). The kernels
// here are CUDA compiled by the host compiler through the emulation's
// cuda_runtime.h; several are broken on purpose (a barrier removed, a race
// on shared memory, a missing stream dependency, divergent barriers), and
// each test asserts that the emulation shows it: a wrong result for some
// seed, or a fault naming the line. The correct twin of each gives the same
// bits for every seed.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "emu.h"
#include "launch.h"

namespace {

const uint64_t kSeeds = 8; // seeds 1..kSeeds: enough to show each race below

// Every test leaves the emulation as it found it: the seed restored, the
// device reset (allocations, streams, a fault).
class Emu : public ::testing::Test {
  protected:
    uint64_t saved_ = mts_emu::get_seed();
    void TearDown() override
    {
        mts_emu::set_seed(saved_);
        mts_emu::reset();
    }
};

// A device buffer, freed at scope exit.
template <class T> struct Buf {
    T *d = nullptr;
    size_t n;
    explicit Buf(size_t count, const T *init = nullptr) : n(count)
    {
        EXPECT_EQ(cudaMalloc(&d, n * sizeof(T)), cudaSuccess);
        if (init) {
            EXPECT_EQ(cudaMemcpy(d, init, n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
        }
    }
    ~Buf() { cudaFree(d); }
    std::vector<T> get() const
    {
        std::vector<T> h(n);
        EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
        return h;
    }
};

cudaError_t sync_error()
{
    cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

// ------------------------------------------------- barriers and races

// Block sums of 256 values: the shared-memory tree reduction, with the
// barrier in its loop (Sync) or without it.
template <bool Sync> __global__ void block_sum(const float *x, float *out)
{
    __shared__ float s[256];
    unsigned t = threadIdx.x;
    s[t] = x[blockIdx.x * 256 + t];
    __syncthreads();
    for (unsigned h = 128; h > 0; h >>= 1) {
        if (t < h) s[t] += s[t + h];
        if (Sync) __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// The sums of blocks of 256 small integers for `seed` (exact in FP32 in any
// order: a correct kernel gives these bits for every seed).
std::vector<float> run_block_sum(bool sync, uint64_t seed, std::vector<float> *want)
{
    const int blocks = 3;
    std::vector<float> x(blocks * 256);
    want->assign(blocks, 0.0f);
    for (size_t i = 0; i < x.size(); i++) {
        x[i] = (float)((i * 7) % 13);
        (*want)[i / 256] += x[i];
    }
    mts_emu::set_seed(seed);
    Buf<float> dx(x.size(), x.data()), dout(blocks);
    if (sync) MTS_LAUNCH(block_sum<true>, blocks, 256, 0, 0)(dx.d, dout.d);
    else MTS_LAUNCH(block_sum<false>, blocks, 256, 0, 0)(dx.d, dout.d);
    EXPECT_EQ(sync_error(), cudaSuccess);
    return dout.get();
}

TEST_F(Emu, MissingBarrierIsCaught)
{
    std::vector<float> want;
    for (uint64_t seed = 0; seed <= kSeeds; seed++)
        EXPECT_EQ(run_block_sum(true, seed, &want), want) << "the correct reduction, seed " << seed;
    int wrong = 0;
    for (uint64_t seed = 0; seed <= kSeeds; seed++) wrong += run_block_sum(false, seed, &want) != want;
    EXPECT_GT(wrong, 0) << "the reduction without its barrier gave the right sums for every seed";
}

// out[t] = in[t+1] through shared memory: thread t reads its neighbour's
// slot and overwrites its own. Without the barrier between the reads and
// the writes (Sync = false) thread t+1 may overwrite slot t+1 before thread
// t reads it: a write-after-read race that index order (seed 0) hides and
// the shuffled orders show.
template <bool Sync> __global__ void shift_left(const int *in, int *out)
{
    __shared__ int s[64];
    unsigned t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    int v = t < 63 ? s[t + 1] : 0;
    if (Sync) __syncthreads();
    s[t] = v;
    __syncthreads();
    out[t] = s[t];
}

std::vector<int> run_shift(bool sync, uint64_t seed)
{
    std::vector<int> in(64);
    for (int i = 0; i < 64; i++) in[i] = 100 + i;
    mts_emu::set_seed(seed);
    Buf<int> din(64, in.data()), dout(64);
    if (sync) MTS_LAUNCH(shift_left<true>, 1, 64, 0, 0)(din.d, dout.d);
    else MTS_LAUNCH(shift_left<false>, 1, 64, 0, 0)(din.d, dout.d);
    EXPECT_EQ(sync_error(), cudaSuccess);
    return dout.get();
}

TEST_F(Emu, SharedMemoryRaceIsCaught)
{
    std::vector<int> want(64);
    for (int i = 0; i < 63; i++) want[i] = 101 + i;
    for (uint64_t seed = 0; seed <= kSeeds; seed++) EXPECT_EQ(run_shift(true, seed), want) << "seed " << seed;
    EXPECT_EQ(run_shift(false, 0), want) << "index order runs each read before the write it races with";
    int wrong = 0;
    for (uint64_t seed = 1; seed <= kSeeds; seed++) wrong += run_shift(false, seed) != want;
    EXPECT_GT(wrong, 0) << "no seed showed the write-after-read race";
}

// Shared memory starts each block undefined: 0xFF bytes here, so a kernel
// that reads a slot nobody wrote sees NaN, not a stale value.
__global__ void read_unwritten(float *out)
{
    __shared__ float s[32];
    if (threadIdx.x < 16) s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}

TEST_F(Emu, SharedMemoryStartsUndefined)
{
    Buf<float> out(64);
    MTS_LAUNCH(read_unwritten, 2, 32, 0, 0)(out.d);
    ASSERT_EQ(sync_error(), cudaSuccess);
    std::vector<float> h = out.get();
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 32; t++) {
            uint32_t u;
            std::memcpy(&u, &h[b * 32 + t], 4);
            EXPECT_EQ(u, t < 16 ? 0x3F800000u : 0xFFFFFFFFu) << "block " << b << " thread " << t;
        }
}

// Barriers some threads miss are faults naming the line: an early return
// before __syncthreads, and __syncthreads inside a divergent branch.
__global__ void exit_before_barrier(int n, int *out)
{
    if ((int)threadIdx.x >= n) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}
__global__ void divergent_barrier(int *out)
{
    if (threadIdx.x < 16) {
        __syncthreads();
        out[threadIdx.x] = 1;
    } else {
        __syncthreads();
        out[threadIdx.x] = 2;
    }
}

TEST_F(Emu, BarriersThatThreadsMissAreFaults)
{
    {
        Buf<int> out(32);
        MTS_LAUNCH(exit_before_barrier, 1, 32, 0, 0)(20, out.d);
        EXPECT_EQ(sync_error(), cudaErrorLaunchFailure);
        std::string f = mts_emu::last_fault();
        EXPECT_NE(f.find("has exited"), std::string::npos) << f;
        EXPECT_NE(f.find("exit_before_barrier"), std::string::npos) << f;
        // a faulted device answers every call with the fault, as a GPU does
        void *p = nullptr;
        EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorLaunchFailure);
    }
    mts_emu::reset();
    Buf<int> out(32);
    MTS_LAUNCH(divergent_barrier, 1, 32, 0, 0)(out.d);
    EXPECT_EQ(sync_error(), cudaErrorLaunchFailure);
    std::string f = mts_emu::last_fault();
    EXPECT_NE(f.find("different barriers"), std::string::npos) << f;
    EXPECT_NE(f.find("test_gpu_emu.cpp"), std::string::npos) << f;
}

__global__ void barrier_votes(const int *pred, int *out)
{
    int p = pred[threadIdx.x];
    int c = __syncthreads_count(p), a = __syncthreads_and(p), o = __syncthreads_or(p);
    if (threadIdx.x == 0) out[0] = c, out[1] = a, out[2] = o;
}

TEST_F(Emu, BarrierVotes)
{
    std::vector<int> pred(96, 0);
    for (int i = 0; i < 96; i += 3) pred[i] = 5;
    Buf<int> dp(96, pred.data()), out(3);
    MTS_LAUNCH(barrier_votes, 1, 96, 0, 0)(dp.d, out.d);
    ASSERT_EQ(sync_error(), cudaSuccess);
    EXPECT_EQ(out.get(), (std::vector<int>{32, 0, 1}));
}

// A thread spinning on a flag another thread sets makes progress when it
// yields (__nanosleep); the emulation runs one fiber at a time.
__global__ void spin_on_flag(int *out)
{
    __shared__ volatile int flag;
    if (threadIdx.x == 0) flag = 0;
    __syncthreads();
    if (threadIdx.x == 5) flag = 42;
    else
        while (flag != 42) __nanosleep(100);
    out[threadIdx.x] = flag;
}

TEST_F(Emu, SpinWaitWithNanosleepCompletes)
{
    Buf<int> out(8);
    MTS_LAUNCH(spin_on_flag, 1, 8, 0, 0)(out.d);
    ASSERT_EQ(sync_error(), cudaSuccess);
    EXPECT_EQ(out.get(), std::vector<int>(8, 42));
}

// ----------------------------------------------------- indices, limits

// Every thread of a 3-D grid of 3-D blocks writes its global linear index
// once: threadIdx, blockIdx, blockDim and gridDim as the device defines them.
__global__ void index_3d(unsigned *hits)
{
    unsigned bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned g = bx * (blockDim.x * blockDim.y * blockDim.z) + tx;
    atomicAdd(&hits[g], 1u + g);
}

TEST_F(Emu, ThreeDimensionalIndices)
{
    dim3 grid(3, 2, 2), block(5, 3, 2);
    size_t n = 3 * 2 * 2 * 5 * 3 * 2;
    std::vector<unsigned> zero(n, 0);
    Buf<unsigned> hits(n, zero.data());
    MTS_LAUNCH(index_3d, grid, block, 0, 0)(hits.d);
    ASSERT_EQ(sync_error(), cudaSuccess);
    std::vector<unsigned> h = hits.get();
    for (size_t i = 0; i < n; i++) EXPECT_EQ(h[i], 1u + i) << i;
}

__global__ void noop() {}

TEST_F(Emu, LaunchLimitsAsTheDeviceChecksThem)
{
    struct Case {
        dim3 grid, block;
        cudaError_t want;
    } cases[] = {
        {dim3(1), dim3(1024), cudaSuccess},
        {dim3(1), dim3(32, 32), cudaSuccess},
        {dim3(1), dim3(1025), cudaErrorInvalidConfiguration},       // > 1024 in x
        {dim3(1), dim3(32, 32, 2), cudaErrorInvalidConfiguration},  // 2048 threads
        {dim3(1), dim3(1, 1, 65), cudaErrorInvalidConfiguration},   // z <= 64
        {dim3(1), dim3(1, 1025), cudaErrorInvalidConfiguration},    // y <= 1024
        {dim3(1), dim3(0), cudaErrorInvalidConfiguration},          // empty block
        {dim3(0), dim3(32), cudaErrorInvalidConfiguration},         // empty grid
        {dim3(1, 65536), dim3(1), cudaErrorInvalidConfiguration},   // grid y <= 65535
        {dim3(1, 1, 65536), dim3(1), cudaErrorInvalidConfiguration} // grid z <= 65535
    };
    for (const Case &c : cases) {
        MTS_LAUNCH(noop, c.grid, c.block, 0, 0)();
        EXPECT_EQ(cudaGetLastError(), c.want) << "grid (" << c.grid.x << "," << c.grid.y << "," << c.grid.z
                                              << ") block (" << c.block.x << "," << c.block.y << "," << c.block.z
                                              << "): " << mts_emu::last_fault();
        EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a configuration error is not sticky";
    }
    cudaStream_t gone;
    ASSERT_EQ(cudaStreamCreate(&gone), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(gone), cudaSuccess);
    MTS_LAUNCH(noop, 1, 1, 0, gone)();
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

// ------------------------------------------------ dynamic shared memory

// Reverses each block's slice through dynamic shared memory of n floats.
__global__ void reverse_dyn(const float *x, float *y, int n)
{
    MTS_DYNAMIC_SHARED(float, s);
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = x[blockIdx.x * n + i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[blockIdx.x * n + i] = s[n - 1 - i];
}

TEST_F(Emu, DynamicSharedMemoryAndItsLimit)
{
    const int n = 16384; // 64 KiB: above the default 48 KiB per block
    std::vector<float> x(2 * n);
    for (size_t i = 0; i < x.size(); i++) x[i] = (float)i;
    Buf<float> dx(x.size(), x.data()), dy(x.size());
    MTS_LAUNCH(reverse_dyn, 2, 128, n * sizeof(float), 0)(dx.d, dy.d, n);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "64 KiB without opting in";
    EXPECT_EQ(cudaFuncSetAttribute(reverse_dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, 300 * 1024),
              cudaErrorInvalidValue)
        << "more than the device's 227 KiB";
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "a failed call is the thread's last error, as in CUDA";
    ASSERT_EQ(cudaFuncSetAttribute(reverse_dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, n * 4), cudaSuccess);
    MTS_LAUNCH(reverse_dyn, 2, 128, n * sizeof(float), 0)(dx.d, dy.d, n);
    ASSERT_EQ(sync_error(), cudaSuccess);
    std::vector<float> y = dy.get();
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < n; i += 997) ASSERT_EQ(y[b * n + i], x[b * n + n - 1 - i]) << b << " " << i;
}

// ------------------------------------------------------- warp operations

// Per lane: the warp sum by a butterfly of __shfl_xor_sync, the lane's
// neighbours by __shfl_up/down_sync within segments of 8, lane 3's value by
// __shfl_sync, the ballot of odd values, __reduce_add_sync.
__global__ void warp_ops(const int *x, int *out)
{
    unsigned l = threadIdx.x;
    int v = x[l], s = v;
    for (int m = 16; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
    int up = __shfl_up_sync(0xffffffffu, v, 1, 8), down = __shfl_down_sync(0xffffffffu, v, 2, 8);
    int from3 = __shfl_sync(0xffffffffu, v, 3);
    unsigned odd = __ballot_sync(0xffffffffu, v & 1);
    __syncwarp();
    int red = (int)__reduce_add_sync(0xffffffffu, (unsigned)v);
    int *o = out + l * 6;
    o[0] = s, o[1] = up, o[2] = down, o[3] = from3, o[4] = (int)odd, o[5] = red;
}

TEST_F(Emu, WarpShufflesBallotsReductions)
{
    std::vector<int> x(32);
    int sum = 0;
    unsigned odd = 0;
    for (int i = 0; i < 32; i++) {
        x[i] = i * i + 3;
        sum += x[i];
        if (x[i] & 1) odd |= 1u << i;
    }
    for (uint64_t seed = 0; seed <= 3; seed++) {
        mts_emu::set_seed(seed);
        Buf<int> dx(32, x.data()), out(32 * 6);
        MTS_LAUNCH(warp_ops, 1, 32, 0, 0)(dx.d, out.d);
        ASSERT_EQ(sync_error(), cudaSuccess) << mts_emu::last_fault();
        std::vector<int> h = out.get();
        for (int l = 0; l < 32; l++) {
            const int *o = &h[l * 6];
            EXPECT_EQ(o[0], sum) << "lane " << l;
            EXPECT_EQ(o[1], l % 8 == 0 ? x[l] : x[l - 1]) << "shfl_up, lane " << l;
            EXPECT_EQ(o[2], l % 8 >= 6 ? x[l] : x[l + 2]) << "shfl_down, lane " << l;
            EXPECT_EQ(o[3], x[3]);
            EXPECT_EQ((unsigned)o[4], odd);
            EXPECT_EQ(o[5], sum);
        }
    }
}

// Warp operations whose mask lanes cannot meet are faults: a lane that
// exited, and a mask that leaves out the caller.
__global__ void shfl_after_exit(int *out)
{
    if (threadIdx.x == 7) return;
    out[threadIdx.x] = __shfl_sync(0xffffffffu, (int)threadIdx.x, 0);
}
__global__ void shfl_without_self(int *out)
{
    out[threadIdx.x] = __shfl_sync(0x1u, (int)threadIdx.x, 0);
}

TEST_F(Emu, WarpOperationsLanesCannotMeetAreFaults)
{
    {
        Buf<int> out(32);
        MTS_LAUNCH(shfl_after_exit, 1, 32, 0, 0)(out.d);
        EXPECT_EQ(sync_error(), cudaErrorLaunchFailure);
        std::string f = mts_emu::last_fault();
        EXPECT_NE(f.find("lane 7, which has exited"), std::string::npos) << f;
    }
    mts_emu::reset();
    Buf<int> out(32);
    MTS_LAUNCH(shfl_without_self, 1, 32, 0, 0)(out.d);
    EXPECT_EQ(sync_error(), cudaErrorLaunchFailure);
    std::string f = mts_emu::last_fault();
    EXPECT_NE(f.find("the calling lane is not in it"), std::string::npos) << f;
}

// Half-warp masks: two groups of 16 lanes synchronise separately.
__global__ void half_warps(int *out)
{
    unsigned l = threadIdx.x, m = l < 16 ? 0x0000ffffu : 0xffff0000u;
    out[l] = __shfl_sync(m, (int)l * 10, l < 16 ? 0 : 16);
}

TEST_F(Emu, DisjointWarpMasks)
{
    Buf<int> out(32);
    MTS_LAUNCH(half_warps, 1, 32, 0, 0)(out.d);
    ASSERT_EQ(sync_error(), cudaSuccess) << mts_emu::last_fault();
    std::vector<int> h = out.get();
    for (int l = 0; l < 32; l++) EXPECT_EQ(h[l], l < 16 ? 0 : 160) << l;
}

// ------------------------------------------------------------- atomics

__global__ void count_and_sum(unsigned *count, float *sum, const float *x)
{
    atomicAdd(count, 1u);
    atomicAdd(sum, x[blockIdx.x * blockDim.x + threadIdx.x]);
}

// Integer atomics are exact in any order; a float atomicAdd sum depends on
// the order the threads reach it, and the emulation shows that: the bits
// change with the seed (never use one where the result must be exact).
TEST_F(Emu, AtomicsAndTheOrderTheyExpose)
{
    std::vector<float> x(128, 1.0f);
    x[0] = 1e8f;
    x[77] = -1e8f;
    std::set<uint32_t> sums;
    for (uint64_t seed = 1; seed <= kSeeds; seed++) {
        mts_emu::set_seed(seed);
        unsigned zero = 0;
        float fzero = 0.0f;
        Buf<unsigned> count(1, &zero);
        Buf<float> sum(1, &fzero), dx(x.size(), x.data());
        MTS_LAUNCH(count_and_sum, 2, 64, 0, 0)(count.d, sum.d, dx.d);
        ASSERT_EQ(sync_error(), cudaSuccess);
        EXPECT_EQ(count.get()[0], 128u);
        float s = sum.get()[0];
        uint32_t u;
        std::memcpy(&u, &s, 4);
        sums.insert(u);
    }
    EXPECT_GT(sums.size(), 1u) << "every seed summed in the same order";
}

// --------------------------------------------------------------- streams

__global__ void fill(int *p, int n, int v)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
__global__ void add_from(int *dst, const int *src, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] += src[i];
}

// Producer on stream a, consumer on stream b: with an event between them
// the result is right for every seed; without it some seed runs the
// consumer first.
std::vector<int> run_streams(bool wait, uint64_t seed)
{
    const int n = 64;
    mts_emu::set_seed(seed);
    std::vector<int> zero(n, 0);
    Buf<int> src(n), dst(n, zero.data());
    cudaStream_t a, b;
    cudaEvent_t ev;
    EXPECT_EQ(cudaStreamCreate(&a), cudaSuccess);
    EXPECT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(cudaEventCreate(&ev), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(src.d, 0, n * sizeof(int), a), cudaSuccess);
    MTS_LAUNCH(fill, 1, n, 0, a)(src.d, n, 5);
    EXPECT_EQ(cudaEventRecord(ev, a), cudaSuccess);
    if (wait) {
        EXPECT_EQ(cudaStreamWaitEvent(b, ev, 0), cudaSuccess);
    }
    MTS_LAUNCH(add_from, 1, n, 0, b)(dst.d, src.d, n);
    std::vector<int> h(n, -7);
    EXPECT_EQ(cudaMemcpyAsync(h.data(), dst.d, n * sizeof(int), cudaMemcpyDeviceToHost, b), cudaSuccess);
    EXPECT_EQ(h, std::vector<int>(n, -7)) << "an async copy on a stream runs when the stream is synchronised";
    EXPECT_EQ(cudaStreamSynchronize(b), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
    EXPECT_EQ(cudaEventDestroy(ev), cudaSuccess);
    return h;
}

TEST_F(Emu, StreamsInterleaveAndEventsOrderThem)
{
    std::vector<int> want(64, 5);
    for (uint64_t seed = 0; seed <= kSeeds; seed++) EXPECT_EQ(run_streams(true, seed), want) << "seed " << seed;
    int wrong = 0;
    for (uint64_t seed = 1; seed <= kSeeds; seed++) wrong += run_streams(false, seed) != want;
    EXPECT_GT(wrong, 0) << "no seed ran the consumer stream before the producer";
}

// The legacy default stream waits for the blocking streams' work.
TEST_F(Emu, DefaultStreamWaitsForBlockingStreams)
{
    const int n = 32;
    Buf<int> p(n);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    MTS_LAUNCH(fill, 1, n, 0, s)(p.d, n, 9);
    MTS_LAUNCH(fill, 1, 8, 0, 0)(p.d, 8, 1); // after the stream's fill
    EXPECT_EQ(p.get(), [] {
        std::vector<int> v(32, 9);
        for (int i = 0; i < 8; i++) v[i] = 1;
        return v;
    }());
    ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// --------------------------------------------------------- device memory

TEST_F(Emu, DeviceMemoryChecks)
{
    Buf<float> a(16);
    std::vector<float> h(32, 0.0f);
    EXPECT_EQ(cudaMemcpy(a.d, h.data(), 32 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue)
        << "a copy past the end of the allocation";
    EXPECT_NE(mts_emu::last_fault().find("past the end"), std::string::npos) << mts_emu::last_fault();
    EXPECT_EQ(cudaMemcpy(h.data(), a.d, 16 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue)
        << "source and destination swapped";
    // fresh device memory is undefined: 0xFF bytes
    std::vector<float> g = a.get();
    uint32_t u;
    std::memcpy(&u, &g[5], 4);
    EXPECT_EQ(u, 0xFFFFFFFFu);
    EXPECT_EQ(cudaFree(h.data()), cudaErrorInvalidValue) << "freeing host memory";
    size_t fr = 0, tot = 0;
    ASSERT_EQ(cudaMemGetInfo(&fr, &tot), cudaSuccess);
    void *big = nullptr;
    EXPECT_EQ(cudaMalloc(&big, tot + 1), cudaErrorMemoryAllocation);
    EXPECT_EQ(big, nullptr);
}

#if defined(__SANITIZE_ADDRESS__)
// Host code that dereferences a device pointer crashes on a GPU; under
// AddressSanitizer the emulation reports it (device memory is poisoned
// outside device operations).
TEST_F(Emu, HostReadOfDeviceMemoryIsReported)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            Buf<float> a(4);
            volatile float v = a.d[1];
            (void)v;
        },
        "use-after-poison");
}
#endif

// Kernel parameters are per-thread copies: a thread that changes its own
// does not change another's.
__global__ void own_params(int k, int *out)
{
    k += (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = k;
}

TEST_F(Emu, ParametersArePerThreadCopies)
{
    Buf<int> out(16);
    MTS_LAUNCH(own_params, 1, 16, 0, 0)(100, out.d);
    ASSERT_EQ(sync_error(), cudaSuccess);
    std::vector<int> h = out.get();
    for (int t = 0; t < 16; t++) EXPECT_EQ(h[t], 100 + t);
}

} // namespace
