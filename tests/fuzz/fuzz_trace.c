/* fuzz_trace.c - the operand trace reader (synth --power-trace), as it is. */
#include "fuzz_util.h"
#include "mantis/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mts_trace t;
    mts_err err;
    if (mts_trace_read(fuzz_file(0, data, size), &t, &err) == MTS_OK) mts_trace_free(&t);
    return 0;
}
