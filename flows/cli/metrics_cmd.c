/* metrics_cmd.c - `mantis metrics`: error metrics from an exhaustive sweep. */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/metrics.h"
#include "mul_opts.h"

static const char help[] =
    "usage: mantis metrics (--mul NAME [--man-bits M] | --lut FILE | --rtl FILE.v) [--ref exact|rne]\n"
    "                      [--json OUT|-]\n"
    "Sweeps every mantissa pair (float) or operand pair (integer) and reports error rate, MED,\n"
    "NMED, MRED, worst-case error, bias and max relative error (definitions: docs/metrics.md).\n"
    "--ref exact: against the infinitely precise product (default); rne: against the exact\n"
    "product rounded to the format, so only the approximation counts.\n"
    "--json OUT|-: also write the metrics as JSON to OUT (atomically), or to stdout with '-'\n"
    "(the text then goes to stderr).\n\noptions:\n";

static void metrics_json(FILE *f, void *m) { mts_metrics_print_json(f, m); }

int cmd_metrics(int argc, char **argv)
{
    mulsel sel;
    mulsel_init(&sel);
    mts_err err;
    const char *json = NULL;
    mts_metric_ref ref = MTS_REF_EXACT;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("%s%s", help, mulsel_help);
            return 0;
        }
        if (!strcmp(argv[i], "--json")) {
            if (i + 1 >= argc) return cli_error("metrics", "--json needs OUT or - (stdout)");
            json = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--ref")) {
            const char *v = i + 1 < argc ? argv[++i] : "";
            if (!strcmp(v, "exact"))
                ref = MTS_REF_EXACT;
            else if (!strcmp(v, "rne"))
                ref = MTS_REF_RNE;
            else
                return cli_error("metrics", "--ref '%s': expected exact or rne", v);
            continue;
        }
        int rc = mulsel_arg(&sel, argc, argv, &i, &err);
        if (rc < 0) return cli_error("metrics", "%s", err.msg);
        if (rc == 0) return cli_error("metrics", "unknown option '%s' (see mantis metrics --help)", argv[i]);
    }
    mulhandle h;
    int rc = mulsel_open(&sel, &h, &err);
    if (rc) return cli_fail("metrics", rc, &err);
    if (h.is_acc) {
        mulhandle_close(&h);
        return cli_error("metrics", "%s: accumulator designs have no LUT or multiplier metrics; use mantis verify",
                             sel.rtl);
    }
    mts_metrics m;
    rc = h.is_int ? mts_metrics_int_lut(&h.lut, &m, &err) : mts_metrics_mulop(&h.op, ref, &m, &err);
    mulhandle_close(&h);
    if (rc) return cli_fail("metrics", rc, &err);
    mts_metrics_print_text(cli_text(json, NULL), &m);
    return cli_output("metrics", json, metrics_json, &m);
}
