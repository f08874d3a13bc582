// test_gemm_pack.cpp - the vectorised operand packing of the SIMD LUT / FMAq
// kernels (sim/gemm/pack.c) against its scalar reference, field by field and
// bit for bit: seeded random operands plus zeros, subnormals, inf, NaN and
// the exponent boundaries of the kernels' exactness condition, ragged sizes,
// every panel width, plain and swapped (transposed-problem) jobs, byte
// table, gather table and native products.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "mantis/lut.h"
#include "mantis/mul.h"
#include "mantis/rng.h"
extern "C" {
#include "../sim/gemm/gemm_internal.h"
#include "../sim/gemm/gemm_simd.h"
}

namespace {

// Random FP32 bits: mostly ordinary magnitudes, with special values mixed in.
uint32_t operand(mts_rng *r)
{
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u,
        (127u - 62u) << 23, ((127u - 63u) << 23) | 0x12345u, (127u + 62u) << 23 | 0x7FFFFFu,
        0x80000000u | (127u + 63u) << 23, 0x00800000u, 0x7F7FFFFFu, 0x3F800000u, 0xBF7F0000u};
    uint64_t x = mts_rng_next(r);
    if ((x & 15) == 0) return specials[(x >> 4) % (sizeof specials / sizeof specials[0])];
    uint32_t e = 127u - 20u + (uint32_t)((x >> 8) % 40);
    return (uint32_t)(x >> 32 & 0x80000000u) | e << 23 | (uint32_t)(x >> 40 & 0x7FFFFFu);
}

// A job over A (m x k) and B (k x n) as mts_gemm hands it to a kernel.
gemm_job make_job(int m, int n, int k, const std::vector<uint32_t> &A, const std::vector<uint32_t> &B,
                  gemm_prod_kind prod, const mts_lut *lut, int threads)
{
    gemm_job g;
    std::memset(&g, 0, sizeof g);
    g.m = m;
    g.n = n;
    g.k = k;
    g.A = A.data();
    g.lda = (size_t)k;
    g.ldb = (size_t)n;
    g.B = B.data();
    g.prod = prod;
    g.lut = lut;
    g.threads = threads;
    return g;
}

template <class T> long first_diff(const T *a, const T *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (std::memcmp(&a[i], &b[i], sizeof(T))) return (long)i;
    return -1;
}

