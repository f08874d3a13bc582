// Kill safety of the flow (issue 17): SIGKILL of the whole process group at
// seeded time offsets, and at seeded points inside a phase found in the
// process tree (building a Verilated model into a cold cache, a Yosys
// synthesis, the report), then a re-run; the results equal an uninterrupted
// run's, nothing temporary is left in the results or the cache, no step
// outlives the coordinator, no failure was cached. Also: one flow per results
// directory (the lock, against a real second flow), failures caused by the
// environment are not cached, a real full disk (tmpfs, root) under the
// results and under the cache, and two processes building one design into a
// cold shared cache at the same moment.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "flow_proc_util.h"
#include "mantis/fs.h"
#include "mantis/hash.h"
#include "mantis/proc.h"
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

bool ends_with(const std::string &s, const std::string &tail)
{
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Regular files under root (links not followed): path relative to root -> size.
std::map<std::string, long long> files_under(const std::string &root, const std::string &rel = "")
{
    std::map<std::string, long long> found;
    DIR *d = opendir((rel.empty() ? root : root + "/" + rel).c_str());
    if (!d) return found;
    while (dirent *e = readdir(d)) {
        std::string n = e->d_name, r = rel.empty() ? n : rel + "/" + n;
        struct stat st;
        if (n == "." || n == ".." || lstat((root + "/" + r).c_str(), &st)) continue;
        if (S_ISDIR(st.st_mode))
            for (auto &kv : files_under(root, r)) found.insert(kv);
        else if (S_ISREG(st.st_mode))
            found[r] = st.st_size;
    }
    closedir(d);
    return found;
}

// The names in dir, sorted, joined by spaces.
std::string names_in(const std::string &dir)
{
    std::vector<std::string> v;
    if (DIR *d = opendir(dir.c_str())) {
        while (dirent *e = readdir(d))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) v.push_back(e->d_name);
        closedir(d);
    }
    std::sort(v.begin(), v.end());
    std::string s;
    for (auto &n : v) s += (s.empty() ? "" : " ") + n;
    return s;
}

// The first line of text holding `what` ("" when none).
std::string line_with(const std::string &text, const std::string &what)
{
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        if (l.find(what) != std::string::npos) return l;
    return "";
}

// The value of "key": "VALUE" in a JSON text ("" when absent).
std::string json_str(const std::string &text, const std::string &key)
{
    size_t at = text.find("\"" + key + "\": \"");
    if (at == std::string::npos) return "";
    at += key.size() + 5;
    return text.substr(at, text.find('"', at) - at);
}

// The tool cache root of sub ("rtl", "synth") the tests share: $MANTIS_CACHE/sub or its default.
std::string shared_cache(const char *sub)
{
    char buf[4096];
    return mts_fs_cache_dir(sub, buf, sizeof buf, nullptr) ? "" : buf;
}

// A published entry of a tool cache, and whether it is complete: a model with its model.so, a
// Verilator runtime with both objects, a synthesis with its metadata and netlist. Everything else
// in a cache (scratch build-*, *.tmp.PID, a failed build's log or work directory) is not an entry.
bool is_entry(const std::string &sub, const std::string &name)
{
    bool hex = name.size() == 32 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
    return hex || (name.rfind(sub == "rtl" ? "runtime-" : "verilated-", 0) == 0 && name.find('.') == std::string::npos);
}
bool entry_complete(const std::string &sub, const std::string &path, const std::string &name)
{
    if (name.rfind("runtime-", 0) == 0 || name.rfind("verilated-", 0) == 0)
        return exists(path + "/verilated.o") && exists(path + "/verilated_threads.o");
    if (sub == "rtl") return exists(path + "/model.so");
    return exists(path + "/synth.txt") && exists(path + "/netlist.blif");
}

// What the RTL and synthesis caches under root hold besides complete entries and their locks:
// "rtl/build-...", "synth/X.tmp.123", "rtl/HASH.log", an entry without its files ("(incomplete)").
std::vector<std::string> cache_leftovers(const std::string &root)
{
    std::vector<std::string> left;
    for (const std::string sub : {"rtl", "synth"}) {
        std::string d = root + "/" + sub;
        for (std::istringstream in(names_in(d)); !in.eof();) {
            std::string n;
            in >> n;
            if (n.empty() || ends_with(n, ".lock")) continue;
            if (!is_entry(sub, n)) left.push_back(sub + "/" + n);
            else if (!entry_complete(sub, d + "/" + n, n)) left.push_back(sub + "/" + n + " (incomplete)");
        }
    }
    for (auto &kv : files_under(root)) /* inside entries too: an atomic write cut short */
        if (kv.first.find(".tmp") != std::string::npos) left.push_back(kv.first);
    return left;
}

