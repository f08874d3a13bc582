// test_qat.cpp - integer multipliers trained the way the field trains them
// (docs/training.md, "Integer multipliers: quantization-aware training"):
// the quantizers, the range observer and per-channel weights against
// readable references; the gradient tables against their definition
// (finite differences on the table, the range edges included); the code
// GEMM's SIMD and scalar kernels against a per-product reference and the
// INT provider against mts_gemm_ref; `ste` with the exact table against
// fake-quantized training written out here, bit for bit; `table` with the
// exact table against `ste`; approximate signed and unsigned designs
// training without a non-finite value; the command line.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "mantis/fmath.h"
#include "mantis/fpbits.h"
#include "mantis/intmul.h"
#include "mantis/nn.h"
#include "mantis/qat.h"
}
#include "test_nn_ctx.h"

namespace {

// ------------------------------------------------------------- tables

struct Lut {
    mts_lut l;
    Lut() { memset(&l, 0, sizeof l); }
    ~Lut() { mts_lut_free(&l); }
};

struct BamCtx {
    int brk;
};
int32_t bam_fn(void *ctx, int32_t a, int32_t b)
{
    int brk = ((BamCtx *)ctx)->brk;
    int32_t s = 0;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            if (i + j >= brk) s += (((a >> i) & 1) & ((b >> j) & 1)) << (i + j);
    return s;
}

// The unsigned 8-bit broken-array multiplier of rtl/int8_bam.v.
void bam_lut(int brk, mts_lut *l)
{
    BamCtx c{brk};
    mts_err err;
    ASSERT_EQ(mts_lut_generate_int(8, 0, bam_fn, &c, "bam", l, &err), MTS_OK) << err.msg;
}

struct NoisyCtx {
    int bits;
    int32_t amp;
    int32_t scale; // products times scale / 16 (wider spans than 16 bits when > 16)
};
// A deterministic non-exact table: the exact product of the values, scaled,
// plus a hash-derived error in [-amp, amp].
int32_t noisy_fn(void *ctx, int32_t a, int32_t b)
{
    const NoisyCtx *c = (const NoisyCtx *)ctx;
    uint64_t h = (uint64_t)(uint32_t)a * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)b * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    int32_t e = c->amp ? (int32_t)(h % (uint64_t)(2 * c->amp + 1)) - c->amp : 0;
    return a * b * c->scale / 16 + e;
}
void noisy_lut(int bits, int sg, int32_t amp, int32_t scale, mts_lut *l)
{
    NoisyCtx c{bits, amp, scale};
    mts_err err;
    ASSERT_EQ(mts_lut_generate_int(bits, sg, noisy_fn, &c, "noisy", l, &err), MTS_OK) << err.msg;
}

int32_t value_of(uint32_t code, int bits, int sg)
{
    code &= (1u << bits) - 1u;
    return sg && (code >> (bits - 1)) ? (int32_t)code - (1 << bits) : (int32_t)code;
}
int32_t T(const mts_lut *l, uint32_t ca, uint32_t cb)
{
    uint32_t m = (1u << l->int_bits) - 1u;
    return (int32_t)l->entry[((ca & m) << l->int_bits) | (cb & m)];
}

// ------------------------------------------------ quantizer and observer

TEST(QatQuantizer, AffineAndSymmetricParameters)
{
    mts_qparam q;
    // unsigned: [-1, 3] -> scale 4/255, zp = 0 - rint(-1 / s) = 64 (63.75 rounds to 64)
    mts_qparam_affine(-1.0f, 3.0f, 8, 0, &q);
    EXPECT_EQ(q.qmin, 0);
    EXPECT_EQ(q.qmax, 255);
    EXPECT_EQ(q.scale, 4.0f / 255.0f);
    EXPECT_EQ(q.inv, 1.0f / q.scale);
    EXPECT_EQ(q.zp, (int32_t)(0.0f - nearbyintf(-1.0f / q.scale)));
    EXPECT_EQ(q.zp, 64);
    // a range without 0 is widened to hold it: [2, 5] -> [0, 5], zp = qmin
    mts_qparam_affine(2.0f, 5.0f, 8, 0, &q);
    EXPECT_EQ(q.zp, 0);
    EXPECT_EQ(q.scale, 5.0f / 255.0f);
    mts_qparam_affine(-5.0f, -2.0f, 8, 1, &q);
    EXPECT_EQ(q.zp, 127);
    EXPECT_EQ(q.qmin, -128);
    // empty or non-finite ranges: the smallest scale, 0 exact
    mts_qparam_affine(0.0f, 0.0f, 8, 0, &q);
    EXPECT_EQ(q.scale, FLT_EPSILON);
    EXPECT_EQ(q.zp, 0);
    mts_qparam_affine(NAN, INFINITY, 8, 1, &q); // [0, 0]: zp = qmin - rint(0 / s)
    EXPECT_EQ(q.scale, FLT_EPSILON);
    EXPECT_EQ(q.zp, -128);
    EXPECT_EQ(mts_q_real(&q, mts_q_value(&q, 0.0f)), 0.0f);
    // symmetric: narrow range [-127, 127], zp 0, scale max|r| / 127
    mts_qparam_symmetric(-0.5f, 2.54f, 8, &q);
    EXPECT_EQ(q.qmin, -127);
    EXPECT_EQ(q.qmax, 127);
    EXPECT_EQ(q.zp, 0);
    EXPECT_EQ(q.scale, 2.54f / 127.0f);
    mts_qparam_symmetric(-3.0f, 1.0f, 4, &q);
    EXPECT_EQ(q.qmax, 7);
    EXPECT_EQ(q.scale, 3.0f / 7.0f);
}

TEST(QatQuantizer, RoundsHalfToEvenClampsAndMasks)
{
    mts_qparam q = {0.5f, 2.0f, 10, 0, 255};
    EXPECT_EQ(mts_q_value(&q, 0.25f), 10 + 0);   // 0.5 -> 0 (even)
    EXPECT_EQ(mts_q_value(&q, 0.75f), 10 + 2);   // 1.5 -> 2
    EXPECT_EQ(mts_q_value(&q, -0.75f), 10 - 2);  // -1.5 -> -2
    EXPECT_EQ(mts_q_value(&q, 1.25f), 10 + 2);   // 2.5 -> 2
    EXPECT_EQ(mts_q_value(&q, -5.0f), 0);        // -10 + 10
    EXPECT_EQ(mts_q_value(&q, -5.5f), 0);        // clamped
    EXPECT_EQ(mts_q_value(&q, 1e30f), 255);
    EXPECT_EQ(mts_q_value(&q, INFINITY), 255);
    EXPECT_EQ(mts_q_value(&q, -INFINITY), 0);
    EXPECT_EQ(mts_q_value(&q, NAN), 10);
    EXPECT_EQ(mts_q_real(&q, 13), 1.5f);
    EXPECT_EQ(mts_q_real(&q, 10), 0.0f);
    // the STE passes what quantizes without clamping
    EXPECT_TRUE(mts_q_pass(&q, -5.0f));
    EXPECT_TRUE(mts_q_pass(&q, -5.2f));  // rounds to code 0
    EXPECT_FALSE(mts_q_pass(&q, -5.3f)); // rounds to -1: clipped
    EXPECT_TRUE(mts_q_pass(&q, 122.5f)); // 245 + 10 = 255
    EXPECT_FALSE(mts_q_pass(&q, 123.0f));
    EXPECT_FALSE(mts_q_pass(&q, NAN));
    EXPECT_FALSE(mts_q_pass(&q, INFINITY));
}

