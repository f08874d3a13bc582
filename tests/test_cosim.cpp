// test_cosim.cpp - the SystemC MAC array (include/mantis/cosim.h) and the GEMM
// dump (include/mantis/gemmdump.h): bit-exact against mts_gemm and the naive
// mts_gemm_ref for LUT, FMAq and RTL PEs on ragged GEMMs, cycle counts against
// hand-checked closed forms, a wrong accumulation order caught, malformed
// dumps and unfit designs refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "mantis/cosim.h"
#include "mantis/fpbits.h"
#include "mantis/gemmdump.h"
#include "mantis/json.h"
#include "mantis/nn.h"
#include "mantis/rng.h"
#include "mantis/rtl.h"
#include "test_util.h"

namespace {

#define NEED_SYSTEMC() \
    if (!mts_cosim_available()) GTEST_SKIP() << "built without SystemC"

// An m x n x k GEMM with U(-1, 1) operands and a few edge values (signed
// zeros, a subnormal, huge values, one inf) at fixed places; owns its arrays.
struct Gemm {
    std::vector<float> a, b;
    mts_gemmdump g;
    Gemm(int m, int n, int k, uint64_t seed, bool specials = true) : a((size_t)m * k), b((size_t)k * n)
    {
        mts_rng r = {seed};
        for (auto &x : a) x = mts_rng_uniform(&r) * 2.0f - 1.0f;
        for (auto &x : b) x = mts_rng_uniform(&r) * 2.0f - 1.0f;
        if (specials) {
            a[0] = 0.0f, a[1] = -0.0f, a[2] = 1e-40f, b[3] = -0.0f, a[a.size() - 1] = 3e38f, b[b.size() - 1] = 2.5e38f;
            b[(size_t)(k / 2) * n] = INFINITY;
        }
        memset(&g, 0, sizeof g);
        g.m = m, g.n = n, g.k = k, g.A = a.data(), g.B = b.data();
        snprintf(g.layer, sizeof g.layer, "test");
    }
};

struct Lut {
    mts_lut lut;
    mts_mulop op;
    explicit Lut(const char *model = "mbm", int M = 7)
    {
        mts_format f = mts_format_e8(M);
        mts_err err;
        EXPECT_EQ(mts_mulop_model(&op, model, &f, &err), MTS_OK) << err.msg;
        EXPECT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK) << err.msg;
    }
    ~Lut() { mts_lut_free(&lut); }
    mts_provider prov(bool fmaq) const
    {
        mts_provider p;
        memset(&p, 0, sizeof p);
        p.kind = MTS_PROV_LUT, p.lut = &lut, p.threads = 1;
        if (fmaq) p.fmaq = 1, p.qacc = qfmt(3, 4, 6), p.qprod = qfmt(4, 4, 8), p.chunk = 5;
        return p;
    }
};

// Runs the array; also compares its C with the naive mts_gemm_ref (chunk as the array's).
mts_cosim_result run(const mts_provider &p, const Gemm &g, int R, int C, int df, int wrong = 0)
{
    mts_cosim_config c;
    memset(&c, 0, sizeof c);
    c.rows = R, c.cols = C, c.dataflow = df, c.p = &p, c.check = 1, c.test_wrong_order = wrong;
    mts_cosim_result r;
    mts_err err;
    std::vector<float> out((size_t)g.g.m * g.g.n), ref(out.size());
    EXPECT_EQ(mts_cosim_run(&c, &g.g, out.data(), &r, &err), MTS_OK) << err.msg;
    mts_provider q = p;
    if (df == MTS_COSIM_WS) q.chunk = R;
    EXPECT_EQ(mts_gemm_ref(&q, 0, 0, g.g.m, g.g.n, g.g.k, g.a.data(), g.g.k, g.b.data(), g.g.n, 0.0f, ref.data(),
                           g.g.n, &err), MTS_OK);
    size_t diff = 0;
    for (size_t i = 0; i < out.size(); i++) diff += mts_f2u(out[i]) != mts_f2u(ref[i]);
    if (!wrong) {
        EXPECT_EQ(diff, 0u) << "array differs from mts_gemm_ref";
    }
    uint64_t f, cc, d, total = mts_cosim_cycles(df, R, C, g.g.m, g.g.n, g.g.k, &f, &cc, &d);
    EXPECT_EQ(r.cycles, total);
    EXPECT_EQ(r.fill, f);
    EXPECT_EQ(r.compute, cc);
    EXPECT_EQ(r.drain, d);
    EXPECT_EQ(r.products, (uint64_t)g.g.m * g.g.n * g.g.k);
    return r;
}