// Copies the complete entries of the shared cache's sub whose names start with one of `prefixes`
// ("" for content-hash entries) into root/sub: a private cache that is warm just where a test
// wants it, and never holds another process's scratch.
void copy_entries(const char *sub, const std::string &root, const std::vector<std::string> &prefixes)
{
    std::string from = shared_cache(sub), to = root + "/" + sub;
    ASSERT_EQ(sh("mkdir -p " + to), 0);
    for (std::istringstream in(names_in(from)); !in.eof();) {
        std::string n;
        in >> n;
        bool want = false;
        for (auto &p : prefixes) want = want || (p.empty() ? n.size() == 32 && is_entry(sub, n) : n.rfind(p, 0) == 0);
        if (want && is_entry(sub, n) && entry_complete(sub, from + "/" + n, n)) {
            ASSERT_EQ(sh("cp -a " + from + "/" + n + " " + to + "/"), 0);
        }
    }
}

// The records in out that vouch for what is not there: every STEP.done names the size and SHA-256
// of its output, and a later run trusts an output only when they match (a half-written output
// with a record would be accepted).
std::vector<std::string> untrue_records(const std::string &out)
{
    std::vector<std::string> bad;
    for (auto &kv : files_under(out)) {
        if (!ends_with(kv.first, ".done")) continue;
        std::string output = out + "/" + kv.first.substr(0, kv.first.size() - 5);
        int code;
        double secs;
        long long size = -1;
        char sha[65] = "", have[65] = "";
        struct stat st;
        if (sscanf(slurp(out + "/" + kv.first).c_str(), "exit %d seconds %lf size %lld sha256 %64s", &code, &secs,
                   &size, sha) != 4 ||
            stat(output.c_str(), &st) || st.st_size != size || mts_sha256_file_hex(output.c_str(), have, nullptr) ||
            strcmp(have, sha))
            bad.push_back(kv.first);
    }
    return bad;
}

// A tmpfs on dir for the life of the object, resizable (root only; ok says whether it mounted).
// mount(2) itself, no shell and no mount(8).
struct Tmpfs {
    std::string dir;
    bool ok = false;
    Tmpfs(const std::string &d, long long bytes) : dir(d)
    {
        mkdir(d.c_str(), 0755);
        ok = mount("tmpfs", d.c_str(), "tmpfs", 0, ("size=" + std::to_string(bytes)).c_str()) == 0;
    }
    bool resize(long long bytes) const
    {
        return mount("tmpfs", dir.c_str(), "tmpfs", MS_REMOUNT, ("size=" + std::to_string(bytes)).c_str()) == 0;
    }
    long long used() const
    {
        struct statvfs v;
        return statvfs(dir.c_str(), &v) ? -1 : (long long)(v.f_blocks - v.f_bfree) * (long long)v.f_frsize;
    }
    ~Tmpfs()
    {
        if (ok) umount2(dir.c_str(), MNT_DETACH);
    }
};

// Where a kill is to land: a process of the flow running program `prog` ("" for any) with every
// string of `words` in its command line.
struct Phase {
    const char *what;
    std::string prog;
    std::vector<std::string> words;
};

struct Kill {
    bool landed = false;  // killed while a process of the phase ran
    int status = 0;       // if not: the flow's exit status (-1: past the limit, then killed)
    std::string during;   // the command line of the process it landed in
    double at = 0;        // seconds after the start
};

// SIGKILLs the process group of pid (a flow started with start_group) once the nth process of the
// phase (distinct pids, from 0) has run `delay` seconds; when that one ends sooner, the next one is
// taken. The process tree is polled every 2 ms, so the kill lands inside that process's life.
Kill kill_during(pid_t pid, const std::string &mark, const Phase &ph, int nth, double delay, double limit = 300)
{
    double t0 = now();
    std::vector<int> seen;
    std::vector<double> since;
    Kill k;
    for (;;) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            k.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return k;
        }
        std::vector<ProcSeen> live = procs_running(mark, ph.prog, ph.words);
        auto running = [&](int p) {
            for (auto &l : live)
                if (l.pid == p) return true;
            return false;
        };
        for (auto &l : live)
            if (std::find(seen.begin(), seen.end(), l.pid) == seen.end()) {
                seen.push_back(l.pid);
                since.push_back(now());
            }
        while (nth < (int)seen.size() && !running(seen[nth])) nth++;  // it ended before the delay: the next
        bool due = nth < (int)seen.size() && now() - since[nth] >= delay;
        if (due || now() - t0 > limit) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            k.landed = due;
            k.status = due ? 0 : -1;
            k.at = now() - t0;
            for (auto &l : live)
                if (due && l.pid == seen[nth]) k.during = l.cmd;
            return k;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

