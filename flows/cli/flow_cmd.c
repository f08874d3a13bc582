/* flow_cmd.c - `mantis flow`: every design in a directory through detection,
 * verification, LUT sweep, metrics, synthesis, workload power and training,
 * then the report (docs/flow.md). */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mantis/clock.h"
#include "mantis/fs.h"
#include "mantis/gpu.h"
#include "mantis/hash.h"
#include "mantis/json.h"
#include "mantis/nn_net.h"
#include "mantis/nn_train.h"
#include "mantis/rtl.h"
#include "cli_util.h"
#include "commands.h"
#include "flow.h"

static const char help[] =
    "usage: mantis flow [--designs DIR] [--config FILE] [--out DIR] [--data-dir DIR] [-j N] [--quick]\n"
    "                   [--device cpu|cuda|auto] [--profile auto|none|quick|gpu] [--cifar-dir DIR]\n"
    "                   [--sweep 'DESIGN: PARAM = VALUES'] [--executor local|slurm] [--dry-run]\n"
    "Runs every Verilog design in DIR (default rtl/) through the whole Mantis flow and writes\n"
    "OUT/report.html, OUT/results.csv and OUT/results.json (default results/). Steps are\n"
    "cached by a content hash of their inputs: a re-run does only what changed, and a flow\n"
    "interrupted at any point finishes on the next run with identical results.\n"
    "  --config FILE   flow configuration (default flows/default.flow; docs/flow.md)\n"
    "  --data-dir DIR  where the data sets lie (DIR/mnist, ...); overrides the configuration\n"
    "  -j N            steps run in parallel (default: number of cores)\n"
    "  --quick         the quick profile, a first look: one epoch on 8,000 training images with Adam\n"
    "                  at 0.002, batch 32, the first two seeds; each sweep keeps its ends and middle\n"
    "  --device D      where the trainings and tests run: cpu, cuda or auto (default auto: the GPU\n"
    "                  when one is found; same results either way); overrides the device key\n"
    "  --profile P     sizes of the trainings: auto (default: gpu when the device is cuda and the\n"
    "                  configuration pins no size), none, quick (= --quick) or gpu (3 seeds, more\n"
    "                  data and epochs; ResNet-20 on CIFAR-10 when its files are found, else the\n"
    "                  LeNets on the whole of Fashion-MNIST)\n"
    "  --cifar-dir DIR CIFAR-10's binary files (default DATA_DIR/cifar10)\n"
    "  --sweep SPEC    a parameter sweep, as the configuration's sweep key: every value is a design\n"
    "                  point of its own, DESIGN[PARAM=VALUE] (e.g. 'mul_trunc: M = 2..7',\n"
    "                  'int8_bam: BREAK = 0..10:2'; PARAM = VALUES; ... for a product); repeatable;\n"
    "                  replaces the configuration's sweep of that design ('none': drops them all)\n"
    "  --retry-failed  run again the steps whose failure is on record (a failure is cached like a\n"
    "                  result, keyed by the same inputs)\n"
    "  --executor E    local (default: a process pool here) or slurm (one sbatch job per step;\n"
    "                  OUT and the cache must be on a filesystem the compute nodes share)\n"
    "  --dry-run       print the step commands (with slurm: the sbatch command lines) instead of\n"
    "                  running them\n"
    "exit status: 0 every step ran (a training that diverged is a result of its design: its row says\n"
    "diverged); 1 a step failed or a design failed verification (the report says which); 2 could\n"
    "not run; 128+N interrupted by signal N\n";

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .v files of dir, sorted (deterministic order). */
static int list_designs(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0, cap = 16;
    char **v = malloc((size_t)cap * sizeof *v);
    struct dirent *e;
    while (v && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 2, ".v") || e->d_name[0] == '.') continue;
        if (n == cap) {
            char **nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!nv) break;
            v = nv;
        }
        size_t pl = strlen(dir) + len + 2;
        v[n] = malloc(pl);
        snprintf(v[n++], pl, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    *out = v;
    return n;
}

static void design_name(const char *path, char *buf, size_t n)
{
    const char *b = strrchr(path, '/');
    snprintf(buf, n, "%s", b ? b + 1 : path);
    char *dot = strrchr(buf, '.');
    if (dot) *dot = '\0';
}

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The common training arguments of the configuration, appended to base. */
static int train_args(const flow_cfg *c, const char *model, const char *data, int seed, const char *ck,
                      const char **base, int n, char store[][FLOW_PATH])
{
    int k = 0;
    const char **a = base + n;
    flow_data_path(c, data, store[k], FLOW_PATH); /* data_dir < FLOW_PATH - 32 (config) */
    a[0] = "--model"; a[1] = model; a[2] = "--data"; a[3] = data; a[4] = "--data-dir"; a[5] = store[k++];
    snprintf(store[k], FLOW_PATH, "%d", c->epochs);
    a[6] = "--epochs"; a[7] = store[k++];
    snprintf(store[k], FLOW_PATH, "%d", c->batch);
    a[8] = "--batch"; a[9] = store[k++];
    snprintf(store[k], FLOW_PATH, "%d", seed);
    a[10] = "--seed"; a[11] = store[k++];
    a[12] = "--lr"; a[13] = c->lr; a[14] = "--opt"; a[15] = c->opt; a[16] = "--threads"; a[17] = "1";
    /* the rest of the optimizer pinned as the flow always ran it: not the model's recipe (mantis train --help) */
    a[18] = "--sched"; a[19] = "const"; a[20] = "--momentum"; a[21] = "0.9"; a[22] = "--wd"; a[23] = "0";
    int m = 24;
    if (c->subset) {
        snprintf(store[k], FLOW_PATH, "%d", c->subset);
        a[m++] = "--subset";
        a[m++] = store[k++];
    }
    if (c->test_subset) {
        snprintf(store[k], FLOW_PATH, "%d", c->test_subset);
        a[m++] = "--test-subset";
        a[m++] = store[k++];
    }
    if (ck) {
        a[m++] = "--checkpoint";
        a[m++] = ck;
    }
    if (c->int_row) { /* an integer design: its backward (docs/training.md) */
        a[m++] = "--int-backward";
        a[m++] = c->int_bwd;
    }
    if (c->cuda) { /* on the CPU nothing is added: the steps' keys, so their results, stay the CPU's */
        a[m++] = "--device";
        a[m++] = "cuda";
    }
    a[m++] = "--json";
    a[m++] = "{OUT}";
    a[m] = NULL;
    return n + m;
}

