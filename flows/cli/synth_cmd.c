/* synth_cmd.c - `mantis synth`: area, delay, equivalence and power of a
 * Verilog design (include/mantis/synth.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "mantis/fs.h"
#include "mantis/binio.h"
#include "cli_util.h"
#include "mantis/synth.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mantis synth --rtl FILE.v [--param K=V]... [--json FILE] [--csv FILE]\n"
            "                    [--power-trace FILE | --seed N --ops N] [--clock-ghz F]\n"
            "                    [--liberty FILE] [--cache DIR] [--no-equiv] [-v]\n"
            "Synthesizes the design with Yosys/ABC to synth/mantis45.lib, checks the mapped netlist\n"
            "against the RTL with Verilator, and measures switching power for an operand stream\n"
            "(uniform random, seed N, default 1; or a trace file, docs/trace-format.md).\n"
            "Figures are relative 45 nm estimates for ranking designs (docs/synth.md).\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-') return 0;
    *v = x;
    return 1;
}

int mts_cmd_synth(int argc, char **argv)
{
    mts_synth_opts o = {0};
    o.seed = 1;
    const char *json = NULL, *csv = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-equiv")) {
            o.no_equiv = 1;
            takes = 0;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            o.verbose = 1;
            takes = 0;
        } else if (!v) {
            fprintf(stderr, "mantis synth: option %s needs a value (see mantis synth --help)\n", a);
            return 2;
        } else if (!strcmp(a, "--rtl")) {
            o.rtl = v;
        } else if (!strcmp(a, "--param")) {
            if (o.nparams == MTS_SYNTH_MAX_PARAMS) {
                fprintf(stderr, "mantis synth: at most %d --param options\n", MTS_SYNTH_MAX_PARAMS);
                return 2;
            }
            o.param[o.nparams++] = v;
        } else if (!strcmp(a, "--json")) {
            json = v;
        } else if (!strcmp(a, "--csv")) {
            csv = v;
        } else if (!strcmp(a, "--power-trace")) {
            o.power_trace = v;
        } else if (!strcmp(a, "--liberty")) {
            o.liberty = v;
        } else if (!strcmp(a, "--cache")) {
            o.cache_dir = v;
        } else if (!strcmp(a, "--seed") || !strcmp(a, "--ops")) {
            uint64_t x;
            if (!parse_u64(v, &x)) {
                fprintf(stderr, "mantis synth: %s '%s': expected a non-negative integer\n", a, v);
                return 2;
            }
            if (a[2] == 's') o.seed = x;
            else o.power_ops = x;
        } else if (!strcmp(a, "--clock-ghz")) {
            char *end;
            o.clock_ghz = strtod(v, &end);
            if (end == v || *end || !(o.clock_ghz > 0 && o.clock_ghz < 1e3)) {
                fprintf(stderr, "mantis synth: --clock-ghz '%s': expected a frequency in GHz > 0\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "mantis synth: unknown option '%s' (see mantis synth --help)\n", a);
            return 2;
        }
        i += takes;
    }
    if (!o.rtl) {
        fprintf(stderr, "mantis synth: --rtl FILE.v is required (see mantis synth --help)\n");
        return 2;
    }
    mts_synth_result r;
    mts_err err = {{0}};
    int rc = mts_synth_run(&o, &r, &err);
    if (rc) {
        fprintf(stderr, "mantis synth: %s\n", err.msg);
        return mts_cli_exit(rc);
    }
    printf("design       %s (top %s%s%s)%s\n", r.design, r.top, r.params[0] ? ", " : "", r.params,
           r.cache_hit ? "  [cached]" : "");
    printf("area         %.2f um^2  (%.1f NAND2-eq, %d cells)\n", r.area_um2, r.nand2_eq, r.ncells);
    printf("delay        %.1f ps (ABC stime), logic depth %d\n", r.delay_ps, r.logic_depth);
    printf("cells       ");
    for (int i = 0; i < r.ntypes; i++) printf(" %s %d", r.cells[i].name, r.cells[i].count);
    printf("\n");
    if (r.eq_checked)
        printf("equivalence  %s: %llu vectors, gate level == RTL\n", r.eq_exhaustive ? "exhaustive" : "random sample",
               (unsigned long long)r.eq_vectors);
    else
        printf("equivalence  not checked (--no-equiv)\n");
    if (!strcmp(r.stream, "uniform"))
        printf("power        uniform random, seed %llu, %llu ops: ", (unsigned long long)r.seed,
               (unsigned long long)r.power_ops);
    else
        printf("power        trace, %llu ops: ", (unsigned long long)r.power_ops);
    printf("%.4f pJ/op, %.2f net toggles/op\n", r.energy_pj, r.toggles_per_op);
    printf("             %.2f uW dynamic @ %g GHz + %.3f uW leakage = %.2f uW\n", r.dyn_uw, r.clock_ghz, r.leak_uw,
           r.total_uw);
    if (json && (rc = mts_synth_write_json(&r, json, &err))) {
        fprintf(stderr, "mantis synth: %s\n", err.msg);
        return 2;
    }
    if (csv) {
        char row[2048];
        mts_synth_csv_row(&r, row, sizeof row);
        const void *d[4] = {mts_synth_csv_header(), "\n", row, "\n"};
        size_t len[4] = {strlen(mts_synth_csv_header()), 1, strlen(row), 1};
        if ((rc = mts_fs_write_atomic(csv, 4, d, len, &err))) {
            fprintf(stderr, "mantis synth: %s\n", err.msg);
            return 2;
        }
    }
    return 0;
}
