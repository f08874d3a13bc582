// test_nn_front.cpp - the general convolution (mts_convg_*, nn_ops.h) and the
// flat interface of nn_front.h that the Python package calls:
//  - mts_convg_* equals mts_conv2d_* bit for bit on the geometries both take
//    (LUT provider, several sample chunks), forward and all three gradients;
//  - finite-difference-free float64 check of a general geometry (groups,
//    dilation, rectangular kernel, unequal strides and paddings) in native
//    mode against a direct-loop convolution and its adjoints;
//  - geometry errors; multiplier handles (FMAq derived from a base that is
//    freed first, descriptions, refusals). The bit-exactness of the Python
//    layers against mts_gemm_ref is python/tests (CTest "python").
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "mantis/nn.h"
#include "mantis/nn_front.h"
}
#include "test_nn_ctx.h"

namespace {

using vecf = std::vector<float>;

struct Arith {
    mts_arith a;
    explicit Arith(const char *mul)
    {
        mts_arith_spec s;
        mts_arith_spec_init(&s);
        snprintf(s.mul, sizeof s.mul, "%s", mul);
        mts_err e;
        EXPECT_EQ(mts_arith_open(&s, 1, &a, &e), MTS_OK) << e.msg;
    }
    ~Arith() { mts_arith_close(&a); }
};

bool same_bits(const vecf &a, const vecf &b, const char *what)
{
    for (size_t i = 0; i < a.size(); i++)
        if (memcmp(&a[i], &b[i], 4)) {
            uint32_t x, y;
            memcpy(&x, &a[i], 4);
            memcpy(&y, &b[i], 4);
            ADD_FAILURE() << what << ": element " << i << " " << std::hex << x << " vs " << y;
            return false;
        }
    return true;
}

TEST(NnConvg, EqualsConv2dOnItsGeometry)
{
    Arith mbm("mbm");
    mts_provider p = mbm.a.p;
    struct G { int N, cin, h, w, cout, k, s, pad; } geoms[] = {
        {13, 2, 28, 28, 3, 5, 1, 2}, {3, 4, 9, 9, 6, 3, 2, 1}, {2, 5, 7, 6, 4, 1, 2, 0}};
    for (const G &t : geoms) {
        mts_conv_geom sg = {t.cin, t.h, t.w, t.cout, t.k, t.s, t.pad, 0, 0};
        mts_convg_geom gg = {t.cin, t.h, t.w, t.cout, t.k, t.k, t.s, t.s, t.pad, t.pad, 1, 1, 1, 0, 0};
        mts_err e;
        ASSERT_EQ(mts_conv_geom_init(&sg, &e), MTS_OK);
        ASSERT_EQ(mts_convg_geom_init(&gg, &e), MTS_OK);
        ASSERT_EQ(sg.oh, gg.oh);
        ASSERT_EQ(sg.ow, gg.ow);
        size_t nx = (size_t)t.N * t.cin * t.h * t.w, nw = (size_t)t.cout * t.cin * t.k * t.k,
               ny = (size_t)t.N * t.cout * sg.oh * sg.ow;
        vecf x = rnd(nx, 1), w = rnd(nw, 2), b = rnd(t.cout, 3), dy = rnd(ny, 4);
        vecf y1(ny), y2(ny), dx1(nx), dx2(nx), dw1(nw), dw2(nw), db1(t.cout), db2(t.cout);
        for (int threads : {1, 2}) {
            p.threads = threads;
            ASSERT_EQ(mts_conv2d_forward(NnCtx(&p, &p).get(), &sg, t.N, x.data(), w.data(), b.data(), y1.data(), &e),
                      MTS_OK);
            ASSERT_EQ(mts_convg_forward(NnCtx(&p, &p).get(), &gg, t.N, x.data(), w.data(), b.data(), y2.data(), &e),
                      MTS_OK);
            ASSERT_EQ(mts_conv2d_backward(NnCtx(&p, &p).get(), &sg, t.N, x.data(), w.data(), dy.data(), dx1.data(),
                                          dw1.data(), db1.data(), &e),
                      MTS_OK);
            ASSERT_EQ(mts_convg_backward(NnCtx(&p, &p).get(), &gg, t.N, x.data(), w.data(), dy.data(), dx2.data(),
                                         dw2.data(), db2.data(), &e),
                      MTS_OK);
            EXPECT_TRUE(same_bits(y1, y2, "y") && same_bits(dx1, dx2, "dx") && same_bits(dw1, dw2, "dw") &&
                        same_bits(db1, db2, "db"))
                << "N " << t.N << " k " << t.k << " stride " << t.s << " threads " << threads;
        }
    }
}

// Direct-loop float64 convolution of the general geometry and its adjoints.
struct Ref {
    const mts_convg_geom &g;
    int N;
    double x(const vecf &v, int n, int c, int iy, int ix) const
    {
        return v[(((size_t)n * g.cin + c) * g.h + iy) * g.w + ix];
    }
    template <class F> void taps(F f) const
    {
        int cg = g.cin / g.groups, og = g.cout / g.groups;
        for (int n = 0; n < N; n++)
            for (int co = 0; co < g.cout; co++)
                for (int oy = 0; oy < g.oh; oy++)
                    for (int ox = 0; ox < g.ow; ox++)
                        for (int ci = 0; ci < cg; ci++)
                            for (int ky = 0; ky < g.kh; ky++)
                                for (int kx = 0; kx < g.kw; kx++) {
                                    int iy = oy * g.sh - g.ph + ky * g.dh, ix = ox * g.sw - g.pw + kx * g.dw;
                                    if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                                    int c = co / og * cg + ci;
                                    size_t yi = (((size_t)n * g.cout + co) * g.oh + oy) * g.ow + ox;
                                    size_t xi = (((size_t)n * g.cin + c) * g.h + iy) * g.w + ix;
                                    size_t wi = (((size_t)co * cg + ci) * g.kh + ky) * g.kw + kx;
                                    f(yi, xi, wi);
                                }
    }
};

TEST(NnConvg, GeneralGeometryMatchesDirectLoopsInNative)
{
    mts_provider p = native_prov();
    mts_convg_geom g = {4, 9, 8, 6, 3, 2, 2, 1, 1, 2, 1, 2, 2, 0, 0}; // groups 2, dilation 1x2
    mts_err e;
    ASSERT_EQ(mts_convg_geom_init(&g, &e), MTS_OK) << e.msg;
    int N = 3;
    size_t nx = (size_t)N * g.cin * g.h * g.w, nw = (size_t)g.cout * (g.cin / g.groups) * g.kh * g.kw,
           ny = (size_t)N * g.cout * g.oh * g.ow;
    vecf x = rnd(nx, 5), w = rnd(nw, 6), b = rnd(g.cout, 7), dy = rnd(ny, 8);
    vecf y(ny), dx(nx), dw(nw), db(g.cout);
    ASSERT_EQ(mts_convg_forward(NnCtx(&p, &p).get(), &g, N, x.data(), w.data(), b.data(), y.data(), &e), MTS_OK);
    ASSERT_EQ(mts_convg_backward(NnCtx(&p, &p).get(), &g, N, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                                 db.data(), &e),
              MTS_OK);
    std::vector<double> ry(ny), rdx(nx, 0.0), rdw(nw, 0.0), rdb(g.cout, 0.0);
    for (size_t i = 0; i < ny; i++) ry[i] = b[(i / ((size_t)g.oh * g.ow)) % g.cout];
    Ref r{g, N};
    r.taps([&](size_t yi, size_t xi, size_t wi) {
        ry[yi] += (double)x[xi] * w[wi];
        rdx[xi] += (double)dy[yi] * w[wi];
        rdw[wi] += (double)dy[yi] * x[xi];
    });
    for (size_t i = 0; i < ny; i++) rdb[(i / ((size_t)g.oh * g.ow)) % g.cout] += dy[i];
    for (size_t i = 0; i < ny; i++) EXPECT_NEAR(y[i], ry[i], 1e-4) << "y " << i;
    for (size_t i = 0; i < nx; i++) EXPECT_NEAR(dx[i], rdx[i], 1e-4) << "dx " << i;
    for (size_t i = 0; i < nw; i++) EXPECT_NEAR(dw[i], rdw[i], 1e-4) << "dw " << i;
    for (int i = 0; i < g.cout; i++) EXPECT_NEAR(db[i], rdb[i], 1e-4) << "db " << i;
}

TEST(NnConvg, GeometryErrors)
{
    mts_err e;
    mts_convg_geom g = {4, 9, 8, 6, 3, 3, 1, 1, 0, 0, 1, 1, 4, 0, 0}; // 4 groups, 6 outputs
    EXPECT_EQ(mts_convg_geom_init(&g, &e), MTS_EINVAL);
    EXPECT_NE(std::string(e.msg).find("groups"), std::string::npos) << e.msg;
    g = {1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 3, 3, 1, 0, 0}; // dilated 7x7 over 5x5
    EXPECT_EQ(mts_convg_geom_init(&g, &e), MTS_EINVAL);
    EXPECT_NE(std::string(e.msg).find("larger than padded input"), std::string::npos) << e.msg;
    g = {1, 5, 5, 1, 3, 3, 0, 1, 0, 0, 1, 1, 1, 0, 0};
    EXPECT_EQ(mts_convg_geom_init(&g, &e), MTS_EINVAL);
}

TEST(NnFront, DerivedHandlesOutliveTheirBase)
{
    mts_front_mul *base, *fq, *plain;
    mts_err e;
    ASSERT_EQ(mts_front_mul_open("mbm", NULL, NULL, 7, &base, &e), MTS_OK) << e.msg;
    ASSERT_EQ(mts_front_mul_acc(base, "M4E3", NULL, -1, -1, 4, 0, &fq, &e), MTS_OK) << e.msg;
    ASSERT_EQ(mts_front_mul_acc(fq, NULL, NULL, -1, -1, 0, 0, &plain, &e), MTS_OK) << e.msg;
    mts_front_mul_free(base); // the table stays with the derived handles
    EXPECT_NE(std::string(mts_front_mul_desc(fq)).find("fmaq acc M4E3"), std::string::npos);
    EXPECT_EQ(std::string(mts_front_mul_desc(plain)), "lut mbm bf16");
    vecf a = rnd(64, 9), b = rnd(64, 10), y1(64), y2(64);
    ASSERT_EQ(mts_front_mul_products(fq, 64, a.data(), b.data(), y1.data(), &e), MTS_OK);
    ASSERT_EQ(mts_front_mul_products(plain, 64, a.data(), b.data(), y2.data(), &e), MTS_OK);
    vecf x = rnd(5 * 40, 11), w = rnd(3 * 40, 12), yq(15), yp(15);
    ASSERT_EQ(mts_front_dense_forward(fq, 1, 0, 5, 40, 3, x.data(), w.data(), NULL, yq.data(), &e), MTS_OK);
    ASSERT_EQ(mts_front_dense_forward(plain, 1, 0, 5, 40, 3, x.data(), w.data(), NULL, yp.data(), &e), MTS_OK);
    EXPECT_NE(memcmp(yq.data(), yp.data(), sizeof(float) * 15), 0); // FMAq M4E3 sums differ from FP32's
    char info[512];
    size_t need = mts_front_mul_info(fq, info, sizeof info);
    EXPECT_LT(need, sizeof info);
    EXPECT_NE(std::string(info).find("\"fmaq\": true"), std::string::npos) << info;
    mts_front_mul_free(fq);
    mts_front_mul_free(plain);
}

TEST(NnFront, RefusalsNameTheProblem)
{
    mts_front_mul *m = NULL;
    mts_err e;
    EXPECT_EQ(mts_front_mul_open(NULL, NULL, NULL, -1, &m, &e), MTS_EINVAL);
    EXPECT_EQ(mts_front_mul_open("mbm", "x.lut", NULL, -1, &m, &e), MTS_EINVAL);
    EXPECT_EQ(mts_front_mul_open("mbm", NULL, "bf16", 7, &m, &e), MTS_EINVAL);
    EXPECT_EQ(mts_front_mul_open_rule("conv1=mbm,chunk=0", &m, &e), MTS_EINVAL);
    EXPECT_EQ(mts_front_mul_open_int(NULL, 9, 0, "t", &m, &e), MTS_EINVAL);
    EXPECT_EQ(m, nullptr);
    int32_t t[16];
    for (int i = 0; i < 16; i++) t[i] = (i >> 2) * (i & 3);
    ASSERT_EQ(mts_front_mul_open_int(t, 2, 0, "t2", &m, &e), MTS_OK) << e.msg;
    mts_front_mul *bad = NULL;
    EXPECT_EQ(mts_front_mul_acc(m, "M7E4", NULL, -1, -1, 0, 0, &bad, &e), MTS_EINVAL);
    EXPECT_NE(std::string(e.msg).find("integer table"), std::string::npos) << e.msg;
    float a = 1, y;
    EXPECT_EQ(mts_front_mul_products(m, 1, &a, &a, &y, &e), MTS_EINVAL);
    EXPECT_EQ(mts_front_device_check(7, m, NULL, &e), MTS_EINVAL);
    EXPECT_EQ(mts_front_device_check(MTS_DEVICE_CUDA, m, NULL, &e), MTS_EUNSUPPORTED); // INT stays on the host or no GPU
    EXPECT_EQ(mts_front_dense_forward(m, 1, 0, 0, 4, 4, &a, &a, NULL, &y, &e), MTS_EINVAL);
    EXPECT_TRUE(mts_front_match("layer1.*", "layer1.0.conv1"));
    EXPECT_FALSE(mts_front_match("layer1.?", "layer1.0.conv1"));
    mts_front_mul_free(m);
}

} // namespace
