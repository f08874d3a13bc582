// test_nn.cpp - the training engine's layer ops (include/mantis/nn.h):
//  - finite-difference gradient checks of every layer in native mode against
//    a float64 re-implementation of its forward pass;
//  - LUT mode: each GEMM layer's forward and both gradients equal, bit for
//    bit, a naive reference that calls mts_amsim per product in the
//    documented order (docs/training.md);
//  - FMAq mode: the same against the mts_fmaq_dot reference dot product;
//  - the FMAq STE masks of the accumulator paper (appendix D).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

extern "C" {
#include "mantis/amsim.h"
#include "mantis/fmaq.h"
#include "mantis/nn.h"
#include "../sim/nn/nn_internal.h" // the net's BatchNorm forms (mts__bn_*_t)
}
#include "test_nn_ctx.h"
#include "test_rng.h"

namespace {

using vecf = std::vector<float>;
using vecd = std::vector<double>;

vecd to_d(const vecf &v) { return vecd(v.begin(), v.end()); }

// ---------------------------------------------------------------------------
// float64 reference forwards

vecd dense_ref(int N, int in, int out, const vecd &x, const vecd &w, const vecd &b)
{
    vecd y((size_t)N * out);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < out; o++) {
            double s = b[o];
            for (int i = 0; i < in; i++) s += x[(size_t)n * in + i] * w[(size_t)o * in + i];
            y[(size_t)n * out + o] = s;
        }
    return y;
}

vecd conv_ref(const mts_conv_geom &g, int N, const vecd &x, const vecd &w, const vecd &b)
{
    vecd y((size_t)N * g.cout * g.oh * g.ow);
    for (int n = 0; n < N; n++)
        for (int co = 0; co < g.cout; co++)
            for (int oy = 0; oy < g.oh; oy++)
                for (int ox = 0; ox < g.ow; ox++) {
                    double s = b[co];
                    for (int ci = 0; ci < g.cin; ci++)
                        for (int ky = 0; ky < g.k; ky++)
                            for (int kx = 0; kx < g.k; kx++) {
                                int iy = oy * g.stride - g.pad + ky, ix = ox * g.stride - g.pad + kx;
                                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                                s += x[(((size_t)n * g.cin + ci) * g.h + iy) * g.w + ix] *
                                     w[(((size_t)co * g.cin + ci) * g.k + ky) * g.k + kx];
                            }
                    y[(((size_t)n * g.cout + co) * g.oh + oy) * g.ow + ox] = s;
                }
    return y;
}

double dot(const vecd &a, const vecd &b)
{
    double s = 0;
    for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
    return s;
}

// Central difference of f at v[i], in double.
double numgrad(const std::function<double(const vecd &)> &f, vecd v, size_t i)
{
    double h = 1e-6 * std::max(1.0, std::fabs(v[i]));
    double o = v[i];
    v[i] = o + h;
    double fp = f(v);
    v[i] = o - h;
    double fm = f(v);
    return (fp - fm) / (2 * h);
}

// Checks analytic gradient g (FP32 from the layer) of L = f(v) at every
// index (or a stride-sampled subset of large tensors).
void check_grad(const char *what, const std::function<double(const vecd &)> &f, const vecd &v, const vecf &g)
{
    ASSERT_EQ(v.size(), g.size()) << what;
    size_t step = v.size() > 64 ? v.size() / 64 : 1;
    for (size_t i = 0; i < v.size(); i += step) {
        double num = numgrad(f, v, i);
        EXPECT_NEAR(g[i], num, 2e-3 + 2e-3 * std::fabs(num)) << what << " index " << i;
    }
}

void expect_close(const char *what, const vecf &y, const vecd &ref)
{
    ASSERT_EQ(y.size(), ref.size());
    for (size_t i = 0; i < y.size(); i++) EXPECT_NEAR(y[i], ref[i], 1e-4 + 1e-4 * std::fabs(ref[i])) << what << " " << i;
}

TEST(NnGrad, Dense)
{
    const int N = 3, in = 7, out = 5;
    vecf x = rnd(N * in, 1), w = rnd(out * in, 2), b = rnd(out, 3), r = rnd(N * out, 4);
    mts_provider p = native_prov();
    mts_err err;
    vecf y(N * out), dx(N * in), dw(out * in), db(out);
    ASSERT_EQ(mts_dense_forward(NnCtx(&p, &p).get(), N, in, out, x.data(), w.data(), b.data(), y.data(), &err), MTS_OK) << err.msg;
    expect_close("dense y", y, dense_ref(N, in, out, to_d(x), to_d(w), to_d(b)));
    ASSERT_EQ(mts_dense_backward(NnCtx(&p, &p).get(), N, in, out, x.data(), w.data(), r.data(), dx.data(),
                                 dw.data(), db.data(), &err),
              MTS_OK);
    vecd X = to_d(x), W = to_d(w), B = to_d(b), R = to_d(r);
    check_grad("dense dx", [&](const vecd &v) { return dot(dense_ref(N, in, out, v, W, B), R); }, X, dx);
    check_grad("dense dw", [&](const vecd &v) { return dot(dense_ref(N, in, out, X, v, B), R); }, W, dw);
    check_grad("dense db", [&](const vecd &v) { return dot(dense_ref(N, in, out, X, W, v), R); }, B, db);
}

TEST(NnGrad, Conv2DStridePad)
{
    mts_conv_geom g = {};
    g.cin = 2, g.h = 7, g.w = 6, g.cout = 3, g.k = 3, g.stride = 2, g.pad = 1;
    mts_err err;
    ASSERT_EQ(mts_conv_geom_init(&g, &err), MTS_OK);
    EXPECT_EQ(g.oh, 4);
    EXPECT_EQ(g.ow, 3);
    const int N = 2;
    size_t nx = (size_t)N * g.cin * g.h * g.w, nw = (size_t)g.cout * g.cin * g.k * g.k,
           ny = (size_t)N * g.cout * g.oh * g.ow;
    vecf x = rnd(nx, 5), w = rnd(nw, 6), b = rnd(g.cout, 7), r = rnd(ny, 8);
    vecf y(ny), dx(nx), dw(nw), db(g.cout);
    mts_provider p = native_prov();
    ASSERT_EQ(mts_conv2d_forward(NnCtx(&p, &p).get(), &g, N, x.data(), w.data(), b.data(), y.data(), &err), MTS_OK) << err.msg;
    expect_close("conv y", y, conv_ref(g, N, to_d(x), to_d(w), to_d(b)));
    ASSERT_EQ(mts_conv2d_backward(NnCtx(&p, &p).get(), &g, N, x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data(), &err),
              MTS_OK);
    vecd X = to_d(x), W = to_d(w), B = to_d(b), R = to_d(r);
    check_grad("conv dx", [&](const vecd &v) { return dot(conv_ref(g, N, v, W, B), R); }, X, dx);
    check_grad("conv dw", [&](const vecd &v) { return dot(conv_ref(g, N, X, v, B), R); }, W, dw);
    check_grad("conv db", [&](const vecd &v) { return dot(conv_ref(g, N, X, W, v), R); }, B, db);
}

