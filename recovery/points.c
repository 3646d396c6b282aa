/*
 * Recovery points: a service started with `--recovery-interval MS` gets a
 * snapshot every interval, taken by its host's daemon: the CRIU dump of
 * the process and a snapshot of its heap in the same freeze, incremental
 * (only what was written since the previous one is copied, and the freeze
 * does not grow with the heap: see docs/tracking.md). The catalog keeps
 * the newest complete one under the service's name (and the one being
 * written); `cxlcr status --json` says how old it is.
 *
 * The daemon's loop calls recovery_points_tick(): for each service of
 * this host that asks for points and is running, once its interval has
 * passed since the last one began (on this daemon's own monotonic clock),
 * it runs `cxlcr snapshot NAME`, which is the verb every operator uses
 * (the service's lease keeps it from racing any other verb; a point
 * that loses to one is simply taken at the next tick). At most one point
 * of a service is under way at a time.
 *
 * A service that takes points and whose process died comes back from its
 * newest one, on this host, by the restore verb (restore_point.c); one
 * that keeps dying soon after each restore, or cannot be restored, is
 * given up on, and the log says so.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/persist.h"
#include "../common/util.h"
#include "../daemon/cli.h"
#include "recovery.h"

#define TRACKED_MAX 64

static struct point_state {
	struct recovery_run run;  /* the `cxlcr snapshot` or restore under way */
	uint64_t last_ns;         /* CLOCK_MONOTONIC when the last point began */
	bool restoring;           /* a restore was begun and it has not run since */
	uint32_t failures;        /* restores in a row that did not make it run */
	uint32_t loops;           /* deaths in a row soon after a restore that worked */
	uint64_t up_ns;           /* when a restore was last seen to have worked */
	bool given_up;            /* it kept crashing: left for an operator */
} states[TRACKED_MAX];

/* A service that dies again within this long of a restore that worked
 * counts towards giving up on it, as does a restore that did not work. */
#define CRASH_LOOP_NS (30ull * 1000000000ull)
#define CRASH_LOOP_MAX 3
#define RESTORE_FAILURES_MAX 5

static int take_point(const char *name, struct point_state *st)
{
	char *args[] = { "cxlcr", "snapshot", (char *)name, "--quiet", "--recovery-point", NULL };
	st->last_ns = cxlcr_mono_ns();
	return recovery_run_start(&st->run, "recovery point", args);
}

/*
 * A service of this host whose process died (not checkpointed, not
 * stopped: stop frees it) comes back from its newest point, by the
 * restore verb (recovery/restore_point.c). One that dies again soon after
 * each restore is given up after a few: its daemon says so.
 */
static void restore_crashed(struct cxlcr_pool *pool, const struct service *s, const char *host,
			    struct point_state *st, void (*log)(int priority, const char *fmt, ...))
{
	if (st->given_up || !s->recovery_point[0] || strcmp(s->state, "exited"))
		return;
	uint64_t now = cxlcr_mono_ns();
	if (st->restoring) {
		st->failures++; /* the last restore ended and it does not run */
	} else {
		st->failures = 0;
		st->loops = st->up_ns && now - st->up_ns < CRASH_LOOP_NS ? st->loops + 1 : 0;
	}
	if (st->loops >= CRASH_LOOP_MAX || st->failures >= RESTORE_FAILURES_MAX) {
		char why[160];
		if (st->failures >= RESTORE_FAILURES_MAX)
			snprintf(why, sizeof(why), "not restored again on %s: %u restores from its recovery points in a "
				 "row did not bring it up", host, st->failures);
		else
			snprintf(why, sizeof(why), "not restored again on %s: it died within %llu s of each of its "
				 "last %u restores", host, CRASH_LOOP_NS / 1000000000ull, st->loops);
		recovery_mark_failed(pool, &s->region, why, true); /* status: failed, and why */
		st->given_up = true;
		log(3 /* LOG_ERR */, "%s %s; not restored again (cxlcr restore %s --host %s --recovery-point does it "
				     "by hand)", s->region.name,
		    st->failures >= RESTORE_FAILURES_MAX ? "cannot be restored from its recovery points (see above)"
							 : "keeps dying soon after each restore",
		    s->region.name, host);
		return;
	}
	st->restoring = true;
	log(5 /* LOG_NOTICE */, "%s died: restoring it from its recovery point %s", s->region.name, s->recovery_point);
	char *args[] = { "cxlcr", "restore", (char *)s->region.name, "--host", (char *)host, "--recovery-point",
			 "--quiet", NULL };
	if (recovery_run_start(&st->run, "restore from a recovery point", args) < 0)
		log(3, "%s", cxlcr_last_error());
}

/* The interval a service asked for, from its arena header (0: none). */
static uint32_t interval_of(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	const struct cxlcr_arena_header *h = cxlcr_pool_map(pool, r->offset, sizeof(*h), 0, 0);
	if (!h)
		return 0;
	cxlcr_refresh(h, sizeof(*h));
	uint32_t ms = h->magic == CXLCR_ARENA_MAGIC ? __atomic_load_n(&h->recovery_interval_ms, __ATOMIC_ACQUIRE) : 0;
	munmap((void *)(uintptr_t)h, sizeof(*h));
	return ms;
}

int recovery_points_tick(struct cxlcr_pool *pool, const char *host, void (*log)(int priority, const char *fmt, ...))
{
	uint64_t now = cxlcr_mono_ns();
	int next_ms = 1000;
	recovery_runs_begin(states, TRACKED_MAX, sizeof(states[0]));
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		if (!recovery_run_service(pool, i, host, &r))
			continue;
		/* (A service whose process died keeps its region, owner and
		 * host: that is how a crash is seen here.) */
		uint32_t interval = interval_of(pool, &r);
		if (!interval)
			continue;
		struct point_state *st = recovery_run_slot(states, TRACKED_MAX, sizeof(states[0]), r.generation);
		if (!st)
			continue;
		st->run.seen = true;
		if (recovery_run_under_way(&st->run))
			continue;
		struct service s;
		service_load(pool, &r, &s);
		if (!s.running) {
			restore_crashed(pool, &s, host, st, log);
			next_ms = next_ms > 100 ? 100 : next_ms;
			continue;
		}
		if (st->restoring) { /* it runs again: the restore worked */
			st->restoring = false;
			st->up_ns = now;
		}
		uint64_t due = st->last_ns + (uint64_t)interval * 1000000ull;
		if (st->last_ns && now < due) {
			int left = (int)((due - now) / 1000000ull) + 1;
			next_ms = left < next_ms ? left : next_ms;
			continue;
		}
		if (take_point(r.name, st) < 0)
			log(3 /* LOG_ERR */, "%s", cxlcr_last_error());
		next_ms = (int)interval < next_ms ? (int)interval : next_ms;
	}
	/* Services that went (stopped, migrated away) are forgotten; a point
	 * still under way ends on its own. */
	recovery_runs_end(states, TRACKED_MAX, sizeof(states[0]));
	return next_ms;
}
