/* test_run.c - evaluation of a training checkpoint (mts_test_run,
 * nn_train.h): rebuilds the run's model from the checkpoint's config,
 * loads it and measures test accuracy with the run's own test provider or
 * another one ("train with X, test with Y", ApproxTrain Table IV). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/json.h"
#include "mantis/nn_gpunet.h"
#include "mantis/nn_train.h"
#include "nn_internal.h"

/* Value of "key=" in the checkpoint's config lines, copied into out. */
static int config_get(const char *cfg, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    for (const char *p = cfg; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, key, kl) && p[kl] == '=') {
            const char *v = p + kl + 1, *e = strchr(v, '\n');
            size_t l = e ? (size_t)(e - v) : strlen(v);
            if (l >= n) l = n - 1;
            memcpy(out, v, l);
            out[l] = 0;
            return 0;
        }
    return -1;
}

/* The provider to evaluate with: c->spec, or the run's test spec with
 * c->acc's FMAq settings in place of its own. */
static int choose_spec(const mts_test_config *c, const char *path, const char *tspec, mts_arith_spec *spec,
                       mts_err *err)
{
    if (c->spec) {
        *spec = *c->spec;
        return MTS_OK;
    }
    mts_err e2;
    if (mts_arith_spec_parse(tspec, spec, &e2)) return mts_fail(err, MTS_EFORMAT, "%s: %s", path, e2.msg);
    if (!strcmp(spec->mul, "rtl"))
        return mts_fail(err, MTS_EINVAL, "%s: the run used --rtl; give --rtl FILE.v again", path);
    if (c->acc) {
        snprintf(spec->acc, sizeof spec->acc, "%s", c->acc->acc);
        snprintf(spec->prod, sizeof spec->prod, "%s", c->acc->prod);
        spec->acc_bias = c->acc->acc_bias;
        spec->prod_bias = c->acc->prod_bias;
        spec->chunk = c->acc->chunk;
        spec->no_underflow = c->acc->no_underflow;
    }
    return MTS_OK;
}

/* The per-layer rules to evaluate with: the run's "layer=" lines (unless
 * another test multiplier replaces the run's), then the command's own. */
