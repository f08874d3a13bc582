/* bench_train.c - `mantis bench train`: one MNIST training epoch of
 * LeNet-300-100 and LeNet-5 with the native FP32 kernel, OpenBLAS, the bf16
 * MBM LUT, FMAq M7E4 (the LUT with M7E4 product/accumulator, biases 12/10,
 * chunk 16) and the exact INT8 table (quantization-aware, STE backward),
 * each a `mantis train` child of this binary, against the
 * same epoch in PyTorch CPU (examples/bench_torch.py, when python3-torch is
 * importable; skipped with a note otherwise), all in one run, as ratios to
 * PyTorch with the goals. Each figure is the best epoch time
 * ("seconds" of the train JSON: the epoch, not loading or evaluation) of
 * --reps runs. docs/benchmarks.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/fs.h"
#include "mantis/intmul.h"
#include "mantis/proc.h"

#define CMD "bench train"
#define N_CONF 6 /* torch, fp32, blas, lut, fmaq, int8: in this order */

static const char *const conf_names[N_CONF] = {"torch", "fp32", "blas", "lut-mbm", "fmaq-M7E4", "int8-ste"};
/* `mantis train` options of each Mantis configuration ({INT8}: the exact
 * unsigned 8-bit table, written into the run's temporary directory) */
static const char *const conf_mul[N_CONF][13] = {
    {NULL},
    {"--mul", "fp32", NULL},
    {"--mul", "blas", NULL},
    {"--mul", "mbm", "--man-bits", "7", NULL},
    {"--mul", "mbm", "--man-bits", "7", "--acc", "M7E4", "--acc-bias", "10", "--prod", "M7E4", "--prod-bias", "12", NULL},
    {"--lut", "{INT8}", "--int-backward", "ste", NULL},
};
static const char *const models[2] = {"lenet300", "lenet5"};

typedef struct train_bench_opts {
    int subset, threads, reps, torch;
    const char *data_dir, *python, *script, *mantis;
} train_bench_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: mantis bench train [--device cpu] [--subset N] [--threads T] [--reps R]\n"
               "                          [--data-dir DIR] [--python PY] [--torch-script FILE] [--no-torch]\n"
               "                          [--mantis EXE]\n"
               "  one MNIST epoch (batch 64) of lenet300 and lenet5 with fp32, blas, bf16 MBM LUT,\n"
               "  FMAq M7E4 and INT8 (exact table, QAT), and the same epoch in PyTorch CPU, as ratios\n"
               "  to PyTorch (defaults: all 60000 samples, 2 threads, best of 1, data/mnist, /usr/bin/python3 if present,\n"
               "  examples/bench_torch.py; --mantis: time another build's `mantis train`, e.g. an older one)\n");
}

/* Fills o from argv: 1 parsed, 0 help printed, 2 error printed. */
static int parse_opts(int argc, char **argv, train_bench_opts *o)
{
    *o = (train_bench_opts){0, 2, 1, 1, "data/mnist", NULL, "examples/bench_torch.py", "/proc/self/exe"};
    o->python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (mts_is_help(a)) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--no-torch")) {
            o->torch = 0;
            continue;
        }
        if (!v) return mts_cli_error(CMD, "unknown or incomplete option '%s' (see --help)", a);
        if (!strcmp(a, "--device")) {
            if (strcmp(v, "cpu")) return mts_cli_error(CMD, "--device '%s': only cpu is benchmarked here", v);
        } else if (!strcmp(a, "--subset")) {
            if (mts_parse_int(v, 0, 60000, &x)) return mts_cli_error(CMD, "--subset '%s': expected 0 .. 60000", v);
            o->subset = (int)x;
        } else if (!strcmp(a, "--threads")) {
            if (mts_parse_int(v, 1, 1024, &x)) return mts_cli_error(CMD, "--threads '%s': expected 1 .. 1024", v);
            o->threads = (int)x;
        } else if (!strcmp(a, "--reps")) {
            if (mts_parse_int(v, 1, 100, &x)) return mts_cli_error(CMD, "--reps '%s': expected 1 .. 100", v);
            o->reps = (int)x;
        } else if (!strcmp(a, "--data-dir")) {
            o->data_dir = v;
        } else if (!strcmp(a, "--python")) {
            o->python = v;
        } else if (!strcmp(a, "--mantis")) {
            o->mantis = v;
        } else if (!strcmp(a, "--torch-script")) {
            o->script = v;
        } else {
            return mts_cli_error(CMD, "unknown or incomplete option '%s' (see --help)", a);
        }
        i++;
    }
    return 1;
}

