/* test_cmd.c - `mantis test`: evaluates a checkpoint of `mantis train` on
 * the test split, with the multiplier it was trained for or another one
 * ("train with X, test with Y", ApproxTrain Table IV). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/nn.h"
#include "mul_opts.h"

#define CMD "test"

static const char usage_text[] =
    "usage: mantis test --checkpoint DIR [options]\n"
    "  --mul NAME | --lut FILE | --rtl FILE.v [--man-bits M | --format F]   evaluation multiplier\n"
    "                     (default: the run's own test multiplier)\n"
    "  --acc M7E4 [--acc-bias B] [--prod M7E4] [--prod-bias B] [--chunk N] [--no-underflow]\n"
    "  --data-dir DIR     (default ./data/<data set of the run>)\n"
    "  --test-subset N    evaluate the first N test samples\n"
    "  --threads N        GEMM threads (results do not depend on it)\n"
    "  --json FILE        write {\"test_acc\": ...}\n";

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

int mts_cmd_test(int argc, char **argv)
{
    const char *ckdir = NULL, *data_dir = NULL, *json = NULL;
    long threads = 0, tsub = 0, l;
    mts_mulsel sel;
    mts_arith_spec acc;
    mts_err err;
    mts_mulsel_init(&sel);
    mts_arith_spec_init(&acc);
    int any_acc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (mts_is_help(a)) {
            fputs(usage_text, stdout);
            return 0;
        }
        int r = mts_mulsel_arg(&sel, argc, argv, &i, &err);
        if (r < 0) return mts_cli_error(CMD, "%s", err.msg);
        if (r > 0) continue;
        if (!strcmp(a, "--no-underflow")) { acc.no_underflow = 1; any_acc = 1; continue; }
        if (i + 1 >= argc) return mts_cli_error(CMD, "option %s needs a value (see mantis test --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--checkpoint")) ckdir = v;
        else if (!strcmp(a, "--data-dir")) data_dir = v;
        else if (!strcmp(a, "--json")) json = v;
        else if (!strcmp(a, "--acc")) snprintf(acc.acc, sizeof acc.acc, "%s", v), any_acc = 1;
        else if (!strcmp(a, "--prod")) snprintf(acc.prod, sizeof acc.prod, "%s", v), any_acc = 1;
        else if (!strcmp(a, "--threads") || !strcmp(a, "--test-subset") || !strcmp(a, "--chunk") ||
                 !strcmp(a, "--acc-bias") || !strcmp(a, "--prod-bias")) {
            if (mts_parse_int(v, 0, 100000000, &l)) return mts_cli_error(CMD, "%s '%s': expected an integer >= 0", a, v);
            if (!strcmp(a, "--threads")) threads = l;
            else if (!strcmp(a, "--test-subset")) tsub = l;
            else if (!strcmp(a, "--chunk")) acc.chunk = (int)l, any_acc = 1;
            else if (!strcmp(a, "--acc-bias")) acc.acc_bias = (int)l, any_acc = 1;
            else acc.prod_bias = (int)l, any_acc = 1;
        } else
            return mts_cli_error(CMD, "unknown option %s (see mantis test --help)", a);
    }
    if (!ckdir) return mts_cli_error(CMD, "--checkpoint DIR is required (see mantis test --help)");
    char path[1100], cfg[1024], model[64], data[64], tspec[800];
    snprintf(path, sizeof path, "%s/checkpoint.mtsckpt", ckdir);
    if (mts_ckpt_peek(path, cfg, sizeof cfg, &err)) return mts_cli_error(CMD, "%s", err.msg);
    if (config_get(cfg, "model", model, sizeof model) || config_get(cfg, "data", data, sizeof data) ||
        config_get(cfg, "test", tspec, sizeof tspec))
        return mts_cli_error(CMD, "%s: checkpoint configuration lacks model, data or test multiplier", path);

    mts_arith_spec spec;
    if (sel.mul || sel.lut) {
        spec = acc;
        spec.mul[0] = 0;
        if (sel.mul) snprintf(spec.mul, sizeof spec.mul, "%s", sel.mul);
        if (sel.lut) snprintf(spec.lut, sizeof spec.lut, "%s", sel.lut);
        if (sel.format) snprintf(spec.format, sizeof spec.format, "%s", sel.format);
        spec.man_bits = sel.man_bits;
    } else if (!sel.rtl) {
        if (mts_arith_spec_parse(tspec, &spec, &err)) return mts_cli_error(CMD, "%s: %s", path, err.msg);
        if (!strcmp(spec.mul, "rtl")) return mts_cli_error(CMD, "%s: the run used --rtl; give --rtl FILE.v again", path);
        if (any_acc) {
            snprintf(spec.acc, sizeof spec.acc, "%s", acc.acc);
            snprintf(spec.prod, sizeof spec.prod, "%s", acc.prod);
            spec.acc_bias = acc.acc_bias;
            spec.prod_bias = acc.prod_bias;
            spec.chunk = acc.chunk;
            spec.no_underflow = acc.no_underflow;
        }
    }

    char dir[1024];
    if (data_dir) snprintf(dir, sizeof dir, "%s", data_dir);
    else snprintf(dir, sizeof dir, "data/%s", data);
    mts_dataset test = {0};
    if (mts_dataset_load(data, dir, 0, &test, &err)) return mts_cli_error(CMD, "%s", err.msg);

    int rc = 2;
    mts_net net;
    memset(&net, 0, sizeof net);
    mts_arith ar;
    memset(&ar, 0, sizeof ar);
    mts_mulhandle h;
    memset(&h, 0, sizeof h);
    if (sel.rtl) {
        if (mts_mulsel_open(&sel, &h, &err)) {
            mts_cli_error(CMD, "%s", err.msg);
            goto out;
        }
        ar.p.kind = h.is_int ? MTS_PROV_INT : MTS_PROV_MULOP;
        ar.p.lut = &h.lut;
        ar.p.mul = &h.op;
        ar.p.threads = (int)threads;
        snprintf(ar.desc, sizeof ar.desc, "rtl %s", sel.rtl);
    } else if (mts_arith_open(&spec, (int)threads, &ar, &err)) {
        mts_cli_error(CMD, "%s", err.msg);
        goto out;
    }
    if (mts_nn_model_build(&net, model, test.c, test.h, test.w, test.classes, &err) ||
        mts_net_build(&net, 256, 0, &err) || mts_ckpt_load(path, &net, NULL, NULL, &err)) {
        mts_cli_error(CMD, "%s", err.msg);
        goto out;
    }
    int n = tsub && tsub < test.n ? (int)tsub : test.n;
    double accv;
    if (mts_evaluate(&net, &ar.p, &test, n, &accv, &err)) {
        mts_cli_error(CMD, "%s", err.msg);
        goto out;
    }
    printf("test accuracy %.4f (%s, %d samples, %s)\n", accv, model, n, ar.desc);
    if (json) {
        char buf[1024];
        size_t len = (size_t)snprintf(buf, sizeof buf,
                                      "{\"model\": \"%s\", \"data\": \"%s\", \"mul_test\": \"%s\", \"samples\": %d, "
                                      "\"test_acc\": %.6f}\n",
                                      model, data, ar.desc, n, accv);
        const void *parts[1] = {buf};
        if (mts_fs_write_atomic(json, 1, parts, &len, &err)) {
            mts_cli_error(CMD, "%s", err.msg);
            goto out;
        }
    }
    rc = 0;
out:
    mts_net_free(&net);
    mts_arith_close(&ar);
    mts_mulhandle_close(&h);
    mts_dataset_free(&test);
    return rc;
}
