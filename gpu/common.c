/* common.c - what the GPU path decides without a device: which providers
 * run on it (built with or without CUDA). */
#include <string.h>

#include "mantis/gpu.h"

int mts_gpu_resolve_device(const char *name, int *device, mts_err *err)
{
    *device = 0;
    if (!name || !strcmp(name, "auto")) {
        mts_err ignored;
        if (mts_gpu_probe(NULL, &ignored) == MTS_OK) *device = MTS_GPU_DEVICE_CUDA;
        return MTS_OK;
    }
    if (!strcmp(name, "cpu")) return MTS_OK;
    if (!strcmp(name, "cuda")) {
        int rc = mts_gpu_probe(NULL, err);
        if (rc == MTS_OK) *device = MTS_GPU_DEVICE_CUDA;
        return rc;
    }
    return mts_fail(err, MTS_EINVAL, "--device '%s': expected cpu, cuda or auto", name);
}

int mts_gpu_supports(const mts_provider *p, mts_err *err)
{
    if (!p) return mts_fail(err, MTS_EINVAL, "gpu: NULL provider");
    switch (p->kind) {
    case MTS_PROV_NATIVE: return MTS_OK;
    case MTS_PROV_BLAS:
        return mts_fail(err, MTS_EUNSUPPORTED,
                        "gpu: provider BLAS is not available on the GPU (its order is OpenBLAS's own); "
                        "use the native fp32 provider");
    case MTS_PROV_MULOP:
        return mts_fail(err, MTS_EUNSUPPORTED,
                        "gpu: provider MULOP is not available on the GPU (C models and RTL in the loop run "
                        "on the CPU); tabulate the multiplier (mantis lutgen) to use the LUT provider");
    case MTS_PROV_INT:
        if (p->fmaq) return mts_fail(err, MTS_EINVAL, "gpu: FMAq accumulation needs a float provider, not INT");
        return MTS_OK;
    case MTS_PROV_LUT: {
        if (!p->lut) return mts_fail(err, MTS_EINVAL, "gpu: LUT provider without a table");
        if (p->lut->kind != MTS_LUT_FLOAT) return mts_fail(err, MTS_EINVAL, "gpu: LUT provider with an integer table");
        /* any (1,E,M) format: the device quantizes and decodes with the CPU's
         * own code (arith_hd.h); the limit is the table's size */
        const mts_format *lf = &p->lut->fmt;
        if (lf->M > 11)
            return mts_fail(err, MTS_EUNSUPPORTED,
                            "gpu: LUT provider with table format E%dM%d is not available on the GPU (tables of "
                            "M <= 11 mantissa bits only, 2^22 entries)",
                            lf->E, lf->M);
        return MTS_OK;
    }
    default: return mts_fail(err, MTS_EINVAL, "gpu: unknown provider kind %d", (int)p->kind);
    }
}