/* A row's multiplier arguments (--lut X / --mul X and --man-bits, --acc, ...)
 * as one --mul-layer SPEC: "X[,man-bits=7,acc=M7E4,...]". */
static void own_spec(const char *const *mul, int nmul, char *buf, size_t n)
{
    static const char *const keys[] = {"--man-bits", "--acc", "--acc-bias", "--prod", "--prod-bias", "--chunk",
                                       "--format", NULL};
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < nmul; i++) {
        if ((!strcmp(mul[i], "--lut") || !strcmp(mul[i], "--mul")) && i + 1 < nmul) {
            len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s", mul[++i]);
            continue;
        }
        if (!strcmp(mul[i], "--no-underflow")) {
            len += (size_t)snprintf(buf + len, len < n ? n - len : 0, ",no-underflow");
            continue;
        }
        for (int k = 0; keys[k]; k++)
            if (!strcmp(mul[i], keys[k]) && i + 1 < nmul) {
                len += (size_t)snprintf(buf + len, len < n ? n - len : 0, ",%s=%s", keys[k] + 2, mul[++i]);
                break;
            }
    }
}

/* The configuration's per-layer rules that apply to model m on data set d,
 * as "--mul-layer" "RULE" pairs appended at a; a rule whose SPEC is
 * "design[,k=v...]" gets the row's own multiplier (mul) in its place.
 * store holds the rewritten rules. Returns the number of arguments added. */
static int layer_args(const flow_cfg *c, int m, int d, const char *const *mul, int nmul, const char **a,
                      char store[][FLOW_ARG])
{
    int n = 0;
    for (int r = 0; r < c->nlayers; r++) {
        if (!(c->layer_mask[m][d] & (1u << r))) continue;
        const char *rule = c->layers[r], *rest = flow_rule_design_rest(rule);
        if (rest) {
            char own[FLOW_PATH];
            own_spec(mul, nmul, own, sizeof own);
            snprintf(store[r], FLOW_ARG, "%.*s=%s%s", (int)(strchr(rule, '=') - rule), rule, own, rest);
            rule = store[r];
        }
        a[n++] = "--mul-layer";
        a[n++] = rule;
    }
    return n;
}

/* Which rules match which model x data set (c->layer_mask), built once
 * before planning; a rule that matches no multiplying layer of any of the
 * flow's nets is a configuration error. Returns 0 or cli_error's status. */
static int match_layers(flow_cfg *c, const char *config)
{
    memset(c->layer_mask, 0, sizeof c->layer_mask);
    if (!c->nlayers) return 0;
    unsigned any = 0;
    for (int m = 0; m < c->nmodels; m++)
        for (int d = 0; d < c->ndatasets; d++) {
            int cifar = !strcmp(c->datasets[d], "cifar10");
            mts_net net;
            mts_err err;
            if (mts_nn_model_build(&net, c->models[m], cifar ? 3 : 1, cifar ? 32 : 28, cifar ? 32 : 28, 10, &err))
                return cli_error("flow", "%s: models: %s", config ? config : "flow", err.msg);
            int *match = calloc((size_t)net.n, sizeof(int));
            if (!match) {
                mts_net_free(&net);
                return cli_error("flow", "out of memory");
            }
            for (int r = 0; r < c->nlayers; r++) {
                char pattern[256]; /* the rule up to '=' (the config reader checked it) */
                snprintf(pattern, sizeof pattern, "%.*s", (int)strcspn(c->layers[r], "="), c->layers[r]);
                memset(match, 0, sizeof(int) * (size_t)net.n);
                if (mts_net_match(&net, pattern, match)) c->layer_mask[m][d] |= 1u << r;
            }
            any |= c->layer_mask[m][d];
            free(match);
            mts_net_free(&net);
        }
    for (int r = 0; r < c->nlayers; r++)
        if (!(any & (1u << r)))
            return cli_error("flow", "%s: layers rule '%s' matches no multiplying layer of the models (see mantis "
                                 "train --model M --list-layers)", config ? config : "flow", c->layers[r]);
    return 0;
}

/* Where the training of design x model x data x seed keeps its checkpoint
 * (for infer and cross evaluation); its parent is created. */
static int ckpt_dir(const flow_graph *g, const char *design, const char *model, const char *data, int seed,
                    char *buf, size_t n)
{
    char parent[FLOW_PATH];
    if (mts_fs_pathf(parent, sizeof parent, "%s/ckpt/%s", g->root, design) || mts_fs_mkdirs(parent, NULL)) return -1;
    return mts_fs_pathf(buf, n, "%s/%s-%s-s%d", parent, model, data, seed);
}

/* `mantis test` of checkpoint ck with the multiplier args mul: step name,
 * dependencies; need_pass as for flow_step. */
