// Tests of the FMAq accumulator model (sim/fmaq.c): the quantizer Q(M,E,b)
// against an independent long-double reference written straight from Eq. 2,
// the exact addition, the chunked dot-product order and the packed Q code.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "test_util.h"
#include "test_rng.h"

extern "C" {
#include "mantis/arith_hd.h"
#include "mantis/fmaq.h"
#include "mantis/fpbits.h"
}

namespace {


uint32_t bits(float f) { return mts_f2u(f); }
float val(uint32_t u) { return mts_u2f(u); }

// Eq. 2 read literally, in long double, with e = floor(log2|x|) (the paper
// prints ceil, but then 1 <= |x|2^-e < 2 would not hold; docs/fmaq.md).
long double ref_q(const mts_qfmt &q, long double x)
{
    if (std::isnan(x)) return NAN;
    long double sg = std::signbit(x) ? -1.0L : 1.0L, a = fabsl(x);
    long double rof = ldexpl(2.0L - ldexpl(1.0L, -q.M), (1 << q.E) - 1 - q.bias);
    long double lo = q.underflow ? ldexpl(1.0L, -q.bias) : ldexpl(1.0L, -126);
    if (a >= rof) return sg * rof;
    if (a < lo) return sg * 0.0L;
    int e;
    frexpl(a, &e);
    e -= 1;  // a = f * 2^(e+1), f in [0.5, 1)
    long double k = ldexpl(ldexpl(a, -e) - 1.0L, q.M);
    k = q.rnd == MTS_RNE ? nearbyintl(k) : truncl(k);  // default mode: ties to even
    return sg * ldexpl(1.0L + ldexpl(k, -q.M), e);
}

// FP32 input as the quantizer sees it: subnormals are zero.
long double in(uint32_t x)
{
    if (((x >> 23) & 0xFF) == 0) return (x & MTS_F32_SIGN) ? -0.0L : 0.0L;
    return (long double)val(x);
}

uint32_t to_bits(long double v)
{
    if (std::isnan(v)) return MTS_F32_QNAN;
    float f = (float)v;
    EXPECT_EQ((long double)f, v) << "reference value not representable in FP32";
    return bits(f);
}

std::string hex(uint32_t x)
{
    char b[16];
    snprintf(b, sizeof b, "0x%08X", x);
    return b;
}

// Inputs around every boundary of q: R_UF, R_OF, 2^(emax+1), powers of two,
// FP32 specials, plus seeded random values over the exponent range.
std::vector<uint32_t> inputs(const mts_qfmt &q, uint64_t seed)
{
    std::vector<uint32_t> v;
    int emax = (1 << q.E) - 1 - q.bias;
    uint32_t specials[] = {0u, 1u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0x7F800000u, 0x7FC00000u, 0x7FA00000u};
    for (uint32_t s : specials) v.push_back(s);
    uint32_t ruf = mts_q_ruf(&q), rof = mts_q_rof(&q);
    uint32_t pts[] = {ruf, rof, (uint32_t)(emax + 1 + 127) << 23};
    for (uint32_t p : pts)
        for (int d = -3; d <= 3; d++) v.push_back(p + (uint32_t)d);
    // midpoints at M bits (none exist in FP32 when M = 23)
    uint32_t half = q.M < 23 ? 1u << (22 - q.M) : 0u;
    v.push_back(rof + half);
    v.push_back(ruf + half);
    int elo = -q.bias - 4 < -126 ? -126 : -q.bias - 4, ehi = emax + 2 > 127 ? 127 : emax + 2;
    for (int e = elo; e <= ehi; e++) {
        uint32_t base = (uint32_t)(e + 127) << 23;
        v.push_back(base);
        v.push_back(base | 0x7FFFFFu);
        v.push_back(base | half);                // exact midpoint
        v.push_back(base | (3u * half));         // midpoint after an odd mantissa
        v.push_back(base | half | 1u);           // just past a midpoint
        for (int i = 0; i < 40; i++) v.push_back(base | ((uint32_t)splitmix64(&seed) & 0x7FFFFFu));
    }
    size_t n = v.size();
    for (size_t i = 0; i < n; i++) v.push_back(v[i] ^ MTS_F32_SIGN);
    return v;
}

}  // namespace

