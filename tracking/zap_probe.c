/*
 * Whether dropping the page tables over a tracked heap keeps what tracking
 * knows (track.h: cxlcr_track_zap_keeps_writes).
 *
 * A snapshot's freeze holds CRIU's read of /proc/PID/smaps, and the kernel
 * accounts there every present 4 KiB page of a mapping: ~6 ms per GiB of
 * heap the service touched (measured here), which made the freeze grow
 * with the heap. With the page tables dropped first (MADV_DONTNEED, the
 * service's own helper thread, preload/shed.c), the walk meets only
 * markers: ~0.6 ms per GiB. That is safe only if the drop loses no write:
 *
 *   - a page write-protected since the last scan (not written) must come
 *     back write-protected: the kernel leaves a uffd-wp marker in its
 *     entry (shmem, CONFIG_PTE_MARKER_UFFD_WP);
 *   - a page written since the last scan must still read as written: its
 *     entry becomes empty, which the scan's fast path counts as written;
 *     and when every entry of a page table was written, the kernel may
 *     free the table itself (CONFIG_PT_RECLAIM), and then the scan must
 *     count the hole as written too, which kernels have not always done
 *     (fixed upstream in 2026: "reads as written on a uffd-wp VMA").
 *
 * So this is measured, not assumed: the probe writes all of one 2 MiB
 * table's pages and one page of the next, drops both, and scans. Only a
 * kernel that reports every one of those pages lets snapshots shed; on
 * any other the freeze keeps its walk, and no write is ever lost. Run once
 * per process, on a memfd (shmem, as an emulated pool's tmpfs file is).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "track.h"

#define PROBE_TABLE (2u << 20)
#define PROBE_SIZE (2 * PROBE_TABLE)
#define PROBE_PAGE 4096u

/* The pages of w that lie in [lo, hi), in pages. */
static uint64_t pages_in(const struct cxlcr_written *w, uint64_t lo, uint64_t hi)
{
	uint64_t n = 0;
	for (size_t i = 0; i < w->count; i++) {
		uint64_t s = w->ranges[i].start > lo ? w->ranges[i].start : lo;
		uint64_t e = w->ranges[i].end < hi ? w->ranges[i].end : hi;
		if (e > s)
			n += (e - s) / PROBE_PAGE;
	}
	return n;
}

static bool probe(void)
{
	bool ok = false;
	int mfd = memfd_create("cxlcr-zap-probe", MFD_CLOEXEC), uffd = -1, pm = -1;
	if (mfd < 0 || ftruncate(mfd, PROBE_SIZE) < 0)
		goto out;
	/* Twice the size, to place it on a table boundary as a heap is. */
	uint8_t *raw = mmap(NULL, 2 * PROBE_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		goto out;
	uint8_t *p = (uint8_t *)(((uintptr_t)raw + PROBE_TABLE - 1) & ~(uintptr_t)(PROBE_TABLE - 1));
	if (mmap(p, PROBE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, mfd, 0) == MAP_FAILED)
		goto unmap;
	madvise(p, PROBE_SIZE, MADV_NOHUGEPAGE);
	for (size_t i = 0; i < PROBE_SIZE; i += PROBE_PAGE)
		p[i] = 1;
	uint64_t lo = (uintptr_t)p, hi = lo + PROBE_SIZE;
	struct cxlcr_written w = { 0 };
	if ((uffd = cxlcr_track_make_uffd()) < 0 || cxlcr_track_register(uffd, lo, hi) < 0 ||
	    (pm = cxlcr_track_open(getpid())) < 0 || cxlcr_track_scan(pm, lo, hi, &w) != 0)
		goto unmap;
	cxlcr_written_free(&w);
	for (size_t i = 0; i < PROBE_TABLE; i += PROBE_PAGE)
		p[i] = 2; /* every entry of the first table: it may be freed */
	p[PROBE_TABLE + PROBE_PAGE] = 2;
	if (madvise(p, PROBE_SIZE, MADV_DONTNEED) == 0 && cxlcr_track_scan(pm, lo, hi, &w) == 0)
		ok = pages_in(&w, lo, lo + PROBE_TABLE) == PROBE_TABLE / PROBE_PAGE &&
		     pages_in(&w, lo + PROBE_TABLE + PROBE_PAGE, lo + PROBE_TABLE + 2 * PROBE_PAGE) == 1;
	cxlcr_written_free(&w);
unmap:
	munmap(raw, 2 * PROBE_SIZE);
out:
	if (pm >= 0)
		close(pm);
	if (uffd >= 0)
		close(uffd);
	if (mfd >= 0)
		close(mfd);
	return ok;
}

bool cxlcr_track_zap_keeps_writes(void)
{
	static int known = -1;
	if (known < 0) {
		int e = errno;
		known = probe();
		errno = e;
	}
	return known == 1;
}
