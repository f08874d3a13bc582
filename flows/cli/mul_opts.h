/* mul_opts.h - the multiplier-selection options every command shares:
 *   --mul NAME [--man-bits M | --format F]   a registered C model
 *   --lut FILE                               a LUT file (float or integer)
 *   --rtl FILE.v [--param K=V]... [--kind K] a Verilog design (when built with RTL support)
 * Defaults: --format bf16 (M = 7), or FP32 for --mul fp32. */
#ifndef MANTIS_MUL_OPTS_H
#define MANTIS_MUL_OPTS_H

#include "mantis/lut.h"
#include "mantis/mul.h"

#define MTS_MAX_PARAMS 16

typedef struct mts_mulsel {
    const char *mul, *lut, *rtl, *format, *kind;
    int man_bits; /* -1: not given */
    const char *params[MTS_MAX_PARAMS];
    int nparams;
} mts_mulsel;

/* The selected multiplier, opened. */
typedef struct mts_mulhandle {
    mts_mulop op;      /* valid for float multipliers */
    mts_lut lut;       /* owned table when --lut (or an integer design) */
    int is_int;        /* integer table: use lut, not op */
    int is_acc;        /* RTL accumulator: y = Q_acc(p + s) via mts_rtl_acc, no op */
    void *rtl;         /* owned RTL handle, if any */
} mts_mulhandle;

void mts_mulsel_init(mts_mulsel *s);

/* Consumes argv[*i] (and its value) if it is a selection option: returns 1,
 * 0 if not one, -1 (message in err) if its value is missing or bad. */
int mts_mulsel_arg(mts_mulsel *s, int argc, char **argv, int *i, mts_err *err);

/* Opens what s selects. Exactly one of --mul, --lut, --rtl must be given. */
int mts_mulsel_open(const mts_mulsel *s, mts_mulhandle *h, mts_err *err);
void mts_mulhandle_close(mts_mulhandle *h);

/* Help text for the options above. */
extern const char mts_mulsel_help[];

#endif
