/* train_cmd.c - `mantis train`: trains a built-in model on MNIST,
 * Fashion-MNIST or CIFAR-10 with the chosen multipliers and accumulator,
 * checkpointing every epoch (docs/training.md). The run itself is the
 * library's mts_train_run (sim/nn/driver.c); this file parses the options
 * into its config and prints its progress. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/gemmdump.h"
#include "mantis/gpu.h"
#include "mantis/nn_train.h"
#include "mantis/trace.h"
#include "mul_opts.h"

#define CMD "train"

static const char usage_text[] =
    "usage: mantis train --model M --data D [options]\n"
    "  --model M          lenet300 | lenet5 | mlp1024 | resnet20 | resnet18 | vit-tiny\n"
    "  --data D           mnist | fashion-mnist | cifar10\n"
    "  --data-dir DIR     where the data set lies (default ./data/D)\n"
    "multipliers (forward; backward and evaluation default to the same):\n"
    "  --mul NAME         fp32 (native, default) | blas | bf16 | a C model (mantis models)\n"
    "  --man-bits M, --format F, --lut FILE, --rtl FILE.v [--param K=V] [--kind K]\n"
    "  --mul-bwd NAME     multiplier of both backward GEMMs (a model name or a LUT file)\n"
    "  --mul-test NAME    multiplier for evaluation\n"
    "  --int-backward B   integer tables (quantization-aware training): ste (default; FP32 backward\n"
    "                     on the dequantized operands) | table (the multiplier's gradient tables)\n"
    "                     | approx (every backward product through the table, per-call ranges)\n"
    "accumulator (FMAq, forward and evaluation):\n"
    "  --acc M7E4 [--acc-bias B] [--prod M7E4] [--prod-bias B] [--chunk 16] [--no-underflow]\n"
    "  --ste S            identity | rec-of | imm-of | imm-diff (dense layers; default identity)\n"
    "per-layer multipliers:\n"
    "  --mul-layer PATTERN=SPEC  layers named like the glob PATTERN use SPEC (repeatable, the last\n"
    "                     match wins); SPEC = MUL|LUTFILE[,acc=M7E4][,prod=F][,acc-bias=B][,prod-bias=B]\n"
    "                     [,chunk=N][,man-bits=M][,format=F][,no-underflow], e.g. 'block*.attn.qk=fp32'\n"
    "  --list-layers      print the model's layer names (with --data for its input shape) and exit\n"
    "training:\n"
    "  --epochs N (10) --seed N (1) --batch N --opt sgd|adam --lr X --momentum X --wd X\n"
    "  --sched const|step|cosine --step-size N --gamma X: each one not given comes from the\n"
    "                     model's recipe (below); the recipe's lr only with its own optimizer\n"
    "                     (another --opt without --lr: sgd 0.01, adam 0.001)\n"
    "  --subset N         train on the first N samples; --test-subset N evaluates on N\n"
    "  --threads N        GEMM threads (0 = all cores); results do not depend on it\n"
    "  --device D         cpu | cuda | auto (default cpu until the GPU kernels have run on a device;\n"
    "                     auto: the GPU when present): where training runs, the same results\n"
    "                     (docs/training.md); on cuda the whole step stays on the device (not\n"
    "                     with --mul-layer or --trace-operands: then only the GEMMs run there;\n"
    "                     the JSON's gpu_path says which and why)\n"
    "  --json OUT|-       per-epoch results, rewritten atomically after each epoch; '-': to stdout\n"
    "                     once, at the end (the text then goes to stderr)\n"
    "  --checkpoint DIR [--resume]\n"
    "exit status: 0 trained, 2 could not run (options, data or design), 3 diverged (a batch loss\n"
    "  non-finite or > 1000, or a non-finite weight), 4 could not run (environment: a file that\n"
    "  cannot be read or written, a full disk, out of memory, a missing tool; docs/reliability.md)\n"
    "  --trace-operands FILE [--trace-samples N (100000)] [--trace-kind sig|float (sig)]\n"
    "                     a uniform sample of the forward multiplier's operand pairs during\n"
    "                     training (trace format: docs/trace-format.md)\n"
    "  --dump-gemm LAYER:FILE  write the first training batch's forward GEMM of LAYER\n"
    "                     for `mantis cosim` (format: docs/cosim.md); or --dump-layer LAYER\n"
    "                     --dump-gemm FILE\n";

/* The default recipe of every built-in model, from the library's table. */
static void print_recipes(FILE *f)
{
    static const char *const sched[] = {"const", "step", "cosine"};
    char list[256];
    snprintf(list, sizeof list, "%s", mts_nn_model_list());
    fprintf(f, "default recipes (docs/training.md, \"Default recipes\"):\n");
    for (char *save, *m = strtok_r(list, ", ", &save); m; m = strtok_r(NULL, ", ", &save)) {
        mts_train_recipe r;
        if (mts_nn_model_recipe(m, &r, NULL) != MTS_OK) continue;
        fprintf(f, "  %-9s --opt %s --lr %g", m, r.opt == MTS_OPT_ADAM ? "adam" : "sgd", r.lr);
        if (r.opt == MTS_OPT_SGD) fprintf(f, " --momentum %g", r.momentum);
        fprintf(f, " --wd %g --sched %s", r.wd, sched[r.sched]);
        if (r.sched == MTS_SCHED_STEP) fprintf(f, " --step-size %d --gamma %g", r.step_size, r.gamma);
        fprintf(f, " --batch %d\n", r.batch);
    }
}

