// Tests of the error metrics (verify/metrics.c): definitions on hand-computed
// cases, then properties of real models.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

extern "C" {
#include "mantis/fpbits.h"
#include "mantis/intmul.h"
#include "mantis/lut.h"
#include "mantis/metrics.h"
#include "mantis/mul.h"
}

namespace {

struct Lut {
    mts_lut l{};
    ~Lut() { mts_lut_free(&l); }
};

int32_t zero_fn(void *, int32_t, int32_t) { return 0; }
int32_t or_fn(void *, int32_t a, int32_t b) { return a | b; }

mts_mulop model(const char *name, int M)
{
    mts_mulop op;
    mts_err err;
    mts_format f = mts_format_e8(M);
    EXPECT_EQ(mts_mulop_model(&op, name, &f, &err), MTS_OK) << err.msg;
    return op;
}

std::string json_of(const mts_metrics &m)
{
    FILE *f = tmpfile();
    mts_metrics_print_json(f, &m);
    rewind(f);
    std::string s;
    int c;
    while ((c = fgetc(f)) != EOF) s += (char)c;
    fclose(f);
    return s;
}

}  // namespace

TEST(Metrics, DefinitionsOnFourPairs)
{
    // (approx, ref): (3,2) (1,2) (4,4) (0,0)
    mts_metrics_acc a;
    mts_metrics_acc_init(&a);
    mts_metrics_acc_add(&a, 3, 2);
    mts_metrics_acc_add(&a, 1, 2);
    mts_metrics_acc_add(&a, 4, 4);
    mts_metrics_acc_add(&a, 0, 0);
    mts_metrics m{};
    mts_metrics_acc_finish(&a, 4.0, &m);
    EXPECT_EQ(m.pairs, 4u);
    EXPECT_EQ(m.errors, 2u);
    EXPECT_DOUBLE_EQ(m.error_rate, 0.5);
    EXPECT_DOUBLE_EQ(m.med, 0.5);         // (1 + 1 + 0 + 0) / 4
    EXPECT_DOUBLE_EQ(m.nmed, 0.125);      // 0.5 / 4
    EXPECT_DOUBLE_EQ(m.bias, 0.0);        // (+1 - 1 + 0 + 0) / 4
    EXPECT_DOUBLE_EQ(m.wce, 1.0);
    EXPECT_EQ(m.rel_pairs, 3u);           // the ref = 0 pair has no relative error
    EXPECT_DOUBLE_EQ(m.mred, 1.0 / 3.0);  // (1/2 + 1/2 + 0) / 3
    EXPECT_DOUBLE_EQ(m.max_re, 0.5);
}

TEST(Metrics, EmptyAndNonFinite)
{
    mts_metrics_acc a;
    mts_metrics_acc_init(&a);
    mts_metrics m{};
    mts_metrics_acc_finish(&a, 4.0, &m);
    EXPECT_EQ(m.med, 0.0);
    EXPECT_EQ(m.mred, 0.0);
    mts_metrics_acc_add(&a, INFINITY, 2);
    mts_metrics_acc_add(&a, 2, 2);
    mts_metrics_acc_finish(&a, 4.0, &m);
    EXPECT_EQ(m.nonfinite, 1u);
    EXPECT_TRUE(std::isinf(m.med));
    EXPECT_TRUE(std::isinf(m.wce));
    EXPECT_TRUE(std::isinf(m.mred));
    EXPECT_TRUE(std::isnan(m.bias));
    std::string j = json_of(m);
    EXPECT_NE(j.find("\"med\": null"), std::string::npos) << j;  // JSON has no inf
}

// The constant-zero 8-bit unsigned multiplier by hand: mean of a*b over all
// pairs = 127.5^2 = 16256.25; NMED = 16256.25 / 2^16 = 0.24805 (the
// 24.81 % EvoApproxLib lists for mul8u_pwr_0_000_mre_100_0000); WCE = 255^2;
// errors on 255^2 pairs; every non-zero product is 100 % off (MRE 100 %).
TEST(Metrics, ConstantZeroInt8ByHand)
{
    Lut t;
    mts_err err;
    ASSERT_EQ(mts_lut_generate_int(8, 0, zero_fn, NULL, "zero", &t.l, &err), MTS_OK) << err.msg;
    mts_metrics m;
    ASSERT_EQ(mts_metrics_lut(&t.l, MTS_REF_EXACT, &m, &err), MTS_OK) << err.msg;
    EXPECT_EQ(m.is_int, 1);
    EXPECT_EQ(m.pairs, 65536u);
    EXPECT_EQ(m.errors, 65025u);
    EXPECT_DOUBLE_EQ(m.error_rate, 65025.0 / 65536.0);
    EXPECT_DOUBLE_EQ(m.med, 16256.25);
    EXPECT_DOUBLE_EQ(m.norm, 65536.0);
    EXPECT_DOUBLE_EQ(m.nmed, 16256.25 / 65536.0);
    EXPECT_DOUBLE_EQ(m.wce, 65025.0);
    EXPECT_DOUBLE_EQ(m.bias, -16256.25);
    EXPECT_EQ(m.rel_pairs, 65025u);
    EXPECT_DOUBLE_EQ(m.mred, 1.0);
    EXPECT_DOUBLE_EQ(m.max_re, 1.0);
}

