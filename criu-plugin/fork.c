/*
 * Remote fork, the plugin's part: a snapshot taken while CRIU holds the
 * parent frozen, and the checks a fork child's restore needs.
 *
 * The child's memory (non-heap) comes from the same dump as the snapshot of
 * its heap, so both must be of one freeze point: the snapshot is taken in
 * CHECKPOINT_DEVICES, when CRIU has frozen every task of the tree and
 * before it lets them go (criu dump --leave-running). The daemon asks for
 * it by setting $CXLCR_SNAPSHOT_NAME in criu's environment.
 *
 * A child is restored from a rebased image set (rebase/): its records are
 * fork records (CXLCR_RECORD_F_FORK) naming the snapshot instead of the
 * arena. They take nothing over (the parent keeps its arena); they must
 * name a whole snapshot of this pool, and the child borrows that snapshot
 * from the catalog for as long as it lives (the borrow is recorded for the
 * child's pid, so the reaper ends it when the child is gone).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/pool.h"
#include "../common/record.h"
#include "../common/snapshot.h"
#include "../common/util.h"
#include "plugin.h"

/* The arena that the task's records name, as a region generation. */
static int task_arena(int dirfd, pid_t nspid, uint64_t *generation)
{
	char name[64];
	struct cxlcr_arena_record *recs;
	ssize_t n = cxlcr_arena_records_read(dirfd, cxlcr_arena_record_name(name, sizeof(name), nspid), &recs);
	if (n < 0)
		return -1;
	*generation = 0;
	for (ssize_t i = 0; i < n && !*generation; i++)
		if (recs[i].region_kind == CXLCR_KIND_ARENA)
			*generation = recs[i].region_generation;
	if (n > 0)
		free(recs);
	return *generation ? 0 : cxlcr_error("pid %d maps no arena", (int)nspid);
}

int fork_snapshot_task(int dirfd, pid_t pid, const struct pool_id *id, const char *name)
{
	pid_t nspid;
	uint64_t arena;
	if (proc_innermost_nspid(pid, &nspid) < 0 || task_arena(dirfd, nspid, &arena) < 0)
		return -1;
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, id->path) < 0)
		return -1;
	/* The daemon copied the heap while the service ran (a draft): here it
	 * is only brought up to date, unless it cannot be (then afresh). */
	struct cxlcr_snapshot_info info;
	int rc = 1;
	struct cxlcr_region *draft = cxlcr_region_find(&pool, CXLCR_KIND_SNAPSHOT, name);
	if (draft) {
		uint64_t generation = draft->generation;
		rc = cxlcr_snapshot_finish(&pool, arena, name, &info);
		if (rc != 0)
			cxlcr_region_free(&pool, generation);
	}
	if (rc != 0)
		rc = cxlcr_snapshot_create(&pool, arena, name, &info);
	cxlcr_pool_close(&pool);
	if (rc < 0)
		return -1;
	/* What the daemon reports; the snapshot itself is found by name. */
	int fd = openat(dirfd, CXLCR_SNAPSHOT_INFO_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return cxlcr_error("cannot write %s: %s", CXLCR_SNAPSHOT_INFO_FILE, strerror(errno));
	dprintf(fd,
		"generation %" PRIu64 "\npages_cxl %" PRIu64 "\npages_zero %" PRIu64 "\npages_refreshed %" PRIu64
		"\nscan_ns %" PRIu64 "\ncopy_ns %" PRIu64 "\ntotal_ns %" PRIu64 "\n",
		info.region_generation, info.pages_cxl, info.pages_zero, info.pages_refreshed, info.scan_ns,
		info.copy_ns, info.total_ns);
	close(fd);
	return 0;
}

int fork_check_record(struct cxlcr_pool *pool, const struct cxlcr_arena_record *rec)
{
	char want[40], have[40];
	if (memcmp(rec->pool_uuid, pool->sb->uuid, sizeof(rec->pool_uuid)))
		return cxlcr_error("fork of %s: record is from another pool (uuid %s; pool %s is %s)",
				   rec->region_name, cxlcr_uuid_str(rec->pool_uuid, want), pool->path,
				   cxlcr_uuid_str(pool->sb->uuid, have));
	if (rec->region_kind != CXLCR_KIND_SNAPSHOT)
		return cxlcr_error("fork of %s: the record names a region of kind %u, not a snapshot",
				   rec->region_name, rec->region_kind);
	if (cxlcr_snapshot_validate(pool, rec->region_generation) < 0)
		return cxlcr_error("fork of %s: %s", rec->region_name, cxlcr_last_error());
	return 0;
}