// Both packings of one job; every buffer compared over its full extent.
// zero_pct: that share of A's elements (rows with i % 4 == 0: all of them)
// made signed zeros, for the quad layout's lists of nonzero columns.
void check(const char *what, gemm_prod_kind prod, const mts_lut *lut, int m, int n, int k, int NR, int vbmi,
           int swap, int threads, uint64_t seed, unsigned zero_pct = 0, int round = 0)
{
    mts_rng r = {seed};
    std::vector<uint32_t> A((size_t)m * k), B((size_t)k * n);
    for (auto &x : A) x = operand(&r);
    for (size_t i = 0; zero_pct && i < A.size(); i++)
        if ((i / (size_t)k) % 4 == 0 || mts_rng_next(&r) % 100 < zero_pct) A[i] &= 0x80000000u;
    for (auto &x : B) x = operand(&r);
    if (lut && !round) { // operands arrive truncated to the LUT's format (dispatch.c), or rounded where read
        uint32_t keep = ~((1u << (23 - lut->fmt.M)) - 1u);
        for (auto &x : A) x &= keep;
        for (auto &x : B) x &= keep;
    }
    gemm_job g = make_job(m, n, k, A, B, prod, lut, threads);
    g.swap = swap;
    g.around = g.bround = round;
    gemm_lutpack f, s;
    mts_err err;
    int rf = gemm_lutpack_make(&g, NR, vbmi, 0, &f, &err);
    int rs = gemm_lutpack_make_scalar(&g, NR, vbmi, 0, &s, &err);
    ASSERT_EQ(rf, rs) << what;
    if (rf != MTS_OK) return;
    int npan = (n + NR - 1) / NR;
    size_t na = (size_t)m * k, nb = (size_t)npan * k * NR;
    std::string at = std::string(what) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                     " k=" + std::to_string(k) + " NR=" + std::to_string(NR) + " swap=" + std::to_string(swap);
    long d;
    char hex[96];
    auto hexes = [&](const char *field, uint64_t got, uint64_t want, uint32_t in) {
        std::snprintf(hex, sizeof hex, "%s: fast 0x%llx ref 0x%llx (operand 0x%08x)", field,
                      (unsigned long long)got, (unsigned long long)want, in);
        return std::string(hex);
    };
    d = first_diff(f.As, s.As, na);
    ASSERT_EQ(d, -1) << at << " As[" << d << "] "
                     << hexes("As", mts_f2u(f.As[d]), mts_f2u(s.As[d]), A[(size_t)d]);
    d = first_diff(f.rowbad, s.rowbad, (size_t)m);
    ASSERT_EQ(d, -1) << at << " rowbad[" << d << "]: fast " << (int)f.rowbad[d] << " ref " << (int)s.rowbad[d];
    d = first_diff(f.panbad, s.panbad, (size_t)npan);
    ASSERT_EQ(d, -1) << at << " panbad[" << d << "]: fast " << (int)f.panbad[d] << " ref " << (int)s.panbad[d];
    d = first_diff(f.Bs, s.Bs, nb);
    ASSERT_EQ(d, -1) << at << " Bs[" << d << "] " << hexes("Bs", mts_f2u(f.Bs[d]), mts_f2u(s.Bs[d]), 0);
    ASSERT_EQ(f.quad, s.quad) << at;
    // packed B here: quad whenever asked and possible (its width is the build's)
    ASSERT_EQ(f.quad, vbmi == 2 && f.TB && GEMM_QUAD_W && NR == 4 * GEMM_QUAD_W) << at;
    if (f.quad) {
        d = first_diff(f.Bq, s.Bq, nb);
        ASSERT_EQ(d, -1) << at << " Bq[" << d << "] " << hexes("Bq", f.Bq[d], s.Bq[d], 0);
        ASSERT_TRUE(!f.Bi && !s.Bi) << at;
    }
    if (f.quad && GEMM_QUAD_W == 8) {
        ASSERT_TRUE(!f.nnz && !s.nnz) << at; // no sparse kernel on AVX2
    }
    if (f.quad && GEMM_QUAD_W == 16) {
        d = first_diff(f.Bs + nb, s.Bs + nb, nb); // 2 Sb
        ASSERT_EQ(d, -1) << at << " Bs[2Sb " << d << "] " << hexes("Bs", mts_f2u(f.Bs[nb + d]), mts_f2u(s.Bs[nb + d]), 0);
        ASSERT_TRUE(f.nnz && s.nnz) << at;
        d = first_diff(f.nnz, s.nnz, (size_t)m);
        ASSERT_EQ(d, -1) << at << " nnz[" << d << "]: fast " << f.nnz[d] << " ref " << s.nnz[d];
        long total = 0;
        for (int i = 0; i < m; i++) total += s.nnz[i];
        bool sparse = total <= GEMM_SPARSE_FRAC * (double)m * k;
        ASSERT_EQ(!!f.nzt, sparse) << at << " (" << total << " nonzeros)";
        ASSERT_EQ(!!s.nzt, sparse) << at;
        if (zero_pct >= 50) {
            ASSERT_TRUE(sparse) << at;
        }
        for (int i = 0; sparse && i < m; i++) {
            // by definition: the columns of row i whose a is not a zero, in
            // order, each with its (verified) packed fields
            int t = 0;
            for (int kk = 0; kk < k; kk++) {
                size_t o = (size_t)i * k + kk;
                if (!mts_f32_exp(A[o])) continue;
                ASSERT_LT(t, s.nnz[i]) << at << " row " << i;
                for (const gemm_lutpack *p : {&f, &s}) {
                    size_t e = (size_t)i * k + t;
                    const char *who = p == &f ? " fast" : " ref";
                    ASSERT_EQ(p->nzt[e], s.Ai[o] & ~1u) << at << who << " row " << i << " entry " << t;
                    ASSERT_EQ(p->nzb[e], 512u * kk + 256u * (s.Ai[o] & 1u)) << at << who << " row " << i << " entry " << t;
                    ASSERT_EQ(mts_f2u(p->nzs[e]), mts_f2u(s.As[o])) << at << who << " row " << i << " entry " << t;
                }
                t++;
            }
            ASSERT_EQ(t, s.nnz[i]) << at << " row " << i;
        }
    }
    ASSERT_EQ(!f.Ai, !s.Ai) << at;
    if (f.Ai) {
        d = first_diff(f.Ai, s.Ai, na);
        ASSERT_EQ(d, -1) << at << " Ai[" << d << "] " << hexes("Ai", f.Ai[d], s.Ai[d], A[(size_t)d]);
    }
    if (f.Bi) {
        d = first_diff(f.Bi, s.Bi, nb);
        ASSERT_EQ(d, -1) << at << " Bi[" << d << "] " << hexes("Bi", f.Bi[d], s.Bi[d], 0);
    }
    ASSERT_EQ(!f.TB, !s.TB) << at;
    if (f.TB) {
        size_t rows = ((size_t)1 << lut->fmt.M) + 1;
        ASSERT_EQ(first_diff(f.TB, s.TB, rows * 128), -1) << at;
    }
    gemm_lutpack_free(&s);
#if GEMM_VBMI
    int byte_table = f.TB != nullptr;
    gemm_lutpack_free(&f);
    if (!lut) return;
    // Unpacked B (gemm_lutpack.rawb): with B's operands made clean, the
    // fields the byte-table kernels derive in registers (vbmi_raw_b) from a
    // masked load of B must equal the packed Bi and Bs lane for lane
    // (padding lanes included), and A must pack as before.
    for (auto &x : B)
        if (!gemm_exp_ok(x)) x = (x & 0x80000000u) | 0x3F800000u | (x & 0x7F0000u);
    g.bbad = 0;
    gemm_lutpack pk, raw;
    ASSERT_EQ(gemm_lutpack_make(&g, NR, 1, 0, &pk, &err), MTS_OK); // the per-vector layout the raw kernels derive
    ASSERT_EQ(gemm_lutpack_make(&g, NR, vbmi, 1, &raw, &err), MTS_OK);
    ASSERT_EQ(raw.rawb, byte_table) << at; // granted for byte tables only
    if (!byte_table) {
        gemm_lutpack_free(&pk);
        gemm_lutpack_free(&raw);
        return;
    }
    ASSERT_TRUE(!raw.Bi && !raw.Bs && !raw.panbad) << at;
    ASSERT_EQ(first_diff(pk.As, raw.As, na), -1) << at;
    ASSERT_EQ(first_diff(pk.Ai, raw.Ai, na), -1) << at;
    vbmi_rawb_k rk = vbmi_rawb_consts(lut->fmt.M);
    for (int p = 0; p < npan; p++)
        for (int kk = 0; kk < k; kk++)
            for (int v = 0; v < NR / 16; v++) {
                int left = n - p * NR - 16 * v;
                __mmask16 ld = left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
                __m512i x = _mm512_maskz_loadu_epi32(ld, B.data() + (size_t)kk * n + p * NR + 16 * v);
                __m512i bi;
                __m512 bs;
                vbmi_raw_b(&rk, x, &bi, &bs);
                size_t o = ((size_t)p * k + kk) * NR + 16 * v;
                uint32_t gi[16], gs[16];
                _mm512_storeu_si512(gi, bi);
                _mm512_storeu_ps((float *)gs, bs);
                for (int l = 0; l < 16; l++) {
                    ASSERT_EQ(gi[l], pk.Bi[o + l]) << at << " raw Bi panel " << p << " k " << kk << " lane " << 16 * v + l;
                    ASSERT_EQ(gs[l], mts_f2u(pk.Bs[o + l])) << at << " raw Bs panel " << p << " k " << kk << " lane " << 16 * v + l;
                }
            }
    gemm_lutpack_free(&pk);
    gemm_lutpack_free(&raw);
#else
    gemm_lutpack_free(&f);
#endif
}

