/* bench_gemm.c - `mantis bench gemm`: times, in one run, OpenBLAS SGEMM, our
 * native GEMM, our LUT GEMM (bf16 = e8m7 LUT of a C model) and our FMAq GEMM
 * (the same LUT, M7E4 product/accumulator with the paper's biases 12/10,
 * chunk 16) and the INT8 table GEMM (exact unsigned 8-bit table, operands
 * quantized per call, the code GEMM of int.c) at n^3 for each size, on all
 * cores by default, and prints the times and the ratios against the issues'
 * goals (LUT <= 4x OpenBLAS, FMAq <= 3x LUT, INT8 <= LUT). Each figure is the best of --reps runs after one warm-up.
 * docs/benchmarks.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "mantis/clock.h"
#include "cli_util.h"
#include "commands.h"
#include "mantis/gemm.h"
#include "mantis/rng.h"

#define CMD "bench gemm"
#define N_PROV 7 /* openblas, native, lut, fmaq, then the INT8 tables: in this order */
#define N_INT 3   /* exact, broken-array BREAK 4, BREAK 6 (rtl/int8_bam.v) */

static const char *const prov_names[N_PROV] = {"openblas", "native", "lut", "fmaq", "int8", "int8bam4", "int8bam6"};

/* The unsigned 8-bit broken-array multiplier of rtl/int8_bam.v: the partial
 * products a_i b_j of columns i + j < BREAK left out. ctx: &BREAK. Its error
 * spans 49 at BREAK 4 (the split kernel: exact products plus an error
 * plane) and 321 at BREAK 6 (the byte-plane kernel), docs/gemm.md. */
static int32_t bam_product(void *ctx, int32_t a, int32_t b)
{
    int brk = *(const int *)ctx;
    int32_t s = 0;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            if (i + j >= brk) s += (((a >> i) & (b >> j)) & 1) << (i + j);
    return s;
}

typedef struct gemm_opts {
    int sizes[BENCH_MAX_SIZES], nsizes, threads, reps;
    const char *model;
    uint64_t seed;
} gemm_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: mantis bench gemm [--sizes N[,N...]] [--threads T] [--reps R] [--model exact|mbm]\n"
               "                        [--seed S]\n"
               "  times OpenBLAS SGEMM, native, LUT (bf16), FMAq (M7E4, biases 12/10, chunk 16) and\n"
               "  INT8 (the exact unsigned 8-bit table and the broken-array multiplier at BREAK 4 and 6,\n"
               "  operands quantized per call) GEMMs at N^3 (default sizes 512,1024; threads 0 = all cores; reps 3; model mbm)\n"
               "  --device cuda: the GPU providers against cuBLAS (see --device cuda --help)\n");
}

/* "N[,N...]" into o->sizes: 0, or the exit status of the error printed
 * (a malformed item, or more sizes than fit: never dropped silently). */
static int parse_sizes(const char *v, gemm_opts *o)
{
    long x[BENCH_MAX_SIZES];
    int n = mts_parse_int_list(v, 0, 1, 8192, x, BENCH_MAX_SIZES, NULL);
    if (n == -2) return cli_error(CMD, "--sizes '%s': at most %d sizes", v, BENCH_MAX_SIZES);
    if (n < 0) return cli_error(CMD, "--sizes '%s': expected sizes 1..8192 separated by commas", v);
    for (int i = 0; i < n; i++) o->sizes[i] = (int)x[i];
    o->nsizes = n;
    return 0;
}

/* Fills o from argv: 1 parsed, 0 help printed, 2 error printed. */
static int parse_opts(int argc, char **argv, gemm_opts *o)
{
    *o = (gemm_opts){{512, 1024}, 2, 0, 3, "mbm", 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        }
        if (!v) return cli_error(CMD, "unknown or incomplete option '%s' (see --help)", a);
        if (!strcmp(a, "--sizes")) {
            if (parse_sizes(v, o)) return 2;
        } else if (!strcmp(a, "--threads")) {
            if (mts_parse_int(v, 0, 1024, &x))
                return cli_error(CMD, "--threads '%s': expected 0 (all cores) .. 1024", v);
            o->threads = (int)x;
        } else if (!strcmp(a, "--reps")) {
            if (mts_parse_int(v, 1, 1000, &x)) return cli_error(CMD, "--reps '%s': expected 1 .. 1000", v);
            o->reps = (int)x;
        } else if (!strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "--seed")) {
            if (mts_parse_u64(v, &o->seed)) return cli_error(CMD, "--seed '%s': expected an unsigned integer", v);
        } else {
            return cli_error(CMD, "unknown or incomplete option '%s' (see --help)", a);
        }
        i++;
    }
    return 1;
}

