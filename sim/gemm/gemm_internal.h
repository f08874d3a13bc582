/* gemm_internal.h - private to the files of sim/gemm/: the packed problem that
 * mts_gemm hands to a kernel, the scalar product/accumulate helpers shared by
 * the kernels, and the tile driver. Not a public header. */
#ifndef MANTIS_GEMM_INTERNAL_H
#define MANTIS_GEMM_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "mantis/amsim.h"
#include "mantis/arith_hd.h"
#include "mantis/fpbits.h"
#include "mantis/gemm.h"

/* How one product is formed (scalar definition; SIMD kernels must agree). */
typedef enum {
    GEMM_PROD_F32 = 0,   /* hardware a*b (NATIVE without FMAq) */
    GEMM_PROD_FP32M = 1, /* mts_model "fp32" (NATIVE with FMAq, as mts_fmaq_dot with mul = NULL) */
    GEMM_PROD_LUT = 2,   /* mts_amsim(lut, a, b) */
    GEMM_PROD_MULOP = 3  /* mul->fn(mul, a, b) */
} gemm_prod_kind;

/* The derived tables of one LUT shared by the GEMMs of a batch
 * (mts_gemm_batch): filled by the first GEMM that derives each, borrowed by
 * the others (gemm_lutpack.shared), freed by the batch. Saves each GEMM the
 * derived-table cache's compare of the whole LUT (64 KiB for bf16), which
 * costs more than a 16 x 16 x 16 product. */
typedef struct gemm_tabs {
    unsigned char *tb[2]; /* byte table, [swap]: plain / transposed */
    float *tf;            /* float table */
    int tried_tb[2], tried_tf; /* derived (or found to have no such form) */
} gemm_tabs;

/* A float GEMM after operand quantization: A is [m][k] and B is [k][n], both
 * dense row-major FP32 bit patterns already in the provider's input format. */
typedef struct gemm_job {
    int m, n, k;
    const uint32_t *A, *B;
    float beta;
    float *C;
    int ldc;
    int threads;  /* resolved, >= 1 */
    gemm_prod_kind prod;
    const mts_lut *lut;
    const mts_mulop *mul;
    const mts_model *fp32; /* GEMM_PROD_FP32M */
    mts_format f32;        /* e8m23, the format "fp32" is evaluated in */
    int fmaq;
    mts_qfmt qprod, qacc;
    int chunk;
    /* 1: the job is the transposed problem C^T = op(B)^T op(A)^T (A holds
     * op(B)^T, B holds op(A)^T, m and n swapped) so that a skinny GEMM fills
     * the kernels' vector lanes. Products keep the caller's operand order
     * (gemm_prod_rc) and the output goes to C^T (gemm_out): bits unchanged. */
    int swap;
    /* 1 when some element of B is one the SIMD kernels do not take
     * (gemm_exp_ok); 0 lets a kernel read B without per-panel flags; -1
     * not known yet (a deferred B: gemm_b_bad scans it, only for a kernel
     * that would read it raw - a B that is packed gets per-panel flags). */
    int bbad;
    /* 0: B holds the quantized operand. M (1..22): B is the caller's FP32
     * array itself (op(B) not transposed, [k][n] with rows ldb apart) and every reader rounds each
     * element to M mantissa bits where it reads it (gemm_q_e8, gemm_b;
     * vector form in gemm_simd.h), so the quantize pass writes no copy of a
     * large column matrix. Only for E8 operand formats without a LUT
     * truncation (dispatch.c). */
    int bround;
    /* The same for A: 0, or M when A is the caller's FP32 array ([m][k],
     * rows lda apart) and readers round each element where they read it
     * (gemm_a; pack_fast rounds 16 at a time), so the weights of a forward
     * GEMM are not copied before packing. */
    int around;
    /* Elements from one row of A to the next: k for a packed A; a deferred
     * A (the caller's array, op(A) not transposed) keeps the caller's
     * leading dimension, so a block of a wider matrix (a weight gradient's
     * slice of columns) is read in place, not copied. */
    size_t lda;
    /* Elements from one row of B to the next: n for a packed B; the
     * caller's leading dimension for a deferred one (B the caller's array,
     * op(B) not transposed), so a block of a wider matrix (the gradient's
     * columns of one sample) is read in place, not copied. */
    size_t ldb;
    /* 1: the caller asked for C^T (mts_gemm_t): output (i, j) of the
     * caller's problem is stored at C[j*ldc + i]. */
    int ct;
    /* 1: mts_gemm_acc: each output's sum starts from the value stored at its
     * place in C (gemm_out) instead of +0; beta is 0. FP32 sums only. */
    int cont;
    /* A batch's shared tables (mts_gemm_batch), or NULL. */
    gemm_tabs *tabs;
} gemm_job;