mts_lut make_lut(const char *model, int M)
{
    mts_lut lut{};
    mts_mulop op;
    mts_err err;
    mts_format f = mts_format_e8(M);
    EXPECT_EQ(mts_mulop_model(&op, model, &f, &err), MTS_OK) << err.msg;
    EXPECT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK) << err.msg;
    return lut;
}

const int shapes[][3] = {{1, 1, 1}, {5, 3, 17}, {7, 33, 16}, {13, 64, 9}, {4, 65, 31}, {17, 100, 5}, {33, 7, 40}};

TEST(GemmPack, ByteTablePackingEqualsScalarReference)
{
    mts_lut lut = make_lut("mbm", 7);
    uint64_t seed = 11;
    for (auto &s : shapes)
        for (int NR : {16, 32, 64})
            for (int swap : {0, 1})
                for (int vbmi : {1, 2}) check("lut-vbmi", GEMM_PROD_LUT, &lut, s[0], s[1], s[2], NR, vbmi, swap, 1, seed++);
    check("lut-vbmi-threads", GEMM_PROD_LUT, &lut, 90, 130, 33, 64, 1, 1, 2, seed++);
    check("lut-quad-threads", GEMM_PROD_LUT, &lut, 90, 130, 33, 64, 2, 0, 2, seed++);
    // teams of threads (at least 65,536 elements of an operand), and
    // operands rounded to bf16 where the packing reads them
    for (int NR : {32, 64})
        for (int swap : {0, 1}) {
            check("lut-quad-team", GEMM_PROD_LUT, &lut, 300, 290, 250, NR, 2, swap, 2, seed++);
            check("lut-quad-rounded", GEMM_PROD_LUT, &lut, 13, 70, 29, NR, 2, swap, 1, seed++, 0, 7);
            check("lut-gather-rounded", GEMM_PROD_LUT, &lut, 13, 70, 29, NR, 0, swap, 1, seed++, 0, 7);
        }
    mts_lut_free(&lut);
}

