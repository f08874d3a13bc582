/* bench_gemm_gpu.c - `mantis bench gemm --device cuda`: in one run, at each
 * size N (default 1024, 4096, 8192), cuBLAS SGEMM (FP32, TF32 off) as the
 * baseline and our GPU providers on device-resident operands: NATIVE, LUT
 * bf16 (e8m7 table of the model, default mbm; kernel 2 and the reference
 * kernel 1), LUT e8m10 (table in global memory / L2), FMAq M7E4 (bf16 LUT
 * products, biases 12/10, chunk 16), INT8 table (its per-call ranges and
 * quantization on the device included).
 * Then two weight gradients' shapes, ResNet-20's first stage at batch 128
 * (16 x 144 outputs, sums over k = 131,072) and LeNet-5's first conv at
 * batch 64 (6 x 25 outputs, k = 50,176: seven blocks of 8 x 4 outputs):
 * cuBLAS, and NATIVE, LUT bf16 and FMAq (B read as the conv twin stores
 * its columns, [n][k]) through kernel 2's
 * one-output-per-thread tile (plan kernel 4) and the long-sum kernel 3's
 * layouts (plan kernels 5 to 10, FMAq also 11 and 12, the LUTs also 15
 * and 16: kernel 3 on operands packed beforehand).
 * Prints the time, approx-MAC/s, the ratio to cuBLAS and the peak device
 * memory. docs/gemm.md, "GPU". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/clock.h"
#include "mantis/gpu.h"
#include "mantis/intmul.h"
#include "mantis/rng.h"

#define CMD "bench gemm --device cuda"
#define N_GPU 7
#define I_INT 6 /* the INT8 row */

/* lut-bf16-k1: the same table through kernel 1, the readable reference
 * kernel (gpu/gemm.cu), for the ratio of the tiled kernel 2 to it */
static const char *const names[N_GPU] = {"cublas",   "native",    "lut-bf16", "lut-bf16-k1",
                                         "lut-m10", "fmaq-m7e4", "int8"};

/* Best wall time (s) of reps runs of provider idx (0: cuBLAS) after a
 * warm-up, an m x n x k GEMM on the device operands dA, dB, dC (row-major;
 * tb: ours read B stored [n][k], as a weight gradient's column operand -
 * cuBLAS always [k][n]). */
static int time_one(int idx, const mts_gpu_gemm_plan *pl, int m, int n, int k, int tb, int reps, const float *dA,
                    const float *dB, float *dC, double *best, mts_err *err)
{
    *best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = mts_clock_now();
        int rc;
        if (idx == 0) rc = mts_gpu_sgemm_cublas(m, n, k, dA, dB, dC, err);
        else rc = mts_gpu_gemm_dev(pl, 0, tb, m, n, k, dA, k, dB, tb ? k : n, 0.0f, dC, n, err);
        if (rc == MTS_OK) rc = mts_gpu_sync(err);
        if (rc != MTS_OK) return rc;
        double t = mts_clock_now() - t0;
        if (r > 0 && t < *best) *best = t; /* run 0 is the warm-up */
    }
    return MTS_OK;
}

/* The weight-gradient rows of shape m x n over k (see the header):
 * providers 1, 2 and 5 of p through plan kernels 4 to 10 (and 11, 12 with
 * FMAq; 15, 16 with LUT products), beside cuBLAS;
 * 0 or the CLI's status. */
