// Tests of the GEMM engine (sim/gemm*.c): every provider's fast kernel equals
// the naive reference (mts_gemm_ref) bit for bit on odd shapes, transposes,
// beta 0/1, padded leading dimensions and special values, for 1, 2 and 3
// threads and with the SIMD kernels on and off; the native kernel against a
// double-precision product; FMAq against mts_fmaq_dot per output; INT
// against a brute force written from the TFApprox formula.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"
#include "test_rng.h"

extern "C" {
#include "mantis/amsim.h"
#include "mantis/fmaq.h"
#include "mantis/fpbits.h"
#include "mantis/gemm.h"
#include "mantis/intmul.h"
#include "mantis/lut.h"
#include "mantis/mul.h"
}

namespace {


// Uniform in (-1, 1) times 2^e, e in [-4, 2]: DNN-like magnitudes that also
// reach the FMAq formats' overflow and underflow thresholds.
float rnd_val(uint64_t *s)
{
    double u = (double)(splitmix64(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    int e = (int)(splitmix64(s) % 7) - 4;
    return (float)std::ldexp(u, e);
}

// A stored matrix rows x cols with row stride ld; padding holds NaN so a
// kernel that reads it shows up as a NaN in the result.
struct Mat {
    int rows, cols, ld;
    std::vector<float> v;
    Mat(int r, int c, int pad, uint64_t *s) : rows(r), cols(c), ld(c + pad), v((size_t)r * (c + pad))
    {
        for (int i = 0; i < r; i++)
            for (int j = 0; j < ld; j++) v[(size_t)i * ld + j] = j < c ? rnd_val(s) : NAN;
    }
    float &at(int i, int j) { return v[(size_t)i * ld + j]; }
};

// Special values: zeros and subnormals everywhere (kernels take them), and
// in a few rows / columns only: inf, NaN, huge and tiny values.
void add_specials(Mat &x, uint64_t *s, bool wild)
{
    const float tame[] = {0.0f, -0.0f, 1e-40f, -3e-39f};
    const float w[] = {INFINITY, -INFINITY, NAN, 3e38f, -2e30f, 1e-30f, 7e25f, -1e-25f};
    for (int i = 0; i < x.rows; i++)
        for (int j = 0; j < x.cols; j++) {
            uint64_t r = splitmix64(s) % 100;
            if (r < 15) x.at(i, j) = tame[splitmix64(s) % 4];
            else if (wild && r < 17 && (i % 5 == 1 || j % 7 == 3)) x.at(i, j) = w[splitmix64(s) % 8];
        }
}

// Zeros (signed) and subnormals (which quantize to zeros) in bands of rows:
// three rows none, three rows 15%, three rows half, three rows all, so that
// whichever operand the kernels take as rows, some tiles are sparse enough
// for the quad kernel's sparse form and some are not.
void sparsify(Mat &x, uint64_t *s)
{
    const float tame[] = {0.0f, -0.0f, 1e-40f, -3e-39f};
    const unsigned pct[] = {0, 15, 50, 100};
    for (int i = 0; i < x.rows; i++)
        for (int j = 0; j < x.cols; j++)
            if (splitmix64(s) % 100 < pct[(i / 3) % 4]) x.at(i, j) = tame[splitmix64(s) % 4];
}

// Spreads values over 2^-40..2^5 so that sums swamp small terms (where
// RTZ and RNE accumulation differ) and products cross R_UF and R_OF.
void widen(Mat &x, uint64_t *s)
{
    for (int i = 0; i < x.rows; i++)
        for (int j = 0; j < x.cols; j++) x.at(i, j) = std::ldexp(x.at(i, j), -(int)(splitmix64(s) % 46) + 5);
}

std::vector<uint32_t> bits_of(const std::vector<float> &c)
{
    std::vector<uint32_t> b(c.size());
    for (size_t i = 0; i < c.size(); i++) b[i] = mts_f2u(c[i]);
    return b;
}

mts_provider prov(mts_prov_kind kind)
{
    mts_provider p;
    std::memset(&p, 0, sizeof p);
    p.kind = kind;
    p.chunk = 16;
    return p;
}

// Tables and mulops shared by the tests; each table is built on first use
// (every test runs in its own process under CTest).
struct World {
    mts_lut exact7{}, mbm7{}, mitchell5{}, mbm4{}, exact6{}, e5m4{}, weird7{}, zeroes7{}, below7{}, trunc8{}, int8u{}, int4s{}, asym7{};
    mts_mulop mbm_op{};
    World()
    {
        mts_err err;
        mts_format bf16 = mts_format_e8(7);
        EXPECT_EQ(mts_mulop_model(&mbm_op, "mbm", &bf16, &err), MTS_OK) << err.msg;
    }
    // Builds member table l if not yet built; returns it.
    mts_lut *use(mts_lut &l)
    {
        mts_err err;
        mts_format bf16 = mts_format_e8(7), fe5m4;
        if (l.entry) return &l;
        if (&l == &exact7) gen("exact", bf16, &l);
        if (&l == &mbm7) gen("mbm", bf16, &l);
        if (&l == &mitchell5) gen("mitchell", mts_format_e8(5), &l);
        // byte tables of 16 and 64 entries a row: the AVX2 kernel's one- and
        // four-shuffle lookups (bf16's takes eight)
        if (&l == &mbm4) gen("mbm", mts_format_e8(4), &l);
        if (&l == &exact6) gen("exact", mts_format_e8(6), &l);
        if (&l == &e5m4) {
            EXPECT_EQ(mts_format_parse("e5m4", &fe5m4, &err), MTS_OK) << err.msg;
            gen("exact", fe5m4, &l);
        }
        if (&l == &trunc8) gen("trunc", mts_format_e8(8), &l); // M > 7: the gather path with a real table
        // Synthetic tables: zero-flag entries (kernel-safe); in weird7,
        // adjustments outside [-2, 1] that force the scalar kernel; in
        // below7, products below 1.0 (adjustments -1, -2): still gathers.
        if (&l == &zeroes7) {
            gen("mbm", bf16, &l);
            for (size_t i = 0; i < l.n; i += 37) l.entry[i] = MTS_LUT_ZERO;
        }
        if (&l == &weird7) {
            gen("exact", bf16, &l);
            for (size_t i = 5; i < l.n; i += 101) l.entry[i] = (l.entry[i] & MTS_LUT_MAN) | (0xFDu << 24);
            for (size_t i = 9; i < l.n; i += 211) l.entry[i] = MTS_LUT_ZERO;
        }
        if (&l == &below7) {
            gen("exact", bf16, &l);
            for (size_t i = 3; i < l.n; i += 29)
                l.entry[i] = (l.entry[i] & MTS_LUT_MAN) | ((uint32_t)(uint8_t)(int8_t)(-1 - (int)(i % 2)) << 24);
        }
        // asym7: mbm with mantissas perturbed off the diagonal, so T[a][b] !=
        // T[b][a], still a byte table (adj 0/1, 7 mantissa bits).
        if (&l == &asym7) {
            gen("mbm", bf16, &l);
            for (size_t i = 0; i < l.n; i += 13)
                if ((i >> 7) != (i & 127)) l.entry[i] ^= (uint32_t)((i % 5) + 1) << 16;
        }
        if (&l == &int8u) {
            EXPECT_EQ(mts_intmul_exact_lut(8, 0, &l, &err), MTS_OK) << err.msg;
        }
        if (&l == &int4s) {
            EXPECT_EQ(mts_intmul_exact_lut(4, 1, &l, &err), MTS_OK) << err.msg;
            for (size_t i = 0; i < l.n; i += 3) l.entry[i] += (uint32_t)((i % 7) - 3); // approximate
        }
        EXPECT_NE(l.entry, nullptr) << "table not built";
        return &l;
    }
    void gen(const char *model, mts_format f, mts_lut *lut)
    {
        mts_mulop op;
        mts_err err;
        ASSERT_EQ(mts_mulop_model(&op, model, &f, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_lut_generate(&op, lut, &err), MTS_OK) << err.msg;
    }
};

World &world()
{
    static World w;
    return w;
}

struct Named {
    std::string name;
    mts_provider p;
};

std::vector<Named> providers()
{
    World &w = world();
    std::vector<Named> v;
    mts_provider p = prov(MTS_PROV_NATIVE);
    v.push_back({"native", p});
    p = prov(MTS_PROV_LUT);
    p.lut = &w.exact7;
    v.push_back({"lut-exact-bf16", p});
    p.lut = &w.mbm7;
    v.push_back({"lut-mbm-bf16", p});
    p.in_fmt = mts_format_e8(10); // wider input format: AMSim truncates to 7 bits
    v.push_back({"lut-mbm-bf16-in-e8m10", p});
    std::memset(&p.in_fmt, 0, sizeof p.in_fmt);
    p.lut = &w.mitchell5;
    v.push_back({"lut-mitchell-e8m5", p});
    p.lut = &w.mbm4;
    v.push_back({"lut-mbm-e8m4", p});
    p.lut = &w.exact6;
    v.push_back({"lut-exact-e8m6", p});
    p.lut = &w.e5m4;
    v.push_back({"lut-exact-e5m4", p});
    p.lut = &w.zeroes7;
    v.push_back({"lut-zero-entries", p});
    p.lut = &w.weird7;
    v.push_back({"lut-wide-adjust", p});
    p.lut = &w.below7;
    v.push_back({"lut-adjust-below-one", p});
    p.lut = &w.trunc8;
    v.push_back({"lut-trunc-e8m8", p});
    p = prov(MTS_PROV_MULOP);
    p.mul = &w.mbm_op;
    v.push_back({"mulop-mbm-bf16", p});

    mts_provider f = prov(MTS_PROV_NATIVE);
    f.fmaq = 1;
    f.qprod = qfmt(7, 4, 12);
    f.qacc = qfmt(7, 4, 10);
    v.push_back({"fmaq-native-M7E4", f});
    f.kind = MTS_PROV_LUT;
    f.lut = &w.mbm7;
    v.push_back({"fmaq-lut-M7E4", f});
    f.lut = &w.trunc8; // M = 8: gathers, and Q_prod really truncates products
    v.push_back({"fmaq-lut-e8m8-gather", f});
    f.lut = &w.mbm7;
    f.qprod.underflow = f.qacc.underflow = 0;
    f.chunk = 5;
    v.push_back({"fmaq-lut-M7E4-noUF-chunk5", f});
    f.qprod = qfmt(3, 3, 4);
    f.qacc = qfmt(4, 3, 3);
    f.chunk = 0; // default 16
    v.push_back({"fmaq-lut-M4E3", f});
    f.qacc.rnd = MTS_RNE;
    v.push_back({"fmaq-lut-rne", f});
    f = prov(MTS_PROV_MULOP);
    f.mul = &w.mbm_op;
    f.fmaq = 1;
    f.qprod = qfmt(7, 4, 12);
    f.qacc = qfmt(7, 4, 10);
    v.push_back({"fmaq-mulop", f});

    p = prov(MTS_PROV_INT);
    p.lut = &w.int8u;
    v.push_back({"int8u-exact", p});
    p.lut = &w.int4s;
    v.push_back({"int4s-approx", p});
    return v;
}

// Runs one GEMM through mts_gemm (fast) or mts_gemm_ref and returns C.
std::vector<float> run(const mts_provider &p, bool ref, int tA, int tB, int m, int n, int k, Mat &A, Mat &B,
                       float beta, const std::vector<float> &C0, int ldc)
{
    std::vector<float> C = C0;
    mts_err err;
    int rc = ref ? mts_gemm_ref(&p, tA, tB, m, n, k, A.v.data(), A.ld, B.v.data(), B.ld, beta, C.data(), ldc, &err)
                 : mts_gemm(&p, tA, tB, m, n, k, A.v.data(), A.ld, B.v.data(), B.ld, beta, C.data(), ldc, &err);
    EXPECT_EQ(rc, MTS_OK) << err.msg;
    return C;
}

// First index where two results differ in bits, or -1.
long first_diff(const std::vector<float> &a, const std::vector<float> &b)
{
    std::vector<uint32_t> x = bits_of(a), y = bits_of(b);
    for (size_t i = 0; i < x.size(); i++)
        if (x[i] != y[i]) return (long)i;
    return -1;
}

// Fast kernel (threads as listed, SIMD on; SIMD off once) against the
// reference for all transposes and beta in {0, 1, -0.5}.
void check_provider_shape(const Named &np, int m, int n, int k, int specials, uint64_t seed,
                          std::vector<int> thread_counts = {1})
{
    bool few = thread_counts.size() > 1; // threaded runs: fewer layouts, the point is the split
    if (np.p.lut) world().use(*const_cast<mts_lut *>(np.p.lut));
    for (int tA = 0; tA < 2; tA++)
        for (int tB = 0; tB < 2; tB++)
            for (float beta : {0.0f, 1.0f, -0.5f}) {
                if (beta == -0.5f && m * n < 100) continue; // general beta: once per larger shape
                if (few && (tA != tB || beta == 1.0f)) continue;
                uint64_t s = seed + (uint64_t)(tA * 4 + tB * 2) + (beta == 0.0f ? 0u : beta == 1.0f ? 1u : 9u);
                // beta 0: operands stored without gaps (ld = cols), which lets
                // mts_gemm read a non-transposed B in place and round it where
                // the kernels read it (gemm_job.bround); else padded rows
                bool dense = beta == 0.0f;
                Mat A(tA ? k : m, tA ? m : k, dense ? 0 : 3, &s), B(tB ? n : k, tB ? k : n, dense ? 0 : 2, &s);
                if (specials == 3) { // magnitudes 2^-40..2^5: swamping, flushes, saturation
                    widen(A, &s);
                    widen(B, &s);
                } else if (specials == 5 || specials == 6) { // gradients of 2^-70 and less in some rows
                    for (int i = 0; i < A.rows; i += 3)
                        for (int j = 0; j < A.cols; j++) A.at(i, j) = std::ldexp(A.at(i, j), -68);
                    if (specials == 6) { // and a row and a column of B that put their products below the normal range
                        for (int j = 0; j < B.cols; j++) B.at(B.rows / 2, j) = std::ldexp(B.at(B.rows / 2, j), -58);
                        for (int i = 0; i < B.rows; i++) B.at(i, B.cols / 2) = std::ldexp(B.at(i, B.cols / 2), -58);
                    }
                } else if (specials == 4) { // sparse rows (and columns, for a swapped job)
                    sparsify(A, &s);
                    sparsify(B, &s);
                } else if (specials) {
                    add_specials(A, &s, specials > 1);
                    add_specials(B, &s, specials > 1);
                }
                int ldc = n + 1;
                std::vector<float> C0((size_t)m * ldc);
                for (float &c : C0) c = rnd_val(&s);
                if (specials > 1) C0[0] = NAN; // beta = 0 must ignore it
                std::vector<float> ref = run(np.p, true, tA, tB, m, n, k, A, B, beta, C0, ldc);
                for (int threads : thread_counts) {
                    for (int simd : {1, 0}) {
                        if (!simd && threads != thread_counts.back()) continue;
                        mts_provider p = np.p;
                        p.threads = threads;
                        p.scalar_only = !simd;
                        std::vector<float> got = run(p, false, tA, tB, m, n, k, A, B, beta, C0, ldc);
                        long d = first_diff(ref, got);
                        ASSERT_EQ(d, -1) << np.name << " m=" << m << " n=" << n << " k=" << k << " tA=" << tA
                                         << " tB=" << tB << " beta=" << beta << " threads=" << threads
                                         << " simd=" << simd << " specials=" << specials << " at C[" << d / ldc
                                         << "][" << d % ldc << "]: ref " << std::hexfloat << ref[(size_t)d]
                                         << " got " << got[(size_t)d];
                    }
                }
            }
}

// One parameterized suite per provider, so each shows (and fails) on its own.
class GemmProvider : public ::testing::TestWithParam<int> {};

// Per provider (one process each under CTest): odd shapes; special values;
// then a shape above 2^18 multiply-adds, where mts_gemm uses its threads:
// 40 x 140 x 50 gives 10 x 3 tiles, so 2 and 3 threads split them
// differently.
TEST_P(GemmProvider, FastKernelEqualsReference)
{
    const int shapes[][3] = {{1, 1, 1}, {7, 13, 29}, {33, 65, 17}, {5, 70, 20}};
    Named np = providers()[(size_t)GetParam()];
    uint64_t seed = 1 + 100 * (uint64_t)GetParam();
    for (auto &sh : shapes) check_provider_shape(np, sh[0], sh[1], sh[2], 0, seed += 16);
    check_provider_shape(np, 33, 65, 17, 1, seed += 16); // zeros, subnormals: kernels' own path
    check_provider_shape(np, 9, 40, 37, 2, seed += 16);  // plus inf, NaN, huge, tiny in some rows/cols
    check_provider_shape(np, 12, 35, 70, 3, seed += 16); // wide magnitudes
    check_provider_shape(np, 40, 140, 50, 1, seed += 16, {1, 2, 3});
}

// Skinny shapes (n well below m, as a convolution's output channels against
// batch x pixels): mts_gemm runs the transposed problem there (swapped
// operand roles, transposed byte table, transposed stores); the bits must
// not change. Ragged m, n of 1..7, k across chunk boundaries, specials.
TEST_P(GemmProvider, SkinnyShapesEqualReference)
{
    const int shapes[][3] = {{70, 5, 20}, {130, 6, 25}, {97, 1, 3}, {66, 16, 33}, {200, 7, 1}};
    Named np = providers()[(size_t)GetParam()];
    uint64_t seed = 7 + 100 * (uint64_t)GetParam();
    for (auto &sh : shapes) check_provider_shape(np, sh[0], sh[1], sh[2], 0, seed += 16);
    check_provider_shape(np, 70, 6, 17, 1, seed += 16);
    check_provider_shape(np, 90, 3, 37, 2, seed += 16);
    check_provider_shape(np, 81, 5, 40, 3, seed += 16);
    check_provider_shape(np, 600, 6, 75, 1, seed += 16, {1, 2});
}

// Small m or n: the AVX-512 LUT kernel picks its register tile per job (1,
// 2 or 4 vectors; 4, 6 or 8 rows), with B packed (more than 4 row blocks)
// or read unpacked. These shapes select each tile with each form of B; the
// bits must not depend on the tile.
TEST_P(GemmProvider, EveryTileShapeEqualsReference)
{
    const int shapes[][3] = {{6, 25, 40},  {36, 30, 21}, {16, 150, 24}, {48, 150, 12}, {48, 10, 19},
                             {24, 20, 30}, {4, 10, 9},   {7, 13, 29},   {64, 120, 20}, {200, 40, 7}, {4, 30, 12}};
    Named np = providers()[(size_t)GetParam()];
    uint64_t seed = 11 + 100 * (uint64_t)GetParam();
    for (auto &sh : shapes) check_provider_shape(np, sh[0], sh[1], sh[2], 0, seed += 16);
    check_provider_shape(np, 36, 30, 21, 1, seed += 16, {1, 2});
}

// Subnormal operands multiply as zeros (the quantize pass flushes them), also
// where mts_gemm reads B in place and the kernels round it in registers: a
// subnormal whose rounding carries into the smallest normal (0x007FFFFF ->
// 2^-126 at 7 bits) must still give a signed-zero product. Every transpose,
// so both a plain B and a swapped job's op(A)^T are read in place.
TEST_P(GemmProvider, SubnormalsThatRoundUpMultiplyAsZeros)
{
    Named np = providers()[(size_t)GetParam()];
    if (np.p.lut) world().use(*const_cast<mts_lut *>(np.p.lut));
    const uint32_t subs[] = {0x007FFFFFu, 0x807FFFFFu, 0x007F8000u, 0x807FC000u, 0x00000001u};
    const int shapes[][3] = {{4, 40, 5}, {60, 3, 5}, {8, 70, 9}, {40, 130, 6}};
    uint64_t s = 77 + (uint64_t)GetParam();
    for (auto &sh : shapes)
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++) {
                int m = sh[0], n = sh[1], k = sh[2];
                Mat A(tA ? k : m, tA ? m : k, 0, &s), B(tB ? n : k, tB ? k : n, 0, &s);
                for (Mat *x : {&A, &B})
                    for (size_t i = 0; i < x->v.size(); i += 3) x->v[i] = mts_u2f(subs[(i / 3) % 5]);
                std::vector<float> C0((size_t)m * n, 0.0f);
                std::vector<float> ref = run(np.p, true, tA, tB, m, n, k, A, B, 0.0f, C0, n);
                std::vector<float> got = run(np.p, false, tA, tB, m, n, k, A, B, 0.0f, C0, n);
                long d = first_diff(ref, got);
                ASSERT_EQ(d, -1) << np.name << " m=" << m << " n=" << n << " k=" << k << " tA=" << tA << " tB=" << tB
                                 << " at C[" << d / n << "][" << d % n << "]: ref 0x" << std::hex
                                 << mts_f2u(ref[(size_t)d]) << " got 0x" << mts_f2u(got[(size_t)d]);
            }
}

// The quad kernel of the AVX-512 VBMI LUT path (4 rows x 64 columns, packed
// B, one lookup for four vectors, a row's exponent parity picking Sb or
// 2 Sb): whole and ragged panels, magnitudes that cover both parities and
// the edges of the kernels' exponent range, zeros and subnormals, specials
// in some rows and columns, and two threads.
TEST_P(GemmProvider, QuadKernelShapesEqualReference)
{
    Named np = providers()[(size_t)GetParam()];
    uint64_t seed = 21 + 100 * (uint64_t)GetParam();
    check_provider_shape(np, 40, 64, 33, 0, seed += 16);
    check_provider_shape(np, 45, 150, 30, 3, seed += 16);
    check_provider_shape(np, 37, 129, 26, 1, seed += 16);
    check_provider_shape(np, 30, 70, 25, 2, seed += 16);
    check_provider_shape(np, 64, 200, 40, 1, seed += 16, {1, 2});
}

// The quad kernel's sparse form (rows of A with many zeros run over their
// nonzero columns only): bands of rows with no, few, half and all elements
// zero in both operands, so tiles of either kind meet in one job; ragged
// panels; two threads.
TEST_P(GemmProvider, SparseRowsEqualReference)
{
    Named np = providers()[(size_t)GetParam()];
    uint64_t seed = 41 + 100 * (uint64_t)GetParam();
    check_provider_shape(np, 48, 64, 40, 4, seed += 16);
    check_provider_shape(np, 37, 150, 33, 4, seed += 16);
    check_provider_shape(np, 64, 129, 70, 4, seed += 16, {1, 2});
}

// Operands beyond the fixed exponent rule (|e| <= 62): rows of A at 2^-68
// and below against ordinary B run on the SIMD kernels when the job's
// ranges allow it (gemm_lutpack.rowbad), and with a row and a column of B
// at 2^-58 and below (products under FP32's normal range) they fall back to
// the scalar kernel; both must equal the reference.
TEST_P(GemmProvider, TinyRowsEqualReference)
{
    Named np = providers()[(size_t)GetParam()];
    uint64_t seed = 61 + 100 * (uint64_t)GetParam();
    check_provider_shape(np, 40, 70, 33, 5, seed += 16);
    check_provider_shape(np, 40, 70, 33, 6, seed += 16);
    check_provider_shape(np, 7, 20, 9, 5, seed += 16);
}

// mts_gemm_acc: a GEMM split along k into parts (mts_gemm over the first,
// mts_gemm_acc over the others, each going on from the sums stored in C)
// equals the reference over the whole k, bit for bit: plain and swapped jobs
// (skinny shapes), the quad kernel and its sparse form, special values
// (NaN and inf sums go on as NaN and inf), tiny rows, all transposes, 1 and
// 2 threads, SIMD on and off. Providers without FP32 sums refuse it.
TEST_P(GemmProvider, SplitAlongKEqualsReference)
{
    Named np = providers()[(size_t)GetParam()];
    if (np.p.lut) world().use(*const_cast<mts_lut *>(np.p.lut));
    mts_err err;
    if (!mts_gemm_acc_ok(&np.p)) {
        std::vector<float> a(4, 1.0f), c(4, 0.0f);
        EXPECT_EQ(mts_gemm_acc(&np.p, 0, 0, 2, 2, 2, a.data(), 2, a.data(), 2, c.data(), 2, &err), MTS_EUNSUPPORTED)
            << np.name;
        return;
    }
    // m, n, k, specials (as check_provider_shape), the two cuts of k
    const int cases[][6] = {{7, 13, 29, 0, 5, 17},  {130, 6, 40, 2, 1, 39},   {40, 70, 33, 1, 16, 20},
                            {48, 129, 70, 4, 30, 31}, {40, 70, 33, 6, 11, 32}, {66, 16, 45, 3, 2, 44}};
    uint64_t s = 91 + 100 * (uint64_t)GetParam();
    for (auto &cs : cases) {
        int m = cs[0], n = cs[1], k = cs[2], sp = cs[3], cut[4] = {0, cs[4], cs[5], cs[2]};
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++) {
                Mat A(tA ? k : m, tA ? m : k, tA, &s), B(tB ? n : k, tB ? k : n, 2 * tB, &s);
                if (sp == 4) {
                    sparsify(A, &s);
                    sparsify(B, &s);
                } else if (sp == 6) {
                    for (int i = 0; i < A.rows; i += 3)
                        for (int j = 0; j < A.cols; j++) A.at(i, j) = std::ldexp(A.at(i, j), -68);
                } else if (sp == 3) {
                    widen(A, &s);
                    widen(B, &s);
                } else if (sp) {
                    add_specials(A, &s, sp > 1);
                    add_specials(B, &s, sp > 1);
                }
                int ldc = n + 1;
                std::vector<float> C0((size_t)m * ldc, 0.5f);
                std::vector<float> ref = run(np.p, true, tA, tB, m, n, k, A, B, 0.0f, C0, ldc);
                for (int threads : {1, 2})
                    for (int simd : {1, 0}) {
                        mts_provider p = np.p;
                        p.threads = threads;
                        p.scalar_only = !simd;
                        std::vector<float> got = C0;
                        for (int part = 0; part < 3; part++) {
                            int k0 = cut[part], kc = cut[part + 1] - k0;
                            const float *a = A.v.data() + (tA ? (size_t)k0 * A.ld : (size_t)k0);
                            const float *b = B.v.data() + (tB ? (size_t)k0 : (size_t)k0 * B.ld);
                            int rc = part == 0 ? mts_gemm(&p, tA, tB, m, n, kc, a, A.ld, b, B.ld, 0.0f, got.data(), ldc, &err)
                                               : mts_gemm_acc(&p, tA, tB, m, n, kc, a, A.ld, b, B.ld, got.data(), ldc, &err);
                            ASSERT_EQ(rc, MTS_OK) << err.msg;
                        }
                        long d = first_diff(ref, got);
                        ASSERT_EQ(d, -1) << np.name << " m=" << m << " n=" << n << " k=" << k << " cuts " << cut[1]
                                         << "," << cut[2] << " tA=" << tA << " tB=" << tB << " threads=" << threads
                                         << " simd=" << simd << " at C[" << d / ldc << "][" << d % ldc << "]: ref "
                                         << std::hexfloat << ref[(size_t)d] << " got " << got[(size_t)d];
                    }
            }
    }
}

// mts_gemm_batch: each GEMM of a batch (the tables derived once per thread
// and borrowed by the others, small GEMMs side by side) equals the
// reference run on its own, bit for bit: 16 x 16 x 16 heads (as attention)
// and a skinny shape run swapped, all transposes, 1 and 3 threads, beta 0
// and -0.5, special values; a NULL array is refused.
void check_batch(const Named &np, uint64_t s)
{
    if (np.p.lut) world().use(*const_cast<mts_lut *>(np.p.lut));
    const int shapes[][3] = {{16, 16, 16}, {70, 6, 20}, {9, 70, 13}};
    const int count = 7;
    for (auto &sh : shapes)
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++)
                for (float beta : {0.0f, -0.5f}) {
                    int m = sh[0], n = sh[1], k = sh[2], ldc = n + 1;
                    std::vector<Mat> As, Bs;
                    std::vector<std::vector<float>> C0, ref;
                    for (int b = 0; b < count; b++) {
                        As.emplace_back(tA ? k : m, tA ? m : k, 1, &s);
                        Bs.emplace_back(tB ? n : k, tB ? k : n, 0, &s);
                        if (b == 3) {
                            add_specials(As.back(), &s, true);
                            add_specials(Bs.back(), &s, true);
                        }
                        C0.emplace_back((size_t)m * ldc);
                        for (float &c : C0.back()) c = rnd_val(&s);
                        ref.push_back(run(np.p, true, tA, tB, m, n, k, As[b], Bs[b], beta, C0[b], ldc));
                    }
                    for (int threads : {1, 3}) {
                        mts_provider p = np.p;
                        p.threads = threads;
                        std::vector<std::vector<float>> got = C0;
                        std::vector<const float *> a, bb;
                        std::vector<float *> c;
                        for (int b = 0; b < count; b++) {
                            a.push_back(As[b].v.data());
                            bb.push_back(Bs[b].v.data());
                            c.push_back(got[b].data());
                        }
                        mts_err err;
                        ASSERT_EQ(mts_gemm_batch(&p, count, tA, tB, m, n, k, a.data(), As[0].ld, bb.data(), Bs[0].ld, beta,
                                                 c.data(), ldc, &err),
                                  MTS_OK)
                            << np.name << ": " << err.msg;
                        for (int b = 0; b < count; b++) {
                            long d = first_diff(ref[b], got[b]);
                            ASSERT_EQ(d, -1) << np.name << " GEMM " << b << " of the batch, m=" << m << " n=" << n
                                             << " k=" << k << " tA=" << tA << " tB=" << tB << " beta=" << beta
                                             << " threads=" << threads << " at C[" << d / ldc << "][" << d % ldc
                                             << "]: ref " << std::hexfloat << ref[b][(size_t)d] << " got "
                                             << got[b][(size_t)d];
                        }
                    }
                }
    mts_err err;
    float x = 1.0f, *cp = &x;
    const float *xp = &x;
    EXPECT_EQ(mts_gemm_batch(&np.p, 1, 0, 0, 1, 1, 1, NULL, 1, &xp, 1, 0.0f, &cp, 1, &err), MTS_EINVAL);
}

TEST_P(GemmProvider, BatchEqualsReferencePerGemm)
{
    check_batch(providers()[(size_t)GetParam()], 171 + 100 * (uint64_t)GetParam());
}

// mts_gemm_t: the result stored transposed (C[j*ldc + i]) must equal the
// reference's, bit for bit, element by element, with beta applied there and
// the padding of each C^T row untouched. Skinny shapes run as swapped jobs
// (which then write rows), the others as plain ones (writing columns); INT
// goes through a temporary.
TEST_P(GemmProvider, TransposedResultEqualsReference)
{
    const int shapes[][3] = {{7, 13, 29}, {130, 6, 25}, {6, 25, 300}, {16, 150, 40}, {1, 1, 1}};
    Named np = providers()[(size_t)GetParam()];
    if (np.p.lut) world().use(*const_cast<mts_lut *>(np.p.lut));
    uint64_t seed = 31 + 100 * (uint64_t)GetParam();
    int nshape = 0;
    for (auto &sh : shapes) {
        int m = sh[0], n = sh[1], k = sh[2];
        nshape++;
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++)
                for (float beta : {0.0f, -0.5f}) {
                    uint64_t s = seed++;
                    Mat A(tA ? k : m, tA ? m : k, 1, &s), B(tB ? n : k, tB ? k : n, 2, &s);
                    if (nshape == 2) {
                        add_specials(A, &s, true);
                        add_specials(B, &s, true);
                    }
                    int ldc = n + 1, ldt = m + 3;
                    std::vector<float> C0((size_t)m * ldc), T0((size_t)n * ldt);
                    for (float &c : C0) c = rnd_val(&s);
                    for (float &c : T0) c = rnd_val(&s);
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < n; j++) T0[(size_t)j * ldt + i] = C0[(size_t)i * ldc + j];
                    std::vector<float> ref = run(np.p, true, tA, tB, m, n, k, A, B, beta, C0, ldc);
                    for (int threads : {1, 2}) {
                        mts_provider p = np.p;
                        p.threads = threads;
                        std::vector<float> got = T0;
                        mts_err err;
                        ASSERT_EQ(mts_gemm_t(&p, tA, tB, m, n, k, A.v.data(), A.ld, B.v.data(), B.ld, beta,
                                             got.data(), ldt, &err),
                                  MTS_OK)
                            << err.msg;
                        for (int j = 0; j < n; j++)
                            for (int i = 0; i < ldt; i++) {
                                float want = i < m ? ref[(size_t)i * ldc + j] : T0[(size_t)j * ldt + i];
                                float g = got[(size_t)j * ldt + i];
                                ASSERT_EQ(mts_f2u(g), mts_f2u(want))
                                    << np.name << " m=" << m << " n=" << n << " k=" << k << " tA=" << tA << " tB=" << tB
                                    << " beta=" << beta << " threads=" << threads << " at C^T[" << j << "][" << i
                                    << "]: ref " << std::hexfloat << want << " got " << g;
                            }
                    }
                }
    }
}

