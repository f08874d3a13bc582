// test_flow_gpu.cpp - the flow and `mantis bench train` on a GPU, under the
// CUDA emulation (gpu/emu/README.md): linked only into test_gpu_emu, whose
// MANTIS_BIN is mantis-gpuemu, the CLI over the emulated device. Nothing
// here is run on a GPU. MTS_GPUEMU_DEVICES=0 takes the device away from a
// child, for the no-GPU answers.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

std::vector<std::string> lines_of(const std::string &text, const std::string &needle)
{
    std::vector<std::string> v;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        if (l.find(needle) != std::string::npos) v.push_back(l);
    return v;
}

std::string replace_all(std::string s, const std::string &a, const std::string &b)
{
    for (size_t p = s.find(a); p != std::string::npos; p = s.find(a, p + b.size())) s.replace(p, a.size(), b);
    return s;
}

// `mantis-gpuemu ARGS` with env (VAR=VALUE ...) set.
CliResult run_env(const std::string &env, const std::string &args)
{
    std::string out = tmpdir() + "/env-out", err = tmpdir() + "/env-err";
    int st = sh("env " + env + " " + MANTIS_BIN + " " + args + " </dev/null >" + out + " 2>" + err);
    return {st, slurp(out), slurp(err)};
}

// A dry run of the default flow (flows/default.flow, no sweep, no designs:
// the baselines' steps) into d/OUT.
struct DryFlow {
    std::string d;
    DryFlow()
    {
        d = tmpdir() + "/flow-gpu";
        sh("rm -rf " + d + " && mkdir -p " + d + "/designs " + d + "/data/mnist " + d + "/data/fashion-mnist");
    }
    CliResult run(const std::string &out, const std::string &extra, const std::string &env = "MTS_GPUEMU_SEED=1")
    {
        return run_env(env, "flow --dry-run --sweep none --designs " + d + "/designs --data-dir " + d +
                                "/data --out " + d + "/" + out + " " + extra);
    }
};

} // namespace

// device = auto (the default) finds the emulated device: every training of
// the default configuration gets --device cuda and the GPU profile's sizes;
// --profile none keeps the CPU's sizes on the GPU; --device cpu, or no
// device, gives exactly the CPU's commands (the same step keys, so the same
// results); cuda without a device is one line.
TEST(FlowGpu, AutoFindsTheDeviceAndPicksTheGpuProfile)
{
    DryFlow f;
    CliResult au = f.run("auto", "");
    ASSERT_EQ(au.status, 0) << au.err;
    EXPECT_NE(au.out.find(", gpu profile (auto), trainings on cuda: Mantis CUDA emulation"), std::string::npos)
        << au.out;
    auto trains = lines_of(au.out, "' 'train' ");
    ASSERT_EQ(trains.size(), 12u) << au.out; // 2 baselines x 2 models x 3 seeds
    EXPECT_EQ(lines_of(au.out, "' 'train' '--mul' 'fp32' '--man-bits' '23' '--model' 'lenet5' '--data' "
                               "'fashion-mnist'").size(), 3u) << au.out;
    for (auto &l : trains) {
        EXPECT_NE(l.find("'--device' 'cuda'"), std::string::npos) << l;
        EXPECT_NE(l.find("'--epochs' '5'"), std::string::npos) << l;
        EXPECT_EQ(l.find("'--subset'"), std::string::npos) << "the whole training set: " << l;
    }
    for (auto &l : lines_of(au.out, "' 'synth' ")) EXPECT_EQ(l.find("--device"), std::string::npos) << l;

    CliResult none = f.run("none", "--profile none");
    ASSERT_EQ(none.status, 0) << none.err;
    trains = lines_of(none.out, "' 'train' ");
    ASSERT_EQ(trains.size(), 12u) << none.out;
    for (auto &l : trains) {
        EXPECT_NE(l.find("'--device' 'cuda'"), std::string::npos) << l;
        EXPECT_NE(l.find("'--epochs' '2'"), std::string::npos) << l;
        EXPECT_NE(l.find("'--subset' '15000'"), std::string::npos) << l;
    }

    CliResult cpu = f.run("cpu", "--device cpu");
    ASSERT_EQ(cpu.status, 0) << cpu.err;
    EXPECT_TRUE(lines_of(cpu.out, "--device").empty()) << cpu.out;
    EXPECT_EQ(lines_of(cpu.out, "'--epochs' '2'").size(), 12u) << cpu.out;
    CliResult nodev = f.run("nodev", "", "MTS_GPUEMU_DEVICES=0");
    ASSERT_EQ(nodev.status, 0) << nodev.err;
    EXPECT_EQ(replace_all(nodev.out, f.d + "/nodev/", f.d + "/cpu/"), cpu.out)
        << "auto without a device: the CPU's commands";
    CliResult cu = f.run("cuda", "--device cuda", "MTS_GPUEMU_DEVICES=0");
    EXPECT_EQ(cu.status, 2);
    EXPECT_EQ(lines_of(cu.err, "").size(), 1u) << cu.err;
    EXPECT_NE(cu.err.find("mantis flow: --device cuda: gpu: no CUDA device"), std::string::npos) << cu.err;
}

