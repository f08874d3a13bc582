// The quick flow end to end, as a user runs it: shipped designs plus a user's
// copy in a temp directory, a design that fits no shape and one that fails
// verification; caching, partial recompute, and interruption with SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

const std::string src = std::string(MANTIS_TEST_DATA) + "/../..";

bool exists(const std::string &p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0;
}

std::vector<std::string> split_lines(const std::string &s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

// The CSV row of one design (the config has one model and one data set).
std::string row_of(const std::string &csv, const std::string &design) {
    for (auto &l : split_lines(csv))
        if (l.rfind(design + ",", 0) == 0) return l;
    return "";
}

std::vector<std::string> fields(const std::string &row) {
    std::vector<std::string> f;
    std::string cur;
    bool q = false;
    for (char c : row) {
        if (c == '"') q = !q;
        else if (c == ',' && !q) { f.push_back(cur); cur.clear(); }
        else cur += c;
    }
    f.push_back(cur);
    return f;
}

class Flow : public ::testing::Test {
  protected:
    static std::string dir, out, cmd, first_csv;
    static void SetUpTestSuite() {
        char t[] = "/tmp/mantis-flow-XXXXXX";
        dir = mkdtemp(t);
        out = dir + "/out";
        std::string d = dir + "/designs";
        mkdir(d.c_str(), 0755);
        sh("cp " + src + "/rtl/mul_mbm.v " + src + "/rtl/mul_trunc.v " + d + "/");
        sh("cp " + src + "/rtl/mul_mitchell.v " + d + "/my_mitchell.v");  // a user's own file
        sh("cp " + std::string(MANTIS_TEST_DATA) + "/flow/bf16_expdep.v " + MANTIS_TEST_DATA +
           "/flow/three_inputs.v " + d + "/");
        std::ofstream(dir + "/test.flow") << "models = lenet300\ndatasets = mnist\ndata_dir = " << src
                                          << "/data\nepochs = 1\nsubset = 600\ntrace_subset = 200\n"
                                             "trace_samples = 2048\nbaselines = fp32, bf16\n"
                                             "cmodels = mul_mbm=mbm, mul_trunc=trunc, my_mitchell=mitchell\n";
        cmd = std::string(MANTIS_BIN) + " flow --quick -j 2 --config " + dir + "/test.flow --designs " + d +
              " --out " + out;
    }
    void SetUp() override {
        if (!exists(src + "/data/mnist/train-images-idx3-ubyte"))
            GTEST_SKIP() << "MNIST not in " << src << "/data/mnist (mantis data fetch mnist): flow test skipped";
        if (sh("command -v verilator >/dev/null && command -v yosys >/dev/null") != 0)
            GTEST_SKIP() << "verilator or yosys not installed: flow test skipped";
    }
    static int run(const std::string &log) { return sh(cmd + " >" + log + " 2>&1"); }
    void rerun_and_partial();
    void killed_and_resumed();
    static int starts(const std::string &log, const std::string &design) {
        int n = 0;
        for (auto &l : split_lines(slurp(log)))
            if (l.find("] start") != std::string::npos && (design.empty() || l.find(" " + design + "/") != std::string::npos))
                n++;
        return n;
    }
};
std::string Flow::dir, Flow::out, Flow::cmd, Flow::first_csv;

// One test, in phases: CTest runs every TEST in its own process, and the later
// phases reuse the first run's results directory.
void check_first_run(const std::string &out, const std::string &csv);

TEST_F(Flow, QuickFlowCachingAndInterruption) {
    SCOPED_TRACE("phase 1: the quick flow from scratch");
    ASSERT_EQ(run(dir + "/run1.log"), 0) << slurp(dir + "/run1.log");
    first_csv = slurp(out + "/results.csv");
    check_first_run(out, first_csv);
    if (HasFatalFailure()) return;
    {
        SCOPED_TRACE("phase 2: re-run does no work; a deleted design is recomputed alone");
        rerun_and_partial();
    }
    {
        SCOPED_TRACE("phase 3: SIGTERM mid-run, then resume");
        killed_and_resumed();
    }
}

void check_first_run(const std::string &out, const std::string &csv) {
    EXPECT_EQ(split_lines(csv).size(), 8u) << csv;  // header + 5 designs + 2 baselines
    for (const char *d : {"mul_mbm", "mul_trunc", "my_mitchell"}) {
        auto f = fields(row_of(csv, d));
        ASSERT_GE(f.size(), 20u) << d << ": " << csv;
        EXPECT_EQ(f[1], "significand") << d;
        EXPECT_EQ(f[2], "bf16") << d;
        EXPECT_EQ(f[3], "bit-exact") << d;
        double acc = atof(f[6].c_str()), mred = atof(f[8].c_str()), area = atof(f[13].c_str());
        EXPECT_GT(acc, 40.0) << d;  // 600 images, one epoch: far above chance (10%)
        EXPECT_LE(acc, 100.0) << d;
        EXPECT_GT(mred, 0.0) << d;
        EXPECT_LT(mred, 0.2) << d;
        EXPECT_GT(area, 10.0) << d;
    }
    // truncation and Mitchell are cheaper than the exact bf16 significand baseline
    double exact_area = atof(fields(row_of(csv, "baseline-bf16"))[13].c_str());
    EXPECT_LT(atof(fields(row_of(csv, "mul_trunc"))[13].c_str()), exact_area);
    EXPECT_LT(atof(fields(row_of(csv, "my_mitchell"))[13].c_str()), exact_area);
    auto bad = fields(row_of(csv, "three_inputs"));
    ASSERT_GE(bad.size(), 20u);
    EXPECT_EQ(bad[3], "does not fit the drop-in contract");
    EXPECT_NE(bad.back().find("fits no drop-in shape"), std::string::npos) << bad.back();
    EXPECT_EQ(bad[6], "");
    auto fail = fields(row_of(csv, "bf16_expdep"));
    ASSERT_GE(fail.size(), 20u);
    EXPECT_EQ(fail[1], "float");
    EXPECT_EQ(fail[3], "not LUT-representable");
    EXPECT_EQ(fail[6], "") << "a design that fails verification must not be trained with a LUT";
    for (const char *b : {"baseline-fp32", "baseline-bf16"}) EXPECT_GT(atof(fields(row_of(csv, b))[6].c_str()), 40.0);
    std::string html = slurp(out + "/report.html");
    EXPECT_NE(html.find("<svg"), std::string::npos);
    for (const char *d : {"mul_mbm", "my_mitchell", "three_inputs", "bf16_expdep", "baseline-fp32"})
        EXPECT_NE(html.find(d), std::string::npos) << d;
    EXPECT_TRUE(exists(out + "/results.json"));
    EXPECT_TRUE(exists(out + "/charts/area-lenet300-mnist.png"));
    EXPECT_TRUE(exists(out + "/charts/power-lenet300-mnist.svg"));
}

void Flow::rerun_and_partial() {
    ASSERT_EQ(run(dir + "/run2.log"), 0);
    EXPECT_EQ(starts(dir + "/run2.log", ""), 0) << slurp(dir + "/run2.log");
    EXPECT_EQ(slurp(out + "/results.csv"), first_csv);
    ASSERT_EQ(sh("rm -rf " + out + "/steps/my_mitchell"), 0);
    ASSERT_EQ(run(dir + "/run3.log"), 0);
    int all = starts(dir + "/run3.log", ""), mine = starts(dir + "/run3.log", "my_mitchell");
    EXPECT_GT(mine, 3);
    EXPECT_EQ(all, mine) << slurp(dir + "/run3.log");
    EXPECT_EQ(slurp(out + "/results.csv"), first_csv);
}

void Flow::killed_and_resumed() {
    ASSERT_EQ(sh("rm -rf " + out + "/steps/mul_trunc " + out + "/steps/baseline-bf16"), 0);
    std::string log = dir + "/killed.log";
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >" + log + " 2>&1").c_str(), (char *)nullptr);
        _exit(127);
    }
    // interrupt once the design's later steps are under way
    for (int i = 0; i < 600 && slurp(log).find("start   mul_trunc/lutgen") == std::string::npos; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM) << slurp(log);
    EXPECT_NE(slurp(log).find("interrupted by signal"), std::string::npos) << slurp(log);
    EXPECT_EQ(sh("find " + out + " -name '*.tmp' | grep -q ."), 1) << "a temporary file was left behind";
    ASSERT_EQ(run(dir + "/resumed.log"), 0) << slurp(dir + "/resumed.log");
    EXPECT_EQ(slurp(out + "/results.csv"), first_csv);
    EXPECT_EQ(slurp(out + "/results.json").size() > 100, true);
}

}  // namespace