// The transposed problem must keep the caller's operand order in every
// product: with a table where T[a][b] != T[b][a] (byte and gather paths,
// with and without FMAq) a swapped order would change bits.
TEST(Gemm, SkinnyShapesKeepOperandOrderOfAsymmetricTables)
{
    mts_lut *t = world().use(world().asym7);
    size_t asym = 0;
    for (size_t i = 0; i < t->n; i++) asym += t->entry[i] != t->entry[(i & 127) << 7 | i >> 7];
    ASSERT_GT(asym, 1000u);
    mts_provider p = prov(MTS_PROV_LUT);
    p.lut = t;
    check_provider_shape({"lut-asym7", p}, 70, 5, 20, 1, 901);
    check_provider_shape({"lut-asym7", p}, 130, 6, 25, 2, 917);
    mts_provider z = p;
    z.lut = world().use(world().zeroes7); // gathers
    check_provider_shape({"lut-zeroes7", z}, 70, 5, 20, 1, 933);
    p.fmaq = 1;
    p.qprod = qfmt(7, 4, 12);
    p.qacc = qfmt(7, 4, 10);
    check_provider_shape({"fmaq-lut-asym7", p}, 70, 5, 33, 1, 949);
    z.fmaq = 1;
    z.qprod = p.qprod;
    z.qacc = p.qacc;
    check_provider_shape({"fmaq-lut-zeroes7", z}, 66, 3, 40, 2, 965);
}