// Starts every command at the same moment: each child waits on a pipe that the parent closes once
// all are forked. Output of command i to logs[i]; their pids.
std::vector<pid_t> start_together(const std::vector<std::string> &cmds, const std::vector<std::string> &logs)
{
    std::vector<std::string> lines;
    for (size_t i = 0; i < cmds.size(); i++) lines.push_back("exec " + cmds[i] + " >" + logs[i] + " 2>&1");
    int gate[2];
    if (pipe(gate)) return {};
    std::vector<pid_t> pids;
    for (auto &l : lines) {
        pid_t pid = fork();
        if (pid == 0) {
            close(gate[1]);
            char c;
            while (read(gate[0], &c, 1) < 0 && errno == EINTR) {
            }
            execl("/bin/sh", "sh", "-c", l.c_str(), (char *)nullptr);
            _exit(127);
        }
        pids.push_back(pid);
    }
    close(gate[0]);
    close(gate[1]);  // every child reads EOF now
    return pids;
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
                                       << "/data\nepochs = 1\nsubset = 300\ntest_subset = 1000\ntrace_subset = 100\n"
                                          "trace_samples = 1024\nbaselines = bf16\n";
    }
    void TearDown() override
    {
        if (!dir.empty()) sh("rm -rf " + dir);
    }
    // The flow into out; MANTIS_FLOW_MARK in its environment finds every process it starts.
    // env: more VAR=VALUE words (a private MANTIS_CACHE).
    std::string cmd(const std::string &out, const std::string &env = "") const
    {
        return "env MANTIS_FLOW_MARK=" + dir + " " + env + (env.empty() ? "" : " ") + MANTIS_BIN +
               " flow --quick -j 2 --config " + dir + "/t.flow --designs " + designs + " --out " + out;
    }
    // An uninterrupted run into dir/ref with the shared tool cache: what every resumed run must equal.
    std::string ref, ref_csv, ref_json;
    void reference_run()
    {
        ref = dir + "/ref";
        ASSERT_EQ(sh(cmd(ref) + " >" + dir + "/ref.log 2>&1"), 0) << slurp(dir + "/ref.log");
        ref_csv = slurp(ref + "/results.csv");
        ref_json = slurp(ref + "/results.json");
        ASSERT_FALSE(ref_csv.empty());
    }
    // out after a run that completed: the results equal the reference's, nothing temporary, no
    // failure on record.
    void expect_as_reference(const std::string &out, const std::string &log) const
    {
        EXPECT_EQ(slurp(out + "/results.csv"), ref_csv) << slurp(log);
        EXPECT_EQ(slurp(out + "/results.json"), ref_json);
        EXPECT_EQ(sh("find " + out + " -name '*.tmp*' | grep -q ."), 1) << "a temporary file was left behind";
        EXPECT_EQ(sh("find " + out + " -name '*.failed' | grep -q ."), 1) << "a failure was cached";
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
                                        << "/data\nepochs = 1\nsubset = 300\ntest_subset = 1000\ntrace_subset = 100\n"
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

// After a kill: no process started by the flow is left (the reaper ends the steps' groups).
void expect_no_survivors(const std::string &mark, const std::string &what, const std::string &log)
{
    auto left = survivors(mark, 3.0);
    EXPECT_TRUE(left.empty()) << what << ": " << left.size() << " processes outlived the coordinator, first pid "
                              << (left.empty() ? 0 : left[0]) << "\n"
                              << slurp(log);
    for (int p : left) kill(p, SIGKILL);
}

// Kill points while a Verilated model is built into a cold RTL cache (MANTIS_CACHE pointed at a
// fresh directory; its synthesis entries copied from the shared cache, so only the RTL side is
// cold): in the compile of Verilator's runtime, in Verilator on the design, in the compile of
// the model. Each restart first removes what the killed build left; the last one completes.
TEST_F(FlowKill, SigkillWhileBuildingAModelIntoAColdCache)
{
    ASSERT_NO_FATAL_FAILURE(reference_run());
    std::string cache = dir + "/cache", out = dir + "/out", env = "MANTIS_CACHE=" + cache;
    ASSERT_NO_FATAL_FAILURE(copy_entries("synth", cache, {"", "verilated-"}));
    std::mt19937 rng(1701);
    auto U = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
    const Phase phases[] = {{"compiling Verilator's runtime", "cc1plus", {"verilated.cpp"}},
                            {"Verilator on the design", "", {"--prefix Vmts -Mdir"}},
                            {"compiling the model", "cc1plus", {"unity.cpp"}}};
    const double delays[] = {U(0.2, 2.0), 0.0, U(0.0, 0.5)};
    for (int k = 0; k < 3; k++) {
        std::string log = dir + "/kill" + std::to_string(k) + ".log";
        Kill r = kill_during(start_group(cmd(out, env), log), dir, phases[k], 0, delays[k]);
        ASSERT_TRUE(r.landed) << phases[k].what << ": the flow ended first (exit " << r.status << ")\n" << slurp(log);
        std::printf("[ kill ] SIGKILL at %.1fs while %s: %.90s\n", r.at, phases[k].what, r.during.c_str());
        expect_no_survivors(dir, phases[k].what, log);
        for (auto &l : cache_leftovers(cache))  // scratch of the cut build, never a published half entry
            EXPECT_EQ(l.find("(incomplete)"), std::string::npos) << phases[k].what << ": " << l;
        if (k) {
            EXPECT_NE(slurp(log).find("removed "), std::string::npos) << "the killed build's scratch was kept";
        }
    }
    std::string log = dir + "/resume.log";
    ASSERT_EQ(sh(cmd(out, env) + " >" + log + " 2>&1"), 0) << slurp(log);
    EXPECT_NE(slurp(log).find("removed "), std::string::npos) << slurp(log);
    expect_as_reference(out, log);
    EXPECT_TRUE(survivors(dir, 3.0).empty());
    // one model (the one the reference's detection named) and one runtime, nothing else
    std::string hash;
    for (auto &kv : files_under(ref + "/steps/mul_trunc"))
        if (kv.first.rfind("detect-", 0) == 0 && ends_with(kv.first, ".json"))
            hash = json_str(slurp(ref + "/steps/mul_trunc/" + kv.first), "hash");
    ASSERT_EQ(hash.size(), 32u);
    std::string rtl = names_in(cache + "/rtl");
    EXPECT_EQ(std::count(rtl.begin(), rtl.end(), ' '), 3) << rtl;
    EXPECT_NE(rtl.find(hash + " " + hash + ".lock runtime-"), std::string::npos) << rtl;
    auto left = cache_leftovers(cache);
    EXPECT_TRUE(left.empty()) << left.size() << " left in the cache, first " << (left.empty() ? "" : left[0]);
}

// Kill points inside Yosys: the synthesis cache is cold (the models and the equivalence check's
// Verilator runtime are copied from the shared cache), two seeded kills, each some time into a
// Yosys run, then the resumed run synthesizes and equals the uninterrupted one. A flow runs several
// short Yosys processes (0.25-0.7 s each on a 2-core VM, 2026-11-26), so the kill aims at the first
// one at most 0.2 s in, and when a process ends sooner the next one is taken. (Aiming at the second
// one up to a second in missed when every later run was shorter than the delay, and the flow ended
// with nothing killed: in 1 of 2 suite runs; the first one up to 0.5 s in, in 2 of 7 runs.)
TEST_F(FlowKill, SigkillDuringSynthesisResumesIdentically)
{
    ASSERT_NO_FATAL_FAILURE(reference_run());
    std::string cache = dir + "/cache", out = dir + "/out", env = "MANTIS_CACHE=" + cache;
    ASSERT_NO_FATAL_FAILURE(copy_entries("rtl", cache, {"", "runtime-"}));
    ASSERT_NO_FATAL_FAILURE(copy_entries("synth", cache, {"verilated-"}));
    std::mt19937 rng(1702);
    const Phase yosys = {"Yosys", "yosys", {}};
    for (int k = 0; k < 2; k++) {
        std::string log = dir + "/kill" + std::to_string(k) + ".log";
        double delay = std::uniform_real_distribution<double>(0.0, 0.2)(rng);
        Kill r = kill_during(start_group(cmd(out, env), log), dir, yosys, 0, delay);
        ASSERT_TRUE(r.landed) << "the flow ended before Yosys ran (exit " << r.status << ")\n" << slurp(log);
        std::printf("[ kill ] SIGKILL at %.1fs, %.1fs into a Yosys run: %.90s\n", r.at, delay, r.during.c_str());
        expect_no_survivors(dir, "Yosys", log);
        for (auto &l : cache_leftovers(cache))
            EXPECT_EQ(l.find("(incomplete)"), std::string::npos) << l;
    }
    std::string log = dir + "/resume.log";
    ASSERT_EQ(sh(cmd(out, env) + " >" + log + " 2>&1"), 0) << slurp(log);
    // the next start removes a killed synthesis' work directory: the resumed run, or the second
    // killed one when its kill landed after its start had cleaned up (on `yosys -V`, say, which
    // leaves no work directory of its own)
    EXPECT_NE((slurp(dir + "/kill1.log") + slurp(log)).find("removed "), std::string::npos)
        << "the killed synthesis' work directory was kept\n" << slurp(dir + "/kill1.log") << slurp(log);
    expect_as_reference(out, log);
    EXPECT_TRUE(survivors(dir, 3.0).empty());
    // the synthesis entries the reference used are there, complete; nothing else is left
    for (auto &kv : files_under(ref + "/steps"))
        if (kv.first.find("/synth-") != std::string::npos && ends_with(kv.first, ".json")) {
            std::string h = json_str(slurp(ref + "/steps/" + kv.first), "hash");
            EXPECT_TRUE(exists(cache + "/synth/" + h + "/synth.txt")) << kv.first << ": no entry " << h;
        }
    auto left = cache_leftovers(cache);
    EXPECT_TRUE(left.empty()) << left.size() << " left in the cache, first " << (left.empty() ? "" : left[0]);
}

// Kill points in the report: while gnuplot draws a seeded chart (twice: the second restart has
// every step cached, so it goes straight to the report), then in the coordinator's own atomic
// writes of results.csv (half its bytes written), results.json (written, not flushed) and
// report.html (flushed, not renamed), through MANTIS_FAULT_WRITE=N:kill. While the first run goes,
// a second flow on the same --out is refused at once. The resumed run equals the uninterrupted
// one down to the charts and the page.
TEST_F(FlowKill, SigkillDuringTheReportResumesIdentically)
{
    ASSERT_NO_FATAL_FAILURE(reference_run());
    std::string out = dir + "/out";
    std::mt19937 rng(1703);
    const Phase gnuplot = {"gnuplot", "gnuplot", {".gp"}};
    for (int k = 0; k < 2; k++) {
        std::string log = dir + "/kill" + std::to_string(k) + ".log";
        pid_t flow = start_group(cmd(out), log);
        if (k == 0) {  // a real second flow on the same results, while this one holds them
            std::string lock = out + "/.lock", want = std::to_string(flow) + "\n";
            for (double t0 = now(); slurp(lock) != want && now() - t0 < 60;)
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            ASSERT_EQ(slurp(lock), want) << "the flow did not take its lock";
            CliResult second = run_cli("flow --quick -j 2 --config " + dir + "/t.flow --designs " + designs +
                                       " --out " + out);
            EXPECT_EQ(second.status, 2) << second.out << second.err;
            EXPECT_NE(second.err.find(out + " is in use by pid " + std::to_string(flow)), std::string::npos)
                << second.err;
            EXPECT_EQ(waitpid(flow, nullptr, WNOHANG), 0) << "the first flow ended before the second was refused";
        }
        int nth = std::uniform_int_distribution<int>(0, 3)(rng);
        Kill r = kill_during(flow, dir, gnuplot, nth, 0.0);
        ASSERT_TRUE(r.landed) << "the flow ended before gnuplot drew chart " << nth << " (exit " << r.status << ")\n"
                              << slurp(log);
        std::printf("[ kill ] SIGKILL at %.1fs while gnuplot drew: %.90s\n", r.at, r.during.c_str());
        expect_no_survivors(dir, "gnuplot", log);
        if (k == 1) {
            EXPECT_EQ(slurp(log).find("] start"), std::string::npos) << "a step ran again";
        }
    }
    // every step is cached now: the coordinator's atomic writes are results.csv (writes 1-3: write,
    // fsync, rename), results.json (4-6) and report.html (7-9)
    const struct {
        int n;
        const char *file, *where;
    } points[] = {{1, "results.csv", "half of its bytes written"},
                  {5, "results.json", "written, before its fsync"},
                  {9, "report.html", "flushed, before its rename"}};
    for (auto &p : points) {
        std::string log = dir + "/fault" + std::to_string(p.n) + ".log";
        int st = sh(cmd(out, "MANTIS_FAULT_WRITE=" + std::to_string(p.n) + ":kill") + " >" + log + " 2>&1");
        EXPECT_EQ(st, 128 + SIGKILL) << p.file << ": the coordinator was not killed\n" << slurp(log);  // sh says so
        bool torn = false;
        for (auto &kv : files_under(out))
            torn = torn || kv.first.rfind(std::string(p.file) + ".tmp.", 0) == 0;
        EXPECT_TRUE(torn) << p.file << ": the kill did not land in its write";
        std::printf("[ kill ] SIGKILL in the write of %s, %s\n", p.file, p.where);
        expect_no_survivors(dir, p.file, log);
    }
    std::string log = dir + "/resume.log";
    ASSERT_EQ(sh(cmd(out) + " >" + log + " 2>&1"), 0) << slurp(log);
    EXPECT_NE(slurp(log).find("removed "), std::string::npos) << "the torn report.html.tmp.PID was kept";
    expect_as_reference(out, log);
    // the charts gnuplot was killed drawing are drawn again, byte for byte; so is the page
    auto charts = files_under(ref + "/charts");
    ASSERT_FALSE(charts.empty());
    for (auto &kv : charts)
        if (!ends_with(kv.first, ".gp")) {  // the script names its directory
            EXPECT_TRUE(slurp(out + "/charts/" + kv.first) == slurp(ref + "/charts/" + kv.first)) << kv.first;
        }
    std::string page = slurp(out + "/report.html"), want = slurp(ref + "/report.html");
    for (size_t at; (at = page.find(out)) != std::string::npos;) page.replace(at, out.size(), ref);
    EXPECT_TRUE(page == want) << "report.html differs from the uninterrupted run's";
}

// A real full disk under the results (a tmpfs as --out; root only): 1 MiB holds every step's
// output but the GEMM dump, then room for the GEMM dump but not for a new report beside the old
// one, then room. Each short run exits non-zero and says which file, leaves no temporary file
// and no record that vouches for a missing or partial output, caches no failure; the last run
// equals the reference.
TEST_F(FlowKill, FullDiskUnderTheResultsIsNotCached)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "not root: no tmpfs can be mounted (test_reliability's fault injection covers the writes)";
    ASSERT_NO_FATAL_FAILURE(reference_run());
    long long gemm = 0, html = 0;
    for (auto &kv : files_under(ref)) {
        if (ends_with(kv.first, ".gemm")) gemm = (kv.second + 4095) / 4096 * 4096;  // in pages, as a tmpfs counts
        if (kv.first == "report.html") html = kv.second;
    }
    ASSERT_GT(gemm, 1 << 20) << "the GEMM dump is what does not fit in 1 MiB";
    ASSERT_GT(html, 48 << 10) << "report.html is what does not fit beside the old one";
    Tmpfs disk(dir + "/disk", 1 << 20);
    if (!disk.ok) GTEST_SKIP() << "cannot mount a tmpfs: " << strerror(errno);
    std::string out = disk.dir + "/out";
    auto nothing_trusted_is_torn = [&](const std::string &what) {
        EXPECT_EQ(sh("find " + out + " -name '*.tmp*' | grep -q ."), 1) << what << ": a temporary file was left";
        EXPECT_EQ(sh("find " + out + " -name '*.failed' | grep -q ."), 1) << what << ": a failure was cached";
        auto bad = untrue_records(out);
        EXPECT_TRUE(bad.empty()) << what << ": a record vouches for a missing or partial output: " << bad[0];
    };
    // 1 MiB: the GEMM dump fails; its step says so, naming the file, and is not cached
    std::string log = dir + "/full1.log";
    EXPECT_EQ(sh(cmd(out) + " >" + log + " 2>&1"), 1) << slurp(log);
    std::string failed = line_with(slurp(log), "FAILED  mul_trunc/gemm");
    EXPECT_NE(failed.find("(environment: "), std::string::npos) << slurp(log);
    EXPECT_NE(failed.find("No space left on device"), std::string::npos) << failed;
    EXPECT_NE(failed.find(".gemm"), std::string::npos) << "the file is not named: " << failed;
    EXPECT_NE(failed.find("not cached"), std::string::npos) << failed;
    nothing_trusted_is_torn("1 MiB");
    // room for the GEMM dump, the cosim step and their records and logs (32 KiB), not for a new
    // report.html beside the one of the first run: exit 2, the file named
    long long room = disk.used() + gemm + (32 << 10);
    ASSERT_TRUE(disk.resize(room));
    log = dir + "/full2.log";
    EXPECT_EQ(sh(cmd(out) + " >" + log + " 2>&1"), 2) << slurp(log);
    std::string err = line_with(slurp(log), "mantis flow: " + out + "/");
    EXPECT_NE(err.find(out + "/"), std::string::npos) << slurp(log);
    EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
    EXPECT_NE(slurp(log).find("done    mul_trunc/gemm"), std::string::npos) << "the GEMM step was not retried";
    nothing_trusted_is_torn("steps only");
    // room: the re-run completes, equal to the reference
    ASSERT_TRUE(disk.resize(64 << 20));
    log = dir + "/full3.log";
    ASSERT_EQ(sh(cmd(out) + " >" + log + " 2>&1"), 0) << slurp(log);
    expect_as_reference(out, log);
    std::printf("[ full ] 1 MiB: %s\n[ full ] %lld KiB: %s\n", failed.c_str(), room >> 10, err.c_str());
}

