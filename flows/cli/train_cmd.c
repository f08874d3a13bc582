/* train_cmd.c - `mantis train`: trains a built-in model on MNIST,
 * Fashion-MNIST or CIFAR-10 with the chosen multipliers and accumulator,
 * checkpointing every epoch (docs/training.md). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/nn.h"
#include "mantis/trace.h"
#include "mul_opts.h"

#define CMD "train"

static const char usage_text[] =
    "usage: mantis train --model M --data D [options]\n"
    "  --model M          lenet300 | lenet5 | mlp1024 | resnet20\n"
    "  --data D           mnist | fashion-mnist | cifar10\n"
    "  --data-dir DIR     where the data set lies (default ./data/D)\n"
    "multipliers (forward; backward and evaluation default to the same):\n"
    "  --mul NAME         fp32 (native, default) | blas | bf16 | a C model (mantis models)\n"
    "  --man-bits M, --format F, --lut FILE, --rtl FILE.v [--param K=V] [--kind K]\n"
    "  --mul-bwd NAME     multiplier of both backward GEMMs (a model name or a LUT file)\n"
    "  --mul-test NAME    multiplier for evaluation\n"
    "accumulator (FMAq, forward and evaluation):\n"
    "  --acc M7E4 [--acc-bias B] [--prod M7E4] [--prod-bias B] [--chunk 16] [--no-underflow]\n"
    "  --ste S            identity | rec-of | imm-of | imm-diff (dense layers; default identity)\n"
    "training:\n"
    "  --epochs N (10) --batch N (64) --seed N (1) --opt sgd|adam (sgd) --lr X (sgd 0.01, adam 0.001)\n"
    "  --momentum X (0.9) --wd X (0) --sched const|step|cosine (const) --step-size N (1) --gamma X (0.95)\n"
    "  --subset N         train on the first N samples; --test-subset N evaluates on N\n"
    "  --threads N        GEMM threads (0 = all cores); results do not depend on it\n"
    "  --json FILE        per-epoch results; --checkpoint DIR [--resume]\n"
    "  --trace-operands FILE [--trace-samples N (100000)] [--trace-kind sig|float (sig)]\n"
    "                     a uniform sample of the forward multiplier's operand pairs during\n"
    "                     training (trace format: docs/trace-format.md)\n";

typedef struct train_opts {
    const char *model, *data, *data_dir, *json, *ckdir;
    const char *mul_bwd, *mul_test, *ste, *trace, *trace_kind;
    int trace_samples;
    mts_arith_spec spec;
    int epochs, batch, threads, subset, test_subset, resume, step_size;
    uint64_t seed;
    double lr, momentum, wd, gamma;
    const char *opt, *sched;
} train_opts;

static int num(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (*v == '\0' || *end || errno || !(d >= lo && d <= hi))
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

/* The run's identity: everything that changes its results (not --epochs
 * unless the schedule depends on it, not --threads, --json, --checkpoint). */
static void config_str(const train_opts *o, const mts_arith_spec *f, const mts_arith_spec *b,
                       const mts_arith_spec *t, char *buf, size_t n)
{
    char sf[700], sb[700], st[700];
    mts_arith_spec_str(f, sf, sizeof sf);
    mts_arith_spec_str(b, sb, sizeof sb);
    mts_arith_spec_str(t, st, sizeof st);
    int len = snprintf(buf, n,
                       "model=%s\ndata=%s\nseed=%llu\nbatch=%d\nsubset=%d\nopt=%s\nlr=%.9g\nmomentum=%.9g\nwd=%.9g\n"
                       "sched=%s\nstep_size=%d\ngamma=%.9g\nste=%s\nfwd=%s\nbwd=%s\n",
                       o->model, o->data, (unsigned long long)o->seed, o->batch, o->subset, o->opt, o->lr,
                       o->momentum, o->wd, o->sched, o->step_size, o->gamma, o->ste, sf, sb);
    if (len > 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, "test=%s\n", st);
    if (!strcmp(o->sched, "cosine")) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "epochs=%d\n", o->epochs);
    }
}