/* The providers on o->threads threads, in prov_names order; lut is the
 * bf16 table of o->model both LUT providers multiply through, itab the
 * 8-bit integer table of the INT provider. */
static int make_providers(const gemm_opts *o, const mts_lut *lut, const mts_lut *itab, mts_provider p[N_PROV],
                          mts_err *err)  /* itab: N_INT tables */
{
    memset(p, 0, N_PROV * sizeof *p);
    p[0].kind = MTS_PROV_BLAS;
    p[0].threads = o->threads;
    p[1] = p[0];
    p[1].kind = MTS_PROV_NATIVE;
    p[2] = p[0];
    p[2].kind = MTS_PROV_LUT;
    p[2].lut = lut;
    p[3] = p[2];
    p[3].fmaq = 1;
    p[3].chunk = 16;
    for (int q = 0; q < N_INT; q++) {
        p[4 + q] = p[0];
        p[4 + q].kind = MTS_PROV_INT;
        p[4 + q].lut = &itab[q];
    }
    int rc = mts_qfmt_parse("M7E4", 12, &p[3].qprod, err);
    return rc ? rc : mts_qfmt_parse("M7E4", 10, &p[3].qacc, err);
}

/* Best wall time of reps runs of one provider (one warm-up first), and the
 * process CPU time (all threads, spinning included) of that run. */
static int time_gemm(const mts_provider *p, int n, const float *A, const float *B, float *C, int reps,
                     double *best, double *cpu, mts_err *err)
{
    *best = 1e30;
    for (int r = -1; r < reps; r++) {
        double c0 = mts_clock_seconds(CLOCK_PROCESS_CPUTIME_ID), t0 = mts_clock_now();
        int rc = mts_gemm(p, 0, 0, n, n, n, A, n, B, n, 0.0f, C, n, err);
        double t = mts_clock_now() - t0, c = mts_clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (rc != MTS_OK) return rc;
        if (r >= 0 && t < *best) {
            *best = t;
            *cpu = c;
        }
    }
    return MTS_OK;
}

/* nn operands U(-1, 1), typical activations and weights, from seed: A and B
 * alternate draws. */
static void fill_operands(uint64_t seed, size_t nn, float *A, float *B)
{
    mts_rng rng = {seed};
    for (size_t i = 0; i < nn; i++) {
        A[i] = (float)((double)(mts_rng_next(&rng) >> 40) / 8388608.0 * 2.0 - 1.0);
        B[i] = (float)((double)(mts_rng_next(&rng) >> 40) / 8388608.0 * 2.0 - 1.0);
    }
}

/* Times every provider at n^3 into t[] / cpu[] (0 for OpenBLAS when the build
 * has none). */
static int time_size(const gemm_opts *o, const mts_provider p[N_PROV], int n, double t[N_PROV], double cpu[N_PROV],
                     mts_err *err)
{
    size_t nn = (size_t)n * (size_t)n;
    float *A = malloc(nn * sizeof *A), *B = malloc(nn * sizeof *B), *C = malloc(nn * sizeof *C);
    int rc = MTS_OK;
    if (!A || !B || !C) rc = mts_fail(err, MTS_ENOMEM, "out of memory at size %d", n);
    if (!rc) fill_operands(o->seed, nn, A, B);
    for (int q = 0; q < N_PROV && !rc; q++) {
        t[q] = cpu[q] = 0;
        if (q == 0 && !mts_gemm_have_blas()) continue;
        /* let the previous provider's idle workers (OpenBLAS threads,
         * OpenMP's team) stop spinning, or they steal the cores */
        struct timespec pause = {0, 300000000L};
        nanosleep(&pause, NULL);
        rc = time_gemm(&p[q], n, A, B, C, o->reps, &t[q], &cpu[q], err);
    }
    free(A);
    free(B);
    free(C);
    return rc;
}