static int bench_wgrad(const mts_provider *p, int m, int n, int k, int reps)
{
    const int which[3] = {1, 2, 5};
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    float *h = malloc((na + nb) * sizeof(float));
    void *d[3] = {0};
    mts_err err;
    int status = 0;
    if (!h) return cli_error(CMD, "out of host memory for the weight-gradient operands");
    mts_rng rng = {2};
    for (size_t j = 0; j < na + nb; j++) h[j] = mts_rng_uniform(&rng) * 2.0f - 1.0f;
    if (mts_gpu_alloc(&d[0], na * sizeof(float), &err) || mts_gpu_alloc(&d[1], nb * sizeof(float), &err) ||
        mts_gpu_alloc(&d[2], nc * sizeof(float), &err) || mts_gpu_upload(d[0], h, na * sizeof(float), &err) ||
        mts_gpu_upload(d[1], h + na, nb * sizeof(float), &err))
        status = cli_error(CMD, "weight-gradient operands: %s", err.msg);
    double macs = (double)m * n * k, tc = 0;
    if (!status) {
        int rc = time_one(0, NULL, m, n, k, 0, reps, d[0], d[1], d[2], &tc, &err);
        if (rc == MTS_OK)
            printf("%-6s %-12s %10.3f %14.3e %9.2f   (%d x %d outputs, k %d)\n", "wgrad", "cublas", tc * 1e3,
                   macs / tc, 1.0, m, n, k);
        else if (rc == MTS_EUNSUPPORTED) tc = 0;
        else status = cli_error(CMD, "cublas, weight-gradient shape: %s", err.msg);
    }
    for (int w = 0; w < 3 && !status; w++)
        for (int kern = 4; kern <= 16 && !status; kern++) {
            if (kern == 13 || kern == 14) continue; /* tiles for many outputs */
            if (kern >= 11 && kern <= 12 && !p[which[w]].fmaq) continue; /* (3c: FMAq only) */
            if (kern >= 15 && p[which[w]].kind != MTS_PROV_LUT) continue; /* (3p: bf16-like tables) */
            mts_gpu_gemm_plan *pl = NULL;
            double t;
            char name[32];
            snprintf(name, sizeof name, "%s-k%d", names[which[w]], kern);
            if (mts_gpu_plan_open(&p[which[w]], &pl, &err) || mts_gpu_plan_set_kernel(pl, kern, &err) ||
                time_one(which[w], pl, m, n, k, 1, reps, d[0], d[1], d[2], &t, &err))
                status = cli_error(CMD, "%s, weight-gradient shape: %s", name, err.msg);
            else
                printf("%-6s %-12s %10.3f %14.3e %9.2f %12.1f\n", "wgrad", name, t * 1e3, macs / t,
                       tc > 0 ? t / tc : 0.0, (double)mts_gpu_peak_bytes() / (1 << 20));
            fflush(stdout);
            mts_gpu_plan_close(pl);
        }
    for (int j = 0; j < 3; j++) mts_gpu_free(d[j]);
    free(h);
    return status;
}

