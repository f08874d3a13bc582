/* driver.c - a whole training run (mts_train_run, nn_train.h): data,
 * providers, model and optimizer, resume, the epochs, checkpoints, the JSON
 * results and the operand trace. What `mantis train` does between parsing
 * its options and printing; it reports through the caller's callback and
 * never prints. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mantis/fs.h"
#include "mantis/gpu.h"
#include "mantis/json.h"
#include "mantis/nn_gpunet.h"
#include "mantis/nn_trace.h"
#include "mantis/nn_train.h"
#include "mantis/trace.h"
#include "nn_internal.h"

void mts_train_config_init(mts_train_config *c)
{
    memset(c, 0, sizeof *c);
    mts_arith_spec_init(&c->fwd);
    mts_arith_spec_init(&c->bwd);
    mts_arith_spec_init(&c->test);
    c->ste = "identity";
    c->seed = 1;
    c->epochs = 10;
    c->batch = 64;
    c->opt = MTS_OPT_SGD;
    c->sched = MTS_SCHED_CONST;
    c->lr = -1;
    c->momentum = 0.9;
    c->gamma = 0.95;
    c->step_size = 1;
    c->trace_kind = MTS_TRACE_SIG;
    c->trace_samples = 100000;
}

int mts_train_recipe_apply(mts_train_config *c, unsigned given, mts_err *err)
{
    mts_train_recipe r;
    int rc = mts_nn_model_recipe(c->model ? c->model : "", &r, err);
    if (rc != MTS_OK) return rc;
    if (!(given & MTS_GIVEN_OPT)) c->opt = r.opt;
    if (!(given & MTS_GIVEN_LR)) c->lr = c->opt == r.opt ? r.lr : -1; /* -1: the optimizer's own default */
    if (!(given & MTS_GIVEN_MOMENTUM)) c->momentum = r.momentum;
    if (!(given & MTS_GIVEN_WD)) c->wd = r.wd;
    if (!(given & MTS_GIVEN_SCHED)) c->sched = r.sched;
    if (!(given & MTS_GIVEN_GAMMA)) c->gamma = r.gamma;
    if (!(given & MTS_GIVEN_STEP_SIZE)) c->step_size = r.step_size;
    if (!(given & MTS_GIVEN_BATCH)) c->batch = r.batch;
    return MTS_OK;
}

/* What a run holds; run_free releases it. */
typedef struct run {
    const mts_train_config *c;
    mts_train_info *info;
    double lr;             /* c->lr, or the optimizer's default */
    mts_ste ste;
    mts_int_bwd ibwd;      /* integer multipliers' backward */
    int any_int;           /* a forward provider (the run's or a rule's) is an integer table */
    mts_dataset train, test;
    mts_arith af, ab, at;  /* forward, backward, test providers */
    mts_net net;
    mts_opt opt;
    mts_nn_tracer tracer;
    mts_ckpt_meta *meta;   /* large: the history of up to 1024 epochs */
    /* the divergence watch: the epoch's sample order (mts_train_epoch's, so the
     * labels of each batch are known) and a batch of labels */
    int32_t *order;
    uint8_t *labels;
    int prev_done;
    nn_layers layers;    /* per-layer multipliers (--mul-layer) */
    mts_gpunet *gpu;     /* device-resident training (--device cuda, when it takes the run) */
    char gpu_path[600];  /* "resident" or "per-gemm: <why>" (--device cuda only) */
} run;

static void run_free(run *r)
{
    mts_gpunet_close(r->gpu);
    mts_nn_tracer_free(&r->tracer);
    nn_layers_close(&r->layers);
    mts_opt_free(&r->opt);
    mts_net_free(&r->net);
    mts_arith_close(&r->af);
    mts_arith_close(&r->ab);
    mts_arith_close(&r->at);
    mts_dataset_free(&r->train);
    mts_dataset_free(&r->test);
    free(r->meta);
    free(r->order);
    free(r->labels);
}

static void report(const run *r, mts_train_event ev, int done, int total)
{
    if (r->c->progress) r->c->progress(r->c->progress_ud, ev, r->info, done, total);
}

int nn_open_arith(mts_arith_open_fn open, void *ud, const mts_arith_spec *s, int threads, mts_arith *a,
                       mts_err *err)
{
    return open ? open(ud, s, threads, a, err) : mts_arith_open(s, threads, a, err);
}

