/* bench_cosim.c - `mantis bench cosim`: simulation speed of the SystemC MAC
 * array (include/mantis/cosim.h) in PE-cycles per second, lut mode and rtl
 * mode, and a 16x16 array replaying LeNet-5's conv2 for one batch of 64;
 * each next to mts_gemm on the same GEMM and provider, timed in the same run.
 * Goals (issue 14): >= 5 M PE-cycles/s (lut), >= 0.5 M (rtl), conv2 < 10 s. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/clock.h"
#include "mantis/cosim.h"
#include "mantis/fpbits.h"
#include "mantis/gemmdump.h"
#include "mantis/nn.h"
#include "mantis/rng.h"
#include "mantis/rtl.h"

#define CMD "bench"

static void fill(float *x, size_t n, uint64_t seed)
{
    mts_rng r = {seed};
    for (size_t i = 0; i < n; i++) x[i] = (float)(mts_rng_uniform(&r) * 2.0 - 1.0);
}

/* One cosim run (checked) and mts_gemm of the same provider; prints a line. */
static int measure(const char *what, const mts_provider *p, const mts_gemmdump *g, int R, int C, double goal_mpes,
                   double goal_s)
{
    mts_cosim_config c;
    memset(&c, 0, sizeof c);
    c.rows = R, c.cols = C, c.p = p, c.check = 1;
    mts_cosim_result r;
    mts_err err;
    double t0 = mts_clock_now();
    int rc = mts_cosim_run(&c, g, NULL, &r, &err);
    double wall = mts_clock_now() - t0;
    if (rc) return cli_fail(CMD, rc, &err);
    float *out = malloc(sizeof(float) * (size_t)g->m * g->n);
    if (!out) return cli_error(CMD, "out of memory");
    mts_provider q = *p;
    q.chunk = R, q.threads = 1;
    t0 = mts_clock_now();
    rc = mts_gemm(&q, 0, 0, g->m, g->n, g->k, g->A, g->k, g->B, g->n, 0.0f, out, g->n, &err);
    double tg = mts_clock_now() - t0;
    free(out);
    if (rc) return cli_fail(CMD, rc, &err);
    double mpes = (double)r.pe_cycles / r.seconds / 1e6;
    printf("%-28s %dx%dx%d on %dx%d: %llu cycles, %.3g M PE-cycles in %.3f s = %.2f M PE-cycles/s; "
           "whole run %.3f s; mts_gemm %.4f s (array / gemm %.0fx); %s",
           what, g->m, g->n, g->k, R, C, (unsigned long long)r.cycles, (double)r.pe_cycles / 1e6, r.seconds, mpes,
           wall, tg, r.seconds / (tg > 0 ? tg : 1e-9), r.mismatches ? "MISMATCH" : "bit-exact");
    if (goal_mpes > 0) printf("; goal >= %.1f M: %s", goal_mpes, mpes >= goal_mpes ? "met" : "NOT met");
    if (goal_s > 0) printf("; goal < %.0f s: %s", goal_s, wall < goal_s ? "met" : "NOT met");
    printf("\n");
    return r.mismatches ? 1 : 0;
}

static int synthetic(mts_gemmdump *g, int m, int n, int k, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->m = m, g->n = n, g->k = k;
    g->A = malloc(sizeof(float) * (size_t)m * k);
    g->B = malloc(sizeof(float) * (size_t)k * n);
    if (!g->A || !g->B) return -1;
    fill(g->A, (size_t)m * k, seed);
    fill(g->B, (size_t)k * n, seed + 1);
    return 0;
}

/* LeNet-5's conv2 forward GEMM for one batch of 64 (random weights and
 * inputs, seeded: the shapes and the dataflow are what the timing depends on),
 * captured through the GEMM tap as `mantis train --dump-gemm conv2:F` does. */
