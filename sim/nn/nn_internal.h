/* nn_internal.h - private to the files of sim/nn/: helpers shared by two files of
 * the training engine. Not a public header. */
#ifndef MANTIS_NN_INTERNAL_H
#define MANTIS_NN_INTERNAL_H

#include <stdint.h>

#include "mantis/gemm.h"
#include "mantis/nn_arith.h"

/* mts_prov_mul with fp32 = mts_model_find("fp32") looked up once by the
 * caller, for the STE replay's inner loop (prov.c). */
uint32_t mts__prov_mul(const mts_provider *p, const mts_model *fp32, uint32_t a, uint32_t b);

/* Opens spec s with the caller's opener, or mts_arith_open when open is
 * NULL (driver.c; the train and test drivers). */
int mts__nn_open_arith(mts_arith_open_fn open, void *ud, const mts_arith_spec *s, int threads, mts_arith *a,
                       mts_err *err);

/* Puts opened provider a on device (0: CPU; MTS_GPU_DEVICE_CUDA: its GEMMs
 * run on the GPU, with the same results); MTS_EUNSUPPORTED when the GPU does
 * not take this provider (driver.c). */
int mts__nn_arith_device(mts_arith *a, int device, mts_err *err);

#endif
