/* main.c - the `mantis` command line: git-style subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"

static const cli_command commands[] = {
    {"flow", cmd_flow, "the whole flow: every design in rtl/ to verified LUTs, synthesis, training and a report"},
    {"models", cmd_models, "list the registered C multiplier models and formats"},
    {"rtl", cmd_rtl, "detect a Verilog design's drop-in shape and build its Verilated model (rtl info)"},
    {"eval", cmd_eval, "multiply operand pairs read from stdin with a model, LUT or RTL design"},
    {"lutgen", cmd_lutgen, "sweep a multiplier into a mantissa LUT file, or import a peer's table"},
    {"lut", cmd_lut, "inspect a LUT file (lut info FILE)"},
    {"metrics", cmd_metrics, "error metrics of a multiplier from an exhaustive sweep"},
    {"verify", cmd_verify, "check a Verilog design bit for bit against its LUT and C models"},
    {"bench", cmd_bench, "throughput benchmarks (bench core)"},
    {"synth", cmd_synth, "area, delay, gate-level equivalence and switching power of a Verilog design"},
    {"train", cmd_train, "train a model with the chosen multipliers and accumulator (docs/training.md)"},
    {"test", cmd_test, "evaluate a training checkpoint, optionally with another multiplier"},
    {"data", cmd_data, "fetch and check the MNIST / Fashion-MNIST data sets"},
    {"cosim", cmd_cosim, "replay a layer GEMM on a SystemC systolic MAC array: bit-exact check, cycles, energy"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: mantis <command> [options]   (mantis <command> --help)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

/* libgomp's idle threads spin for a while before they sleep (OMP_WAIT_POLICY
 * unset: about 3 ms). On a machine busy with other processes (a flow's
 * parallel steps, CI) that spinning takes the cores the work needs:
 * vit-tiny, 1,280 images, --threads 2 beside two other busy processes on 2
 * cores took 148.8 s (42.5 s user) spinning and 14.4 s (1.9 s user)
 * passive. Passive threads sleep at once, and every parallel region then
 * pays a futex wake-up: on an idle machine a brief spin (GOMP_SPINCOUNT
 * 10000, well under a millisecond) saves that, 5-10% of a LeNet-5 epoch at
 * 2 threads (docs/training.md, "Threads on a busy machine"), so it is
 * added when the processes running now leave a core free (cli_idle_core). libgomp
 * reads both variables when it is loaded, before main, so they are set
 * here and this process re-executes itself once: only commands that run
 * threads (the others start often and briefly; `bench` keeps the default,
 * as the baselines it starts do); a user's own setting is kept. */
static void omp_passive(char **argv)
{
    static const char *const threaded[] = {"train", "test", "lutgen", "metrics", "verify", NULL};
    int hit = 0;
    for (int i = 0; threaded[i]; i++) hit |= !strcmp(argv[1], threaded[i]);
    if (!hit || getenv("OMP_WAIT_POLICY")) return;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1)) return;
    if (!getenv("GOMP_SPINCOUNT") && cli_idle_core()) (void)setenv("GOMP_SPINCOUNT", CLI_OMP_BRIEF_SPIN, 1);
    execv("/proc/self/exe", argv); /* returns only on failure: go on as we are */
}

int main(int argc, char **argv)
{
    if (argc >= 2) omp_passive(argv);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("mantis %s\n", MANTIS_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return cli_finish(argv[1], commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "mantis: unknown command '%s' (see mantis --help)\n", argv[1]);
    return 2;
}