static int add_test(flow_graph *g, const flow_cfg *c, const char *design, const char *name, const char *ck, int m,
                    int d, const char *const *mul, int nmul, const int *deps, int ndeps, int need_pass,
                    const char *content, mts_err *err)
{
    const char *argv[STEP_MAX_ARGS];
    char dd[FLOW_PATH], ts[16];
    char lstore[MTS_MAX_LAYER_RULES][FLOW_ARG]; /* copied by flow_add */
    flow_data_path(c, c->datasets[d], dd, sizeof dd);
    int n = 0;
    argv[n++] = "test";
    argv[n++] = "--checkpoint";
    argv[n++] = ck;
    if (c->test_subset) {
        snprintf(ts, sizeof ts, "%d", c->test_subset);
        argv[n++] = "--test-subset";
        argv[n++] = ts;
    }
    for (int i = 0; i < nmul; i++) argv[n++] = mul[i];
    n += layer_args(c, m, d, mul, nmul, argv + n, lstore);
    const char *tail[] = {"--data-dir", dd, "--threads", "1", "--json", "{OUT}", NULL};
    if (c->cuda) {
        argv[n++] = "--device";
        argv[n++] = "cuda";
    }
    for (int i = 0; tail[i]; i++) argv[n++] = tail[i];
    argv[n] = NULL;
    int s = flow_add(g, design, name, "json", argv, deps, ndeps, content, err);
    if (s >= 0) g->s[s].need_pass = need_pass;
    return s;
}

/* A multiplier name of `cross` as `mantis test` arguments. */
static int cross_mul(const char *y, const char **mul)
{
    if (!strcmp(y, "bf16")) { mul[0] = "--mul"; mul[1] = "exact"; mul[2] = "--man-bits"; mul[3] = "7"; return 4; }
    mul[0] = "--mul";
    mul[1] = y;
    return 2;
}

/* Training steps of one arithmetic (mul args) for every model x dataset x
 * seed, "train-MODEL-DATA-sSEED". Exit 3 (diverged) is a result: its JSON
 * says where, and the report shows the run as diverged. */
static int add_trainings(flow_graph *g, const flow_cfg *c, const char *design, const char *const *mul, int nmul,
                         const int *deps, int ndeps, int need_pass, const char *content, mts_err *err)
{
    int keep_ckpt = c->ncross > 0 || (strcmp(c->mode, "train") && !strcmp(design, "baseline-fp32"));
    for (int m = 0; m < c->nmodels; m++)
        for (int d = 0; d < c->ndatasets; d++)
            for (int k = 0; k < c->nseeds; k++) {
                const char *argv[STEP_MAX_ARGS];
                char store[8][FLOW_PATH], name[80], ck[FLOW_PATH];
                char lstore[MTS_MAX_LAYER_RULES][FLOW_ARG]; /* copied by flow_add */
                argv[0] = "train";
                for (int i = 0; i < nmul; i++) argv[1 + i] = mul[i];
                int na = 1 + nmul + layer_args(c, m, d, mul, nmul, argv + 1 + nmul, lstore);
                if (keep_ckpt && ckpt_dir(g, design, c->models[m], c->datasets[d], c->seeds[k], ck, sizeof ck))
                    return mts_fail(err, MTS_EINVAL, "%s: results path too long", g->root), -1;
                train_args(c, c->models[m], c->datasets[d], c->seeds[k], keep_ckpt ? ck : NULL, argv, na, store);
                snprintf(name, sizeof name, "train-%s-%s-s%d", c->models[m], c->datasets[d], c->seeds[k]);
                int s = flow_add(g, design, name, "json", argv, deps, ndeps, content, err);
                if (s < 0) return -1;
                g->s[s].need_pass = need_pass;
                g->s[s].ok_exit[g->s[s].nok++] = MTS_EXIT_DIVERGED; /* a result: the report says so */
                /* cross: the checkpoint tested with each listed multiplier (not after a divergence) */
                for (int y = 0; y < c->ncross; y++) {
                    const char *ym[4];
                    int ny = cross_mul(c->cross[y], ym);
                    char cname[128];
                    snprintf(cname, sizeof cname, "cross-%s-%s-s%d-%s", c->models[m], c->datasets[d], c->seeds[k],
                             c->cross[y]);
                    if (add_test(g, c, design, cname, ck, m, d, ym, ny, &s, 1, 1, content, err) < 0)
                        return -1;
                }
            }
    return 0;
}

/* One design point: a design file, or one point of its sweep (docs/flow.md
 * "Sweeps"), which the flow treats as a design of its own. */
typedef struct flow_point {
    const char *path;                   /* the .v file */
    char name[FLOW_NAME];               /* the design's name, or "DESIGN[P=V,...]" */
    char base[FLOW_NAME];               /* the design's own name: cmodels, signed, unsigned */
    int nparams;
    char params[FLOW_SWEEP_PARAMS][80]; /* the point's overrides, "P=V" */
} flow_point;

/* argv of a command that reads the RTL, with the point's overrides
 * (--param P=V) and, when sign, the configured signedness option of its
 * design appended, in buf (STEP_MAX_ARGS entries). A design that is not
 * swept gets the same arguments (and cache keys) as before sweeps existed. */
static const char *const *rtl_args(const flow_cfg *c, const flow_point *pt, const char *const *argv, int sign,
                                   const char **buf)
{
    int n = 0;
    while (argv[n] && n < STEP_MAX_ARGS - 2 * FLOW_SWEEP_PARAMS - 2) buf[n] = argv[n], n++;
    for (int i = 0; i < pt->nparams; i++) {
        buf[n++] = "--param";
        buf[n++] = pt->params[i];
    }
    const char *sg = sign ? flow_sign_opt(c, pt->base) : NULL;
    if (sg) buf[n++] = sg;
    buf[n] = NULL;
    return buf;
}

/* Workload power: operands recorded from a short training run with the
 * design's LUT (step lut), then synthesis with that trace. The run's test
 * accuracy is not read, and its evaluation records nothing (the tracer
 * watches the training GEMMs only): one test image instead of the set. */
