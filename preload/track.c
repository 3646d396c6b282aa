/*
 * The service's part of write tracking (tracking/track.h).
 *
 * A userfaultfd registers memory of the process that made it, so the
 * service makes it, on the daemon's request: the helper thread creates one
 * in asynchronous write-protect mode and publishes its number in the arena
 * header; the tracker (a root process on this host) copies it out with
 * pidfd_getfd() and asks again, and the thread closes its own copy. The
 * tracker then holds the only one, and registers the heap: the service
 * keeps no userfaultfd of its own, which CRIU could not dump.
 */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../tracking/track.h"
#include "preload.h"

/*
 * Tracking reports written pages at the size the heap is mapped with: on
 * a pool whose file system hands out 2 MiB pages (and on devdax), one
 * write marks 512 small pages written, and a random 1% of writes marks
 * nearly the whole heap, which the next snapshot then compares. So the
 * heap is mapped with small pages from the service's first snapshot on
 * (its daemon asks: tracking/tracker.c, cxlcr_track_small_pages_begin),
 * and from a tracker's start if it was snapshotted before: no more 2 MiB
 * mappings (MADV_NOHUGEPAGE), and the present ones dropped (zap: the data
 * stays in the pool; the first scan after either is a full round anyway).
 * Until then it keeps the 2 MiB ones, which cost less. The pool's own
 * pages stay as large as they are.
 */
void preload_small_pages(void *start, size_t len, bool zap)
{
	if (!len)
		return;
	preload_madvise(start, len, MADV_NOHUGEPAGE);
	if (zap)
		preload_madvise(start, len, MADV_DONTNEED);
}

/*
 * The other way (tracking/huge_again.c): once the heap is registered no
 * more (its write-protect markers gone with the registration), 2 MiB
 * pages are allowed again, and each 2 MiB range of the heap
 *   - whose pages are all in the pool is collapsed into one 2 MiB mapping
 *     (where the pool's page there is a 2 MiB one, the usual case,
 *     nothing is copied);
 *   - any other is dropped: its page table, empty of markers now, goes
 *     with its mappings (the kernel frees empty tables on MADV_DONTNEED),
 *     so that the pages the service touches there next can be mapped 2 MiB
 *     at a time; while a table is left, every fault maps 4 KiB. It is not
 *     collapsed: MADV_COLLAPSE would fill its holes (the memory release.c
 *     gave back) with zeros.
 */
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
void preload_huge_pages(void *start, size_t len)
{
	const size_t huge = 2u << 20;
	if (!len)
		return;
	preload_madvise(start, len, MADV_HUGEPAGE);
	unsigned char in[512];
	uintptr_t lo = ((uintptr_t)start + huge - 1) & ~(huge - 1), end = (uintptr_t)start + len;
	uintptr_t drop = 0; /* the start of a run of ranges to drop, or 0 */
	for (uintptr_t at = lo; at + huge <= end; at += huge) {
		size_t i = 0;
		if (mincore((void *)at, huge, in) == 0)
			while (i < sizeof(in) && (in[i] & 1))
				i++;
		if (i < sizeof(in)) {
			if (!drop)
				drop = at;
			continue;
		}
		if (drop)
			preload_madvise((void *)drop, at - drop, MADV_DONTNEED);
		drop = 0;
		preload_madvise((void *)at, huge, MADV_COLLAPSE);
	}
	if (drop)
		preload_madvise((void *)drop, ((end - lo) & ~(huge - 1)) + lo - drop, MADV_DONTNEED);
}

void preload_track_serve(struct cxlcr_arena_header *h)
{
	/* A tracker starts after every start and restore: a restored
	 * process's mark page has lost its MADV_WIPEONFORK (attach.c). */
	preload_arm_live_mark();
	int fd = __atomic_load_n(&h->track_fd, __ATOMIC_ACQUIRE);
	if (fd >= 0) {
		close(fd);
		fd = -1;
	} else {
		fd = cxlcr_track_make_uffd(); /* -1 on failure: the tracker sees none */
		if (fd >= 0 && __atomic_load_n(&h->track_small_pages, __ATOMIC_ACQUIRE)) {
			preload_small_pages((void *)cx.heap_lo, __atomic_load_n(&cx.grown, __ATOMIC_ACQUIRE), true);
			__atomic_store_n(&h->track_small_mapped, 1, __ATOMIC_RELEASE);
		}
	}
	__atomic_store_n(&h->track_fd, fd, __ATOMIC_RELEASE);
}