/* The number after "key": in file path, or -1. */
static double json_number(const char *path, const char *key)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    mts_err err;
    double v = -1.0;
    if (mts_fs_read(path, &buf, &len, &err) != MTS_OK) return -1.0;
    char *text = realloc(buf, len + 1);
    if (!text) {
        free(buf);
        return -1.0;
    }
    text[len] = 0;
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    if (p) v = strtod(p + strlen(pat), NULL);
    free(text);
    return v;
}

/* One timed epoch of configuration q for model: its seconds, or -1 with a
 * note in why. */
static double run_conf(const train_bench_opts *o, const char *tmp, const char *model, int q, char *why, size_t nw)
{
    char json[1200], log[1200], subset[16], threads[16], int8[1200];
    snprintf(int8, sizeof int8, "%s/int8u.lut", tmp);
    snprintf(json, sizeof json, "%s/%s-%d.json", tmp, model, q);
    snprintf(log, sizeof log, "%s/%s-%d.log", tmp, model, q);
    snprintf(subset, sizeof subset, "%d", o->subset);
    snprintf(threads, sizeof threads, "%d", o->threads);
    const char *argv[40];
    int n = 0;
    mts_proc_io io = {0};
    io.log = log;
    if (q == 0) {
        argv[n++] = o->python;
        argv[n++] = o->script;
        argv[n++] = "--model";
        argv[n++] = model;
        argv[n++] = "--data-dir";
        argv[n++] = o->data_dir;
        argv[n++] = "--subset";
        argv[n++] = subset;
        argv[n++] = "--threads";
        argv[n++] = threads;
        io.out = json;
    } else {
        argv[n++] = o->mantis;
        argv[n++] = "train";
        argv[n++] = "--model";
        argv[n++] = model;
        argv[n++] = "--data";
        argv[n++] = "mnist";
        argv[n++] = "--data-dir";
        argv[n++] = o->data_dir;
        argv[n++] = "--epochs";
        argv[n++] = "1";
        argv[n++] = "--subset";
        argv[n++] = subset;
        argv[n++] = "--test-subset";
        argv[n++] = "100"; /* evaluation is not timed: keep it short */
        argv[n++] = "--threads";
        argv[n++] = threads;
        argv[n++] = "--json";
        argv[n++] = json;
        for (int i = 0; conf_mul[q][i]; i++) argv[n++] = strcmp(conf_mul[q][i], "{INT8}") ? conf_mul[q][i] : int8;
    }
    argv[n] = NULL;
    int rc = mts_proc_run((char *const *)argv, &io);
    double s = rc == 0 ? json_number(json, "seconds") : -1.0;
    if (s < 0) snprintf(why, nw, "exit %d, see %s", rc, q == 0 ? json : log);
    return s;
}

static void goal(const char *what, double t, double torch, double limit)
{
    if (t <= 0 || torch <= 0) {
        printf("goal %-28s <= %.1fx PyTorch: not measured\n", what, limit);
        return;
    }
    printf("goal %-28s <= %.1fx PyTorch: %.2fx %s\n", what, limit, t / torch, t <= limit * torch ? "met" : "MISSED");
}

