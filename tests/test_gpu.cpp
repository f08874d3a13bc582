// test_gpu.cpp - the CUDA GEMM providers and layer-op twins (gpu.h).
// Host-side logic runs everywhere: which providers the GPU takes, the
// "built without CUDA" / "no CUDA device" answers of gpu.h and of mts_gemm
// with device = CUDA. The device tests compare every GPU provider with
// mts_gemm_ref and every layer-op twin with its CPU op, bit for bit.
//
// Built twice: test_gpu links libmantis's nvcc-built kernels (a device
// test skips, naming the reason, without a usable device; with
// MANTIS_REQUIRE_GPU=1 that is a failure), and test_gpu_emu links the same
// kernels built under the CUDA emulation (MTS_GPU_EMU, gpu/emu/), where
// every test runs on every commit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "mantis/fmath.h"
#include "mantis/gemm.h"
#include "mantis/gpu.h"
#include "mantis/intmul.h"
#include "mantis/lut.h"
#include "mantis/mul.h"
#include "mantis/nn_arith.h"
#include "mantis/nn_ckpt.h"
#include "mantis/nn_front.h"
#include "mantis/nn_gpunet.h"
#include "mantis/nn_train.h"
#include "mantis/nn_net.h"
#include "test_rng.h"

// The device check (tests/gpu-check.sh) runs this program away from its
// build tree: MANTIS_TEST_BIN then names the `mantis` its CLI tests run.
static const char *test_mantis_bin()
{
    const char *e = std::getenv("MANTIS_TEST_BIN");
    return e && *e ? e : MANTIS_BIN;
}
#undef MANTIS_BIN
#define MANTIS_BIN test_mantis_bin()
#include "test_util.h"
#if defined(MTS_GPU_EMU)
#include "emu.h"
#endif

namespace {

mts_provider prov(mts_prov_kind kind, const mts_lut *lut = nullptr)
{
    mts_provider p;
    std::memset(&p, 0, sizeof p);
    p.kind = kind;
    p.lut = lut;
    p.threads = 1;
    return p;
}

// Why the GPU tests cannot run here ("" when they can): the probe's own
// answer (built without CUDA, no device, a sanitizer build that CUDA does
// not start in).
std::string no_gpu_reason()
{
    mts_err err;
    if (mts_gpu_probe(nullptr, &err) != MTS_OK) return err.msg;
    return "";
}
// MANTIS_REQUIRE_GPU=1 (the device check, tests/gpu-check.sh): a GPU test
// that cannot run fails instead of skipping.
bool require_gpu()
{
    const char *v = std::getenv("MANTIS_REQUIRE_GPU");
    return v && *v && std::strcmp(v, "0") != 0;
}
#define NEED_GPU()                                                                                        \
    do {                                                                                                  \
        std::string why = no_gpu_reason();                                                                \
        if (!why.empty() && require_gpu()) FAIL() << "MANTIS_REQUIRE_GPU is set, but " << why;            \
        if (!why.empty()) GTEST_SKIP() << why;                                                            \
    } while (0)

#if defined(MTS_GPU_EMU)
// The emulated device switched off for one scope (the "no device" paths).
struct NoEmulatedDevice {
    NoEmulatedDevice() { mts_emu::set_device_present(false); }
    ~NoEmulatedDevice() { mts_emu::set_device_present(true); }
};
#endif

// ----------------------------------------------------------- host side

TEST(GpuHost, ProvidersTheGpuRefusesAreNamed)
{
    mts_err err;
    mts_provider p = prov(MTS_PROV_MULOP);
    EXPECT_EQ(mts_gpu_supports(&p, &err), MTS_EUNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find("provider MULOP is not available on the GPU"), std::string::npos) << err.msg;
    p = prov(MTS_PROV_BLAS);
    EXPECT_EQ(mts_gpu_supports(&p, &err), MTS_EUNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find("provider BLAS is not available on the GPU"), std::string::npos) << err.msg;
    p = prov(MTS_PROV_NATIVE);
    EXPECT_EQ(mts_gpu_supports(&p, &err), MTS_OK);

    mts_lut e5{};
    mts_format f;
    mts_mulop op;
    ASSERT_EQ(mts_format_parse("e5m4", &f, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_mulop_model(&op, "exact", &f, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &e5, &err), MTS_OK) << err.msg;
    p = prov(MTS_PROV_LUT, &e5);
    EXPECT_EQ(mts_gpu_supports(&p, &err), MTS_OK) << err.msg; // any (1,E,M) format
    mts_lut big = e5; // a table above M = 11 (only its format is looked at)
    big.fmt = mts_format_e8(12);
    p = prov(MTS_PROV_LUT, &big);
    EXPECT_EQ(mts_gpu_supports(&p, &err), MTS_EUNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find("E8M12"), std::string::npos) << err.msg;
    mts_lut_free(&e5);

    mts_lut i8{};
    ASSERT_EQ(mts_intmul_exact_lut(8, 0, &i8, &err), MTS_OK) << err.msg;
    p = prov(MTS_PROV_INT, &i8);
    EXPECT_EQ(mts_gpu_supports(&p, &err), MTS_OK);
    p.fmaq = 1;
    EXPECT_EQ(mts_gpu_supports(&p, &err), MTS_EINVAL);
    mts_lut_free(&i8);
}

// The device the tests run on says what it is: the emulation calls itself
// one (its results are never a GPU's), a real device does not.
TEST(GpuHost, DeviceSaysWhatItIs)
{
    NEED_GPU();
    mts_gpu_info info;
    mts_err err;
    ASSERT_EQ(mts_gpu_probe(&info, &err), MTS_OK) << err.msg;
    std::string name = info.name;
#if defined(MTS_GPU_EMU)
    EXPECT_NE(name.find("emulation"), std::string::npos) << name;
    EXPECT_NE(name.find("not a GPU"), std::string::npos) << name;
#else
    EXPECT_EQ(name.find("emulation"), std::string::npos) << "test_gpu runs on " << name;
#endif
    EXPECT_GE(info.cc_major, 8) << name; // the kernels are built for sm_80 and sm_90
    EXPECT_GT(info.mem_total, (size_t)0);
}

// No silent fallback: where nvcc is installed, the configured build has the
// CUDA half (unless MANTIS_CUDA=OFF asked otherwise).
bool nvcc_installed(std::string *where)
{
    const char *cx = std::getenv("CUDACXX");
    if (cx && *cx && access(cx, X_OK) == 0) return *where = cx, true;
    if (access("/usr/local/cuda/bin/nvcc", X_OK) == 0) return *where = "/usr/local/cuda/bin/nvcc", true;
    const char *path = std::getenv("PATH");
    for (std::string p = path ? path : "", dir; !p.empty();) {
        size_t c = p.find(':');
        dir = p.substr(0, c);
        p = c == std::string::npos ? "" : p.substr(c + 1);
        if (!dir.empty() && access((dir + "/nvcc").c_str(), X_OK) == 0) return *where = dir + "/nvcc", true;
    }
    return false;
}

TEST(GpuHost, CudaHalfBuiltWhereNvccIs)
{
    std::string nvcc;
    bool have = nvcc_installed(&nvcc);
    if (!MTS_TEST_CUDA_OPTION) GTEST_SKIP() << "configured with -DMANTIS_CUDA=OFF: the CUDA half is not wanted";
    if (have) {
        EXPECT_TRUE(MTS_TEST_CUDA_BUILT) << nvcc << " is installed, but this build did not compile gpu/*.cu: "
                                         << "CMake did not enable CUDA (see its 'CUDA:' message)";
    }
#if !defined(MTS_GPU_EMU)
    EXPECT_EQ(mts_gpu_built(), MTS_TEST_CUDA_BUILT ? 1 : 0) << "libmantis disagrees with the build configuration";
#endif
    if (!have) GTEST_SKIP() << "nvcc is not installed here (the build says 'built without CUDA')";
}

// Without CUDA in the build or without a device, every entry point says
// which, and mts_gemm with device = CUDA returns the same answer (never a
// silent CPU fallback).
TEST(GpuHost, UnavailableGpuIsReported)
{
#if defined(MTS_GPU_EMU)
    NoEmulatedDevice off; // the .cu host code's "no device" paths, under the emulation
#endif
    mts_err err;
    int rc = mts_gpu_probe(nullptr, &err);
    if (rc == MTS_OK) GTEST_SKIP() << "a CUDA device is present: the unavailable paths cannot be reached";
    EXPECT_EQ(rc, MTS_EUNSUPPORTED);
    std::string want = mts_gpu_built() ? "no CUDA device" : "built without CUDA";
    EXPECT_NE(std::string(err.msg).find(want), std::string::npos) << err.msg;

    void *d = reinterpret_cast<void *>(1);
    EXPECT_EQ(mts_gpu_alloc(&d, 1024, &err), MTS_EUNSUPPORTED);
    EXPECT_EQ(d, nullptr);
    EXPECT_NE(std::string(err.msg).find(want), std::string::npos) << err.msg;

    mts_provider p = prov(MTS_PROV_NATIVE);
    mts_gpu_gemm_plan *pl = reinterpret_cast<mts_gpu_gemm_plan *>(1);
    EXPECT_EQ(mts_gpu_plan_open(&p, &pl, &err), MTS_EUNSUPPORTED);
    EXPECT_EQ(pl, nullptr);

    p.device = MTS_GPU_DEVICE_CUDA;
    float A[4] = {1, 2, 3, 4}, B[4] = {1, 0, 0, 1}, C[4] = {7, 7, 7, 7};
    EXPECT_EQ(mts_gemm(&p, 0, 0, 2, 2, 2, A, 2, B, 2, 0.0f, C, 2, &err), MTS_EUNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find(want), std::string::npos) << err.msg;
    EXPECT_EQ(C[0], 7.0f) << "C must be untouched when the GPU is unavailable";

    // a provider the GPU refuses is named before the device is looked for
    p = prov(MTS_PROV_MULOP);
    mts_mulop op;
    mts_format bf16 = mts_format_e8(7);
    ASSERT_EQ(mts_mulop_model(&op, "mbm", &bf16, &err), MTS_OK) << err.msg;
    p.mul = &op;
    p.device = MTS_GPU_DEVICE_CUDA;
    EXPECT_EQ(mts_gemm(&p, 0, 0, 2, 2, 2, A, 2, B, 2, 0.0f, C, 2, &err), MTS_EUNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find("provider MULOP is not available on the GPU"), std::string::npos) << err.msg;

    p.device = 7;
    EXPECT_EQ(mts_gemm(&p, 0, 0, 2, 2, 2, A, 2, B, 2, 0.0f, C, 2, &err), MTS_EINVAL);
}

TEST(GpuHost, CliDeviceCudaSaysWhyNot)
{
#if defined(MTS_GPU_EMU)
    // MANTIS_BIN is mantis-gpuemu: its emulated device switched off too
    NoEmulatedDevice off;
    setenv("MTS_GPUEMU_DEVICES", "0", 1);
    struct Unset {
        ~Unset() { unsetenv("MTS_GPUEMU_DEVICES"); }
    } unset;
#endif
    mts_err err;
    if (mts_gpu_probe(nullptr, &err) == MTS_OK) GTEST_SKIP() << "a CUDA device is present";
    CliResult r = run_cli("train --model lenet300 --data mnist --device cuda --epochs 1 --subset 64");
    EXPECT_EQ(r.status, 2) << r.err;
    std::string want = mts_gpu_built() ? "no CUDA device" : "built without CUDA";
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    r = run_cli("train --model lenet300 --data mnist --device tpu");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("--device"), std::string::npos) << r.err;
}

// ------------------------------------------------------ on the device

// Operands with every special case: zeros of both signs, subnormals, inf,
// NaN, exponent extremes (products that over- and underflow), plain values.
float operand(uint64_t *s)
{
    uint64_t r = splitmix64(s);
    switch (r % 16) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return std::ldexp((float)((r >> 8) & 0x7fffff), -149); // subnormal
    case 3: return (r >> 40) & 1 ? INFINITY : -INFINITY;
    case 4: return r % 97 == 4 ? NAN : 1.0f;
    case 5: return std::ldexp(1.0f + (float)((r >> 8) & 0xffff) / 65536.0f, 100 + (int)((r >> 30) % 28));
    case 6: return -std::ldexp(1.0f + (float)((r >> 8) & 0xffff) / 65536.0f, -100 - (int)((r >> 30) % 26));
    default: {
        float m = (float)((r >> 8) & 0xffffff) / 16777216.0f + 0.25f;
        return ((r >> 60) & 1 ? -m : m) * std::ldexp(1.0f, (int)((r >> 33) % 16) - 8);
    }
    }
}

uint32_t fbits(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// Typical training operands: normal values of modest range, a quarter of
// them zero (ReLU outputs), none special: the tiles kernel 2 runs without
// range checks.
float typical(uint64_t *s)
{
    uint64_t r = splitmix64(s);
    if (r % 4 == 0) return (r >> 9) & 1 ? 0.0f : -0.0f;
    float m = (float)((r >> 8) & 0xffffff) / 16777216.0f + 0.5f;
    return ((r >> 60) & 1 ? -m : m) * std::ldexp(1.0f, (int)((r >> 33) % 24) - 12);
}

// Normal values of every FP32 exponent, and zeros: products at and beyond
// both ends of the range, and between kernel 2's safe range and the ends.
float wide(uint64_t *s)
{
    uint64_t r = splitmix64(s);
    if (r % 8 == 0) return 0.0f;
    float m = (float)((r >> 8) & 0xffffff) / 16777216.0f + 1.0f;
    return ((r >> 60) & 1 ? -m : m) * std::ldexp(1.0f, (int)((r >> 33) % 254) - 126);
}

// The same within 2^-70 .. 2^71: tiles of kernel 2's checked product with
// no operand near the ends of the range.
float mid(uint64_t *s)
{
    uint64_t r = splitmix64(s);
    if (r % 8 == 0) return -0.0f;
    float m = (float)((r >> 8) & 0xffffff) / 16777216.0f + 1.0f;
    return ((r >> 60) & 1 ? -m : m) * std::ldexp(1.0f, (int)((r >> 33) % 141) - 70);
}

// One GEMM on device pointers through an explicit plan running `kernel`
// (mts_gpu_plan_set_kernel); C in and out on the host.
int gemm_dev_kernel(const mts_provider &p, int kernel, int ta, int tb, int m, int n, int k, const std::vector<float> &A,
                    int lda, const std::vector<float> &B, int ldb, float beta, std::vector<float> &C, int ldc,
                    mts_err *err)
{
    mts_gpu_gemm_plan *pl = nullptr;
    void *d[3] = {nullptr, nullptr, nullptr};
    const std::vector<float> *h[3] = {&A, &B, &C};
    int rc = mts_gpu_plan_open(&p, &pl, err);
    if (rc == MTS_OK) rc = mts_gpu_plan_set_kernel(pl, kernel, err);
    for (int i = 0; i < 3 && rc == MTS_OK; i++) {
        rc = mts_gpu_alloc(&d[i], h[i]->size() * 4, err);
        if (rc == MTS_OK) rc = mts_gpu_upload(d[i], h[i]->data(), h[i]->size() * 4, err);
    }
    if (rc == MTS_OK)
        rc = mts_gpu_gemm_dev(pl, ta, tb, m, n, k, (const float *)d[0], lda, (const float *)d[1], ldb, beta,
                              (float *)d[2], ldc, err);
    if (rc == MTS_OK) rc = mts_gpu_download(C.data(), d[2], C.size() * 4, err);
    for (void *x : d) mts_gpu_free(x);
    mts_gpu_plan_close(pl);
    return rc;
}

// Our GPU GEMM against mts_gemm_ref on one shape: mts_gpu_gemm (host
// pointers, the default kernel choice) and each numbered kernel (1 to kmax,
// and with tiles the tiled kernel's 13 and 14; with kmax 12 and a LUT, kernel
// 3p's 15 and 16; INT has 1 and 2) through its own plan; prints the first mismatches with indices and both
// results in hex. gen: the operand generator (default: every special case).
void check(const mts_provider &p, int m, int n, int k, int ta, int tb, float beta, uint64_t seed, const char *what,
           float (*gen)(uint64_t *) = operand, int kmax = 12, bool tiles = false)
{
    uint64_t s = seed;
    int lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 1;
    std::vector<float> A((size_t)(ta ? k : m) * lda + 1), B((size_t)(tb ? n : k) * ldb + 1), C((size_t)m * ldc + 1);
    for (float &v : A) v = gen(&s);
    for (float &v : B) v = gen(&s);
    for (float &v : C) v = operand(&s);
    std::vector<float> R = C, C0 = C, C1;
    mts_err err;
    ASSERT_EQ(mts_gemm_ref(&p, ta, tb, m, n, k, A.data(), lda, B.data(), ldb, beta, R.data(), ldc, &err), MTS_OK)
        << err.msg;
    ASSERT_EQ(mts_gpu_gemm(&p, ta, tb, m, n, k, A.data(), lda, B.data(), ldb, beta, C.data(), ldc, &err), MTS_OK)
        << what << ": " << err.msg;
    std::vector<int> kernels;
    for (int kernel = 1; kernel <= (p.kind == MTS_PROV_INT ? 2 : kmax); kernel++) kernels.push_back(kernel);
    if (p.kind != MTS_PROV_INT && tiles) kernels.insert(kernels.end(), {13, 14});
    if (p.kind == MTS_PROV_LUT && kmax >= 12) kernels.insert(kernels.end(), {15, 16}); // (kernel 3 on packed operands)
    for (int kernel : kernels) {
        C1 = C0;
        ASSERT_EQ(gemm_dev_kernel(p, kernel, ta, tb, m, n, k, A, lda, B, ldb, beta, C1, ldc, &err), MTS_OK)
            << what << " kernel " << kernel << ": " << err.msg;
        for (size_t i = 0; i < C1.size(); i++)
            if (fbits(C1[i]) != fbits(R[i])) {
                ADD_FAILURE() << what << " kernel " << kernel << " m=" << m << " n=" << n << " k=" << k << ": C["
                              << i / ldc << "][" << i % ldc << "] gpu 0x" << std::hex << fbits(C1[i]) << " ref 0x"
                              << fbits(R[i]) << std::dec;
                break;
            }
    }
    int shown = 0, bad = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            uint32_t g = fbits(C[(size_t)i * ldc + j]), r = fbits(R[(size_t)i * ldc + j]);
            if (g == r) continue;
            if (shown++ < 5)
                ADD_FAILURE() << what << " m=" << m << " n=" << n << " k=" << k << " tA=" << ta << " tB=" << tb
                              << " beta=" << beta << ": C[" << i << "][" << j << "] gpu 0x" << std::hex << g
                              << " ref 0x" << r << " (a[i][0] 0x" << fbits(ta ? A[i] : A[(size_t)i * lda])
                              << ", b[0][j] 0x" << fbits(tb ? B[(size_t)j * ldb] : B[j]) << ")" << std::dec;
            bad++;
        }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << m * n << " outputs differ";
    for (int i = 0; i < m; i++) // C's elements between the rows (ldc > n) are not the GEMM's
        for (int j = n; j < ldc && (size_t)i * ldc + j < C.size(); j++)
            if (fbits(C[(size_t)i * ldc + j]) != fbits(R[(size_t)i * ldc + j])) {
                ADD_FAILURE() << what << ": C[" << i << "][" << j << "], outside the " << m << " x " << n
                              << " outputs, was written: 0x" << std::hex << fbits(C[(size_t)i * ldc + j])
                              << " instead of 0x" << fbits(R[(size_t)i * ldc + j]) << std::dec;
                return;
            }
}

