// test_nn_attn.cpp - the transformer ops and per-layer multipliers (issue 18):
//  - finite-difference gradient checks of LayerNorm, GELU, row softmax, the
//    attention scores and output, patch tokens, the position embedding with
//    a class token and token pooling, against float64 re-implementations;
//    and of a whole small ViT (the net's wiring of the six attention GEMMs);
//  - LUT and FMAq mode: the attention ops' forward and gradients equal, bit
//    for bit, a naive reference that forms every product with the scalar
//    provider contract (mts_prov_mul: quantize, then AMSim) and every sum in
//    the documented order (FP32 sequential; FMAq through mts_fmaq_dot);
//  - vit-tiny and resnet18 shapes; a short vit-tiny run is the same for any
//    thread count; --mul-layer pattern matching, --list-layers, and the rules
//    recorded in checkpoints and JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

extern "C" {
#include "mantis/fmaq.h"
#include "mantis/fmath.h"
#include "mantis/fpbits.h"
#include "mantis/nn.h"
}
#include "test_nn_ctx.h"
#include "test_util.h"

namespace {

using vecf = std::vector<float>;
using vecd = std::vector<double>;
using fwd_fn = std::function<vecd(const vecd &)>;

vecd D(const vecf &v) { return vecd(v.begin(), v.end()); }

// L(v) = sum_i r_i f(v)_i; the op's analytic gradient g (from dy = r) must
// match the central difference of L in double at every (or a sample of) index.
void grad_check(const char *what, const fwd_fn &f, const vecf &v, const vecf &r, const vecf &g, double tol = 2e-3)
{
    ASSERT_EQ(v.size(), g.size()) << what;
    vecd x = D(v), R = D(r);
    auto L = [&](const vecd &a) {
        vecd y = f(a);
        double s = 0;
        for (size_t i = 0; i < y.size(); i++) s += y[i] * R[i];
        return s;
    };
    size_t step = x.size() > 96 ? x.size() / 96 : 1;
    for (size_t i = 0; i < x.size(); i += step) {
        double h = 1e-6 * std::max(1.0, std::fabs(x[i])), o = x[i];
        x[i] = o + h;
        double fp = L(x);
        x[i] = o - h;
        double fm = L(x);
        x[i] = o;
        double num = (fp - fm) / (2 * h);
        EXPECT_NEAR(g[i], num, tol + tol * std::fabs(num)) << what << " index " << i;
    }
}

void near(const char *what, const vecf &y, const vecd &ref)
{
    ASSERT_EQ(y.size(), ref.size());
    for (size_t i = 0; i < y.size(); i++) EXPECT_NEAR(y[i], ref[i], 1e-4 + 1e-4 * std::fabs(ref[i])) << what << " " << i;
}

// --------------------------------------------------- float64 references

vecd ln_ref(int R, int Dm, const vecd &x, const vecd &g, const vecd &b)
{
    vecd y(x.size());
    for (int r = 0; r < R; r++) {
        double m = 0, v = 0;
        for (int d = 0; d < Dm; d++) m += x[r * Dm + d] / Dm;
        for (int d = 0; d < Dm; d++) v += (x[r * Dm + d] - m) * (x[r * Dm + d] - m) / Dm;
        for (int d = 0; d < Dm; d++) y[r * Dm + d] = (x[r * Dm + d] - m) / std::sqrt(v + 1e-5) * g[d] + b[d];
    }
    return y;
}

vecd gelu_ref(const vecd &x)
{
    vecd y(x.size());
    for (size_t i = 0; i < x.size(); i++)
        y[i] = 0.5 * x[i] * (1 + std::tanh(std::sqrt(2 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
    return y;
}

vecd softmax_ref(int R, int W, const vecd &x)
{
    vecd y(x.size());
    for (int r = 0; r < R; r++) {
        double s = 0;
        for (int j = 0; j < W; j++) s += std::exp(x[r * W + j]);
        for (int j = 0; j < W; j++) y[r * W + j] = std::exp(x[r * W + j]) / s;
    }
    return y;
}

// qkv[n][t][3D]: Q at column c, K at D + c, V at 2D + c (c = h*dh + j)
double qkv_at(const vecd &qkv, int T, int Dm, int n, int t, int part, int c)
{
    return qkv[((size_t)n * T + t) * 3 * Dm + part * Dm + c];
}

vecd qk_ref(int N, int T, int H, int dh, double scale, const vecd &qkv)
{
    int Dm = H * dh;
    vecd s((size_t)N * H * T * T);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int u = 0; u < T; u++) {
                    double a = 0;
                    for (int j = 0; j < dh; j++)
                        a += qkv_at(qkv, T, Dm, n, t, 0, h * dh + j) * qkv_at(qkv, T, Dm, n, u, 1, h * dh + j);
                    s[(((size_t)n * H + h) * T + t) * T + u] = scale * a;
                }
    return s;
}

vecd av_ref(int N, int T, int H, int dh, const vecd &a, const vecd &qkv)
{
    int Dm = H * dh;
    vecd y((size_t)N * T * Dm);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < dh; j++) {
                    double s = 0;
                    for (int u = 0; u < T; u++)
                        s += a[(((size_t)n * H + h) * T + t) * T + u] * qkv_at(qkv, T, Dm, n, u, 2, h * dh + j);
                    y[((size_t)n * T + t) * Dm + h * dh + j] = s;
                }
    return y;
}

// ------------------------------------------------------------ gradients

TEST(NnAttnGrad, LayerNorm)
{
    const int R = 5, Dm = 7;
    vecf x = rnd(R * Dm, 1, -2, 2), g = rnd(Dm, 2, 0.5f, 1.5f), b = rnd(Dm, 3), r = rnd(R * Dm, 4);
    vecf y(x.size()), xh(x.size()), is(R), dx(x.size()), dg(Dm), db(Dm);
    mts_layernorm_forward(R, Dm, x.data(), g.data(), b.data(), 1e-5f, y.data(), xh.data(), is.data());
    near("ln y", y, ln_ref(R, Dm, D(x), D(g), D(b)));
    mts_layernorm_backward(R, Dm, r.data(), g.data(), xh.data(), is.data(), dx.data(), dg.data(), db.data());
    grad_check("ln dx", [&](const vecd &v) { return ln_ref(R, Dm, v, D(g), D(b)); }, x, r, dx);
    grad_check("ln dgamma", [&](const vecd &v) { return ln_ref(R, Dm, D(x), v, D(b)); }, g, r, dg);
    grad_check("ln dbeta", [&](const vecd &v) { return ln_ref(R, Dm, D(x), D(g), v); }, b, r, db);
}

TEST(NnAttnGrad, GeluAndSoftmax)
{
    vecf x = rnd(40, 5, -4, 4), r = rnd(40, 6), y(40), dx(40);
    mts_gelu_forward(x.size(), x.data(), y.data());
    near("gelu y", y, gelu_ref(D(x)));
    mts_gelu_backward(x.size(), x.data(), r.data(), dx.data());
    grad_check("gelu dx", gelu_ref, x, r, dx);
    const int R = 5, W = 8;
    mts_softmax_forward(R, W, x.data(), y.data());
    near("softmax y", y, softmax_ref(R, W, D(x)));
    mts_softmax_backward(R, W, y.data(), r.data(), dx.data());
    grad_check("softmax dx", [&](const vecd &v) { return softmax_ref(R, W, v); }, x, r, dx);
}

// The fast GELU forms (16 lanes, every branch of mts_fm_tanhf blended) equal
// the definition written element by element with the shared scalar tanh,
// bit for bit: every 4093rd FP32 bit pattern (both signs, zeros,
// subnormals, inf, NaN, the branch edges |x| = 0.55 and 9.1 and their
// neighbours), in arrays whose length leaves a scalar tail.
TEST(NnAttnGelu, FastFormsEqualDefinition)
{
    std::vector<float> x;
    for (uint64_t u = 0; u < (1ull << 32); u += 4093) x.push_back(mts_u2f((uint32_t)u));
    for (float e : {0.55f, 9.1f, 0.0f, 1e-30f, 0.5f, 1.1f})
        for (float sgn : {1.0f, -1.0f}) {
            uint32_t b = mts_f2u(sgn * e);
            for (int d = -3; d <= 3; d++) x.push_back(mts_u2f(b + (uint32_t)d));
        }
    x.push_back(INFINITY), x.push_back(-INFINITY), x.push_back(NAN), x.push_back(-0.0f), x.push_back(1e-40f);
    x.push_back(0.3f); // a length that is not a multiple of 16
    const float C = 0.7978845608028654f, A = 0.044715f;
    std::vector<float> dy(x.size()), y(x.size()), dx(x.size());
    for (size_t i = 0; i < x.size(); i++) dy[i] = (float)((int)(i % 7) - 3) * 0.375f;
    mts_gelu_forward(x.size(), x.data(), y.data());
    mts_gelu_backward(x.size(), x.data(), dy.data(), dx.data());
    for (size_t i = 0; i < x.size(); i++) {
        float v = x[i], t = mts_fm_tanhf(C * (v + A * v * v * v));
        float ry = mts_fm_canon(0.5f * v * (1.0f + t)); // NaN results canonical (fmath.h: the CPU's and GPU's bits)
        float rd = mts_fm_canon(dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * C * (1.0f + 3.0f * A * v * v)));
        ASSERT_EQ(mts_f2u(y[i]), mts_f2u(ry)) << "gelu(" << std::hexfloat << v << "): " << y[i] << " vs " << ry;
        ASSERT_EQ(mts_f2u(dx[i]), mts_f2u(rd)) << "gelu'(" << std::hexfloat << v << "): " << dx[i] << " vs " << rd;
    }
}

TEST(NnAttnGrad, AttentionScoresAndOutput)
{
    const int N = 2, T = 5, H = 2, dh = 3, Dm = H * dh;
    const float scale = 1.0f / std::sqrt((float)dh);
    mts_provider p = native_prov();
    mts_err err;
    vecf qkv = rnd((size_t)N * T * 3 * Dm, 7), rs = rnd((size_t)N * H * T * T, 8);
    vecf a = rnd((size_t)N * H * T * T, 9, 0, 1), ry = rnd((size_t)N * T * Dm, 10);
    vecf s(rs.size()), y(ry.size()), dqkv(qkv.size()), da(a.size());
    ASSERT_EQ(mts_attn_qk_forward(NnCtx(&p, &p).get(), N, T, H, dh, scale, qkv.data(), s.data(), &err), MTS_OK);
    near("qk s", s, qk_ref(N, T, H, dh, scale, D(qkv)));
    ASSERT_EQ(mts_attn_qk_backward(NnCtx(&p, &p).get(), N, T, H, dh, scale, qkv.data(), rs.data(), dqkv.data(), &err),
              MTS_OK);
    grad_check("qk dQ dK (dV = 0)", [&](const vecd &v) { return qk_ref(N, T, H, dh, scale, v); }, qkv, rs, dqkv);
    ASSERT_EQ(mts_attn_av_forward(NnCtx(&p, &p).get(), N, T, H, dh, a.data(), qkv.data(), y.data(), &err), MTS_OK);
    near("av y", y, av_ref(N, T, H, dh, D(a), D(qkv)));
    ASSERT_EQ(mts_attn_av_backward(NnCtx(&p, &p).get(), N, T, H, dh, a.data(), qkv.data(), ry.data(), da.data(),
                                   dqkv.data(), &err),
              MTS_OK);
    grad_check("av dA", [&](const vecd &v) { return av_ref(N, T, H, dh, v, D(qkv)); }, a, ry, da);
    grad_check("av dV (dQ = dK = 0)", [&](const vecd &v) { return av_ref(N, T, H, dh, D(a), v); }, qkv, ry, dqkv);
}

TEST(NnAttnGrad, PatchesPositionsClassTokenAndPooling)
{
    // patches: 2 samples of 2x4x6 in 2x2 patches -> 6 tokens of 8 features
    const int N = 2, C = 2, Hh = 4, W = 6, P = 2, T = 6, F = 8;
    vecf x = rnd((size_t)N * C * Hh * W, 11), r = rnd((size_t)N * T * F, 12), y(r.size()), dx(x.size());
    auto patch_ref = [&](const vecd &v) {
        vecd o((size_t)N * T * F);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++)
                for (int iy = 0; iy < Hh; iy++)
                    for (int ix = 0; ix < W; ix++)
                        o[((size_t)n * T + iy / P * (W / P) + ix / P) * F + (c * P + iy % P) * P + ix % P] =
                            v[(((size_t)n * C + c) * Hh + iy) * W + ix];
        return o;
    };
    mts_patchify_forward(N, C, Hh, W, P, x.data(), y.data());
    near("patch y", y, patch_ref(D(x)));
    mts_patchify_backward(N, C, Hh, W, P, r.data(), dx.data());
    grad_check("patch dx", patch_ref, x, r, dx);

