/*
 * The daemon's liveness duty (see liveness.h). The pool is opened for each
 * tick and closed again, so that a daemon never keeps a pool that was
 * formatted again under it; what it has registered and watched stays in
 * this process's memory, which is the point: a host's silence is measured
 * here, on this host's monotonic clock.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "../recovery/recovery.h"
#include "../tier/tier.h"
#include "liveness.h"

static struct cxlcr_host_reg me;
static struct cxlcr_hosts_watch watch;
static bool watching;
static char my_address[CXLCR_HOST_ADDR_MAX];
static uint32_t my_port;
static uint64_t next_reap_ns;
#define REAP_EVERY_MIN_NS 1000000000ull
static char last_complaint[CXLCR_ERROR_MAX];
static uint64_t last_look_ns;
static void (*stop_work)(void);
static bool leaving; /* liveness_stop_taking_recoveries() */

void liveness_on_fence(void (*fn)(void))
{
	stop_work = fn;
}

/* A trouble that lasts (a corrupt table) is said once, not every beat. */
static bool news(const char *what)
{
	if (!strcmp(what, last_complaint))
		return false;
	cxlcr_copy_field(last_complaint, sizeof(last_complaint), what);
	return true;
}

void liveness_identity(const char *address, uint32_t port)
{
	cxlcr_copy_field(my_address, sizeof(my_address), address ? address : "");
	my_port = port;
}

int liveness_period_ms(void)
{
	uint64_t ms = cxlcr_heartbeat_period_ns() / 1000000ull;
	return ms < 1 ? 1 : ms > 60000 ? 60000 : (int)ms;
}

/*
 * Looks at the other hosts, on this daemon's own clock. A daemon that was
 * itself stalled for half a lease between two looks cannot tell silence
 * from its own absence: it starts its watch afresh instead, and false
 * says that this look judges nothing.
 */
static bool look(struct cxlcr_pool *pool, uint64_t now)
{
	struct cxlcr_hosts_map m;
	if (cxlcr_hosts_open(pool, false, &m) != 0)
		return false;
	bool stalled = last_look_ns && now - last_look_ns > cxlcr_lease_ns() / 2;
	last_look_ns = now;
	cxlcr_hosts_observe(&watch, &m, now);
	cxlcr_hosts_close(&m);
	if (stalled)
		cxlcr_hosts_watch_restart(&watch, now);
	return !stalled;
}

static bool host_gone(uint32_t index);

/* A host this daemon has seen silent for a whole lease (or whose
 * tombstone it saw) is dead: it tries to fence it and recover its
 * services (recovery/takeover.c; only one daemon wins). */
static void judge_others(struct cxlcr_pool *pool, uint64_t now, void (*log)(int priority, const char *fmt, ...))
{
	recovery_watch_workers(pool, me.index, log);
	/* A restore by hand that ran here and ended before it marked the
	 * recovery it reopened done again (killed, crashed, or left by a
	 * daemon that restarted since): done again in its name. */
	pid_t ended[4];
	int closed = cxlcr_host_fence_close_by_hand(pool, me.index, ended, 4);
	for (int k = 0; k < closed && k < 4; k++)
		log(LOG_WARNING, "worker %d ended in a restore by hand: the recovery it had reopened is done again",
		    (int)ended[k]);
	/* A daemon that stops in order takes on no recovery: it finishes
	 * its own and leaves the next ones to the others. */
	if (leaving)
		return;
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		if (i == me.index || cxlcr_hosts_judge(&watch, i, now, NULL) != CXLCR_VERDICT_DEAD)
			continue;
		char why[96] = "its heartbeat stood still for the lease";
		if (watch.entry[i].tombstone)
			snprintf(why, sizeof(why), "its tombstone says %s",
				 cxlcr_tombstone_reason_name(watch.entry[i].tombstone));
		recovery_host_dead(pool, i, watch.entry[i].incarnation, watch.entry[i].name, me.index, why, log);
	}
	/* A recovery whose winner died before it was done (its fence not
	 * done) is taken over by one of the others (recovery/takeover.c);
	 * so is one the fenced host took over itself (winner == i) and then
	 * died again in, and one an operator's restore reopened on a host
	 * that died since (its worker is the host that must be gone). */
	struct cxlcr_hosts_map m;
	if (cxlcr_hosts_open(pool, false, &m) != 0)
		return;
	uint64_t orphaned[CXLCR_HOSTS_MAX] = { 0 };
	uint32_t gone_worker[CXLCR_HOSTS_MAX] = { 0 };
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		const struct cxlcr_host_entry *e = &m.entries[i];
		cxlcr_refresh(&e->fence, 24);
		uint64_t fence = __atomic_load_n(&e->fence, __ATOMIC_SEQ_CST);
		uint64_t done = __atomic_load_n(&e->fence_done, __ATOMIC_SEQ_CST);
		uint32_t worker = cxlcr_fence_worker(fence, done);
		if (i != me.index && fence != __atomic_load_n(&e->fence_ack, __ATOMIC_SEQ_CST) && fence != done &&
		    worker != me.index && worker < CXLCR_HOSTS_MAX && host_gone(worker))
			orphaned[i] = fence, gone_worker[i] = worker;
	}
	cxlcr_hosts_close(&m);
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++)
		if (orphaned[i])
			recovery_winner_gone(pool, i, watch.entry[i].name, orphaned[i], gone_worker[i], me.index, log);
}

