// Mantissa LUTs: generation, AMSim identity with the models across the
// exponent grid, refusal of exponent-dependent models, the file format's
// error classes, and peers' table formats.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "mantis/amsim.h"
#include "mantis/binio.h"
#include "mantis/fpbits.h"
#include "mantis/lut.h"
#include "mantis/mul.h"
#include "ref_float.h"

namespace {

std::string hex(uint32_t x) {
    char b[16];
    snprintf(b, sizeof b, "%08x", x);
    return b;
}

// Exponent pairs (biased, E = 8) whose sums cover every overflow and
// underflow boundary for adjustments -2..+1, and the normal middle.
std::vector<std::pair<int, int>> exponent_grid() {
    std::vector<std::pair<int, int>> g;
    for (int s = -131; s <= 131; s++) {  // unbiased sum of exponents
        bool edge = (s <= -122) || (s >= 123) || (s >= -1 && s <= 1);
        if (!edge) continue;
        int ea = s / 2, eb = s - ea;
        g.push_back({ea + 127, eb + 127});
        if (s > -126 && s < 126) g.push_back({(s > 0 ? 127 : -126) + 127, s - (s > 0 ? 127 : -126) + 127});
    }
    return g;
}

const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x7F800000u, 0xFF800000u,
                             0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x00800000u, 0x7F7FFFFFu, 0x3F800000u};

// Checks lut+AMSim == model for every mantissa pair over the grid, plus the
// special operands against every mantissa of the other operand.
void expect_identity(const mts_mulop &op, const mts_lut &lut) {
    const int M = op.fmt.M;
    const uint32_t n = 1u << M;
    auto grid = exponent_grid();
    long long bad = 0;
    uint32_t first_a = 0, first_b = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : bad)
    for (long long ma = 0; ma < (long long)n; ma++)
        for (uint32_t mb = 0; mb < n; mb++)
            for (size_t k = 0; k < grid.size(); k++) {
                uint32_t a = (uint32_t)grid[k].first << 23 | (uint32_t)ma << (23 - M) | (k & 1 ? 0x80000000u : 0);
                uint32_t b = (uint32_t)grid[k].second << 23 | mb << (23 - M) | (k & 2 ? 0x80000000u : 0);
                if (op.fn(&op, a, b) != mts_amsim(&lut, a, b)) {
#pragma omp critical
                    if (!bad) { first_a = a; first_b = b; }
                    bad++;
                }
            }
    EXPECT_EQ(bad, 0) << op.name << " M=" << M << " first mismatch " << hex(first_a) << " * " << hex(first_b)
                      << ": model " << hex(op.fn(&op, first_a, first_b)) << " lut "
                      << hex(mts_amsim(&lut, first_a, first_b));
    for (uint32_t s : specials)
        for (uint32_t m = 0; m < n; m++)
            for (uint32_t e : {1u, 127u, 254u}) {
                uint32_t x = e << 23 | m << (23 - M);
                ASSERT_EQ(hex(op.fn(&op, s, x)), hex(mts_amsim(&lut, s, x))) << hex(s) << " * " << hex(x);
                ASSERT_EQ(hex(op.fn(&op, x, s)), hex(mts_amsim(&lut, x, s))) << hex(x) << " * " << hex(s);
            }
}

