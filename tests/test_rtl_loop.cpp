// RTL in the loop: the model cache (a second open builds nothing), a design
// outside rtl/, the per-product RTL provider against the LUT swept from the
// same design in a GEMM and a dense layer's forward and backward passes, and
// the `mantis verify` command line (exit codes, report, JSON).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "test_rng.h"
#include "mantis/gemm.h"
#include "mantis/lut.h"
#include "mantis/nn.h"
#include "test_nn_ctx.h"
#include "mantis/rtl.h"
#include "mantis/verify.h"

namespace {

const std::string kRtl = std::string(MANTIS_SOURCE_DIR) + "/rtl/";
const std::string kData = std::string(MANTIS_TEST_DATA) + "/rtl/";

std::string cache_dir()
{
    std::string bin = MANTIS_BIN;
    return bin.substr(0, bin.rfind('/')) + "/../rtl-cache";
}

class RtlEnv : public ::testing::Environment {
  public:
    void SetUp() override { setenv("MANTIS_CACHE", cache_dir().c_str(), 1); }
};
const auto *env = ::testing::AddGlobalTestEnvironment(new RtlEnv);

struct Handle {
    mts_rtl *r = nullptr;
    ~Handle() { mts_rtl_close(r); }
};

std::vector<float> randoms(size_t n, uint64_t seed)
{
    std::vector<float> v(n);
    for (auto &x : v) x = (float)((double)(splitmix64(&seed) >> 11) / 9007199254740992.0 * 4.0 - 2.0);
    return v;
}

TEST(RtlLoop, DesignOutsideRtlIsCachedBySecondOpen)
{
    NEED_RTL_TOOLS();
    // a fresh copy with a unique comment: new content, so a new cache entry
    char dir[] = "/tmp/mantis-rtl-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string path = std::string(dir) + "/my_mul.v";
    {
        std::string text = slurp(kRtl + "mul_mitchell.v");
        size_t at = text.find("module mul_mitchell");
        ASSERT_NE(at, std::string::npos);
        text.replace(at, std::strlen("module mul_mitchell"), "module my_mul");
        std::ofstream f(path);
        f << "// copy made by test_rtl_loop in " << dir << ", pid " << getpid() << "\n" << text;
    }
    mts_rtl_opts o{};
    o.path = path.c_str();
    o.param[o.nparams++] = "M=3";
    mts_err err{};
    Handle h1, h2;
    ASSERT_EQ(mts_rtl_open(&o, &h1.r, &err), MTS_OK) << err.msg;
    const mts_rtl_info *i1 = mts_rtl_get_info(h1.r);
    EXPECT_EQ(i1->cache_hit, 0);
    EXPECT_EQ(i1->kind, MTS_RTL_SIG);
    ASSERT_EQ(mts_rtl_open(&o, &h2.r, &err), MTS_OK) << err.msg;
    const mts_rtl_info *i2 = mts_rtl_get_info(h2.r);
    EXPECT_EQ(i2->cache_hit, 1);
    EXPECT_STREQ(i1->so_path, i2->so_path);
    // both handles work, and agree with the Mitchell rule at M = 3
    mts_mulop op;
    ASSERT_EQ(mts_rtl_mulop(h2.r, &op, &err), MTS_OK) << err.msg;
    EXPECT_EQ(op.fn(&op, 0x3FA00000u, 0x3FC00000u), 0x3FE00000u); // 1.25 * 1.5 ~ 1 + .25 + .5
    EXPECT_EQ(op.fn(&op, 0x3FE00000u, 0xBFE00000u), 0xC0400000u); // 1.75 * -1.75 ~ -2(.75 + .75)
    mts_verify_opts vo{};
    vo.model = "mitchell";
    mts_verify_result res{};
    ASSERT_EQ(mts_verify_rtl(h1.r, &vo, &res, &err), MTS_OK) << err.msg;
    EXPECT_EQ(res.mismatches, 0u);
    // a different parameter is a different model
    mts_rtl_opts o4 = o;
    o4.param[0] = "M=2";
    Handle h3;
    ASSERT_EQ(mts_rtl_open(&o4, &h3.r, &err), MTS_OK) << err.msg;
    EXPECT_STRNE(mts_rtl_get_info(h3.r)->hash, i1->hash);
    // tidy: the entries of this unique copy are of no later use
    std::string rm = "rm -rf '" + std::string(dir) + "'";
    for (const char *hash : {i1->hash, mts_rtl_get_info(h3.r)->hash})
        rm += " '" + cache_dir() + "/rtl/" + hash + "' '" + cache_dir() + "/rtl/" + hash + ".lock'";
    EXPECT_EQ(std::system(rm.c_str()), 0);
}

// C = A x B with every product from op and FP32 sums in k order from +0.
std::vector<float> gemm_by(const mts_mulop &op, const std::vector<float> &A, const std::vector<float> &B, int m, int n,
                           int k)
{
    std::vector<float> C((size_t)m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int t = 0; t < k; t++) {
                uint32_t a, b;
                std::memcpy(&a, &A[(size_t)i * k + t], 4);
                std::memcpy(&b, &B[(size_t)t * n + j], 4);
                uint32_t p = op.fn(&op, a, b);
                float pf;
                std::memcpy(&pf, &p, 4);
                acc = acc + pf;
            }
            C[(size_t)i * n + j] = acc;
        }
    return C;
}