std::string show(const mts_cosim_result &r)
{
    char b[128] = "";
    if (r.nshow) snprintf(b, sizeof b, "C[%d][%d] array 0x%08X gemm 0x%08X", r.show_i[0], r.show_j[0], r.got[0], r.want[0]);
    return b;
}

} // namespace

TEST(Cosim, LutBitExactOnRaggedGemms)
{
    NEED_SYSTEMC();
    Lut l;
    const int arrays[3][2] = {{2, 2}, {4, 4}, {3, 5}};
    for (auto &a : arrays)
        for (int df : {MTS_COSIM_WS, MTS_COSIM_OS})
            for (bool fmaq : {false, true}) {
                Gemm g(7, 9, 11, 100 + a[0] * 10 + a[1]);
                mts_provider p = l.prov(fmaq);
                mts_cosim_result r = run(p, g, a[0], a[1], df);
                EXPECT_TRUE(r.checked);
                EXPECT_EQ(r.mismatches, 0u) << a[0] << "x" << a[1] << " df " << df << " fmaq " << fmaq << " " << show(r);
            }
}

TEST(Cosim, NativeAndModelProviders)
{
    NEED_SYSTEMC();
    Gemm g(5, 6, 9, 7);
    mts_provider p;
    memset(&p, 0, sizeof p);
    p.kind = MTS_PROV_NATIVE, p.threads = 1;
    EXPECT_EQ(run(p, g, 3, 5, MTS_COSIM_WS).mismatches, 0u);
    Lut l("mitchell", 5);
    p.kind = MTS_PROV_MULOP, p.mul = &l.op;
    EXPECT_EQ(run(p, g, 4, 4, MTS_COSIM_WS).mismatches, 0u);
}

// Hand-checked: WS 2x2 on m=3, n=3, k=5: 3 k-tiles x 2 n-tiles (Ct = 2, 1).
// Per tile: 2 edges of weight preload; activation m enters row 0 at edge m,
// its column-c sum leaves row 1 at edge m+1+c and is buffered at m+2+c, so the
// stream lasts M + R + Ct - 1 edges: 6 (Ct = 2) or 5. 3*(2+6) + 3*(2+5) = 45
// = fill 12 + compute 18 + drain 15. OS 2x2: tiles (Rt, Ct) = (2,2) (1,2)
// (2,1) (1,1); the far PE's last product is at edge K-1 + Rt-1 + Ct-1, then R
// = 2 shift edges: (7+2) + (6+2) + (6+2) + (5+2) = 32 = compute 20 + drain 12.
TEST(Cosim, CyclesMatchHandCheckedClosedForm)
{
    NEED_SYSTEMC();
    Lut l;
    Gemm g(3, 3, 5, 3);
    mts_provider p = l.prov(false);
    mts_cosim_result r = run(p, g, 2, 2, MTS_COSIM_WS);
    EXPECT_EQ(r.cycles, 45u);
    EXPECT_EQ(r.fill, 12u);
    EXPECT_EQ(r.compute, 18u);
    EXPECT_EQ(r.drain, 15u);
    EXPECT_EQ(r.pe_cycles, 45u * 4);
    EXPECT_DOUBLE_EQ(r.utilisation, 45.0 / 180.0);
    r = run(p, g, 2, 2, MTS_COSIM_OS);
    EXPECT_EQ(r.cycles, 32u);
    EXPECT_EQ(r.fill, 0u);
    EXPECT_EQ(r.compute, 20u);
    EXPECT_EQ(r.drain, 12u);
    // a single tile: WS 4x4 on k = 4, n = 4, m = 10: 4 + 10 + 4 + 4 - 1
    Gemm one(10, 4, 4, 5);
    EXPECT_EQ(run(p, one, 4, 4, MTS_COSIM_WS).cycles, 21u);
}

