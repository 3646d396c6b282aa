/*
 * Dump: what a checkpoint must know about the arenas of a task.
 *
 * CRIU saves a shared mapping of the pool as a file mapping and none of
 * its pages; the heap stays in the pool. What it cannot know is which
 * region of the pool the mapping is, and whose it is at this moment: the
 * region's generation (regions are never reused under the same one) and
 * its owner epoch. A restore needs both to refuse a checkpoint that the
 * arena has moved on from.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../common/record.h"
#include "../common/util.h"
#include "plugin.h"

static void fill_record(struct cxlcr_arena_record *rec, const struct cxlcr_pool *pool,
			const struct pool_id *id, const struct cxlcr_region *r,
			const struct pool_mapping *m, pid_t pid, pid_t nspid, bool leaves_running)
{
	memset(rec, 0, sizeof(*rec));
	memcpy(rec->pool_uuid, pool->sb->uuid, sizeof(rec->pool_uuid));
	rec->region_generation = r->generation;
	rec->region_offset = r->offset;
	rec->region_size = r->size;
	rec->region_kind = r->kind;
	rec->flags = (id->devdax ? CXLCR_RECORD_F_DEVDAX : 0) | (m->shared ? CXLCR_RECORD_F_SHARED : 0) |
		     (pool->dax_rules && !id->devdax ? CXLCR_RECORD_F_DAX_RULES : 0);
	memcpy(rec->region_name, r->name, sizeof(rec->region_name));
	rec->region_name[sizeof(rec->region_name) - 1] = 0;
	rec->map_address = m->start;
	rec->map_length = m->end - m->start;
	rec->map_pgoff = m->pgoff;
	rec->map_prot = m->prot;
	rec->owner_epoch = r->owner_epoch;
	rec->nspid = nspid;
	rec->real_pid = pid;
	rec->owner_pid = r->owner_pid;
	uint64_t start = 0;
	if (leaves_running && cxlcr_process_start(pid, &start)) {
		rec->flags |= CXLCR_RECORD_F_LIVE_SOURCE;
		rec->source_start = (uint32_t)start;
	}
	rec->dumped_ns = cxlcr_now_ns();
	cxlcr_copy_field(rec->host, sizeof(rec->host), cxlcr_host_name());
	cxlcr_copy_field(rec->pool_path, sizeof(rec->pool_path), id->path);
	cxlcr_arena_record_seal(rec);
}

/*
 * One record per region that a mapping covers. The kernel merges adjacent
 * mappings of one file whose offsets follow on, so a single VMA can hold
 * the pool's metadata and a region, or two neighbouring regions: it is cut
 * at region boundaries. The metadata area needs no record (a process that
 * has the pool open, like the cxlcr tools, maps it): it is re-created as
 * the file mapping it is. Pool memory that no live region holds cannot be
 * restored safely and fails the dump.
 */
static int build_records(struct cxlcr_pool *pool, const struct pool_id *id, pid_t pid,
			 pid_t nspid, const struct pool_mapping *maps, size_t n, bool leaves_running,
			 struct cxlcr_arena_record **recs)
{
	size_t count = 0, cap = 0;
	*recs = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct pool_mapping *m = &maps[i];
		uint64_t off = m->pgoff, end = m->pgoff + (m->end - m->start);
		if (off < CXLCR_DATA_OFFSET)
			off = end < CXLCR_DATA_OFFSET ? end : CXLCR_DATA_OFFSET;
		while (off < end) {
			struct cxlcr_region r;
			if (cxlcr_region_lookup(pool, off, 1, &r) < 0)
				return cxlcr_error("pid %d maps pool bytes %" PRIu64 "..%" PRIu64
						   " at 0x%" PRIx64 ", which no live region holds",
						   (int)pid, off, end, m->start + (off - m->pgoff));
			uint64_t stop = r.offset + r.size < end ? r.offset + r.size : end;
			struct pool_mapping piece = *m;
			piece.start = m->start + (off - m->pgoff);
			piece.end = piece.start + (stop - off);
			piece.pgoff = off;
			if (count == cap) {
				cap = cap ? cap * 2 : 4;
				struct cxlcr_arena_record *more = realloc(*recs, cap * sizeof(**recs));
				if (!more)
					return cxlcr_error("out of memory");
				*recs = more;
			}
			fill_record(&(*recs)[count++], pool, id, &r, &piece, pid, nspid, leaves_running);
			off = stop;
		}
	}
	return (int)count;
}

int dump_task_arenas(int dirfd, pid_t pid, const struct pool_id *id, bool leaves_running)
{
	struct pool_mapping *maps;
	size_t n;
	if (proc_pool_mappings(pid, id, &maps, &n) < 0)
		return -1;
	if (n == 0)
		return 0;

	int rc = -1;
	struct cxlcr_arena_record *recs = NULL;
	struct cxlcr_pool pool;
	pid_t nspid;
	if (proc_innermost_nspid(pid, &nspid) < 0)
		goto out;
	if (cxlcr_pool_open(&pool, id->path) < 0)
		goto out;
	if (memcmp(pool.sb->uuid, id->uuid, sizeof(id->uuid))) {
		cxlcr_error("pool %s was re-formatted during the dump", id->path);
		goto close;
	}
	rc = build_records(&pool, id, pid, nspid, maps, n, leaves_running, &recs);
	if (rc > 0) {
		char name[64];
		cxlcr_arena_record_name(name, sizeof(name), nspid);
		if (cxlcr_arena_records_write(dirfd, name, recs, (size_t)rc) < 0)
			rc = -1;
	}
close:
	cxlcr_pool_close(&pool);
out:
	free(recs);
	free(maps);
	return rc;
}

/* An image directory can be dumped into again. CRIU overwrites its own
 * images, but a record left from an earlier dump, of a task that no longer
 * maps the pool, would be taken for this checkpoint's: remove them all
 * before dumping. */
int dump_remove_old_records(int dirfd)
{
	DIR *d = cxlcr_image_dir_open(dirfd);
	if (!d)
		return -1;
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (strncmp(e->d_name, CXLCR_RECORD_FILE_PREFIX, strlen(CXLCR_RECORD_FILE_PREFIX)) ||
		    len < 4 || strcmp(e->d_name + len - 4, ".img"))
			continue;
		if (unlinkat(dirfd, e->d_name, 0) < 0 && errno != ENOENT)
			rc = cxlcr_error("cannot remove the old record %s: %s", e->d_name, strerror(errno));
	}
	closedir(d);
	return rc;
}
