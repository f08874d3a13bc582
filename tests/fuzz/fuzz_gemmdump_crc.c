/* fuzz_gemmdump_crc.c - the GEMM dump reader with the magic, the version
 * and the trailing CRC (over every byte before it) made right, so the
 * fuzzer reaches the shape, size and layer-name checks and the decoding. */
#include "fuzz_util.h"
#include "mantis/gemmdump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { HDR = 8 + 4 * 5 + 32 };
    size_t n = size > HDR + 4 ? size : HDR + 4;
    uint8_t *b = fuzz_copy(data, size, n);
    memcpy(b, "MTSGEMM", 8);
    mts_put_le32(b + 8, MTS_GEMMDUMP_VERSION);
    fuzz_fix_crc(b, n - 4, 0, n - 4);
    mts_gemmdump g;
    mts_err err;
    if (mts_gemmdump_read(fuzz_file(0, b, n), &g, &err) == MTS_OK) mts_gemmdump_free(&g);
    free(b);
    return 0;
}