/* Options beyond the driver's config: the multiplier texts still to be
 * resolved into the three specs. */
typedef struct train_opts {
    mts_train_config c;
    mts_arith_spec spec;  /* the main multiplier (forward) */
    const char *mul_bwd, *mul_test;
    const char *device;                   /* --device: cpu | cuda | auto (NULL: auto) */
    const char *opt, *sched, *trace_kind; /* checked after the loop, as --help documents them */
    const char *dump_gemm, *dump_layer;   /* --dump-gemm LAYER:FILE, or --dump-layer L --dump-gemm FILE */
    unsigned given;                       /* MTS_GIVEN_*: optimizer settings given (the rest: the model's recipe) */
    int help;
    int list_layers;
    mul_layers layers;
} train_opts;

static int num(const char *opt, const char *v, double lo, double hi, double *out)
{
    double d;
    if (mts_parse_double(v, lo, hi, &d))
        return cli_error(CMD, "%s '%s': expected a number in [%g, %g]", opt, v, lo, hi);
    *out = d;
    return 0;
}

/* A --mul-bwd / --mul-test value: a LUT file when it looks like a path. */
static void alt_spec(const mts_arith_spec *base, const char *v, int keep_acc, mts_arith_spec *s)
{
    *s = *base;
    if (strchr(v, '/') || strstr(v, ".lut")) {
        snprintf(s->lut, sizeof s->lut, "%s", v);
        s->mul[0] = 0;
    } else {
        snprintf(s->mul, sizeof s->mul, "%s", v);
        s->lut[0] = 0;
    }
    if (!keep_acc) s->acc[0] = 0;
}

/* Backward: the forward multiplier without FMAq; test: the forward one;
 * --mul-bwd / --mul-test replace them; an --rtl design is spec "rtl". */
static void resolve_specs(train_opts *o, const mulsel *sel)
{
    mts_train_config *c = &o->c;
    c->fwd = c->bwd = c->test = o->spec;
    c->bwd.acc[0] = 0;
    if (o->mul_bwd) alt_spec(&o->spec, o->mul_bwd, 0, &c->bwd);
    if (o->mul_test) alt_spec(&o->spec, o->mul_test, 1, &c->test);
    if (sel->rtl) {
        snprintf(c->fwd.mul, sizeof c->fwd.mul, "rtl");
        if (!o->mul_bwd) c->bwd = c->fwd;
        if (!o->mul_test) c->test = c->fwd;
    }
}

