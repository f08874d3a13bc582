/* bench_train.c - `mantis bench train`: one training epoch of LeNet-300-100,
 * LeNet-5 and vit-tiny (MNIST) and ResNet-20 (CIFAR-10, or CIFAR-shaped
 * synthetic data written here when no CIFAR-10 directory is given) with the
 * native FP32 kernel, OpenBLAS, the bf16 MBM LUT, FMAq M7E4 (the LUT with
 * M7E4 product/accumulator, biases 12/10, chunk 16) and, for the LeNets, the
 * exact INT8 table (quantization-aware, STE backward), each a `mantis train`
 * child of this binary, against the same epoch in PyTorch CPU
 * (examples/bench_torch.py, when python3-torch is importable; skipped with a
 * note otherwise), all in one run, as ratios to PyTorch with the issues'
 * goals. Each figure is the best epoch time ("seconds" of the train JSON: the
 * epoch, not loading or evaluation) of --reps runs. With --device cuda both
 * sides run on the GPU: PyTorch FP32 with TF32 off and its data on the GPU,
 * ours `mantis train --device cuda` (OpenBLAS has no GPU row; a configuration
 * the trainer refuses on the GPU says why). docs/benchmarks.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/fs.h"
#include "mantis/gpu.h"
#include "mantis/intmul.h"
#include "mantis/json.h"
#include "mantis/proc.h"
#include "mantis/rng.h"

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
/* The models, their data, batch and default training samples (a ResNet-20
 * or vit-tiny epoch of the whole set would take many minutes per
 * configuration on a CPU; on the GPU every model takes its whole set, as the
 * issue's anchors were measured; --subset sets every model's count). */
#define N_MODELS 4
static const struct {
    const char *name;
    int cifar; /* 1: CIFAR-10, else MNIST */
    int batch, subset;
} models[N_MODELS] = {
    {"lenet300", 0, 64, 0}, {"lenet5", 0, 64, 0}, {"resnet20", 1, 128, 5120}, {"vit-tiny", 0, 64, 12800}};

typedef struct train_bench_opts {
    int subset, threads, reps, torch;
    int run[N_MODELS]; /* --models */
    const char *data_dir, *cifar_dir, *python, *script, *mantis;
    int cuda; /* --device cuda: both sides on the GPU */
} train_bench_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: mantis bench train [--device cpu|cuda] [--models LIST] [--subset N] [--threads T] [--reps R]\n"
               "                          [--data-dir DIR] [--cifar-dir DIR] [--python PY] [--torch-script FILE]\n"
               "                          [--no-torch] [--mantis EXE]\n"
               "  one training epoch of each model with fp32, blas, bf16 MBM LUT, FMAq M7E4 and (LeNets)\n"
               "  INT8 (exact table, QAT), and the same epoch in PyTorch CPU, as ratios to PyTorch. Models (--models, default all):\n"
               "  lenet300, lenet5 (MNIST, batch 64, all 60000 samples), vit-tiny (MNIST, batch 64,\n"
               "  12800 samples), resnet20 (CIFAR-10 from --cifar-dir, else CIFAR-shaped synthetic data;\n"
               "  batch 128, 5120 samples); --subset N: the first N samples of every model. Defaults:\n"
               "  2 threads, best of 1, data/mnist, /usr/bin/python3 if present, examples/bench_torch.py;\n"
               "  --mantis: time another build's `mantis train`, e.g. an older one\n"
               "  --device cuda: both on the GPU: PyTorch FP32 with TF32 off and its data on the GPU against\n"
               "  `mantis train --device cuda` (no blas row), every model's whole set unless --subset;\n"
               "  exit 2 when no CUDA device can be used\n");
}

/* --models: a comma-separated list of the names above; 0, or 2 with an
 * error printed. */
static int parse_models(const char *v, int run[N_MODELS])
{
    char buf[256];
    if (strlen(v) >= sizeof buf) return cli_error(CMD, "--models '%s': too long", v);
    snprintf(buf, sizeof buf, "%s", v);
    memset(run, 0, sizeof(int) * N_MODELS);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int i = 0;
        while (i < N_MODELS && strcmp(t, models[i].name)) i++;
        if (i == N_MODELS)
            return cli_error(CMD, "--models: unknown model '%s' (expected lenet300, lenet5, resnet20, vit-tiny)", t);
        run[i] = 1;
    }
    for (int i = 0; i < N_MODELS; i++)
        if (run[i]) return 0;
    return cli_error(CMD, "--models '%s': no model named", v);
}