/* FP32 bits x rounded to an E8 format of M < 23 mantissa bits, RNE (the
 * quantize pass's rule): zeros and subnormals become the signed zero, a NaN
 * the quiet NaN, infinities stay, a carry may raise the exponent. */
static inline uint32_t gemm_q_e8(uint32_t x, int M)
{
    const int drop = 23 - M;
    const uint32_t half = (1u << (drop - 1)) - 1u, keep = ~((1u << drop) - 1u);
    /* one expression, so loops over it vectorise */
    return ((x & MTS_F32_EXP) == 0)             ? (x & MTS_F32_SIGN)
           : ((x & MTS_F32_EXP) == MTS_F32_EXP) ? ((x & MTS_F32_MAN) ? MTS_F32_QNAN : x)
                                                : ((x + half + ((x >> drop) & 1u)) & keep);
}

/* Element idx of the job's B as the kernels multiply it (rounded here when
 * the job defers B's quantization). */
static inline uint32_t gemm_b(const gemm_job *g, size_t idx)
{
    uint32_t x;
    memcpy(&x, g->B + idx, sizeof x); /* B may be the caller's float array */
    return g->bround ? gemm_q_e8(x, g->bround) : x;
}

/* Element idx of the job's A as the kernels multiply it (rounded here when
 * the job defers A's quantization). */
static inline uint32_t gemm_a(const gemm_job *g, size_t idx)
{
    uint32_t x;
    memcpy(&x, g->A + idx, sizeof x); /* A may be the caller's float array */
    return g->around ? gemm_q_e8(x, g->around) : x;
}

/* The scalar product of the job's kind, in the caller's operand order. */
static inline uint32_t gemm_prod(const gemm_job *g, uint32_t a, uint32_t b)
{
    switch (g->prod) {
    case GEMM_PROD_F32: return mts_f2u(mts_u2f(a) * mts_u2f(b));
    case GEMM_PROD_FP32M: return mts_model_mul(g->fp32, &g->f32, a, b);
    case GEMM_PROD_LUT: return mts_amsim(g->lut, a, b);
    default: return g->mul->fn(g->mul, a, b);
    }
}

/* The product of the job's row operand r and column operand c. */
static inline uint32_t gemm_prod_rc(const gemm_job *g, uint32_t r, uint32_t c)
{
    return g->swap ? gemm_prod(g, c, r) : gemm_prod(g, r, c);
}

/* Where the job's output (i, j) lies in the caller's C: transposed once for
 * a swapped job, once for a caller's C^T (mts_gemm_t), so a swapped job of
 * mts_gemm_t writes rows. */
static inline float *gemm_out(const gemm_job *g, int i, int j)
{
    return g->swap != g->ct ? g->C + (size_t)j * (size_t)g->ldc + (size_t)i
                            : g->C + (size_t)i * (size_t)g->ldc + (size_t)j;
}

/* Stores y into *c with beta (gemm.h) and the canonical NaN (arith_hd.h:
 * the rule the GPU's stores share). */
static inline void gemm_store(float *c, float beta, float y) { mts_gemm_store_hd(c, beta, y); }

