/*
 * Hard crash: a host that is dead (its heartbeat stood still for a whole
 * lease on a surviving daemon's own clock, or it left a tombstone) has its
 * services brought back elsewhere, and is fenced.
 *
 *   recovery_host_dead   every surviving daemon that judges the host dead
 *                        tries to fence it: a compare-and-set of the
 *                        fence word in the dead host's entry of the host
 *                        table. Exactly one wins; it runs `cxlcr host
 *                        recover` on itself in the background.
 *   host_recover         the winner restores each service of the dead host
 *                        that has a recovery point from it, into a fresh
 *                        arena (fresh_arena.c), at its address; one that
 *                        has none is marked lost.
 *   recovery_fenced      a daemon that finds its own host fenced (it was
 *                        frozen, cut off, or starts again after a crash)
 *                        kills every process of its old services before
 *                        anything else, frees its quarantined regions, and
 *                        only then acknowledges the fence.
 *   recovery_winner_gone a winner that died before its recovery was done
 *                        is replaced: another host (or the fenced host
 *                        itself, back meanwhile) moves the fence one
 *                        generation on and recovers what is left. The old
 *                        winner's recovery changes the region table only
 *                        under its own fence word (cxlcr_pool_guard, also
 *                        in the CRIU plugin's take-over of the arena), so
 *                        whatever of it still runs stops at its next step,
 *                        and the fresh arena it left half made stays
 *                        quarantined, of its host, until that host
 *                        acknowledges its own fence.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "../daemon/cli.h"
#include "../tracking/track.h"
#include "recovery.h"

static pid_t (*runner)(int argc, char **argv);

void recovery_set_runner(pid_t (*run)(int argc, char **argv))
{
	runner = run;
}

/* Recoveries this daemon won that left services behind (a restore that
 * failed) are tried again a few times, further apart each time. */
#define RETRIES_MAX 3
#define RETRY_NS (2ull * 1000000000ull)
static struct retry {
	uint64_t fence;          /* the fence these tries are for */
	uint64_t at_ns;          /* not before (CLOCK_MONOTONIC) */
	uint32_t tries;
	bool given_up;           /* what the last try left is marked failed */
} retries[CXLCR_HOSTS_MAX];

/* The recovery worker this daemon started for each dead host's entry,
 * held by a pidfd: a worker that ends (killed, crashed, or past its
 * deadline) before its recovery is done is started again, or the fence
 * would stay not done for good (nobody takes over from a winner that
 * lives), its services down, and the fenced host waiting. */
static struct worker {
	bool held;
	int pidfd;
	uint64_t fence;
	uint32_t restarts;         /* for this fence */
	char host[CXLCR_HOST_MAX + 1];
} workers[CXLCR_HOSTS_MAX];

/* The services of dead host still to recover, by the generation of their
 * arena (at most CXLCR_REGION_MAX): its live arenas, and those whose
 * recovery a winner that died had begun (quarantined already, still of
 * dead, not replaced, with no live arena of their name); lost and failed
 * ones (left for an operator) only if all. */
static uint32_t to_recover(struct cxlcr_pool *pool, const char *dead, bool all, uint64_t *gens)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r, live;
		cxlcr_region_slot(pool, i, &r);
		if (r.state != CXLCR_REGION_LIVE || strncmp(r.owner_host, dead, CXLCR_HOST_MAX))
			continue;
		if (r.kind != CXLCR_KIND_ARENA &&
		    (r.kind != CXLCR_KIND_QUARANTINE || recovery_replaced(pool, &r) ||
		     cxlcr_region_find(pool, CXLCR_KIND_ARENA, r.name, &live)))
			continue;
		if (all || !recovery_given_up(pool, &r))
			gens[n++] = r.generation;
	}
	return n;
}

/* Whether host still has a service of its own to recover: one whose
 * recovery failed (restore_recovered() undoes what it did). */
static bool left_behind(struct cxlcr_pool *pool, const char *host)
{
	static uint64_t gens[CXLCR_REGION_MAX];
	return to_recover(pool, host, false, gens) > 0;
}

/* The recovery of host (entry index, fence word fence) is given up on:
 * each service left behind is marked failed (status says so, with the
 * reason its last try left). The marks are made under that recovery's
 * fence, not under the daemon's own host guard: a fenced host that took
 * its own recovery over works under a host word that has moved on, and
 * every mark would be refused. */
