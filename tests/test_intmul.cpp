// Tests of the integer multipliers and affine quantization (cmodel/intmul.c).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "test_rng.h"

extern "C" {
#include "mantis/intmul.h"
#include "mantis/lut.h"
}

namespace {


double uniform(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * (double)(splitmix64(s) >> 11) * 0x1.0p-53;
}

struct Lut {
    mts_lut l{};
    ~Lut() { mts_lut_free(&l); }
};

// An approximate table: the exact product with its two low bits cleared.
int32_t drop2(void *, int32_t a, int32_t b) { return (a * b) & ~3; }

}  // namespace

TEST(IntMul, ExactTablesEqualProductForAllPairs)
{
    for (int n = 1; n <= 8; n++) {
        for (int sg = 0; sg <= 1; sg++) {
            Lut t;
            mts_err err;
            ASSERT_EQ(mts_intmul_exact_lut(n, sg, &t.l, &err), MTS_OK) << err.msg;
            ASSERT_EQ(t.l.kind, MTS_LUT_INT);
            ASSERT_EQ(t.l.n, (size_t)1 << (2 * n));
            // operand values enumerated independently of mts_int_value
            int lo = sg ? -(1 << (n - 1)) : 0, hi = sg ? (1 << (n - 1)) - 1 : (1 << n) - 1;
            size_t seen = 0;
            for (int a = lo; a <= hi; a++) {
                for (int b = lo; b <= hi; b++) {
                    uint32_t idx = (((uint32_t)a & ((1u << n) - 1u)) << n) | ((uint32_t)b & ((1u << n) - 1u));
                    ASSERT_EQ((int32_t)t.l.entry[idx], a * b) << n << "-bit " << (sg ? "s" : "u") << " " << a << "*" << b;
                    ASSERT_EQ(mts_lut_int_mul(&t.l, a, b), a * b);
                    seen++;
                }
            }
            ASSERT_EQ(seen, t.l.n);
        }
    }
}

