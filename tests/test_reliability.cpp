// Reliability promises (docs/reliability.md): readers refuse what is not a
// regular file, outputs never replace special files, every failed write
// (injected or a real full tmpfs) exits non-zero naming the file and leaves
// nothing behind, stdout write failures are errors, every numeric option of
// every command refuses bad values with one line, a training run killed while
// writing its checkpoint resumes, and the bugs the fuzzers pin down stay fixed.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

extern "C" {
#include "mantis/binio.h"
#include "mantis/format.h"
#include "mantis/fs.h"
#include "mantis/json.h"
#include "mantis/lut.h"
#include "mantis/mul.h"
#include "mantis/nn_arith.h"
#include "mantis/nn_data.h"
#include "mantis/nn_train.h"
}
#include "test_util.h"

namespace {

std::string fresh_dir(const std::string &name)
{
    std::string d = tmpdir() + "/" + name;
    sh("rm -rf '" + d + "'");
    mkdir(d.c_str(), 0777);
    return d;
}

// Entries of dir, sorted ("" joined by spaces).
std::string listing(const std::string &dir)
{
    std::set<std::string> names;
    if (DIR *d = opendir(dir.c_str())) {
        while (struct dirent *e = readdir(d))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names.insert(e->d_name);
        closedir(d);
    }
    std::string s;
    for (const auto &n : names) s += (s.empty() ? "" : " ") + n;
    return s;
}

int lines(const std::string &s)
{
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

struct Env {
    const char *name;
    Env(const char *n, const std::string &v) : name(n) { setenv(n, v.c_str(), 1); }
    ~Env() { unsetenv(name); }
};

bool killed(int status) { return status == -1 || status == 137; } // sh(): by a signal, or the shell's 128+9

} // namespace

// ------------------------------------------------------------------ readers

TEST(Reliability, ReadersRefuseWhatIsNotARegularFile)
{
    std::string d = fresh_dir("nonreg"), fifo = d + "/fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    for (const std::string &p : {std::string("/dev/zero"), fifo, d}) {
        SCOPED_TRACE(p);
        uint8_t *b = nullptr;
        size_t n = 0;
        mts_err err;
        auto t0 = std::chrono::steady_clock::now();
        EXPECT_EQ(mts_fs_read(p.c_str(), &b, &n, &err), MTS_EIO);
        EXPECT_NE(std::string(err.msg).find("not a regular file"), std::string::npos) << err.msg;
        // a fifo without a writer must not block (a blocked open would hang here for ever)
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
        CliResult r = run_cli("lut info " + p);
        EXPECT_EQ(r.status, MTS_EXIT_ENV); // what lies at the path: the environment, not the options
        EXPECT_EQ(lines(r.err), 1) << r.err;
        EXPECT_NE(r.err.find(p), std::string::npos) << r.err;
    }
}

// ------------------------------------------------------------------ outputs

TEST(Reliability, OutputsNeverReplaceSpecialFiles)
{
    std::string d = fresh_dir("special"), fifo = d + "/fifo", sub = d + "/sub";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    ASSERT_EQ(mkdir(sub.c_str(), 0700), 0);
    std::vector<std::string> targets = {fifo, sub};
    // as root, a character device of our own (the 1,7 of /dev/full): the
    // bug this guards against turned /dev/full into a regular file
    std::string dev = d + "/full";
    if (mknod(dev.c_str(), S_IFCHR | 0600, makedev(1, 7)) == 0) targets.push_back(dev);
    for (const auto &t : targets) {
        SCOPED_TRACE(t);
        struct stat before, after;
        ASSERT_EQ(lstat(t.c_str(), &before), 0);
        CliResult r = run_cli("lutgen --mul exact --man-bits 2 -o " + t);
        EXPECT_EQ(r.status, MTS_EXIT_ENV);
        EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
        ASSERT_EQ(lstat(t.c_str(), &after), 0);
        EXPECT_EQ(before.st_mode & S_IFMT, after.st_mode & S_IFMT);
        EXPECT_EQ(before.st_ino, after.st_ino);
    }
    EXPECT_EQ(listing(d), targets.size() == 3 ? "fifo full sub" : "fifo sub"); // no temp file left
}