/* One option with a value (argv[*i] is the option); 0, or the exit status. */
static int option(train_opts *o, const char *a, const char *v)
{
    mts_train_config *c = &o->c;
    long l;
    if (!strcmp(a, "--model")) c->model = v;
    else if (!strcmp(a, "--data")) c->data = v;
    else if (!strcmp(a, "--data-dir")) c->data_dir = v;
    else if (!strcmp(a, "--json")) c->json = v;
    else if (!strcmp(a, "--checkpoint")) c->ckdir = v;
    else if (!strcmp(a, "--mul-bwd")) o->mul_bwd = v;
    else if (!strcmp(a, "--mul-test")) o->mul_test = v;
    else if (!strcmp(a, "--ste")) c->ste = v;
    else if (!strcmp(a, "--int-backward")) c->int_bwd = v;
    else if (!strcmp(a, "--trace-operands")) c->trace = v;
    else if (!strcmp(a, "--trace-kind")) o->trace_kind = v;
    else if (!strcmp(a, "--dump-gemm")) o->dump_gemm = v;
    else if (!strcmp(a, "--dump-layer")) o->dump_layer = v;
    else if (!strcmp(a, "--opt")) o->opt = v, o->given |= MTS_GIVEN_OPT;
    else if (!strcmp(a, "--device")) o->device = v;
    else if (!strcmp(a, "--sched")) o->sched = v, o->given |= MTS_GIVEN_SCHED;
    else if (!strcmp(a, "--acc")) snprintf(o->spec.acc, sizeof o->spec.acc, "%s", v);
    else if (!strcmp(a, "--prod")) snprintf(o->spec.prod, sizeof o->spec.prod, "%s", v);
    else if (!strcmp(a, "--lr")) return o->given |= MTS_GIVEN_LR, num(a, v, 0, 100, &c->lr) ? 2 : 0;
    else if (!strcmp(a, "--momentum")) return o->given |= MTS_GIVEN_MOMENTUM, num(a, v, 0, 1, &c->momentum) ? 2 : 0;
    else if (!strcmp(a, "--wd")) return o->given |= MTS_GIVEN_WD, num(a, v, 0, 1, &c->wd) ? 2 : 0;
    else if (!strcmp(a, "--gamma")) return o->given |= MTS_GIVEN_GAMMA, num(a, v, 0, 1, &c->gamma) ? 2 : 0;
    else if (!strcmp(a, "--seed")) {
        if (mts_parse_u64(v, &c->seed)) return cli_error(CMD, "--seed '%s': expected an unsigned integer", v);
    } else {
        static const struct { const char *name; long lo, hi; size_t off; } ints[] = {
            {"--epochs", 1, 1024, offsetof(train_opts, c) + offsetof(mts_train_config, epochs)},
            {"--batch", 1, 65536, offsetof(train_opts, c) + offsetof(mts_train_config, batch)},
            {"--threads", 0, 1024, offsetof(train_opts, c) + offsetof(mts_train_config, threads)},
            {"--subset", 1, 100000000, offsetof(train_opts, c) + offsetof(mts_train_config, subset)},
            {"--test-subset", 1, 100000000, offsetof(train_opts, c) + offsetof(mts_train_config, test_subset)},
            {"--step-size", 1, 1024, offsetof(train_opts, c) + offsetof(mts_train_config, step_size)},
            {"--trace-samples", 1, 1L << 26, offsetof(train_opts, c) + offsetof(mts_train_config, trace_samples)},
            {"--chunk", 1, 1 << 20, offsetof(train_opts, spec) + offsetof(mts_arith_spec, chunk)},
            {"--acc-bias", 0, 126, offsetof(train_opts, spec) + offsetof(mts_arith_spec, acc_bias)},
            {"--prod-bias", 0, 126, offsetof(train_opts, spec) + offsetof(mts_arith_spec, prod_bias)},
        };
        size_t k;
        for (k = 0; k < sizeof ints / sizeof ints[0]; k++)
            if (!strcmp(a, ints[k].name)) break;
        if (k == sizeof ints / sizeof ints[0])
            return cli_error(CMD, "unknown option %s (see mantis train --help)", a);
        if (mts_parse_int(v, ints[k].lo, ints[k].hi, &l))
            return cli_error(CMD, "%s '%s': expected an integer in [%ld, %ld]%s", a, v, ints[k].lo, ints[k].hi,
                                 !strcmp(a, "--trace-samples") ? " (each sample holds 8 bytes: at most 512 MiB)" : "");
        *(int *)((char *)o + ints[k].off) = (int)l;
        if (!strcmp(a, "--batch")) o->given |= MTS_GIVEN_BATCH;
        if (!strcmp(a, "--step-size")) o->given |= MTS_GIVEN_STEP_SIZE;
    }
    return 0;
}