static int plan_power(flow_graph *g, const flow_cfg *c, const flow_point *pt, const char *kind, int lut,
                      const char *content, mts_err *err)
{
    const char *dname = pt->name, *sb[STEP_MAX_ARGS];
    const char *argv[STEP_MAX_ARGS];
    char data[FLOW_PATH], samples[16], subset[16];
    snprintf(samples, sizeof samples, "%d", c->trace_samples);
    snprintf(subset, sizeof subset, "%d", c->trace_subset);
    flow_data_path(c, c->datasets[0], data, sizeof data); /* on the CPU: the operands are recorded there */
    const char *pre[] = {"train", "--lut", "{DEP0}", "--model", c->models[0], "--data", c->datasets[0],
                         "--data-dir", data, "--epochs", "1", "--subset", subset, "--test-subset", "1", "--seed", "1",
                         "--threads", "1", "--trace-operands", "{OUT}", "--trace-samples", samples,
                         "--trace-kind", strcmp(kind, "float") ? "sig" : "float"};
    int n = (int)(sizeof pre / sizeof pre[0]);
    for (int i = 0; i < n; i++) argv[i] = pre[i];
    argv[n] = NULL;
    int dep[1] = {lut};
    int tr = flow_add(g, dname, "trace", "trace", argv, dep, 1, content, err);
    if (tr < 0) return -1;
    dep[0] = tr;
    int pw = flow_add(g, dname, "power", "json",
                      rtl_args(c, pt, ARGV("synth", "--rtl", pt->path, "--power-trace", "{DEP0}", "--json", "{OUT}"),
                               0, sb),
                      dep, 1, content, err);
    return pw < 0 ? -1 : 0;
}

static int find_step(const flow_graph *g, const char *design, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (!strcmp(g->s[i].design, design) && !strcmp(g->s[i].name, name)) return i;
    return -1;
}

/* A design's (or baseline's) runs with multiplier args mul: its trainings
 * (mode train, both) and the FP32 baseline's checkpoints evaluated with it,
 * "infer-MODEL-DATA-sSEED" (mode infer, both; deps[0], deps[1] as for the
 * trainings, need_pass the same). */
static int design_runs(flow_graph *g, const flow_cfg *c, const char *design, const char *const *mul, int nmul,
                       const int *deps, int ndeps, int need_pass, const char *content, mts_err *err)
{
    if (strcmp(c->mode, "infer") && add_trainings(g, c, design, mul, nmul, deps, ndeps, need_pass, content, err))
        return -1;
    if (!strcmp(c->mode, "train")) return 0;
    for (int m = 0; m < c->nmodels; m++)
        for (int d = 0; d < c->ndatasets; d++)
            for (int k = 0; k < c->nseeds; k++) {
                char name[80], ck[FLOW_PATH];
                snprintf(name, sizeof name, "train-%s-%s-s%d", c->models[m], c->datasets[d], c->seeds[k]);
                int fp32 = find_step(g, "baseline-fp32", name);
                if (fp32 < 0 || ckpt_dir(g, "baseline-fp32", c->models[m], c->datasets[d], c->seeds[k], ck, sizeof ck))
                    return mts_fail(err, MTS_EINVAL, "flow: no fp32 baseline training to evaluate"), -1;
                int dd[3] = {ndeps > 0 ? deps[0] : fp32, ndeps > 1 ? deps[1] : fp32, fp32};
                snprintf(name, sizeof name, "infer-%s-%s-s%d", c->models[m], c->datasets[d], c->seeds[k]);
                if (add_test(g, c, design, name, ck, m, d, mul, nmul, dd, 3, need_pass, content, err) < 0)
                    return -1;
            }
    return 0;
}

/* Co-simulation (docs/cosim.md): LeNet-5's conv2 forward GEMM of the first
 * batch, trained with the design's LUT (step gemm), replayed on a 16x16
 * weight-stationary array in lut mode with the synthesis energy (step cosim). */
static int plan_cosim(flow_graph *g, const flow_cfg *c, const char *dname, int lut, int synth, const char *content,
                      mts_err *err)
{
    char data[FLOW_PATH], batch[16];
    snprintf(batch, sizeof batch, "%d", c->batch);
    flow_data_path(c, c->datasets[0], data, sizeof data); /* on the CPU: the GEMM is dumped there */
    int dep[3] = {lut, 0, synth};
    int gm = flow_add(g, dname, "gemm", "gemm",
                      ARGV("train", "--lut", "{DEP0}", "--model", "lenet5", "--data", c->datasets[0], "--data-dir", data,
                           "--epochs", "1", "--batch", batch, "--subset", batch, "--test-subset", batch, "--seed", "1",
                           "--threads", "1", "--dump-layer", "conv2", "--dump-gemm", "{OUT}"),
                      dep, 1, content, err);
    if (gm < 0) return -1;
    dep[1] = gm;
    int cs = flow_add(g, dname, "cosim", "json",
                      ARGV("cosim", "--lut", "{DEP0}", "--gemm", "{DEP1}", "--array", "16x16", "--synth", "{DEP2}",
                           "--json", "{OUT}"),
                      dep, 3, content, err);
    if (cs < 0) return -1;
    g->s[cs].ok_exit[g->s[cs].nok++] = MTS_EXIT_MISMATCH; /* a mismatch is a result */
    return 0;
}