TEST(QatObserver, MovingAverageAgainstItsDefinition)
{
    float st[MTS_QAT_STATE] = {0, 0, 0};
    std::vector<std::vector<float>> batches = {
        {-1.0f, 2.0f, 0.5f}, {-3.0f, 1.0f, NAN}, {NAN, NAN}, {INFINITY, -0.5f, 0.25f}, {4.0f, -INFINITY, 4.0f}};
    // the reference, written out: finite min/max; the first sets, later ones move by 0.01 of the gap (FP32)
    float lo = 0, hi = 0;
    bool seen = false;
    for (auto &b : batches) {
        mts_qat_observe(st, b.data(), b.size());
        float bl = INFINITY, bh = -INFINITY;
        for (float v : b)
            if (std::isfinite(v)) bl = std::min(bl, v), bh = std::max(bh, v);
        if (bl <= bh) {
            if (!seen) lo = bl, hi = bh, seen = true;
            else lo = lo + 0.01f * (bl - lo), hi = hi + 0.01f * (bh - hi);
        }
        EXPECT_EQ(mts_f2u(st[0]), mts_f2u(lo));
        EXPECT_EQ(mts_f2u(st[1]), mts_f2u(hi));
        EXPECT_EQ(st[2], 1.0f);
    }
    // frozen use: the observed range decides, not the batch
    mts_qparam q, r;
    float x[2] = {-100.0f, 100.0f};
    mts_qat_act_param(st, x, 2, 8, 0, &q);
    mts_qparam_affine(st[0], st[1], 8, 0, &r);
    EXPECT_EQ(q.scale, r.scale);
    EXPECT_EQ(q.zp, r.zp);
    // never observed: the batch's own finite range
    float none[MTS_QAT_STATE] = {0, 0, 0};
    mts_qat_act_param(none, x, 2, 8, 1, &q);
    mts_qparam_affine(-100.0f, 100.0f, 8, 1, &r);
    EXPECT_EQ(q.scale, r.scale);
    EXPECT_EQ(q.zp, r.zp);
}

// Batches long enough for the observer's vector loops (AVX-512 16 lanes,
// AVX2 8), with NaN, infinities and signed zeros mixed in and the extremes
// anywhere (vector part or tail): the first observation is the batch's
// finite range, zeros as +0.
TEST(QatObserver, LongBatchesAgainstDefinition)
{
    uint32_t state = 12345;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    for (size_t n : {7u, 8u, 15u, 16u, 17u, 33u, 100u, 1001u})
        for (int trial = 0; trial < 20; trial++) {
            std::vector<float> b(n);
            for (auto &v : b) {
                uint32_t r = next() >> 8;
                v = (float)((int)(r % 2001) - 1000) / 64.0f;
                switch (r % 17) {
                case 0: v = NAN; break;
                case 1: v = INFINITY; break;
                case 2: v = -INFINITY; break;
                case 3: v = -0.0f; break;
                }
            }
            if (trial % 2) b[next() % n] = 1e30f, b[next() % n] = -1e30f; // extremes at random places
            if (trial % 5 == 4) // all nonnegative with signed zeros: lo is +0
                for (auto &v : b) v = std::isnan(v) ? v : v < 0 ? -0.0f : v;
            float lo = INFINITY, hi = -INFINITY;
            for (float v : b)
                if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
            float st[MTS_QAT_STATE] = {0, 0, 0};
            mts_qat_observe(st, b.data(), b.size());
            if (!(lo <= hi)) {
                EXPECT_EQ(st[2], 0.0f) << "n " << n;
                continue;
            }
            lo = lo == 0.0f ? 0.0f : lo;
            hi = hi == 0.0f ? 0.0f : hi;
            EXPECT_EQ(mts_f2u(st[0]), mts_f2u(lo)) << "n " << n << " trial " << trial;
            EXPECT_EQ(mts_f2u(st[1]), mts_f2u(hi)) << "n " << n << " trial " << trial;
        }
}

TEST(QatObserver, PerChannelWeightsAgainstReference)
{
    const int out = 5, in = 7;
    std::vector<float> w = rnd((size_t)out * in, 41, -2.0f, 2.0f);
    for (int i = 0; i < in; i++) w[(size_t)1 * in + i] = 0.0f;            // an all-zero channel
    for (int i = 0; i < in; i++) w[(size_t)2 * in + i] = 0.1f + 0.01f * i; // positive only
    w[(size_t)3 * in + 2] = NAN;                                         // left out of the range
    w[(size_t)4 * in + 5] = -INFINITY;
    for (int sg = 0; sg < 2; sg++) {
        std::vector<mts_qparam> q(out);
        mts_qat_weight_params(w.data(), out, in, 8, sg, q.data());
        for (int o = 0; o < out; o++) {
            float lo = INFINITY, hi = -INFINITY;
            for (int i = 0; i < in; i++) {
                float v = w[(size_t)o * in + i];
                if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
            }
            mts_qparam r;
            if (sg) {
                float m = std::max(std::fabs(lo), std::fabs(hi));
                r.scale = std::max(m / 127.0f, FLT_EPSILON);
                r.zp = 0;
            } else {
                mts_qparam_affine(lo, hi, 8, 0, &r);
            }
            EXPECT_EQ(q[o].scale, r.scale) << "channel " << o << " signed " << sg;
            EXPECT_EQ(q[o].zp, r.zp) << "channel " << o << " signed " << sg;
            EXPECT_EQ(q[o].qmin, sg ? -127 : 0);
        }
        EXPECT_EQ(q[1].scale, FLT_EPSILON);
        if (!sg) {
            EXPECT_EQ(q[2].zp, 0);
        }
    }
}

// ----------------------------------------------------- gradient tables

// The definition of qat.h, written out: moving average over a centred
// window shrunk at the ends, then central (one-sided at the ends)
// differences, along value order.
void grad_ref(const mts_lut *l, int h, int wrt_a, std::vector<float> &g)
{
    int n = l->int_bits, N = 1 << n, sg = l->int_signed;
    g.assign((size_t)N * N, 0.0f);
    auto code = [&](int t) { return (uint32_t)((sg ? t - N / 2 : t) & (N - 1)); };
    for (int line = 0; line < N; line++) {
        std::vector<double> S(N);
        for (int t = 0; t < N; t++) {
            int ht = std::min(h, std::min(t, N - 1 - t));
            int64_t sum = 0;
            for (int s = t - ht; s <= t + ht; s++)
                sum += wrt_a ? T(l, code(s), code(line)) : T(l, code(line), code(s));
            S[t] = (double)sum / (double)(2 * ht + 1);
        }
        for (int t = 0; t < N; t++) {
            double d = t == 0 ? S[1] - S[0] : t == N - 1 ? S[N - 1] - S[N - 2] : (S[t + 1] - S[t - 1]) / 2.0;
            uint32_t idx = wrt_a ? (code(t) << n) | code(line) : (code(line) << n) | code(t);
            g[idx] = (float)d;
        }
    }
}

TEST(QatGradTable, ExactTablesGiveTheOtherOperandEverywhere)
{
    int cases[][2] = {{8, 0}, {8, 1}, {4, 1}, {3, 0}, {1, 1}};
    for (auto &c : cases)
        for (int h : {0, 1, 16}) {
            Lut t;
            mts_err err;
            ASSERT_EQ(mts_intmul_exact_lut(c[0], c[1], &t.l, &err), MTS_OK);
            mts_int_grad g;
            ASSERT_EQ(mts_int_grad_build(&t.l, h, &g, &err), MTS_OK) << err.msg;
            int n = c[0], N = 1 << n, bad = 0;
            for (int ca = 0; ca < N && !bad; ca++)
                for (int cb = 0; cb < N && !bad; cb++) {
                    size_t i = ((size_t)ca << n) | (size_t)cb;
                    if (g.da[i] != (float)value_of(cb, n, c[1]) || g.db[i] != (float)value_of(ca, n, c[1])) {
                        ADD_FAILURE() << n << "-bit " << (c[1] ? "signed" : "unsigned") << " h " << h << ": codes (0x"
                                      << std::hex << ca << ", 0x" << cb << std::dec << ") da " << g.da[i] << " db "
                                      << g.db[i];
                        bad = 1;
                    }
                }
            mts_int_grad_free(&g);
        }
}