static void give_up(struct cxlcr_pool *pool, uint32_t index, uint64_t fence, const char *host,
		    void (*log)(int priority, const char *fmt, ...))
{
	static uint64_t gens[CXLCR_REGION_MAX];
	uint32_t host_entry = pool->host_entry;
	uint64_t host_want = pool->host_want;
	bool host_guarded = pool->host_word != NULL;
	struct cxlcr_hosts_map m;
	cxlcr_pool_host_unguard(pool);
	if (cxlcr_host_fence_guard(pool, index, fence, &m) == 0) {
		uint32_t n = to_recover(pool, host, false, gens);
		for (uint32_t i = 0; i < n; i++) {
			struct cxlcr_region r;
			if (cxlcr_region_get(pool, gens[i], &r) < 0)
				continue;
			if (recovery_mark_failed(pool, &r, NULL, true) < 0)
				log(LOG_ERR, "%.*s (of host %s): cannot mark it failed: %s", (int)CXLCR_NAME_MAX, r.name,
				    host, cxlcr_last_error());
			else
				log(LOG_ERR, "%.*s (of host %s) is left down: its recovery failed %u times; `cxlcr status "
					     "%.*s` says why", (int)CXLCR_NAME_MAX, r.name, host, RETRIES_MAX + 1,
				    (int)CXLCR_NAME_MAX, r.name);
		}
		cxlcr_host_fence_unguard(pool, &m);
	}
	if (host_guarded && host_entry && cxlcr_pool_host_guard(pool, host_entry - 1, host_want) < 0)
		log(LOG_ERR, "%s", cxlcr_last_error());
}

/* A host we fenced whose recovery is over but left services behind: once
 * its time has come, fence_done goes back to 0 (the host, if it returns,
 * waits again) and the recovery runs again; after the last try, what is
 * still left is given up on. */
static bool retry_due(struct cxlcr_pool *pool, uint32_t index, const char *host, uint32_t my_index, uint64_t *fence,
		      void (*log)(int priority, const char *fmt, ...))
{
	bool done;
	struct retry *t = &retries[index];
	if (!cxlcr_host_fenced(pool, index, fence, &done) || !done || (*fence & 0xff) != my_index + 1)
		return false;
	if (t->fence != *fence)
		*t = (struct retry){ .fence = *fence, .at_ns = cxlcr_mono_ns() + RETRY_NS };
	if (t->given_up || (t->tries < RETRIES_MAX && cxlcr_mono_ns() < t->at_ns) || !left_behind(pool, host))
		return false;
	if (t->tries >= RETRIES_MAX) {
		give_up(pool, index, *fence, host, log);
		t->given_up = true;
		return false;
	}
	if (cxlcr_host_fence_reopen(pool, index, *fence, 0) != 1)
		return false; /* the host acknowledged meanwhile: its services are its own */
	t->tries++;
	t->at_ns = cxlcr_mono_ns() + (t->tries + 1) * RETRY_NS;
	log(LOG_WARNING, "host %s: services of it are still not recovered: recovering them again (try %u of %u)", host,
	    t->tries, RETRIES_MAX);
	return true;
}

static void start_recovery(uint32_t index, const char *host, uint64_t fence,
			   void (*log)(int priority, const char *fmt, ...));

int recovery_host_dead(struct cxlcr_pool *pool, uint32_t index, uint64_t incarnation, const char *host,
		       uint32_t my_index, const char *reason, void (*log)(int priority, const char *fmt, ...))
{
	uint64_t fence;
	int won = cxlcr_host_fence(pool, index, incarnation, my_index, &fence);
	if (won < 0 || (won == 0 && (index >= CXLCR_HOSTS_MAX || !retry_due(pool, index, host, my_index, &fence, log))))
		return won;
	/* A worker of the dead host held the pool lock: the fence took it
	 * over at once, having judged that host dead (pool.c). */
	const char *lock = pool->lock_taken_from_host == index + 1 ? "; the pool lock taken from a worker of it" : "";
	if (won)
		log(LOG_WARNING, "host %s (incarnation %llu) is dead (%s): fenced by this host (fence %llu%s); recovering "
				 "its services", host, (unsigned long long)incarnation, reason, (unsigned long long)fence, lock);
	start_recovery(index, host, fence, log);
	return won;
}

