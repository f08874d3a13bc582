// Every shipped rtl/ design verifies bit-exact against its C model and the
// LUT swept from it (mantis verify's comparisons, through mts_verify_rtl),
// verification notices designs that differ, and a float design whose
// mantissa depends on the exponents is refused as a LUT. Models are built
// once into a cache under the build tree (later runs reuse it).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "test_util.h"
#include "mantis/intmul.h"
#include "mantis/lut.h"
#include "mantis/rtl.h"
#include "mantis/verify.h"

namespace {

const std::string kRtl = std::string(MANTIS_SOURCE_DIR) + "/rtl/";
const std::string kData = std::string(MANTIS_TEST_DATA) + "/rtl/";

class RtlEnv : public ::testing::Environment {
  public:
    void SetUp() override
    {
        std::string bin = MANTIS_BIN;
        std::string cache = bin.substr(0, bin.rfind('/')) + "/../rtl-cache";
        setenv("MANTIS_CACHE", cache.c_str(), 1);
    }
};
const auto *env = ::testing::AddGlobalTestEnvironment(new RtlEnv);

struct Handle {
    mts_rtl *r = nullptr;
    ~Handle() { mts_rtl_close(r); }
};

// Opens path (with optional parameter overrides) or fails the test.
void open_design(Handle &h, const std::string &path, std::vector<const char *> params = {})
{
    mts_rtl_opts o{};
    o.path = path.c_str();
    for (const char *p : params) o.param[o.nparams++] = p;
    mts_err err{};
    ASSERT_EQ(mts_rtl_open(&o, &h.r, &err), MTS_OK) << err.msg;
}

mts_verify_result verify(mts_rtl *r, const char *model)
{
    mts_verify_opts vo{};
    vo.model = model;
    vo.max_report = 5;
    mts_verify_result res{};
    mts_err err{};
    EXPECT_EQ(mts_verify_rtl(r, &vo, &res, &err), MTS_OK) << err.msg;
    return res;
}

void expect_bit_exact(const std::string &path, const char *model, std::vector<const char *> params = {})
{
    Handle h;
    open_design(h, path, params);
    if (!h.r) return;
    mts_verify_result res = verify(h.r, model);
    EXPECT_EQ(res.comparisons, 2) << path;  // vs its LUT and vs the model
    EXPECT_GT(res.cases, 0u);
    EXPECT_EQ(res.mismatches, 0u) << path << " vs " << model;
    EXPECT_EQ(res.not_representable, 0);
}

TEST(RtlVerify, SignificandDesignsMatchTheirModelsAtM7)
{
    NEED_RTL_TOOLS();
    // mul_exact outputs every product bit: the full-precision model
    expect_bit_exact(kRtl + "mul_exact.v", "exact-wide");
    expect_bit_exact(kRtl + "mul_trunc.v", "trunc");
    expect_bit_exact(kRtl + "mul_mitchell.v", "mitchell");
    expect_bit_exact(kRtl + "mul_mbm.v", "mbm");
}

TEST(RtlVerify, SignificandDesignsAtOtherWidths)
{
    NEED_RTL_TOOLS();
    expect_bit_exact(kRtl + "mul_exact.v", "exact-wide", {"M=4"});
    expect_bit_exact(kRtl + "mul_mbm.v", "mbm", {"M=4"});
}

TEST(RtlVerify, Bfloat16DesignMatchesTheRoundedExactModel)
{
    NEED_RTL_TOOLS();
    expect_bit_exact(kRtl + "bf16_mul.v", "exact");
}

TEST(RtlVerify, DesignsOfDeclaredFormats)
{
    NEED_RTL_TOOLS();
    // float: parameter E (default 5, M = 2): fp8 e5m2, then an E4M3 with IEEE specials
    expect_bit_exact(kData + "fp_mul.v", "exact");
    expect_bit_exact(kData + "fp_mul.v", "exact", {"E=4", "M=3"});
    // significand design wrapped in the saturating FP8 E4M3 (MANTIS_E/BIAS/IEEE)
    Handle h;
    open_design(h, kData + "sat_trunc.v");
    if (!h.r) return;
    const mts_rtl_info *in = mts_rtl_get_info(h.r);
    EXPECT_EQ(in->fmt.E, 4);
    EXPECT_EQ(in->fmt.bias, 7);
    EXPECT_EQ(in->fmt.ieee, 0);
    mts_verify_result res = verify(h.r, "trunc");
    EXPECT_EQ(res.comparisons, 2);
    EXPECT_EQ(res.mismatches, 0u);
}

TEST(RtlVerify, SpecialCaseMismatchesAreReportedAsSuch)
{
    NEED_RTL_TOOLS();
    Handle h;
    open_design(h, kData + "nan_sign.v");
    if (!h.r) return;
    mts_verify_opts vo{};
    vo.max_report = 1000;
    char *text = nullptr;
    size_t len = 0;
    vo.out = open_memstream(&text, &len);
    mts_verify_result res{};
    mts_err err{};
    ASSERT_EQ(mts_verify_rtl(h.r, &vo, &res, &err), MTS_OK) << err.msg;
    std::fclose(vo.out);
    std::string report(text, len);
    std::free(text);
    EXPECT_GT(res.mismatches, 0u);
    EXPECT_EQ(res.not_representable, 0); // NaN outputs are not LUT entries
    size_t lines = 0, special = 0;
    for (size_t pos = 0; (pos = report.find("  a=", pos)) != std::string::npos; pos++) {
        lines++;
        size_t eol = report.find('\n', pos);
        std::string l = report.substr(pos, eol - pos);
        special += l.find("[special]") != std::string::npos && l.find("rtl=FFC0 -FF.40") != std::string::npos;
    }
    EXPECT_EQ(lines, res.mismatches) << report;
    EXPECT_EQ(special, lines) << report;
}

TEST(RtlVerify, DifferencesAreFound)
{
    NEED_RTL_TOOLS();
    Handle h;
    open_design(h, kRtl + "mul_trunc.v");
    if (!h.r) return;
    // truncation differs from round-to-nearest wherever the dropped half is >= 1/2 ulp
    mts_verify_result res = verify(h.r, "exact");
    EXPECT_GT(res.mismatches, 0u);
    EXPECT_LT(res.mismatches, res.cases);
}

TEST(RtlVerify, ExponentDependentFloatDesignIsNotLutRepresentable)
{
    NEED_RTL_TOOLS();
    Handle h;
    open_design(h, kData + "exp_dependent.v");
    if (!h.r) return;
    mts_verify_result res = verify(h.r, nullptr);
    EXPECT_EQ(res.not_representable, 1);
    mts_lut lut{};
    mts_err err{};
    EXPECT_EQ(mts_rtl_lut(h.r, &lut, &err), MTS_ENOTLUT);
    EXPECT_NE(std::string(err.msg).find("not LUT-representable"), std::string::npos) << err.msg;
}

TEST(RtlVerify, IntegerDesigns)
{
    NEED_RTL_TOOLS();
    expect_bit_exact(kRtl + "int8_exact.v", "exact");

    // the broken-array multiplier: equal to its own table, and to an
    // independent restatement of the design (sum of kept partial products)
    Handle h;
    open_design(h, kRtl + "int8_bam.v", {"BREAK=5"});
    if (!h.r) return;
    mts_verify_result res = verify(h.r, nullptr);
    EXPECT_EQ(res.mismatches, 0u);
    mts_lut lut{};
    mts_err err{};
    ASSERT_EQ(mts_rtl_lut(h.r, &lut, &err), MTS_OK) << err.msg;
    int wrong = 0, inexact = 0;
    for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b++) {
            int want = 0;
            for (int i = 0; i < 8; i++)
                for (int j = 0; j < 8; j++)
                    if (i + j >= 5) want += ((a >> i) & (b >> j) & 1) << (i + j);
            wrong += mts_lut_int_mul(&lut, a, b) != want;
            inexact += want != a * b;
        }
    mts_lut_free(&lut);
    EXPECT_EQ(wrong, 0);
    EXPECT_GT(inexact, 0);
    int32_t y = 0;
    ASSERT_EQ(mts_rtl_int_mul(h.r, 255, 255, &y, &err), MTS_OK) << err.msg;
    EXPECT_LE(y, 255 * 255);
    EXPECT_EQ(mts_rtl_int_mul(h.r, 256, 1, &y, &err), MTS_EINVAL);
}

