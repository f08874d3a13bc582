/* flow_cmd.c - `mantis flow`: every design in a directory through detection,
 * verification, LUT sweep, metrics, synthesis, workload power and training,
 * then the report (docs/flow.md). */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mantis/fs.h"
#include "mantis/hash.h"
#include "mantis/json.h"
#include "cli_util.h"
#include "commands.h"
#include "flow.h"

static const char help[] =
    "usage: mantis flow [--designs DIR] [--config FILE] [--out DIR] [-j N] [--quick]\n"
    "                   [--executor local|slurm] [--dry-run]\n"
    "Runs every Verilog design in DIR (default rtl/) through the whole Mantis flow and writes\n"
    "OUT/report.html, OUT/results.csv and OUT/results.json (default results/). Steps are\n"
    "cached by a content hash of their inputs: a re-run does only what changed, and a flow\n"
    "interrupted at any point finishes on the next run with identical results.\n"
    "  --config FILE   flow configuration (default flows/default.flow; docs/flow.md)\n"
    "  -j N            steps run in parallel (default: number of cores)\n"
    "  --quick         the quick profile: 2,000 training images, one epoch\n"
    "  --retry-failed  run again the steps whose failure is on record (a failure is cached like a\n"
    "                  result, keyed by the same inputs)\n"
    "  --executor E    local (default: a process pool here) or slurm (one sbatch job per step;\n"
    "                  OUT and the cache must be on a filesystem the compute nodes share)\n"
    "  --dry-run       print the step commands (with slurm: the sbatch command lines) instead of\n"
    "                  running them\n";

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
static int train_args(const flow_cfg *c, const char *model, const char *data, const char **base, int n,
                      char store[][FLOW_PATH])
{
    int k = 0;
    const char **a = base + n;
    mts_fs_pathf(store[k], FLOW_PATH, "%s/%s", c->data_dir, data); /* data_dir < FLOW_PATH - 32 (config) */
    a[0] = "--model"; a[1] = model; a[2] = "--data"; a[3] = data; a[4] = "--data-dir"; a[5] = store[k++];
    snprintf(store[k], FLOW_PATH, "%d", c->epochs);
    a[6] = "--epochs"; a[7] = store[k++];
    snprintf(store[k], FLOW_PATH, "%d", c->batch);
    a[8] = "--batch"; a[9] = store[k++];
    snprintf(store[k], FLOW_PATH, "%d", c->seed);
    a[10] = "--seed"; a[11] = store[k++];
    a[12] = "--lr"; a[13] = c->lr; a[14] = "--opt"; a[15] = c->opt; a[16] = "--threads"; a[17] = "1";
    int m = 18;
    if (c->subset) {
        snprintf(store[k], FLOW_PATH, "%d", c->subset);
        a[m++] = "--subset";
        a[m++] = store[k++];
    }
    a[m++] = "--json";
    a[m++] = "{OUT}";
    a[m] = NULL;
    return n + m;
}

/* Training steps of one arithmetic (mul args) for every model x dataset. */
static int add_trainings(flow_graph *g, const flow_cfg *c, const char *design, const char *const *mul, int nmul,
                         const int *deps, int ndeps, int need_pass, const char *content, mts_err *err)
{
    for (int m = 0; m < c->nmodels; m++)
        for (int d = 0; d < c->ndatasets; d++) {
            const char *argv[STEP_MAX_ARGS];
            char store[8][FLOW_PATH], name[80];
            argv[0] = "train";
            for (int i = 0; i < nmul; i++) argv[1 + i] = mul[i];
            train_args(c, c->models[m], c->datasets[d], argv, 1 + nmul, store);
            snprintf(name, sizeof name, "train-%s-%s", c->models[m], c->datasets[d]);
            int s = flow_add(g, design, name, "json", argv, deps, ndeps, content, err);
            if (s < 0) return -1;
            g->s[s].need_pass = need_pass;
        }
    return 0;
}

/* Workload power: operands recorded from a short training run with the
 * design's LUT (step lut), then synthesis with that trace. */
static int plan_power(flow_graph *g, const flow_cfg *c, const char *path, const char *dname, const char *kind,
                      int lut, const char *content, mts_err *err)
{
    const char *argv[STEP_MAX_ARGS];
    char data[FLOW_PATH], samples[16], subset[16];
    snprintf(samples, sizeof samples, "%d", c->trace_samples);
    snprintf(subset, sizeof subset, "%d", c->trace_subset);
    mts_fs_pathf(data, sizeof data, "%s/%s", c->data_dir, c->datasets[0]);
    const char *pre[] = {"train", "--lut", "{DEP0}", "--model", c->models[0], "--data", c->datasets[0],
                         "--data-dir", data, "--epochs", "1", "--subset", subset, "--seed", "1",
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
                      ARGV("synth", "--rtl", path, "--power-trace", "{DEP0}", "--json", "{OUT}"), dep, 1, content, err);
    return pw < 0 ? -1 : 0;
}