TEST(FmaqQuantizer, MatchesEq2ReferenceOnEdgesAndRandom)
{
    const int shapes[][3] = {{7, 4, 8}, {7, 4, 10}, {7, 4, 12}, {4, 3, 4}, {4, 3, 5}, {3, 2, 1},
                             {1, 1, 0}, {10, 5, 16}, {23, 7, 64}, {2, 6, 70}, {5, 7, 126}};
    uint64_t seed = 12345;
    for (auto &s : shapes) {
        for (int uf = 0; uf <= 1; uf++) {
            for (mts_round r : {MTS_RTZ, MTS_RNE}) {
                mts_qfmt q = qfmt(s[0], s[1], s[2], uf, r);
                mts_err err;
                ASSERT_EQ(mts_qfmt_check(&q, &err), MTS_OK) << err.msg;
                for (uint32_t x : inputs(q, seed++)) {
                    uint32_t got = mts_q(&q, x);
                    uint32_t want = to_bits(ref_q(q, in(x)));
                    ASSERT_EQ(got, want) << "M" << s[0] << "E" << s[1] << " b" << s[2] << " uf=" << uf
                                         << " rne=" << (r == MTS_RNE) << " x=" << hex(x);
                }
            }
        }
    }
}

TEST(FmaqQuantizer, LimitsOfM7E4)
{
    mts_qfmt q = qfmt(7, 4, 8);  // the paper's default bias 2^(E-1)
    EXPECT_EQ(val(mts_q_rof(&q)), 255.0f);             // 2^(15-8) * (2 - 2^-7)
    EXPECT_EQ(val(mts_q_ruf(&q)), std::ldexp(1.0f, -8));
    EXPECT_EQ(val(mts_q(&q, bits(255.0f))), 255.0f);
    EXPECT_EQ(val(mts_q(&q, bits(256.0f))), 255.0f);   // saturates, no inf
    EXPECT_EQ(val(mts_q(&q, bits(1e30f))), 255.0f);
    EXPECT_EQ(val(mts_q(&q, bits(-300.0f))), -255.0f);
    EXPECT_EQ(val(mts_q(&q, MTS_F32_INF)), 255.0f);
    EXPECT_EQ(mts_q(&q, 0xFFC00001u), MTS_F32_QNAN);
}

TEST(FmaqQuantizer, UnderflowBoundary)
{
    mts_qfmt q = qfmt(7, 4, 8);
    float ruf = std::ldexp(1.0f, -8);
    float below = std::nextafter(ruf, 0.0f);
    EXPECT_EQ(val(mts_q(&q, bits(ruf))), ruf);                  // at R_UF: kept
    EXPECT_EQ(mts_q(&q, bits(below)), 0u);                      // just below: flushed
    EXPECT_EQ(mts_q(&q, bits(-below)), MTS_F32_SIGN);           // to a signed zero
    // RNE would round 'below' up to R_UF, but Eq. 2 judges |x| < R_UF first
    q.rnd = MTS_RNE;
    EXPECT_EQ(mts_q(&q, bits(below)), 0u);
    // no-UF mode: the value keeps its exponent, mantissa cut to 7 bits
    q.rnd = MTS_RTZ;
    q.underflow = 0;
    EXPECT_EQ(val(mts_q(&q, bits(below))), std::ldexp(2.0f - std::ldexp(1.0f, -7), -9));
    float tiny = std::ldexp(1.0f, -120);
    EXPECT_EQ(val(mts_q(&q, bits(tiny))), tiny);
    // below FP32's smallest normal there is nothing left: zero (no subnormals)
    EXPECT_EQ(mts_q(&q, 0x00400000u), 0u);
}

TEST(FmaqQuantizer, RoundingModesAndNegatives)
{
    mts_qfmt q = qfmt(7, 4, 8);
    // 254.9 at exponent 7 (ulp 1): floor of the magnitude -> 254, RNE -> 255
    EXPECT_EQ(val(mts_q(&q, bits(254.9f))), 254.0f);
    EXPECT_EQ(val(mts_q(&q, bits(-254.9f))), -254.0f);  // toward zero, not toward -inf
    q.rnd = MTS_RNE;
    EXPECT_EQ(val(mts_q(&q, bits(254.9f))), 255.0f);
    EXPECT_EQ(val(mts_q(&q, bits(254.5f))), 254.0f);    // tie -> even mantissa (126)
    EXPECT_EQ(val(mts_q(&q, bits(253.5f))), 254.0f);    // tie -> even mantissa (126)
    EXPECT_EQ(val(mts_q(&q, bits(-1.99f))), -1.9921875f); // 126.72/128 -> 127/128
    EXPECT_EQ(val(mts_q(&q, bits(-1.999f))), -2.0f);      // 127.87/128 rounds into the next binade
    q.rnd = MTS_RTZ;
    EXPECT_EQ(val(mts_q(&q, bits(-1.99f))), -1.984375f);
    EXPECT_EQ(mts_q(&q, bits(-0.0f)), MTS_F32_SIGN);
}