/* The catalog entry that holds the snapshot with this region generation. */
static int find_entry(struct cxlcr_pool *pool, uint64_t snapshot_generation, struct cxlcr_borrow *b)
{
	for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES; i++) {
		struct cxlcr_catalog_info info;
		if (cxlcr_catalog_entry(pool, i, &info) < 0)
			return -1;
		if (info.state != CXLCR_CATALOG_PUBLISHED || info.snapshot_generation != snapshot_generation)
			continue;
		memset(b, 0, sizeof(*b));
		b->entry = i;
		b->generation = info.generation;
		b->snapshot_generation = snapshot_generation;
		memcpy(b->name, info.name, sizeof(b->name));
		return 0;
	}
	return cxlcr_error("snapshot %" PRIu64 " is not published in the catalog (taken back?)",
			   snapshot_generation);
}

int fork_borrow_for(struct cxlcr_pool *pool, pid_t pid, const struct cxlcr_arena_record *rec)
{
	struct cxlcr_borrow b;
	struct cxlcr_borrower who = { .pid = pid };
	/* The snapshot itself was checked whole before the restore began
	 * (fork_check_record); a published catalog entry for it means it was
	 * not freed since. */
	if (memcmp(rec->pool_uuid, pool->sb->uuid, sizeof(rec->pool_uuid)) ||
	    rec->region_kind != CXLCR_KIND_SNAPSHOT)
		return fork_check_record(pool, rec);
	if (find_entry(pool, rec->region_generation, &b) < 0)
		return -1;
	if (cxlcr_catalog_borrow_confirm(pool, &who, &b) < 0)
		return cxlcr_error("fork of %s: cannot borrow snapshot '%s': %s", rec->region_name, b.name,
				   cxlcr_last_error());
	return 0;
}