/* Steps of one detected design. det: its `rtl info` JSON. */
static int plan_design(flow_graph *g, const flow_cfg *c, const flow_point *pt, int detect, const mts_json *det,
                       mts_err *err)
{
    const char *path = pt->path, *dname = pt->name;
    char content[65];
    mts_sha256_file_hex(path, content, NULL); /* "" when unreadable: the steps report it */
    const char *kind = mts_json_str(det, "kind", "");
    int is_acc = !strcmp(kind, "accumulator");
    int dep[2] = {detect, 0};
    const char *cm = flow_cmodel(c, pt->base);
    const char *sb[STEP_MAX_ARGS];
    int verify = cm ? flow_add(g, dname, "verify", "json",
                               rtl_args(c, pt, ARGV("verify", "--rtl", path, "--mul", cm, "--json", "{OUT}"), 1, sb),
                               dep, 1, content, err)
                    : flow_add(g, dname, "verify", "json",
                               rtl_args(c, pt, ARGV("verify", "--rtl", path, "--json", "{OUT}"), 1, sb), dep, 1,
                               content, err);
    if (verify < 0) return -1;
    g->s[verify].ok_exit[g->s[verify].nok++] = MTS_EXIT_MISMATCH; /* mismatches are a result */
    int synth = flow_add(g, dname, "synth", "json", rtl_args(c, pt, ARGV("synth", "--rtl", path, "--json", "{OUT}"), 0, sb),
                         dep, 1, content, err);
    if (synth < 0) return -1;
    if (is_acc) {
        char acc[16], prod[16], ab[16], pb[16];
        snprintf(acc, sizeof acc, "%s", mts_json_str(det, "acc.acc", "M7E4"));
        snprintf(prod, sizeof prod, "%s", mts_json_str(det, "acc.prod", "M7E4"));
        snprintf(ab, sizeof ab, "%d", (int)mts_json_num(det, "acc.acc_bias", 8));
        snprintf(pb, sizeof pb, "%d", (int)mts_json_num(det, "acc.prod_bias", 8));
        int uf = (int)mts_json_num(det, "acc.underflow", 1);
        const char *mul[] = {"--mul", "exact", "--man-bits", "7", "--acc", acc, "--acc-bias", ab,
                             "--prod", prod, "--prod-bias", pb, "--no-underflow"};
        int deps[2] = {detect, verify};
        return design_runs(g, c, dname, mul, uf ? 12 : 13, deps, 2, 2, content, err);
    }
    int lut = flow_add(g, dname, "lutgen", "lut", rtl_args(c, pt, ARGV("lutgen", "--rtl", path, "-o", "{OUT}"), 1, sb),
                       dep, 1, content, err);
    if (lut < 0) return -1;
    dep[0] = lut;
    if (flow_add(g, dname, "metrics", "json", ARGV("metrics", "--lut", "{DEP0}", "--json", "{OUT}"), dep, 1, content, err) < 0)
        return -1;
    /* the trainer records float operands; integer designs get uniform-operand power only */
    if (strcmp(kind, "int") && plan_power(g, c, pt, kind, lut, content, err)) return -1;
    if (strcmp(kind, "int") && plan_cosim(g, c, dname, lut, synth, content, err)) return -1;
    const char *mul[] = {"--lut", "{DEP0}"};
    int deps[2] = {lut, verify};
    flow_cfg tc = *c;
    tc.int_row = !strcmp(kind, "int");
    return design_runs(g, &tc, dname, mul, 2, deps, 2, 2, content, err);
}

/* Baselines: a C model for training and the exact significand RTL for cost. */
static int plan_baseline(flow_graph *g, const flow_cfg *c, const char *b, mts_err *err)
{
    char name[64], mbits[8], param[16];
    snprintf(name, sizeof name, "baseline-%s", b);
    int fp32 = !strcmp(b, "fp32");
    if (!fp32 && strcmp(b, "bf16")) return mts_fail(err, MTS_EINVAL, "unknown baseline '%s' (fp32, bf16)", b);
    snprintf(mbits, sizeof mbits, "%d", fp32 ? 23 : 7);
    snprintf(param, sizeof param, "M=%s", mbits);
    const char *rtl = MANTIS_SOURCE_DIR "/rtl/mul_exact.v";
    if (flow_add(g, name, "synth", "json", ARGV("synth", "--rtl", rtl, "--param", param, "--no-equiv", "--json", "{OUT}"),
                 NULL, 0, "", err) < 0)
        return -1;
    /* FP32's error is its own rounding (2^-24), and a 2^46-pair sweep is out of reach: no metrics step */
    if (!fp32 && flow_add(g, name, "metrics", "json", ARGV("metrics", "--mul", "exact", "--man-bits", "7", "--json", "{OUT}"),
                          NULL, 0, "", err) < 0)
        return -1;
    const char *mul[] = {"--mul", fp32 ? "fp32" : "exact", "--man-bits", mbits};
    if (strcmp(c->mode, "train")) { /* baselines always train: the fp32 one's checkpoints are what infer tests */
        flow_cfg tc = *c;
        snprintf(tc.mode, sizeof tc.mode, "both");
        return design_runs(g, &tc, name, mul, 4, NULL, 0, 0, "", err);
    }
    return add_trainings(g, c, name, mul, 4, NULL, 0, 0, "", err);
}

/* The command line. */
typedef struct flow_opts {
    const char *config, *designs, *out, *data_dir, *executor, *device, *profile, *cifar_dir;
    int quick, retry, dry_run;
    long jobs;
    const char *sweep[FLOW_MAX_SWEEPS]; /* --sweep SPEC, in order */
    int nsweep;
} flow_opts;