int nn_arith_device(mts_arith *a, int device, mts_err *err)
{
    if (device) {
        int rc = mts_gpu_supports(&a->p, err);
        if (rc != MTS_OK) return rc;
    }
    a->p.device = device;
    return MTS_OK;
}

int nn_int_bwd_arith(const mts_arith *fwd, int int_bwd, int threads, mts_arith *bwd, mts_err *err)
{
    if (fwd->p.kind != MTS_PROV_INT || int_bwd == MTS_INT_BWD_APPROX || bwd->p.kind != MTS_PROV_INT) return MTS_OK;
    int device = bwd->p.device;
    mts_arith_spec native;
    mts_arith_spec_init(&native); /* "fp32": our kernel, fixed order */
    mts_arith_close(bwd);
    int rc = mts_arith_open(&native, threads, bwd, err);
    if (rc == MTS_OK) rc = nn_arith_device(bwd, device, err);
    return rc;
}

static int open_providers(run *r, mts_err *err)
{
    const mts_train_config *c = r->c;
    const mts_arith_spec *spec[3] = {&c->fwd, &c->bwd, &c->test};
    mts_arith *a[3] = {&r->af, &r->ab, &r->at};
    static const char *const what[3] = {"forward", "backward", "test"};
    for (int i = 0; i < 3; i++) {
        mts_err e2;
        int rc = nn_open_arith(c->open, c->open_ud, spec[i], c->threads, a[i], &e2);
        if (rc == MTS_OK) rc = nn_arith_device(a[i], c->device, &e2);
        if (rc == MTS_OK && i == 1) rc = nn_int_bwd_arith(&r->af, r->ibwd, c->threads, &r->ab, &e2);
        if (rc == MTS_OK && i != 1) rc = mts_arith_int_prepare(a[i], i == 0 && r->ibwd == MTS_INT_BWD_TABLE, &e2);
        if (rc != MTS_OK) return mts_fail(err, rc, "%s multiplier: %s", what[i], e2.msg);
    }
    r->any_int = r->af.p.kind == MTS_PROV_INT;
    snprintf(r->info->fwd, sizeof r->info->fwd, "%s", r->af.desc);
    snprintf(r->info->bwd, sizeof r->info->bwd, "%s", r->ab.desc);
    snprintf(r->info->test, sizeof r->info->test, "%s", r->at.desc);
    return MTS_OK;
}

static int build_model(run *r, mts_err *err)
{
    const mts_train_config *c = r->c;
    int rc;
    if ((rc = mts_nn_model_build(&r->net, c->model, r->train.c, r->train.h, r->train.w, r->train.classes, err)) ||
        (rc = mts_net_build(&r->net, c->batch, c->seed, err)))
        return rc;
    mts_opt *o = &r->opt;
    o->kind = c->opt;
    o->lr = (float)r->lr;
    o->momentum = (float)c->momentum;
    o->wd = (float)c->wd;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
    o->sched = c->sched;
    o->step_size = c->step_size;
    o->gamma = (float)c->gamma;
    o->epochs = c->epochs;
    r->info->nparam = r->net.nparam;
    if ((rc = nn_layers_open(&r->layers, &r->net, c->layer_rules, c->nlayer_rules, 1, (int)r->ibwd, c->open,
                               c->open_ud, c->threads, err)) != MTS_OK)
        return rc;
    snprintf(r->info->layers, sizeof r->info->layers, "%s", r->layers.desc);
    for (int k = 0; k < r->layers.n; k++) r->any_int |= r->layers.arith[k][0].p.kind == MTS_PROV_INT;
    if (r->any_int) snprintf(r->info->int_bwd, sizeof r->info->int_bwd, "%s", mts_int_bwd_name(r->ibwd));
    return mts_opt_init(o, r->net.nparam, err);
}

/* The run's identity: everything that changes its results (not the epoch
 * count unless the schedule depends on it, not threads, JSON or checkpoint). */
