/* bench_rtl.c - `mantis bench rtl`: throughput of Verilated sweeps and of
 * verification, each next to a baseline timed in the same run (the C model
 * doing the same pairs on one core). Goals (issue 6): 7-bit significand sweep
 * < 0.1 s, 11-bit sweep (4M pairs) < 2 s, 13-bit accumulator sweep (2^26
 * pairs) < 10 s. Designs come from rtl/ of the source tree (--rtl-dir). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/clock.h"
#include "cli_util.h"
#include "commands.h"
#include "mantis/fmaq.h"
#include "mantis/rtl.h"
#include "mantis/verify.h"

static int open_design(const char *dir, const char *file, const char *param, mts_rtl **r, double *secs)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    mts_rtl_opts o;
    memset(&o, 0, sizeof o);
    o.path = path;
    if (param) o.param[o.nparams++] = param;
    mts_err err;
    double t0 = mts_clock_now();
    int rc = mts_rtl_open(&o, r, &err);
    if (rc) return cli_fail("bench", rc, &err);
    *secs = mts_clock_now() - t0;
    return 0;
}

/* Best of `reps` exhaustive sweeps of 2^bits x 2^bits pairs. */
static double time_sweep(mts_rtl *r, int bits0, int bits1, uint64_t *y, int reps)
{
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        double t0 = mts_clock_now();
        mts_rtl_sweep(r, bits0, 0, bits1, 0, y, NULL);
        double t = mts_clock_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* The C model's significand function over the same pairs (one core). */
static double time_c_sig(int M, uint64_t *y)
{
    const mts_model *m = mts_model_find("exact-wide");
    double t0 = mts_clock_now();
    uint32_t n = 1u << M;
    for (uint32_t a = 0; a < n; a++)
        for (uint32_t b = 0; b < n; b++) {
            int F;
            y[(a << M) | b] = m->sig(a, b, M, &F);
        }
    return mts_clock_now() - t0;
}

static void line(const char *what, double pairs, double secs, const char *extra)
{
    printf("  %-44s %12.0f pairs %9.4f s %9.1f Mpairs/s  %s\n", what, pairs, secs, pairs / secs / 1e6, extra);
}

/* The four designs of the benchmark, opened (built into the cache if needed). */
typedef struct {
    mts_rtl *r7, *r11, *ra, *rm;
    double o7, o11, oa, om; /* seconds to open each */
} designs;

static int open_designs(const char *dir, designs *d)
{
    int rc = open_design(dir, "mul_exact.v", "M=7", &d->r7, &d->o7);
    if (!rc) rc = open_design(dir, "mul_exact.v", "M=11", &d->r11, &d->o11);
    if (!rc) rc = open_design(dir, "fmaq_acc.v", NULL, &d->ra, &d->oa);
    if (!rc) rc = open_design(dir, "mul_mbm.v", NULL, &d->rm, &d->om);
    return rc;
}

/* Significand sweeps at M = 7 and 11 next to the C model, and LUT generation. */
static void bench_sig(const designs *d, uint64_t *y)
{
    double t7 = time_sweep(d->r7, 7, 7, y, 5), c7 = time_c_sig(7, y);
    line("rtl mul_exact M=7 (goal < 0.1 s)", 16384.0, t7, t7 < 0.1 ? "ok" : "SLOW");
    line("  C model exact-wide M=7, one core", 16384.0, c7, "");
    double t11 = time_sweep(d->r11, 11, 11, y, 2), c11 = time_c_sig(11, y);
    line("rtl mul_exact M=11 (goal < 2 s)", 4194304.0, t11, t11 < 2 ? "ok" : "SLOW");
    line("  C model exact-wide M=11, one core", 4194304.0, c11, "");
    mts_lut lut;
    mts_err err;
    double t0 = mts_clock_now();
    int lrc = mts_rtl_lut(d->r11, &lut, &err);
    double tl = mts_clock_now() - t0;
    if (!lrc) {
        line("rtl LUT generation M=11 (sweep + entries)", 4194304.0, tl, "");
        mts_lut_free(&lut);
    }
}

/* The accumulator: 2^26 pairs in sweeps of 2^20 (13-bit p rows x 13-bit s),
 * next to the C model on every 7th row (scaled). */
static void bench_acc(mts_rtl *ra, uint64_t *y)
{
    const mts_rtl_info *ia = mts_rtl_get_info(ra);
    int w0 = ia->w0, w1 = ia->w1, rb = 20 - w1 > 0 ? 20 - w1 : 0;
    double t0 = mts_clock_now();
    for (uint32_t row = 0; row < (1u << w0); row += 1u << rb) mts_rtl_sweep(ra, rb, row, w1, 0, y, NULL);
    double ta = mts_clock_now() - t0;
    char what[96];
    snprintf(what, sizeof what, "rtl fmaq_acc %d+%d bits (goal < 10 s)", w0, w1);
    line(what, (double)(1ull << (w0 + w1)), ta, w0 + w1 == 26 && ta < 10 ? "ok" : (w0 + w1 == 26 ? "SLOW" : ""));
    const mts_qfmt *qp = &ia->qprod, *qa = &ia->qacc;
    uint32_t acc = 0;
    double c0 = mts_clock_now();
    for (uint32_t p = 0; p < (1u << w0); p += 7)
        for (uint32_t s = 0; s < (1u << w1); s++)
            acc ^= mts_q_encode(qa, mts_fmaq(qp, qa, mts_q_decode(qp, p), mts_q_decode(qa, s)));
    double ct = (mts_clock_now() - c0) * 7.0;
    volatile uint32_t keep = acc; /* the loop's result is used */
    (void)keep;
    line("  C model mts_fmaq (+ decode/encode), one core", (double)(1ull << (w0 + w1)), ct, "");
}

/* `mantis verify` on three designs; 2 if one could not run. */
static int bench_verify(const designs *d)
{
    struct {
        mts_rtl *r;
        const char *model, *what;
    } runs[] = {{d->rm, "mbm", "verify mul_mbm M=7 vs LUT + model mbm"},
                {d->r11, NULL, "verify mul_exact M=11 vs LUT"},
                {d->ra, NULL, "verify fmaq_acc 13+13 bits vs FMAq, exhaustive"}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        mts_verify_opts vo;
        memset(&vo, 0, sizeof vo);
        vo.model = runs[k].model;
        vo.max_report = 0;
        mts_verify_result res;
        mts_err err;
        double v0 = mts_clock_now();
        int rc = mts_verify_rtl(runs[k].r, &vo, &res, &err);
        if (rc) return cli_fail("bench", rc, &err);
        double vt = mts_clock_now() - v0;
        line(runs[k].what, (double)res.cases, vt, res.mismatches ? "MISMATCHES" : "bit-exact");
    }
    return 0;
}

int cmd_bench_rtl(int argc, char **argv)
{
    const char *dir = MANTIS_SOURCE_DIR "/rtl";
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: mantis bench rtl [--rtl-dir DIR]\n"
                   "Times exhaustive sweeps of Verilated designs (rtl/mul_exact.v at M = 7 and 11,\n"
                   "rtl/fmaq_acc.v at 13+13 bits) and `mantis verify` throughput, next to the C\n"
                   "models on one core. Models are built into the cache first if needed.\n");
            return 0;
        }
        if (!strcmp(argv[i], "--rtl-dir") && i + 1 < argc) {
            dir = argv[++i];
            continue;
        }
        return cli_error("bench", "unknown option '%s' (see mantis bench rtl --help)", argv[i]);
    }
    designs d;
    memset(&d, 0, sizeof d);
    int rc = open_designs(dir, &d);
    uint64_t *y = rc ? NULL : malloc(((size_t)1 << 22) * sizeof *y);
    if (!rc && !y) rc = cli_error("bench", "out of memory");
    if (!rc) {
        printf("mantis bench rtl: Verilated models, 2 instances on 2 threads (open: %.2f s, %.2f s, %.2f s, %.2f s;"
               " %s)\n",
               d.o7, d.o11, d.oa, d.om,
               mts_rtl_get_info(d.r7)->cache_hit && mts_rtl_get_info(d.r11)->cache_hit ? "from the cache"
                                                                                          : "some built");
        printf("sweeps:\n");
        bench_sig(&d, y);
        bench_acc(d.ra, y);
        printf("verification (mantis verify):\n");
        rc = bench_verify(&d);
    }
    free(y);
    mts_rtl_close(d.r7);
    mts_rtl_close(d.r11);
    mts_rtl_close(d.ra);
    mts_rtl_close(d.rm);
    return rc;
}