// A chunk sum can be -0 (a negative sum flushed below the accumulator's R_UF
// keeps its sign); mts_fmaq_dot keeps it (y = S_0, Q(-0 + -0) = -0). The array
// matches only because the output buffer stores the first tile's sum as it is
// and the short last tile's unused rows pass the sum through (docs/cosim.md).
TEST(Cosim, NegativeZeroChunkSums)
{
    NEED_SYSTEMC();
    Lut l;
    Gemm g(3, 2, 5, 1, false);
    for (auto &x : g.a) x = -0.015625f; // -2^-6
    for (auto &x : g.b) x = 0.03125f;   //  2^-5: products -2^-11, kept by Q_prod (b 12), flushed by Q_acc (b 10)
    mts_provider p = l.prov(true);
    p.qprod = qfmt(7, 4, 12), p.qacc = qfmt(7, 4, 10);
    for (int df : {MTS_COSIM_WS, MTS_COSIM_OS}) {
        mts_cosim_config c;
        memset(&c, 0, sizeof c);
        c.rows = 2, c.cols = 2, c.dataflow = df, c.p = &p, c.check = 1;
        std::vector<float> out(6);
        mts_cosim_result r;
        mts_err err;
        ASSERT_EQ(mts_cosim_run(&c, &g.g, out.data(), &r, &err), MTS_OK) << err.msg;
        EXPECT_EQ(r.mismatches, 0u) << show(r);
        for (float v : out) EXPECT_EQ(mts_f2u(v), 0x80000000u);
    }
}

// FP32 sums of bf16 LUT products (16-bit significands) are mostly exact, so
// the FP32 case uses native FP32 products, whose sums round.
TEST(Cosim, WrongAccumulationOrderIsCaught)
{
    NEED_SYSTEMC();
    Lut l;
    for (bool fmaq : {false, true}) {
        Gemm g(8, 5, 23, 11, false);
        mts_provider p = l.prov(fmaq);
        if (!fmaq) p.kind = MTS_PROV_NATIVE, p.lut = NULL;
        mts_cosim_result r = run(p, g, 4, 5, MTS_COSIM_WS, 1);
        EXPECT_GT(r.mismatches, 0u) << "fmaq " << fmaq;
        EXPECT_GT(r.nshow, 0);
        EXPECT_NE(r.got[0], r.want[0]);
        // and the correct order on the same data passes
        EXPECT_EQ(run(p, g, 4, 5, MTS_COSIM_WS).mismatches, 0u);
    }
}

// One unchecked run: its status, the message in *msg.
static int try_run(const mts_provider &p, const Gemm &g, int R, int C, std::string *msg, const char *vcd = nullptr)
{
    mts_cosim_config c;
    memset(&c, 0, sizeof c);
    c.p = &p, c.rows = R, c.cols = C, c.vcd = vcd;
    mts_cosim_result r;
    mts_err err = {""};
    int rc = mts_cosim_run(&c, &g.g, NULL, &r, &err);
    *msg = err.msg;
    return rc;
}

TEST(Cosim, RefusesArraysLargerThanTheGemm)
{
    Lut l;
    Gemm g(6, 3, 4, 1);
    mts_provider p = l.prov(false);
    std::string msg;
    EXPECT_EQ(try_run(p, g, 5, 3, &msg), MTS_EINVAL);
    EXPECT_NE(msg.find("larger than the GEMM"), std::string::npos) << msg;
    EXPECT_EQ(try_run(p, g, 4, 4, &msg), MTS_EINVAL);
    EXPECT_EQ(try_run(p, g, 0, 2, &msg), MTS_EINVAL);
    // waveforms only for small runs
    Gemm big(4096, 32, 32, 1, false);
    std::string base = tmpdir() + "/big";
    EXPECT_EQ(try_run(p, big, 32, 32, &msg, base.c_str()), MTS_EINVAL);
    EXPECT_NE(msg.find("small runs"), std::string::npos) << msg;
}

