/*
 * Write tracking for snapshots: what a service wrote between a snapshot's
 * draft (copied while it runs) and its finish (in the freeze), so that the
 * finish copies only that instead of comparing the whole heap.
 *
 * It is trusted only when nothing the kernel does not track can have
 * written the heap in between: the service was tracked at the draft and
 * still is (a scan of the whole heap succeeds), and it made no fork()
 * child since (the preload counts them in the arena header) and has none
 * now (a child made earlier could still write through its shared mapping).
 * Otherwise the finish compares, and the snapshot says why.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/snapshot.h"
#include "track.h"

/* The arena header of the region with this generation, mapped. */
static struct cxlcr_arena_header *map_header(struct cxlcr_pool *pool, uint64_t generation)
{
	struct cxlcr_region r;
	if (cxlcr_region_get(pool, generation, &r) < 0)
		return NULL;
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, r.offset, sizeof(*h), 0, 0);
	if (h)
		cxlcr_refresh(h, sizeof(*h));
	return h;
}

/* Scans (and re-arms) the whole heap of pid into w: 0, 1 if not tracked.
 * Every scan is counted in the arena header first: what it reports is
 * gone for the next one, so a snapshot that wants the writes since an
 * earlier snapshot's scan checks that no scan came in between. */
static int scan_heap(pid_t pid, struct cxlcr_arena_header *h, struct cxlcr_written *w)
{
	int fd = cxlcr_track_open(pid);
	if (fd < 0)
		return -1;
	__atomic_add_fetch(&h->scan_count, 1, __ATOMIC_SEQ_CST);
	cxlcr_publish(&h->scan_count, sizeof(h->scan_count));
	uint64_t lo = h->heap_address, hi = lo + __atomic_load_n(&h->heap_size, __ATOMIC_ACQUIRE);
	int rc = cxlcr_track_scan(fd, lo, hi, w);
	close(fd);
	return rc;
}

/* Has pid a child process now? (/proc/PID/task/TID/children, every thread) */
static bool has_children(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return true; /* cannot tell: assume so */
	bool any = false;
	struct dirent *e;
	while (!any && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char file[320], buf[16];
		snprintf(file, sizeof(file), "/proc/%d/task/%s/children", (int)pid, e->d_name);
		FILE *f = fopen(file, "re");
		if (!f)
			continue;
		any = fgets(buf, sizeof(buf), f) != NULL && buf[0] >= '0' && buf[0] <= '9';
		fclose(f);
	}
	closedir(d);
	return any;
}

int cxlcr_track_before_draft(struct cxlcr_pool *pool, uint64_t arena_generation, pid_t pid,
			     const struct cxlcr_snapshot_header *base, bool *tracked, uint64_t *fork_count,
			     struct cxlcr_written *since_base, bool *have_since_base)
{
	*tracked = false;
	if (have_since_base)
		*have_since_base = false;
	struct cxlcr_arena_header *h = map_header(pool, arena_generation);
	if (!h)
		return -1;
	*fork_count = __atomic_load_n(&h->fork_count, __ATOMIC_ACQUIRE);
	/* The scan below reports what was written since the base's finish
	 * only if that finish's scan was the last one, nothing untracked
	 * (a fork child) ran since, and it is the same arena. */
	bool continuous = base && since_base && base->track_scans &&
			  base->arena_generation == arena_generation &&
			  __atomic_load_n(&h->scan_count, __ATOMIC_ACQUIRE) == base->track_scans &&
			  *fork_count == base->track_fork_count && !has_children(pid);
	struct cxlcr_written w = { 0 };
	*tracked = __atomic_load_n(&h->tracked, __ATOMIC_ACQUIRE) && scan_heap(pid, h, &w) == 0;
	if (continuous && *tracked) {
		*since_base = w;
		*have_since_base = true;
	} else {
		cxlcr_written_free(&w);
	}
	munmap(h, sizeof(*h));
	return 0;
}

int cxlcr_track_since_draft(struct cxlcr_pool *pool, uint64_t arena_generation, pid_t pid, const char *draft,
			    struct cxlcr_written *w, const char **why)
{
	bool tracked;
	uint64_t forks;
	*why = NULL;
	if (cxlcr_snapshot_draft_notes(pool, draft, &tracked, &forks) < 0)
		return -1;
	if (!tracked) {
		*why = "the service was not tracked when the draft was copied";
		return 1;
	}
	struct cxlcr_arena_header *h = map_header(pool, arena_generation);
	if (!h)
		return -1;
	int rc = 1;
	if (__atomic_load_n(&h->fork_count, __ATOMIC_ACQUIRE) != forks)
		*why = "the service forked a child since the draft (its writes are not tracked)";
	else if (has_children(pid))
		*why = "the service has child processes (their writes are not tracked)";
	else if ((rc = scan_heap(pid, h, w)) == 1)
		*why = "tracking was lost (its tracker ended)";
	munmap(h, sizeof(*h));
	return rc;
}

int cxlcr_track_rearm_in_freeze(struct cxlcr_pool *pool, uint64_t arena_generation, pid_t pid, const char **why)
{
	*why = NULL;
	struct cxlcr_arena_header *h = map_header(pool, arena_generation);
	if (!h)
		return -1;
	struct cxlcr_written w = { 0 };
	int rc = 1;
	if (!__atomic_load_n(&h->tracked, __ATOMIC_ACQUIRE))
		*why = "the service is not tracked";
	else if (has_children(pid))
		*why = "the service has child processes (their writes are not tracked)";
	else if ((rc = scan_heap(pid, h, &w)) == 1)
		*why = "tracking was lost (its tracker ended)";
	cxlcr_written_free(&w);
	munmap(h, sizeof(*h));
	return rc;
}
