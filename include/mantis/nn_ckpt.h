/* nn_ckpt.h - training checkpoints: everything a resumed run needs to
 * continue bit-identically (layout in sim/nn/ckpt.c). */
#ifndef MANTIS_NN_CKPT_H
#define MANTIS_NN_CKPT_H

#include <stddef.h>
#include "mantis/nn_net.h"
#include "mantis/nn_optim.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One epoch's results, as the run's history (and its JSON) records them. */
typedef struct mts_epoch_stats {
    double train_loss, train_acc, test_acc, seconds, samples_per_s, lr;
} mts_epoch_stats;

/* A checkpoint: header (magic "MTSCKPT\0", version, sizes), a config string
 * (opaque, what the run was started with), epoch, optimizer state, params,
 * BN state, the per-epoch history; CRC-32 of all preceding bytes at the end.
 * Written atomically. */
typedef struct mts_ckpt_meta {
    char config[1024];
    int epoch;            /* epochs completed */
    int nhist;
    mts_epoch_stats hist[1024];
} mts_ckpt_meta;

int mts_ckpt_save(const char *path, const mts_net *net, const mts_opt *opt, const mts_ckpt_meta *meta,
                  mts_err *err);
/* Loads into a built net (sizes must match) and an initialised opt (may be
 * NULL to skip optimizer state). Each malformation is its own message. */
int mts_ckpt_load(const char *path, mts_net *net, mts_opt *opt, mts_ckpt_meta *meta, mts_err *err);
/* Reads only the config string (to rebuild the net before mts_ckpt_load). */
int mts_ckpt_peek(const char *path, char *config, size_t n, mts_err *err);
/* The checkpoint file of a run directory: "DIR/checkpoint.mtsckpt".
 * Returns 0, or -1 if it does not fit in n bytes. */
int mts_ckpt_path(const char *dir, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
