/* hd.h - the host/device qualifier of the arithmetic headers that the C11
 * library and the CUDA code (gpu/) both compile: MTS_HD is
 * __host__ __device__ under nvcc and nothing elsewhere (the C compiler, and
 * the host C++ compiler of the CUDA emulation, gpu/emu/, which compiles the
 * device branches below with its own intrinsics). */
#ifndef MANTIS_HD_H
#define MANTIS_HD_H

#include <stdint.h>

#if defined(__CUDACC__)
#define MTS_HD __host__ __device__
#else
#define MTS_HD
#endif

/* Leading zeros of a non-zero 64-bit value. */
static inline MTS_HD int mts_clz64(uint64_t x)
{
#if defined(__CUDA_ARCH__)
    return __clzll((long long)x);
#else
    return __builtin_clzll(x);
#endif
}

#endif