// A batch's shared tables keep the operand order too: its skinny GEMMs run
// swapped on the transposed byte table, its square ones on the plain one.
TEST(Gemm, BatchKeepsOperandOrderOfAsymmetricTables)
{
    mts_provider p = prov(MTS_PROV_LUT);
    p.lut = world().use(world().asym7);
    check_batch({"lut-asym7", p}, 977);
    p.fmaq = 1;
    p.qprod = qfmt(7, 4, 12);
    p.qacc = qfmt(7, 4, 10);
    check_batch({"fmaq-lut-asym7", p}, 991);
}

// The kernels' tables derived from a LUT are cached by content (lut.c): a
// LUT edited in place between calls, at the same address, must not get the
// table of its old entries. Transposing an asymmetric table changes most
// entries and keeps it on the same path (byte or gather).
TEST(Gemm, LutEditedInPlaceGetsItsNewTable)
{
    for (mts_lut *src : {world().use(world().asym7), world().use(world().zeroes7)}) {
        std::vector<uint32_t> e(src->entry, src->entry + src->n);
        mts_lut t = *src;
        t.entry = e.data();
        mts_provider p = prov(MTS_PROV_LUT);
        p.lut = &t;
        check_provider_shape({"lut-before", p}, 70, 33, 20, 1, 981);
        for (size_t i = 0; i < t.n; i++) e[i] = src->entry[(i & 127) << 7 | i >> 7];
        ASSERT_NE(memcmp(e.data(), src->entry, sizeof(uint32_t) * t.n), 0);
        check_provider_shape({"lut-edited", p}, 70, 33, 20, 1, 981);
        p.fmaq = 1;
        p.qprod = qfmt(7, 4, 12);
        p.qacc = qfmt(7, 4, 10);
        check_provider_shape({"fmaq-lut-edited", p}, 70, 33, 20, 1, 997);
    }
}