TEST(FmaqAdd, ExactAdditionBeatsDoubleRounding)
{
    // Q_prod without underflow lets tiny products through unchanged.
    mts_qfmt qprod = qfmt(23, 5, 16, 0);
    mts_qfmt qacc = qfmt(7, 4, 8);
    float tiny = std::ldexp(1.0f, -60);
    // 1 - 2^-60 truncates to 1 - 2^-8. In double, 1.0 - 2^-60 rounds to 1.0
    // first, and Q(1.0) = 1.0 would be wrong.
    EXPECT_EQ((double)1.0f - (double)tiny, 1.0);
    EXPECT_EQ(val(mts_fmaq(&qprod, &qacc, bits(-tiny), bits(1.0f))), 1.0f - std::ldexp(1.0f, -8));
    // RNE: 1 + 2^-8 is a tie; + 2^-60 pushes it over, so the sum rounds up to
    // 1 + 2^-7. A double sum would be the exact tie and round to even (1.0).
    qacc.rnd = MTS_RNE;
    float s = 1.0f + std::ldexp(1.0f, -8);  // not in Q_acc, but the adder must not care
    EXPECT_EQ((double)s + (double)tiny, (double)s);
    EXPECT_EQ(val(mts_fmaq(&qprod, &qacc, bits(tiny), bits(s))), 1.0f + std::ldexp(1.0f, -7));
    EXPECT_EQ(val(mts_fmaq(&qprod, &qacc, bits(-tiny), bits(s))), 1.0f);
}

TEST(FmaqAdd, FullSwampingSameSignAndOppositeSign)
{
    mts_qfmt qp = qfmt(7, 4, 8), qa = qfmt(7, 4, 8);
    // |z1| = 96 > 2^(M+1) |z2| = 256 * 0.25: z2 vanishes when it has z1's sign
    EXPECT_EQ(val(mts_fmaq(&qp, &qa, bits(0.25f), bits(96.0f))), 96.0f);
    EXPECT_EQ(val(mts_fmaq(&qp, &qa, bits(-0.25f), bits(-96.0f))), -96.0f);
    // ... but truncation of the exact sum takes one ulp (0.5 at 96) off when
    // the signs differ: 95.75 -> 95.5
    EXPECT_EQ(val(mts_fmaq(&qp, &qa, bits(-0.25f), bits(96.0f))), 95.5f);
}

TEST(FmaqAdd, SpecialValues)
{
    mts_qfmt q = qfmt(7, 4, 8);
    EXPECT_EQ(mts_qadd(&q, bits(3.0f), bits(-3.0f)), 0u);                    // +0
    EXPECT_EQ(mts_qadd(&q, bits(-0.0f), bits(-0.0f)), MTS_F32_SIGN);        // -0
    EXPECT_EQ(mts_qadd(&q, bits(-0.0f), bits(0.0f)), 0u);
    EXPECT_EQ(mts_qadd(&q, MTS_F32_INF, MTS_F32_INF | MTS_F32_SIGN), MTS_F32_QNAN);
    EXPECT_EQ(val(mts_qadd(&q, MTS_F32_INF, bits(-5.0f))), 255.0f);
    EXPECT_EQ(mts_qadd(&q, MTS_F32_QNAN, bits(1.0f)), MTS_F32_QNAN);
    EXPECT_EQ(val(mts_qadd(&q, bits(200.0f), bits(100.0f))), 255.0f);      // saturates
    EXPECT_EQ(val(mts_qadd(&q, 0x00000001u, bits(3.0f))), 3.0f);            // subnormal = 0
}

