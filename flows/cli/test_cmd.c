/* test_cmd.c - `mantis test`: evaluates a checkpoint of `mantis train` on
 * the test split, with the multiplier it was trained for or another one
 * ("train with X, test with Y", ApproxTrain Table IV). The evaluation is
 * the library's mts_test_run (sim/nn/test_run.c); this file parses and prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/gemmdump.h"
#include "mantis/gpu.h"
#include "mantis/nn_train.h"
#include "mul_opts.h"

#define CMD "test"

static const char usage_text[] =
    "usage: mantis test --checkpoint DIR [options]\n"
    "  --mul NAME | --lut FILE | --rtl FILE.v [--man-bits M | --format F]   evaluation multiplier\n"
    "                     (default: the run's own test multiplier)\n"
    "  --acc M7E4 [--acc-bias B] [--prod M7E4] [--prod-bias B] [--chunk N] [--no-underflow]\n"
    "  --mul-layer PATTERN=SPEC  per-layer multiplier (repeatable; as mantis train). The run's own\n"
    "                     rules apply first unless --mul/--lut/--rtl replaces the run's multiplier\n"
    "  --data-dir DIR     (default ./data/<data set of the run>)\n"
    "  --test-subset N    evaluate the first N test samples\n"
    "  --threads N        GEMM threads (results do not depend on it)\n"
    "  --device D         cpu | cuda | auto (default cpu): where evaluation runs (same results;\n"
    "                     on cuda whole on the device where mantis train's resident path would be,\n"
    "                     else only the GEMMs; the JSON's gpu_path says which)\n"
    "  --json OUT|-       write {\"test_acc\": ...} to OUT (atomically), or to stdout with '-'\n"
    "                     (the text then goes to stderr)\n"
    "  --dump-gemm LAYER:FILE  write the first test batch's forward GEMM of LAYER\n"
    "                     for `mantis cosim` (format: docs/cosim.md)\n";

int cmd_test(int argc, char **argv)
{
    long l;
    mulsel sel;
    mts_arith_spec acc, spec;
    mts_err err;
    mts_test_config c;
    mts_gemm_tap tap;
    memset(&c, 0, sizeof c);
    mulsel_init(&sel);
    mts_arith_spec_init(&acc);
    int any_acc = 0;
    mul_layers layers = {{0}, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            fputs(usage_text, stdout);
            return 0;
        }
        int r = mulsel_arg(&sel, argc, argv, &i, &err);
        if (r == 0) r = mul_layers_arg(&layers, argc, argv, &i, &err);
        if (r < 0) return cli_error(CMD, "%s", err.msg);
        if (r > 0) continue;
        if (!strcmp(a, "--no-underflow")) { acc.no_underflow = 1; any_acc = 1; continue; }
        if (i + 1 >= argc) return cli_error(CMD, "option %s needs a value (see mantis test --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--checkpoint")) c.ckdir = v;
        else if (!strcmp(a, "--data-dir")) c.data_dir = v;
        else if (!strcmp(a, "--json")) c.json = v; /* "-": stdout, below */
        else if (!strcmp(a, "--dump-gemm")) {
            int st = mts_gemm_tap_init(&tap, v, &err);
            if (st) return cli_fail(CMD, st, &err);
            c.tap = &tap;
        }
        else if (!strcmp(a, "--device")) {
            if (mts_gpu_resolve_device(v, &c.device, &err) != MTS_OK) return cli_error(CMD, "%s", err.msg);
        }
        else if (!strcmp(a, "--acc")) snprintf(acc.acc, sizeof acc.acc, "%s", v), any_acc = 1;
        else if (!strcmp(a, "--prod")) snprintf(acc.prod, sizeof acc.prod, "%s", v), any_acc = 1;
        else if (!strcmp(a, "--threads") || !strcmp(a, "--test-subset") || !strcmp(a, "--chunk") ||
                 !strcmp(a, "--acc-bias") || !strcmp(a, "--prod-bias")) {
            /* the ranges train takes for the same options */
            long lo = !strcmp(a, "--threads") || !strcmp(a, "--acc-bias") || !strcmp(a, "--prod-bias") ? 0 : 1;
            long hi = !strcmp(a, "--threads") ? 1024 : !strcmp(a, "--test-subset") ? 100000000
                      : !strcmp(a, "--chunk") ? 1 << 20 : 126;
            if (mts_parse_int(v, lo, hi, &l))
                return cli_error(CMD, "%s '%s': expected an integer in [%ld, %ld]", a, v, lo, hi);
            if (!strcmp(a, "--threads")) c.threads = (int)l;
            else if (!strcmp(a, "--test-subset")) c.test_subset = (int)l;
            else if (!strcmp(a, "--chunk")) acc.chunk = (int)l, any_acc = 1;
            else if (!strcmp(a, "--acc-bias")) acc.acc_bias = (int)l, any_acc = 1;
            else acc.prod_bias = (int)l, any_acc = 1;
        } else
            return cli_error(CMD, "unknown option %s (see mantis test --help)", a);
    }
    if (!c.ckdir) return cli_error(CMD, "--checkpoint DIR is required (see mantis test --help)");
    FILE *t = cli_text(c.json, NULL); /* stdout holds the JSON alone with --json - */
    if (c.json && !strcmp(c.json, "-")) c.json = NULL, c.json_out = stdout;
    /* --mul / --lut: that multiplier with the given FMAq settings; --rtl: the
     * design; neither: the run's own, with the FMAq settings if any given */
    if (sel.mul || sel.lut || sel.rtl) {
        spec = acc;
        spec.mul[0] = 0;
        if (sel.mul) snprintf(spec.mul, sizeof spec.mul, "%s", sel.mul);
        if (sel.lut) snprintf(spec.lut, sizeof spec.lut, "%s", sel.lut);
        if (sel.rtl && !sel.mul && !sel.lut) snprintf(spec.mul, sizeof spec.mul, "rtl");
        if (sel.format) snprintf(spec.format, sizeof spec.format, "%s", sel.format);
        spec.man_bits = sel.man_bits;
        c.spec = &spec;
    } else if (any_acc) {
        c.acc = &acc;
    }
    c.layer_rules = layers.rule;
    c.nlayer_rules = layers.n;
    mulsel_arith rtl = {.sel = &sel};
    c.open = mulsel_arith_open;
    c.open_ud = &rtl;
    mts_test_result r;
    int rc = mts_test_run(&c, &r, &err);
    mulsel_arith_close(&rtl);
    if (rc == MTS_OK && c.tap) rc = mts_gemm_tap_result(c.tap, &err);
    if (rc != MTS_OK) return cli_fail(CMD, rc, &err);
    fprintf(t, "test accuracy %.4f (%s, %d samples, %s)\n", r.acc, r.model, r.samples, r.desc);
    if (r.layers[0]) fprintf(t, "per layer: %s\n", r.layers);
    return 0;
}
