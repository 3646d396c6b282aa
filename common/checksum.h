#ifndef CXLCR_CHECKSUM_H
#define CXLCR_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli) of len bytes, continuing from crc (start with 0). */
uint32_t cxlcr_crc32c(uint32_t crc, const void *data, size_t len);

#endif