/* Stores out[0 .. j1 - j0) as the job's outputs (i, j0 .. j1), each as
 * gemm_store does (beta, the canonical NaN, at gemm_out's address): the
 * store of one tile row, shared by the LUT, FMAq and native kernels. (A
 * vector form, masked stores or a scatter down a column, measured no faster
 * on LeNet-300-100's GEMMs, 2026-11-26: the loop is a small part of a tile.) */
static inline void gemm_store_row(const gemm_job *g, int i, int j0, int j1, const float *out)
{
    for (int j = j0; j < j1; j++) gemm_store(gemm_out(g, i, j), g->beta, out[j - j0]);
}

/* The sums a continuing job (gemm_job.cont) starts from for outputs (i,
 * j0 .. j1): C's values at gemm_out's addresses into out[0 .. j1 - j0);
 * +0 for every output of a job that starts from zero. */
static inline void gemm_start_row(const gemm_job *g, int i, int j0, int j1, float *out)
{
    for (int j = j0; j < j1; j++) out[j - j0] = g->cont ? *gemm_out(g, i, j) : 0.0f;
}

/* Scalar dot product of row i of A and column j of B in the documented
 * order (plain FP32 or FMAq chunks); the portable kernel. */
uint32_t gemm_dot(const gemm_job *g, int i, int j);

/* Scalar kernel for outputs [i0,i1) x [j0,j1): gemm_dot + store. */
void gemm_tile_scalar(const gemm_job *g, int i0, int i1, int j0, int j1);

/* Runs fn over all MR x NR tiles of the m x n output on g->threads threads
 * (OpenMP, dynamic schedule); tiles of one column panel are consecutive so
 * the threads share one B panel at a time. ctx is the kernel's packed data. */
typedef void (*gemm_tile_fn)(const gemm_job *g, void *ctx, int i0, int i1, int panel, int j0, int j1);
void gemm_tiles(const gemm_job *g, int MR, int NR, gemm_tile_fn fn, void *ctx);
/* Every loop of the GEMM that may run on threads (gemm_tiles, the packing
 * passes, mts_gemm_batch) runs a plain loop, not a parallel region, when it
 * has one thread: libgomp sets up a team even for one thread, and inside
 * another region (mts_gemm_batch's GEMMs side by side, a convolution's
 * chunks) allocates and frees a new team each time; a vit-tiny epoch at one
 * thread spent about a tenth of its time on that. */

/* Kernels (each file one family). Return MTS_OK or MTS_ENOMEM. */
int gemm_scalar(const gemm_job *g, mts_err *err);  /* any job (tile.c) */
int gemm_native(const gemm_job *g, mts_err *err);  /* GEMM_PROD_F32, no FMAq */
int gemm_lut(const gemm_job *g, mts_err *err);     /* GEMM_PROD_LUT, no FMAq */
int gemm_fmaq(const gemm_job *g, mts_err *err);    /* FMAq with FP32M or LUT products */
int gemm_mulop(const gemm_job *g, mts_err *err);   /* GEMM_PROD_MULOP */

/* Providers that bypass the float packing: they read opA/opB themselves. */
int gemm_blas(int threads, int transA, int transB, int m, int n, int k, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc, mts_err *err);
/* INT (int.c): ct stores C transposed as mts_gemm_t does */
int gemm_int(const mts_lut *lut, int threads, int scalar_only, int ct, int transA, int transB, int m, int n,
                  int k, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  mts_err *err);

/* Shared by the LUT and FMAq kernels (lut.c). The table as floats
 * Tf = 2^adj (1.man) (0 for zero entries), or NULL when the format is not
 * E8 IEEE or an adjustment is outside [-2, 1]. */
float *gemm_lut_table(const mts_lut *lut);
/* x's index part (ma << M for the row operand, mb for the column operand)
 * and its power of two sign * 2^(e-127) (signed 0 for zero). */