// The quad layout's per-row nonzero counts and column lists (the sparse
// kernel's input): fast and reference packing against each other and
// against the definition, for A with 0, 30, 60 and 90% zeros (a quarter of
// the rows all zero), k across and below the 16-column step, both orders.
TEST(GemmPack, SparseRowListsEqualScalarReference)
{
    if (GEMM_QUAD_W != 16) GTEST_SKIP() << "the sparse lists are built for the VBMI quad kernel only";
    mts_lut lut = make_lut("mbm", 7);
    uint64_t seed = 51;
    const int sh[][3] = {{9, 64, 40}, {17, 100, 5}, {13, 70, 16}, {8, 64, 33}};
    for (auto &s : sh)
        for (unsigned pct : {0u, 30u, 60u, 90u})
            for (int swap : {0, 1}) check("lut-quad-sparse", GEMM_PROD_LUT, &lut, s[0], s[1], s[2], 64, 2, swap, 1, seed++, pct);
    check("lut-quad-sparse-threads", GEMM_PROD_LUT, &lut, 90, 130, 33, 64, 2, 0, 2, seed++, 70);
    mts_lut_free(&lut);
}

TEST(GemmPack, GatherTablePackingEqualsScalarReference)
{
    mts_lut l7 = make_lut("mbm", 7), l8 = make_lut("trunc", 8);
    uint64_t seed = 101;
    for (auto &s : shapes)
        for (int NR : {16, 32, 64})
            for (int swap : {0, 1}) {
                check("lut-gather-m7", GEMM_PROD_LUT, &l7, s[0], s[1], s[2], NR, 0, swap, 1, seed++);
                check("lut-gather-m8", GEMM_PROD_LUT, &l8, s[0], s[1], s[2], NR, 1, swap, 1, seed++);
            }
    mts_lut_free(&l7);
    mts_lut_free(&l8);
}

TEST(GemmPack, NativeProductPackingEqualsScalarReference)
{
    uint64_t seed = 301;
    for (auto &s : shapes)
        for (int NR : {16, 32, 64}) check("native", GEMM_PROD_FP32M, nullptr, s[0], s[1], s[2], NR, 0, 0, 1, seed++);
    check("native-threads", GEMM_PROD_FP32M, nullptr, 70, 90, 20, 32, 0, 0, 2, seed++);
    check("native-team-rounded", GEMM_PROD_FP32M, nullptr, 300, 290, 250, 32, 0, 0, 2, seed++, 0, 10);
}