static void progress(void *ctx, int done, int total)
{
    int *ep = ctx;
    int w = 40, fill = total ? (int)((long)w * done / total) : w;
    fprintf(stderr, "\repoch %d [%.*s%*s] %d/%d", *ep, fill, "========================================", w - fill,
            "", done, total);
    if (done == total) fputc('\r', stderr);
}

static int write_json(const char *path, const train_opts *o, const char *fdesc, const char *bdesc,
                      const char *tdesc, const mts_ckpt_meta *m, mts_err *err)
{
    size_t cap = 4096 + (size_t)m->nhist * 256, len = 0;
    char *buf = malloc(cap);
    if (!buf) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    len += (size_t)snprintf(buf + len, cap - len,
                            "{\n  \"model\": \"%s\",\n  \"data\": \"%s\",\n  \"seed\": %llu,\n  \"batch\": %d,\n"
                            "  \"mul_fwd\": \"%s\",\n  \"mul_bwd\": \"%s\",\n  \"mul_test\": \"%s\",\n  \"ste\": \"%s\",\n"
                            "  \"epochs\": [",
                            o->model, o->data, (unsigned long long)o->seed, o->batch, fdesc, bdesc, tdesc, o->ste);
    for (int i = 0; i < m->nhist; i++) {
        const mts_epoch_stats *s = &m->hist[i];
        len += (size_t)snprintf(buf + len, cap - len,
                                "%s\n    {\"epoch\": %d, \"lr\": %.6g, \"train_loss\": %.6f, \"train_acc\": %.6f, "
                                "\"test_acc\": %.6f, \"seconds\": %.3f, \"samples_per_s\": %.1f}",
                                i ? "," : "", i + 1, s->lr, s->train_loss, s->train_acc, s->test_acc, s->seconds,
                                s->samples_per_s);
    }
    len += (size_t)snprintf(buf + len, cap - len, "\n  ],\n  \"final_test_acc\": %.6f\n}\n",
                            m->nhist ? m->hist[m->nhist - 1].test_acc : 0.0);
    const void *parts[1] = {buf};
    int rc = mts_fs_write_atomic(path, 1, parts, &len, err);
    free(buf);
    return rc;
}

