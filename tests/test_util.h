// test_util.h - what several test programs need, one copy: reading a whole
// file, one temporary directory per test process, running a shell command or
// the `mantis` binary, skipping when an external tool is missing, FMAq formats.
#ifndef MANTIS_TEST_UTIL_H
#define MANTIS_TEST_UTIL_H

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "mantis/fmaq.h"

// A file's bytes ("" when it cannot be read).
inline std::string slurp(const std::string &path)
{
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// One directory under /tmp for the whole test process (made on first use).
inline std::string tmpdir()
{
    static std::string d;
    if (d.empty()) {
        char t[] = "/tmp/mantis-test-XXXXXX";
        const char *p = mkdtemp(t);
        d = p ? p : "/tmp";
    }
    return d;
}

// Runs cmd with /bin/sh; its exit status, -1 when it did not exit normally.
inline int sh(const std::string &cmd)
{
    int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// 1 if `tool` is on PATH.
inline bool have_tool(const char *tool) { return sh(std::string("command -v ") + tool + " >/dev/null 2>&1") == 0; }

// Verilator and a C++ compiler: what building an RTL model needs.
inline bool have_rtl_tools() { return have_tool("verilator") && have_tool("g++"); }
#define NEED_RTL_TOOLS() \
    if (!have_rtl_tools()) GTEST_SKIP() << "verilator or g++ is not installed (needed to build RTL models)"

struct CliResult {
    int status;
    std::string out, err;
};

// Runs `mantis ARGS` (MANTIS_BIN) with `input` on stdin.
inline CliResult run_cli(const std::string &args, const std::string &input = "")
{
    std::string in = tmpdir() + "/cli-in", out = tmpdir() + "/cli-out", err = tmpdir() + "/cli-err";
    std::ofstream(in) << input;
    int st = sh(std::string(MANTIS_BIN) + " " + args + " <" + in + " >" + out + " 2>" + err);
    return {st, slurp(out), slurp(err)};
}

// An FMAq format (fmaq.h) in one expression: M mantissa bits, E exponent bits, bias.
inline mts_qfmt qfmt(int M, int E, int bias, int uf = 1, mts_round r = MTS_RTZ)
{
    mts_qfmt q;
    q.M = M;
    q.E = E;
    q.bias = bias;
    q.underflow = uf;
    q.rnd = r;
    return q;
}

#endif