void make_lut(const char *model, int M, mts_mulop *op, mts_lut *lut) {
    mts_format f = mts_format_e8(M);
    mts_err err;
    ASSERT_EQ(mts_mulop_model(op, model, &f, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_generate(op, lut, &err), MTS_OK) << err.msg;
}

TEST(Lut, ExactIdentityEveryMantissaPairM1To11) {
    for (int M = 1; M <= 11; M++) {
        mts_mulop op;
        mts_lut lut;
        make_lut("exact", M, &op, &lut);
        expect_identity(op, lut);
        mts_lut_free(&lut);
    }
}

TEST(Lut, ApproximateModelsIdentity) {
    for (const char *model : {"trunc", "mitchell", "mbm", "exact-wide"})
        for (int M : {3, 5, 7, 10}) {
            mts_mulop op;
            mts_lut lut;
            make_lut(model, M, &op, &lut);
            expect_identity(op, lut);
            mts_lut_free(&lut);
        }
}

TEST(Lut, FastPathEqualsGenericAmsim) {
    mts_mulop op;
    mts_lut lut;
    make_lut("mbm", 7, &op, &lut);
    ref::Rng r(11);
    for (int i = 0; i < 2000000; i++) {
        uint32_t a = r.u32(), b = r.u32();
        if (i % 4 == 0) a = specials[r.next() % 12];
        ASSERT_EQ(hex(mts_amsim_e8(lut.entry, 7, a, b)), hex(mts_amsim(&lut, a, b))) << hex(a) << " " << hex(b);
    }
    mts_lut_free(&lut);
}

// A significand below 1.0 and an exact zero must be representable (the paper's
// carry bit cannot): a model returning (1.a)(1.b)/4, or 0 when a == b.
uint32_t quarter_or_zero(const mts_mulop *op, uint32_t a, uint32_t b) {
    mts_mul_in in;
    if (mts_mul_classify(&op->fmt, a, b, &in)) return in.special;
    if (in.ma == in.mb) return in.sign;
    uint64_t sig = ((1ull << op->fmt.M) | in.ma) * ((1ull << op->fmt.M) | in.mb);
    return mts_mul_pack(&op->fmt, in.sign, in.e, sig, 2 * op->fmt.M + 2, MTS_OUT_FULL);
}

TEST(Lut, BelowOneAndZeroProductsRepresentable) {
    mts_mulop op = {quarter_or_zero, nullptr, mts_format_e8(5), "quarter", 0};
    mts_lut lut;
    mts_err err;
    ASSERT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK) << err.msg;
    EXPECT_EQ(lut.entry[0] & MTS_LUT_ZERO, MTS_LUT_ZERO);
    EXPECT_EQ(mts_lut_adj(lut.entry[1]), -2);
    expect_identity(op, lut);
    mts_lut_free(&lut);
}

// A model whose mantissa depends on the exponent must be refused, naming a pair.
uint32_t exp_dependent(const mts_mulop *op, uint32_t a, uint32_t b) {
    mts_mul_in in;
    if (mts_mul_classify(&op->fmt, a, b, &in)) return in.special;
    int F;
    uint64_t sig = ((1ull << op->fmt.M) | in.ma) * ((1ull << op->fmt.M) | in.mb);
    F = 2 * op->fmt.M;
    if (in.e > 40 && in.ma == 3) sig += 1;  // a defect that only shows at large exponents
    return mts_mul_pack(&op->fmt, in.sign, in.e, sig, F, MTS_OUT_FULL);
}

