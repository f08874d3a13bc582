/* nn.h - the CPU training engine, as one include: an umbrella over its
 * module headers (include it, or only the ones a file needs):
 *   nn_ops.h    the layer-op contract a CUDA backend mirrors op for op
 *               (dense, conv, pools, ReLU, BN, softmax-CE, MatMul, the FMAq
 *               STE) and the context every op takes (mts_nn_ctx)
 *   nn_arith.h  providers described as text (mts_arith_spec, mts_arith) and
 *               the scalar operand/product contract (mts_prov_*)
 *   nn_trace.h  the operand tracer and mts_nn_gemm
 *   nn_net.h    networks, builders, forward/backward, built-in models
 *   nn_optim.h  SGD / Adam and learning-rate schedules
 *   nn_data.h   MNIST / Fashion-MNIST / CIFAR-10 loaders
 *   nn_ckpt.h   checkpoints
 *   nn_train.h  epochs, evaluation, and the train / test drivers
 *   nn_gpunet.h the same epochs and evaluation device-resident (--device cuda)
 * See docs/training.md. */
#ifndef MANTIS_NN_H
#define MANTIS_NN_H

#include "mantis/nn_arith.h"
#include "mantis/nn_ckpt.h"
#include "mantis/nn_data.h"
#include "mantis/nn_gpunet.h"
#include "mantis/nn_net.h"
#include "mantis/nn_ops.h"
#include "mantis/nn_optim.h"
#include "mantis/nn_trace.h"
#include "mantis/nn_train.h"

#endif
