/* gemm.h - GEMM through a chosen arithmetic provider: the one interface the
 * training engine uses for every multiply of forward and backward passes.
 *
 * C[m][n] = beta*C[m][n] + sum_k opA(A)[m][k] * opB(B)[k][n], row-major.
 * Accumulation order is fixed per output and independent of threads/SIMD:
 *  - non-FMAq providers: FP32 sum, sequential in k = 0..K-1, starting from +0
 *    (acc = acc + p_k, each product rounded to FP32 first, never fused);
 *  - FMAq: mts_fmaq_dot order (chunks of `chunk`, then chunk sums), fmaq.h;
 *  - INT: exact integer sums (order-free), scaled once in double (intmul.h).
 * The result y is then stored as C = y (beta == 0: C is not read, NaN in C
 * is ignored) or C = fl(fl(beta*C) + y) in FP32 (beta*C is C when beta == 1).
 * A NaN stored into C is always 0x7FC00000 (payloads and the x86 "default
 * NaN" sign are not part of the contract).
 * Operands are quantized to the provider's input format with RNE before the
 * products (mts_fmt_quantize), except for the native FP32 providers; a LUT
 * read through a wider in_fmt then has the extra bits truncated (RTZ) into
 * the LUT's own format, as AMSim's rule 1 does.
 * See docs/gemm.md. */
#ifndef MANTIS_GEMM_H
#define MANTIS_GEMM_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/fmaq.h"
#include "mantis/intmul.h"
#include "mantis/lut.h"
#include "mantis/mul.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MTS_PROV_BLAS = 0,   /* native FP32 through OpenBLAS (baseline; order is BLAS's own) */
    MTS_PROV_NATIVE = 1, /* native FP32 multiply, our kernel, documented order */
    MTS_PROV_LUT = 2,    /* float LUT + AMSim */
    MTS_PROV_MULOP = 3,  /* any mts_mulop per product (C model, RTL-in-the-loop): slow ground truth */
    MTS_PROV_INT = 4     /* n-bit integer table with affine quantization (TFApprox) */
} mts_prov_kind;

typedef struct mts_provider {
    mts_prov_kind kind;
    const mts_lut *lut;    /* LUT (float) or INT table */
    const mts_mulop *mul;  /* MULOP */
    mts_format in_fmt;     /* operand format for LUT/MULOP (quantized RNE; a LUT then truncates
                              to its own format); all-zero (M == 0): the LUT's / mulop's own format */
    int fmaq;              /* 1: accumulate with FMAq (NATIVE, LUT, MULOP; BLAS uses NATIVE's
                              kernel then, INT refuses). NATIVE products are mts_model "fp32" */
    mts_qfmt qprod, qacc;
    int chunk;             /* FMAq chunk size, default 16 (<= 0 means 16) */
    int threads;           /* 0: all cores */
    int scalar_only;       /* testing: 1 runs the portable scalar kernels even on a SIMD
                              build (same results; lets tests check both paths) */
    int device;            /* 0: the CPU; MTS_GPU_DEVICE_CUDA (gpu.h): mts_gemm runs on the GPU
                              (same results; errors when unbuilt, absent or not supported there) */
} mts_provider;

/* Runs the GEMM above. transA: A is stored [k][m] (lda its row stride); transB:
 * B is stored [n][k]. Leading dimensions must cover a row (lda >= k, or >= m
 * when transposed; same for ldb; ldc >= n). Returns MTS_OK, MTS_EINVAL (bad
 * shapes/provider, named in err) or MTS_ENOMEM. MTS_PROV_BLAS without
 * OpenBLAS in the build returns MTS_EUNSUPPORTED. A MULOP whose mulop is serial
 * runs on one thread. Thread-safe. Every setting comes from p (no global
 * switch); the one process-wide state is the workspace cache: freed packing
 * buffers (O(mk + kn) words) are kept for reuse by later calls (sim/gemm/ws.c). */
int mts_gemm(const mts_provider *p, int transA, int transB, int m, int n, int k,
             const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
             mts_err *err);

/* A diagnostic: with MANTIS_CPU_PROFILE=1 in the environment (read at the
 * first GEMM), every CPU GEMM (mts_gemm, mts_gemm_t, mts_gemm_acc, each of
 * a batch) is timed and counted by shape, layout and kernel family; writes
 * "MxNxK[:AB][ C^T][ acc] PATH[ swapped] C calls S s, ..." (PATH: native,
 * lut, fmaq lut, fmaq native, int, blas, mulop, scalar; swapped: the
 * kernels ran C^T = op(B)^T op(A)^T; the most time first, since the process
 * started) into buf (n bytes, truncated) and returns its length; 0 when not
 * profiling or nothing ran. The GPU's is mts_gpu_gemm_profile. */