/* Whether the host of entry index is dead or left, as this daemon sees it
 * (the winner of a fence, which we wait for). Judged as of our last look,
 * not as of now: a tick can stall after its look (a fence waits for the
 * pool lock), and the winner, which waited for that same lock, may not
 * have beaten meanwhile either. Judged
 * on the clock of now, its silence would be our own wait, and we would
 * take a recovery over from a host that is busy doing it. */
static bool host_gone(uint32_t index)
{
	enum cxlcr_host_verdict v = cxlcr_hosts_judge(&watch, index, last_look_ns, NULL);
	return v == CXLCR_VERDICT_DEAD || v == CXLCR_VERDICT_LEFT;
}

/* The reason of this daemon's own tombstone (one it wrote itself: a drain
 * of this host that ran out of time), 0 if it has none. */
static uint32_t own_tombstone(struct cxlcr_pool *pool)
{
	struct cxlcr_hosts_map m;
	if (cxlcr_hosts_open(pool, false, &m) != 0)
		return 0;
	const struct cxlcr_host_entry *e = &m.entries[me.index];
	cxlcr_refresh(e, sizeof(*e));
	int reason = e->id.incarnation == me.incarnation ? cxlcr_tombstone_check(e, me.index, NULL, 0) : 0;
	cxlcr_hosts_close(&m);
	return reason > 0 ? (uint32_t)reason : 0;
}

/* The memory servers of the cold tier: one whose heartbeat stood still
 * for a lease is marked dead (tier/watch.c). */
static void judge_memory_servers(struct cxlcr_pool *pool, uint64_t now, void (*log)(int priority, const char *fmt, ...))
{
	static struct tier_watch tier;
	static uint64_t next_ns;
	char why[CXLCR_ERROR_MAX];
	/* A server is judged over seconds (four of its periods at least):
	 * a look every TIER_WATCH_EVERY_NS is plenty, where the host's tick
	 * may come every 75 ms (finding the tier table scans the region
	 * table). */
	if (now < next_ns)
		return;
	next_ns = now + TIER_WATCH_EVERY_NS;
	if (tier_watch_tick(pool, &tier, now, cxlcr_lease_ns(), why, sizeof(why)) > 0)
		log(LOG_WARNING, "%s", why);
}

/* The fence word this host's workers work under from now on (common/pool.h,
 * CXLCR_HOST_GUARD_ENV): set only while the host is not fenced, so that a
 * worker started before a fence keeps the word it read, which the fence
 * has moved on from, and stops at its next write. */
static void guard_workers(struct cxlcr_pool *pool)
{
	uint64_t fence = UINT64_MAX;
	if (cxlcr_host_fenced(pool, me.index, &fence, NULL) || fence == UINT64_MAX)
		return;
	char v[48];
	snprintf(v, sizeof(v), "%u:%llu", me.index, (unsigned long long)fence);
	setenv(CXLCR_HOST_GUARD_ENV, v, 1);
}

static pid_t daemon_pid;
static uint64_t last_beat_ns;

/* While this daemon waits for the pool lock (up to the lock's lease, for
 * a holder that stalled): that wait is not this host's death, so it goes
 * on beating, once a period. The daemon only: its workers, which inherit
 * the hook, are not its beat. */
static void beat_while_waiting(struct cxlcr_pool *pool)
{
	uint64_t now = cxlcr_mono_ns();
	if (getpid() != daemon_pid || !me.incarnation || now - last_beat_ns < cxlcr_heartbeat_period_ns())
		return;
	last_beat_ns = now;
	cxlcr_host_beat(pool, &me);
}

