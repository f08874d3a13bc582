/* fuzz_ckpt_crc.c - the checkpoint reader with the magic and the trailing
 * CRC-32 made right, so the header's sizes and the body reach the parser. */
#include "fuzz_ckpt_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = size > 56 ? size : 56;
    uint8_t *b = fuzz_copy(data, size, n);
    memcpy(b, "MTSCKPT", 8);
    fuzz_fix_crc(b, n - 4, 0, n - 4);
    fuzz_ckpt(b, n);
    free(b);
    return 0;
}
