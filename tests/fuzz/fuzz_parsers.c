/* fuzz_parsers.c - the string parsers: formats (--format, eXmY), FMAq
 * formats (--acc M7E4), arithmetic specs (the text checkpoints and the flow
 * carry) and the strict number and list parsers (base/parse.c). The first
 * byte picks one; the rest is the string. Round trips are checked where they exist. */
#include "fuzz_util.h"
#include "cli_util.h"
#include "mantis/fmaq.h"
#include "mantis/format.h"
#include "mantis/nn_arith.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096) return 0;
    char *s = malloc(size);
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    mts_err err;
    switch (data[0] % 9) {
    case 0: {
        mts_format f, g;
        if (mts_format_parse(s, &f, &err) == MTS_OK) {
            char name[64];
            mts_format_name(&f, name, sizeof name);
            /* the canonical name of a parsed IEEE-default format parses back to it */
            if (mts_format_parse(name, &g, &err) != MTS_OK || memcmp(&f, &g, sizeof f)) abort();
        }
        break;
    }
    case 1: {
        mts_qfmt q;
        int bias = size > 1 ? (int)(int8_t)data[1] : -1;
        if (mts_qfmt_parse(s, bias, &q, &err) == MTS_OK) {
            char name[64];
            mts_qfmt_name(&q, name, sizeof name);
        }
        break;
    }
    case 2: {
        mts_arith_spec a, b;
        if (mts_arith_spec_parse(s, &a, &err) == MTS_OK) {
            char str[2048];
            mts_arith_spec_str(&a, str, sizeof str);
            if (strlen(str) < sizeof str - 1 && mts_arith_spec_parse(str, &b, &err) != MTS_OK) abort();
        }
        break;
    }
    case 3: {
        long v;
        if (mts_parse_int(s, -1000, 1000, &v) == 0 && (v < -1000 || v > 1000)) abort();
        break;
    }
    case 4: {
        uint64_t v;
        (void)mts_parse_u64(s, &v);
        break;
    }
    case 5: {
        uint32_t v;
        (void)mts_parse_hex32(s, &v);
        break;
    }
    case 6: {
        double v;
        if (mts_parse_double(s, 0, 1, &v) == 0 && !(v >= 0 && v <= 1)) abort();
        break;
    }
    case 8: {
        long v[4]; /* a list never holds more than asked, nor an item out of range */
        int n = mts_parse_int_list(s, size > 1 ? data[1] & 1 : 0, -50, 50, v, 4, NULL);
        if (n > 4 || n == 0 || n < -2) abort();
        for (int i = 0; i < n; i++)
            if (v[i] < -50 || v[i] > 50) abort();
        break;
    }
    default: {
        long v; /* a leading space or sign other than '-' is never a number */
        if ((s[0] == ' ' || s[0] == '+') && mts_parse_int(s, -1000000, 1000000, &v) == 0) abort();
        break;
    }
    }
    free(s);
    return 0;
}