    // position embedding with a class token: 3 tokens of width 4 -> 4 tokens
    const int Tt = 3, Dm = 4;
    vecf t = rnd((size_t)N * Tt * Dm, 13), pos = rnd((size_t)(Tt + 1) * Dm, 14), cls = rnd(Dm, 15);
    vecf rt = rnd((size_t)N * (Tt + 1) * Dm, 16), yt(rt.size()), dt(t.size()), dpos(pos.size()), dcls(Dm);
    auto tok_ref = [&](const vecd &tv, const vecd &pv, const vecd &cv) {
        vecd o((size_t)N * (Tt + 1) * Dm);
        for (int n = 0; n < N; n++)
            for (int k = 0; k <= Tt; k++)
                for (int d = 0; d < Dm; d++)
                    o[((size_t)n * (Tt + 1) + k) * Dm + d] =
                        (k ? tv[((size_t)n * Tt + k - 1) * Dm + d] : cv[d]) + pv[(size_t)k * Dm + d];
        return o;
    };
    mts_tokens_forward(N, Tt, Dm, cls.data(), pos.data(), t.data(), yt.data());
    near("tokens y", yt, tok_ref(D(t), D(pos), D(cls)));
    mts_tokens_backward(N, Tt, Dm, 1, rt.data(), dt.data(), dpos.data(), dcls.data());
    grad_check("tokens dx", [&](const vecd &v) { return tok_ref(v, D(pos), D(cls)); }, t, rt, dt);
    grad_check("tokens dpos", [&](const vecd &v) { return tok_ref(D(t), v, D(cls)); }, pos, rt, dpos);
    grad_check("tokens dcls", [&](const vecd &v) { return tok_ref(D(t), D(pos), v); }, cls, rt, dcls);

