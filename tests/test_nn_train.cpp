// test_nn_train.cpp - the training engine end to end: models, optimizers,
// determinism across thread counts, checkpoints and bit-identical resume,
// data loaders and their errors, the train/test/data commands, and
// LeNet-300-100 on real MNIST (skipped when ./data/mnist is absent).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "mantis/hash.h"
#include "mantis/fpbits.h"
#include "mantis/nn.h"
#include "mantis/trace.h"
}
#include "test_nn_ctx.h"

namespace {

std::string tmpdir()
{
    char t[] = "/tmp/mantis-nn-XXXXXX";
    EXPECT_NE(mkdtemp(t), nullptr);
    return t;
}

void put_be32(std::string &s, uint32_t v)
{
    for (int i = 3; i >= 0; i--) s.push_back((char)(v >> (8 * i)));
}

void write_file(const std::string &path, const std::string &data)
{
    std::ofstream f(path, std::ios::binary);
    f << data;
}

std::string read_all(const std::string &path)
{
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// A tiny IDX pair of n 28x28 images whose label is the quadrant of a bright
// square, so a model can learn it.
void write_idx(const std::string &dir, const char *prefix, int n, uint64_t seed)
{
    std::string im, lb;
    put_be32(im, 0x803);
    put_be32(im, (uint32_t)n);
    put_be32(im, 28);
    put_be32(im, 28);
    put_be32(lb, 0x801);
    put_be32(lb, (uint32_t)n);
    mts_rng r = {seed};
    for (int i = 0; i < n; i++) {
        int label = (int)mts_rng_below(&r, 4);
        int y0 = (label / 2) * 14 + 3, x0 = (label % 2) * 14 + 3;
        for (int y = 0; y < 28; y++)
            for (int x = 0; x < 28; x++) {
                int on = y >= y0 && y < y0 + 8 && x >= x0 && x < x0 + 8;
                im.push_back((char)(on ? 200 + mts_rng_below(&r, 56) : mts_rng_below(&r, 40)));
            }
        lb.push_back((char)label);
    }
    write_file(dir + "/" + prefix + "-images-idx3-ubyte", im);
    write_file(dir + "/" + prefix + "-labels-idx1-ubyte", lb);
}

struct CliRun {
    int rc;
    std::string err;
    std::string out;
};

CliRun run_cli(const std::string &args)
{
    std::string e = "/tmp/mantis-nn-cli-err-" + std::to_string(getpid());
    std::string o = "/tmp/mantis-nn-cli-out-" + std::to_string(getpid());
    std::string cmd = std::string(MANTIS_BIN) + " " + args + " >" + o + " 2>" + e;
    int st = system(cmd.c_str());
    CliRun r{WIFEXITED(st) ? WEXITSTATUS(st) : -1, read_all(e), read_all(o)};
    unlink(e.c_str());
    unlink(o.c_str());
    return r;
}

mts_provider prov(mts_prov_kind k, int threads)
{
    mts_provider p;
    memset(&p, 0, sizeof p);
    p.kind = k;
    p.threads = threads;
    return p;
}

// In-memory data set of random images (for library-level training).
mts_dataset synth(int n, int c, int h, int w, uint64_t seed)
{
    mts_dataset d;
    d.n = n, d.c = c, d.h = h, d.w = w, d.classes = 4;
    d.x = (float *)malloc(sizeof(float) * n * c * h * w);
    d.y = (uint8_t *)malloc(n);
    mts_rng r = {seed};
    for (size_t i = 0; i < (size_t)n * c * h * w; i++) d.x[i] = mts_rng_uniform(&r) - 0.5f;
    for (int i = 0; i < n; i++) d.y[i] = (uint8_t)mts_rng_below(&r, 4);
    return d;
}

// A small conv net with every layer kind of the CNNs and a residual branch.
void small_net(mts_net *net, int batch, uint64_t seed)
{
    mts_err err;
    ASSERT_EQ(mts_net_init(net, "small", 1, 8, 8, &err), MTS_OK);
    int a = mts_net_conv(net, 4, 3, 1, 1, &err);
    ASSERT_GT(a, 0);
    ASSERT_GT(mts_net_bn(net, &err), 0);
    ASSERT_GT(mts_net_relu(net, &err), 0);
    ASSERT_GT(mts_net_conv(net, 4, 3, 1, 1, &err), 0);
    ASSERT_GT(mts_net_add(net, a, &err), 0);
    ASSERT_GT(mts_net_maxpool(net, 2, 2, &err), 0);
    ASSERT_GT(mts_net_avgpool(net, 2, 2, &err), 0);
    ASSERT_GT(mts_net_dense(net, 6, &err), 0);
    ASSERT_GT(mts_net_relu(net, &err), 0);
    ASSERT_GT(mts_net_dense(net, 4, &err), 0);
    ASSERT_EQ(mts_net_build(net, batch, seed, &err), MTS_OK) << err.msg;
}

void init_opt(mts_opt *o, const mts_net *net, mts_opt_kind k)
{
    memset(o, 0, sizeof *o);
    o->kind = k;
    o->lr = k == MTS_OPT_ADAM ? 1e-3f : 0.05f;
    o->momentum = 0.9f;
    o->wd = 1e-4f;
    o->beta1 = 0.9f, o->beta2 = 0.999f, o->eps = 1e-8f;
    mts_err err;
    ASSERT_EQ(mts_opt_init(o, net->nparam, &err), MTS_OK);
}

// ----------------------------------------------------------------- models

TEST(NnModels, BuiltInModelsHaveTheirParameterCounts)
{
    struct {
        const char *name;
        int c, h, w;
        size_t params;
    } cases[] = {
        {"lenet300", 1, 28, 28, 784 * 300 + 300 + 300 * 100 + 100 + 100 * 10 + 10},
        {"lenet5", 1, 28, 28, (6 * 25 + 6) + (16 * 6 * 25 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10)},
        {"mlp1024", 1, 28, 28, (784 * 1024 + 1024) + 2 * (1024 * 1024 + 1024) + (1024 * 10 + 10)},
    };
    for (auto &c : cases) {
        mts_net net;
        mts_err err;
        ASSERT_EQ(mts_nn_model_build(&net, c.name, c.c, c.h, c.w, 10, &err), MTS_OK) << err.msg;
        ASSERT_EQ(mts_net_build(&net, 1, 1, &err), MTS_OK);
        EXPECT_EQ(net.nparam, c.params) << c.name;
        EXPECT_EQ(mts_net_outsize(&net), 10);
        mts_net_free(&net);
    }
    mts_net net;
    mts_err err;
    EXPECT_NE(mts_nn_model_build(&net, "vgg", 1, 28, 28, 10, &err), MTS_OK);
    EXPECT_NE(std::string(err.msg).find("lenet5"), std::string::npos);
}

TEST(NnModels, ResNet20RunsOnCifarShapes)
{
    mts_net net;
    mts_err err;
    ASSERT_EQ(mts_nn_model_build(&net, "resnet20", 3, 32, 32, 10, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_net_build(&net, 2, 1, &err), MTS_OK);
    int convs = 0, adds = 0, bns = 0;
    for (int i = 0; i < net.n; i++) {
        convs += net.l[i].kind == MTS_L_CONV;
        adds += net.l[i].kind == MTS_L_ADD;
        bns += net.l[i].kind == MTS_L_BN;
    }
    auto conv = [](size_t ci, size_t co, size_t k) { return ci * co * k * k + co; };
    auto bn = [](size_t c) { return 2 * c; };
    size_t want = conv(3, 16, 3) + bn(16) + 6 * (conv(16, 16, 3) + bn(16)) +          // stem, stage 1
                  conv(16, 32, 3) + 5 * (conv(32, 32, 3) + bn(32)) + bn(32) + conv(16, 32, 1) + bn(32) + // stage 2
                  conv(32, 64, 3) + 5 * (conv(64, 64, 3) + bn(64)) + bn(64) + conv(32, 64, 1) + bn(64) + // stage 3
                  64 * 10 + 10;
    EXPECT_EQ(net.nparam, want);
    EXPECT_EQ(convs, 19 + 2); // 19 3x3 convs + 2 projection shortcuts
    EXPECT_EQ(adds, 9);
    EXPECT_EQ(bns, 21);
    std::vector<float> x(2 * 3 * 32 * 32, 0.25f), dl(2 * 10, 0.01f);
    mts_provider p = prov(MTS_PROV_NATIVE, 1);
    ASSERT_EQ(mts_net_forward(&net, NnCtx(&p, &p).get(), 1, 2, x.data(), &err), MTS_OK) << err.msg;
    EXPECT_EQ(mts_net_outsize(&net), 10);
    ASSERT_EQ(mts_net_backward(&net, NnCtx(&p, &p).get(), 2, x.data(), dl.data(), &err), MTS_OK);
    mts_net_free(&net);
}

// ------------------------------------------------------------- optimizers

TEST(NnOptim, SgdMomentumAndWeightDecay)
{
    mts_net net;
    mts_err err;
    ASSERT_EQ(mts_net_init(&net, "d", 1, 1, 2, &err), MTS_OK);
    ASSERT_GT(mts_net_dense(&net, 1, &err), 0);
    ASSERT_EQ(mts_net_build(&net, 1, 1, &err), MTS_OK);
    mts_opt o;
    init_opt(&o, &net, MTS_OPT_SGD);
    o.lr = 0.1f, o.momentum = 0.5f, o.wd = 0.01f;
    net.param[0] = 1.0f, net.param[1] = 2.0f, net.param[2] = 3.0f; // w0 w1 b
    net.grad[0] = 0.5f, net.grad[1] = 0.0f, net.grad[2] = 1.0f;
    mts_opt_step(&o, &net, o.lr);
    mts_opt_step(&o, &net, o.lr);
    // w0: v1 = .5 + .01*1 = .51, w = .949; v2 = .5*.51 + .5 + .01*.949 = .76449, w = .949 - .076449
    EXPECT_NEAR(net.param[0], 0.949 - 0.076449, 1e-6);
    // bias: no weight decay; v1 = 1, v2 = 1.5
    EXPECT_NEAR(net.param[2], 3.0 - 0.1 - 0.15, 1e-6);
    mts_opt_free(&o);
    mts_net_free(&net);
}

TEST(NnOptim, AdamFirstStepIsLrTimesSign)
{
    mts_net net;
    mts_err err;
    ASSERT_EQ(mts_net_init(&net, "d", 1, 1, 3, &err), MTS_OK);
    ASSERT_GT(mts_net_dense(&net, 1, &err), 0);
    ASSERT_EQ(mts_net_build(&net, 1, 1, &err), MTS_OK);
    mts_opt o;
    init_opt(&o, &net, MTS_OPT_ADAM);
    o.wd = 0;
    std::vector<float> before(net.param, net.param + net.nparam);
    net.grad[0] = 3.0f, net.grad[1] = -0.2f, net.grad[2] = 1e-3f, net.grad[3] = 0.0f;
    mts_opt_step(&o, &net, 0.01f);
    EXPECT_NEAR(net.param[0] - before[0], -0.01, 1e-6);
    EXPECT_NEAR(net.param[1] - before[1], 0.01, 1e-6);
    EXPECT_NEAR(net.param[2] - before[2], -0.01, 1e-4);
    EXPECT_EQ(net.param[3], before[3]);
    mts_opt_free(&o);
    mts_net_free(&net);
}

// The step reports a parameter it left inf or NaN (the trainer's divergence
// watch reads this instead of scanning every parameter after each batch): in
// a weight (decayed) or a bias, from the gradient or from an overflow, for
// SGD and Adam, and it stays set while the parameter stays non-finite.
TEST(NnOptim, StepReportsANonFiniteParameter)
{
    for (mts_opt_kind kind : {MTS_OPT_SGD, MTS_OPT_ADAM})
        for (int where = 0; where < 3; where++) { // weight 0, weight 37, the bias
            mts_net net;
            mts_err err;
            ASSERT_EQ(mts_net_init(&net, "d", 1, 1, 40, &err), MTS_OK);
            ASSERT_GT(mts_net_dense(&net, 1, &err), 0);
            ASSERT_EQ(mts_net_build(&net, 1, 1, &err), MTS_OK);
            ASSERT_EQ(net.nparam, 41u);
            size_t at = where == 0 ? 0 : where == 1 ? 37 : 40;
            mts_opt o;
            init_opt(&o, &net, kind);
            for (size_t i = 0; i < net.nparam; i++) net.grad[i] = 0.25f;
            mts_opt_step(&o, &net, 0.01f);
            EXPECT_EQ(o.nonfinite, 0) << kind << " " << where;
            net.grad[at] = NAN;
            mts_opt_step(&o, &net, 0.01f);
            EXPECT_EQ(o.nonfinite, 1) << kind << " " << where;
            EXPECT_TRUE(std::isnan(net.param[at]));
            net.grad[at] = 0.25f; // a finite gradient does not heal the parameter
            mts_opt_step(&o, &net, 0.01f);
            EXPECT_EQ(o.nonfinite, 1) << kind << " " << where;
            mts_opt_free(&o);
            if (kind == MTS_OPT_SGD) { // an overflow: a finite step to inf
                init_opt(&o, &net, kind);
                net.param[at] = 3e38f;
                net.grad[at] = -1e38f;
                mts_opt_step(&o, &net, 10.0f);
                EXPECT_TRUE(std::isinf(net.param[at])) << net.param[at];
                EXPECT_EQ(o.nonfinite, 1) << where;
                mts_opt_free(&o);
            }
            mts_net_free(&net);
        }
}

TEST(NnOptim, Schedules)
{
    mts_opt o;
    memset(&o, 0, sizeof o);
    o.lr = 0.1f;
    o.sched = MTS_SCHED_STEP;
    o.step_size = 2;
    o.gamma = 0.5f;
    EXPECT_FLOAT_EQ(mts_opt_lr(&o, 0), 0.1f);
    EXPECT_FLOAT_EQ(mts_opt_lr(&o, 1), 0.1f);
    EXPECT_FLOAT_EQ(mts_opt_lr(&o, 2), 0.05f);
    EXPECT_FLOAT_EQ(mts_opt_lr(&o, 5), 0.025f);
    o.sched = MTS_SCHED_COSINE;
    o.epochs = 4;
    EXPECT_FLOAT_EQ(mts_opt_lr(&o, 0), 0.1f);
    EXPECT_NEAR(mts_opt_lr(&o, 2), 0.05f, 1e-7);
    EXPECT_NEAR(mts_opt_lr(&o, 4), 0.0f, 1e-7);
}

// ------------------------------------------------------------ determinism

struct ThreadCase {
    const char *name;
    int lut, fmaq;
    mts_ste ste;
};

std::vector<float> train_steps(const ThreadCase &tc, int threads)
{
    mts_lut lut;
    memset(&lut, 0, sizeof lut);
    mts_provider p = prov(MTS_PROV_NATIVE, threads);
    mts_err err;
    if (tc.lut) {
        mts_mulop op;
        mts_format f = mts_format_e8(7);
        EXPECT_EQ(mts_mulop_model(&op, "mbm", &f, &err), MTS_OK);
        EXPECT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK);
        p.kind = MTS_PROV_LUT;
        p.lut = &lut;
    }
    mts_provider fwd = p;
    if (tc.fmaq) {
        EXPECT_EQ(mts_qfmt_parse("M4E3", 5, &fwd.qacc, &err), MTS_OK);
        fwd.qprod = fwd.qacc;
        fwd.fmaq = 1;
        fwd.chunk = 4;
    }
    mts_net net;
    small_net(&net, 8, 3);
    mts_opt o;
    init_opt(&o, &net, MTS_OPT_SGD);
    mts_dataset d = synth(24, 1, 8, 8, 9);
    mts_epoch_stats st;
    EXPECT_EQ(mts_train_epoch(&net, &o, NnCtx(&fwd, &p, tc.ste).get(), &d, d.n, 8, 5, 0, 0.05f, nullptr, nullptr, &st, &err), MTS_OK)
        << err.msg;
    std::vector<float> out(net.param, net.param + net.nparam);
    out.insert(out.end(), net.state, net.state + net.nstate);
    mts_dataset_free(&d);
    mts_opt_free(&o);
    mts_net_free(&net);
    mts_lut_free(&lut);
    return out;
}

TEST(NnDeterminism, SameBitsForAnyThreadCount)
{
    ThreadCase cases[] = {{"native", 0, 0, MTS_STE_IDENTITY},
                          {"lut", 1, 0, MTS_STE_IDENTITY},
                          {"lut+fmaq rec-of", 1, 1, MTS_STE_REC_OF},
                          {"native+fmaq imm-diff", 0, 1, MTS_STE_IMM_DIFF}};
    for (auto &tc : cases) {
        std::vector<float> a = train_steps(tc, 1), b = train_steps(tc, 2), c = train_steps(tc, 2);
        ASSERT_EQ(a.size(), b.size());
        EXPECT_EQ(memcmp(a.data(), b.data(), a.size() * 4), 0) << tc.name << ": 1 vs 2 threads";
        EXPECT_EQ(memcmp(b.data(), c.data(), b.size() * 4), 0) << tc.name << ": repeat";
    }
    // and the arithmetic matters: the runs differ between providers
    std::vector<float> n = train_steps(cases[0], 1), l = train_steps(cases[1], 1);
    EXPECT_NE(memcmp(n.data(), l.data(), n.size() * 4), 0);
}

// ------------------------------------------------------------ checkpoints

TEST(NnCheckpoint, ResumeIsBitIdentical)
{
    std::string dir = tmpdir(), path = dir + "/ck";
    mts_dataset d = synth(40, 1, 8, 8, 11);
    mts_provider p = prov(MTS_PROV_NATIVE, 1);
    mts_err err;
    static mts_ckpt_meta meta;
    auto epoch = [&](mts_net *net, mts_opt *o, int e) {
        mts_epoch_stats st;
        ASSERT_EQ(mts_train_epoch(net, o, NnCtx(&p, &p).get(), &d, d.n, 8, 77, e, mts_opt_lr(o, e), nullptr, nullptr, &st, &err),
                  MTS_OK);
    };
    for (mts_opt_kind k : {MTS_OPT_SGD, MTS_OPT_ADAM}) {
        mts_net a, b;
        mts_opt oa, ob;
        small_net(&a, 8, 5);
        init_opt(&oa, &a, k);
        epoch(&a, &oa, 0);
        epoch(&a, &oa, 1);
        epoch(&a, &oa, 2);

        small_net(&b, 8, 5);
        init_opt(&ob, &b, k);
        epoch(&b, &ob, 0);
        memset(&meta, 0, sizeof meta);
        strcpy(meta.config, "model=small\n");
        meta.epoch = 1;
        ASSERT_EQ(mts_ckpt_save(path.c_str(), &b, &ob, &meta, &err), MTS_OK) << err.msg;
        mts_opt_free(&ob);
        mts_net_free(&b);

        // a fresh process would rebuild from a different seed: the checkpoint must win
        small_net(&b, 8, 999);
        init_opt(&ob, &b, k); /* hyperparameters come from the command line, not the file */
        memset(&meta, 0, sizeof meta);
        ASSERT_EQ(mts_ckpt_load(path.c_str(), &b, &ob, &meta, &err), MTS_OK) << err.msg;
        EXPECT_EQ(meta.epoch, 1);
        EXPECT_STREQ(meta.config, "model=small\n");
        EXPECT_EQ(ob.kind, k);
        epoch(&b, &ob, 1);
        epoch(&b, &ob, 2);
        EXPECT_EQ(memcmp(a.param, b.param, a.nparam * 4), 0) << "optimizer " << k;
        EXPECT_EQ(memcmp(a.state, b.state, a.nstate * 4), 0);
        EXPECT_EQ(memcmp(oa.m, ob.m, a.nparam * 4), 0);
        mts_opt_free(&oa);
        mts_opt_free(&ob);
        mts_net_free(&a);
        mts_net_free(&b);
    }
    mts_dataset_free(&d);
}

TEST(NnCheckpoint, MalformedFilesAreRefused)
{
    std::string dir = tmpdir(), path = dir + "/ck";
    mts_net net;
    small_net(&net, 2, 1);
    mts_opt o;
    init_opt(&o, &net, MTS_OPT_SGD);
    static mts_ckpt_meta meta;
    memset(&meta, 0, sizeof meta);
    mts_err err;
    ASSERT_EQ(mts_ckpt_save(path.c_str(), &net, &o, &meta, &err), MTS_OK);
    std::string good = read_all(path);
    auto load_msg = [&](const std::string &bytes) {
        write_file(path, bytes);
        int rc = mts_ckpt_load(path.c_str(), &net, &o, &meta, &err);
        EXPECT_NE(rc, MTS_OK);
        return std::string(err.msg);
    };
    std::string bad = good;
    bad[0] = 'X';
    EXPECT_NE(load_msg(bad).find("magic"), std::string::npos);
    bad = good;
    bad[good.size() / 2] ^= 1;
    EXPECT_NE(load_msg(bad).find("checksum"), std::string::npos);
    EXPECT_NE(load_msg(good.substr(0, good.size() - 9)).find("truncated"), std::string::npos);
    bad = good;
    bad[8] = 9;
    EXPECT_NE(load_msg(bad).find("version"), std::string::npos);
    EXPECT_NE(mts_ckpt_load((dir + "/none").c_str(), &net, &o, &meta, &err), MTS_OK);
    // a checkpoint of another model
    write_file(path, good);
    mts_net other;
    ASSERT_EQ(mts_nn_model_build(&other, "lenet300", 1, 28, 28, 10, &err), MTS_OK);
    ASSERT_EQ(mts_net_build(&other, 1, 1, &err), MTS_OK);
    EXPECT_NE(mts_ckpt_load(path.c_str(), &other, nullptr, nullptr, &err), MTS_OK);
    EXPECT_NE(std::string(err.msg).find("parameters"), std::string::npos);
    mts_net_free(&other);
    mts_opt_free(&o);
    mts_net_free(&net);
}

// ------------------------------------------------------------------- data

TEST(NnData, IdxLoadsAndValidates)
{
    std::string dir = tmpdir();
    write_idx(dir, "train", 10, 1);
    std::string im = dir + "/train-images-idx3-ubyte", lb = dir + "/train-labels-idx1-ubyte";
    mts_dataset d;
    mts_err err;
    ASSERT_EQ(mts_idx_load(im.c_str(), lb.c_str(), &d, &err), MTS_OK) << err.msg;
    EXPECT_EQ(d.n, 10);
    EXPECT_EQ(d.h, 28);
    std::string raw = read_all(im);
    EXPECT_FLOAT_EQ(d.x[5], (uint8_t)raw[16 + 5] / 255.0f);
    EXPECT_EQ(d.y[3], (uint8_t)read_all(lb)[8 + 3]);
    mts_dataset_free(&d);

    std::string good_im = raw, good_lb = read_all(lb);
    auto msg = [&](const std::string &i, const std::string &l) {
        write_file(im, i);
        write_file(lb, l);
        EXPECT_NE(mts_idx_load(im.c_str(), lb.c_str(), &d, &err), MTS_OK);
        return std::string(err.msg);
    };
    std::string b = good_im;
    b[3] = 0x01;
    EXPECT_NE(msg(b, good_lb).find("magic 0x00000803"), std::string::npos);
    EXPECT_NE(msg(good_im.substr(0, good_im.size() - 1), good_lb).find("truncated"), std::string::npos);
    b = good_lb;
    b[7] = 9; // 9 labels for 10 images
    EXPECT_NE(msg(good_im, b).find("labels"), std::string::npos);
    b = good_lb;
    b[8] = 12;
    EXPECT_NE(msg(good_im, b).find("out of range"), std::string::npos);
    b = good_lb;
    b[3] = 0x03;
    EXPECT_NE(msg(good_im, b).find("magic 0x00000801"), std::string::npos);
}

TEST(NnData, MissingDataSaysHowToGetIt)
{
    mts_dataset d;
    mts_err err;
    EXPECT_NE(mts_dataset_load("mnist", "/nonexistent/mnist", 1, &d, &err), MTS_OK);
    EXPECT_NE(std::string(err.msg).find("mantis data fetch mnist"), std::string::npos) << err.msg;
    EXPECT_NE(mts_dataset_load("fashion-mnist", "/nonexistent/fashion-mnist", 0, &d, &err), MTS_OK);
    EXPECT_NE(std::string(err.msg).find("mantis data fetch fashion-mnist"), std::string::npos) << err.msg;
    EXPECT_NE(mts_dataset_load("cifar10", "/nonexistent/cifar", 1, &d, &err), MTS_OK);
    EXPECT_NE(std::string(err.msg).find("cifar.html"), std::string::npos) << err.msg;
    EXPECT_NE(mts_dataset_load("imagenet", "/x", 1, &d, &err), MTS_OK);
}

TEST(NnData, Cifar10SizeAndLabelChecks)
{
    std::string dir = tmpdir(), f = dir + "/test_batch.bin";
    std::string rec(10000 * 3073, '\x10');
    for (int i = 0; i < 10000; i++) rec[(size_t)i * 3073] = (char)(i % 10);
    write_file(f, rec);
    mts_dataset d;
    mts_err err;
    ASSERT_EQ(mts_dataset_load("cifar10", dir.c_str(), 0, &d, &err), MTS_OK) << err.msg;
    EXPECT_EQ(d.n, 10000);
    EXPECT_EQ(d.c, 3);
    EXPECT_EQ(d.y[13], 3);
    mts_dataset_free(&d);
    write_file(f, rec.substr(0, 3073 * 9999));
    EXPECT_NE(mts_dataset_load("cifar10", dir.c_str(), 0, &d, &err), MTS_OK);
    EXPECT_NE(std::string(err.msg).find("expected 30730000"), std::string::npos) << err.msg;
    rec[3073 * 5] = 11;
    write_file(f, rec);
    EXPECT_NE(mts_dataset_load("cifar10", dir.c_str(), 0, &d, &err), MTS_OK);
    EXPECT_NE(std::string(err.msg).find("out of range"), std::string::npos);
}

TEST(NnData, Sha256KnownVectors)
{
    uint8_t d[32];
    char hex[65];
    auto h = [&](const std::string &s) {
        mts_sha256(s.data(), s.size(), d);
        for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
        return std::string(hex);
    };
    EXPECT_EQ(h("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(h(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(h("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

// ---------------------------------------------------------------- the CLI

// Every built-in model has a recipe; what a caller gives wins setting by
// setting; the recipe's learning rate goes with its own optimizer only.
TEST(NnRecipe, DefaultsComeFromTheModelExplicitSettingsWin)
{
    std::string list = mts_nn_model_list();
    int models = 0;
    for (size_t a = 0; a < list.size();) {
        size_t b = list.find(", ", a);
        std::string m = list.substr(a, b == std::string::npos ? std::string::npos : b - a);
        mts_train_recipe r;
        mts_err err;
        EXPECT_EQ(mts_nn_model_recipe(m.c_str(), &r, &err), MTS_OK) << m;
        EXPECT_GT(r.lr, 0) << m;
        EXPECT_GT(r.batch, 0) << m;
        models++;
        a = b == std::string::npos ? list.size() : b + 2;
    }
    EXPECT_EQ(models, 6);
    mts_train_config c;
    mts_err err;
    mts_train_config_init(&c);
    c.model = "vit-tiny";
    ASSERT_EQ(mts_train_recipe_apply(&c, 0, &err), MTS_OK) << err.msg;
    EXPECT_EQ(c.opt, MTS_OPT_ADAM);
    EXPECT_EQ(c.lr, 0.002);
    EXPECT_EQ(c.sched, MTS_SCHED_COSINE);
    EXPECT_EQ(c.batch, 32);
    // an explicit lr and batch win; the rest is the recipe's
    mts_train_config_init(&c);
    c.model = "vit-tiny", c.lr = 5e-4, c.batch = 8;
    ASSERT_EQ(mts_train_recipe_apply(&c, MTS_GIVEN_LR | MTS_GIVEN_BATCH, &err), MTS_OK);
    EXPECT_EQ(c.opt, MTS_OPT_ADAM);
    EXPECT_EQ(c.lr, 5e-4);
    EXPECT_EQ(c.batch, 8);
    EXPECT_EQ(c.sched, MTS_SCHED_COSINE);
    // another optimizer without an lr: that optimizer's own default, not Adam's 0.002
    mts_train_config_init(&c);
    c.model = "vit-tiny", c.opt = MTS_OPT_SGD, c.sched = MTS_SCHED_CONST;
    ASSERT_EQ(mts_train_recipe_apply(&c, MTS_GIVEN_OPT | MTS_GIVEN_SCHED, &err), MTS_OK);
    EXPECT_EQ(c.opt, MTS_OPT_SGD);
    EXPECT_LT(c.lr, 0) << "the driver's SGD default";
    EXPECT_EQ(c.sched, MTS_SCHED_CONST);
    // the CNNs keep what they were measured with
    mts_train_config_init(&c);
    c.model = "lenet5";
    ASSERT_EQ(mts_train_recipe_apply(&c, 0, &err), MTS_OK);
    EXPECT_EQ(c.opt, MTS_OPT_SGD);
    EXPECT_EQ(c.lr, 0.01);
    EXPECT_EQ(c.momentum, 0.9);
    EXPECT_EQ(c.sched, MTS_SCHED_CONST);
    EXPECT_EQ(c.batch, 64);
    c.model = "nope";
    EXPECT_EQ(mts_train_recipe_apply(&c, 0, &err), MTS_EINVAL);
}

TEST(NnCli, TrainResumeTestAndErrors)
{
    std::string dir = tmpdir(), data = dir + "/mnist";
    mkdir(data.c_str(), 0777);
    write_idx(data, "train", 192, 21);
    write_idx(data, "t10k", 64, 22);
    std::string common = "--model lenet300 --data mnist --data-dir " + data +
                         " --batch 32 --seed 4 --mul mbm --man-bits 5 --threads 2";
    CliRun full = run_cli("train " + common + " --epochs 3 --json " + dir + "/full.json --checkpoint " + dir + "/ck1");
    ASSERT_EQ(full.rc, 0) << full.err;
    EXPECT_NE(full.err.find("epoch 3/3"), std::string::npos) << full.err;
    EXPECT_NE(full.err.find("mantis train: sgd lr 0.01 momentum 0.9, wd 0, constant schedule, batch 32\n"),
              std::string::npos) << full.err; // lenet300's recipe but the batch given
    CliRun help = run_cli("train --help");
    EXPECT_NE(help.out.find("vit-tiny  --opt adam --lr 0.002 --wd 0 --sched cosine --batch 32"), std::string::npos)
        << help.out;
    std::string js = read_all(dir + "/full.json");
    EXPECT_NE(js.find("\"samples_per_s\""), std::string::npos);
    EXPECT_NE(js.find("\"epoch\": 3"), std::string::npos);
    EXPECT_NE(js.find("lut mbm e8m5"), std::string::npos) << js;

    CliRun part = run_cli("train " + common + " --epochs 1 --checkpoint " + dir + "/ck2");
    ASSERT_EQ(part.rc, 0) << part.err;
    CliRun res = run_cli("train " + common + " --epochs 3 --resume --json " + dir + "/res.json --checkpoint " + dir + "/ck2");
    ASSERT_EQ(res.rc, 0) << res.err;
    EXPECT_NE(res.err.find("resuming after epoch 1"), std::string::npos) << res.err;
    EXPECT_EQ(full.out, res.out); // final test accuracy line

    // parameters, BN state and optimizer state of the two runs are identical
    mts_net a, b;
    mts_err err;
    ASSERT_EQ(mts_nn_model_build(&a, "lenet300", 1, 28, 28, 10, &err), MTS_OK);
    ASSERT_EQ(mts_nn_model_build(&b, "lenet300", 1, 28, 28, 10, &err), MTS_OK);
    ASSERT_EQ(mts_net_build(&a, 1, 1, &err), MTS_OK);
    ASSERT_EQ(mts_net_build(&b, 1, 2, &err), MTS_OK);
    mts_opt oa, ob;
    init_opt(&oa, &a, MTS_OPT_SGD);
    init_opt(&ob, &b, MTS_OPT_SGD);
    ASSERT_EQ(mts_ckpt_load((dir + "/ck1/checkpoint.mtsckpt").c_str(), &a, &oa, nullptr, &err), MTS_OK) << err.msg;
    ASSERT_EQ(mts_ckpt_load((dir + "/ck2/checkpoint.mtsckpt").c_str(), &b, &ob, nullptr, &err), MTS_OK) << err.msg;
    EXPECT_EQ(memcmp(a.param, b.param, a.nparam * 4), 0);
    EXPECT_EQ(memcmp(oa.m, ob.m, a.nparam * 4), 0);
    EXPECT_EQ(oa.t, ob.t);
    mts_opt_free(&oa);
    mts_opt_free(&ob);
    mts_net_free(&a);
    mts_net_free(&b);

    // resuming with other settings is refused
    CliRun other = run_cli("train " + common + " --lr 0.5 --epochs 3 --resume --checkpoint " + dir + "/ck2");
    EXPECT_EQ(other.rc, 2);
    EXPECT_NE(other.err.find("other settings"), std::string::npos) << other.err;

    // mantis test: same multiplier reproduces the run's accuracy; another one runs
    CliRun t = run_cli("test --checkpoint " + dir + "/ck1 --data-dir " + data);
    ASSERT_EQ(t.rc, 0) << t.err;
    std::string acc = full.out.substr(full.out.find("accuracy ") + 9, 6);
    EXPECT_NE(t.out.find("test accuracy " + acc), std::string::npos) << t.out << " vs " << full.out;
    CliRun t2 = run_cli("test --checkpoint " + dir + "/ck1 --data-dir " + data + " --mul fp32 --json " + dir + "/t.json");
    ASSERT_EQ(t2.rc, 0) << t2.err;
    EXPECT_NE(t2.out.find("native fp32"), std::string::npos) << t2.out;
    EXPECT_NE(read_all(dir + "/t.json").find("\"test_acc\""), std::string::npos);

    // errors: one line, exit 2 (the options) or 4 (a missing file: the environment's, docs/reliability.md)
    CliRun miss = run_cli("train --model lenet300 --data mnist --data-dir " + dir + "/nothing");
    EXPECT_EQ(miss.rc, 4);
    EXPECT_NE(miss.err.find("mantis train: "), std::string::npos);
    EXPECT_NE(miss.err.find("mantis data fetch mnist"), std::string::npos) << miss.err;
    EXPECT_EQ(std::count(miss.err.begin(), miss.err.end(), '\n'), 1) << miss.err;
    CliRun badm = run_cli("train --model nope --data mnist --data-dir " + data);
    EXPECT_EQ(badm.rc, 2);
    EXPECT_NE(badm.err.find("unknown model"), std::string::npos) << badm.err;
    CliRun bado = run_cli("train --model lenet300 --data mnist --ste sideways --data-dir " + data);
    EXPECT_EQ(bado.rc, 2);
    CliRun noc = run_cli("test --checkpoint " + dir + "/nothing");
    EXPECT_EQ(noc.rc, 4);
    CliRun dbad = run_cli("data fetch svhn");
    EXPECT_EQ(dbad.rc, 2);
    CliRun dchk = run_cli("data check mnist --dir " + data); // our synthetic files are not the real ones
    EXPECT_NE(dchk.rc, 0);
    EXPECT_NE(dchk.err.find("SHA-256"), std::string::npos) << dchk.err;
}

TEST(NnCli, FmaqSteRunsThroughTheCommand)
{
    std::string dir = tmpdir(), data = dir + "/mnist";
    mkdir(data.c_str(), 0777);
    write_idx(data, "train", 32, 31);
    write_idx(data, "t10k", 16, 32);
    CliRun r = run_cli("train --model lenet300 --data mnist --data-dir " + data +
                    " --epochs 1 --batch 16 --opt adam --acc M4E3 --acc-bias 5 --prod-bias 5 --no-underflow"
                    " --ste imm-diff --json " + dir + "/r.json");
    ASSERT_EQ(r.rc, 0) << r.err;
    std::string js = read_all(dir + "/r.json");
    EXPECT_NE(js.find("fmaq acc M4E3b5-noUF"), std::string::npos) << js;
    EXPECT_NE(js.find("\"ste\": \"imm-diff\""), std::string::npos) << js;
    // separate backward and test multipliers ("train with X, test with Y")
    CliRun xy = run_cli("train --model lenet300 --data mnist --data-dir " + data +
                        " --epochs 1 --batch 16 --mul mbm --mul-bwd fp32 --mul-test bf16 --json " + dir + "/xy.json");
    ASSERT_EQ(xy.rc, 0) << xy.err;
    js = read_all(dir + "/xy.json");
    EXPECT_NE(js.find("\"mul_fwd\": \"lut mbm bf16\""), std::string::npos) << js;
    EXPECT_NE(js.find("\"mul_bwd\": \"native fp32\""), std::string::npos) << js;
    EXPECT_NE(js.find("\"mul_test\": \"lut exact bf16\""), std::string::npos) << js;
    // the trace option on a LUT multiplier: significand kind, M-bit operands
    CliRun tr = run_cli("train --model lenet300 --data mnist --data-dir " + data +
                        " --epochs 1 --batch 16 --mul mbm --man-bits 6 --trace-operands " + dir +
                        "/op.trace --trace-samples 500");
    ASSERT_EQ(tr.rc, 0) << tr.err;
    mts_trace t;
    mts_err err;
    ASSERT_EQ(mts_trace_read((dir + "/op.trace").c_str(), &t, &err), MTS_OK) << err.msg;
    EXPECT_EQ(t.info.kind, (uint32_t)MTS_TRACE_SIG);
    EXPECT_EQ(t.info.width_a, 6u);
    EXPECT_GT(t.info.count, 100u);
    EXPECT_LE(t.info.count, 500u);
    mts_trace_free(&t);
}

// MANTIS_CPU_PROFILE: the run's JSON names its CPU GEMMs by shape and kernel
// family (mts_gemm_profile), and profiling changes no result.
TEST(NnCli, CpuGemmProfileInTheJson)
{
    std::string dir = tmpdir(), data = dir + "/mnist";
    mkdir(data.c_str(), 0777);
    write_idx(data, "train", 32, 41);
    write_idx(data, "t10k", 16, 42);
    const std::string args = "train --model lenet300 --data mnist --data-dir " + data + " --epochs 1 --batch 16 --mul mbm";
    CliRun plain = run_cli(args + " --json " + dir + "/plain.json");
    ASSERT_EQ(plain.rc, 0) << plain.err;
    setenv("MANTIS_CPU_PROFILE", "1", 1);
    CliRun prof = run_cli(args + " --json " + dir + "/prof.json");
    unsetenv("MANTIS_CPU_PROFILE");
    ASSERT_EQ(prof.rc, 0) << prof.err;
    std::string a = read_all(dir + "/plain.json"), b = read_all(dir + "/prof.json");
    EXPECT_EQ(a.find("cpu_gemm_profile"), std::string::npos) << a;
    size_t at = b.find("\"cpu_gemm_profile\": \"");
    ASSERT_NE(at, std::string::npos) << b;
    std::string line = b.substr(at, b.find('\n', at) - at);
    // the first layer's forward GEMM (16 x 300 over 784 inputs) through the LUT kernels, counted
    EXPECT_NE(line.find("x784"), std::string::npos) << line;
    EXPECT_NE(line.find(" lut"), std::string::npos) << line;
    EXPECT_NE(line.find(" calls "), std::string::npos) << line;
    auto loss = [](const std::string &j) { size_t p = j.find("\"train_loss\""); return j.substr(p, j.find(',', p) - p); };
    EXPECT_EQ(loss(a), loss(b));
    EXPECT_EQ(plain.out.substr(plain.out.rfind("test accuracy")), prof.out.substr(prof.out.rfind("test accuracy")));
}

// ------------------------------------------------------------------ traces

TEST(NnTrace, ReservoirIsUniformOverGemms)
{
    // two GEMMs streamed one after the other, the second with 3x the products:
    // a uniform sample holds about 1/4 from the first
    mts_nn_tracer t;
    mts_err err;
    mts_format f = mts_format_e8(7);
    ASSERT_EQ(mts_nn_tracer_init(&t, 4000, &f, MTS_TRACE_FLOAT, 3, &err), MTS_OK);
    mts_lut lut;
    mts_mulop op;
    ASSERT_EQ(mts_mulop_model(&op, "exact", &f, &err), MTS_OK);
    ASSERT_EQ(mts_lut_generate(&op, &lut, &err), MTS_OK);
    mts_provider p = prov(MTS_PROV_LUT, 1);
    p.lut = &lut;
    const int m = 20, n = 20, k = 50;
    std::vector<float> a1(m * k, 1.0f), b1(k * n, 1.0f), a2(m * k, 2.0f), b2(k * n, 1.0f), c(m * n);
    mts_nn_ctx tctx = mts_nn_ctx_cpu(&p, &p);
    tctx.tracer = &t;
    ASSERT_EQ(mts_nn_gemm(&tctx, &p, 0, 0, m, n, k, a1.data(), k, b1.data(), n, 0, c.data(), n, &err), MTS_OK);
    for (int r = 0; r < 3; r++)
        ASSERT_EQ(mts_nn_gemm(&tctx, &p, 0, 0, m, n, k, a2.data(), k, b2.data(), n, 0, c.data(), n, &err), MTS_OK);
    mts_provider nat = prov(MTS_PROV_NATIVE, 1); // other format: not traced
    ASSERT_EQ(mts_nn_gemm(&tctx, &nat, 0, 0, m, n, k, a1.data(), k, b1.data(), n, 0, c.data(), n, &err), MTS_OK);
    EXPECT_EQ(t.seen, 4ull * m * n * k);
    ASSERT_EQ(t.have, 4000u);
    int first = 0;
    for (size_t i = 0; i < t.have; i++) first += t.a[i] == mts_f2u(1.0f);
    EXPECT_NEAR(first / 4000.0, 0.25, 0.03);
    std::string dir = tmpdir(), path = dir + "/t.trace";
    ASSERT_EQ(mts_nn_tracer_write(&t, path.c_str(), &err), MTS_OK) << err.msg;
    mts_trace tr;
    ASSERT_EQ(mts_trace_read(path.c_str(), &tr, &err), MTS_OK) << err.msg;
    EXPECT_EQ(tr.info.count, 4000u);
    EXPECT_EQ(tr.info.width_a, 16u); // bf16 codes
    EXPECT_EQ(tr.a[0] == 0x3F80 || tr.a[0] == 0x4000, true);
    mts_trace_free(&tr);
    mts_nn_tracer_free(&t);
    mts_lut_free(&lut);
}

// --------------------------------------------------------------- real data

TEST(NnMnist, LeNet300OneEpochOn5000ImagesExceeds90Percent)
{
    std::string dir = std::string(MANTIS_SOURCE_DIR) + "/data/mnist";
    mts_dataset train, test;
    mts_err err;
    if (mts_dataset_load("mnist", dir.c_str(), 1, &train, &err) != MTS_OK)
        GTEST_SKIP() << "MNIST not in " << dir << " (run `mantis data fetch mnist`): " << err.msg;
    ASSERT_EQ(mts_dataset_load("mnist", dir.c_str(), 0, &test, &err), MTS_OK) << err.msg;
    mts_net net;
    ASSERT_EQ(mts_nn_model_build(&net, "lenet300", 1, 28, 28, 10, &err), MTS_OK);
    ASSERT_EQ(mts_net_build(&net, 16, 1, &err), MTS_OK);
    mts_opt o;
    init_opt(&o, &net, MTS_OPT_SGD);
    o.wd = 0;
    mts_provider p = prov(MTS_PROV_NATIVE, 0);
    mts_epoch_stats st;
    ASSERT_EQ(mts_train_epoch(&net, &o, NnCtx(&p, &p).get(), &train, 5000, 16, 1, 0, 0.01f, nullptr, nullptr, &st, &err), MTS_OK);
    double acc = 0;
    ASSERT_EQ(mts_evaluate(&net, NnCtx(&p, &p).get(), &test, test.n, &acc, &err), MTS_OK);
    EXPECT_GT(acc, 0.90) << "train loss " << st.train_loss;
    std::printf("LeNet-300-100, 5000 MNIST images, 1 epoch: test accuracy %.4f\n", acc);
    mts_opt_free(&o);
    mts_net_free(&net);
    mts_dataset_free(&train);
    mts_dataset_free(&test);
}

} // namespace