/* The changed-pages list of the dump (CXLCR_CHANGED_PAGES_FILE), checked. */
static int read_changed_pages(int dirfd, struct cxlcr_changed_pages *h, uint64_t **pages)
{
	*pages = NULL;
	int fd = openat(dirfd, CXLCR_CHANGED_PAGES_FILE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : cxlcr_error("%s: %s", CXLCR_CHANGED_PAGES_FILE, strerror(errno));
	struct stat st;
	int rc = -1;
	if (fstat(fd, &st) < 0 || read(fd, h, sizeof(*h)) != (ssize_t)sizeof(*h) ||
	    h->magic != CXLCR_CHANGED_PAGES_MAGIC || h->version != 1 ||
	    h->page_size != CXLCR_SNAPSHOT_PAGE_SIZE || h->count > (1ull << 36) ||
	    (uint64_t)st.st_size != sizeof(*h) + h->count * sizeof(uint64_t)) {
		cxlcr_error("%s is not a changed-pages list (or is truncated)", CXLCR_CHANGED_PAGES_FILE);
		goto out;
	}
	*pages = malloc(h->count ? h->count * sizeof(uint64_t) : 1);
	if (!*pages) {
		cxlcr_error("out of memory");
		goto out;
	}
	size_t want = h->count * sizeof(uint64_t);
	if (read(fd, *pages, want) != (ssize_t)want) {
		free(*pages);
		*pages = NULL;
		cxlcr_error("%s is truncated", CXLCR_CHANGED_PAGES_FILE);
		goto out;
	}
	rc = 1;
out:
	close(fd);
	return rc;
}

/* The snapshot a fork child's records name, mapped read-only. */
static int map_child_snapshot(int dirfd, pid_t pid, const char *pool_path, struct cxlcr_pool *pool,
			      struct cxlcr_region *r, const uint8_t **map)
{
	pid_t nspid;
	char name[64];
	struct cxlcr_arena_record *recs;
	if (proc_innermost_nspid(pid, &nspid) < 0)
		return -1;
	ssize_t n = cxlcr_arena_records_read(dirfd, cxlcr_arena_record_name(name, sizeof(name), nspid), &recs);
	if (n <= 0)
		return n < 0 ? -1 : cxlcr_error("pid %d has no fork record", (int)pid);
	uint64_t generation = 0;
	for (ssize_t i = 0; i < n && !generation; i++)
		if (recs[i].flags & CXLCR_RECORD_F_FORK)
			generation = recs[i].region_generation;
	free(recs);
	if (!generation)
		return cxlcr_error("pid %d has no fork record", (int)pid);
	if (cxlcr_pool_open(pool, pool_path) < 0)
		return -1;
	if (cxlcr_region_get(pool, generation, r) < 0 ||
	    !(*map = cxlcr_pool_map(pool, r->offset, r->size, 0, 0))) {
		cxlcr_pool_close(pool);
		return -1;
	}
	return 0;
}

/*
 * The pages the parent wrote between its last two snapshots are likely to
 * be written by a child too (CXLfork): each is made the child's own now,
 * rather than by one copy-on-write fault at a time later. This runs before
 * the child's tasks resume, so nothing the child writes can be overwritten.
 * The pages are written from the snapshot (what the child holds), runs of
 * them at a time, so that each costs one copy-on-write fault and no read.
 * What it did goes into CXLCR_PREFETCH_INFO_FILE.
 */
int fork_prefetch(int dirfd, pid_t pid, const char *pool_path)
{
	struct cxlcr_changed_pages h;
	uint64_t *pages;
	int rc = read_changed_pages(dirfd, &h, &pages);
	if (rc <= 0)
		return rc;
	uint64_t t0 = cxlcr_mono_ns();
	struct cxlcr_pool pool;
	struct cxlcr_region r;
	const uint8_t *snap = NULL;
	if (map_child_snapshot(dirfd, pid, pool_path, &pool, &r, &snap) < 0) {
		free(pages);
		return -1;
	}
	const uint64_t *leaves = (const void *)(snap + CXLCR_SNAPSHOT_TABLE_OFFSET);
	uint64_t page_count = (r.size - CXLCR_SNAPSHOT_TABLE_OFFSET) / sizeof(uint64_t), done = 0;
	enum { IOV = 512 };
	struct iovec local[IOV], remote[IOV];
	int n = 0;
	rc = 0;
	for (uint64_t i = 0; i <= h.count && rc == 0; i++) {
		bool flush = i == h.count || n == IOV;
		if (flush && n) {
			size_t len = 0;
			for (int k = 0; k < n; k++)
				len += local[k].iov_len;
			if (process_vm_writev(pid, local, (unsigned long)n, remote, (unsigned long)n, 0) != (ssize_t)len)
				rc = cxlcr_error("pid %d: cannot prefetch %zu bytes: %s", (int)pid, len, strerror(errno));
			n = 0;
		}
		if (i == h.count || rc)
			break;
		uint64_t leaf = pages[i] < page_count ? leaves[pages[i]] : 0;
		if (CXLCR_LEAF_TIER(leaf) != CXLCR_TIER_CXL)
			continue;  /* zero in the snapshot: nothing to copy */
		const uint8_t *from = snap + (CXLCR_LEAF_OFFSET(leaf) - r.offset);
		uint64_t to = h.heap_address + pages[i] * CXLCR_SNAPSHOT_PAGE_SIZE;
		if (n && (const uint8_t *)local[n - 1].iov_base + local[n - 1].iov_len == from &&
		    (uint64_t)(uintptr_t)remote[n - 1].iov_base + remote[n - 1].iov_len == to) {
			local[n - 1].iov_len += CXLCR_SNAPSHOT_PAGE_SIZE;
			remote[n - 1].iov_len += CXLCR_SNAPSHOT_PAGE_SIZE;
		} else {
			local[n] = (struct iovec){ (void *)(uintptr_t)from, CXLCR_SNAPSHOT_PAGE_SIZE };
			remote[n] = (struct iovec){ (void *)(uintptr_t)to, CXLCR_SNAPSHOT_PAGE_SIZE };
			n++;
		}
		done++;
	}
	munmap((void *)(uintptr_t)snap, r.size);
	cxlcr_pool_close(&pool);
	free(pages);
	if (rc < 0)
		return -1;
	int fd = openat(dirfd, CXLCR_PREFETCH_INFO_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		dprintf(fd, "pages %" PRIu64 "\nns %" PRIu64 "\n", done, cxlcr_mono_ns() - t0);
		close(fd);
	}
	return (int)(done > INT32_MAX ? INT32_MAX : done);
}
