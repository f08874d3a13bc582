// The CLI of the numeric core, driven as a user would: eval, lutgen, lut info,
// metrics, and one-line errors with non-zero exits for bad input.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <regex>
#include <string>

#include "mantis/json.h"
#include "mantis/status.h"
#include "test_util.h"
#include "ref_float.h"

namespace {

int lines(const std::string &s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

TEST(Cli, EvalExactBf16MatchesIndependentRneReference) {
    ref::Rng r(2024);
    std::string input;
    std::vector<std::pair<uint32_t, uint32_t>> ops;
    for (int i = 0; i < 20000; i++) {
        uint32_t a = r.u32(), b = r.u32();
        if (i % 5 == 0) a = (a & 0x807FFFFFu) | 0x3F800000u;
        if (i % 7 == 0) b = (b & 0x80FFFFFFu) | 0x7F000000u;
        ops.push_back({a, b});
        char line[40];
        snprintf(line, sizeof line, i % 2 ? "%08x %08x\n" : "0x%08X\t0x%08x\n", a, b);
        input += line;
    }
    CliResult res = run_cli("eval --mul exact --man-bits 7", input);
    ASSERT_EQ(res.status, 0) << res.err;
    std::istringstream out(res.out);
    mts_format bf16 = {8, 7, 127, 1};
    for (auto &p : ops) {
        std::string got;
        ASSERT_TRUE(out >> got);
        char want[16];
        snprintf(want, sizeof want, "%08x", ref::mul_exact(bf16, p.first, p.second, true));
        ASSERT_EQ(got, want) << std::hex << p.first << " * " << p.second;
    }
}

TEST(Cli, LutgenInfoAndEvalThroughTheLut) {
    std::string lut = tmpdir() + "/mbm7.lut";
    CliResult g = run_cli("lutgen --mul mbm --man-bits 7 -o " + lut);
    ASSERT_EQ(g.status, 0) << g.err;
    CliResult info = run_cli("lut info " + lut);
    ASSERT_EQ(info.status, 0) << info.err;
    EXPECT_NE(info.out.find("model:      mbm"), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("bf16"), std::string::npos) << info.out;
    std::string input = "3f800000 3f800000\n3fc00000 bfc00000\n7f800000 0\n00000001 3f800000\n";
    CliResult via_lut = run_cli("eval --lut " + lut, input), via_model = run_cli("eval --mul mbm", input);
    ASSERT_EQ(via_lut.status, 0) << via_lut.err;
    EXPECT_EQ(via_lut.out, via_model.out);
    EXPECT_EQ(lines(via_lut.out), 4);
    EXPECT_NE(via_lut.out.find("7fc00000"), std::string::npos);  // inf x 0
}

TEST(Cli, IntegerTablesTakeDecimals) {
    std::string lut = tmpdir() + "/int8s.lut";
    ASSERT_EQ(run_cli("lutgen --int-exact 8 --signed -o " + lut).status, 0);
    EXPECT_NE(run_cli("lut info " + lut).out.find("model:      exact-int8s"), std::string::npos);
    CliResult r = run_cli("eval --lut " + lut, "-128 -128\n127 -3\n0 5\n");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "16384\n-381\n0\n");
    CliResult bad = run_cli("eval --lut " + lut, "200 1\n");
    EXPECT_EQ(bad.status, 2);
    EXPECT_NE(bad.err.find("line 1"), std::string::npos) << bad.err;
}

TEST(Cli, ApproxTrainImportExportViaCli) {
    std::string lut = tmpdir() + "/mit5.lut", bin = tmpdir() + "/MIT_5.bin", lut2 = tmpdir() + "/mit5b.lut";
    ASSERT_EQ(run_cli("lutgen --mul mitchell --man-bits 5 -o " + lut).status, 0);
    CliResult e = run_cli("lutgen --lut " + lut + " --export-approxtrain " + bin);
    ASSERT_EQ(e.status, 0) << e.err;
    CliResult i = run_cli("lutgen --import-approxtrain " + bin + " --man-bits 5 --entry-bytes 1 -o " + lut2);
    ASSERT_EQ(i.status, 0) << i.err;
    EXPECT_NE(i.out.find("read 1024 1-byte ApproxTrain entries at M=5"), std::string::npos) << i.out;
    std::string input = "3fa00000 3fe00000\n40100000 c0500000\n";
    EXPECT_EQ(run_cli("eval --lut " + lut2, input).out, run_cli("eval --mul mitchell --man-bits 5", input).out);
}

TEST(Cli, MetricsOfExactAreZeroAgainstRne) {
    CliResult m = run_cli("metrics --mul exact --man-bits 6 --ref rne --json -");
    ASSERT_EQ(m.status, 0) << m.err;
    EXPECT_NE(m.out.find("\"errors\": 0"), std::string::npos) << m.out;
    CliResult t = run_cli("metrics --mul trunc --man-bits 6 --ref rne --json -");
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_EQ(t.out.find("\"errors\": 0"), std::string::npos) << t.out;
}

// One convention for machine-readable outputs: every --json / --csv any
// --help documents is `OUT|-`; OUT gets the JSON (atomically) and stdout the
// text, `-` puts the JSON alone on stdout and the text on stderr.
TEST(Cli, EveryJsonOutputIsOutOrStdout) {
    std::regex opt("--(json|csv) ([A-Z][A-Z|-]*)");
    int seen = 0;
    for (const char *c : {"eval", "lutgen", "lut info", "metrics", "verify", "models", "rtl info", "flow", "synth",
                          "train", "test", "data", "cosim", "bench core", "bench gemm", "bench train", "bench rtl",
                          "bench cosim"}) {
        CliResult h = run_cli(std::string(c) + " --help");
        std::string text = h.out + h.err;
        for (std::sregex_iterator it(text.begin(), text.end(), opt), end; it != end; ++it, ++seen)
            EXPECT_EQ((*it)[2].str(), "OUT|-") << "mantis " << c << " documents " << (*it)[0].str();
    }
    EXPECT_GE(seen, 8);
    std::string lut = tmpdir() + "/json-out.lut", js = tmpdir() + "/m.json";
    ASSERT_EQ(run_cli("lutgen --mul mbm --man-bits 4 -o " + lut).status, 0);
    for (const std::string &cmd : {std::string("metrics --mul mbm --man-bits 4"), "lut info " + lut}) {
        SCOPED_TRACE(cmd);
        CliResult to_stdout = run_cli(cmd + " --json -");
        ASSERT_EQ(to_stdout.status, 0) << to_stdout.err;
        mts_json *j = mts_json_parse(to_stdout.out.c_str(), nullptr);
        EXPECT_NE(j, nullptr) << "stdout holds the JSON alone: " << to_stdout.out;
        EXPECT_GT(mts_json_num(j, "pairs", 0), 0);
        mts_json_free(j);
        EXPECT_NE(to_stdout.err.find("MRED"), std::string::npos) << "the text goes to stderr: " << to_stdout.err;
        unlink(js.c_str());
        CliResult to_file = run_cli(cmd + " --json " + js);
        ASSERT_EQ(to_file.status, 0) << to_file.err;
        EXPECT_NE(to_file.out.find("MRED"), std::string::npos) << to_file.out;
        j = mts_json_load(js.c_str());
        EXPECT_NE(j, nullptr);
        mts_json_free(j);
        CliResult flag = run_cli(cmd + " --json");  // the old flag form: an error naming what it needs
        EXPECT_EQ(flag.status, 2);
        EXPECT_NE(flag.err.find("--json needs OUT or -"), std::string::npos) << flag.err;
    }
}

// Bad input never crashes: one line on stderr naming the problem, exit 2
// (the input's fault) or 4 (a file that cannot be opened: the environment's).
TEST(Cli, BadInputGivesOneLineErrors) {
    struct Case {
        std::string args, input, needle;
        int status = MTS_EXIT_INPUT;
    } cases[] = {
        {"eval --mul exact", "3f800000\n", "line 1"},
        {"eval --mul exact", "3f800000 zz\n", "expected two hex"},
        {"eval --mul exact", "3f800000 3f800000\n123456789 1\n", "line 2"},
        {"eval --mul nosuch", "", "unknown multiplier 'nosuch'"},
        {"eval --mul exact --man-bits 99", "", "--man-bits '99'"},
        {"eval --mul exact --man-bits", "", "needs a value"},
        {"eval --mul exact --format e9m2", "", "E=9"},
        {"eval --lut /nonexistent/x.lut", "", "/nonexistent/x.lut", MTS_EXIT_ENV},
        {"eval", "", "exactly one of"},
        {"eval --bogus", "", "unknown option '--bogus'"},
        {"lutgen --mul exact --man-bits 12 -o /tmp/x.lut", "", "M <= 11"},
        {"lutgen --mul exact", "", "missing -o"},
        {"lut info /nonexistent.lut", "", "/nonexistent.lut", MTS_EXIT_ENV},
        {"lutgen --import-approxtrain /nonexistent.bin --man-bits 7 -o /tmp/y.lut", "", "/nonexistent.bin", MTS_EXIT_ENV},
        {"frobnicate", "", "unknown command"},
    };
    for (const Case &c : cases) {
        CliResult r = run_cli(c.args, c.input);
        EXPECT_EQ(r.status, c.status) << c.args << ": " << r.err;
        EXPECT_EQ(lines(r.err), 1) << c.args << ": " << r.err;
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << ": " << r.err;
    }
}

TEST(Cli, HelpOnEveryCommand) {
    for (const char *cmd : {"eval", "lutgen", "lut", "metrics", "bench", "models"}) {
        CliResult r = run_cli(std::string(cmd) + " --help");
        EXPECT_EQ(r.status, 0) << cmd;
        EXPECT_NE(r.out.find("usage"), std::string::npos) << cmd << ": " << r.out;
    }
}

// Without --entry-bytes a size two layouts share is refused, naming both and
// the option; a zero-filled table is refused with its reason.
TEST(Cli, ApproxTrainImportNeverGuessesTheLayout) {
    std::string lut = tmpdir() + "/mit7.lut", bin = tmpdir() + "/MIT_7.bin", out = tmpdir() + "/at.lut";
    ASSERT_EQ(run_cli("lutgen --mul mitchell --man-bits 7 -o " + lut).status, 0);
    ASSERT_EQ(run_cli("lutgen --lut " + lut + " --export-approxtrain " + bin).status, 0);
    for (const char *m : {"6", "7"}) {
        CliResult r = run_cli("lutgen --import-approxtrain " + bin + " --man-bits " + m + " -o " + out);
        EXPECT_EQ(r.status, 2) << r.err;
        EXPECT_EQ(lines(r.err), 1) << r.err;
        EXPECT_NE(r.err.find("1-byte entries (M=7)"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("4-byte entries (M=6)"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("--entry-bytes"), std::string::npos) << r.err;
    }
    CliResult ok = run_cli("lutgen --import-approxtrain " + bin + " --man-bits 7 --entry-bytes 1 -o " + out);
    ASSERT_EQ(ok.status, 0) << ok.err;
    EXPECT_NE(ok.out.find("read 16384 1-byte ApproxTrain entries at M=7"), std::string::npos) << ok.out;
    EXPECT_EQ(run_cli("lutgen --import-approxtrain " + bin + " --man-bits 7 --entry-bytes 2 -o " + out).status, 2);
    std::ofstream(bin, std::ios::binary | std::ios::trunc) << std::string(16384, '\0');
    CliResult zero = run_cli("lutgen --import-approxtrain " + bin + " --man-bits 7 --entry-bytes 1 -o " + out);
    EXPECT_EQ(zero.status, 2);
    EXPECT_NE(zero.err.find("every entry is 0"), std::string::npos) << zero.err;
}

TEST(Cli, LutInfoHelpIsHelp) {
    for (const char *args : {"lut info --help", "lut info -h", "lut --help"}) {
        CliResult r = run_cli(args);
        EXPECT_EQ(r.status, 0) << args << ": " << r.err;
        EXPECT_NE(r.out.find("usage: mantis lut info"), std::string::npos) << args << ": " << r.out;
        EXPECT_EQ(r.err.find("cannot open"), std::string::npos) << args << ": " << r.err;
    }
}

}  // namespace

namespace {

// --rtl works in eval and lutgen like --mul: the Verilated MBM design gives the
// C model's bits on random operands, and its LUT file reproduces them.
TEST(Cli, EvalAndLutgenWithRtlDesign) {
    if (std::system("command -v verilator >/dev/null 2>&1") != 0) GTEST_SKIP() << "verilator not installed";
    std::string design = std::string(MANTIS_TEST_DATA) + "/../../rtl/mul_mbm.v";
    ref::Rng r(77);
    std::string input;
    for (int i = 0; i < 5000; i++) {
        char line[40];
        snprintf(line, sizeof line, "%08x %08x\n", r.u32(), r.u32());
        input += line;
    }
    CliResult rtl = run_cli("eval --rtl " + design, input), model = run_cli("eval --mul mbm --man-bits 7", input);
    ASSERT_EQ(rtl.status, 0) << rtl.err;
    EXPECT_EQ(rtl.out, model.out);
    std::string lut = tmpdir() + "/rtl_mbm.lut";
    CliResult g = run_cli("lutgen --rtl " + design + " -o " + lut);
    ASSERT_EQ(g.status, 0) << g.err;
    EXPECT_EQ(run_cli("eval --lut " + lut, input).out, model.out);
    // the accumulator design sums: 1 + 1 = 2, 2 + 1 = 3 (exact in M7E4)
    CliResult acc = run_cli("eval --rtl " + std::string(MANTIS_TEST_DATA) + "/../../rtl/fmaq_acc.v",
                     "3f800000 3f800000\n40000000 3f800000\n");
    ASSERT_EQ(acc.status, 0) << acc.err;
    EXPECT_EQ(acc.out, "40000000\n40400000\n");
    CliResult bad = run_cli("eval --rtl " + std::string(MANTIS_TEST_DATA) + "/flow/three_inputs.v", "");
    EXPECT_EQ(bad.status, 2);
    EXPECT_EQ(lines(bad.err), 1) << bad.err;
    EXPECT_NE(bad.err.find("fits no drop-in shape"), std::string::npos) << bad.err;
}

}  // namespace

// `mantis bench train` against stand-ins for its children (--mantis, and
// --python running --torch-script): each child gets the options it takes
// (every sample is mantis train's default, no `--subset 0`, which its strict
// parser refuses; --subset N when given; the INT8 row's table), and the
// epoch seconds come from each child's own JSON (mantis train's "epochs",
// bench_torch.py's top-level "seconds"), so the ratios are right.
// bench gemm --shapes: every provider timed on each shape, in the order
// given after the --sizes cubes, each row labelled with its shape and
// transposes; the goal lines (stated at n^3) only for the cubes.
TEST(Cli, BenchGemmShapesTimeEveryProviderAfterTheCubes) {
    CliResult r = run_cli("bench gemm --threads 1 --reps 1 --shapes 9x7x5:tn --sizes 8");
    ASSERT_EQ(r.status, 0) << r.err;
    const char *provs[] = {"native", "lut", "fmaq", "int8", "int8bam4", "int8bam6"};
    size_t cube = r.out.find("\n8 "), a = r.out.find("\n9x7x5:tn ");
    ASSERT_NE(cube, std::string::npos) << r.out;
    ASSERT_NE(a, std::string::npos) << r.out;
    EXPECT_LT(cube, a);
    for (const char *p : provs)
        EXPECT_TRUE(std::regex_search(r.out, std::regex(std::string("\n9x7x5:tn +") + p + " +[0-9.]+ "))) << p << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("\\n8 +goal FMAq <= 3x LUT"))) << r.out;
    EXPECT_FALSE(std::regex_search(r.out, std::regex("x[0-9]+:[nt][nt] +goal"))) << r.out;
    int blas = r.out.find("built without OpenBLAS") == std::string::npos; // its goal line
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2 + 2 * 7 + blas + 4) << r.out; // header, rows, goals
    // --shapes alone: no default cubes
    CliResult s = run_cli("bench gemm --threads 1 --reps 1 --shapes 2x3x4:nt");
    ASSERT_EQ(s.status, 0) << s.err;
    EXPECT_NE(s.out.find("\n2x3x4:nt "), std::string::npos) << s.out;
    EXPECT_EQ(s.out.find("\n512 "), std::string::npos) << s.out;
    EXPECT_EQ(s.out.find("goal"), std::string::npos) << s.out;
}