static int config_str(const run *r, char *buf, size_t n, mts_err *err)
{
    const mts_train_config *c = r->c;
    char sf[700], sb[700], st[700];
    mts_arith_spec_str(&c->fwd, sf, sizeof sf);
    mts_arith_spec_str(&c->bwd, sb, sizeof sb);
    mts_arith_spec_str(&c->test, st, sizeof st);
    int len = snprintf(buf, n,
                       "model=%s\ndata=%s\nseed=%llu\nbatch=%d\nsubset=%d\nopt=%s\nlr=%.9g\nmomentum=%.9g\nwd=%.9g\n"
                       "sched=%s\nstep_size=%d\ngamma=%.9g\nste=%s\nfwd=%s\nbwd=%s\n",
                       c->model, c->data, (unsigned long long)c->seed, c->batch, c->subset, mts_opt_name(c->opt),
                       r->lr, c->momentum, c->wd, mts_sched_name(c->sched), c->step_size, c->gamma, c->ste, sf,
                       sb);
    if (len > 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, "test=%s\n", st);
    if (c->sched == MTS_SCHED_COSINE) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "epochs=%d\n", c->epochs);
    }
    for (int i = 0; i < c->nlayer_rules; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "layer=%s\n", c->layer_rules[i]);
    }
    if (r->any_int) { /* only integer runs: float runs keep the identity of their older checkpoints */
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "int_bwd=%s\n", mts_int_bwd_name(r->ibwd));
    }
    if (strlen(buf) + 1 >= n)
        return mts_fail(err, MTS_EINVAL, "train: the run's settings do not fit a checkpoint (%zu bytes; fewer or "
                        "shorter --mul-layer rules)", n - 1);
    return MTS_OK;
}

/* Checkpoint directory and file; with resume, the state to continue from. */
static int prepare_checkpoint(run *r, mts_err *err)
{
    const mts_train_config *c = r->c;
    if (!c->ckdir) return MTS_OK;
    if (mkdir(c->ckdir, 0777) && errno != EEXIST)
        return mts_fail(err, MTS_EIO, "%s: cannot create checkpoint directory (%s)", c->ckdir, strerror(errno));
    mts_fs_clean_stale_tmp(c->ckdir); /* what a run killed while writing its checkpoint left */
    if (mts_ckpt_path(c->ckdir, r->info->ckpt, sizeof r->info->ckpt))
        return mts_fail(err, MTS_EINVAL, "%s: checkpoint path too long", c->ckdir);
    if (!c->resume) return MTS_OK;
    char want[sizeof r->meta->config];
    memcpy(want, r->meta->config, sizeof want);
    int rc = mts_ckpt_load(r->info->ckpt, &r->net, &r->opt, r->meta, err);
    if (rc != MTS_OK) return rc;
    if (strcmp(want, r->meta->config))
        return mts_fail(err, MTS_EINVAL, "%s: was written by a run with other settings; resume with the same options",
                        r->info->ckpt);
    r->info->start = r->info->epoch = r->meta->epoch;
    report(r, MTS_TRAIN_RESUMED, 0, 0);
    return MTS_OK;
}

static int prepare_trace(run *r, mts_err *err)
{
    const mts_train_config *c = r->c;
    if (!c->trace) return MTS_OK;
    if (r->af.p.kind == MTS_PROV_INT)
        return mts_fail(err, MTS_EUNSUPPORTED, "--trace-operands: integer tables are not traced yet");
    mts_format tf = mts_prov_format(&r->af.p);
    return mts_nn_tracer_init(&r->tracer, (size_t)c->trace_samples, &tf, c->trace_kind, c->seed, err);
}

/* The run's JSON (docs/training.md): settings, per-layer rules with the
 * layers each took, per-epoch results and the verdict. */
