/* main.c - the `mantis` command line: git-style subcommands. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static const mts_command commands[] = {
    {"models", mts_cmd_models, "list the registered C multiplier models and formats"},
    {"eval", mts_cmd_eval, "multiply operand pairs read from stdin with a model, LUT or RTL design"},
    {"lutgen", mts_cmd_lutgen, "sweep a multiplier into a mantissa LUT file, or import a peer's table"},
    {"lut", mts_cmd_lut, "inspect a LUT file (lut info FILE)"},
    {"metrics", mts_cmd_metrics, "error metrics of a multiplier from an exhaustive sweep"},
    {"bench", mts_cmd_bench, "throughput benchmarks (bench core)"},
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
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "mantis: unknown command '%s' (see mantis --help)\n", argv[1]);
    return 2;
}