static inline void gemm_lut_split(uint32_t x, int M, int as_row, uint32_t *idx, float *s)
{
    uint32_t ma = (x & MTS_F32_MAN) >> (23 - M);
    *idx = as_row ? ma << M : ma;
    *s = mts_u2f(mts_f32_exp(x) ? (x & 0xFF800000u) : (x & MTS_F32_SIGN));
}
/* 1 if x is zero or normal with |unbiased exponent| <= 62: then products of
 * such operands (times a table value in [2^-2, 2^2)) stay exact in FP32's
 * normal range. */
static inline int gemm_exp_ok(uint32_t x)
{
    uint32_t e = mts_f32_exp(x);
    return e == 0 ? (x & MTS_F32_MAN) == 0 : (e >= 127 - 62 && e <= 127 + 62);
}

/* Byte form of an E8 LUT with M <= 7 whose entries are all adj 0/1 with 7
 * mantissa bits and no zero flag: 2^M rows of 128 bytes adj << 7 | man7,
 * then one all-zero row (used for a = 0); NULL otherwise. */
unsigned char *gemm_lut_bytes(const mts_lut *lut, int transposed);
/* transposed: row mb holds the entries (ma, mb) for all ma (the row operand
 * of a swapped job is the caller's b). */

/* Packed operands of the SIMD LUT / FMAq kernels (pack.c). */
typedef struct gemm_lutpack {
    int NR;
    int mr;                 /* rows per tile (set by the kernel; the packing does not depend on it) */
    float *Tf;              /* float table (gather path) or NULL */
    unsigned char *TB;      /* byte table (VBMI path) or NULL */
    uint32_t *Ai;           /* [m][k]: ma << M (gather) or byte offset of the table row (VBMI; quad: | ea & 1) */
    float *As;              /* [m][k]: sign 2^(ea-127) (LUT; VBMI quad: ea's low bit cleared) or a (native) */
    uint32_t *Bi;           /* [panel][k][NR]: mb (gather) or mb << 16 (VBMI) */
    float *Bs;              /* [panel][k][NR]: sign 2^(eb-127) (LUT) or b (native); VBMI quad: [panel][k][2][64],
                               Sb then 2 Sb */
    unsigned char *Bq;      /* quad: [panel][k][NR]: byte 4j + v holds the mantissa of lane j of vector v */
    unsigned char *rowbad;  /* [m]: row holds an operand the kernels do not take (GEMM_BAD_*, or-ed; 0 none) */
    unsigned char *panbad;  /* [panel]; NULL when rawb */
    /* 1: B is not packed (Bi, Bs NULL): the byte-table kernels read the
     * job's quantized B directly and derive the two fields per vector
     * (vbmi_raw_b, gemm_simd.h). Only for byte tables and clean B. */
    int rawb;
    /* 1 (byte tables, packed B, NR = 4 GEMM_QUAD_W, asked for with vbmi =
     * 2): the layout of lut.c's quad kernel (VBMI, 64 lanes), which looks up
     * a panel's lanes with one permute (Bq), a row's exponent parity in Ai's
     * bit 0 picking Sb or 2 Sb (lut.c has the argument); or of its shuffle
     * kernel (AVX2, 32 lanes, no parity: Bs holds Sb). Bi is NULL then. */
    int quad;
    /* VBMI quad layout only: nnz[m], the nonzero elements of each row of A, and
     * when at most GEMM_SPARSE_FRAC of the job's A elements are nonzero,
     * row i's nonzero elements in column order at offsets i * k + t, t <
     * nnz[i], of three arrays (one allocation at nzt): nzt, the byte offset
     * of a's table row (Ai without the parity bit); nzb, the byte offset of
     * its Sb or 2 Sb in a panel's Bs (512 kk + 256 parity); nzs, As. NULL
     * otherwise. A zero a only adds a signed zero to a sum that is never -0,
     * so lut.c's sparse kernel leaves it out: same bits. */
    int *nnz;
    uint32_t *nzt, *nzb;
    float *nzs;
    /* 1: TB / Tf belong to the job's batch (gemm_job.tabs), not to lp. */
    int shared;
} gemm_lutpack;

