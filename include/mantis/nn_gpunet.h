/* nn_gpunet.h - device-resident training (sim/nn/gpunet.c): a network's
 * parameters, activations, gradients, optimizer state and both data sets
 * live on the GPU; per step the epoch's sample order is already there, the
 * batch is gathered on the device, and the loss, the count of correct
 * answers and the logits (for the divergence watch) come back. The passes
 * mirror mts_net_forward / mts_net_backward node for node through the
 * layer-op twins of gpu.h, and the optimizer mts_opt_step, so a run gives
 * the CPU's bits (parameters, BN statistics, range observers, moments,
 * losses, accuracies).
 *
 * Taken: every node kind of nn_net.h (every built-in model: lenet300,
 * lenet5, mlp1024, resnet20, resnet18, vit-tiny; the transformer nodes
 * through gpu/nn_tx.cu's twins) with providers the GPU's GEMM takes on
 * device pointers (NATIVE, the "fp32" model, LUT, FMAq over them, INT: an
 * integer forward or test table runs the quantization-aware layers of
 * qat.c through gpu/qat.cu's twins, with any of its backward rules), no
 * per-layer multipliers, operand tracer or GEMM tap. Everything else runs the per-GEMM path (mts_gemm on the GPU,
 * the rest on the CPU). */
#ifndef MANTIS_NN_GPUNET_H
#define MANTIS_NN_GPUNET_H

#include <stdint.h>
#include "mantis/nn_ckpt.h"
#include "mantis/nn_data.h"
#include "mantis/nn_net.h"
#include "mantis/nn_ops.h"
#include "mantis/nn_optim.h"
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mts_gpunet mts_gpunet;

/* MTS_OK when a run of net with the training context train (NULL:
 * evaluation only) and the evaluation context eval can stay on the device;
 * else MTS_EUNSUPPORTED with the first reason in err ("layer attn_qk1
 * (attn_qk) has no device twin yet", "per-layer multipliers", ...). Needs
 * no device. */
int mts_gpunet_supports(const mts_net *net, const mts_nn_ctx *train, const mts_nn_ctx *eval, mts_err *err);

/* Uploads net (built; parameters and state as they are now), opt's moments,
 * the first ntrain samples of train and ntest of test, opens a GEMM plan for
 * each of fwd, bwd and test (tables uploaded once) and allocates every
 * activation and workspace for net->batch samples once. train NULL: for
 * evaluation only (opt, fwd, bwd, ste unused; mts_gpunet_train_epoch
 * refuses). ste: the FMAq estimator of dense layers (mts_ste, the train
 * context's), masked on the device (mts_gpu_dense_backward_ste) when fwd
 * is FMAq and ste is not MTS_STE_IDENTITY. int_bwd: the backward of the
 * quantization-aware layers when fwd is an integer table (mts_int_bwd, the
 * train context's); STE and TABLE run their float GEMMs through bwd, or
 * native FP32 where bwd is an integer table (qat.c's rule). Errors: the
 * provider's or the device's (MTS_EUNSUPPORTED, MTS_ENOMEM naming the
 * size). */
int mts_gpunet_open(mts_gpunet **g, const mts_net *net, const mts_opt *opt, const mts_provider *fwd,
                    const mts_provider *bwd, const mts_provider *test, int ste, int int_bwd,
                    const mts_dataset *train, int ntrain, const mts_dataset *test_set, int ntest, mts_err *err);
void mts_gpunet_close(mts_gpunet *g);

/* mts_train_epoch on the device: the first n (<= ntrain) samples in
 * mts_epoch_order, batches of `batch`. After each batch opt->t and
 * opt->nonfinite are the CPU's, the last node's host y holds the batch's
 * logits, and progress(pctx, done, n) is called. Host net->param, state,
 * opt->m, v are NOT updated (mts_gpunet_download). */
int mts_gpunet_train_epoch(mts_gpunet *g, mts_net *net, mts_opt *opt, int n, int batch, uint64_t seed, int epoch,
                           float lr, void (*progress)(void *pctx, int done, int total), void *pctx,
                           mts_epoch_stats *st, mts_err *err);
/* mts_evaluate on the device over the first n (<= ntest) test samples with
 * the test provider. */
int mts_gpunet_evaluate(mts_gpunet *g, int n, double *acc, mts_err *err);
/* Copies the device's parameters and state into net and its moments into
 * opt (either may be NULL): before a checkpoint is written. */
int mts_gpunet_download(const mts_gpunet *g, mts_net *net, mts_opt *opt, mts_err *err);

/* A diagnostic: with MANTIS_GPU_PROFILE=1 in the environment when the run
 * was opened, every node is timed between two synchronisations (which costs
 * the overlap of host and device); writes "conv fwd 1.234 s bwd 2.345 s,
 * ..." (seconds per node kind and pass, over the run so far) into buf (n
 * bytes, truncated) and returns its length, 0 when not profiling. */
size_t mts_gpunet_profile(const mts_gpunet *g, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
