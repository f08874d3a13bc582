/* rtl.h - drop-in Verilog designs as Mantis multipliers and accumulators.
 *
 * mts_rtl_open reads a Verilog file with Verilator's XML front end, decides
 * which drop-in shape its top module has (docs/rtl.md), Verilates it into a
 * shared object with a generated extern "C" shim, caches that object by a
 * content hash (sources, top, parameters, Mantis and Verilator versions) and
 * loads it with dlopen. Every shape has two inputs and one output:
 *   SIG   a, b: M-bit mantissa fractions;   p: (1.a)(1.b), 2M+2 bits, 2M fraction bits
 *   FLOAT a, b, y: 1+E+M-bit codes of format (E, M, bias, ieee)
 *   INT   a, b: n-bit integers (n <= 8);   y: 2n-bit product
 *   ACC   p: Q_prod code, s: Q_acc code;   y: Q_acc(p + s) code (FMAq, fmaq.h)
 * A handle holds two model instances so sweeps use both cores; the per-call
 * entry points (mulop, int, acc) are thread-safe (they lock an instance).
 * Checking a design against its LUT and C models is verify.h's. */
#ifndef MANTIS_RTL_H
#define MANTIS_RTL_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/fmaq.h"
#include "mantis/format.h"
#include "mantis/lut.h"
#include "mantis/mul.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MTS_RTL_AUTO = 0,  /* detect from port names, widths and MANTIS_KIND */
    MTS_RTL_SIG = 1,   /* significand multiplier */
    MTS_RTL_FLOAT = 2, /* float multiplier */
    MTS_RTL_INT = 3,   /* integer multiplier */
    MTS_RTL_ACC = 4    /* FMAq accumulator */
} mts_rtl_kind;

#define MTS_RTL_MAX_PARAMS 16

/* How an integer design's operands are read (two's complement or not). */
typedef enum {
    MTS_RTL_SIGN_AUTO = 0,     /* declared (MANTIS_SIGNED / SIGNED), else inferred from the sweep */
    MTS_RTL_SIGN_SIGNED = 1,   /* --signed */
    MTS_RTL_SIGN_UNSIGNED = 2  /* --unsigned */
} mts_rtl_sign;

/* Where mts_rtl_info.int_signed came from. */
typedef enum {
    MTS_RTL_SIGNSRC_DEFAULT = 0,  /* unsigned, not measured (detect_only, or not an integer design) */
    MTS_RTL_SIGNSRC_DECLARED = 1, /* parameter MANTIS_SIGNED or SIGNED of the design */
    MTS_RTL_SIGNSRC_OPTION = 2,   /* --signed/--unsigned, or --param MANTIS_SIGNED=V */
    MTS_RTL_SIGNSRC_INFERRED = 3  /* the reading with the smaller MRED against the exact product */
} mts_rtl_signsrc;

typedef struct mts_rtl_opts {
    const char *path;         /* the design's Verilog file (any directory) */
    mts_rtl_kind kind;        /* MTS_RTL_AUTO, or what --kind forced */
    int nparams;              /* parameter overrides of the top module */
    const char *param[MTS_RTL_MAX_PARAMS]; /* each "NAME=VALUE" (Verilator -G syntax) */
    const char *cache_dir;    /* NULL: $MANTIS_CACHE/rtl, else ~/.cache/mantis/rtl */
    int verbose;              /* 1: print tool commands and build steps to stderr */
    int detect_only;          /* 1: stop after detection: mts_rtl_get_info works, nothing is
                                 built, and the evaluation functions refuse (MTS_EINVAL/zeros) */
    mts_rtl_sign int_sign;    /* INT designs: forced reading; AUTO: declared, else inferred.
                                 A parameter override MANTIS_SIGNED=V counts as forcing (and is
                                 passed to Verilator only when the top declares that parameter) */
} mts_rtl_opts;

/* What detection found; valid for the handle's lifetime. */
typedef struct mts_rtl_info {
    mts_rtl_kind kind;
    char top[128];            /* top module name */
    char in0[64], in1[64], out[64]; /* port names as written (a, b, y / p, s, y) */
    int w0, w1, wout;         /* their widths */
    mts_format fmt;           /* SIG, FLOAT: the multiplier's format (SIG: E = 8 unless MANTIS_E) */
    int int_bits, int_signed; /* INT */
    mts_rtl_signsrc sign_src; /* INT: where int_signed came from */
    double mred_unsigned, mred_signed; /* INT (model loaded): mean relative error distance of the
                                 design's exhaustive table against the exact product, reading the
                                 operands and product as unsigned / two's complement (pairs with
                                 exact product 0 skipped); -1 when not measured */
    mts_qfmt qprod, qacc;     /* ACC: formats of p and of s, y */
    int cache_hit;            /* 1: the shared object came from the cache, nothing was built */
    char hash[33];            /* cache key (hex) */
    char so_path[1024];       /* the loaded shared object */
    char name[64];            /* "rtl:<top>" for reports and LUT headers */
} mts_rtl_info;