// Every write path of the commands that write files, failed at its 1st..kth
// write, fsync or rename (MANTIS_FAULT_WRITE), with ENOSPC and with EIO.
TEST(Reliability, InjectedWriteFailuresLeaveNothing)
{
    std::string d = fresh_dir("fault");
    ASSERT_EQ(run_cli("lutgen --mul mbm --man-bits 3 -o " + d + "/src.lut").status, 0);
    ASSERT_EQ(run_cli("lutgen --int-exact 8 -o " + d + "/int8.lut").status, 0);
    struct Case {
        std::string args, out;
    } cases[] = {
        {"lutgen --mul exact --man-bits 4 -o " + d + "/o.lut", d + "/o.lut"},
        {"lutgen --lut " + d + "/src.lut --export-approxtrain " + d + "/o.bin", d + "/o.bin"},
        {"lutgen --lut " + d + "/int8.lut --export-8bit " + d + "/o8.bin", d + "/o8.bin"},
        {"lutgen --import-approxtrain " + d + "/at_3.bin --man-bits 3 --entry-bytes 1 -o " + d + "/imp.lut", d + "/imp.lut"},
    };
    ASSERT_EQ(run_cli("lutgen --lut " + d + "/src.lut --export-approxtrain " + d + "/at_3.bin").status, 0);
    std::string base = listing(d);
    int tried = 0;
    for (const auto &c : cases)
        for (const char *kind : {"", ":eio"})
            for (int n = 1; n <= 3; n++) { // the write, the fsync, the rename
                SCOPED_TRACE(c.args + " fault " + std::to_string(n) + kind);
                Env e("MANTIS_FAULT_WRITE", std::to_string(n) + kind);
                CliResult r = run_cli(c.args);
                tried++;
                EXPECT_EQ(r.status, MTS_EXIT_ENV); // a failed write is the environment's: exit 4, by its code
                EXPECT_EQ(lines(r.err), 1) << r.err;
                EXPECT_NE(r.err.find(c.out), std::string::npos) << r.err;
                EXPECT_NE(r.err.find(*kind ? "Input/output error" : "No space left on device"), std::string::npos)
                    << r.err;
                EXPECT_EQ(listing(d), base); // neither the output nor a temp file
            }
    EXPECT_EQ(tried, 24);
    // an existing output stays as it was when its replacement fails
    std::string keep = slurp(d + "/src.lut");
    {
        Env e("MANTIS_FAULT_WRITE", "1");
        EXPECT_EQ(run_cli("lutgen --mul exact --man-bits 3 -o " + d + "/src.lut").status, MTS_EXIT_ENV);
    }
    EXPECT_TRUE(slurp(d + "/src.lut") == keep);
}

