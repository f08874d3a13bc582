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
#define MTS_TRAIN_DIVERGED_EXIT 3 /* docs/training.md: the loss diverged (the flow reads it as "diverged") */

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
    "  --epochs N (10) --batch N (64) --seed N (1) --opt sgd|adam (sgd) --lr X (sgd 0.01, adam 0.001)\n"
    "  --momentum X (0.9) --wd X (0) --sched const|step|cosine (const) --step-size N (1) --gamma X (0.95)\n"
    "  --subset N         train on the first N samples; --test-subset N evaluates on N\n"
    "  --threads N        GEMM threads (0 = all cores); results do not depend on it\n"
    "  --device D         cpu | cuda | auto (default cpu until the GPU kernels have run on a device;\n"
    "                     auto: the GPU when present): where the GEMMs run;\n"
    "                     results are the same (docs/training.md); layer ops stay on the CPU\n"
    "  --json FILE        per-epoch results; --checkpoint DIR [--resume]\n"
    "exit status: 0 trained, 2 could not run, 3 diverged (a batch loss non-finite or > 1000, or a non-finite weight)\n"
    "  --trace-operands FILE [--trace-samples N (100000)] [--trace-kind sig|float (sig)]\n"
    "                     a uniform sample of the forward multiplier's operand pairs during\n"
    "                     training (trace format: docs/trace-format.md)\n"
    "  --dump-gemm LAYER:FILE  write the first training batch's forward GEMM of LAYER\n"
    "                     for `mantis cosim` (format: docs/cosim.md); or --dump-layer LAYER\n"
    "                     --dump-gemm FILE\n";

/* Options beyond the driver's config: the multiplier texts still to be
 * resolved into the three specs. */
typedef struct train_opts {
    mts_train_config c;
    mts_arith_spec spec;  /* the main multiplier (forward) */
    const char *mul_bwd, *mul_test;
    const char *device;                   /* --device: cpu | cuda | auto (NULL: auto) */
    const char *opt, *sched, *trace_kind; /* checked after the loop, as --help documents them */
    const char *dump_gemm, *dump_layer;   /* --dump-gemm LAYER:FILE, or --dump-layer L --dump-gemm FILE */
    int help;
    int list_layers;
    mts_mul_layers layers;
} train_opts;

static int num(const char *opt, const char *v, double lo, double hi, double *out)
{
    double d;
    if (mts_parse_double(v, lo, hi, &d))
        return mts_cli_error(CMD, "%s '%s': expected a number in [%g, %g]", opt, v, lo, hi);
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
static void resolve_specs(train_opts *o, const mts_mulsel *sel)
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
    else if (!strcmp(a, "--opt")) o->opt = v;
    else if (!strcmp(a, "--device")) o->device = v;
    else if (!strcmp(a, "--sched")) o->sched = v;
    else if (!strcmp(a, "--acc")) snprintf(o->spec.acc, sizeof o->spec.acc, "%s", v);
    else if (!strcmp(a, "--prod")) snprintf(o->spec.prod, sizeof o->spec.prod, "%s", v);
    else if (!strcmp(a, "--lr")) return num(a, v, 0, 100, &c->lr) ? 2 : 0;
    else if (!strcmp(a, "--momentum")) return num(a, v, 0, 1, &c->momentum) ? 2 : 0;
    else if (!strcmp(a, "--wd")) return num(a, v, 0, 1, &c->wd) ? 2 : 0;
    else if (!strcmp(a, "--gamma")) return num(a, v, 0, 1, &c->gamma) ? 2 : 0;
    else if (!strcmp(a, "--seed")) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (*v < '0' || *v > '9' || *end || errno) return mts_cli_error(CMD, "--seed '%s': expected an unsigned integer", v);
        c->seed = s;
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
            return mts_cli_error(CMD, "unknown option %s (see mantis train --help)", a);
        if (mts_parse_int(v, ints[k].lo, ints[k].hi, &l))
            return mts_cli_error(CMD, "%s '%s': expected an integer in [%ld, %ld]%s", a, v, ints[k].lo, ints[k].hi,
                                 !strcmp(a, "--trace-samples") ? " (each sample holds 8 bytes: at most 512 MiB)" : "");
        *(int *)((char *)o + ints[k].off) = (int)l;
    }
    return 0;
}

/* Fills o from argv; 0, or the exit status (o->help: --help was printed,
 * the command returns 0 without running). */