// The fast im2col, im2col_t (transposed), col2im and col2im_rows against the
// one-element references, bit for
// bit (raw bits, so -0 and NaN payloads count), over strides 1-3, padding
// 0 to k and odd shapes; a mismatch names the geometry and the first index.
TEST(NnConv, Im2colCol2imEqualTheirReferences)
{
    uint64_t seed = 7;
    auto rnd = [&seed]() {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return (float)((seed >> 40) & 0xFFFF) / 32768.0f - 1.0f;
    };
    // one geometry; false when it is not a valid convolution
    auto check = [&](int k, int stride, int pad, int h, int w) {
        mts_conv_geom g{};
        g.cin = 2;
        g.cout = 3;
        g.h = h;
        g.w = w;
        g.k = k;
        g.stride = stride;
        g.pad = pad;
        mts_err err{};
        if (mts_conv_geom_init(&g, &err) != MTS_OK) return false;
        const int N = 3, K = g.cin * k * k, P = g.oh * g.ow;
        std::string at = "k " + std::to_string(k) + " stride " + std::to_string(stride) + " pad " +
                         std::to_string(pad) + " h " + std::to_string(h) + " w " + std::to_string(w);
        vecf x((size_t)N * g.cin * g.h * g.w), dcol((size_t)N * P * K);
        for (float &v : x) v = rnd();
        for (float &v : dcol) v = rnd();
        x[0] = -0.0f;
        vecf c1((size_t)K * N * P, 9.0f), c2(c1.size(), -9.0f), d1(x.size(), 9.0f), d2(x.size(), -9.0f);
        EXPECT_EQ(MTS_OK, mts_im2col(&g, N, x.data(), c1.data(), &err));
        mts_im2col_ref(&g, N, x.data(), c2.data());
        EXPECT_EQ(MTS_OK, mts_col2im(&g, N, dcol.data(), d1.data(), &err));
        mts_col2im_ref(&g, N, dcol.data(), d2.data());
        EXPECT_EQ(0, memcmp(c1.data(), c2.data(), c1.size() * 4)) << "im2col " << at;
        vecf ct(c1.size(), 9.0f);
        EXPECT_EQ(MTS_OK, mts_im2col_t(&g, N, x.data(), ct.data(), &err));
        for (int r = 0; r < K; r++)
            for (int j = 0; j < N * P; j++)
                if (memcmp(&ct[(size_t)j * K + r], &c2[(size_t)r * N * P + j], 4)) {
                    ADD_FAILURE() << "im2col_t " << at << " tap " << r << " pixel " << j << ": " << std::hexfloat
                                  << ct[(size_t)j * K + r] << " vs " << c2[(size_t)r * N * P + j];
                    return true;
                }
        for (size_t i = 0; i < d1.size(); i++)
            if (memcmp(&d1[i], &d2[i], 4)) {
                ADD_FAILURE() << "col2im " << at << " at " << i << ": " << std::hexfloat << d1[i] << " vs " << d2[i];
                return true;
            }
        vecf dk(dcol.size()), d3(x.size(), 9.0f);
        for (int j = 0; j < N * P; j++)
            for (int r = 0; r < K; r++) dk[(size_t)r * N * P + j] = dcol[(size_t)j * K + r];
        EXPECT_EQ(MTS_OK, mts_col2im_rows(&g, N, dk.data(), d3.data(), &err));
        for (size_t i = 0; i < d3.size(); i++)
            if (memcmp(&d3[i], &d2[i], 4)) {
                ADD_FAILURE() << "col2im_rows " << at << " at " << i << ": " << std::hexfloat << d3[i] << " vs "
                              << d2[i];
                return true;
            }
        return true;
    };
    int cases = 0;
    for (int k = 1; k <= 5; k++)
        for (int stride = 1; stride <= 3; stride++)
            for (int pad = 0; pad <= k; pad++)
                for (int hw = k; hw <= k + 7; hw += 3) {
                    cases += check(k, stride, pad, hw, hw + 2); // non-square
                    ASSERT_FALSE(::testing::Test::HasFailure());
                }
    EXPECT_GT(cases, 150);
    // taps wider than two vectors of the copies, and 1,030-wide rows
    EXPECT_TRUE(check(17, 2, 3, 20, 21));
    EXPECT_TRUE(check(3, 1, 1, 2, 1030));
}

// The max-pool tie rule, element by element against the readable loop: the
// first maximum in raster order wins, a NaN never wins (but stays when it
// comes first), +0 and -0 tie. Values from a small set so ties are common.
TEST(NnPool, MaxTieRuleEqualsReference)
{
    const float vals[] = {1.0f, 2.0f, -0.0f, 0.0f, NAN, 2.0f, -3.0f};
    for (int k = 1; k <= 3; k++)
        for (int s = 1; s <= 3; s++)
            for (int W : {7, 9, 32, 35, 70}) { // 2x2 windows: 16 outputs a step, tails
            const int N = 2, C = 3, H = 9;
            int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
            vecf x((size_t)N * C * H * W), y((size_t)N * C * oh * ow);
            std::vector<int32_t> am(y.size());
            uint32_t st = 12345u + (uint32_t)(k * 7 + s);
            for (float &v : x) {
                st = st * 1664525u + 1013904223u;
                v = vals[(st >> 24) % 7];
            }
            mts_maxpool_forward(N, C, H, W, k, s, x.data(), y.data(), am.data());
            for (int pl = 0; pl < N * C; pl++)
                for (int o = 0; o < oh * ow; o++) {
                    int oy = o / ow, ox = o % ow, best = oy * s * W + ox * s;
                    const float *xp = x.data() + (size_t)pl * H * W;
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) {
                            int i = (oy * s + ky) * W + ox * s + kx;
                            if (xp[i] > xp[best]) best = i;
                        }
                    size_t q = (size_t)pl * oh * ow + o;
                    ASSERT_EQ(best, am[q]) << "k " << k << " s " << s << " plane " << pl << " output " << o;
                    ASSERT_EQ(0, memcmp(&xp[best], &y[q], 4)) << "k " << k << " s " << s << " output " << o;
                }
            }
}

TEST(NnGrad, PoolsAndGap)
{
    const int N = 2, C = 2, H = 6, W = 5, k = 2, s = 2;
    int oh = mts_pool_out(H, k, s), ow = mts_pool_out(W, k, s);
    vecf x = rnd((size_t)N * C * H * W, 9), r = rnd((size_t)N * C * oh * ow, 10);
    vecd X = to_d(x), R = to_d(r);
    auto maxref = [&](const vecd &v) {
        vecd y((size_t)N * C * oh * ow);
        for (int pl = 0; pl < N * C; pl++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    double m = -1e300;
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) m = std::max(m, v[(size_t)pl * H * W + (oy * s + ky) * W + ox * s + kx]);
                    y[(size_t)pl * oh * ow + oy * ow + ox] = m;
                }
        return y;
    };
    auto avgref = [&](const vecd &v) {
        vecd y((size_t)N * C * oh * ow);
        for (int pl = 0; pl < N * C; pl++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    double a = 0;
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) a += v[(size_t)pl * H * W + (oy * s + ky) * W + ox * s + kx];
                    y[(size_t)pl * oh * ow + oy * ow + ox] = a / (k * k);
                }
        return y;
    };
    vecf y(r.size()), dx(x.size());
    std::vector<int32_t> am(r.size());
    mts_maxpool_forward(N, C, H, W, k, s, x.data(), y.data(), am.data());
    expect_close("maxpool y", y, maxref(X));
    mts_maxpool_backward(N, C, H, W, k, s, r.data(), am.data(), dx.data());
    check_grad("maxpool dx", [&](const vecd &v) { return dot(maxref(v), R); }, X, dx);
    mts_avgpool_forward(N, C, H, W, k, s, x.data(), y.data());
    expect_close("avgpool y", y, avgref(X));
    mts_avgpool_backward(N, C, H, W, k, s, r.data(), dx.data());
    check_grad("avgpool dx", [&](const vecd &v) { return dot(avgref(v), R); }, X, dx);

    auto gapref = [&](const vecd &v) {
        vecd g((size_t)N * C);
        for (int pl = 0; pl < N * C; pl++) {
            double a = 0;
            for (int i = 0; i < H * W; i++) a += v[(size_t)pl * H * W + i];
            g[pl] = a / (H * W);
        }
        return g;
    };
    vecf rg = rnd((size_t)N * C, 11), gy(N * C);
    vecd RG = to_d(rg);
    mts_gap_forward(N, C, H * W, x.data(), gy.data());
    expect_close("gap y", gy, gapref(X));
    mts_gap_backward(N, C, H * W, rg.data(), dx.data());
    check_grad("gap dx", [&](const vecd &v) { return dot(gapref(v), RG); }, X, dx);
}