// 1-bit unsigned "multiplier" a|b: products 0,0,0,1 become 0,1,1,1.
TEST(Metrics, OneBitOrByHand)
{
    Lut t;
    mts_err err;
    ASSERT_EQ(mts_lut_generate_int(1, 0, or_fn, NULL, "or", &t.l, &err), MTS_OK) << err.msg;
    mts_metrics m;
    ASSERT_EQ(mts_metrics_int_lut(&t.l, &m, &err), MTS_OK) << err.msg;
    EXPECT_EQ(m.pairs, 4u);
    EXPECT_EQ(m.errors, 2u);
    EXPECT_DOUBLE_EQ(m.med, 0.5);
    EXPECT_DOUBLE_EQ(m.nmed, 0.125);  // / 2^2
    EXPECT_DOUBLE_EQ(m.bias, 0.5);
    EXPECT_DOUBLE_EQ(m.wce, 1.0);
    EXPECT_EQ(m.rel_pairs, 1u);       // only 1*1 is non-zero, and it is right
    EXPECT_DOUBLE_EQ(m.mred, 0.0);
}

TEST(Metrics, ExactIntTablesHaveNoError)
{
    for (int sg = 0; sg <= 1; sg++) {
        Lut t;
        mts_err err;
        ASSERT_EQ(mts_intmul_exact_lut(8, sg, &t.l, &err), MTS_OK) << err.msg;
        mts_metrics m;
        ASSERT_EQ(mts_metrics_int_lut(&t.l, &m, &err), MTS_OK) << err.msg;
        EXPECT_EQ(m.is_signed, sg);
        EXPECT_EQ(m.pairs, 65536u);
        EXPECT_EQ(m.errors, 0u);
        EXPECT_EQ(m.med, 0.0);
        EXPECT_EQ(m.wce, 0.0);
        EXPECT_EQ(m.bias, 0.0);
        EXPECT_EQ(m.mred, 0.0);
    }
}

// Truncation at M = 1 by hand: operands {1, 1.5}; exact products 1, 1.5,
// 1.5, 2.25; truncated to 1 fraction bit 2.25 -> 2.0, the rest are exact.
TEST(Metrics, TruncAtOneBitByHand)
{
    mts_mulop op = model("trunc", 1);
    mts_metrics m;
    mts_err err;
    ASSERT_EQ(mts_metrics_mulop(&op, MTS_REF_EXACT, &m, &err), MTS_OK) << err.msg;
    EXPECT_EQ(m.pairs, 4u);
    EXPECT_EQ(m.errors, 1u);
    EXPECT_DOUBLE_EQ(m.med, 0.0625);
    EXPECT_DOUBLE_EQ(m.nmed, 0.015625);  // / 4
    EXPECT_DOUBLE_EQ(m.bias, -0.0625);
    EXPECT_DOUBLE_EQ(m.wce, 0.25);
    EXPECT_DOUBLE_EQ(m.mred, 0.25 / 2.25 / 4);
    EXPECT_DOUBLE_EQ(m.max_re, 0.25 / 2.25);
    // RNE at one bit also gives 2.0 for 2.25, so against that reference trunc is exact
    ASSERT_EQ(mts_metrics_mulop(&op, MTS_REF_RNE, &m, &err), MTS_OK) << err.msg;
    EXPECT_EQ(m.errors, 0u);
}

