/* config.c - the flow configuration file (docs/flow.md). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow.h"

static int list(char dst[][32], int *n, const char *v)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    *n = 0;
    for (char *save, *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        if (*n == FLOW_MAX_LIST || strlen(t) >= 32) return -1;
        snprintf(dst[(*n)++], 32, "%s", t);
    }
    return 0;
}

static int pairs(flow_cfg *c, const char *v)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v);
    c->ncmodels = 0;
    for (char *save, *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        if (c->ncmodels == 16 || strlen(t) >= 64 || !strchr(t, '=')) return -1;
        snprintf(c->cmodels[c->ncmodels++], 64, "%s", t);
    }
    return 0;
}

const char *flow_cmodel(const flow_cfg *c, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < c->ncmodels; i++)
        if (!strncmp(c->cmodels[i], name, n) && c->cmodels[i][n] == '=') return c->cmodels[i] + n + 1;
    return NULL;
}

static int number(int *dst, const char *v, int lo, int hi)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end || x < lo || x > hi) return -1;
    *dst = (int)x;
    return 0;
}

static int set(flow_cfg *c, const char *k, const char *v)
{
    int exec_rc = flow_cfg_exec_set(c, k, v); /* executor, slurm_* (slurm.c) */
    if (exec_rc != -2) return exec_rc;
    if (!strcmp(k, "designs")) return snprintf(c->designs, sizeof c->designs, "%s", v) >= FLOW_PATH ? -1 : 0;
    if (!strcmp(k, "out")) return snprintf(c->out, sizeof c->out, "%s", v) >= FLOW_PATH ? -1 : 0;
    if (!strcmp(k, "data_dir")) return snprintf(c->data_dir, sizeof c->data_dir, "%s", v) >= FLOW_PATH - 32 ? -1 : 0;
    if (!strcmp(k, "models")) return list(c->models, &c->nmodels, v);
    if (!strcmp(k, "datasets")) return list(c->datasets, &c->ndatasets, v);
    if (!strcmp(k, "baselines")) return list(c->baselines, &c->nbaselines, v);
    if (!strcmp(k, "cmodels")) return pairs(c, v);
    if (!strcmp(k, "epochs")) return number(&c->epochs, v, 1, 1000);
    if (!strcmp(k, "batch")) return number(&c->batch, v, 1, 65536);
    if (!strcmp(k, "subset")) return number(&c->subset, v, 0, 1 << 30);
    if (!strcmp(k, "seed")) return number(&c->seed, v, 0, 1 << 30);
    if (!strcmp(k, "trace_samples")) return number(&c->trace_samples, v, 1, 1 << 26);
    if (!strcmp(k, "trace_subset")) return number(&c->trace_subset, v, 1, 1 << 30);
    if (!strcmp(k, "jobs")) return number(&c->jobs, v, 0, 256);
    if (!strcmp(k, "lr")) return strtod(v, NULL) > 0 ? snprintf(c->lr, sizeof c->lr, "%s", v), 0 : -1;
    if (!strcmp(k, "opt")) return strcmp(v, "sgd") && strcmp(v, "adam") ? -1 : (snprintf(c->opt, 16, "%s", v), 0);
    return -2;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

int flow_cfg_load(flow_cfg *c, const char *path, int quick, mts_err *err)
{
    memset(c, 0, sizeof *c);
    snprintf(c->designs, sizeof c->designs, "rtl");
    snprintf(c->out, sizeof c->out, "results");
    snprintf(c->data_dir, sizeof c->data_dir, "data");
    list(c->models, &c->nmodels, "lenet300");
    list(c->datasets, &c->ndatasets, "mnist");
    list(c->baselines, &c->nbaselines, "fp32,bf16");
    c->epochs = 1;
    c->batch = 64;
    c->seed = 1;
    c->trace_samples = 65536;
    c->trace_subset = 2000;
    snprintf(c->lr, sizeof c->lr, "0.05");
    snprintf(c->opt, sizeof c->opt, "sgd");
    flow_cfg_exec_defaults(c);
    if (path) {
        FILE *f = fopen(path, "r");
        if (!f) return mts_fail(err, MTS_EIO, "%s: cannot open flow configuration", path);
        char line[1024];
        int ln = 0;
        while (fgets(line, sizeof line, f)) {
            ln++;
            char *hash = strchr(line, '#');
            if (hash) *hash = '\0';
            char *s = trim(line);
            if (!*s) continue;
            char *eq = strchr(s, '=');
            if (!eq) {
                fclose(f);
                return mts_fail(err, MTS_EINVAL, "%s:%d: expected 'key = value'", path, ln);
            }
            *eq = '\0';
            char *k = trim(s), *v = trim(eq + 1);
            int rc = set(c, k, v);
            if (rc) {
                fclose(f);
                return mts_fail(err, MTS_EINVAL, rc == -2 ? "%s:%d: unknown key '%s' (see docs/flow.md)"
                                                          : "%s:%d: bad value for '%s'",
                                path, ln, k);
            }
        }
        fclose(f);
    }
    if (quick) { /* the --quick profile: a few thousand images, one epoch */
        c->quick = 1;
        c->epochs = 1;
        if (c->subset == 0 || c->subset > 2000) c->subset = 2000;
        if (c->trace_subset > 500) c->trace_subset = 500;
        if (c->trace_samples > 8192) c->trace_samples = 8192;
    }
    return MTS_OK;
}