int cmd_bench_gemm_cuda(int argc, char **argv)
{
    int sizes[BENCH_MAX_SIZES] = {1024, 4096, 8192}, nsizes = 3, reps = 1;
    const char *model = "mbm";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (cli_is_help(a)) {
            printf("usage: mantis bench gemm --device cuda [--sizes N[,N...]] [--reps R] [--model mbm|exact]\n"
                   "  cuBLAS SGEMM (TF32 off) vs our GPU NATIVE, LUT bf16 (kernels 2 and 1), LUT e8m10, FMAq M7E4, INT8\n"
                   "  (default sizes 1024,4096,8192; reps 1 after a warm-up), then a weight gradient's shape\n"
                   "  (16 x 144 outputs, k 131072; 6 x 25, k 50176) through plan kernels 4 to 10 (FMAq: 12;\n"
                   "  LUTs also 15, 16)\n");
            return 0;
        }
        if (!v) return cli_error(CMD, "option '%s' needs a value", a);
        i++;
        if (!strcmp(a, "--device")) continue; /* "cuda": how we got here */
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--reps")) {
            if (mts_parse_int(v, 1, 100, &x)) return cli_error(CMD, "--reps '%s': expected 1..100", v);
            reps = (int)x;
        } else if (!strcmp(a, "--sizes")) {
            long y[BENCH_MAX_SIZES];
            nsizes = mts_parse_int_list(v, 0, 1, 16384, y, BENCH_MAX_SIZES, NULL);
            if (nsizes == -2) return cli_error(CMD, "--sizes '%s': at most %d sizes", v, BENCH_MAX_SIZES);
            if (nsizes < 0) return cli_error(CMD, "--sizes '%s': expected sizes 1..16384 separated by commas", v);
            for (int k = 0; k < nsizes; k++) sizes[k] = (int)y[k];
        } else
            return cli_error(CMD, "unknown option '%s' (see --help)", a);
    }
    mts_err err;
    mts_gpu_info info;
    if (mts_gpu_probe(&info, &err) != MTS_OK) return cli_error(CMD, "%s", err.msg);

    /* the providers: tables built once on the host, plans upload them */
    mts_lut l7, l10, i8;
    mts_mulop op;
    mts_format f7 = mts_format_e8(7), f10 = mts_format_e8(10);
    memset(&l7, 0, sizeof l7), memset(&l10, 0, sizeof l10), memset(&i8, 0, sizeof i8);
    if (mts_mulop_model(&op, model, &f7, &err) || mts_lut_generate(&op, &l7, &err) ||
        mts_mulop_model(&op, model, &f10, &err) || mts_lut_generate(&op, &l10, &err) ||
        mts_intmul_exact_lut(8, 1, &i8, &err))
        return cli_error(CMD, "%s", err.msg);
    mts_provider p[N_GPU];
    memset(p, 0, sizeof p);
    p[1].kind = MTS_PROV_NATIVE;
    p[2].kind = p[3].kind = p[4].kind = p[5].kind = MTS_PROV_LUT;
    p[2].lut = p[3].lut = &l7;
    p[4].lut = &l10;
    p[5].lut = &l7;
    p[5].fmaq = 1;
    p[5].chunk = 16;
    mts_qfmt_parse("M7E4", 12, &p[5].qprod, &err);
    mts_qfmt_parse("M7E4", 10, &p[5].qacc, &err);
    p[I_INT].kind = MTS_PROV_INT;
    p[I_INT].lut = &i8;
    mts_gpu_gemm_plan *pl[N_GPU] = {0};
    int status = 0;
    for (int i = 1; i < N_GPU && !status; i++)
        if (mts_gpu_plan_open(&p[i], &pl[i], &err) || (i == 3 && mts_gpu_plan_set_kernel(pl[i], 1, &err)))
            status = cli_error(CMD, "%s: %s", names[i], err.msg);

    printf("mantis bench gemm --device cuda: %s (sm_%d%d, %d SMs, %.1f GiB), LUT model %s, best of %d\n", info.name,
           info.cc_major, info.cc_minor, info.sm_count, (double)info.mem_total / (1u << 30), model, reps);
    printf("%-6s %-12s %10s %14s %9s %12s\n", "size", "gemm", "ms", "approx-MAC/s", "x cublas", "peak MiB");
    for (int s = 0; s < nsizes && !status; s++) {
        int n = sizes[s];
        size_t nn = (size_t)n * n;
        float *h = malloc(2 * nn * sizeof(float));
        void *d[3] = {0};
        if (!h) {
            status = cli_error(CMD, "out of host memory for %zu-element operands", nn);
            break;
        }
        mts_rng rng = {1};
        for (size_t j = 0; j < 2 * nn; j++) h[j] = mts_rng_uniform(&rng) * 2.0f - 1.0f; /* U(-1, 1) */
        for (int j = 0; j < 3 && !status; j++)
            if (mts_gpu_alloc(&d[j], nn * sizeof(float), &err) ||
                (j < 2 && mts_gpu_upload(d[j], h + j * nn, nn * sizeof(float), &err)))
                status = cli_error(CMD, "%s", err.msg);
        double t[N_GPU];
        for (int i = 0; i < N_GPU && !status; i++) {
            int rc = time_one(i, pl[i], n, n, n, 0, reps, d[0], d[1], d[2], &t[i], &err);
            if (rc == MTS_EUNSUPPORTED && i == 0) { /* no cuBLAS: the others still run */
                printf("%-6d %-12s %s\n", n, names[i], err.msg);
                t[0] = 0;
                continue;
            }
            if (rc != MTS_OK) {
                status = cli_error(CMD, "%s at %d: %s", names[i], n, err.msg);
                break;
            }
            double macs = (double)n * n * n;
            printf("%-6d %-12s %10.2f %14.3e %9.2f %12.1f\n", n, names[i], t[i] * 1e3, macs / t[i],
                   t[0] > 0 ? t[i] / t[0] : 0.0, (double)mts_gpu_peak_bytes() / (1 << 20));
            fflush(stdout);
        }
        for (int j = 0; j < 3; j++) mts_gpu_free(d[j]);
        free(h);
    }
    if (!status) status = bench_wgrad(p, 16, 144, 131072, reps); /* ResNet-20, first stage, batch 128 */
    if (!status) status = bench_wgrad(p, 6, 25, 50176, reps);    /* LeNet-5's conv1, batch 64 */
    for (int i = 0; i < N_GPU; i++) mts_gpu_plan_close(pl[i]);
    mts_lut_free(&l7);
    mts_lut_free(&l10);
    mts_lut_free(&i8);
    return status;
}
