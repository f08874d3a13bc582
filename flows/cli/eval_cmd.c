/* eval_cmd.c - `mantis eval`: multiply operand pairs from stdin, one result
 * per line. Float multipliers: two hex FP32 bit patterns in, one out.
 * Integer tables: two decimal integers in, the decimal product out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "mantis/rtl.h"
#include "commands.h"
#include "mul_opts.h"

static const char help[] =
    "usage: mantis eval (--mul NAME [--man-bits M | --format F] | --lut FILE | --rtl FILE.v) < pairs\n"
    "Reads lines of two operands and writes one result per line.\n"
    "Float multipliers: hex FP32 bit patterns in and out (operands are truncated to the format).\n"
    "Accumulator designs: the product p and the partial sum s in, Q_acc(Q_prod(p) + s) out (hex FP32).\n"
    "Integer tables and designs: decimal integers in and out.\n\noptions:\n";

int cmd_eval(int argc, char **argv)
{
    mulsel sel;
    mulsel_init(&sel);
    mts_err err;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("%s%s", help, mulsel_help);
            return 0;
        }
        int rc = mulsel_arg(&sel, argc, argv, &i, &err);
        if (rc < 0) return cli_error("eval", "%s", err.msg);
        if (rc == 0) return cli_error("eval", "unknown option '%s' (see mantis eval --help)", argv[i]);
    }
    mulhandle h;
    int st = mulsel_open(&sel, &h, &err);
    if (st) return cli_fail("eval", st, &err);
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int status = 0;
    const mts_lut *t = &h.lut;
    long lo = 0, hi = 0;
    if (h.is_int) {
        lo = t->int_signed ? -(1L << (t->int_bits - 1)) : 0;
        hi = t->int_signed ? (1L << (t->int_bits - 1)) - 1 : (1L << t->int_bits) - 1;
    }
    while (getline(&line, &cap, stdin) > 0) {
        lineno++;
        char *sp, *x = strtok_r(line, " \t\r\n,", &sp), *y = strtok_r(NULL, " \t\r\n,", &sp);
        if (!x) continue; /* blank line */
        char *extra = strtok_r(NULL, " \t\r\n,", &sp);
        if (h.is_int) {
            long a, b;
            if (!y || extra || mts_parse_int(x, lo, hi, &a) || mts_parse_int(y, lo, hi, &b)) {
                status = cli_error("eval", "stdin line %ld: expected two integers in [%ld, %ld]", lineno, lo, hi);
                break;
            }
            uint32_t mask = (1u << t->int_bits) - 1u;
            size_t idx = (((size_t)a & mask) << t->int_bits) | ((size_t)b & mask);
            printf("%d\n", (int32_t)t->entry[idx]);
        } else {
            uint32_t a, b;
            if (!y || extra || mts_parse_hex32(x, &a) || mts_parse_hex32(y, &b)) {
                status = cli_error("eval", "stdin line %ld: expected two hex FP32 bit patterns", lineno);
                break;
            }
            printf("%08x\n", h.is_acc ? mts_rtl_acc(h.rtl, a, b) : h.op.fn(&h.op, a, b));
        }
    }
    free(line);
    mulhandle_close(&h);
    if (fflush(stdout) != 0 && !status) status = cli_error("eval", "cannot write results");
    return status;
}