TEST(Lut, ExponentDependentModelRefused) {
    mts_mulop op = {exp_dependent, nullptr, mts_format_e8(4), "expdep", 0};
    mts_lut lut;
    mts_err err;
    ASSERT_EQ(mts_lut_generate(&op, &lut, &err), MTS_ENOTLUT);
    std::string msg = err.msg;
    EXPECT_NE(msg.find("not LUT-representable"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expdep"), std::string::npos) << msg;
    // The message names an input pair; check the named pair really differs.
    unsigned x, y, want;
    ASSERT_EQ(sscanf(msg.c_str(), "expdep is not LUT-representable: %x * %x = %x", &x, &y, &want), 3) << msg;
    EXPECT_EQ(exp_dependent(&op, x, y), want);
    EXPECT_EQ((x >> (23 - 4)) & 15u, 3u);
}

TEST(Lut, SaveLoadRoundTrip) {
    mts_mulop op;
    mts_lut lut, back;
    make_lut("mbm", 6, &op, &lut);
    std::string p = tmpdir() + "/mbm6.lut";
    mts_err err;
    ASSERT_EQ(mts_lut_save(&lut, p.c_str(), &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_lut_load(p.c_str(), &back, &err), MTS_OK) << err.msg;
    EXPECT_EQ(back.kind, MTS_LUT_FLOAT);
    EXPECT_EQ(back.fmt.M, 6);
    EXPECT_EQ(back.fmt.E, 8);
    EXPECT_STREQ(back.model, "mbm");
    ASSERT_EQ(back.n, lut.n);
    for (size_t i = 0; i < lut.n; i++) ASSERT_EQ(back.entry[i], lut.entry[i]);
    mts_lut_free(&back);
    mts_lut_free(&lut);
}

std::vector<uint8_t> read_all(const std::string &p) {
    std::ifstream f(p, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
void write_all(const std::string &p, const std::vector<uint8_t> &b) {
    std::ofstream f(p, std::ios::binary);
    f.write((const char *)b.data(), (std::streamsize)b.size());
}

// Every malformed-file class gives its own message, and no crash.
TEST(Lut, MalformedFilesEachGiveTheirError) {
    mts_mulop op;
    mts_lut lut;
    make_lut("exact", 3, &op, &lut);
    std::string good = tmpdir() + "/good.lut", bad = tmpdir() + "/bad.lut";
    mts_err err;
    ASSERT_EQ(mts_lut_save(&lut, good.c_str(), &err), MTS_OK);
    mts_lut_free(&lut);
    const std::vector<uint8_t> g = read_all(good);
    auto fix_hcrc = [](std::vector<uint8_t> &b) {
        mts_put_le32(&b[60], 0);
        mts_put_le32(&b[60], mts_crc32(0, b.data(), 128));
    };
    struct Case {
        const char *what;
        std::vector<uint8_t> bytes;
    };
    std::vector<Case> cases;
    cases.push_back({"not a Mantis LUT file", {'h', 'e', 'l', 'l', 'o', '\n'}});
    cases.push_back({"truncated header", std::vector<uint8_t>(g.begin(), g.begin() + 40)});
    {
        auto b = g;
        mts_put_le32(&b[8], 99);
        fix_hcrc(b);
        cases.push_back({"unsupported LUT format version 99", b});
    }
    {
        auto b = g;
        b[70] ^= 1;  // model name byte, header CRC not fixed
        cases.push_back({"header checksum mismatch", b});
    }
    {
        auto b = g;
        mts_put_le64(&b[48], 63);
        fix_hcrc(b);
        cases.push_back({"header says 63 entries", b});
    }
    cases.push_back({"truncated payload", std::vector<uint8_t>(g.begin(), g.end() - 5)});
    {
        auto b = g;
        b.push_back(0);
        cases.push_back({"size mismatch", b});
    }
    {
        auto b = g;
        b[200] ^= 0x40;
        cases.push_back({"payload checksum mismatch", b});
    }
    {
        auto b = g;
        mts_put_le32(&b[16], 7);
        fix_hcrc(b);
        cases.push_back({"unknown table kind 7", b});
    }
    {
        auto b = g;
        mts_put_le32(&b[32], 30);
        fix_hcrc(b);
        cases.push_back({"invalid float format", b});
    }
    for (const Case &c : cases) {
        write_all(bad, c.bytes);
        mts_lut out;
        int rc = mts_lut_load(bad.c_str(), &out, &err);
        EXPECT_EQ(rc, MTS_EFORMAT) << c.what;
        EXPECT_NE(std::string(err.msg).find(c.what), std::string::npos) << "expected '" << c.what << "', got '"
                                                                          << err.msg << "'";
        EXPECT_NE(std::string(err.msg).find(bad), std::string::npos) << err.msg;  // names the file
    }
    mts_lut out;
    EXPECT_EQ(mts_lut_load((tmpdir() + "/missing.lut").c_str(), &out, &err), MTS_EIO);
    EXPECT_NE(std::string(err.msg).find("missing.lut"), std::string::npos);
}

TEST(Lut, ApproxTrainRoundTripAndReject) {
    mts_mulop op;
    mts_lut lut, back;
    make_lut("mitchell", 7, &op, &lut);
    std::string p = tmpdir() + "/MIT_7.bin";
    mts_err err;
    ASSERT_EQ(mts_lut_export_approxtrain(&lut, p.c_str(), &err), MTS_OK) << err.msg;
    auto bytes = read_all(p);
    ASSERT_EQ(bytes.size(), 16384u);
    // independent decode of one entry: 1.0 * 1.5 -> mantissa 0.5, no carry
    EXPECT_EQ(bytes[(0 << 7) | 64], 64);
    int one = 1;
    ASSERT_EQ(mts_lut_import_approxtrain(p.c_str(), 7, &one, &back, &err), MTS_OK) << err.msg;
    for (size_t i = 0; i < lut.n; i++) ASSERT_EQ(back.entry[i], lut.entry[i]) << i;
    mts_lut_free(&back);
    // 4-byte entries (older ApproxTrain revisions) import the same
    std::vector<uint8_t> wide(4 * lut.n);
    for (size_t i = 0; i < lut.n; i++)
        mts_put_le32(&wide[4 * i], (uint32_t)mts_lut_adj(lut.entry[i]) << 31 | (lut.entry[i] & MTS_LUT_MAN));
    write_all(p, wide);
    int any = 0;
    ASSERT_EQ(mts_lut_import_approxtrain(p.c_str(), 7, &any, &back, &err), MTS_OK) << err.msg;
    EXPECT_EQ(any, 4);  // 65536 bytes at M=7: 1-byte entries cannot hold M=8, so only 4-byte fits
    for (size_t i = 0; i < lut.n; i++) ASSERT_EQ(back.entry[i], lut.entry[i]) << i;
    mts_lut_free(&back);
    mts_lut_free(&lut);
    // wrong size, and a table ApproxTrain cannot hold (a zero product)
    write_all(p, std::vector<uint8_t>(100));
    any = 0;
    EXPECT_EQ(mts_lut_import_approxtrain(p.c_str(), 7, &any, &back, &err), MTS_EFORMAT);
    EXPECT_NE(std::string(err.msg).find("16384"), std::string::npos) << err.msg;
    mts_mulop q = {quarter_or_zero, nullptr, mts_format_e8(5), "quarter", 0};
    ASSERT_EQ(mts_lut_generate(&q, &lut, &err), MTS_OK);
    EXPECT_EQ(mts_lut_export_approxtrain(&lut, p.c_str(), &err), MTS_EUNSUPPORTED);
    mts_lut_free(&lut);
}

// The entry size is never guessed: 4*2^(2M) bytes are 4-byte entries at M or
// 1-byte entries at M+1, so such a size needs the caller to say which.
TEST(Lut, ApproxTrainLayoutIsGivenOrUnambiguous) {
    mts_mulop op;
    mts_lut lut, back;
    make_lut("mitchell", 7, &op, &lut);
    std::string p = tmpdir() + "/MIT_7b.bin";
    mts_err err;
    ASSERT_EQ(mts_lut_export_approxtrain(&lut, p.c_str(), &err), MTS_OK) << err.msg;  // 16384 bytes
    for (int M : {6, 7}) {
        int eb = 0;
        EXPECT_EQ(mts_lut_import_approxtrain(p.c_str(), M, &eb, &back, &err), MTS_EINVAL) << M;
        std::string msg = err.msg;
        EXPECT_NE(msg.find("16384 1-byte entries (M=7)"), std::string::npos) << msg;
        EXPECT_NE(msg.find("4096 4-byte entries (M=6)"), std::string::npos) << msg;
        EXPECT_NE(msg.find("--entry-bytes"), std::string::npos) << msg;
        EXPECT_EQ(eb, 0);
    }
    // read as 4-byte entries at M=6, the 1-byte table has bits no such entry has
    int four = 4;
    EXPECT_EQ(mts_lut_import_approxtrain(p.c_str(), 6, &four, &back, &err), MTS_EFORMAT);
    EXPECT_NE(std::string(err.msg).find("outside carry"), std::string::npos) << err.msg;
    // an explicit size must match the file exactly
    four = 4;
    EXPECT_EQ(mts_lut_import_approxtrain(p.c_str(), 7, &four, &back, &err), MTS_EFORMAT);
    EXPECT_NE(std::string(err.msg).find("16384 4-byte ApproxTrain entries at M=7 take 65536 bytes"),
              std::string::npos)
        << err.msg;
    int one = 1;
    EXPECT_EQ(mts_lut_import_approxtrain(p.c_str(), 8, &one, &back, &err), MTS_EINVAL);
    // a size no layout has at M says bytes and entries apart
    int eb = 0;
    EXPECT_EQ(mts_lut_import_approxtrain(p.c_str(), 5, &eb, &back, &err), MTS_EFORMAT);
    EXPECT_NE(std::string(err.msg).find("16384 bytes: an ApproxTrain LUT at M=5 has 1024 entries: 1024 bytes of "
                                        "1-byte entries or 4096 bytes of 4-byte entries"),
              std::string::npos)
        << err.msg;
    // 1-byte entries at M=1 (4 bytes) fit no 4-byte layout: inferred
    write_all(p, std::vector<uint8_t>{0x00, 0x01, 0x01, 0x80});
    eb = 0;
    ASSERT_EQ(mts_lut_import_approxtrain(p.c_str(), 1, &eb, &back, &err), MTS_OK) << err.msg;
    EXPECT_EQ(eb, 1);
    EXPECT_EQ(back.entry[3], 1u << 24);  // 1.5 * 1.5 -> carry, mantissa 0
    EXPECT_EQ(back.entry[1], 1u << 22);  // 1.0 * 1.5 -> mantissa .1
    mts_lut_free(&back);
    // all zero: every product exactly 1.0, what a blank file holds; refused in both layouts
    for (int bytes : {1, 4}) {
        write_all(p, std::vector<uint8_t>((size_t)bytes << 14));
        eb = bytes;
        EXPECT_EQ(mts_lut_import_approxtrain(p.c_str(), 7, &eb, &back, &err), MTS_EFORMAT) << bytes;
        EXPECT_NE(std::string(err.msg).find("every entry is 0"), std::string::npos) << err.msg;
    }
    mts_lut_free(&lut);
}

int32_t exact(void *, int32_t a, int32_t b) { return a * b; }

TEST(Lut, IntegerTablesExactAndEightBitRoundTrip) {
    for (int sgn = 0; sgn < 2; sgn++) {
        mts_lut lut, back;
        mts_err err;
        ASSERT_EQ(mts_lut_generate_int(8, sgn, exact, nullptr, "exact8", &lut, &err), MTS_OK);
        ASSERT_EQ(lut.n, 65536u);
        for (int a = 0; a < 256; a++)
            for (int b = 0; b < 256; b++) {
                int va = sgn && a > 127 ? a - 256 : a, vb = sgn && b > 127 ? b - 256 : b;
                ASSERT_EQ((int32_t)lut.entry[a << 8 | b], va * vb) << a << " " << b;
            }
        std::string p = tmpdir() + "/mul8.bin", l = tmpdir() + "/mul8.lut";
        ASSERT_EQ(mts_lut_export_8bit(&lut, p.c_str(), &err), MTS_OK) << err.msg;
        auto bytes = read_all(p);
        ASSERT_EQ(bytes.size(), 131072u);
        EXPECT_EQ(bytes[2 * (200 << 8 | 3)] | bytes[2 * (200 << 8 | 3) + 1] << 8, sgn ? (uint16_t)(-56 * 3) : 600);
        ASSERT_EQ(mts_lut_import_8bit(p.c_str(), sgn, &back, &err), MTS_OK) << err.msg;
        for (size_t i = 0; i < 65536; i++) ASSERT_EQ(back.entry[i], lut.entry[i]);
        ASSERT_EQ(mts_lut_save(&back, l.c_str(), &err), MTS_OK);
        mts_lut_free(&back);
        ASSERT_EQ(mts_lut_load(l.c_str(), &back, &err), MTS_OK) << err.msg;
        EXPECT_EQ(back.kind, MTS_LUT_INT);
        EXPECT_EQ(back.int_signed, sgn);
        for (size_t i = 0; i < 65536; i++) ASSERT_EQ(back.entry[i], lut.entry[i]);
        mts_lut_free(&back);
        mts_lut_free(&lut);
    }
}

}  // namespace