int recovery_winner_gone(struct cxlcr_pool *pool, uint32_t index, const char *host, uint64_t fence, uint32_t gone,
			 uint32_t my_index, void (*log)(int priority, const char *fmt, ...))
{
	uint64_t next;
	int won = cxlcr_host_fence_take_over(pool, index, fence, gone, my_index, &next);
	if (won != 1)
		return won;
	if (gone != (uint32_t)(fence & 0xff) - 1)
		log(LOG_WARNING, "host %s: the recovery of its services (fence %llu) was reopened by a restore by hand on "
				 "host entry %u, and that host is gone: this host takes it over (fence %llu)", host,
		    (unsigned long long)fence, gone, (unsigned long long)next);
	else
		log(LOG_WARNING, "host %s: the recovery of its services by host entry %u (fence %llu) was not finished "
				 "and that host is gone: this host takes it over (fence %llu)", host,
		    (unsigned)(fence & 0xff) - 1, (unsigned long long)fence, (unsigned long long)next);
	start_recovery(index, host, next, log);
	return 1;
}

/* Runs `cxlcr host recover HOST --on <us> --fence F` in the background,
 * and keeps its worker (workers[index]). */
static void start_recovery(uint32_t index, const char *host, uint64_t fence,
			   void (*log)(int priority, const char *fmt, ...))
{
	char f[24];
	snprintf(f, sizeof(f), "%llu", (unsigned long long)fence);
	char *args[] = { "cxlcr", "host", "recover", (char *)host, "--on", (char *)this_host(), "--fence", f, NULL };
	int pidfd = -1;
	if (runner) {
		/* The daemon reaps its workers in its own loop, after this
		 * tick: the pid is still this one's. */
		pid_t pid = runner(7, args + 1);
		if (pid < 0)
			log(LOG_ERR, "%s", cxlcr_last_error());
		else
			pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	} else if ((pidfd = recovery_spawn("recovery of a dead host", args)) < 0) {
		log(LOG_ERR, "%s", cxlcr_last_error());
	}
	if (index >= CXLCR_HOSTS_MAX || pidfd < 0)
		return;
	struct worker *w = &workers[index];
	if (w->held)
		close(w->pidfd);
	if (w->fence != fence)
		w->restarts = 0;
	*w = (struct worker){ .held = true, .pidfd = pidfd, .fence = fence, .restarts = w->restarts };
	snprintf(w->host, sizeof(w->host), "%s", host);
}

/* The worker of the recovery of entry i, if it has ended: run again
 * while that recovery is still ours (entry my_index) and not done. */
static void watch_worker(struct cxlcr_pool *pool, uint32_t i, uint32_t my_index,
			 void (*log)(int priority, const char *fmt, ...))
{
	struct worker *w = &workers[i];
	if (!w->held || cxlcr_pidfd_running(w->pidfd))
		return;
	close(w->pidfd);
	w->held = false;
	uint64_t fence;
	bool done;
	/* Done, taken over by another host, or acknowledged: over. Reopened
	 * by an operator's restore meanwhile (our worker had marked it done):
	 * that restore's, not an unfinished run of ours. */
	if (!cxlcr_host_fenced(pool, i, &fence, &done) || done || fence != w->fence || (fence & 0xff) != my_index + 1 ||
	    cxlcr_fence_reopened_by_hand(pool, i, NULL))
		return;
	if (w->restarts >= RETRIES_MAX) {
		give_up(pool, i, fence, w->host, log);
		cxlcr_host_fence_done(pool, i, fence);
		log(LOG_ERR, "host %s: the recovery of its services (fence %llu) ended before it was done %u times: "
			     "given up on, and done", w->host, (unsigned long long)fence, RETRIES_MAX + 1);
		return;
	}
	w->restarts++;
	log(LOG_WARNING, "host %s: the recovery of its services (fence %llu) ended before it was done: running it "
			 "again (%u of %u)", w->host, (unsigned long long)fence, w->restarts, RETRIES_MAX);
	char host[CXLCR_HOST_MAX + 1];
	snprintf(host, sizeof(host), "%s", w->host);
	start_recovery(i, host, fence, log);
}

bool recovery_worker_held(uint32_t index)
{
	return index < CXLCR_HOSTS_MAX && workers[index].held;
}

void recovery_watch_workers(struct cxlcr_pool *pool, uint32_t my_index,
			    void (*log)(int priority, const char *fmt, ...))
{
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++)
		watch_worker(pool, i, my_index, log);
}

/* This daemon's host took its own recovery over (fence word fence, not
 * done): a daemon restarted since has no worker for it (this process
 * started none), and a fenced daemon does not run recovery_watch_workers()
 * (it recovers no other host): either way it runs again, counted as
 * watch_worker() counts. */