TEST(RtlLoop, GemmThroughRtlEqualsGemmThroughItsLut)
{
    NEED_RTL_TOOLS();
    Handle h;
    mts_rtl_opts o{};
    std::string path = kRtl + "mul_mbm.v";
    o.path = path.c_str();
    mts_err err{};
    ASSERT_EQ(mts_rtl_open(&o, &h.r, &err), MTS_OK) << err.msg;
    mts_mulop rtl_op, lut_op;
    ASSERT_EQ(mts_rtl_mulop(h.r, &rtl_op, &err), MTS_OK) << err.msg;
    mts_lut lut{};
    ASSERT_EQ(mts_rtl_lut(h.r, &lut, &err), MTS_OK) << err.msg;
    mts_mulop_lut(&lut_op, &lut);
    // the fast sweep's table equals the general LUT generator run on the mulop
    mts_lut slow{};
    ASSERT_EQ(mts_lut_generate(&rtl_op, &slow, &err), MTS_OK) << err.msg;
    ASSERT_EQ(slow.n, lut.n);
    EXPECT_EQ(std::memcmp(slow.entry, lut.entry, lut.n * 4), 0);
    mts_lut_free(&slow);
    const int m = 32, k = 48, n = 40;
    std::vector<float> A = randoms((size_t)m * k, 1), B = randoms((size_t)k * n, 2);
    std::vector<float> c1 = gemm_by(rtl_op, A, B, m, n, k), c2 = gemm_by(lut_op, A, B, m, n, k);
    EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * 4), 0);
    // and the approximation is really in the loop: not the exact product
    mts_mulop exact;
    mts_format bf = mts_rtl_get_info(h.r)->fmt;
    ASSERT_EQ(mts_mulop_model(&exact, "exact", &bf, &err), MTS_OK);
    std::vector<float> c3 = gemm_by(exact, A, B, m, n, k);
    EXPECT_NE(std::memcmp(c1.data(), c3.data(), c1.size() * 4), 0);
    mts_lut_free(&lut);
}

