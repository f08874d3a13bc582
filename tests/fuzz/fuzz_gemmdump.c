/* fuzz_gemmdump.c - the GEMM dump reader (mantis cosim --gemm), as it is. */
#include "fuzz_util.h"
#include "mantis/gemmdump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mts_gemmdump g;
    mts_err err;
    if (mts_gemmdump_read(fuzz_file(0, data, size), &g, &err) == MTS_OK) mts_gemmdump_free(&g);
    return 0;
}
