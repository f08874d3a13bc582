/* bench_gemm.c - `mantis bench gemm`: times, in one run, OpenBLAS SGEMM, our
 * native GEMM, our LUT GEMM (bf16 = e8m7 LUT of a C model) and our FMAq GEMM
 * (the same LUT, M7E4 product/accumulator with the paper's biases 12/10,
 * chunk 16) at n^3 for each size, on all cores by default, and prints the
 * times and the ratios against the goals (LUT <= 4x OpenBLAS, FMAq
 * <= 3x LUT). Each figure is the best of --reps runs after one warm-up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "mantis/gemm.h"
#include "mantis/fpbits.h"

int mts_bench_gemm(int argc, char **argv);

static double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Strict integer option value in [lo, hi]; -1 if malformed. */
static long int_opt(const char *v, long lo, long hi)
{
    char *end;
    long x = strtol(v, &end, 10);
    return (end == v || *end || x < lo || x > hi) ? -1 : x;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: mantis bench gemm [--sizes N[,N...]] [--threads T] [--reps R] [--model exact|mbm]\n"
               "                        [--seed S]\n"
               "  times OpenBLAS SGEMM, native, LUT (bf16) and FMAq (M7E4, biases 12/10, chunk 16)\n"
               "  GEMMs at N^3 (default sizes 512,1024; threads 0 = all cores; reps 3; model mbm)\n");
}

/* Best wall time of reps runs of one provider (one warm-up first), and the
 * process CPU time (all threads, spinning included) of that run. */
static int time_gemm(const mts_provider *p, int n, const float *A, const float *B, float *C, int reps,
                     double *best, double *cpu, mts_err *err)
{
    *best = 1e30;
    for (int r = -1; r < reps; r++) {
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), t0 = now_s();
        int rc = mts_gemm(p, 0, 0, n, n, n, A, n, B, n, 0.0f, C, n, err);
        double t = now_s() - t0, c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (rc != MTS_OK) return rc;
        if (r >= 0 && t < *best) {
            *best = t;
            *cpu = c;
        }
    }
    return MTS_OK;
}

/* The 1-minute load average, so a reader can tell a busy machine's figures. */
static double loadavg(void)
{
    double l = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1.0;
        fclose(f);
    }
    return l;
}