// A real full disk: a 64 KiB tmpfs (root only; skipped otherwise, the
// injected failures above cover the same paths).
TEST(Reliability, FullTmpfsLeavesNothing)
{
    std::string mnt = fresh_dir("tmpfs");
    if (geteuid() != 0 || mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0)
        GTEST_SKIP() << "cannot mount a tmpfs here (needs root): the fault-injection test covers the write paths";
    struct Unmount {
        std::string m;
        ~Unmount() { umount(m.c_str()); }
    } um{mnt};
    // a 2^14-entry table (64 KiB + header) does not fit
    CliResult r = run_cli("lutgen --mul exact --man-bits 7 -o " + mnt + "/big.lut");
    EXPECT_EQ(r.status, MTS_EXIT_ENV);
    EXPECT_NE(r.err.find(mnt + "/big.lut"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
    EXPECT_EQ(listing(mnt), "");
    // a small one does; replacing it by a big one fails and keeps it
    ASSERT_EQ(run_cli("lutgen --mul exact --man-bits 3 -o " + mnt + "/small.lut").status, 0);
    std::string small = slurp(mnt + "/small.lut");
    EXPECT_EQ(run_cli("lutgen --mul exact --man-bits 7 -o " + mnt + "/small.lut").status, MTS_EXIT_ENV);
    EXPECT_TRUE(slurp(mnt + "/small.lut") == small);
    EXPECT_EQ(listing(mnt), "small.lut");
    // stdout into the full file system: the command fails
    sh("dd if=/dev/zero of=" + mnt + "/fill bs=1k count=100 2>/dev/null");
    EXPECT_EQ(sh(std::string(MANTIS_BIN) + " models >" + mnt + "/out 2>/dev/null"), MTS_EXIT_ENV);
}

TEST(Reliability, FailedStdoutIsAnError)
{
    std::string d = fresh_dir("stdout");
    ASSERT_EQ(run_cli("lutgen --mul exact --man-bits 2 -o " + d + "/a.lut").status, 0);
    for (const std::string &cmd : {std::string("models"), std::string("metrics --mul mbm --man-bits 3 --json -"),
                                   "lut info " + d + "/a.lut", "lut info " + d + "/a.lut --json -"}) {
        SCOPED_TRACE(cmd);
        EXPECT_EQ(sh(std::string(MANTIS_BIN) + " " + cmd + " >/dev/full 2>" + d + "/err"), MTS_EXIT_ENV);
        EXPECT_NE(slurp(d + "/err").find("cannot write to standard output"), std::string::npos) << slurp(d + "/err");
    }
}

// ------------------------------------------------------------------ options

// Every numeric option of every command (taken from its --help, so a new
// option cannot be missed) with values that must be refused: one line on
// stderr naming the option, exit 2, no crash.
TEST(Reliability, EveryNumericOptionRefusesBadValues)
{
    // command -> option -> the other arguments that make the command otherwise valid
    const std::string lut = tmpdir() + "/opt.lut", mul = "--mul mbm ";
    ASSERT_EQ(run_cli("lutgen --mul exact --man-bits 2 -o " + lut).status, 0);
    std::map<std::string, std::map<std::string, std::string>> table = {
        {"flow", {{"-j", "--out " + tmpdir() + "/never"}}},
        {"eval", {{"--man-bits", mul}}},
        {"lutgen", {{"--man-bits", mul + "-o " + tmpdir() + "/never.lut"}, {"--int-exact", "-o " + tmpdir() + "/never.lut"},
                    {"--entry-bytes", "--import-approxtrain x_3.bin --man-bits 3 -o " + tmpdir() + "/never.lut"}}},
        {"metrics", {{"--man-bits", mul}}},
        {"verify", {{"--max-report", "--rtl x.v"}, {"--seed", "--rtl x.v"}, {"--samples", "--rtl x.v"}}},
        {"bench core", {{"--n", ""}, {"--reps", ""}}},
        {"bench gemm", {{"--sizes", ""}, {"--threads", ""}, {"--reps", ""}, {"--seed", ""}}},
        {"bench train", {{"--subset", ""}, {"--threads", ""}, {"--reps", ""}}},
        {"synth", {{"--seed", "--rtl x.v"}, {"--ops", "--rtl x.v"}, {"--clock-ghz", "--rtl x.v"}}},
        {"train",
         {{"--epochs", ""}, {"--batch", ""}, {"--seed", ""}, {"--lr", ""}, {"--momentum", ""}, {"--wd", ""},
          {"--step-size", ""}, {"--gamma", ""}, {"--subset", ""}, {"--test-subset", ""}, {"--threads", ""},
          {"--trace-samples", ""}, {"--chunk", ""}, {"--acc-bias", ""}, {"--prod-bias", ""}, {"--man-bits", mul}}},
        {"cosim",
         {{"--array", "--gemm x --mul mbm"}, {"--acc-bias", "--gemm x --array 2x2 --mul mbm"},
          {"--prod-bias", "--gemm x --array 2x2 --mul mbm"}, {"--chunk", "--gemm x --array 2x2 --mul mbm"},
          {"--batch", "--gemm x --array 2x2 --mul mbm"}, {"--man-bits", "--gemm x --array 2x2 " + mul}}},
        {"test",
         {{"--test-subset", "--checkpoint x"}, {"--threads", "--checkpoint x"}, {"--chunk", "--checkpoint x"},
          {"--acc-bias", "--checkpoint x"}, {"--prod-bias", "--checkpoint x"}, {"--man-bits", "--checkpoint x " + mul}}},
    };
    // what --help lists as taking a number (metavariables N M R S X B T, F for a frequency)
    std::regex numeric("(^|[\\s\\[(])(-j|--[a-z-]+) (N|M|R|S|X|B|T|16|N\\[,N\\.\\.\\.\\])(?=[\\s\\])|,]|$)"),
        ghz("--clock-ghz F");
    const std::vector<std::string> cmds = {"flow",  "models",     "rtl info",  "eval",        "lutgen",
                                           "lut",   "metrics",    "verify",    "bench core",  "bench gemm",
                                           "bench train", "bench rtl", "bench cosim", "synth", "train", "test", "data", "cosim"};
    // every command of `mantis --help` (and every benchmark of `mantis bench --help`) is scanned
    std::regex listed("\\n  ([a-z]+) ");
    for (const char *top : {"", "bench "}) {
        std::string text = run_cli(std::string(top) + "--help").out;
        int found = 0;
        for (std::sregex_iterator it(text.begin(), text.end(), listed), end; it != end; ++it, ++found) {
            std::string c = *top ? std::string(top) + (*it)[1].str() : (*it)[1].str();
            bool have = false;
            for (const auto &k : cmds) have |= k == c || k.rfind(c + " ", 0) == 0;
            EXPECT_TRUE(have) << "mantis " << c << " is not scanned for numeric options";
        }
        EXPECT_GE(found, *top ? 5 : 14) << text;
    }
    for (const std::string &cmd : cmds) {
        CliResult h = run_cli(cmd + " --help");
        std::string text = h.out + h.err;
        for (std::sregex_iterator it(text.begin(), text.end(), numeric), end; it != end; ++it) {
            std::string opt = (*it)[2];
            if (opt == "--model" || opt == "--ste" || opt == "--int-backward") continue; // names (M, S, B), not numbers
            EXPECT_TRUE(table[cmd].count(opt)) << "mantis " << cmd << " --help lists numeric option " << opt
                                               << " that this test does not try";
        }
        if (std::regex_search(text, ghz)) {
            EXPECT_TRUE(table[cmd].count("--clock-ghz")) << cmd;
        }
    }
    // negative, non-numeric, absurd, 64-bit overflow, leading / trailing space, a '+', trailing text, empty
    const char *bad[] = {"-1", "abc", "99999999999", "99999999999999999999999", " 5", "5 ", "+5", "5x", ""};
    int tried = 0;
    for (const auto &c : table)
        for (const auto &o : c.second)
            for (const char *v : bad) {
                // a 64-bit seed or sample count may be that large
                if ((o.first == "--seed" || o.first == "--samples") && !strcmp(v, "99999999999")) continue;
                SCOPED_TRACE("mantis " + c.first + " " + o.first + " '" + v + "'");
                CliResult r = run_cli(c.first + " " + o.second + " " + o.first + " '" + v + "'");
                tried++;
                EXPECT_EQ(r.status, 2) << r.err;
                EXPECT_EQ(lines(r.err), 1) << r.err;
                EXPECT_NE(r.err.find(o.first), std::string::npos) << r.err;
            }
    EXPECT_GE(tried, 330);
    // memory-hungry requests name the size asked before allocating anything
    CliResult r = run_cli("synth --rtl x.v --ops 99999999999");
    EXPECT_NE(r.err.find("GiB"), std::string::npos) << r.err;
}

// Lists are parsed whole (base/parse.c): an item past what fits is an error
// of its own, never dropped; the numbers inside specs and rules are as strict
// as options.
TEST(Reliability, ListsAreNeverCutShortAndSpecsAreStrict)
{
    std::string sizes;
    for (int i = 1; i <= 65; i++) sizes += (i > 1 ? "," : "") + std::to_string(i);
    for (const char *dev : {"", " --device cuda"}) {
        CliResult r = run_cli(std::string("bench gemm") + dev + " --sizes " + sizes);
        EXPECT_EQ(r.status, 2) << dev << r.err;
        EXPECT_EQ(lines(r.err), 1) << r.err;
        EXPECT_NE(r.err.find("at most 64 sizes"), std::string::npos) << r.err;
    }
    for (const char *v : {"8,,16", "8,", ",8", "8, 16", "+8"}) {
        CliResult r = run_cli(std::string("bench gemm --sizes '") + v + "'");
        EXPECT_EQ(r.status, 2) << v;
        EXPECT_NE(r.err.find("--sizes"), std::string::npos) << r.err;
    }
    std::string shapes;
    for (int i = 1; i <= 65; i++) shapes += (i > 1 ? "," : "") + std::to_string(i) + "x2x3";
    CliResult sh = run_cli("bench gemm --shapes " + shapes);
    EXPECT_EQ(sh.status, 2) << sh.err;
    EXPECT_NE(sh.err.find("at most 64 shapes"), std::string::npos) << sh.err;
    for (const char *v : {"7x5", "7x5x3:x", "7x5x3:ntn", "7x5x3:", "0x5x3", "7x5x3,", ",7x5x3", "7x5x3,,2x2x2",
                          "70000x5x3", "20000x20000x1", "7x5xx3", "7x5x3x2", "7 x5x3", "+7x5x3", "7x-5x3", ""}) {
        CliResult r = run_cli(std::string("bench gemm --shapes '") + v + "'");
        EXPECT_EQ(r.status, 2) << v;
        EXPECT_EQ(lines(r.err), 1) << r.err;
        EXPECT_NE(r.err.find("--shapes"), std::string::npos) << v << ": " << r.err;
    }
    // a flow configuration's seeds: nine of them is refused by name, not cut to eight
    std::string cfg = tmpdir() + "/nine.flow";
    std::ofstream(cfg) << "seeds = 1, 2, 3, 4, 5, 6, 7, 8, 9\n";
    CliResult f = run_cli("flow --config " + cfg + " --out " + tmpdir() + "/never --dry-run");
    EXPECT_EQ(f.status, 2) << f.err;
    EXPECT_NE(f.err.find("more than 8 seeds"), std::string::npos) << f.err;
    // numbers inside a --mul-layer rule, an arithmetic spec and a parameter
    for (const char *rule : {"fc1=fp32,chunk= 4", "fc1=fp32,chunk=+4", "fc1=fp32,chunk=4x"}) {
        CliResult r = run_cli(std::string("train --model lenet300 --list-layers --mul-layer '") + rule + "'");
        EXPECT_EQ(r.status, 2) << rule << ": " << r.out;
        EXPECT_NE(r.err.find("chunk"), std::string::npos) << r.err;
    }
    CliResult a = run_cli("cosim --gemm x --mul mbm --array ' 2x2'");
    EXPECT_EQ(a.status, 2);
    EXPECT_NE(a.err.find("--array"), std::string::npos) << a.err;
    a = run_cli("cosim --gemm x --mul mbm --array '2x+2'");
    EXPECT_NE(a.err.find("--array"), std::string::npos) << a.err;
}

// ------------------------------------------------------------------ training

namespace {
void be32(std::string &s, uint32_t v)
{
    for (int k = 3; k >= 0; k--) s.push_back((char)(v >> (8 * k)));
}
void write_idx(const std::string &dir, const char *prefix, int n)
{
    std::string im, lb;
    be32(im, 0x803), be32(im, (uint32_t)n), be32(im, 28), be32(im, 28);
    be32(lb, 0x801), be32(lb, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        int label = i % 4;
        for (int p = 0; p < 784; p++) im.push_back((char)(((p / 28) / 14 * 2 + (p % 28) / 14) == label ? 220 : 10 + p % 7));
        lb.push_back((char)label);
    }
    std::ofstream(dir + "/" + prefix + "-images-idx3-ubyte", std::ios::binary) << im;
    std::ofstream(dir + "/" + prefix + "-labels-idx1-ubyte", std::ios::binary) << lb;
}
// DIR/mnist with 64 training and ntest test images (write_idx); its path.
std::string small_mnist(const std::string &dir, int ntest)
{
    std::string data = dir + "/mnist";
    mkdir(data.c_str(), 0777);
    write_idx(data, "train", 64);
    write_idx(data, "t10k", ntest);
    return data;
}
// Two checkpoints hold the same training state: every byte but the timings
// of the history (seconds, samples/s: entries 3 and 4 of each 6-double
// record; layout in sim/nn/ckpt.c) and the CRC that covers them.
bool same_state(const std::string &a, const std::string &b)
{
    const size_t fixed = 52;
    if (a.size() != b.size() || a.size() < fixed + 4) return false;
    const uint8_t *p = (const uint8_t *)a.data();
    size_t nh = mts_get_le32(p + 44), cl = mts_get_le32(p + 48), hist = fixed + cl;
    for (size_t i = 0; i + 4 < a.size(); i++) {
        bool timing = i >= hist && i < hist + nh * 48 && ((i - hist) % 48) / 8 >= 3 && ((i - hist) % 48) / 8 <= 4;
        if (!timing && a[i] != b[i]) return false;
    }
    return true;
}
} // namespace

// `mantis train` killed in the middle of writing a checkpoint (half the bytes
// of the temp file, its fsync, its rename, at each of the first epochs), then
// `--resume`: it continues from the last complete checkpoint to the same
// parameters and output as an uninterrupted run, and no temp file remains.
TEST(Reliability, TrainKilledWhileCheckpointingResumes)
{
    std::string d = fresh_dir("killtrain"), data = small_mnist(d, 32);
    std::string common = "train --model lenet300 --data mnist --data-dir " + data +
                         " --batch 32 --seed 3 --epochs 3 --threads 1 --checkpoint ";
    CliResult full = run_cli(common + d + "/full");
    ASSERT_EQ(full.status, 0) << full.err;
    std::string want = slurp(d + "/full/checkpoint.mtsckpt");
    ASSERT_FALSE(want.empty());
    int resumed = 0, points = 0;
    // writes of a run: per epoch one checkpoint (write, fsync, rename); kill points 1..6 are epochs 1 and 2
    for (int n = 1; n <= 6; n++) {
        SCOPED_TRACE("killed at write step " + std::to_string(n));
        std::string ck = d + "/ck" + std::to_string(n);
        int st;
        {
            Env e("MANTIS_FAULT_WRITE", std::to_string(n) + ":kill");
            st = run_cli(common + ck).status;
        }
        points++;
        EXPECT_TRUE(killed(st)) << st;
        bool have = !slurp(ck + "/checkpoint.mtsckpt").empty();
        CliResult r = run_cli(common + ck + " --resume");
        if (n <= 3 && !have) { // killed before the first checkpoint existed: resume says so
            EXPECT_EQ(r.status, MTS_EXIT_ENV); // a file that is not there: the environment's
            EXPECT_NE(r.err.find("checkpoint.mtsckpt"), std::string::npos) << r.err;
            r = run_cli(common + ck);
        }
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.out, full.out);
        EXPECT_TRUE(same_state(slurp(ck + "/checkpoint.mtsckpt"), want)) << "the resumed checkpoint differs";
        EXPECT_EQ(listing(ck), "checkpoint.mtsckpt"); // the killed writer's temp file was cleaned
        resumed += same_state(slurp(ck + "/checkpoint.mtsckpt"), want);
    }
    EXPECT_EQ(resumed, points);
}

namespace {
// The backward provider of the gradient-fault test: exact FP32 products
// (a serial MULOP, so the count is the same on every machine) except the
// product number `at`, which is a quiet NaN. It reaches the library through
// the train config's own provider hook (mts_train_config.open), the way a
// caller plugs in any multiplier: nothing in the library knows about it.
struct NanInjector {
    uint64_t calls = 0, at = 0;
};
uint32_t nan_once(const mts_mulop *op, uint32_t a, uint32_t b)
{
    NanInjector *inj = (NanInjector *)op->impl;
    if (++inj->calls == inj->at) return 0x7FC00000u;
    float x, y, z;
    memcpy(&x, &a, 4), memcpy(&y, &b, 4);
    z = x * y;
    uint32_t r;
    memcpy(&r, &z, 4);
    return r;
}
int open_nan(void *ud, const mts_arith_spec *s, int threads, mts_arith *a, mts_err *err)
{
    if (strcmp(s->mul, "nan-once")) return mts_arith_open(s, threads, a, err);
    memset(a, 0, sizeof *a);
    a->op.fn = nan_once;
    a->op.impl = ud;
    a->op.fmt = mts_format_e8(23);
    a->op.serial = 1;
    snprintf(a->op.name, sizeof a->op.name, "nan-once");
    a->p.kind = MTS_PROV_MULOP;
    a->p.mul = &a->op;
    a->p.threads = 1;
    snprintf(a->desc, sizeof a->desc, "fp32 with one NaN product");
    return MTS_OK;
}
} // namespace

// Issue 17: a diverging run stops with its own status. A NaN in a gradient
// (one product of the first batch's backward GEMMs) poisons a weight at that
// step. The loss alone never showed it (the run finished with a finite loss:
// ReLU, x > 0 ? x : 0, maps a NaN to 0, so a poisoned weight can stay hidden
// from the logits); the trainer now also
// checks the parameters after every update: the run stops at epoch 1 step 1
// with diverged set, a NaN loss, the JSON saying so, and no checkpoint of the diverged
// epoch; through the CLI, a learning rate that blows the loss up exits 3 with
// the same JSON fields. NaN data cannot come from a data file (IDX and CIFAR
// pixels are bytes, scaled by 1/255): an IDX file claiming another element
// type (0x0D: float, where a NaN could hide) is refused as not an image file.
TEST(Reliability, TrainFaultsStopWithTheirOwnStatus)
{
    std::string d = fresh_dir("trainfault"), data = small_mnist(d, 16);

    // (a) a NaN in a gradient
    NanInjector inj;
    inj.at = 1;
    mts_train_config c;
    mts_train_config_init(&c);
    c.model = "lenet300", c.data = "mnist", c.data_dir = data.c_str();
    c.epochs = 2, c.batch = 16, c.threads = 1, c.seed = 3;
    snprintf(c.bwd.mul, sizeof c.bwd.mul, "nan-once");
    c.open = open_nan, c.open_ud = &inj;
    std::string json = d + "/grad.json", ck = d + "/grad_ck";
    c.json = json.c_str(), c.ckdir = ck.c_str();
    mts_train_info info;
    mts_err err;
    ASSERT_EQ(mts_train_run(&c, &info, &err), MTS_OK) << err.msg;
    EXPECT_GT(inj.calls, inj.at) << "the NaN product was never asked for";
    EXPECT_EQ(info.diverged, 1);
    EXPECT_EQ(info.diverged_epoch, 1);
    EXPECT_EQ(info.diverged_step, 1) << "the update of step 1 wrote the NaN";
    EXPECT_TRUE(std::isnan(info.diverged_loss)) << info.diverged_loss;
    std::string j = slurp(json);
    EXPECT_NE(j.find("\"diverged\": true"), std::string::npos) << j;
    EXPECT_NE(j.find("\"diverged_epoch\": 1,"), std::string::npos) << j;
    EXPECT_NE(j.find("\"diverged_step\": 1,"), std::string::npos) << j;
    EXPECT_NE(j.find("\"final_test_acc\": null"), std::string::npos) << j;
    mts_json *pj = mts_json_parse(j.c_str(), nullptr); // the NaN loss is JSON's null, not a bare nan
    ASSERT_NE(pj, nullptr) << j;
    ASSERT_NE(mts_json_get(pj, "diverged_loss"), nullptr) << j;
    EXPECT_EQ(mts_json_get(pj, "diverged_loss")->type, MTS_JNULL) << j;
    mts_json_free(pj);
    EXPECT_TRUE(slurp(ck + "/checkpoint.mtsckpt").empty()) << "a checkpoint of the diverged epoch";
    // the same run without the fault trains
    NanInjector none;
    c.open_ud = &none, c.epochs = 1;
    std::string ck2 = d + "/clean_ck";
    c.ckdir = ck2.c_str();
    ASSERT_EQ(mts_train_run(&c, &info, &err), MTS_OK) << err.msg;
    EXPECT_EQ(info.diverged, 0);
    EXPECT_GT(none.calls, 0u);

    // (b) through the CLI: the loss overflows, exit 3, the JSON fields
    std::string js = d + "/lr.json";
    CliResult r = run_cli("train --model lenet300 --data mnist --data-dir " + data +
                          " --batch 16 --seed 3 --epochs 2 --threads 1 --lr 100 --json " + js);
    EXPECT_EQ(r.status, MTS_EXIT_DIVERGED) << r.out << r.err;
    EXPECT_NE(r.err.find("diverged at epoch 1 step "), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 3) << r.err; // the run's banner, its optimizer, the verdict
    j = slurp(js);
    EXPECT_NE(j.find("\"diverged\": true"), std::string::npos) << j;
    EXPECT_NE(j.find("\"diverged_epoch\": 1,"), std::string::npos) << j;
    EXPECT_NE(j.find("\"diverged_step\": "), std::string::npos) << j;

    // (c) NaN data: an IDX image file of floats (type 0x0D) is not read as pixels
    std::string fl = d + "/float";
    mkdir(fl.c_str(), 0777);
    write_idx(fl, "train", 4);
    write_idx(fl, "t10k", 4);
    std::string im;
    be32(im, 0xD03), be32(im, 4), be32(im, 14), be32(im, 14);
    for (int i = 0; i < 4 * 14 * 14; i++) be32(im, i == 5 ? 0x7FC00000u : 0x3F000000u);
    std::ofstream(fl + "/train-images-idx3-ubyte", std::ios::binary) << im;
    r = run_cli("train --model lenet300 --data mnist --data-dir " + fl + " --epochs 1 --threads 1");
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("train-images-idx3-ubyte: not an IDX image file"), std::string::npos) << r.err;
}