static int lenet_conv2(const mts_provider *p, mts_gemmdump *g, mts_err *err)
{
    mts_net net;
    int rc;
    if ((rc = mts_nn_model_build(&net, "lenet5", 1, 28, 28, 10, err)) || (rc = mts_net_build(&net, 64, 1, err)))
        return rc;
    float *x = malloc(sizeof(float) * 64 * 28 * 28);
    if (!x) {
        mts_net_free(&net);
        return mts_fail(err, MTS_ENOMEM, "out of memory");
    }
    fill(x, 64 * 28 * 28, 7);
    char path[128];
    snprintf(path, sizeof path, "/tmp/mantis-bench-cosim-%ld.gemm", (long)getpid());
    char spec[160];
    snprintf(spec, sizeof spec, "conv2:%s", path);
    mts_gemm_tap tap;
    mts_gemm_tap_init(&tap, spec, err);
    mts_nn_ctx ctx = mts_nn_ctx_cpu(p, NULL);
    ctx.tap = &tap;
    rc = mts_net_forward(&net, &ctx, 0, 64, x, err);
    if (!rc) rc = mts_gemm_tap_result(&tap, err);
    if (!rc) rc = mts_gemmdump_read(path, g, err);
    unlink(path);
    free(x);
    mts_net_free(&net);
    return rc;
}

int cmd_bench_cosim(int argc, char **argv)
{
    const char *rtl = MANTIS_SOURCE_DIR "/rtl/mul_mbm.v";
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: mantis bench cosim [--rtl MUL.v (default rtl/mul_mbm.v)]\n"
                   "  PE-cycles/s of the SystemC array in lut and rtl mode, and a 16x16 array\n"
                   "  replaying LeNet-5 conv2 (batch 64) in lut mode, each next to mts_gemm\n");
            return 0;
        }
        if (!strcmp(argv[i], "--rtl") && i + 1 < argc) rtl = argv[++i];
        else return cli_error(CMD, "cosim: unknown option %s", argv[i]);
    }
    if (!mts_cosim_available()) {
        cli_error(CMD, "cosim: built without SystemC (install libsystemc-dev and rebuild)");
        return 2;
    }
    double load[3] = {0, 0, 0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
        fclose(la);
    }
    printf("mantis bench cosim: one core, load average %.2f (figures shrink on a busy machine)\n", load[0]);
    mts_err err;
    mts_mulop op;
    mts_lut lut;
    mts_format bf16 = mts_format_e8(7);
    if (mts_mulop_model(&op, "mbm", &bf16, &err) || mts_lut_generate(&op, &lut, &err))
        return cli_error(CMD, "%s", err.msg);
    mts_provider p;
    memset(&p, 0, sizeof p);
    p.kind = MTS_PROV_LUT, p.lut = &lut, p.threads = 1;
    mts_gemmdump g;
    int bad = 0;
    if (synthetic(&g, 1024, 64, 64, 1)) return cli_error(CMD, "out of memory");
    bad |= measure("lut mode (mbm bf16 LUT)", &p, &g, 16, 16, 5.0, 0);
    mts_gemmdump_free(&g);

    mts_rtl_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.path = rtl;
    mts_rtl *r = NULL;
    mts_mulop rop;
    if (mts_rtl_open(&ro, &r, &err) || mts_rtl_mulop(r, &rop, &err)) {
        printf("rtl mode: skipped (%s)\n", err.msg);
    } else {
        mts_provider pr = p;
        pr.kind = MTS_PROV_MULOP, pr.mul = &rop, pr.lut = NULL;
        if (synthetic(&g, 256, 32, 32, 2)) return cli_error(CMD, "out of memory");
        char what[96];
        snprintf(what, sizeof what, "rtl mode (%s)", mts_rtl_get_info(r)->name);
        bad |= measure(what, &pr, &g, 8, 8, 0.5, 0);
        mts_gemmdump_free(&g);
    }
    if (r) mts_rtl_close(r);

    int rc = lenet_conv2(&p, &g, &err);
    if (rc) return cli_fail(CMD, rc, &err);
    bad |= measure("LeNet-5 conv2, batch 64, lut", &p, &g, 16, 16, 0, 10.0);
    mts_gemmdump_free(&g);
    mts_lut_free(&lut);
    return bad;
}