    // pooling: mean over tokens and the class token
    for (int mode : {MTS_TOKPOOL_MEAN, MTS_TOKPOOL_CLS}) {
        vecf rp = rnd((size_t)N * Dm, 17), yp(rp.size()), dp(t.size());
        auto pool_ref = [&](const vecd &v) {
            vecd o((size_t)N * Dm, 0.0);
            for (int n = 0; n < N; n++)
                for (int d = 0; d < Dm; d++)
                    for (int k = 0; k < Tt; k++)
                        if (mode == MTS_TOKPOOL_MEAN) o[(size_t)n * Dm + d] += v[((size_t)n * Tt + k) * Dm + d] / Tt;
                        else if (k == 0) o[(size_t)n * Dm + d] = v[(size_t)n * Tt * Dm + d];
            return o;
        };
        mts_tokpool_forward(N, Tt, Dm, mode, t.data(), yp.data());
        near("tokpool y", yp, pool_ref(D(t)));
        mts_tokpool_backward(N, Tt, Dm, mode, rp.data(), dp.data());
        grad_check(mode ? "tokpool cls dx" : "tokpool mean dx", pool_ref, t, rp, dp);
    }
}

// A small ViT through the builders: patches, embedding, class token, one
// pre-LN block (attention and GELU MLP), pooling, head.
void small_vit(mts_net *net, int cls)
{
    mts_err err;
    ASSERT_EQ(mts_net_init(net, "vit-small", 1, 4, 4, &err), MTS_OK);
    ASSERT_GE(mts_net_patchify(net, 2, &err), 0) << err.msg;
    ASSERT_GE(mts_net_tokdense(net, 6, &err), 0) << err.msg;
    int x = mts_net_tokens(net, cls, &err);
    ASSERT_GE(x, 0) << err.msg;
    ASSERT_GE(mts_net_layernorm(net, &err), 0);
    ASSERT_GE(mts_net_mhsa(net, 2, "b0.attn", &err), 0) << err.msg;
    ASSERT_GE(x = mts_net_add(net, x, &err), 0) << err.msg;
    ASSERT_GE(mts_net_tokdense(net, 8, &err), 0);
    ASSERT_GE(mts_net_gelu(net, &err), 0);
    ASSERT_GE(mts_net_tokdense(net, 6, &err), 0);
    ASSERT_GE(mts_net_add(net, x, &err), 0);
    ASSERT_GE(mts_net_tokpool(net, cls ? MTS_TOKPOOL_CLS : MTS_TOKPOOL_MEAN, &err), 0);
    ASSERT_GE(mts_net_dense(net, 3, &err), 0);
    ASSERT_EQ(mts_net_build(net, 2, 7, &err), MTS_OK) << err.msg;
}

