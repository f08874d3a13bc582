/* loss.c - softmax cross-entropy (FP32 values, double loss sum). */
#include <math.h>

#include "mantis/nn_ops.h"

double mts_softmax_ce(int N, int classes, const float *logits, const uint8_t *labels, float *dlogits,
                      int *correct)
{
    double loss = 0.0;
    int ok = 0;
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * classes;
        int am = 0;
        for (int c = 1; c < classes; c++)
            if (z[c] > z[am]) am = c;
        ok += am == labels[n];
        float mx = z[am], s = 0.0f;
        for (int c = 0; c < classes; c++) s += expf(z[c] - mx);
        float lse = mx + logf(s);
        loss += (double)(lse - z[labels[n]]);
        if (dlogits)
            for (int c = 0; c < classes; c++)
                dlogits[(size_t)n * classes + c] =
                    (expf(z[c] - lse) - (c == labels[n] ? 1.0f : 0.0f)) / (float)N;
    }
    if (correct) *correct = ok;
    return N > 0 ? loss / N : 0.0;
}