TEST(Cli, BenchTrainGivesEachChildWhatItTakesAndReadsItsSeconds) {
    std::string d = tmpdir() + "/bench-train";
    ASSERT_EQ(system(("rm -rf " + d + " && mkdir -p " + d + "/mnist").c_str()), 0);
    {
        std::ofstream m(d + "/mantis.sh");  // records its arguments, writes a train JSON of 1.5 s
        m << "#!/bin/sh\necho \"$*\" >> " << d << "/mantis.args\nj=\n"
          << "while [ $# -gt 0 ]; do [ \"$1\" = --json ] && j=$2; shift; done\n"
          << "echo '{\"epochs\": [{\"epoch\": 1, \"seconds\": 1.5}]}' > \"$j\"\n";
        std::ofstream t(d + "/torch.sh");  // bench_torch.py's one line on stdout: 3 s
        t << "echo \"$*\" >> " << d << "/torch.args\necho '{\"model\": \"lenet300\", \"seconds\": 3.0}'\n";
    }
    ASSERT_EQ(chmod((d + "/mantis.sh").c_str(), 0755), 0);
    const std::string common = "bench train --models lenet300 --threads 1 --data-dir " + d + "/mnist --python /bin/sh " +
                               "--torch-script " + d + "/torch.sh --mantis " + d + "/mantis.sh";
    CliResult r = run_cli(common);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("lenet300  torch           3.00      1.00"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("lenet300  lut-mbm         1.50      0.50"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("goal lenet300 bf16 MBM LUT        <= 1.2x PyTorch: 0.50x met"), std::string::npos) << r.out;
    std::string margs = slurp(d + "/mantis.args");
    EXPECT_EQ(std::count(margs.begin(), margs.end(), '\n'), 5) << margs;  // fp32, blas, lut, fmaq, int8
    EXPECT_EQ(margs.find("--subset"), std::string::npos) << "every sample is the default: " << margs;
    EXPECT_NE(margs.find("--int-backward ste"), std::string::npos) << margs;
    EXPECT_NE(margs.find("int8u.lut"), std::string::npos) << margs;
    unlink((d + "/mantis.args").c_str());
    r = run_cli(common + " --subset 640");
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    margs = slurp(d + "/mantis.args");
    EXPECT_NE(margs.find("--subset 640 "), std::string::npos) << margs;
    EXPECT_NE(slurp(d + "/torch.args").find("--subset 640 "), std::string::npos) << slurp(d + "/torch.args");
}
