/* act.c - ReLU (FP32). */
#include "mantis/nn_ops.h"

void mts_relu_forward(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void mts_relu_backward(size_t n, const float *y, const float *dy, float *dx)
{
    /* the output decides: y > 0 exactly where x > 0 */
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}