/* Fills o from argv: 1 parsed, 0 help printed, 2 error printed. */
static int parse_opts(int argc, char **argv, train_bench_opts *o)
{
    *o = (train_bench_opts){0, 2, 1, 1, {1, 1, 1, 1}, "data/mnist", NULL, NULL, "examples/bench_torch.py",
                            "/proc/self/exe", 0};
    o->python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--no-torch")) {
            o->torch = 0;
            continue;
        }
        if (!v) return cli_error(CMD, "unknown or incomplete option '%s' (see --help)", a);
        if (!strcmp(a, "--device")) {
            if (strcmp(v, "cpu") && strcmp(v, "cuda")) return cli_error(CMD, "--device '%s': expected cpu or cuda", v);
            o->cuda = !strcmp(v, "cuda");
        } else if (!strcmp(a, "--subset")) {
            if (mts_parse_int(v, 0, 60000, &x)) return cli_error(CMD, "--subset '%s': expected 0 .. 60000", v);
            o->subset = (int)x;
        } else if (!strcmp(a, "--threads")) {
            if (mts_parse_int(v, 1, 1024, &x)) return cli_error(CMD, "--threads '%s': expected 1 .. 1024", v);
            o->threads = (int)x;
        } else if (!strcmp(a, "--reps")) {
            if (mts_parse_int(v, 1, 100, &x)) return cli_error(CMD, "--reps '%s': expected 1 .. 100", v);
            o->reps = (int)x;
        } else if (!strcmp(a, "--models")) {
            if (parse_models(v, o->run)) return 2;
        } else if (!strcmp(a, "--data-dir")) {
            o->data_dir = v;
        } else if (!strcmp(a, "--cifar-dir")) {
            o->cifar_dir = v;
        } else if (!strcmp(a, "--python")) {
            o->python = v;
        } else if (!strcmp(a, "--mantis")) {
            o->mantis = v;
        } else if (!strcmp(a, "--torch-script")) {
            o->script = v;
        } else {
            return cli_error(CMD, "unknown or incomplete option '%s' (see --help)", a);
        }
        i++;
    }
    return 1;
}

/* The seconds of the first epoch in mantis train's JSON at path (its
 * "epochs"), or bench_torch.py's (a top-level "seconds"), or -1. */
static double epoch_seconds(const char *path)
{
    mts_json *j = mts_json_load(path);
    const mts_json *e = mts_json_get(j, "epochs");
    double v = e && e->type == MTS_JARR && e->child ? mts_json_num(e->child, "seconds", -1.0)
               : j && !e                        ? mts_json_num(j, "seconds", -1.0)
                                                : -1.0;
    mts_json_free(j);
    return v;
}

/* bench_torch.py's {"error": ...} line at path, else "": why PyTorch did not run. */
static void torch_error(const char *path, char *buf, size_t n)
{
    mts_json *j = mts_json_load(path);
    snprintf(buf, n, "%s", mts_json_str(j, "error", ""));
    mts_json_free(j);
}

/* The last "mantis ...: " line of a child's log (its error; the ones
 * before are progress), else "". */
static void last_error(const char *log, char *buf, size_t n)
{
    FILE *f = fopen(log, "r");
    char line[512];
    buf[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "mantis ", 7)) snprintf(buf, n, "%s", line);
    }
    if (f) fclose(f);
}

/* The training samples model mi runs. */
static int samples_of(const train_bench_opts *o, int mi)
{
    return o->subset ? o->subset : o->cuda ? 0 : models[mi].subset;
}

/* One timed epoch of configuration q for model mi (its data in dir): its
 * seconds, or -1 with a note in why. */
