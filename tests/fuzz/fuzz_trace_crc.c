/* fuzz_trace_crc.c - the trace reader with the magic, the record CRC (at
 * 48, over the bytes after the 64-byte header) and the header CRC (at 52,
 * over bytes 0..51) made right. */
#include "fuzz_util.h"
#include "mantis/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = size > 64 ? size : 64;
    uint8_t *b = fuzz_copy(data, size, n);
    memcpy(b, "MTSTRACE", 8);
    fuzz_fix_crc(b, 48, 64, n);
    fuzz_fix_crc(b, 52, 0, 52);
    mts_trace t;
    mts_err err;
    if (mts_trace_read(fuzz_file(0, b, n), &t, &err) == MTS_OK) mts_trace_free(&t);
    free(b);
    return 0;
}
