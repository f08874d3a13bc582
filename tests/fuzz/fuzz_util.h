/* fuzz_util.h - what every libFuzzer target of tests/fuzz shares: the
 * readers take paths, so the input is handed over as an in-memory file
 * (memfd, a regular file that mts_fs_read accepts) reached through
 * /proc/self/fd; and a helper that makes a checksummed format's CRC right so
 * the fuzzer gets past the check to the parser behind it. */
#ifndef MANTIS_FUZZ_UTIL_H
#define MANTIS_FUZZ_UTIL_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mantis/binio.h"

/* Replaces the content of in-memory file `slot` (0..3) with data and
 * returns its path (valid until the next call with that slot). */
static inline const char *fuzz_file(int slot, const uint8_t *data, size_t size)
{
    static int fd[4] = {-1, -1, -1, -1};
    static char path[4][64];
    if (fd[slot] < 0) {
        fd[slot] = memfd_create("mantis-fuzz", 0);
        if (fd[slot] < 0) abort();
        snprintf(path[slot], sizeof path[slot], "/proc/self/fd/%d", fd[slot]);
    }
    if (ftruncate(fd[slot], 0) != 0 || (size && pwrite(fd[slot], data, size, 0) != (ssize_t)size)) abort();
    return path[slot];
}

/* A malloc'd copy of data (at least min bytes, zero-padded) for a target
 * that patches checksums in place. */
static inline uint8_t *fuzz_copy(const uint8_t *data, size_t size, size_t min)
{
    uint8_t *b = calloc(1, size > min ? size : min);
    if (!b) abort();
    if (size) memcpy(b, data, size);
    return b;
}

/* The CRC-32 of b[from..to) stored little-endian at b[at]. */
static inline void fuzz_fix_crc(uint8_t *b, size_t at, size_t from, size_t to)
{
    mts_put_le32(b + at, mts_crc32(0, b + from, to - from));
}

#endif
