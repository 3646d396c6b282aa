/*
 * Write tracking of an arena's heap: which pages a service wrote since the
 * last look, read and re-armed from outside in one call.
 *
 * The heap mapping is registered with a userfaultfd in asynchronous
 * write-protect mode (the service makes the userfaultfd on request, see
 * preload/track.c; a tracker process takes it over and holds it open,
 * tracker.c). Then PAGEMAP_SCAN on /proc/PID/pagemap lists the pages whose
 * write protection a write has lifted, and protects them again in the
 * same walk, so that a write racing with the scan is reported by this
 * scan or by the next, never lost.
 *
 * What the kernel does not see: writes by a fork() child of the service,
 * through another mapping, or with write(2) into the heap (none of these
 * happen in a service under the preload; fork children are counted in the
 * arena header, and a snapshot compares instead when one ran).
 */
#ifndef CXLCR_TRACK_H
#define CXLCR_TRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Written ranges [start, end) of addresses, ascending, not overlapping. */
struct cxlcr_written {
	struct cxlcr_range { uint64_t start, end; } *ranges;
	size_t count, cap;
	uint64_t bytes;
};

void cxlcr_written_free(struct cxlcr_written *w);
/* Appends [start, end), merging with the last range where they touch. A
 * scan appends in ascending order; ranges appended from elsewhere (what a
 * pre-copy left for the finish) may come in any order and overlap. */
int cxlcr_written_add(struct cxlcr_written *w, uint64_t start, uint64_t end);
/* A set saved into file of directory dirfd (checksummed), and added to w
 * from there: 0 (nothing added if there is no such file), -1 with one line
 * if it is not whole. */
int cxlcr_written_save(int dirfd, const char *file, const struct cxlcr_written *w);
int cxlcr_written_load(int dirfd, const char *file, struct cxlcr_written *w);

/* /proc/PID/pagemap of a service, opened for scans (-1 on error). */
int cxlcr_track_open(pid_t pid);

/* Appends to *w the written ranges of [lo, hi) since the last scan and
 * re-arms them. Returns 0; 1 if part of the range is not tracked (never
 * registered, or tracking was lost with its userfaultfd: the caller must
 * take every page as written, and the tracked parts were re-armed up to
 * there); -1 on error. */
int cxlcr_track_scan(int pagemap_fd, uint64_t lo, uint64_t hi, struct cxlcr_written *w);

/* Makes a userfaultfd for the heap [lo, hi) of the calling process, in
 * asynchronous write-protect mode (the preload, on request). */
int cxlcr_track_make_uffd(void);
/* Registers [lo, hi) of the userfaultfd's process for write tracking. */
int cxlcr_track_register(int uffd, uint64_t lo, uint64_t hi);

/* since.c: for a snapshot's draft and finish (common/snapshot.h). Before
 * the draft copy: re-arms the service's heap and says whether it is
 * tracked (and its fork_count then), for cxlcr_snapshot_draft_note(); with
 * base (the service's newest snapshot), also what was written since that
 * snapshot's finish, when that is known (*have_since_base), for an
 * incremental draft (cxlcr_snapshot_draft_on). In the freeze: what it
 * wrote since the draft (0), or 1 with why not. */
struct cxlcr_pool;
struct cxlcr_snapshot_header;
int cxlcr_track_before_draft(struct cxlcr_pool *pool, uint64_t arena_generation, pid_t pid,
			     const struct cxlcr_snapshot_header *base, bool *tracked, uint64_t *fork_count,
			     struct cxlcr_written *since_base, bool *have_since_base);
int cxlcr_track_since_draft(struct cxlcr_pool *pool, uint64_t arena_generation, pid_t pid, const char *draft,
			    struct cxlcr_written *w, const char **why);
/* In the freeze, for a snapshot copied whole there (no draft to finish):
 * re-arms the whole heap, so that the next snapshot knows what is written
 * after this one (cxlcr_snapshot_create_tracked). 0; 1 with why if writes
 * after the freeze could go unseen (not tracked, or a child process that
 * may write through its shared mapping); -1 on error. */
int cxlcr_track_rearm_in_freeze(struct cxlcr_pool *pool, uint64_t arena_generation, pid_t pid, const char **why);

/* zap_probe.c: whether this kernel keeps what tracking knows across a drop
 * of the heap's page tables (MADV_DONTNEED on shmem): a page protected
 * since the last scan comes back protected, every page written since
 * still reads as written, even when the kernel freed the page table that
 * held it. Measured once per process on a memfd. */
bool cxlcr_track_zap_keeps_writes(void);

/* Is write tracking on (unless CXLCR_WRITE_TRACKING=0)? See tracker.c. */
bool cxlcr_tracking_enabled(void);

/* Small pages (tracker.c): whether tracking maps the heap with 4 KiB pages
 * (unless CXLCR_TRACK_SMALL_PAGES=0), and, before each snapshot, the
 * switch to them in its arena header: 1 if the service has to remap its
 * heap now (its helper does on a shed request: preload/shed.c), 0 if it
 * has them already or does not want them, -1 on error. */
struct cxlcr_region;
bool cxlcr_track_small_pages_wanted(void);
int cxlcr_track_small_pages_begin(struct cxlcr_pool *pool, const struct cxlcr_region *arena);

/* Starts the tracker of a running service (tracker.c): a detached process
 * that takes its userfaultfd and keeps its heap registered until it ends. */
struct cxlcr_region;
int cxlcr_tracker_start(struct cxlcr_pool *pool, const struct cxlcr_region *arena);
/* Ends the arena's tracker, if it has one, and waits until it has: before
 * the arena is freed, as the tracker maps its header. */
int cxlcr_tracker_end(struct cxlcr_pool *pool, const struct cxlcr_region *arena);
/* Starts the tracker of a running service that has none (a migrate ends
 * its source's before the freeze, and a failed one resumes the source):
 * the tracker it has, if alive, keeps what it knows. */
int cxlcr_tracker_ensure(struct cxlcr_pool *pool, const struct cxlcr_region *arena);
/* A pidfd of the arena's tracker, if pid is it and alive; else -1. */
int cxlcr_tracker_pidfd(struct cxlcr_pool *pool, const struct cxlcr_region *arena, int pid);

/* Before a dump: makes sure the service holds no userfaultfd of tracking,
 * which CRIU cannot dump (a tracker's start, or a tracker ended half-way,
 * leaves one for a moment or for good). 0, or -1 with one line. */
int cxlcr_tracker_settle(struct cxlcr_pool *pool, const struct cxlcr_region *arena);

#endif