TEST(QatGradTable, ApproximateTablesEqualTheirDefinitionAndFiniteDifferences)
{
    for (int variant = 0; variant < 3; variant++) {
        Lut t;
        if (variant == 0) bam_lut(6, &t.l);
        else if (variant == 1) noisy_lut(8, 1, 300, 16, &t.l);
        else noisy_lut(6, 1, 20, 16, &t.l);
        if (HasFatalFailure()) return;
        int n = t.l.int_bits, sg = t.l.int_signed, N = 1 << n;
        for (int h : {0, 2, mts_int_grad_default_window(n)}) {
            mts_int_grad g;
            mts_err err;
            ASSERT_EQ(mts_int_grad_build(&t.l, h, &g, &err), MTS_OK);
            std::vector<float> ra, rb;
            grad_ref(&t.l, h, 1, ra);
            grad_ref(&t.l, h, 0, rb);
            for (size_t i = 0; i < (size_t)N * N; i++) {
                ASSERT_EQ(mts_f2u(g.da[i]), mts_f2u(ra[i])) << "variant " << variant << " h " << h << " index 0x"
                                                            << std::hex << i;
                ASSERT_EQ(mts_f2u(g.db[i]), mts_f2u(rb[i])) << "variant " << variant << " h " << h << " index 0x"
                                                            << std::hex << i;
            }
            if (h == 0) { // plain finite differences of neighbouring entries, value order, edges one-sided
                int lo = sg ? -N / 2 : 0, hi = lo + N - 1;
                for (int b : {lo, lo + 1, -1, 0, 1, hi - 1, hi})
                    for (int a : {lo, lo + 1, -1, 0, 1, hi - 1, hi}) {
                        if (a < lo || b < lo || a > hi || b > hi) continue;
                        double want = a == lo   ? T(&t.l, a + 1, b) - T(&t.l, a, b)
                                      : a == hi ? T(&t.l, a, b) - T(&t.l, a - 1, b)
                                                : (T(&t.l, a + 1, b) - T(&t.l, a - 1, b)) / 2.0;
                        size_t i = ((size_t)(a & (N - 1)) << n) | (size_t)(b & (N - 1));
                        EXPECT_EQ(g.da[i], (float)want) << "d/da at (" << a << ", " << b << ")";
                        double wb = b == lo   ? T(&t.l, a, b + 1) - T(&t.l, a, b)
                                    : b == hi ? T(&t.l, a, b) - T(&t.l, a, b - 1)
                                              : (T(&t.l, a, b + 1) - T(&t.l, a, b - 1)) / 2.0;
                        EXPECT_EQ(g.db[i], (float)wb) << "d/db at (" << a << ", " << b << ")";
                    }
            }
            mts_int_grad_free(&g);
        }
    }
    Lut f;
    mts_int_grad g;
    mts_err err;
    EXPECT_EQ(mts_int_grad_build(&f.l, 1, &g, &err), MTS_EINVAL);
}

// ------------------------------------------------------ the code GEMM

// The per-product reference: acc = sum of (T(a, b) - zb a - za b + za zb)
// over k, y = (float)((sa sb) acc), then gemm.h's beta rule.
float qref(const mts_lut *l, const mts_qopd *a, const mts_qopd *b, int i, int j, int k, float beta, float c)
{
    int n = l->int_bits, sg = l->int_signed;
    int32_t za = a->zp ? a->zp[i] : a->zp1, zb = b->zp ? b->zp[j] : b->zp1;
    int64_t acc = 0;
    for (int kk = 0; kk < k; kk++) {
        uint32_t ca = a->kmajor ? a->code[(size_t)kk * a->ld + i] : a->code[(size_t)i * a->ld + kk];
        uint32_t cb = b->kmajor ? b->code[(size_t)kk * b->ld + j] : b->code[(size_t)j * b->ld + kk];
        int64_t va = value_of(ca, n, sg), vb = value_of(cb, n, sg);
        acc += T(l, ca, cb) - zb * va - za * vb + (int64_t)za * zb;
    }
    double sa = a->scale ? a->scale[i] : a->scale1, sb = b->scale ? b->scale[j] : b->scale1;
    float y = (float)((sa * sb) * (double)acc);
    float v = beta == 0.0f ? y : (beta == 1.0f ? c : beta * c) + y;
    return v != v ? mts_u2f(0x7FC00000u) : v;
}

struct QOp {
    std::vector<uint8_t> code;
    std::vector<int32_t> zp;
    std::vector<double> sc;
    mts_qopd o;
};
void make_op(QOp &q, int rows, int k, int bits, int sg, int kmajor, int per_row, uint64_t seed)
{
    mts_rng r = {seed};
    size_t ld = kmajor ? (size_t)rows + 3 : (size_t)k + 5; // gaps
    q.code.assign(ld * (size_t)(kmajor ? k : rows) + 8, 0);
    uint32_t m = (1u << bits) - 1u;
    for (auto &c : q.code) {
        uint32_t v = mts_rng_below(&r, 10);
        c = (uint8_t)(v == 0 ? 0 : v == 1 ? m : v == 2 ? (1u << (bits - 1)) : mts_rng_below(&r, m + 1));
    }
    q.zp.resize(rows);
    q.sc.resize(rows);
    int lo = sg ? -(1 << (bits - 1)) : 0;
    for (int i = 0; i < rows; i++) {
        q.zp[i] = lo + (int)mts_rng_below(&r, 1u << bits);
        q.sc[i] = 1e-3 * (1.0 + mts_rng_uniform(&r));
    }
    q.o = {q.code.data(), ld, per_row ? q.zp.data() : nullptr, q.zp[0], per_row ? q.sc.data() : nullptr, q.sc[0],
           kmajor};
}

int32_t offset_fn(void *, int32_t a, int32_t b) { return a * b - 3; }

TEST(QatGemm, KernelsEqualThePerProductReference)
{
    Lut tabs[10];
    mts_err err;
    ASSERT_EQ(mts_intmul_exact_lut(8, 0, &tabs[0].l, &err), MTS_OK); // the split kernel, no error plane
    noisy_lut(8, 1, 500, 16, &tabs[1].l);  // signed, approximate, 16-bit span: the byte-plane kernel
    bam_lut(6, &tabs[2].l);                 // unsigned, approximate (error span 321): the byte-plane kernel
    noisy_lut(8, 0, 0, 18, &tabs[3].l);     // span above 65,535: the scalar kernel only
    noisy_lut(5, 1, 7, 16, &tabs[4].l);     // 5-bit
    ASSERT_EQ(mts_intmul_exact_lut(8, 1, &tabs[5].l, &err), MTS_OK); // signed exact: split, no plane
    noisy_lut(8, 0, 127, 16, &tabs[6].l);   // unsigned, error in [-127, 127]: split with an error plane
    noisy_lut(8, 1, 100, 16, &tabs[7].l);   // signed, the same
    bam_lut(4, &tabs[8].l);                 // unsigned, error span 49: split
    // signed, the exact product less 3: split, a constant error that is not 0 (AVX2: the vpmaddwd kernel)
    ASSERT_EQ(mts_lut_generate_int(8, 1, offset_fn, nullptr, "offset", &tabs[9].l, &err), MTS_OK);
    struct Shape {
        int m, n, k;
    } shapes[] = {{1, 1, 1}, {3, 70, 9}, {70, 3, 300}, {6, 300, 25}, {257, 5, 513}, {64, 130, 256}, {2, 600, 257}};
    uint64_t seed = 1;
    for (int ti = 0; ti < 10; ti++) {
        mts_qtab qt;
        ASSERT_EQ(mts_qtab_init(&qt, &tabs[ti].l, &err), MTS_OK) << err.msg;
        int split = ti == 0 || ti >= 5;
        EXPECT_EQ(qt.split, split) << "table " << ti;
        EXPECT_EQ(qt.dconst, ti == 0 || ti == 5 || ti == 9) << "table " << ti;
        EXPECT_EQ(qt.planes, ti == 1 || ti == 2 ? 3 : 0) << "table " << ti;
        int bits = tabs[ti].l.int_bits, sg = tabs[ti].l.int_signed;
        for (auto sh : shapes)
            for (int variant = 0; variant < 4; variant++) {
                int kmA = variant & 1, kmB = (variant >> 1) & 1, ct = variant == 1 || variant == 2;
                float beta = variant == 3 ? -0.5f : 0.0f;
                QOp a, b;
                make_op(a, sh.m, sh.k, bits, sg, kmA, variant != 0, seed++);
                make_op(b, sh.n, sh.k, bits, sg, kmB, 1, seed++);
                int ldc = (ct ? sh.m : sh.n) + 2;
                std::vector<float> c0 = rnd((size_t)(ct ? sh.n : sh.m) * ldc, seed++, -4.0f, 4.0f), want = c0;
                for (int i = 0; i < sh.m; i++)
                    for (int j = 0; j < sh.n; j++) {
                        float &dst = ct ? want[(size_t)j * ldc + i] : want[(size_t)i * ldc + j];
                        dst = qref(&tabs[ti].l, &a.o, &b.o, i, j, sh.k, beta, dst);
                    }
                for (int scalar = 0; scalar < 2; scalar++)
                    for (int threads : {1, 2}) {
                        std::vector<float> c = c0;
                        ASSERT_EQ(mts_qgemm(&qt, threads, scalar, ct, sh.m, sh.n, sh.k, &a.o, &b.o, beta, c.data(),
                                            ldc, &err),
                                  MTS_OK)
                            << err.msg;
                        for (size_t e = 0; e < c.size(); e++)
                            ASSERT_EQ(mts_f2u(c[e]), mts_f2u(want[e]))
                                << "table " << ti << " shape " << sh.m << "x" << sh.n << "x" << sh.k << " variant "
                                << variant << " scalar " << scalar << " threads " << threads << " element " << e
                                << ": got 0x" << std::hex << mts_f2u(c[e]) << " want 0x" << mts_f2u(want[e]);
                    }
            }
        mts_qtab_free(&qt);
    }
}