TEST(RtlVerify, SignedIntegerDesignIsInferredFromTheSweep)
{
    NEED_RTL_TOOLS();
    // smul8.v: $signed(a) * $signed(b), nothing declared
    Handle h;
    open_design(h, kData + "smul8.v");
    if (!h.r) return;
    const mts_rtl_info *in = mts_rtl_get_info(h.r);
    EXPECT_EQ(in->int_signed, 1);
    EXPECT_EQ(in->sign_src, MTS_RTL_SIGNSRC_INFERRED);
    EXPECT_EQ(in->mred_signed, 0.0);
    EXPECT_GT(in->mred_unsigned, 1.0); // read unsigned it is wrong by more than 100% on average
    mts_verify_result res = verify(h.r, "exact");
    EXPECT_EQ(res.mismatches, 0u);
    int32_t y = 0;
    mts_err err{};
    ASSERT_EQ(mts_rtl_int_mul(h.r, -128, 127, &y, &err), MTS_OK) << err.msg;
    EXPECT_EQ(y, -128 * 127);

    // an unsigned design is inferred unsigned, with the figures the other way round
    Handle u;
    open_design(u, kRtl + "int8_exact.v");
    if (!u.r) return;
    EXPECT_EQ(mts_rtl_get_info(u.r)->int_signed, 0);
    EXPECT_EQ(mts_rtl_get_info(u.r)->mred_unsigned, 0.0);
    EXPECT_GT(mts_rtl_get_info(u.r)->mred_signed, 1.0);

    // --unsigned forces the reading (and the exact product then differs)
    mts_rtl_opts o{};
    std::string p = kData + "smul8.v";
    o.path = p.c_str();
    o.int_sign = MTS_RTL_SIGN_UNSIGNED;
    Handle f;
    ASSERT_EQ(mts_rtl_open(&o, &f.r, &err), MTS_OK) << err.msg;
    EXPECT_EQ(mts_rtl_get_info(f.r)->int_signed, 0);
    EXPECT_EQ(mts_rtl_get_info(f.r)->sign_src, MTS_RTL_SIGNSRC_OPTION);
    EXPECT_GT(verify(f.r, "exact").mismatches, 0u);
}

