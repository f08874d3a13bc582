/* hash.h - the hashes Mantis uses: FNV-1a (64-bit, and a 128-bit two-lane
 * form for cache keys; neither is a security boundary) and SHA-256 (data
 * set digests and the flow's step keys). */
#ifndef MANTIS_HASH_H
#define MANTIS_HASH_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FNV-1a 64 over data, continuing from h (start with MTS_FNV64_BASIS). */
#define MTS_FNV64_BASIS 0xcbf29ce484222325ull
uint64_t mts_hash_fnv1a(uint64_t h, const void *data, size_t n);

/* A 128-bit content key: two FNV-1a lanes with different bases. */
typedef struct mts_hash128 { uint64_t h[2]; } mts_hash128;
void mts_hash128_init(mts_hash128 *s);
void mts_hash128_add(mts_hash128 *s, const void *data, size_t n);
/* Adds str with its terminating NUL (so "ab","c" and "a","bc" differ). */
void mts_hash128_str(mts_hash128 *s, const char *str);
/* Adds a file's length and bytes; MTS_EIO naming the file when unreadable. */
int mts_hash128_file(mts_hash128 *s, const char *path, mts_err *err);
/* 32 hex digits and a NUL. */
void mts_hash128_hex(const mts_hash128 *s, char out[33]);

/* SHA-256 (FIPS 180-4) of a buffer into out[32]. */
void mts_sha256(const void *data, size_t n, uint8_t out[32]);
/* The same as 64 lowercase hex digits and a NUL. */
void mts_sha256_hex(const void *data, size_t n, char out[65]);
/* SHA-256 of a file's bytes as hex; MTS_EIO (out = "") when unreadable. */
int mts_sha256_file_hex(const char *path, char out[65], mts_err *err);

#ifdef __cplusplus
}
#endif
#endif