int mts_bench_train(int argc, char **argv)
{
    train_bench_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc != 1) return rc;
    if (!mts_fs_exists(o.data_dir))
        return mts_cli_error(CMD, "%s: no MNIST here (mantis data fetch mnist, or --data-dir)", o.data_dir);
    char tmp[] = "/tmp/mantis-bench-train-XXXXXX";
    if (!mkdtemp(tmp)) return mts_cli_error(CMD, "cannot create a temporary directory in /tmp");
    {
        char path[sizeof tmp + 16];
        mts_lut itab;
        mts_err err;
        snprintf(path, sizeof path, "%s/int8u.lut", tmp);
        int irc = mts_intmul_exact_lut(8, 0, &itab, &err);
        if (irc == MTS_OK) irc = mts_lut_save(&itab, path, &err);
        if (irc == MTS_OK) mts_lut_free(&itab);
        if (irc != MTS_OK) {
            mts_fs_rmtree(tmp);
            return mts_cli_error(CMD, "%s", err.msg);
        }
    }
    if (o.torch && !mts_fs_exists(o.script)) {
        printf("note: %s not found (run from the repository root or pass --torch-script): no PyTorch baseline\n",
               o.script);
        o.torch = 0;
    }
    char nsamp[32] = "all 60000";
    if (o.subset) snprintf(nsamp, sizeof nsamp, "the first %d", o.subset);
    printf("mantis bench train: MNIST, %s training samples, batch 64, %d thread%s, best of %d, load average "
           "%.2f; seconds of one epoch\n",
           nsamp, o.threads, o.threads == 1 ? "" : "s", o.reps, mts_cli_loadavg());
    printf("%-9s %-10s %9s %9s\n", "model", "config", "epoch s", "x torch");
    double t[2][N_CONF];
    int failed = 0;
    for (int mi = 0; mi < 2; mi++) {
        for (int q = 0; q < N_CONF; q++) {
            char why[1400] = "";
            t[mi][q] = -1.0;
            if (q == 0 && !o.torch) continue;
            for (int r = 0; r < o.reps; r++) {
                double s = run_conf(&o, tmp, models[mi], q, why, sizeof why);
                if (s >= 0 && (t[mi][q] < 0 || s < t[mi][q])) t[mi][q] = s;
                if (s < 0) break;
            }
            if (t[mi][q] < 0) {
                if (q == 0) {
                    printf("%-9s %-10s %9s %9s  skipped: PyTorch did not run (%s; python3-torch installed?)\n",
                           models[mi], conf_names[q], "-", "-", why);
                    o.torch = 0;
                } else {
                    printf("%-9s %-10s %9s %9s  failed: %s\n", models[mi], conf_names[q], "-", "-", why);
                    failed = 1;
                }
                continue;
            }
            char x[16] = "-";
            if (t[mi][0] > 0) snprintf(x, sizeof x, "%.2f", t[mi][q] / t[mi][0]);
            printf("%-9s %-10s %9.2f %9s\n", models[mi], conf_names[q], t[mi][q], x);
            fflush(stdout);
        }
    }
    goal("lenet5 bf16 MBM LUT", t[1][3], t[1][0], 2.0);
    goal("lenet5 FMAq M7E4", t[1][4], t[1][0], 3.0);
    goal("lenet5 blas", t[1][2], t[1][0], 1.0);
    goal("lenet300 bf16 MBM LUT", t[0][3], t[0][0], 1.2);
    for (int mi = 0; mi < 2; mi++) { /* an INT8 epoch (QAT forward, STE backward) against the bf16 LUT's */
        if (t[mi][5] <= 0 || t[mi][3] <= 0)
            printf("goal %-8s INT8 epoch <= bf16 MBM LUT epoch: not measured\n", models[mi]);
        else
            printf("goal %-8s INT8 epoch <= bf16 MBM LUT epoch: %.2fx %s\n", models[mi], t[mi][5] / t[mi][3],
                   t[mi][5] <= t[mi][3] ? "met" : "MISSED");
    }
    if (!failed) mts_fs_rmtree(tmp); /* else keep the logs the lines above name */
    return failed ? 2 : 0;
}
