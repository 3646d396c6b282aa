/*
 * Recovery: a host that is failing hands its services off (drain.c), on an
 * operator's request or when its kernel's log says so (kmsg.c).
 */
#ifndef CXLCR_RECOVERY_H
#define CXLCR_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "../common/pool.h"
#include "../rebase/rebase.h"

#define DRAIN_MAX 256

struct drain_report {
	uint32_t count, moved, failed, skipped;
	uint32_t handed_over;        /* left to the hard-crash path: the bound ran out */
	struct drain_item {
		char name[CXLCR_NAME_MAX];
		char to[CXLCR_HOST_MAX];
		bool moved;
		double ms;
		char why[256];       /* why it was not moved */
	} items[DRAIN_MAX];
};

/* Migrates every running service of host to the pod's other registered
 * hosts in turn (or all to only_to); fork children stay. 0 with what
 * happened to each in *r (a service that could not move runs on where it
 * was), -1 if there is nowhere to go. With a bound (ns, 0: none), a drain
 * still under way when it runs out hands the rest over to the hard-crash
 * path: it writes host's tombstone (reason handoff), so that another host
 * fences it at once and brings the services not moved back from their
 * recovery points (recovery/takeover.c). */
int drain_host(struct cxlcr_pool *pool, const char *host, const char *only_to, uint64_t bound_ns,
	       struct drain_report *r);
/* The bound of a drain the kernel log triggers: $CXLCR_DRAIN_BOUND_MS, or this. */
#define DRAIN_BOUND_DEFAULT_MS 10000

/* `cxlcr host drain HOST [--to HOST2] [--json]`. */
int cmd_host(int argc, char **argv);

/* The trigger a kernel-log record ("PRIORITY,SEQ,TIME,FLAGS;MESSAGE") is,
 * or NULL: kernel facility only, and one of the failures kmsg.c lists. */
const char *kmsg_trigger(const char *record);

/* Forks the watcher of the kernel log at path (nothing if path is NULL or
 * empty), which drains host on a trigger, says so through log (the
 * daemon's, with syslog priorities) and dies with its parent. */
