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

/* One GEMM to time: C[m][n] = op(A) op(B) over k, op = transposed where
 * ta / tb (A stored [k][m], B [n][k]). cube: from --sizes (n^3, no
 * transposes), whose rows get the goal lines. */
typedef struct gemm_shape {
    int m, n, k, ta, tb, cube;
} gemm_shape;

typedef struct gemm_opts {
    gemm_shape shapes[2 * BENCH_MAX_SIZES]; /* what is timed: the --sizes cubes, then the --shapes */
    int nshapes, threads, reps;
    const char *model;
    uint64_t seed;
} gemm_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: mantis bench gemm [--sizes N[,N...]] [--shapes MxNxK[:AB][,...]] [--threads T] [--reps R]\n"
               "                        [--model exact|mbm] [--seed S]\n"
               "  times OpenBLAS SGEMM, native, LUT (bf16), FMAq (M7E4, biases 12/10, chunk 16) and\n"
               "  INT8 (the exact unsigned 8-bit table and the broken-array multiplier at BREAK 4 and 6,\n"
               "  operands quantized per call) GEMMs at N^3 (default sizes 512,1024; threads 0 = all cores; reps 3; model mbm)\n"
               "  --shapes: M x N (of C) by K GEMMs, after the --sizes cubes (the default ones only without\n"
               "            --shapes); AB two letters n or t: op(A) and op(B) as stored or transposed (default\n"
               "            nn), e.g. 1024x16x144:tt,16x72x896; goal lines for the cubes only\n"
               "  --device cuda: the GPU providers against cuBLAS (see --device cuda --help)\n");
}

/* "N[,N...]" into sh[] as N x N x N cubes: their count, or -(the exit
 * status of the error printed) (a malformed item, or more sizes than fit:
 * never dropped silently). */
static int parse_sizes(const char *v, gemm_shape *sh)
{
    long x[BENCH_MAX_SIZES];
    int n = mts_parse_int_list(v, 0, 1, 8192, x, BENCH_MAX_SIZES, NULL);
    if (n == -2) return -cli_error(CMD, "--sizes '%s': at most %d sizes", v, BENCH_MAX_SIZES);
    if (n < 0) return -cli_error(CMD, "--sizes '%s': expected sizes 1..8192 separated by commas", v);
    for (int i = 0; i < n; i++) sh[i] = (gemm_shape){(int)x[i], (int)x[i], (int)x[i], 0, 0, 1};
    return n;
}

/* One "MxNxK[:AB]" item of --shapes (each dimension 1..65536, no operand or
 * result over 2^28 floats): 0, or -1. */