/* Fills o from argv; 0, or the exit status (o->help: --help was printed,
 * the command returns 0 without running). */
static int parse(int argc, char **argv, train_opts *o, mulsel *sel)
{
    mts_err err;
    memset(o, 0, sizeof *o);
    mts_train_config_init(&o->c);
    mts_arith_spec_init(&o->spec);
    mulsel_init(sel);
    o->opt = o->sched = NULL; /* not given: the model's recipe */
    o->trace_kind = "sig";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            fputs(usage_text, stdout);
            print_recipes(stdout);
            o->help = 1;
            return 0;
        }
        int r = mulsel_arg(sel, argc, argv, &i, &err);
        if (r == 0) r = mul_layers_arg(&o->layers, argc, argv, &i, &err);
        if (r < 0) return cli_error(CMD, "%s", err.msg);
        if (r > 0) continue;
        if (!strcmp(a, "--resume")) { o->c.resume = 1; continue; }
        if (!strcmp(a, "--list-layers")) { o->list_layers = 1; continue; }
        if (!strcmp(a, "--no-underflow")) { o->spec.no_underflow = 1; continue; }
        if (i + 1 >= argc) return cli_error(CMD, "option %s needs a value (see mantis train --help)", a);
        int rc = option(o, a, argv[++i]);
        if (rc) return rc;
    }
    o->c.layer_rules = o->layers.rule;
    o->c.nlayer_rules = o->layers.n;
    if (o->list_layers) {
        if (!o->c.model) return cli_error(CMD, "--list-layers needs --model (see mantis train --help)");
        return 0;
    }
    if (!o->c.model || !o->c.data) return cli_error(CMD, "--model and --data are required (see mantis train --help)");
    if (o->opt && mts_opt_parse(o->opt, &o->c.opt))
        return cli_error(CMD, "--opt '%s': expected sgd or adam", o->opt);
    if (o->sched && mts_sched_parse(o->sched, &o->c.sched))
        return cli_error(CMD, "--sched '%s': expected const, step or cosine", o->sched);
    int rc = mts_train_recipe_apply(&o->c, o->given, &err); /* what was not given: the model's recipe */
    if (rc != MTS_OK) return cli_fail(CMD, rc, &err);
    if (o->c.resume && !o->c.ckdir) return cli_error(CMD, "--resume needs --checkpoint DIR");
    if (strcmp(o->trace_kind, "sig") && strcmp(o->trace_kind, "float"))
        return cli_error(CMD, "--trace-kind '%s': expected sig or float", o->trace_kind);
    o->c.trace_kind = !strcmp(o->trace_kind, "sig") ? MTS_TRACE_SIG : MTS_TRACE_FLOAT;
    rc = mts_gpu_resolve_device(o->device ? o->device : "cpu", &o->c.device, &err);
    if (rc != MTS_OK) return cli_fail(CMD, rc, &err);
    /* the main multiplier selection, through the shared options (mul_opts.h) */
    if (sel->lut) snprintf(o->spec.lut, sizeof o->spec.lut, "%s", sel->lut), o->spec.mul[0] = 0;
    else if (sel->mul) snprintf(o->spec.mul, sizeof o->spec.mul, "%s", sel->mul);
    if (sel->format) snprintf(o->spec.format, sizeof o->spec.format, "%s", sel->format);
    o->spec.man_bits = sel->man_bits;
    if (!!sel->mul + !!sel->lut + !!sel->rtl > 1) return cli_error(CMD, "give one of --mul, --lut or --rtl");
    return 0;
}