TEST(NnAttnGrad, SmallVitParameterGradientsMatchFiniteDifferences)
{
    for (int cls : {0, 1}) {
        mts_net net;
        small_vit(&net, cls);
        mts_provider p = native_prov();
        mts_err err;
        const int N = 2, out = 3;
        vecf x = rnd((size_t)N * 16, 21), r = rnd((size_t)N * out, 22);
        for (size_t i = 0; i < net.nparam; i++) net.param[i] += 0.1f * (float)std::sin(1.7 * (double)i); // break symmetries
        ASSERT_EQ(mts_net_forward(&net, NnCtx(&p, &p).get(), 1, N, x.data(), &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_net_backward(&net, NnCtx(&p, &p).get(), N, x.data(), r.data(), &err), MTS_OK) << err.msg;
        vecf g(net.grad, net.grad + net.nparam);
        // FP32 forward, difference quotient in double: h large enough for FP32 noise
        auto L = [&]() {
            mts_net_forward(&net, NnCtx(&p, &p).get(), 1, N, x.data(), &err);
            double s = 0;
            for (int i = 0; i < N * out; i++) s += (double)mts_net_output(&net)[i] * r[i];
            return s;
        };
        int checked = 0;
        for (size_t i = 0; i < net.nparam; i += 7) {
            float o = net.param[i], h = 1e-2f;
            net.param[i] = o + h;
            double fp = L();
            net.param[i] = o - h;
            double fm = L();
            net.param[i] = o;
            double num = (fp - fm) / (2.0 * h);
            EXPECT_NEAR(g[i], num, 3e-3 + 2e-2 * std::fabs(num)) << "cls " << cls << " parameter " << i;
            checked++;
        }
        EXPECT_GT(checked, 40);
        mts_net_free(&net);
    }
}

// ------------------------------------------------ LUT and FMAq: bit-exact

struct AttnLut : ::testing::Test {
    mts_arith ar; // the MBM (1,8,7) LUT provider as the training driver opens it
    mts_mulop lutop;
    mts_provider lp;
    void SetUp() override
    {
        mts_err err;
        mts_arith_spec spec;
        mts_arith_spec_init(&spec);
        snprintf(spec.mul, sizeof spec.mul, "mbm");
        ASSERT_EQ(mts_arith_open(&spec, 2, &ar, &err), MTS_OK) << err.msg;
        ASSERT_EQ(ar.p.kind, MTS_PROV_LUT);
        mts_mulop_lut(&lutop, &ar.lut);
        lp = ar.p;
    }
    void TearDown() override { mts_arith_close(&ar); }
    mts_provider fmaq() const
    {
        mts_provider p = lp;
        mts_err err;
        EXPECT_EQ(mts_qfmt_parse("M4E3", 5, &p.qacc, &err), MTS_OK);
        p.qprod = p.qacc;
        p.fmaq = 1;
        p.chunk = 4;
        return p;
    }
    // One output of the documented GEMM order: pairs (a, b) in k order.
    float dot(const mts_provider &p, const std::vector<std::pair<float, float>> &t) const
    {
        if (!p.fmaq) {
            float s = 0.0f; // FP32, sequential from +0, each product as the provider forms it
            for (auto &ab : t) s += mts_u2f(mts_prov_mul(&p, mts_f2u(ab.first), mts_f2u(ab.second)));
            return s;
        }
        std::vector<uint32_t> a, b;
        for (auto &ab : t) {
            a.push_back(mts_prov_operand(&p, mts_f2u(ab.first)));
            b.push_back(mts_prov_operand(&p, mts_f2u(ab.second)));
        }
        return mts_u2f(mts_fmaq_dot(&p.qprod, &p.qacc, p.chunk, &lutop, a.data(), b.data(), a.size(), 1));
    }
};

void bits(const char *what, const vecf &got, const vecf &want)
{
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++)
        ASSERT_EQ(mts_f2u(got[i]), mts_f2u(want[i]))
            << what << " index " << i << ": 0x" << std::hex << mts_f2u(got[i]) << " vs 0x" << mts_f2u(want[i]);
}