static void print_json(FILE *f, void *ud)
{
    const run *r = ud;
    const mts_train_config *c = r->c;
    const mts_ckpt_meta *m = r->meta;
    const nn_layers *L = &r->layers;
    mts_jw w;
    mts_jw_init(&w, f);
    mts_jw_obj(&w, NULL, 1);
    mts_jw_str(&w, "model", c->model);
    mts_jw_str(&w, "data", c->data);
    mts_jw_uint(&w, "seed", (unsigned long long)c->seed);
    mts_jw_int(&w, "batch", c->batch);
    mts_jw_str(&w, "mul_fwd", r->af.desc);
    mts_jw_str(&w, "mul_bwd", r->ab.desc);
    mts_jw_str(&w, "mul_test", r->at.desc);
    mts_jw_str(&w, "ste", c->ste);
    if (r->any_int) mts_jw_str(&w, "int_backward", r->info->int_bwd);
    mts_jw_arr(&w, "layers", 1);
    for (int k = 0; k < L->n; k++) {
        mts_jw_obj(&w, NULL, 0);
        mts_jw_str(&w, "rule", L->rule[k].text);
        mts_jw_str(&w, "mul_fwd", L->arith[k][0].desc);
        mts_jw_str(&w, "mul_bwd", L->arith[k][1].desc);
        mts_jw_str(&w, "mul_test", L->arith[k][2].desc);
        mts_jw_arr(&w, "names", 0);
        for (int i = 0; i < r->net.n; i++)
            if (L->assign[i] == k) {
                char nm[64];
                mts_net_layer_name(&r->net, i, nm, sizeof nm);
                mts_jw_str(&w, NULL, nm);
            }
        mts_jw_end(&w);
        mts_jw_end(&w);
    }
    mts_jw_end(&w);
    mts_jw_arr(&w, "epochs", 1);
    for (int i = 0; i < m->nhist; i++) {
        const mts_epoch_stats *s = &m->hist[i];
        mts_jw_obj(&w, NULL, 0);
        mts_jw_int(&w, "epoch", i + 1);
        mts_jw_num(&w, "lr", s->lr, "%.6g");
        mts_jw_num(&w, "train_loss", s->train_loss, "%.6f");
        mts_jw_num(&w, "train_acc", s->train_acc, "%.6f");
        mts_jw_num(&w, "test_acc", s->test_acc, "%.6f");
        mts_jw_num(&w, "seconds", s->seconds, "%.3f");
        mts_jw_num(&w, "samples_per_s", s->samples_per_s, "%.1f");
        mts_jw_end(&w);
    }
    mts_jw_end(&w);
    if (c->device) { /* which GPU path ran, and the device memory it took at most */
        mts_jw_str(&w, "gpu_path", r->gpu_path);
        mts_jw_uint(&w, "device_peak_bytes", (unsigned long long)mts_gpu_peak_bytes());
        char prof[1024];
        if (mts_gpunet_profile(r->gpu, prof, sizeof prof)) mts_jw_str(&w, "gpu_profile", prof);
        char gprof[2048]; /* (the GEMMs by shape and kernel, the same switch) */
        if (mts_gpu_gemm_profile(gprof, sizeof gprof)) mts_jw_str(&w, "gpu_gemm_profile", gprof);
    }
    char cprof[4096]; /* MANTIS_CPU_PROFILE: the CPU GEMMs by shape (mts_gemm_profile) */
    if (mts_gemm_profile(cprof, sizeof cprof)) mts_jw_str(&w, "cpu_gemm_profile", cprof);
    const mts_train_info *in = r->info;
    mts_jw_bool(&w, "diverged", in->diverged);
    if (in->diverged) { /* no accuracy: a diverged run has none worth reporting */
        mts_jw_int(&w, "diverged_epoch", in->diverged_epoch);
        mts_jw_int(&w, "diverged_step", in->diverged_step);
        mts_jw_num(&w, "diverged_loss", in->diverged_loss, "%.6g"); /* null when not finite */
        mts_jw_num(&w, "diverge_threshold", MTS_DIVERGE_LOSS, "%g");
        mts_jw_null(&w, "final_test_acc");
    } else {
        mts_jw_num(&w, "final_test_acc", m->nhist ? m->hist[m->nhist - 1].test_acc : 0.0, "%.6f");
    }
    mts_jw_end(&w);
}

static int write_json(const run *r, mts_err *err)
{
    return mts_fs_write_stream(r->c->json, print_json, (void *)r, err);
}

/* After every batch: its loss, recomputed from the logits the network still
 * holds and the labels of the epoch's order; the first batch over the
 * threshold (or non-finite), or whose update left a non-finite parameter
 * (mts_opt.nonfinite; diverged_loss then NaN), marks the run diverged. A
 * NaN weight can hide from the loss for ever (ReLU and max-pooling map a
 * NaN input to 0 or drop it), so a NaN gradient would otherwise leave a run
 * "training" on a poisoned net. */