/* Returns 0, 1 when --help was printed, or cli_error's status. */
static int parse_opts(int argc, char **argv, flow_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            printf("%s", help);
            return 1;
        }
        if (!strcmp(a, "--quick")) { o->quick = 1; continue; }
        if (!strcmp(a, "--retry-failed")) { o->retry = 1; continue; }
        if (!strcmp(a, "--dry-run")) { o->dry_run = 1; continue; }
        if (i + 1 >= argc) return cli_error("flow", "unknown option or missing value: '%s'", a);
        if (!strcmp(a, "--config")) o->config = argv[++i];
        else if (!strcmp(a, "--designs")) o->designs = argv[++i];
        else if (!strcmp(a, "--out")) o->out = argv[++i];
        else if (!strcmp(a, "--data-dir")) o->data_dir = argv[++i];
        else if (!strcmp(a, "--cifar-dir")) o->cifar_dir = argv[++i];
        else if (!strcmp(a, "--device")) {
            o->device = argv[++i];
            if (strcmp(o->device, "cpu") && strcmp(o->device, "cuda") && strcmp(o->device, "auto"))
                return cli_error("flow", "--device '%s': expected cpu, cuda or auto", o->device);
        } else if (!strcmp(a, "--profile")) {
            o->profile = argv[++i];
            if (strcmp(o->profile, "auto") && strcmp(o->profile, "none") && strcmp(o->profile, "quick") &&
                strcmp(o->profile, "gpu"))
                return cli_error("flow", "--profile '%s': expected auto, none, quick or gpu", o->profile);
        }
        else if (!strcmp(a, "--sweep")) {
            if (o->nsweep == FLOW_MAX_SWEEPS) return cli_error("flow", "--sweep: at most %d", FLOW_MAX_SWEEPS);
            o->sweep[o->nsweep++] = argv[++i];
        } else if (!strcmp(a, "--executor")) {
            o->executor = argv[++i];
            if (strcmp(o->executor, "local") && strcmp(o->executor, "slurm"))
                return cli_error("flow", "--executor: expected local or slurm, not '%s'", o->executor);
        }
        else if (!strcmp(a, "-j")) {
            if (mts_parse_int(argv[++i], 1, 256, &o->jobs)) return cli_error("flow", "-j: expected 1..256");
        } else return cli_error("flow", "unknown option '%s' (see mantis flow --help)", a);
    }
    if (o->quick && o->profile && strcmp(o->profile, "quick"))
        return cli_error("flow", "--quick and --profile %s: give one of them", o->profile);
    return 0;
}

/* --sweep SPEC (as the sweep key; docs/flow.md "Sweeps"): a design swept on
 * the command line takes its parameters from there alone, the configuration's
 * other sweeps stay; --sweep none drops the configuration's. Returns 0 or
 * cli_error's status. */
static int cli_sweeps(const flow_opts *o, flow_cfg *c)
{
    if (!o->nsweep) return 0;
    flow_cfg *cli = calloc(1, sizeof *cli);
    if (!cli) return cli_error("flow", "out of memory");
    mts_err err;
    int rc = 0;
    for (int i = 0; !rc && i < o->nsweep; i++) {
        if (!strcmp(o->sweep[i], "none")) c->nsweep = 0;
        else if (flow_sweep_add(cli, o->sweep[i], "--sweep", &err)) rc = cli_error("flow", "--sweep: %s", err.msg);
    }
    for (int i = 0; !rc && i < cli->nsweep; i++) {
        int k = 0; /* the configuration's sweep of the same design goes */
        while (k < c->nsweep && strcmp(c->sweep[k].design, cli->sweep[i].design)) k++;
        if (k < c->nsweep) memmove(&c->sweep[k], &c->sweep[k + 1], (size_t)(--c->nsweep - k) * sizeof c->sweep[0]);
        if (c->nsweep == FLOW_MAX_SWEEPS) rc = cli_error("flow", "--sweep: more than %d swept designs", FLOW_MAX_SWEEPS);
        else c->sweep[c->nsweep++] = cli->sweep[i];
    }
    int total = 0;
    for (int i = 0; i < c->nsweep; i++) total += flow_sweep_points(&c->sweep[i]);
    if (!rc && total > FLOW_MAX_POINTS)
        rc = cli_error("flow", "--sweep: %d design points in all, more than %d", total, FLOW_MAX_POINTS);
    free(cli);
    return rc;
}

/* Where the trainings and tests run (device = cpu | cuda | auto, or
 * --device): c->cuda and c->device_name. With the Slurm executor the jobs
 * run on other machines, so `cuda` is not probed here (a job that finds no
 * GPU fails its step); `auto` asks this machine. Returns 0 or cli_error's
 * status, naming where the device was asked for. */
static int resolve_device(const flow_opts *o, flow_cfg *c, const char *config)
{
    c->cuda = 0;
    c->device_name[0] = '\0';
    char where[FLOW_PATH + 32];
    if (o->device) snprintf(where, sizeof where, "--device %s", c->device);
    else snprintf(where, sizeof where, "%.*s: device = %s", FLOW_PATH, config ? config : "flow", c->device);
    if (!strcmp(c->device, "cuda") && !strcmp(c->executor, "slurm")) {
        c->cuda = 1;
        snprintf(c->device_name, sizeof c->device_name, "the Slurm jobs' GPU (not probed here)");
        return 0;
    }
    int dev = 0;
    mts_err err;
    int rc = mts_gpu_resolve_device(c->device, &dev, &err);
    if (rc != MTS_OK) return cli_error("flow", "%s: %s", where, err.msg);
    mts_gpu_info info;
    if (dev == MTS_GPU_DEVICE_CUDA && mts_gpu_probe(&info, &err) == MTS_OK) {
        c->cuda = 1;
        snprintf(c->device_name, sizeof c->device_name, "%s", info.name);
    }
    return 0;
}

/* The profile (--quick, --profile, else the configuration's `profile`;
 * "auto" picks gpu on a GPU unless a user's configuration pinned a size),
 * applied to c. Returns 0 or cli_error's status. */
static int apply_profile(const flow_opts *o, flow_cfg *c)
{
    const char *name = o->profile ? o->profile : o->quick ? "quick" : c->profile;
    const char *pick = flow_profile_pick(c, name, c->cuda);
    char cifar[FLOW_PATH + 32] = "";
    if (!flow_data_path(c, "cifar10", cifar, FLOW_PATH)) strcat(cifar, "/data_batch_1.bin");
    mts_err err;
    if (flow_cfg_profile(c, pick, mts_fs_exists(cifar), &err)) return cli_error("flow", "%s", err.msg);
    c->profile_auto = !strcmp(name, "auto") && c->profile_used[0];
    return 0;
}

/* The configuration (flows/default.flow unless --config), then the options
 * that override it. */