int32_t transposed(void *ctx, int32_t a, int32_t b)
{
    return mts_lut_int_mul(static_cast<const mts_lut *>(ctx), b, a);
}

TEST(RtlVerify, TableWithSwappedOperandsIsNamedAsSuch)
{
    NEED_RTL_TOOLS();
    // asym4.v: a * (b | 1), so table(b, a) != table(a, b) almost everywhere
    Handle h;
    open_design(h, kData + "asym4.v");
    if (!h.r) return;
    mts_lut lut{}, swapped{};
    mts_err err{};
    ASSERT_EQ(mts_rtl_lut(h.r, &lut, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate_int(4, 0, transposed, &lut, "swapped", &swapped, &err), MTS_OK) << err.msg;
    std::string path = tmpdir() + "/swapped.lut";
    ASSERT_EQ(mts_lut_save(&swapped, path.c_str(), &err), MTS_OK) << err.msg;
    mts_lut_free(&lut);
    mts_lut_free(&swapped);
    char *text = nullptr;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    mts_verify_opts vo{};
    vo.lut_path = path.c_str();
    vo.max_report = 1;
    vo.out = out;
    mts_verify_result res{};
    ASSERT_EQ(mts_verify_rtl(h.r, &vo, &res, &err), MTS_OK) << err.msg;
    fclose(out);
    std::string report = text ? text : "";
    free(text);
    EXPECT_GT(res.mismatches, 100u);
    EXPECT_NE(report.find("matches the table with operands swapped"), std::string::npos) << report;
    // the design's own table: no mismatch, no note
    out = open_memstream(&text, &len);
    vo.lut_path = nullptr;
    vo.out = out;
    ASSERT_EQ(mts_verify_rtl(h.r, &vo, &res, &err), MTS_OK) << err.msg;
    fclose(out);
    report = text ? text : "";
    free(text);
    EXPECT_EQ(res.mismatches, 0u);
    EXPECT_EQ(report.find("swapped"), std::string::npos) << report;
}

TEST(RtlVerify, AccumulatorMatchesFmaqExhaustively)
{
    NEED_RTL_TOOLS();
    Handle h;
    // 9-bit products, 10-bit sums: every one of the 2^19 code pairs
    open_design(h, kRtl + "fmaq_acc.v", {"PM=3", "PE=4", "AM=5", "AE=3", "AB=3"});
    if (!h.r) return;
    mts_verify_result res = verify(h.r, nullptr);
    EXPECT_EQ(res.cases, 1u << 19);
    EXPECT_EQ(res.mismatches, 0u);
}

TEST(RtlVerify, Accumulator13BitDefaultMatchesFmaqExhaustively)
{
    NEED_RTL_TOOLS();
    Handle h;
    open_design(h, kRtl + "fmaq_acc.v");
    if (!h.r) return;
    mts_verify_result res = verify(h.r, nullptr);
    EXPECT_EQ(res.cases, 1ull << 26);
    EXPECT_EQ(res.mismatches, 0u);
    // the value path: FP32 in, FP32 out, equal to the model on a few sums
    mts_qfmt q = mts_rtl_get_info(h.r)->qacc, qp = mts_rtl_get_info(h.r)->qprod;
    const uint32_t vals[] = {0x3F800000u, 0xBF800000u, 0x3FC00000u, 0x41200000u, 0xC1200000u, 0x3B800000u, 0};
    for (uint32_t p : vals)
        for (uint32_t s : vals) {
            uint32_t sq = mts_q(&q, s);
            EXPECT_EQ(mts_rtl_acc(h.r, p, sq), mts_q_decode(&q, mts_q_encode(&q, mts_fmaq(&qp, &q, p, sq))))
                << std::hex << p << " + " << s;
        }
}

TEST(RtlVerify, AccumulatorWideFormatsAreSampled)
{
    NEED_RTL_TOOLS();
    Handle h;
    open_design(h, kRtl + "fmaq_acc.v", {"PM=4", "PE=3", "PB=4", "AM=12", "AE=5", "AB=16"});
    if (!h.r) return;
    mts_verify_opts vo{};
    vo.max_report = 5;
    vo.seed = 7;
    vo.samples = 1u << 18;
    mts_verify_result res{};
    mts_err err{};
    ASSERT_EQ(mts_verify_rtl(h.r, &vo, &res, &err), MTS_OK) << err.msg;
    EXPECT_EQ(res.cases, 1u << 18);
    EXPECT_EQ(res.mismatches, 0u);
}

} // namespace
