// test_rng.h - the tests' seeded random numbers (splitmix64), one copy.
#ifndef MANTIS_TEST_RNG_H
#define MANTIS_TEST_RNG_H

#include <cstdint>

inline uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif
