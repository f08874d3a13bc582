/* lut_cmd.c - `mantis lut info FILE`: a LUT file's header and error metrics. */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/lut.h"
#include "mantis/metrics.h"

int mts_cmd_lut(int argc, char **argv)
{
    if (argc < 2 || mts_is_help(argv[1])) {
        printf("usage: mantis lut info FILE.lut [--json]\n"
               "Prints the header of a LUT file (format, model, entries), the exponent-adjustment\n"
               "histogram of float tables, and the error metrics of an exhaustive sweep.\n");
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "info") || argc < 3)
        return mts_cli_error("lut", "expected 'mantis lut info FILE.lut [--json]'");
    int json = argc > 3 && !strcmp(argv[3], "--json");
    if (argc > 3 + json) return mts_cli_error("lut", "unexpected argument '%s'", argv[argc - 1]);
    mts_lut lut;
    mts_err err;
    if (mts_lut_load(argv[2], &lut, &err)) return mts_cli_error("lut", "%s", err.msg);
    mts_metrics m;
    int rc = mts_metrics_lut(&lut, MTS_REF_EXACT, &m, &err);
    if (rc) {
        mts_lut_free(&lut);
        return mts_cli_error("lut", "%s", err.msg);
    }
    if (json) {
        mts_metrics_print_json(stdout, &m);
    } else {
        printf("file:       %s\nmodel:      %s\nentries:    %zu\n", argv[2], lut.model, lut.n);
        if (lut.kind == MTS_LUT_FLOAT) {
            char fname[32];
            mts_format_name(&lut.fmt, fname, sizeof fname);
            printf("kind:       float mantissa LUT\nformat:     %s (E=%d, M=%d, bias=%d, %s)\n", fname, lut.fmt.E,
                   lut.fmt.M, lut.fmt.bias, lut.fmt.ieee ? "inf/NaN" : "saturating");
            long hist[256] = {0}, zeros = 0;
            for (size_t i = 0; i < lut.n; i++) {
                if (lut.entry[i] & MTS_LUT_ZERO)
                    zeros++;
                else
                    hist[mts_lut_adj(lut.entry[i]) + 128]++;
            }
            printf("adjustment:");
            for (int k = 0; k < 256; k++)
                if (hist[k]) printf(" %+d:%ld", k - 128, hist[k]);
            printf("%s", zeros ? "" : "\n");
            if (zeros) printf(" zero:%ld\n", zeros);
        } else {
            printf("kind:       integer table, %d-bit %s operands\n", lut.int_bits,
                   lut.int_signed ? "signed" : "unsigned");
        }
        printf("\nerror metrics (exhaustive, docs/metrics.md):\n");
        mts_metrics_print_text(stdout, &m);
    }
    mts_lut_free(&lut);
    return 0;
}