static int load_config(const flow_opts *o, flow_cfg *c)
{
    mts_err err;
    char dflt[FLOW_PATH];
    const char *config = o->config;
    snprintf(dflt, sizeof dflt, "%s/flows/default.flow", MANTIS_SOURCE_DIR);
    if (!config && access(dflt, R_OK) == 0) config = dflt;
    if (flow_cfg_load(c, config, 0, &err)) return cli_error("flow", "%s", err.msg);
    if (config == dflt) c->pinned = 0; /* the default's sizes are ours: a profile may replace them */
    if (o->designs) snprintf(c->designs, sizeof c->designs, "%s", o->designs);
    if (o->out) snprintf(c->out, sizeof c->out, "%s", o->out);
    if (o->data_dir && snprintf(c->data_dir, sizeof c->data_dir, "%s", o->data_dir) >= FLOW_PATH - 32)
        return cli_error("flow", "--data-dir: path too long");
    if (o->cifar_dir && snprintf(c->cifar_dir, sizeof c->cifar_dir, "%s", o->cifar_dir) >= FLOW_PATH)
        return cli_error("flow", "--cifar-dir: path too long");
    if (o->executor) snprintf(c->executor, sizeof c->executor, "%s", o->executor);
    if (o->device) snprintf(c->device, sizeof c->device, "%s", o->device);
    int rc = resolve_device(o, c, config);
    if (!rc) rc = apply_profile(o, c); /* before the layer rules and sweeps: it may change the models */
    if (!rc) rc = match_layers(c, config);
    if (!rc) rc = cli_sweeps(o, c);
    if (rc) return rc;
    if (c->quick) flow_sweep_thin(c, 3); /* a first look: each sweep's ends and middle */
    for (int i = 0; i < c->ndatasets; i++) { /* a flow without its data would fail every training */
        char d[FLOW_PATH];
        if (flow_data_path(c, c->datasets[i], d, sizeof d) || !mts_fs_exists(d))
            return cli_error("flow", "%s: no %s data set here (mantis data fetch %s, or --data-dir / data_dir%s)",
                                 d, c->datasets[i], c->datasets[i],
                                 strcmp(c->datasets[i], "cifar10") ? "" : " / --cifar-dir / cifar_dir");
    }
    if (!o->jobs && !c->jobs && !strcmp(c->executor, "slurm")) c->jobs = 256; /* jobs in the queue at once */
    if (o->jobs) c->jobs = (int)o->jobs;
    if (!c->jobs) c->jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (c->jobs < 1) c->jobs = 1;
    /* steps side by side keep the machine busy: their OpenMP threads sleep
     * at once, whatever the load average said when each started (main.c) */
    if (c->jobs > 1 && !getenv("OMP_WAIT_POLICY")) (void)setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    return 0;
}

/* The designs of one flow: the files, their points (a file, or each point
 * of its sweep) and the points' detect steps. */
typedef struct flow_designs {
    char **paths;
    int npaths;
    flow_point *pt;
    int *detect;
    int n;
} flow_designs;

static void free_designs(flow_designs *d)
{
    for (int i = 0; i < d->npaths; i++) free(d->paths[i]);
    free(d->paths);
    free(d->detect);
    free(d->pt);
}

/* A sweep's design and parameters exist: the design is a file of the design
 * directory and its top module declares every swept parameter (Verilator's
 * front end, mts_rtl_params). Returns 0 or cli_error's status, one line
 * naming where the sweep was given. */
