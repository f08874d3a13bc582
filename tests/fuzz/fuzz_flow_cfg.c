/* fuzz_flow_cfg.c - the flow configuration reader (flow_cfg_load), with and
 * without the quick profile (first byte). */
#include "fuzz_util.h"
#include "flow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static flow_cfg c;
    mts_err err;
    (void)flow_cfg_load(&c, fuzz_file(0, data + 1, size - 1), data[0] & 1, &err);
    return 0;
}
