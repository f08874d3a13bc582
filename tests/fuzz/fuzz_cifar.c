/* fuzz_cifar.c - the CIFAR-10 binary reader on files of 1..4 records
 * (mts_cifar10_load_records; the first byte picks the count). */
#include "fuzz_util.h"
#include "mantis/nn_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *f = fuzz_file(0, data + 1, size - 1);
    mts_dataset d;
    mts_err err;
    if (mts_cifar10_load_records(&f, 1, 1 + data[0] % 4, &d, &err) == MTS_OK) mts_dataset_free(&d);
    return 0;
}
