/* data.c - data set loaders: IDX (MNIST, Fashion-MNIST) and CIFAR-10
 * binary, fully validated; every failure is one line naming the file and
 * saying how to get the data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/nn_data.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void mts_dataset_free(mts_dataset *d)
{
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

static const char *hint_for(const char *path)
{
    if (strstr(path, "fashion")) return "run `mantis data fetch fashion-mnist`";
    if (strstr(path, "mnist")) return "run `mantis data fetch mnist`";
    if (strstr(path, "cifar") || strstr(path, "batch")) return "download the CIFAR-10 binary version from https://www.cs.toronto.edu/~kriz/cifar.html";
    return "see docs/training.md, section Data";
}

/* hint: how to get the data, appended to every message */
static int idx_load(const char *images, const char *labels, const char *hint, mts_dataset *d, mts_err *err)
{
    uint8_t *ib = NULL, *lb = NULL;
    size_t il = 0, ll = 0;
    mts_err e2;
    int rc;
    memset(d, 0, sizeof *d);
    if ((rc = mts_fs_read(images, &ib, &il, &e2)) != MTS_OK ||
        (rc = mts_fs_read(labels, &lb, &ll, &e2)) != MTS_OK) {
        rc = mts_fail(err, rc, "%s (%s)", e2.msg, hint);
        goto done;
    }
    if (il < 16 || be32(ib) != 0x00000803u) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: not an IDX image file (magic 0x00000803 expected) (%s)", images,
                      hint);
        goto done;
    }
    if (ll < 8 || be32(lb) != 0x00000801u) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: not an IDX label file (magic 0x00000801 expected) (%s)", labels,
                      hint);
        goto done;
    }
    uint32_t n = be32(ib + 4), h = be32(ib + 8), w = be32(ib + 12), nl = be32(lb + 4);
    if (n == 0 || h == 0 || w == 0 || h > 4096 || w > 4096 || n > 100000000u) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: implausible IDX dimensions %u x %u x %u (%s)", images, n, h, w,
                      hint);
        goto done;
    }
    if (il != 16 + (size_t)n * h * w) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: %zu bytes, expected %zu for %u images of %ux%u (truncated?) (%s)", images,
                      il, 16 + (size_t)n * h * w, n, h, w, hint);
        goto done;
    }
    if (nl != n || ll != 8 + (size_t)n) {
        rc = mts_fail(err, MTS_EFORMAT, "%s: %u labels in %zu bytes, expected %u labels in %zu bytes to match %s (%s)",
                      labels, nl, ll, n, 8 + (size_t)n, images, hint);
        goto done;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (lb[8 + i] > 9) {
            rc = mts_fail(err, MTS_EFORMAT, "%s: label %u of sample %u out of range 0..9 (%s)", labels, lb[8 + i], i,
                          hint);
            goto done;
        }
    }
    d->x = malloc(sizeof(float) * (size_t)n * h * w);
    d->y = malloc(n);
    if (!d->x || !d->y) {
        rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory for %u images", images, n);
        goto done;
    }
    for (size_t i = 0; i < (size_t)n * h * w; i++) d->x[i] = (float)ib[16 + i] / 255.0f;
    memcpy(d->y, lb + 8, n);
    d->n = (int)n;
    d->c = 1;
    d->h = (int)h;
    d->w = (int)w;
    d->classes = 10;
    rc = MTS_OK;
done:
    free(ib);
    free(lb);
    if (rc != MTS_OK) mts_dataset_free(d);
    return rc;
}

int mts_idx_load(const char *images, const char *labels, mts_dataset *d, mts_err *err)
{
    return idx_load(images, labels, hint_for(images), d, err);
}

#define CIFAR_REC 3073

