/* cosim_internal.h - what the C driver (cosim.c) hands the SystemC array
 * (array.cpp, or nosc.c in a build without SystemC). Private to sim/cosim. */
#ifndef MANTIS_COSIM_INTERNAL_H
#define MANTIS_COSIM_INTERNAL_H

#include <stdint.h>
#include "mantis/cosim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One replay: operands already quantized as the provider's multiplier
 * receives them (mts_prov_operand), and their codes for toggle counting. */
typedef struct cosim_job {
    const mts_cosim_config *c;
    int R, C, M, N, K;
    int chunk;                 /* OS with FMAq: terms per chunk */
    const uint32_t *A, *B;     /* M x K, K x N, FP32 bits */
    const uint32_t *Acode, *Bcode; /* operand codes in mts_prov_format */
    uint32_t man_mask;         /* mantissa field of a code */
    uint32_t *out;             /* M x N result bits (NaN not yet canonical) */
    mts_cosim_result *r;       /* cycles, fill, compute, drain, toggles, products, seconds */
} cosim_job;

int cosim_sim(cosim_job *j, mts_err *err);
int cosim_have_systemc(void);

#ifdef __cplusplus
}
#endif
#endif
