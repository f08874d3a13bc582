/* optim.c - SGD with momentum and weight decay, Adam; step and cosine
 * learning-rate schedules (per epoch). Updates are FP32, elementwise, in
 * parameter order: independent of threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/nn_optim.h"
#include "mantis/optim_hd.h"

int mts_opt_init(mts_opt *o, size_t nparam, mts_err *err)
{
    o->n = nparam;
    o->t = 0;
    o->nonfinite = 0;
    o->m = calloc(nparam ? nparam : 1, sizeof(float));
    o->v = calloc(nparam ? nparam : 1, sizeof(float));
    if (!o->m || !o->v) {
        mts_opt_free(o);
        return mts_fail(err, MTS_ENOMEM, "optimizer: out of memory for %zu parameters", nparam);
    }
    return MTS_OK;
}

void mts_opt_free(mts_opt *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

float mts_opt_lr(const mts_opt *o, int epoch)
{
    switch (o->sched) {
    case MTS_SCHED_STEP: {
        float lr = o->lr;
        int steps = o->step_size > 0 ? epoch / o->step_size : 0;
        for (int i = 0; i < steps; i++) lr *= o->gamma;
        return lr;
    }
    case MTS_SCHED_COSINE:
        if (o->epochs <= 0) return o->lr;
        return (float)(0.5 * o->lr * (1.0 + cos(3.14159265358979323846 * (double)epoch / (double)o->epochs)));
    default: return o->lr;
    }
}

/* 1 in the exponent field's bits when x is inf or NaN, else 0 (or-ed over
 * a loop, which still vectorises). */
static inline uint32_t nonfinite(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7F800000u) == 0x7F800000u;
}

/* The updates of n consecutive parameters (optim_hd.h's rules), wd
 * applied when decay is set; nonzero when one of the new values is inf or
 * NaN. The pointers are restrict and decay is hoisted out of the loop
 * (two instances), so the compiler vectorises them; each element's
 * arithmetic is the one written, so the bits do not depend on it. */
static uint32_t sgd_range(size_t n, float *restrict param, const float *restrict grad, float *restrict m,
                          float momentum, float wd, int decay, float lr)
{
    uint32_t bad = 0;
    if (decay)
        for (size_t j = 0; j < n; j++) {
            mts_sgd_hd(&param[j], grad[j], &m[j], lr, momentum, wd, 1);
            bad |= nonfinite(param[j]);
        }
    else
        for (size_t j = 0; j < n; j++) {
            mts_sgd_hd(&param[j], grad[j], &m[j], lr, momentum, wd, 0);
            bad |= nonfinite(param[j]);
        }
    return bad;
}

int mts_sgd_update(size_t n, float *param, const float *grad, float *m, float momentum, float wd, int decay,
                   float lr)
{
    return sgd_range(n, param, grad, m, momentum, wd, decay, lr) != 0;
}

static uint32_t adam_range(const mts_opt *o, size_t n, float *restrict param, const float *restrict grad,
                           float *restrict m, float *restrict v, int decay, float lr, float bc1, float bc2)
{
    const float b1 = o->beta1, b2 = o->beta2, wd = decay ? o->wd : 0.0f, eps = o->eps;
    uint32_t bad = 0;
    for (size_t j = 0; j < n; j++) {
        mts_adam_hd(&param[j], grad[j], &m[j], &v[j], lr, b1, b2, eps, wd, decay, bc1, bc2);
        bad |= nonfinite(param[j]);
    }
    return bad;
}

void mts_opt_step(mts_opt *o, mts_net *net, float lr)
{
    o->t++;
    double bc1 = 1.0 - pow(o->beta1, (double)o->t), bc2 = 1.0 - pow(o->beta2, (double)o->t);
    uint32_t bad = 0;
    for (int li = 0; li < net->n; li++) {
        const mts_layer *l = &net->l[li];
        /* weights (decayed), then the rest of the layer's parameters */
        size_t part[2][2] = {{l->poff, l->nweight}, {l->poff + l->nweight, l->np - l->nweight}};
        for (int q = 0; q < 2; q++) {
            size_t j = part[q][0], n = part[q][1];
            if (o->kind == MTS_OPT_ADAM)
                bad |= adam_range(o, n, net->param + j, net->grad + j, o->m + j, o->v + j, q == 0, lr, (float)bc1,
                                  (float)bc2);
            else
                bad |= sgd_range(n, net->param + j, net->grad + j, o->m + j, o->momentum, o->wd, q == 0, lr);
        }
    }
    o->nonfinite = bad != 0;
}

static const char *const opt_names[] = {"sgd", "adam"};
static const char *const sched_names[] = {"const", "step", "cosine"};

/* index of s in names[0..n), or -1 */
static int find_name(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

const char *mts_opt_name(mts_opt_kind k) { return k == MTS_OPT_ADAM ? opt_names[1] : opt_names[0]; }

int mts_opt_parse(const char *s, mts_opt_kind *k)
{
    int i = find_name(opt_names, 2, s);
    if (i < 0) return -1;
    *k = (mts_opt_kind)i;
    return 0;
}

const char *mts_sched_name(mts_sched_kind k)
{
    return (unsigned)k < 3u ? sched_names[k] : sched_names[0];
}

int mts_sched_parse(const char *s, mts_sched_kind *k)
{
    int i = find_name(sched_names, 3, s);
    if (i < 0) return -1;
    *k = (mts_sched_kind)i;
    return 0;
}