INSTANTIATE_TEST_SUITE_P(Gemm, GemmProvider, ::testing::Range(0, (int)providers().size()),
                         [](const ::testing::TestParamInfo<int> &info) {
                             std::string n = providers()[(size_t)info.param].name;
                             for (char &c : n)
                                 if (!isalnum((unsigned char)c)) c = '_';
                             return n;
                         });

TEST(Gemm, OperandsAreQuantizedWithRne)
{
    // C = 1 x B through the exact bf16 LUT returns each quantized operand:
    // it must be mts_fmt_quantize(bf16, b, RNE), whatever the bit pattern.
    const int n = 4000;
    uint64_t s = 21;
    std::vector<float> b(n), c(n);
    for (int j = 0; j < n; j++) {
        uint32_t x = (uint32_t)splitmix64(&s);
        if (j % 4 == 1) x = (x & 0x807FFFFFu) | 0x7F000000u; // near the top binade: rounds to inf
        if (j % 4 == 2) x &= 0x80FFFFFFu;                    // subnormal or tiny
        b[j] = mts_u2f(x);
    }
    float one = 1.0f;
    mts_provider p = prov(MTS_PROV_LUT);
    p.lut = world().use(world().exact7);
    mts_err err;
    ASSERT_EQ(mts_gemm(&p, 0, 0, 1, n, 1, &one, 1, b.data(), n, 0.0f, c.data(), n, &err), MTS_OK) << err.msg;
    mts_format bf16 = mts_format_e8(7);
    for (int j = 0; j < n; j++) {
        uint32_t q = mts_fmt_quantize(&bf16, mts_f2u(b[j]), MTS_RNE);
        uint32_t want = mts_amsim(world().use(world().exact7), mts_f2u(1.0f), q);
        want = mts_f2u(0.0f + mts_u2f(want)); // the sum starts at +0: -0 becomes +0
        if (mts_f32_isnan(want)) want = MTS_F32_QNAN;
        ASSERT_EQ(mts_f2u(c[j]), want) << std::hex << mts_f2u(b[j]);
    }
}

