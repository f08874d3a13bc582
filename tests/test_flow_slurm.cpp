// The flow's Slurm executor (issue 15) on a one-node Slurm cluster the test
// starts itself from the Debian packages (munged, slurmctld, slurmd; config,
// key, state and spool in a temporary directory; stopped by their pids at
// the end): the same results as the local executor, a coordinator killed
// mid-run resumes without duplicating a job, a failing step and a cancelled
// job are reported (Slurm's reason, not cached), sbatch refusing or missing is
// one clear line, --dry-run prints the sbatch command lines.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "flow_proc_util.h"
#include "test_util.h"

namespace {

const std::string src = std::string(MANTIS_TEST_DATA) + "/../..";

bool exists(const std::string &p)
{
    struct stat st;
    return stat(p.c_str(), &st) == 0;
}

std::string first_line(const std::string &cmd)
{
    std::string out = tmpdir() + "/first-line";
    sh(cmd + " >" + out + " 2>/dev/null");
    std::string s = slurp(out);
    return s.substr(0, s.find('\n'));
}

int lines_with(const std::string &text, const std::string &needle)
{
    int n = 0;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) n += l.find(needle) != std::string::npos;
    return n;
}

// The daemons' pids from their pid files.
int pid_in(const std::string &file) { return atoi(slurp(file).c_str()); }

void stop_pid(int pid)
{
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100 && kill(pid, 0) == 0; i++) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (kill(pid, 0) == 0) kill(pid, SIGKILL);
}

class SlurmFlow : public ::testing::Test {
  protected:
    static std::string dir, designs, skip, cfg;
    static bool started;

