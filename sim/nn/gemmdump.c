/* gemmdump.c - the GEMM dump file (include/mantis/gemmdump.h) and the tap
 * that writes one from the layer ops' GEMM path. */
#include <stdlib.h>
#include <string.h>

#include "mantis/binio.h"
#include "mantis/fpbits.h"
#include "mantis/fs.h"
#include "mantis/gemmdump.h"

static const char MAGIC[8] = {'M', 'T', 'S', 'G', 'E', 'M', 'M', 0};
enum { HDR = 8 + 4 * 5 + 32 };

int mts_gemmdump_write(const char *path, const mts_gemmdump *g, mts_err *err)
{
    if (g->m < 1 || g->n < 1 || g->k < 1 || (int64_t)g->m * g->k > (1LL << 31) || (int64_t)g->k * g->n > (1LL << 31))
        return mts_fail(err, MTS_EINVAL, "%s: GEMM shape %dx%dx%d cannot be dumped", path, g->m, g->n, g->k);
    size_t na = (size_t)g->m * (size_t)g->k, nb = (size_t)g->k * (size_t)g->n, len = HDR + 4 * (na + nb) + 4;
    uint8_t *buf = malloc(len);
    if (!buf) return mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
    memcpy(buf, MAGIC, 8);
    uint32_t f[5] = {MTS_GEMMDUMP_VERSION, (uint32_t)g->m, (uint32_t)g->n, (uint32_t)g->k, (uint32_t)g->batch};
    for (int i = 0; i < 5; i++) mts_put_le32(buf + 8 + 4 * i, f[i]);
    memset(buf + 28, 0, 32);
    memcpy(buf + 28, g->layer, strnlen(g->layer, 31));
    uint8_t *p = buf + HDR;
    for (size_t i = 0; i < na; i++, p += 4) mts_put_le32(p, mts_f2u(g->A[i]));
    for (size_t i = 0; i < nb; i++, p += 4) mts_put_le32(p, mts_f2u(g->B[i]));
    mts_put_le32(p, mts_crc32(0, buf, len - 4));
    const void *parts[1] = {buf};
    int rc = mts_fs_write_atomic(path, 1, parts, &len, err);
    free(buf);
    return rc;
}

int mts_gemmdump_read(const char *path, mts_gemmdump *g, mts_err *err)
{
    memset(g, 0, sizeof *g);
    uint8_t *buf;
    size_t len;
    int rc = mts_fs_read(path, &buf, &len, err);
    if (rc) return rc;
    rc = MTS_EFORMAT;
    if (len < HDR + 4 || memcmp(buf, MAGIC, 8)) {
        mts_fail(err, rc, "%s: not a GEMM dump (bad magic or shorter than its header)", path);
        goto out;
    }
    uint32_t ver = mts_get_le32(buf + 8), m = mts_get_le32(buf + 12), n = mts_get_le32(buf + 16),
             k = mts_get_le32(buf + 20);
    if (ver != MTS_GEMMDUMP_VERSION) {
        mts_fail(err, rc, "%s: GEMM dump version %u, this build reads %u", path, ver, MTS_GEMMDUMP_VERSION);
        goto out;
    }
    if (m < 1 || n < 1 || k < 1 || m > (1u << 30) || n > (1u << 30) || k > (1u << 30) ||
        (uint64_t)m * k > (1ull << 31) || (uint64_t)k * n > (1ull << 31)) {
        mts_fail(err, rc, "%s: bad GEMM shape m=%u n=%u k=%u", path, m, n, k);
        goto out;
    }
    size_t na = (size_t)m * k, nb = (size_t)k * n;
    if (len != HDR + 4 * (na + nb) + 4) {
        mts_fail(err, rc, "%s: %zu bytes, a %ux%ux%u GEMM dump has %zu", path, len, m, n, k, HDR + 4 * (na + nb) + 4);
        goto out;
    }
    if (mts_crc32(0, buf, len - 4) != mts_get_le32(buf + len - 4)) {
        mts_fail(err, rc, "%s: CRC mismatch (file corrupted)", path);
        goto out;
    }
    if (!memchr(buf + 28, 0, 32)) {
        mts_fail(err, rc, "%s: layer name is not NUL-terminated", path);
        goto out;
    }
    g->A = malloc(4 * na);
    g->B = malloc(4 * nb);
    if (!g->A || !g->B) {
        mts_gemmdump_free(g);
        rc = mts_fail(err, MTS_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    g->m = (int)m, g->n = (int)n, g->k = (int)k;
    g->batch = (int)(mts_get_le32(buf + 24) & 0x7FFFFFFFu);
    memcpy(g->layer, buf + 28, 32);
    const uint8_t *p = buf + HDR;
    for (size_t i = 0; i < na; i++, p += 4) g->A[i] = mts_u2f(mts_get_le32(p));
    for (size_t i = 0; i < nb; i++, p += 4) g->B[i] = mts_u2f(mts_get_le32(p));
    rc = MTS_OK;
out:
    free(buf);
    return rc;
}

void mts_gemmdump_free(mts_gemmdump *g)
{
    free(g->A);
    free(g->B);
    g->A = g->B = NULL;
}

int mts_gemm_tap_init(mts_gemm_tap *t, const char *spec, mts_err *err)
{
    memset(t, 0, sizeof *t);
    const char *c = strchr(spec, ':');
    if (!c || c == spec || !c[1])
        return mts_fail(err, MTS_EINVAL, "--dump-gemm '%s': expected LAYER:FILE", spec);
    if ((size_t)(c - spec) >= sizeof t->layer)
        return mts_fail(err, MTS_EINVAL, "--dump-gemm: layer name longer than %zu characters", sizeof t->layer - 1);
    memcpy(t->layer, spec, (size_t)(c - spec));
    t->path = c + 1;
    return MTS_OK;
}

void mts_gemm_tap_see(mts_gemm_tap *t, int transA, int transB, int m, int n, int k, const float *A, int lda,
                      const float *B, int ldb)
{
    if (t->done || !t->cur || strcmp(t->cur, t->layer)) return;
    t->done = 1;
    mts_gemmdump g;
    memset(&g, 0, sizeof g);
    g.m = m, g.n = n, g.k = k, g.batch = t->batch;
    memcpy(g.layer, t->layer, sizeof g.layer);
    g.A = malloc(sizeof(float) * (size_t)m * (size_t)k);
    g.B = malloc(sizeof(float) * (size_t)k * (size_t)n);
    if (!g.A || !g.B) {
        t->rc = mts_fail(&t->err, MTS_ENOMEM, "%s: out of memory for the GEMM dump", t->path);
    } else {
        for (int i = 0; i < m; i++)
            for (int j = 0; j < k; j++)
                g.A[(size_t)i * k + j] = transA ? A[(size_t)j * lda + i] : A[(size_t)i * lda + j];
        for (int i = 0; i < k; i++)
            for (int j = 0; j < n; j++)
                g.B[(size_t)i * n + j] = transB ? B[(size_t)j * ldb + i] : B[(size_t)i * ldb + j];
        t->rc = mts_gemmdump_write(t->path, &g, &t->err);
    }
    mts_gemmdump_free(&g);
}

int mts_gemm_tap_result(const mts_gemm_tap *t, mts_err *err)
{
    if (!t->done) return mts_fail(err, MTS_EINVAL, "--dump-gemm: layer '%s' ran no GEMM", t->layer);
    if (t->rc) {
        if (err) *err = t->err;
        return t->rc;
    }
    return MTS_OK;
}
