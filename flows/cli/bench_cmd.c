/* bench_cmd.c - `mantis bench WHAT`: throughput benchmarks. Every figure is a
 * ratio against a baseline timed in the same run (docs/benchmarks.md). */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"

static const cli_command benches[] = {
    {"core", cmd_bench_core, "scalar AMSim, C models and FMAq vs native FP32 multiply and add"},
    {"gemm", cmd_bench_gemm, "GEMM providers (native, LUT, FMAq) vs OpenBLAS SGEMM"},
    {"train", cmd_bench_train, "one training epoch of LeNet-300-100, LeNet-5, ResNet-20 and vit-tiny per provider vs PyTorch (CPU or --device cuda)"},
    {"rtl", cmd_bench_rtl, "Verilated RTL sweeps and mantis verify throughput vs the C models"},
    {"cosim", cmd_bench_cosim, "SystemC MAC array PE-cycles/s (lut, rtl) and LeNet-5 conv2 replay vs mts_gemm"},
};

int cmd_bench(int argc, char **argv)
{
    size_t n = sizeof benches / sizeof benches[0];
    if (argc < 2 || cli_is_help(argv[1])) {
        printf("usage: mantis bench WHAT [options]\n\n");
        for (size_t i = 0; i < n; i++) printf("  %-6s %s\n", benches[i].name, benches[i].summary);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!strcmp(argv[1], benches[i].name)) return benches[i].run(argc - 1, argv + 1);
    return cli_error("bench", "unknown benchmark '%s' (see mantis bench --help)", argv[1]);
}
