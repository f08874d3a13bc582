/* binio.c - CRC-32 (include/mantis/binio.h). */
#include "mantis/binio.h"

uint32_t mts_crc32(uint32_t crc, const void *data, size_t n)
{
    static uint32_t table[256];
    static int ready; /* benign race: every thread writes identical values */
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const uint8_t *p = data;
    crc = ~crc;
    while (n--) crc = table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}
