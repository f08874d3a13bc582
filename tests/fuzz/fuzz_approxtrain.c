/* fuzz_approxtrain.c - the ApproxTrain NAME_M.bin importer. The first byte
 * picks M (1..11) and the entry size asked for (0 infer, 1, 4); the rest is
 * the file. */
#include "fuzz_util.h"
#include "mantis/lut.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int M = 1 + data[0] % 11, bytes = (int[]){0, 1, 4}[(data[0] >> 4) % 3];
    mts_lut lut;
    mts_err err;
    if (mts_lut_import_approxtrain(fuzz_file(0, data + 1, size - 1), M, &bytes, &lut, &err) == MTS_OK) {
        if (lut.n != (size_t)1 << (2 * M) || (bytes != 1 && bytes != 4)) abort();
        mts_lut_free(&lut);
    }
    return 0;
}
