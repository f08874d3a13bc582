/* lutgen_cmd.c - `mantis lutgen`: sweep a multiplier into a LUT file, or
 * convert peers' tables to and from the Mantis format. */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/rtl.h"
#include "mul_opts.h"

static const char help[] =
    "usage: mantis lutgen (--mul NAME [--man-bits M | --format F] | --rtl FILE.v) -o FILE.lut\n"
    "       mantis lutgen --import-approxtrain NAME_M.bin --man-bits M -o FILE.lut\n"
    "       mantis lutgen --import-8bit TABLE.bin [--signed] -o FILE.lut\n"
    "       mantis lutgen --int-exact N [--signed] -o FILE.lut\n"
    "       mantis lutgen --lut FILE.lut (--export-approxtrain OUT.bin | --export-8bit OUT.bin)\n"
    "Sweeps every mantissa pair (M <= 11) into a mantissa LUT, checking that the multiplier's\n"
    "mantissa does not depend on the exponents; refuses (exit 1) when it does.\n\noptions:\n"
    "  -o FILE           output LUT file (written atomically)\n";

static int32_t exact_int(void *ctx, int32_t a, int32_t b)
{
    (void)ctx;
    return a * b;
}

int mts_cmd_lutgen(int argc, char **argv)
{
    mts_mulsel sel;
    mts_mulsel_init(&sel);
    mts_err err;
    const char *out = NULL, *imp_at = NULL, *imp_8 = NULL, *exp_at = NULL, *exp_8 = NULL, *int_exact = NULL;
    int is_signed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (mts_is_help(a)) {
            printf("%s%s", help, mts_mulsel_help);
            return 0;
        }
        const char **slot = !strcmp(a, "-o") ? &out
                            : !strcmp(a, "--import-approxtrain") ? &imp_at
                            : !strcmp(a, "--import-8bit") ? &imp_8
                            : !strcmp(a, "--export-approxtrain") ? &exp_at
                            : !strcmp(a, "--export-8bit") ? &exp_8
                            : !strcmp(a, "--int-exact") ? &int_exact
                                                          : NULL;
        if (slot) {
            if (i + 1 >= argc) return mts_cli_error("lutgen", "option %s needs a value", a);
            *slot = argv[++i];
            continue;
        }
        if (!strcmp(a, "--signed")) {
            is_signed = 1;
            continue;
        }
        int rc = mts_mulsel_arg(&sel, argc, argv, &i, &err);
        if (rc < 0) return mts_cli_error("lutgen", "%s", err.msg);
        if (rc == 0) return mts_cli_error("lutgen", "unknown option '%s' (see mantis lutgen --help)", a);
    }
    mts_lut lut;
    memset(&lut, 0, sizeof lut);
    int rc;
    if (exp_at || exp_8) {
        if (!sel.lut) return mts_cli_error("lutgen", "--export-* needs --lut FILE.lut");
        if (mts_lut_load(sel.lut, &lut, &err)) return mts_cli_error("lutgen", "%s", err.msg);
        rc = exp_at ? mts_lut_export_approxtrain(&lut, exp_at, &err) : mts_lut_export_8bit(&lut, exp_8, &err);
        mts_lut_free(&lut);
        if (rc) return mts_cli_error("lutgen", "%s", err.msg);
        return 0;
    }
    if (!out) return mts_cli_error("lutgen", "missing -o FILE.lut (see mantis lutgen --help)");
    if (imp_at) {
        if (sel.man_bits < 0) return mts_cli_error("lutgen", "--import-approxtrain needs --man-bits M");
        rc = mts_lut_import_approxtrain(imp_at, sel.man_bits, &lut, &err);
    } else if (imp_8) {
        rc = mts_lut_import_8bit(imp_8, is_signed, &lut, &err);
    } else if (int_exact) {
        long n;
        if (mts_parse_int(int_exact, 1, 8, &n))
            return mts_cli_error("lutgen", "--int-exact '%s': expected operand bits 1..8", int_exact);
        char name[32];
        snprintf(name, sizeof name, "exact-int%ld%s", n, is_signed ? "s" : "u");
        rc = mts_lut_generate_int((int)n, is_signed, exact_int, NULL, name, &lut, &err);
    } else {
        mts_mulhandle h;
        if (mts_mulsel_open(&sel, &h, &err)) return mts_cli_error("lutgen", "%s", err.msg);
    if (h.is_acc) {
        mts_mulhandle_close(&h);
        return mts_cli_error("lutgen", "%s: accumulator designs have no LUT or multiplier metrics; use mantis verify",
                             sel.rtl);
    }
        if (h.is_int) { /* integer designs arrive tabulated */
            lut = h.lut;
            memset(&h.lut, 0, sizeof h.lut);
            rc = MTS_OK;
        } else if (h.rtl) {
            rc = mts_rtl_lut(h.rtl, &lut, &err);
        } else {
            rc = mts_lut_generate(&h.op, &lut, &err);
        }
        mts_mulhandle_close(&h);
        if (rc == MTS_ENOTLUT) {
            fprintf(stderr, "mantis lutgen: %s\n", err.msg);
            return 1;
        }
    }
    if (rc) return mts_cli_error("lutgen", "%s", err.msg);
    rc = mts_lut_save(&lut, out, &err);
    mts_lut_free(&lut);
    if (rc) return mts_cli_error("lutgen", "%s", err.msg);
    return 0;
}
