/* fuzz_ckpt_common.h - one checkpoint read as `mantis train --resume` does:
 * peek at the config, then load into a net and optimizer sized as the
 * header says (the sizes are trusted only after the reader validated them). */
#ifndef MANTIS_FUZZ_CKPT_COMMON_H
#define MANTIS_FUZZ_CKPT_COMMON_H
#include "fuzz_util.h"
#include "mantis/nn_ckpt.h"

static inline void fuzz_ckpt(const uint8_t *b, size_t size)
{
    const char *path = fuzz_file(0, b, size);
    static mts_ckpt_meta meta;
    mts_err err;
    char config[1024];
    if (mts_ckpt_peek(path, config, sizeof config, &err) != MTS_OK) return;
    /* peek validated size and checksum: the header's counts fit the file */
    size_t np = (size_t)mts_get_le64(b + 12), ns = (size_t)mts_get_le64(b + 20);
    mts_net net;
    mts_opt opt;
    memset(&net, 0, sizeof net);
    memset(&opt, 0, sizeof opt);
    snprintf(net.name, sizeof net.name, "fuzz");
    net.nparam = np;
    net.nstate = ns;
    net.param = malloc(4 * (np ? np : 1));
    net.state = malloc(4 * (ns ? ns : 1));
    opt.m = malloc(4 * (np ? np : 1));
    opt.v = malloc(4 * (np ? np : 1));
    opt.n = np;
    if (net.param && net.state && opt.m && opt.v) (void)mts_ckpt_load(path, &net, &opt, &meta, &err);
    free(net.param);
    free(net.state);
    free(opt.m);
    free(opt.v);
}
#endif