int32_t extreme_fn(void *, int32_t a, int32_t b) { return a == 0 && b == 0 ? 0 : 65535; }

// Every byte of every product at its largest, over k steps past the
// kernel's 256-step 16-bit sums: nothing may wrap.
TEST(QatGemm, SumsOfLargestEntriesDoNotWrap)
{
    Lut t;
    mts_err err;
    ASSERT_EQ(mts_lut_generate_int(8, 0, extreme_fn, nullptr, "extreme", &t.l, &err), MTS_OK);
    mts_qtab qt;
    ASSERT_EQ(mts_qtab_init(&qt, &t.l, &err), MTS_OK);
    ASSERT_EQ(qt.planes, 3);
    for (int k : {255, 256, 257, 511, 1300}) {
        std::vector<uint8_t> a((size_t)3 * k, 0xFF), b((size_t)70 * k, 0x80);
        a[0] = 0, b[0] = 0; // one product 0: tmin
        mts_qopd A = {a.data(), (size_t)k, nullptr, 0, nullptr, 1.0, 0}, B = {b.data(), (size_t)k, nullptr, 0, nullptr, 1.0, 0};
        std::vector<float> c(3 * 70), s(3 * 70);
        ASSERT_EQ(mts_qgemm(&qt, 1, 0, 0, 3, 70, k, &A, &B, 0.0f, c.data(), 70, &err), MTS_OK);
        ASSERT_EQ(mts_qgemm(&qt, 1, 1, 0, 3, 70, k, &A, &B, 0.0f, s.data(), 70, &err), MTS_OK);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 70; j++) {
                float want = (float)(65535.0 * k - (i == 0 && j == 0 ? 65535.0 : 0.0));
                ASSERT_EQ(c[(size_t)i * 70 + j], want) << "k " << k << " output " << i << "," << j;
                ASSERT_EQ(s[(size_t)i * 70 + j], want);
            }
    }
    mts_qtab_free(&qt);
}

// Exact products whose sum passes 2^31 (k = 40,000 steps of 255 * 255):
// the kernels' 32-bit partial sums must be widened in time.
TEST(QatGemm, ExactTableSumsPastThirtyTwoBits)
{
    Lut t;
    mts_err err;
    ASSERT_EQ(mts_intmul_exact_lut(8, 0, &t.l, &err), MTS_OK);
    mts_qtab qt;
    ASSERT_EQ(mts_qtab_init(&qt, &t.l, &err), MTS_OK);
    const int k = 40000, m = 2, n = 9;
    std::vector<uint8_t> a((size_t)m * k, 0xFF), b((size_t)n * k, 0xFF);
    mts_qopd A = {a.data(), (size_t)k, nullptr, 0, nullptr, 1.0, 0}, B = {b.data(), (size_t)k, nullptr, 0, nullptr, 1.0, 0};
    std::vector<float> c((size_t)m * n);
    ASSERT_EQ(mts_qgemm(&qt, 1, 0, 0, m, n, k, &A, &B, 0.0f, c.data(), n, &err), MTS_OK);
    float want = (float)(65025.0 * k);
    for (size_t e = 0; e < c.size(); e++) ASSERT_EQ(c[e], want) << "output " << e;
    mts_qtab_free(&qt);
}

// The INT provider of mts_gemm (per-call ranges) through the code GEMM,
// against mts_gemm_ref on shapes that cross the kernel's 256-column and
// 256-step blocks, with special operands.
TEST(QatGemm, IntProviderEqualsGemmRefOnLargeShapesAndSpecials)
{
    Lut tabs[2];
    mts_err err;
    bam_lut(6, &tabs[0].l);
    noisy_lut(8, 1, 900, 16, &tabs[1].l);
    struct Shape {
        int m, n, k, ta, tb;
    } shapes[] = {{300, 7, 270, 0, 1}, {5, 513, 40, 1, 0}, {64, 64, 600, 1, 1}, {1, 257, 1, 0, 0}};
    uint64_t seed = 77;
    for (auto &t : tabs)
        for (auto sh : shapes)
            for (int scalar = 0; scalar < 2; scalar++)
                for (int ct = 0; ct < 2; ct++) {
                    mts_provider p;
                    memset(&p, 0, sizeof p);
                    p.kind = MTS_PROV_INT;
                    p.lut = &t.l;
                    p.threads = 2;
                    p.scalar_only = scalar;
                    std::vector<float> A = rnd((size_t)sh.m * sh.k, seed++, -3.0f, 2.0f),
                                       B = rnd((size_t)sh.k * sh.n, seed++, -0.5f, 5.0f);
                    const float specials[3] = {NAN, INFINITY, -0.0f};
                    for (size_t e = 0; e < 3 && e < A.size(); e++) A[e] = specials[e];
                    B[0] = -INFINITY, B[B.size() - 1] = 1e30f;
                    int lda = sh.ta ? sh.m : sh.k, ldb = sh.tb ? sh.k : sh.n, ldc = ct ? sh.m : sh.n;
                    std::vector<float> C((size_t)sh.m * sh.n, 1.0f), R = C;
                    ASSERT_EQ((ct ? mts_gemm_t : mts_gemm)(&p, sh.ta, sh.tb, sh.m, sh.n, sh.k, A.data(), lda, B.data(),
                                                           ldb, 0.75f, C.data(), ldc, &err),
                              MTS_OK)
                        << err.msg;
                    std::vector<float> T0((size_t)sh.m * sh.n, 0.0f);
                    ASSERT_EQ(mts_gemm_ref(&p, sh.ta, sh.tb, sh.m, sh.n, sh.k, A.data(), lda, B.data(), ldb, 0.0f,
                                           T0.data(), sh.n, &err),
                              MTS_OK);
                    for (int i = 0; i < sh.m; i++)
                        for (int j = 0; j < sh.n; j++) {
                            float &r = ct ? R[(size_t)j * ldc + i] : R[(size_t)i * ldc + j];
                            r = 0.75f * r + T0[(size_t)i * sh.n + j];
                        }
                    for (size_t e = 0; e < C.size(); e++)
                        ASSERT_EQ(mts_f2u(C[e]), mts_f2u(R[e])) << sh.m << "x" << sh.n << "x" << sh.k << " scalar "
                                                                << scalar << " ct " << ct << " element " << e;
                }
}

// ------------------------------------------------------------- layers

mts_provider int_prov(const mts_lut *l, int threads = 1)
{
    mts_provider p;
    memset(&p, 0, sizeof p);
    p.kind = MTS_PROV_INT;
    p.lut = l;
    p.threads = threads;
    return p;
}