/* One row per provider, then the goals (ratios against OpenBLAS and LUT). */
static void print_size(int n, const double t[N_PROV], const double cpu[N_PROV])
{
    double macs = (double)n * n * n;
    for (int q = 0; q < N_PROV; q++) {
        if (t[q] == 0) {
            printf("%-6d %-8s %10s (built without OpenBLAS)\n", n, prov_names[q], "-");
            continue;
        }
        char xb[16] = "-", xl[16] = "-";
        if (t[0] > 0) snprintf(xb, sizeof xb, "%.2f", t[q] / t[0]);
        if (q >= 3) snprintf(xl, sizeof xl, "%.2f", t[q] / t[2]);
        printf("%-6d %-8s %10.2f %10.2f %10.2f %9s %9s\n", n, prov_names[q], 1e3 * t[q], 1e3 * cpu[q],
               macs / t[q] * 1e-9, xb, xl);
    }
    if (t[0] > 0)
        printf("%-6d goal LUT <= 4x OpenBLAS: %.2fx %s\n", n, t[2] / t[0], t[2] <= 4 * t[0] ? "met" : "MISSED");
    printf("%-6d goal FMAq <= 3x LUT: %.2fx %s\n", n, t[3] / t[2], t[3] <= 3 * t[2] ? "met" : "MISSED");
    for (int q = 4; q < N_PROV; q++)
        printf("%-6d goal %s table <= LUT (time per multiply-add): %.2fx %s\n", n, prov_names[q], t[q] / t[2],
               t[q] <= t[2] ? "met" : "MISSED");
}

int cmd_bench_gemm(int argc, char **argv)
{
    gemm_opts o;
    /* --device cuda: the GPU benchmark (bench_gemm_gpu.c); --device cpu: this one */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--device")) {
            if (!strcmp(argv[i + 1], "cuda")) return cmd_bench_gemm_cuda(argc, argv);
            if (strcmp(argv[i + 1], "cpu")) return cli_error(CMD, "--device '%s': expected cpu or cuda", argv[i + 1]);
            memmove(argv + i, argv + i + 2, sizeof *argv * (size_t)(argc - i - 2));
            argc -= 2;
            break;
        }
    int rc = parse_opts(argc, argv, &o);
    if (rc != 1) return rc;
    mts_err err;
    mts_format bf16 = mts_format_e8(7);
    mts_mulop op;
    mts_lut lut, itab[N_INT];
    memset(itab, 0, sizeof itab);
    if (mts_mulop_model(&op, o.model, &bf16, &err) != MTS_OK || mts_lut_generate(&op, &lut, &err) != MTS_OK)
        return cli_error(CMD, "%s", err.msg);
    mts_provider p[N_PROV];
    int brk[2] = {4, 6};
    if (mts_intmul_exact_lut(8, 0, &itab[0], &err) != MTS_OK ||
        mts_lut_generate_int(8, 0, bam_product, &brk[0], "bam4", &itab[1], &err) != MTS_OK ||
        mts_lut_generate_int(8, 0, bam_product, &brk[1], "bam6", &itab[2], &err) != MTS_OK ||
        make_providers(&o, &lut, itab, p, &err) != MTS_OK) {
        mts_lut_free(&lut);
        for (int q = 0; q < N_INT; q++) mts_lut_free(&itab[q]);
        return cli_error(CMD, "%s", err.msg);
    }
    int cores = 1;
#ifdef _OPENMP
    cores = o.threads > 0 ? o.threads : omp_get_num_procs();
#endif
    printf("mantis bench gemm: isa %s, %d thread%s, LUT %s e8m7 (bf16), FMAq M7E4 prod bias 12 / acc bias 10, "
           "chunk 16, INT8 exact / broken-array BREAK 4, 6 (unsigned), best of %d, load average %.2f\n",
           mts_gemm_isa(), cores, cores == 1 ? "" : "s", o.model, o.reps, cli_loadavg());
    printf("%-6s %-8s %10s %10s %10s %9s %9s\n", "size", "gemm", "wall ms", "cpu ms", "GMAC/s", "x blas", "x lut");
    int status = 0;
    for (int s = 0; s < o.nsizes && !status; s++) {
        double t[N_PROV], cpu[N_PROV];
        if (time_size(&o, p, o.sizes[s], t, cpu, &err) != MTS_OK)
            status = cli_error(CMD, "%s", err.msg);
        else
            print_size(o.sizes[s], t, cpu);
    }
    mts_lut_free(&lut);
    for (int q = 0; q < N_INT; q++) mts_lut_free(&itab[q]);
    return status;
}