// One name for the exact table, whoever builds it (mantis lutgen --int-exact
// calls the same function and stores this name in the LUT header).
TEST(IntMul, ExactTableName)
{
    Lut u, s;
    mts_err err;
    ASSERT_EQ(mts_intmul_exact_lut(8, 0, &u.l, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_intmul_exact_lut(4, 1, &s.l, &err), MTS_OK) << err.msg;
    EXPECT_STREQ(u.l.model, "exact-int8u");
    EXPECT_STREQ(s.l.model, "exact-int4s");
}

TEST(IntMul, OperandValues)
{
    mts_intfmt s8 = {8, 1}, u8 = {8, 0}, s3 = {3, 1};
    EXPECT_EQ(mts_int_min(&s8), -128);
    EXPECT_EQ(mts_int_max(&s8), 127);
    EXPECT_EQ(mts_int_min(&u8), 0);
    EXPECT_EQ(mts_int_max(&u8), 255);
    EXPECT_EQ(mts_int_value(&s8, 0xFF), -1);
    EXPECT_EQ(mts_int_value(&s8, -1), -1);  // values and codes alike
    EXPECT_EQ(mts_int_value(&u8, 0xFF), 255);
    EXPECT_EQ(mts_int_value(&s3, 4), -4);
    EXPECT_EQ(mts_int_value(&s3, 3), 3);
    mts_err err;
    mts_lut l{};
    EXPECT_EQ(mts_intmul_exact_lut(9, 0, &l, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("1..8"), std::string::npos) << err.msg;
}

TEST(Affine, ParametersFromRange)
{
    mts_affine p;
    mts_err err;
    // uint8 over [-1, 3]: scale 4/255, zero point round(0 + 1/(4/255)) = round(63.75) = 64
    ASSERT_EQ(mts_affine_from_range(-1.0, 3.0, 8, 0, &p, &err), MTS_OK) << err.msg;
    EXPECT_DOUBLE_EQ(p.scale, 4.0 / 255.0);
    EXPECT_EQ(p.zero_point, 64);
    EXPECT_EQ(p.qmin, 0);
    EXPECT_EQ(p.qmax, 255);
    EXPECT_EQ(mts_affine_dequantize(&p, p.zero_point), 0.0);  // 0 is exact
    EXPECT_EQ(mts_affine_quantize(&p, 0.0), 64);
    // int8 over the same range: round(-128 + 63.75) = round(-64.25) = -64
    ASSERT_EQ(mts_affine_from_range(-1.0, 3.0, 8, 1, &p, &err), MTS_OK) << err.msg;
    EXPECT_EQ(p.zero_point, -64);
    EXPECT_EQ(p.qmin, -128);
    EXPECT_EQ(p.qmax, 127);
    // a range without 0 is widened to contain it
    ASSERT_EQ(mts_affine_from_range(2.0, 5.0, 8, 0, &p, &err), MTS_OK);
    EXPECT_DOUBLE_EQ(p.scale, 5.0 / 255.0);
    EXPECT_EQ(p.zero_point, 0);
    ASSERT_EQ(mts_affine_from_range(-5.0, -2.0, 8, 1, &p, &err), MTS_OK);
    EXPECT_EQ(p.zero_point, 127);
    // only zeros seen
    ASSERT_EQ(mts_affine_from_range(0.0, 0.0, 8, 0, &p, &err), MTS_OK);
    EXPECT_EQ(p.scale, 1.0);
    EXPECT_EQ(mts_affine_quantize(&p, 0.0), p.zero_point);
    // rejected
    EXPECT_EQ(mts_affine_from_range(3.0, 1.0, 8, 0, &p, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("min <= max"), std::string::npos) << err.msg;
    EXPECT_EQ(mts_affine_from_range(NAN, 1.0, 8, 0, &p, &err), MTS_EINVAL);
    EXPECT_EQ(mts_affine_from_range(0.0, INFINITY, 8, 0, &p, &err), MTS_EINVAL);
    EXPECT_EQ(mts_affine_from_range(0.0, 1.0, 0, 0, &p, &err), MTS_EINVAL);
}

TEST(Affine, QuantizeDequantize)
{
    uint64_t seed = 1;
    for (int sg = 0; sg <= 1; sg++) {
        for (int n : {2, 4, 8}) {
            double lo = uniform(&seed, -3, 0), hi = uniform(&seed, 0.1, 5);
            mts_affine p;
            mts_err err;
            ASSERT_EQ(mts_affine_from_range(lo, hi, n, sg, &p, &err), MTS_OK) << err.msg;
            for (int32_t q = p.qmin; q <= p.qmax; q++)  // every code is a fixed point
                ASSERT_EQ(mts_affine_quantize(&p, mts_affine_dequantize(&p, q)), q);
            for (int i = 0; i < 2000; i++) {  // in range: error at most half a step
                double r = uniform(&seed, lo, hi);
                int32_t q = mts_affine_quantize(&p, r);
                ASSERT_LE(std::fabs(mts_affine_dequantize(&p, q) - r), p.scale / 2 * (1 + 1e-12)) << r;
            }
            EXPECT_EQ(mts_affine_quantize(&p, 1e9), p.qmax);  // clamped
            EXPECT_EQ(mts_affine_quantize(&p, -1e9), p.qmin);
            EXPECT_EQ(mts_affine_quantize(&p, NAN), p.zero_point);
        }
    }
}

TEST(QDot, ZeroPointCorrectionIdentity)
{
    // sum (qa-za)(qb-zb) on a hand example: qa = {3, 10}, qb = {7, 2}, za = 4, zb = 5
    // (3-4)(7-5) + (10-4)(2-5) = -2 - 18 = -20
    int64_t s_ab = 3 * 7 + 10 * 2, s_a = 13, s_b = 9;
    EXPECT_EQ(mts_qdot_correct(s_ab, s_a, s_b, 2, 4, 5), -20);
}

TEST(QDot, IntegerEqualsBruteForceAndFloatWithinBound)
{
    uint64_t seed = 2024;
    for (int sg = 0; sg <= 1; sg++) {
        Lut exact, approx;
        mts_err err;
        ASSERT_EQ(mts_intmul_exact_lut(8, sg, &exact.l, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_lut_generate_int(8, sg, drop2, NULL, "drop2", &approx.l, &err), MTS_OK) << err.msg;
        for (int trial = 0; trial < 20; trial++) {
            size_t n = 1 + splitmix64(&seed) % 700;
            double alo = uniform(&seed, -2, 0.5), ahi = alo + uniform(&seed, 0.1, 4);
            double blo = uniform(&seed, -1, 0.2), bhi = blo + uniform(&seed, 0.1, 2);
            mts_affine pa, pb;
            ASSERT_EQ(mts_affine_from_range(alo, ahi, 8, sg, &pa, &err), MTS_OK);
            ASSERT_EQ(mts_affine_from_range(blo, bhi, 8, sg, &pb, &err), MTS_OK);
            std::vector<float> a(n), b(n);
            std::vector<int32_t> qa(n), qb(n);
            for (size_t i = 0; i < n; i++) {
                a[i] = (float)uniform(&seed, alo, ahi);
                b[i] = (float)uniform(&seed, blo, bhi);
                qa[i] = mts_affine_quantize(&pa, a[i]);
                qb[i] = mts_affine_quantize(&pb, b[i]);
            }
            // brute force, straight from the definition
            int64_t brute = 0, brute_approx = 0;
            double deq = 0, real = 0, bound = 0;
            for (size_t i = 0; i < n; i++) {
                brute += (int64_t)(qa[i] - pa.zero_point) * (qb[i] - pb.zero_point);
                brute_approx += (int64_t)(((qa[i] * qb[i]) & ~3) - pb.zero_point * qa[i] - pa.zero_point * qb[i] +
                                          pa.zero_point * pb.zero_point);
                deq += mts_affine_dequantize(&pa, qa[i]) * mts_affine_dequantize(&pb, qb[i]);
                real += (double)a[i] * (double)b[i];
                bound += std::fabs(a[i]) * pb.scale / 2 + std::fabs(b[i]) * pa.scale / 2 + pa.scale * pb.scale / 4;
            }
            int64_t got;
            ASSERT_EQ(mts_qdot_int(&exact.l, qa.data(), pa.zero_point, qb.data(), pb.zero_point, n, &got, &err), MTS_OK)
                << err.msg;
            EXPECT_EQ(got, brute);
            ASSERT_EQ(mts_qdot_int(&approx.l, qa.data(), pa.zero_point, qb.data(), pb.zero_point, n, &got, &err),
                      MTS_OK);
            EXPECT_EQ(got, brute_approx);
            double y;
            ASSERT_EQ(mts_qdot_float(&exact.l, &pa, a.data(), &pb, b.data(), n, &y, &err), MTS_OK) << err.msg;
            EXPECT_NEAR(y, pa.scale * pb.scale * (double)brute, 1e-12 * (1 + std::fabs(y)));
            EXPECT_NEAR(y, deq, 1e-9 * (1 + std::fabs(deq)));      // same value, other rounding
            EXPECT_LE(std::fabs(y - real), bound * (1 + 1e-9) + 1e-12);  // quantization error bound
        }
    }
}

TEST(QDot, RejectsOutOfRangeOperandsAndWrongTables)
{
    Lut u8;
    mts_err err;
    ASSERT_EQ(mts_intmul_exact_lut(8, 0, &u8.l, &err), MTS_OK);
    std::vector<int32_t> qa = {1, 2, 256}, qb = {1, 2, 3};
    int64_t out;
    EXPECT_EQ(mts_qdot_int(&u8.l, qa.data(), 0, qb.data(), 0, 3, &out, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("a[2] = 256"), std::string::npos) << err.msg;
    qa[2] = 3;
    EXPECT_EQ(mts_qdot_int(&u8.l, qa.data(), -1, qb.data(), 0, 3, &out, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("zero point"), std::string::npos) << err.msg;
    mts_lut fl{};
    fl.kind = MTS_LUT_FLOAT;
    EXPECT_EQ(mts_qdot_int(&fl, qa.data(), 0, qb.data(), 0, 3, &out, &err), MTS_EINVAL);
    mts_affine ps;
    ASSERT_EQ(mts_affine_from_range(-1, 1, 8, 1, &ps, &err), MTS_OK);  // int8 params, uint8 table
    float fa[1] = {0.5f};
    double y;
    EXPECT_EQ(mts_qdot_float(&u8.l, &ps, fa, &ps, fa, 1, &y, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("do not match"), std::string::npos) << err.msg;
}
