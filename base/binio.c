/* binio.c - CRC-32 (include/mantis/binio.h). */
#include "mantis/binio.h"

/* The table is a constant the compiler computes: no lazy initialisation,
 * so no data race when threads checksum at once (a first call racing on a
 * static "ready" flag and table is undefined behaviour in C11, identical
 * values or not). CRC_STEP is one bit of the reflected polynomial
 * 0xEDB88320; CRC_ENTRY(i) is eight of them, table[i] of zlib's crc32. */
#define CRC_STEP(c) (((c) >> 1) ^ (0xEDB88320u & (0u - ((c) & 1u))))
#define CRC_ENTRY(i) \
    CRC_STEP(CRC_STEP(CRC_STEP(CRC_STEP(CRC_STEP(CRC_STEP(CRC_STEP(CRC_STEP((uint32_t)(i)))))))))
#define CRC_4(i) CRC_ENTRY(i), CRC_ENTRY((i) + 1), CRC_ENTRY((i) + 2), CRC_ENTRY((i) + 3)
#define CRC_16(i) CRC_4(i), CRC_4((i) + 4), CRC_4((i) + 8), CRC_4((i) + 12)
#define CRC_64(i) CRC_16(i), CRC_16((i) + 16), CRC_16((i) + 32), CRC_16((i) + 48)

static const uint32_t crc_table[256] = {CRC_64(0), CRC_64(64), CRC_64(128), CRC_64(192)};

uint32_t mts_crc32(uint32_t crc, const void *data, size_t n)
{
    const uint8_t *p = data;
    crc = ~crc;
    while (n--) crc = crc_table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}