int mts_bench_gemm(int argc, char **argv)
{
    int sizes[8] = {512, 1024}, nsizes = 2, threads = 0, reps = 3;
    const char *model = "mbm";
    uint64_t seed = 1;
    mts_err err;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--sizes") && v) {
            nsizes = 0;
            for (char *s = (char *)v, *end; *s && nsizes < 8; s = *end ? end + 1 : end) {
                long x = strtol(s, &end, 10);
                if (end == s || x < 1 || x > 8192 || (*end && *end != ',')) {
                    fprintf(stderr, "mantis bench gemm: --sizes '%s': expected sizes 1..8192 separated by commas\n", v);
                    return 2;
                }
                sizes[nsizes++] = (int)x;
            }
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            if ((threads = (int)int_opt(v, 0, 1024)) < 0) {
                fprintf(stderr, "mantis bench gemm: --threads '%s': expected 0 (all cores) .. 1024\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--reps") && v) {
            if ((reps = (int)int_opt(v, 1, 1000)) < 0) {
                fprintf(stderr, "mantis bench gemm: --reps '%s': expected 1 .. 1000\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--model") && v) {
            model = v;
            i++;
        } else if (!strcmp(a, "--seed") && v) {
            char *end;
            seed = strtoull(v, &end, 10);
            if (end == v || *end) {
                fprintf(stderr, "mantis bench gemm: --seed '%s': expected an unsigned integer\n", v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "mantis bench gemm: unknown or incomplete option '%s' (see --help)\n", a);
            return 2;
        }
    }

    mts_format bf16 = mts_format_e8(7);
    mts_mulop op;
    mts_lut lut;
    if (mts_mulop_model(&op, model, &bf16, &err) != MTS_OK || mts_lut_generate(&op, &lut, &err) != MTS_OK) {
        fprintf(stderr, "mantis bench gemm: %s\n", err.msg);
        return 2;
    }
    mts_provider pb, pn, pl, pf;
    memset(&pb, 0, sizeof pb);
    pb.kind = MTS_PROV_BLAS;
    pb.threads = threads;
    pn = pb;
    pn.kind = MTS_PROV_NATIVE;
    pl = pb;
    pl.kind = MTS_PROV_LUT;
    pl.lut = &lut;
    pf = pl;
    pf.fmaq = 1;
    pf.chunk = 16;
    if (mts_qfmt_parse("M7E4", 12, &pf.qprod, &err) != MTS_OK || mts_qfmt_parse("M7E4", 10, &pf.qacc, &err) != MTS_OK) {
        fprintf(stderr, "mantis bench gemm: %s\n", err.msg);
        mts_lut_free(&lut);
        return 2;
    }
    int cores = 1;
#ifdef _OPENMP
    cores = threads > 0 ? threads : omp_get_num_procs();
#endif
    int blas = mts_gemm_have_blas();
    printf("mantis bench gemm: isa %s, %d thread%s, LUT %s e8m7 (bf16), FMAq M7E4 prod bias 12 / acc bias 10, "
           "chunk 16, best of %d, load average %.2f\n", mts_gemm_isa(), cores, cores == 1 ? "" : "s", model, reps,
           loadavg());
    printf("%-6s %-8s %10s %10s %10s %9s %9s\n", "size", "gemm", "wall ms", "cpu ms", "GMAC/s", "x blas", "x lut");
    int status = 0;
    for (int s = 0; s < nsizes; s++) {
        int n = sizes[s];
        size_t nn = (size_t)n * (size_t)n;
        float *A = malloc(nn * sizeof *A), *B = malloc(nn * sizeof *B), *C = malloc(nn * sizeof *C);
        if (!A || !B || !C) {
            fprintf(stderr, "mantis bench gemm: out of memory at size %d\n", n);
            free(A); free(B); free(C);
            status = 2;
            break;
        }
        uint64_t st = seed;
        for (size_t i = 0; i < nn; i++) { /* U(-1, 1): typical activations and weights */
            A[i] = (float)((double)(splitmix64(&st) >> 40) / 8388608.0 * 2.0 - 1.0);
            B[i] = (float)((double)(splitmix64(&st) >> 40) / 8388608.0 * 2.0 - 1.0);
        }
        const mts_provider *ps[4] = {&pb, &pn, &pl, &pf};
        const char *names[4] = {"openblas", "native", "lut", "fmaq"};
        double t[4] = {0, 0, 0, 0}, cpu[4] = {0, 0, 0, 0};
        for (int q = 0; q < 4 && !status; q++) {
            if (q == 0 && !blas) continue;
            /* let the previous provider's idle workers (OpenBLAS threads,
             * OpenMP's team) stop spinning, or they steal the cores */
            struct timespec pause = {0, 300000000L};
            nanosleep(&pause, NULL);
            if (time_gemm(ps[q], n, A, B, C, reps, &t[q], &cpu[q], &err) != MTS_OK) {
                fprintf(stderr, "mantis bench gemm: %s\n", err.msg);
                status = 2;
            }
        }
        double macs = (double)n * n * n;
        for (int q = 0; q < 4 && !status; q++) {
            if (t[q] == 0) {
                printf("%-6d %-8s %10s (built without OpenBLAS)\n", n, names[q], "-");
                continue;
            }
            char xb[16] = "-", xl[16] = "-";
            if (t[0] > 0) snprintf(xb, sizeof xb, "%.2f", t[q] / t[0]);
            if (q == 3) snprintf(xl, sizeof xl, "%.2f", t[3] / t[2]);
            printf("%-6d %-8s %10.2f %10.2f %10.2f %9s %9s\n", n, names[q], 1e3 * t[q], 1e3 * cpu[q],
                   macs / t[q] * 1e-9, xb, xl);
        }
        if (!status) {
            if (t[0] > 0)
                printf("%-6d goal LUT <= 4x OpenBLAS: %.2fx %s\n", n, t[2] / t[0], t[2] <= 4 * t[0] ? "met" : "MISSED");
            printf("%-6d goal FMAq <= 3x LUT: %.2fx %s\n", n, t[3] / t[2], t[3] <= 3 * t[2] ? "met" : "MISSED");
        }
        free(A);
        free(B);
        free(C);
    }
    mts_lut_free(&lut);
    return status;
}
