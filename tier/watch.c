/*
 * Liveness of the memory servers (tier.h, "Liveness"): a server bumps its
 * heartbeat counter in the tier table every period it recorded there; each
 * host daemon watches the counters on its own clock, and marks DEAD a
 * server whose counter stood still for the host's lease and four of the
 * server's periods (as a pod's hosts judge each other), so that a server
 * killed with -9 (which cannot mark itself down) is not handed new
 * extents, is shown dead, and readers of its pages fail at once instead of
 * after a timeout per page. A server
 * that was only stalled finds its entry no longer UP and stops (memd.c):
 * its memory is taken for lost either way, as a restarted one's is.
 */
#include <stdio.h>
#include <string.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/persist.h"
#include "../common/util.h"
#include "internal.h"
#include "tier.h"

void tier_beat(struct cxlcr_pool *pool, uint32_t index)
{
	struct tier_table t;
	if (index >= CXLCR_TIER_SERVERS || table_open(pool, false, &t) != 0)
		return;
	__atomic_fetch_add(&t.header->heartbeat[index], 1, __ATOMIC_SEQ_CST);
	cxlcr_publish(&t.header->heartbeat[index], sizeof(uint64_t));
	table_close(&t);
}

/* Under the pool lock: server i becomes DEAD if it is still the same
 * incarnation, UP, and its counter still reads beat. */
static bool mark_dead(struct tier_table *t, uint32_t i, uint64_t incarnation, uint64_t beat)
{
	if (cxlcr_pool_lock(t->pool) < 0)
		return false;
	struct cxlcr_tier_server s;
	cxlcr_refresh(&t->header->heartbeat[i], sizeof(uint64_t));
	bool dead = table_server(t, i, &s) == 0 && s.incarnation == incarnation && s.state == CXLCR_TIER_SERVER_UP &&
		    __atomic_load_n(&t->header->heartbeat[i], __ATOMIC_SEQ_CST) == beat;
	if (dead) {
		s.state = CXLCR_TIER_SERVER_DEAD;
		s.crc = table_server_crc(&s);
		t->servers[i] = s;
		cxlcr_publish(&t->servers[i], sizeof(s));
	}
	return cxlcr_pool_unlock(t->pool) == 0 && dead;
}

int tier_watch_tick(struct cxlcr_pool *pool, struct tier_watch *w, uint64_t now, uint64_t lease_ns, char *why,
		    size_t len)
{
	struct tier_table t;
	/* Most pods have no cold tier, and finding that out walks the whole
	 * region table: while there is none, a look every two seconds (a
	 * server started meanwhile is judged a little later, over its own
	 * periods either way). */
	if (w->absent_ns && now - w->absent_ns < TIER_ABSENT_EVERY_NS)
		return 0;
	int opened = table_open(pool, false, &t);
	w->absent_ns = opened == 1 ? now : 0;
	if (opened != 0)
		return 0;
	/* A watcher that was away for half a lease (and for four of its
	 * looks) cannot tell a server's silence from its own absence: it
	 * starts afresh. */
	uint64_t away = lease_ns / 2 > 4 * TIER_WATCH_EVERY_NS ? lease_ns / 2 : 4 * TIER_WATCH_EVERY_NS;
	bool fresh = !w->looked_ns || now - w->looked_ns > away;
	w->looked_ns = now;
	int marked = 0;
	for (uint32_t i = 0; i < CXLCR_TIER_SERVERS; i++) {
		struct tier_watch_entry *e = &w->server[i];
		struct cxlcr_tier_server s;
		if (table_server(&t, i, &s) < 0 || s.state != CXLCR_TIER_SERVER_UP) {
			e->incarnation = 0;
			continue;
		}
		cxlcr_refresh(&t.header->heartbeat[i], sizeof(uint64_t));
		uint64_t beat = __atomic_load_n(&t.header->heartbeat[i], __ATOMIC_SEQ_CST);
		if (fresh || e->incarnation != s.incarnation || e->beat != beat) {
			e->incarnation = s.incarnation;
			e->beat = beat;
			e->changed_ns = now;
			continue;
		}
		/* Judged only if it beats at all (beat_period_ms), by the
		 * hosts' rule: still for a lease, and for four of its periods. */
		uint64_t still = (uint64_t)s.beat_period_ms * 4000000ull;
		if (still < lease_ns)
			still = lease_ns;
		if (!s.beat_period_ms || now - e->changed_ns < still || !mark_dead(&t, i, s.incarnation, beat))
			continue;
		marked++;
		snprintf(why, len, "memory server %.32s (incarnation %llu, pid %d) is taken for dead: its heartbeat "
			 "stood still for %llu ms; its cold pages are lost", s.name, (unsigned long long)s.incarnation,
			 (int)s.pid, (unsigned long long)((now - e->changed_ns) / 1000000ull));
		e->incarnation = 0;
	}
	table_close(&t);
	return marked;
}