size_t mts_gemm_profile(char *buf, size_t n);

/* Scratch memory from that workspace cache, for a GEMM's large operands
 * built per call (a convolution's column matrices: 75 MB for ResNet-20's
 * first stage at batch 128): a block given back with mts_gemm_ws_free
 * waits for the next request instead of returning to the system, where
 * glibc would unmap it and the next call page-fault it in again. Aligned to
 * 64 bytes, contents undefined; NULL when out of memory. Thread-safe. */
void *mts_gemm_ws_alloc(size_t bytes);
void mts_gemm_ws_free(void *p);

/* mts_gemm with the result stored transposed: element (i, j) of
 * opA(A) x opB(B) goes to C[j*ldc + i] (ldc >= m), beta applying there. The
 * same bits as mts_gemm into a [m][n] matrix followed by a transpose, and the
 * same operand order in every product; a caller that wants C^T (a
 * convolution's [cout][N*P] output) saves that pass, and the kernels of a
 * skinny GEMM (run as the transposed problem) then write whole rows. */
int mts_gemm_t(const mts_provider *p, int transA, int transB, int m, int n, int k,
               const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
               mts_err *err);

/* Continues an mts_gemm along k: C holds the running FP32 sums of the
 * outputs over a preceding part of the k range (as mts_gemm with beta 0, or
 * an earlier call of this function, stored them), and each output's sum
 * goes on from that value over these k products in the documented order
 * (acc = C[i][j]; acc = acc + p_k for k ascending; C[i][j] = acc, a NaN
 * stored canonical). So mts_gemm over k = k1 + k2 equals, bit for bit,
 * mts_gemm over the first k1 followed by mts_gemm_acc over the last k2,
 * wherever k is split: a sum starts at +0 and never becomes -0, and a
 * stored value is the sum itself. A caller can then stream the summed
 * dimension in chunks that stay in the cache (a convolution's weight
 * gradient). Only for providers whose sums are FP32 sequences (NATIVE, LUT
 * and MULOP without FMAq, on the CPU: mts_gemm_acc_ok); others return
 * MTS_EUNSUPPORTED. k = 0 leaves C as it is. Thread-safe. */
int mts_gemm_acc(const mts_provider *p, int transA, int transB, int m, int n, int k,
                 const float *A, int lda, const float *B, int ldb, float *C, int ldc, mts_err *err);
/* 1 when mts_gemm_acc takes provider p. */
int mts_gemm_acc_ok(const mts_provider *p);

/* count independent GEMMs of one shape and provider: for b < count,
 * mts_gemm(p, transA, transB, m, n, k, A[b], lda, B[b], ldb, beta, C[b],
 * ldc), the same bits (the C[b] must not overlap each other or any input).
 * The provider's derived tables are prepared once per thread instead of per
 * GEMM, and small GEMMs run side by side on the provider's threads: the
 * many 16 x 16 x 16 products of attention heads cost less than their
 * set-up otherwise. Errors as mts_gemm's (the first failing GEMM's). */
int mts_gemm_batch(const mts_provider *p, int count, int transA, int transB, int m, int n, int k,
                   const float *const *A, int lda, const float *const *B, int ldb, float beta, float *const *C,
                   int ldc, mts_err *err);

/* The naive reference of mts_gemm: same arguments and result, written as a
 * triple loop that quantizes each operand as it reads it and forms every
 * product with the scalar function (a*b, mts_amsim, mul->fn) and every sum in
 * the documented order (mts_fmaq_dot for FMAq, mts_qdot_float's formula for
 * INT). Single-threaded and slow; every fast kernel is tested against it.
 * MTS_PROV_BLAS is computed as MTS_PROV_NATIVE. */
int mts_gemm_ref(const mts_provider *p, int transA, int transB, int m, int n, int k,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                 mts_err *err);

