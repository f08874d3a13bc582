// test_gpu.cpp - the CUDA GEMM providers (gpu.h). Host-side logic runs
// everywhere: which providers the GPU takes, the "built without CUDA" / "no
// CUDA device" answers of gpu.h and of mts_gemm with device = CUDA. The
// kernel tests compare every GPU provider with mts_gemm_ref bit for bit and
// skip, with the reason, when no CUDA device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mantis/gemm.h"
#include "mantis/gpu.h"
#include "mantis/intmul.h"
#include "mantis/lut.h"
#include "mantis/mul.h"
#include "test_rng.h"
#include "test_util.h"

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

// Why the GPU tests cannot run here ("" when they can).
std::string no_gpu_reason()
{
    mts_err err;
    if (mts_gpu_probe(nullptr, &err) != MTS_OK) return err.msg;
    return "";
}
#define NEED_GPU()                                                                 \
    do {                                                                           \
        std::string why = no_gpu_reason();                                         \
        if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;        \
    } while (0)

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
    EXPECT_EQ(mts_gpu_supports(&p, &err), MTS_EUNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find("E5M4"), std::string::npos) << err.msg;
    mts_lut_free(&e5);

    mts_lut i8{};
    ASSERT_EQ(mts_intmul_exact_lut(8, 0, &i8, &err), MTS_OK) << err.msg;
    p = prov(MTS_PROV_INT, &i8);
    EXPECT_EQ(mts_gpu_supports(&p, &err), MTS_OK);
    p.fmaq = 1;
    EXPECT_EQ(mts_gpu_supports(&p, &err), MTS_EINVAL);
    mts_lut_free(&i8);
}

// Without CUDA in the build or without a device, every entry point says
// which, and mts_gemm with device = CUDA returns the same answer (never a
// silent CPU fallback).
TEST(GpuHost, UnavailableGpuIsReported)
{
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

// mts_gpu_gemm (host pointers) against mts_gemm_ref on one shape; prints the
// first mismatches with indices and both results in hex.
void check(const mts_provider &p, int m, int n, int k, int ta, int tb, float beta, uint64_t seed, const char *what)
{
    uint64_t s = seed;
    int lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 1;
    std::vector<float> A((size_t)(ta ? k : m) * lda + 1), B((size_t)(tb ? n : k) * ldb + 1), C((size_t)m * ldc + 1);
    for (float &v : A) v = operand(&s);
    for (float &v : B) v = operand(&s);
    for (float &v : C) v = operand(&s);
    std::vector<float> R = C;
    mts_err err;
    ASSERT_EQ(mts_gemm_ref(&p, ta, tb, m, n, k, A.data(), lda, B.data(), ldb, beta, R.data(), ldc, &err), MTS_OK)
        << err.msg;
    ASSERT_EQ(mts_gpu_gemm(&p, ta, tb, m, n, k, A.data(), lda, B.data(), ldb, beta, C.data(), ldc, &err), MTS_OK)
        << what << ": " << err.msg;
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
}

// Ragged shapes: 1, primes, tile multiples and a tile plus one.
const int kShapes[][3] = {{1, 1, 1}, {1, 7, 3}, {17, 1, 33}, {31, 37, 41}, {16, 16, 16}, {33, 17, 65}, {5, 3, 0}};

void check_all(const mts_provider &p, const char *what)
{
    uint64_t seed = 1;
    for (auto &sh : kShapes)
        for (int t = 0; t < 4; t++) {
            float beta = t == 0 ? 0.0f : t == 1 ? 1.0f : -0.75f;
            check(p, sh[0], sh[1], sh[2], t & 1, (t >> 1) & 1, beta, seed++, what);
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
        check_all(prov(MTS_PROV_LUT, &lut), what.c_str());
        mts_provider wide = prov(MTS_PROV_LUT, &lut); // operands quantized wider, then truncated
        wide.in_fmt = mts_format_e8(M + 3);
        check(wide, 19, 23, 29, 0, 1, 0.0f, 99, (what + " in_fmt M+3").c_str());
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
                    p.qacc = qfmt(7, 4, bias, uf);
                    p.qprod = qfmt(7, 4, bias, uf, MTS_RNE);
                    std::string what = std::string("fmaq ") + (lutp ? "lut" : "native") + " chunk " +
                                       std::to_string(ch) + " bias " + std::to_string(bias) + " uf " +
                                       std::to_string(uf);
                    check(p, 13, 11, 70, 0, 0, 0.0f, 7 + ch, what.c_str());
                    check(p, 3, 17, 33, 1, 1, 1.0f, 8 + ch, what.c_str());
                }
    mts_lut_free(&lut);
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

} // namespace
