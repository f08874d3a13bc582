/* hash.c - FNV-1a and SHA-256 (include/mantis/hash.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mantis/fs.h"
#include "mantis/binio.h"
#include "mantis/hash.h"

uint64_t mts_hash_fnv1a(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void mts_hash128_init(mts_hash128 *s)
{
    s->h[0] = MTS_FNV64_BASIS;
    s->h[1] = 0x84222325cbf29ce4ull;
}

void mts_hash128_add(mts_hash128 *s, const void *data, size_t n)
{
    const uint8_t *b = data;
    for (size_t i = 0; i < n; i++) {
        s->h[0] = (s->h[0] ^ b[i]) * 0x100000001b3ull;
        s->h[1] = (s->h[1] ^ b[i] ^ 0x5a) * 0x100000001b3ull; /* second lane differs in base and input */
    }
}

void mts_hash128_str(mts_hash128 *s, const char *str) { mts_hash128_add(s, str, strlen(str) + 1); }

int mts_hash128_file(mts_hash128 *s, const char *path, mts_err *err)
{
    uint8_t *b;
    size_t n;
    int rc = mts_fs_read(path, &b, &n, err);
    if (rc) return rc;
    uint64_t len = n;
    mts_hash128_add(s, &len, sizeof len);
    mts_hash128_add(s, b, n);
    free(b);
    return MTS_OK;
}

void mts_hash128_hex(const mts_hash128 *s, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)s->h[0], (unsigned long long)s->h[1]);
}

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void mts_sha256(const void *data, size_t n, uint8_t out[32])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) block(h, p + i);
    uint8_t last[128] = {0};
    size_t rem = n - i;
    memcpy(last, p + i, rem);
    last[rem] = 0x80;
    size_t tot = rem + 9 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int j = 0; j < 8; j++) last[tot - 1 - j] = (uint8_t)(bits >> (8 * j));
    block(h, last);
    if (tot == 128) block(h, last + 64);
    for (int j = 0; j < 8; j++) {
        out[4 * j] = (uint8_t)(h[j] >> 24);
        out[4 * j + 1] = (uint8_t)(h[j] >> 16);
        out[4 * j + 2] = (uint8_t)(h[j] >> 8);
        out[4 * j + 3] = (uint8_t)h[j];
    }
}

void mts_sha256_hex(const void *data, size_t n, char out[65])
{
    uint8_t h[32];
    mts_sha256(data, n, h);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

int mts_sha256_file_hex(const char *path, char out[65], mts_err *err)
{
    uint8_t *b;
    size_t n;
    out[0] = '\0';
    int rc = mts_fs_read(path, &b, &n, err);
    if (rc) return rc;
    mts_sha256_hex(b, n, out);
    free(b);
    return MTS_OK;
}