// A real full disk under the tool cache (MANTIS_CACHE on a tmpfs; root only), warm but for this
// design's model and synthesis: room for a few of Verilator's files, then for Verilator's output
// but not the model's library, then for the model but not the synthesis, then room. The step
// fails as the environment's failure, naming the full disk (Verilator does not check its writes
// and ld's message is lost with the log on that disk: both are caught), nothing half-built is
// published, and the last run builds each entry once and equals the reference.
TEST_F(FlowKill, FullDiskUnderTheCacheIsNotCached)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "not root: no tmpfs can be mounted (test_reliability's fault injection covers the writes)";
    ASSERT_NO_FATAL_FAILURE(reference_run());
    Tmpfs disk(dir + "/disk", 64 << 20);
    if (!disk.ok) GTEST_SKIP() << "cannot mount a tmpfs: " << strerror(errno);
    std::string cache = disk.dir + "/cache", out = dir + "/out", env = "MANTIS_CACHE=" + cache;
    ASSERT_NO_FATAL_FAILURE(copy_entries("rtl", cache, {"runtime-"}));
    ASSERT_NO_FATAL_FAILURE(copy_entries("synth", cache, {"verilated-"}));
    for (auto &kv : files_under(ref + "/steps/baseline-bf16"))  // the baseline's synthesis stays warm
        if (kv.first.rfind("synth-", 0) == 0 && ends_with(kv.first, ".json")) {
            std::string h = json_str(slurp(ref + "/steps/baseline-bf16/" + kv.first), "hash");
            ASSERT_EQ(sh("cp -a " + shared_cache("synth") + "/" + h + " " + cache + "/synth/"), 0) << h;
        }
    const struct {
        long long room;
        const char *what, *step;
    } cases[] = {{16 << 10, "Verilator's files", "detect"},
                 {160 << 10, "the model's library", "detect"},
                 {1 << 20, "the synthesis", "synth"}};
    for (auto &c : cases) {
        ASSERT_TRUE(disk.resize(disk.used() + c.room));
        std::string log = dir + "/full" + std::to_string(c.room >> 10) + ".log";
        EXPECT_NE(sh(cmd(out, env) + " >" + log + " 2>&1"), 0) << slurp(log);
        std::string failed = line_with(slurp(log), std::string("FAILED  mul_trunc/") + c.step);
        EXPECT_NE(failed.find("(environment: "), std::string::npos) << c.what << "\n" << slurp(log);
        EXPECT_NE(failed.find("No space left on device"), std::string::npos) << failed;
        EXPECT_NE(failed.find("not cached"), std::string::npos) << failed;
        EXPECT_EQ(sh("find " + out + " -name '*.failed' | grep -q ."), 1) << c.what << ": a failure was cached";
        for (auto &l : cache_leftovers(cache)) {  // a failed build's log, a failed synthesis' logs
            EXPECT_TRUE(ends_with(l, ".log") || l.find(".failed/") != std::string::npos || ends_with(l, ".failed"))
                << c.what << ": " << l << " left in the cache";
        }
        std::printf("[ full ] cache with %lld KiB free (%s): %s\n", c.room >> 10, c.what, failed.c_str());
    }
    ASSERT_TRUE(disk.resize(64 << 20));
    std::string log = dir + "/room.log";
    ASSERT_EQ(sh(cmd(out, env) + " >" + log + " 2>&1"), 0) << slurp(log);
    expect_as_reference(out, log);
    auto left = cache_leftovers(cache);
    EXPECT_TRUE(left.empty()) << left.size() << " left in the cache, first " << (left.empty() ? "" : left[0]);
    std::string rtl = names_in(cache + "/rtl");  // the runtime was copied in: no lock of its own
    EXPECT_EQ(rtl.find("runtime-"), rtl.rfind("runtime-")) << rtl;
    EXPECT_NE(rtl.find(" runtime-"), std::string::npos) << rtl;
    EXPECT_EQ(std::count(rtl.begin(), rtl.end(), ' '), 2) << "one model with its lock, one runtime: " << rtl;
}