static void recovery_keep_own(struct cxlcr_pool *pool, uint32_t index, const char *host, uint64_t fence,
			      void (*log)(int priority, const char *fmt, ...))
{
	if (index >= CXLCR_HOSTS_MAX)
		return;
	watch_worker(pool, index, index, log); /* only our own: a fenced host recovers nobody else */
	struct worker *w = &workers[index];
	if (w->held || cxlcr_fence_reopened_by_hand(pool, index, NULL))
		return; /* (an operator's restore reopened it: its own to finish) */
	if (w->fence == fence && w->restarts >= RETRIES_MAX)
		return; /* given up on and marked done by recovery_watch_workers() */
	log(LOG_WARNING, "this host's own recovery (fence %llu) has no worker running: running it", (unsigned long long)fence);
	start_recovery(index, host, fence, log);
}

/* ---- the winner ---- */

/* Whether the fence on entry index is still fence (not taken over). */
static bool still_ours(struct cxlcr_pool *pool, uint32_t index, uint64_t fence)
{
	uint64_t now = 0;
	cxlcr_host_fenced(pool, index, &now, NULL);
	return now == fence;
}

/* The host table entry $CXLCR_HOST_GUARD names (this daemon's), or -1. */
static int64_t own_guard_index(const struct cxlcr_pool *pool)
{
	const char *v = getenv(CXLCR_HOST_GUARD_ENV);
	return pool->host_word && v ? (int64_t)strtoul(v, NULL, 10) : -1;
}

/* The dead host's entry (*index), fenced by us (*fence: want, if given). */
static int check_fenced_by_us(struct cxlcr_pool *pool, const char *dead, uint64_t want, uint32_t *index,
			      uint64_t *fence)
{
	uint64_t inc;
	int me = cxlcr_host_lookup(pool, this_host(), &inc);
	int i = cxlcr_host_lookup(pool, dead, &inc);
	if (me < 0 || i < 0)
		return cxlcr_error("host %s or %s is not in the host table", dead, this_host());
	if (!cxlcr_host_fenced(pool, (uint32_t)i, fence, NULL) || (*fence & 0xff) != (uint64_t)me + 1 ||
	    (want && *fence != want))
		return cxlcr_error("host %s is not fenced by %s: only the host that fenced it recovers its services",
				   dead, this_host());
	*index = (uint32_t)i;
	return 0;
}