/* The driver's reports, on stderr (a progress bar only on a terminal). */
static void progress(void *ud, mts_train_event ev, const mts_train_info *in, int done, int total)
{
    const train_opts *o = ud;
    const mts_train_config *c = &o->c;
    switch (ev) {
    case MTS_TRAIN_RESUMED:
        fprintf(stderr, "mantis train: resuming after epoch %d from %s\n", in->start, in->ckpt);
        break;
    case MTS_TRAIN_STARTED:
        fprintf(stderr, "mantis train: %s on %s (%d train, %d test), %zu parameters; fwd %s; bwd %s; test %s; ste %s\n",
                c->model, c->data, in->ntrain, in->ntest, in->nparam, in->fwd, in->bwd, in->test, c->ste);
        if (in->layers[0]) fprintf(stderr, "mantis train: per layer: %s\n", in->layers);
        fprintf(stderr, "mantis train: %s lr %g", c->opt == MTS_OPT_ADAM ? "adam" : "sgd",
                c->lr >= 0 ? c->lr : c->opt == MTS_OPT_ADAM ? 1e-3 : 0.01);
        if (c->opt == MTS_OPT_SGD) fprintf(stderr, " momentum %g", c->momentum);
        fprintf(stderr, ", wd %g, %s schedule, batch %d%s\n", c->wd,
                c->sched == MTS_SCHED_COSINE ? "cosine" : c->sched == MTS_SCHED_STEP ? "step" : "constant", c->batch,
                o->given ? "" : " (the model's recipe)");
        if (in->int_bwd[0])
            fprintf(stderr, "mantis train: integer table: quantization-aware forward, %s backward\n", in->int_bwd);
        break;
    case MTS_TRAIN_BATCH: {
        if (!isatty(2)) break;
        int w = 40, fill = total ? (int)((long)w * done / total) : w;
        fprintf(stderr, "\repoch %d [%.*s%*s] %d/%d", in->epoch, fill, "========================================",
                w - fill, "", done, total);
        if (done == total) fputc('\r', stderr);
        break;
    }
    case MTS_TRAIN_EPOCH: {
        const mts_epoch_stats *st = &in->last;
        fprintf(stderr, "epoch %d/%d lr %.4g loss %.4f train %.2f%% test %.2f%% %.1f s %.0f samples/s\n", in->epoch,
                c->epochs, st->lr, st->train_loss, 100 * st->train_acc, 100 * st->test_acc, st->seconds,
                st->samples_per_s);
        break;
    }
    case MTS_TRAIN_TRACED:
        fprintf(stderr, "mantis train: %s: %zu sampled operand pairs of %llu\n", c->trace, in->trace_have,
                (unsigned long long)in->trace_seen);
        break;
    }
}

/* --list-layers: every node of the model for the data set's input shape
 * (default MNIST's), multiplying layers with the rule that takes them. */
