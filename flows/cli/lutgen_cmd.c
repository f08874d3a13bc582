/* lutgen_cmd.c - `mantis lutgen`: sweep a multiplier into a LUT file, or
 * convert peers' tables to and from the Mantis format. */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/intmul.h"
#include "mantis/rtl.h"
#include "mul_opts.h"

static const char help[] =
    "usage: mantis lutgen (--mul NAME [--man-bits M | --format F] | --rtl FILE.v) -o FILE.lut\n"
    "       mantis lutgen --import-approxtrain NAME_M.bin --man-bits M [--entry-bytes 1|4] -o FILE.lut\n"
    "       mantis lutgen --import-8bit TABLE.bin [--signed] -o FILE.lut\n"
    "       mantis lutgen --int-exact N [--signed] -o FILE.lut\n"
    "       mantis lutgen --lut FILE.lut (--export-approxtrain OUT.bin | --export-8bit OUT.bin)\n"
    "Sweeps every mantissa pair (M <= 11) into a mantissa LUT, checking that the multiplier's\n"
    "mantissa does not depend on the exponents; refuses (exit 1) when it does.\n\noptions:\n"
    "  -o FILE           output LUT file (written atomically)\n"
    "  --entry-bytes B   ApproxTrain entry size: 1 (bit 7 carry, low M bits mantissa) or 4\n"
    "                    (older revisions: bit 31 carry, bits 22..0 mantissa). Without it the\n"
    "                    size decides only where no other (size, M) layout fits the file.\n";

typedef struct lutgen_args {
    mulsel sel;
    const char *out, *imp_at, *imp_8, *exp_at, *exp_8, *int_exact, *entry_bytes;
    int is_signed;
} lutgen_args;

/* Fills a from argv: 1 parsed, 0 help printed, -1 error printed. */
static int parse_args(int argc, char **argv, lutgen_args *a)
{
    memset(a, 0, sizeof *a);
    mulsel_init(&a->sel);
    mts_err err;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (cli_is_help(s)) {
            printf("%s%s", help, mulsel_help);
            return 0;
        }
        const char **slot = !strcmp(s, "-o") ? &a->out
                            : !strcmp(s, "--import-approxtrain") ? &a->imp_at
                            : !strcmp(s, "--import-8bit") ? &a->imp_8
                            : !strcmp(s, "--export-approxtrain") ? &a->exp_at
                            : !strcmp(s, "--export-8bit") ? &a->exp_8
                            : !strcmp(s, "--int-exact") ? &a->int_exact
                            : !strcmp(s, "--entry-bytes") ? &a->entry_bytes
                                                          : NULL;
        if (slot) {
            if (i + 1 >= argc) {
                cli_error("lutgen", "option %s needs a value", s);
                return -1;
            }
            *slot = argv[++i];
            continue;
        }
        if (!strcmp(s, "--signed")) { /* --import-8bit / --int-exact, and an --rtl design's operands */
            a->is_signed = 1;
            a->sel.int_sign = MTS_RTL_SIGN_SIGNED;
            continue;
        }
        int rc = mulsel_arg(&a->sel, argc, argv, &i, &err);
        if (rc <= 0) {
            if (rc < 0)
                cli_error("lutgen", "%s", err.msg);
            else
                cli_error("lutgen", "unknown option '%s' (see mantis lutgen --help)", s);
            return -1;
        }
    }
    return 1;
}

/* --export-*: a Mantis LUT file to a peer's table. */
static int run_export(const lutgen_args *a)
{
    mts_lut lut;
    mts_err err;
    if (!a->sel.lut) return cli_error("lutgen", "--export-* needs --lut FILE.lut");
    int rc = mts_lut_load(a->sel.lut, &lut, &err);
    if (rc) return cli_fail("lutgen", rc, &err);
    rc = a->exp_at ? mts_lut_export_approxtrain(&lut, a->exp_at, &err) : mts_lut_export_8bit(&lut, a->exp_8, &err);
    mts_lut_free(&lut);
    return rc ? cli_fail("lutgen", rc, &err) : 0;
}

/* --import-approxtrain: reads the entry size given (or the one only the file
 * size allows) and says on stdout which layout it read. */
static int import_approxtrain(const lutgen_args *a, mts_lut *lut, mts_err *err)
{
    if (a->sel.man_bits < 0) return mts_fail(err, MTS_EINVAL, "--import-approxtrain needs --man-bits M");
    long eb = 0;
    if (a->entry_bytes && (mts_parse_int(a->entry_bytes, 1, 4, &eb) || (eb != 1 && eb != 4)))
        return mts_fail(err, MTS_EINVAL, "--entry-bytes '%s': expected 1 or 4", a->entry_bytes);
    int bytes = (int)eb;
    int rc = mts_lut_import_approxtrain(a->imp_at, a->sel.man_bits, &bytes, lut, err);
    if (rc) return rc;
    printf("%s: read %zu %d-byte ApproxTrain entries at M=%d (%s)%s\n", a->imp_at, lut->n, bytes, a->sel.man_bits,
           bytes == 1 ? "bit 7 carry, low M bits mantissa" : "bit 31 carry, bits 22..0 mantissa",
           eb ? "" : ", the only layout of this size");
    return MTS_OK;
}

/* --mul / --lut / --rtl: sweep the selected multiplier. MTS_ENOTLUT when its
 * mantissa depends on the exponents or signs. */
static int sweep(const lutgen_args *a, mts_lut *lut, mts_err *err)
{
    mulhandle h;
    int rc = mulsel_open(&a->sel, &h, err);
    if (rc) return rc;
    if (h.is_acc) {
        rc = mts_fail(err, MTS_EINVAL, "%s: accumulator designs have no LUT or multiplier metrics; use mantis verify",
                      a->sel.rtl);
    } else if (h.is_int) { /* integer designs arrive tabulated */
        *lut = h.lut;
        memset(&h.lut, 0, sizeof h.lut);
    } else if (h.rtl) {
        rc = mts_rtl_lut(h.rtl, lut, err);
    } else {
        rc = mts_lut_generate(&h.op, lut, err);
    }
    mulhandle_close(&h);
    return rc;
}

/* Builds the table the options ask for. */
static int build(const lutgen_args *a, mts_lut *lut, mts_err *err)
{
    if (a->imp_at) return import_approxtrain(a, lut, err);
    if (a->imp_8) return mts_lut_import_8bit(a->imp_8, a->is_signed, lut, err);
    if (a->int_exact) {
        long n;
        if (mts_parse_int(a->int_exact, 1, 8, &n))
            return mts_fail(err, MTS_EINVAL, "--int-exact '%s': expected operand bits 1..8", a->int_exact);
        return mts_intmul_exact_lut((int)n, a->is_signed, lut, err);
    }
    return sweep(a, lut, err);
}

int cmd_lutgen(int argc, char **argv)
{
    lutgen_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc <= 0) return rc ? 2 : 0;
    if (a.exp_at || a.exp_8) return run_export(&a);
    if (!a.out) return cli_error("lutgen", "missing -o FILE.lut (see mantis lutgen --help)");
    mts_lut lut;
    mts_err err;
    memset(&lut, 0, sizeof lut);
    rc = build(&a, &lut, &err);
    if (rc == MTS_ENOTLUT) { /* a negative result, not a failure to run */
        fprintf(stderr, "mantis lutgen: %s\n", err.msg);
        return 1;
    }
    if (rc) return cli_fail("lutgen", rc, &err);
    rc = mts_lut_save(&lut, a.out, &err);
    mts_lut_free(&lut);
    return rc ? cli_fail("lutgen", rc, &err) : 0;
}
