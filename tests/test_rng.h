// test_rng.h - the tests' seeded random numbers: the library's splitmix64
// (include/mantis/rng.h), so tests and library draw from one generator.
#ifndef MANTIS_TEST_RNG_H
#define MANTIS_TEST_RNG_H

#include <cstdint>

#include "mantis/rng.h"

inline uint64_t splitmix64(uint64_t *s) { return mts_rng_splitmix64(s); }

#endif