static int parse_shape(const char *s, size_t len, gemm_shape *sh)
{
    char buf[64], *dim[3];
    if (len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *ab = strchr(buf, ':');
    int ta = 0, tb = 0;
    if (ab) {
        *ab++ = '\0';
        if (strlen(ab) != 2 || !strchr("nt", ab[0]) || !strchr("nt", ab[1])) return -1;
        ta = ab[0] == 't';
        tb = ab[1] == 't';
    }
    dim[0] = buf;
    for (int i = 1; i < 3; i++) {
        char *x = strchr(dim[i - 1], 'x');
        if (!x) return -1;
        *x = '\0';
        dim[i] = x + 1;
    }
    long v[3];
    for (int i = 0; i < 3; i++)
        if (strchr(dim[i], 'x') || mts_parse_int(dim[i], 1, 65536, &v[i])) return -1;
    if ((double)v[0] * v[2] > 268435456.0 || (double)v[1] * v[2] > 268435456.0 || (double)v[0] * v[1] > 268435456.0)
        return -1;
    *sh = (gemm_shape){(int)v[0], (int)v[1], (int)v[2], ta, tb, 0};
    return 0;
}

/* "MxNxK[:AB][,...]" into sh[]: their count, or -(the exit status of the
 * error printed). */
static int parse_shapes(const char *v, gemm_shape *sh)
{
    int n = 0;
    for (const char *p = v;; p++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (n == BENCH_MAX_SIZES) return -cli_error(CMD, "--shapes '%s': at most %d shapes", v, BENCH_MAX_SIZES);
        if (parse_shape(p, len, &sh[n]))
            return -cli_error(CMD, "--shapes '%s': expected MxNxK[:AB] items separated by commas (dimensions "
                                   "1..65536, at most 2^28 floats an operand; A and B n or t)", v);
        n++;
        if (!e) return n;
        p = e;
    }
}

/* Fills o from argv: 1 parsed, 0 help printed, 2 error printed. */
static int parse_opts(int argc, char **argv, gemm_opts *o)
{
    *o = (gemm_opts){{{0}}, 0, 0, 3, "mbm", 1};
    gemm_shape cubes[BENCH_MAX_SIZES] = {{512, 512, 512, 0, 0, 1}, {1024, 1024, 1024, 0, 0, 1}}, more[BENCH_MAX_SIZES];
    int ncubes = 2, nmore = 0, sized = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        }
        if (!v) return cli_error(CMD, "unknown or incomplete option '%s' (see --help)", a);
        if (!strcmp(a, "--sizes")) {
            if ((ncubes = parse_sizes(v, cubes)) < 0) return -ncubes;
            sized = 1;
        } else if (!strcmp(a, "--shapes")) {
            if ((nmore = parse_shapes(v, more)) < 0) return -nmore;
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
    /* the cubes of --sizes (the default ones only without --shapes), then the shapes */
    if (nmore && !sized) ncubes = 0;
    memcpy(o->shapes, cubes, sizeof *cubes * (size_t)ncubes);
    memcpy(o->shapes + ncubes, more, sizeof *more * (size_t)nmore);
    o->nshapes = ncubes + nmore;
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
static int time_gemm(const mts_provider *p, const gemm_shape *s, const float *A, const float *B, float *C, int reps,
                     double *best, double *cpu, mts_err *err)
{
    *best = 1e30;
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    for (int r = -1; r < reps; r++) {
        double c0 = mts_clock_seconds(CLOCK_PROCESS_CPUTIME_ID), t0 = mts_clock_now();
        int rc = mts_gemm(p, s->ta, s->tb, s->m, s->n, s->k, A, lda, B, ldb, 0.0f, C, s->n, err);
        double t = mts_clock_now() - t0, c = mts_clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (rc != MTS_OK) return rc;
        if (r >= 0 && t < *best) {
            *best = t;
            *cpu = c;
        }
    }
    return MTS_OK;
}

/* na and nb operands U(-1, 1), typical activations and weights, from seed:
 * A and B alternate draws (then the longer one's rest). */
static void fill_operands(uint64_t seed, size_t na, size_t nb, float *A, float *B)
{
    mts_rng rng = {seed};
    for (size_t i = 0; i < na || i < nb; i++) {
        float a = (float)((double)(mts_rng_next(&rng) >> 40) / 8388608.0 * 2.0 - 1.0);
        float b = (float)((double)(mts_rng_next(&rng) >> 40) / 8388608.0 * 2.0 - 1.0);
        if (i < na) A[i] = a;
        if (i < nb) B[i] = b;
    }
}

/* Times every provider on shape s into t[] / cpu[] (0 for OpenBLAS when the
 * build has none). */
static int time_size(const gemm_opts *o, const mts_provider p[N_PROV], const gemm_shape *s, double t[N_PROV],
                     double cpu[N_PROV], mts_err *err)
{
    size_t na = (size_t)s->m * (size_t)s->k, nb = (size_t)s->k * (size_t)s->n, nc = (size_t)s->m * (size_t)s->n;
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C = malloc(nc * sizeof *C);
    int rc = MTS_OK;
    if (!A || !B || !C) rc = mts_fail(err, MTS_ENOMEM, "out of memory at %dx%dx%d", s->m, s->n, s->k);
    if (!rc) fill_operands(o->seed, na, nb, A, B);
    for (int q = 0; q < N_PROV && !rc; q++) {
        t[q] = cpu[q] = 0;
        if (q == 0 && !mts_gemm_have_blas()) continue;
        /* let the previous provider's idle workers (OpenBLAS threads,
         * OpenMP's team) stop spinning, or they steal the cores */
        struct timespec pause = {0, 300000000L};
        nanosleep(&pause, NULL);
        rc = time_gemm(&p[q], s, A, B, C, o->reps, &t[q], &cpu[q], err);
    }
    free(A);
    free(B);
    free(C);
    return rc;
}

/* One row per provider, then, for an n^3 size, the goals (ratios against
 * OpenBLAS and LUT). A row is labelled n, or MxNxK:AB for a shape, in a
 * column w wide. */
static void shape_label(const gemm_shape *s, char *n, size_t size)
{
    if (s->cube) snprintf(n, size, "%d", s->m);
    else snprintf(n, size, "%dx%dx%d:%c%c", s->m, s->n, s->k, s->ta ? 't' : 'n', s->tb ? 't' : 'n');
}

static void print_size(const gemm_shape *s, int w, const double t[N_PROV], const double cpu[N_PROV])
{
    double macs = (double)s->m * s->n * s->k;
    char n[48];
    shape_label(s, n, sizeof n);
    for (int q = 0; q < N_PROV; q++) {
        if (t[q] == 0) {
            printf("%-*s %-8s %10s (built without OpenBLAS)\n", w, n, prov_names[q], "-");
            continue;
        }
        char xb[16] = "-", xl[16] = "-";
        if (t[0] > 0) snprintf(xb, sizeof xb, "%.2f", t[q] / t[0]);
        if (q >= 3) snprintf(xl, sizeof xl, "%.2f", t[q] / t[2]);
        printf("%-*s %-8s %10.3f %10.3f %10.2f %9s %9s\n", w, n, prov_names[q], 1e3 * t[q], 1e3 * cpu[q],
               macs / t[q] * 1e-9, xb, xl);
    }
    if (!s->cube) return; /* the goals are stated at n^3 */
    if (t[0] > 0)
        printf("%-*s goal LUT <= 4x OpenBLAS: %.2fx %s\n", w, n, t[2] / t[0], t[2] <= 4 * t[0] ? "met" : "MISSED");
    printf("%-*s goal FMAq <= 3x LUT: %.2fx %s\n", w, n, t[3] / t[2], t[3] <= 3 * t[2] ? "met" : "MISSED");
    for (int q = 4; q < N_PROV; q++)
        printf("%-*s goal %s table <= LUT (time per multiply-add): %.2fx %s\n", w, n, prov_names[q], t[q] / t[2],
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
    int w = 6; /* the label column: sizes, or the widest shape */
    for (int s = 0; s < o.nshapes; s++) {
        char n[48];
        shape_label(&o.shapes[s], n, sizeof n);
        if ((int)strlen(n) > w) w = (int)strlen(n);
    }
    printf("%-*s %-8s %10s %10s %10s %9s %9s\n", w, "size", "gemm", "wall ms", "cpu ms", "GMAC/s", "x blas", "x lut");
    int status = 0;
    for (int s = 0; s < o.nshapes && !status; s++) {
        double t[N_PROV], cpu[N_PROV];
        if (time_size(&o, p, &o.shapes[s], t, cpu, &err) != MTS_OK)
            status = cli_error(CMD, "%s", err.msg);
        else
            print_size(&o.shapes[s], w, t, cpu);
    }
    mts_lut_free(&lut);
    for (int q = 0; q < N_INT; q++) mts_lut_free(&itab[q]);
    return status;
}
