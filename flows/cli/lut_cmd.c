/* lut_cmd.c - `mantis lut info FILE`: a LUT file's header and error metrics. */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/lut.h"
#include "mantis/metrics.h"

static const char help[] = "usage: mantis lut info FILE.lut [--json OUT|-]\n"
                           "Prints the header of a LUT file (format, model, entries), the exponent-adjustment\n"
                           "histogram of float tables, and the error metrics of an exhaustive sweep.\n"
                           "  --json OUT|-   also write the metrics as JSON to OUT (atomically), or to stdout\n"
                           "                 with '-' (the text then goes to stderr)\n";

/* The header lines of `lut info`: what was swept, in which format, and for a
 * float table how its entries' exponent adjustments are distributed. */
static void print_header(FILE *f, const char *path, const mts_lut *lut)
{
    fprintf(f, "file:       %s\nmodel:      %s\nentries:    %zu\n", path, lut->model, lut->n);
    if (lut->kind != MTS_LUT_FLOAT) {
        fprintf(f, "kind:       integer table, %d-bit %s operands\n", lut->int_bits,
               lut->int_signed ? "signed" : "unsigned");
        return;
    }
    char fname[32];
    mts_format_name(&lut->fmt, fname, sizeof fname);
    fprintf(f, "kind:       float mantissa LUT\nformat:     %s (E=%d, M=%d, bias=%d, %s)\n", fname, lut->fmt.E,
           lut->fmt.M, lut->fmt.bias, lut->fmt.ieee ? "inf/NaN" : "saturating");
    long hist[256] = {0}, zeros = 0;
    for (size_t i = 0; i < lut->n; i++) {
        if (lut->entry[i] & MTS_LUT_ZERO)
            zeros++;
        else
            hist[mts_lut_adj(lut->entry[i]) + 128]++;
    }
    fprintf(f, "adjustment:");
    for (int k = 0; k < 256; k++)
        if (hist[k]) fprintf(f, " %+d:%ld", k - 128, hist[k]);
    if (zeros) fprintf(f, " zero:%ld", zeros);
    fprintf(f, "\n");
}

static void metrics_json(FILE *f, void *m) { mts_metrics_print_json(f, m); }

int cmd_lut(int argc, char **argv)
{
    /* --help anywhere (also after `info`) prints the usage: it is never a file name. */
    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            printf("%s", help);
            return 0;
        }
    if (argc < 2) {
        printf("%s", help);
        return 2;
    }
    if (strcmp(argv[1], "info")) return cli_error("lut", "expected 'mantis lut info FILE.lut [--json OUT|-]'");
    const char *path = NULL, *json = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            if (i + 1 >= argc) return cli_error("lut", "--json needs OUT or - (stdout)");
            json = argv[++i];
        } else if (!path && argv[i][0] != '-')
            path = argv[i];
        else
            return cli_error("lut", "unexpected argument '%s'", argv[i]);
    }
    if (!path) return cli_error("lut", "expected 'mantis lut info FILE.lut [--json OUT|-]'");
    mts_lut lut;
    mts_err err;
    int rc = mts_lut_load(path, &lut, &err);
    if (rc) return cli_fail("lut", rc, &err);
    mts_metrics m;
    rc = mts_metrics_lut(&lut, MTS_REF_EXACT, &m, &err);
    if (rc) {
        mts_lut_free(&lut);
        return cli_fail("lut", rc, &err);
    }
    FILE *txt = cli_text(json, NULL);
    print_header(txt, path, &lut);
    fprintf(txt, "\nerror metrics (exhaustive, docs/metrics.md):\n");
    mts_metrics_print_text(txt, &m);
    mts_lut_free(&lut);
    return cli_output("lut", json, metrics_json, &m);
}