// ------------------------------------------------------------------ fixed bugs

TEST(Reliability, JsonStringEndingInBackslash)
{
    for (const char *t : {"\"\\", "{\"a\\", "[\"x\\"}) {
        size_t n = strlen(t);
        char *s = (char *)malloc(n + 1); // exactly the text: ASan sees a read past it
        memcpy(s, t, n + 1);
        size_t pos = 0;
        EXPECT_EQ(mts_json_parse(s, &pos), nullptr) << t;
        EXPECT_LE(pos, n);
        free(s);
    }
}

TEST(Reliability, FormatWidthsCheckedBeforeUse)
{
    mts_format f;
    mts_err err;
    EXPECT_EQ(mts_format_parse("e87m7", &f, &err), MTS_EINVAL);
    EXPECT_NE(std::string(err.msg).find("E=87"), std::string::npos) << err.msg;
    for (const char *s : {"e2147483647m7", "e-1m5", "e8m-3", "e 8m5", "e+8m5", "e8m5x", "e8m99999999999"})
        EXPECT_EQ(mts_format_parse(s, &f, &err), MTS_EINVAL) << s;
    EXPECT_EQ(mts_format_parse("e5m10", &f, &err), MTS_OK);
    // a header bias near INT_MIN used to wrap the exponent range into "valid"
    for (int bias : {INT32_MIN, INT32_MIN + 2, INT32_MIN + 200, INT32_MAX}) {
        mts_format g = {8, 3, bias, 1};
        EXPECT_EQ(mts_format_check(&g, &err), MTS_EINVAL) << bias;
    }
}

