/* lut.h - mantissa lookup tables (ApproxTrain Algorithm 1, generalised) and
 * integer product tables (TFApprox style), and their file format.
 *
 * A float LUT at M bits has 2^(2M) entries indexed (ma << M) | mb. Each entry
 * is a uint32_t:
 *   bits 22..0  product mantissa in FP32 field position (up to 23 bits)
 *   bit  23     zero flag: the product of these significands is exactly 0
 *   bits 31..24 exponent adjustment, int8 two's complement: the product's
 *               exponent minus the sum of the operand exponents (0 or 1 for
 *               a product in [1,4); -1, -2, ... for products below 1.0)
 * File format: docs/lut-format.md. */
#ifndef MANTIS_LUT_H
#define MANTIS_LUT_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/format.h"
#include "mantis/hd.h"
#include "mantis/mul.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MTS_LUT_ZERO 0x00800000u
#define MTS_LUT_MAN 0x007FFFFFu
static inline MTS_HD int mts_lut_adj(uint32_t entry) { return (int)(int8_t)(entry >> 24); }

typedef enum { MTS_LUT_FLOAT = 1, MTS_LUT_INT = 2 } mts_lut_kind;

typedef struct mts_lut {
    mts_lut_kind kind;
    mts_format fmt;    /* FLOAT: the multiplier's format (E, M, bias, ieee) */
    int int_bits;      /* INT: operand width n (1..8) */
    int int_signed;    /* INT: 1 if operands and products are two's complement */
    char model[64];    /* name of what was swept (model, RTL design, import) */
    size_t n;          /* entries: 2^(2M) or 2^(2n) */
    uint32_t *entry;   /* FLOAT: packed entries above. INT: product as int32
                          bit pattern, index (a << n) | b with a, b the n-bit codes */
} mts_lut;

/* Sweeps all 2^(2M) mantissa pairs of op (M = op->fmt.M, 1..11) into a new
 * float LUT. The sweep evaluates every pair at several exponent pairs and
 * both sign combinations; if the product's mantissa, adjustment or sign rule
 * differs between them the model is not LUT-representable and MTS_ENOTLUT
 * names one input pair (hex) where it differs. */
int mts_lut_generate(const mts_mulop *op, mts_lut *lut, mts_err *err);

/* Builds an integer table from fn on n-bit operands (1..8): fn gets the
 * operand values (two's complement codes sign-extended when is_signed); the
 * table is named name. MTS_EINVAL for n outside 1..8. */
int mts_lut_generate_int(int n, int is_signed, int32_t (*fn)(void *ctx, int32_t a, int32_t b),
                         void *ctx, const char *name, mts_lut *lut, mts_err *err);

/* Frees a table's entries (the struct itself is the caller's). */
void mts_lut_free(mts_lut *lut);

/* Writes lut to path atomically (temp file + rename). */
int mts_lut_save(const mts_lut *lut, const char *path, mts_err *err);

/* Loads and validates a LUT file: magic, version, kind, widths, size,
 * checksums. Each malformation is a distinct message naming the file. */
int mts_lut_load(const char *path, mts_lut *lut, mts_err *err);

/* Imports an ApproxTrain NAME_M.bin as a (1,8,M) float LUT: 2^(2M) entries,
 * index (ma << M) | mb, each 1 byte (bit 7 carry, low M bits mantissa;
 * M <= 7) or, from older revisions, 4 bytes little-endian (bit 31 carry,
 * bits 22..0 the FP32 mantissa field). *entry_bytes is in/out: 1 or 4 reads
 * that layout; 0 infers it from the file size only where the size fits no
 * other layout at M-1 or M+1 (MTS_EINVAL naming both layouts otherwise).
 * On success *entry_bytes is the layout read. MTS_EFORMAT for a size that
 * fits neither, an entry with bits outside carry and M mantissa bits, or an
 * all-zero table (every product exactly 1.0: a blank file, no multiplier). */
int mts_lut_import_approxtrain(const char *path, int M, int *entry_bytes, mts_lut *lut, mts_err *err);

/* Writes a float LUT (M <= 7) as 1-byte ApproxTrain entries. MTS_EINVAL for
 * other tables; MTS_EUNSUPPORTED naming the first entry the format cannot
 * hold (a zero product, an adjustment other than 0/1, more than M bits). */
int mts_lut_export_approxtrain(const mts_lut *lut, const char *path, mts_err *err);

/* TFApprox/EvoApprox 8-bit tables: 65,536 little-endian uint16 products,
 * index (a << 8) | b; signed tables hold the 16-bit two's complement.
 * Import: MTS_EFORMAT for any other size. Export: MTS_EINVAL unless an 8-bit
 * integer table, MTS_EUNSUPPORTED for a product that does not fit 16 bits. */
int mts_lut_import_8bit(const char *path, int is_signed, mts_lut *lut, mts_err *err);
int mts_lut_export_8bit(const mts_lut *lut, const char *path, mts_err *err);

/* A mulop that multiplies through the float LUT with AMSim (lut must outlive op). */
void mts_mulop_lut(mts_mulop *op, const mts_lut *lut);

#ifdef __cplusplus
}
#endif
#endif
