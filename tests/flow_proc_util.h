// flow_proc_util.h - what the flow's kill and Slurm tests share: starting
// `mantis flow` as the leader of its own process group, killing that group,
// waiting with a bound, and finding processes that still name a directory
// (or that run a given program: where a kill lands).
#ifndef MANTIS_FLOW_PROC_UTIL_H
#define MANTIS_FLOW_PROC_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

// Starts `sh -c "exec CMD"` (stdout and stderr to log) as a process group leader.
inline pid_t start_group(const std::string &cmd, const std::string &log)
{
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >" + log + " 2>&1").c_str(), (char *)nullptr);
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

// Waits for pid at most `seconds`; its exit status, or -1 (then it is killed).
inline int wait_bounded(pid_t pid, double seconds)
{
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int st = 0;
    while (std::chrono::steady_clock::now() < end) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(-pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

// Calls fn(pid, "/proc/PID") for every process but this one.
template <class F>
inline void each_proc(F fn)
{
    DIR *d = opendir("/proc");
    if (!d) return;
    while (dirent *e = readdir(d)) {
        int pid = atoi(e->d_name);
        if (pid > 0 && pid != getpid()) fn(pid, std::string("/proc/") + e->d_name);
    }
    closedir(d);
}

// 1 if the process of /proc/PID has ended but is not reaped yet.
inline bool is_zombie(const std::string &base) { return slurp(base + "/stat").find(") Z ") != std::string::npos; }

// Pids of the processes whose command line or environment mentions `needle`
// (not this one): a marker in the environment finds every descendant.
inline std::vector<int> procs_naming(const std::string &needle)
{
    std::vector<int> found;
    each_proc([&](int pid, const std::string &base) {
        if (is_zombie(base)) return;  // a zombie has ended
        if (slurp(base + "/cmdline").find(needle) != std::string::npos ||
            slurp(base + "/environ").find(needle) != std::string::npos)
            found.push_back(pid);
    });
    return found;
}

// The processes still naming needle after waiting up to `seconds` for them to go.
inline std::vector<int> survivors(const std::string &needle, double seconds)
{
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::vector<int> left = procs_naming(needle);
    while (!left.empty() && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        left = procs_naming(needle);
    }
    return left;
}

// One live process: its pid and command line (arguments joined by spaces).
struct ProcSeen {
    int pid;
    std::string cmd;
};

// The live processes (not this one, not zombies) whose environment mentions
// `mark`, whose program (argv[0]'s base name) is `prog` ("" for any) and
// whose command line holds every string of `words`.
inline std::vector<ProcSeen> procs_running(const std::string &mark, const std::string &prog,
                                           const std::vector<std::string> &words)
{
    std::vector<ProcSeen> found;
    each_proc([&](int pid, const std::string &base) {
        std::string cmd = slurp(base + "/cmdline");
        if (cmd.empty()) return;  // a kernel thread, or it has just ended
        std::string arg0 = cmd.substr(0, cmd.find('\0'));
        if (!prog.empty() && arg0.substr(arg0.rfind('/') + 1) != prog) return;
        for (char &c : cmd)
            if (c == '\0') c = ' ';
        bool all = true;
        for (const std::string &w : words) all = all && cmd.find(w) != std::string::npos;
        if (all && !is_zombie(base) && slurp(base + "/environ").find(mark) != std::string::npos)
            found.push_back({pid, cmd});
    });
    return found;
}

#endif
