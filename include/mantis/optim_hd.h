/* optim_hd.h - the optimizers' update of one parameter, one copy for the
 * CPU (sim/nn/optim.c: mts_opt_step, mts_sgd_update) and the GPU
 * (gpu/nn_ops.cu: the resident trainer's sgd and adam kernels), so both
 * backends give the same bits. FP32, every operation rounded once in the
 * order written (fmath.h's explicitly rounded helpers; the CPU build passes
 * -ffp-contract=off). decay: weight decay applies (conv and dense weights,
 * mts_opt_step's rule). Header-only, MTS_HD. */
#ifndef MANTIS_OPTIM_HD_H
#define MANTIS_OPTIM_HD_H

#include "mantis/fmath.h"
#include "mantis/hd.h"

/* SGD with momentum: m = momentum m + (g + wd p) (g alone without decay),
 * p = p - lr m. */
static inline MTS_HD void mts_sgd_hd(float *p, float g, float *m, float lr, float momentum, float wd, int decay)
{
    if (decay) g = mts_fm_add(g, mts_fm_mul(wd, *p));
    *m = mts_fm_canon(mts_fm_add(mts_fm_mul(momentum, *m), g));
    *p = mts_fm_canon(mts_fm_sub(*p, mts_fm_mul(lr, *m)));
}

/* Adam: with g as above, m = b1 m + (1 - b1) g, v = b2 v + ((1 - b2) g) g,
 * p = p - (lr (m / bc1)) / (sqrt(v / bc2) + eps); bc1, bc2 the bias
 * corrections 1 - b^t of this step. */
static inline MTS_HD void mts_adam_hd(float *p, float g, float *m, float *v, float lr, float b1, float b2, float eps,
                                      float wd, int decay, float bc1, float bc2)
{
    if (decay) g = mts_fm_add(g, mts_fm_mul(wd, *p));
    *m = mts_fm_canon(mts_fm_add(mts_fm_mul(b1, *m), mts_fm_mul(mts_fm_sub(1.0f, b1), g)));
    *v = mts_fm_canon(mts_fm_add(mts_fm_mul(b2, *v), mts_fm_mul(mts_fm_mul(mts_fm_sub(1.0f, b2), g), g)));
    float mh = mts_fm_div(*m, bc1), vh = mts_fm_div(*v, bc2);
    *p = mts_fm_canon(mts_fm_sub(*p, mts_fm_div(mts_fm_mul(lr, mh), mts_fm_add(mts_fm_sqrt(vh), eps))));
}

#endif
