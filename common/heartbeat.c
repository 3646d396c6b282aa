/*
 * Host heartbeats (see heartbeat.h and pool_format.h). The table sits in
 * the catalog's header page; catalog.c maps it for us.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "catalog.h"
#include "error.h"
#include "heartbeat.h"
#include "persist.h"
#include "util.h"

uint64_t cxlcr_lease_ns(void)
{
	const char *v = getenv("CXLCR_LEASE_MS");
	char *end;
	if (v && *v) {
		unsigned long long ms = strtoull(v, &end, 10);
		if (!*end && ms > 0)
			return ms * 1000000ull;
	}
	return CXLCR_CATALOG_LEASE_NS;
}

static uint64_t new_incarnation(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = cxlcr_mono_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	return v ? v : 1;
}

/* The slot named host, else the first unused one, else -1. */
static int slot_for(const struct cxlcr_host_heartbeat *table, const char *host)
{
	int unused = -1;
	for (uint32_t i = 0; i < CXLCR_HEARTBEAT_SLOTS; i++) {
		if (!strncmp(table[i].host, host, CXLCR_HOST_MAX))
			return (int)i;
		if (!table[i].host[0] && unused < 0)
			unused = (int)i;
	}
	return unused;
}

int cxlcr_heartbeat_join(struct cxlcr_pool *pool, const char *host, uint64_t period_ns,
			 struct cxlcr_heartbeat *hb)
{
	struct cxlcr_catalog_heartbeats m;
	memset(hb, 0, sizeof(*hb));
	int rc = cxlcr_catalog_map_heartbeats(pool, &m);
	if (rc != 0)
		return rc;
	if (cxlcr_pool_lock(pool) < 0) {
		cxlcr_catalog_unmap_heartbeats(&m);
		return -1;
	}
	cxlcr_refresh(m.table, CXLCR_HEARTBEAT_SLOTS * sizeof(*m.table));
	int i = slot_for(m.table, host);
	if (i >= 0) {
		struct cxlcr_host_heartbeat *s = &m.table[i];
		cxlcr_copy_field(s->host, sizeof(s->host), host);
		s->period_ns = period_ns;
		s->joined_ns = cxlcr_now_ns();
		__atomic_add_fetch(&s->counter, 1, __ATOMIC_SEQ_CST);
		hb->incarnation = new_incarnation();
		__atomic_store_n(&s->incarnation, hb->incarnation, __ATOMIC_SEQ_CST);
		cxlcr_publish(s, sizeof(*s));
		hb->index = (uint32_t)i;
		memcpy(hb->pool_uuid, pool->sb->uuid, sizeof(hb->pool_uuid));
	}
	cxlcr_pool_unlock(pool);
	cxlcr_catalog_unmap_heartbeats(&m);
	return i >= 0 ? 0 : cxlcr_error("the pod's heartbeat table is full (%u hosts)", CXLCR_HEARTBEAT_SLOTS);
}

int cxlcr_heartbeat_beat(struct cxlcr_pool *pool, struct cxlcr_heartbeat *hb)
{
	struct cxlcr_catalog_heartbeats m;
	if (!hb->incarnation || memcmp(hb->pool_uuid, pool->sb->uuid, sizeof(hb->pool_uuid)))
		return cxlcr_error("not joined in this pool");
	int rc = cxlcr_catalog_map_heartbeats(pool, &m);
	if (rc != 0) {
		hb->incarnation = 0;
		return rc < 0 ? -1 : cxlcr_error("the pool has no catalog any more");
	}
	struct cxlcr_host_heartbeat *s = &m.table[hb->index];
	cxlcr_refresh(s, sizeof(*s));
	rc = 0;
	if (__atomic_load_n(&s->incarnation, __ATOMIC_SEQ_CST) != hb->incarnation) {
		hb->incarnation = 0;
		rc = cxlcr_error("heartbeat slot %u of %.64s was taken over", hb->index, s->host);
	} else {
		__atomic_add_fetch(&s->counter, 1, __ATOMIC_SEQ_CST);
		cxlcr_publish(&s->counter, sizeof(s->counter));
	}
	cxlcr_catalog_unmap_heartbeats(&m);
	return rc;
}