/* Steps of one detected design. det: its `rtl info` JSON. */
static int plan_design(flow_graph *g, const flow_cfg *c, const char *path, const char *dname, int detect,
                       const mts_json *det, mts_err *err)
{
    char content[65];
    mts_sha256_file_hex(path, content, NULL); /* "" when unreadable: the steps report it */
    const char *kind = mts_json_str(det, "kind", "");
    int is_acc = !strcmp(kind, "accumulator");
    int dep[2] = {detect, 0};
    const char *cm = flow_cmodel(c, dname);
    int verify = cm ? flow_add(g, dname, "verify", "json", ARGV("verify", "--rtl", path, "--mul", cm, "--json", "{OUT}"),
                               dep, 1, content, err)
                    : flow_add(g, dname, "verify", "json", ARGV("verify", "--rtl", path, "--json", "{OUT}"), dep, 1,
                               content, err);
    if (verify < 0) return -1;
    g->s[verify].ok_exit[g->s[verify].nok++] = 1; /* mismatches are a result */
    if (flow_add(g, dname, "synth", "json", ARGV("synth", "--rtl", path, "--json", "{OUT}"), dep, 1, content, err) < 0)
        return -1;
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
        return add_trainings(g, c, dname, mul, uf ? 12 : 13, deps, 2, 2, content, err);
    }
    int lut = flow_add(g, dname, "lutgen", "lut", ARGV("lutgen", "--rtl", path, "-o", "{OUT}"), dep, 1, content, err);
    if (lut < 0) return -1;
    dep[0] = lut;
    if (flow_add(g, dname, "metrics", "json", ARGV("metrics", "--lut", "{DEP0}", "--json"), dep, 1, content, err) < 0)
        return -1;
    /* the trainer records float operands; integer designs get uniform-operand power only */
    if (strcmp(kind, "int") && plan_power(g, c, path, dname, kind, lut, content, err)) return -1;
    const char *mul[] = {"--lut", "{DEP0}"};
    int deps[2] = {lut, verify};
    return add_trainings(g, c, dname, mul, 2, deps, 2, 2, content, err);
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
    if (!fp32 && flow_add(g, name, "metrics", "json", ARGV("metrics", "--mul", "exact", "--man-bits", "7", "--json"),
                          NULL, 0, "", err) < 0)
        return -1;
    const char *mul[] = {"--mul", fp32 ? "fp32" : "exact", "--man-bits", mbits};
    return add_trainings(g, c, name, mul, 4, NULL, 0, 0, "", err);
}

/* The command line. */
typedef struct flow_opts {
    const char *config, *designs, *out, *executor;
    int quick, retry, dry_run;
    long jobs;
} flow_opts;

/* Returns 0, 1 when --help was printed, or mts_cli_error's status. */
static int parse_opts(int argc, char **argv, flow_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (mts_is_help(a)) {
            printf("%s", help);
            return 1;
        }
        if (!strcmp(a, "--quick")) { o->quick = 1; continue; }
        if (!strcmp(a, "--retry-failed")) { o->retry = 1; continue; }
        if (!strcmp(a, "--dry-run")) { o->dry_run = 1; continue; }
        if (i + 1 >= argc) return mts_cli_error("flow", "unknown option or missing value: '%s'", a);
        if (!strcmp(a, "--config")) o->config = argv[++i];
        else if (!strcmp(a, "--designs")) o->designs = argv[++i];
        else if (!strcmp(a, "--out")) o->out = argv[++i];
        else if (!strcmp(a, "--executor")) {
            o->executor = argv[++i];
            if (strcmp(o->executor, "local") && strcmp(o->executor, "slurm"))
                return mts_cli_error("flow", "--executor: expected local or slurm, not '%s'", o->executor);
        }
        else if (!strcmp(a, "-j")) {
            if (mts_parse_int(argv[++i], 1, 256, &o->jobs)) return mts_cli_error("flow", "-j: expected 1..256");
        } else return mts_cli_error("flow", "unknown option '%s' (see mantis flow --help)", a);
    }
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
    if (flow_cfg_load(c, config, o->quick, &err)) return mts_cli_error("flow", "%s", err.msg);
    if (o->designs) snprintf(c->designs, sizeof c->designs, "%s", o->designs);
    if (o->out) snprintf(c->out, sizeof c->out, "%s", o->out);
    if (o->executor) snprintf(c->executor, sizeof c->executor, "%s", o->executor);
    if (!o->jobs && !c->jobs && !strcmp(c->executor, "slurm")) c->jobs = 256; /* jobs in the queue at once */
    if (o->jobs) c->jobs = (int)o->jobs;
    if (!c->jobs) c->jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (c->jobs < 1) c->jobs = 1;
    return 0;
}