TEST(Gemm, FmaqGemmEqualsFmaqDotPerOutput)
{
    World &w = world();
    mts_provider p = prov(MTS_PROV_LUT);
    p.lut = w.use(w.mbm7);
    p.fmaq = 1;
    p.qprod = qfmt(7, 4, 12);
    p.qacc = qfmt(7, 4, 10);
    const int m = 6, n = 40, k = 45;
    uint64_t s = 77;
    Mat A(m, k, 0, &s), B(k, n, 0, &s);
    std::vector<float> C((size_t)m * n);
    mts_err err;
    ASSERT_EQ(mts_gemm(&p, 0, 0, m, n, k, A.v.data(), k, B.v.data(), n, 0.0f, C.data(), n, &err), MTS_OK) << err.msg;
    mts_mulop op;
    mts_mulop_lut(&op, w.use(w.mbm7));
    mts_format bf16 = mts_format_e8(7);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            std::vector<uint32_t> x(k), y(k);
            for (int kk = 0; kk < k; kk++) {
                x[kk] = mts_fmt_quantize(&bf16, mts_f2u(A.at(i, kk)), MTS_RNE);
                y[kk] = mts_fmt_quantize(&bf16, mts_f2u(B.at(kk, j)), MTS_RNE);
            }
            uint32_t want = mts_fmaq_dot(&p.qprod, &p.qacc, 16, &op, x.data(), y.data(), (size_t)k, 1);
            ASSERT_EQ(mts_f2u(C[(size_t)i * n + j]), want) << "C[" << i << "][" << j << "]";
        }
}