    static std::string why_skip()
    {
        if (geteuid() != 0) return "not root: the test starts munged, slurmctld and slurmd itself";
        for (const char *p : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"})
            if (!exists(p)) return std::string(p) + " absent (Debian: munge slurmctld slurmd; flows/install-deps.sh)";
        for (const char *t : {"sbatch", "squeue", "scontrol", "scancel", "sinfo"})
            if (!have_tool(t)) return std::string(t) + " not on PATH (Debian: slurm-client)";
        if (!exists(src + "/data/mnist/train-images-idx3-ubyte"))
            return "MNIST not in " + src + "/data/mnist (mantis data fetch mnist)";
        if (!have_tool("verilator") || !have_tool("yosys")) return "verilator or yosys not installed";
        return "";
    }

    // munged with a fresh key, slurmctld and slurmd of a one-node cluster, all
    // state under dir; ports from our pid so parallel test runs do not meet.
    static std::string start_cluster()
    {
        std::string host = first_line("hostname -s");
        int port = 20000 + (getpid() % 20000) * 2;
        for (const char *d : {"/state", "/spool", "/log", "/munge"}) mkdir((dir + d).c_str(), 0700);
        std::ofstream(dir + "/slurm.conf")
            << "ClusterName=mantistest\nSlurmctldHost=" << host << "\nSlurmctldPort=" << port
            << "\nSlurmdPort=" << port + 1 << "\nAuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << dir
            << "/munge/munge.sock\nSlurmUser=root\nSlurmdUser=root\nStateSaveLocation=" << dir
            << "/state\nSlurmdSpoolDir=" << dir << "/spool\nSlurmctldPidFile=" << dir
            << "/slurmctld.pid\nSlurmdPidFile=" << dir << "/slurmd.pid\nSlurmctldLogFile=" << dir
            << "/log/slurmctld.log\nSlurmdLogFile=" << dir
            << "/log/slurmd.log\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
               "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nSchedulerType=sched/backfill\n"
               "MpiDefault=none\nReturnToService=2\nMinJobAge=3600\nJobAcctGatherType=jobacct_gather/none\n"
               "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\nNodeName="
            << host << " CPUs=2 RealMemory=20000 State=UNKNOWN\nPartitionName=debug Nodes=" << host
            << " Default=YES MaxTime=INFINITE State=UP\n";
        setenv("SLURM_CONF", (dir + "/slurm.conf").c_str(), 1);  // for sbatch/squeue, here and in the flow
        if (sh("dd if=/dev/urandom of=" + dir + "/munge/munge.key bs=1024 count=1 2>/dev/null && chmod 400 " + dir +
               "/munge/munge.key"))
            return "cannot write a munge key";
        std::string m = dir + "/munge/";
        if (sh("/usr/sbin/munged --force --key-file=" + m + "munge.key --socket=" + m + "munge.sock --pid-file=" + m +
               "munged.pid --log-file=" + m + "munged.log --seed-file=" + m + "seed"))
            return "munged did not start: " + slurp(m + "munged.log");
        started = true;
        if (sh("/usr/sbin/slurmctld -i -f " + dir + "/slurm.conf"))
            return "slurmctld did not start: " + slurp(dir + "/log/slurmctld.log");
        if (sh("/usr/sbin/slurmd -f " + dir + "/slurm.conf")) return "slurmd did not start: " + slurp(dir + "/log/slurmd.log");
        for (int i = 0; i < 200; i++) {
            if (first_line("sinfo -h -o %t") == "idle") return "";
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return "the node did not come up: " + first_line("sinfo -h -o %t") + "\n" + slurp(dir + "/log/slurmd.log");
    }

    static void SetUpTestSuite()
    {
        skip = why_skip();
        if (!skip.empty()) return;
        char t[] = "/tmp/mantis-slurm-XXXXXX";
        dir = mkdtemp(t);
        designs = dir + "/designs";
        mkdir(designs.c_str(), 0755);
        // one design that runs every kind of step, one that fails its first: all the phases need; the
        // first as a sweep point (one value), whose name "mul_trunc[M=7]" reaches sbatch's paths
        sh("cp " + src + "/rtl/mul_trunc.v " + MANTIS_TEST_DATA + "/flow/three_inputs.v " + designs + "/");
        cfg = dir + "/t.flow";
        std::ofstream(cfg) << "models = lenet300\ndatasets = mnist\ndata_dir = " << src
                           << "/data\nepochs = 1\nsubset = 300\ntest_subset = 1000\ntrace_subset = 100\ntrace_samples = 1024\n"
                              "baselines = bf16\nslurm_poll = 1\nsweep = mul_trunc: M = 7\n";
        std::string err = start_cluster();
        if (!err.empty()) skip = "cannot start the test's Slurm cluster: " + err;
    }

    static void TearDownTestSuite()
    {
        if (dir.empty()) return;
        if (started) {
            sh("scancel --user=root >/dev/null 2>&1");
            stop_pid(pid_in(dir + "/slurmd.pid"));
            stop_pid(pid_in(dir + "/slurmctld.pid"));
            stop_pid(pid_in(dir + "/munge/munged.pid"));
            for (int p : survivors(dir, 2.0)) kill(p, SIGKILL);  // a job step of a failed test
        }
        sh("rm -rf " + dir);
    }

    void SetUp() override
    {
        if (!skip.empty()) GTEST_SKIP() << skip;
    }

    static std::string flow(const std::string &out, const std::string &extra = "")
    {
        return "env MANTIS_FLOW_MARK=" + dir + " " + MANTIS_BIN + " flow --quick --config " + cfg + " --designs " +
               designs + " --out " + out + " " + extra;
    }

    // Job names (mantis-KEY) of every job this cluster has seen, with their counts.
    static std::map<std::string, int> job_names()
    {
        std::map<std::string, int> n;
        sh("squeue -h -t all -o %j >" + dir + "/names 2>&1");
        std::istringstream in(slurp(dir + "/names"));
        for (std::string l; std::getline(in, l);)
            if (!l.empty()) n[l]++;
        return n;
    }
};
std::string SlurmFlow::dir, SlurmFlow::designs, SlurmFlow::skip, SlurmFlow::cfg;
bool SlurmFlow::started = false;

// One test in phases: they share the cluster (CTest runs each TEST in its own process).
TEST_F(SlurmFlow, SameResultsAsLocalResumeWithoutDuplicatesFailuresReported)
{
    std::string local = dir + "/local", out = dir + "/slurm";
    // exit 1: three_inputs fits no drop-in shape, so its row is not ok
    ASSERT_EQ(sh(flow(local, "-j 2") + " >" + dir + "/local.log 2>&1"), 1) << slurp(dir + "/local.log");
    {
        SCOPED_TRACE("dry run: sbatch lines, nothing submitted");
        CliResult r = run_cli("flow --quick --config " + cfg + " --designs " + designs + " --out " + dir +
                              "/dry --executor slurm --dry-run");
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(lines_with(r.out, "'sbatch' '--parsable' '--job-name=mantis-"), 2 + 3) << r.out;  // 2 detects, bf16
        EXPECT_NE(r.out.find("'--mem=8G' '--time=08:00:00'"), std::string::npos) << r.out;
        EXPECT_TRUE(job_names().empty());
    }
    {
        SCOPED_TRACE("slurm run, coordinator SIGKILLed mid-run, then resumed");
        std::string log = dir + "/killed.log";
        pid_t pid = start_group(flow(out, "--executor slurm -j 4"), log);
        for (int i = 0; i < 1200 && lines_with(slurp(log), "] done") < 5; i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        kill(-pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        int queued = atoi(first_line("squeue -h -t pending,running -o %i | wc -l").c_str());
        std::printf("[ slurm ] coordinator killed after %d steps done, %d jobs queued or running\n",
                    lines_with(slurp(log), "] done"), queued);
        std::string log2 = dir + "/resumed.log";
        ASSERT_EQ(sh(flow(out, "--executor slurm -j 4") + " >" + log2 + " 2>&1"), 1) << slurp(log2);
        std::string resumed = slurp(log2);
        if (queued) {
            EXPECT_NE(resumed.find("follow  "), std::string::npos) << resumed;
        }
        EXPECT_EQ(slurp(out + "/results.csv"), slurp(local + "/results.csv")) << resumed;
        EXPECT_EQ(slurp(out + "/results.json"), slurp(local + "/results.json"));
        EXPECT_NE(slurp(out + "/results.csv").find("\nmul_trunc[M=7],significand,bf16,bit-exact,"), std::string::npos)
            << slurp(out + "/results.csv");
        EXPECT_TRUE(exists(out + "/logs/mul_trunc[M=7]/lutgen.slurm.log")) << "sbatch --output with the point's name";
        // the failing step is reported the same way under Slurm
        std::string all = slurp(log) + resumed;
        EXPECT_EQ(lines_with(all, "FAILED  three_inputs/detect (exit 2"), 1) << all;
        auto names = job_names();
        int jobs = 0;
        for (auto &kv : names) {
            EXPECT_EQ(kv.second, 1) << kv.first << " was submitted " << kv.second << " times";
            jobs += kv.second;
        }
        // every step ran as exactly one job: the jobs are the steps the local run started
        EXPECT_EQ(jobs, lines_with(slurp(dir + "/local.log"), "] start")) << all;
        std::printf("[ slurm ] %d jobs, no duplicates; results.csv and results.json equal the local run's\n", jobs);
    }
    {
        SCOPED_TRACE("a cancelled job is that step's failure with Slurm's reason, not cached");
        std::string log = dir + "/cancel.log", cancel_cfg = dir + "/cancel.flow";
        std::ofstream(cancel_cfg) << slurp(cfg) << "slurm_options = --begin=now+3600\n";
        pid_t pid = start_group(std::string(MANTIS_BIN) + " flow --quick --executor slurm --config " + cancel_cfg +
                                    " --designs " + designs + " --out " + dir + "/cancel",
                                log);
        int st = 0;
        bool ended = false;
        for (int i = 0; i < 120 && !ended; i++) {  // every job pends an hour: cancel them as they come
            ended = waitpid(pid, &st, WNOHANG) == pid;
            sh("scancel --user=root --state=PENDING >/dev/null 2>&1");
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        if (!ended) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
        }
        EXPECT_TRUE(ended) << "the coordinator did not finish after its jobs were cancelled";
        std::string text = slurp(log);
        EXPECT_NE(text.find("CANCELLED"), std::string::npos) << text;
        EXPECT_NE(text.find("FAILED  mul_trunc[M=7]/detect (slurm job "), std::string::npos) << text;
        EXPECT_EQ(sh("find " + dir + "/cancel -name '*.failed' | grep -q ."), 1) << "a cancelled job was cached";
    }
    {
        SCOPED_TRACE("sbatch refusing is one clear line");
        std::string bad = dir + "/bad.flow";
        std::ofstream(bad) << slurp(cfg) << "slurm_partition = nosuch\n";
        CliResult r = run_cli("flow --quick --executor slurm --config " + bad + " --designs " + designs + " --out " +
                              dir + "/bad");
        EXPECT_EQ(r.status, 2);
        EXPECT_EQ(lines_with(r.err, ""), 1) << r.err;
        EXPECT_NE(r.err.find("sbatch refused mul_trunc[M=7]/detect (exit 1): "), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("partition"), std::string::npos) << r.err;
    }
}

TEST(SlurmExecutor, MissingSbatchIsOneLine)
{
    std::string d = tmpdir() + "/nosbatch", err = tmpdir() + "/nosbatch.err", cfg = tmpdir() + "/empty.flow";
    // the defaults, with a data set directory: the flow checks that upfront, before it needs sbatch
    ASSERT_EQ(sh("mkdir -p " + tmpdir() + "/nosbatch-data/mnist"), 0);
    std::ofstream(cfg) << "# defaults\ndata_dir = nosbatch-data\n";
    int st = sh("env PATH=/nonexistent " + std::string(MANTIS_BIN) + " flow --executor slurm --config " + cfg +
                " --designs " + src + "/rtl --out " + d + " 2>" + err + " >/dev/null");
    std::string text = slurp(err);
    EXPECT_EQ(st, 2);
    EXPECT_EQ(lines_with(text, ""), 1) << text;
    EXPECT_NE(text.find("sbatch not found on PATH"), std::string::npos) << text;
}

}  // namespace