TEST(NnGrad, Relu)
{
    vecf x = rnd(50, 12), r = rnd(50, 13), y(50), dx(50);
    for (auto &v : x)
        if (std::fabs(v) < 0.05f) v = 0.3f; // keep away from the kink
    vecd X = to_d(x), R = to_d(r);
    auto ref = [&](const vecd &v) {
        vecd o(v.size());
        for (size_t i = 0; i < v.size(); i++) o[i] = v[i] > 0 ? v[i] : 0;
        return o;
    };
    mts_relu_forward(50, x.data(), y.data());
    expect_close("relu y", y, ref(X));
    mts_relu_backward(50, y.data(), r.data(), dx.data());
    check_grad("relu dx", [&](const vecd &v) { return dot(ref(v), R); }, X, dx);
}

TEST(NnGrad, BatchNormTrain)
{
    const int N = 3, C = 2, HW = 4;
    const float eps = 1e-5f;
    vecf x = rnd((size_t)N * C * HW, 14), gam = rnd(C, 15, 0.5f, 1.5f), bet = rnd(C, 16), r = rnd(x.size(), 17);
    vecd X = to_d(x), G = to_d(gam), Bt = to_d(bet), R = to_d(r);
    auto ref = [&](const vecd &v, const vecd &g, const vecd &b) {
        vecd y(v.size());
        for (int c = 0; c < C; c++) {
            double m = 0, var = 0;
            for (int n = 0; n < N; n++)
                for (int i = 0; i < HW; i++) m += v[((size_t)n * C + c) * HW + i];
            m /= N * HW;
            for (int n = 0; n < N; n++)
                for (int i = 0; i < HW; i++) var += std::pow(v[((size_t)n * C + c) * HW + i] - m, 2);
            var /= N * HW;
            for (int n = 0; n < N; n++)
                for (int i = 0; i < HW; i++) {
                    size_t j = ((size_t)n * C + c) * HW + i;
                    y[j] = g[c] * (v[j] - m) / std::sqrt(var + eps) + b[c];
                }
        }
        return y;
    };
    vecf y(x.size()), xhat(x.size()), istd(C), rm(C, 0.0f), rv(C, 1.0f), dx(x.size()), dg(C), db(C);
    mts_bn_forward(1, N, C, HW, x.data(), gam.data(), bet.data(), rm.data(), rv.data(), 0.1f, eps, y.data(),
                   xhat.data(), istd.data());
    expect_close("bn y", y, ref(X, G, Bt));
    mts_bn_backward(N, C, HW, r.data(), gam.data(), xhat.data(), istd.data(), dx.data(), dg.data(), db.data());
    check_grad("bn dx", [&](const vecd &v) { return dot(ref(v, G, Bt), R); }, X, dx);
    check_grad("bn dgamma", [&](const vecd &v) { return dot(ref(X, v, Bt), R); }, G, dg);
    check_grad("bn dbeta", [&](const vecd &v) { return dot(ref(X, G, v), R); }, Bt, db);
    // running statistics moved toward the batch statistics
    EXPECT_NE(rm[0], 0.0f);
    EXPECT_NE(rv[0], 1.0f);
}

TEST(NnGrad, SoftmaxCrossEntropy)
{
    const int N = 4, K = 5;
    vecf z = rnd((size_t)N * K, 18, -3, 3), dz(z.size());
    std::vector<uint8_t> lab = {0, 3, 4, 1};
    auto ref = [&](const vecd &v) {
        double L = 0;
        for (int n = 0; n < N; n++) {
            double m = -1e300, s = 0;
            for (int c = 0; c < K; c++) m = std::max(m, v[n * K + c]);
            for (int c = 0; c < K; c++) s += std::exp(v[n * K + c] - m);
            L += m + std::log(s) - v[n * K + lab[n]];
        }
        return L / N;
    };
    int correct = -1;
    double L = mts_softmax_ce(N, K, z.data(), lab.data(), dz.data(), &correct);
    EXPECT_NEAR(L, ref(to_d(z)), 1e-5);
    int want = 0;
    for (int n = 0; n < N; n++) {
        int am = 0;
        for (int c = 1; c < K; c++)
            if (z[n * K + c] > z[n * K + am]) am = c;
        want += am == lab[n];
    }
    EXPECT_EQ(correct, want);
    check_grad("ce dlogits", ref, to_d(z), dz);
}

TEST(NnGrad, MatMul)
{
    const int N = 2, m = 3, k = 4, q = 5;
    vecf a = rnd((size_t)N * m * k, 19), b = rnd((size_t)N * k * q, 20), r = rnd((size_t)N * m * q, 21);
    vecd A = to_d(a), B = to_d(b), R = to_d(r);
    auto ref = [&](const vecd &x, const vecd &y) {
        vecd c((size_t)N * m * q, 0.0);
        for (int n = 0; n < N; n++)
            for (int i = 0; i < m; i++)
                for (int j = 0; j < q; j++)
                    for (int t = 0; t < k; t++)
                        c[((size_t)n * m + i) * q + j] += x[((size_t)n * m + i) * k + t] * y[((size_t)n * k + t) * q + j];
        return c;
    };
    mts_provider p = native_prov();
    mts_err err;
    vecf c(r.size()), da(a.size()), db(b.size());
    ASSERT_EQ(mts_matmul_forward(NnCtx(&p, &p).get(), N, m, k, q, a.data(), b.data(), c.data(), &err), MTS_OK);
    expect_close("matmul c", c, ref(A, B));
    ASSERT_EQ(mts_matmul_backward(NnCtx(&p, &p).get(), N, m, k, q, a.data(), b.data(), r.data(), da.data(), db.data(), &err), MTS_OK);
    check_grad("matmul da", [&](const vecd &v) { return dot(ref(v, B), R); }, A, da);
    check_grad("matmul db", [&](const vecd &v) { return dot(ref(A, v), R); }, B, db);
}

// A whole net with a residual branch (conv, BN, add, flatten, dense): the
// backward driver accumulates gradients of a node read twice.
TEST(NnGrad, ResidualNetInputGradientsReachParameters)
{
    mts_net net;
    mts_err err;
    ASSERT_EQ(mts_net_init(&net, "res", 2, 5, 5, &err), MTS_OK);
    int c1 = mts_net_conv(&net, 3, 3, 1, 1, &err);
    ASSERT_GT(c1, 0);
    ASSERT_GT(mts_net_relu(&net, &err), 0);
    ASSERT_GT(mts_net_conv(&net, 3, 3, 1, 1, &err), 0);
    ASSERT_GT(mts_net_add(&net, c1, &err), 0) << err.msg;
    ASSERT_GT(mts_net_dense(&net, 4, &err), 0);
    ASSERT_EQ(mts_net_build(&net, 2, 7, &err), MTS_OK);
    const int N = 2;
    vecf x = rnd((size_t)N * 50, 22);
    std::vector<uint8_t> lab = {1, 3};
    mts_provider p = native_prov();
    auto loss = [&](const vecd &params) {
        // the layers are checked against float64 above; here the FP32 net
        // itself is differenced, with a step (2e-3) FP32 resolves well
        std::vector<float> save(net.param, net.param + net.nparam);
        for (size_t i = 0; i < net.nparam; i++) net.param[i] = (float)params[i];
        EXPECT_EQ(mts_net_forward(&net, NnCtx(&p, &p).get(), 0, N, x.data(), &err), MTS_OK);
        double L = mts_softmax_ce(N, 4, mts_net_output(&net), lab.data(), nullptr, nullptr);
        std::copy(save.begin(), save.end(), net.param);
        return L;
    };
    vecf dl(N * 4);
    ASSERT_EQ(mts_net_forward(&net, NnCtx(&p, &p).get(), 0, N, x.data(), &err), MTS_OK);
    mts_softmax_ce(N, 4, mts_net_output(&net), lab.data(), dl.data(), nullptr);
    ASSERT_EQ(mts_net_backward(&net, NnCtx(&p, &p).get(), N, x.data(), dl.data(), &err), MTS_OK);
    vecd P(net.param, net.param + net.nparam);
    for (size_t i = 0; i < net.nparam; i += 7) {
        vecd v = P;
        double h = 2e-3;
        v[i] = P[i] + h;
        double fp = loss(v);
        v[i] = P[i] - h;
        double fm = loss(v);
        double num = (fp - fm) / (2 * h);
        EXPECT_NEAR(net.grad[i], num, 2e-3 + 1e-2 * std::fabs(num)) << "param " << i;
    }
    mts_net_free(&net);
}

