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
    char fmt[32] = "";
    if (in->kind == MTS_RTL_SIG || in->kind == MTS_RTL_FLOAT) mts_format_name(&in->fmt, fmt, sizeof fmt);
    fprintf(f, "{\"design\": ");
    mts_json_write_str(f, path);
    fprintf(f, ", \"kind\": \"%s\", \"top\": ", mts_rtl_kind_name(in->kind));
    mts_json_write_str(f, in->top);
    fprintf(f, ", \"ports\": [[\"%s\", %d], [\"%s\", %d], [\"%s\", %d]]", in->in0, in->w0, in->in1, in->w1, in->out,
            in->wout);
    fprintf(f, ", \"format\": \"%s\", \"E\": %d, \"M\": %d, \"bias\": %d", fmt, in->fmt.E, in->fmt.M, in->fmt.bias);
    fprintf(f, ", \"int_bits\": %d, \"int_signed\": %d, \"sign_source\": \"%s\"", in->int_bits, in->int_signed,
            mts_rtl_signsrc_name(in->sign_src));
    if (in->kind == MTS_RTL_INT && in->mred_unsigned >= 0) /* both readings against the exact product */
        fprintf(f, ", \"mred_unsigned\": %.6g, \"mred_signed\": %.6g", in->mred_unsigned, in->mred_signed);
    fprintf(f, ", \"acc\": {\"prod\": \"M%dE%d\", \"prod_bias\": %d, \"acc\": \"M%dE%d\", \"acc_bias\": %d, "
               "\"underflow\": %d}",
            in->qprod.M, in->qprod.E, in->qprod.bias, in->qacc.M, in->qacc.E, in->qacc.bias, in->qacc.underflow);
    fprintf(f, ", \"cache_hit\": %d, \"hash\": \"%s\"}\n", in->cache_hit, in->hash);
}

static const char usage[] =
    "usage: mantis rtl info --rtl FILE.v [--param K=V]... [--kind K] [--signed|--unsigned] [--json OUT]\n"
    "Detects the design's drop-in shape (docs/rtl.md), builds or reuses its Verilated\n"
    "model, and prints what was found.\n";

typedef struct info_json {
    const mts_rtl_info *in;
    const char *path;
} info_json;

static void write_info_fn(FILE *f, void *ctx)
{
    const info_json *ij = ctx;
    write_info(f, ij->in, ij->path);
}

int mts_cmd_rtl(int argc, char **argv)
{
    if (argc < 2 || mts_is_help(argv[1])) {
        fputs(usage, stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "info")) return mts_cli_error("rtl", "unknown subcommand '%s' (expected info)", argv[1]);
    mts_mulsel sel;
    mts_mulsel_init(&sel);
    mts_err err;
    const char *json = NULL;
    for (int i = 2; i < argc; i++) {
        if (mts_is_help(argv[i])) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json = argv[++i];
            continue;
        }
        int rc = mts_mulsel_arg(&sel, argc, argv, &i, &err);
        if (rc < 0) return mts_cli_error("rtl", "%s", err.msg);
        if (rc == 0 && i == 2 && argv[i][0] != '-') { /* `rtl info FILE.v` */
            sel.rtl = argv[i];
            continue;
        }
        if (rc == 0) return mts_cli_error("rtl", "unknown option '%s'", argv[i]);
    }
    if (!sel.rtl) return mts_cli_error("rtl", "missing --rtl FILE.v");
    mts_rtl_opts o;
    if (mts_mulsel_rtl_opts(&sel, &o, &err)) return mts_cli_error("rtl", "%s", err.msg);
    mts_rtl *r;
    if (mts_rtl_open(&o, &r, &err)) return mts_cli_error("rtl", "%s", err.msg);
    const mts_rtl_info *in = mts_rtl_get_info(r);
    write_info(stdout, in, sel.rtl);
    int status = 0;
    if (json) {
        info_json ij = {in, sel.rtl};
        if (mts_fs_write_stream(json, write_info_fn, &ij, &err)) status = mts_cli_error("rtl", "%s", err.msg);
    }
    mts_rtl_close(r);
    return status;
}
