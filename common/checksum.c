/*
 * CRC-32C (Castagnoli): headers, records and whole image files in the pool
 * are checked with it, so that a corrupt or foreign one is refused instead
 * of followed. Image files sit on the critical path of a migrate, so x86's
 * crc32 instruction (SSE4.2) does the work where the CPU has it, 8 bytes at
 * a time; a table does it elsewhere.
 */
#include <stdbool.h>
#include <string.h>

#include "checksum.h"

#define POLY 0x82f63b78u /* reflected */

static uint32_t table[256];

static void make_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
		table[i] = c;
	}
}

static uint32_t crc_table(uint32_t crc, const uint8_t *p, size_t len)
{
	if (!table[1])
		make_table();
	while (len--)
		crc = (crc >> 8) ^ table[(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
#include <cpuid.h>

static bool have_sse42(void)
{
	static int have = -1;
	if (have < 0) {
		unsigned a, b, c = 0, d;
		have = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
	}
	return have;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = crc;
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	while (len--)
		c32 = __builtin_ia32_crc32qi(c32, *p++);
	return c32;
}
#endif

uint32_t cxlcr_crc32c(uint32_t crc, const void *data, size_t len)
{
	crc = ~crc;
#if defined(__x86_64__)
	if (have_sse42())
		return ~crc_hw(crc, data, len);
#endif
	return ~crc_table(crc, data, len);
}