void attention_bitexact(const AttnLut &fx, const mts_provider &p)
{
    const int N = 2, T = 5, H = 2, dh = 6, Dm = H * dh, ld = 3 * Dm;
    const float scale = 0.375f;
    mts_err err;
    vecf qkv = rnd((size_t)N * T * ld, 31), ds = rnd((size_t)N * H * T * T, 32);
    vecf a = rnd(ds.size(), 33, 0, 1), dy = rnd((size_t)N * T * Dm, 34);
    vecf s(ds.size()), dq(qkv.size()), y(dy.size()), da(a.size()), dv(qkv.size());
    ASSERT_EQ(mts_attn_qk_forward(NnCtx(&p, &p).get(), N, T, H, dh, scale, qkv.data(), s.data(), &err), MTS_OK);
    ASSERT_EQ(mts_attn_qk_backward(NnCtx(&p, &p).get(), N, T, H, dh, scale, qkv.data(), ds.data(), dq.data(), &err), MTS_OK);
    ASSERT_EQ(mts_attn_av_forward(NnCtx(&p, &p).get(), N, T, H, dh, a.data(), qkv.data(), y.data(), &err), MTS_OK);
    ASSERT_EQ(mts_attn_av_backward(NnCtx(&p, &p).get(), N, T, H, dh, a.data(), qkv.data(), dy.data(), da.data(),
                                   dv.data(), &err),
              MTS_OK);
    auto Q = [&](int n, int t, int c) { return qkv[((size_t)n * T + t) * ld + c]; };
    auto K = [&](int n, int t, int c) { return qkv[((size_t)n * T + t) * ld + Dm + c]; };
    auto V = [&](int n, int t, int c) { return qkv[((size_t)n * T + t) * ld + 2 * Dm + c]; };
    auto at = [&](const vecf &m, int n, int h, int t, int u) { return m[(((size_t)n * H + h) * T + t) * T + u]; };
    vecf rs(s.size()), rdq(dq.size(), 0.0f), ry(y.size()), rda(da.size()), rdv(dv.size(), 0.0f);
    std::vector<std::pair<float, float>> t;
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < T; i++)
                for (int u = 0; u < T; u++) {
                    t.clear(); // S = Q x K^T: operands (Q, K), sum over dh; then * scale in FP32
                    for (int j = 0; j < dh; j++) t.push_back({Q(n, i, h * dh + j), K(n, u, h * dh + j)});
                    rs[(((size_t)n * H + h) * T + i) * T + u] = fx.dot(p, t) * scale;
                    t.clear(); // dA = dY x V^T: operands (gradient, V), sum over dh
                    for (int j = 0; j < dh; j++) t.push_back({dy[((size_t)n * T + i) * Dm + h * dh + j], V(n, u, h * dh + j)});
                    rda[(((size_t)n * H + h) * T + i) * T + u] = fx.dot(p, t);
                }
            for (int i = 0; i < T; i++)
                for (int j = 0; j < dh; j++) {
                    int c = h * dh + j;
                    t.clear(); // dQ = (scale dS) x K: operands (gradient, K), sum over keys
                    for (int u = 0; u < T; u++) t.push_back({at(ds, n, h, i, u) * scale, K(n, u, c)});
                    rdq[((size_t)n * T + i) * ld + c] = fx.dot(p, t);
                    t.clear(); // dK = (scale dS)^T x Q: operands (gradient, Q), sum over queries
                    for (int u = 0; u < T; u++) t.push_back({at(ds, n, h, u, i) * scale, Q(n, u, c)});
                    rdq[((size_t)n * T + i) * ld + Dm + c] = fx.dot(p, t);
                    t.clear(); // Y = A x V: operands (A, V), sum over keys
                    for (int u = 0; u < T; u++) t.push_back({at(a, n, h, i, u), V(n, u, c)});
                    ry[((size_t)n * T + i) * Dm + c] = fx.dot(p, t);
                    t.clear(); // dV = A^T x dY: operands (A, gradient), sum over queries
                    for (int u = 0; u < T; u++) t.push_back({at(a, n, h, u, i), dy[((size_t)n * T + u) * Dm + c]});
                    rdv[((size_t)n * T + i) * ld + 2 * Dm + c] = fx.dot(p, t);
                }
        }
    bits("S = Q K^T", s, rs);
    bits("dQ, dK", dq, rdq);
    bits("Y = A V", y, ry);
    bits("dA", da, rda);
    bits("dV", dv, rdv);
}

