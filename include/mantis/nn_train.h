/* nn_train.h - training: the per-epoch sample order, one epoch of
 * mini-batch training, evaluation, and the two drivers behind `mantis train`
 * and `mantis test` (whole runs: data, providers, model, optimizer, resume,
 * checkpoints, JSON, traces). The drivers never print or exit: they return
 * a status with err filled, and report progress through a callback. */
#ifndef MANTIS_NN_TRAIN_H
#define MANTIS_NN_TRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "mantis/nn_arith.h"
#include "mantis/nn_ckpt.h"
#include "mantis/nn_data.h"
#include "mantis/nn_net.h"
#include "mantis/nn_ops.h"
#include "mantis/nn_optim.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Order of epoch e's samples: a Fisher-Yates shuffle seeded by (seed, e),
 * so it depends on nothing but these (resume needs no RNG state). */
void mts_epoch_order(uint64_t seed, int epoch, int n, int32_t *order);

/* One training epoch over the first `n` samples of d (n <= d->n) in
 * mts_epoch_order, forward and backward through ctx (nn_ops.h);
 * progress(pctx, done, n) is called after each batch (may be NULL). Fills
 * loss/acc/seconds/lr of st. */
int mts_train_epoch(mts_net *net, mts_opt *opt, const mts_nn_ctx *ctx, const mts_dataset *d, int n, int batch,
                    uint64_t seed, int epoch, float lr, void (*progress)(void *pctx, int done, int total),
                    void *pctx, mts_epoch_stats *st, mts_err *err);
/* Accuracy over the first n samples of d in batches (eval mode), forward
 * through ctx->fwd (the test provider). */
int mts_evaluate(mts_net *net, const mts_nn_ctx *ctx, const mts_dataset *d, int n, double *acc, mts_err *err);

/* ------------------------------------------- per-layer multipliers */

/* One --mul-layer rule "PATTERN=SPEC": the multiplying layers whose names
 * (mts_net_layer_name) match the glob PATTERN use SPEC instead of the run's
 * multiplier, in the forward, backward (without FMAq) and test providers;
 * the last matching rule wins. SPEC is MUL[,key=value...]: MUL a multiplier
 * name (fp32, blas, bf16, a C model) or a LUT file (a path with '/' or
 * ".lut"); keys acc, prod, acc-bias, prod-bias, chunk, man-bits, format and
 * the flag no-underflow, as the options of the same names. */
#define MTS_MAX_LAYER_RULES 16
typedef struct mts_layer_rule {
    char pattern[64];
    char text[256];       /* "PATTERN=SPEC" as given */
    mts_arith_spec spec;  /* the forward / test provider */
} mts_layer_rule;

/* Parses "PATTERN=SPEC"; MTS_EINVAL with the reason in err. */
int mts_layer_rule_parse(const char *text, mts_layer_rule *r, mts_err *err);

/* ------------------------------------------------- the training driver */

typedef enum {
    MTS_TRAIN_RESUMED = 0, /* info->start epochs were loaded from info->ckpt */
    MTS_TRAIN_STARTED,     /* data, providers and model are ready: info describes the run */
    MTS_TRAIN_BATCH,       /* done of total samples of epoch info->epoch are trained */
    MTS_TRAIN_EPOCH,       /* epoch info->epoch finished: info->last */
    MTS_TRAIN_TRACED       /* the operand trace was written (info->trace_have of trace_seen) */
} mts_train_event;

/* What a run reports, filled as it goes. */
typedef struct mts_train_info {
    int ntrain, ntest;           /* samples trained / evaluated per epoch */
    size_t nparam;
    char fwd[192], bwd[192], test[192]; /* provider descriptions (mts_arith.desc) */
    char ckpt[1100];             /* checkpoint file, "" without --checkpoint */
    int start;                   /* epochs done before this run (resume) */
    int epoch;                   /* 1-based: the epoch being trained (BATCH) or just finished (EPOCH) */
    mts_epoch_stats last;        /* the finished epoch's results */
    double final_test_acc;       /* test accuracy of the last epoch in the history (0: none) */
    size_t trace_have;           /* operand pairs sampled */
    uint64_t trace_seen;         /* of this many streamed */
    int diverged;                /* 1: stopped because a batch's loss was non-finite or > MTS_DIVERGE_LOSS */
    int diverged_epoch, diverged_step; /* 1-based epoch and step (batch) of that batch */
    double diverged_loss;        /* its mean cross-entropy */
    char layers[1024];           /* per-layer rules: "RULE: N layers (fwd desc); ..." ("" without) */
    char int_bwd[16];            /* the integer backward ("ste", "table", "approx") when a forward
                                    provider is an integer table, else "" */
} mts_train_info;

/* A batch whose mean cross-entropy exceeds this (chance is ln(classes), about
 * 2.3 for ten classes) or is not finite has diverged: the run stops after
 * that epoch's last batch, without evaluating it (docs/training.md). */
#define MTS_DIVERGE_LOSS 1000.0

typedef void (*mts_train_progress_fn)(void *ud, mts_train_event ev, const mts_train_info *info, int done,
                                      int total);

/* A run's settings (mts_train_config_init gives the defaults of
 * docs/training.md). Everything that changes results is recorded in the
 * checkpoint's config string, and --resume refuses a checkpoint whose
 * string differs. */