int mts_cifar10_load_records(const char *const *files, int nfiles, int records, mts_dataset *d, mts_err *err)
{
    memset(d, 0, sizeof *d);
    if (nfiles < 1 || nfiles > 64 || records < 1 || records > 10000)
        return mts_fail(err, MTS_EINVAL, "cifar10: %d files of %d records: expected 1..64 files of 1..10000", nfiles,
                        records);
    size_t total = (size_t)nfiles * (size_t)records;
    /* every file's size before the ~123 MB of a full set is asked for: a
     * short or hostile file costs no allocation */
    for (int f = 0; f < nfiles; f++) {
        struct stat st;
        if (stat(files[f], &st) != 0 || !S_ISREG(st.st_mode)) { /* the reader's own message says why */
            uint8_t *b = NULL;
            size_t len = 0;
            mts_err e2;
            int rc = mts_fs_read(files[f], &b, &len, &e2);
            free(b);
            if (rc != MTS_OK) return mts_fail(err, rc, "%s (%s)", e2.msg, hint_for(files[f]));
            continue; /* it appeared meanwhile: the size is checked again after reading */
        }
        if ((unsigned long long)st.st_size != (unsigned long long)records * CIFAR_REC)
            return mts_fail(err, MTS_EFORMAT, "%s: %lld bytes, expected %zu (%d records of 3073 bytes) (%s)", files[f],
                            (long long)st.st_size, (size_t)records * CIFAR_REC, records, hint_for(files[f]));
    }
    d->x = malloc(sizeof(float) * total * 3072);
    d->y = malloc(total);
    if (!d->x || !d->y) {
        mts_dataset_free(d);
        return mts_fail(err, MTS_ENOMEM, "cifar10: out of memory for %zu images (%zu MiB)", total,
                        total * 3072 * sizeof(float) >> 20);
    }
    for (int f = 0; f < nfiles; f++) {
        uint8_t *b = NULL;
        size_t len = 0;
        mts_err e2;
        int rc = mts_fs_read(files[f], &b, &len, &e2);
        if (rc != MTS_OK) {
            mts_dataset_free(d);
            return mts_fail(err, rc, "%s (%s)", e2.msg, hint_for(files[f]));
        }
        if (len != (size_t)records * CIFAR_REC) {
            free(b);
            mts_dataset_free(d);
            return mts_fail(err, MTS_EFORMAT, "%s: %zu bytes, expected %zu (%d records of 3073 bytes) (%s)", files[f],
                            len, (size_t)records * CIFAR_REC, records, hint_for(files[f]));
        }
        for (int i = 0; i < records; i++) {
            const uint8_t *r = b + (size_t)i * CIFAR_REC;
            if (r[0] > 9) {
                mts_fail(err, MTS_EFORMAT, "%s: label %u of record %d out of range 0..9 (%s)", files[f], r[0], i,
                         hint_for(files[f]));
                free(b);
                mts_dataset_free(d);
                return MTS_EFORMAT;
            }
            size_t s = (size_t)f * (size_t)records + (size_t)i;
            d->y[s] = r[0];
            for (int j = 0; j < 3072; j++) d->x[s * 3072 + j] = (float)r[1 + j] / 255.0f;
        }
        free(b);
    }
    d->n = (int)total;
    d->c = 3;
    d->h = d->w = 32;
    d->classes = 10;
    return MTS_OK;
}

int mts_cifar10_load(const char *const *files, int nfiles, mts_dataset *d, mts_err *err)
{
    return mts_cifar10_load_records(files, nfiles, 10000, d, err);
}

/* Standardises channel c with the data set's usual constants (x-mean)/std,
 * so that plain SGD trains well from the first epoch. */
static void standardize(mts_dataset *d, const float *mean, const float *std)
{
    size_t hw = (size_t)d->h * d->w;
    for (size_t i = 0; i < (size_t)d->n * d->c; i++) {
        int c = (int)(i % (size_t)d->c);
        float *p = d->x + i * hw;
        for (size_t j = 0; j < hw; j++) p[j] = (p[j] - mean[c]) / std[c];
    }
}

int mts_dataset_load(const char *name, const char *dir, int train, mts_dataset *d, mts_err *err)
{
    char a[1024], b[1024];
    /* the directory as two parts: dir, or "data/" and the set's name */
    const char *d0 = dir ? dir : "data/", *d1 = dir ? "" : name;
    if (!strcmp(name, "mnist") || !strcmp(name, "fashion-mnist")) {
        const char *pre = train ? "train" : "t10k";
        snprintf(a, sizeof a, "%s%s/%s-images-idx3-ubyte", d0, d1, pre);
        snprintf(b, sizeof b, "%s%s/%s-labels-idx1-ubyte", d0, d1, pre);
        char hint[64];
        snprintf(hint, sizeof hint, "run `mantis data fetch %s`", name);
        int rc = idx_load(a, b, hint, d, err);
        if (rc == MTS_OK && (d->h != 28 || d->w != 28)) {
            mts_dataset_free(d);
            return mts_fail(err, MTS_EFORMAT, "%s: %s images must be 28x28 (run `mantis data fetch %s`)", a, name, name);
        }
        static const float mm[1] = {0.1307f}, ms[1] = {0.3081f}, fm[1] = {0.2860f}, fs[1] = {0.3530f};
        if (rc == MTS_OK) standardize(d, name[0] == 'm' ? mm : fm, name[0] == 'm' ? ms : fs);
        return rc;
    }
    if (!strcmp(name, "cifar10")) {
        char files[6][1024];
        const char *fp[6];
        int nf = train ? 5 : 1;
        for (int i = 0; i < nf; i++) {
            if (train) snprintf(files[i], sizeof files[i], "%s%s/data_batch_%d.bin", d0, d1, i + 1);
            else snprintf(files[i], sizeof files[i], "%s%s/test_batch.bin", d0, d1);
            fp[i] = files[i];
        }
        static const float cm[3] = {0.4914f, 0.4822f, 0.4465f}, cs[3] = {0.2470f, 0.2435f, 0.2616f};
        int rc = mts_cifar10_load(fp, nf, d, err);
        if (rc == MTS_OK) standardize(d, cm, cs);
        return rc;
    }
    return mts_fail(err, MTS_EINVAL, "unknown data set '%s' (expected mnist, fashion-mnist or cifar10)", name);
}
