// test_fmath.cpp - the shared transcendental functions and fixed-order sums
// (include/mantis/fmath.h): accuracy against glibc over a dense sweep of all
// FP32 inputs, the special values, and the blocked summation order checked
// against an independent implementation, directly and through the ops that
// use it (dense bias gradient, conv bias gradient, BatchNorm, softmax CE).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mantis/fmath.h"
#include "mantis/nn_ops.h"
#include "test_rng.h"

namespace {

uint32_t bits(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
uint64_t dbits(double f)
{
    uint64_t u;
    std::memcpy(&u, &f, 8);
    return u;
}
float fl(uint32_t u)
{
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
// position on the line of floats (ulp distance = difference)
int64_t ord(float f)
{
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? -(int64_t)(i & 0x7fffffff) : i;
}

struct Sweep {
    int64_t max_ulp = 0;
    uint32_t worst = 0;
    float got = 0, want = 0;
    uint64_t nan_mismatch = 0, first_nan_x = 0;
};

// Every input x = i*step (as bits), a dense sweep of the whole FP32 line
// with every exponent and both signs.
template <class F, class G> Sweep sweep(F ours, G libm, uint32_t step)
{
    Sweep s;
    for (uint64_t u = 0; u <= 0xffffffffull; u += step) {
        float x = fl((uint32_t)u), a = ours(x), b = libm(x);
        if (std::isnan(a) || std::isnan(b)) {
            if (std::isnan(a) != std::isnan(b) && s.nan_mismatch++ == 0) s.first_nan_x = u;
            continue;
        }
        int64_t d = std::llabs(ord(a) - ord(b));
        if (d > s.max_ulp) {
            s.max_ulp = d;
            s.worst = (uint32_t)u;
            s.got = a;
            s.want = b;
        }
    }
    return s;
}

// 1021 is prime: the sweep visits every mantissa position pattern
const uint32_t kStep = 1021;

#define EXPECT_SWEEP(s, limit)                                                                          \
    do {                                                                                                \
        EXPECT_EQ((s).nan_mismatch, 0u) << "first NaN disagreement at x = 0x" << std::hex << (s).first_nan_x; \
        EXPECT_LE((s).max_ulp, limit) << "worst x = 0x" << std::hex << (s).worst << ": ours 0x" << bits((s).got) \
                                      << ", glibc 0x" << bits((s).want);                                \
    } while (0)

TEST(Fmath, ExpfWithinOneUlpOfGlibc)
{
    Sweep s = sweep(mts_fm_expf, [](float x) { return expf(x); }, kStep);
    EXPECT_SWEEP(s, 1);
}

TEST(Fmath, LogfWithinOneUlpOfGlibc)
{
    Sweep s = sweep(mts_fm_logf, [](float x) { return logf(x); }, kStep);
    EXPECT_SWEEP(s, 1);
}

TEST(Fmath, TanhfWithinTwoUlpOfGlibc)
{
    Sweep s = sweep(mts_fm_tanhf, [](float x) { return tanhf(x); }, kStep);
    EXPECT_SWEEP(s, 2);
}

// Every input near the places where the algorithms switch paths, and the
// overflow / underflow thresholds, one by one.
TEST(Fmath, BoundariesWithinLimits)
{
    const float centers[] = {88.72283f, 88.7228394f, -87.33654f, -103.27893f, -103.97208f, -104.0f,
                             0.55f,     9.1f,        1.0f,       0.70710678f, 1.41421356f, 1.17549435e-38f};
    for (float c : centers)
        for (int sgn = 0; sgn < 2; sgn++)
            for (int d = -300; d <= 300; d++) {
                float x = fl(bits(sgn ? -c : c) + (uint32_t)d);
                float e = mts_fm_expf(x), le = expf(x);
                float t = mts_fm_tanhf(x), lt = tanhf(x);
                ASSERT_LE(std::llabs(ord(e) - ord(le)), 1) << "expf x=0x" << std::hex << bits(x);
                ASSERT_LE(std::llabs(ord(t) - ord(lt)), 2) << "tanhf x=0x" << std::hex << bits(x);
                if (x > 0) {
                    float l = mts_fm_logf(x), ll = logf(x);
                    ASSERT_LE(std::llabs(ord(l) - ord(ll)), 1) << "logf x=0x" << std::hex << bits(x);
                }
            }
}

TEST(Fmath, SpecialValues)
{
    const float inf = INFINITY;
    EXPECT_EQ(bits(mts_fm_expf(0.0f)), bits(1.0f));
    EXPECT_EQ(bits(mts_fm_expf(-0.0f)), bits(1.0f));
    EXPECT_EQ(bits(mts_fm_expf(inf)), bits(inf));
    EXPECT_EQ(bits(mts_fm_expf(-inf)), bits(0.0f));
    EXPECT_EQ(bits(mts_fm_expf(89.0f)), bits(inf));
    EXPECT_EQ(bits(mts_fm_expf(-200.0f)), bits(0.0f));
    EXPECT_EQ(bits(mts_fm_expf(-100.0f)), bits(expf(-100.0f))); // a subnormal result
    EXPECT_LT(mts_fm_expf(-100.0f), 1.17549435e-38f);
    EXPECT_TRUE(std::isnan(mts_fm_expf(NAN)));
    EXPECT_EQ(bits(mts_fm_logf(1.0f)), bits(0.0f));
    EXPECT_EQ(bits(mts_fm_logf(0.0f)), bits(-inf));
    EXPECT_EQ(bits(mts_fm_logf(-0.0f)), bits(-inf));
    EXPECT_EQ(bits(mts_fm_logf(inf)), bits(inf));
    EXPECT_TRUE(std::isnan(mts_fm_logf(-1.0f)));
    EXPECT_TRUE(std::isnan(mts_fm_logf(-inf)));
    EXPECT_TRUE(std::isnan(mts_fm_logf(NAN)));
    EXPECT_EQ(bits(mts_fm_logf(fl(1))), bits(logf(fl(1)))); // the smallest subnormal
    EXPECT_EQ(bits(mts_fm_tanhf(0.0f)), bits(0.0f));
    EXPECT_EQ(bits(mts_fm_tanhf(-0.0f)), bits(-0.0f));
    EXPECT_EQ(bits(mts_fm_tanhf(inf)), bits(1.0f));
    EXPECT_EQ(bits(mts_fm_tanhf(-inf)), bits(-1.0f));
    EXPECT_EQ(bits(mts_fm_tanhf(fl(1))), 1u); // subnormal: tanh x = x
    EXPECT_TRUE(std::isnan(mts_fm_tanhf(NAN)));
    // odd symmetry, exactly
    uint64_t s = 7;
    for (int i = 0; i < 100000; i++) {
        float x = fl((uint32_t)splitmix64(&s) & 0x7fffffffu);
        if (std::isnan(x)) continue;
        ASSERT_EQ(bits(mts_fm_tanhf(-x)), bits(mts_fm_tanhf(x)) ^ 0x80000000u) << std::hex << bits(x);
    }
}

// ------------------------------------------------ fixed-order sums

// The documented order written independently: chunk sums into an array,
// padded with +0 to a power of two, then added level by level.
template <class T> T blocked_ref(const std::vector<T> &t)
{
    std::vector<T> c;
    for (size_t j = 0; j < t.size(); j += MTS_FM_CHUNK) {
        T s = 0;
        for (size_t i = j; i < t.size() && i < j + MTS_FM_CHUNK; i++) s = s + t[i];
        c.push_back(s);
    }
    if (c.empty()) return 0;
    size_t p = 1;
    while (p < c.size()) p *= 2;
    c.resize(p, (T)0);
    for (; p > 1; p /= 2)
        for (size_t i = 0; i < p / 2; i++) c[i] = c[2 * i] + c[2 * i + 1];
    return c[0];
}

double sum_d(const std::vector<double> &t)
{
    mts_fm_sumd s;
    mts_fm_sumd_init(&s);
    for (double v : t) mts_fm_sumd_push(&s, v);
    return mts_fm_sumd_sum(&s);
}
float sum_f(const std::vector<float> &t)
{
    mts_fm_sumf s;
    mts_fm_sumf_init(&s);
    for (float v : t) mts_fm_sumf_push(&s, v);
    return mts_fm_sumf_sum(&s);
}

// Terms of very different magnitudes, so that any other order gives other bits.
float term(uint64_t *s)
{
    uint64_t r = splitmix64(s);
    float m = (float)(r & 0xffffff) / 16777216.0f - 0.5f;
    return std::ldexp(m, (int)((r >> 24) % 40) - 20);
}

TEST(FixedOrderSum, StreamingEqualsBlockedTree)
{
    const size_t sizes[] = {0,    1,          2,          63,     64,   65, 127, 128, 129, 64 * 3, 64 * 5 + 3, 64 * 7 + 1,
                            64 * 8, 64 * 8 + 1, 64 * 17 + 9, 4096, 4096 + 64 * 13 + 5, 100000};
    uint64_t seed = 42;
    int differs_from_sequential = 0;
    for (size_t n : sizes) {
        std::vector<float> tf(n);
        std::vector<double> td(n);
        for (size_t i = 0; i < n; i++) td[i] = tf[i] = term(&seed);
        float rf = blocked_ref(tf), gf = sum_f(tf);
        double rd = blocked_ref(td), gd = sum_d(td);
        ASSERT_EQ(bits(gf), bits(rf)) << "n=" << n << " float: got " << gf << " want " << rf;
        ASSERT_EQ(dbits(gd), dbits(rd)) << "n=" << n << " double: got " << gd << " want " << rd;
        float ga = mts_fm_sumf_array(tf.data(), n); // eight chunks side by side
        ASSERT_EQ(bits(ga), bits(rf)) << "n=" << n << " sumf_array: got " << ga << " want " << rf;
        float seq = 0;
        for (float v : tf) seq += v;
        differs_from_sequential += bits(seq) != bits(gf);
    }
    // the order is really not the sequential one (else this test proves nothing)
    EXPECT_GT(differs_from_sequential, 0);
    EXPECT_EQ(bits(sum_f({})), bits(0.0f));
    EXPECT_EQ(bits(sum_f({-0.0f})), bits(0.0f)); // +0 + -0 = +0: sums start from +0
}

TEST(FixedOrderSum, DenseBiasGradient)
{
    const int N = 300, out = 5;
    uint64_t seed = 3;
    std::vector<float> dy((size_t)N * out), db(out);
    for (float &v : dy) v = term(&seed);
    mts_provider p;
    std::memset(&p, 0, sizeof p);
    p.kind = MTS_PROV_NATIVE;
    mts_nn_ctx ctx = mts_nn_ctx_cpu(&p, &p);
    mts_err err;
    ASSERT_EQ(mts_dense_backward(&ctx, N, 3, out, nullptr, nullptr, dy.data(), nullptr, nullptr, db.data(), &err),
              MTS_OK);
    for (int o = 0; o < out; o++) {
        std::vector<float> col(N);
        for (int n = 0; n < N; n++) col[n] = dy[(size_t)n * out + o];
        EXPECT_EQ(bits(db[o]), bits(blocked_ref(col))) << "o=" << o;
    }
}

TEST(FixedOrderSum, ConvBiasGradient)
{
    mts_conv_geom g = {2, 9, 9, 3, 3, 1, 1, 0, 0};
    mts_err err;
    ASSERT_EQ(mts_conv_geom_init(&g, &err), MTS_OK);
    const int N = 3, P = g.oh * g.ow;
    uint64_t seed = 5;
    std::vector<float> x((size_t)N * g.cin * g.h * g.w), w((size_t)g.cout * g.cin * 9), dy((size_t)N * g.cout * P),
        db(g.cout);
    for (float &v : x) v = term(&seed);
    for (float &v : w) v = term(&seed);
    for (float &v : dy) v = term(&seed);
    mts_provider p;
    std::memset(&p, 0, sizeof p);
    p.kind = MTS_PROV_NATIVE;
    mts_nn_ctx ctx = mts_nn_ctx_cpu(&p, &p);
    ASSERT_EQ(mts_conv2d_backward(&ctx, &g, N, x.data(), w.data(), dy.data(), nullptr, nullptr, db.data(), &err),
              MTS_OK);
    for (int c = 0; c < g.cout; c++) {
        std::vector<float> t;
        for (int n = 0; n < N; n++)
            for (int q = 0; q < P; q++) t.push_back(dy[((size_t)n * g.cout + c) * P + q]);
        EXPECT_EQ(bits(db[c]), bits(blocked_ref(t))) << "channel " << c;
    }
}

TEST(FixedOrderSum, BatchNormStatisticsAndGradients)
{
    const int N = 7, C = 2, HW = 25; // 175 terms per channel: three chunks
    uint64_t seed = 11;
    std::vector<float> x((size_t)N * C * HW), dy(x.size()), y(x.size()), xhat(x.size()), dx(x.size());
    for (float &v : x) v = 3.0f + term(&seed);
    for (float &v : dy) v = term(&seed);
    std::vector<float> gam = {1.5f, 0.5f}, bet = {0.1f, -0.2f}, rm(C, 0.0f), rv(C, 1.0f), istd(C), dg(C), dbt(C);
    const float mom = 0.25f, eps = 1e-5f;
    mts_bn_forward(1, N, C, HW, x.data(), gam.data(), bet.data(), rm.data(), rv.data(), mom, eps, y.data(),
                   xhat.data(), istd.data());
    mts_bn_backward(N, C, HW, dy.data(), gam.data(), xhat.data(), istd.data(), dx.data(), dg.data(), dbt.data());
    size_t cnt = (size_t)N * HW;
    for (int c = 0; c < C; c++) {
        std::vector<double> tx, tg, tgx;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HW; i++) {
                size_t o = ((size_t)n * C + c) * HW + i;
                tx.push_back(x[o]);
                tg.push_back(dy[o]);
                tgx.push_back((double)dy[o] * xhat[o]);
            }
        double m = blocked_ref(tx) / (double)cnt;
        std::vector<double> t2;
        for (double v : tx) t2.push_back((v - m) * (v - m));
        double s2 = blocked_ref(t2);
        float var = (float)(s2 / (double)cnt), uvar = (float)(s2 / (double)(cnt - 1));
        EXPECT_EQ(bits(rm[c]), bits((1.0f - mom) * 0.0f + mom * (float)m)) << "running mean, channel " << c;
        EXPECT_EQ(bits(rv[c]), bits((1.0f - mom) * 1.0f + mom * uvar)) << "running var, channel " << c;
        EXPECT_EQ(bits(istd[c]), bits(1.0f / std::sqrt(var + eps))) << "invstd, channel " << c;
        EXPECT_EQ(bits(dbt[c]), bits((float)blocked_ref(tg))) << "dbeta, channel " << c;
        EXPECT_EQ(bits(dg[c]), bits((float)blocked_ref(tgx))) << "dgamma, channel " << c;
    }
}

TEST(FixedOrderSum, SoftmaxCrossEntropyLoss)
{
    const int N = 150, K = 10;
    uint64_t seed = 19;
    std::vector<float> z((size_t)N * K), dz(z.size());
    std::vector<uint8_t> lab(N);
    for (float &v : z) v = 4.0f * term(&seed);
    for (uint8_t &l : lab) l = (uint8_t)(splitmix64(&seed) % K);
    int correct = -1;
    double L = mts_softmax_ce(N, K, z.data(), lab.data(), dz.data(), &correct);
    std::vector<double> terms;
    int ok = 0;
    for (int n = 0; n < N; n++) {
        const float *zn = &z[(size_t)n * K];
        int am = 0;
        for (int c = 1; c < K; c++)
            if (zn[c] > zn[am]) am = c;
        ok += am == lab[n];
        float s = 0.0f;
        for (int c = 0; c < K; c++) s += mts_fm_expf(zn[c] - zn[am]);
        float lse = zn[am] + mts_fm_logf(s);
        terms.push_back((double)(lse - zn[lab[n]]));
        for (int c = 0; c < K; c++) {
            float want = (mts_fm_expf(zn[c] - lse) - (c == lab[n] ? 1.0f : 0.0f)) / (float)N;
            ASSERT_EQ(bits(dz[(size_t)n * K + c]), bits(want)) << "n=" << n << " c=" << c;
        }
    }
    EXPECT_EQ(correct, ok);
    EXPECT_EQ(dbits(L), dbits(blocked_ref(terms) / N));
}

} // namespace
