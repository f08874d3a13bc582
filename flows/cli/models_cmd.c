/* models_cmd.c - `mantis models`: the registered C models and named formats. */
#include <stdio.h>

#include "cli_util.h"
#include "commands.h"
#include "mantis/mul.h"

int cmd_models(int argc, char **argv)
{
    if (argc > 1 && cli_is_help(argv[1])) {
        printf("usage: mantis models\nLists the C multiplier models (for --mul) and the named formats.\n");
        return 0;
    }
    if (argc > 1) return cli_error("models", "unexpected argument '%s'", argv[1]);
    static const char *prec[] = {"RNE at M", "RTZ at M", "all bits"};
    printf("%-12s %-6s %-9s %s\n", "model", "M", "output", "definition");
    for (int i = 0; mts_model_at(i); i++) {
        const mts_model *m = mts_model_at(i);
        char range[16];
        snprintf(range, sizeof range, m->min_m == m->max_m ? "%d" : "%d..%d", m->min_m, m->max_m);
        printf("%-12s %-6s %-9s %s\n", m->name, range, prec[m->prec], m->summary);
    }
    printf("\nformats: fp32 bf16 fp16 fp8e4m3 fp8e5m2, or eXmY (IEEE-style, default bias)\n");
    return 0;
}