static void on_batch(void *ud, int done, int total)
{
    run *r = ud;
    mts_train_info *in = r->info;
    int N = done - r->prev_done, b0 = r->prev_done, classes = mts_net_outsize(&r->net);
    r->prev_done = done;
    if (!in->diverged && N > 0 && N <= r->c->batch) {
        for (int i = 0; i < N; i++) r->labels[i] = r->train.y[r->order[b0 + i]];
        int ok = 0;
        double loss = mts_softmax_ce(N, classes, mts_net_output(&r->net), r->labels, NULL, &ok);
        if (loss <= MTS_DIVERGE_LOSS && r->opt.nonfinite) loss = NAN;
        if (!(loss <= MTS_DIVERGE_LOSS)) { /* NaN compares false */
            in->diverged = 1;
            in->diverged_epoch = in->epoch;
            in->diverged_step = b0 / r->c->batch + 1;
            in->diverged_loss = loss;
        }
    }
    if (r->c->progress) report(r, MTS_TRAIN_BATCH, done, total);
}

/* The training and evaluation contexts of the run. */
static void run_ctx(run *r, mts_nn_ctx *train, mts_nn_ctx *eval)
{
    const mts_train_config *c = r->c;
    *train = mts_nn_ctx_cpu(&r->af.p, &r->ab.p);
    *eval = mts_nn_ctx_cpu(&r->at.p, NULL);
    train->ste = r->ste;
    train->int_bwd = (int)r->ibwd;
    train->qtab = &r->af.qtab;
    train->igrad = &r->af.igrad;
    eval->qtab = &r->at.qtab;
    train->tracer = c->trace ? &r->tracer : NULL;
    train->tap = c->tap;
    nn_layers_bind(&r->layers, r->net.n, train, eval);
    train->node_ctx = r->layers.train_nodes;
    eval->node_ctx = r->layers.eval_nodes;
}

/* With --device cuda: device-resident training when it takes the run
 * (nn_gpunet.h), else the per-GEMM path; gpu_path says which and why. */
static int prepare_device(run *r, mts_err *err)
{
    if (!r->c->device) return MTS_OK;
    mts_nn_ctx train, eval;
    run_ctx(r, &train, &eval);
    mts_err why;
    if (mts_gpunet_supports(&r->net, &train, &eval, &why) != MTS_OK) {
        snprintf(r->gpu_path, sizeof r->gpu_path, "per-gemm: %s", why.msg);
        return MTS_OK;
    }
    snprintf(r->gpu_path, sizeof r->gpu_path, "resident");
    mts_err e;
    int rc = mts_gpunet_open(&r->gpu, &r->net, &r->opt, &r->af.p, &r->ab.p, &r->at.p, (int)train.ste, train.int_bwd,
                             &r->train, r->info->ntrain, &r->test, r->info->ntest, &e);
    return rc == MTS_OK ? MTS_OK : mts_fail(err, rc, "device-resident training: %s", e.msg);
}

/* Epoch e (0-based): train (traced if asked), evaluate with the test
 * provider (never traced), record, checkpoint, rewrite the JSON. */
static int run_epoch(run *r, int e, mts_err *err)
{
    const mts_train_config *c = r->c;
    mts_nn_ctx train, eval;
    run_ctx(r, &train, &eval);
    mts_epoch_stats st;
    r->info->epoch = e + 1;
    mts_epoch_order(c->seed, e, r->info->ntrain, r->order); /* the order mts_train_epoch uses */
    r->prev_done = 0;
    int rc = r->gpu ? mts_gpunet_train_epoch(r->gpu, &r->net, &r->opt, r->info->ntrain, c->batch, c->seed, e,
                                             mts_opt_lr(&r->opt, e), on_batch, r, &st, err)
                    : mts_train_epoch(&r->net, &r->opt, &train, &r->train, r->info->ntrain, c->batch, c->seed, e,
                                      mts_opt_lr(&r->opt, e), on_batch, r, &st, err);
    if (rc == MTS_OK && r->info->diverged) /* nothing of this epoch is kept but the JSON's verdict */
        return c->json ? write_json(r, err) : MTS_OK;
    if (rc == MTS_OK)
        rc = r->gpu ? mts_gpunet_evaluate(r->gpu, r->info->ntest, &st.test_acc, err)
                    : mts_evaluate(&r->net, &eval, &r->test, r->info->ntest, &st.test_acc, err);
    /* a checkpoint holds the device's parameters, statistics and moments */
    if (rc == MTS_OK && r->gpu && c->ckdir) rc = mts_gpunet_download(r->gpu, &r->net, &r->opt, err);
    if (rc != MTS_OK) return rc;
    r->meta->hist[r->meta->nhist++] = st;
    r->meta->epoch = e + 1;
    r->info->last = st;
    r->info->final_test_acc = st.test_acc;
    report(r, MTS_TRAIN_EPOCH, 0, 0);
    if (c->ckdir && (rc = mts_ckpt_save(r->info->ckpt, &r->net, &r->opt, r->meta, err)) != MTS_OK) return rc;
    if (c->json && (rc = write_json(r, err)) != MTS_OK) return rc;
    return MTS_OK;
}

