/*
 * Remote fork, the plugin's part: a snapshot taken while CRIU holds the
 * parent frozen, and the checks a fork child's restore needs.
 *
 * The child's memory (non-heap) comes from the same dump as the snapshot of
 * its heap, so both must be of one freeze point: the snapshot is begun in
 * CHECKPOINT_DEVICES, when CRIU has frozen every task of the tree, and is
 * whole before CRIU lets them go (criu dump --leave-running; the plugin's
 * exit hook waits for it, fork_snapshot_end()). The daemon asks for
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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/pool.h"
#include "../common/record.h"
#include "../common/snapshot.h"
#include "../tracking/track.h"
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

/* The snapshot itself, in the thread of fork_snapshot_begin() (below). */
static int fork_snapshot_task(int dirfd, pid_t pid, const struct pool_id *id, const char *name)
{
	pid_t nspid;
	uint64_t arena;
	if (proc_innermost_nspid(pid, &nspid) < 0 || task_arena(dirfd, nspid, &arena) < 0)
		return -1;
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, id->path) < 0)
		return -1;
	/* The daemon copied the heap while the service ran (a draft): here it
	 * is only brought up to date, unless it cannot be (then afresh). With
	 * write tracking, only the pages written since the draft are copied
	 * again; without, every page is compared with the draft. */
	struct cxlcr_snapshot_info info;
	int rc = 1, t = 1;
	const char *untracked = "no draft";
	struct cxlcr_region draft;
	bool drafted = cxlcr_region_find(&pool, CXLCR_KIND_SNAPSHOT, name, &draft);
	if (drafted) {
		uint64_t generation = draft.generation;
		struct cxlcr_written written = { 0 };
		t = cxlcr_track_since_draft(&pool, arena, pid, name, &written, &untracked);
		if (t < 0)
			untracked = "its write tracking could not be read";
		/* What the daemon's pre-copy found written and could not bring
		 * up to date in the draft (its room ran out): written too, for
		 * no scan reports it again. Unreadable, it is all compared. */
		if (t == 0 && cxlcr_written_load(dirfd, CXLCR_WRITTEN_PENDING_FILE, &written) < 0) {
			t = 1;
			untracked = "the writes a pre-copy left to the finish could not be read";
		}
		unlinkat(dirfd, CXLCR_WRITTEN_PENDING_FILE, 0);
		/* Unsealed: the seal reads only the snapshot's own region, and
		 * the daemon makes it once CRIU has let the service go on
		 * (cxlcr_snapshot_seal(), snapshot.h). */
		rc = cxlcr_snapshot_finish_unsealed(&pool, arena, name, t == 0 ? &written : NULL, &info);
		cxlcr_written_free(&written);
		if (rc != 0) {
			cxlcr_snapshot_region_free(&pool, generation); /* and the draft's holds on its bases */
			untracked = "a page the draft shares or has as zero changed, and the draft has no room for it";
		} else if (t == 0) {
			untracked = info.compared_because; /* NULL: only written and logged pages were looked at */
		}
	}
	/* A recovery point whose draft could not be finished copies no whole
	 * heap while the service is frozen (seconds at 1 GiB): it fails, the
	 * service goes on at once, and the next point is taken at its time
	 * (recovery/points.c). (Without a draft at all, it is copied afresh.) */
	if (rc != 0 && drafted && getenv(CXLCR_SNAPSHOT_DRAFT_ONLY_ENV)) {
		cxlcr_pool_close(&pool);
		return cxlcr_error("recovery point %s not taken: its draft could not be brought up to date in the freeze "
				   "(%s), and a whole copy of the heap in it is not made for a point", name, untracked);
	}
	/* Afresh: the daemon's scan before its draft (if it made one) re-armed
	 * the heap, so this snapshot must note a scan of its own, else the
	 * next one could not be incremental on it (session 7 saw every fork
	 * whose full snapshot had no room for a draft turn the next one full). */
	if (rc != 0) {
		const char *why;
		if (t != 0)
			t = cxlcr_track_rearm_in_freeze(&pool, arena, pid, &why);
		rc = t == 0 ? cxlcr_snapshot_create_tracked(&pool, arena, name, &info)
			    : cxlcr_snapshot_create(&pool, arena, name, &info);
	}
	cxlcr_pool_close(&pool);
	if (rc < 0)
		return -1;
	/* What the daemon reports; the snapshot itself is found by name. */
	int fd = openat(dirfd, CXLCR_SNAPSHOT_INFO_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return cxlcr_error("cannot write %s: %s", CXLCR_SNAPSHOT_INFO_FILE, strerror(errno));
	dprintf(fd,
		"generation %" PRIu64 "\npages_cxl %" PRIu64 "\npages_zero %" PRIu64 "\npages_refreshed %" PRIu64
		"\npages_written %" PRIu64 "\nscan_ns %" PRIu64 "\ncopy_ns %" PRIu64 "\ntotal_ns %" PRIu64
		"\ntracked %d\npages_own %" PRIu64 "\nbases %u\nwritten_ns %" PRIu64 "\nholes_ns %" PRIu64
		"\npublish_ns %" PRIu64 "\npunches_logged %u\nuntracked_because %s\n",
		info.region_generation, info.pages_cxl, info.pages_zero, info.pages_refreshed, info.pages_written,
		info.scan_ns, info.copy_ns, info.total_ns, untracked == NULL, info.pages_own, info.base_count,
		info.written_ns, info.holes_ns, info.publish_ns, info.punches_logged, untracked ? untracked : "-");
	close(fd);
	return 0;
}

