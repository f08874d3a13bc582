/* rtl_cmd.c - `mantis rtl info FILE.v`: what the drop-in contract detected in
 * a design (kind, top module, ports, format), building its Verilated model
 * into the cache. The flow's first step for every design. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/json.h"
#include "mantis/fs.h"
#include "mantis/rtl.h"
#include "mul_opts.h"

static void write_info(FILE *f, const mts_rtl_info *in, const char *path)
{
    char fmt[32] = "", q[2][16];
    if (in->kind == MTS_RTL_SIG || in->kind == MTS_RTL_FLOAT) mts_format_name(&in->fmt, fmt, sizeof fmt);
    mts_jw w;
    mts_jw_init(&w, f);
    mts_jw_obj(&w, NULL, 0);
    mts_jw_str(&w, "design", path);
    mts_jw_str(&w, "kind", mts_rtl_kind_name(in->kind));
    mts_jw_str(&w, "top", in->top);
    mts_jw_arr(&w, "ports", 0);
    const char *name[3] = {in->in0, in->in1, in->out};
    int width[3] = {in->w0, in->w1, in->wout};
    for (int i = 0; i < 3; i++) {
        mts_jw_arr(&w, NULL, 0);
        mts_jw_str(&w, NULL, name[i]);
        mts_jw_int(&w, NULL, width[i]);
        mts_jw_end(&w);
    }
    mts_jw_end(&w);
    mts_jw_str(&w, "format", fmt);
    mts_jw_int(&w, "E", in->fmt.E);
    mts_jw_int(&w, "M", in->fmt.M);
    mts_jw_int(&w, "bias", in->fmt.bias);
    mts_jw_int(&w, "int_bits", in->int_bits);
    mts_jw_int(&w, "int_signed", in->int_signed);
    mts_jw_str(&w, "sign_source", mts_rtl_signsrc_name(in->sign_src));
    if (in->kind == MTS_RTL_INT && in->mred_unsigned >= 0) { /* both readings against the exact product */
        mts_jw_num(&w, "mred_unsigned", in->mred_unsigned, "%.6g");
        mts_jw_num(&w, "mred_signed", in->mred_signed, "%.6g");
    }
    snprintf(q[0], sizeof q[0], "M%dE%d", in->qprod.M, in->qprod.E);
    snprintf(q[1], sizeof q[1], "M%dE%d", in->qacc.M, in->qacc.E);
    mts_jw_obj(&w, "acc", 0);
    mts_jw_str(&w, "prod", q[0]);
    mts_jw_int(&w, "prod_bias", in->qprod.bias);
    mts_jw_str(&w, "acc", q[1]);
    mts_jw_int(&w, "acc_bias", in->qacc.bias);
    mts_jw_int(&w, "underflow", in->qacc.underflow);
    mts_jw_end(&w);
    mts_jw_int(&w, "cache_hit", in->cache_hit);
    mts_jw_str(&w, "hash", in->hash);
    mts_jw_end(&w);
}

/* What was found, for a person. */
static void print_info(FILE *f, const mts_rtl_info *in, const char *path)
{
    fprintf(f, "design     %s (top %s)\n", path, in->top);
    fprintf(f, "kind       %s\n", mts_rtl_kind_name(in->kind));
    fprintf(f, "ports      %s[%d] %s[%d] -> %s[%d]\n", in->in0, in->w0, in->in1, in->w1, in->out, in->wout);
    if (in->kind == MTS_RTL_SIG || in->kind == MTS_RTL_FLOAT) {
        char fmt[32];
        mts_format_name(&in->fmt, fmt, sizeof fmt);
        fprintf(f, "format     %s (E=%d, M=%d, bias %d)\n", fmt, in->fmt.E, in->fmt.M, in->fmt.bias);
    } else if (in->kind == MTS_RTL_INT) {
        fprintf(f, "operands   %d-bit %s (%s)\n", in->int_bits, in->int_signed ? "signed" : "unsigned",
                mts_rtl_signsrc_name(in->sign_src));
        if (in->mred_unsigned >= 0)
            fprintf(f, "MRED       %.6g read unsigned, %.6g read signed\n", in->mred_unsigned, in->mred_signed);
    } else if (in->kind == MTS_RTL_ACC) {
        fprintf(f, "formats    product M%dE%d (bias %d), sum M%dE%d (bias %d)%s\n", in->qprod.M, in->qprod.E,
                in->qprod.bias, in->qacc.M, in->qacc.E, in->qacc.bias, in->qacc.underflow ? "" : ", no underflow");
    }
    fprintf(f, "model      %s (%s, key %s)\n", in->so_path, in->cache_hit ? "from the cache" : "built", in->hash);
}

static const char usage[] =
    "usage: mantis rtl info --rtl FILE.v [--param K=V]... [--kind K] [--signed|--unsigned] [--json OUT|-]\n"
    "Detects the design's drop-in shape (docs/rtl.md), builds or reuses its Verilated\n"
    "model, and prints what was found; --json writes it as JSON to OUT (atomically), or to\n"
    "stdout with '-' (the text then goes to stderr).\n";

typedef struct info_json {
    const mts_rtl_info *in;
    const char *path;
} info_json;

static void write_info_fn(FILE *f, void *ctx)
{
    const info_json *ij = ctx;
    write_info(f, ij->in, ij->path);
}

int cmd_rtl(int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1])) {
        fputs(usage, stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "info")) return cli_error("rtl", "unknown subcommand '%s' (expected info)", argv[1]);
    mulsel sel;
    mulsel_init(&sel);
    mts_err err;
    const char *json = NULL;
    for (int i = 2; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--json")) {
            if (i + 1 >= argc) return cli_error("rtl", "--json needs OUT or - (stdout)");
            json = argv[++i];
            continue;
        }
        int rc = mulsel_arg(&sel, argc, argv, &i, &err);
        if (rc < 0) return cli_error("rtl", "%s", err.msg);
        if (rc == 0 && i == 2 && argv[i][0] != '-') { /* `rtl info FILE.v` */
            sel.rtl = argv[i];
            continue;
        }
        if (rc == 0) return cli_error("rtl", "unknown option '%s'", argv[i]);
    }
    if (!sel.rtl) return cli_error("rtl", "missing --rtl FILE.v");
    mts_rtl_opts o;
    int rc = mulsel_rtl_opts(&sel, &o, &err);
    if (rc) return cli_fail("rtl", rc, &err);
    mts_rtl *r;
    if ((rc = mts_rtl_open(&o, &r, &err))) return cli_fail("rtl", rc, &err);
    const mts_rtl_info *in = mts_rtl_get_info(r);
    print_info(cli_text(json, NULL), in, sel.rtl);
    info_json ij = {in, sel.rtl};
    int status = cli_output("rtl", json, write_info_fn, &ij);
    mts_rtl_close(r);
    return status;
}
