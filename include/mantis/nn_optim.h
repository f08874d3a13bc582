/* nn_optim.h - optimizers (SGD with momentum and weight decay, Adam) and
 * per-epoch learning-rate schedules. Updates are FP32, elementwise, in
 * parameter order: independent of threads. */
#ifndef MANTIS_NN_OPTIM_H
#define MANTIS_NN_OPTIM_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/nn_net.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MTS_OPT_SGD = 0, MTS_OPT_ADAM = 1 } mts_opt_kind;
typedef enum { MTS_SCHED_CONST = 0, MTS_SCHED_STEP = 1, MTS_SCHED_COSINE = 2 } mts_sched_kind;

typedef struct mts_opt {
    mts_opt_kind kind;
    float lr, momentum, wd, beta1, beta2, eps;
    mts_sched_kind sched;
    int step_size;        /* STEP: epochs between decays */
    float gamma;          /* STEP: decay factor */
    int epochs;           /* COSINE: total epochs */
    uint64_t t;           /* steps taken (Adam bias correction) */
    float *m, *v;         /* momentum / Adam moments, nparam each */
    size_t n;
    int nonfinite;        /* 1 when the last step left some parameter inf or NaN */
} mts_opt;

int mts_opt_init(mts_opt *o, size_t nparam, mts_err *err);
void mts_opt_free(mts_opt *o);
/* Learning rate of epoch e (0-based) under the schedule. */
float mts_opt_lr(const mts_opt *o, int epoch);
/* One update of net->param from net->grad at learning rate lr. Weight decay
 * applies to conv/dense weights only (not biases or BN). Sets o->nonfinite
 * (every parameter is updated, and an inf or NaN one stays so). */
void mts_opt_step(mts_opt *o, mts_net *net, float lr);

/* The SGD update of n consecutive parameters, mts_opt_step's own rule (FP32,
 * each operation rounded, no contraction): m = momentum * m + (g + wd * p)
 * when decay is set, else m = momentum * m + g; then p -= lr * m. Returns 1
 * when some updated p is inf or NaN, else 0. */
int mts_sgd_update(size_t n, float *param, const float *grad, float *m, float momentum, float wd, int decay,
                   float lr);

/* Names "sgd" / "adam" and "const" / "step" / "cosine", and back: the parse
 * functions return 0, or -1 for an unknown name (the caller words the error). */
const char *mts_opt_name(mts_opt_kind k);
int mts_opt_parse(const char *s, mts_opt_kind *k);
const char *mts_sched_name(mts_sched_kind k);
int mts_sched_parse(const char *s, mts_sched_kind *k);

#ifdef __cplusplus
}
#endif
#endif