bool liveness_tick(void (*log)(int priority, const char *fmt, ...))
{
	struct cxlcr_pool pool;
	bool fenced = false;
	if (!watching) {
		cxlcr_hosts_watch_init(&watch, cxlcr_lease_ns());
		watching = true;
		daemon_pid = getpid();
		cxlcr_pool_on_lock_wait(beat_while_waiting);
	}
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return false;
	/* Looked at first: whether the winner of a fence on us is gone too
	 * is judged on a fresh look, never on one from before a stall. */
	uint64_t now = cxlcr_mono_ns();
	bool judged = me.incarnation && look(&pool, now);
	/* Declared dead while it was away (frozen, cut off, or a crash before
	 * this start): its old services go before anything else. */
	if (me.incarnation)
		fenced = recovery_fenced(&pool, me.index, cxlcr_host_name(), stop_work, leaving ? NULL : host_gone, log) == 1;
	/* A host that handed itself over while it lives on (its tombstone
	 * written by a drain that ran out of time) and has acknowledged the
	 * fence that followed starts a new incarnation at once, which the
	 * tombstone does not stand for: else the others would judge it dead,
	 * and fence it, again and again. */
	uint64_t fence;
	bool fence_done;
	if (fenced && !cxlcr_host_fenced(&pool, me.index, &fence, &fence_done) && own_tombstone(&pool)) {
		log(LOG_NOTICE, "fenced after handing its services over: registering as a new incarnation");
		me.incarnation = 0;
	}
	if (me.incarnation)
		last_beat_ns = cxlcr_mono_ns();
	if (me.incarnation && cxlcr_host_beat(&pool, &me) < 0 && news(cxlcr_last_error()))
		log(LOG_WARNING, "heartbeat: %s; registering again", cxlcr_last_error());
	if (!me.incarnation) {
		uint64_t period = (uint64_t)liveness_period_ms() * 1000000ull;
		if (cxlcr_host_join(&pool, cxlcr_host_name(), my_address, my_port, period, &me) < 0) {
			if (news(cxlcr_last_error()))
				log(LOG_ERR, "cannot register in the host table: %s", cxlcr_last_error());
		} else {
			last_complaint[0] = 0;
			log(LOG_INFO, "registered in the host table: entry %u, incarnation %llu, heartbeat every %llu ms",
			    me.index, (unsigned long long)me.incarnation, (unsigned long long)(period / 1000000));
			tombstone_arm(&pool, me.index, log);
			fenced = recovery_fenced(&pool, me.index, cxlcr_host_name(), stop_work, leaving ? NULL : host_gone, log) == 1;
		}
	}
	/* Also in the tick that acknowledged a fence: from the ack on, new
	 * workers work under the new word (guard_workers() sets nothing while
	 * the host is still fenced). Left to the next tick, a request served
	 * in between ran with the word the fence had moved on from, and every
	 * change it made to the pool was refused as fenced (t_deadline: a
	 * migrate's restore right after its host came back). */
	if (me.incarnation)
		guard_workers(&pool);
	/* A fenced host watches but does not act. */
	if (judged && !fenced) {
		judge_others(&pool, now, log);
		judge_memory_servers(&pool, now, log);
	}
	/* Reaping reads the whole catalog: a quarter lease apart is enough,
	 * and at most once a second (with the pod's 300 ms lease, a reap
	 * every 75 ms by each daemon cost more CPU than its recovery points:
	 * a dead borrower's snapshot freed a second later costs nothing). */
	if (now >= next_reap_ns) {
		struct cxlcr_reap_report r;
		if (cxlcr_catalog_reap_watched(&pool, &watch, now, &r) > 0 || r.snapshots_freed)
			log(LOG_NOTICE, "reaped %u borrows of dead holders (%u references), freed %u snapshots",
			    r.borrows_dropped, r.references_dropped, r.snapshots_freed);
		uint64_t every = cxlcr_lease_ns() / 4;
		next_reap_ns = now + (every > REAP_EVERY_MIN_NS ? every : REAP_EVERY_MIN_NS);
	}
	cxlcr_pool_close(&pool);
	return fenced;
}

void liveness_stop_taking_recoveries(void)
{
	leaving = true;
}

int liveness_own_recoveries(uint32_t *first)
{
	struct cxlcr_pool pool;
	if (!me.incarnation || cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return 0;
	struct cxlcr_hosts_map m;
	int n = 0;
	if (cxlcr_hosts_open(&pool, false, &m) == 0) {
		for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
			const struct cxlcr_host_entry *e = &m.entries[i];
			cxlcr_refresh(&e->fence, 24);
			uint64_t fence = __atomic_load_n(&e->fence, __ATOMIC_SEQ_CST);
			uint64_t done = __atomic_load_n(&e->fence_done, __ATOMIC_SEQ_CST);
			/* (Not this host's own recovery, taken over by itself
			 * while fenced: it is leaving, the others take it.) */
			if (i == me.index || !fence || fence == done || cxlcr_fence_worker(fence, done) != me.index)
				continue;
			/* A fence it won counts while a worker of this daemon
			 * runs its recovery (none left: nothing to wait for). */
			if ((done & CXLCR_FENCE_BY_HAND) || recovery_worker_held(i))
				if (!n++)
					*first = i;
		}
		cxlcr_hosts_close(&m);
	}
	cxlcr_pool_close(&pool);
	return n;
}

void liveness_leave(void)
{
	struct cxlcr_pool pool;
	if (!me.incarnation || cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return;
	cxlcr_host_leave(&pool, &me);
	cxlcr_pool_close(&pool);
}