// The quantization-aware dense and conv forward against a readable
// per-product reference (scalar quantizer, table products, exact sums),
// with inputs that hit every branch of the vector quantizer: NaN, +-inf,
// huge values, halves, lanes past a multiple of 16.
TEST(QatLayers, ForwardEqualsPerProductReference)
{
    Lut tabs[2];
    bam_lut(6, &tabs[0].l);
    noisy_lut(8, 1, 700, 16, &tabs[1].l);
    for (auto &t : tabs) {
        int sg = t.l.int_signed;
        mts_provider p = int_prov(&t.l, 2);
        mts_nn_ctx ctx = mts_nn_ctx_cpu(&p, nullptr);
        mts_qparam qa;
        mts_qparam_affine(-1.5f, 3.0f, 8, sg, &qa);
        const int N = 5, in = 37, out = 19;
        std::vector<float> x = rnd((size_t)N * in, 11, -2.0f, 4.0f), w = rnd((size_t)out * in, 12), b = rnd(out, 13);
        x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = 1e30f, x[4] = qa.scale * 2.5f, x[20] = -qa.scale * 0.5f;
        w[5] = NAN;
        std::vector<mts_qparam> qw(out);
        mts_qat_weight_params(w.data(), out, in, 8, sg, qw.data());
        std::vector<float> y((size_t)N * out);
        mts_err err;
        ASSERT_EQ(mts_qdense_forward(&ctx, &qa, N, in, out, x.data(), w.data(), b.data(), y.data(), &err), MTS_OK)
            << err.msg;
        for (int n = 0; n < N; n++)
            for (int o = 0; o < out; o++) {
                int64_t acc = 0;
                for (int i = 0; i < in; i++) {
                    int32_t va = mts_q_value(&qa, x[(size_t)n * in + i]), vw = mts_q_value(&qw[o], w[(size_t)o * in + i]);
                    acc += T(&t.l, (uint32_t)va, (uint32_t)vw) - (int64_t)qw[o].zp * va - (int64_t)qa.zp * vw +
                           (int64_t)qa.zp * qw[o].zp;
                }
                float want = (float)(((double)qa.scale * (double)qw[o].scale) * (double)acc) + b[o];
                ASSERT_EQ(mts_f2u(y[(size_t)n * out + o]), mts_f2u(want)) << "dense " << n << "," << o;
            }
        // conv 2@3x3, stride 2, pad 1 on 3x9x7 (padding taps are the real 0)
        mts_conv_geom g = {3, 9, 7, 2, 3, 2, 1, 0, 0};
        ASSERT_EQ(mts_conv_geom_init(&g, &err), MTS_OK);
        const int K = 27, P = g.oh * g.ow;
        std::vector<float> cx = rnd((size_t)N * 3 * 9 * 7, 14, -1.0f, 3.0f), cwt = rnd((size_t)2 * K, 15), cb = rnd(2, 16);
        cx[7] = NAN, cx[8] = -INFINITY, cx[40] = 1e20f;
        std::vector<mts_qparam> qc(2);
        mts_qat_weight_params(cwt.data(), 2, K, 8, sg, qc.data());
        std::vector<float> cy((size_t)N * 2 * P);
        ASSERT_EQ(mts_qconv2d_forward(&ctx, &qa, &g, N, cx.data(), cwt.data(), cb.data(), cy.data(), &err), MTS_OK)
            << err.msg;
        for (int n = 0; n < N; n++)
            for (int co = 0; co < 2; co++)
                for (int oy = 0; oy < g.oh; oy++)
                    for (int ox = 0; ox < g.ow; ox++) {
                        int64_t acc = 0;
                        for (int ci = 0; ci < 3; ci++)
                            for (int ky = 0; ky < 3; ky++)
                                for (int kx = 0; kx < 3; kx++) {
                                    int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
                                    int32_t va = iy < 0 || iy >= 9 || ix < 0 || ix >= 7
                                                     ? qa.zp
                                                     : mts_q_value(&qa, cx[(((size_t)n * 3 + ci) * 9 + iy) * 7 + ix]);
                                    int32_t vw = mts_q_value(&qc[co], cwt[(size_t)co * K + (ci * 3 + ky) * 3 + kx]);
                                    acc += T(&t.l, (uint32_t)va, (uint32_t)vw) - (int64_t)qc[co].zp * va -
                                           (int64_t)qa.zp * vw + (int64_t)qa.zp * qc[co].zp;
                                }
                        float want = (float)(((double)qa.scale * (double)qc[co].scale) * (double)acc) + cb[co];
                        ASSERT_EQ(mts_f2u(cy[((size_t)n * 2 + co) * P + oy * g.ow + ox]), mts_f2u(want))
                            << "conv " << n << "," << co << "," << oy << "," << ox;
                    }
    }
}

// The approximate backward's weight gradient through an integer table at
// 1, 2 and 3 threads: the table quantizes each operand over its whole, so
// the column matrix must reach one GEMM whole, never in per-thread channel
// ranges (each would be quantized on its own range). Channel 2's inputs are
// 100x the others' so that a split changes the scale.
TEST(QatLayers, ConvIntWeightGradientSameAtAnyThreadCount)
{
    Lut t;
    noisy_lut(8, 1, 700, 16, &t.l);
    mts_err err;
    mts_conv_geom g = {3, 9, 7, 4, 3, 2, 1, 0, 0};
    ASSERT_EQ(mts_conv_geom_init(&g, &err), MTS_OK);
    const int N = 2, K = 27, P = g.oh * g.ow;
    std::vector<float> x = rnd((size_t)N * 3 * 9 * 7, 21, -1.0f, 3.0f), w = rnd((size_t)4 * K, 22),
                       dy = rnd((size_t)N * 4 * P, 23, -2.0f, 2.0f);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < 9 * 7; i++) x[((size_t)n * 3 + 2) * 9 * 7 + i] *= 100.0f;
    std::vector<uint32_t> want;
    for (int threads : {1, 2, 3}) {
        SCOPED_TRACE(threads);
        mts_provider p = int_prov(&t.l, threads);
        mts_nn_ctx ctx = mts_nn_ctx_cpu(&p, &p);
        std::vector<float> dx(x.size()), dw(w.size()), db(4);
        ASSERT_EQ(mts_conv2d_backward(&ctx, &g, N, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(), &err),
                  MTS_OK)
            << err.msg;
        std::vector<uint32_t> got;
        for (float v : dw) got.push_back(mts_f2u(v));
        for (float v : dx) got.push_back(mts_f2u(v));
        if (want.empty()) want = got;
        for (size_t e = 0; e < got.size(); e++)
            ASSERT_EQ(got[e], want[e]) << (e < dw.size() ? "dw element " : "dx element ")
                                       << (e < dw.size() ? e : e - dw.size()) << std::hex << ": got 0x" << got[e]
                                       << ", 1 thread 0x" << want[e];
    }
}

// ------------------------------------------------------------ training

// conv 3@3x3 pad 1 on 1x8x8 -> ReLU -> max pool 2 -> dense 4
void tiny_net(mts_net *net, int batch, uint64_t seed)
{
    mts_err err;
    ASSERT_EQ(mts_net_init(net, "tiny", 1, 8, 8, &err), MTS_OK);
    ASSERT_GT(mts_net_conv(net, 3, 3, 1, 1, &err), 0);
    ASSERT_GT(mts_net_relu(net, &err), 0);
    ASSERT_GT(mts_net_maxpool(net, 2, 2, &err), 0);
    ASSERT_GT(mts_net_dense(net, 4, &err), 0);
    ASSERT_EQ(mts_net_build(net, batch, seed, &err), MTS_OK) << err.msg;
}

void sgd(mts_opt *o, const mts_net *net)
{
    memset(o, 0, sizeof *o);
    o->kind = MTS_OPT_SGD;
    o->lr = 0.05f;
    o->momentum = 0.9f;
    mts_err err;
    ASSERT_EQ(mts_opt_init(o, net->nparam, &err), MTS_OK);
}

