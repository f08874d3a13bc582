/* rng.h - splitmix64, the only source of randomness in Mantis (weight
 * initialisation, shuffling, sampled verification, benchmark operands), so
 * that a seed fully determines every random choice on every platform. */
#ifndef MANTIS_RNG_H
#define MANTIS_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mts_rng { uint64_t s; } mts_rng;

/* Next 64 random bits; advances r. */
uint64_t mts_rng_next(mts_rng *r);
/* Uniform float in [0, 1) with 24 random bits (exact, no libm). */
float mts_rng_uniform(mts_rng *r);
/* Uniform integer in [0, n), n >= 1 (rejection sampling, unbiased). */
uint32_t mts_rng_below(mts_rng *r, uint32_t n);
/* A seed derived from (seed, stream) so independent uses never share a stream. */
uint64_t mts_rng_derive(uint64_t seed, uint64_t stream);
/* splitmix64 on a bare state word (same sequence as mts_rng_next). */
uint64_t mts_rng_splitmix64(uint64_t *state);

#ifdef __cplusplus
}
#endif
#endif