TEST(Reliability, LutHeaderBiasNearIntMinIsRefused)
{
    std::string p = tmpdir() + "/bias.lut";
    ASSERT_EQ(run_cli("lutgen --mul exact --man-bits 2 -o " + p).status, 0);
    std::string b = slurp(p);
    ASSERT_EQ(b.size(), 128u + 64u);
    uint8_t *h = (uint8_t *)&b[0];
    mts_put_le32(h + 24, 0x80000002u); // bias
    mts_put_le32(h + 60, 0);
    mts_put_le32(h + 60, mts_crc32(0, h, 128)); // a consistent header: only the parser can refuse it
    std::ofstream(p, std::ios::binary) << b;
    mts_lut lut;
    mts_err err;
    EXPECT_EQ(mts_lut_load(p.c_str(), &lut, &err), MTS_EFORMAT);
    EXPECT_NE(std::string(err.msg).find("invalid float format"), std::string::npos) << err.msg;
}

TEST(Reliability, CifarReaderTakesFewRecords)
{
    std::string p = tmpdir() + "/cifar2.bin", rec(2 * 3073, '\x40');
    rec[0] = 3, rec[3073] = 9;
    std::ofstream(p, std::ios::binary) << rec;
    const char *f[1] = {p.c_str()};
    mts_dataset d;
    mts_err err;
    ASSERT_EQ(mts_cifar10_load_records(f, 1, 2, &d, &err), MTS_OK) << err.msg;
    EXPECT_EQ(d.n, 2);
    EXPECT_EQ(d.y[0], 3);
    EXPECT_EQ(d.y[1], 9);
    EXPECT_FLOAT_EQ(d.x[5], 64.0f / 255.0f);
    mts_dataset_free(&d);
    EXPECT_EQ(mts_cifar10_load_records(f, 1, 3, &d, &err), MTS_EFORMAT);
    EXPECT_NE(std::string(err.msg).find("3 records"), std::string::npos) << err.msg;
    EXPECT_EQ(mts_cifar10_load_records(f, 1, 0, &d, &err), MTS_EINVAL);
    rec[3073] = 10;
    std::ofstream(p, std::ios::binary) << rec;
    EXPECT_EQ(mts_cifar10_load_records(f, 1, 2, &d, &err), MTS_EFORMAT);
    EXPECT_NE(std::string(err.msg).find("label 10 of record 1"), std::string::npos) << err.msg;
}

