/*
 * The hot set of a service: which heap pages have page table entries in
 * its process. The daemon drops the tables first (preload/shed.c, as for
 * a checkpoint) and lets the service run for the hot window: the pages
 * present afterwards are the ones it touched in the window. A read fault
 * on a file mapping maps the neighbours the page cache holds as well (the
 * kernel's fault-around, 64 KiB by default), so the set errs on the hot
 * side, never on the cold one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "tier.h"

#define PM_PRESENT (1ull << 63)
#define CHUNK 512u

int tier_present_pages(int pid, uint64_t heap, uint64_t pages, uint64_t **bits, uint64_t *count)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cxlcr_error("%s: %s", path, strerror(errno));
	uint64_t *b = calloc((pages + 63) / 64, sizeof(uint64_t));
	uint64_t entries[CHUNK];
	*count = 0;
	if (!b) {
		close(fd);
		return cxlcr_error("out of memory");
	}
	for (uint64_t i = 0; i < pages;) {
		uint64_t n = pages - i < CHUNK ? pages - i : CHUNK;
		ssize_t got = pread(fd, entries, n * 8, (off_t)((heap / 4096 + i) * 8));
		if (got <= 0) {
			int e = got < 0 ? errno : EIO;
			free(b);
			close(fd);
			return cxlcr_error("%s: %s", path, strerror(e));
		}
		n = (uint64_t)got / 8;
		for (uint64_t k = 0; k < n; k++, i++)
			if (entries[k] & PM_PRESENT) {
				b[i / 64] |= 1ull << (i % 64);
				(*count)++;
			}
	}
	close(fd);
	*bits = b;
	return 0;
}
