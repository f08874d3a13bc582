/* mul_opts.h - the multiplier-selection options every command shares:
 *   --mul NAME [--man-bits M | --format F]   a registered C model
 *   --lut FILE                               a LUT file (float or integer)
 *   --rtl FILE.v [--param K=V]... [--kind K] [--signed|--unsigned] a Verilog design
 * Defaults: --format bf16 (M = 7), or FP32 for --mul fp32. */
#ifndef MANTIS_MUL_OPTS_H
#define MANTIS_MUL_OPTS_H

#include "mantis/lut.h"
#include "mantis/mul.h"
#include "mantis/rtl.h"
#include "mantis/nn_arith.h"
#include "mantis/nn_train.h"


typedef struct mulsel {
    const char *mul, *lut, *rtl, *format, *kind;
    int man_bits; /* -1: not given */
    const char *params[MTS_RTL_MAX_PARAMS];
    int nparams;
    mts_rtl_sign int_sign; /* --signed / --unsigned (integer designs); AUTO: declared or inferred */
} mulsel;

/* The selected multiplier, opened. */
typedef struct mulhandle {
    mts_mulop op;      /* valid for float multipliers */
    mts_lut lut;       /* owned table when --lut (or an integer design) */
    int is_int;        /* integer table: use lut, not op */
    int is_acc;        /* RTL accumulator: y = Q_acc(p + s) via mts_rtl_acc, no op */
    void *rtl;         /* owned RTL handle, if any */
} mulhandle;

void mulsel_init(mulsel *s);

/* Consumes argv[*i] (and its value) if it is a selection option: returns 1,
 * 0 if not one, -1 (message in err) if its value is missing or bad. */
int mulsel_arg(mulsel *s, int argc, char **argv, int *i, mts_err *err);

/* Opens what s selects. Exactly one of --mul, --lut, --rtl must be given. */
int mulsel_open(const mulsel *s, mulhandle *h, mts_err *err);
void mulhandle_close(mulhandle *h);

/* The Verilator options --rtl/--kind/--param select (o->path = s->rtl, kind
 * parsed, parameters copied; everything else zero). MTS_EINVAL for a bad --kind. */
int mulsel_rtl_opts(const mulsel *s, mts_rtl_opts *o, mts_err *err);
/* Opens an --rtl selection into h (mul_opts_rtl.c): a mulop for float and
 * significand designs, the exhaustive table for integer ones, nothing more for
 * accumulators (h->is_acc). */
int mulsel_rtl_open(const mulsel *s, mulhandle *h, mts_err *err);

/* The opener the training drivers take (mts_arith_open_fn, nn_arith.h): a
 * spec whose mul is "rtl" opens sel's --rtl design (a new instance each
 * time, at most 3), anything else goes to mts_arith_open. Close with
 * mulsel_arith_close after the mts_arith it filled. */
typedef struct mulsel_arith {
    const mulsel *sel;
    mulhandle h[3];
    int n;
} mulsel_arith;
int mulsel_arith_open(void *ud, const mts_arith_spec *s, int threads, mts_arith *a, mts_err *err);
void mulsel_arith_close(mulsel_arith *m);

/* --mul-layer PATTERN=SPEC, repeatable (train and test): the rule texts,
 * each checked with mts_layer_rule_parse (nn_train.h) as it is read. */
typedef struct mul_layers {
    const char *rule[MTS_MAX_LAYER_RULES];
    int n;
} mul_layers;
/* Consumes argv[*i] and its value if it is --mul-layer: 1, 0 if not, -1
 * (message in err) for a missing or bad value. */
int mul_layers_arg(mul_layers *m, int argc, char **argv, int *i, mts_err *err);

/* Help text for the options above. */
extern const char mulsel_help[];

#endif
