// Formats and C multiplier models against independent double-precision
// references (tests/ref_float.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "mantis/format.h"
#include "mantis/mul.h"
#include "ref_float.h"

namespace {

std::string hex(uint32_t x) {
    char b[16];
    snprintf(b, sizeof b, "%08x", x);
    return b;
}

// Random FP32 patterns biased toward the interesting: specials, subnormals,
// exponent extremes, and normal values near 1.
uint32_t operand(ref::Rng &r) {
    uint32_t u = r.u32();
    switch (r.next() % 8) {
        case 0: return u & 0x807FFFFFu;                             // zero or subnormal
        case 1: return (u & 0x807FFFFFu) | 0x7F800000u;             // inf or NaN
        case 2: return (u & 0x80FFFFFFu) | ((r.next() % 3) << 24);  // tiny exponents
        case 3: return (u & 0x80FFFFFFu) | 0x7E000000u;             // huge exponents
        case 4: return (u & 0x807FFFFFu) | (uint32_t)(120 + r.next() % 16) << 23;
        default: return u;
    }
}

TEST(Format, DerivedLimits) {
    mts_format f;
    mts_err err;
    ASSERT_EQ(mts_format_parse("bf16", &f, &err), MTS_OK);
    EXPECT_EQ(ref::u2f(mts_fmt_max_finite(&f)), (float)ref::max_finite(f));
    ASSERT_EQ(mts_format_parse("fp16", &f, &err), MTS_OK);
    EXPECT_EQ(ref::u2f(mts_fmt_max_finite(&f)), 65504.0f);
    ASSERT_EQ(mts_format_parse("fp8e4m3", &f, &err), MTS_OK);
    EXPECT_EQ(ref::u2f(mts_fmt_max_finite(&f)), 448.0f);
    ASSERT_EQ(mts_format_parse("fp8e5m2", &f, &err), MTS_OK);
    EXPECT_EQ(ref::u2f(mts_fmt_max_finite(&f)), 57344.0f);
    ASSERT_EQ(mts_format_parse("e8m5", &f, &err), MTS_OK);
    EXPECT_EQ(f.E, 8);
    EXPECT_EQ(f.M, 5);
    EXPECT_EQ(f.bias, 127);
    EXPECT_NE(mts_format_parse("e9m5", &f, &err), MTS_OK);
    EXPECT_NE(mts_format_parse("e8m0", &f, &err), MTS_OK);
    EXPECT_NE(mts_format_parse("bf17", &f, &err), MTS_OK);
    EXPECT_NE(std::string(err.msg).find("bf17"), std::string::npos);
}

TEST(Format, QuantizeMatchesReference) {
    const char *names[] = {"bf16", "fp16", "fp8e4m3", "fp8e5m2", "e8m1", "e8m11", "e3m4"};
    ref::Rng r(7);
    for (const char *name : names) {
        mts_format f;
        mts_err err;
        ASSERT_EQ(mts_format_parse(name, &f, &err), MTS_OK) << name;
        for (int i = 0; i < 200000; i++) {
            uint32_t x = operand(r);
            for (int rne = 0; rne < 2; rne++) {
                double v = ref::u2f(x);
                uint32_t want;
                if (std::isnan(v)) {
                    want = 0x7FC00000u;
                } else if (std::isinf(v)) {
                    want = f.ieee ? x : ref::f2u((float)std::copysign(ref::max_finite(f), v));
                } else if (std::fabs(v) < std::ldexp(1.0, -126)) {
                    want = x & 0x80000000u;
                } else {
                    double q = ref::round_bits(std::fabs(v), f.M, rne);
                    if (q < std::ldexp(1.0, ref::emin(f))) q = 0;
                    else if (q > ref::max_finite(f))
                        q = (f.ieee && rne) ? INFINITY : ref::max_finite(f);
                    want = ref::f2u((float)std::copysign(q, v));
                }
                uint32_t got = mts_fmt_quantize(&f, x, rne ? MTS_RNE : MTS_RTZ);
                ASSERT_EQ(hex(got), hex(want)) << name << " x=" << hex(x) << " rne=" << rne;
            }
        }
    }
}

TEST(Format, EncodeDecodeRoundTripsEveryCode) {
    const char *names[] = {"bf16", "fp16", "fp8e4m3", "fp8e5m2"};
    for (const char *name : names) {
        mts_format f;
        mts_err err;
        ASSERT_EQ(mts_format_parse(name, &f, &err), MTS_OK);
        int width = 1 + f.E + f.M;
        for (uint32_t c = 0; c < (1u << width); c++) {
            uint32_t x = mts_fmt_decode(&f, c);
            uint32_t ec = (c >> f.M) & ((1u << f.E) - 1u);
            if (ec == 0) {  // zero and subnormal codes read as signed zero
                EXPECT_EQ(x, (c >> (width - 1)) << 31) << name << " " << c;
                continue;
            }
            if ((x & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN codes decode to the quiet NaN
                EXPECT_EQ(x, 0x7FC00000u);
                continue;
            }
            EXPECT_EQ(mts_fmt_quantize(&f, x, MTS_RNE), x) << name << " code " << c;
            EXPECT_EQ(mts_fmt_encode(&f, x), c) << name << " code " << c;
        }
    }
}

// Done-means of the issue: exact at M equals an independent RNE reference on
// 10^6 seeded random inputs (and FP32, M=23, as well).
TEST(Models, ExactEqualsDoubleRneReference) {
    for (int M : {7, 10, 23}) {
        mts_format f = mts_format_e8(M);
        mts_mulop op;
        mts_err err;
        ASSERT_EQ(mts_mulop_model(&op, M == 23 ? "fp32" : "exact", &f, &err), MTS_OK) << err.msg;
        ref::Rng r(1000 + M);
        for (int i = 0; i < 1000000; i++) {
            uint32_t a = operand(r), b = operand(r);
            uint32_t got = op.fn(&op, a, b), want = ref::mul_exact(f, a, b, true);
            ASSERT_EQ(hex(got), hex(want)) << "M=" << M << " a=" << hex(a) << " b=" << hex(b);
        }
    }
}

TEST(Models, Fp32MatchesHardwareWhereResultIsNormal) {
    mts_format f = mts_format_e8(23);
    mts_mulop op;
    mts_err err;
    ASSERT_EQ(mts_mulop_model(&op, "fp32", &f, &err), MTS_OK);
    ref::Rng r(3);
    int compared = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t a = operand(r), b = operand(r);
        if ((a & 0x7F800000u) == 0 || (b & 0x7F800000u) == 0) continue;  // DAZ differs by design
        float p = ref::u2f(a) * ref::u2f(b);
        if (std::isnan(p)) {
            EXPECT_EQ(op.fn(&op, a, b), 0x7FC00000u);
            continue;
        }
        if (p != 0 && std::fabs(p) < 0x1p-126f) continue;  // subnormal result: flushed by rule
        if (std::fabs((double)ref::u2f(a) * ref::u2f(b)) < 0x1p-126) continue;
        ASSERT_EQ(hex(op.fn(&op, a, b)), hex(ref::f2u(p))) << hex(a) << " * " << hex(b);
        compared++;
    }
    EXPECT_GT(compared, 300000);
}

TEST(Models, TruncEqualsRtzReference) {
    for (int M : {1, 3, 7, 11, 23}) {
        mts_format f = mts_format_e8(M);
        mts_mulop op;
        mts_err err;
        ASSERT_EQ(mts_mulop_model(&op, "trunc", &f, &err), MTS_OK);
        ref::Rng r(50 + M);
        for (int i = 0; i < 200000; i++) {
            uint32_t a = operand(r), b = operand(r);
            ASSERT_EQ(hex(op.fn(&op, a, b)), hex(ref::mul_exact(f, a, b, false))) << hex(a) << " " << hex(b);
        }
    }
}

// Mitchell written from its definition on real numbers.
TEST(Models, MitchellMatchesDefinition) {
    for (int M : {2, 5, 7, 10}) {
        mts_format f = mts_format_e8(M);
        mts_mulop op;
        mts_err err;
        ASSERT_EQ(mts_mulop_model(&op, "mitchell", &f, &err), MTS_OK);
        for (uint32_t ma = 0; ma < (1u << M); ma++)
            for (uint32_t mb = 0; mb < (1u << M); mb += (M > 7 ? 7 : 1)) {
                double x = std::ldexp((double)ma, -M), y = std::ldexp((double)mb, -M);
                double p = x + y < 1 ? 1 + x + y : 2 * (x + y);
                uint32_t a = 0x3F800000u | ma << (23 - M), b = 0xC0000000u | mb << (23 - M);  // 1.x * -2.y
                uint32_t want = ref::pack(f, -2 * p, false);
                ASSERT_EQ(hex(op.fn(&op, a, b)), hex(want)) << "M=" << M << " ma=" << ma << " mb=" << mb;
            }
    }
}

// MBM re-expressed from ApproxTrain's bfloat16 AFM code (FPmultMBM_fast16):
// 23-bit fields, operand truncated to 7 bits with its last kept bit set,
// correction 2^-4 + 2^-6, halved on carry, skipped when it would overflow,
// result truncated to 16 bits.
uint32_t approxtrain_afm16(uint32_t a, uint32_t b) {
    const uint32_t keep = 0x7F0000u, setbit = 0x10000u, corr = 655360u;  // (2^-4 + 2^-6) * 2^23
    uint32_t s = ((a & keep) | setbit) + ((b & keep) | setbit);
    uint32_t carry = s >= (1u << 23);
    uint32_t sc = (s & 0x7FFFFFu) + (corr >> carry);
    if (carry && sc >= (1u << 23)) sc = s;
    uint64_t whole = (uint64_t)((1u << 23) + sc) << carry;  // significand * 2^23
    int up = whole >= (1u << 24);
    uint32_t man = (uint32_t)(up ? whole >> 1 : whole) & 0x7FFFFFu;
    int e = (int)((a >> 23) & 0xFF) + (int)((b >> 23) & 0xFF) - 127 + up;
    return (((a ^ b) & 0x80000000u) | (uint32_t)e << 23 | man) & 0xFFFF0000u;
}

TEST(Models, MbmMatchesApproxTrainAfm16) {
    mts_format f = mts_format_e8(7);
    mts_mulop op;
    mts_err err;
    ASSERT_EQ(mts_mulop_model(&op, "mbm", &f, &err), MTS_OK);
    for (uint32_t ma = 0; ma < 128; ma++)
        for (uint32_t mb = 0; mb < 128; mb++) {
            uint32_t a = 0x3F800000u | ma << 16, b = 0xC1000000u | mb << 16;
            ASSERT_EQ(hex(op.fn(&op, a, b)), hex(approxtrain_afm16(a, b))) << ma << " " << mb;
        }
}

// ApproxTrain's FPmultMBM_fast10/12/14 (M = 1, 3, 5) re-expressed like
// afm16 above: the correction is 2^-4 + 2^-6 (halved on carry) cut to the M
// kept bits, so 2^-4 (2^-5 on carry) at M = 5 and none at M = 1, 3; products
// truncated to M bits, as ApproxTrain's lut_gen.cc stores them.
uint32_t approxtrain_afm_m(uint32_t a, uint32_t b, int M) {
    const uint32_t keep = ((1u << M) - 1u) << (23 - M), setbit = 1u << (23 - M);
    uint32_t s = ((a & keep) | setbit) + ((b & keep) | setbit);
    uint32_t carry = s >= (1u << 23);
    uint32_t sc = (s & 0x7FFFFFu) + ((655360u >> carry) & keep);
    if (carry && sc >= (1u << 23)) sc = s;
    uint64_t whole = (uint64_t)((1u << 23) + sc) << carry;
    int up = whole >= (1u << 24);
    uint32_t man = (uint32_t)(up ? whole >> 1 : whole) & keep;
    int e = (int)((a >> 23) & 0xFF) + (int)((b >> 23) & 0xFF) - 127 + up;
    return ((a ^ b) & 0x80000000u) | (uint32_t)e << 23 | man;
}

TEST(Models, MbmMatchesApproxTrainAfmAtOneThreeFiveBits) {
    for (int M : {1, 3, 5}) {
        mts_format f = mts_format_e8(M);
        mts_mulop op;
        mts_err err;
        ASSERT_EQ(mts_mulop_model(&op, "mbm", &f, &err), MTS_OK);
        for (uint32_t ma = 0; ma < (1u << M); ma++)
            for (uint32_t mb = 0; mb < (1u << M); mb++) {
                uint32_t a = 0x3F800000u | ma << (23 - M), b = 0xC1000000u | mb << (23 - M);
                ASSERT_EQ(hex(op.fn(&op, a, b)), hex(approxtrain_afm_m(a, b, M))) << M << ": " << ma << " " << mb;
            }
    }
}

// At M = 23 mbm is the generalisation, not ApproxTrain's FPmultMBM_fast32
// (which keeps the last bit and corrects by 2^-4 + 2^-6 only): 1.0 * 1.0
// pins both (docs/models.md).
TEST(Models, MbmAt23IsNotApproxTrainAfm32) {
    mts_format f = mts_format_e8(23);
    mts_mulop op;
    mts_err err;
    ASSERT_EQ(mts_mulop_model(&op, "mbm", &f, &err), MTS_OK);
    const uint32_t one = 0x3F800000u;
    // fast32 at 1.0 * 1.0: S = 0, no carry, mantissa = 655360 = 2^-4 + 2^-6
    const uint32_t afm32 = one | 655360u;
    // here: x' = y' = 2^-23, C = 2^-4 + 2^-6 + ... + 2^-22
    const uint32_t mbm23 = one | (2u + 0xAAAAAu);
    EXPECT_EQ(hex(op.fn(&op, one, one)), hex(mbm23));
    EXPECT_NE(mbm23, afm32);
}

TEST(Models, SpecialCaseRulesHoldForEveryModel) {
    const uint32_t nan = 0x7FC00000u;
    for (int i = 0; mts_model_at(i); i++) {
        const mts_model *m = mts_model_at(i);
        mts_format f = mts_format_e8(m->max_m < 7 ? m->max_m : (m->min_m > 7 ? m->min_m : 7));
        mts_mulop op;
        mts_err err;
        ASSERT_EQ(mts_mulop_model(&op, m->name, &f, &err), MTS_OK) << m->name;
        auto mul = [&](uint32_t a, uint32_t b) { return op.fn(&op, a, b); };
        EXPECT_EQ(mul(0x7F800001u, 0x3F800000u), nan) << m->name;     // signalling NaN in
        EXPECT_EQ(mul(0x3F800000u, 0xFFC00001u), nan) << m->name;     // NaN in
        EXPECT_EQ(mul(0x7F800000u, 0x00000000u), nan) << m->name;     // inf x 0
        EXPECT_EQ(mul(0x80000001u, 0xFF800000u), nan) << m->name;     // subnormal is zero: 0 x inf
        EXPECT_EQ(mul(0x7F800000u, 0xBF800000u), 0xFF800000u) << m->name;  // inf x -1
        EXPECT_EQ(mul(0x80000000u, 0x3FC00000u), 0x80000000u) << m->name;  // -0 x 1.5
        EXPECT_EQ(mul(0x007FFFFFu, 0xC0000000u), 0x80000000u) << m->name;  // subnormal x -2
        EXPECT_EQ(mul(0x7F000000u, 0x7F000000u), 0x7F800000u) << m->name;  // overflow
        EXPECT_EQ(mul(0x00800000u, 0x80800000u), 0x80000000u) << m->name;  // underflow to -0
    }
}

TEST(Models, RegistryRejectsUnknownAndOutOfRange) {
    mts_format f = mts_format_e8(7);
    mts_mulop op;
    mts_err err;
    EXPECT_EQ(mts_mulop_model(&op, "nosuch", &f, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("mbm"), std::string::npos) << err.msg;  // lists the known ones
    EXPECT_EQ(mts_mulop_model(&op, "fp32", &f, &err), MTS_EINVAL);
}

}  // namespace
