/* bench_core.c - `mantis bench core`: scalar throughput of the numeric core
 * against native FP32 in the same run. Each kernel runs over the same seeded
 * operands; the best of several repetitions is reported, as ns per operation
 * and as a ratio to the native operation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/clock.h"
#include "cli_util.h"
#include "commands.h"
#include "mantis/amsim.h"
#include "mantis/fmaq.h"
#include "mantis/fpbits.h"
#include "mantis/lut.h"
#include "mantis/rng.h"

typedef struct {
    size_t n;
    const uint32_t *a, *b;
    uint32_t *c;
    const mts_lut *lut;
    const mts_mulop *op;
    const mts_qfmt *qp, *qa;
} ctx;

/* each kernel returns a checksum so the compiler keeps the work */
static uint32_t k_native_mul(const ctx *x)
{
    for (size_t i = 0; i < x->n; i++) x->c[i] = mts_f2u(mts_u2f(x->a[i]) * mts_u2f(x->b[i]));
    return x->c[x->n / 2];
}
static uint32_t k_amsim_e8(const ctx *x)
{
    for (size_t i = 0; i < x->n; i++) x->c[i] = mts_amsim_e8(x->lut->entry, x->lut->fmt.M, x->a[i], x->b[i]);
    return x->c[x->n / 2];
}
static uint32_t k_amsim(const ctx *x)
{
    for (size_t i = 0; i < x->n; i++) x->c[i] = mts_amsim(x->lut, x->a[i], x->b[i]);
    return x->c[x->n / 2];
}
static uint32_t k_model(const ctx *x)
{
    for (size_t i = 0; i < x->n; i++) x->c[i] = x->op->fn(x->op, x->a[i], x->b[i]);
    return x->c[x->n / 2];
}
static uint32_t k_native_add(const ctx *x)
{
    float s = 0;
    for (size_t i = 0; i < x->n; i++) s += mts_u2f(x->a[i]);
    return mts_f2u(s);
}
static uint32_t k_fmaq(const ctx *x)
{
    uint32_t s = 0;
    for (size_t i = 0; i < x->n; i++) s = mts_fmaq(x->qp, x->qa, x->a[i], s);
    return s;
}
static uint32_t k_q(const ctx *x)
{
    for (size_t i = 0; i < x->n; i++) x->c[i] = mts_q(x->qa, x->a[i]);
    return x->c[x->n / 2];
}

static double best(uint32_t (*k)(const ctx *), const ctx *x, int reps, uint32_t *sink)
{
    double t = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = mts_clock_now();
        *sink ^= k(x);
        double dt = mts_clock_now() - t0;
        if (dt < t) t = dt;
    }
    return t * 1e9 / (double)x->n;
}

/* --n / --reps from argv: 1 parsed, 0 help printed, 2 error printed. */
static int parse_opts(int argc, char **argv, long *n, long *reps)
{
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: mantis bench core [--n N] [--reps R]\n"
                   "Scalar throughput (one core) of AMSim (bf16 LUT from mbm), the mbm C model and FMAq\n"
                   "(M7E4 products/accumulator), as ns/op and as ratios to native FP32 multiply / add.\n");
            return 0;
        }
        if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            if (mts_parse_int(argv[++i], 1024, 1L << 28, n)) return cli_error("bench", "--n: expected 1024..2^28");
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (mts_parse_int(argv[++i], 1, 1000, reps)) return cli_error("bench", "--reps: expected 1..1000");
        } else {
            return cli_error("bench", "unknown option '%s'", argv[i]);
        }
    }
    return 1;
}

/* n operand pairs from seed 1: normal numbers in [2^-8, 2^8), random signs. */
static void fill_operands(long n, uint32_t *a, uint32_t *b)
{
    mts_rng rng = {1};
    for (long i = 0; i < n; i++) {
        uint64_t r = mts_rng_next(&rng);
        a[i] = (uint32_t)(r & 0x807FFFFFu) | (uint32_t)(119 + (r >> 32) % 16) << 23;
        b[i] = (uint32_t)((r >> 8) & 0x807FFFFFu) | (uint32_t)(119 + (r >> 40) % 16) << 23;
    }
}

/* Times every kernel over x and prints ns/op and the ratio to its native
 * baseline (multiply or add), timed in the same run. */
static void run_kernels(const ctx *x, long reps)
{
    uint32_t sink = 0;
    double mul = best(k_native_mul, x, (int)reps, &sink), add = best(k_native_add, x, (int)reps, &sink);
    struct {
        const char *name, *base;
        double t, bt;
    } rows[] = {
        {"native FP32 multiply", "mul", mul, mul},
        {"AMSim e8 fast path (bf16 LUT)", "mul", best(k_amsim_e8, x, (int)reps, &sink), mul},
        {"AMSim generic (bf16 LUT)", "mul", best(k_amsim, x, (int)reps, &sink), mul},
        {"mbm C model (direct simulation)", "mul", best(k_model, x, (int)reps, &sink), mul},
        {"native FP32 add (sequential sum)", "add", add, add},
        {"Q quantizer M7E4", "add", best(k_q, x, (int)reps, &sink), add},
        {"FMAq M7E4 (sequential, exact add)", "add", best(k_fmaq, x, (int)reps, &sink), add},
    };
    printf("mantis bench core: %zu operands, best of %ld, one core (checksum %08x)\n", x->n, reps, sink);
    printf("%-36s %10s %10s\n", "kernel", "ns/op", "x native");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        printf("%-36s %10.3f %9.1fx %s\n", rows[i].name, rows[i].t, rows[i].t / rows[i].bt, rows[i].base);
}

int cmd_bench_core(int argc, char **argv)
{
    long n = 1 << 22, reps = 5;
    int rc = parse_opts(argc, argv, &n, &reps);
    if (rc != 1) return rc;
    mts_err err;
    mts_format bf16 = mts_format_e8(7);
    mts_mulop op;
    mts_lut lut;
    if (mts_mulop_model(&op, "mbm", &bf16, &err) || mts_lut_generate(&op, &lut, &err))
        return cli_error("bench", "%s", err.msg);
    mts_qfmt qp, qa;
    uint32_t *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *c = malloc((size_t)n * 4);
    if (mts_qfmt_parse("M7E4", 12, &qp, &err) || mts_qfmt_parse("M7E4", 10, &qa, &err))
        rc = cli_error("bench", "%s", err.msg);
    else if (!a || !b || !c)
        rc = cli_error("bench", "out of memory for %ld operands", n);
    if (rc == 1) {
        fill_operands(n, a, b);
        ctx x = {(size_t)n, a, b, c, &lut, &op, &qp, &qa};
        run_kernels(&x, reps);
        rc = 0;
    }
    free(a);
    free(b);
    free(c);
    mts_lut_free(&lut);
    return rc;
}