static double run_conf(const train_bench_opts *o, const char *tmp, int mi, const char *dir, int q, char *why,
                       size_t nw)
{
    const char *model = models[mi].name;
    char json[1200], log[1200], subset[16], threads[16], batch[16], int8[1200];
    snprintf(int8, sizeof int8, "%s/int8u.lut", tmp);
    snprintf(json, sizeof json, "%s/%s-%d.json", tmp, model, q);
    snprintf(log, sizeof log, "%s/%s-%d.log", tmp, model, q);
    snprintf(subset, sizeof subset, "%d", samples_of(o, mi));
    snprintf(threads, sizeof threads, "%d", o->threads);
    snprintf(batch, sizeof batch, "%d", models[mi].batch);
    const char *argv[48];
    int n = 0;
    mts_proc_io io = {0};
    io.log = log;
    if (q == 0) {
        argv[n++] = o->python;
        argv[n++] = o->script;
        argv[n++] = "--model";
        argv[n++] = model;
        argv[n++] = "--data-dir";
        argv[n++] = dir;
        argv[n++] = "--subset";
        argv[n++] = subset;
        argv[n++] = "--threads";
        argv[n++] = threads;
        argv[n++] = "--batch";
        argv[n++] = batch;
        if (o->cuda) {
            argv[n++] = "--device";
            argv[n++] = "cuda";
        }
        io.out = json;
    } else {
        argv[n++] = o->mantis;
        argv[n++] = "train";
        argv[n++] = "--model";
        argv[n++] = model;
        argv[n++] = "--data";
        argv[n++] = models[mi].cifar ? "cifar10" : "mnist";
        argv[n++] = "--data-dir";
        argv[n++] = dir;
        argv[n++] = "--epochs";
        argv[n++] = "1";
        argv[n++] = "--batch";
        argv[n++] = batch;
        if (samples_of(o, mi)) { /* 0: every sample, mantis train's default */
            argv[n++] = "--subset";
            argv[n++] = subset;
        }
        argv[n++] = "--test-subset";
        argv[n++] = "100"; /* evaluation is not timed: keep it short */
        argv[n++] = "--threads";
        argv[n++] = threads;
        argv[n++] = "--json";
        argv[n++] = json;
        if (o->cuda) {
            argv[n++] = "--device";
            argv[n++] = "cuda";
        }
        for (int i = 0; conf_mul[q][i]; i++) argv[n++] = strcmp(conf_mul[q][i], "{INT8}") ? conf_mul[q][i] : int8;
    }
    argv[n] = NULL;
    int rc = mts_proc_run((char *const *)argv, &io);
    double s = rc == 0 ? epoch_seconds(json) : -1.0;
    if (s >= 0 && q && o->cuda) { /* not resident: the row says where the time went (its gpu_path) */
        mts_json *j = mts_json_load(json);
        const char *gp = mts_json_str(j, "gpu_path", "");
        if (strncmp(gp, "per-gemm", 8) == 0) snprintf(why, nw, "%s", gp);
        mts_json_free(j);
    }
    if (s < 0) {
        char msg[512];
        if (q == 0) torch_error(json, msg, sizeof msg);
        else last_error(log, msg, sizeof msg);
        int refused = q && o->cuda && rc == MTS_EXIT_INPUT; /* the trainer refused it on the GPU */
        if (msg[0] && (q == 0 || refused)) snprintf(why, nw, "exit %d: %s", rc, msg); /* the log is removed */
        else if (msg[0]) snprintf(why, nw, "exit %d: %s; see %s", rc, msg, log);
        else snprintf(why, nw, "exit %d, see %s", rc, q == 0 ? json : log);
        if (refused) return -2;
    }
    return s;
}

/* CIFAR-10 binary files of CIFAR-shaped synthetic data in dir: 10,000
 * records (a label, then 3 x 32 x 32 bytes) of seeded uniform bytes in
 * data_batch_1.bin; data_batch_2..5.bin and test_batch.bin link to it (the
 * loaders want every file; a benchmark of up to 10,000 samples reads the
 * first). Timing does not depend on what the pixels show. MTS_OK or an
 * error in err. */
static int write_synthetic_cifar(const char *dir, mts_err *err)
{
    enum { RECORDS = 10000, REC = 3073 };
    uint8_t *buf = malloc((size_t)RECORDS * REC);
    if (!buf) return mts_fail(err, MTS_ENOMEM, "out of memory for synthetic CIFAR-10 data");
    mts_rng r = {20261126u};
    for (size_t i = 0; i < (size_t)RECORDS * REC; i += 8) {
        uint64_t x = mts_rng_next(&r);
        for (size_t j = 0; j < 8 && i + j < (size_t)RECORDS * REC; j++) buf[i + j] = (uint8_t)(x >> (8 * j));
    }
    for (size_t i = 0; i < RECORDS; i++) buf[i * REC] = (uint8_t)(buf[i * REC] % 10u);
    char path[1100];
    snprintf(path, sizeof path, "%s/data_batch_1.bin", dir);
    const void *parts[1] = {buf};
    size_t lens[1] = {(size_t)RECORDS * REC};
    int rc = mts_fs_write_atomic(path, 1, parts, lens, err);
    free(buf);
    static const char *const links[5] = {"data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                                         "data_batch_5.bin", "test_batch.bin"};
    for (int i = 0; i < 5 && rc == MTS_OK; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, links[i]);
        if (symlink("data_batch_1.bin", path))
            rc = mts_fail(err, MTS_EIO, "%s: cannot create the link to data_batch_1.bin", path);
    }
    return rc;
}

