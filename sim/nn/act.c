/* act.c - activations: ReLU and GELU (FP32). */
#include "mantis/nn_ops.h"
#include "nn_internal.h"

void mts_relu_forward(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void mts_relu_backward(size_t n, const float *y, const float *dy, float *dx)
{
    /* the output decides: y > 0 exactly where x > 0 */
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* GELU, tanh form (Hendrycks & Gimpel); tanh through the shared wrapper. */
#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

void mts_gelu_forward(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i], t = mts__nn_tanhf(GELU_C * (v + GELU_A * v * v * v));
        y[i] = 0.5f * v * (1.0f + t);
    }
}

void mts_gelu_backward(size_t n, const float *x, const float *dy, float *dx)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i], t = mts__nn_tanhf(GELU_C * (v + GELU_A * v * v * v));
        float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * v * v);
        dx[i] = dy[i] * d;
    }
}
