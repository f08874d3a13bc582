/* fuzz_idx.c - the IDX (MNIST) image + label reader. Input: u32 LE length
 * of the image file, the image file, then the label file. */
#include "fuzz_util.h"
#include "mantis/nn_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    size_t il = mts_get_le32(data);
    if (il > size - 4) il = size - 4;
    const char *img = fuzz_file(0, data + 4, il), *lab = fuzz_file(1, data + 4 + il, size - 4 - il);
    mts_dataset d;
    mts_err err;
    if (mts_idx_load(img, lab, &d, &err) == MTS_OK) mts_dataset_free(&d);
    return 0;
}
