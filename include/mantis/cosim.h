/* cosim.h - a cycle-level SystemC model of a systolic MAC array that replays
 * one layer's GEMM (gemmdump.h) through the user's multiplier, checked bit for
 * bit against mts_gemm with the same provider (docs/cosim.md).
 *
 * Array: rows x cols processing elements. Weight-stationary (WS): PE(r,c)
 * holds B[k0+r][n0+c] of the current tile, row r receives A[m][k0+r] with a
 * skew of r cycles, partial sums move down the columns. FP32 accumulation
 * feeds the previous k-tile's sums back into the column tops (the sequential
 * k order of mts_gemm); FMAq starts every column at +0 and adds the tile sums
 * in the output buffer (mts_fmaq_dot with chunk = rows). Output-stationary
 * (OS): PE(r,c) accumulates C[m0+r][n0+c] over all k (sequential FP32, or FMAq
 * chunks of the provider's chunk folded inside the PE).
 *
 * The SystemC kernel is process-wide: runs are serialised by a lock and the
 * one array module is reconfigured per run. Built without SystemC, every run
 * returns MTS_EUNSUPPORTED "built without SystemC". */
#ifndef MANTIS_COSIM_H
#define MANTIS_COSIM_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/gemm.h"
#include "mantis/gemmdump.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MTS_COSIM_WS = 0, MTS_COSIM_OS = 1 } mts_cosim_dataflow;

#define MTS_COSIM_MAX_SHOW 4

typedef struct mts_cosim_config {
    int rows, cols;             /* array size, each 1..256 */
    int dataflow;               /* mts_cosim_dataflow */
    const mts_provider *p;      /* products (LUT, MULOP or NATIVE) and accumulation (p->fmaq, qprod,
                                   qacc); WS uses chunk = rows, OS p->chunk. INT and BLAS are refused */
    /* Optional accumulator design: s' = acc(ud, product, s), the PE's FMAq
     * (e.g. mts_rtl_acc); NULL: mts_fmaq. Used only with p->fmaq. The output
     * buffer's chunk adds use mts_qadd. */
    uint32_t (*acc)(void *ud, uint32_t prod, uint32_t s);
    void *acc_ud;
    const char *vcd;            /* NULL: none; else sc_trace waveforms (path without ".vcd"); at
                                   most 1024 PEs and 2^22 PE-cycles (MTS_EINVAL otherwise) */
    int check;                  /* 1: compare with mts_gemm (same provider, chunk as above) */
    int test_wrong_order;       /* testing only: WS adds the k-tile sums in the order of the
                                   other accumulator (FP32: in the output buffer; FMAq: fed back
                                   into the column), which the check must catch */
} mts_cosim_config;

typedef struct mts_cosim_result {
    int m, n, k;
    uint64_t cycles, fill, compute, drain; /* cycles = fill + compute + drain, counted by the simulation */
    uint64_t macs;              /* m*n*k products */
    uint64_t pe_cycles;         /* cycles * rows * cols */
    double utilisation;         /* macs / pe_cycles */
    double macs_per_cycle;
    uint64_t toggles_a, toggles_b; /* bit flips at the PEs' multiplier inputs (operand codes) */
    uint64_t toggles_man;       /* of those, flips in the mantissa fields (what a significand design sees) */
    uint64_t products;          /* multiplier evaluations (= macs) */
    int operand_bits;           /* width of an operand code (mts_prov_format) */
    double seconds;             /* wall time of the simulation alone */
    int checked;                /* 1: compared with mts_gemm */
    size_t mismatches;          /* outputs that differ from mts_gemm */
    int nshow;
    int show_i[MTS_COSIM_MAX_SHOW], show_j[MTS_COSIM_MAX_SHOW];
    uint32_t got[MTS_COSIM_MAX_SHOW], want[MTS_COSIM_MAX_SHOW];
} mts_cosim_result;

/* 1 if this build has SystemC. */
int mts_cosim_available(void);

/* Runs g through the array. C (may be NULL) receives the m x n result
 * (row-major). MTS_EINVAL: bad array size, an array larger than the GEMM in
 * either dimension it tiles (WS: rows > k or cols > n; OS: rows > m or
 * cols > n), a provider it cannot model; MTS_EUNSUPPORTED without SystemC;
 * MTS_ENOMEM; MTS_EIO for the VCD file. A difference found by the check is
 * not an error: MTS_OK with r->mismatches > 0 and the first ones in r. */
int mts_cosim_run(const mts_cosim_config *c, const mts_gemmdump *g, float *C, mts_cosim_result *r, mts_err *err);

/* The closed form of the cycle count (docs/cosim.md) for an m x n x k GEMM on
 * a rows x cols array; fills fill, compute, drain and returns their sum. */
uint64_t mts_cosim_cycles(int dataflow, int rows, int cols, int m, int n, int k, uint64_t *fill,
                          uint64_t *compute, uint64_t *drain);

/* Energy of the multipliers from `mantis synth --json` output: pJ per
 * operation under uniform random operands scaled by the measured input
 * activity (toggles per product over half the design's input bits, the
 * uniform stream's expectation). *pj = total over the run. MTS_EIO/EFORMAT
 * when the file is missing or has no power.energy_pj_per_op / in_bits. */
int mts_cosim_energy(const char *synth_json, const mts_cosim_result *r, double *pj, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