TEST(Metrics, ExactModelsHaveNoError)
{
    for (int M = 1; M <= 9; M++) {
        mts_err err;
        mts_metrics m;
        // the RNE-at-M model against the RNE-at-M reference
        mts_mulop ex = model("exact", M);
        ASSERT_EQ(mts_metrics_mulop(&ex, MTS_REF_RNE, &m, &err), MTS_OK) << err.msg;
        EXPECT_EQ(m.pairs, 1ull << (2 * M));
        EXPECT_EQ(m.errors, 0u) << "M=" << M;
        EXPECT_EQ(m.med, 0.0);
        // against the infinitely precise product it has only rounding error
        ASSERT_EQ(mts_metrics_mulop(&ex, MTS_REF_EXACT, &m, &err), MTS_OK) << err.msg;
        EXPECT_GT(m.errors, 0u) << "M=" << M;
        EXPECT_LE(m.wce, std::ldexp(1.0, -M));         // half an ulp of a product in [2,4)
        EXPECT_LE(m.max_re, std::ldexp(1.0, -M - 1));  // half an ulp relative to [1,2)
        // the full-width exact product has no error at all
        mts_mulop wide = model("exact-wide", M);
        ASSERT_EQ(mts_metrics_mulop(&wide, MTS_REF_EXACT, &m, &err), MTS_OK) << err.msg;
        EXPECT_EQ(m.errors, 0u) << "M=" << M;
    }
}

TEST(Metrics, TruncationHasNegativeBias)
{
    for (int M : {3, 5, 7, 10}) {
        mts_mulop op = model("trunc", M);
        mts_metrics m;
        mts_err err;
        for (mts_metric_ref r : {MTS_REF_EXACT, MTS_REF_RNE}) {
            ASSERT_EQ(mts_metrics_mulop(&op, r, &m, &err), MTS_OK) << err.msg;
            EXPECT_LT(m.bias, 0.0) << "M=" << M;
            EXPECT_GT(m.error_rate, 0.0);
            EXPECT_DOUBLE_EQ(-m.bias, m.med) << "every error is downward";
        }
        ASSERT_EQ(mts_metrics_mulop(&op, MTS_REF_EXACT, &m, &err), MTS_OK);
        EXPECT_LT(m.max_re, std::ldexp(1.0, -M));  // less than one ulp relative
    }
}

TEST(Metrics, FloatLutMatchesItsModel)
{
    mts_mulop op = model("mitchell", 6);
    Lut t;
    mts_err err;
    ASSERT_EQ(mts_lut_generate(&op, &t.l, &err), MTS_OK) << err.msg;
    mts_metrics a, b;
    ASSERT_EQ(mts_metrics_mulop(&op, MTS_REF_EXACT, &a, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_metrics_lut(&t.l, MTS_REF_EXACT, &b, &err), MTS_OK) << err.msg;
    EXPECT_EQ(a.errors, b.errors);
    EXPECT_EQ(a.med, b.med);
    EXPECT_EQ(a.bias, b.bias);
    EXPECT_EQ(a.mred, b.mred);
    EXPECT_EQ(a.wce, b.wce);
    EXPECT_LT(a.bias, 0.0);  // Mitchell underestimates every product
}

TEST(Metrics, RejectsWhatCannotBeSwept)
{
    mts_mulop op = model("exact", 13);
    mts_metrics m;
    mts_err err;
    EXPECT_EQ(mts_metrics_mulop(&op, MTS_REF_EXACT, &m, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("1..12"), std::string::npos) << err.msg;
    mts_lut bad{};
    bad.kind = MTS_LUT_INT;
    bad.int_bits = 8;
    EXPECT_EQ(mts_metrics_int_lut(&bad, &m, &err), MTS_EINVAL);
}

TEST(Metrics, Printers)
{
    Lut t;
    mts_err err;
    ASSERT_EQ(mts_lut_generate_int(2, 1, zero_fn, NULL, "zero\"2", &t.l, &err), MTS_OK) << err.msg;
    mts_metrics m;
    ASSERT_EQ(mts_metrics_int_lut(&t.l, &m, &err), MTS_OK);
    std::string j = json_of(m);
    EXPECT_EQ(j.front(), '{');
    EXPECT_NE(j.find("\"name\": \"zero\\\"2\""), std::string::npos) << j;
    EXPECT_NE(j.find("\"kind\": \"int\""), std::string::npos) << j;
    EXPECT_NE(j.find("\"pairs\": 16"), std::string::npos) << j;
    EXPECT_NE(j.find("\"wce\": 4"), std::string::npos) << j;  // (-2)*(-2)
    EXPECT_EQ(j.substr(j.size() - 2), "}\n");
    FILE *f = tmpfile();
    mts_metrics_print_text(f, &m);
    rewind(f);
    char line[256];
    std::string text;
    while (fgets(line, sizeof line, f)) text += line;
    fclose(f);
    EXPECT_NE(text.find("MED:"), std::string::npos) << text;
    EXPECT_NE(text.find("2-bit signed"), std::string::npos) << text;
}
