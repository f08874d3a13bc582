/* fuzz_import8bit.c - the TFApprox / EvoApprox 8-bit integer table importer
 * (65,536 uint16 products). The first byte's low bit says signed. */
#include "fuzz_util.h"
#include "mantis/lut.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    mts_lut lut;
    mts_err err;
    if (mts_lut_import_8bit(fuzz_file(0, data + 1, size - 1), data[0] & 1, &lut, &err) == MTS_OK) {
        if (lut.n != 65536) abort();
        mts_lut_free(&lut);
    }
    return 0;
}