static int list_layers(const train_opts *o)
{
    const char *data = o->c.data ? o->c.data : "mnist";
    int cifar = !strcmp(data, "cifar10");
    if (!cifar && strcmp(data, "mnist") && strcmp(data, "fashion-mnist"))
        return cli_error(CMD, "--data '%s': expected mnist, fashion-mnist or cifar10", data);
    mts_net net;
    mts_err err;
    int rc = mts_nn_model_build(&net, o->c.model, cifar ? 3 : 1, cifar ? 32 : 28, cifar ? 32 : 28, 10, &err);
    if (rc != MTS_OK) {
        cli_error(CMD, "%s", err.msg);
        return cli_exit(rc);
    }
    int *rule = malloc(sizeof(int) * (size_t)net.n), *match = calloc((size_t)net.n, sizeof(int));
    if (!rule || !match) {
        free(rule);
        free(match);
        mts_net_free(&net);
        return cli_error(CMD, "out of memory");
    }
    for (int i = 0; i < net.n; i++) rule[i] = -1;
    for (int r = 0; r < o->layers.n; r++) {
        mts_layer_rule lr;
        mts_layer_rule_parse(o->layers.rule[r], &lr, &err); /* checked while parsing */
        memset(match, 0, sizeof(int) * (size_t)net.n);
        if (!mts_net_match(&net, lr.pattern, match))
            fprintf(stderr, "mantis train: --mul-layer '%s' matches no multiplying layer\n", o->layers.rule[r]);
        for (int i = 0; i < net.n; i++)
            if (match[i]) rule[i] = r;
    }
    printf("%-4s %-24s %-10s %-14s %12s  %s\n", "node", "name", "kind", "output", "MACs/sample", "multiplier");
    for (int i = 1; i < net.n; i++) {
        const mts_layer *l = &net.l[i];
        char nm[64], shape[48];
        mts_net_layer_name(&net, i, nm, sizeof nm);
        snprintf(shape, sizeof shape, "%dx%dx%d", l->c, l->h, l->w);
        int mul = mts_layer_multiplies(l);
        printf("%-4d %-24s %-10s %-14s %12llu  %s\n", i, nm, mts_layer_kind_name(l->kind), shape,
               (unsigned long long)mts_net_layer_macs(&net, i),
               !mul ? "-" : rule[i] >= 0 ? strchr(o->layers.rule[rule[i]], '=') + 1 : "(the run's)");
    }
    free(rule);
    free(match);
    mts_net_free(&net);
    return 0;
}

int cmd_train(int argc, char **argv)
{
    train_opts o;
    mulsel sel;
    mts_err err;
    int rc = parse(argc, argv, &o, &sel);
    if (rc || o.help) return rc;
    if (o.list_layers) return list_layers(&o);
    if (sel.rtl && (o.spec.acc[0])) return cli_error(CMD, "--acc with --rtl is not supported; use --lut of the design");
    resolve_specs(&o, &sel);
    mulsel_arith rtl = {.sel = &sel};
    o.c.open = mulsel_arith_open;
    o.c.open_ud = &rtl;
    o.c.progress = progress;
    o.c.progress_ud = &o;
    mts_gemm_tap tap;
    char spec[1100];
    if (o.dump_layer && !o.dump_gemm) return cli_error(CMD, "--dump-layer needs --dump-gemm FILE");
    if (o.dump_gemm) {
        /* the flow passes the file as its own argument ({OUT}) */
        if (o.dump_layer) snprintf(spec, sizeof spec, "%s:%s", o.dump_layer, o.dump_gemm);
        else snprintf(spec, sizeof spec, "%s", o.dump_gemm);
        if ((rc = mts_gemm_tap_init(&tap, spec, &err))) return cli_fail(CMD, rc, &err);
        o.c.tap = &tap;
    }
    FILE *t = cli_text(o.c.json, NULL); /* stdout holds the JSON alone with --json - */
    if (o.c.json && !strcmp(o.c.json, "-")) o.c.json = NULL, o.c.json_out = stdout;
    mts_train_info info;
    rc = mts_train_run(&o.c, &info, &err);
    mulsel_arith_close(&rtl);
    if (rc == MTS_OK && o.dump_gemm) rc = mts_gemm_tap_result(&tap, &err);
    if (rc != MTS_OK) return cli_fail(CMD, rc, &err);
    if (info.diverged) { /* its own status: neither a result nor a failure to run (docs/training.md) */
        fprintf(stderr, "mantis train: diverged at epoch %d step %d: batch loss %g (limit %g); stopped\n",
                info.diverged_epoch, info.diverged_step, info.diverged_loss, MTS_DIVERGE_LOSS);
        fprintf(t, "diverged at epoch %d step %d\n", info.diverged_epoch, info.diverged_step);
        return MTS_EXIT_DIVERGED;
    }
    fprintf(t, "test accuracy %.4f\n", info.final_test_acc);
    return 0;
}
