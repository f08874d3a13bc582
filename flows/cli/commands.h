/* commands.h - the CLI's subcommands, one NAME_cmd.c file each (the
 * bench subcommands in bench_*.c); flows/cli/main.c dispatches on argv[1]. A
 * command returns the process exit status (0 success, 1 a negative result
 * such as a mismatch, 2 could not run; mts_cli_exit maps a library status)
 * and prints its one-line errors itself as "mantis CMD: message". */
#ifndef MANTIS_COMMANDS_H
#define MANTIS_COMMANDS_H

typedef struct mts_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
    const char *summary;
} mts_command;

int mts_cmd_eval(int argc, char **argv);
int mts_cmd_lutgen(int argc, char **argv);
int mts_cmd_lut(int argc, char **argv);
int mts_cmd_metrics(int argc, char **argv);
int mts_cmd_verify(int argc, char **argv);
int mts_cmd_bench(int argc, char **argv);
int mts_cmd_models(int argc, char **argv);
int mts_cmd_rtl(int argc, char **argv);
int mts_cmd_flow(int argc, char **argv);
int mts_cmd_synth(int argc, char **argv);
int mts_cmd_train(int argc, char **argv);
int mts_cmd_test(int argc, char **argv);
int mts_cmd_data(int argc, char **argv);
int mts_cmd_cosim(int argc, char **argv);

/* `mantis bench WHAT`, dispatched by mts_cmd_bench (bench_cmd.c); argv[0] is
 * WHAT. What each measures and against which baseline: docs/benchmarks.md. */
int mts_bench_core(int argc, char **argv); /* bench_core.c */
int mts_bench_gemm(int argc, char **argv); /* bench_gemm.c */
int mts_bench_gemm_cuda(int argc, char **argv); /* bench_gemm_gpu.c: bench gemm --device cuda */
int mts_bench_rtl(int argc, char **argv);  /* bench_rtl.c */
int mts_bench_cosim(int argc, char **argv); /* bench_cosim.c */
int mts_bench_train(int argc, char **argv); /* bench_train.c */

/* The most sizes `bench gemm --sizes` takes (more is refused, never dropped). */
#define BENCH_MAX_SIZES 64

#endif