TEST(Gemm, NativeKernelWithinFloatErrorBoundOfDouble)
{
    const int m = 17, n = 45, k = 300;
    uint64_t s = 5;
    Mat A(m, k, 0, &s), B(k, n, 0, &s);
    mts_provider p = prov(MTS_PROV_NATIVE);
    std::vector<float> C((size_t)m * n);
    mts_err err;
    ASSERT_EQ(mts_gemm(&p, 0, 0, m, n, k, A.v.data(), k, B.v.data(), n, 0.0f, C.data(), n, &err), MTS_OK);
    // recursive summation with rounded products: |err| <= gamma_(k+1) sum |a b|
    double u = std::ldexp(1.0, -24), gamma = (k + 1) * u / (1.0 - (k + 1) * u);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double exact = 0, mag = 0;
            for (int kk = 0; kk < k; kk++) {
                exact += (double)A.at(i, kk) * B.at(kk, j);
                mag += std::fabs((double)A.at(i, kk) * B.at(kk, j));
            }
            ASSERT_LE(std::fabs(C[(size_t)i * n + j] - exact), gamma * mag) << i << "," << j;
        }
}

TEST(Gemm, BlasProviderAgreesWithNativeWithinBound)
{
    if (!mts_gemm_have_blas()) GTEST_SKIP() << "built without OpenBLAS (libopenblas-dev not found by CMake)";
    const int m = 20, n = 31, k = 64;
    uint64_t s = 9;
    Mat A(k, m, 1, &s), B(n, k, 0, &s); // both transposed
    mts_provider p = prov(MTS_PROV_BLAS), q = prov(MTS_PROV_NATIVE);
    std::vector<float> C((size_t)m * n, 1.0f), D = C;
    mts_err err;
    ASSERT_EQ(mts_gemm(&p, 1, 1, m, n, k, A.v.data(), A.ld, B.v.data(), B.ld, 1.0f, C.data(), n, &err), MTS_OK)
        << err.msg;
    ASSERT_EQ(mts_gemm(&q, 1, 1, m, n, k, A.v.data(), A.ld, B.v.data(), B.ld, 1.0f, D.data(), n, &err), MTS_OK);
    for (size_t i = 0; i < C.size(); i++) ASSERT_NEAR(C[i], D[i], 1e-4) << i;
}

