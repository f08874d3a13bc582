/* rng.c - splitmix64 (include/mantis/rng.h). */
#include "mantis/rng.h"

uint64_t mts_rng_next(mts_rng *r) { return mts_rng_splitmix64(&r->s); }

uint64_t mts_rng_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float mts_rng_uniform(mts_rng *r)
{
    /* 24 bits: exactly representable, so no rounding differs between hosts */
    return (float)(mts_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

uint32_t mts_rng_below(mts_rng *r, uint32_t n)
{
    uint32_t lim = (uint32_t)(0x100000000ull - (0x100000000ull % n)); /* 0 means 2^32 */
    for (;;) {
        uint32_t v = (uint32_t)(mts_rng_next(r) >> 32);
        if (lim == 0 || v < lim) return v % n;
    }
}

uint64_t mts_rng_derive(uint64_t seed, uint64_t stream)
{
    mts_rng r = {seed ^ (stream * 0xD1B54A32D192ED03ull)};
    mts_rng_next(&r);
    return mts_rng_next(&r);
}