// Ragged shapes: 1, primes, tile multiples and a tile plus one.
const int kShapes[][3] = {{1, 1, 1}, {1, 7, 3}, {17, 1, 33}, {31, 37, 41}, {16, 16, 16}, {33, 17, 65}, {5, 3, 0}};

// kmax: the numbered kernels run beside the default choice (TiledKernelEveryProductKind runs them all)
void check_all(const mts_provider &p, const char *what, int kmax = 12)
{
    uint64_t seed = 1;
    for (auto &sh : kShapes)
        for (int t = 0; t < 4; t++) {
            float beta = t == 0 ? 0.0f : t == 1 ? 1.0f : -0.75f;
            check(p, sh[0], sh[1], sh[2], t & 1, (t >> 1) & 1, beta, seed++, what, operand, kmax);
        }
}

TEST(GpuGemm, NativeEqualsReference)
{
    NEED_GPU();
    check_all(prov(MTS_PROV_NATIVE), "native");
}

TEST(GpuGemm, LutEveryMantissaWidth)
{
    NEED_GPU();
    mts_err err;
    for (int M = 1; M <= 11; M++) {
        mts_lut lut{};
        mts_mulop op;
        mts_format f = mts_format_e8(M);
        ASSERT_EQ(mts_mulop_model(&op, M <= 7 ? "mbm" : "trunc", &f, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK) << err.msg;
        std::string what = "lut M=" + std::to_string(M);
        check_all(prov(MTS_PROV_LUT, &lut), what.c_str(), M == 7 || M == 10 ? 8 : 1);
        mts_provider wide = prov(MTS_PROV_LUT, &lut); // operands quantized wider, then truncated
        wide.in_fmt = mts_format_e8(M + 3);
        check(wide, 19, 23, 29, 0, 1, 0.0f, 99, (what + " in_fmt M+3").c_str());
        mts_lut_free(&lut);
    }
}

// Tables of other formats than E8: smaller exponent ranges (products and
// operands overflow and flush), and operands quantized to a wider format
// than the table's. (Saturating formats such as fp8e4m3 cannot be
// tabulated: their overflow depends on the exponents.)
TEST(GpuGemm, LutOtherFormats)
{
    NEED_GPU();
    mts_err err;
    const char *formats[] = {"e4m3", "fp8e5m2", "e6m4", "fp16"};
    for (const char *name : formats) {
        mts_format f;
        mts_mulop op;
        mts_lut lut{};
        ASSERT_EQ(mts_format_parse(name, &f, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_mulop_model(&op, "exact", &f, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK) << err.msg;
        std::string what = std::string("lut ") + name;
        check(prov(MTS_PROV_LUT, &lut), 31, 37, 41, 0, 0, 0.0f, 5, what.c_str());
        check(prov(MTS_PROV_LUT, &lut), 17, 1, 33, 1, 1, -0.75f, 6, what.c_str());
        mts_provider wide = prov(MTS_PROV_LUT, &lut);
        wide.in_fmt = mts_format_e8(f.M + 2); // E8 operands, then the table's own format
        check(wide, 19, 23, 29, 0, 1, 1.0f, 7, (what + " in_fmt e8").c_str());
        mts_lut_free(&lut);
    }
}

TEST(GpuGemm, FmaqChunksBiasesUnderflow)
{
    NEED_GPU();
    mts_err err;
    mts_lut lut{};
    mts_mulop op;
    mts_format bf16 = mts_format_e8(7);
    ASSERT_EQ(mts_mulop_model(&op, "mbm", &bf16, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK) << err.msg;
    const int chunks[] = {1, 5, 16, 64};
    for (int uf = 0; uf <= 1; uf++)
        for (int bias : {8, 12})
            for (int ch : chunks)
                for (int lutp = 0; lutp <= 1; lutp++) {
                    mts_provider p = lutp ? prov(MTS_PROV_LUT, &lut) : prov(MTS_PROV_NATIVE);
                    p.fmaq = 1;
                    p.chunk = ch;
                    // a product quantizer rounding to nearest: the exact 64-bit
                    // form; both RTZ (the default): kernels 2 and 3's 32-bit form
                    const bool rtz = ch == 5 || ch == 64 || (ch == 1 && bias == 8);
                    p.qacc = qfmt(7, 4, bias, uf);
                    p.qprod = qfmt(7, 4, bias, uf, rtz ? MTS_RTZ : MTS_RNE);
                    std::string what = std::string("fmaq ") + (lutp ? "lut" : "native") + " chunk " +
                                       std::to_string(ch) + " bias " + std::to_string(bias) + " uf " +
                                       std::to_string(uf) + (rtz ? " rtz" : " rne");
                    check(p, 13, 11, 70, 0, 0, 0.0f, 7 + ch, what.c_str());
                    check(p, 3, 17, 33, 1, 1, 1.0f, 8 + ch, what.c_str());
                }
    mts_lut_free(&lut);
}

// Kernel 2 on shapes of several 64x64 tiles (and of its Mid and Half
// tiles, 128x32 and 32x64: plan kernels 13, 14) and 16-deep k steps, ragged,
// every transpose: typical operands (the unchecked bf16-like product) and
// special ones (its checked product), for each product kind it has: FP32,
// the bf16-like table in shared memory (M = 7) and in global memory
// (M = 10), the scalar product (an E5 table; a bf16 table with a zero-flag
// entry, which the float table cannot hold), and FMAq over both.
TEST(GpuGemm, TiledKernelEveryProductKind)
{
    NEED_GPU();
    mts_err err;
    mts_format f7 = mts_format_e8(7), f10 = mts_format_e8(10), f5;
    ASSERT_EQ(mts_format_parse("fp8e5m2", &f5, &err), MTS_OK) << err.msg;
    mts_lut l7{}, l10{}, l5{}, lz{};
    mts_mulop op;
    ASSERT_EQ(mts_mulop_model(&op, "mbm", &f7, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &l7, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &lz, &err), MTS_OK) << err.msg;
    lz.entry[3 * 128 + 5] = MTS_LUT_ZERO; // a design whose (1.3/128)(1.5/128) is zero
    mts_lut la{};                         // an asymmetric design: T[a][b] != T[b][a]
    ASSERT_EQ(mts_lut_generate(&op, &la, &err), MTS_OK) << err.msg;
    for (size_t i = 0; i < la.n; i += 7) la.entry[i] ^= 1u << 10;
    ASSERT_EQ(mts_mulop_model(&op, "trunc", &f10, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &l10, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_mulop_model(&op, "exact", &f5, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &l5, &err), MTS_OK) << err.msg;
    struct {
        mts_provider p;
        const char *what;
    } cases[] = {{prov(MTS_PROV_NATIVE), "native"},          {prov(MTS_PROV_LUT, &l7), "lut bf16 mbm"},
                 {prov(MTS_PROV_LUT, &l10), "lut e8m10 trunc"}, {prov(MTS_PROV_LUT, &l5), "lut fp8e5m2"},
                 {prov(MTS_PROV_LUT, &lz), "lut bf16 zero entry"}, {prov(MTS_PROV_LUT, &l7), "fmaq lut bf16"},
                 {prov(MTS_PROV_NATIVE), "fmaq native"},        {prov(MTS_PROV_LUT, &la), "lut bf16 asymmetric"},
                 {prov(MTS_PROV_LUT, &l7), "fmaq lut bf16 rtz"}};
    for (int c : {5, 6, 8}) { // (8: both quantizers RTZ, the default: the 32-bit form)
        cases[c].p.fmaq = 1;
        cases[c].p.chunk = 16;
        cases[c].p.qacc = qfmt(7, 4, 10, 1);
        cases[c].p.qprod = qfmt(7, 4, 12, 1, c == 8 ? MTS_RTZ : MTS_RNE);
    }
    uint64_t seed = 40;
    for (auto &cs : cases)
        for (int t = 0; t < 4; t++) {
            // kernels 1-4, 13, 14 (kernels 5 to 12 have their own test, LongSumKernelEveryProductKind)
            check(cs.p, 130, 67, 50, t & 1, t >> 1, t == 3 ? -0.75f : 0.0f, seed++, cs.what, typical, 4, true);
            check(cs.p, 65, 129, 33, t & 1, t >> 1, t == 1 ? 1.0f : 0.0f, seed++, cs.what, operand, 4, true);
        }
    // INT tables: 16-bit entries in shared memory (signed, unsigned), 32-bit
    // ones from global memory, sums in int32 and (entries near 2^27) int64
    mts_lut i8s{}, i8u{}, i8w{};
    ASSERT_EQ(mts_intmul_exact_lut(8, 1, &i8s, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_intmul_exact_lut(8, 0, &i8u, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_intmul_exact_lut(8, 1, &i8w, &err), MTS_OK) << err.msg;
    for (size_t i = 0; i < i8w.n; i += 5) i8w.entry[i] = (uint32_t)((int32_t)i8w.entry[i] * 4099);
    i8w.entry[77] = 1u << 27;
    for (const mts_lut *l : {&i8s, &i8u, &i8w})
        for (int t = 0; t < 4; t++) check(prov(MTS_PROV_INT, l), 130, 67, 50, t & 1, t >> 1, 0.0f, seed++, "int8", typical);
    mts_lut_free(&i8s), mts_lut_free(&i8u), mts_lut_free(&i8w);
    // k = 1: every output is one product, nothing absorbed by a sum (flushes,
    // overflow, NaN and signed zeros show), over several tiles; kernels 1 to
    // 6 (7 to 12 form their products as 6 does, with fewer rows a block)
    for (auto &cs : cases) {
        check(cs.p, 70, 130, 1, 0, 0, 0.0f, seed++, cs.what, operand, 6, true);
        check(cs.p, 70, 130, 1, 1, 0, 0.0f, seed++, cs.what, wide, 6, true);
        check(cs.p, 70, 130, 1, 0, 1, 0.0f, seed++, cs.what, mid, 6, true);
    }
    mts_lut_free(&l7), mts_lut_free(&l10), mts_lut_free(&l5), mts_lut_free(&lz), mts_lut_free(&la);
}

// Kernel 3 (plan kernels 5 to 10, the long sums of weight gradients), 3c
// (11, 12: FMAq's chunk sums formed by the producers), 3p (15, 16: kernel 3
// on operands packed beforehand, bf16-like tables) and the default
// choice that picks them (k >= 512, too few outputs for the wide tile):
// sums over several of its steps (56 products in layout K3Col, 160 in K3Row
// with five producer warps, 320 with ten; 320 chunks in 3c) and a ragged
// last one, exactly one and two steps (the FP32 sum's 16-deep unroll cut
// anywhere), 8 x 4 output tiles cut at every edge, FMAq chunks that end
// inside a step and across steps (chunk 1, 5, 16, 56, 80; with FMAq also
// k = 1,607 and 3,200: 3c's steps of 320 chunks, full and ragged), for
// every product kind: FP32,
// the bf16 table in shared memory, a 10-bit table read from global memory,
// the "fp32" model (FMAq over native products), with special operands.
TEST(GpuGemm, LongSumKernelEveryProductKind)
{
    NEED_GPU();
    mts_err err;
    mts_format f7 = mts_format_e8(7), f10 = mts_format_e8(10);
    mts_lut l7{}, l10{}, lz{}, la{};
    mts_mulop op;
    ASSERT_EQ(mts_mulop_model(&op, "mbm", &f7, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &l7, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &lz, &err), MTS_OK) << err.msg;
    lz.entry[3 * 128 + 5] = MTS_LUT_ZERO; // not bf16-like: the scalar product
    ASSERT_EQ(mts_lut_generate(&op, &la, &err), MTS_OK) << err.msg;
    for (size_t i = 0; i < la.n; i += 7) la.entry[i] ^= 1u << 10; // T[a][b] != T[b][a]: operand order
    ASSERT_EQ(mts_mulop_model(&op, "trunc", &f10, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &l10, &err), MTS_OK) << err.msg;
    mts_provider ps[] = {prov(MTS_PROV_NATIVE),   prov(MTS_PROV_LUT, &l7), prov(MTS_PROV_LUT, &l10),
                         prov(MTS_PROV_LUT, &lz), prov(MTS_PROV_LUT, &la), prov(MTS_PROV_LUT, &l7),
                         prov(MTS_PROV_NATIVE)};
    const char *what[] = {"native",         "lut bf16",      "lut e8m10",  "lut bf16 zero entry",
                          "lut asymmetric", "fmaq lut bf16", "fmaq native"};
    const int shapes[][3] = {{9, 5, 601}, {8, 4, 56}, {3, 7, 57}, {17, 9, 113}, {1, 1, 520}, {8, 4, 160}, {5, 3, 321},
                             {4, 4, 320}, {6, 5, 640}};
    uint64_t seed = 900;
    for (int c = 0; c < 7; c++)
        for (int chunk : {1, 5, 16, 56, 80}) {
            mts_provider p = ps[c];
            if (c >= 5) {
                p.fmaq = 1;
                p.chunk = chunk;
                p.qacc = qfmt(7, 4, 10, 1);
                // (chunks 1, 16, 80: both RTZ, the 32-bit form; 5, 56: the exact one)
                p.qprod = qfmt(7, 4, 12, 1, chunk == 5 || chunk == 56 ? MTS_RNE : MTS_RTZ);
            } else if (chunk != 5)
                continue; // no chunks without FMAq
            std::string w = std::string(what[c]) + " chunk " + std::to_string(chunk) +
                            (c >= 5 ? (p.qprod.rnd == MTS_RTZ ? " rtz" : " rne") : "");
            for (auto &sh : shapes)
                for (int t = 0; t < 4; t++)
                    check(p, sh[0], sh[1], sh[2], t & 1, t >> 1, t == 2 ? -0.75f : 0.0f, seed++, w.c_str(),
                          t == 3 ? operand : typical);
            if (c >= 5 && chunk <= 5) // several of 3c's steps
                for (int t = 0; t < 4; t++)
                    check(p, t & 1 ? 3 : 4, t & 1 ? 5 : 4, t & 2 ? 3200 : 1607, t & 1, t >> 1, 0.0f, seed++,
                          w.c_str(), t == 3 ? operand : typical);
        }
    for (mts_lut *l : {&l7, &l10, &lz, &la}) mts_lut_free(l);
}

// The host-pointer path keeps plans between calls: a table rewritten in
// place (same provider, same pointers) and a second provider in between
// must give their own results, never a stale plan's.
TEST(GpuGemm, HostPathPlansFollowTheTable)
{
    NEED_GPU();
    mts_err err;
    mts_format f7 = mts_format_e8(7);
    mts_mulop op;
    mts_lut lut{};
    ASSERT_EQ(mts_mulop_model(&op, "mbm", &f7, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK) << err.msg;
    mts_provider p = prov(MTS_PROV_LUT, &lut);
    check(p, 9, 13, 70, 0, 0, 0.0f, 71, "lut bf16 before", typical);
    for (size_t i = 0; i < lut.n; i++) lut.entry[i] ^= 1u << 12; // another design, same pointers
    check(p, 9, 13, 70, 0, 0, 0.0f, 71, "lut bf16 rewritten", typical);
    check(prov(MTS_PROV_NATIVE), 9, 13, 70, 0, 0, 0.0f, 72, "native between", typical);
    p.in_fmt = mts_format_e8(9); // another setting, same table
    check(p, 9, 13, 70, 0, 0, 0.0f, 73, "lut bf16 in_fmt e8m9", typical);
    mts_lut_free(&lut);
}

// A batch of 3 x 2 GEMMs in one launch (outer and inner strides, C's
// between the products untouched) equals mts_gemm_ref on each, every kernel.
TEST(GpuGemm, BatchedEqualsEachGemm)
{
    NEED_GPU();
    mts_err err;
    mts_format f7 = mts_format_e8(7);
    mts_mulop op;
    mts_lut lut{};
    ASSERT_EQ(mts_mulop_model(&op, "mbm", &f7, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK) << err.msg;
    const int m = 17, n = 9, k = 21, lda = 25, ldb = 11, ldc = 10; // A [m][k], B^T [n][k]
    mts_gpu_batch bt{};
    bt.outer = 3, bt.inner = 2;
    bt.a_inner = (size_t)m * lda, bt.a_outer = 2 * bt.a_inner + 5;
    bt.b_inner = 7, bt.b_outer = (size_t)n * ldb + 20; // the two inner B overlap: allowed for inputs
    bt.c_inner = (size_t)m * ldc + 3, bt.c_outer = 2 * bt.c_inner + 1;
    std::vector<float> A(3 * bt.a_outer), B(3 * bt.b_outer), C0(3 * bt.c_outer);
    uint64_t s = 5;
    for (float &v : A) v = typical(&s);
    for (float &v : B) v = typical(&s);
    for (float &v : C0) v = operand(&s);
    std::vector<float> R = C0;
    mts_lut ilut{}; // INT: each GEMM of the batch quantized with its own ranges, as one call each
    ASSERT_EQ(mts_intmul_exact_lut(8, 0, &ilut, &err), MTS_OK) << err.msg;
    for (size_t i = 0; i < ilut.n; i += 5) ilut.entry[i] += (uint32_t)((i % 9) - 4);
    for (mts_provider p : {prov(MTS_PROV_LUT, &lut), prov(MTS_PROV_NATIVE), prov(MTS_PROV_INT, &ilut)}) {
        R = C0;
        for (int o = 0; o < 3; o++)
            for (int i = 0; i < 2; i++)
                ASSERT_EQ(mts_gemm_ref(&p, 0, 1, m, n, k, &A[o * bt.a_outer + i * bt.a_inner], lda,
                                       &B[o * bt.b_outer + i * bt.b_inner], ldb, 1.0f,
                                       &R[o * bt.c_outer + i * bt.c_inner], ldc, &err),
                          MTS_OK)
                    << err.msg;
        for (int kernel = 0; kernel <= 5; kernel++) {
            mts_gpu_gemm_plan *pl = nullptr;
            void *d[3] = {nullptr, nullptr, nullptr};
            const std::vector<float> *h[3] = {&A, &B, &C0};
            ASSERT_EQ(mts_gpu_plan_open(&p, &pl, &err), MTS_OK) << err.msg;
            ASSERT_EQ(mts_gpu_plan_set_kernel(pl, kernel, &err), MTS_OK) << err.msg;
            for (int j = 0; j < 3; j++) {
                ASSERT_EQ(mts_gpu_alloc(&d[j], h[j]->size() * 4, &err), MTS_OK) << err.msg;
                ASSERT_EQ(mts_gpu_upload(d[j], h[j]->data(), h[j]->size() * 4, &err), MTS_OK) << err.msg;
            }
            ASSERT_EQ(mts_gpu_gemm_dev_batched(pl, &bt, 0, 1, m, n, k, (const float *)d[0], lda, (const float *)d[1],
                                               ldb, 1.0f, (float *)d[2], ldc, &err),
                      MTS_OK)
                << err.msg;
            std::vector<float> C(C0.size());
            ASSERT_EQ(mts_gpu_download(C.data(), d[2], C.size() * 4, &err), MTS_OK) << err.msg;
            for (void *x : d) mts_gpu_free(x);
            mts_gpu_plan_close(pl);
            for (size_t i = 0; i < C.size(); i++)
                if (fbits(C[i]) != fbits(R[i])) {
                    ADD_FAILURE() << "batched kernel " << kernel << " kind " << p.kind << ": C[" << i << "] gpu 0x"
                                  << std::hex << fbits(C[i]) << " ref 0x" << fbits(R[i]) << std::dec;
                    break;
                }
        }
    }
    mts_gpu_batch big{};
    big.outer = 300, big.inner = 300;
    mts_gpu_gemm_plan *pl = nullptr;
    mts_provider pn = prov(MTS_PROV_NATIVE);
    ASSERT_EQ(mts_gpu_plan_open(&pn, &pl, &err), MTS_OK) << err.msg;
    EXPECT_EQ(mts_gpu_gemm_dev_batched(pl, &big, 0, 0, 1, 1, 1, nullptr, 1, nullptr, 1, 0.0f, nullptr, 1, &err),
              MTS_EINVAL);
    mts_gpu_plan_close(pl);
    mts_lut_free(&lut);
    mts_lut_free(&ilut);
}

TEST(GpuGemm, KernelNumbersAreChecked)
{
    NEED_GPU();
    mts_err err;
    mts_provider p = prov(MTS_PROV_NATIVE);
    mts_gpu_gemm_plan *pl = nullptr;
    ASSERT_EQ(mts_gpu_plan_open(&p, &pl, &err), MTS_OK) << err.msg;
    EXPECT_EQ(mts_gpu_plan_set_kernel(pl, 17, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("no GEMM kernel 17"), std::string::npos) << err.msg;
    EXPECT_EQ(mts_gpu_plan_set_kernel(pl, 16, &err), MTS_OK);
    EXPECT_EQ(mts_gpu_plan_set_kernel(pl, -1, &err), MTS_EINVAL);
    EXPECT_EQ(mts_gpu_plan_set_kernel(pl, 1, &err), MTS_OK);
    mts_gpu_plan_close(pl);
}

TEST(GpuGemm, IntTables)
{
    NEED_GPU();
    mts_err err;
    for (int sg = 0; sg <= 1; sg++) {
        mts_lut lut{};
        ASSERT_EQ(mts_intmul_exact_lut(sg ? 4 : 8, sg, &lut, &err), MTS_OK) << err.msg;
        for (size_t i = 0; i < lut.n; i += 3) lut.entry[i] += (uint32_t)((i % 7) - 3); // approximate
        check_all(prov(MTS_PROV_INT, &lut), sg ? "int4 signed" : "int8 unsigned");
        mts_lut_free(&lut);
    }
}

TEST(GpuGemm, OutOfDeviceMemoryNamesTheSize)
{
    NEED_GPU();
    mts_err err;
    void *d = nullptr;
    size_t huge = (size_t)1 << 50;
    EXPECT_EQ(mts_gpu_alloc(&d, huge, &err), MTS_ENOMEM);
    EXPECT_EQ(d, nullptr);
    EXPECT_NE(std::string(err.msg).find(std::to_string(huge)), std::string::npos) << err.msg;
}

// ------------------------------------------- layer ops vs their CPU twins

// A device copy of a host vector, freed at scope exit.
template <class T> struct Dev {
    void *p = nullptr;
    size_t n;
    explicit Dev(const std::vector<T> &h) : n(h.size())
    {
        mts_err err;
        EXPECT_EQ(mts_gpu_alloc(&p, n * sizeof(T), &err), MTS_OK) << err.msg;
        EXPECT_EQ(mts_gpu_upload(p, h.data(), n * sizeof(T), &err), MTS_OK) << err.msg;
    }
    ~Dev() { mts_gpu_free(p); }
    T *d() { return (T *)p; }
    std::vector<T> get() const
    {
        std::vector<T> h(n);
        mts_err err;
        EXPECT_EQ(mts_gpu_download(h.data(), p, n * sizeof(T), &err), MTS_OK) << err.msg;
        return h;
    }
};

void expect_same(const std::vector<float> &gpu, const std::vector<float> &cpu, const char *what)
{
    ASSERT_EQ(gpu.size(), cpu.size());
    int bad = 0;
    for (size_t i = 0; i < gpu.size(); i++)
        if (fbits(gpu[i]) != fbits(cpu[i]) && bad++ < 5)
            ADD_FAILURE() << what << "[" << i << "]: gpu 0x" << std::hex << fbits(gpu[i]) << " cpu 0x" << fbits(cpu[i]);
    EXPECT_EQ(bad, 0) << what;
}

std::vector<float> randv(size_t n, uint64_t seed)
{
    std::vector<float> v(n);
    for (float &x : v) {
        uint64_t r = splitmix64(&seed);
        x = ((float)(r & 0xffffff) / 16777216.0f - 0.5f) * std::ldexp(1.0f, (int)((r >> 24) % 8) - 3);
    }
    return v;
}

// Inputs of the row ops with the values that matter: zeros of both signs,
// infinities, NaN, subnormals, huge magnitudes (GELU's tanh saturates, a
// softmax row's exponentials underflow to 0 but the maximum's), the rest
// plain values of mixed scales.
std::vector<float> specials_and(size_t n, uint64_t seed)
{
    const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-40f, 3e38f, -3e38f, 1e30f, -88.0f, 9.5f,
                        -9.5f, 0.54f, 0.56f};
    std::vector<float> v = randv(n, seed);
    for (size_t i = 0; i < n; i += 7) v[i] = sp[(i / 7) % (sizeof sp / sizeof sp[0])];
    return v;
}

TEST(GpuOps, DenseSoftmaxRelu)
{
    NEED_GPU();
    const int N = 67, in = 29, out = 10;
    mts_err err;
    auto x = randv((size_t)N * in, 1), w = randv((size_t)out * in, 2), b = randv(out, 3);
    mts_provider p = prov(MTS_PROV_NATIVE);
    mts_nn_ctx ctx = mts_nn_ctx_cpu(&p, &p);
    mts_gpu_gemm_plan *pl;
    ASSERT_EQ(mts_gpu_plan_open(&p, &pl, &err), MTS_OK) << err.msg;
    std::vector<float> y((size_t)N * out), dx((size_t)N * in), dw((size_t)out * in), db(out), dz((size_t)N * out);
    ASSERT_EQ(mts_dense_forward(&ctx, N, in, out, x.data(), w.data(), b.data(), y.data(), &err), MTS_OK);
    Dev<float> gx(x), gw(w), gb(b), gy(y), gdx(dx), gdw(dw), gdb(db), gdz(dz);
    ASSERT_EQ(mts_gpu_dense_forward(pl, N, in, out, gx.d(), gw.d(), gb.d(), gy.d(), &err), MTS_OK) << err.msg;
    expect_same(gy.get(), y, "dense forward");
    { // a NaN and both infinities among the weights, -inf in the bias: NaN sums stored as the one canonical NaN
        auto ws = w, bs = b;
        ws[1] = NAN, ws[4] = INFINITY, ws[5] = -INFINITY, ws[in + 3] = INFINITY, bs[1] = -INFINITY;
        std::vector<float> ys(y.size());
        ASSERT_EQ(mts_dense_forward(&ctx, N, in, out, x.data(), ws.data(), bs.data(), ys.data(), &err), MTS_OK);
        Dev<float> gws(ws), gbs(bs), gys(ys);
        ASSERT_EQ(mts_gpu_dense_forward(pl, N, in, out, gx.d(), gws.d(), gbs.d(), gys.d(), &err), MTS_OK) << err.msg;
        expect_same(gys.get(), ys, "dense forward, special weights");
    }

    std::vector<uint8_t> lab(N);
    for (int n = 0; n < N; n++) lab[n] = (uint8_t)((n * 7) % out);
    Dev<uint8_t> glab(lab);
    int ok = -1, gok = -2;
    double L = mts_softmax_ce(N, out, y.data(), lab.data(), dz.data(), &ok), gL = 0;
    ASSERT_EQ(mts_gpu_softmax_ce(N, out, gy.d(), glab.d(), gdz.d(), &gL, &gok, &err), MTS_OK) << err.msg;
    EXPECT_EQ(std::memcmp(&L, &gL, sizeof L), 0) << "loss cpu " << L << " gpu " << gL;
    EXPECT_EQ(ok, gok);
    expect_same(gdz.get(), dz, "dlogits");

    ASSERT_EQ(mts_dense_backward(&ctx, N, in, out, x.data(), w.data(), dz.data(), dx.data(), dw.data(), db.data(), &err),
              MTS_OK);
    ASSERT_EQ(mts_gpu_dense_backward(pl, N, in, out, gx.d(), gw.d(), gdz.d(), gdx.d(), gdw.d(), gdb.d(), &err), MTS_OK)
        << err.msg;
    expect_same(gdx.get(), dx, "dense dx");
    expect_same(gdw.get(), dw, "dense dw");
    expect_same(gdb.get(), db, "dense db");

    std::vector<float> r(x.size()), dr(x.size());
    mts_relu_forward(x.size(), x.data(), r.data());
    mts_relu_backward(x.size(), r.data(), x.data(), dr.data());
    Dev<float> gr(r), gdr(dr);
    ASSERT_EQ(mts_gpu_relu_forward(x.size(), gx.d(), gr.d(), &err), MTS_OK);
    ASSERT_EQ(mts_gpu_relu_backward(x.size(), gr.d(), gx.d(), gdr.d(), &err), MTS_OK);
    expect_same(gr.get(), r, "relu forward");
    expect_same(gdr.get(), dr, "relu backward");
    mts_gpu_plan_close(pl);
}

// The accumulator paper's masked STEs on the device: the masks equal
// mts_ste_mask's byte for byte and the masked backward mts_dense_backward's
// bits, over native and LUT products, M4E3 accumulators with and without
// underflow, ragged sizes, special operands; overflow, swamping and
// underflow all occur (the masks must zero something).
TEST(GpuOps, DenseMaskedSteEqualsCpu)
{
    NEED_GPU();
    const int N = 5, in = 37, out = 6;
    mts_err err;
    auto x = specials_and((size_t)N * in, 11), w = specials_and((size_t)out * in, 12),
         dy = specials_and((size_t)N * out, 13);
    const float sp[] = {0.0f, -0.0f, 1e-40f, 3e30f, -INFINITY, NAN, 7.75f, -0.03125f};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) x[i * 23 % x.size()] = sp[i], w[i * 31 % w.size()] = sp[i];
    struct Case { const char *mul; int chunk, no_uf; } cases[] = {{"fp32", 8, 0}, {"bf16", 4, 1}, {"mbm", 16, 0}};
    for (const Case &c : cases) {
        mts_arith_spec s;
        mts_arith_spec_init(&s);
        std::snprintf(s.mul, sizeof s.mul, "%s", c.mul);
        std::snprintf(s.acc, sizeof s.acc, "M4E3");
        s.acc_bias = s.prod_bias = 5;
        s.chunk = c.chunk;
        s.no_underflow = c.no_uf;
        mts_arith af, ab;
        ASSERT_EQ(mts_arith_open(&s, 0, &af, &err), MTS_OK) << err.msg;
        s.acc[0] = 0;
        ASSERT_EQ(mts_arith_open(&s, 0, &ab, &err), MTS_OK) << err.msg;
        mts_gpu_gemm_plan *pf, *pb;
        ASSERT_EQ(mts_gpu_plan_open(&af.p, &pf, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_gpu_plan_open(&ab.p, &pb, &err), MTS_OK) << err.msg;
        Dev<float> gx(x), gw(w), gdy(dy);
        for (mts_ste ste : {MTS_STE_REC_OF, MTS_STE_IMM_OF, MTS_STE_IMM_DIFF}) {
            std::string what = std::string(c.mul) + " " + mts_ste_name(ste);
            std::vector<uint8_t> m((size_t)N * out * in, 9);
            for (int n = 0; n < N; n++)
                for (int o = 0; o < out; o++)
                    mts_ste_mask(&af.p, ste, &x[(size_t)n * in], &w[(size_t)o * in], in, 1, &m[((size_t)n * out + o) * in]);
            size_t zeros = 0;
            for (uint8_t v : m) zeros += v == 0;
            EXPECT_GT(zeros, 0u) << what << ": the data must trigger the STE";
            Dev<uint8_t> gm(std::vector<uint8_t>(m.size(), 9));
            ASSERT_EQ(mts_gpu_ste_mask(pf, (int)ste, N, in, out, gx.d(), gw.d(), gm.d(), &err), MTS_OK) << err.msg;
            auto hm = gm.get();
            for (size_t i = 0; i < m.size(); i++)
                if (hm[i] != m[i]) {
                    ADD_FAILURE() << what << ": mask of product (" << i / in / out << ", " << i / in % out << ", "
                                  << i % in << "): gpu " << (int)hm[i] << " cpu " << (int)m[i] << " (x 0x" << std::hex
                                  << fbits(x[i / in / out * in + i % in]) << ", w 0x" << fbits(w[i / in % out * in + i % in])
                                  << ")";
                    break;
                }
            std::vector<float> dx((size_t)N * in), dw((size_t)out * in), db(out);
            mts_nn_ctx ctx = mts_nn_ctx_cpu(&af.p, &ab.p);
            ctx.ste = ste;
            ASSERT_EQ(mts_dense_backward(&ctx, N, in, out, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                                         db.data(), &err),
                      MTS_OK)
                << err.msg;
            Dev<float> gdx(dx), gdw(dw), gdb(db);
            ASSERT_EQ(mts_gpu_dense_backward_ste(pf, pb, (int)ste, N, in, out, gx.d(), gw.d(), gdy.d(), gdx.d(), gdw.d(),
                                                 gdb.d(), &err),
                      MTS_OK)
                << err.msg;
            expect_same(gdx.get(), dx, (what + " dx").c_str());
            expect_same(gdw.get(), dw, (what + " dw").c_str());
            expect_same(gdb.get(), db, (what + " db").c_str());
        }
        EXPECT_EQ(mts_gpu_ste_mask(pb, (int)MTS_STE_REC_OF, N, in, out, gx.d(), gw.d(), nullptr, &err), MTS_EINVAL)
            << "a provider without FMAq has no STE mask";
        EXPECT_EQ(mts_gpu_ste_mask(pf, (int)MTS_STE_IDENTITY, N, in, out, gx.d(), gw.d(), nullptr, &err), MTS_EINVAL);
        mts_gpu_plan_close(pf);
        mts_gpu_plan_close(pb);
        mts_arith_close(&af);
        mts_arith_close(&ab);
    }
}

// BatchNorm's training forward and its backward on both sides, every
// output (y, running statistics, dx, dgamma, dbeta) bit for bit; what
// prefixes the names of mismatches.
void bn_equals_cpu(int N, int C, int HW, const std::vector<float> &x, const std::vector<float> &dy,
                   const std::vector<float> &gam, const std::vector<float> &bet, const std::string &what)
{
    mts_err err;
    std::vector<float> rm(C, 0.1f), rv(C, 0.9f), y(x.size()), xh(x.size()), is(C), dx(x.size()), dg(C), dbt(C);
    Dev<float> gx(x), gdy(dy), ggam(gam), gbet(bet), grm(rm), grv(rv), gy(y), gxh(xh), gis(is), gdx(dx), gdg(dg),
        gdbt(dbt);
    mts_bn_forward(1, N, C, HW, x.data(), gam.data(), bet.data(), rm.data(), rv.data(), 0.1f, 1e-5f, y.data(),
                   xh.data(), is.data());
    ASSERT_EQ(mts_gpu_bn_forward(1, N, C, HW, gx.d(), ggam.d(), gbet.d(), grm.d(), grv.d(), 0.1f, 1e-5f, gy.d(),
                                 gxh.d(), gis.d(), &err),
              MTS_OK)
        << err.msg;
    expect_same(gy.get(), y, (what + " y").c_str());
    expect_same(grm.get(), rm, (what + " running mean").c_str());
    expect_same(grv.get(), rv, (what + " running var").c_str());
    mts_bn_backward(N, C, HW, dy.data(), gam.data(), xh.data(), is.data(), dx.data(), dg.data(), dbt.data());
    ASSERT_EQ(mts_gpu_bn_backward(N, C, HW, gdy.d(), ggam.d(), gxh.d(), gis.d(), gdx.d(), gdg.d(), gdbt.d(), &err),
              MTS_OK)
        << err.msg;
    expect_same(gdx.get(), dx, (what + " dx").c_str());
    expect_same(gdg.get(), dg, (what + " dgamma").c_str());
    expect_same(gdbt.get(), dbt, (what + " dbeta").c_str());
}

// The fixed-order sums over more than one block's run of chunk sums
// (reduce_rows in gpu/nn_ops.cu: runs of 1,024 chunk sums, then a level of
// the runs' sums): BatchNorm (FP64 sums) over 210,003 terms a channel and a
// dense layer's bias gradient (FP32) over 140,001 rows, with terms of mixed
// magnitudes so that another order shows in the FP32 bits (checked: the odd
// element of a level added into its last pair instead of moved up fails
// here; the FP64 sums of BatchNorm rarely show an order in their float
// results), and one NaN in one column of the gradient (that column's sum the
// one canonical NaN); a range observer's fold and the non-finite check
// over more chunks than their block has threads.
TEST(GpuOps, LongReductionsEqualCpu)
{
    NEED_GPU();
    mts_err err;
    auto mixed = [](size_t n, uint64_t seed) {
        std::vector<float> v = randv(n, seed);
        for (size_t i = 0; i < n; i++) v[i] = std::ldexp(v[i], (int)((i * 37) % 61) - 30);
        return v;
    };
    {
        const int N = 3, C = 2, HW = 70001;
        auto x = mixed((size_t)N * C * HW, 71), dy = mixed(x.size(), 72);
        bn_equals_cpu(N, C, HW, x, dy, {1.5f, -0.5f}, {0.1f, -0.2f}, "long bn");
    }
    {
        const int N = 140001, in = 1, out = 8; // (8 columns: an order that differs shows in most of them)
        auto x = mixed((size_t)N * in, 73), w = mixed((size_t)out * in, 74), dz = mixed((size_t)N * out, 75);
        dz[(size_t)777 * out + 1] = NAN;
        mts_provider p = prov(MTS_PROV_NATIVE);
        mts_nn_ctx ctx = mts_nn_ctx_cpu(&p, &p);
        mts_gpu_gemm_plan *pl;
        ASSERT_EQ(mts_gpu_plan_open(&p, &pl, &err), MTS_OK) << err.msg;
        std::vector<float> dx(x.size()), dw(w.size()), db(out);
        Dev<float> gx(x), gw(w), gdz(dz), gdx(dx), gdw(dw), gdb(db);
        ASSERT_EQ(mts_dense_backward(&ctx, N, in, out, x.data(), w.data(), dz.data(), dx.data(), dw.data(), db.data(),
                                     &err),
                  MTS_OK);
        ASSERT_EQ(mts_gpu_dense_backward(pl, N, in, out, gx.d(), gw.d(), gdz.d(), gdx.d(), gdw.d(), gdb.d(), &err),
                  MTS_OK)
            << err.msg;
        EXPECT_TRUE(std::isnan(db[1]) && !std::isnan(db[0]));
        expect_same(gdb.get(), db, "long dense db");
        mts_gpu_plan_close(pl);
    }
    { // a range observer's min and max over 625 chunks (more than the fold's 256 threads), the extremes far in
        auto x = randv(40000, 76);
        x[400 * 64 + 3] = -20.5f, x[600 * 64 + 10] = 30.25f, x[300 * 64] = NAN, x[500 * 64 + 1] = -INFINITY;
        for (int seen = 0; seen <= 1; seen++) {
            std::vector<float> st = {seen ? -0.3f : 0.0f, seen ? 0.25f : 0.0f, seen ? 1.0f : 0.0f};
            Dev<float> gst(st), gx(x);
            mts_qat_observe(st.data(), x.data(), x.size());
            ASSERT_EQ(mts_gpu_qat_observe(gst.d(), gx.d(), x.size(), &err), MTS_OK) << err.msg;
            expect_same(gst.get(), st, seen ? "long observer, seen" : "long observer, first");
        }
        if (!HasFailure()) {
            std::vector<float> st = {0.0f, 0.0f, 0.0f};
            mts_qat_observe(st.data(), x.data(), x.size());
            EXPECT_EQ(st[0], -20.5f); // the extremes were seen (an exact-range first step)
            EXPECT_EQ(st[1], 30.25f);
        }
    }
    { // the optimizer's non-finite check over 1,563 chunks (more than its block's threads): any inf or NaN, anywhere
        auto p = randv(100000, 77);
        for (size_t at : {(size_t)0, (size_t)70000, (size_t)99999})
            for (float bad : {0.0f, INFINITY, -INFINITY, NAN}) {
                auto q = p;
                if (bad != 0.0f || std::isnan(bad)) q[at] = bad;
                Dev<float> gq(q);
                int any = -1;
                ASSERT_EQ(mts_gpu_nonfinite(q.size(), gq.d(), &any, &err), MTS_OK) << err.msg;
                EXPECT_EQ(any != 0, bad != 0.0f || std::isnan(bad)) << "non-finite check, value " << bad << " at " << at;
            }
    }
}

TEST(GpuOps, BatchNormPoolConvOptimizers)
{
    NEED_GPU();
    mts_err err;
    const int N = 5, C = 3, H = 9, W = 7, HW = H * W;
    auto x = specials_and((size_t)N * C * HW, 5), dy = specials_and(x.size(), 6);
    bn_equals_cpu(N, C, HW, x, dy, {1.5f, 0.5f, -1.0f}, {0.1f, -0.2f, 0.0f}, "bn");
    Dev<float> gx(x);

    for (int k = 2; k <= 3; k++) // k = 3, s = 2: overlapping windows
        for (int s = 1; s <= 2; s++) {
            int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
            std::vector<float> py((size_t)N * C * oh * ow), pdx(x.size()), ay(py.size()), adx(x.size());
            std::vector<int32_t> am(py.size());
            auto pdy = specials_and(py.size(), 7);
            mts_maxpool_forward(N, C, H, W, k, s, x.data(), py.data(), am.data());
            mts_maxpool_backward(N, C, H, W, k, s, pdy.data(), am.data(), pdx.data());
            mts_avgpool_forward(N, C, H, W, k, s, x.data(), ay.data());
            mts_avgpool_backward(N, C, H, W, k, s, pdy.data(), adx.data());
            Dev<float> gpy(py), gpdx(pdx), gay(ay), gadx(adx), gpdy(pdy);
            Dev<int32_t> gam2(am);
            ASSERT_EQ(mts_gpu_maxpool_forward(N, C, H, W, k, s, gx.d(), gpy.d(), gam2.d(), &err), MTS_OK);
            ASSERT_EQ(mts_gpu_maxpool_backward(N, C, H, W, k, s, gpdy.d(), gam2.d(), gpdx.d(), &err), MTS_OK);
            ASSERT_EQ(mts_gpu_avgpool_forward(N, C, H, W, k, s, gx.d(), gay.d(), &err), MTS_OK);
            ASSERT_EQ(mts_gpu_avgpool_backward(N, C, H, W, k, s, gpdy.d(), gadx.d(), &err), MTS_OK);
            expect_same(gpy.get(), py, "maxpool y");
            expect_same(gpdx.get(), pdx, "maxpool dx");
            expect_same(gay.get(), ay, "avgpool y");
            expect_same(gadx.get(), adx, "avgpool dx");
        }

    mts_conv_geom g = {C, H, W, 4, 3, 2, 1, 0, 0};
    ASSERT_EQ(mts_conv_geom_init(&g, &err), MTS_OK);
    size_t K = (size_t)C * 9, NP = (size_t)N * g.oh * g.ow;
    std::vector<float> col(K * NP), cdx(x.size());
    auto dcol = specials_and(K * NP, 8);
    ASSERT_EQ(mts_im2col(&g, N, x.data(), col.data(), &err), MTS_OK);
    ASSERT_EQ(mts_col2im(&g, N, dcol.data(), cdx.data(), &err), MTS_OK);
    Dev<float> gcol(col), gdcol(dcol), gcdx(cdx);
    ASSERT_EQ(mts_gpu_im2col(&g, N, gx.d(), gcol.d(), &err), MTS_OK);
    ASSERT_EQ(mts_gpu_col2im(&g, N, gdcol.d(), gcdx.d(), &err), MTS_OK);
    expect_same(gcol.get(), col, "im2col");
    expect_same(gcdx.get(), cdx, "col2im");

    // optimizers: elementwise, weight decay on a mask
    const size_t n = 1000;
    auto prm = randv(n, 9), grd = specials_and(n, 10);
    std::vector<float> m(n, 0.0f), v(n, 0.0f), p2 = prm;
    std::vector<uint8_t> mask(n);
    for (size_t j = 0; j < n; j++) mask[j] = j % 3 != 0;
    Dev<float> gp(prm), gg(grd), gm(m), gv(v), gp2(p2), gm2(m);
    Dev<uint8_t> gmask(mask);
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 1e-4f;
    for (int t = 1; t <= 3; t++) {
        double bc1 = 1.0 - std::pow(b1, (double)t), bc2 = 1.0 - std::pow(b2, (double)t);
        for (size_t j = 0; j < n; j++) { // mts_opt_step's Adam, on one flat layer
            float g2 = grd[j];
            if (mask[j]) g2 += wd * prm[j];
            m[j] = mts_fm_canon(b1 * m[j] + (1.0f - b1) * g2); // every store: the canonical NaN (optim_hd.h)
            v[j] = mts_fm_canon(b2 * v[j] + (1.0f - b2) * g2 * g2);
            float mh = m[j] / (float)bc1, vh = v[j] / (float)bc2;
            prm[j] = mts_fm_canon(prm[j] - lr * mh / (std::sqrt(vh) + eps));
        }
        ASSERT_EQ(mts_gpu_adam_step(n, gp.d(), gg.d(), gm.d(), gv.d(), gmask.d(), lr, b1, b2, eps, wd, bc1, bc2, &err),
                  MTS_OK);
    }
    expect_same(gp.get(), prm, "adam params");
    expect_same(gv.get(), v, "adam v");
}

// The twins the tests above leave out: global average pooling, BatchNorm
// in evaluation mode (running statistics), SGD with momentum and masked
// weight decay.
TEST(GpuOps, GapBatchNormEvalSgd)
{
    NEED_GPU();
    mts_err err;
    const int N = 3, C = 5, HW = 37;
    auto x = specials_and((size_t)N * C * HW, 11), dy = specials_and((size_t)N * C, 12);
    std::vector<float> y((size_t)N * C), dx(x.size());
    mts_gap_forward(N, C, HW, x.data(), y.data());
    mts_gap_backward(N, C, HW, dy.data(), dx.data());
    Dev<float> gx(x), gy(y), gdy(dy), gdx(dx);
    ASSERT_EQ(mts_gpu_gap_forward(N, C, HW, gx.d(), gy.d(), &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_gpu_gap_backward(N, C, HW, gdy.d(), gdx.d(), &err), MTS_OK) << err.msg;
    expect_same(gy.get(), y, "gap y");
    expect_same(gdx.get(), dx, "gap dx");

    auto gam = randv(C, 13), bet = randv(C, 14), rm = randv(C, 15), rv = randv(C, 16);
    for (float &v : rv) v = std::fabs(v) + 0.5f;
    std::vector<float> by(x.size()), is(C);
    mts_bn_forward(0, N, C, HW, x.data(), gam.data(), bet.data(), rm.data(), rv.data(), 0.1f, 1e-5f, by.data(),
                   nullptr, is.data());
    Dev<float> ggam(gam), gbet(bet), grm(rm), grv(rv), gby(by), gis(is);
    ASSERT_EQ(mts_gpu_bn_forward(0, N, C, HW, gx.d(), ggam.d(), gbet.d(), grm.d(), grv.d(), 0.1f, 1e-5f, gby.d(),
                                 nullptr, gis.d(), &err),
              MTS_OK)
        << err.msg;
    expect_same(gby.get(), by, "bn eval y");
    expect_same(gis.get(), is, "bn eval invstd");
    expect_same(grm.get(), rm, "bn eval leaves the running mean");

    const size_t n = 777;
    auto prm = randv(n, 17), grd = specials_and(n, 18);
    std::vector<float> m(n, 0.0f);
    std::vector<uint8_t> mask(n);
    for (size_t j = 0; j < n; j++) mask[j] = j % 4 != 1;
    Dev<float> gp(prm), gg(grd), gm(m);
    Dev<uint8_t> gmask(mask);
    const float lr = 0.05f, mom = 0.9f, wd = 5e-4f;
    for (int t = 0; t < 3; t++) {
        for (size_t j = 0; j < n; j++) { // mts_opt_step's SGD (sim/nn/optim.c)
            m[j] = mts_fm_canon(mask[j] ? mom * m[j] + (grd[j] + wd * prm[j]) : mom * m[j] + grd[j]);
            prm[j] = mts_fm_canon(prm[j] - lr * m[j]);
        }
        ASSERT_EQ(mts_gpu_sgd_step(n, gp.d(), gg.d(), gm.d(), gmask.d(), lr, mom, wd, &err), MTS_OK) << err.msg;
    }
    expect_same(gp.get(), prm, "sgd params");
    expect_same(gm.get(), m, "sgd momentum");
}

// ---------------------------------------- transformer ops (gpu/nn_tx.cu)


// LayerNorm, GELU and the row softmax, forward and every gradient, on
// ragged sizes: rows of zero variance (invstd = 1/sqrt(eps)), rows with
// large logits (the softmax's maximum subtracted first), special values.
TEST(GpuOps, LayerNormGeluSoftmax)
{
    NEED_GPU();
    mts_err err;
    const int R = 13, D = 37;
    auto x = randv((size_t)R * D, 21), dy = randv(x.size(), 22), gam = randv(D, 23), bet = randv(D, 24);
    for (int d = 0; d < D; d++) x[3 * D + d] = 0.75f;                      // zero variance
    for (int d = 0; d < D; d++) x[5 * D + d] = (d % 2 ? 1e6f : -1e6f);    // large spread
    for (int d = 0; d < D; d++) x[7 * D + d] = std::ldexp(1.0f + d, 60); // large values
    std::vector<float> y(x.size()), xh(x.size()), is(R), dx(x.size()), dg(D), db(D);
    mts_layernorm_forward(R, D, x.data(), gam.data(), bet.data(), 1e-5f, y.data(), xh.data(), is.data());
    mts_layernorm_backward(R, D, dy.data(), gam.data(), xh.data(), is.data(), dx.data(), dg.data(), db.data());
    {
        Dev<float> gx(x), gdy(dy), ggam(gam), gbet(bet), gy(dy), gxh(dy), gis(std::vector<float>(R, 7.0f)), gdx(x),
            gdg(gam), gdb(bet);
        ASSERT_EQ(mts_gpu_layernorm_forward(R, D, gx.d(), ggam.d(), gbet.d(), 1e-5f, gy.d(), gxh.d(), gis.d(), &err),
                  MTS_OK)
            << err.msg;
        expect_same(gy.get(), y, "layernorm y");
        expect_same(gxh.get(), xh, "layernorm xhat");
        expect_same(gis.get(), is, "layernorm invstd");
        Dev<float> cxh(xh), cis(is); // the CPU's saved values: the backward on its own
        ASSERT_EQ(mts_gpu_layernorm_backward(R, D, gdy.d(), ggam.d(), cxh.d(), cis.d(), gdx.d(), gdg.d(), gdb.d(), &err),
                  MTS_OK)
            << err.msg;
        expect_same(gdx.get(), dx, "layernorm dx");
        expect_same(gdg.get(), dg, "layernorm dgamma");
        expect_same(gdb.get(), db, "layernorm dbeta");
        ASSERT_EQ(mts_gpu_layernorm_backward(R, D, gdy.d(), ggam.d(), cxh.d(), cis.d(), nullptr, gdg.d(), gdb.d(), &err),
                  MTS_OK)
            << err.msg;
        expect_same(gdg.get(), dg, "layernorm dgamma without dx");
    }

    const size_t n = 1001;
    auto gx = specials_and(n, 25), gdy = randv(n, 26);
    for (size_t i = 0; i < n; i += 13) gx[i] = std::ldexp((float)(i % 41) - 20.0f, -2); // tanh's three branches
    std::vector<float> gy(n), gdx(n);
    mts_gelu_forward(n, gx.data(), gy.data());
    mts_gelu_backward(n, gx.data(), gdy.data(), gdx.data());
    {
        Dev<float> dx_(gx), ddy(gdy), dy_(gdy), ddx(gx);
        ASSERT_EQ(mts_gpu_gelu_forward(n, dx_.d(), dy_.d(), &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_gpu_gelu_backward(n, dx_.d(), ddy.d(), ddx.d(), &err), MTS_OK) << err.msg;
        expect_same(dy_.get(), gy, "gelu y");
        expect_same(ddx.get(), gdx, "gelu dx");
    }

    const int SR = 11, SW = 19;
    auto sx = randv((size_t)SR * SW, 27), sdy = randv(sx.size(), 28);
    for (int j = 0; j < SW; j++) sx[2 * SW + j] = j == 4 ? 1e30f : -1e30f;          // one huge logit
    for (int j = 0; j < SW; j++) sx[4 * SW + j] = 80.0f + (float)j;                // e^x - max: no overflow
    for (int j = 0; j < SW; j++) sx[6 * SW + j] = -0.0f;                           // all equal
    for (int j = 0; j < SW; j++) sx[8 * SW + j] = j % 3 ? -INFINITY : (float)j;    // exp(-inf) = 0
    sx[10 * SW + 5] = NAN;
    std::vector<float> sy(sx.size()), sdx(sx.size());
    mts_softmax_forward(SR, SW, sx.data(), sy.data());
    mts_softmax_backward(SR, SW, sy.data(), sdy.data(), sdx.data());
    {
        Dev<float> dx_(sx), dy_(sdy), ddy(sdy), ddx(sx), csy(sy);
        ASSERT_EQ(mts_gpu_softmax_forward(SR, SW, dx_.d(), dy_.d(), &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_gpu_softmax_backward(SR, SW, csy.d(), ddy.d(), ddx.d(), &err), MTS_OK) << err.msg;
        expect_same(dy_.get(), sy, "softmax y");
        expect_same(ddx.get(), sdx, "softmax dx");
    }
}

// The data movement and FP32 sums of the token side: patchify (whole
// patches, and a size that leaves a border outside the grid), the tokens
// layer with and without a class token, token pooling (mean and class).
TEST(GpuOps, PatchifyTokensPool)
{
    NEED_GPU();
    mts_err err;
    const int shapes[][4] = {{3, 8, 12, 4}, {2, 9, 10, 3}, {1, 7, 9, 4}, {1, 28, 28, 7}}; // C, Hh, W, p (vit-tiny last)
    for (auto &sh : shapes) {
        const int N = 2, C = sh[0], Hh = sh[1], W = sh[2], p = sh[3], T = (Hh / p) * (W / p), F = C * p * p;
        auto x = specials_and((size_t)N * C * Hh * W, 31), dy = specials_and((size_t)N * T * F, 32);
        std::vector<float> y(dy.size()), dx(x.size());
        mts_patchify_forward(N, C, Hh, W, p, x.data(), y.data());
        mts_patchify_backward(N, C, Hh, W, p, dy.data(), dx.data());
        Dev<float> gx(x), gy(dy), gdy(dy), gdx(x);
        ASSERT_EQ(mts_gpu_patchify_forward(N, C, Hh, W, p, gx.d(), gy.d(), &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_gpu_patchify_backward(N, C, Hh, W, p, gdy.d(), gdx.d(), &err), MTS_OK) << err.msg;
        std::string what = "patchify " + std::to_string(Hh) + "x" + std::to_string(W) + "/" + std::to_string(p);
        expect_same(gy.get(), y, (what + " y").c_str());
        expect_same(gdx.get(), dx, (what + " dx").c_str());
    }

    const int N = 3, T = 5, D = 7;
    for (int cls = 0; cls <= 1; cls++) {
        const int T2 = T + cls;
        auto x = specials_and((size_t)N * T * D, 33), pos = specials_and((size_t)T2 * D, 34), c = randv(D, 35),
             dy = specials_and((size_t)N * T2 * D, 36);
        for (int i = 0; i < D; i++) dy[i] = -0.0f; // -0 sums: +0 + -0 on both sides
        std::vector<float> y(dy.size()), dx(x.size()), dpos(pos.size()), dcls(D, 5.0f);
        mts_tokens_forward(N, T, D, cls ? c.data() : nullptr, pos.data(), x.data(), y.data());
        mts_tokens_backward(N, T, D, cls, dy.data(), dx.data(), dpos.data(), cls ? dcls.data() : nullptr);
        Dev<float> gx(x), gpos(pos), gc(c), gdy(dy), gy(dy), gdx(x), gdpos(pos), gdcls(c);
        ASSERT_EQ(mts_gpu_tokens_forward(N, T, D, cls ? gc.d() : nullptr, gpos.d(), gx.d(), gy.d(), &err), MTS_OK)
            << err.msg;
        ASSERT_EQ(mts_gpu_tokens_backward(N, T, D, cls, gdy.d(), gdx.d(), gdpos.d(), cls ? gdcls.d() : nullptr, &err),
                  MTS_OK)
            << err.msg;
        const char *w = cls ? "tokens+cls" : "tokens";
        expect_same(gy.get(), y, (std::string(w) + " y").c_str());
        expect_same(gdx.get(), dx, (std::string(w) + " dx").c_str());
        expect_same(gdpos.get(), dpos, (std::string(w) + " dpos").c_str());
        if (cls) expect_same(gdcls.get(), dcls, "tokens dcls");
    }

    for (int mode : {MTS_TOKPOOL_MEAN, MTS_TOKPOOL_CLS}) {
        auto x = specials_and((size_t)N * T * D, 37), dy = specials_and((size_t)N * D, 38);
        std::vector<float> y(dy.size()), dx(x.size());
        mts_tokpool_forward(N, T, D, mode, x.data(), y.data());
        mts_tokpool_backward(N, T, D, mode, dy.data(), dx.data());
        Dev<float> gx(x), gy(dy), gdy(dy), gdx(x);
        ASSERT_EQ(mts_gpu_tokpool_forward(N, T, D, mode, gx.d(), gy.d(), &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_gpu_tokpool_backward(N, T, D, mode, gdy.d(), gdx.d(), &err), MTS_OK) << err.msg;
        const char *w = mode == MTS_TOKPOOL_CLS ? "tokpool cls" : "tokpool mean";
        expect_same(gy.get(), y, (std::string(w) + " y").c_str());
        expect_same(gdx.get(), dx, (std::string(w) + " dx").c_str());
    }
}

// The ops that multiply, each against its CPU op (whose attention GEMMs run
// batched through mts_gemm_batch) with native FP32, the bf16 MBM LUT and
// FMAq M7E4 over that LUT: attention scores and output with every gradient
// (ragged T, heads and head width; the gradient buffers start as garbage, so
// the zeroed columns are checked), MatMul, and the token-wise dense layer
// (mts_gpu_dense_* over N*T rows). Each GPU op reads the CPU's inputs.
TEST(GpuOps, AttentionMatmulTokenDense)
{
    NEED_GPU();
    mts_err err;
    mts_lut lut{};
    mts_mulop op;
    mts_format bf16 = mts_format_e8(7);
    ASSERT_EQ(mts_mulop_model(&op, "mbm", &bf16, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK) << err.msg;
    for (int pv = 0; pv < 3; pv++) {
        mts_provider p = pv == 0 ? prov(MTS_PROV_NATIVE) : prov(MTS_PROV_LUT, &lut);
        if (pv == 2) {
            p.fmaq = 1;
            p.chunk = 4;
            p.qacc = qfmt(7, 4, 8, 0);
            p.qprod = qfmt(7, 4, 8, 0, MTS_RNE);
        }
        const std::string pn = pv == 0 ? "native" : pv == 1 ? "lut" : "fmaq";
        mts_nn_ctx ctx = mts_nn_ctx_cpu(&p, &p);
        mts_gpu_gemm_plan *pl;
        ASSERT_EQ(mts_gpu_plan_open(&p, &pl, &err), MTS_OK) << err.msg;
        auto same = [&](const Dev<float> &g, const std::vector<float> &c, const char *what) {
            expect_same(g.get(), c, (pn + " " + what).c_str());
        };

        // ragged heads within one tile; tokens past a 16-wide tile; vit-tiny's heads (16 tokens, 4 x 16)
        const int shapes[][4] = {{2, 7, 3, 5}, {1, 17, 2, 16}, {1, 16, 4, 16}}; // N, T, H, dh
        for (auto &sh : shapes) {
            const int N = sh[0], T = sh[1], H = sh[2], dh = sh[3], D = H * dh;
            const float sc = 1.0f / std::sqrt((float)dh);
            const std::string at = " T=" + std::to_string(T) + " dh=" + std::to_string(dh);
            auto qkv = specials_and((size_t)N * T * 3 * D, 41 + pv), dyo = specials_and((size_t)N * T * D, 44 + pv);
            auto garbage = specials_and(qkv.size(), 47);
            std::vector<float> s((size_t)N * H * T * T), a(s.size()), y(dyo.size()), da(s.size()), ds(s.size()),
                dq = garbage, dv = garbage;
            ASSERT_EQ(mts_attn_qk_forward(&ctx, N, T, H, dh, sc, qkv.data(), s.data(), &err), MTS_OK) << err.msg;
            mts_softmax_forward(N * H * T, T, s.data(), a.data());
            ASSERT_EQ(mts_attn_av_forward(&ctx, N, T, H, dh, a.data(), qkv.data(), y.data(), &err), MTS_OK) << err.msg;
            ASSERT_EQ(mts_attn_av_backward(&ctx, N, T, H, dh, a.data(), qkv.data(), dyo.data(), da.data(), dv.data(), &err),
                      MTS_OK)
                << err.msg;
            mts_softmax_backward(N * H * T, T, a.data(), da.data(), ds.data());
            ASSERT_EQ(mts_attn_qk_backward(&ctx, N, T, H, dh, sc, qkv.data(), ds.data(), dq.data(), &err), MTS_OK)
                << err.msg;
            {
                Dev<float> gqkv(qkv), ga(a), gdyo(dyo), gds(ds), gs(da), gy(dyo), gda(s), gdq(garbage), gdv(garbage);
                ASSERT_EQ(mts_gpu_attn_qk_forward(pl, N, T, H, dh, sc, gqkv.d(), gs.d(), &err), MTS_OK) << err.msg;
                same(gs, s, ("attn scores" + at).c_str());
                ASSERT_EQ(mts_gpu_attn_av_forward(pl, N, T, H, dh, ga.d(), gqkv.d(), gy.d(), &err), MTS_OK) << err.msg;
                same(gy, y, ("attn output" + at).c_str());
                ASSERT_EQ(mts_gpu_attn_av_backward(pl, N, T, H, dh, ga.d(), gqkv.d(), gdyo.d(), gda.d(), gdv.d(), &err),
                          MTS_OK)
                    << err.msg;
                same(gda, da, ("attn dA" + at).c_str());
                same(gdv, dv, ("attn dV (dqkv, Q and K columns zeroed)" + at).c_str());
                ASSERT_EQ(mts_gpu_attn_qk_backward(pl, N, T, H, dh, sc, gqkv.d(), gds.d(), gdq.d(), &err), MTS_OK)
                    << err.msg;
                same(gdq, dq, ("attn dQ, dK (dqkv, V columns zeroed)" + at).c_str());
            }
        }

        const int N = 2, M = 5, K = 9, Q = 6, D = 15;
        auto ma = specials_and((size_t)N * M * K, 51), mb = specials_and((size_t)N * K * Q, 52),
             mdc = specials_and((size_t)N * M * Q, 53);
        std::vector<float> mc(mdc.size()), mda(ma.size()), mdb(mb.size());
        ASSERT_EQ(mts_matmul_forward(&ctx, N, M, K, Q, ma.data(), mb.data(), mc.data(), &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_matmul_backward(&ctx, N, M, K, Q, ma.data(), mb.data(), mdc.data(), mda.data(), mdb.data(), &err),
                  MTS_OK)
            << err.msg;
        {
            Dev<float> ga(ma), gb(mb), gdc(mdc), gc(mdc), gda(ma), gdb(mb);
            ASSERT_EQ(mts_gpu_matmul_forward(pl, N, M, K, Q, ga.d(), gb.d(), gc.d(), &err), MTS_OK) << err.msg;
            ASSERT_EQ(mts_gpu_matmul_backward(pl, N, M, K, Q, ga.d(), gb.d(), gdc.d(), gda.d(), gdb.d(), &err), MTS_OK)
                << err.msg;
            same(gc, mc, "matmul c");
            same(gda, mda, "matmul da");
            same(gdb, mdb, "matmul db");
        }

        // token-wise dense: the rows are the N*T tokens, D in, 3D out (a QKV projection)
        const int rows = N * 7, in = D, out = 3 * D;
        auto tx = specials_and((size_t)rows * in, 54), tw = specials_and((size_t)out * in, 55),
             tb = specials_and(out, 56), tdy = specials_and((size_t)rows * out, 57);
        std::vector<float> ty(tdy.size()), tdx(tx.size()), tdw(tw.size()), tdb(out);
        ASSERT_EQ(mts_dense_forward(&ctx, rows, in, out, tx.data(), tw.data(), tb.data(), ty.data(), &err), MTS_OK);
        ASSERT_EQ(mts_dense_backward(&ctx, rows, in, out, tx.data(), tw.data(), tdy.data(), tdx.data(), tdw.data(),
                                     tdb.data(), &err),
                  MTS_OK);
        {
            Dev<float> gx(tx), gw(tw), gb(tb), gdy(tdy), gy(tdy), gdx(tx), gdw(tw), gdb(tb);
            ASSERT_EQ(mts_gpu_dense_forward(pl, rows, in, out, gx.d(), gw.d(), gb.d(), gy.d(), &err), MTS_OK)
                << err.msg;
            ASSERT_EQ(mts_gpu_dense_backward(pl, rows, in, out, gx.d(), gw.d(), gdy.d(), gdx.d(), gdw.d(), gdb.d(), &err),
                      MTS_OK)
                << err.msg;
            same(gy, ty, "token dense y");
            same(gdx, tdx, "token dense dx");
            same(gdw, tdw, "token dense dw");
            same(gdb, tdb, "token dense db");
        }
        mts_gpu_plan_close(pl);
    }
    mts_lut_free(&lut);
}

// ------------------------------------- device-resident training vs the CPU

// The residual add and the gradient bookkeeping twins against act.c's ops
// (mts_net_forward/backward's contract, restated here as act.c's private ops
// are not exported: y = a + b; dst = +0 + src; dst += src; a NaN result as
// fmath.h's canonical NaN), with signed zeros, where +0 + -0 is the case
// that differs, and inf - inf and a NaN operand, whose NaN bits differ
// between a CPU and a GPU unless made canonical.
TEST(GpuOps, ResidualAddAndGradientSums)
{
    NEED_GPU();
    mts_err err;
    const size_t n = 1029;
    auto a = specials_and(n, 31), b = specials_and(n, 32);
    a[0] = -0.0f, b[0] = -0.0f, a[1] = -0.0f, b[1] = 0.0f, a[2] = INFINITY, b[2] = -INFINITY;
    b[3] = -NAN;
    std::vector<float> y(n), acc(a), pz(n);
    for (size_t i = 0; i < n; i++) {
        y[i] = mts_fm_canon(a[i] + b[i]);
        acc[i] = mts_fm_canon(acc[i] + b[i]);
        pz[i] = mts_fm_canon(0.0f + b[i]);
    }
    Dev<float> ga(a), gb(b), gy(std::vector<float>(n, 7.0f)), gz(std::vector<float>(n, 7.0f));
    ASSERT_EQ(mts_gpu_add(n, ga.d(), gb.d(), gy.d(), &err), MTS_OK) << err.msg;
    expect_same(gy.get(), y, "add");
    ASSERT_EQ(mts_gpu_copy_pz(n, gb.d(), gz.d(), &err), MTS_OK) << err.msg;
    expect_same(gz.get(), pz, "+0 + src");
    ASSERT_EQ(mts_gpu_acc(n, ga.d(), gb.d(), &err), MTS_OK) << err.msg;
    expect_same(ga.get(), acc, "dst += src");
}

// Conv forward and backward composed of im2col, the device GEMM and col2im
// against mts_conv2d_* (which chunk, transpose and thread as they like) on a
// strided, padded geometry and a 1x1 one, with the bf16 LUT as well.
TEST(GpuOps, ConvTwinEqualsCpuConv)
{
    NEED_GPU();
    mts_err err;
    mts_arith_spec s;
    mts_arith_spec_init(&s);
    std::snprintf(s.mul, sizeof s.mul, "bf16");
    mts_arith lut;
    ASSERT_EQ(mts_arith_open(&s, 1, &lut, &err), MTS_OK) << err.msg;
    mts_provider nat = prov(MTS_PROV_NATIVE);
    const mts_conv_geom geoms[] = {{3, 9, 7, 5, 3, 2, 1, 0, 0}, {4, 6, 6, 3, 1, 1, 0, 0, 0}, {2, 5, 5, 4, 3, 1, 1, 0, 0}};
    for (const mts_provider *p : {(const mts_provider *)&nat, (const mts_provider *)&lut.p}) {
        mts_gpu_gemm_plan *plan = nullptr;
        ASSERT_EQ(mts_gpu_plan_open(p, &plan, &err), MTS_OK) << err.msg;
        for (mts_conv_geom g : geoms) {
            ASSERT_EQ(mts_conv_geom_init(&g, &err), MTS_OK) << err.msg;
            const int N = 3;
            size_t nx = (size_t)N * g.cin * g.h * g.w, ny = (size_t)N * g.cout * g.oh * g.ow;
            size_t nw = (size_t)g.cout * g.cin * g.k * g.k;
            auto x = randv(nx, 41), w = randv(nw, 42), b = randv(g.cout, 43), dy = randv(ny, 44);
            // a NaN and both infinities among the weights: col2im then sums NaN and inf - inf, whose
            // NaN bits differ between x86 and the GPU unless both store the canonical one
            w[1] = NAN, w[nw / 2] = INFINITY, w[nw / 2 + 1] = -INFINITY;
            std::vector<float> y(ny), dx(nx), dw(nw), db(g.cout);
            mts_nn_ctx ctx = mts_nn_ctx_cpu(p, p);
            ASSERT_EQ(mts_conv2d_forward(&ctx, &g, N, x.data(), w.data(), b.data(), y.data(), &err), MTS_OK);
            ASSERT_EQ(mts_conv2d_backward(&ctx, &g, N, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(),
                                          &err),
                      MTS_OK);
            Dev<float> gx(x), gw(w), gb(b), gdy(dy), gy(y), gdx(dx), gdw(dw), gdb(db);
            ASSERT_EQ(mts_gpu_conv2d_forward(plan, &g, N, gx.d(), gw.d(), gb.d(), gy.d(), nullptr, &err), MTS_OK)
                << err.msg;
            ASSERT_EQ(mts_gpu_conv2d_backward(plan, &g, N, gx.d(), gw.d(), gdy.d(), gdx.d(), gdw.d(), gdb.d(), nullptr,
                                              &err),
                      MTS_OK)
                << err.msg;
            expect_same(gy.get(), y, "conv y");
            expect_same(gdx.get(), dx, "conv dx");
            expect_same(gdw.get(), dw, "conv dw");
            expect_same(gdb.get(), db, "conv db");
        }
        mts_gpu_plan_close(plan);
    }
    mts_arith_close(&lut);
}

// An approximate integer table: the exact product of the operand values
// with a deterministic error on every third entry.
void approx_int_lut(int bits, int sg, mts_lut *l)
{
    mts_err err;
    ASSERT_EQ(mts_intmul_exact_lut(bits, sg, l, &err), MTS_OK) << err.msg;
    for (size_t i = 0; i < l->n; i += 3) l->entry[i] += (uint32_t)((i % 7) - 3);
}

// Special operands among random ones: NaN, both infinities, -0, a
// subnormal, a huge value (clipped by any observed range).
void with_specials(std::vector<float> &v)
{
    const float sp[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e-40f, 3e30f};
    for (size_t i = 0; i < sizeof sp / sizeof *sp && i * 7 < v.size(); i++) v[i * 7] = sp[i];
}

// The quantization-aware layers of integer tables (qat.c) against their
// twins (gpu/qat.cu): forward, dx, dw, db for each backward rule, an
// unsigned 8-bit and a signed 4-bit table, an observer that has seen a
// range (narrower than x's: both ends clip) and one that has not (x's own).
TEST(GpuOps, QuantizationAwareTwinsEqualCpu)
{
    NEED_GPU();
    mts_err err;
    const mts_conv_geom geoms[] = {{3, 7, 6, 4, 3, 2, 1, 0, 0}, {2, 5, 5, 3, 3, 1, 1, 0, 0}, {5, 4, 4, 2, 1, 1, 0, 0, 0}};
    for (int sg = 0; sg <= 1; sg++) {
        mts_lut lut{};
        approx_int_lut(sg ? 4 : 8, sg, &lut);
        int bits = lut.int_bits;
        mts_provider pi = prov(MTS_PROV_INT, &lut), pn = prov(MTS_PROV_NATIVE);
        mts_gpu_qat *q = nullptr;
        mts_gpu_gemm_plan *plan_i = nullptr, *plan_n = nullptr;
        ASSERT_EQ(mts_gpu_qat_open(&lut, 1, &q, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_gpu_plan_open(&pi, &plan_i, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_gpu_plan_open(&pn, &plan_n, &err), MTS_OK) << err.msg;
        for (int rule : {MTS_INT_BWD_STE, MTS_INT_BWD_TABLE, MTS_INT_BWD_APPROX})
            for (int seen = 0; seen <= 1; seen++) {
                std::string tag = std::string(sg ? "int4 signed" : "int8 unsigned") + " rule " +
                                  mts_int_bwd_name((mts_int_bwd)rule) + (seen ? " observed" : " unobserved");
                const mts_provider *bp = rule == MTS_INT_BWD_APPROX ? &pi : &pn;
                const mts_gpu_gemm_plan *bpl = rule == MTS_INT_BWD_APPROX ? plan_i : plan_n;
                mts_nn_ctx ctx = mts_nn_ctx_cpu(&pi, bp);
                ctx.int_bwd = rule;
                std::vector<float> st = {seen ? -0.3f : 0.0f, seen ? 0.25f : 0.0f, seen ? 1.0f : 0.0f};
                Dev<float> gst(st);
                const float *dst = seen ? gst.d() : nullptr;
                int kernel = 1 + (rule + seen) % 2; // the forward's two kernels, each with every rule
                ASSERT_EQ(mts_gpu_qat_set_kernel(q, kernel, &err), MTS_OK) << err.msg;
                tag += " kernel " + std::to_string(kernel);
                { // dense
                    const int N = 13, in = 37, out = 11;
                    auto x = randv((size_t)N * in, 61 + seen), w = randv((size_t)out * in, 62), b = randv(out, 63),
                         dy = randv((size_t)N * out, 64);
                    with_specials(x);
                    w[3] = NAN, w[40] = INFINITY;
                    mts_qparam qa;
                    mts_qat_act_param(seen ? st.data() : nullptr, x.data(), x.size(), bits, sg, &qa);
                    std::vector<float> y((size_t)N * out), dx(x.size()), dw(w.size()), db(out);
                    ASSERT_EQ(mts_qdense_forward(&ctx, &qa, N, in, out, x.data(), w.data(), b.data(), y.data(), &err),
                              MTS_OK)
                        << err.msg;
                    ASSERT_EQ(mts_qdense_backward(&ctx, &qa, N, in, out, x.data(), w.data(), dy.data(), dx.data(),
                                                  dw.data(), db.data(), &err),
                              MTS_OK)
                        << err.msg;
                    Dev<float> gx(x), gw(w), gb(b), gdy(dy), gy(y), gdx(dx), gdw(dw), gdb(db);
                    ASSERT_EQ(mts_gpu_qdense_forward(q, dst, N, in, out, gx.d(), gw.d(), gb.d(), gy.d(), &err), MTS_OK)
                        << err.msg;
                    ASSERT_EQ(mts_gpu_qdense_backward(q, rule, bpl, dst, N, in, out, gx.d(), gw.d(), gdy.d(), gdx.d(),
                                                      gdw.d(), gdb.d(), &err),
                              MTS_OK)
                        << err.msg;
                    expect_same(gy.get(), y, (tag + " dense y").c_str());
                    expect_same(gdx.get(), dx, (tag + " dense dx").c_str());
                    expect_same(gdw.get(), dw, (tag + " dense dw").c_str());
                    expect_same(gdb.get(), db, (tag + " dense db").c_str());
                }
                for (mts_conv_geom g : geoms) {
                    ASSERT_EQ(mts_conv_geom_init(&g, &err), MTS_OK) << err.msg;
                    const int N = 2;
                    size_t nx = (size_t)N * g.cin * g.h * g.w, ny = (size_t)N * g.cout * g.oh * g.ow;
                    size_t nw = (size_t)g.cout * g.cin * g.k * g.k;
                    auto x = randv(nx, 71 + seen), w = randv(nw, 72), b = randv(g.cout, 73), dy = randv(ny, 74);
                    with_specials(x);
                    mts_qparam qa;
                    mts_qat_act_param(seen ? st.data() : nullptr, x.data(), nx, bits, sg, &qa);
                    std::vector<float> y(ny), dx(nx), dw(nw), db(g.cout);
                    ASSERT_EQ(mts_qconv2d_forward(&ctx, &qa, &g, N, x.data(), w.data(), b.data(), y.data(), &err),
                              MTS_OK)
                        << err.msg;
                    ASSERT_EQ(mts_qconv2d_backward(&ctx, &qa, &g, N, x.data(), w.data(), dy.data(), dx.data(),
                                                   dw.data(), db.data(), &err),
                              MTS_OK)
                        << err.msg;
                    Dev<float> gx(x), gw(w), gb(b), gdy(dy), gy(y), gdx(dx), gdw(dw), gdb(db);
                    ASSERT_EQ(mts_gpu_qconv2d_forward(q, dst, &g, N, gx.d(), gw.d(), gb.d(), gy.d(), &err), MTS_OK)
                        << err.msg;
                    ASSERT_EQ(mts_gpu_qconv2d_backward(q, rule, bpl, dst, &g, N, gx.d(), gw.d(), gdy.d(), gdx.d(),
                                                       gdw.d(), gdb.d(), nullptr, &err),
                              MTS_OK)
                        << err.msg;
                    std::string c = tag + " conv k" + std::to_string(g.k) + " s" + std::to_string(g.stride);
                    expect_same(gy.get(), y, (c + " y").c_str());
                    expect_same(gdx.get(), dx, (c + " dx").c_str());
                    expect_same(gdw.get(), dw, (c + " dw").c_str());
                    expect_same(gdb.get(), db, (c + " db").c_str());
                }
            }
        // a table opened without its gradient tables refuses TABLE; a float table is refused; kernels 1-2
        EXPECT_EQ(mts_gpu_qat_set_kernel(q, 3, &err), MTS_EINVAL);
        EXPECT_NE(std::string(err.msg).find("no forward kernel 3"), std::string::npos) << err.msg;
        mts_gpu_qat *q0 = nullptr;
        ASSERT_EQ(mts_gpu_qat_open(&lut, 0, &q0, &err), MTS_OK) << err.msg;
        std::vector<float> one(4, 0.5f);
        Dev<float> d1(one);
        EXPECT_EQ(mts_gpu_qdense_backward(q0, MTS_INT_BWD_TABLE, plan_n, nullptr, 2, 1, 2, d1.d(), d1.d(), d1.d(),
                                          d1.d(), d1.d(), nullptr, &err),
                  MTS_EINVAL);
        EXPECT_NE(std::string(err.msg).find("gradient tables"), std::string::npos) << err.msg;
        mts_gpu_qat_close(q0);
        mts_gpu_qat_close(q);
        mts_gpu_plan_close(plan_i);
        mts_gpu_plan_close(plan_n);
        mts_lut_free(&lut);
    }
    mts_lut flut{};
    mts_gpu_qat *qf = nullptr;
    mts_format f7 = mts_format_e8(7);
    mts_mulop op;
    ASSERT_EQ(mts_mulop_model(&op, "mbm", &f7, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(&op, &flut, &err), MTS_OK) << err.msg;
    EXPECT_EQ(mts_gpu_qat_open(&flut, 0, &qf, &err), MTS_EINVAL);
    EXPECT_EQ(qf, nullptr);
    mts_lut short_int{}; // an integer table whose entry count does not match its width
    ASSERT_EQ(mts_intmul_exact_lut(4, 0, &short_int, &err), MTS_OK) << err.msg;
    short_int.n /= 2;
    EXPECT_EQ(mts_gpu_qat_open(&short_int, 0, &qf, &err), MTS_EINVAL);
    short_int.n *= 2;
    mts_lut_free(&short_int);
    mts_lut_free(&flut);
}

// The flat interface's quantization-aware layers (nn_front.h, what the
// Python front calls for CUDA tensors) with device CUDA against device 0:
// host arrays staged through the device twins, the same y, dx, dw, db and
// observer, for every backward rule, a float backward multiplier (a LUT)
// beside the table itself, dense and conv, a signed and an unsigned table.
TEST(GpuOps, FrontQuantizationAwareOnDeviceEqualsCpu)
{
    NEED_GPU();
    mts_err err;
    mts_front_mul *mbm = nullptr;
    ASSERT_EQ(mts_front_mul_open("mbm", nullptr, nullptr, 7, &mbm, &err), MTS_OK) << err.msg;
    for (int sg = 0; sg <= 1; sg++) {
        const int bits = sg ? 4 : 8, n = 1 << bits;
        std::vector<int32_t> prod((size_t)n * n);
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++) {
                int va = sg && a >= n / 2 ? a - n : a, vb = sg && b >= n / 2 ? b - n : b;
                prod[(size_t)a * n + b] = va * vb + (a * 7 + b * 3) % 5 - 2; // an approximate table
            }
        mts_front_mul *mi = nullptr;
        ASSERT_EQ(mts_front_mul_open_int(prod.data(), bits, sg, "noisy", &mi, &err), MTS_OK) << err.msg;
        for (int rule : {MTS_INT_BWD_STE, MTS_INT_BWD_TABLE, MTS_INT_BWD_APPROX})
            for (int variant = 0; variant < 3; variant++) { // 0: unobserved, 1: observed, 2: functional (no observer)
                const mts_front_mul *bwd = (rule + variant) % 2 ? mbm : mi;
                std::string tag = std::string(sg ? "int4 signed" : "int8 unsigned") + " rule " +
                                  mts_int_bwd_name((mts_int_bwd)rule) + " variant " + std::to_string(variant) +
                                  (bwd == mbm ? " bwd mbm" : " bwd table");
                std::vector<float> st0 = {variant == 1 ? -0.3f : 0.0f, variant == 1 ? 0.25f : 0.0f,
                                          variant == 1 ? 1.0f : 0.0f};
                for (int conv = 0; conv <= 1; conv++) {
                    const int N = 3, cin = 2, h = 5, w = 6, cout = 3, k = 3, s = 1 + conv, p = 1;
                    const int in = 29, out = 7;
                    int oh = 0, ow = 0;
                    if (conv) {
                        ASSERT_EQ(mts_front_conv2d_shape(cin, h, w, cout, k, k, s, s, p, p, 1, 1, 1, &oh, &ow, &err),
                                  MTS_OK)
                            << err.msg;
                    }
                    size_t nx = conv ? (size_t)N * cin * h * w : (size_t)N * in;
                    size_t nw = conv ? (size_t)cout * cin * k * k : (size_t)out * in;
                    size_t ny = conv ? (size_t)N * cout * oh * ow : (size_t)N * out, nb = conv ? cout : out;
                    auto x = randv(nx, 81 + variant), wt = randv(nw, 82), b = randv(nb, 83), dy = randv(ny, 84);
                    with_specials(x);
                    wt[2] = NAN;
                    std::vector<float> y[2], dx[2], dw[2], db[2], st[2];
                    for (int dev = 0; dev <= 1; dev++) {
                        int device = dev ? MTS_GPU_DEVICE_CUDA : 0;
                        st[dev] = st0;
                        float *stp = variant == 2 ? nullptr : st[dev].data();
                        y[dev].assign(ny, -1.0f), dx[dev].assign(nx, -1.0f), dw[dev].assign(nw, -1.0f),
                            db[dev].assign(nb, -1.0f);
                        int rc = conv ? mts_front_qconv2d_forward(mi, 1, device, stp, 1, N, cin, h, w, cout, k, k, s,
                                                                  s, p, p, 1, 1, 1, x.data(), wt.data(), b.data(),
                                                                  y[dev].data(), &err)
                                      : mts_front_qdense_forward(mi, 1, device, stp, 1, N, in, out, x.data(),
                                                                 wt.data(), b.data(), y[dev].data(), &err);
                        ASSERT_EQ(rc, MTS_OK) << tag << ": " << err.msg;
                        rc = conv ? mts_front_qconv2d_backward(mi, bwd, rule, 1, device, stp, N, cin, h, w, cout, k, k,
                                                               s, s, p, p, 1, 1, 1, x.data(), wt.data(), dy.data(),
                                                               dx[dev].data(), dw[dev].data(), db[dev].data(), &err)
                                  : mts_front_qdense_backward(mi, bwd, rule, 1, device, stp, N, in, out, x.data(),
                                                              wt.data(), dy.data(), dx[dev].data(), dw[dev].data(),
                                                              db[dev].data(), &err);
                        ASSERT_EQ(rc, MTS_OK) << tag << ": " << err.msg;
                    }
                    std::string c = tag + (conv ? " conv" : " dense");
                    expect_same(y[1], y[0], (c + " y").c_str());
                    expect_same(dx[1], dx[0], (c + " dx").c_str());
                    expect_same(dw[1], dw[0], (c + " dw").c_str());
                    expect_same(db[1], db[0], (c + " db").c_str());
                    expect_same(st[1], st[0], (c + " observer").c_str());
                    if (variant != 2) {
                        EXPECT_EQ(st[0][2], 1.0f) << c << ": the training forward moved no observer";
                    }
                }
            }
        // a backward without some gradients on the device as on the CPU; an empty batch refused by both
        {
            auto x = randv(4 * 5, 91), wt = randv(3 * 5, 92), dy = randv(4 * 3, 93);
            std::vector<float> dw[2], st[2];
            for (int dev = 0; dev <= 1; dev++) {
                dw[dev].assign(wt.size(), -1.0f);
                st[dev] = {0.0f, 0.0f, 0.0f};
                ASSERT_EQ(mts_front_qdense_backward(mi, mi, MTS_INT_BWD_TABLE, 1, dev ? MTS_GPU_DEVICE_CUDA : 0,
                                                    st[dev].data(), 4, 5, 3, x.data(), wt.data(), dy.data(), nullptr,
                                                    dw[dev].data(), nullptr, &err),
                          MTS_OK)
                    << err.msg;
                std::vector<float> e(3, -1.0f);
                EXPECT_EQ(mts_front_qdense_forward(mi, 1, dev ? MTS_GPU_DEVICE_CUDA : 0, st[dev].data(), 1, 0, 5, 3,
                                                   x.data(), wt.data(), nullptr, e.data(), &err),
                          MTS_EINVAL);
            }
            expect_same(dw[1], dw[0], "dw alone");
            EXPECT_EQ(mts_front_qdense_backward(mi, nullptr, MTS_INT_BWD_APPROX, 1, MTS_GPU_DEVICE_CUDA, nullptr, 4, 5,
                                                3, x.data(), wt.data(), dy.data(), nullptr, dw[1].data(), nullptr,
                                                &err),
                      MTS_EINVAL);
        }
        mts_front_mul_free(mi);
    }
    mts_front_mul_free(mbm);
}

// A few training steps of a built-in model on both backends: the CPU's
// mts_train_epoch / mts_evaluate against the device-resident ones
// (nn_gpunet.h) on a synthetic data set of the model's input shape. Every
// batch's logits, each epoch's loss, accuracies, step count and the final
// parameters, BN statistics, range observers and optimizer moments must be
// the same bits.
struct ResidentCase {
    const char *model;
    int c, h, w, ntrain, ntest, batch, epochs;
    const char *mul, *acc; // spec: multiplier, forward (and test) FMAq accumulator ("" none)
    mts_opt_kind opt;
    mts_sched_kind sched;
    float wd;
    // the backward's FMAq accumulator ("" none). Not M7E4: its range ends at
    // 2^-7 and most gradients would flush to 0, which hides backward errors.
    const char *bacc;
    mts_ste ste = MTS_STE_IDENTITY; // the dense layers' FMAq estimator
    // an integer table of ibits-bit operands (approx_int_lut) for the forward and the test instead of
    // mul/acc; the backward as `mantis train` opens it (native FP32 unless ibwd is APPROX)
    int ibits = 0, isigned = 0, ibwd = MTS_INT_BWD_STE;
};

struct BatchLog {
    mts_net *net;
    std::vector<std::vector<float>> logits;
};
void log_batch(void *ud, int done, int total)
{
    (void)done, (void)total;
    BatchLog *b = (BatchLog *)ud;
    int classes = mts_net_outsize(b->net);
    const float *o = mts_net_output(b->net);
    b->logits.emplace_back(o, o + (size_t)classes); // the first sample's logits of each batch
}

uint64_t dbits(double d)
{
    uint64_t u;
    std::memcpy(&u, &d, sizeof u);
    return u;
}

void expect_same_n(const float *gpu, const float *cpu, size_t n, const std::string &what)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (fbits(gpu[i]) != fbits(cpu[i]) && bad++ < 5)
            ADD_FAILURE() << what << "[" << i << "]: gpu 0x" << std::hex << fbits(gpu[i]) << " cpu 0x" << fbits(cpu[i])
                          << std::dec;
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << n << " differ";
}

void resident_equals_cpu(const ResidentCase &t)
{
    mts_err err;
    size_t ss = (size_t)t.c * t.h * t.w;
    std::vector<float> xtr = randv(ss * t.ntrain, 101), xte = randv(ss * t.ntest, 102);
    std::vector<uint8_t> ytr(t.ntrain), yte(t.ntest);
    uint64_t sd = 103;
    for (auto &v : ytr) v = (uint8_t)(splitmix64(&sd) % 10);
    for (auto &v : yte) v = (uint8_t)(splitmix64(&sd) % 10);
    mts_dataset tr = {t.ntrain, t.c, t.h, t.w, 10, xtr.data(), ytr.data()};
    mts_dataset te = {t.ntest, t.c, t.h, t.w, 10, xte.data(), yte.data()};
    mts_arith_spec s;
    mts_arith_spec_init(&s);
    std::snprintf(s.mul, sizeof s.mul, "%s", t.mul);
    std::snprintf(s.acc, sizeof s.acc, "%s", t.acc);
    mts_arith af, ab, at;
    if (t.ibits) {
        mts_lut l[3];
        for (mts_lut &x : l) approx_int_lut(t.ibits, t.isigned, &x);
        mts_arith_from_lut(&l[0], 0, "approximate integer table", &af);
        mts_arith_from_lut(&l[1], 0, "approximate integer table", &at);
        if (t.ibwd == MTS_INT_BWD_APPROX) mts_arith_from_lut(&l[2], 0, "approximate integer table", &ab);
        else {
            mts_lut_free(&l[2]);
            std::snprintf(s.acc, sizeof s.acc, "%s", "");
            ASSERT_EQ(mts_arith_open(&s, 0, &ab, &err), MTS_OK) << err.msg;
        }
    } else {
        ASSERT_EQ(mts_arith_open(&s, 0, &af, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_arith_open(&s, 0, &at, &err), MTS_OK) << err.msg;
        std::snprintf(s.acc, sizeof s.acc, "%s", t.bacc ? t.bacc : "");
        ASSERT_EQ(mts_arith_open(&s, 0, &ab, &err), MTS_OK) << err.msg;
    }
    mts_net net[2];
    mts_opt opt[2];
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(mts_nn_model_build(&net[i], t.model, t.c, t.h, t.w, 10, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_net_build(&net[i], t.batch, 7, &err), MTS_OK) << err.msg;
        mts_opt &o = opt[i];
        std::memset(&o, 0, sizeof o);
        o.kind = t.opt;
        o.lr = t.opt == MTS_OPT_ADAM ? 1e-3f : 0.05f;
        o.momentum = 0.9f;
        o.wd = t.wd;
        o.beta1 = 0.9f, o.beta2 = 0.999f, o.eps = 1e-8f;
        o.sched = t.sched;
        o.step_size = 1;
        o.gamma = 0.5f;
        o.epochs = t.epochs;
        ASSERT_EQ(mts_opt_init(&o, net[i].nparam, &err), MTS_OK) << err.msg;
    }
    mts_nn_ctx train = mts_nn_ctx_cpu(&af.p, &ab.p), eval = mts_nn_ctx_cpu(&at.p, nullptr);
    train.ste = t.ste;
    train.int_bwd = t.ibwd;
    ASSERT_EQ(mts_gpunet_supports(&net[1], &train, &eval, &err), MTS_OK) << err.msg;
    mts_gpunet *g = nullptr;
    ASSERT_EQ(mts_gpunet_open(&g, &net[1], &opt[1], &af.p, &ab.p, &at.p, (int)t.ste, t.ibwd, &tr, t.ntrain, &te, t.ntest, &err), MTS_OK)
        << err.msg;
    BatchLog log[2] = {{&net[0], {}}, {&net[1], {}}};
    for (int e = 0; e < t.epochs; e++) {
        mts_epoch_stats st[2];
        float lr = mts_opt_lr(&opt[0], e);
        ASSERT_EQ(mts_train_epoch(&net[0], &opt[0], &train, &tr, t.ntrain, t.batch, 5, e, lr, log_batch, &log[0],
                                  &st[0], &err),
                  MTS_OK)
            << err.msg;
        ASSERT_EQ(mts_gpunet_train_epoch(g, &net[1], &opt[1], t.ntrain, t.batch, 5, e, lr, log_batch, &log[1], &st[1],
                                         &err),
                  MTS_OK)
            << err.msg;
        ASSERT_EQ(mts_evaluate(&net[0], &eval, &te, t.ntest, &st[0].test_acc, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_gpunet_evaluate(g, t.ntest, &st[1].test_acc, &err), MTS_OK) << err.msg;
        EXPECT_EQ(dbits(st[1].train_loss), dbits(st[0].train_loss))
            << t.model << " epoch " << e << ": loss gpu " << st[1].train_loss << " cpu " << st[0].train_loss;
        EXPECT_EQ(st[1].train_acc, st[0].train_acc) << t.model << " epoch " << e;
        EXPECT_EQ(st[1].test_acc, st[0].test_acc) << t.model << " epoch " << e;
        EXPECT_EQ(opt[1].t, opt[0].t);
        EXPECT_EQ(opt[1].nonfinite, opt[0].nonfinite);
    }
    ASSERT_EQ(log[1].logits.size(), log[0].logits.size());
    for (size_t i = 0; i < log[0].logits.size(); i++)
        expect_same_n(log[1].logits[i].data(), log[0].logits[i].data(), log[0].logits[i].size(),
                      std::string(t.model) + " logits of batch " + std::to_string(i));
    ASSERT_EQ(mts_gpunet_download(g, &net[1], &opt[1], &err), MTS_OK) << err.msg;
    mts_gpunet_close(g);
    std::string m = t.model;
    expect_same_n(net[1].param, net[0].param, net[0].nparam, m + " parameters");
    expect_same_n(net[1].state, net[0].state, net[0].nstate, m + " BN statistics and range observers");
    expect_same_n(opt[1].m, opt[0].m, net[0].nparam, m + " first moments");
    expect_same_n(opt[1].v, opt[0].v, net[0].nparam, m + " second moments");
    for (int i = 0; i < 2; i++) {
        mts_opt_free(&opt[i]);
        mts_net_free(&net[i]);
    }
    mts_arith_close(&af);
    mts_arith_close(&ab);
    mts_arith_close(&at);
}

// Under the emulation every CUDA thread is a fiber: ResNet-18's 11 M
// parameters take 50-80 s a step there (measured 2026-11-26), so it runs
// on a device (tests/gpu-check.sh) and under the emulation only with
// MANTIS_GPUEMU_SLOW=1. Its node kinds and shapes (3x3 and strided 1x1
// convolutions, BN, residual adds, GAP) are ResNet-20's.
bool emu_skips_slow()
{
#if defined(MTS_GPU_EMU)
    const char *v = std::getenv("MANTIS_GPUEMU_SLOW");
    return !(v && *v && std::strcmp(v, "0") != 0);
#else
    return false;
#endif
}

TEST(GpuTrain, ResidentLenet300Sgd)
{
    NEED_GPU();
    resident_equals_cpu({"lenet300", 1, 28, 28, 8, 9, 4, 2, "fp32", "", MTS_OPT_SGD, MTS_SCHED_CONST, 5e-4f, ""});
}
TEST(GpuTrain, ResidentLenet5LutFmaqAdamCosine)
{
    NEED_GPU();
    resident_equals_cpu({"lenet5", 1, 28, 28, 6, 5, 4, 2, "bf16", "M7E4", MTS_OPT_ADAM, MTS_SCHED_COSINE, 1e-4f, ""});
}
// the accumulator paper's masked estimators (M4E3 accumulators: its Table 6
// setting), every dense layer's backward masked on the device
TEST(GpuTrain, ResidentLenet300MaskedSte)
{
    NEED_GPU();
    resident_equals_cpu({"lenet300", 1, 28, 28, 8, 3, 4, 1, "bf16", "M4E3", MTS_OPT_ADAM, MTS_SCHED_CONST, 0.0f, "",
                         MTS_STE_IMM_DIFF});
    resident_equals_cpu({"lenet300", 1, 28, 28, 4, 3, 4, 1, "fp32", "M4E3", MTS_OPT_SGD, MTS_SCHED_CONST, 0.0f, "",
                         MTS_STE_REC_OF});
}
// FMAq over native products (the "fp32" model), forward and backward; one
// step (2.1 M parameters: about 9 s a step under the emulation)
TEST(GpuTrain, ResidentMlp1024NativeFmaq)
{
    NEED_GPU();
    resident_equals_cpu({"mlp1024", 1, 4, 4, 2, 3, 2, 1, "fp32", "M7E4", MTS_OPT_SGD, MTS_SCHED_CONST, 5e-4f, "M7E6"});
}
// the bf16 LUT without FMAq, the step schedule, two epochs of one step
TEST(GpuTrain, ResidentResnet20LutStep)
{
    NEED_GPU();
    resident_equals_cpu({"resnet20", 3, 8, 8, 2, 3, 2, 2, "bf16", "", MTS_OPT_SGD, MTS_SCHED_STEP, 5e-4f, ""});
}
// the transformer nodes (patchify, tokens, LayerNorm, attention, GELU, token
// pooling) through the twins of gpu/nn_tx.cu
TEST(GpuTrain, ResidentVitTinyLutFmaqAdam)
{
    NEED_GPU();
    resident_equals_cpu({"vit-tiny", 1, 28, 28, 2, 3, 2, 2, "bf16", "M7E4", MTS_OPT_ADAM, MTS_SCHED_CONST, 1e-4f, "M7E6"});
}
// Integer tables: the quantization-aware layers (gpu/qat.cu) with each
// backward rule, the range observers, per-GEMM INT for APPROX's backward
// and vit-tiny's attention (each GEMM of a batch quantized on its own)
TEST(GpuTrain, ResidentLenet5IntSte)
{
    NEED_GPU();
    resident_equals_cpu({"lenet5", 1, 28, 28, 6, 5, 4, 2, "fp32", "", MTS_OPT_SGD, MTS_SCHED_CONST, 5e-4f, "",
                         MTS_STE_IDENTITY, 8, 0, MTS_INT_BWD_STE});
}
TEST(GpuTrain, ResidentResnet20IntTableAdam)
{
    NEED_GPU();
    resident_equals_cpu({"resnet20", 3, 8, 8, 2, 3, 2, 1, "fp32", "", MTS_OPT_ADAM, MTS_SCHED_CONST, 1e-4f, "",
                         MTS_STE_IDENTITY, 4, 1, MTS_INT_BWD_TABLE});
}
TEST(GpuTrain, ResidentLenet300IntApprox)
{
    NEED_GPU();
    resident_equals_cpu({"lenet300", 1, 28, 28, 4, 5, 4, 2, "fp32", "", MTS_OPT_SGD, MTS_SCHED_CONST, 0.0f, "",
                         MTS_STE_IDENTITY, 8, 1, MTS_INT_BWD_APPROX});
}
TEST(GpuTrain, ResidentVitTinyIntSte)
{
    NEED_GPU();
    resident_equals_cpu({"vit-tiny", 1, 28, 28, 2, 3, 2, 1, "fp32", "", MTS_OPT_ADAM, MTS_SCHED_CONST, 1e-4f, "",
                         MTS_STE_IDENTITY, 8, 0, MTS_INT_BWD_STE});
}
TEST(GpuTrain, ResidentResnet18Adam)
{
    NEED_GPU();
    if (emu_skips_slow()) GTEST_SKIP() << "50-80 s under the emulation: MANTIS_GPUEMU_SLOW=1 runs it";
    resident_equals_cpu({"resnet18", 3, 8, 8, 2, 2, 2, 1, "fp32", "", MTS_OPT_ADAM, MTS_SCHED_CONST, 0.0f, ""});
}

// ------------------------------------------------ training, end to end

// `mantis train --device cuda` against `--device cpu` on a short run: the
// same final line, the same JSON less its timings, the same parameters and
// optimizer state. Native FP32 and FMAq over the bf16 MBM LUT. Under the
// emulation MANTIS_BIN is mantis-gpuemu; the device check runs it on the
// GPU. Real MNIST: ./data/mnist as tests/run.sh fetches it, or
// MANTIS_TEST_MNIST (the device check's subset).
std::string without_timings(const std::string &json)
{
    std::string out;
    std::istringstream in(json);
    for (std::string line; std::getline(in, line);) {
        size_t t = line.find(", \"seconds\"");
        if (t != std::string::npos) line = line.substr(0, t);
        // what only --device cuda reports: the path it took, its memory
        if (line.find("\"gpu_path\"") != std::string::npos || line.find("\"device_peak_bytes\"") != std::string::npos)
            continue;
        out += line + "\n";
    }
    return out;
}

TEST(GpuTrain, CliCudaEqualsCpu)
{
    NEED_GPU();
    const char *env = std::getenv("MANTIS_TEST_MNIST");
    std::string data = env && *env ? env : std::string(MANTIS_SOURCE_DIR) + "/data/mnist";
    if (access((data + "/train-images-idx3-ubyte").c_str(), R_OK) != 0) {
        if (require_gpu()) FAIL() << "MANTIS_REQUIRE_GPU is set, but " << data << " has no MNIST";
        GTEST_SKIP() << data << " has no MNIST (mantis data fetch mnist)";
    }
    // an integer table too: device-resident through the quantization-aware twins (gpu/qat.cu),
    // every backward rule
    std::string i8 = tmpdir() + "/int8u.lut";
    {
        mts_lut t;
        mts_err err;
        ASSERT_EQ(mts_intmul_exact_lut(8, 0, &t, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_lut_save(&t, i8.c_str(), &err), MTS_OK) << err.msg;
        mts_lut_free(&t);
    }
    std::string muls[] = {"--mul fp32", "--mul mbm --man-bits 7 --acc M7E4 --acc-bias 10 --prod M7E4 --prod-bias 12",
                          "--lut " + i8 + " --int-backward ste", "--lut " + i8 + " --int-backward table",
                          "--lut " + i8 + " --int-backward approx"};
    for (const std::string &mul : muls) {
        std::string dir = tmpdir(), common = "train --model lenet300 --data mnist --data-dir " + data +
                                             " --epochs 1 --subset 32 --test-subset 32 --batch 16 --seed 3 " + mul;
        CliResult cpu = run_cli(common + " --device cpu --json " + dir + "/cpu.json --checkpoint " + dir + "/ck-cpu");
        CliResult gpu = run_cli(common + " --device cuda --json " + dir + "/gpu.json --checkpoint " + dir + "/ck-gpu");
        ASSERT_EQ(cpu.status, 0) << mul << ": " << cpu.err;
        ASSERT_EQ(gpu.status, 0) << mul << ": " << gpu.err;
        EXPECT_EQ(gpu.out, cpu.out) << mul;
        EXPECT_EQ(without_timings(slurp(dir + "/gpu.json")), without_timings(slurp(dir + "/cpu.json"))) << mul;
        EXPECT_NE(slurp(dir + "/gpu.json").find("\"gpu_path\": \"resident\""), std::string::npos) << mul;
        mts_net a, b;
        mts_err err;
        for (mts_net *n : {&a, &b}) {
            ASSERT_EQ(mts_nn_model_build(n, "lenet300", 1, 28, 28, 10, &err), MTS_OK) << err.msg;
            ASSERT_EQ(mts_net_build(n, 16, 1, &err), MTS_OK) << err.msg;
        }
        ASSERT_EQ(mts_ckpt_load((dir + "/ck-cpu/checkpoint.mtsckpt").c_str(), &a, nullptr, nullptr, &err), MTS_OK)
            << err.msg;
        ASSERT_EQ(mts_ckpt_load((dir + "/ck-gpu/checkpoint.mtsckpt").c_str(), &b, nullptr, nullptr, &err), MTS_OK)
            << err.msg;
        ASSERT_EQ(a.nparam, b.nparam);
        int bad = 0;
        for (size_t i = 0; i < a.nparam; i++)
            if (fbits(a.param[i]) != fbits(b.param[i]) && bad++ < 5)
                ADD_FAILURE() << mul << ": param[" << i << "] gpu 0x" << std::hex << fbits(b.param[i]) << " cpu 0x"
                              << fbits(a.param[i]) << std::dec;
        EXPECT_EQ(bad, 0) << mul << ": parameters differ after one epoch";
        mts_net_free(&a);
        mts_net_free(&b);
    }
}

// A checkpoint written on one backend resumes on the other with the results
// of a run that never changed: LeNet-5 (SGD, momentum, weight decay) for two
// epochs on the CPU against one epoch on the GPU then one on the CPU, and
// one on the CPU then one on the GPU. The JSON (less timings and what only
// --device cuda reports) and the parameters, statistics, observers and
// moments of the last checkpoint must be the same bits.
void expect_same_ckpt(const std::string &got, const std::string &want, const std::string &what)
{
    mts_net a, b;
    mts_opt oa, ob;
    mts_err err;
    mts_net *nets[2] = {&a, &b};
    mts_opt *opts[2] = {&oa, &ob};
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(mts_nn_model_build(nets[i], "lenet5", 1, 28, 28, 10, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_net_build(nets[i], 8, 1, &err), MTS_OK) << err.msg;
        std::memset(opts[i], 0, sizeof(mts_opt));
        ASSERT_EQ(mts_opt_init(opts[i], nets[i]->nparam, &err), MTS_OK) << err.msg;
    }
    ASSERT_EQ(mts_ckpt_load(want.c_str(), &a, &oa, nullptr, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_ckpt_load(got.c_str(), &b, &ob, nullptr, &err), MTS_OK) << err.msg;
    EXPECT_EQ(ob.t, oa.t) << what;
    expect_same_n(b.param, a.param, a.nparam, what + " parameters");
    expect_same_n(b.state, a.state, a.nstate, what + " state");
    expect_same_n(ob.m, oa.m, a.nparam, what + " momentum");
    for (int i = 0; i < 2; i++) {
        mts_opt_free(opts[i]);
        mts_net_free(nets[i]);
    }
}

TEST(GpuTrain, CheckpointResumesAcrossDevices)
{
    NEED_GPU();
    const char *env = std::getenv("MANTIS_TEST_MNIST");
    std::string data = env && *env ? env : std::string(MANTIS_SOURCE_DIR) + "/data/mnist";
    if (access((data + "/train-images-idx3-ubyte").c_str(), R_OK) != 0) {
        if (require_gpu()) FAIL() << "MANTIS_REQUIRE_GPU is set, but " << data << " has no MNIST";
        GTEST_SKIP() << data << " has no MNIST (mantis data fetch mnist)";
    }
    std::string dir = tmpdir(), common = "train --model lenet5 --data mnist --data-dir " + data +
                                         " --subset 16 --test-subset 8 --batch 8 --seed 4 --opt sgd --wd 5e-4";
    CliResult ref = run_cli(common + " --epochs 2 --device cpu --json " + dir + "/ref.json --checkpoint " + dir + "/ref");
    ASSERT_EQ(ref.status, 0) << ref.err;
    const char *devs[2][2] = {{"cuda", "cpu"}, {"cpu", "cuda"}};
    for (auto &d : devs) {
        std::string tag = std::string(d[0]) + "-then-" + d[1], ck = dir + "/" + tag;
        CliResult first = run_cli(common + " --epochs 1 --device " + d[0] + " --checkpoint " + ck);
        ASSERT_EQ(first.status, 0) << tag << ": " << first.err;
        CliResult second = run_cli(common + " --epochs 2 --resume --device " + d[1] + " --json " + ck + ".json" +
                                   " --checkpoint " + ck);
        ASSERT_EQ(second.status, 0) << tag << ": " << second.err;
        EXPECT_EQ(without_timings(slurp(ck + ".json")), without_timings(slurp(dir + "/ref.json"))) << tag;
        expect_same_ckpt(ck + "/checkpoint.mtsckpt", dir + "/ref/checkpoint.mtsckpt", tag);
    }
    // `mantis test` of the checkpoint on both devices: the same accuracy, on the device; also with
    // an integer table (quantization-aware, with the observers the float run calibrated)
    std::string i8 = dir + "/int8u.lut";
    {
        mts_lut t;
        mts_err err;
        ASSERT_EQ(mts_intmul_exact_lut(8, 0, &t, &err), MTS_OK) << err.msg;
        for (size_t i = 0; i < t.n; i += 3) t.entry[i] += (uint32_t)((i % 7) - 3); // approximate
        ASSERT_EQ(mts_lut_save(&t, i8.c_str(), &err), MTS_OK) << err.msg;
        mts_lut_free(&t);
    }
    for (std::string mul : {std::string(), " --lut " + i8}) {
        std::string acc[2];
        const char *tdev[2] = {"cpu", "cuda"};
        for (int i = 0; i < 2; i++) {
            CliResult t = run_cli("test --checkpoint " + dir + "/ref --data-dir " + data + " --test-subset 40" + mul +
                                  " --device " + tdev[i] + " --json " + dir + "/test-" + tdev[i] + ".json");
            ASSERT_EQ(t.status, 0) << tdev[i] << mul << ": " << t.err;
            acc[i] = slurp(dir + "/test-" + tdev[i] + ".json");
        }
        EXPECT_NE(acc[1].find("\"gpu_path\": \"resident\""), std::string::npos) << acc[1];
        size_t k = acc[1].find(", \"gpu_path\"");
        ASSERT_NE(k, std::string::npos) << acc[1];
        EXPECT_EQ(acc[1].substr(0, k), acc[0].substr(0, acc[0].rfind('}'))) << "mantis test --device cuda" << mul;
    }
}

} // namespace
