/* loss.c - softmax cross-entropy: FP32 values, exp and log from the shared
 * fmath.h (identical on the CPU and the GPU), the loss summed in FP64 in the
 * fixed blocked order of every training reduction (docs/training.md). The
 * softmax sum of one sample stays sequential over its classes (one GPU
 * thread per sample does the same). */
#include "mantis/fmath.h"
#include "mantis/nn_ops.h"

double mts_softmax_ce(int N, int classes, const float *logits, const uint8_t *labels, float *dlogits,
                      int *correct)
{
    mts_fm_sumd loss;
    mts_fm_sumd_init(&loss);
    int ok = 0; /* an integer count: exact in any order */
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * classes;
        int am = 0;
        for (int c = 1; c < classes; c++)
            if (z[c] > z[am]) am = c;
        ok += am == labels[n];
        float mx = z[am], s = 0.0f;
        for (int c = 0; c < classes; c++) s += mts_fm_expf(z[c] - mx);
        float lse = mx + mts_fm_logf(s);
        mts_fm_sumd_push(&loss, (double)(lse - z[labels[n]]));
        if (dlogits)
            for (int c = 0; c < classes; c++)
                dlogits[(size_t)n * classes + c] =
                    (mts_fm_expf(z[c] - lse) - (c == labels[n] ? 1.0f : 0.0f)) / (float)N;
    }
    if (correct) *correct = ok;
    return N > 0 ? mts_fm_sumd_sum(&loss) / N : 0.0;
}