/*
 * The snapshot beside CRIU's dump. CHECKPOINT_DEVICES runs as soon as CRIU
 * has frozen the tree, before it reads each task's smaps and walks its page
 * tables for guard regions; the snapshot's scan, which reads and re-arms
 * write tracking, is a third walk of the heap's page tables. Each costs
 * about a millisecond per GiB of heap here (a CRIU -v4 log of a 1 GiB
 * Redis: 1.1 ms ours, 1.0 ms smaps, 1.3 ms the guard scan), which made a
 * 4 GiB heap's freeze three times a small one's. The snapshot needs the
 * tasks frozen, not CRIU: so it runs on another CPU while CRIU goes on,
 * and the plugin's exit hook, which CRIU calls before it lets the tasks
 * run again (a failed dump too), waits for it.
 *
 * The thread writes nothing to CRIU's log (which is not thread-safe), and
 * blocks every signal: CRIU's handlers are its main thread's business.
 * It works on its own copy of the image directory's descriptor.
 */
static struct {
	pthread_t thread;
	bool pending;  /* begun, not yet ended */
	bool threaded; /* thread runs it; else rc is already known */
	int dirfd;
	pid_t pid;
	struct pool_id id;
	char name[CXLCR_NAME_MAX];
	int rc;
	char error[CXLCR_ERROR_MAX];
	uint64_t begun_ns, done_ns;
} job;

static void *snapshot_main(void *arg)
{
	(void)arg;
	job.rc = fork_snapshot_task(job.dirfd, job.pid, &job.id, job.name);
	if (job.rc < 0)
		snprintf(job.error, sizeof(job.error), "%s", cxlcr_last_error());
	job.done_ns = cxlcr_mono_ns();
	return NULL;
}

int fork_snapshot_begin(int dirfd, pid_t pid, const struct pool_id *id, const char *name)
{
	if (job.pending)
		return cxlcr_error("a snapshot is already being taken in this dump");
	memset(&job, 0, sizeof(job));
	job.dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (job.dirfd < 0)
		return cxlcr_error("cannot duplicate the image directory's descriptor: %s", strerror(errno));
	job.pid = pid;
	job.id = *id;
	cxlcr_copy_field(job.name, sizeof(job.name), name);
	job.pending = true;
	job.begun_ns = cxlcr_mono_ns();
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	job.threaded = pthread_create(&job.thread, NULL, snapshot_main, NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!job.threaded)
		snapshot_main(NULL); /* no thread: in the freeze, as before */
	return 0;
}

int fork_snapshot_end(uint64_t *took_ns, uint64_t *waited_ns)
{
	*took_ns = *waited_ns = 0;
	if (!job.pending)
		return 0;
	uint64_t wait_ns = cxlcr_mono_ns();
	if (job.threaded)
		pthread_join(job.thread, NULL);
	job.pending = false;
	*took_ns = job.done_ns - job.begun_ns;
	*waited_ns = job.done_ns > wait_ns ? job.done_ns - wait_ns : 0;
	if (job.rc == 0) {
		/* The freeze's account (snapshot --json): the snapshot's time,
		 * and how much of it the tasks' resume waited for. */
		int fd = openat(job.dirfd, CXLCR_SNAPSHOT_INFO_FILE, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (fd >= 0) {
			dprintf(fd, "beside_ns %" PRIu64 "\nwaited_ns %" PRIu64 "\n", *took_ns, *waited_ns);
			close(fd);
		}
	} else {
		/* For the daemon, whose CRIU may have finished the dump. */
		int fd = openat(job.dirfd, CXLCR_SNAPSHOT_ERROR_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dprintf(fd, "%s\n", job.error);
			close(fd);
		}
	}
	close(job.dirfd);
	return job.rc < 0 ? cxlcr_error("%s", job.error) : 0;
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
	/* Its header and runs, what the child is made of: as cheap for any
	 * heap size (the leaf table was checked when it was published). */
	struct cxlcr_snapshot s;
	if (cxlcr_snapshot_open(pool, rec->region_generation, &s) < 0)
		return cxlcr_error("fork of %s: %s", rec->region_name, cxlcr_last_error());
	cxlcr_snapshot_close(&s);
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
