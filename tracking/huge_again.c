/*
 * Back to 2 MiB mappings (`cxlcr huge-pages`, and a host's daemon after a
 * while without snapshots: idle.c).
 *
 * Exact tracking needs the heap mapped with 4 KiB pages, which a snapshot
 * asks for (tracker.c), and 4 KiB mappings cost a service that reads all
 * over a large heap in TLB misses: a 4 GiB Redis snapshotted once did 0.64
 * of the GETs it did before (docs/tracking.md). A service that is not
 * snapshotted again for a while gets its 2 MiB mappings back. The kernel
 * maps a 2 MiB page of a tracked heap only where no write-protect marker
 * is left, and MADV_COLLAPSE refuses a range registered for write
 * protection, so the heap is not registered for a moment:
 *   1. the scan count is bumped: what tracking reports from then on is
 *      not everything written since the newest snapshot, so its next draft
 *      compares the heap with it (since.c: not continuous);
 *   2. the registration is lifted (its markers and protection go with it);
 *   3. the service's helper maps the heap with 2 MiB pages (MADV_HUGEPAGE,
 *      then MADV_COLLAPSE where every page is in the pool: preload/shed.c),
 *      asked with CXLCR_TRACK_HUGE_AGAIN and a shed request (the caller's);
 *   4. the heap is registered again, whatever 3 did: tracking goes on, at
 *      2 MiB, until the next snapshot asks for small pages again.
 * The caller holds the service's lease: no snapshot, point or dump runs
 * meanwhile. One killed between 2 and 4 leaves the heap unregistered:
 * scans then say it is not tracked, and snapshots compare, as they do
 * when a tracker dies.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "huge_again.h"
#include "uapi.h"

/* Is fd a userfaultfd? (the number the tracker left may be stale) */
static bool is_uffd(int fd)
{
	char path[64], target[64] = "";
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	return n > 0 && strstr(target, "userfaultfd") != NULL;
}

/* The tracker's userfaultfd, copied out of it; -1 with one line. */
static int tracker_uffd(struct cxlcr_pool *pool, const struct cxlcr_region *arena,
			const struct cxlcr_arena_header *h)
{
	int pidfd = cxlcr_tracker_pidfd(pool, arena, __atomic_load_n(&h->tracker_pid, __ATOMIC_ACQUIRE));
	if (pidfd < 0)
		return cxlcr_error("%s has no live tracker", arena->name);
	int theirs = __atomic_load_n(&h->tracker_uffd, __ATOMIC_ACQUIRE) - 1;
	int uffd = theirs >= 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, theirs, 0) : -1;
	int e = errno;
	close(pidfd);
	if (uffd < 0)
		return cxlcr_error("%s: cannot take its tracker's userfaultfd: %s", arena->name,
				   theirs < 0 ? "it has recorded none" : strerror(e));
	if (!is_uffd(uffd)) {
		close(uffd);
		return cxlcr_error("%s: its tracker's fd %d is not a userfaultfd", arena->name, theirs);
	}
	return uffd;
}

/* Lifts (or makes again) the registration of the first count extents. */
static int set_registered(int uffd, const struct cxlcr_arena_header *h, uint32_t count, bool on)
{
	int rc = 0;
	for (uint32_t i = 0; i < count; i++) {
		uint64_t lo = h->heap_address + h->extents[i].heap_offset;
		if (on) {
			if (cxlcr_track_register(uffd, lo, lo + h->extents[i].size) < 0)
				rc = -1;
			continue;
		}
		struct uffdio_range r = { .start = lo, .len = h->extents[i].size };
		if (ioctl(uffd, UFFDIO_UNREGISTER, &r) < 0)
			return cxlcr_error("userfaultfd: cannot unregister %#llx-%#llx: %s", (unsigned long long)lo,
					   (unsigned long long)(lo + r.len), strerror(errno));
	}
	return rc;
}

int cxlcr_track_huge_begin(struct cxlcr_pool *pool, const struct cxlcr_region *arena, struct cxlcr_huge_again *g,
			   const char **why)
{
	*g = (struct cxlcr_huge_again){ .uffd = -1 };
	*why = NULL;
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, arena->offset, sizeof(*h), 0, 0);
	if (!h)
		return -1;
	cxlcr_refresh(h, sizeof(*h));
	if (h->magic != CXLCR_ARENA_MAGIC || h->region_generation != arena->generation)
		*why = "its arena header is not its own";
	else if (!__atomic_load_n(&h->tracked, __ATOMIC_ACQUIRE))
		*why = "it is not tracked (its heap keeps the mappings it has)";
	else if (!__atomic_load_n(&h->track_small_mapped, __ATOMIC_ACQUIRE))
		*why = "its heap is mapped with 2 MiB pages already";
	if (*why) {
		munmap(h, sizeof(*h));
		return 1;
	}
	int uffd = tracker_uffd(pool, arena, h);
	if (uffd < 0) {
		munmap(h, sizeof(*h));
		return -1;
	}
	/* Step 1, before anything goes untracked. */
	__atomic_add_fetch(&h->scan_count, 1, __ATOMIC_SEQ_CST);
	cxlcr_publish(&h->scan_count, sizeof(h->scan_count));
	__atomic_store_n(&h->track_small_pages, CXLCR_TRACK_HUGE_AGAIN, __ATOMIC_SEQ_CST);
	cxlcr_publish(&h->track_small_pages, sizeof(h->track_small_pages));
	uint32_t count = __atomic_load_n(&h->extent_count, __ATOMIC_ACQUIRE);
	if (count > CXLCR_ARENA_EXTENTS_MAX)
		count = CXLCR_ARENA_EXTENTS_MAX;
	/* Step 2. A failure half-way registers back what it had lifted. */
	if (set_registered(uffd, h, count, false) < 0) {
		set_registered(uffd, h, count, true);
		__atomic_store_n(&h->track_small_pages, 1, __ATOMIC_SEQ_CST);
		close(uffd);
		munmap(h, sizeof(*h));
		return -1;
	}
	g->header = h;
	g->uffd = uffd;
	g->extents = count;
	return 0;
}

int cxlcr_track_huge_end(struct cxlcr_huge_again *g)
{
	struct cxlcr_arena_header *h = g->header;
	int rc = set_registered(g->uffd, h, g->extents, true);
	close(g->uffd);
	/* A helper that did not answer leaves the flag to the next snapshot,
	 * which asks for small pages anyway. */
	bool done = !__atomic_load_n(&h->track_small_mapped, __ATOMIC_ACQUIRE);
	munmap(h, sizeof(*h));
	*g = (struct cxlcr_huge_again){ .uffd = -1 };
	if (rc < 0)
		return -1;
	if (!done)
		return cxlcr_error("the service's helper did not map its heap with 2 MiB pages (see its log)");
	return 0;
}
