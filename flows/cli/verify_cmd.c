/* verify_cmd.c - `mantis verify --rtl FILE.v [--mul NAME] ...`: is the design
 * bit-exact with its LUT and C model? Exit 0 bit-exact, 1 mismatches (or not
 * LUT-representable), 2 could not run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "mantis/rtl.h"

static const char usage[] =
    "usage: mantis verify --rtl FILE.v [--param K=V]... [--kind sig|float|int|acc]\n"
    "                     [--mul NAME] [--lut FILE] [--max-report N] [--json OUT|-]\n"
    "                     [--seed S] [--samples N] [--cache DIR] [--verbose]\n"
    "Compares a Verilog design bit for bit with the LUT swept from it (or --lut FILE)\n"
    "through AMSim and with the C model --mul NAME (integer designs: --mul exact;\n"
    "accumulators: always the FMAq model). Significand and float designs: every\n"
    "mantissa pair at a grid of exponent pairs (normal range, overflow/underflow\n"
    "boundaries) plus zero/subnormal/inf/NaN operands. Integers: every pair.\n"
    "Accumulators: every code pair up to 13+13 bits, else --samples seeded pairs.\n"
    "One line per mismatch (first N, default 20), then a summary.\n"
    "Exit status: 0 bit-exact, 1 mismatches, 2 could not run. See docs/rtl.md.\n";

static int fail(const char *msg)
{
    fprintf(stderr, "mantis verify: %s\n", msg);
    return 2;
}

int mts_cmd_verify(int argc, char **argv)
{
    mts_rtl_opts ro;
    memset(&ro, 0, sizeof ro);
    mts_verify_opts vo;
    memset(&vo, 0, sizeof vo);
    vo.max_report = 20;
    vo.out = stdout;
    char msg[600];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--verbose")) {
            ro.verbose = 1;
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(msg, sizeof msg, "%s needs a value (see mantis verify --help)", a);
            if (!strncmp(a, "--", 2)) return fail(msg);
            snprintf(msg, sizeof msg, "unexpected argument '%s' (see mantis verify --help)", a);
            return fail(msg);
        }
        const char *val = argv[++i];
        char *end;
        if (!strcmp(a, "--rtl")) ro.path = val;
        else if (!strcmp(a, "--mul")) vo.model = val;
        else if (!strcmp(a, "--lut")) vo.lut_path = val;
        else if (!strcmp(a, "--json")) vo.json_path = val;
        else if (!strcmp(a, "--cache")) ro.cache_dir = val;
        else if (!strcmp(a, "--param")) {
            if (ro.nparams == MTS_RTL_MAX_PARAMS) return fail("too many --param options");
            ro.param[ro.nparams++] = val;
        } else if (!strcmp(a, "--kind")) {
            mts_err e;
            if (mts_rtl_kind_parse(val, &ro.kind, &e)) return fail(e.msg);
        } else if (!strcmp(a, "--max-report") || !strcmp(a, "--seed") || !strcmp(a, "--samples")) {
            unsigned long long x = strtoull(val, &end, 0);
            if (!*val || *end || val[0] == '-') {
                snprintf(msg, sizeof msg, "%s '%s': expected a non-negative integer", a, val);
                return fail(msg);
            }
            if (!strcmp(a, "--max-report")) vo.max_report = x > 100000 ? 100000 : (int)x;
            else if (!strcmp(a, "--seed")) vo.seed = x;
            else vo.samples = x;
        } else {
            snprintf(msg, sizeof msg, "unknown option '%s' (see mantis verify --help)", a);
            return fail(msg);
        }
    }
    if (!ro.path) return fail("no design given: --rtl FILE.v (see mantis verify --help)");
    vo.design = ro.path;
    if (vo.json_path && !strcmp(vo.json_path, "-")) vo.out = stderr; /* keep stdout pure JSON */
    mts_rtl *r;
    mts_err err;
    if (mts_rtl_open(&ro, &r, &err)) return fail(err.msg);
    mts_verify_result res;
    int rc = mts_verify_rtl(r, &vo, &res, &err);
    mts_rtl_close(r);
    if (rc) return fail(err.msg);
    return res.mismatches || res.not_representable ? 1 : 0;
}
