/* nn_arith.h - the arithmetic of a training run: a provider (gemm.h)
 * described as text so a checkpoint can record it and `mantis test` can
 * reopen it, and what one provider does to one operand pair (the scalar
 * contract the STE replay and the operand tracer share with mts_gemm). */
#ifndef MANTIS_NN_ARITH_H
#define MANTIS_NN_ARITH_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/format.h"
#include "mantis/gemm.h"
#include "mantis/qat.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One provider as text. Multipliers: "fp32" (native FP32, our GEMM kernel,
 * fixed order), "blas" (OpenBLAS; order is BLAS's own), "bf16" (= model
 * "exact" at 8 exponent bits, 7 mantissa bits), or a registered C model at
 * (1,8,man_bits) or `format`, swept into a LUT with mts_lut_generate (models
 * that cannot be tabulated, or M > 11, run per product as MULOP); or a LUT
 * file. acc non-empty adds FMAq accumulation. mul "rtl" names a Verilog
 * design that only a caller's opener (mts_arith_open_fn) can open. */
typedef struct mts_arith_spec {
    char mul[64];
    char lut[512];
    char format[32];      /* "" : (1,8,man_bits) */
    int man_bits;         /* -1: 7 (23 for fp32) */
    char acc[16], prod[16]; /* FMAq formats "M7E4"; prod "" = same as acc */
    int acc_bias, prod_bias; /* -1: default 2^(E-1) */
    int chunk;            /* 0: 16 */
    int no_underflow;
} mts_arith_spec;

void mts_arith_spec_init(mts_arith_spec *s);

/* An opened provider with what it points to. Do not copy or move after
 * mts_arith_open (p.lut points into the struct). */
typedef struct mts_arith {
    mts_provider p;
    mts_lut lut;
    mts_mulop op;
    char desc[192];       /* e.g. "lut mbm e8m7 + fmaq M4E3b5/M4E3b5 chunk 16" */
    mts_qtab qtab;        /* integer tables: mts_arith_int_prepare's forms of p.lut */
    mts_int_grad igrad;
} mts_arith;

int mts_arith_open(const mts_arith_spec *s, int threads, mts_arith *a, mts_err *err);
void mts_arith_close(mts_arith *a);
/* For an opened integer provider (p.kind MTS_PROV_INT; nothing otherwise):
 * the code GEMM's table (qtab) and, when grads, the gradient tables
 * (mts_int_grad_build, default window) that the quantization-aware layers
 * read through their context. Freed by mts_arith_close. */
int mts_arith_int_prepare(mts_arith *a, int grads, mts_err *err);

/* Applies s's accumulator settings (acc, prod, acc_bias, prod_bias, chunk,
 * no_underflow; the multiplier fields are ignored) to p: fmaq = 1 with the
 * parsed formats when s->acc is non-empty, else fmaq = 0; chunk always (0:
 * 16). Appends " + fmaq acc ... chunk C" to desc (n bytes) when it adds FMAq.
 * MTS_EINVAL for an integer table with acc, or a bad format (p unchanged but
 * for chunk). What mts_arith_open does after opening the multiplier. */
int mts_arith_acc(const mts_arith_spec *s, mts_provider *p, char *desc, size_t n, mts_err *err);

/* An arith over a table in memory: takes *lut (left zeroed), provider LUT
 * for a float table or INT for an integer one, no FMAq, description what.
 * Never fails. */
void mts_arith_from_lut(mts_lut *lut, int threads, const char *what, mts_arith *a);

/* Opens a Verilog design (rtl.h) as `mantis train --rtl` uses it: float
 * and significand designs multiply every product through the Verilated
 * model (provider MULOP, a serial mulop), integer designs through their
 * exhaustive table (INT). No FMAq (apply mts_arith_acc). *rtl receives the
 * design handle, which a->p uses: close it with mts_rtl_close after
 * mts_arith_close. MTS_EINVAL for an accumulator design; otherwise
 * mts_rtl_open's and mts_rtl_mulop/mts_rtl_lut's errors (*rtl NULL). */
struct mts_rtl_opts;
struct mts_rtl;
int mts_arith_open_rtl(const struct mts_rtl_opts *o, int threads, mts_arith *a, struct mts_rtl **rtl, mts_err *err);
/* "key=value;..." text of a spec, and back (for checkpoints). */
void mts_arith_spec_str(const mts_arith_spec *s, char *buf, size_t n);
int mts_arith_spec_parse(const char *str, mts_arith_spec *s, mts_err *err);

/* How the drivers (nn_train.h) open a spec: mts_arith_open, or a caller's
 * function that also opens what the library cannot (the CLI's --rtl
 * designs). It fills a (closed later with mts_arith_close; anything else it
 * opened is the caller's to close) and returns MTS_OK or an error in err. */
typedef int (*mts_arith_open_fn)(void *ud, const mts_arith_spec *s, int threads, mts_arith *a, mts_err *err);

/* The format of an operand as provider p's multiplier receives it:
 *   LUT   the LUT's own format (operands are quantized RNE into in_fmt, or
 *         straight into the LUT's format when in_fmt is all-zero, and a
 *         wider in_fmt is then truncated RTZ into the LUT's format: AMSim
 *         reads only the LUT's bits);
 *   MULOP in_fmt, or the mulop's own format when in_fmt is all-zero;
 *   NATIVE, BLAS, INT: e8m23 (FP32 operands, not quantized to a float format). */
mts_format mts_prov_format(const mts_provider *p);
/* Operand x (FP32 bits) as p's multiplier receives it: quantized exactly as
 * mts_gemm packs it (see mts_prov_format); x itself for NATIVE/BLAS/INT. */
uint32_t mts_prov_operand(const mts_provider *p, uint32_t x);
/* The product the provider's GEMM forms for one pair of FP32 operands: each
 * quantized with mts_prov_operand, then multiplied as the kernels do (native
 * FMAq providers use the "fp32" model, gemm.h). Not for INT providers. */
uint32_t mts_prov_mul(const mts_provider *p, uint32_t a, uint32_t b);

#ifdef __cplusplus
}
#endif
#endif
