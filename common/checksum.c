/* CRC-32C, used to tell a corrupt or foreign on-device header from a valid
 * one. Only small headers are checked, so a table-free loop is enough. */
#include "checksum.h"

uint32_t cxlcr_crc32c(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
	}
	return ~crc;
}