// ---------------------------------------------------------------------------
// LUT and FMAq modes: bit-exact against naive per-product references

struct NnLut : ::testing::Test {
    mts_lut lut;
    mts_mulop op, lutop;
    mts_provider lp;
    void SetUp() override
    {
        mts_err err;
        mts_format f = mts_format_e8(7);
        ASSERT_EQ(mts_mulop_model(&op, "mbm", &f, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK) << err.msg;
        mts_mulop_lut(&lutop, &lut);
        memset(&lp, 0, sizeof lp);
        lp.kind = MTS_PROV_LUT;
        lp.lut = &lut;
        lp.threads = 2;
    }
    void TearDown() override { mts_lut_free(&lut); }
    uint32_t q(float x) const { return mts_fmt_quantize(&lut.fmt, mts_f2u(x), MTS_RNE); }
    // documented order: sequential FP32 sum from +0 of AMSim products
    float sum(const std::vector<std::pair<float, float>> &terms) const
    {
        float s = 0.0f;
        for (auto &t : terms) s += mts_u2f(mts_amsim(&lut, q(t.first), q(t.second)));
        return s;
    }
    // FMAq reference: quantized operands through mts_fmaq_dot
    float fsum(const mts_provider &p, const std::vector<std::pair<float, float>> &terms) const
    {
        std::vector<uint32_t> a, b;
        for (auto &t : terms) {
            a.push_back(q(t.first));
            b.push_back(q(t.second));
        }
        return mts_u2f(mts_fmaq_dot(&p.qprod, &p.qacc, p.chunk, &lutop, a.data(), b.data(), a.size(), 1));
    }
    float ref(const mts_provider &p, const std::vector<std::pair<float, float>> &t) const
    {
        return p.fmaq ? fsum(p, t) : sum(t);
    }
};


// got == want bit for bit; a mismatch reports the count and the first
// one, both values in hex.
void expect_bits(const char *what, const vecf &got, const vecf &want)
{
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); i++)
        if (mts_f2u(got[i]) != mts_f2u(want[i]) && !bad++) first = i;
    if (bad) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "%s: %zu of %zu differ, first index %zu: got 0x%08x, want 0x%08x", what, bad,
                      got.size(), first, (unsigned)mts_f2u(got[first]), (unsigned)mts_f2u(want[first]));
        ADD_FAILURE() << msg;
    }
}

mts_provider with_fmaq(mts_provider p)
{
    mts_err err;
    EXPECT_EQ(mts_qfmt_parse("M4E3", 5, &p.qacc, &err), MTS_OK);
    EXPECT_EQ(mts_qfmt_parse("M4E3", 5, &p.qprod, &err), MTS_OK);
    p.fmaq = 1;
    p.chunk = 4;
    return p;
}

void dense_bitexact(const NnLut &fx, const mts_provider &p)
{
    const int N = 3, in = 11, out = 6;
    vecf x = rnd(N * in, 31), w = rnd(out * in, 32), b = rnd(out, 33), dy = rnd(N * out, 34);
    mts_err err;
    vecf y(N * out), dx(N * in), dw(out * in), db(out);
    ASSERT_EQ(mts_dense_forward(NnCtx(&p, &p).get(), N, in, out, x.data(), w.data(), b.data(), y.data(), &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_dense_backward(NnCtx(&p, &p).get(), N, in, out, x.data(), w.data(), dy.data(), dx.data(),
                                 dw.data(), db.data(), &err),
              MTS_OK);
    vecf ry(N * out), rdx(N * in), rdw(out * in);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < out; o++) {
            std::vector<std::pair<float, float>> t;
            for (int i = 0; i < in; i++) t.push_back({x[n * in + i], w[o * in + i]}); // activation x weight
            ry[n * out + o] = fx.ref(p, t) + b[o];
        }
    for (int n = 0; n < N; n++)
        for (int i = 0; i < in; i++) {
            std::vector<std::pair<float, float>> t;
            for (int o = 0; o < out; o++) t.push_back({dy[n * out + o], w[o * in + i]}); // gradient x weight
            rdx[n * in + i] = fx.ref(p, t);
        }
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++) {
            std::vector<std::pair<float, float>> t;
            for (int n = 0; n < N; n++) t.push_back({dy[n * out + o], x[n * in + i]}); // gradient x activation
            rdw[o * in + i] = fx.ref(p, t);
        }
    expect_bits("dense y", y, ry);
    expect_bits("dense dx", dx, rdx);
    expect_bits("dense dw", dw, rdw);
}

