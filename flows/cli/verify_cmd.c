/* verify_cmd.c - `mantis verify --rtl FILE.v [--mul NAME] ...`: is the design
 * bit-exact with its LUT and C model? Exit 0 bit-exact, 1 mismatches (or not
 * LUT-representable), 2 could not run. */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/rtl.h"
#include "mantis/verify.h"
#include "mul_opts.h"

static const char usage[] =
    "usage: mantis verify --rtl FILE.v [--param K=V]... [--kind sig|float|int|acc] [--signed|--unsigned]\n"
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


/* What the command line gives: the design and its references (--rtl,
 * --param, --kind, --mul, --lut: the shared mulsel options), then the
 * RTL and verification options. */
typedef struct {
    mulsel sel;
    mts_rtl_opts ro;
    mts_verify_opts vo;
} verify_args;

/* --max-report, --seed, --samples: a non-negative integer (strtoull syntax). */
static int count_arg(verify_args *a, const char *opt, const char *val)
{
    uint64_t x;
    if (mts_parse_u64(val, &x))
        return cli_error("verify", "%s '%s': expected a non-negative integer", opt, val);
    if (!strcmp(opt, "--max-report") && x > 100000)
        return cli_error("verify", "--max-report '%s': expected 0 .. 100000", val);
    if (!strcmp(opt, "--max-report")) a->vo.max_report = (int)x;
    else if (!strcmp(opt, "--seed")) a->vo.seed = x;
    else a->vo.samples = x;
    return 0;
}

/* Consumes argv[*i] and its value. 0, or the exit status of an error. */
static int one_arg(verify_args *a, int argc, char **argv, int *i)
{
    const char *opt = argv[*i];
    if (!strcmp(opt, "--signed") || !strcmp(opt, "--unsigned")) { /* the shared flags without a value */
        mts_err err;
        return mulsel_arg(&a->sel, argc, argv, i, &err) > 0 ? 0 : cli_error("verify", "%s", err.msg);
    }
    if (*i + 1 >= argc) {
        if (!strncmp(opt, "--", 2)) return cli_error("verify", "%s needs a value (see mantis verify --help)", opt);
        return cli_error("verify", "unexpected argument '%s' (see mantis verify --help)", opt);
    }
    /* the format is the design's: --format and --man-bits of the shared options do not apply */
    if (strcmp(opt, "--format") && strcmp(opt, "--man-bits")) {
        mts_err err;
        int rc = mulsel_arg(&a->sel, argc, argv, i, &err);
        if (rc < 0) return cli_error("verify", "%s", err.msg);
        if (rc > 0) return 0;
    }
    const char *val = argv[++*i];
    if (!strcmp(opt, "--json")) a->vo.json_path = val;
    else if (!strcmp(opt, "--cache")) a->ro.cache_dir = val;
    else if (!strcmp(opt, "--max-report") || !strcmp(opt, "--seed") || !strcmp(opt, "--samples"))
        return count_arg(a, opt, val);
    else return cli_error("verify", "unknown option '%s' (see mantis verify --help)", opt);
    return 0;
}

int cmd_verify(int argc, char **argv)
{
    verify_args a;
    memset(&a, 0, sizeof a);
    mulsel_init(&a.sel);
    a.vo.max_report = 20;
    a.vo.out = stdout;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--verbose")) {
            a.ro.verbose = 1;
            continue;
        }
        int st = one_arg(&a, argc, argv, &i);
        if (st) return st;
    }
    mts_err err;
    mts_rtl_opts given = a.ro; /* --cache and --verbose, set while parsing */
    int rc = mulsel_rtl_opts(&a.sel, &a.ro, &err);
    if (rc) return cli_fail("verify", rc, &err);
    a.ro.cache_dir = given.cache_dir;
    a.ro.verbose = given.verbose;
    if (!a.sel.rtl) return cli_error("verify", "no design given: --rtl FILE.v (see mantis verify --help)");
    a.vo.model = a.sel.mul;
    a.vo.lut_path = a.sel.lut;
    a.vo.design = a.sel.rtl;
    if (a.vo.json_path && !strcmp(a.vo.json_path, "-")) { /* JSON on stdout: keep it pure, the report goes to stderr */
        a.vo.json_path = NULL;
        a.vo.json_out = stdout;
        a.vo.out = stderr;
    }
    mts_rtl *r;
    rc = mts_rtl_open(&a.ro, &r, &err);
    if (rc) return cli_fail("verify", rc, &err);
    mts_verify_result res;
    rc = mts_verify_rtl(r, &a.vo, &res, &err);
    mts_rtl_close(r);
    if (rc) return cli_fail("verify", rc, &err);
    return cli_exit(res.mismatches || res.not_representable ? MTS_EMISMATCH : MTS_OK);
}
