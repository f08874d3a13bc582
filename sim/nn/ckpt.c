/* ckpt.c - training checkpoints: everything a resumed run needs to
 * continue bit-identically (parameters, BN statistics and the integer
 * layers' range observers, optimizer moments and step count, epochs done,
 * per-epoch history, the run's configuration).
 *
 * Layout, little-endian:
 *   "MTSCKPT\0" | u32 version | u64 nparam | u64 nstate | u32 opt kind |
 *   u64 opt steps | u32 epoch | u32 nhist | u32 config length | config |
 *   nhist x 6 f64 (history) | nparam f32 | nstate f32 | nparam f32 (m) |
 *   nparam f32 (v) | u32 CRC-32 of everything before it. */
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/fpbits.h"
#include "mantis/nn_ckpt.h"

#define CK_MAGIC "MTSCKPT"
#define CK_VERSION 1u
#define CK_FIXED (8 + 4 + 8 + 8 + 4 + 8 + 4 + 4 + 4)

static uint8_t *put_f32s(uint8_t *p, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++, p += 4) mts_put_le32(p, v ? mts_f2u(v[i]) : 0);
    return p;
}

int mts_ckpt_save(const char *path, const mts_net *net, const mts_opt *opt, const mts_ckpt_meta *meta,
                  mts_err *err)
{
    size_t cl = strlen(meta->config), np = net->nparam, ns = net->nstate;
    int nh = meta->nhist;
    size_t len = CK_FIXED + cl + (size_t)nh * 48 + 4 * (np * 3 + ns) + 4;
    uint8_t *buf = malloc(len), *p = buf;
    if (!buf) return mts_fail(err, MTS_ENOMEM, "%s: out of memory for a %zu-byte checkpoint", path, len);
    memcpy(p, CK_MAGIC, 8);
    p += 8;
    mts_put_le32(p, CK_VERSION); p += 4;
    mts_put_le64(p, np); p += 8;
    mts_put_le64(p, ns); p += 8;
    mts_put_le32(p, (uint32_t)opt->kind); p += 4;
    mts_put_le64(p, opt->t); p += 8;
    mts_put_le32(p, (uint32_t)meta->epoch); p += 4;
    mts_put_le32(p, (uint32_t)nh); p += 4;
    mts_put_le32(p, (uint32_t)cl); p += 4;
    memcpy(p, meta->config, cl);
    p += cl;
    for (int i = 0; i < nh; i++) {
        const mts_epoch_stats *s = &meta->hist[i];
        double v[6] = {s->train_loss, s->train_acc, s->test_acc, s->seconds, s->samples_per_s, s->lr};
        for (int j = 0; j < 6; j++, p += 8) {
            uint64_t u;
            memcpy(&u, &v[j], 8);
            mts_put_le64(p, u);
        }
    }
    p = put_f32s(p, net->param, np);
    p = put_f32s(p, net->state, ns);
    p = put_f32s(p, opt->m, np);
    p = put_f32s(p, opt->v, np);
    mts_put_le32(p, mts_crc32(0, buf, (size_t)(p - buf)));
    const void *parts[1] = {buf};
    size_t lens[1] = {len};
    int rc = mts_fs_write_atomic(path, 1, parts, lens, err);
    free(buf);
    return rc;
}

