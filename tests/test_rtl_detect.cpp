// Drop-in contract detection (sim/rtl/detect.c): shapes from port names and
// widths, parameters, --kind, top-module rules, -y search, and the errors
// for designs that fit no shape. Detection only (opts.detect_only): nothing
// is compiled, so these tests are fast.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
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

TEST(RtlDetect, SignednessDeclaredByLocalparamOrGivenAsOption)
{
    NEED_VERILATOR();
    // `localparam MANTIS_SIGNED = 1` (Verilator marks it localparam="true")
    Detected d = detect(kData + "lp_signed.v");
    ASSERT_EQ(d.rc, MTS_OK) << d.msg;
    EXPECT_EQ(d.info.int_signed, 1);
    EXPECT_EQ(d.info.sign_src, MTS_RTL_SIGNSRC_DECLARED);
    // overriding a localparam is not a -G (Verilator would refuse it): the option decides
    Detected o = detect(kData + "lp_signed.v", MTS_RTL_AUTO, "MANTIS_SIGNED=0");
    ASSERT_EQ(o.rc, MTS_OK) << o.msg;
    EXPECT_EQ(o.info.int_signed, 0);
    EXPECT_EQ(o.info.sign_src, MTS_RTL_SIGNSRC_OPTION);
    // a design that does not declare MANTIS_SIGNED takes it all the same
    Detected m = detect(kData + "mul4.v", MTS_RTL_AUTO, "MANTIS_SIGNED=1");
    ASSERT_EQ(m.rc, MTS_OK) << m.msg;
    EXPECT_EQ(m.info.int_signed, 1);
    EXPECT_EQ(m.info.sign_src, MTS_RTL_SIGNSRC_OPTION);
    Detected bad = detect(kData + "mul4.v", MTS_RTL_AUTO, "MANTIS_SIGNED=2");
    EXPECT_EQ(bad.rc, MTS_EINVAL);
    EXPECT_NE(bad.msg.find("0 or 1"), std::string::npos) << bad.msg;
    // other unknown parameters stay an error (Verilator's)
    EXPECT_EQ(detect(kData + "mul4.v", MTS_RTL_AUTO, "NO_SUCH=1").rc, MTS_ETOOL);
    // nothing declared or forced: undecided until the model runs (mts_rtl_open infers)
    Detected u = detect(kData + "mul4.v");
    EXPECT_EQ(u.info.sign_src, MTS_RTL_SIGNSRC_DEFAULT);
    EXPECT_LT(u.info.mred_unsigned, 0);
}

// A design FILE.v in directory DIR under root, one module that is not named like the file.
std::string hostile_design(const std::string &root, const std::string &dir, const std::string &file)
{
    mkdir((root + "/" + dir).c_str(), 0755);
    std::string path = dir + "/" + file + ".v";
    std::ofstream(root + "/" + path) << "module hn(input [3:0] a, input [3:0] b, output [7:0] y);\n"
                                        "  assign y = a * b;\nendmodule\n";
    return path;
}

TEST(RtlDetect, HostileFileAndDirectoryNamesWorkAndRunNothing)
{
    NEED_VERILATOR();
    std::string root = tmpdir() + "/hostile";
    mkdir(root.c_str(), 0755);
    // every class once as a directory and once as a file name: space, quotes, $(...), ;,
    // backquote, leading '-', non-ASCII, newline, non-UTF-8
    const char *pairs[][2] = {{"a b", "q\"d"},         {"q'd", "x$(touch PWNED)"}, {"s;touch PWNED", "b`touch PWNED`"},
                              {"-lead", "\xc3\xa9t\xc3\xa9"}, {"n\nl", "bad\xff"},        {"x$(touch PWNED)", "-lead"},
                              {"b`touch PWNED`", "a b"}, {"bad\xff", "n\nl"}};
    char cwd[4096];
    ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
    ASSERT_EQ(chdir(root.c_str()), 0);
    for (auto &pr : pairs) {
        std::string p = hostile_design(root, pr[0], pr[1]); // relative: a leading '-' would read as an option
        Detected d = detect(p);
        EXPECT_EQ(d.rc, MTS_OK) << "[" << p << "] " << d.msg;
        EXPECT_STREQ(d.info.top, "hn") << p;
        EXPECT_EQ(d.info.int_bits, 4) << p;
    }
    Detected a = detect(root + "/-lead/\xc3\xa9t\xc3\xa9.v"); // absolute
    EXPECT_EQ(a.rc, MTS_OK) << a.msg;
    EXPECT_EQ(chdir(cwd), 0);
    EXPECT_NE(access((root + "/PWNED").c_str(), F_OK), 0) << "a command in a file name ran";
    EXPECT_NE(access((std::string(cwd) + "/PWNED").c_str(), F_OK), 0) << "a command in a file name ran";
}

TEST(RtlDetect, RelativePathThroughParentDirectory)
{
    NEED_VERILATOR();
    // `--rtl ../rtl/x.v`: Verilator records the file in its own spelling
    std::string root = tmpdir() + "/rel";
    mkdir(root.c_str(), 0755);
    mkdir((root + "/rtl").c_str(), 0755);
    mkdir((root + "/run").c_str(), 0755);
    ASSERT_EQ(sh("cp '" + kData + "mul4.v' '" + root + "/rtl/'"), 0);
    char cwd[4096];
    ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
    ASSERT_EQ(chdir((root + "/run").c_str()), 0);
    Detected d = detect("../rtl/mul4.v");
    Detected e = detect("../run/../rtl/./mul4.v");
    EXPECT_EQ(chdir(cwd), 0);
    ASSERT_EQ(d.rc, MTS_OK) << d.msg;
    EXPECT_STREQ(d.info.top, "mul4");
    ASSERT_EQ(e.rc, MTS_OK) << e.msg;
    EXPECT_STREQ(e.info.top, "mul4");
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