TEST(Gemm, IntProviderEqualsBruteForce)
{
    World &w = world();
    for (const mts_lut *lut : {w.use(w.int8u), w.use(w.int4s)}) {
        const int m = 7, n = 11, k = 23;
        uint64_t s = 3;
        Mat A(m, k, 0, &s), B(k, n, 0, &s);
        A.at(2, 3) = NAN; // NaN quantizes to the zero point, inf to an end code
        B.at(4, 5) = INFINITY;
        mts_provider p = prov(MTS_PROV_INT);
        p.lut = lut;
        std::vector<float> C((size_t)m * n);
        mts_err err;
        ASSERT_EQ(mts_gemm(&p, 0, 0, m, n, k, A.v.data(), k, B.v.data(), n, 0.0f, C.data(), n, &err), MTS_OK)
            << err.msg;
        // brute force: ranges over the finite values, then per output
        // sum over k of (T[qa][qb] - zb qa - za qb + za zb), scaled once
        auto range = [](Mat &x, double *lo, double *hi) {
            *lo = 0;
            *hi = 0;
            for (float v : x.v)
                if (std::isfinite(v)) {
                    *lo = std::fmin(*lo, v);
                    *hi = std::fmax(*hi, v);
                }
        };
        double lo, hi;
        mts_affine pa, pb;
        range(A, &lo, &hi);
        ASSERT_EQ(mts_affine_from_range(lo, hi, lut->int_bits, lut->int_signed, &pa, &err), MTS_OK);
        range(B, &lo, &hi);
        ASSERT_EQ(mts_affine_from_range(lo, hi, lut->int_bits, lut->int_signed, &pb, &err), MTS_OK);
        const int nb = lut->int_bits, mask = (1 << nb) - 1;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                int64_t acc = 0;
                for (int kk = 0; kk < k; kk++) {
                    int32_t qa = mts_affine_quantize(&pa, A.at(i, kk)), qb = mts_affine_quantize(&pb, B.at(kk, j));
                    int32_t t = (int32_t)lut->entry[((qa & mask) << nb) | (qb & mask)];
                    acc += (int64_t)t - (int64_t)pb.zero_point * qa - (int64_t)pa.zero_point * qb +
                           (int64_t)pa.zero_point * pb.zero_point;
                }
                float want = (float)(pa.scale * pb.scale * (double)acc);
                ASSERT_EQ(mts_f2u(C[(size_t)i * n + j]), mts_f2u(want)) << lut->model << " " << i << "," << j;
            }
    }
}

