/* fuzz_lut.c - the Mantis LUT file reader (mts_lut_load), as it is: most
 * inputs stop at the magic or a checksum (fuzz_lut_crc gets past them). */
#include "fuzz_util.h"
#include "mantis/lut.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mts_lut lut;
    mts_err err;
    if (mts_lut_load(fuzz_file(0, data, size), &lut, &err) == MTS_OK) mts_lut_free(&lut);
    return 0;
}
