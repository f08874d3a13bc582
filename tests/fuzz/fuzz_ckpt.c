/* fuzz_ckpt.c - the training checkpoint reader, as it is. */
#include "fuzz_ckpt_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_ckpt(data, size);
    return 0;
}