int host_recover(int argc, char **argv)
{
	static const char *usage = "usage: cxlcr host recover DEAD --on HOST [--fence N]\n\n"
				   "Run by the daemon of HOST once it has fenced host DEAD (declared dead):\n"
				   "restores each of DEAD's services from its newest recovery point on HOST,\n"
				   "into a fresh arena, at its address; marks those without one lost.\n";
	static const struct option opts[] = { { "on", required_argument, 0, 'o' },
					      { "fence", required_argument, 0, 'f' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	const char *on = NULL;
	uint64_t fence = 0;
	int c;
	optind = 1;
	while ((c = getopt_long(argc - 1, argv + 1, "o:f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': on = optarg; break;
		case 'f': fence = strtoull(optarg, NULL, 10); break;
		case 'h': fputs(usage, stdout); return EXIT_OK;
		default: return EXIT_USAGE;
		}
	}
	if (optind + 2 != argc || !on)
		return fail(EXIT_USAGE, "host recover: name the dead host and --on the host that fenced it");
	const char *dead = argv[optind + 1];
	if (!cli_host)
		return forward_to_host(on, argc, argv);
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	uint32_t dead_index = 0;
	struct cxlcr_hosts_map guard;
	if (check_fenced_by_us(&pool, dead, fence, &dead_index, &fence) < 0 ||
	    cxlcr_host_fence_guard(&pool, dead_index, fence, &guard) < 0) {
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "%s", cxlcr_last_error());
	}
	/* Every change to the region table from here on, ours and the CRIU
	 * plugin's as it takes the fresh arena over, is made only while the
	 * fence is still ours: a recovery taken over stops at its next step. */
	char env[48];
	snprintf(env, sizeof(env), "%u:%llu", dead_index, (unsigned long long)fence);
	setenv("CXLCR_RECOVERY_FENCE", env, 1);
	/* A host that took its own recovery over works under that fence
	 * now, not under the one it had before it was fenced. */
	if (own_guard_index(&pool) == (int64_t)dead_index &&
	    (cxlcr_pool_host_guard(&pool, dead_index, fence) < 0 || setenv(CXLCR_HOST_GUARD_ENV, env, 1) < 0)) {
		cxlcr_host_fence_unguard(&pool, &guard);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "%s", cxlcr_last_error());
	}
	recovery_test_step("fenced");
	/* An earlier run of it here that ended half-way (run again by our
	 * daemon) left what it made: undone, so that its services are
	 * listed and recovered afresh. */
	struct recovery_sweep swept;
	if (recovery_sweep_ended_runs(&pool, dead, &swept) > 0 || swept.left)
		printf("what an earlier recovery here left half made: %u region(s) freed, %u fresh arena(s) undone, %u "
		       "left (in use)\n", swept.made_freed, swept.undone, swept.left);
	/* The dead host's services, listed first: recovering one changes
	 * the region table. */
	static uint64_t gens[CXLCR_REGION_MAX];
	uint32_t n = to_recover(&pool, dead, false, gens), failed = 0;
	bool ours = true;
	for (uint32_t i = 0; i < n && (ours = still_ours(&pool, dead_index, fence)); i++) {
		char point[CXLCR_NAME_MAX];
		pid_t pid = 0;
		static struct recovery_fresh fresh;
		struct cxlcr_region old;
		if (cxlcr_region_get(&pool, gens[i], &old) < 0)
			continue;
		uint64_t t0 = cxlcr_mono_ns();
		int got = restore_recovered(&pool, gens[i], dead, point, sizeof(point), &pid, &fresh);
		double ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
		if (got == 0) {
			printf("%s recovered on %s from recovery point %s (pid %d; fresh arena %.1f ms; %.1f ms)\n", old.name,
			       this_host(), point, (int)pid, fresh.ms, ms);
			fflush(stdout);
			recovery_test_step("restored");
		} else if (!(ours = still_ours(&pool, dead_index, fence))) {
			break;
		} else if (got == 1) {
			recovery_mark_lost(&pool, &old);
			printf("%s lost: its host %s died and it has no recovery point\n", old.name, dead);
		} else {
			char why[CXLCR_ERROR_MAX];
			snprintf(why, sizeof(why), "recovery on %s failed: %s", this_host(), cxlcr_last_error());
			recovery_mark_failed(&pool, &old, why, false);
			failed++;
			printf("%s not recovered: %s\n", old.name, cxlcr_last_error());
		}
	}
	cxlcr_host_fence_unguard(&pool, &guard);
	/* Over: the dead host, if it comes back, may free what it left and
	 * acknowledge (what could not be recovered is its own again). Unless
	 * another host took the recovery over: it is its to finish. */
	int done = ours ? cxlcr_host_fence_done(&pool, dead_index, fence) : 0;
	if (done < 0)
		printf("the recovery of %s could not be marked done: %s\n", dead, cxlcr_last_error());
	else if (!done)
		printf("the recovery of %s was taken over by another host (fence %llu moved on): this one stopped\n",
		       dead, (unsigned long long)fence);
	fflush(stdout);
	cxlcr_pool_close(&pool);
	return failed || !ours ? EXIT_FAIL : EXIT_OK;
}

/* ---- the fenced ---- */

#define KILL_WAIT_MS 5000

/*
 * Kills the owner of region r, an old service of this host, if it is still
 * that process: a pid the region table recorded before this host was
 * declared dead may have been handed to anything since (a reboot, or the
 * emulated host's new pid namespace after `pod crash` and `pod up`), even
 * to this daemon or its workers, which map the pool too. So the process
 * must have started when the owner did (owner_start), and map the region
 * itself; where the start is not known, the region alone decides.
 * Checked while a pidfd holds the process. Returns whether it killed.
 */
static bool kill_owner(const struct cxlcr_region *r, const char *host, const struct stat *pool_st)
{
	if (r->owner_pid <= 1)
		return false;
	int fd = (int)syscall(SYS_pidfd_open, r->owner_pid, 0);
	if (fd < 0)
		return false;
	bool is = !cxlcr_region_owner_gone(r, host) &&
		  cxlcr_pid_maps_file(r->owner_pid, pool_st->st_dev, pool_st->st_ino, r->offset, r->offset + r->size);
	if (is)
		cxlcr_pidfd_kill_wait(fd, KILL_WAIT_MS);
	close(fd);
	return is;
}

/* Kills the tracker of arena r (tracking/tracker.h: a process of that name
 * that maps the arena; a reused pid is not). */
static void kill_tracker(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	if (r->size < sizeof(struct cxlcr_arena_header))
		return;
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, r->offset, sizeof(*h), 0, 0);
	if (!h)
		return;
	cxlcr_refresh(h, sizeof(*h));
	int32_t pid = h->magic == CXLCR_ARENA_MAGIC ? h->tracker_pid : 0;
	munmap(h, sizeof(*h));
	int fd = cxlcr_tracker_pidfd(pool, r, pid);
	if (fd >= 0) {
		cxlcr_pidfd_kill_wait(fd, KILL_WAIT_MS);
		close(fd);
	}
}