/* The share of nonzero A elements of a job at or
 * below which the quad kernel's sparse form runs (lut.c measures it). */
#define GEMM_SPARSE_FRAC 0.8

/* Why a row or panel is flagged: GEMM_BAD_SPECIAL for inf, NaN or a
 * subnormal (never taken), GEMM_BAD_RANGE for a normal outside
 * gemm_exp_ok's fixed range (taken after all when the job's exponent
 * ranges allow it, which the packing can tell only with B packed). */
#define GEMM_BAD_SPECIAL 1
#define GEMM_BAD_RANGE 2

/* Packs g's operands (LUT or FP32M products), vectorised where the build
 * has SIMD (gemm_lutpack_make_scalar is the readable reference, same
 * bits: tests/test_gemm_pack.cpp). vbmi: 0 gather table, 1 byte table when
 * the LUT has one, 2 also the quad layout when B is packed and NR is
 * 4 GEMM_QUAD_W (64 on VBMI builds, 32 on AVX2 ones).
 * rawb asks to leave B unpacked; it is granted (lp->rawb) for byte tables
 * when B has no bad element (gemm_b_bad). Returns MTS_OK, 1 when the LUT has no exact SIMD form
 * (use the scalar kernel), or MTS_ENOMEM. */
int gemm_lutpack_make(const gemm_job *g, int NR, int vbmi, int rawb, gemm_lutpack *lp, mts_err *err);
/* g->bbad, scanning a deferred B (bbad -1) for it (dispatch.c). */
int gemm_b_bad(const gemm_job *g);
int gemm_lutpack_make_scalar(const gemm_job *g, int NR, int vbmi, int rawb, gemm_lutpack *lp, mts_err *err);

/* Whether a kernel with MR-row tiles and NR-lane panels should leave B
 * unpacked: packing a B panel pays when many row blocks reuse it from the
 * cache. With few row blocks (a convolution's 6 or 16 output channels
 * against batch x pixels), or a panel too long to stay cached (k = batch x
 * pixels in a weight gradient: the packed form is 8+ bytes a lane against
 * B's 4, and n = 6 is padded to 16 lanes) and still at most 8 row blocks,
 * writing and re-reading the packed form costs more than deriving it from B
 * in the kernel. With more row blocks every one of them would re-read B
 * from memory: 1024 x 1024 x 2048 took 317 ms unpacked and 113 ms packed,
 * 64 x 576 x 8192 53 ms and 44 ms, while 20 x 300 x 4096 (5 row blocks)
 * took 2.8 ms unpacked and 4.0 ms packed (LUT kernel, 2026-11-26). */
static inline int gemm_want_rawb(const gemm_job *g, int MR, int NR)
{
    int blocks = (g->m + MR - 1) / MR;
    return blocks <= 4 || (blocks <= 8 && (double)g->k * NR * 8.0 > 512.0 * 1024.0);
}
void gemm_lutpack_free(gemm_lutpack *lp);

/* Register tile widths of the SIMD kernels (0 on a scalar build), which
 * mts_gemm uses to decide whether to run the transposed problem. */
int gemm_lut_nr(void);
/* 1 when this build has the LUT kernel's quad form (AVX-512 VBMI, lut.c). */
int gemm_lut_quad(void);
int gemm_fmaq_nr(void);
int gemm_native_nr(void);

/* Workspace for packed operands (ws.c): like malloc / calloc (zero)
 * and free, but freed blocks are kept for the next call. */
void *gemm_ws_alloc(size_t bytes, int zero);
void gemm_ws_free(void *p);

/* Operand element (r, c) of opX where X is stored [rows][ld] or transposed. */
static inline float gemm_at(const float *X, int ld, int trans, int r, int c)
{
    return trans ? X[(size_t)c * (size_t)ld + (size_t)r] : X[(size_t)r * (size_t)ld + (size_t)c];
}

#endif