static int check_sweep(const flow_cfg *c, const flow_sweep *s, const flow_designs *d, int *file)
{
    *file = -1;
    for (int i = 0; i < d->npaths; i++) {
        char name[FLOW_NAME];
        design_name(d->paths[i], name, sizeof name);
        if (!strcmp(name, s->design)) *file = i;
    }
    if (*file < 0)
        return cli_error("flow", "%s: no design '%s' in %s (no %s/%s.v)", s->where, s->design, c->designs,
                             c->designs, s->design);
    char names[64][64];
    int n = 0;
    mts_err err;
    if (mts_rtl_params(d->paths[*file], names, 64, &n, &err))
        return cli_error("flow", "%s: %s: cannot read its parameters: %s", s->where, s->design, err.msg);
    for (int p = 0; p < s->nparams; p++) {
        int found = 0;
        for (int k = 0; k < n; k++) found |= !strcmp(names[k], s->param[p]);
        if (found) continue;
        char list[512] = "";
        for (int k = 0; k < n; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.63s", k ? ", " : "", names[k]);
        return cli_error("flow", "%s: %s has no parameter %s (%s%s)", s->where, s->design, s->param[p],
                             n ? "its parameters: " : "it declares none", list);
    }
    return 0;
}

/* The design points: every file, a swept file replaced by its points (in
 * the order of flow_sweep_point: a family's points consecutive). Returns 0
 * or cli_error's status. */
static int design_points(const flow_cfg *c, flow_designs *d)
{
    int cap = d->npaths;
    for (int i = 0; i < c->nsweep; i++) cap += flow_sweep_points(&c->sweep[i]);
    d->pt = calloc((size_t)cap + 1, sizeof *d->pt);
    if (!d->pt) return cli_error("flow", "out of memory");
    int swept[FLOW_MAX_SWEEPS];
    for (int i = 0; i < c->nsweep; i++) {
        int rc = check_sweep(c, &c->sweep[i], d, &swept[i]);
        if (rc) return rc;
    }
    d->n = 0;
    for (int f = 0; f < d->npaths; f++) {
        char base[FLOW_NAME];
        design_name(d->paths[f], base, sizeof base);
        const flow_sweep *s = NULL;
        for (int i = 0; i < c->nsweep; i++)
            if (swept[i] == f) s = &c->sweep[i];
        int npts = s ? flow_sweep_points(s) : 1;
        for (int k = 0; k < npts; k++) {
            flow_point *p = &d->pt[d->n++];
            p->path = d->paths[f];
            snprintf(p->base, sizeof p->base, "%s", base);
            if (s) {
                p->nparams = s->nparams;
                flow_sweep_point(s, k, p->name, p->params, NULL);
            } else {
                snprintf(p->name, sizeof p->name, "%s", base);
            }
        }
    }
    return 0;
}

/* Phase 1: a detect step per design (it builds the Verilated model). */
static int plan_detect(flow_graph *g, const flow_cfg *c, flow_designs *d)
{
    mts_err err;
    d->detect = malloc((size_t)(d->n + 1) * sizeof *d->detect);
    if (!d->detect) return cli_error("flow", "out of memory");
    for (int i = 0; i < d->n; i++) {
        const flow_point *pt = &d->pt[i];
        char content[65];
        mts_sha256_file_hex(pt->path, content, NULL);
        const char *sb[STEP_MAX_ARGS];
        d->detect[i] = flow_add(g, pt->name, "detect", "json",
                                rtl_args(c, pt, ARGV("rtl", "info", "--rtl", pt->path, "--json", "{OUT}"), 1, sb),
                                NULL, 0, content, &err);
        if (d->detect[i] < 0) return cli_error("flow", "%s", err.msg);
    }
    return 0;
}

/* Phase 2: the steps each detected design's kind calls for, and baselines. */
static int plan_rest(flow_graph *g, const flow_cfg *c, const flow_designs *d)
{
    mts_err err;
    int first = !strcmp(c->mode, "train") ? 0 : 1; /* infer needs the fp32 trainings planned first */
    for (int i = 0; first && i < c->nbaselines; i++)
        if (plan_baseline(g, c, c->baselines[i], &err)) return cli_error("flow", "%s", err.msg);
    for (int i = 0; i < d->n; i++) {
        if (g->s[d->detect[i]].state != ST_DONE || !mts_fs_exists(g->s[d->detect[i]].out))
            continue; /* reported as not fitting the contract (dry run: not run yet) */
        mts_json *det = mts_json_load(g->s[d->detect[i]].out);
        int rc = plan_design(g, c, &d->pt[i], d->detect[i], det, &err);
        mts_json_free(det);
        if (rc) return cli_error("flow", "%s", err.msg);
    }
    for (int i = 0; !first && i < c->nbaselines; i++)
        if (plan_baseline(g, c, c->baselines[i], &err)) return cli_error("flow", "%s", err.msg);
    return 0;
}

/* The report; 1 when a step failed or a design failed verification, 0 when
 * every step ran (a diverged training is a result, not a failure). */
static int report(const flow_cfg *c, const flow_graph *g, int argc, char **argv)
{
    mts_err err;
    char cmdline[2048] = "mantis";
    for (int i = 0; i < argc; i++)
        snprintf(cmdline + strlen(cmdline), sizeof cmdline - strlen(cmdline), " %s", argv[i]);
    int bad = 0;
    if (flow_report(c, g, cmdline, stdout, &bad, &err)) return cli_error("flow", "%s", err.msg);
    return bad ? 1 : 0;
}

int cmd_flow(int argc, char **argv)
{
    flow_opts o;
    flow_cfg c;
    int status = parse_opts(argc, argv, &o);
    if (status) return status == 1 ? 0 : status;
    if ((status = load_config(&o, &c))) return status;
    flow_designs d = {0};
    d.npaths = list_designs(c.designs, &d.paths);
    if (d.npaths < 0) return cli_error("flow", "%s: cannot read the design directory", c.designs);
    if ((status = design_points(&c, &d))) { /* a sweep's design and parameters exist: before anything is written */
        free_designs(&d);
        return status;
    }
    flow_graph g = {0};
    g.retry_failed = o.retry;
    g.t_start = mts_clock_now(); /* one elapsed-time clock for both phases */
    g.executor = strcmp(c.executor, "slurm") ? FLOW_EXEC_LOCAL : FLOW_EXEC_SLURM;
    g.dry_run = o.dry_run;
    g.cfg = &c;
    snprintf(g.root, sizeof g.root, "%s", c.out);
    mts_err lerr;
    int lock = flow_lock(c.out, &lerr); /* held until exit: one flow per results directory */
    if (lock < 0) {
        free_designs(&d);
        return cli_error("flow", "%s", lerr.msg);
    }
    ssize_t n = readlink("/proc/self/exe", g.exe, sizeof g.exe - 1);
    if (n <= 0) {
        free_designs(&d);
        return cli_error("flow", "cannot find the mantis executable");
    }
    g.exe[n] = '\0';
    char points[64] = "";
    if (d.n != d.npaths) snprintf(points, sizeof points, " (%d design points with the sweeps)", d.n);
    char how[192] = "";
    if (c.profile_used[0]) snprintf(how, sizeof how, ", %s profile%s", c.profile_used, c.profile_auto ? " (auto)" : "");
    if (c.cuda) snprintf(how + strlen(how), sizeof how - strlen(how), ", trainings on cuda: %.120s", c.device_name);
    printf("mantis flow: %d designs in %s%s, %d parallel steps%s%s%s -> %s/\n", d.npaths, c.designs, points, c.jobs,
           how, g.executor ? ", slurm executor" : "", o.dry_run ? ", dry run" : "", c.out);
    status = plan_detect(&g, &c, &d);
    if (!status) status = flow_run(&g, c.jobs, stdout);
    if (!status && o.dry_run)
        for (int i = 0; i < d.n; i++)
            if (!mts_fs_exists(g.s[d.detect[i]].out))
                printf("# %s: its other steps are planned from its detect step's output (run it first)\n",
                       d.pt[i].name);
    if (!status) status = plan_rest(&g, &c, &d);
    if (!status) status = flow_run(&g, c.jobs, stdout);
    if (status == 2 && g.error[0]) cli_error("flow", "%s", g.error);
    if (!status && !o.dry_run) status = report(&c, &g, argc, argv);
    free_designs(&d);
    flow_free(&g);
    close(lock);
    return status;
}