struct Batch {
    std::vector<float> x;
    std::vector<uint8_t> y;
};
// Inputs whose range grows with the seed's low bits: later batches exceed
// the observers' moving averages, so the quantizers clip (and the STE masks).
Batch batch_of(int N, uint64_t seed)
{
    Batch b;
    float g = 1.0f + 0.75f * (float)(seed % 8);
    b.x = rnd((size_t)N * 64, seed, -1.0f * g, 2.0f * g);
    mts_rng r = {seed + 1};
    for (int i = 0; i < N; i++) b.y.push_back((uint8_t)mts_rng_below(&r, 4));
    return b;
}

// One library training step (forward, loss, backward, SGD).
void lib_step(mts_net *net, mts_opt *o, const mts_nn_ctx *ctx, const Batch &b, int N)
{
    mts_err err;
    ASSERT_EQ(mts_net_forward(net, ctx, 1, N, b.x.data(), &err), MTS_OK) << err.msg;
    std::vector<float> dl((size_t)N * 4);
    int ok;
    mts_softmax_ce(N, 4, mts_net_output(net), b.y.data(), dl.data(), &ok);
    ASSERT_EQ(mts_net_backward(net, ctx, N, b.x.data(), dl.data(), &err), MTS_OK) << err.msg;
    mts_opt_step(o, net, o->lr);
}

// Fake-quantized training of tiny_net, written out: the same quantizers
// (observer, per-channel weights), the forward as the exact dot product of
// the fake-quantized values (sa sw sum (qa - za)(qw - zw), one rounding),
// the backward in FP32 on the dequantized operands in the GEMMs' order
// (sequential sums from +0), the STE mask on dx; bias sums and the
// elementwise layers through the library's own functions.
struct FakeQuant {
    mts_net net; // holds the parameters, gradients and observers
    int bits, sg;
    void weights(const float *w, int out, int in, std::vector<mts_qparam> &q, std::vector<int32_t> &cw,
                 std::vector<float> &wh)
    {
        q.resize(out);
        cw.resize((size_t)out * in);
        wh.resize((size_t)out * in);
        for (int o = 0; o < out; o++) {
            float lo = INFINITY, hi = -INFINITY;
            for (int i = 0; i < in; i++) lo = std::min(lo, w[(size_t)o * in + i]), hi = std::max(hi, w[(size_t)o * in + i]);
            if (sg) mts_qparam_symmetric(lo, hi, bits, &q[o]);
            else mts_qparam_affine(lo, hi, bits, 0, &q[o]);
            for (int i = 0; i < in; i++) {
                cw[(size_t)o * in + i] = mts_q_value(&q[o], w[(size_t)o * in + i]);
                wh[(size_t)o * in + i] = mts_q_real(&q[o], cw[(size_t)o * in + i]);
            }
        }
    }
    mts_qparam act(float *st, const float *x, size_t n, int train)
    {
        if (train) mts_qat_observe(st, x, n);
        mts_qparam q;
        mts_qparam_affine(st[0], st[1], bits, sg, &q);
        return q;
    }
    void step(mts_opt *o, const Batch &b, int N)
    {
        mts_layer *cv = &net.l[1], *rl = &net.l[2], *mp = &net.l[3], *dn = &net.l[4];
        float *p = net.param, *g = net.grad;
        const float *cw_ = p + cv->poff, *cb = cw_ + cv->nweight, *dw_ = p + dn->poff, *db = dw_ + dn->nweight;
        // conv forward (64 pixels, 9 taps, 3 channels)
        mts_qparam qa = act(net.state + cv->qoff, b.x.data(), (size_t)N * 64, 1);
        std::vector<mts_qparam> qw;
        std::vector<int32_t> cw;
        std::vector<float> wh;
        weights(cw_, 3, 9, qw, cw, wh);
        std::vector<float> xq((size_t)N * 64), col((size_t)9 * N * 64);
        for (size_t i = 0; i < xq.size(); i++) xq[i] = (float)(mts_q_value(&qa, b.x[i]) - qa.zp);
        mts_im2col_ref(&cv->g, N, xq.data(), col.data()); // centred codes, padding 0
        for (int n = 0; n < N; n++)
            for (int co = 0; co < 3; co++)
                for (int px = 0; px < 64; px++) {
                    int64_t acc = 0;
                    for (int k = 0; k < 9; k++)
                        acc += (int64_t)col[(size_t)k * N * 64 + (size_t)n * 64 + px] * (cw[(size_t)co * 9 + k] - qw[co].zp);
                    cv->y[((size_t)n * 3 + co) * 64 + px] =
                        (float)(((double)qa.scale * (double)qw[co].scale) * (double)acc) + cb[co];
                }
        mts_relu_forward((size_t)N * 192, cv->y, rl->y);
        mts_maxpool_forward(N, 3, 8, 8, 2, 2, rl->y, mp->y, mp->argmax);
        // dense forward (48 -> 4)
        mts_qparam qd = act(net.state + dn->qoff, mp->y, (size_t)N * 48, 1);
        std::vector<mts_qparam> qv;
        std::vector<int32_t> cv2;
        std::vector<float> vh;
        weights(dw_, 4, 48, qv, cv2, vh);
        for (int n = 0; n < N; n++)
            for (int o2 = 0; o2 < 4; o2++) {
                int64_t acc = 0;
                for (int i = 0; i < 48; i++)
                    acc += (int64_t)(mts_q_value(&qd, mp->y[(size_t)n * 48 + i]) - qd.zp) * (cv2[(size_t)o2 * 48 + i] - qv[o2].zp);
                dn->y[(size_t)n * 4 + o2] = (float)(((double)qd.scale * (double)qv[o2].scale) * (double)acc) + db[o2];
            }
        std::vector<float> dl((size_t)N * 4);
        int ok;
        mts_softmax_ce(N, 4, dn->y, b.y.data(), dl.data(), &ok);
        // dense backward: FP32 on x^ and w^, sums from +0 in order
        std::vector<float> xh((size_t)N * 48), dxp((size_t)N * 48, 0.0f);
        for (size_t i = 0; i < xh.size(); i++) xh[i] = mts_q_real(&qd, mts_q_value(&qd, mp->y[i]));
        float *gdw = g + dn->poff, *gdb = gdw + dn->nweight;
        for (int o2 = 0; o2 < 4; o2++) {
            for (int i = 0; i < 48; i++) {
                float s = 0.0f;
                for (int n = 0; n < N; n++) s = s + dl[(size_t)n * 4 + o2] * xh[(size_t)n * 48 + i];
                gdw[(size_t)o2 * 48 + i] = s;
            }
            mts_fm_sumf bs;
            mts_fm_sumf_init(&bs);
            for (int n = 0; n < N; n++) mts_fm_sumf_push(&bs, dl[(size_t)n * 4 + o2]);
            gdb[o2] = mts_fm_sumf_sum(&bs);
        }
        for (int n = 0; n < N; n++)
            for (int i = 0; i < 48; i++) {
                float s = 0.0f;
                for (int o2 = 0; o2 < 4; o2++) s = s + dl[(size_t)n * 4 + o2] * vh[(size_t)o2 * 48 + i];
                dxp[(size_t)n * 48 + i] = 0.0f + (mts_q_pass(&qd, mp->y[(size_t)n * 48 + i]) ? s : 0.0f);
            }
        std::vector<float> dr((size_t)N * 192), dc((size_t)N * 192);
        mts_maxpool_backward(N, 3, 8, 8, 2, 2, dxp.data(), mp->argmax, dr.data());
        mts_relu_backward((size_t)N * 192, rl->y, dr.data(), dc.data());
        // conv backward: dW = dY x col^T of x^ (sum over (n, pixel) in order); no dx (the input)
        float *gcw = g + cv->poff, *gcb = gcw + cv->nweight;
        std::vector<float> xhat((size_t)N * 64), colh((size_t)9 * N * 64);
        for (size_t i = 0; i < xhat.size(); i++) xhat[i] = mts_q_real(&qa, mts_q_value(&qa, b.x[i]));
        mts_im2col_ref(&cv->g, N, xhat.data(), colh.data());
        for (int co = 0; co < 3; co++) {
            for (int k = 0; k < 9; k++) {
                float s = 0.0f;
                for (int n = 0; n < N; n++)
                    for (int px = 0; px < 64; px++)
                        s = s + dc[((size_t)n * 3 + co) * 64 + px] * colh[(size_t)k * N * 64 + (size_t)n * 64 + px];
                gcw[(size_t)co * 9 + k] = s;
            }
            std::vector<float> d;
            for (int n = 0; n < N; n++)
                for (int px = 0; px < 64; px++) d.push_back(dc[((size_t)n * 3 + co) * 64 + px]);
            gcb[co] = mts_fm_sumf_array(d.data(), d.size());
        }
        mts_opt_step(o, &net, o->lr);
    }
};

