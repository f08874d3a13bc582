// Kill safety of the flow (issue 17): SIGKILL of the whole process group at
// seeded time offsets, then a re-run; the results equal an uninterrupted
// run's, nothing temporary is left, no step outlives the coordinator, no
// failure was cached. Also: one flow per results directory (the lock), and
// failures caused by the environment are not cached.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "flow_proc_util.h"
#include "test_util.h"

namespace {

const std::string src = std::string(MANTIS_TEST_DATA) + "/../..";

bool exists(const std::string &p)
{
    struct stat st;
    return stat(p.c_str(), &st) == 0;
}

double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class FlowKill : public ::testing::Test {
  protected:
    std::string dir, designs;
    void SetUp() override
    {
        if (!exists(src + "/data/mnist/train-images-idx3-ubyte"))
            GTEST_SKIP() << "MNIST not in " << src << "/data/mnist (mantis data fetch mnist): kill test skipped";
        if (sh("command -v verilator >/dev/null && command -v yosys >/dev/null") != 0)
            GTEST_SKIP() << "verilator or yosys not installed: kill test skipped";
        char t[] = "/tmp/mantis-kill-XXXXXX";
        dir = mkdtemp(t);
        designs = dir + "/designs";
        mkdir(designs.c_str(), 0755);
        sh("cp " + src + "/rtl/mul_trunc.v " + designs + "/");
        std::ofstream(dir + "/t.flow") << "models = lenet300\ndatasets = mnist\ndata_dir = " << src
                                       << "/data\nepochs = 1\nsubset = 300\ntrace_subset = 100\n"
                                          "trace_samples = 1024\nbaselines = bf16\n";
    }
    void TearDown() override
    {
        if (!dir.empty()) sh("rm -rf " + dir);
    }
    // The flow into out; MANTIS_FLOW_MARK in its environment finds every process it starts.
    std::string cmd(const std::string &out) const
    {
        return "env MANTIS_FLOW_MARK=" + dir + " " + MANTIS_BIN + " flow --quick -j 2 --config " + dir +
               "/t.flow --designs " + designs + " --out " + out;
    }
};

TEST_F(FlowKill, SigkillAtSeededPointsResumesIdentically)
{
    std::string ref = dir + "/ref", out = dir + "/out";
    ASSERT_EQ(sh(cmd(ref) + " >" + dir + "/ref.log 2>&1"), 0) << slurp(dir + "/ref.log");
    std::string ref_csv = slurp(ref + "/results.csv"), ref_json = slurp(ref + "/results.json");
    ASSERT_FALSE(ref_csv.empty());
    // The kill points are fractions of the time of a run like the killed ones: the tool cache
    // (Verilator models, synthesis) is warm now, whether or not it was before the reference run,
    // and a cold run's time would put every kill point after the end of a warm one.
    double t0 = now();
    ASSERT_EQ(sh(cmd(dir + "/warm") + " >" + dir + "/warm.log 2>&1"), 0) << slurp(dir + "/warm.log");
    double span = now() - t0;
    EXPECT_EQ(slurp(dir + "/warm/results.csv"), ref_csv) << "a warm tool cache changed the results";
    std::mt19937 rng(17);  // seeded kill points: the same offsets every run
    int kills = 0, tried = 0;
    for (int k = 0; k < 4; k++) {
        // early enough that every run is cut short: each resumes the last and finishes a few steps
        double at = std::uniform_real_distribution<double>(0.08, 0.3)(rng) * span;
        std::string log = dir + "/kill" + std::to_string(k) + ".log";
        pid_t pid = start_group(cmd(out), log);
        int st = wait_bounded(pid, at);  // -1: still running at `at`, so killed (the whole group)
        tried++;
        if (st != -1) break;  // the flow finished before this point: nothing left to kill
        kills++;
        std::string last, l;
        for (std::istringstream in(slurp(log)); std::getline(in, l);)
            if (l.find("] start") != std::string::npos) last = l.substr(l.find("start") + 8);
        std::printf("[ kill ] SIGKILL at %.1fs, last step started: %s\n", at, last.c_str());
        auto left = survivors(dir, 3.0);
        EXPECT_TRUE(left.empty()) << "kill " << k << " at " << at << "s: " << left.size()
                                  << " processes outlived the coordinator, first pid " << left[0] << "\n"
                                  << slurp(log);
        for (int p : left) kill(p, SIGKILL);
    }
    EXPECT_GE(kills, 3) << "the kill points fell after the end of the flow (span " << span << "s)";
    std::string log = dir + "/resume.log";
    ASSERT_EQ(sh(cmd(out) + " >" + log + " 2>&1"), 0) << slurp(log);
    EXPECT_EQ(slurp(out + "/results.csv"), ref_csv) << slurp(log);
    EXPECT_EQ(slurp(out + "/results.json"), ref_json);
    // nothing temporary left in the results, no failure on record
    EXPECT_EQ(sh("find " + out + " -name '*.tmp*' | grep -q ."), 1) << "a temporary file was left behind";
    EXPECT_EQ(sh("find " + out + " -name '*.failed' | grep -q ."), 1) << "a failure was cached";
    EXPECT_TRUE(survivors(dir, 3.0).empty());
    int cleaned = 0;  // runs that started by removing scratch a killed run left
    for (int k = 0; k <= kills; k++)
        cleaned += slurp(k < kills ? dir + "/kill" + std::to_string(k) + ".log" : log).find("removed ") !=
                   std::string::npos;
    std::printf("[ kill ] %d kill points tried, %d killed mid-run, %d restarts cleaned scratch first, resumed to "
                "identical results\n", tried, kills, cleaned);
}

TEST_F(FlowKill, OneFlowPerResultsDirectory)
{
    std::string out = dir + "/out";
    mkdir(out.c_str(), 0755);
    // hold the lock as a flow would: flock on OUT/.lock, our pid inside
    int fd = open((out + "/.lock").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(flock(fd, LOCK_EX), 0);
    std::string pid = std::to_string(getpid()) + "\n";
    ASSERT_EQ(write(fd, pid.data(), pid.size()), (ssize_t)pid.size());
    CliResult r = run_cli("flow --quick --config " + dir + "/t.flow --designs " + designs + " --out " + out);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("in use by pid " + std::to_string(getpid())), std::string::npos) << r.err;
    EXPECT_FALSE(exists(out + "/steps")) << "a locked-out flow must not touch the results";
    close(fd);
}

TEST_F(FlowKill, EnvironmentFailuresAreNotCached)
{
    std::string out = dir + "/out";
    sh("cp " + std::string(MANTIS_TEST_DATA) + "/flow/three_inputs.v " + designs + "/");
    // the data set's directory is there (the flow's upfront check passes) but its files are not: the
    // training steps fail ("No such file"), and none of those failures is cached
    ASSERT_EQ(sh("mkdir -p " + dir + "/data/mnist"), 0);
    std::ofstream(dir + "/nodata.flow") << "models = lenet300\ndatasets = mnist\ndata_dir = " << dir
                                        << "/data\nepochs = 1\nsubset = 300\ntrace_subset = 100\n"
                                           "trace_samples = 1024\nbaselines = bf16\n";
    std::string run = std::string(MANTIS_BIN) + " flow --quick -j 2 --designs " + designs + " --out " + out +
                      " --config " + dir + "/nodata.flow";
    sh(run + " >" + dir + "/nodata.log 2>&1");
    std::string log = slurp(dir + "/nodata.log");
    EXPECT_NE(log.find("FAILED  mul_trunc/train-lenet300-mnist-s1 (environment: "), std::string::npos) << log;
    EXPECT_NE(log.find("not cached"), std::string::npos) << log;
    EXPECT_EQ(sh("find " + out + " -name 'train-*.failed' | grep -q ."), 1) << "a missing-data failure was cached";
    // a deterministic failure (a design that fits no drop-in shape) is cached
    EXPECT_EQ(sh("find " + out + "/steps/three_inputs -name 'detect-*.failed' | grep -q ."), 0) << log;
    // the data arrives: the same configuration now trains, and the cached failure is not replayed
    ASSERT_EQ(rmdir((dir + "/data/mnist").c_str()), 0);
    ASSERT_EQ(symlink((src + "/data/mnist").c_str(), (dir + "/data/mnist").c_str()), 0);
    // exit 1: three_inputs' row is still not ok (its detect failure, from the cache)
    ASSERT_EQ(sh(run + " >" + dir + "/withdata.log 2>&1"), 1) << slurp(dir + "/withdata.log");
    log = slurp(dir + "/withdata.log");
    EXPECT_NE(log.find("done    mul_trunc/train-lenet300-mnist-s1"), std::string::npos) << log;
    EXPECT_EQ(log.find("start   three_inputs/detect"), std::string::npos) << "the cached failure was run again";
    EXPECT_EQ(sh("find " + out + " -name 'train-*.done' | grep -q ."), 0);
}

// What a killed run leaves, planted by hand: removed on the next start, in
// the results and in the cache; scratch of a live process is kept.
TEST(FlowScratch, LeftoversOfAKilledRunAreCleanedOnTheNextStart)
{
    std::string d = tmpdir() + "/scratch", out = d + "/out", cache = d + "/cache";
    ASSERT_EQ(sh("mkdir -p " + d + "/designs " + out + "/steps/x " + cache + "/rtl/build-abc-1 " + cache + "/synth"), 0);
    pid_t gone = fork();  // a pid that no longer exists
    if (gone == 0) _exit(0);
    waitpid(gone, nullptr, 0);
    std::string g = std::to_string(gone), live = std::to_string(getpid());
    ASSERT_EQ(sh("cd " + out + "/steps/x && touch a.json.tmp a.json.tmp.tmp." + g + " keep.json keep.json.done"), 0);
    ASSERT_EQ(sh("mv " + cache + "/rtl/build-abc-1 " + cache + "/rtl/build-abc-" + g + " && touch " + cache +
                 "/synth/e.tmp." + g + " " + cache + "/synth/e.tmp." + live),
              0);
    // no steps at all: only the start-up work (an empty DATA_DIR/mnist passes the flow's upfront data check)
    ASSERT_EQ(sh("mkdir -p " + d + "/data/mnist"), 0);
    std::ofstream(d + "/t.flow") << "baselines =\ndata_dir = data\n";
    std::string log = d + "/log";
    ASSERT_EQ(sh("MANTIS_CACHE=" + cache + " " + MANTIS_BIN + " flow --config " + d + "/t.flow --designs " + d +
                 "/designs --out " + out + " >" + log + " 2>&1"),
              0)
        << slurp(log);
    EXPECT_NE(slurp(log).find("removed 4 temporary files"), std::string::npos) << slurp(log);
    EXPECT_FALSE(exists(out + "/steps/x/a.json.tmp"));
    EXPECT_FALSE(exists(out + "/steps/x/a.json.tmp.tmp." + g));
    EXPECT_FALSE(exists(cache + "/rtl/build-abc-" + g));
    EXPECT_FALSE(exists(cache + "/synth/e.tmp." + g));
    EXPECT_TRUE(exists(cache + "/synth/e.tmp." + live)) << "scratch of a live process was removed";
    EXPECT_TRUE(exists(out + "/steps/x/keep.json"));
}

}  // namespace
