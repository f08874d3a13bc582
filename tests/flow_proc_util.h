// flow_proc_util.h - what the flow's kill and Slurm tests share: starting
// `mantis flow` as the leader of its own process group, killing that group,
// waiting with a bound, and finding processes that still name a directory.
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

// Pids of the processes whose command line or environment mentions `needle`
// (not this one): a marker in the environment finds every descendant.
inline std::vector<int> procs_naming(const std::string &needle)
{
    std::vector<int> found;
    DIR *d = opendir("/proc");
    if (!d) return found;
    while (dirent *e = readdir(d)) {
        int pid = atoi(e->d_name);
        if (pid <= 0 || pid == getpid()) continue;
        std::string cmd = slurp(std::string("/proc/") + e->d_name + "/cmdline");
        std::string stat = slurp(std::string("/proc/") + e->d_name + "/stat");
        if (stat.find(") Z ") != std::string::npos) continue;  // a zombie has ended
        std::string env = slurp(std::string("/proc/") + e->d_name + "/environ");
        if (cmd.find(needle) != std::string::npos || env.find(needle) != std::string::npos) found.push_back(pid);
    }
    closedir(d);
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

#endif