TEST(QatTrain, SteWithTheExactTableIsFakeQuantizedTrainingBitForBit)
{
    for (int sg = 0; sg < 2; sg++) {
        Lut t;
        mts_err err;
        ASSERT_EQ(mts_intmul_exact_lut(8, sg, &t.l, &err), MTS_OK);
        const int N = 5;
        mts_net a;
        FakeQuant f;
        f.bits = 8, f.sg = sg;
        tiny_net(&a, N, 3);
        tiny_net(&f.net, N, 3);
        mts_opt oa, of;
        sgd(&oa, &a);
        sgd(&of, &f.net);
        mts_provider pi = int_prov(&t.l), pn = native_prov();
        mts_nn_ctx ctx = mts_nn_ctx_cpu(&pi, &pn);
        ctx.int_bwd = MTS_INT_BWD_STE;
        for (int s = 0; s < 4; s++) {
            Batch b = batch_of(N, 96 + s); // ranges 1x, 1.75x, 2.5x, 3.25x
            lib_step(&a, &oa, &ctx, b, N);
            f.step(&of, b, N);
            for (size_t i = 0; i < a.nparam; i++)
                ASSERT_EQ(mts_f2u(a.param[i]), mts_f2u(f.net.param[i]))
                    << (sg ? "signed" : "unsigned") << " step " << s << " parameter " << i << ": 0x" << std::hex
                    << mts_f2u(a.param[i]) << " vs 0x" << mts_f2u(f.net.param[i]);
            for (size_t i = 0; i < a.nstate; i++) ASSERT_EQ(mts_f2u(a.state[i]), mts_f2u(f.net.state[i])) << i;
        }
        EXPECT_EQ(a.nqstate, (size_t)2 * MTS_QAT_STATE);
        EXPECT_EQ(a.state[a.l[1].qoff + 2], 1.0f);
        mts_opt_free(&oa);
        mts_opt_free(&of);
        mts_net_free(&a);
        mts_net_free(&f.net);
    }
}

// Four steps of tiny_net with ctx; returns the parameters.
std::vector<float> train_tiny(const mts_nn_ctx *ctx, int steps = 4)
{
    const int N = 6;
    mts_net a;
    tiny_net(&a, N, 9);
    mts_opt o;
    sgd(&o, &a);
    for (int s = 0; s < steps; s++) lib_step(&a, &o, ctx, batch_of(N, 200 + s), N);
    std::vector<float> p(a.param, a.param + a.nparam);
    for (float v : p) EXPECT_TRUE(std::isfinite(v));
    mts_opt_free(&o);
    mts_net_free(&a);
    return p;
}

TEST(QatTrain, TableWithTheExactTableEqualsSte)
{
    for (int sg = 0; sg < 2; sg++) {
        Lut t;
        mts_err err;
        ASSERT_EQ(mts_intmul_exact_lut(8, sg, &t.l, &err), MTS_OK);
        mts_provider pi = int_prov(&t.l), pn = native_prov();
        mts_nn_ctx ste = mts_nn_ctx_cpu(&pi, &pn), tab = ste;
        tab.int_bwd = MTS_INT_BWD_TABLE;
        std::vector<float> a = train_tiny(&ste), b = train_tiny(&tab);
        for (size_t i = 0; i < a.size(); i++) ASSERT_EQ(mts_f2u(a[i]), mts_f2u(b[i])) << "parameter " << i;
        // an approximate table's gradients differ from the exact ones, and so do the weights
        Lut bam;
        bam_lut(6, &bam.l);
        mts_provider pb = int_prov(&bam.l);
        mts_nn_ctx s2 = mts_nn_ctx_cpu(&pb, &pn), t2 = s2;
        t2.int_bwd = MTS_INT_BWD_TABLE;
        std::vector<float> c = train_tiny(&s2), d = train_tiny(&t2);
        size_t differ = 0;
        for (size_t i = 0; i < c.size(); i++) differ += mts_f2u(c[i]) != mts_f2u(d[i]);
        EXPECT_GT(differ, c.size() / 2);
        // the SIMD sums of the table backward are the scalar ones, bit for bit
        mts_provider ps = pb;
        ps.scalar_only = 1;
        mts_nn_ctx t3 = t2;
        t3.fwd = &ps;
        std::vector<float> e = train_tiny(&t3);
        for (size_t i = 0; i < d.size(); i++) ASSERT_EQ(mts_f2u(d[i]), mts_f2u(e[i])) << "parameter " << i;
    }
}

// The approx backward is the GEMM of ctx->bwd on the raw operands, as before QAT.
TEST(QatTrain, ApproxBackwardIsThePerCallIntGemm)
{
    Lut t;
    bam_lut(6, &t.l);
    mts_provider pi = int_prov(&t.l);
    const int N = 4, in = 30, out = 7;
    std::vector<float> x = rnd((size_t)N * in, 1), w = rnd((size_t)out * in, 2), dy = rnd((size_t)N * out, 3);
    mts_nn_ctx ctx = mts_nn_ctx_cpu(&pi, &pi);
    ctx.int_bwd = MTS_INT_BWD_APPROX;
    mts_qparam qa;
    mts_qparam_affine(-1, 1, 8, 0, &qa);
    std::vector<float> dx(x.size()), dw(w.size()), db(out), rx(x.size()), rw(w.size()), rb(out);
    mts_err err;
    ASSERT_EQ(mts_qdense_backward(&ctx, &qa, N, in, out, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(), &err),
              MTS_OK);
    ASSERT_EQ(mts_dense_backward(&ctx, N, in, out, x.data(), w.data(), dy.data(), rx.data(), rw.data(), rb.data(), &err),
              MTS_OK);
    EXPECT_EQ(memcmp(dx.data(), rx.data(), dx.size() * 4), 0);
    EXPECT_EQ(memcmp(dw.data(), rw.data(), dw.size() * 4), 0);
    EXPECT_EQ(memcmp(db.data(), rb.data(), db.size() * 4), 0);
}

// LeNet-5 through an approximate unsigned (broken array) and signed table,
// with both backwards: a few steps, every parameter and loss finite, and
// the observers frozen by evaluation.
TEST(QatTrain, SignedAndUnsignedApproximateDesignsTrainFinite)
{
    Lut u, s;
    bam_lut(6, &u.l);
    noisy_lut(8, 1, 2000, 16, &s.l);
    for (const mts_lut *l : {(const mts_lut *)&u.l, (const mts_lut *)&s.l})
        for (int ib : {MTS_INT_BWD_STE, MTS_INT_BWD_TABLE}) {
            mts_net net;
            mts_err err;
            ASSERT_EQ(mts_nn_model_build(&net, "lenet5", 1, 28, 28, 10, &err), MTS_OK);
            ASSERT_EQ(mts_net_build(&net, 16, 5, &err), MTS_OK);
            mts_opt o;
            sgd(&o, &net);
            o.lr = 0.01f;
            mts_provider pi = int_prov(l, 2), pn = native_prov();
            mts_nn_ctx ctx = mts_nn_ctx_cpu(&pi, &pn);
            ctx.int_bwd = ib;
            for (int st = 0; st < 6; st++) {
                std::vector<float> x = rnd((size_t)16 * 784, 300 + st, -0.5f, 2.5f);
                std::vector<uint8_t> y(16);
                for (int i = 0; i < 16; i++) y[i] = (uint8_t)((i * 7 + st) % 10);
                ASSERT_EQ(mts_net_forward(&net, &ctx, 1, 16, x.data(), &err), MTS_OK) << err.msg;
                std::vector<float> dl(160);
                int ok;
                double loss = mts_softmax_ce(16, 10, mts_net_output(&net), y.data(), dl.data(), &ok);
                ASSERT_TRUE(std::isfinite(loss)) << "step " << st;
                ASSERT_EQ(mts_net_backward(&net, &ctx, 16, x.data(), dl.data(), &err), MTS_OK) << err.msg;
                mts_opt_step(&o, &net, o.lr);
                ASSERT_EQ(o.nonfinite, 0) << (l->int_signed ? "signed" : "unsigned") << " backward "
                                          << mts_int_bwd_name((mts_int_bwd)ib) << " step " << st;
            }
            std::vector<float> st0(net.state, net.state + net.nstate);
            std::vector<float> x = rnd((size_t)16 * 784, 999, -9.0f, 9.0f);
            ASSERT_EQ(mts_net_forward(&net, &ctx, 0, 16, x.data(), &err), MTS_OK);
            EXPECT_EQ(memcmp(st0.data(), net.state, st0.size() * 4), 0) << "evaluation moved an observer";
            mts_opt_free(&o);
            mts_net_free(&net);
        }
}