/* The operand step of the INT provider, shared by the CPU kernel and the
 * GPU twin (gpu/gemm.cu): quantizes op(A) (m x k) and op(B) (k x n) with the
 * affine map of intmul.h over each operand's own finite min/max (nbits,
 * is_signed from the table), writing ia[i*k + kk] = (code & mask) << nbits
 * (the table row offset), ib[j*k + kk] = code & mask (B stored [n][k]),
 * suma[i] / sumb[j] the sums of the signed codes per row / column (for
 * mts_qdot_correct) and the maps to *pa, *pb. threads > 1 splits rows.
 * Returns MTS_OK or mts_affine_from_range's error. */
int mts_gemm_int_quantize(int nbits, int is_signed, int threads, int transA, int transB, int m, int n, int k,
                          const float *A, int lda, const float *B, int ldb, uint32_t *ia, uint32_t *ib,
                          int64_t *suma, int64_t *sumb, mts_affine *pa, mts_affine *pb, mts_err *err);

/* ------------------------------------------------ integer code GEMM
 * The GEMM of quantization-aware training (qat.h) and of the INT provider:
 * operands already quantized to n-bit codes, one zero point and scale per
 * row of each (per output channel for weights, one per tensor for
 * activations). */

/* An integer table prepared for mts_qgemm: its smallest entry and, for an
 * 8-bit table whose entries span at most 65,535, the entries minus that
 * smallest one split into low and high byte planes, indexed [a][b] and
 * [b][a] (what the SIMD kernel reads; other tables run the scalar kernel);
 * or, when the table's error against the exact product spans at most 255,
 * that error as one byte plane (the split kernel). Read-only once built;
 * share it between calls and threads. */
typedef struct mts_qtab {
    const mts_lut *lut;  /* not owned: must outlive the mts_qtab */
    int bits, is_signed;
    int32_t tmin;
    int planes;          /* bit 0: lo/hi hold the [a][b] planes, bit 1: the [b][a] ones (mts_qtab_init: both) */
    uint8_t *lo, *hi;    /* 2 x 65,536 bytes each */
    /* The split form, for tables whose error D = T(a, b) - a*b spans at most 255: the exact products
     * by VNNI dot products, D - dmin from one byte plane (none when D is constant). */
    int split;           /* 1: D spans at most 255 (dplanes then says which of dp's planes are built) */
    int dconst;          /* 1: D is constant (dmin): no plane is read */
    int32_t dmin;
    int dplanes;         /* as planes, for dp */
    uint8_t *dp;         /* 2 x 65,536 bytes: D - dmin, [a][b] then [b][a] */
} mts_qtab;

/* Builds t from an integer table (MTS_EINVAL for anything else; MTS_ENOMEM). */
int mts_qtab_init(mts_qtab *t, const mts_lut *lut, mts_err *err);
void mts_qtab_free(mts_qtab *t);

/* One operand of mts_qgemm: rows x k codes (the low n bits of each operand
 * value, two's complement when signed), element (r, kk) at code[r*ld + kk],
 * or at code[kk*ld + r] when kmajor (a convolution's im2col layout, which
 * the SIMD kernel reads as it is when this operand runs across its lanes);
 * per-row zero points and scales (zp / scale NULL: zp1 / scale1 for every
 * row). */
typedef struct mts_qopd {
    const uint8_t *code;
    size_t ld;
    const int32_t *zp;
    int32_t zp1;
    const double *scale;
    double scale1;
    int kmajor;
} mts_qopd;

/* C(i, j) = (float)((sa_i * sb_j) * (double)acc), acc = sum over kk of
 * (qa_ikk - za_i)(qb_jkk - zb_j) with every product qa*qb the table's
 * T(a, b) (a the first operand's value, b the second's) and the zero points
 * corrected with exact integer sums (mts_qdot_correct): the formula of
 * mts_qdot_float per output. Stored at C[i*ldc + j], or C[j*ldc + i] when
 * ct, as gemm.h's beta rule says. The SIMD kernel and the scalar one (taken
 * when scalar_only, or where the SIMD one does not apply) give the same
 * bits; threads 0: all cores. MTS_OK, MTS_EINVAL, MTS_ENOMEM. */
int mts_qgemm(const mts_qtab *t, int threads, int scalar_only, int ct, int m, int n, int k, const mts_qopd *a,
              const mts_qopd *b, float beta, float *C, int ldc, mts_err *err);

/* Which SIMD kernel family this build uses: "avx512", "avx2" or "scalar". */
const char *mts_gemm_isa(void);

/* 1 if this build links OpenBLAS (MTS_PROV_BLAS usable), else 0. */
int mts_gemm_have_blas(void);

#ifdef __cplusplus
}
#endif
#endif
