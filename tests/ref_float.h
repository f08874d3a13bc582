// ref_float.h - independent, deliberately naive references for the tests:
// they use double arithmetic and libm (frexp/ldexp/nearbyint), not Mantis'
// integer code paths, so agreement means something.
#ifndef MANTIS_TEST_REF_FLOAT_H
#define MANTIS_TEST_REF_FLOAT_H

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "mantis/format.h"
#include "test_rng.h"

namespace ref {

inline float u2f(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t f2u(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

struct Rng {  // splitmix64
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed) {}
    uint64_t next() { return splitmix64(&s); }
    uint32_t u32() { return (uint32_t)next(); }
};

inline int emax(const mts_format &f) { return (1 << f.E) - (f.ieee ? 2 : 1) - f.bias; }
inline int emin(const mts_format &f) { return 1 - f.bias; }
inline double max_finite(const mts_format &f) {
    double top = f.ieee ? 2.0 - std::ldexp(1.0, -f.M) : 2.0 - std::ldexp(1.0, 1 - f.M);
    return std::ldexp(top, emax(f));
}

// Rounds |v| (finite, > 0) to p fraction bits: nearest-even (rne) or toward zero.
inline double round_bits(double v, int p, bool rne) {
    int e;
    double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
    double s = std::ldexp(m, p + 1);
    s = rne ? std::nearbyint(s) : std::trunc(s);  // default FE_TONEAREST: ties to even
    return std::ldexp(s, e - p - 1);
}

// Operand as the multiplier sees it: subnormal -> 0, mantissa truncated to M
// bits, exponent outside the format -> max finite/inf (RTZ conversion).
inline double operand(const mts_format &f, uint32_t x) {
    double v = (double)u2f(x);
    if (std::isnan(v) || std::isinf(v)) return f.ieee || std::isnan(v) ? v : std::copysign(max_finite(f), v);
    if (std::fabs(v) < std::ldexp(1.0, -126)) return std::copysign(0.0, v);
    double r = round_bits(std::fabs(v), f.M, false);
    if (r < std::ldexp(1.0, emin(f))) r = 0;
    if (r > max_finite(f)) r = max_finite(f);
    return std::copysign(r, v);
}

// The product rule of mul.h applied to an exact significand value v (any
// double, exact), rounded to M bits with rne or toward zero.
inline uint32_t pack(const mts_format &f, double v, bool rne) {
    if (std::isnan(v)) return 0x7FC00000u;
    if (std::isinf(v)) return f2u((float)v);
    if (v == 0) return f2u((float)v);
    double r = round_bits(std::fabs(v), f.M, rne);
    double out;
    if (r >= std::ldexp(1.0, emax(f) + 1) || (!f.ieee && r > max_finite(f)))
        out = f.ieee ? INFINITY : max_finite(f);
    else if (r < std::ldexp(1.0, emin(f)))
        out = 0;
    else
        out = r;
    return f2u((float)std::copysign(out, v));
}

// Exact product rounded to M bits (rne) or truncated, with the special rules.
inline uint32_t mul_exact(const mts_format &f, uint32_t a, uint32_t b, bool rne) {
    double x = operand(f, a), y = operand(f, b);
    if (std::isnan(x) || std::isnan(y)) return 0x7FC00000u;
    if ((std::isinf(x) && y == 0) || (std::isinf(y) && x == 0)) return 0x7FC00000u;
    return pack(f, x * y, rne);  // exact in double for M <= 23
}

}  // namespace ref
#endif
