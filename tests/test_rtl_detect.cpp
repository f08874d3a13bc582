// Drop-in contract detection (sim/rtl/detect.c): shapes from port names and
// widths, parameters, --kind, top-module rules, -y search, and the errors
// for designs that fit no shape. Detection only (opts.detect_only): nothing
// is compiled, so these tests are fast.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "test_util.h"
#include "mantis/rtl.h"

namespace {

const std::string kRtl = std::string(MANTIS_SOURCE_DIR) + "/rtl/";
const std::string kData = std::string(MANTIS_TEST_DATA) + "/rtl/";


#define NEED_VERILATOR() \
    if (!have_tool("verilator")) GTEST_SKIP() << "verilator is not installed (needed to read Verilog)"

struct Detected {
    int rc = 0;
    mts_rtl_info info{};
    std::string msg;
};

Detected detect(const std::string &path, mts_rtl_kind kind = MTS_RTL_AUTO, const char *param = nullptr)
{
    mts_rtl_opts o{};
    o.path = path.c_str();
    o.kind = kind;
    o.detect_only = 1;
    if (param) o.param[o.nparams++] = param;
    mts_rtl *r = nullptr;
    mts_err err{};
    Detected d;
    d.rc = mts_rtl_open(&o, &r, &err);
    if (d.rc == MTS_OK) {
        d.info = *mts_rtl_get_info(r);
        mts_rtl_close(r);
    } else {
        d.msg = err.msg;
        EXPECT_EQ(r, nullptr);
    }
    return d;
}

TEST(RtlDetect, SignificandDesignAndParameterOverride)
{
    NEED_VERILATOR();
    Detected d = detect(kRtl + "mul_exact.v");
    ASSERT_EQ(d.rc, MTS_OK) << d.msg;
    EXPECT_EQ(d.info.kind, MTS_RTL_SIG);
    EXPECT_STREQ(d.info.top, "mul_exact");
    EXPECT_EQ(d.info.fmt.M, 7);
    EXPECT_EQ(d.info.fmt.E, 8);
    EXPECT_EQ(d.info.wout, 16);
    Detected d4 = detect(kRtl + "mul_exact.v", MTS_RTL_AUTO, "M=4");
    ASSERT_EQ(d4.rc, MTS_OK) << d4.msg;
    EXPECT_EQ(d4.info.fmt.M, 4);
    EXPECT_EQ(d4.info.wout, 10);
}

TEST(RtlDetect, ShippedDesignsHaveTheirShapes)
{
    NEED_VERILATOR();
    Detected f = detect(kRtl + "bf16_mul.v");
    ASSERT_EQ(f.rc, MTS_OK) << f.msg;
    EXPECT_EQ(f.info.kind, MTS_RTL_FLOAT);
    EXPECT_EQ(f.info.fmt.E, 8);
    EXPECT_EQ(f.info.fmt.M, 7);
    EXPECT_EQ(f.info.fmt.bias, 127);

    // EvoApproxLib-style names A, B, O: the integer shape from widths alone
    Detected i = detect(kRtl + "int8_bam.v");
    ASSERT_EQ(i.rc, MTS_OK) << i.msg;
    EXPECT_EQ(i.info.kind, MTS_RTL_INT);
    EXPECT_EQ(i.info.int_bits, 8);
    EXPECT_EQ(i.info.int_signed, 0);
    EXPECT_STREQ(i.info.in0, "A");
    EXPECT_STREQ(i.info.out, "O");

    Detected a = detect(kRtl + "fmaq_acc.v");
    ASSERT_EQ(a.rc, MTS_OK) << a.msg;
    EXPECT_EQ(a.info.kind, MTS_RTL_ACC);
    EXPECT_EQ(a.info.qprod.M, 7);
    EXPECT_EQ(a.info.qacc.E, 4);
    EXPECT_EQ(a.info.qacc.bias, 8);
    EXPECT_EQ(a.info.w0, 13);
}

TEST(RtlDetect, ParametersDeclareFloatFormatAndKind)
{
    NEED_VERILATOR();
    Detected d = detect(kData + "fp8_kind.v");
    ASSERT_EQ(d.rc, MTS_OK) << d.msg;
    EXPECT_EQ(d.info.kind, MTS_RTL_FLOAT);
    EXPECT_EQ(d.info.fmt.E, 5);
    EXPECT_EQ(d.info.fmt.M, 2);
    EXPECT_EQ(d.info.fmt.bias, 15);
    // without MANTIS_E the default E = 8 leaves no mantissa in 8 bits
    Detected bad = detect(kData + "fp8_kind.v", MTS_RTL_AUTO, "MANTIS_E=8");
    EXPECT_EQ(bad.rc, MTS_EINVAL);
    EXPECT_NE(bad.msg.find("MANTIS_E"), std::string::npos) << bad.msg;
}

TEST(RtlDetect, IntegerIsTheDefaultAndKindOverrides)
{
    NEED_VERILATOR();
    Detected d = detect(kData + "mul4.v");
    ASSERT_EQ(d.rc, MTS_OK) << d.msg;
    EXPECT_EQ(d.info.kind, MTS_RTL_INT);
    EXPECT_EQ(d.info.int_bits, 4);
    // forced to a shape its widths do not have: one message naming the shapes
    Detected f = detect(kData + "mul4.v", MTS_RTL_SIG);
    EXPECT_EQ(f.rc, MTS_EINVAL);
    EXPECT_NE(f.msg.find("significand"), std::string::npos) << f.msg;
}

TEST(RtlDetect, TopIsTheUninstantiatedModuleAndLibrariesComeFromTheDirectory)
{
    NEED_VERILATOR();
    Detected d = detect(kData + "wrapped.v");
    ASSERT_EQ(d.rc, MTS_OK) << d.msg;
    EXPECT_STREQ(d.info.top, "sig_top");
    EXPECT_EQ(d.info.kind, MTS_RTL_SIG); // ports A, B, P matched case-insensitively
    EXPECT_EQ(d.info.fmt.M, 5);
    EXPECT_STREQ(d.info.out, "P");
}

TEST(RtlDetect, DesignsThatFitNoShapeGetOneMessage)
{
    NEED_VERILATOR();
    Detected d = detect(kData + "no_shape.v");
    EXPECT_EQ(d.rc, MTS_EINVAL);
    EXPECT_NE(d.msg.find("fits no drop-in shape"), std::string::npos) << d.msg;
    EXPECT_NE(d.msg.find("clk"), std::string::npos) << d.msg; // its ports are listed
    EXPECT_NE(d.msg.find("accumulator"), std::string::npos) << d.msg; // and the shapes
    EXPECT_EQ(d.msg.find('\n'), std::string::npos);

    Detected t = detect(kData + "two_tops.v");
    EXPECT_EQ(t.rc, MTS_EINVAL);
    EXPECT_NE(t.msg.find("first_top"), std::string::npos) << t.msg;
    EXPECT_NE(t.msg.find("second_top"), std::string::npos) << t.msg;
}

TEST(RtlDetect, VerilatorErrorsCarryFileAndLine)
{
    NEED_VERILATOR();
    Detected d = detect(kData + "syntax_error.v");
    EXPECT_EQ(d.rc, MTS_ETOOL);
    EXPECT_NE(d.msg.find("syntax_error.v:6"), std::string::npos) << d.msg;

    Detected p = detect(kRtl + "mul_exact.v", MTS_RTL_AUTO, "NOSUCH=3");
    EXPECT_EQ(p.rc, MTS_ETOOL);
    EXPECT_NE(p.msg.find("NOSUCH"), std::string::npos) << p.msg;

    Detected m = detect(kData + "does_not_exist.v");
    EXPECT_EQ(m.rc, MTS_EIO);
    EXPECT_NE(m.msg.find("does_not_exist.v"), std::string::npos) << m.msg;

    Detected q = detect(kRtl + "mul_exact.v", MTS_RTL_AUTO, "M");
    EXPECT_EQ(q.rc, MTS_EINVAL);
    EXPECT_NE(q.msg.find("NAME=VALUE"), std::string::npos) << q.msg;
}

TEST(RtlDetect, KindNames)
{
    mts_rtl_kind k;
    mts_err err{};
    EXPECT_EQ(mts_rtl_kind_parse("Float", &k, &err), MTS_OK);
    EXPECT_EQ(k, MTS_RTL_FLOAT);
    EXPECT_EQ(mts_rtl_kind_parse("accumulator", &k, &err), MTS_OK);
    EXPECT_EQ(k, MTS_RTL_ACC);
    EXPECT_EQ(mts_rtl_kind_parse("fpga", &k, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("sig, float, int or acc"), std::string::npos);
}

// `mantis rtl info --help` (and --help after other options) prints the
// usage and exits 0 without reading a design.
TEST(RtlDetect, InfoHelpPrintsUsageAndExitsZero)
{
    for (const char *args : {"rtl info --help", "rtl info -h", "rtl info --rtl missing.v --help", "rtl --help"}) {
        std::string cmd = std::string(MANTIS_BIN) + " " + args + " 2>&1";
        FILE *p = popen(cmd.c_str(), "r");
        ASSERT_NE(p, nullptr);
        std::string out;
        char buf[256];
        while (fgets(buf, sizeof buf, p)) out += buf;
        int st = pclose(p);
        ASSERT_TRUE(WIFEXITED(st)) << args;
        EXPECT_EQ(WEXITSTATUS(st), 0) << args << ": " << out;
        EXPECT_NE(out.find("usage: mantis rtl info"), std::string::npos) << args << ": " << out;
    }
}

} // namespace