static int run_all(run *r, mts_err *err)
{
    const mts_train_config *c = r->c;
    mts_train_info *info = r->info;
    int rc;
    if ((rc = mts_ste_parse(c->ste, &r->ste, err)) != MTS_OK) return rc;
    if ((rc = mts_int_bwd_parse(c->int_bwd ? c->int_bwd : "ste", &r->ibwd, err)) != MTS_OK) return rc;
    if ((rc = mts_dataset_load(c->data, c->data_dir, 1, &r->train, err)) != MTS_OK ||
        (rc = mts_dataset_load(c->data, c->data_dir, 0, &r->test, err)) != MTS_OK)
        return rc;
    if ((rc = open_providers(r, err)) != MTS_OK || (rc = build_model(r, err)) != MTS_OK) return rc;
    if ((rc = config_str(r, r->meta->config, sizeof r->meta->config, err)) != MTS_OK) return rc;
    if ((rc = prepare_checkpoint(r, err)) != MTS_OK || (rc = prepare_trace(r, err)) != MTS_OK) return rc;
    info->final_test_acc = r->meta->nhist ? r->meta->hist[r->meta->nhist - 1].test_acc : 0.0;
    info->ntrain = c->subset && c->subset < r->train.n ? c->subset : r->train.n;
    info->ntest = c->test_subset && c->test_subset < r->test.n ? c->test_subset : r->test.n;
    r->order = malloc(sizeof(int32_t) * (size_t)(info->ntrain + 1));
    r->labels = malloc((size_t)c->batch);
    if (!r->order || !r->labels) return mts_fail(err, MTS_ENOMEM, "train: out of memory");
    if ((rc = prepare_device(r, err)) != MTS_OK) return rc;
    report(r, MTS_TRAIN_STARTED, 0, 0);
    for (int e = info->start; e < c->epochs && !info->diverged; e++)
        if ((rc = run_epoch(r, e, err)) != MTS_OK) return rc;
    if (info->diverged) return MTS_OK; /* no trace of a diverged run */
    if (c->json && info->start >= c->epochs && (rc = write_json(r, err)) != MTS_OK) return rc;
    if (c->trace) {
        if ((rc = mts_nn_tracer_write(&r->tracer, c->trace, err)) != MTS_OK) return rc;
        info->trace_have = r->tracer.have;
        info->trace_seen = r->tracer.seen;
        report(r, MTS_TRAIN_TRACED, 0, 0);
    }
    return MTS_OK;
}

int mts_train_run(const mts_train_config *c, mts_train_info *info, mts_err *err)
{
    mts_nn_keep_buffers();
    run r;
    memset(&r, 0, sizeof r);
    memset(info, 0, sizeof *info);
    r.c = c;
    r.info = info;
    r.lr = c->lr >= 0 ? c->lr : c->opt == MTS_OPT_ADAM ? 1e-3 : 0.01;
    if (!c->model || !c->data) return mts_fail(err, MTS_EINVAL, "train: a model and a data set are required");
    if (c->resume && !c->ckdir) return mts_fail(err, MTS_EINVAL, "train: resume needs a checkpoint directory");
    r.meta = calloc(1, sizeof *r.meta);
    if (!r.meta) return mts_fail(err, MTS_ENOMEM, "train: out of memory");
    int rc = run_all(&r, err);
    if (rc == MTS_OK && c->json_out) print_json(c->json_out, &r); /* the CLI's --json -: once, at the end */
    run_free(&r);
    return rc;
}