// geo 1: a geometry whose batch runs in several sample chunks (78,400
// bytes of column matrix per sample, chunks of 6 samples: 6 + 6 + 1), the
// provider's threads running them side by side when it has more than one;
// its weight gradient in chunks of 3 samples (sums continued by
// mts_gemm_acc). geo 2: 16 channels of 24 x 24, 3 x 3 (331,776 bytes of
// column matrix per sample): the weight gradient in bands of output rows
// on one thread, in channel halves on two.
void conv_bitexact(const NnLut &fx, const mts_provider &p, int geo = 0)
{
    mts_conv_geom g = {};
    g.cin = 2, g.h = 5, g.w = 6, g.cout = 3, g.k = 3, g.stride = 2, g.pad = 1;
    if (geo == 1) g.cin = 1, g.h = 28, g.w = 28, g.k = 5, g.stride = 1, g.pad = 2;
    if (geo == 2) g.cin = 16, g.h = 24, g.w = 24, g.k = 3, g.stride = 1, g.pad = 1;
    mts_err err;
    ASSERT_EQ(mts_conv_geom_init(&g, &err), MTS_OK);
    const int N = geo == 1 ? 13 : 2, P = g.oh * g.ow, K = g.cin * g.k * g.k;
    vecf x = rnd((size_t)N * g.cin * g.h * g.w, 35), w = rnd((size_t)g.cout * K, 36), b = rnd(g.cout, 37),
         dy = rnd((size_t)N * g.cout * P, 38);
    vecf y(dy.size()), dx(x.size()), dw(w.size()), db(g.cout);
    ASSERT_EQ(mts_conv2d_forward(NnCtx(&p, &p).get(), &g, N, x.data(), w.data(), b.data(), y.data(), &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_conv2d_backward(NnCtx(&p, &p).get(), &g, N, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(), &err),
              MTS_OK);
    // the tap (r = (ci,ky,kx)) of output position (n, oy, ox): zero when it falls in the padding
    auto tap = [&](int n, int r, int q) {
        int ci = r / (g.k * g.k), ky = r / g.k % g.k, kx = r % g.k, oy = q / g.ow, ox = q % g.ow;
        int iy = oy * g.stride - g.pad + ky, ix = ox * g.stride - g.pad + kx;
        if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return 0.0f;
        return x[(((size_t)n * g.cin + ci) * g.h + iy) * g.w + ix];
    };
    vecf ry(y.size()), rdw(dw.size()), rdx(dx.size(), 0.0f);
    for (int n = 0; n < N; n++)
        for (int co = 0; co < g.cout; co++)
            for (int q = 0; q < P; q++) {
                std::vector<std::pair<float, float>> t;
                for (int r = 0; r < K; r++) t.push_back({tap(n, r, q), w[(size_t)co * K + r]});
                ry[((size_t)n * g.cout + co) * P + q] = fx.ref(p, t) + b[co];
            }
    for (int co = 0; co < g.cout; co++)
        for (int r = 0; r < K; r++) {
            std::vector<std::pair<float, float>> t;
            for (int n = 0; n < N; n++)
                for (int q = 0; q < P; q++) t.push_back({dy[((size_t)n * g.cout + co) * P + q], tap(n, r, q)});
            rdw[(size_t)co * K + r] = fx.ref(p, t);
        }
    // input gradient: per tap a GEMM dot over cout, then col2im in (n, ci, ky, kx, oy, ox) order
    for (int n = 0; n < N; n++)
        for (int r = 0; r < K; r++) {
            int ci = r / (g.k * g.k), ky = r / g.k % g.k, kx = r % g.k;
            for (int q = 0; q < P; q++) {
                int iy = q / g.ow * g.stride - g.pad + ky, ix = q % g.ow * g.stride - g.pad + kx;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                std::vector<std::pair<float, float>> t;
                for (int co = 0; co < g.cout; co++) t.push_back({dy[((size_t)n * g.cout + co) * P + q], w[(size_t)co * K + r]});
                rdx[(((size_t)n * g.cin + ci) * g.h + iy) * g.w + ix] += fx.ref(p, t);
            }
        }
    expect_bits("conv y", y, ry);
    expect_bits("conv dw", dw, rdw);
    expect_bits("conv dx", dx, rdx);
}

void matmul_bitexact(const NnLut &fx, const mts_provider &p)
{
    const int N = 2, m = 3, k = 5, q = 4;
    vecf a = rnd((size_t)N * m * k, 39), b = rnd((size_t)N * k * q, 40), dc = rnd((size_t)N * m * q, 41);
    vecf c(dc.size()), da(a.size()), db(b.size());
    mts_err err;
    ASSERT_EQ(mts_matmul_forward(NnCtx(&p, &p).get(), N, m, k, q, a.data(), b.data(), c.data(), &err), MTS_OK);
    ASSERT_EQ(mts_matmul_backward(NnCtx(&p, &p).get(), N, m, k, q, a.data(), b.data(), dc.data(), da.data(), db.data(), &err), MTS_OK);
    vecf rc(c.size()), rda(da.size()), rdb(db.size());
    for (int n = 0; n < N; n++) {
        const float *an = &a[(size_t)n * m * k], *bn = &b[(size_t)n * k * q], *dn = &dc[(size_t)n * m * q];
        for (int i = 0; i < m; i++)
            for (int j = 0; j < q; j++) {
                std::vector<std::pair<float, float>> t;
                for (int s = 0; s < k; s++) t.push_back({an[i * k + s], bn[s * q + j]});
                rc[(size_t)n * m * q + i * q + j] = fx.ref(p, t);
            }
        for (int i = 0; i < m; i++)
            for (int s = 0; s < k; s++) {
                std::vector<std::pair<float, float>> t;
                for (int j = 0; j < q; j++) t.push_back({dn[i * q + j], bn[s * q + j]});
                rda[(size_t)n * m * k + i * k + s] = fx.ref(p, t);
            }
        for (int s = 0; s < k; s++)
            for (int j = 0; j < q; j++) {
                std::vector<std::pair<float, float>> t;
                for (int i = 0; i < m; i++) t.push_back({an[i * k + s], dn[i * q + j]});
                rdb[(size_t)n * k * q + s * q + j] = fx.ref(p, t);
            }
    }
    expect_bits("matmul c", c, rc);
    expect_bits("matmul da", da, rda);
    expect_bits("matmul db", db, rdb);
}

// The fast BatchNorm forms (eight chunks of the blocked order side by side
// where planes hold whole chunks) against the readable references, bit for
// bit: planes of 64, 256 and 1024 (whole chunks; chunk counts that leave a
// remainder of one to seven), 49 and 100 (term by term), values spread over
// 2^-30..2^10 and per channel a pair of terms +-2^60 in x, +-2^30 in dy
// and 2^30 in xhat (products +-2^60) whose cancellation makes any other
// summation order change bits, zeros of both signs, a
// channel with an inf and a NaN; training and evaluation, with and without
// xhat and dx.
TEST(NnBn, FastFormsEqualReference)
{
    const int shapes[][3] = {{13, 3, 64}, {4, 2, 256}, {3, 2, 1024}, {5, 2, 49}, {2, 3, 100}, {9, 1, 64}};
    uint64_t s = 4242;
    for (auto &sh : shapes) {
        int N = sh[0], C = sh[1], HW = sh[2];
        size_t sz = (size_t)N * C * HW;
        vecf x(sz), dy(sz), hx = rnd(sz, 53, -3.0f, 3.0f), gam = rnd(C, 51, 0.5f, 1.5f), bet = rnd(C, 52);
        for (size_t i = 0; i < sz; i++) {
            x[i] = std::ldexp((float)(splitmix64(&s) >> 40) / 16777216.0f - 0.5f, (int)(splitmix64(&s) % 41) - 30);
            dy[i] = std::ldexp((float)(splitmix64(&s) >> 40) / 16777216.0f - 0.5f, (int)(splitmix64(&s) % 41) - 20);
            if (splitmix64(&s) % 50 == 0) x[i] = (i & 1) ? -0.0f : 0.0f;
        }
        // per channel a term of 2^60 early and one of -2^60 half-way: where
        // the two meet in the sum decides which terms are absorbed at the
        // 2^8 granularity of 2^60, so another order changes the result
        for (int c = 0; c < C; c++) {
            size_t first = (size_t)c * HW + 1, mid = ((size_t)(N / 2) * C + c) * HW + (size_t)HW / 2 + 3;
            x[first] = 0x1p60f, x[mid] = -0x1p60f;
            dy[first] = 0x1p30f, dy[mid] = -0x1p30f;
            hx[first] = hx[mid] = 0x1p30f; // dy * xhat: 2^60 and -2^60
        }
        if (C > 2) { // one channel with an inf and a NaN
            x[(size_t)2 * HW + 3] = INFINITY;
            dy[(size_t)2 * HW + 5] = NAN;
        }
        for (int train : {1, 0})
            for (int keep : {1, 0}) {
                SCOPED_TRACE(testing::Message() << "N " << N << " C " << C << " HW " << HW << " train " << train
                                                << " keep " << keep);
                vecf y[2], h[2], is[2], rm[2], rv[2], dx[2], dg[2], db[2];
                for (int f = 0; f < 2; f++) {
                    y[f].assign(sz, 7.0f), h[f].assign(sz, 7.0f), is[f].assign(C, 7.0f);
                    rm[f].assign(C, 0.25f), rv[f].assign(C, 1.5f), dx[f].assign(sz, 7.0f);
                    dg[f].assign(C, 7.0f), db[f].assign(C, 7.0f);
                    auto fwd = f ? mts_bn_forward : mts_bn_forward_ref;
                    auto bwd = f ? mts_bn_backward : mts_bn_backward_ref;
                    fwd(train, N, C, HW, x.data(), gam.data(), bet.data(), rm[f].data(), rv[f].data(), 0.1f, 1e-5f,
                        y[f].data(), keep ? h[f].data() : NULL, is[f].data());
                    if (keep) // a given xhat, with its own cancelling pair
                        bwd(N, C, HW, dy.data(), gam.data(), hx.data(), is[f].data(), dx[f].data(), dg[f].data(),
                            db[f].data());
                    else // the sums alone
                        bwd(N, C, HW, dy.data(), gam.data(), y[f].data(), is[f].data(), NULL, dg[f].data(),
                            db[f].data());
                }
                expect_bits("bn y", y[1], y[0]);
                expect_bits("bn xhat", h[1], h[0]);
                expect_bits("bn invstd", is[1], is[0]);
                expect_bits("bn running mean", rm[1], rm[0]);
                expect_bits("bn running var", rv[1], rv[0]);
                expect_bits("bn dx", dx[1], dx[0]);
                expect_bits("bn dgamma", dg[1], dg[0]);
                expect_bits("bn dbeta", db[1], db[0]);
                // NaN outputs are fmath.h's canonical NaN (two NaNs of different
                // signs meet in the channel with an inf: which one an instruction
                // passes on is the compiler's choice otherwise)
                int nans = 0;
                for (const vecf *v : {&y[1], &h[1], &dx[1], &dg[1], &db[1]})
                    for (float f : *v)
                        if (f != f) {
                            nans++;
                            EXPECT_EQ(mts_f2u(f), 0x7FC00000u) << "a BatchNorm NaN output is not canonical";
                        }
                if (C > 2 && train) {
                    EXPECT_GT(nans, 0) << "the inf / NaN channel gives NaN outputs";
                }
            }
    }
}

// The forms mts_net_forward / backward use (bn.c): xhat recomputed from the
// input and the kept mean instead of stored, and a BN writing its ReLU's
// output and taking its ReLU's backward (ry), on 1 and 2 threads, against
// the references composed with the ReLU's own ops (relu_forward; relu
// backward with pz, as the net's driver runs it), bit for bit, on data like
// the test above's (the +-2^60 pairs, zeros of both signs, an inf and a
// NaN), where the ReLU sees outputs of both signs and exact zeros.
TEST(NnBn, NetFormsEqualReference)
{
    const int shapes[][3] = {{13, 3, 64}, {4, 2, 256}, {3, 2, 1024}, {5, 2, 49}, {2, 3, 100}, {9, 1, 64},
                             {40, 2, 1024}}; // the last: 2^16 elements and more, so two threads split it
    uint64_t s = 777;
    for (auto &sh : shapes) {
        int N = sh[0], C = sh[1], HW = sh[2];
        size_t sz = (size_t)N * C * HW;
        vecf x(sz), dy(sz), gam = rnd(C, 61, 0.5f, 1.5f), bet = rnd(C, 62, -0.5f, 0.5f);
        for (size_t i = 0; i < sz; i++) {
            x[i] = std::ldexp((float)(splitmix64(&s) >> 40) / 16777216.0f - 0.5f, (int)(splitmix64(&s) % 21) - 10);
            dy[i] = std::ldexp((float)(splitmix64(&s) >> 40) / 16777216.0f - 0.5f, (int)(splitmix64(&s) % 41) - 20);
            if (splitmix64(&s) % 50 == 0) x[i] = (i & 1) ? -0.0f : 0.0f;
            if (splitmix64(&s) % 40 == 0) dy[i] = (i & 2) ? -0.0f : 0.0f;
        }
        for (int c = 0; c < C; c++) {
            size_t first = (size_t)c * HW + 1, mid = ((size_t)(N / 2) * C + c) * HW + (size_t)HW / 2 + 3;
            x[first] = 0x1p60f, x[mid] = -0x1p60f;
            dy[first] = 0x1p30f, dy[mid] = -0x1p30f;
        }
        if (C > 2) { // one channel with an inf and a NaN
            x[(size_t)2 * HW + 3] = INFINITY;
            dy[(size_t)2 * HW + 5] = NAN;
        }
        if (C > 1) {
            // channel 0: every dy -0, so the ReLU backward's +0 + dy shows in dx;
            // the last channel: x constant (xhat +0), gamma -1 and beta -0, so
            // every BN output is -0, which the ReLU makes +0
            for (int n = 0; n < N; n++)
                for (int i = 0; i < HW; i++) {
                    dy[(size_t)n * C * HW + i] = -0.0f;
                    x[((size_t)n * C + C - 1) * HW + i] = 0.5f;
                }
            gam[C - 1] = -1.0f, bet[C - 1] = -0.0f;
        }
        for (int train : {1, 0}) {
            // the references: y, xhat, invstd; the ReLU of y; the BN's gradient
            // through the ReLU as the driver forms it (pz: +0 + dy where y > 0)
            vecf y(sz), h(sz), is(C), rm(C, 0.25f), rv(C, 1.5f), ry(sz), dr(sz);
            mts_bn_forward_ref(train, N, C, HW, x.data(), gam.data(), bet.data(), rm.data(), rv.data(), 0.1f, 1e-5f,
                               y.data(), h.data(), is.data());
            mts_relu_forward(sz, y.data(), ry.data());
            for (size_t i = 0; i < sz; i++) dr[i] = ry[i] > 0.0f ? 0.0f + dy[i] : 0.0f;
            for (int threads : {1, 2}) {
                SCOPED_TRACE(testing::Message() << "N " << N << " C " << C << " HW " << HW << " train " << train
                                                << " threads " << threads);
                for (int relu : {0, 1}) {
                    vecf fy(sz, 7.0f), fis(C, 7.0f), fm(C, 7.0f), frm(C, 0.25f), frv(C, 1.5f);
                    mts__bn_forward_t(threads, train, relu, N, C, HW, x.data(), gam.data(), bet.data(), frm.data(),
                                      frv.data(), 0.1f, 1e-5f, fy.data(), NULL, fis.data(), fm.data());
                    expect_bits(relu ? "bn + relu y" : "bn y", fy, relu ? ry : y);
                    expect_bits("bn invstd", fis, is);
                    expect_bits("bn running mean", frm, rm);
                    expect_bits("bn running var", frv, rv);
                    if (!train) continue; // a backward follows a training forward
                    for (int pz : {0, 1}) {
                        const vecf &g = relu ? dr : dy;
                        vecf rdx(sz), rdg(C), rdb(C), dx(sz, 7.0f), dg(C, 7.0f), db(C, 7.0f);
                        mts_bn_backward_ref(N, C, HW, g.data(), gam.data(), h.data(), is.data(), rdx.data(), rdg.data(),
                                            rdb.data());
                        if (pz)
                            for (auto &v : rdx) v = 0.0f + v;
                        mts__bn_backward_t(threads, N, C, HW, dy.data(), relu ? ry.data() : NULL, gam.data(), NULL,
                                           x.data(), fm.data(), fis.data(), dx.data(), dg.data(), db.data(), pz);
                        expect_bits(relu ? "bn + relu dx" : "bn dx (xhat from x)", dx, rdx);
                        expect_bits("bn dgamma", dg, rdg);
                        expect_bits("bn dbeta", db, rdb);
                    }
                }
            }
        }
    }
}

// mts_net_build pairs a BN, or a residual add, with the ReLU that is its only
// reader; a BN read by an add, a ReLU read twice, a BN read by a ReLU and an
// add, and an add read by global pooling stay apart. The add at node 10 has
// a first input (node 9) that a later add also reads, so its backward takes
// the paired form's other branch (its input's gradient not written first).
// The paired net gives the unpaired one's every bit (its output, every
// gradient, the running statistics) through two SGD steps, on 1 and 2
// threads; 64 x 8 x 16 x 16 activations, so two threads split the passes.
TEST(NnBn, NetPairsWithTheirRelusBitExact)
{
    auto build = [](mts_net *net) {
        mts_err err;
        ASSERT_EQ(mts_net_init(net, "relupairs", 3, 16, 16, &err), MTS_OK);
        ASSERT_GT(mts_net_conv(net, 8, 3, 1, 1, &err), 0);  // 1
        ASSERT_GT(mts_net_bn(net, &err), 0);                 // 2: paired with 3
        int r0 = mts_net_relu(net, &err);                    // 3
        ASSERT_GT(r0, 0);
        ASSERT_GT(mts_net_conv(net, 8, 3, 1, 1, &err), 0);   // 4
        ASSERT_GT(mts_net_bn(net, &err), 0);                 // 5: read by an add
        ASSERT_GT(mts_net_add(net, r0, &err), 0) << err.msg; // 6: paired with 7
        ASSERT_GT(mts_net_relu(net, &err), 0);               // 7
        int b2 = mts_net_bn(net, &err);                      // 8: read by a ReLU and an add
        ASSERT_GT(b2, 0);
        int r9 = mts_net_relu(net, &err);                    // 9: read by two adds
        ASSERT_GT(r9, 0);
        ASSERT_GT(mts_net_add(net, b2, &err), 0) << err.msg; // 10: add(9, 8), paired with 11
        ASSERT_GT(mts_net_relu(net, &err), 0);               // 11
        ASSERT_GT(mts_net_add(net, r9, &err), 0) << err.msg; // 12: add(11, 9), read by the pooling
        ASSERT_GT(mts_net_gap(net, &err), 0);
        ASSERT_GT(mts_net_dense(net, 5, &err), 0);
        ASSERT_EQ(mts_net_build(net, 64, 11, &err), MTS_OK) << err.msg;
    };
    mts_net net[2];
    build(&net[0]);
    build(&net[1]);
    if (HasFatalFailure()) return;
    for (int i = 0; i < net[0].n; i++) {
        const mts_layer &l = net[0].l[i];
        int want = i == 2 ? 3 : i == 6 ? 7 : i == 10 ? 11 : i == 3 || i == 7 || i == 11 ? 1 : 0;
        EXPECT_EQ(l.fused, want) << "node " << i << " (kind " << l.kind << ")";
        net[1].l[i].fused = 0; // the unpaired net: every op on its own
    }
    const int N = 64;
    vecf x = rnd((size_t)N * 3 * 16 * 16, 91, -2.0f, 2.0f);
    std::vector<uint8_t> lab(N);
    for (int n = 0; n < N; n++) lab[n] = (uint8_t)(n % 5);
    for (int threads : {1, 2}) {
        mts_provider p = native_prov();
        p.threads = threads;
        for (int step = 0; step < 2; step++) {
            vecf out[2], grad[2], state[2];
            for (int k = 0; k < 2; k++) {
                mts_err err;
                ASSERT_EQ(mts_net_forward(&net[k], NnCtx(&p, &p).get(), 1, N, x.data(), &err), MTS_OK) << err.msg;
                vecf dl((size_t)N * 5);
                mts_softmax_ce(N, 5, mts_net_output(&net[k]), lab.data(), dl.data(), nullptr);
                ASSERT_EQ(mts_net_backward(&net[k], NnCtx(&p, &p).get(), N, x.data(), dl.data(), &err), MTS_OK);
                out[k].assign(mts_net_output(&net[k]), mts_net_output(&net[k]) + (size_t)N * 5);
                grad[k].assign(net[k].grad, net[k].grad + net[k].nparam);
                state[k].assign(net[k].state, net[k].state + net[k].nstate);
                for (size_t i = 0; i < net[k].nparam; i++) net[k].param[i] -= 0.1f * net[k].grad[i];
            }
            SCOPED_TRACE(testing::Message() << "threads " << threads << " step " << step);
            expect_bits("output", out[0], out[1]);
            expect_bits("gradients", grad[0], grad[1]);
            expect_bits("running statistics", state[0], state[1]);
        }
    }
    mts_net_free(&net[0]);
    mts_net_free(&net[1]);
}

// The residual add paired with its ReLU (act.c) against the ops it replaces,
// bit for bit: forward mts__add_t then mts__relu_forward_t; backward the
// ReLU's backward with pz into the add's gradient, mts__copy_pz_t for the
// first input and the second input's first contribution (zeroed, then
// mts__acc_t) or a later one (mts__acc_t). Signed zeros (+0 + -0 and -0 +
// -0 tell the +0 rules apart), inf - inf, NaNs of both signs; 1 and 2
// threads over 70,001 elements.
TEST(NnAct, AddReluPairEqualsTheOps)
{
    const size_t n = 70001;
    uint64_t s = 4711;
    auto pick = [&](float base) {
        switch (splitmix64(&s) % 12) {
        case 0: return 0.0f;
        case 1: return -0.0f;
        case 2: return INFINITY;
        case 3: return -INFINITY;
        case 4: return NAN;
        case 5: return -NAN;
        default: return base;
        }
    };
    vecf a(n), b(n), dy(n), sc0(n), ry(n);
    vecf ra = rnd(n, 81), rb = rnd(n, 82), rd = rnd(n, 83), rs = rnd(n, 84);
    for (size_t i = 0; i < n; i++) a[i] = pick(ra[i]), b[i] = pick(rb[i]), dy[i] = pick(rd[i]), sc0[i] = pick(rs[i]);
    for (int threads : {1, 2}) {
        SCOPED_TRACE(threads);
        vecf sum(n), want(n, 7.0f), got(n, 7.0f);
        mts__add_t(threads, n, a.data(), b.data(), sum.data());
        mts__relu_forward_t(threads, n, sum.data(), want.data());
        mts__add_relu_t(threads, n, a.data(), b.data(), got.data());
        expect_bits("add + relu forward", got, want);
        ry = want;
        for (int first : {1, 0}) {
            vecf g(n), dx_want(n), sc_want = sc0, dx(n, 7.0f), sc = sc0;
            mts__relu_backward_t(threads, n, ry.data(), dy.data(), g.data(), 1);
            mts__copy_pz_t(threads, n, g.data(), dx_want.data());
            if (first) std::fill(sc_want.begin(), sc_want.end(), 0.0f);
            mts__acc_t(threads, n, sc_want.data(), g.data());
            mts__add_relu_backward_t(threads, n, ry.data(), dy.data(), dx.data(), sc.data(), first);
            expect_bits("add + relu backward: first input", dx, dx_want);
            expect_bits(first ? "add + relu backward: second input, first" : "add + relu backward: second input", sc,
                        sc_want);
        }
    }
}

TEST_F(NnLut, DenseBitExactLut) { dense_bitexact(*this, lp); }
TEST_F(NnLut, ConvBitExactLut) { conv_bitexact(*this, lp); }
TEST_F(NnLut, MatMulBitExactLut) { matmul_bitexact(*this, lp); }
TEST_F(NnLut, DenseBitExactFmaq) { dense_bitexact(*this, with_fmaq(lp)); }
TEST_F(NnLut, ConvBitExactFmaq) { conv_bitexact(*this, with_fmaq(lp)); }
TEST_F(NnLut, ConvInSampleChunksBitExact)
{
    for (int threads : {1, 2}) {
        mts_provider p = lp;
        p.threads = threads;
        SCOPED_TRACE(threads);
        conv_bitexact(*this, p, 1);
        conv_bitexact(*this, with_fmaq(p), 1);
    }
}
// 16 input channels: the LUT's weight gradient in bands of rows, one thread
// (or channel halves at two) going on from its own sums; with FMAq (sums
// that cannot be continued) one whole-batch GEMM, or at two threads one per
// half of the channels, each its own column matrix (conv_wgrad, wgrad_range_whole)
TEST_F(NnLut, ConvWeightGradientInBandsBitExact)
{
    for (int threads : {1, 2}) {
        mts_provider p = lp;
        p.threads = threads;
        SCOPED_TRACE(threads);
        conv_bitexact(*this, p, 2);
        conv_bitexact(*this, with_fmaq(p), 2);
    }
}
TEST_F(NnLut, MatMulBitExactFmaq) { matmul_bitexact(*this, with_fmaq(lp)); }

// The reference itself must disagree with plain FP32 somewhere, or the
// bit-exact tests above could not tell a LUT from the native multiply.
TEST_F(NnLut, LutDiffersFromNative)
{
    vecf x = rnd(64, 42), w = rnd(64, 43);
    int diff = 0;
    for (int i = 0; i < 64; i++) diff += mts_amsim(&lut, q(x[i]), q(w[i])) != mts_f2u(x[i] * w[i]);
    EXPECT_GT(diff, 10);
}

// ---------------------------------------------------------------------------
// FMAq STE (accumulator paper, appendix D)

mts_provider fmaq_native(const char *acc, int bias, int chunk, int uf = 1)
{
    mts_provider p = native_prov();
    mts_err err;
    EXPECT_EQ(mts_qfmt_parse(acc, bias, &p.qacc, &err), MTS_OK);
    EXPECT_EQ(mts_qfmt_parse(acc, bias, &p.qprod, &err), MTS_OK);
    p.qacc.underflow = p.qprod.underflow = uf;
    p.fmaq = 1;
    p.chunk = chunk;
    return p;
}

std::vector<int> mask_of(const mts_provider &p, mts_ste ste, const vecf &x, const vecf &w)
{
    std::vector<uint8_t> m(x.size(), 7);
    mts_ste_mask(&p, ste, x.data(), w.data(), x.size(), 1, m.data());
    return std::vector<int>(m.begin(), m.end());
}

TEST(NnSte, OverflowMasksRecursiveVersusImmediate)
{
    // M4E3, bias 5: R_OF = 2^2 * (2 - 1/16) = 7.75; one chunk
    mts_provider p = fmaq_native("M4E3", 5, 16);
    vecf x = {4, 4, -4, 1}, w = {1, 1, 1, 1};
    // step 1 overflows (4 + 4 >= 7.75): Immediate zeroes only it, Recursive
    // also every term it absorbed (step 0)
    EXPECT_EQ(mask_of(p, MTS_STE_IMM_OF, x, w), (std::vector<int>{1, 0, 1, 1}));
    EXPECT_EQ(mask_of(p, MTS_STE_REC_OF, x, w), (std::vector<int>{0, 0, 1, 1}));
    EXPECT_EQ(mask_of(p, MTS_STE_IDENTITY, x, w), (std::vector<int>{1, 1, 1, 1}));
}

TEST(NnSte, RecursiveSecondLevelOverflowKillsEarlierChunks)
{
    mts_provider p = fmaq_native("M4E3", 5, 2);
    // chunks {3,1}=4, {3,1}=4, {-1,0.5}: second-level 4+4 overflows -> chunks 0 and 1 dead
    vecf x = {3, 1, 3, 1, -1, 0.5f}, w(6, 1.0f);
    EXPECT_EQ(mask_of(p, MTS_STE_REC_OF, x, w), (std::vector<int>{0, 0, 0, 0, 1, 1}));
    EXPECT_EQ(mask_of(p, MTS_STE_IMM_OF, x, w), (std::vector<int>{1, 1, 1, 1, 1, 1}));
}

TEST(NnSte, DiffCatchesSwampingAndUnderflow)
{
    mts_provider p = fmaq_native("M4E3", 5, 16);
    // 4 + 0.1: the accumulator's spacing at 4 is 0.25, RTZ keeps 4: fully swamped
    vecf x = {4, 0.1f, 0.5f}, w = {1, 1, 1};
    EXPECT_EQ(mask_of(p, MTS_STE_IMM_DIFF, x, w), (std::vector<int>{1, 0, 1}));
    // a product below R_UF = 2^-5 vanishes with underflow on, survives without
    vecf xs = {0.01f, 0.01f}, ws = {1, 1};
    EXPECT_EQ(mask_of(p, MTS_STE_IMM_DIFF, xs, ws), (std::vector<int>{0, 0}));
    mts_provider pn = fmaq_native("M4E3", 5, 16, 0);
    EXPECT_EQ(mask_of(pn, MTS_STE_IMM_DIFF, xs, ws), (std::vector<int>{1, 1}));
}

TEST_F(NnLut, SteRecomputationEqualsForward)
{
    const int N = 4, in = 37, out = 5;
    vecf x = rnd(N * in, 50, -2, 2), w = rnd(out * in, 51, -2, 2), y(N * out);
    mts_err err;
    for (mts_provider p : {with_fmaq(lp), fmaq_native("M4E3", 3, 16)}) {
        ASSERT_EQ(mts_dense_forward(NnCtx(&p, &p).get(), N, in, out, x.data(), w.data(), nullptr, y.data(), &err), MTS_OK);
        for (mts_ste ste : {MTS_STE_IDENTITY, MTS_STE_REC_OF, MTS_STE_IMM_OF, MTS_STE_IMM_DIFF})
            for (int n = 0; n < N; n++)
                for (int o = 0; o < out; o++) {
                    std::vector<uint8_t> m(in);
                    uint32_t r = mts_ste_mask(&p, ste, &x[n * in], &w[o * in], in, 1, m.data());
                    EXPECT_EQ(r, mts_f2u(y[n * out + o])) << "ste " << mts_ste_name(ste) << " output " << n << "," << o;
                }
    }
}

TEST(NnSte, MaskedDenseBackwardMatchesReference)
{
    const int N = 3, in = 20, out = 4;
    // large values and a tight accumulator so that overflow and swamping occur
    vecf x = rnd(N * in, 60, 0, 3), w = rnd(out * in, 61, -1, 2), dy = rnd(N * out, 62);
    mts_provider f = fmaq_native("M4E3", 5, 8), b = native_prov();
    mts_err err;
    for (mts_ste ste : {MTS_STE_REC_OF, MTS_STE_IMM_OF, MTS_STE_IMM_DIFF}) {
        vecf dx(N * in), dw(out * in), db(out);
        ASSERT_EQ(mts_dense_backward(NnCtx(&f, &b, ste).get(), N, in, out, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                                     db.data(), &err),
                  MTS_OK);
        std::vector<uint8_t> m((size_t)N * out * in);
        int zeros = 0;
        for (int n = 0; n < N; n++)
            for (int o = 0; o < out; o++) mts_ste_mask(&f, ste, &x[n * in], &w[o * in], in, 1, &m[((size_t)n * out + o) * in]);
        for (auto v : m) zeros += v == 0;
        EXPECT_GT(zeros, 0) << mts_ste_name(ste) << ": the test data must trigger the STE";
        vecf rdx(N * in), rdw(out * in);
        for (int n = 0; n < N; n++)
            for (int i = 0; i < in; i++) {
                float s = 0;
                for (int o = 0; o < out; o++) s += dy[n * out + o] * (m[((size_t)n * out + o) * in + i] ? w[o * in + i] : 0.0f);
                rdx[n * in + i] = s;
            }
        for (int o = 0; o < out; o++)
            for (int i = 0; i < in; i++) {
                float s = 0;
                for (int n = 0; n < N; n++) s += dy[n * out + o] * (m[((size_t)n * out + o) * in + i] ? x[n * in + i] : 0.0f);
                rdw[o * in + i] = s;
            }
        expect_bits("masked dx", dx, rdx);
        expect_bits("masked dw", dw, rdw);
    }
}

TEST(NnSte, WideAccumulatorMasksEqualIdentity)
{
    // no overflow possible: OF estimators must reduce to the identity backward
    const int N = 2, in = 9, out = 3;
    vecf x = rnd(N * in, 70), w = rnd(out * in, 71), dy = rnd(N * out, 72);
    mts_provider f = fmaq_native("M10E5", -1, 4), b = native_prov();
    mts_err err;
    vecf dx0(N * in), dw0(out * in), dx1(N * in), dw1(out * in);
    ASSERT_EQ(mts_dense_backward(NnCtx(&f, &b).get(), N, in, out, x.data(), w.data(), dy.data(), dx0.data(),
                                 dw0.data(), nullptr, &err),
              MTS_OK);
    for (mts_ste ste : {MTS_STE_REC_OF, MTS_STE_IMM_OF}) {
        ASSERT_EQ(mts_dense_backward(NnCtx(&f, &b, ste).get(), N, in, out, x.data(), w.data(), dy.data(), dx1.data(), dw1.data(),
                                     nullptr, &err),
                  MTS_OK);
        expect_bits("dx", dx1, dx0);
        expect_bits("dw", dw1, dw0);
    }
}

TEST(NnSte, Parse)
{
    mts_ste s;
    mts_err err;
    EXPECT_EQ(mts_ste_parse("rec-of", &s, &err), MTS_OK);
    EXPECT_EQ(s, MTS_STE_REC_OF);
    EXPECT_EQ(mts_ste_parse("immediate/diff", &s, &err), MTS_OK);
    EXPECT_EQ(s, MTS_STE_IMM_DIFF);
    EXPECT_NE(mts_ste_parse("bogus", &s, &err), MTS_OK);
    EXPECT_NE(std::string(err.msg).find("imm-diff"), std::string::npos);
}

} // namespace