// A configuration of the user's that pins sizes keeps them on the GPU, and
// every `mantis test` step (inference-only and cross evaluation) runs there
// too.
TEST(FlowGpu, PinnedSizesStayAndTestStepsRunOnTheDevice)
{
    DryFlow f;
    std::ofstream(f.d + "/u.flow") << "models = lenet300\ndatasets = mnist\nepochs = 1\nsubset = 100\n"
                                      "baselines = fp32\nmode = infer\ncross = mitchell\n";
    CliResult r = f.run("user", "--config " + f.d + "/u.flow");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.find("profile"), std::string::npos) << "no profile: " << r.out;
    auto trains = lines_of(r.out, "' 'train' ");
    ASSERT_EQ(trains.size(), 1u) << r.out;
    EXPECT_NE(trains[0].find("'--epochs' '1'"), std::string::npos) << trains[0];
    EXPECT_NE(trains[0].find("'--subset' '100'"), std::string::npos) << trains[0];
    EXPECT_NE(trains[0].find("'--device' 'cuda'"), std::string::npos) << trains[0];
    auto tests = lines_of(r.out, "' 'test' '--checkpoint' ");
    ASSERT_EQ(tests.size(), 2u) << r.out; // infer-lenet300-mnist-s1, cross-...-mitchell
    for (auto &l : tests) EXPECT_NE(l.find("'--device' 'cuda'"), std::string::npos) << l;
    r = f.run("user-gpu", "--config " + f.d + "/u.flow --profile gpu");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find(", gpu profile, trainings on cuda"), std::string::npos) << r.out;
    EXPECT_EQ(lines_of(r.out, "' 'train' ").size(), 6u) << "--profile gpu: 2 models x 3 seeds: " << r.out;
}

namespace {

// Stand-ins for `mantis train` and bench_torch.py: each records its
// arguments; mantis.sh writes a train JSON of 1.5 s (for the INT8
// configuration with the per-GEMM gpu_path the trainer reports on the GPU),
// or refuses ResNet-20's FMAq configuration as the trainer refuses what it
// cannot run on the GPU (exit 2, one line); torch.sh prints bench_torch.py's
// line of 3 s, or its error line.
struct BenchStandIns {
    std::string d;
    explicit BenchStandIns(const std::string &torch_line, int torch_exit = 0)
    {
        d = tmpdir() + "/bench-gpu";
        sh("rm -rf " + d + " && mkdir -p " + d + "/mnist");
        std::ofstream m(d + "/mantis.sh");
        m << "#!/bin/sh\necho \"$*\" >> " << d << "/mantis.args\nj=\n"
          << "case \"$*\" in *resnet20*--acc*) echo 'mantis train: stand-in refusal on the GPU' >&2; exit 2;; esac\n"
          << "gp=resident; case \"$*\" in *--int-backward*) gp='per-gemm: a stand-in reason';; esac\n"
          << "while [ $# -gt 0 ]; do [ \"$1\" = --json ] && j=$2; shift; done\n"
          << "echo \"{\\\"gpu_path\\\": \\\"$gp\\\", \\\"epochs\\\": [{\\\"epoch\\\": 1, \\\"seconds\\\": 1.5}]}\" > \"$j\"\n";
        m.close();
        std::ofstream(d + "/torch.sh") << "echo \"$*\" >> " << d << "/torch.args\necho '" << torch_line << "'\nexit "
                                       << torch_exit << "\n";
        chmod((d + "/mantis.sh").c_str(), 0755);
    }
    std::string args(const std::string &extra) const
    {
        return "bench train --device cuda --threads 1 --data-dir " + d + "/mnist --python /bin/sh --torch-script " + d +
               "/torch.sh --mantis " + d + "/mantis.sh " + extra;
    }
};

} // namespace