typedef void (*kmsg_log_fn)(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int kmsg_watch_start(const char *path, const char *host, kmsg_log_fn log);

/* After each registration in the host table: tells the panic tombstone's
 * kernel module (kernel/) where this host's entry is, on a devdax pool
 * (nothing on a pool file), and arms it; says what it did through log. */
void tombstone_arm(struct cxlcr_pool *pool, uint32_t entry_index, kmsg_log_fn log);

/* The daemon's turn at recovery points (points.c): starts the ones that
 * are due for the services of host; returns in how many milliseconds it
 * wants its next turn. */
int recovery_points_tick(struct cxlcr_pool *pool, const char *host, void (*log)(int priority, const char *fmt, ...));

/* Makes the heap of arena (whose process is gone) what it was at the
 * recovery point whose snapshot is snapshot_generation, and marks the
 * arena so that the point's dump may be restored into it. With moved, the
 * point may also be the one a recovery made this arena from (a fresh
 * arena whose service died before its first point of its own): moved
 * then says where the point's regions are now, for the dump's rebase
 * (moved->n 0: the point is this arena's own). */
struct recovery_fresh;
int recovery_reset_arena(struct cxlcr_pool *pool, const struct cxlcr_region *arena, uint64_t snapshot_generation,
			 struct recovery_fresh *moved);

/* The heap (size bytes, mapped) made what it was in snapshot s: every page
 * it stores copied, every other page zero (restore_point.c); fresh: the
 * heap reads zero already (a new region), it is only written. */
struct cxlcr_snapshot;
int recovery_copy_point(const struct cxlcr_snapshot *s, uint8_t *heap, uint64_t size, bool fresh);
/* Maps the heap of arena (whose header is h) into *heap (*now says where;
 * the caller unmaps it with cxlcr_heap_unmap), checks that it lies where
 * the point's heap did and is as large, and makes it what it was at
 * point s (recovery_copy_point). */
struct cxlcr_heap;
struct cxlcr_arena_header;
int recovery_heap_from_point(struct cxlcr_pool *pool, const struct cxlcr_region *arena,
			     const struct cxlcr_arena_header *h, const struct cxlcr_snapshot *s, bool fresh,
			     struct cxlcr_heap *now, uint8_t **heap);
/* Lets go of what a heap brought back to point s held (restore_point.c,
 * fresh_arena.c, the same three things each): the heap's mapping, if heap
 * (recovery_heap_from_point), the arena header h mapped over the arena's
 * first CXLCR_ARENA_HEAP_OFFSET bytes, if h, and the open snapshot s. */
void recovery_point_done(struct cxlcr_snapshot *s, struct cxlcr_arena_header *h, struct cxlcr_heap *now,
			 uint8_t *heap);
/* The arena header a heap brought back to point s gets (at: the point's
 * copy of it): nothing of the process that ran then (its tracker, its scan
 * history: scans go on from scan_count), and the mark the CRIU plugin
 * looks for before it restores the point's dump into it (restored_from). */
void recovery_header_from_point(struct cxlcr_arena_header *at, const struct cxlcr_snapshot *s,
				uint64_t point_generation, uint64_t scan_count);

/* A fresh arena made from a recovery point of a dead host's service
 * (fresh_arena.c): the old arena and its extents quarantined, new regions
 * of the same names holding the point's header and heap, owned by nobody
 * on this host, at the old service's address. moves[] says which new
 * region holds which old one's contents (for rebase/relocate.c). On
 * failure nothing is left changed. */
struct recovery_fresh {
	struct cxlcr_region arena;
	struct cxlcr_rebase_move moves[CXLCR_ARENA_EXTENTS_MAX];
	uint32_t kinds_new[CXLCR_ARENA_EXTENTS_MAX]; /* what each new region becomes */
	size_t n;
	uint64_t quarantined[CXLCR_REGION_MAX]; /* the old regions, and their kinds before */
	uint32_t kinds[CXLCR_REGION_MAX];
	size_t nq;
	struct cxlcr_region old;   /* the arena it replaces */
	double ms;                 /* how long making it took */
};
int recovery_fresh_arena(struct cxlcr_pool *pool, const struct cxlcr_region *old, uint64_t snapshot_generation,
			 const char *dead_host, struct recovery_fresh *f);
/* Undoes it (the restore into it failed): the new regions freed, the old
 * ones what they were. */
void recovery_fresh_undo(struct cxlcr_pool *pool, struct recovery_fresh *f);

/* What a recovery on this host that ended half-way (its process gone,
 * its host alive) left made, undone (ended_runs.c): regions it was still
 * making, freed; with dead_host (the caller holds that host's recovery
 * now: the winner's run under its fence, a restore by hand once it has
 * reopened it), a fresh arena it committed for a service of dead_host that
 * no restore took over, freed, the old arena it replaced (still
 * quarantined) to be recovered again. Returns how many were let go
 * (made_freed + undone). */
struct recovery_sweep {
	uint32_t made_freed; /* regions being made by a process that has ended */
	uint32_t undone;     /* fresh arenas committed and never taken over */
	uint32_t left;       /* such arenas in use, or whose lease is held: left as they are */
};
int recovery_sweep_ended_runs(struct cxlcr_pool *pool, const char *dead_host, struct recovery_sweep *out);
/* Whether the live arena name of this host is such a fresh arena, left by
 * a recovery that ended half-way; if so, *old is the quarantined arena of
 * the dead host it replaced (the service to restore by hand). */
bool recovery_left_made(struct cxlcr_pool *pool, const char *name, struct cxlcr_region *old);

/* The header of arena r, mapped (the caller unmaps it, sizeof bytes), if
 * it is r's own (marks.c). */
struct cxlcr_arena_header *recovery_arena_header(struct cxlcr_pool *pool, const struct cxlcr_region *r);

/* What became of a service's recovery, in its arena header (marks.c;
 * status says it): lost, its host died and it had no recovery point;
 * failed, why its last recovery failed (why: NULL leaves the reason), and
 * with give_up, that it is left down for an operator (status: failed).
 * Each is written under the pool lock while the guards of this process
 * hold (-1 with one line if not: fenced, its work taken over); 0 also
 * when r has no arena header of its own (nothing to mark). */
int recovery_mark_lost(struct cxlcr_pool *pool, const struct cxlcr_region *r);
int recovery_mark_failed(struct cxlcr_pool *pool, const struct cxlcr_region *r, const char *why, bool give_up);
/* The old arena r was replaced by the fresh arena of generation into (0:
 * not, or not any more; on a fresh arena, that it is made). */
int recovery_mark_recovered(struct cxlcr_pool *pool, const struct cxlcr_region *r, uint64_t into);
/* The marks a fresh arena's commit makes true, written in the commit's
 * own hold of the pool lock (cxlcr_region_commit_made_and(pool, ...,
 * recovery_made_write, &m)), so that no stall between the two leaves a
 * committed arena marked as still being made (which a later recovery of
 * its host would have taken for a half-made one, and skipped) or the old
 * arena not marked replaced: the fresh arena is made, the old one
 * replaced by it. begin maps both headers (-1 with one line if the fresh
 * one's is not its own; an old one not its own is not marked), end
 * unmaps them. */
struct recovery_made {
	struct cxlcr_pool *pool;
	struct cxlcr_arena_header *fresh, *old;
	uint64_t fresh_generation;
	struct cxlcr_region old_region;
};
int recovery_made_begin(struct cxlcr_pool *pool, const struct cxlcr_region *fresh, const struct cxlcr_region *old,
			struct recovery_made *m);
void recovery_made_write(void *m);
void recovery_made_end(struct recovery_made *m);
/* A quarantined arena that is no old arena still to recover: replaced by
 * a fresh one, a fresh one itself left half made, or no arena at all. */
bool recovery_replaced(struct cxlcr_pool *pool, const struct cxlcr_region *r);
/* Nothing more to recover of r: lost or failed. */
bool recovery_given_up(struct cxlcr_pool *pool, const struct cxlcr_region *r);

/* Tests only: with $CXLCR_TEST_RECOVERY_STEPS=DIR in the daemons'
 * environment, a recovery that reaches the step named in DIR/stop-at
 * takes that file, writes its pid into DIR/stopped and stops itself
 * (SIGSTOP), for the test to kill its host there, or to let it go on
 * (SIGCONT). Nothing otherwise. */
void recovery_test_step(const char *step);

/* Runs `cxlcr ARGS...` (args[0] is "cxlcr") in the background, as the
 * daemon does for its recovery work (spawn.c): its pidfd, or -1. */
int recovery_spawn(const char *what, char *const args[]);

/* The daemon's loop keeps a slot per service of its host that it runs the
 * cxlcr command for (points.c; tracking/idle.c): the arena's generation,
 * whether this pass saw the service, and the pidfd of the run under way.
 * A caller's state begins with one; its table has n such states of size
 * bytes each. */
struct recovery_run {
	uint64_t generation; /* the arena's region; 0: a free slot */
	bool seen;           /* still a service of this host at this pass */
	int pidfd;           /* the run under way, or -1 */
};
/* Does slot i of pool's region table hold (into *r) the arena of a service
 * whose process is host's? The services such a pass looks at. */
bool recovery_run_service(struct cxlcr_pool *pool, uint32_t i, const char *host, struct cxlcr_region *r);
/* generation's state, or a free one cleared and given it (NULL: none). */
void *recovery_run_slot(void *table, size_t n, size_t size, uint64_t generation);
/* Is the run still under way? Its pidfd is closed once it is not. */
bool recovery_run_under_way(struct recovery_run *r);
/* Runs `cxlcr ARGS...` for r in the background: 0, or -1 with one line. */
int recovery_run_start(struct recovery_run *r, const char *what, char *const args[]);
/* Before a pass (seen = false for all), and after it: the states of
 * services it did not see (stopped, moved away) are freed; a run still
 * under way ends on its own. */
void recovery_runs_begin(void *table, size_t n, size_t size);
void recovery_runs_end(void *table, size_t n, size_t size);

/* Hard crash (takeover.c). The one place recovery starts from "this host
 * is dead" (a lease that ran out on our clock, or its tombstone): the host
 * of entry index, at this incarnation, named host, is fenced by us (entry
 * my_index) if nobody has yet (a compare-and-set in its host table entry:
 * exactly one host wins each death); the winner restores each of its
 * services that has a recovery point here, in the background, and marks
 * the others lost. Returns 1 if we won, 0 if not, -1 on error. */
int recovery_host_dead(struct cxlcr_pool *pool, uint32_t index, uint64_t incarnation, const char *host,
		       uint32_t my_index, const char *reason, void (*log)(int priority, const char *fmt, ...));
/* The recovery of the host of entry index (named host) under fence word
 * fence was not finished, and its winner is gone too (dead or left, as
 * this daemon sees it), or the host of a restore by hand that reopened
 * it (gone: the entry judged gone): this host (entry my_index) takes it over if no
 * other host has (cxlcr_host_fence_take_over), and recovers what is left
 * in the background. 1 if we took it over, 0 if not, -1 on error. */
int recovery_winner_gone(struct cxlcr_pool *pool, uint32_t index, const char *host, uint64_t fence, uint32_t gone,
			 uint32_t my_index,
			 void (*log)(int priority, const char *fmt, ...));
/* Whether this daemon holds a recovery worker (a run of `host recover`,
 * watched by recovery_watch_workers()) for the dead host of entry index. */
bool recovery_worker_held(uint32_t index);
/* Every tick of the daemon (entry my_index): a recovery worker it started
 * that ended while its recovery is still its own and not done (killed,
 * crashed, past its deadline) is started again, at most a few times; then
 * what it left is marked failed and the recovery done. */
void recovery_watch_workers(struct cxlcr_pool *pool, uint32_t my_index,
			    void (*log)(int priority, const char *fmt, ...));
/* A daemon that finds its own host fenced (entry index): kills every
 * process of its old services (and, by stop_work if given, its own verbs
 * under way); once the winner's recovery is done, frees its quarantined
 * regions and acknowledges. If gone(winner) says the winner is dead too
 * before it was done, this host takes its own recovery over
 * (recovery_winner_gone). gone NULL (a daemon leaving the pod): it
 * takes nothing over, nor runs its own recovery again. 1 while it is
 * fenced (the daemon then does nothing else), 0 if not. */
int recovery_fenced(struct cxlcr_pool *pool, uint32_t index, const char *host, void (*stop_work)(void),
		    bool (*gone)(uint32_t index), void (*log)(int priority, const char *fmt, ...));
/* How the daemon runs a verb in the background as one of its workers
 * (cxlcrd.c: forked, no exec): recovery_host_dead() uses it if set, else
 * it runs the cxlcr command (recovery_spawn), which costs the command's
 * start-up (its libraries' constructors: 200 ms here). */
void recovery_set_runner(pid_t (*run)(int argc, char **argv));
/* `cxlcr host recover DEAD --on WINNER` (run by the winner's daemon). */
int host_recover(int argc, char **argv);

#endif