typedef struct mts_rtl mts_rtl;

/* Parses "sig", "significand", "float", "int", "acc"/"accumulator" into *k.
 * Returns MTS_OK or MTS_EINVAL naming the accepted kinds. */
int mts_rtl_kind_parse(const char *s, mts_rtl_kind *k, mts_err *err);
/* "significand", "float", "int", "accumulator" (or "auto"). */
const char *mts_rtl_kind_name(mts_rtl_kind k);
/* "default", "declared", "option", "inferred". */
const char *mts_rtl_signsrc_name(mts_rtl_signsrc s);

/* 1 when Verilator (and a Yosys script) takes path as one file name as it
 * is: only letters, digits and ._/+,=@%:~- and no component starting with
 * '-'. Verilator's wrapper splits names on spaces and quotes, expands $ and
 * writes non-ASCII as character references, so other names go to the tools
 * through links (mts_rtl_open, mts_synth_run) or are refused by name. */
int mts_rtl_path_plain(const char *path);

/* Detects, builds (or finds in the cache) and loads the design. An integer
 * design whose signedness is neither declared nor forced is swept once and
 * read the way (unsigned or signed) whose MRED against the exact product is
 * smaller (ties: unsigned); both figures land in the info. Paths with
 * characters Verilator cannot take (spaces, quotes, $, `, ;, non-ASCII, a
 * leading '-') are handed to it through symbolic links in the scratch
 * directory; nothing reaches a shell. MTS_EINVAL:
 * bad options or a design that fits no shape (the message lists the shapes
 * and the ports found); MTS_ETOOL: Verilator or the compiler failed or is
 * missing (the message quotes the first error with file:line); MTS_EIO: cache
 * directory problems. On success *out must be freed with mts_rtl_close. */
int mts_rtl_open(const mts_rtl_opts *opts, mts_rtl **out, mts_err *err);
void mts_rtl_close(mts_rtl *r);
const mts_rtl_info *mts_rtl_get_info(const mts_rtl *r);

/* The parameters of the design's top module (chosen by the file rules, as
 * mts_rtl_open chooses it) that an override (--param NAME=VALUE, Verilator's
 * -G) can set, as declared: localparams are not listed. Runs only the first
 * pass of detection (Verilator's XML front end, no overrides): nothing is
 * elaborated or built. names gets up to max names (each < 64 characters), *n
 * their count. MTS_EIO: the file cannot be read; MTS_ETOOL: Verilator failed
 * (its first error); MTS_EINVAL: no top module can be chosen. */
int mts_rtl_params(const char *path, char (*names)[64], int max, int *n, mts_err *err);

/* Raw batch evaluation on port codes (any kind): y[i] = design(x0[i], x1[i]),
 * inputs masked to their port widths. Uses one instance; thread-safe. */
void mts_rtl_eval(mts_rtl *r, size_t n, const uint32_t *x0, const uint32_t *x1, uint64_t *y);

/* Raw exhaustive sweep (any kind), both cores: for i < 2^bits0, j < 2^bits1,
 * y[(i << bits1) | j] = design(i | or0, j | or1). bits0 + bits1 <= 28. */
int mts_rtl_sweep(mts_rtl *r, int bits0, uint32_t or0, int bits1, uint32_t or1, uint64_t *y, mts_err *err);

/* SIG, FLOAT: binds a multiplier that calls the design once per product
 * (FP32 bits in and out, like every mulop). SIG designs are wrapped in
 * mts_mul_classify + mts_mul_pack(MTS_OUT_FULL); FLOAT designs get
 * mts_fmt_quantize(RTZ) + encode on the way in and decode on the way out.
 * r must outlive op. MTS_EINVAL for INT and ACC designs. */
int mts_rtl_mulop(mts_rtl *r, mts_mulop *op, mts_err *err);

/* SIG, FLOAT: sweeps every mantissa pair (M <= 11) on both cores into a new
 * float LUT (lut.h). FLOAT designs are swept at several exponent pairs and
 * sign combinations away from overflow/underflow; when they disagree the
 * design is not LUT-representable: MTS_ENOTLUT with one input pair in hex.
 * INT: the 2^(2n)-entry integer table. ACC: MTS_EINVAL. */
int mts_rtl_lut(mts_rtl *r, mts_lut *lut, mts_err *err);

/* INT: *y = a * b through the design. a, b are integers in the operand range
 * (0..2^n-1, or -2^(n-1)..2^(n-1)-1 when signed); MTS_EINVAL otherwise. */
int mts_rtl_int_mul(mts_rtl *r, int32_t a, int32_t b, int32_t *y, mts_err *err);

/* ACC: y = Q_acc(p + s) through the design, FP32 bits in and out: p is taken
 * to Q_prod and s to Q_acc with mts_q, encoded with mts_q_encode, and the
 * design's output decoded with mts_q_decode. */
uint32_t mts_rtl_acc(mts_rtl *r, uint32_t p, uint32_t s);

#ifdef __cplusplus
}
#endif
#endif
