/* lut_cmd.c - `mantis lut info FILE`: a LUT file's header and error metrics. */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/lut.h"
#include "mantis/metrics.h"

static const char help[] = "usage: mantis lut info FILE.lut [--json]\n"
                           "Prints the header of a LUT file (format, model, entries), the exponent-adjustment\n"
                           "histogram of float tables, and the error metrics of an exhaustive sweep.\n";

/* The header lines of `lut info`: what was swept, in which format, and for a
 * float table how its entries' exponent adjustments are distributed. */
static void print_header(const char *path, const mts_lut *lut)
{
    printf("file:       %s\nmodel:      %s\nentries:    %zu\n", path, lut->model, lut->n);
    if (lut->kind != MTS_LUT_FLOAT) {
        printf("kind:       integer table, %d-bit %s operands\n", lut->int_bits,
               lut->int_signed ? "signed" : "unsigned");
        return;
    }
    char fname[32];
    mts_format_name(&lut->fmt, fname, sizeof fname);
    printf("kind:       float mantissa LUT\nformat:     %s (E=%d, M=%d, bias=%d, %s)\n", fname, lut->fmt.E,
           lut->fmt.M, lut->fmt.bias, lut->fmt.ieee ? "inf/NaN" : "saturating");
    long hist[256] = {0}, zeros = 0;
    for (size_t i = 0; i < lut->n; i++) {
        if (lut->entry[i] & MTS_LUT_ZERO)
            zeros++;
        else
            hist[mts_lut_adj(lut->entry[i]) + 128]++;
    }
    printf("adjustment:");
    for (int k = 0; k < 256; k++)
        if (hist[k]) printf(" %+d:%ld", k - 128, hist[k]);
    if (zeros) printf(" zero:%ld", zeros);
    printf("\n");
}

int mts_cmd_lut(int argc, char **argv)
{
    /* --help anywhere (also after `info`) prints the usage: it is never a file name. */
    for (int i = 1; i < argc; i++)
        if (mts_is_help(argv[i])) {
            printf("%s", help);
            return 0;
        }
    if (argc < 2) {
        printf("%s", help);
        return 2;
    }
    if (strcmp(argv[1], "info")) return mts_cli_error("lut", "expected 'mantis lut info FILE.lut [--json]'");
    const char *path = NULL;
    int json = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!path && argv[i][0] != '-')
            path = argv[i];
        else
            return mts_cli_error("lut", "unexpected argument '%s'", argv[i]);
    }
    if (!path) return mts_cli_error("lut", "expected 'mantis lut info FILE.lut [--json]'");
    mts_lut lut;
    mts_err err;
    if (mts_lut_load(path, &lut, &err)) return mts_cli_error("lut", "%s", err.msg);
    mts_metrics m;
    int rc = mts_metrics_lut(&lut, MTS_REF_EXACT, &m, &err);
    if (rc) {
        mts_lut_free(&lut);
        return mts_cli_error("lut", "%s", err.msg);
    }
    if (json) {
        mts_metrics_print_json(stdout, &m);
    } else {
        print_header(path, &lut);
        printf("\nerror metrics (exhaustive, docs/metrics.md):\n");
        mts_metrics_print_text(stdout, &m);
    }
    mts_lut_free(&lut);
    return 0;
}