void cxlcr_heartbeat_leave(struct cxlcr_pool *pool, struct cxlcr_heartbeat *hb)
{
	struct cxlcr_catalog_heartbeats m;
	if (!hb->incarnation || memcmp(hb->pool_uuid, pool->sb->uuid, sizeof(hb->pool_uuid)) ||
	    cxlcr_catalog_map_heartbeats(pool, &m) != 0)
		return;
	struct cxlcr_host_heartbeat *s = &m.table[hb->index];
	cxlcr_refresh(s, sizeof(*s));
	uint64_t mine = hb->incarnation;
	__atomic_compare_exchange_n(&s->incarnation, &mine, 0, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	cxlcr_publish(s, sizeof(*s));
	hb->incarnation = 0;
	cxlcr_catalog_unmap_heartbeats(&m);
}

int cxlcr_heartbeat_lookup(const struct cxlcr_host_heartbeat *table, const char *host, uint64_t *incarnation)
{
	for (uint32_t i = 0; i < CXLCR_HEARTBEAT_SLOTS; i++) {
		uint64_t inc = __atomic_load_n(&table[i].incarnation, __ATOMIC_SEQ_CST);
		if (inc && !strncmp(table[i].host, host, CXLCR_HOST_MAX)) {
			*incarnation = inc;
			return (int)i;
		}
	}
	return -1;
}

/* ---- watching ---- */

void cxlcr_heartbeat_watch_init(struct cxlcr_heartbeat_watch *w, uint64_t lease_ns)
{
	memset(w, 0, sizeof(*w));
	w->lease_ns = lease_ns ? lease_ns : cxlcr_lease_ns();
}

void cxlcr_heartbeat_observe(struct cxlcr_heartbeat_watch *w, const struct cxlcr_host_heartbeat *table,
			     uint64_t now)
{
	for (uint32_t i = 0; i < CXLCR_HEARTBEAT_SLOTS; i++) {
		uint64_t inc = __atomic_load_n(&table[i].incarnation, __ATOMIC_SEQ_CST);
		uint64_t counter = __atomic_load_n(&table[i].counter, __ATOMIC_SEQ_CST);
		if (!w->slot[i].seen || w->slot[i].incarnation != inc || w->slot[i].counter != counter) {
			w->slot[i].incarnation = inc;
			w->slot[i].counter = counter;
			w->slot[i].since_ns = now;
			w->slot[i].seen = true;
		}
		w->slot[i].period_ns = table[i].period_ns;
	}
}

/* The silence after which a host is taken for dead: our lease, or four of
 * the host's own periods if it beats more slowly than we expect (a period
 * is a duration, not a time: it can be compared across hosts). */
static uint64_t silence_allowed(const struct cxlcr_heartbeat_watch *w, uint32_t index)
{
	uint64_t own = w->lease_ns, theirs = 4 * w->slot[index].period_ns;
	return theirs > own ? theirs : own;
}

bool cxlcr_heartbeat_stalled(const struct cxlcr_heartbeat_watch *w, uint32_t index, uint64_t now)
{
	if (index >= CXLCR_HEARTBEAT_SLOTS || !w->slot[index].seen || !w->slot[index].incarnation)
		return false;
	return now - w->slot[index].since_ns >= silence_allowed(w, index);
}

void cxlcr_heartbeat_claims_begin(struct cxlcr_heartbeat_watch *w)
{
	for (uint32_t i = 0; i < w->claims; i++)
		w->claim[i].seen = false;
}

bool cxlcr_heartbeat_claim_stale(struct cxlcr_heartbeat_watch *w, uint32_t entry, uint32_t slot,
				 uint64_t token, uint64_t now)
{
	for (uint32_t i = 0; i < w->claims; i++) {
		if (w->claim[i].entry != entry || w->claim[i].slot != slot)
			continue;
		if (w->claim[i].token != token) {
			w->claim[i].token = token;
			w->claim[i].since_ns = now;
		}
		w->claim[i].seen = true;
		return now - w->claim[i].since_ns >= w->lease_ns;
	}
	if (w->claims < sizeof(w->claim) / sizeof(w->claim[0]))
		w->claim[w->claims++] = (typeof(w->claim[0])){ entry, slot, token, now, true };
	return false;
}

void cxlcr_heartbeat_claims_end(struct cxlcr_heartbeat_watch *w)
{
	uint32_t kept = 0;
	for (uint32_t i = 0; i < w->claims; i++)
		if (w->claim[i].seen)
			w->claim[kept++] = w->claim[i];
	w->claims = kept;
}