static void goal(const char *what, double t, double torch, double limit)
{
    if (t <= 0 || torch <= 0) {
        printf("goal %-28s <= %.1fx PyTorch: not measured\n", what, limit);
        return;
    }
    printf("goal %-28s <= %.1fx PyTorch: %.2fx %s\n", what, limit, t / torch, t <= limit * torch ? "met" : "MISSED");
}

int cmd_bench_train(int argc, char **argv)
{
    train_bench_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc != 1) return rc;
    mts_gpu_info gpu = {0};
    if (o.cuda) { /* no device: the error mantis train --device cuda gives, before anything runs */
        mts_err err;
        int dev = 0;
        rc = mts_gpu_resolve_device("cuda", &dev, &err);
        if (rc == MTS_OK) rc = mts_gpu_probe(&gpu, &err);
        if (rc != MTS_OK) return cli_fail(CMD, rc, &err);
    }
    int mnist = o.run[0] || o.run[1] || o.run[3];
    if (mnist && !mts_fs_exists(o.data_dir))
        return cli_error(CMD, "%s: no MNIST here (mantis data fetch mnist, or --data-dir)", o.data_dir);
    if (o.run[2] && o.cifar_dir && !mts_fs_exists(o.cifar_dir))
        return cli_error(CMD, "%s: no such CIFAR-10 directory (--cifar-dir)", o.cifar_dir);
    char tmp[] = "/tmp/mantis-bench-train-XXXXXX";
    if (!mkdtemp(tmp)) return cli_error(CMD, "cannot create a temporary directory in /tmp");
    if (o.run[0] || o.run[1]) { /* the INT8 rows' table */
        char path[sizeof tmp + 16];
        mts_lut itab;
        mts_err err;
        snprintf(path, sizeof path, "%s/int8u.lut", tmp);
        int irc = mts_intmul_exact_lut(8, 0, &itab, &err);
        if (irc == MTS_OK) {
            irc = mts_lut_save(&itab, path, &err);
            mts_lut_free(&itab);
        }
        if (irc != MTS_OK) {
            mts_fs_rmtree(tmp);
            return cli_error(CMD, "%s", err.msg);
        }
    }
    char synth[sizeof tmp + 16];
    snprintf(synth, sizeof synth, "%s/cifar", tmp);
    if (o.run[2] && !o.cifar_dir) {
        mts_err err;
        if (mts_fs_mkdirs(synth, &err) != MTS_OK || write_synthetic_cifar(synth, &err) != MTS_OK) {
            mts_fs_rmtree(tmp);
            return cli_error(CMD, "synthetic CIFAR-10 data: %s", err.msg);
        }
    }
    if (o.torch && !mts_fs_exists(o.script)) {
        printf("note: %s not found (run from the repository root or pass --torch-script): no PyTorch baseline\n",
               o.script);
        o.torch = 0;
    }
    printf("mantis bench train: %d thread%s, best of %d, load average %.2f; seconds of one epoch\n", o.threads,
           o.threads == 1 ? "" : "s", o.reps, cli_loadavg());
    if (o.cuda)
        printf("  device cuda: %s (sm_%d%d, %d SMs, %.1f GiB); PyTorch FP32 with TF32 off, data on the GPU; ours\n"
               "  mantis train --device cuda\n",
               gpu.name, gpu.cc_major, gpu.cc_minor, gpu.sm_count, (double)gpu.mem_total / (1u << 30));
    for (int mi = 0; mi < N_MODELS; mi++) {
        if (!o.run[mi]) continue;
        char ns[32] = "all";
        if (samples_of(&o, mi)) snprintf(ns, sizeof ns, "the first %d", samples_of(&o, mi));
        printf("  %-9s %s, %s training samples, batch %d\n", models[mi].name,
               models[mi].cifar ? (o.cifar_dir ? o.cifar_dir : "CIFAR-shaped synthetic data") : "MNIST", ns,
               models[mi].batch);
    }
    printf("%-9s %-10s %9s %9s\n", "model", "config", "epoch s", "x torch");
    double t[N_MODELS][N_CONF];
    int failed = 0, torch = o.torch;
    for (int mi = 0; mi < N_MODELS; mi++) {
        const char *dir = models[mi].cifar ? (o.cifar_dir ? o.cifar_dir : synth) : o.data_dir;
        o.torch = torch; /* a model PyTorch failed on does not skip the others' baselines */
        for (int q = 0; q < N_CONF; q++) {
            char why[1400] = "";
            t[mi][q] = -1.0;
            if (!o.run[mi] || (q == 0 && !o.torch) || (q == 5 && mi > 1)) continue; /* INT8: the LeNets */
            if (q == 2 && o.cuda) { /* OpenBLAS: a CPU library */
                printf("%-9s %-10s %9s %9s  not on the GPU (OpenBLAS runs on the CPU)\n", models[mi].name,
                       conf_names[q], "-", "-");
                continue;
            }
            int refused = 0;
            for (int r = 0; r < o.reps; r++) {
                double s = run_conf(&o, tmp, mi, dir, q, why, sizeof why);
                if (s >= 0 && (t[mi][q] < 0 || s < t[mi][q])) t[mi][q] = s;
                refused = s == -2;
                if (s < 0) break;
            }
            if (refused) { /* exit 2 on the GPU: the trainer has no GPU path for it yet (its message says) */
                printf("%-9s %-10s %9s %9s  not available on the GPU (%s)\n", models[mi].name, conf_names[q], "-",
                       "-", why);
                continue;
            }
            if (t[mi][q] < 0) {
                if (q == 0) {
                    printf("%-9s %-10s %9s %9s  skipped: PyTorch did not run (%s; python3-torch%s installed?)\n",
                           models[mi].name, conf_names[q], "-", "-", why, o.cuda ? " with CUDA" : "");
                    o.torch = 0;
                } else {
                    printf("%-9s %-10s %9s %9s  failed: %s\n", models[mi].name, conf_names[q], "-", "-", why);
                    failed = 1;
                }
                continue;
            }
            char x[16] = "-";
            if (t[mi][0] > 0) snprintf(x, sizeof x, "%.2f", t[mi][q] / t[mi][0]);
            printf("%-9s %-10s %9.2f %9s%s%s%s\n", models[mi].name, conf_names[q], t[mi][q], x, why[0] ? "  (" : "",
                   why, why[0] ? ")" : "");
            fflush(stdout);
        }
    }
    if (o.cuda) { /* issue 31's goals, against PyTorch FP32 on the same GPU */
        if (o.run[0]) goal("lenet300 bf16 MBM LUT", t[0][3], t[0][0], 1.0);
        if (o.run[1]) goal("lenet5 bf16 MBM LUT", t[1][3], t[1][0], 1.0);
        if (o.run[2]) {
            goal("resnet20 bf16 MBM LUT", t[2][3], t[2][0], 2.0);
            goal("resnet20 FMAq M7E4", t[2][4], t[2][0], 4.0);
        }
    }
    if (o.run[1] && !o.cuda) {
        goal("lenet5 bf16 MBM LUT", t[1][3], t[1][0], 2.0);
        goal("lenet5 FMAq M7E4", t[1][4], t[1][0], 3.0);
        goal("lenet5 blas", t[1][2], t[1][0], 1.0);
    }
    if (o.run[0] && !o.cuda) goal("lenet300 bf16 MBM LUT", t[0][3], t[0][0], 1.2);
    if (o.run[2] && !o.cuda) {
        goal("resnet20 fp32", t[2][1], t[2][0], 1.2);
        goal("resnet20 bf16 MBM LUT", t[2][3], t[2][0], 2.0);
        goal("resnet20 FMAq M7E4", t[2][4], t[2][0], 3.0);
    }
    if (o.run[3] && !o.cuda) goal("vit-tiny bf16 MBM LUT", t[3][3], t[3][0], 2.0);
    for (int mi = 0; mi < 2; mi++) { /* an INT8 epoch (QAT forward, STE backward) against the bf16 LUT's */
        if (!o.run[mi] || o.cuda) continue;
        if (t[mi][5] <= 0 || t[mi][3] <= 0)
            printf("goal %-8s INT8 epoch <= bf16 MBM LUT epoch: not measured\n", models[mi].name);
        else
            printf("goal %-8s INT8 epoch <= bf16 MBM LUT epoch: %.2fx %s\n", models[mi].name, t[mi][5] / t[mi][3],
                   t[mi][5] <= t[mi][3] ? "met" : "MISSED");
    }
    if (!failed) mts_fs_rmtree(tmp); /* else keep the logs the lines above name */
    return failed ? 2 : 0;
}