// Random FMAq against Q_acc(Q_prod(p) + s) where the sum is formed in long
// double; exact when the addends' LSBs are at most 39 binades apart, which
// covers both sides of the implementation's stand-in threshold (33).
TEST(FmaqAdd, RandomAgainstLongDoubleReference)
{
    if (LDBL_MANT_DIG < 64) GTEST_SKIP() << "long double has only " << LDBL_MANT_DIG << " bits here";
    uint64_t seed = 777;
    const int shapes[][3] = {{7, 4, 10}, {4, 3, 5}, {10, 5, 14}, {23, 6, 32}};
    for (auto &sh : shapes) {
        for (int mode = 0; mode < 4; mode++) {
            mts_qfmt qacc = qfmt(sh[0], sh[1], sh[2], mode & 1, (mode & 2) ? MTS_RNE : MTS_RTZ);
            mts_qfmt qprod = qfmt(23, 6, 40, 0);
            int emax = (1 << qacc.E) - 1 - qacc.bias;
            int checked = 0;
            for (int it = 0; it < 20000; it++) {
                uint64_t r = splitmix64(&seed);
                int es = -qacc.bias + (int)(r % (uint64_t)(emax + qacc.bias + 1));
                int d = (int)((r >> 8) % 40) - 1;  // product exponent below s by d (-1..38)
                int ep = es - d;
                if (ep < -126 || ep > 127) continue;
                uint32_t s = mts_q(&qacc, ((uint32_t)(es + 127) << 23) | ((uint32_t)(r >> 16) & 0x7FFFFFu));
                uint32_t p = ((uint32_t)(ep + 127) << 23) | ((uint32_t)splitmix64(&seed) & 0x7FFFFFu);
                if (r & (1ull << 62)) p ^= MTS_F32_SIGN;
                if (r & (1ull << 63)) s ^= MTS_F32_SIGN;
                long double pq = in(mts_q(&qprod, p));
                long double sum = pq + in(s);
                uint32_t want = (sum == 0) ? 0u : to_bits(ref_q(qacc, sum));
                ASSERT_EQ(mts_fmaq(&qprod, &qacc, p, s), want) << "p=" << hex(p) << " s=" << hex(s);
                checked++;
            }
            EXPECT_GT(checked, 19000);
        }
    }
}

// The hardest case for a shortcut: s a power of two at M = 23 and a negative
// addend, so the sum drops into the binade below where the grid is finest.
TEST(FmaqAdd, PowerOfTwoMinusSmallAddendAtFullPrecision)
{
    if (LDBL_MANT_DIG < 64) GTEST_SKIP() << "long double has only " << LDBL_MANT_DIG << " bits here";
    mts_qfmt qprod = qfmt(23, 7, 60, 0);
    uint64_t seed = 4242;
    for (mts_round r : {MTS_RTZ, MTS_RNE}) {
        mts_qfmt qacc = qfmt(23, 6, 32, 1, r);
        for (int d = 20; d <= 39; d++) {
            for (int i = 0; i < 300; i++) {
                uint32_t s = (uint32_t)(127 + 3) << 23;  // 8.0
                uint32_t p = MTS_F32_SIGN | ((uint32_t)(3 - d + 127) << 23) |
                             ((uint32_t)splitmix64(&seed) & 0x7FFFFFu);
                uint32_t want = to_bits(ref_q(qacc, in(s) + in(p)));
                ASSERT_EQ(mts_fmaq(&qprod, &qacc, p, s), want) << "d=" << d << " p=" << hex(p);
            }
        }
    }
}

// Past 33 binades the adder replaces the small addend by a same-signed
// stand-in; the result must equal the long-double-exact one for any tiny
// addend of that sign (here: one 38 binades below).
TEST(FmaqAdd, TinyAddendActsLikeAnyTinyAddend)
{
    if (LDBL_MANT_DIG < 64) GTEST_SKIP() << "long double has only " << LDBL_MANT_DIG << " bits here";
    mts_qfmt qprod = qfmt(23, 7, 60, 0);
    uint64_t seed = 99;
    for (int mode = 0; mode < 2; mode++) {
        mts_qfmt qacc = qfmt(7, 4, 8, 1, mode ? MTS_RNE : MTS_RTZ);
        for (int it = 0; it < 5000; it++) {
            uint64_t r = splitmix64(&seed);
            int es = -8 + (int)(r % 16);
            uint32_t s = mts_q(&qacc, ((uint32_t)(es + 127) << 23) | ((uint32_t)(r >> 8) & 0x7FFFFFu));
            if (r & 1) s ^= MTS_F32_SIGN;
            uint32_t sign = (r & 2) ? MTS_F32_SIGN : 0;
            int far = es - 40 - (int)((r >> 40) % 40);  // 40..79 binades below
            uint32_t p = sign | ((uint32_t)(far + 127) << 23) | ((uint32_t)(r >> 20) & 0x7FFFFFu);
            long double standin = (sign ? -1.0L : 1.0L) * ldexpl(1.0L, es - 38);
            uint32_t want = to_bits(ref_q(qacc, in(s) + standin));
            ASSERT_EQ(mts_fmaq(&qprod, &qacc, p, s), want) << "p=" << hex(p) << " s=" << hex(s);
        }
    }
}

