/* commands.h - the CLI's subcommands, one NAME_cmd.c file each (the
 * bench subcommands in bench_*.c); flows/cli/main.c dispatches on argv[1]. A
 * command returns the process exit status (0 success, 1 a negative result
 * such as a mismatch, 2 could not run; cli_exit maps a library status)
 * and prints its one-line errors itself as "mantis CMD: message". */
#ifndef MANTIS_COMMANDS_H
#define MANTIS_COMMANDS_H

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
    const char *summary;
} cli_command;

int cmd_eval(int argc, char **argv);
int cmd_lutgen(int argc, char **argv);
int cmd_lut(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_rtl(int argc, char **argv);
int cmd_flow(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_test(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_cosim(int argc, char **argv);

/* `mantis bench WHAT`, dispatched by cmd_bench (bench_cmd.c); argv[0] is
 * WHAT. What each measures and against which baseline: docs/benchmarks.md. */
int cmd_bench_core(int argc, char **argv); /* bench_core.c */
int cmd_bench_gemm(int argc, char **argv); /* bench_gemm.c */
int cmd_bench_gemm_cuda(int argc, char **argv); /* bench_gemm_gpu.c: bench gemm --device cuda */
int cmd_bench_rtl(int argc, char **argv);  /* bench_rtl.c */
int cmd_bench_cosim(int argc, char **argv); /* bench_cosim.c */
int cmd_bench_train(int argc, char **argv); /* bench_train.c */

/* The most sizes `bench gemm --sizes` takes (more is refused, never dropped). */
#define BENCH_MAX_SIZES 64

#endif