TEST_F(AttnLut, AttentionBitExactLut) { attention_bitexact(*this, lp); }
TEST_F(AttnLut, AttentionBitExactFmaq) { attention_bitexact(*this, fmaq()); }

TEST_F(AttnLut, MbmDiffersFromNativeInAttention)
{
    // the products really go through the LUT: an MBM run differs from FP32
    const int N = 1, T = 4, H = 1, dh = 8;
    vecf qkv = rnd((size_t)N * T * 3 * dh, 41), s1(T * T), s2(T * T);
    mts_provider p = native_prov();
    mts_err err;
    ASSERT_EQ(mts_attn_qk_forward(NnCtx(&p, &p).get(), N, T, H, dh, 1.0f, qkv.data(), s1.data(), &err), MTS_OK);
    ASSERT_EQ(mts_attn_qk_forward(NnCtx(&lp, &lp).get(), N, T, H, dh, 1.0f, qkv.data(), s2.data(), &err), MTS_OK);
    EXPECT_NE(memcmp(s1.data(), s2.data(), sizeof(float) * s1.size()), 0);
}

// --------------------------------------------------------------- models

TEST(NnAttnModels, VitTinyAndResnet18Shapes)
{
    mts_net net;
    mts_err err;
    ASSERT_EQ(mts_nn_model_build(&net, "vit-tiny", 1, 28, 28, 10, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_net_build(&net, 2, 1, &err), MTS_OK);
    // patch 49*64+64; pos 16*64; per block 2 LN (2*2*64), qkv 64*192+192, proj 64*64+64,
    // fc1 64*128+128, fc2 128*64+64; final LN 2*64; head 64*10+10
    size_t block = 4 * 64 + (64 * 192 + 192) + (64 * 64 + 64) + (64 * 128 + 128) + (128 * 64 + 64);
    EXPECT_EQ(net.nparam, (size_t)(49 * 64 + 64) + 16 * 64 + 4 * block + 2 * 64 + (64 * 10 + 10));
    EXPECT_EQ(mts_net_outsize(&net), 10);
    mts_provider p = native_prov();
    vecf x = rnd(2 * 28 * 28, 51, 0, 1);
    ASSERT_EQ(mts_net_forward(&net, NnCtx(&p, &p).get(), 0, 2, x.data(), &err), MTS_OK) << err.msg;
    for (int i = 0; i < 20; i++) EXPECT_TRUE(std::isfinite(mts_net_output(&net)[i]));
    mts_net_free(&net);
    // resnet18 (CIFAR form): 3x3 stem 64, stages 64/128/256/512 x 2 blocks, 1x1 shortcuts at 3 stage starts
    ASSERT_EQ(mts_nn_model_build(&net, "resnet18", 3, 32, 32, 10, &err), MTS_OK) << err.msg;
    size_t conv = 0, bn = 0;
    auto cv = [&](size_t ci, size_t co, size_t k) { conv += co * ci * k * k + co; bn += 2 * co; };
    cv(3, 64, 3);
    size_t ch[4] = {64, 128, 256, 512}, in = 64;
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < 2; b++) {
            cv(b ? ch[s] : in, ch[s], 3);
            cv(ch[s], ch[s], 3);
            if (s > 0 && b == 0) cv(in, ch[s], 1);
            in = ch[s];
        }
    ASSERT_EQ(mts_net_build(&net, 1, 1, &err), MTS_OK);
    EXPECT_EQ(net.nparam, conv + bn + 512 * 10 + 10);
    int m[256] = {0};
    ASSERT_LT(net.n, 256);
    EXPECT_EQ(mts_net_match(&net, "layer*.conv[12]", m), 16);
    EXPECT_EQ(mts_net_match(&net, "*shortcut", m), 3);
    mts_net_free(&net);
}

// --------------------------------------------------- determinism