// Hand-computed chunk order. Q_acc = M2E4 (values 1, 1.25, 1.5, 1.75 x 2^e),
// truncation; products are small integers, exact in FP32 and Q_prod.
TEST(FmaqDot, ChunkOrderHandComputed)
{
    mts_qfmt qp = qfmt(23, 7, 63), qa = qfmt(2, 4, 8);
    std::vector<uint32_t> x = {bits(8), bits(1), bits(1), bits(1), bits(1), bits(1), bits(1), bits(1)};
    std::vector<uint32_t> w(8, bits(1.0f));
    // sequential: 8+1 = 9 -> 8 every time (swamped): 8
    EXPECT_EQ(val(mts_fmaq_dot(&qp, &qa, 8, NULL, x.data(), w.data(), 8, 1)), 8.0f);
    // chunk 4: c0 = 8 (swamped), c1 = 1+1+1+1 = 4 exactly; 8 + 4 = 12: 12
    EXPECT_EQ(val(mts_fmaq_dot(&qp, &qa, 4, NULL, x.data(), w.data(), 8, 1)), 12.0f);
    // chunk 2: c = 8, 2, 2, 2; 8+2 = 10, 10+2 = 12, 12+2 = 14: 14
    EXPECT_EQ(val(mts_fmaq_dot(&qp, &qa, 2, NULL, x.data(), w.data(), 8, 1)), 14.0f);
    // chunk 1: every chunk sum is one product, added left to right: 8
    EXPECT_EQ(val(mts_fmaq_dot(&qp, &qa, 1, NULL, x.data(), w.data(), 8, 1)), 8.0f);

    // The chunk sums are added left to right: c = 8, 1, 1 gives 8 (each 1 is
    // swamped), where a right-to-left or tree order would give 8 + 2 = 10.
    std::vector<uint32_t> x2 = {bits(8), 0, bits(1), 0, bits(1), 0};
    std::vector<uint32_t> w2(6, bits(1.0f));
    EXPECT_EQ(val(mts_fmaq_dot(&qp, &qa, 2, NULL, x2.data(), w2.data(), 6, 1)), 8.0f);
    // the last chunk may be short: n = 5, chunk 2 -> chunks {8,0} {1,0} {1}
    EXPECT_EQ(val(mts_fmaq_dot(&qp, &qa, 2, NULL, x2.data(), w2.data(), 5, 1)), 8.0f);
    EXPECT_EQ(mts_fmaq_dot(&qp, &qa, 16, NULL, x2.data(), w2.data(), 0, 1), 0u);  // empty sum: +0
}

namespace {
// A multiplier that ignores its operands: shows that mts_fmaq_dot uses mul.
uint32_t const_quarter(const mts_mulop *, uint32_t, uint32_t) { return 0x3E800000u; }  // 0.25
}  // namespace

TEST(FmaqDot, UsesTheGivenMultiplierAndStride)
{
    mts_qfmt qp = qfmt(23, 7, 63), qa = qfmt(7, 4, 8);
    mts_mulop op = {};
    op.fn = const_quarter;
    std::vector<uint32_t> x(10, bits(3.0f)), w(20, bits(5.0f));
    EXPECT_EQ(val(mts_fmaq_dot(&qp, &qa, 16, &op, x.data(), w.data(), 10, 2)), 2.5f);
    // stride: w[i*2] = i, others poison; exact product through fp32
    for (int i = 0; i < 10; i++) { w[2 * i] = bits((float)i); w[2 * i + 1] = MTS_F32_QNAN; }
    std::vector<uint32_t> ones(10, bits(1.0f));
    EXPECT_EQ(val(mts_fmaq_dot(&qp, &qa, 4, NULL, ones.data(), w.data(), 10, 2)), 45.0f);
}