TEST(Gemm, IntProviderWithExactTableApproximatesTheProduct)
{
    // 8-bit affine quantization of values in [-1, 1): each product is off by
    // at most about (|a| + |b| + step) * step / 2 with step = 2/255.
    const int m = 5, n = 6, k = 50;
    uint64_t s = 11;
    std::vector<float> A((size_t)m * k), B((size_t)k * n), C((size_t)m * n);
    for (float &x : A) x = (float)((double)(splitmix64(&s) >> 11) / 9007199254740992.0 * 2 - 1);
    for (float &x : B) x = (float)((double)(splitmix64(&s) >> 11) / 9007199254740992.0 * 2 - 1);
    mts_provider p = prov(MTS_PROV_INT);
    p.lut = world().use(world().int8u);
    mts_err err;
    ASSERT_EQ(mts_gemm(&p, 0, 0, m, n, k, A.data(), k, B.data(), n, 0.0f, C.data(), n, &err), MTS_OK);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double exact = 0;
            for (int kk = 0; kk < k; kk++) exact += (double)A[(size_t)i * k + kk] * B[(size_t)kk * n + j];
            ASSERT_NEAR(C[(size_t)i * n + j], exact, k * 2.5 * (2.0 / 255)) << i << "," << j;
        }
}

TEST(Gemm, EmptyDimensionsAndBetaOnly)
{
    mts_provider p = prov(MTS_PROV_LUT);
    p.lut = world().use(world().exact7);
    std::vector<float> C = {1.5f, -2.0f, NAN, 4.0f};
    mts_err err;
    float a = 1.0f, b = 1.0f;
    ASSERT_EQ(mts_gemm(&p, 0, 0, 2, 2, 0, &a, 1, &b, 2, 1.0f, C.data(), 2, &err), MTS_OK);
    EXPECT_EQ(C[0], 1.5f);
    EXPECT_EQ(mts_f2u(C[2]), MTS_F32_QNAN); // NaN stays NaN, canonical
    ASSERT_EQ(mts_gemm(&p, 0, 0, 2, 2, 0, &a, 1, &b, 2, 0.0f, C.data(), 2, &err), MTS_OK);
    for (float c : C) EXPECT_EQ(mts_f2u(c), 0u); // beta 0: +0, C not read
    ASSERT_EQ(mts_gemm(&p, 0, 0, 0, 2, 3, nullptr, 3, &b, 2, 0.0f, C.data(), 2, &err), MTS_OK);
}

TEST(Gemm, RejectsBadArguments)
{
    mts_provider p = prov(MTS_PROV_NATIVE);
    float x[16] = {0};
    mts_err err;
    EXPECT_EQ(mts_gemm(nullptr, 0, 0, 2, 2, 2, x, 2, x, 2, 0.0f, x, 2, &err), MTS_EINVAL);
    EXPECT_EQ(mts_gemm(&p, 0, 0, -1, 2, 2, x, 2, x, 2, 0.0f, x, 2, &err), MTS_EINVAL);
    EXPECT_EQ(mts_gemm(&p, 0, 0, 2, 2, 3, x, 2, x, 2, 0.0f, x, 2, &err), MTS_EINVAL); // lda < k
    EXPECT_NE(std::string(err.msg).find("lda"), std::string::npos) << err.msg;
    EXPECT_EQ(mts_gemm(&p, 1, 0, 3, 2, 2, x, 2, x, 2, 0.0f, x, 2, &err), MTS_EINVAL); // transposed: lda < m
    EXPECT_EQ(mts_gemm(&p, 0, 0, 2, 3, 2, x, 2, x, 3, 0.0f, x, 2, &err), MTS_EINVAL); // ldc < n
    EXPECT_EQ(mts_gemm(&p, 0, 0, 2, 2, 2, nullptr, 2, x, 2, 0.0f, x, 2, &err), MTS_EINVAL);
    mts_provider l = prov(MTS_PROV_LUT);
    EXPECT_EQ(mts_gemm(&l, 0, 0, 2, 2, 2, x, 2, x, 2, 0.0f, x, 2, &err), MTS_EINVAL); // no table
    l.lut = world().use(world().int8u);
    EXPECT_EQ(mts_gemm(&l, 0, 0, 2, 2, 2, x, 2, x, 2, 0.0f, x, 2, &err), MTS_EINVAL); // INT table as float LUT
    mts_provider i = prov(MTS_PROV_INT);
    i.lut = world().use(world().int8u);
    i.fmaq = 1;
    i.qprod = qfmt(7, 4, 12);
    i.qacc = qfmt(7, 4, 10);
    EXPECT_EQ(mts_gemm(&i, 0, 0, 2, 2, 2, x, 2, x, 2, 0.0f, x, 2, &err), MTS_EINVAL);
    mts_provider f = prov(MTS_PROV_NATIVE);
    f.fmaq = 1;
    f.qprod = qfmt(7, 9, 12); // E = 9: not a valid accumulator format
    f.qacc = qfmt(7, 4, 10);
    EXPECT_EQ(mts_gemm(&f, 0, 0, 2, 2, 2, x, 2, x, 2, 0.0f, x, 2, &err), MTS_EINVAL);
    mts_provider m = prov(MTS_PROV_MULOP);
    EXPECT_EQ(mts_gemm(&m, 0, 0, 2, 2, 2, x, 2, x, 2, 0.0f, x, 2, &err), MTS_EINVAL); // no mulop
    mts_provider b = prov(MTS_PROV_BLAS);
    int rc = mts_gemm(&b, 0, 0, 2, 2, 2, x, 2, x, 2, 0.0f, x, 2, &err);
    EXPECT_EQ(rc, mts_gemm_have_blas() ? MTS_OK : MTS_EUNSUPPORTED) << err.msg;
}

TEST(Gemm, ReportsItsIsa)
{
    std::string isa = mts_gemm_isa();
    EXPECT_TRUE(isa == "avx512" || isa == "avx2" || isa == "scalar") << isa;
}

}  // namespace