// bench train --device cuda: both children get --device cuda and every
// model's whole set; no OpenBLAS row; a configuration the trainer refuses on
// the GPU says why without failing the bench; the ratios and issue 31's
// goals; PyTorch without CUDA is a row that says so, our times still
// printed; no device is mantis train's one line, exit 2.
TEST(BenchTrainGpu, StandInsGetTheDeviceAndTheWholeSets)
{
    BenchStandIns b("{\"model\": \"lenet300\", \"seconds\": 3.0, \"device\": \"cuda\"}");
    CliResult r = run_cli(b.args("--models lenet300,resnet20"));
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("device cuda: Mantis CUDA emulation on the CPU (not a GPU)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("lenet300  torch           3.00      1.00"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("lenet300  fp32            1.50      0.50"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("lenet300  blas               -         -  not on the GPU"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("lenet300  int8-ste        1.50      0.50  (per-gemm: a stand-in reason)"),
              std::string::npos) << "a row not device-resident says so: " << r.out;
    EXPECT_NE(r.out.find("lenet300  lut-mbm         1.50      0.50\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("resnet20  fmaq-M7E4          -         -  not available on the GPU (exit 2: mantis train: "
                         "stand-in refusal on the GPU)"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("goal lenet300 bf16 MBM LUT        <= 1.0x PyTorch: 0.50x met"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("goal resnet20 bf16 MBM LUT        <= 2.0x PyTorch: 0.50x met"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("goal resnet20 FMAq M7E4           <= 4.0x PyTorch: not measured"), std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("INT8 epoch"), std::string::npos) << "the CPU's INT8 goal: " << r.out;
    EXPECT_EQ(r.out.find("lenet5 "), std::string::npos) << r.out;
    std::string margs = slurp(b.d + "/mantis.args"), targs = slurp(b.d + "/torch.args");
    auto ml = lines_of(margs, "");
    EXPECT_EQ(ml.size(), 7u) << margs; // lenet300: fp32, lut, fmaq, int8; resnet20: fp32, lut, fmaq
    for (auto &l : ml) EXPECT_NE(l.find("--device cuda"), std::string::npos) << l;
    EXPECT_EQ(margs.find("--subset"), std::string::npos) << "every model's whole set on the GPU: " << margs;
    EXPECT_EQ(margs.find("blas"), std::string::npos) << margs;
    auto tl = lines_of(targs, "");
    EXPECT_EQ(tl.size(), 2u) << targs;
    for (auto &l : tl) {
        EXPECT_NE(l.find("--device cuda"), std::string::npos) << l;
        EXPECT_NE(l.find("--subset 0 "), std::string::npos) << "0: bench_torch.py's whole set: " << l;
    }
    r = run_cli(b.args("--models lenet300 --subset 640"));
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(slurp(b.d + "/torch.args").find("--subset 640 "), std::string::npos);

    BenchStandIns nt("{\"error\": \"PyTorch 1.13.0 has no GPU (built without CUDA)\"}", 3);
    r = run_cli(nt.args("--models lenet300"));
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("lenet300  torch              -         -  skipped: PyTorch did not run (exit 3: PyTorch "
                         "1.13.0 has no GPU (built without CUDA); python3-torch with CUDA installed?)"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("lenet300  lut-mbm         1.50         -"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("goal lenet300 bf16 MBM LUT        <= 1.0x PyTorch: not measured"), std::string::npos)
        << r.out;

    unlink((nt.d + "/mantis.args").c_str());
    r = run_env("MTS_GPUEMU_DEVICES=0", nt.args("--models lenet300"));
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_EQ(lines_of(r.err, "").size(), 1u) << r.err;
    EXPECT_NE(r.err.find("mantis bench train: gpu: no CUDA device"), std::string::npos) << r.err;
    EXPECT_EQ(slurp(nt.d + "/mantis.args"), "") << "nothing ran";
}

// Our side for real: `mantis train --device cuda` children of mantis-gpuemu
// (the emulated device; their seconds are the emulation's, not a GPU's).
TEST(BenchTrainGpu, OursThroughTheEmulation)
{
    std::string data = std::string(MANTIS_SOURCE_DIR) + "/data/mnist";
    if (access((data + "/train-images-idx3-ubyte").c_str(), R_OK) != 0)
        GTEST_SKIP() << data << " has no MNIST (mantis data fetch mnist)";
    BenchStandIns b("{\"model\": \"lenet300\", \"seconds\": 3.0}");
    CliResult r = run_cli("bench train --device cuda --threads 1 --models lenet300 --subset 16 --data-dir " + data +
                          " --python /bin/sh --torch-script " + b.d + "/torch.sh");
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    // "lenet300  CONF  SECONDS  RATIO": both numbers, the ratio to the stand-in's 3 s
    auto timed = [&](const std::string &conf) {
        auto l = lines_of(r.out, "lenet300  " + conf + " ");
        double sec = -1, x = -1;
        return l.size() == 1 && sscanf(l[0].c_str() + 10 + conf.size(), "%lf %lf", &sec, &x) == 2 && sec > 0 &&
               std::fabs(x - sec / 3.0) < 0.01;
    };
    for (const char *conf : {"fp32", "lut-mbm", "fmaq-M7E4"}) EXPECT_TRUE(timed(conf)) << conf << ": " << r.out;
    // INT8 device-resident too (gpu/qat.cu's quantization-aware twins): no per-GEMM remark on its row
    EXPECT_TRUE(timed("int8-ste")) << r.out;
    auto il = lines_of(r.out, "lenet300  int8-ste ");
    ASSERT_EQ(il.size(), 1u) << r.out;
    EXPECT_EQ(il[0].find("per-gemm"), std::string::npos) << il[0];
}
