/* synth_cmd.c - `mantis synth`: area, delay, equivalence and power of a
 * Verilog design (include/mantis/synth.h). */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "cli_util.h"
#include "mul_opts.h"
#include "mantis/synth.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mantis synth --rtl FILE.v [--param K=V]... [--json OUT|-] [--csv OUT|-]\n"
            "                    [--power-trace FILE | --seed N --ops N] [--clock-ghz F]\n"
            "                    [--liberty FILE] [--cache DIR] [--no-equiv] [-v]\n"
            "Synthesizes the design with Yosys/ABC to synth/mantis45.lib, checks the mapped netlist\n"
            "against the RTL with Verilator, and measures switching power for an operand stream\n"
            "(uniform random, seed N, default 1; or a trace file, docs/trace-format.md).\n"
            "Figures are relative 45 nm estimates for ranking designs (docs/synth.md).\n"
            "--json / --csv write the result to OUT (atomically), or to stdout with '-' (the text\n"
            "then goes to stderr).\n");
}

static int is_number_option(const char *a)
{
    return !strcmp(a, "--seed") || !strcmp(a, "--ops") || !strcmp(a, "--clock-ghz");
}

/* --seed, --ops and --clock-ghz; 0, or 2 after printing the message. */
static int number_option(mts_synth_opts *o, const char *a, const char *v)
{
    if (!strcmp(a, "--clock-ghz")) {
        if (mts_parse_double(v, 1e-9, 999, &o->clock_ghz))
            return cli_error("synth", "--clock-ghz '%s': expected a frequency in GHz > 0", v);
        return 0;
    }
    uint64_t x;
    if (mts_parse_u64(v, &x)) return cli_error("synth", "%s '%s': expected a non-negative integer", a, v);
    if (!strcmp(a, "--seed")) {
        o->seed = x;
    } else {
        /* each operation is one 8-byte input vector in memory: refuse before allocating */
        if (x < 2 || x > (1ull << 27))
            return cli_error("synth", "--ops '%s': expected 2 .. 134217728 operations (%.3g GiB of input vectors "
                                 "asked; at most 1 GiB)", v, (double)x * 8 / (1 << 30));
        o->power_ops = x;
    }
    return 0;
}

/* Where a string option's value goes; NULL if a is not one. */
static const char **string_option(mts_synth_opts *o, const char *a, const char **json, const char **csv)
{
    if (!strcmp(a, "--json")) return json;
    if (!strcmp(a, "--csv")) return csv;
    if (!strcmp(a, "--power-trace")) return &o->power_trace;
    if (!strcmp(a, "--liberty")) return &o->liberty;
    if (!strcmp(a, "--cache")) return &o->cache_dir;
    return NULL;
}

_Static_assert(MTS_RTL_MAX_PARAMS <= MTS_SYNTH_MAX_PARAMS, "every --param the shared parser takes fits mts_synth_opts");

/* Parses argv into o; 0, 1 after --help (printed), 2 after an error (printed). */
static int parse_args(int argc, char **argv, mts_synth_opts *o, const char **json, const char **csv)
{
    mulsel sel; /* --rtl and --param mean what they mean for every command */
    mulsel_init(&sel);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], **dst;
        mts_err err = {{0}};
        if (cli_is_help(a)) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--no-equiv")) {
            o->no_equiv = 1;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            o->verbose = 1;
        } else if (!strcmp(a, "--rtl") || !strcmp(a, "--param")) {
            if (mulsel_arg(&sel, argc, argv, &i, &err) < 0)
                return cli_error("synth", "%s (see mantis synth --help)", err.msg);
        } else if ((dst = string_option(o, a, json, csv)) || is_number_option(a)) {
            if (i + 1 >= argc) return cli_error("synth", "option %s needs a value (see mantis synth --help)", a);
            const char *v = argv[++i];
            if (dst) *dst = v;
            else if (number_option(o, a, v)) return 2;
        } else {
            return cli_error("synth", "unknown option '%s' (see mantis synth --help)", a);
        }
    }
    if (!sel.rtl) return cli_error("synth", "--rtl FILE.v is required (see mantis synth --help)");
    o->rtl = sel.rtl;
    o->nparams = sel.nparams;
    for (int i = 0; i < sel.nparams; i++) o->param[i] = sel.params[i];
    return 0;
}

static void json_fn(FILE *f, void *r) { mts_synth_print_json(f, r); }
static void csv_fn(FILE *f, void *r) { mts_synth_print_csv(f, r); }

int cmd_synth(int argc, char **argv)
{
    mts_synth_opts o = {0};
    o.seed = 1;
    const char *json = NULL, *csv = NULL;
    int st = parse_args(argc, argv, &o, &json, &csv);
    if (st) return st == 1 ? 0 : st;
    mts_synth_result r;
    mts_err err = {{0}};
    int rc = mts_synth_run(&o, &r, &err);
    if (rc) return cli_fail("synth", rc, &err);
    FILE *t = cli_text(json, csv);
    fprintf(t, "design       %s (top %s%s%s)%s\n", r.design, r.top, r.params[0] ? ", " : "", r.params,
            r.cache_hit ? "  [cached]" : "");
    fprintf(t, "area         %.2f um^2  (%.1f NAND2-eq, %d cells)\n", r.area_um2, r.nand2_eq, r.ncells);
    fprintf(t, "delay        %.1f ps (OpenSTA%s%s%s%s), logic depth %d\n", r.delay_ps, r.delay_from[0] ? ": " : "",
            r.delay_from, r.delay_from[0] ? " -> " : "", r.delay_to, r.logic_depth);
    fprintf(t, "cells       ");
    for (int i = 0; i < r.ntypes; i++) fprintf(t, " %s %d", r.cells[i].name, r.cells[i].count);
    fprintf(t, "\n");
    if (r.eq_checked)
        fprintf(t, "equivalence  %s: %llu vectors, gate level == RTL\n",
                r.eq_exhaustive ? "exhaustive" : "random sample", (unsigned long long)r.eq_vectors);
    else
        fprintf(t, "equivalence  not checked (--no-equiv)\n");
    if (!strcmp(r.stream, "uniform"))
        fprintf(t, "power        uniform random, seed %llu, %llu ops: ", (unsigned long long)r.seed,
                (unsigned long long)r.power_ops);
    else
        fprintf(t, "power        trace, %llu ops: ", (unsigned long long)r.power_ops);
    fprintf(t, "%.4f pJ/op, %.2f net toggles/op\n", r.energy_pj, r.toggles_per_op);
    fprintf(t, "             %.2f uW dynamic @ %g GHz + %.3f uW leakage = %.2f uW\n", r.dyn_uw, r.clock_ghz, r.leak_uw,
            r.total_uw);
    st = cli_output("synth", json, json_fn, &r);
    return st ? st : cli_output("synth", csv, csv_fn, &r);
}
