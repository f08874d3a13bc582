/* main.c - the `mantis` command line: git-style subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"

static const mts_command commands[] = {
    {"flow", mts_cmd_flow, "the whole flow: every design in rtl/ to verified LUTs, synthesis, training and a report"},
    {"models", mts_cmd_models, "list the registered C multiplier models and formats"},
    {"rtl", mts_cmd_rtl, "detect a Verilog design's drop-in shape and build its Verilated model (rtl info)"},
    {"eval", mts_cmd_eval, "multiply operand pairs read from stdin with a model, LUT or RTL design"},
    {"lutgen", mts_cmd_lutgen, "sweep a multiplier into a mantissa LUT file, or import a peer's table"},
    {"lut", mts_cmd_lut, "inspect a LUT file (lut info FILE)"},
    {"metrics", mts_cmd_metrics, "error metrics of a multiplier from an exhaustive sweep"},
    {"verify", mts_cmd_verify, "check a Verilog design bit for bit against its LUT and C models"},
    {"bench", mts_cmd_bench, "throughput benchmarks (bench core)"},
    {"synth", mts_cmd_synth, "area, delay, gate-level equivalence and switching power of a Verilog design"},
    {"train", mts_cmd_train, "train a model with the chosen multipliers and accumulator (docs/training.md)"},
    {"test", mts_cmd_test, "evaluate a training checkpoint, optionally with another multiplier"},
    {"data", mts_cmd_data, "fetch and check the MNIST / Fashion-MNIST data sets"},
    {"cosim", mts_cmd_cosim, "replay a layer GEMM on a SystemC systolic MAC array: bit-exact check, cycles, energy"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: mantis <command> [options]   (mantis <command> --help)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
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
            return mts_cli_finish(argv[1], commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "mantis: unknown command '%s' (see mantis --help)\n", argv[1]);
    return 2;
}