// Two processes building one design into a cold shared cache, started at the same moment:
// `rtl info` (the runtime and the model cold), then `lutgen` on a parameter not built yet.
// Both succeed with the same output, exactly one builds (the other waits for the lock and reuses
// the entry), and the cache ends with one complete entry and no scratch.
TEST(FlowCache, TwoProcessesBuildOneDesignIntoAColdCache)
{
    NEED_RTL_TOOLS();
    std::string d = tmpdir() + "/shared-build", cache = d + "/cache", rtl = src + "/rtl/mul_trunc.v";
    ASSERT_EQ(sh("rm -rf " + d + " && mkdir -p " + d), 0);
    std::string env = std::string("env MANTIS_CACHE=") + cache + " " + MANTIS_BIN;
    auto run_pair = [&](const std::string &a, const std::string &b, const std::string &tag) {
        auto pids = start_together({env + " " + a, env + " " + b}, {d + "/" + tag + "0.log", d + "/" + tag + "1.log"});
        ASSERT_EQ(pids.size(), 2u);
        for (int i = 0; i < 2; i++) {
            std::string log = d + "/" + tag + std::to_string(i) + ".log";
            EXPECT_EQ(mts_proc_wait(pids[i]), 0) << slurp(log);
        }
    };
    ASSERT_NO_FATAL_FAILURE(run_pair("rtl info --rtl " + rtl + " --json " + d + "/info0.json",
                                     "rtl info --rtl " + rtl + " --json " + d + "/info1.json", "info"));
    std::string a = slurp(d + "/info0.json"), b = slurp(d + "/info1.json");
    int built = (a.find("\"cache_hit\": 0") != std::string::npos) + (b.find("\"cache_hit\": 0") != std::string::npos);
    EXPECT_EQ(built, 1) << "exactly one process builds the model\n" << a << b;
    for (std::string *s : {&a, &b}) {
        size_t at = s->find("\"cache_hit\": ");
        ASSERT_NE(at, std::string::npos) << *s;
        s->erase(at, 14);
    }
    EXPECT_EQ(a, b);
    std::string hash = json_str(a, "hash"), names = names_in(cache + "/rtl");
    ASSERT_EQ(hash.size(), 32u) << a;
    EXPECT_NE(names.find(hash + " " + hash + ".lock runtime-"), std::string::npos) << names;
    EXPECT_EQ(std::count(names.begin(), names.end(), ' '), 3) << names;
    auto left = cache_leftovers(cache);
    EXPECT_TRUE(left.empty()) << left.size() << " left, first " << (left.empty() ? "" : left[0]);
    // the runtime is warm now; a parameter makes a new model, built by one of two lutgen runs
    ASSERT_NO_FATAL_FAILURE(run_pair("lutgen --rtl " + rtl + " --param M=5 -o " + d + "/a.lut",
                                     "lutgen --rtl " + rtl + " --param M=5 -o " + d + "/b.lut", "lutgen"));
    std::string la = slurp(d + "/a.lut");
    EXPECT_FALSE(la.empty());
    EXPECT_TRUE(la == slurp(d + "/b.lut")) << "the two tables differ";
    names = names_in(cache + "/rtl");
    EXPECT_EQ(std::count(names.begin(), names.end(), ' '), 5) << "one more model and its lock: " << names;
    left = cache_leftovers(cache);
    EXPECT_TRUE(left.empty()) << left.size() << " left, first " << (left.empty() ? "" : left[0]);
}

}  // namespace