static int parse(int argc, char **argv, train_opts *o, mts_mulsel *sel)
{
    mts_err err;
    memset(o, 0, sizeof *o);
    mts_train_config_init(&o->c);
    mts_arith_spec_init(&o->spec);
    mts_mulsel_init(sel);
    o->opt = "sgd";
    o->sched = "const";
    o->trace_kind = "sig";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (mts_is_help(a)) {
            fputs(usage_text, stdout);
            o->help = 1;
            return 0;
        }
        int r = mts_mulsel_arg(sel, argc, argv, &i, &err);
        if (r == 0) r = mts_mul_layers_arg(&o->layers, argc, argv, &i, &err);
        if (r < 0) return mts_cli_error(CMD, "%s", err.msg);
        if (r > 0) continue;
        if (!strcmp(a, "--resume")) { o->c.resume = 1; continue; }
        if (!strcmp(a, "--list-layers")) { o->list_layers = 1; continue; }
        if (!strcmp(a, "--no-underflow")) { o->spec.no_underflow = 1; continue; }
        if (i + 1 >= argc) return mts_cli_error(CMD, "option %s needs a value (see mantis train --help)", a);
        int rc = option(o, a, argv[++i]);
        if (rc) return rc;
    }
    o->c.layer_rules = o->layers.rule;
    o->c.nlayer_rules = o->layers.n;
    if (o->list_layers) {
        if (!o->c.model) return mts_cli_error(CMD, "--list-layers needs --model (see mantis train --help)");
        return 0;
    }
    if (!o->c.model || !o->c.data) return mts_cli_error(CMD, "--model and --data are required (see mantis train --help)");
    if (mts_opt_parse(o->opt, &o->c.opt)) return mts_cli_error(CMD, "--opt '%s': expected sgd or adam", o->opt);
    if (mts_sched_parse(o->sched, &o->c.sched))
        return mts_cli_error(CMD, "--sched '%s': expected const, step or cosine", o->sched);
    if (o->c.resume && !o->c.ckdir) return mts_cli_error(CMD, "--resume needs --checkpoint DIR");
    if (strcmp(o->trace_kind, "sig") && strcmp(o->trace_kind, "float"))
        return mts_cli_error(CMD, "--trace-kind '%s': expected sig or float", o->trace_kind);
    o->c.trace_kind = !strcmp(o->trace_kind, "sig") ? MTS_TRACE_SIG : MTS_TRACE_FLOAT;
    if (mts_gpu_resolve_device(o->device ? o->device : "cpu", &o->c.device, &err) != MTS_OK) return mts_cli_error(CMD, "%s", err.msg);
    /* the main multiplier selection, through the shared options (mul_opts.h) */
    if (sel->lut) snprintf(o->spec.lut, sizeof o->spec.lut, "%s", sel->lut), o->spec.mul[0] = 0;
    else if (sel->mul) snprintf(o->spec.mul, sizeof o->spec.mul, "%s", sel->mul);
    if (sel->format) snprintf(o->spec.format, sizeof o->spec.format, "%s", sel->format);
    o->spec.man_bits = sel->man_bits;
    if (!!sel->mul + !!sel->lut + !!sel->rtl > 1) return mts_cli_error(CMD, "give one of --mul, --lut or --rtl");
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
        return mts_cli_error(CMD, "--data '%s': expected mnist, fashion-mnist or cifar10", data);
    mts_net net;
    mts_err err;
    int rc = mts_nn_model_build(&net, o->c.model, cifar ? 3 : 1, cifar ? 32 : 28, cifar ? 32 : 28, 10, &err);
    if (rc != MTS_OK) {
        mts_cli_error(CMD, "%s", err.msg);
        return mts_cli_exit(rc);
    }
    int *rule = malloc(sizeof(int) * (size_t)net.n), *match = calloc((size_t)net.n, sizeof(int));
    if (!rule || !match) {
        free(rule);
        free(match);
        mts_net_free(&net);
        return mts_cli_error(CMD, "out of memory");
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

int mts_cmd_train(int argc, char **argv)
{
    train_opts o;
    mts_mulsel sel;
    mts_err err;
    int rc = parse(argc, argv, &o, &sel);
    if (rc || o.help) return rc;
    if (o.list_layers) return list_layers(&o);
    if (sel.rtl && (o.spec.acc[0])) return mts_cli_error(CMD, "--acc with --rtl is not supported; use --lut of the design");
    resolve_specs(&o, &sel);
    mts_mulsel_arith rtl = {.sel = &sel};
    o.c.open = mts_mulsel_arith_open;
    o.c.open_ud = &rtl;
    o.c.progress = progress;
    o.c.progress_ud = &o;
    mts_gemm_tap tap;
    char spec[1100];
    if (o.dump_layer && !o.dump_gemm) return mts_cli_error(CMD, "--dump-layer needs --dump-gemm FILE");
    if (o.dump_gemm) {
        /* the flow passes the file as its own argument ({OUT}) */
        if (o.dump_layer) snprintf(spec, sizeof spec, "%s:%s", o.dump_layer, o.dump_gemm);
        else snprintf(spec, sizeof spec, "%s", o.dump_gemm);
        if (mts_gemm_tap_init(&tap, spec, &err)) return mts_cli_error(CMD, "%s", err.msg);
        o.c.tap = &tap;
    }
    mts_train_info info;
    rc = mts_train_run(&o.c, &info, &err);
    mts_mulsel_arith_close(&rtl);
    if (rc == MTS_OK && o.dump_gemm) rc = mts_gemm_tap_result(&tap, &err);
    if (rc != MTS_OK) {
        mts_cli_error(CMD, "%s", err.msg);
        return mts_cli_exit(rc);
    }
    if (info.diverged) { /* its own status: neither a result nor a failure to run (docs/training.md) */
        fprintf(stderr, "mantis train: diverged at epoch %d step %d: batch loss %g (limit %g); stopped\n",
                info.diverged_epoch, info.diverged_step, info.diverged_loss, MTS_DIVERGE_LOSS);
        printf("diverged at epoch %d step %d\n", info.diverged_epoch, info.diverged_step);
        return MTS_TRAIN_DIVERGED_EXIT;
    }
    printf("test accuracy %.4f\n", info.final_test_acc);
    return 0;
}