/* Reads and validates the whole file; on success *buf holds it. */
static int read_checked(const char *path, uint8_t **buf, size_t *len, mts_err *err)
{
    int rc = mts_fs_read(path, buf, len, err);
    if (rc != MTS_OK) return rc;
    const uint8_t *b = *buf;
    if (*len < CK_FIXED + 4 || memcmp(b, CK_MAGIC, 8))
        rc = mts_fail(err, MTS_EFORMAT, "%s: not a Mantis checkpoint (magic MTSCKPT expected)", path);
    else if (mts_get_le32(b + 8) != CK_VERSION)
        rc = mts_fail(err, MTS_EFORMAT, "%s: checkpoint version %u, this build reads version %u", path,
                      mts_get_le32(b + 8), CK_VERSION);
    else {
        uint64_t np = mts_get_le64(b + 12), ns = mts_get_le64(b + 20);
        uint32_t nh = mts_get_le32(b + 44), cl = mts_get_le32(b + 48);
        uint64_t want = (uint64_t)CK_FIXED + cl + (uint64_t)nh * 48 + 4 * (np * 3 + ns) + 4;
        if (np > (1ull << 40) || ns > (1ull << 40) || nh > 1024 || cl >= 1024 || want != *len)
            rc = mts_fail(err, MTS_EFORMAT, "%s: checkpoint is %zu bytes, its header describes %llu (truncated?)", path,
                          *len, (unsigned long long)want);
        else if (mts_crc32(0, b, *len - 4) != mts_get_le32(b + *len - 4))
            rc = mts_fail(err, MTS_EFORMAT, "%s: checkpoint checksum mismatch (file corrupted)", path);
    }
    if (rc != MTS_OK) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

int mts_ckpt_peek(const char *path, char *config, size_t n, mts_err *err)
{
    uint8_t *b;
    size_t len;
    int rc = read_checked(path, &b, &len, err);
    if (rc != MTS_OK) return rc;
    uint32_t cl = mts_get_le32(b + 48);
    if (cl >= n) cl = (uint32_t)n - 1;
    memcpy(config, b + CK_FIXED, cl);
    config[cl] = 0;
    free(b);
    return MTS_OK;
}

static const uint8_t *get_f32s(const uint8_t *p, float *v, size_t n)
{
    for (size_t i = 0; i < n; i++, p += 4)
        if (v) v[i] = mts_u2f(mts_get_le32(p));
    return p;
}

int mts_ckpt_load(const char *path, mts_net *net, mts_opt *opt, mts_ckpt_meta *meta, mts_err *err)
{
    uint8_t *b;
    size_t len;
    int rc = read_checked(path, &b, &len, err);
    if (rc != MTS_OK) return rc;
    uint64_t np = mts_get_le64(b + 12), ns = mts_get_le64(b + 20);
    /* written before the QAT range observers (the state's tail): they stay unobserved */
    int no_qat = np == net->nparam && net->nqstate && ns == net->nstate - net->nqstate;
    if (np != net->nparam || (ns != net->nstate && !no_qat)) {
        free(b);
        return mts_fail(err, MTS_EFORMAT, "%s: checkpoint has %llu parameters and %llu state values, model %s has %zu and %zu",
                        path, (unsigned long long)np, (unsigned long long)ns, net->name, net->nparam, net->nstate);
    }
    uint32_t nh = mts_get_le32(b + 44), cl = mts_get_le32(b + 48);
    if (opt) {
        opt->kind = (mts_opt_kind)mts_get_le32(b + 28);
        opt->t = mts_get_le64(b + 32);
    }
    if (meta) {
        memcpy(meta->config, b + CK_FIXED, cl);
        meta->config[cl] = 0;
        meta->epoch = (int)mts_get_le32(b + 40);
        meta->nhist = (int)nh;
    }
    const uint8_t *p = b + CK_FIXED + cl;
    for (uint32_t i = 0; i < nh; i++) {
        double v[6];
        for (int j = 0; j < 6; j++, p += 8) {
            uint64_t u = mts_get_le64(p);
            memcpy(&v[j], &u, 8);
        }
        if (meta)
            meta->hist[i] = (mts_epoch_stats){v[0], v[1], v[2], v[3], v[4], v[5]};
    }
    p = get_f32s(p, net->param, np);
    if (no_qat) memset(net->state + ns, 0, sizeof(float) * net->nqstate);
    p = get_f32s(p, net->state, ns);
    p = get_f32s(p, opt ? opt->m : NULL, np);
    get_f32s(p, opt ? opt->v : NULL, np);
    free(b);
    return MTS_OK;
}

int mts_ckpt_path(const char *dir, char *buf, size_t n)
{
    return mts_fs_pathf(buf, n, "%s/checkpoint.mtsckpt", dir);
}