int recovery_fenced(struct cxlcr_pool *pool, uint32_t index, const char *host, void (*stop_work)(void),
		    bool (*gone)(uint32_t index), void (*log)(int priority, const char *fmt, ...))
{
	static uint64_t said;
	uint64_t fence;
	bool done;
	if (!cxlcr_host_fenced(pool, index, &fence, &done))
		return 0;
	uint32_t winner = (uint32_t)(fence & 0xff) - 1;
	/* Our own recovery, which we took over (below): our old services
	 * were killed before, and those it brings back are not old. */
	bool ourselves = winner == index;
	if (said != fence && !ourselves)
		log(LOG_WARNING, "this host was declared dead and fenced by host entry %u: killing its old services "
				 "first", winner);
	if (stop_work && !ourselves)
		stop_work();
	struct stat st;
	if (fstat(pool->fd, &st) < 0)
		return 0;
	uint32_t killed = 0, freed = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX && !ourselves; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state != CXLCR_REGION_LIVE || strncmp(r.owner_host, host, CXLCR_HOST_MAX))
			continue;
		if (r.kind == CXLCR_KIND_ARENA || r.kind == CXLCR_KIND_CHILD || r.kind == CXLCR_KIND_QUARANTINE) {
			if (r.kind != CXLCR_KIND_CHILD)
				kill_tracker(pool, &r);
			if (kill_owner(&r, host, &st))
				killed++;
		}
	}
	/* While the winner recovers, what it has not taken yet is not ours
	 * either: nothing runs here until it is done. A winner gone too
	 * before that left it half done: unless another host took it over
	 * first, we finish it ourselves, as any survivor would. */
	/* (Reopened by an operator's restore: that restore's host is the one
	 * whose death hands the recovery over.) */
	uint32_t worker = winner, h;
	if (!done && cxlcr_fence_reopened_by_hand(pool, index, &h) && h != index)
		worker = h;
	if (!done) {
		if ((!ourselves || worker != winner) && gone && gone(worker))
			recovery_winner_gone(pool, index, host, fence, worker, index, log);
		else if (ourselves && gone)
			recovery_keep_own(pool, index, host, fence, log);
		else if (said != fence)
			log(LOG_NOTICE, "waiting for host entry %u to finish recovering this host's services", worker);
		said = fence;
		return 1;
	}
	said = fence;
	/* Only now is nothing of ours left that could write them. Freed
	 * only while the recovery stays done: one reopened meanwhile (a
	 * retry, an operator's restore of a service it left down) may be
	 * quarantining one of them for itself; we wait for it again. That
	 * guard replaces this host's own (the fence it worked under before
	 * it was fenced, which has moved on). */
	struct cxlcr_hosts_map guard;
	cxlcr_pool_host_unguard(pool);
	if (cxlcr_host_done_guard(pool, index, fence, &guard) < 0)
		return 1;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state == CXLCR_REGION_LIVE && cxlcr_kind_held_back(r.kind) &&
		    (r.kind != CXLCR_KIND_MAKING || !r.owner_pid || cxlcr_region_owner_gone(&r, host)) &&
		    !strncmp(r.owner_host, host, CXLCR_HOST_MAX) && cxlcr_region_free(pool, r.generation) == 0)
			freed++;
	}
	cxlcr_host_fence_unguard(pool, &guard);
	if (cxlcr_host_fence_ack(pool, index, fence) != 1) {
		log(LOG_NOTICE, "the recovery of this host's services was taken up again: waiting for it");
		return 1;
	}
	log(LOG_WARNING, "fence %llu acknowledged: %u old service process(es) killed, %u quarantined region(s) freed",
	    (unsigned long long)fence, killed, freed);
	return 1;
}
