/* launch.h - the two CUDA constructs that nvcc and the CUDA emulation
 * (gpu/emu/, where the host C++ compiler builds the same .cu files) cannot
 * share as written: the <<<>>> launch and extern __shared__ arrays.
 *
 *   MTS_LAUNCH(kernel, grid, block, smem, stream)(args...);
 *       kernel<<<grid, block, smem, stream>>>(args...) under nvcc. A kernel
 *       template whose arguments hold a comma goes in parentheses:
 *       MTS_LAUNCH((k<T, U>), grid, block, 0, 0)(...). Every launch in gpu/
 *       goes through it (the emulation has no other way in).
 *   MTS_DYNAMIC_SHARED(T, name);
 *       extern __shared__ T name[] under nvcc: the launch's dynamic shared
 *       memory (at least 16-byte aligned) as an array of T. */
#ifndef MANTIS_GPU_LAUNCH_H
#define MANTIS_GPU_LAUNCH_H

#if defined(MTS_GPU_EMU)
#define MTS_LAUNCH(kernel, grid, block, smem, stream) \
    ::mts_emu::launch(kernel, #kernel, __FILE__, __LINE__, grid, block, smem, stream)
#define MTS_DYNAMIC_SHARED(T, name) T *name = ::mts_emu::dynamic_shared<T>()
#else
#define MTS_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#define MTS_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif


#include <cstddef>
#include <cstdint>

#include "mantis/qat_hd.h"
#include "mantis/status.h"

// The elementwise kernels' launch (gpu/nn_ops.cu, gpu/nn_tx.cu): THREADS per
// block, blocks_for(n) blocks for n threads, and launch_check(err, what):
// the launch's own error (configuration, resources). The kernels run in
// stream order on the default stream, as mts_gpu_gemm_dev's: a copy to the
// host or mts_gpu_sync waits for them and reports a fault they caused (one
// synchronisation per kernel cost more than the small kernels themselves).
namespace {

const int THREADS = 256;

inline unsigned blocks_for(size_t n) { return (unsigned)((n + THREADS - 1) / THREADS); }

inline int launch_check(mts_err *err, const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return MTS_OK;
    return mts_fail(err, e == cudaErrorMemoryAllocation ? MTS_ENOMEM : MTS_EIO, "gpu %s: %s", what,
                    cudaGetErrorString(e));
}

} // namespace

// Short-lived device blocks from the twins' scratch cache (gpu/nn_ops.cu):
// a block is the caller's until it gives it back (NULL is ignored).
int mts_gpu__scratch_alloc(void **p, size_t bytes, mts_err *err);
void mts_gpu__scratch_free(void *p);

// gpu/nn_ops.cu's output passes: y[N][out] += b (FP32 adds); the conv GEMM's
// [N*P][cout] result t into y[N][cout][P] plus the bias (+0 without one).
int mts_gpu__bias_add(int N, int out, float *y, const float *b, mts_err *err);
int mts_gpu__conv_out(int N, int cout, int P, const float *t, const float *b, float *y, mts_err *err);

// INT kernel 2 (gpu/gemm.cu) on prepared codes: C[i*ldc + j] for op(A) m x k
// and B n x k, row codes ua pre-shifted by the table width nbits, ub not,
// their value sums sa / sb; zero points za, zb and scale sc, or, where qa and
// qw are given (device pointers), qa's for every row and qw[j]'s for column
// j (the scale (sa * sb) in FP64). T: the table's tn entries, ti_min /
// ti_max their range. The launch's own error.
cudaError_t mts_gpu__int2(const int32_t *T, int tn, int nbits, int32_t ti_min, int32_t ti_max, int m, int n, int k,
                          const uint32_t *ua, const uint32_t *ub, const int64_t *sa, const int64_t *sb, int32_t za,
                          int32_t zb, double sc, const mts_qparam *qa, const mts_qparam *qw, float beta, float *C,
                          int ldc);

#endif