typedef struct mts_train_config {
    const char *model, *data;
    const char *data_dir;        /* NULL: data/<data> */
    mts_arith_spec fwd, bwd, test; /* the three providers (docs/training.md) */
    mts_arith_open_fn open;      /* NULL: mts_arith_open */
    void *open_ud;
    const char *ste;             /* as given ("imm-diff", "immediate/diff", ...): recorded verbatim */
    const char *int_bwd;         /* integer multipliers' backward: "ste" (NULL: the default), "table",
                                    "approx" (mts_int_bwd); recorded when a provider is an integer table */
    uint64_t seed;
    int epochs, batch, threads;
    int device;                  /* 0: CPU; MTS_GPU_DEVICE_CUDA (gpu.h): every GEMM on the GPU (same results) */
    int subset, test_subset;     /* 0: all samples */
    mts_opt_kind opt;
    mts_sched_kind sched;
    double lr;                   /* < 0: 0.01 for SGD, 1e-3 for Adam */
    double momentum, wd, gamma;
    int step_size;
    const char *ckdir;           /* NULL: no checkpoints */
    int resume;                  /* continue from ckdir's checkpoint */
    const char *json;            /* NULL: no JSON; else rewritten atomically after each epoch */
    FILE *json_out;              /* non-NULL: the same JSON written here once, when the run ends (--json -) */
    const char *trace;           /* NULL: no operand trace */
    int trace_kind;              /* MTS_TRACE_SIG or MTS_TRACE_FLOAT */
    int trace_samples;
    mts_gemm_tap *tap;           /* NULL: none; else dumps a layer's first forward GEMM (gemmdump.h) */
    mts_train_progress_fn progress; /* NULL: silent */
    void *progress_ud;
    const char *const *layer_rules; /* "PATTERN=SPEC" (mts_layer_rule), recorded in the checkpoint */
    int nlayer_rules;
} mts_train_config;

void mts_train_config_init(mts_train_config *c);

/* ------------------------------------------------------ default recipes */

/* The optimizer settings a built-in model trains well with
 * (docs/training.md, "Default recipes"). */
typedef struct mts_train_recipe {
    mts_opt_kind opt;
    double lr, momentum, wd, gamma;
    mts_sched_kind sched;
    int step_size, batch;
    const char *source;          /* where the recipe comes from (a measurement, a paper) */
} mts_train_recipe;

/* The recipe of a built-in model (examples/models.c, beside the models);
 * MTS_EINVAL for a name that is none. */
int mts_nn_model_recipe(const char *model, mts_train_recipe *r, mts_err *err);

/* Which settings of an mts_train_config its caller gave (the rest may come
 * from the model's recipe). */
enum {
    MTS_GIVEN_OPT = 1 << 0,
    MTS_GIVEN_LR = 1 << 1,
    MTS_GIVEN_MOMENTUM = 1 << 2,
    MTS_GIVEN_WD = 1 << 3,
    MTS_GIVEN_SCHED = 1 << 4,
    MTS_GIVEN_GAMMA = 1 << 5,
    MTS_GIVEN_STEP_SIZE = 1 << 6,
    MTS_GIVEN_BATCH = 1 << 7
};

/* Fills every optimizer setting of c that given does not name (opt, lr,
 * momentum, wd, sched, gamma, step_size, batch) from c->model's recipe: an
 * explicit setting always wins. The recipe's lr belongs to its optimizer:
 * with another optimizer given and no lr, lr stays that optimizer's
 * default (SGD 0.01, Adam 1e-3). MTS_EINVAL for an unknown model. */
int mts_train_recipe_apply(mts_train_config *c, unsigned given, mts_err *err);

/* Runs the whole training: loads both splits, opens the providers, builds
 * the model and optimizer, resumes if asked, then per epoch trains (traced
 * if asked; evaluation is not traced), evaluates with the test provider,
 * checkpoints and rewrites the JSON; writes the trace at the end. Returns
 * MTS_OK with *info complete, or an error code with one line in err. A run
 * that diverges also returns MTS_OK, with info->diverged set, the JSON
 * saying so and no checkpoint or trace of the diverged epoch. */
int mts_train_run(const mts_train_config *c, mts_train_info *info, mts_err *err);

/* ---------------------------------------------- checkpoint evaluation */

typedef struct mts_test_config {
    const char *ckdir;           /* the run's --checkpoint DIR */
    const char *data_dir;        /* NULL: data/<data set of the run> */
    const char *json;            /* NULL: none; else {"model", "data", "mul_test", "samples", "test_acc"} */
    FILE *json_out;              /* non-NULL: the same JSON written here (--json -) */
    const mts_arith_spec *spec;  /* NULL: the run's own test provider, from the checkpoint */
    const mts_arith_spec *acc;   /* with spec NULL: FMAq settings replacing the run's (NULL: keep) */
    int test_subset;             /* 0: all test samples */
    int threads;
    int device;                  /* 0: CPU; MTS_GPU_DEVICE_CUDA (gpu.h): the GEMMs on the GPU */
    mts_arith_open_fn open;      /* NULL: mts_arith_open */
    void *open_ud;
    mts_gemm_tap *tap;           /* NULL: none; else dumps a layer's first forward GEMM (gemmdump.h) */
    const char *const *layer_rules; /* applied after the run's own rules (which a given spec drops) */
    int nlayer_rules;
} mts_test_config;

typedef struct mts_test_result {
    char model[64], data[64];
    char desc[192];              /* the provider (mts_arith.desc) */
    int samples;
    double acc;
    char layers[1024];           /* the per-layer rules applied, as mts_train_info.layers */
    char gpu_path[600];          /* device cuda: "resident" or "per-gemm: <why>" (JSON gpu_path); else "" */
} mts_test_result;

/* Rebuilds the model named in the checkpoint, loads it and evaluates the
 * test split ("train with X, test with Y"). A run trained with mul "rtl" is
 * refused unless spec is given. */
int mts_test_run(const mts_test_config *c, mts_test_result *r, mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