/* The designs of one flow and their detect steps. */
typedef struct flow_designs {
    char **paths;
    char (*names)[64];
    int *detect;
    int n;
} flow_designs;

static void free_designs(flow_designs *d)
{
    for (int i = 0; i < d->n; i++) free(d->paths[i]);
    free(d->paths);
    free(d->detect);
    free(d->names);
}

/* Phase 1: a detect step per design (it builds the Verilated model). */
static int plan_detect(flow_graph *g, flow_designs *d)
{
    mts_err err;
    d->detect = malloc((size_t)(d->n + 1) * sizeof *d->detect);
    d->names = malloc((size_t)(d->n + 1) * sizeof *d->names);
    if (!d->detect || !d->names) return mts_cli_error("flow", "out of memory");
    for (int i = 0; i < d->n; i++) {
        char content[65];
        design_name(d->paths[i], d->names[i], sizeof d->names[i]);
        mts_sha256_file_hex(d->paths[i], content, NULL);
        d->detect[i] = flow_add(g, d->names[i], "detect", "json",
                                ARGV("rtl", "info", "--rtl", d->paths[i], "--json", "{OUT}"), NULL, 0, content, &err);
        if (d->detect[i] < 0) return mts_cli_error("flow", "%s", err.msg);
    }
    return 0;
}

/* Phase 2: the steps each detected design's kind calls for, and baselines. */
static int plan_rest(flow_graph *g, const flow_cfg *c, const flow_designs *d)
{
    mts_err err;
    for (int i = 0; i < d->n; i++) {
        if (g->s[d->detect[i]].state != ST_DONE || !mts_fs_exists(g->s[d->detect[i]].out))
            continue; /* reported as not fitting the contract (dry run: not run yet) */
        mts_json *det = mts_json_load(g->s[d->detect[i]].out);
        int rc = plan_design(g, c, d->paths[i], d->names[i], d->detect[i], det, &err);
        mts_json_free(det);
        if (rc) return mts_cli_error("flow", "%s", err.msg);
    }
    for (int i = 0; i < c->nbaselines; i++)
        if (plan_baseline(g, c, c->baselines[i], &err)) return mts_cli_error("flow", "%s", err.msg);
    return 0;
}

static int report(const flow_cfg *c, const flow_graph *g, int argc, char **argv)
{
    mts_err err;
    char cmdline[2048] = "mantis";
    for (int i = 0; i < argc; i++)
        snprintf(cmdline + strlen(cmdline), sizeof cmdline - strlen(cmdline), " %s", argv[i]);
    if (flow_report(c, g, cmdline, stdout, &err)) return mts_cli_error("flow", "%s", err.msg);
    return 0;
}

int mts_cmd_flow(int argc, char **argv)
{
    flow_opts o;
    flow_cfg c;
    int status = parse_opts(argc, argv, &o);
    if (status) return status == 1 ? 0 : status;
    if ((status = load_config(&o, &c))) return status;
    flow_graph g = {0};
    g.retry_failed = o.retry;
    g.executor = strcmp(c.executor, "slurm") ? FLOW_EXEC_LOCAL : FLOW_EXEC_SLURM;
    g.dry_run = o.dry_run;
    g.cfg = &c;
    snprintf(g.root, sizeof g.root, "%s", c.out);
    mts_err lerr;
    int lock = flow_lock(c.out, &lerr); /* held until exit: one flow per results directory */
    if (lock < 0) return mts_cli_error("flow", "%s", lerr.msg);
    ssize_t n = readlink("/proc/self/exe", g.exe, sizeof g.exe - 1);
    if (n <= 0) return mts_cli_error("flow", "cannot find the mantis executable");
    g.exe[n] = '\0';
    flow_designs d = {0};
    d.n = list_designs(c.designs, &d.paths);
    if (d.n < 0) return mts_cli_error("flow", "%s: cannot read the design directory", c.designs);
    printf("mantis flow: %d designs in %s, %d parallel steps%s%s%s -> %s/\n", d.n, c.designs, c.jobs,
           c.quick ? ", quick profile" : "", g.executor ? ", slurm executor" : "", o.dry_run ? ", dry run" : "",
           c.out);
    status = plan_detect(&g, &d);
    if (!status) status = flow_run(&g, c.jobs, stdout);
    if (!status && o.dry_run)
        for (int i = 0; i < d.n; i++)
            if (!mts_fs_exists(g.s[d.detect[i]].out))
                printf("# %s: its other steps are planned from its detect step's output (run it first)\n",
                       d.names[i]);
    if (!status) status = plan_rest(&g, &c, &d);
    if (!status) status = flow_run(&g, c.jobs, stdout);
    if (status == 2 && g.error[0]) mts_cli_error("flow", "%s", g.error);
    if (!status && !o.dry_run) status = report(&c, &g, argc, argv);
    free_designs(&d);
    flow_free(&g);
    close(lock);
    return status;
}
