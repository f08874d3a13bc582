/* gemmdump.h - the operand matrices of one layer's GEMM for one batch, as a
 * file the co-simulator replays (docs/cosim.md, format below), and the tap
 * that captures them from the layer ops' GEMM path (mts_nn_gemm).
 *
 * File (little endian): "MTSGEMM\0" (8 bytes), u32 version = 1, u32 m, n, k,
 * u32 batch (samples the GEMM covers, 0: unknown), char layer[32] (NUL-padded), then A as m*k FP32 bit
 * patterns row-major (opA applied: A[i][kk]), B as k*n row-major
 * (B[kk][j]), then u32 CRC-32 of every byte before it. The GEMM is
 * C[m][n] = A B; B is the layer's weight in every forward op (dense, conv,
 * matmul's second operand), the stationary operand of the array. */
#ifndef MANTIS_GEMMDUMP_H
#define MANTIS_GEMMDUMP_H

#include <stdint.h>
#include "mantis/gemm.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MTS_GEMMDUMP_VERSION 1u

typedef struct mts_gemmdump {
    int m, n, k;
    int batch;        /* samples the GEMM covers (0: unknown) */
    char layer[32];
    float *A; /* m x k */
    float *B; /* k x n */
} mts_gemmdump;

/* Writes g atomically. MTS_EINVAL for non-positive shapes or a product
 * m*k or k*n above 2^31 elements; fs_write_atomic's codes. */
int mts_gemmdump_write(const char *path, const mts_gemmdump *g, mts_err *err);
/* Reads a dump into g (caller frees with mts_gemmdump_free). MTS_EFORMAT
 * names what is wrong: bad magic, unknown version, a size that disagrees
 * with the shape, a CRC mismatch, a non-terminated layer name. */
int mts_gemmdump_read(const char *path, mts_gemmdump *g, mts_err *err);
void mts_gemmdump_free(mts_gemmdump *g);

/* Captures the first forward GEMM of the layer named `layer` (mts_net_forward
 * names the layers that multiply conv1, conv2, ..., dense1, ..., matmul1, ...
 * in net order, and sets cur while one runs; mts_nn_gemm offers every GEMM) and writes it to
 * `path` at once. Install in mts_nn_ctx.tap. rc/err hold the write's result;
 * done says whether it happened. */
typedef struct mts_gemm_tap {
    char layer[32];
    const char *path;
    const char *cur; /* layer being run forward (set by mts_net_forward), NULL outside it */
    int batch;       /* its batch size (set with cur) */
    int done, rc;
    mts_err err;
} mts_gemm_tap;

/* Parses "LAYER:FILE" into t (path points into spec). MTS_EINVAL when the
 * colon, the layer or the file is missing or the layer name is too long. */
int mts_gemm_tap_init(mts_gemm_tap *t, const char *spec, mts_err *err);
/* Called by mts_nn_gemm for every GEMM: when t->cur names t's layer and
 * nothing was captured yet, stores opA(A) and opB(B) densely and writes them. */
void mts_gemm_tap_see(mts_gemm_tap *t, int transA, int transB, int m, int n, int k, const float *A, int lda,
                      const float *B, int ldb);
/* MTS_OK when the layer was captured and written; else the write's error,
 * or MTS_EINVAL "layer X ran no GEMM" (unknown name or a layer without one). */
int mts_gemm_tap_result(const mts_gemm_tap *t, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