// The peak virtual memory of this process in KiB (VmPeak), -1 if unknown.
long vm_peak_kib()
{
    std::ifstream f("/proc/self/status");
    for (std::string l; std::getline(f, l);)
        if (l.rfind("VmPeak:", 0) == 0) return atol(l.c_str() + 7);
    return -1;
}

// A short or hostile CIFAR file is refused before the reader asks for the
// memory of the whole set (64 files x 10,000 records: 7.3 GiB of floats):
// measured as the peak virtual memory of a child process that reads it.
TEST(Reliability, CifarReaderChecksSizesBeforeAllocating)
{
    std::string p = tmpdir() + "/cifar-short.bin";
    std::ofstream(p, std::ios::binary) << std::string(3073 * 2, '\x01');
    std::vector<const char *> f(64, p.c_str());
    pid_t pid = fork();
    if (pid == 0) {
        long before = vm_peak_kib();
        mts_dataset d;
        mts_err err;
        int rc = mts_cifar10_load_records(f.data(), 64, 10000, &d, &err);
        long grew = vm_peak_kib() - before;
        bool named = std::string(err.msg).find("6146 bytes, expected 30730000") != std::string::npos;
        _exit(before < 0 ? 3 : rc != MTS_EFORMAT || !named ? 2 : grew > (1L << 20) ? 1 : 0); // 1 GiB in KiB
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st));
    if (WEXITSTATUS(st) == 3) GTEST_SKIP() << "no VmPeak in /proc/self/status";
    EXPECT_NE(WEXITSTATUS(st), 2) << "not refused as EFORMAT naming the size";
    EXPECT_EQ(WEXITSTATUS(st), 0) << "the peak virtual memory grew by more than 1 GiB before the size was checked";
}

TEST(Reliability, StaleTempFilesOfDeadWritersAreCleaned)
{
    std::string d = fresh_dir("stale");
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    int st;
    waitpid(dead, &st, 0);
    std::ofstream(d + "/a.lut.tmp." + std::to_string(dead)) << "torn";
    std::ofstream(d + "/b.json.tmp." + std::to_string(getppid())) << "a live writer's"; // alive: kept
    std::ofstream(d + "/notes.tmp.txt") << "not ours";
    EXPECT_EQ(mts_fs_clean_stale_tmp(d.c_str()), 1);
    EXPECT_EQ(listing(d), "b.json.tmp." + std::to_string(getppid()) + " notes.tmp.txt");
}
