/* binio.h - the byte-level pieces every Mantis binary format shares (LUTs,
 * checkpoints, traces): CRC-32 and little-endian fields. Reading and atomic
 * writing of whole files is fs.h's. */
#ifndef MANTIS_BINIO_H
#define MANTIS_BINIO_H

#include <stddef.h>
#include <stdint.h>
#include "mantis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CRC-32 (IEEE 802.3, as zlib's crc32). Start with crc = 0; chainable. */
uint32_t mts_crc32(uint32_t crc, const void *data, size_t n);

static inline void mts_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline uint32_t mts_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void mts_put_le64(uint8_t *p, uint64_t v) { mts_put_le32(p, (uint32_t)v); mts_put_le32(p + 4, (uint32_t)(v >> 32)); }
static inline uint64_t mts_get_le64(const uint8_t *p) { return mts_get_le32(p) | (uint64_t)mts_get_le32(p + 4) << 32; }

#ifdef __cplusplus
}
#endif
#endif