static int parse(int argc, char **argv, train_opts *o, mts_mulsel *sel)
{
    mts_err err;
    memset(o, 0, sizeof *o);
    mts_arith_spec_init(&o->spec);
    mts_mulsel_init(sel);
    o->epochs = 10;
    o->batch = 64;
    o->seed = 1;
    o->lr = -1;
    o->momentum = 0.9;
    o->gamma = 0.95;
    o->step_size = 1;
    o->opt = "sgd";
    o->sched = "const";
    o->ste = "identity";
    o->trace_kind = "sig";
    o->trace_samples = 100000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (mts_is_help(a)) {
            fputs(usage_text, stdout);
            exit(0);
        }
        int r = mts_mulsel_arg(sel, argc, argv, &i, &err);
        if (r < 0) return mts_cli_error(CMD, "%s", err.msg);
        if (r > 0) continue;
        if (!strcmp(a, "--resume")) { o->resume = 1; continue; }
        if (!strcmp(a, "--no-underflow")) { o->spec.no_underflow = 1; continue; }
        if (i + 1 >= argc) return mts_cli_error(CMD, "option %s needs a value (see mantis train --help)", a);
        const char *v = argv[++i];
        long l;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--data-dir")) o->data_dir = v;
        else if (!strcmp(a, "--json")) o->json = v;
        else if (!strcmp(a, "--checkpoint")) o->ckdir = v;
        else if (!strcmp(a, "--mul-bwd")) o->mul_bwd = v;
        else if (!strcmp(a, "--mul-test")) o->mul_test = v;
        else if (!strcmp(a, "--ste")) o->ste = v;
        else if (!strcmp(a, "--trace-operands")) o->trace = v;
        else if (!strcmp(a, "--trace-kind")) o->trace_kind = v;
        else if (!strcmp(a, "--opt")) o->opt = v;
        else if (!strcmp(a, "--sched")) o->sched = v;
        else if (!strcmp(a, "--acc")) snprintf(o->spec.acc, sizeof o->spec.acc, "%s", v);
        else if (!strcmp(a, "--prod")) snprintf(o->spec.prod, sizeof o->spec.prod, "%s", v);
        else if (!strcmp(a, "--lr")) { if (num(a, v, 0, 100, &o->lr)) return 2; }
        else if (!strcmp(a, "--momentum")) { if (num(a, v, 0, 1, &o->momentum)) return 2; }
        else if (!strcmp(a, "--wd")) { if (num(a, v, 0, 1, &o->wd)) return 2; }
        else if (!strcmp(a, "--gamma")) { if (num(a, v, 0, 1, &o->gamma)) return 2; }
        else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (*v == '\0' || *end || errno || *v == '-') return mts_cli_error(CMD, "--seed '%s': expected an unsigned integer", v);
            o->seed = s;
        } else {
            static const struct { const char *name; long lo, hi; size_t off; } ints[] = {
                {"--epochs", 1, 1024, offsetof(train_opts, epochs)},
                {"--batch", 1, 65536, offsetof(train_opts, batch)},
                {"--threads", 0, 1024, offsetof(train_opts, threads)},
                {"--subset", 1, 100000000, offsetof(train_opts, subset)},
                {"--test-subset", 1, 100000000, offsetof(train_opts, test_subset)},
                {"--step-size", 1, 1024, offsetof(train_opts, step_size)},
                {"--trace-samples", 1, 1L << 30, offsetof(train_opts, trace_samples)},
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
                return mts_cli_error(CMD, "%s '%s': expected an integer in [%ld, %ld]", a, v, ints[k].lo, ints[k].hi);
            *(int *)((char *)o + ints[k].off) = (int)l;
        }
    }
    if (!o->model || !o->data) return mts_cli_error(CMD, "--model and --data are required (see mantis train --help)");
    if (strcmp(o->opt, "sgd") && strcmp(o->opt, "adam"))
        return mts_cli_error(CMD, "--opt '%s': expected sgd or adam", o->opt);
    if (strcmp(o->sched, "const") && strcmp(o->sched, "step") && strcmp(o->sched, "cosine"))
        return mts_cli_error(CMD, "--sched '%s': expected const, step or cosine", o->sched);
    if (o->resume && !o->ckdir) return mts_cli_error(CMD, "--resume needs --checkpoint DIR");
    if (strcmp(o->trace_kind, "sig") && strcmp(o->trace_kind, "float"))
        return mts_cli_error(CMD, "--trace-kind '%s': expected sig or float", o->trace_kind);
    if (o->lr < 0) o->lr = !strcmp(o->opt, "adam") ? 1e-3 : 0.01;
    /* the main multiplier selection, through the shared options (mul_opts.h) */
    if (sel->lut) snprintf(o->spec.lut, sizeof o->spec.lut, "%s", sel->lut), o->spec.mul[0] = 0;
    else if (sel->mul) snprintf(o->spec.mul, sizeof o->spec.mul, "%s", sel->mul);
    if (sel->format) snprintf(o->spec.format, sizeof o->spec.format, "%s", sel->format);
    o->spec.man_bits = sel->man_bits;
    if (!!sel->mul + !!sel->lut + !!sel->rtl > 1) return mts_cli_error(CMD, "give one of --mul, --lut or --rtl");
    return 0;
}

/* Opens an arithmetic spec, or the --rtl design for the main selection. */
static int open_arith(const mts_arith_spec *s, const mts_mulsel *sel, mts_mulhandle *h, int threads,
                      mts_arith *a, const char *what)
{
    mts_err err;
    if (sel && sel->rtl) {
        memset(a, 0, sizeof *a);
        int rc = mts_mulsel_open(sel, h, &err);
        if (rc) return mts_cli_error(CMD, "%s multiplier: %s", what, err.msg);
        a->p.kind = h->is_int ? MTS_PROV_INT : MTS_PROV_MULOP;
        a->p.lut = &h->lut;
        a->p.mul = &h->op;
        a->p.threads = threads;
        snprintf(a->desc, sizeof a->desc, "rtl %s", sel->rtl);
        return 0;
    }
    if (mts_arith_open(s, threads, a, &err)) return mts_cli_error(CMD, "%s multiplier: %s", what, err.msg);
    return 0;
}