// A checkpoint written before the observers existed (its state holds only
// the BN statistics) still loads: the observers start unobserved.
TEST(QatCheckpoint, ObserversRoundTripAndOlderCheckpointsLoad)
{
    char dir[] = "/tmp/mantis-qat-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string path = std::string(dir) + "/c.mtsckpt";
    mts_net a, b;
    tiny_net(&a, 4, 1);
    tiny_net(&b, 4, 1);
    for (size_t i = 0; i < a.nstate; i++) a.state[i] = 0.25f * (float)(i + 1);
    mts_opt o;
    sgd(&o, &a);
    mts_ckpt_meta *m = (mts_ckpt_meta *)calloc(1, sizeof *m);
    mts_err err;
    ASSERT_EQ(mts_ckpt_save(path.c_str(), &a, &o, m, &err), MTS_OK);
    ASSERT_EQ(mts_ckpt_load(path.c_str(), &b, nullptr, nullptr, &err), MTS_OK) << err.msg;
    EXPECT_EQ(memcmp(a.state, b.state, a.nstate * 4), 0);
    // the same file as an older build wrote it: no observers (tiny_net has no BN: no state at all)
    size_t nst = a.nstate, nq = a.nqstate;
    a.nstate -= a.nqstate;
    a.nqstate = 0;
    ASSERT_EQ(mts_ckpt_save(path.c_str(), &a, &o, m, &err), MTS_OK);
    a.nstate = nst, a.nqstate = nq;
    ASSERT_EQ(mts_ckpt_load(path.c_str(), &b, nullptr, nullptr, &err), MTS_OK) << err.msg;
    for (size_t i = 0; i < b.nstate; i++) EXPECT_EQ(b.state[i], 0.0f);
    // any other state count is refused
    a.nstate -= 1;
    ASSERT_EQ(mts_ckpt_save(path.c_str(), &a, &o, m, &err), MTS_OK);
    a.nstate += 1;
    EXPECT_EQ(mts_ckpt_load(path.c_str(), &b, nullptr, nullptr, &err), MTS_EFORMAT);
    free(m);
    mts_opt_free(&o);
    mts_net_free(&a);
    mts_net_free(&b);
    unlink(path.c_str());
    rmdir(dir);
}

std::string slurp(const std::string &p)
{
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

int sh(const std::string &cmd) // runs a command line; its exit status
{
    int st = system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void put_be32(std::string &s, uint32_t v)
{
    for (int i = 3; i >= 0; i--) s.push_back((char)(v >> (8 * i)));
}

// n 28x28 images labelled by the quadrant of a bright square.
void write_idx(const std::string &dir, const char *prefix, int n, uint64_t seed)
{
    std::string im, lb;
    put_be32(im, 0x803), put_be32(im, (uint32_t)n), put_be32(im, 28), put_be32(im, 28);
    put_be32(lb, 0x801), put_be32(lb, (uint32_t)n);
    mts_rng r = {seed};
    for (int i = 0; i < n; i++) {
        int label = (int)mts_rng_below(&r, 4), y0 = (label / 2) * 14 + 3, x0 = (label % 2) * 14 + 3;
        for (int y = 0; y < 28; y++)
            for (int x = 0; x < 28; x++) {
                int on = y >= y0 && y < y0 + 8 && x >= x0 && x < x0 + 8;
                im.push_back((char)(on ? 200 + mts_rng_below(&r, 56) : mts_rng_below(&r, 40)));
            }
        lb.push_back((char)label);
    }
    std::ofstream(dir + "/" + prefix + "-images-idx3-ubyte", std::ios::binary) << im;
    std::ofstream(dir + "/" + prefix + "-labels-idx1-ubyte", std::ios::binary) << lb;
}

TEST(QatCli, IntBackwardOptionJsonAndResume)
{
    char dir[] = "/tmp/mantis-qatcli-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string d = dir, bin = MANTIS_BIN;
    write_idx(d, "train", 96, 5);
    write_idx(d, "t10k", 32, 6);
    ASSERT_EQ(sh(bin + " lutgen --int-exact 8 --signed -o " + d + "/s8.lut 2>/dev/null"), 0);
    std::string base = bin + " train --model lenet5 --data mnist --data-dir " + d + " --epochs 1 --batch 32 --lut " + d +
                       "/s8.lut --threads 1";
    EXPECT_EQ(sh(base + " --int-backward sideways >/dev/null 2>" + d + "/err"), 2);
    EXPECT_NE(slurp(d + "/err").find("expected ste, table or approx"), std::string::npos) << slurp(d + "/err");
    for (const char *ib : {"ste", "table", "approx"}) {
        std::string j = d + "/" + ib + ".json";
        int rc = sh(base + " --int-backward " + ib + " --json " + j + " --checkpoint " + d + "/ck-" + ib +
                    " >/dev/null 2>" + d + "/err");
        EXPECT_TRUE(rc == 0 || rc == 3) << ib << ": " << slurp(d + "/err");
        EXPECT_NE(slurp(j).find(std::string("\"int_backward\": \"") + ib + "\""), std::string::npos) << slurp(j);
        EXPECT_NE(slurp(d + "/err").find(std::string(ib) + " backward"), std::string::npos);
    }
    // the backward reaches the layers: approx (per-call table GEMMs) trains other weights than ste
    auto loss = [&](const char *ib) {
        std::string t = slurp(d + "/" + ib + ".json");
        size_t p = t.find("\"train_loss\"");
        return p == std::string::npos ? std::string("none") : t.substr(p, 30);
    };
    EXPECT_NE(loss("ste"), loss("approx"));
    EXPECT_EQ(loss("ste"), loss("table")); // the exact table's gradients are the STE's
    // the default is ste, and the backward GEMMs then run in native FP32
    std::string j = d + "/default.json";
    ASSERT_EQ(sh(base + " --json " + j + " >/dev/null 2>&1"), 0);
    EXPECT_NE(slurp(j).find("\"int_backward\": \"ste\""), std::string::npos);
    EXPECT_NE(slurp(j).find("\"mul_bwd\": \"native fp32\""), std::string::npos) << slurp(j);
    auto final_acc = [&](const std::string &f) { std::string t = slurp(f); return t.substr(t.find("\"final_test_acc\"")); };
    EXPECT_EQ(final_acc(j), final_acc(d + "/ste.json"));
    // a float run says nothing of an integer backward
    ASSERT_EQ(sh(bin + " train --model lenet5 --data mnist --data-dir " + d + " --epochs 1 --batch 32 --threads 1 --json " +
                 d + "/f.json >/dev/null 2>&1"),
              0);
    EXPECT_EQ(slurp(d + "/f.json").find("int_backward"), std::string::npos);
    // resuming with another backward is refused
    EXPECT_EQ(sh(base + " --epochs 2 --int-backward table --checkpoint " + d + "/ck-ste --resume >/dev/null 2>" + d +
                 "/err"),
              2);
    EXPECT_NE(slurp(d + "/err").find("other settings"), std::string::npos) << slurp(d + "/err");
    sh("rm -rf " + d);
}

} // namespace