static int collect_rules(const mts_test_config *c, const char *cfg, char (*store)[256], const char **rules, int *n,
                         mts_err *err)
{
    *n = 0;
    if (!c->spec)
        for (const char *p = cfg; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
            if (!strncmp(p, "layer=", 6)) {
                if (*n == MTS_MAX_LAYER_RULES) return mts_fail(err, MTS_EFORMAT, "checkpoint: too many layer rules");
                const char *v = p + 6, *e = strchr(v, '\n');
                int l = e ? (int)(e - v) : (int)strlen(v);
                snprintf(store[*n], sizeof store[*n], "%.*s", l, v);
                rules[*n] = store[*n];
                ++*n;
            }
    for (int i = 0; i < c->nlayer_rules; i++) {
        if (*n == MTS_MAX_LAYER_RULES) return mts_fail(err, MTS_EINVAL, "at most %d --mul-layer rules", MTS_MAX_LAYER_RULES);
        rules[(*n)++] = c->layer_rules[i];
    }
    return MTS_OK;
}

static void print_json(FILE *f, void *ud)
{
    const mts_test_result *r = ud;
    mts_jw w;
    mts_jw_init(&w, f);
    mts_jw_obj(&w, NULL, 0);
    mts_jw_str(&w, "model", r->model);
    mts_jw_str(&w, "data", r->data);
    mts_jw_str(&w, "mul_test", r->desc);
    mts_jw_str(&w, "layers", r->layers);
    mts_jw_int(&w, "samples", r->samples);
    mts_jw_num(&w, "test_acc", r->acc, "%.6f");
    if (r->gpu_path[0]) mts_jw_str(&w, "gpu_path", r->gpu_path); /* --device cuda only */
    mts_jw_end(&w);
}

/* Opens the provider, loads the model and evaluates the test split. */
static int evaluate(const mts_test_config *c, const char *path, const mts_arith_spec *spec, const char *const *rules,
                    int nrules, const mts_dataset *test, mts_arith *ar, nn_layers *L, mts_net *net,
                    mts_test_result *r, mts_err *err)
{
    int rc;
    if ((rc = nn_open_arith(c->open, c->open_ud, spec, c->threads, ar, err)) != MTS_OK ||
        (rc = nn_arith_device(ar, c->device, err)) != MTS_OK)
        return rc;
    if ((rc = mts_nn_model_build(net, r->model, test->c, test->h, test->w, test->classes, err)) != MTS_OK ||
        (rc = mts_net_build(net, 256, 0, err)) != MTS_OK || (rc = mts_ckpt_load(path, net, NULL, NULL, err)) != MTS_OK)
        return rc;
    if ((rc = mts_arith_int_prepare(ar, 0, err)) != MTS_OK) return rc;
    if ((rc = nn_layers_open(L, net, rules, nrules, 0, MTS_INT_BWD_STE, c->open, c->open_ud, c->threads, err)) !=
        MTS_OK)
        return rc;
    snprintf(r->layers, sizeof r->layers, "%s", L->desc);
    r->samples = c->test_subset && c->test_subset < test->n ? c->test_subset : test->n;
    snprintf(r->desc, sizeof r->desc, "%s", ar->desc);
    mts_nn_ctx ctx = mts_nn_ctx_cpu(&ar->p, NULL);
    ctx.tap = c->tap;
    ctx.qtab = &ar->qtab;
    nn_layers_bind(L, net->n, NULL, &ctx);
    ctx.node_ctx = L->eval_nodes;
    /* --device cuda: on the device when it takes the net and provider (nn_gpunet.h) */
    mts_err why;
    if (c->device && mts_gpunet_supports(net, NULL, &ctx, &why) == MTS_OK) {
        mts_gpunet *g = NULL;
        snprintf(r->gpu_path, sizeof r->gpu_path, "resident");
        rc = mts_gpunet_open(&g, net, NULL, NULL, NULL, &ar->p, 0, 0, NULL, 0, test, r->samples, err);
        if (rc == MTS_OK) rc = mts_gpunet_evaluate(g, r->samples, &r->acc, err);
        mts_gpunet_close(g);
    } else {
        if (c->device) snprintf(r->gpu_path, sizeof r->gpu_path, "per-gemm: %s", why.msg);
        rc = mts_evaluate(net, &ctx, test, r->samples, &r->acc, err);
    }
    if (rc != MTS_OK) return rc;
    if (c->json_out) print_json(c->json_out, r);
    return c->json ? mts_fs_write_stream(c->json, print_json, r, err) : MTS_OK;
}

int mts_test_run(const mts_test_config *c, mts_test_result *r, mts_err *err)
{
    char path[1100], cfg[1024], tspec[800];
    int rc;
    memset(r, 0, sizeof *r);
    if (!c->ckdir) return mts_fail(err, MTS_EINVAL, "test: a checkpoint directory is required");
    if (mts_ckpt_path(c->ckdir, path, sizeof path))
        return mts_fail(err, MTS_EINVAL, "%s: checkpoint path too long", c->ckdir);
    if ((rc = mts_ckpt_peek(path, cfg, sizeof cfg, err)) != MTS_OK) return rc;
    if (config_get(cfg, "model", r->model, sizeof r->model) || config_get(cfg, "data", r->data, sizeof r->data) ||
        config_get(cfg, "test", tspec, sizeof tspec))
        return mts_fail(err, MTS_EFORMAT, "%s: checkpoint configuration lacks model, data or test multiplier", path);
    mts_arith_spec spec;
    if ((rc = choose_spec(c, path, tspec, &spec, err)) != MTS_OK) return rc;
    char store[MTS_MAX_LAYER_RULES][256];
    const char *rules[MTS_MAX_LAYER_RULES];
    int nrules;
    if ((rc = collect_rules(c, cfg, store, rules, &nrules, err)) != MTS_OK) return rc;
    mts_dataset test = {0};
    if ((rc = mts_dataset_load(r->data, c->data_dir, 0, &test, err)) != MTS_OK) return rc;
    mts_net net;
    memset(&net, 0, sizeof net);
    mts_arith ar;
    memset(&ar, 0, sizeof ar);
    nn_layers L;
    memset(&L, 0, sizeof L);
    rc = evaluate(c, path, &spec, rules, nrules, &test, &ar, &L, &net, r, err);
    nn_layers_close(&L);
    mts_net_free(&net);
    mts_arith_close(&ar);
    mts_dataset_free(&test);
    return rc;
}