// One epoch of vit-tiny on 12 random images, all GEMMs through the MBM LUT
// and the attention products through a per-layer FMAq context.
vecf vit_epoch(int threads)
{
    mts_err err;
    mts_format f = mts_format_e8(7);
    mts_mulop op;
    mts_lut lut;
    EXPECT_EQ(mts_mulop_model(&op, "mbm", &f, &err), MTS_OK);
    EXPECT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK);
    mts_provider p;
    memset(&p, 0, sizeof p);
    p.kind = MTS_PROV_LUT;
    p.lut = &lut;
    p.threads = threads;
    mts_provider q = p;
    EXPECT_EQ(mts_qfmt_parse("M7E4", 8, &q.qacc, &err), MTS_OK);
    q.qprod = q.qacc;
    q.fmaq = 1;
    mts_net net;
    EXPECT_EQ(mts_nn_model_build(&net, "vit-tiny", 1, 28, 28, 10, &err), MTS_OK);
    EXPECT_EQ(mts_net_build(&net, 4, 3, &err), MTS_OK);
    std::vector<int> match(net.n, 0);
    EXPECT_EQ(mts_net_match(&net, "block*.attn.[qa][kv]", match.data()), 8);
    NnCtx base(&p, &p), attn(&q, &p);
    std::vector<const mts_nn_ctx *> nodes(net.n, nullptr);
    for (int i = 0; i < net.n; i++)
        if (match[i]) nodes[i] = attn.get();
    base.c.node_ctx = nodes.data();
    mts_opt o;
    memset(&o, 0, sizeof o);
    o.kind = MTS_OPT_ADAM;
    o.lr = 1e-3f;
    o.beta1 = 0.9f;
    o.beta2 = 0.999f;
    o.eps = 1e-8f;
    EXPECT_EQ(mts_opt_init(&o, net.nparam, &err), MTS_OK);
    mts_dataset d = {};
    d.n = 12, d.c = 1, d.h = 28, d.w = 28, d.classes = 10;
    vecf x = rnd((size_t)d.n * 784, 61, 0, 1);
    std::vector<uint8_t> y(d.n);
    for (int i = 0; i < d.n; i++) y[i] = (uint8_t)(i % 10);
    d.x = x.data();
    d.y = y.data();
    mts_epoch_stats st;
    EXPECT_EQ(mts_train_epoch(&net, &o, base.get(), &d, d.n, 4, 1, 0, 1e-3f, nullptr, nullptr, &st, &err), MTS_OK)
        << err.msg;
    vecf out(net.param, net.param + net.nparam);
    mts_opt_free(&o);
    mts_net_free(&net);
    mts_lut_free(&lut);
    return out;
}

TEST(NnAttnDeterminism, VitTinySameBitsForAnyThreadCount)
{
    vecf a = vit_epoch(1), b = vit_epoch(3);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(memcmp(a.data(), b.data(), a.size() * 4), 0);
}

// ------------------------------------------------- per-layer multipliers

TEST(NnLayers, NamesPatternsAndRules)
{
    mts_net net;
    mts_err err;
    ASSERT_EQ(mts_nn_model_build(&net, "vit-tiny", 1, 28, 28, 10, &err), MTS_OK);
    std::vector<int> m(net.n, 0);
    EXPECT_EQ(mts_net_match(&net, "block*.attn.qk", m.data()), 4);
    std::fill(m.begin(), m.end(), 0);
    EXPECT_EQ(mts_net_match(&net, "block*.mlp.*", m.data()), 8);
    std::fill(m.begin(), m.end(), 0);
    EXPECT_EQ(mts_net_match(&net, "block1.attn.*", m.data()), 4); // qkv, qk, av, proj: not the softmax
    char nm[64];
    for (int i = 0; i < net.n; i++)
        if (m[i]) {
            mts_net_layer_name(&net, i, nm, sizeof nm);
            EXPECT_EQ(std::string(nm).rfind("block1.attn.", 0), 0u) << nm;
        }
    std::fill(m.begin(), m.end(), 0);
    EXPECT_EQ(mts_net_match(&net, "*", m.data()), 1 + 4 * 6 + 1); // patch, 6 per block, head
    EXPECT_EQ(mts_net_match(&net, "block9.*", m.data()), 0);
    mts_net_free(&net);
    // unnamed layers: kind and ordinal
    ASSERT_EQ(mts_nn_model_build(&net, "lenet300", 1, 28, 28, 10, &err), MTS_OK);
    mts_net_layer_name(&net, 3, nm, sizeof nm);
    EXPECT_STREQ(nm, "dense2");
    mts_net_free(&net);

    mts_layer_rule r;
    ASSERT_EQ(mts_layer_rule_parse("block*.attn.qk=mbm,acc=M7E4,chunk=8,man-bits=5", &r, &err), MTS_OK) << err.msg;
    EXPECT_STREQ(r.pattern, "block*.attn.qk");
    EXPECT_STREQ(r.spec.mul, "mbm");
    EXPECT_STREQ(r.spec.acc, "M7E4");
    EXPECT_EQ(r.spec.chunk, 8);
    EXPECT_EQ(r.spec.man_bits, 5);
    ASSERT_EQ(mts_layer_rule_parse("conv1=/tmp/x.lut,no-underflow", &r, &err), MTS_OK);
    EXPECT_STREQ(r.spec.lut, "/tmp/x.lut");
    EXPECT_EQ(r.spec.no_underflow, 1);
    for (const char *bad : {"nopattern", "=mbm", "conv1=", "conv1=mbm,acc", "conv1=mbm,chunk=0", "conv1=mbm,colour=red",
                            "conv\"1=mbm"})
        EXPECT_NE(mts_layer_rule_parse(bad, &r, &err), MTS_OK) << bad;
}