TEST(RtlLoop, DenseLayerForwardAndBackwardThroughRtlEqualTheLut)
{
    NEED_RTL_TOOLS();
    Handle h;
    mts_rtl_opts o{};
    std::string path = kRtl + "mul_mbm.v";
    o.path = path.c_str();
    mts_err err{};
    ASSERT_EQ(mts_rtl_open(&o, &h.r, &err), MTS_OK) << err.msg;
    mts_mulop rtl_op;
    ASSERT_EQ(mts_rtl_mulop(h.r, &rtl_op, &err), MTS_OK) << err.msg;
    mts_lut lut{};
    ASSERT_EQ(mts_rtl_lut(h.r, &lut, &err), MTS_OK) << err.msg;
    mts_provider prtl{}, plut{};
    prtl.kind = MTS_PROV_MULOP;
    prtl.mul = &rtl_op;
    plut.kind = MTS_PROV_LUT;
    plut.lut = &lut;
    const int N = 6, in = 48, out = 40;
    std::vector<float> x = randoms((size_t)N * in, 3), w = randoms((size_t)out * in, 4), b = randoms(out, 5);
    std::vector<float> dy = randoms((size_t)N * out, 6);
    std::vector<float> y1((size_t)N * out), y2(y1.size());
    ASSERT_EQ(mts_dense_forward(NnCtx(&prtl, &prtl).get(), N, in, out, x.data(), w.data(), b.data(), y1.data(), &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_dense_forward(NnCtx(&plut, &plut).get(), N, in, out, x.data(), w.data(), b.data(), y2.data(), &err), MTS_OK) << err.msg;
    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0);
    std::vector<float> dx1(x.size()), dx2(x.size()), dw1(w.size()), dw2(w.size()), db1(out), db2(out);
    ASSERT_EQ(mts_dense_backward(NnCtx(&prtl, &prtl).get(), N, in, out, x.data(), w.data(), dy.data(),
                                 dx1.data(), dw1.data(), db1.data(), &err),
              MTS_OK)
        << err.msg;
    ASSERT_EQ(mts_dense_backward(NnCtx(&plut, &plut).get(), N, in, out, x.data(), w.data(), dy.data(),
                                 dx2.data(), dw2.data(), db2.data(), &err),
              MTS_OK)
        << err.msg;
    EXPECT_EQ(std::memcmp(dx1.data(), dx2.data(), dx1.size() * 4), 0);
    EXPECT_EQ(std::memcmp(dw1.data(), dw2.data(), dw1.size() * 4), 0);
    EXPECT_EQ(std::memcmp(db1.data(), db2.data(), db1.size() * 4), 0);
    mts_lut_free(&lut);
}

// Runs the CLI; returns the exit status and fills out with stdout+stderr.
int run_cli(const std::string &args, std::string &out)
{
    std::string cmd = std::string(MANTIS_BIN) + " " + args + " 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    size_t n;
    out.clear();
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(RtlLoop, VerifyCommandExitCodesReportAndJson)
{
    NEED_RTL_TOOLS();
    std::string out;
    char json[] = "/tmp/mantis-verify-json-XXXXXX";
    int fd = mkstemp(json);
    ASSERT_GE(fd, 0);
    close(fd);
    EXPECT_EQ(run_cli("verify --rtl " + kRtl + "mul_mitchell.v --mul mitchell --json " + json, out), 0) << out;
    EXPECT_NE(out.find("summary:"), std::string::npos) << out;
    EXPECT_NE(out.find("bit-exact"), std::string::npos) << out;
    std::string js = slurp(json);
    EXPECT_NE(js.find("\"result\": \"bit-exact\""), std::string::npos) << js;
    EXPECT_NE(js.find("\"mismatches\": 0"), std::string::npos) << js;
    std::remove(json);

    // mismatches: listing stops after N, every mismatch is counted
    EXPECT_EQ(run_cli("verify --rtl " + kRtl + "mul_trunc.v --mul exact --max-report 3", out), 1) << out;
    size_t lines = 0;
    for (size_t pos = 0; (pos = out.find("  a=", pos)) != std::string::npos; pos++) lines++;
    EXPECT_EQ(lines, 3u) << out;
    EXPECT_NE(out.find("more mismatches not listed"), std::string::npos) << out;
    EXPECT_NE(out.find("[mantissa]"), std::string::npos) << out;
    EXPECT_NE(out.find("MISMATCH"), std::string::npos) << out;

    // could not run: one line, exit 2
    EXPECT_EQ(run_cli("verify --rtl " + kData + "no_shape.v", out), 2) << out;
    EXPECT_EQ(out.rfind("mantis verify: ", 0), 0u) << out;
    EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
    EXPECT_EQ(run_cli("verify --rtl " + kRtl + "mul_exact.v --mul nosuch", out), 2) << out;
}

} // namespace
