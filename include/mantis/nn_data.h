/* nn_data.h - data sets of the training engine: IDX (MNIST,
 * Fashion-MNIST) and CIFAR-10 binary, fully validated; every failure is one
 * line naming the file and saying how to get the data. */
#ifndef MANTIS_NN_DATA_H
#define MANTIS_NN_DATA_H

#include <stdint.h>
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mts_dataset {
    int n, c, h, w, classes;
    float *x;             /* n * c*h*w values in [0, 1] */
    uint8_t *y;
} mts_dataset;

/* IDX pair (images idx3 magic 0x00000803, labels idx1 0x00000801): checks
 * magic, dimensions, counts and file sizes; bytes scaled by 1/255. */
int mts_idx_load(const char *images, const char *labels, mts_dataset *d, mts_err *err);
/* CIFAR-10 binary: n files of 10000 records (1 label + 3072 bytes). */
int mts_cifar10_load(const char *const *files, int nfiles, mts_dataset *d, mts_err *err);
/* The same for files of exactly `records` records each (1..10000; 1..64
 * files): small files for tests and fuzzing reach the same parser. MTS_EINVAL
 * for counts out of range, MTS_EFORMAT for a size or label that is wrong. */
int mts_cifar10_load_records(const char *const *files, int nfiles, int records, mts_dataset *d, mts_err *err);
/* Loads "mnist", "fashion-mnist" (IDX in dir) or "cifar10" (dir holds
 * data_batch_1..5.bin, test_batch.bin) from dir (NULL: "data/<name>"):
 * train = 1 training split. Values are standardised per channel with the
 * usual constants (MNIST 0.1307/0.3081, Fashion-MNIST 0.2860/0.3530,
 * CIFAR-10 per-channel). Missing or malformed files give one line that says
 * how to get the data. */
int mts_dataset_load(const char *name, const char *dir, int train, mts_dataset *d, mts_err *err);
void mts_dataset_free(mts_dataset *d);

#ifdef __cplusplus
}
#endif
#endif