// The fixed exponent rule (|e| <= 62 for each operand) relaxed per job:
// with the job's nonzero exponents inside +-120 and ea + eb inside
// [-124, 124], rows of gradients as small as 2^-80 are taken by the SIMD
// kernels (rowbad 0); past those bounds, with FMAq, or with B left unpacked
// the fixed rule holds; inf and NaN are never taken. Fast and reference
// packing agree on every flag.
TEST(GemmPack, RangeFlagsFollowTheJobsExponents)
{
    mts_lut lut = make_lut("mbm", 7);
    const int m = 12, n = 70, k = 20;
    auto bits = [](int e, uint32_t man, bool neg) { return (neg ? 0x80000000u : 0u) | (uint32_t)(127 + e) << 23 | man; };
    struct Case {
        const char *what;
        int a_tiny, b_low, fmaq, rawb, inf_row;
        unsigned char want_tiny; // the flag of a row of tiny A
    } cases[] = {{"relaxed", -80, -30, 0, 0, -1, 0},
                 {"relaxed-edge", -94, -30, 0, 0, -1, 0},       // -94 - 30 = -124: still exact
                 {"past-sum", -95, -30, 0, 0, -1, 2},           // -125: the fixed rule
                 {"past-own", -121, 0, 0, 0, -1, 2},            // an operand beyond 2^-120
                 {"fmaq", -80, -30, 1, 0, -1, 2},               // fmaq.c keeps the fixed rule
                 {"raw-b", -80, -30, 0, 1, -1, 2},              // B checked against the fixed rule
                 {"with-inf", -80, -30, 0, 0, 5, 0}};
    for (const Case &c : cases)
        for (int vbmi : {0, 1, 2}) {
            mts_rng r = {77};
            std::vector<uint32_t> A((size_t)m * k), B((size_t)k * n);
            for (size_t i = 0; i < A.size(); i++) {
                int row = (int)(i / k);
                int e = row % 3 == 0 ? c.a_tiny + (int)(mts_rng_next(&r) % 5) : (int)(mts_rng_next(&r) % 8) - 5;
                A[i] = bits(e, (uint32_t)(mts_rng_next(&r) & 0x7F0000u), mts_rng_next(&r) & 1);
                if (row % 3 == 0 && i % k == 0) A[i] = bits(c.a_tiny, 0, false); // the bound itself
            }
            A[(size_t)5 * k + 3] = c.inf_row == 5 ? 0x7F800000u : A[(size_t)5 * k + 3];
            for (size_t j = 0; j < B.size(); j++)
                B[j] = bits(j == 7 ? c.b_low : (int)(mts_rng_next(&r) % 6) - 3, (uint32_t)(mts_rng_next(&r) & 0x7F0000u),
                            mts_rng_next(&r) & 1);
            gemm_job g = make_job(m, n, k, A, B, GEMM_PROD_LUT, &lut, 1);
            g.fmaq = c.fmaq;
            gemm_lutpack f, s;
            mts_err err;
            ASSERT_EQ(gemm_lutpack_make(&g, 64, vbmi, c.rawb, &f, &err), MTS_OK);
            ASSERT_EQ(gemm_lutpack_make_scalar(&g, 64, vbmi, c.rawb, &s, &err), MTS_OK);
            if (c.rawb && !f.rawb) { // raw B granted for byte tables only
                gemm_lutpack_free(&f);
                gemm_lutpack_free(&s);
                continue;
            }
            for (int i = 0; i < m; i++) {
                ASSERT_EQ(f.rowbad[i], s.rowbad[i]) << c.what << " vbmi " << vbmi << " row " << i;
                unsigned char want = i == c.inf_row ? 1 : i % 3 == 0 ? c.want_tiny : 0;
                ASSERT_EQ((int)f.rowbad[i] & 1, want & 1) << c.what << " vbmi " << vbmi << " row " << i;
                ASSERT_EQ(f.rowbad[i] != 0, want != 0) << c.what << " vbmi " << vbmi << " row " << i;
            }
            for (int p = 0; !f.rawb && p < 2; p++) ASSERT_EQ(f.panbad[p], s.panbad[p]) << c.what << " panel " << p;
            gemm_lutpack_free(&f);
            gemm_lutpack_free(&s);
        }
    mts_lut_free(&lut);
}

} // namespace