// A tiny IDX pair: n 28x28 images of a bright square in the quadrant of the label.
void idx_pair(const std::string &dir, const char *split, int n, uint64_t seed)
{
    auto be32 = [](std::string &s, uint32_t v) {
        for (int i = 3; i >= 0; i--) s.push_back((char)(v >> (8 * i)));
    };
    std::string im, lb;
    be32(im, 0x803), be32(im, (uint32_t)n), be32(im, 28), be32(im, 28);
    be32(lb, 0x801), be32(lb, (uint32_t)n);
    mts_rng r = {seed};
    for (int i = 0; i < n; i++) {
        int q = (int)mts_rng_below(&r, 4);
        for (int p = 0; p < 784; p++) im.push_back((char)((p / 28 / 14 == q / 2 && p % 28 / 14 == q % 2) ? 220 : 10));
        lb.push_back((char)q);
    }
    sh("mkdir -p " + dir);
    std::ofstream(dir + "/" + split + "-images-idx3-ubyte", std::ios::binary) << im;
    std::ofstream(dir + "/" + split + "-labels-idx1-ubyte", std::ios::binary) << lb;
}

TEST(NnLayersCli, ListLayersRulesCheckpointAndJson)
{
    CliResult l = run_cli("train --model vit-tiny --list-layers --mul-layer 'block*.attn.qk=fp32,acc=M7E4'");
    ASSERT_EQ(l.status, 0) << l.err;
    EXPECT_NE(l.out.find("block3.attn.av"), std::string::npos) << l.out;
    EXPECT_NE(l.out.find("fp32,acc=M7E4"), std::string::npos) << l.out;
    EXPECT_NE(l.out.find("block0.mlp.fc1"), std::string::npos);
    CliResult l2 = run_cli("train --model resnet18 --data cifar10 --list-layers");
    ASSERT_EQ(l2.status, 0) << l2.err;
    EXPECT_NE(l2.out.find("layer4.1.conv2"), std::string::npos);
    EXPECT_NE(l2.out.find("512x4x4"), std::string::npos) << l2.out;
    CliResult bad = run_cli("train --model vit-tiny --list-layers --mul-layer 'block*'");
    EXPECT_EQ(bad.status, 2);
    EXPECT_NE(bad.err.find("PATTERN=SPEC"), std::string::npos) << bad.err;

    std::string dir = tmpdir() + "/attn-cli", data = dir + "/mnist";
    idx_pair(data, "train", 24, 1);
    idx_pair(data, "t10k", 16, 2);
    std::string common = "train --model vit-tiny --data mnist --data-dir " + data + " --epochs 1 --batch 8 --opt adam";
    CliResult none = run_cli(common + " --mul-layer 'block*.atn.qk=fp32'");
    EXPECT_EQ(none.status, 2);
    EXPECT_NE(none.err.find("--list-layers"), std::string::npos) << none.err;
    CliResult t = run_cli(common + " --mul bf16 --mul-layer 'block*.attn.qk=mbm' --mul-layer 'block0.*=fp32'"
                                   " --checkpoint " + dir + "/ck --json " + dir + "/run.json");
    ASSERT_EQ(t.status, 0) << t.err;
    std::string js = slurp(dir + "/run.json");
    EXPECT_NE(js.find("\"rule\": \"block*.attn.qk=mbm\""), std::string::npos) << js;
    EXPECT_NE(js.find("\"names\": [\"block1.attn.qk\", \"block2.attn.qk\", \"block3.attn.qk\"]"), std::string::npos)
        << js; // block0.attn.qk goes to the later rule
    EXPECT_NE(js.find("lut mbm"), std::string::npos);
    // mantis test re-applies the recorded rules: the same accuracy as the run's last epoch
    CliResult e = run_cli("test --checkpoint " + dir + "/ck --data-dir " + data);
    ASSERT_EQ(e.status, 0) << e.err;
    EXPECT_NE(e.out.find("per layer: block*.attn.qk=mbm: 3 layers"), std::string::npos) << e.out;
    std::string acc = t.out.substr(t.out.find("test accuracy ") + 14, 6);
    EXPECT_NE(e.out.find("test accuracy " + acc), std::string::npos) << t.out << e.out;
    // resume refuses other rules
    CliResult r = run_cli(common + " --epochs 2 --mul bf16 --mul-layer 'block*.attn.qk=fp32' --checkpoint " + dir +
                          "/ck --resume");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("other settings"), std::string::npos) << r.err;
}

} // namespace