int mts_cmd_train(int argc, char **argv)
{
    train_opts o;
    mts_mulsel sel;
    mts_err err;
    int rc = parse(argc, argv, &o, &sel);
    if (rc) return rc;
    mts_ste ste;
    if (mts_ste_parse(o.ste, &ste, &err)) return mts_cli_error(CMD, "%s", err.msg);
    if (sel.rtl && (o.spec.acc[0])) return mts_cli_error(CMD, "--acc with --rtl is not supported; use --lut of the design");

    /* backward: the forward multiplier without FMAq; test: the forward one */
    mts_arith_spec fspec = o.spec, bspec = o.spec, tspec = o.spec;
    bspec.acc[0] = 0;
    if (o.mul_bwd) alt_spec(&o.spec, o.mul_bwd, 0, &bspec);
    if (o.mul_test) alt_spec(&o.spec, o.mul_test, 1, &tspec);
    if (sel.rtl) {
        snprintf(fspec.mul, sizeof fspec.mul, "rtl");
        if (!o.mul_bwd) bspec = fspec;
        if (!o.mul_test) tspec = fspec;
    }

    char dir[1024];
    snprintf(dir, sizeof dir, "%s", o.data_dir ? o.data_dir : "");
    if (!o.data_dir) snprintf(dir, sizeof dir, "data/%s", o.data);
    mts_dataset train = {0}, test = {0};
    if (mts_dataset_load(o.data, dir, 1, &train, &err) || mts_dataset_load(o.data, dir, 0, &test, &err)) {
        mts_dataset_free(&train);
        return mts_cli_error(CMD, "%s", err.msg);
    }

    mts_mulhandle hf = {0}, hb = {0}, ht = {0};
    mts_arith af, ab, at;
    memset(&af, 0, sizeof af);
    memset(&ab, 0, sizeof ab);
    memset(&at, 0, sizeof at);
    mts_net net;
    memset(&net, 0, sizeof net);
    mts_opt opt;
    memset(&opt, 0, sizeof opt);
    mts_nn_tracer tracer;
    memset(&tracer, 0, sizeof tracer);
    static mts_ckpt_meta meta; /* large: history of up to 1024 epochs */
    memset(&meta, 0, sizeof meta);
    rc = 2;
    if (open_arith(&fspec, &sel, &hf, o.threads, &af, "forward") ||
        open_arith(&bspec, (sel.rtl && !o.mul_bwd) ? &sel : NULL, &hb, o.threads, &ab, "backward") ||
        open_arith(&tspec, (sel.rtl && !o.mul_test) ? &sel : NULL, &ht, o.threads, &at, "test"))
        goto out;
    if (mts_nn_model_build(&net, o.model, train.c, train.h, train.w, train.classes, &err) ||
        mts_net_build(&net, o.batch, o.seed, &err)) {
        mts_cli_error(CMD, "%s", err.msg);
        goto out;
    }
    net.ste = ste;
    opt.kind = !strcmp(o.opt, "adam") ? MTS_OPT_ADAM : MTS_OPT_SGD;
    opt.lr = (float)o.lr;
    opt.momentum = (float)o.momentum;
    opt.wd = (float)o.wd;
    opt.beta1 = 0.9f;
    opt.beta2 = 0.999f;
    opt.eps = 1e-8f;
    opt.sched = !strcmp(o.sched, "step") ? MTS_SCHED_STEP : !strcmp(o.sched, "cosine") ? MTS_SCHED_COSINE : MTS_SCHED_CONST;
    opt.step_size = o.step_size;
    opt.gamma = (float)o.gamma;
    opt.epochs = o.epochs;
    if (mts_opt_init(&opt, net.nparam, &err)) {
        mts_cli_error(CMD, "%s", err.msg);
        goto out;
    }
    config_str(&o, &fspec, &bspec, &tspec, meta.config, sizeof meta.config);

    char ckpath[1100] = "";
    if (o.ckdir) {
        if (mkdir(o.ckdir, 0777) && errno != EEXIST) {
            mts_cli_error(CMD, "%s: cannot create checkpoint directory (%s)", o.ckdir, strerror(errno));
            goto out;
        }
        snprintf(ckpath, sizeof ckpath, "%s/checkpoint.mtsckpt", o.ckdir);
    }
    int start = 0;
    if (o.resume) {
        char want[sizeof meta.config];
        memcpy(want, meta.config, sizeof want);
        if (mts_ckpt_load(ckpath, &net, &opt, &meta, &err)) {
            mts_cli_error(CMD, "%s", err.msg);
            goto out;
        }
        if (strcmp(want, meta.config)) {
            mts_cli_error(CMD, "%s: was written by a run with other settings; resume with the same options", ckpath);
            goto out;
        }
        start = meta.epoch;
        fprintf(stderr, "mantis train: resuming after epoch %d from %s\n", start, ckpath);
    }
    if (o.trace) {
        mts_format tf = mts_prov_format(&af.p);
        if (af.p.kind == MTS_PROV_INT) {
            mts_cli_error(CMD, "--trace-operands: integer tables are not traced yet");
            goto out;
        }
        if (mts_nn_tracer_init(&tracer, (size_t)o.trace_samples, &tf,
                               !strcmp(o.trace_kind, "sig") ? MTS_TRACE_SIG : MTS_TRACE_FLOAT, o.seed, &err)) {
            mts_cli_error(CMD, "%s", err.msg);
            goto out;
        }
    }
    int n = o.subset && o.subset < train.n ? o.subset : train.n;
    int nt = o.test_subset && o.test_subset < test.n ? o.test_subset : test.n;
    int tty = isatty(2);
    fprintf(stderr, "mantis train: %s on %s (%d train, %d test), %zu parameters; fwd %s; bwd %s; test %s; ste %s\n",
            o.model, o.data, n, nt, net.nparam, af.desc, ab.desc, at.desc, mts_ste_name(ste));
    for (int e = start; e < o.epochs; e++) {
        mts_epoch_stats st;
        int ep = e + 1;
        mts_nn_set_tracer(o.trace ? &tracer : NULL); /* training GEMMs only, not evaluation */
        int erc = mts_train_epoch(&net, &opt, &af.p, &ab.p, &train, n, o.batch, o.seed, e, mts_opt_lr(&opt, e),
                                  tty ? progress : NULL, &ep, &st, &err);
        mts_nn_set_tracer(NULL);
        if (erc || mts_evaluate(&net, &at.p, &test, nt, &st.test_acc, &err)) {
            mts_cli_error(CMD, "%s", err.msg);
            goto out;
        }
        meta.hist[meta.nhist++] = st;
        meta.epoch = e + 1;
        fprintf(stderr, "epoch %d/%d lr %.4g loss %.4f train %.2f%% test %.2f%% %.1f s %.0f samples/s\n", e + 1,
                o.epochs, st.lr, st.train_loss, 100 * st.train_acc, 100 * st.test_acc, st.seconds, st.samples_per_s);
        if (o.ckdir && mts_ckpt_save(ckpath, &net, &opt, &meta, &err)) {
            mts_cli_error(CMD, "%s", err.msg);
            goto out;
        }
        if (o.json && write_json(o.json, &o, af.desc, ab.desc, at.desc, &meta, &err)) {
            mts_cli_error(CMD, "%s", err.msg);
            goto out;
        }
    }
    if (o.json && start >= o.epochs && write_json(o.json, &o, af.desc, ab.desc, at.desc, &meta, &err)) {
        mts_cli_error(CMD, "%s", err.msg);
        goto out;
    }
    if (o.trace) {
        if (mts_nn_tracer_write(&tracer, o.trace, &err)) {
            mts_cli_error(CMD, "%s", err.msg);
            goto out;
        }
        fprintf(stderr, "mantis train: %s: %zu sampled operand pairs of %llu\n", o.trace, tracer.have,
                (unsigned long long)tracer.seen);
    }
    printf("test accuracy %.4f\n", meta.nhist ? meta.hist[meta.nhist - 1].test_acc : 0.0);
    rc = 0;
out:
    mts_nn_tracer_free(&tracer);
    mts_opt_free(&opt);
    mts_net_free(&net);
    mts_arith_close(&af);
    mts_arith_close(&ab);
    mts_arith_close(&at);
    mts_mulhandle_close(&hf);
    mts_mulhandle_close(&hb);
    mts_mulhandle_close(&ht);
    mts_dataset_free(&train);
    mts_dataset_free(&test);
    return rc;
}