TEST(Cosim, WithoutSystemCSaysSo)
{
    if (mts_cosim_available()) GTEST_SKIP() << "this build has SystemC";
    Lut l;
    Gemm g(4, 4, 4, 1);
    mts_provider p = l.prov(false);
    std::string msg;
    EXPECT_EQ(try_run(p, g, 2, 2, &msg), MTS_EUNSUPPORTED);
    EXPECT_NE(msg.find("built without SystemC"), std::string::npos) << msg;
    CliResult r = run_cli("cosim --mul mbm --array 2x2 --gemm /nonexistent.gemm");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("built without SystemC"), std::string::npos) << r.err;
}

TEST(Cosim, VcdWaveforms)
{
    NEED_SYSTEMC();
    Lut l;
    Gemm g(3, 2, 2, 9);
    mts_provider p = l.prov(false);
    mts_cosim_config c;
    memset(&c, 0, sizeof c);
    std::string base = tmpdir() + "/wave";
    c.p = &p, c.rows = 2, c.cols = 2, c.vcd = base.c_str(), c.check = 1;
    mts_cosim_result r;
    mts_err err;
    ASSERT_EQ(mts_cosim_run(&c, &g.g, NULL, &r, &err), MTS_OK) << err.msg;
    std::string v = slurp(base + ".vcd");
    EXPECT_NE(v.find("$enddefinitions"), std::string::npos);
    EXPECT_NE(v.find("$scope module pe_1_1 $end"), std::string::npos); // "pe_1_1.psum": one scope per PE
    EXPECT_NE(v.find(" psum [31:0]"), std::string::npos);
    c.vcd = "/nonexistent-dir/wave";
    EXPECT_EQ(mts_cosim_run(&c, &g.g, NULL, &r, &err), MTS_EIO);
    EXPECT_NE(std::string(err.msg).find("cannot create the waveform file"), std::string::npos) << err.msg;
    c.vcd = NULL; // and the kernel is still usable
    ASSERT_EQ(mts_cosim_run(&c, &g.g, NULL, &r, &err), MTS_OK) << err.msg;
    EXPECT_EQ(r.mismatches, 0u);
}