TEST(FmaqDot, GemmFollowsTheDotOrder)
{
    mts_qfmt qp = qfmt(23, 7, 63), qa = qfmt(2, 4, 8);
    const size_t m = 2, k = 8, n = 3;
    std::vector<uint32_t> A(m * k), B(k * n), C(m * n, 0xDEADBEEFu);
    uint64_t seed = 5;
    for (auto &a : A) a = bits((float)(splitmix64(&seed) % 9));
    for (auto &b : B) b = bits((float)(splitmix64(&seed) % 5) - 2.0f);
    mts_err err;
    ASSERT_EQ(mts_fmaq_gemm(&qp, &qa, 4, NULL, A.data(), B.data(), C.data(), m, n, k, &err), MTS_OK) << err.msg;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            EXPECT_EQ(C[i * n + j], mts_fmaq_dot(&qp, &qa, 4, NULL, &A[i * k], &B[j], k, n)) << i << "," << j;
    EXPECT_EQ(mts_fmaq_gemm(&qp, &qa, 0, NULL, A.data(), B.data(), C.data(), m, n, k, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("chunk"), std::string::npos) << err.msg;
}

TEST(FmaqCode, RoundTripExhaustiveSmallFormats)
{
    const int shapes[][3] = {{1, 1, 0}, {1, 2, 1}, {3, 2, 2}, {2, 3, 4}, {3, 4, 8}, {7, 4, 10}, {4, 5, 16}, {10, 3, 4}};
    for (auto &s : shapes) {
        for (mts_round r : {MTS_RTZ, MTS_RNE}) {
            mts_qfmt q = qfmt(s[0], s[1], s[2], 1, r);
            int W = mts_q_width(&q);
            ASSERT_EQ(W, 2 + s[0] + s[1]);
            uint32_t ncodes = 1u << W, allones = ncodes - 1u;
            long double prev = -1;
            for (uint32_t c = 0; c < ncodes; c++) {
                uint32_t v = mts_q_decode(&q, c);
                bool zf = (c >> (W - 1)) & 1u;
                uint32_t rest = c & ((1u << (W - 2)) - 1u);
                if (zf && rest) {  // NaN codes
                    ASSERT_EQ(v, MTS_F32_QNAN) << c;
                    ASSERT_EQ(mts_q_encode(&q, v), allones);
                    continue;
                }
                ASSERT_EQ(mts_q_encode(&q, v), c) << "code " << c;
                ASSERT_EQ(mts_q(&q, v), v) << "code " << c << " decodes outside Q";
                // independent value of a non-zero code: (1 + man/2^M) 2^(exp - bias)
                long double want = 0;
                if (!zf) {
                    uint32_t man = c & ((1u << q.M) - 1u), ex = (c >> q.M) & ((1u << q.E) - 1u);
                    want = ldexpl(1.0L + ldexpl(man, -q.M), (int)ex - q.bias);
                }
                bool neg = (c >> (W - 2)) & 1u;
                ASSERT_EQ(to_bits(neg ? -want : want), v) << "code " << c;
                // positive non-zero codes count up through Q's values in order
                if (!zf && !neg) {
                    ASSERT_GT(want, prev);
                    prev = want;
                    if (rest == 0) {
                        ASSERT_EQ(v, mts_q_ruf(&q));
                    }
                    if (rest == (1u << (W - 2)) - 1u) {
                        ASSERT_EQ(v, mts_q_rof(&q));
                    }
                }
            }
            // any FP32 input: decode(encode(x)) is Q(x)
            uint64_t seed = 3;
            for (int i = 0; i < 2000; i++) {
                uint32_t x = (uint32_t)splitmix64(&seed);
                if (mts_f32_isnan(x)) continue;
                ASSERT_EQ(mts_q_decode(&q, mts_q_encode(&q, x)), mts_q(&q, x)) << hex(x);
            }
        }
    }
}

TEST(FmaqCode, EncodeTreatsUnderflowAsOn)
{
    mts_qfmt q = qfmt(7, 4, 8, 0);
    float below = std::ldexp(1.0f, -10);  // no code below R_UF = 2^-8
    EXPECT_EQ(mts_q_encode(&q, bits(below)), 1u << (mts_q_width(&q) - 1));
    EXPECT_EQ(mts_q_encode(&q, bits(-below)), 3u << (mts_q_width(&q) - 2));
}

TEST(FmaqFormat, ParseAndCheck)
{
    mts_qfmt q;
    mts_err err;
    ASSERT_EQ(mts_qfmt_parse("M7E4", -1, &q, &err), MTS_OK) << err.msg;
    EXPECT_EQ(q.M, 7);
    EXPECT_EQ(q.E, 4);
    EXPECT_EQ(q.bias, 8);  // 2^(E-1), the paper's default
    EXPECT_EQ(q.underflow, 1);
    EXPECT_EQ(q.rnd, MTS_RTZ);
    ASSERT_EQ(mts_qfmt_parse("m4e3", 5, &q, &err), MTS_OK) << err.msg;
    EXPECT_EQ(q.bias, 5);
    char name[64];
    mts_qfmt_name(&q, name, sizeof name);
    EXPECT_STREQ(name, "M4E3b5");
    for (const char *bad : {"", "M7", "E4M7", "M7E4x", "M7 E4", "7E4"}) {
        EXPECT_EQ(mts_qfmt_parse(bad, -1, &q, &err), MTS_EINVAL) << bad;
        EXPECT_NE(std::string(err.msg).find("expected M"), std::string::npos) << err.msg;
    }
    EXPECT_EQ(mts_qfmt_parse("M0E4", -1, &q, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("M = 0"), std::string::npos) << err.msg;
    EXPECT_EQ(mts_qfmt_parse("M7E8", -1, &q, &err), MTS_EINVAL);  // more exponents than FP32
    EXPECT_NE(std::string(err.msg).find("E = 8"), std::string::npos) << err.msg;
    EXPECT_EQ(mts_qfmt_parse("M7E7", 127, &q, &err), MTS_EINVAL);  // R_UF = 2^-127: not FP32 normal
    EXPECT_NE(std::string(err.msg).find("bias 127"), std::string::npos) << err.msg;
    EXPECT_EQ(mts_qfmt_parse("M7E7", 0, &q, &err), MTS_OK) << err.msg;  // emax 127
    EXPECT_EQ(mts_qfmt_parse("M7E7", -1, &q, &err), MTS_OK) << err.msg;
}

// The 32-bit RTZ form of FMAq (arith_hd.h: mask, min, flush; one add
// rounded toward zero, here the host's TwoSum form of mts_fm_add_rz) against
// the exact 64-bit form, which the tests above hold to Eq. 2: every FP32
// input class for Q; for the FMAq step every product p and sums s that are
// Q_acc's outputs (+-0 included), with products near s in magnitude and of
// either sign (cancellation into lower binades, where the toward-zero add
// differs from nearest); the chunk combination over pairs of Q_acc outputs
// and over raw normals, infs and NaNs.
TEST(FmaqRtz, ThirtyTwoBitFormEqualsExactForm)
{
    const int shapes[][3] = {{7, 4, 10}, {7, 4, 12}, {4, 3, 5}, {10, 5, 14}, {23, 6, 32}, {1, 1, 1}, {23, 7, 126}, {2, 7, 0}};
    uint64_t seed = 4242;
    for (auto &sh : shapes)
        for (int uf = 0; uf <= 1; uf++) {
            mts_qfmt qa = qfmt(sh[0], sh[1], sh[2], uf), qp = qfmt(sh[0] > 3 ? sh[0] - 2 : sh[0], sh[1], sh[2], uf);
            mts_qrtz ra = mts_qrtz_hd(&qa), rp = mts_qrtz_hd(&qp);
            char name[64];
            mts_qfmt_name(&qa, name, sizeof name);
            // Q: every exponent and sign, 2^7 random mantissas each, and the boundaries
            std::vector<uint32_t> xs = inputs(qa, seed++);
            for (uint32_t i = 0; i < (1u << 16); i++) xs.push_back((i << 16) | ((uint32_t)splitmix64(&seed) & 0xFFFFu));
            for (uint32_t x : xs)
                ASSERT_EQ(mts_q_rtz_hd(&ra, x), mts_q_hd(&qa, x))
                    << name << " Q(" << hex(x) << "): 32-bit " << hex(mts_q_rtz_hd(&ra, x)) << ", exact "
                    << hex(mts_q_hd(&qa, x));
            // FMAq steps: p over Q_prod's boundaries and specials, s over Q_acc's outputs
            std::vector<uint32_t> ps = inputs(qp, seed++), ss{0u, MTS_F32_SIGN};
            for (size_t i = 0; i < xs.size(); i += 97) ss.push_back(mts_q_hd(&qa, xs[i]));
            for (uint32_t s : ss)
                for (size_t i = 0; i < ps.size(); i += 3) {
                    uint32_t p = ps[i];
                    ASSERT_EQ(mts_fmaq_rtz_hd(&rp, &ra, p, s), mts_fmaq_hd(&qp, &qa, p, s))
                        << name << " p=" << hex(p) << " s=" << hex(s) << ": 32-bit "
                        << hex(mts_fmaq_rtz_hd(&rp, &ra, p, s)) << ", exact " << hex(mts_fmaq_hd(&qp, &qa, p, s));
                }
            // products near s: d = exponent of s minus that of p in -2..30
            int emax = (1 << qa.E) - 1 - qa.bias, emin = uf ? -qa.bias : -126;
            for (int it = 0; it < 40000; it++) {
                uint64_t r = splitmix64(&seed);
                int es = emin + (int)(r % (uint64_t)(emax - emin + 1)), ep = es - ((int)((r >> 8) % 33) - 2);
                if (ep < -126 || ep > 127) continue;
                uint32_t s = mts_q_hd(&qa, ((uint32_t)(es + 127) << 23) | ((uint32_t)(r >> 16) & 0x7FFFFFu));
                uint32_t p = ((uint32_t)(ep + 127) << 23) | ((uint32_t)splitmix64(&seed) & 0x7FFFFFu);
                if (r & (1ull << 62)) p ^= MTS_F32_SIGN;
                if (r & (1ull << 63)) s ^= MTS_F32_SIGN;
                ASSERT_EQ(mts_fmaq_rtz_hd(&rp, &ra, p, s), mts_fmaq_hd(&qp, &qa, p, s))
                    << name << " p=" << hex(p) << " s=" << hex(s) << ": 32-bit "
                    << hex(mts_fmaq_rtz_hd(&rp, &ra, p, s)) << ", exact " << hex(mts_fmaq_hd(&qp, &qa, p, s));
                uint32_t y = mts_q_hd(&qa, p); // a chunk sum of its own
                ASSERT_EQ(mts_qadd_rtz_hd(&ra, y, s), mts_qadd_hd(&qa, y, s))
                    << name << " y=" << hex(y) << " s=" << hex(s) << ": 32-bit " << hex(mts_qadd_rtz_hd(&ra, y, s))
                    << ", exact " << hex(mts_qadd_hd(&qa, y, s));
            }
            // the add over raw operands: normals, zeros, infs, NaNs (no subnormals)
            for (size_t h = 0; h < ps.size(); h += 2)
                for (size_t i = 0; i < ps.size(); i += 9) {
                    uint32_t a = ps[h], b = ps[i];
                    if (mts_f32_exp(a) == 0 && (a & 0x7FFFFFu)) continue;
                    if (mts_f32_exp(b) == 0 && (b & 0x7FFFFFu)) continue;
                    ASSERT_EQ(mts_qadd_rtz_hd(&ra, a, b), mts_qadd_hd(&qa, a, b))
                        << name << " a=" << hex(a) << " b=" << hex(b) << ": 32-bit " << hex(mts_qadd_rtz_hd(&ra, a, b))
                        << ", exact " << hex(mts_qadd_hd(&qa, a, b));
                }
        }
}

// mts_fm_add_rz's host form (TwoSum, then one step toward zero) against
// long double, which holds every FP32 sum of operands within 2^40 of each
// other exactly: random normals of near exponents and both signs, sums
// that overflow, and the zeros.
TEST(FmaqRtz, HostAddTowardZeroIsExact)
{
    if (LDBL_MANT_DIG < 64) GTEST_SKIP() << "long double has only " << LDBL_MANT_DIG << " bits here";
    uint64_t seed = 99;
    for (int it = 0; it < 1000000; it++) {
        uint64_t r = splitmix64(&seed);
        int ea = (int)(r % 254) + 1, eb = ea - (int)((r >> 8) % 40) + 20;
        if (eb < 1 || eb > 254) continue;
        uint32_t a = ((uint32_t)ea << 23) | ((uint32_t)(r >> 16) & 0x7FFFFFu) | (uint32_t)((r >> 62) << 31);
        uint32_t b = ((uint32_t)eb << 23) | ((uint32_t)splitmix64(&seed) & 0x7FFFFFu) | (uint32_t)((r >> 63) << 31);
        long double x = (long double)val(a) + (long double)val(b);
        float want = (float)x; // nearest; then toward zero where that went away from zero
        if (std::fabs((long double)want) > std::fabs(x)) want = std::nextafter(want, 0.0f);
        if (std::isinf(want)) want = std::copysign(FLT_MAX, want);
        float got = mts_fm_add_rz(val(a), val(b));
        ASSERT_EQ(bits(got), bits(want)) << hex(a) << " + " << hex(b) << ": " << hex(bits(got)) << ", want "
                                         << hex(bits(want));
    }
    EXPECT_EQ(bits(mts_fm_add_rz(0.0f, -0.0f)), 0u);
    EXPECT_EQ(bits(mts_fm_add_rz(-0.0f, -0.0f)), MTS_F32_SIGN);
    EXPECT_EQ(bits(mts_fm_add_rz(1.0f, -1.0f)), 0u);
    EXPECT_EQ(bits(mts_fm_add_rz(FLT_MAX, FLT_MAX)), bits(FLT_MAX));
    EXPECT_EQ(bits(mts_fm_add_rz(-FLT_MAX, -FLT_MAX)), bits(-FLT_MAX));
    EXPECT_TRUE(std::isinf(mts_fm_add_rz(INFINITY, 1.0f)));
    EXPECT_TRUE(std::isnan(mts_fm_add_rz(INFINITY, -INFINITY)));
}