TEST(GemmDump, RoundTripAndMalformedFiles)
{
    Gemm g(3, 4, 5, 2);
    g.g.batch = 3;
    std::string f = tmpdir() + "/g.gemm";
    mts_err err;
    ASSERT_EQ(mts_gemmdump_write(f.c_str(), &g.g, &err), MTS_OK) << err.msg;
    mts_gemmdump d;
    ASSERT_EQ(mts_gemmdump_read(f.c_str(), &d, &err), MTS_OK) << err.msg;
    EXPECT_EQ(d.m, 3);
    EXPECT_EQ(d.n, 4);
    EXPECT_EQ(d.k, 5);
    EXPECT_EQ(d.batch, 3);
    EXPECT_STREQ(d.layer, "test");
    EXPECT_EQ(memcmp(d.A, g.a.data(), g.a.size() * 4), 0);
    EXPECT_EQ(memcmp(d.B, g.b.data(), g.b.size() * 4), 0);
    mts_gemmdump_free(&d);

    std::string bytes = slurp(f);
    struct Case {
        const char *what;
        std::string data;
    };
    std::string crc = bytes, ver = bytes, magic = bytes, shape = bytes;
    crc[60] ^= 1;     // a payload byte
    ver[8] = 2;       // version
    magic[0] = 'X';
    shape[12] = 4;    // m = 4: the size no longer matches
    const Case cases[] = {{"CRC mismatch", crc},           {"version 2", ver},
                          {"bad magic", magic},            {"a 4x4x5 GEMM dump has", shape},
                          {"bad magic", bytes.substr(0, 20)}, {"bytes, a 3x4x5", bytes.substr(0, bytes.size() - 1)}};
    for (const Case &c : cases) {
        std::string p = tmpdir() + "/bad.gemm";
        std::ofstream(p, std::ios::binary) << c.data;
        EXPECT_EQ(mts_gemmdump_read(p.c_str(), &d, &err), MTS_EFORMAT) << c.what;
        EXPECT_NE(std::string(err.msg).find(c.what), std::string::npos) << err.msg;
        CliResult r = run_cli("cosim --mul mbm --array 2x2 --gemm " + p);
        EXPECT_EQ(r.status, 2);
        if (mts_cosim_available()) {
            EXPECT_NE(r.err.find(c.what), std::string::npos) << r.err;
        }
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
}

// The tap captures conv2's forward GEMM as mts_net_forward runs it, and the
// dump replays bit-exactly with the provider the layer used.
TEST(GemmDump, TapCapturesANamedLayer)
{
    mts_net net;
    mts_err err;
    ASSERT_EQ(mts_nn_model_build(&net, "lenet5", 1, 28, 28, 10, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_net_build(&net, 2, 1, &err), MTS_OK) << err.msg;
    std::vector<float> x(2 * 28 * 28);
    mts_rng r = {5};
    for (auto &v : x) v = mts_rng_uniform(&r);
    Lut l;
    mts_provider p = l.prov(false);
    std::string f = tmpdir() + "/conv2.gemm", spec = "conv2:" + f;
    mts_gemm_tap tap;
    ASSERT_EQ(mts_gemm_tap_init(&tap, spec.c_str(), &err), MTS_OK);
    mts_nn_ctx ctx = mts_nn_ctx_cpu(&p, NULL);
    ctx.tap = &tap;
    ASSERT_EQ(mts_net_forward(&net, &ctx, 0, 2, x.data(), &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_gemm_tap_result(&tap, &err), MTS_OK) << err.msg;
    mts_gemmdump d;
    ASSERT_EQ(mts_gemmdump_read(f.c_str(), &d, &err), MTS_OK) << err.msg;
    EXPECT_EQ(d.m, 2 * 10 * 10); // N * output pixels
    EXPECT_EQ(d.n, 16);          // output channels
    EXPECT_EQ(d.k, 6 * 25);
    EXPECT_EQ(d.batch, 2);
    EXPECT_STREQ(d.layer, "conv2");
    if (mts_cosim_available()) {
        mts_cosim_config c;
        memset(&c, 0, sizeof c);
        c.p = &p, c.rows = 8, c.cols = 8, c.check = 1;
        mts_cosim_result res;
        ASSERT_EQ(mts_cosim_run(&c, &d, NULL, &res, &err), MTS_OK) << err.msg;
        EXPECT_EQ(res.mismatches, 0u) << show(res);
    }
    mts_gemmdump_free(&d);
    mts_net_free(&net);

    mts_gemm_tap none;
    ASSERT_EQ(mts_gemm_tap_init(&none, "conv9:/tmp/x", &err), MTS_OK);
    EXPECT_EQ(mts_gemm_tap_result(&none, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("ran no GEMM"), std::string::npos);
    EXPECT_EQ(mts_gemm_tap_init(&none, "conv2", &err), MTS_EINVAL);
    EXPECT_EQ(mts_gemm_tap_init(&none, ":file", &err), MTS_EINVAL);
}

TEST(CosimCli, ReportsCheckCyclesAndErrors)
{
    NEED_SYSTEMC();
    Gemm g(6, 5, 7, 4);
    g.g.batch = 2;
    std::string f = tmpdir() + "/cli.gemm", js = tmpdir() + "/cosim.json";
    mts_err err;
    ASSERT_EQ(mts_gemmdump_write(f.c_str(), &g.g, &err), MTS_OK);
    CliResult r = run_cli("cosim --mul mbm --array 3x5 --gemm " + f + " --json " + js);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("bit-exact"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("energy: unavailable"), std::string::npos) << r.out;
    uint64_t total = mts_cosim_cycles(MTS_COSIM_WS, 3, 5, 6, 5, 7, NULL, NULL, NULL);
    mts_json *j = mts_json_load(js.c_str());
    ASSERT_TRUE(j);
    EXPECT_EQ(mts_json_num(j, "cycles", -1), (double)total);
    EXPECT_EQ(mts_json_num(j, "cycles_per_inference", -1), total / 2.0);
    EXPECT_TRUE(mts_json_get(j, "bit_exact")) << "bit_exact field";
    mts_json_free(j);
    r = run_cli("cosim --mul mbm --array 8x2 --gemm " + f);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("larger than the GEMM"), std::string::npos) << r.err;
    r = run_cli("cosim --mul mbm --array 2x2 --gemm " + f + " --mode rtl");
    EXPECT_EQ(r.status, 2);
    r = run_cli("cosim --mul mbm --array 2 --gemm " + f);
    EXPECT_EQ(r.status, 2);
}

// RTL-in-the-loop: every product through the Verilated design, and the FMAq
// accumulator design in every PE.
TEST(CosimRtl, VerilatedMultiplierAndAccumulator)
{
    NEED_SYSTEMC();
    NEED_RTL_TOOLS();
    mts_rtl_opts o;
    memset(&o, 0, sizeof o);
    o.path = MANTIS_SOURCE_DIR "/rtl/mul_mbm.v";
    mts_rtl *mul = nullptr, *acc = nullptr;
    mts_err err;
    ASSERT_EQ(mts_rtl_open(&o, &mul, &err), MTS_OK) << err.msg;
    mts_mulop op;
    ASSERT_EQ(mts_rtl_mulop(mul, &op, &err), MTS_OK) << err.msg;
    mts_provider p;
    memset(&p, 0, sizeof p);
    p.kind = MTS_PROV_MULOP, p.mul = &op, p.threads = 1;
    Gemm g(5, 7, 10, 21);
    for (int df : {MTS_COSIM_WS, MTS_COSIM_OS}) EXPECT_EQ(run(p, g, 3, 5, df).mismatches, 0u);

    o.path = MANTIS_SOURCE_DIR "/rtl/fmaq_acc.v";
    ASSERT_EQ(mts_rtl_open(&o, &acc, &err), MTS_OK) << err.msg;
    const mts_rtl_info *in = mts_rtl_get_info(acc);
    ASSERT_EQ(in->kind, MTS_RTL_ACC);
    p.fmaq = 1, p.qprod = in->qprod, p.qacc = in->qacc;
    mts_cosim_config c;
    memset(&c, 0, sizeof c);
    c.rows = 4, c.cols = 4, c.p = &p, c.check = 1;
    c.acc = [](void *ud, uint32_t prod, uint32_t s) { return mts_rtl_acc((mts_rtl *)ud, prod, s); };
    c.acc_ud = acc;
    mts_cosim_result r;
    ASSERT_EQ(mts_cosim_run(&c, &g.g, NULL, &r, &err), MTS_OK) << err.msg;
    EXPECT_EQ(r.mismatches, 0u) << show(r);

    // an accumulator as the PE's multiplier does not fit
    std::string f = tmpdir() + "/rtl.gemm";
    ASSERT_EQ(mts_gemmdump_write(f.c_str(), &g.g, &err), MTS_OK);
    CliResult cr = run_cli("cosim --rtl " MANTIS_SOURCE_DIR "/rtl/fmaq_acc.v --array 2x2 --gemm " + f);
    EXPECT_EQ(cr.status, 2);
    EXPECT_NE(cr.err.find("does not fit a PE's multiplier"), std::string::npos) << cr.err;
    cr = run_cli("cosim --rtl " MANTIS_SOURCE_DIR "/rtl/mul_mbm.v --acc " MANTIS_SOURCE_DIR "/rtl/mul_mbm.v --array 2x2 --gemm " + f);
    EXPECT_EQ(cr.status, 2);
    EXPECT_NE(cr.err.find("does not fit a PE's accumulator"), std::string::npos) << cr.err;
    mts_rtl_close(acc);
    mts_rtl_close(mul);
}
