/*
 * The host table (see hosts.h and pool_format.h). Registration happens
 * under the pool lock; beats and leaving are single atomic words; readers
 * never take the lock and never read another host's clock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <errno.h>

#include "checksum.h"
#include "error.h"
#include "hosts.h"
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

uint64_t cxlcr_heartbeat_period_ns(void)
{
	uint64_t p = cxlcr_lease_ns() / 4;
	return p > CXLCR_HEARTBEAT_PERIOD_MAX_NS ? CXLCR_HEARTBEAT_PERIOD_MAX_NS : p ? p : 1;
}

/* ---- the table ---- */

static uint32_t header_checksum(const struct cxlcr_hosts_header *h)
{
	return cxlcr_crc32c(0, h, offsetof(struct cxlcr_hosts_header, checksum));
}

static uint32_t identity_checksum(const struct cxlcr_host_identity *id)
{
	return cxlcr_crc32c(0, id, sizeof(*id));
}

/* ---- tombstones ---- */

void cxlcr_tombstone_fill(struct cxlcr_tombstone *t, uint32_t index, uint64_t incarnation, uint32_t reason,
			  uint64_t time_ns)
{
	memset(t, 0, sizeof(*t));
	t->magic = CXLCR_TOMBSTONE_MAGIC;
	t->incarnation = incarnation;
	t->time_ns = time_ns;
	t->reason = reason;
	t->host_index = index;
	t->checksum = cxlcr_crc32c(0, t, CXLCR_TOMBSTONE_CHECKED);
}

const char *cxlcr_tombstone_reason_name(uint32_t reason)
{
	return reason == CXLCR_TOMBSTONE_PANIC	  ? "panic"
	       : reason == CXLCR_TOMBSTONE_OOPS	  ? "oops"
	       : reason == CXLCR_TOMBSTONE_HANDOFF ? "handoff"
						   : "?";
}

/* A copy first: the dying host may be writing it while we read, and a torn
 * read fails the checksum now and passes at the next look. */
int cxlcr_tombstone_check(const struct cxlcr_host_entry *e, uint32_t index, char *why, size_t len)
{
	struct cxlcr_tombstone t;
	memcpy(&t, (const void *)&e->tombstone, sizeof(t));
	const char *bad = NULL;
	if (!t.magic)
		return 0;
	if (t.magic != CXLCR_TOMBSTONE_MAGIC)
		bad = "unknown magic";
	else if (t.checksum != cxlcr_crc32c(0, &t, CXLCR_TOMBSTONE_CHECKED))
		bad = "checksum mismatch";
	else if (t.host_index != index)
		bad = "written for another entry";
	else if (t.reason != CXLCR_TOMBSTONE_PANIC && t.reason != CXLCR_TOMBSTONE_OOPS &&
		 t.reason != CXLCR_TOMBSTONE_HANDOFF)
		bad = "unknown reason";
	if (bad) {
		if (why)
			snprintf(why, len, "%s", bad);
		return -1;
	}
	return t.incarnation == e->id.incarnation ? (int)t.reason : 0;
}

/* The region: found, or (with create) made; a racing maker's allocation
 * fails on the name, and it takes the other's. 1 if there is none. */
static int find_or_make_region(struct cxlcr_pool *pool, bool create, struct cxlcr_region *r)
{
	bool found = cxlcr_region_find(pool, CXLCR_KIND_HOSTS, CXLCR_HOSTS_REGION, r);
	if (!found && !create)
		return 1;
	if (!found && cxlcr_region_alloc(pool, CXLCR_KIND_HOSTS, CXLCR_HOSTS_REGION, CXLCR_HOSTS_SIZE, r) == 0)
		return 0;
	if (!found)
		found = cxlcr_region_find(pool, CXLCR_KIND_HOSTS, CXLCR_HOSTS_REGION, r);
	return found ? 0 : cxlcr_error("cannot make the host table in pool %s: %s", pool->path, cxlcr_last_error());
}

/* ---- the pod's key ---- */

static uint32_t pod_key_checksum(const struct cxlcr_pod_key *k)
{
	uint32_t crc = cxlcr_crc32c(0, &k->version, sizeof(k->version));
	return cxlcr_crc32c(crc, k->key, sizeof(k->key));
}

/* Whether k is a whole key (0), none yet (1), or corrupt (-1, one line).
 * The maker writes the magic last: without the lock, a key without one
 * may be half made; under it, only an all-zero one is not made yet. */
static int pod_key_state(const struct cxlcr_pool *pool, const struct cxlcr_pod_key *k, bool locked)
{
	static const uint8_t zero[sizeof(*k)];
	if (locked ? !memcmp(k, zero, sizeof(zero)) : k->magic == 0)
		return 1;
	if (k->magic != CXLCR_POD_KEY_MAGIC || k->version != CXLCR_POD_KEY_VERSION ||
	    k->checksum != pod_key_checksum(k))
		return cxlcr_error("the pod key in pool %s is corrupt (%s); requests over the network "
				   "cannot be authenticated", pool->path,
				   k->magic != CXLCR_POD_KEY_MAGIC ? "bad magic" :
				   k->version != CXLCR_POD_KEY_VERSION ? "unknown version" : "checksum mismatch");
	return 0;
}

/* Writes a fresh key into k, the magic last; under the pool lock. */
static int make_key_locked(struct cxlcr_pod_key *k)
{
	struct cxlcr_pod_key fresh = { .version = CXLCR_POD_KEY_VERSION };
	if (getrandom(fresh.key, sizeof(fresh.key), 0) != (ssize_t)sizeof(fresh.key))
		return cxlcr_error("getrandom: %s", strerror(errno));
	fresh.checksum = pod_key_checksum(&fresh);
	*k = fresh;
	cxlcr_publish(k, sizeof(*k));
	k->magic = CXLCR_POD_KEY_MAGIC;
	cxlcr_publish(k, sizeof(*k));
	explicit_bzero(&fresh, sizeof(fresh));
	return 0;
}

/* A new region reads as zero; the header is written once, under the pool
 * lock, by whoever gets there first, the magic last. */
static int init_header(struct cxlcr_pool *pool, const struct cxlcr_region *r, struct cxlcr_hosts_header *h)
{
	if (cxlcr_pool_lock(pool) < 0)
		return -1;
	cxlcr_refresh(h, sizeof(*h));
	if (h->magic == 0) {
		memset(h, 0, sizeof(*h));
		h->version = CXLCR_HOSTS_VERSION;
		h->header_size = sizeof(*h);
		memcpy(h->pool_uuid, pool->sb->uuid, sizeof(h->pool_uuid));
		h->region_generation = r->generation;
		h->entry_count = CXLCR_HOSTS_MAX;
		h->entry_size = sizeof(struct cxlcr_host_entry);
		h->magic = CXLCR_HOSTS_MAGIC;
		h->checksum = header_checksum(h);
		/* A new table gets the pod's key with it (a pool formatted
		 * again gets a new one); tables made before keys existed get
		 * theirs from cxlcr_pod_key_get(). */
		struct cxlcr_pod_key *k = (struct cxlcr_pod_key *)(void *)((uint8_t *)h + CXLCR_HOSTS_KEY_OFFSET);
		if (make_key_locked(k) < 0) {
			cxlcr_pool_unlock(pool);
			return -1;
		}
		h->magic = 0;
		cxlcr_publish(h, sizeof(*h));
		h->magic = CXLCR_HOSTS_MAGIC;
		cxlcr_publish(h, sizeof(*h));
	}
	cxlcr_pool_unlock(pool);
	return 0;
}

static int check_header(struct cxlcr_pool *pool, const struct cxlcr_region *r, const struct cxlcr_hosts_header *h)
{
	const char *why = NULL;
	if (h->magic != CXLCR_HOSTS_MAGIC)
		why = "no host table magic";
	else if (h->version != CXLCR_HOSTS_VERSION)
		return cxlcr_error("host table of pool %s: format version %u, this cxlcr reads version %u", pool->path,
				   h->version, CXLCR_HOSTS_VERSION);
	else if (h->checksum != header_checksum(h))
		why = "header checksum mismatch";
	else if (memcmp(h->pool_uuid, pool->sb->uuid, sizeof(h->pool_uuid)) != 0)
		why = "it belongs to another pool (uuid mismatch)";
	else if (h->region_generation != r->generation || h->header_size != sizeof(*h) ||
		 h->entry_count != CXLCR_HOSTS_MAX || h->entry_size != sizeof(struct cxlcr_host_entry))
		why = "inconsistent layout";
	return why ? cxlcr_error("host table of pool %s is corrupt (%s)", pool->path, why) : 0;
}

int cxlcr_hosts_open(struct cxlcr_pool *pool, bool create, struct cxlcr_hosts_map *m)
{
	struct cxlcr_region r;
	memset(m, 0, sizeof(*m));
	int rc = find_or_make_region(pool, create, &r);
	if (rc != 0)
		return rc;
	if (r.size < CXLCR_HOSTS_SIZE)
		return cxlcr_error("host table of pool %s is corrupt (region of %llu bytes)", pool->path,
				   (unsigned long long)r.size);
	m->base = cxlcr_pool_map(pool, r.offset, CXLCR_HOSTS_SIZE, 0, 0);
	if (!m->base)
		return -1;
	m->size = CXLCR_HOSTS_SIZE;
	m->pool = pool;
	m->header = m->base;
	m->entries = (struct cxlcr_host_entry *)(void *)((uint8_t *)m->base + CXLCR_HOSTS_HEADER_SIZE);
	cxlcr_refresh(m->header, sizeof(*m->header));
	if (m->header->magic == 0 && (!create || init_header(pool, &r, m->header) < 0)) {
		cxlcr_hosts_close(m);
		return create ? -1 : 1;
	}
	if (check_header(pool, &r, m->header) < 0) {
		cxlcr_hosts_close(m);
		return -1;
	}
	return 0;
}

void cxlcr_hosts_close(struct cxlcr_hosts_map *m)
{
	if (m->base)
		munmap(m->base, m->size);
	memset(m, 0, sizeof(*m));
}

bool cxlcr_host_entry_intact(const struct cxlcr_host_entry *e, char *why, size_t len)
{
	uint64_t state = __atomic_load_n(&e->state, __ATOMIC_SEQ_CST);
	const char *bad = NULL;
	if (state > CXLCR_HOST_LEFT)
		bad = "unknown state";
	else if (state == CXLCR_HOST_FREE)
		return true;    /* never used: nothing to check */
	else if (e->id_checksum != identity_checksum(&e->id))
		bad = "checksum mismatch";
	else if (!memchr(e->id.name, 0, sizeof(e->id.name)) || !e->id.name[0] ||
		 !memchr(e->id.address, 0, sizeof(e->id.address)) || e->id.port > 65535 || !e->id.incarnation)
		bad = "impossible identity";
	if (bad && why)
		snprintf(why, len, "%s", bad);
	return !bad;
}

/* The entry named host among the intact ones, else the first free one,
 * else -1. A corrupt entry is never taken: nobody can tell whose it was. */
static int entry_for(const struct cxlcr_hosts_map *m, const char *host)
{
	int unused = -1;
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		const struct cxlcr_host_entry *e = &m->entries[i];
		if (!cxlcr_host_entry_intact(e, NULL, 0))
			continue;
		if (e->state == CXLCR_HOST_FREE) {
			if (unused < 0)
				unused = (int)i;
		} else if (!strncmp(e->id.name, host, CXLCR_HOST_MAX)) {
			return (int)i;
		}
	}
	return unused;
}

int cxlcr_host_join(struct cxlcr_pool *pool, const char *host, const char *address, uint32_t port,
		    uint64_t period_ns, struct cxlcr_host_reg *reg)
{
	struct cxlcr_hosts_map m;
	memset(reg, 0, sizeof(*reg));
	if (cxlcr_hosts_open(pool, true, &m) != 0)
		return -1;
	if (cxlcr_pool_lock(pool) < 0) {
		cxlcr_hosts_close(&m);
		return -1;
	}
	cxlcr_refresh(m.entries, CXLCR_HOSTS_MAX * sizeof(*m.entries));
	int i = entry_for(&m, host);
	if (i >= 0) {
		struct cxlcr_host_entry *e = &m.entries[i];
		bool known = e->state != CXLCR_HOST_FREE;
		struct cxlcr_host_identity id = { 0 };
		cxlcr_copy_field(id.name, sizeof(id.name), host);
		cxlcr_copy_field(id.address, sizeof(id.address), address ? address : "");
		id.port = port;
		id.incarnation = (known ? e->id.incarnation : 0) + 1;
		id.period_ns = period_ns;
		id.joined_ns = cxlcr_now_ns();
		/* The counter moves first, so that a reader watching the old
		 * incarnation never sees the new one with a standing counter;
		 * the identity is written in full before the state says so. */
		__atomic_add_fetch(&e->counter, 1, __ATOMIC_SEQ_CST);
		e->id = id;
		e->id_checksum = identity_checksum(&e->id);
		/* A new incarnation: the last one's tombstone is history. */
		memset((void *)&e->tombstone, 0, sizeof(e->tombstone));
		cxlcr_publish(e, sizeof(*e));
		__atomic_store_n(&e->state, CXLCR_HOST_RUNNING, __ATOMIC_SEQ_CST);
		cxlcr_publish(&e->state, sizeof(e->state));
		reg->index = (uint32_t)i;
		reg->incarnation = id.incarnation;
		memcpy(reg->pool_uuid, pool->sb->uuid, sizeof(reg->pool_uuid));
	}
	cxlcr_pool_unlock(pool);
	cxlcr_hosts_close(&m);
	return i >= 0 ? 0 : cxlcr_error("the pod's host table is full (%u hosts)", CXLCR_HOSTS_MAX);
}

/* The entry of a registration, mapped, if it is still ours. */
static struct cxlcr_host_entry *own_entry(struct cxlcr_pool *pool, struct cxlcr_host_reg *reg,
					   struct cxlcr_hosts_map *m)
{
	if (!reg->incarnation || memcmp(reg->pool_uuid, pool->sb->uuid, sizeof(reg->pool_uuid))) {
		reg->incarnation = 0;
		cxlcr_error("not registered in this pool");
		return NULL;
	}
	if (cxlcr_hosts_open(pool, false, m) != 0) {
		reg->incarnation = 0;
		cxlcr_error("the pool has no host table any more");
		return NULL;
	}
	struct cxlcr_host_entry *e = &m->entries[reg->index];
	cxlcr_refresh(e, sizeof(*e));
	if (e->id.incarnation != reg->incarnation || !cxlcr_host_entry_intact(e, NULL, 0)) {
		cxlcr_error("host table entry %u of %.64s was taken over", reg->index, e->id.name);
		reg->incarnation = 0;
		cxlcr_hosts_close(m);
		return NULL;
	}
	return e;
}

int cxlcr_host_beat(struct cxlcr_pool *pool, struct cxlcr_host_reg *reg)
{
	struct cxlcr_hosts_map m;
	struct cxlcr_host_entry *e = own_entry(pool, reg, &m);
	if (!e)
		return -1;
	__atomic_add_fetch(&e->counter, 1, __ATOMIC_SEQ_CST);
	cxlcr_publish(&e->counter, sizeof(e->counter));
	cxlcr_hosts_close(&m);
	return 0;
}

void cxlcr_host_leave(struct cxlcr_pool *pool, struct cxlcr_host_reg *reg)
{
	struct cxlcr_hosts_map m;
	struct cxlcr_host_entry *e = own_entry(pool, reg, &m);
	if (!e)
		return;
	uint64_t running = CXLCR_HOST_RUNNING;
	__atomic_compare_exchange_n(&e->state, &running, CXLCR_HOST_LEFT, false, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
	cxlcr_publish(&e->state, sizeof(e->state));
	reg->incarnation = 0;
	cxlcr_hosts_close(&m);
}

/* Under the pool lock, so that the incarnation it names is the entry's
 * (a registration rewrites it under the lock); the kernel module takes no
 * lock, and need not: its host's daemon cannot register while it dies. */
int cxlcr_host_write_tombstone(struct cxlcr_pool *pool, const char *host, uint32_t reason)
{
	struct cxlcr_hosts_map m;
	if (cxlcr_hosts_open(pool, false, &m) != 0)
		return cxlcr_error("the pool has no host table");
	if (cxlcr_pool_lock(pool) < 0) {
		cxlcr_hosts_close(&m);
		return -1;
	}
	cxlcr_refresh(m.entries, CXLCR_HOSTS_MAX * sizeof(*m.entries));
	int found = -1;
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX && found < 0; i++) {
		struct cxlcr_host_entry *e = &m.entries[i];
		if (e->state != CXLCR_HOST_RUNNING || !cxlcr_host_entry_intact(e, NULL, 0) ||
		    strncmp(e->id.name, host, CXLCR_HOST_MAX))
			continue;
		struct cxlcr_tombstone t;
		cxlcr_tombstone_fill(&t, i, e->id.incarnation, reason, cxlcr_now_ns());
		memcpy((void *)&e->tombstone, &t, sizeof(t));
		cxlcr_publish(&e->tombstone, sizeof(e->tombstone));
		found = (int)i;
	}
	cxlcr_pool_unlock(pool);
	cxlcr_hosts_close(&m);
	return found >= 0 ? 0 : cxlcr_error("host %s has no running entry in the host table", host);
}

/* ---- fencing ---- */

/* The host table, for a fence on entry index won by entry winner. */
static int fence_open(struct cxlcr_pool *pool, uint32_t index, uint32_t winner, struct cxlcr_hosts_map *m)
{
	if (index >= CXLCR_HOSTS_MAX || winner >= CXLCR_HOSTS_MAX)
		return cxlcr_error("host table entry %u: no such entry", index);
	if (cxlcr_hosts_open(pool, false, m) != 0)
		return cxlcr_error("the pool has no host table");
	return 0;
}

/* Entry e's fence word goes from was to its next generation, won by entry
 * winner (its index + 1 in the low 8 bits, as pool_format.h says and the
 * word's readers take it apart): one compare-and-swap, so that of the
 * hosts that race from the same word exactly one wins, whether for a new
 * death (cxlcr_host_fence) or a dead winner's (cxlcr_host_fence_take_over).
 * 1 with the new word in *fence if this one won, 0 if not. */
static int fence_win(struct cxlcr_host_entry *e, uint64_t was, uint32_t winner, uint64_t *fence)
{
	uint64_t want = (((was >> 8) + 1) << 8) | (winner + 1);
	if (!__atomic_compare_exchange_n(&e->fence, &was, want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return 0;
	/* A reopening of the old word (a by-hand restore's) ends with it:
	 * nobody may mark the new one done in its name. */
	__atomic_store_n(&e->fence_done, 0, __ATOMIC_SEQ_CST);
	cxlcr_publish(&e->fence, 24);
	*fence = want;
	return 1;
}

int cxlcr_host_fence(struct cxlcr_pool *pool, uint32_t index, uint64_t incarnation, uint32_t winner,
		     uint64_t *fence)
{
	struct cxlcr_hosts_map m;
	if (fence_open(pool, index, winner, &m) < 0)
		return -1;
	/* Under the pool lock: every change the fenced host's workers make
	 * under it (cxlcr_pool_host_guard) was made either before the fence,
	 * and the winner sees it, or not at all. A worker of the dead host
	 * that holds it loses it to us at once: we judged its host dead. */
	pool->judged_dead_entry = index + 1;
	int locked = cxlcr_pool_lock(pool);
	pool->judged_dead_entry = 0;
	if (locked < 0) {
		cxlcr_hosts_close(&m);
		return -1;
	}
	struct cxlcr_host_entry *e = &m.entries[index];
	cxlcr_refresh(e, sizeof(*e));
	int rc = 0;
	uint64_t ack = __atomic_load_n(&e->fence_ack, __ATOMIC_SEQ_CST);
	uint64_t was = __atomic_load_n(&e->fence, __ATOMIC_SEQ_CST);
	/* Fenced already (by someone, for this death or one not yet
	 * acknowledged), or the host is another incarnation than the one
	 * judged dead, or it left in order meanwhile: nothing to win. */
	if (was == ack && cxlcr_host_entry_intact(e, NULL, 0) && e->id.incarnation == incarnation &&
	    __atomic_load_n(&e->state, __ATOMIC_SEQ_CST) == CXLCR_HOST_RUNNING)
		rc = fence_win(e, was, winner, fence);
	cxlcr_pool_unlock(pool);
	cxlcr_hosts_close(&m);
	return rc;
}

int cxlcr_host_fenced(struct cxlcr_pool *pool, uint32_t index, uint64_t *fence, bool *done)
{
	struct cxlcr_hosts_map m;
	if (index >= CXLCR_HOSTS_MAX || cxlcr_hosts_open(pool, false, &m) != 0)
		return 0;
	struct cxlcr_host_entry *e = &m.entries[index];
	cxlcr_refresh(&e->fence, 24);
	uint64_t f = __atomic_load_n(&e->fence, __ATOMIC_SEQ_CST);
	int fenced = f != __atomic_load_n(&e->fence_ack, __ATOMIC_SEQ_CST);
	if (fence)
		*fence = f;
	if (done)
		*done = __atomic_load_n(&e->fence_done, __ATOMIC_SEQ_CST) == f;
	cxlcr_hosts_close(&m);
	return fenced;
}

/* fence_move()'s done_was when fence_done may be anything. */
#define DONE_ANY UINT64_MAX

/* A compare-and-set of the fence's words of entry index under the pool
 * lock: when fence is `fence`, fence_done is `done_was` (or DONE_ANY) and
 * fence_ack is not `fence`, the word at `field` becomes `to`. 1 if it did,
 * 0 if not. */
static int fence_move(struct cxlcr_pool *pool, uint32_t index, uint64_t fence, uint64_t done_was, size_t field,
		      uint64_t to)
{
	struct cxlcr_hosts_map m;
	if (index >= CXLCR_HOSTS_MAX || cxlcr_hosts_open(pool, false, &m) != 0)
		return cxlcr_error("the pool has no host table entry %u", index);
	if (cxlcr_pool_lock(pool) < 0) {
		cxlcr_hosts_close(&m);
		return -1;
	}
	struct cxlcr_host_entry *e = &m.entries[index];
	cxlcr_refresh(&e->fence, 24);
	int rc = 0;
	if (__atomic_load_n(&e->fence, __ATOMIC_SEQ_CST) == fence &&
	    __atomic_load_n(&e->fence_ack, __ATOMIC_SEQ_CST) != fence &&
	    (done_was == DONE_ANY || __atomic_load_n(&e->fence_done, __ATOMIC_SEQ_CST) == done_was)) {
		uint64_t *w = (uint64_t *)(void *)((uint8_t *)e + field);
		__atomic_store_n(w, to, __ATOMIC_SEQ_CST);
		cxlcr_publish(w, sizeof(*w));
		rc = 1;
	}
	cxlcr_pool_unlock(pool);
	cxlcr_hosts_close(&m);
	return rc;
}

/* Under the pool lock, and only while the fence word is still `fence`: a
 * winner that checked the word was its own, then stalled while another
 * host took the recovery over and finished it, must not mark its old word
 * done over the new one (the fence would read not done for good, and the
 * fenced host would wait for ever). */
int cxlcr_host_fence_done(struct cxlcr_pool *pool, uint32_t index, uint64_t fence)
{
	return fence_move(pool, index, fence, DONE_ANY, offsetof(struct cxlcr_host_entry, fence_done), fence);
}

int cxlcr_host_fence_ack(struct cxlcr_pool *pool, uint32_t index, uint64_t fence)
{
	return fence_move(pool, index, fence, fence, offsetof(struct cxlcr_host_entry, fence_ack), fence);
}

int cxlcr_host_fence_reopen(struct cxlcr_pool *pool, uint32_t index, uint64_t fence, uint64_t by)
{
	return fence_move(pool, index, fence, fence, offsetof(struct cxlcr_host_entry, fence_done), by);
}

uint64_t cxlcr_fence_by_hand(uint32_t host_index, pid_t pid, uint64_t start)
{
	return CXLCR_FENCE_BY_HAND | (uint64_t)(host_index & 63) << CXLCR_FENCE_BY_HAND_HOST |
	       (start & CXLCR_FENCE_BY_HAND_STARTS) << CXLCR_FENCE_BY_HAND_START |
	       ((uint64_t)pid & CXLCR_FENCE_BY_HAND_PID);
}

bool cxlcr_fence_reopened_by_hand(struct cxlcr_pool *pool, uint32_t index, uint32_t *host_index)
{
	struct cxlcr_hosts_map m;
	if (index >= CXLCR_HOSTS_MAX || cxlcr_hosts_open(pool, false, &m) != 0)
		return false;
	struct cxlcr_host_entry *e = &m.entries[index];
	cxlcr_refresh(&e->fence, 24);
	uint64_t done = __atomic_load_n(&e->fence_done, __ATOMIC_SEQ_CST);
	cxlcr_hosts_close(&m);
	if (!(done & CXLCR_FENCE_BY_HAND))
		return false;
	if (host_index)
		*host_index = cxlcr_fence_by_hand_host(done);
	return true;
}

/* Whether the process a by-hand word names (a process of this host) has
 * ended: its pid runs no more, or runs another process (another start).
 * Only what says so for sure counts: a look that fails for another reason
 * (no fd left, no memory) must not end a restore that works. */
static bool by_hand_ended(uint64_t word)
{
	uint64_t start;
	pid_t pid = (pid_t)(word & CXLCR_FENCE_BY_HAND_PID);
	int is = cxlcr_process_start_known(pid, &start);
	return is == 0 ||
	       (is == 1 && (start & CXLCR_FENCE_BY_HAND_STARTS) !=
				   ((word >> CXLCR_FENCE_BY_HAND_START) & CXLCR_FENCE_BY_HAND_STARTS));
}

/* The words are judged before the pool lock is taken (/proc is no place
 * to wait in under it), then each is closed under it only if it is still
 * there, so that it cannot be reopened again (or taken over, which clears
 * it) between the look and the store. */
int cxlcr_host_fence_close_by_hand(struct cxlcr_pool *pool, uint32_t host_index, pid_t *pids, int max)
{
	struct cxlcr_hosts_map m;
	if (cxlcr_hosts_open(pool, false, &m) != 0)
		return -1;
	uint64_t ended[CXLCR_HOSTS_MAX] = { 0 };
	bool any = false;
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		struct cxlcr_host_entry *e = &m.entries[i];
		cxlcr_refresh(&e->fence, 24);
		uint64_t done = __atomic_load_n(&e->fence_done, __ATOMIC_SEQ_CST);
		if ((done & CXLCR_FENCE_BY_HAND) && cxlcr_fence_by_hand_host(done) == host_index &&
		    by_hand_ended(done))
			any = true, ended[i] = done;
	}
	if (!any) {
		cxlcr_hosts_close(&m);
		return 0;
	}
	if (cxlcr_pool_lock(pool) < 0) {
		cxlcr_hosts_close(&m);
		return -1;
	}
	int closed = 0;
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		struct cxlcr_host_entry *e = &m.entries[i];
		cxlcr_refresh(&e->fence, 24);
		uint64_t f = __atomic_load_n(&e->fence, __ATOMIC_SEQ_CST);
		if (!ended[i] || __atomic_load_n(&e->fence_done, __ATOMIC_SEQ_CST) != ended[i] ||
		    __atomic_load_n(&e->fence_ack, __ATOMIC_SEQ_CST) == f)
			continue;
		__atomic_store_n(&e->fence_done, f, __ATOMIC_SEQ_CST);
		cxlcr_publish(&e->fence_done, sizeof(e->fence_done));
		if (closed < max)
			pids[closed] = (pid_t)(ended[i] & CXLCR_FENCE_BY_HAND_PID);
		closed++;
	}
	cxlcr_pool_unlock(pool);
	cxlcr_hosts_close(&m);
	return closed;
}

int cxlcr_host_fence_take_over(struct cxlcr_pool *pool, uint32_t index, uint64_t from, uint32_t gone,
			       uint32_t winner, uint64_t *fence)
{
	struct cxlcr_hosts_map m;
	if (fence_open(pool, index, winner, &m) < 0)
		return -1;
	struct cxlcr_host_entry *e = &m.entries[index];
	/* The host whose work it was (the winner, or the host of a restore
	 * by hand) was judged gone: a worker of its that holds the lock (its
	 * recovery's) loses it to us at once. */
	pool->judged_dead_entry = gone + 1;
	int locked = cxlcr_pool_lock(pool);
	pool->judged_dead_entry = 0;
	if (locked < 0) {
		cxlcr_hosts_close(&m);
		return -1;
	}
	cxlcr_refresh(&e->fence, 24);
	int rc = 0;
	/* Still that host's work: not done meanwhile, nor reopened by hand
	 * on another host (one that lives, for all we know). */
	uint64_t done = __atomic_load_n(&e->fence_done, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&e->fence_ack, __ATOMIC_SEQ_CST) != from && done != from &&
	    cxlcr_fence_worker(from, done) == gone)
		rc = fence_win(e, from, winner, fence);
	cxlcr_pool_unlock(pool);
	cxlcr_hosts_close(&m);
	return rc;
}

int cxlcr_host_fence_guard(struct cxlcr_pool *pool, uint32_t index, uint64_t fence, struct cxlcr_hosts_map *m)
{
	if (index >= CXLCR_HOSTS_MAX || cxlcr_hosts_open(pool, false, m) != 0)
		return cxlcr_error("the pool has no host table entry %u", index);
	cxlcr_pool_guard(pool, &m->entries[index].fence, fence);
	return 0;
}

int cxlcr_host_fence_guard_by_hand(struct cxlcr_pool *pool, uint32_t index, uint64_t fence, uint64_t by_hand,
				   struct cxlcr_hosts_map *m)
{
	if (cxlcr_host_fence_guard(pool, index, fence, m) < 0)
		return -1;
	if (by_hand)
		cxlcr_pool_guard_also(pool, &m->entries[index].fence_done, by_hand);
	return 0;
}

int cxlcr_host_done_guard(struct cxlcr_pool *pool, uint32_t index, uint64_t fence, struct cxlcr_hosts_map *m)
{
	if (index >= CXLCR_HOSTS_MAX || cxlcr_hosts_open(pool, false, m) != 0)
		return cxlcr_error("the pool has no host table entry %u", index);
	cxlcr_pool_guard(pool, &m->entries[index].fence_done, fence);
	return 0;
}

void cxlcr_host_fence_unguard(struct cxlcr_pool *pool, struct cxlcr_hosts_map *m)
{
	cxlcr_pool_guard(pool, NULL, 0);
	cxlcr_hosts_close(m);
}

int cxlcr_host_lookup(struct cxlcr_pool *pool, const char *host, uint64_t *incarnation)
{
	struct cxlcr_host_identity id;
	int found = cxlcr_host_lookup_id(pool, host, &id);
	if (found >= 0)
		*incarnation = id.incarnation;
	return found;
}

int cxlcr_host_lookup_id(struct cxlcr_pool *pool, const char *host, struct cxlcr_host_identity *id)
{
	struct cxlcr_hosts_map m;
	if (cxlcr_hosts_open(pool, false, &m) != 0)
		return -1;
	int found = -1;
	cxlcr_refresh(m.entries, CXLCR_HOSTS_MAX * sizeof(*m.entries));
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX && found < 0; i++) {
		const struct cxlcr_host_entry *e = &m.entries[i];
		if (__atomic_load_n(&e->state, __ATOMIC_SEQ_CST) == CXLCR_HOST_RUNNING &&
		    cxlcr_host_entry_intact(e, NULL, 0) && !strncmp(e->id.name, host, CXLCR_HOST_MAX)) {
			*id = e->id;
			found = (int)i;
		}
	}
	cxlcr_hosts_close(&m);
	return found;
}

int cxlcr_pool_lock_holder(struct cxlcr_pool *pool, char *host, size_t len, uint64_t *takeovers)
{
	cxlcr_refresh(&pool->sb->lock, sizeof(pool->sb->lock));
	uint64_t word = __atomic_load_n(&pool->sb->lock.owner, __ATOMIC_SEQ_CST);
	*takeovers = __atomic_load_n(&pool->sb->lock.takeovers, __ATOMIC_SEQ_CST);
	host[0] = 0;
	uint32_t entry = CXLCR_LOCK_HOST(word);
	struct cxlcr_hosts_map m;
	if (word && entry && entry <= CXLCR_HOSTS_MAX && cxlcr_hosts_open(pool, false, &m) == 0) {
		const struct cxlcr_host_entry *e = &m.entries[entry - 1];
		cxlcr_refresh(e, sizeof(*e));
		if (cxlcr_host_entry_intact(e, NULL, 0))
			cxlcr_copy_field(host, len, e->id.name);
		cxlcr_hosts_close(&m);
	}
	return word != 0;
}

int cxlcr_pod_key_get(struct cxlcr_pool *pool, bool create, uint8_t key[CXLCR_POD_KEY_BYTES])
{
	struct cxlcr_hosts_map m;
	int rc = cxlcr_hosts_open(pool, create, &m);
	if (rc != 0)
		return rc;
	struct cxlcr_pod_key *k = (struct cxlcr_pod_key *)(void *)((uint8_t *)m.base + CXLCR_HOSTS_KEY_OFFSET);
	cxlcr_refresh(k, sizeof(*k));
	rc = pod_key_state(pool, k, false);
	if (rc == 1 && create) {
		/* Made once, under the lock: two daemons starting together
		 * must not each make one. */
		if (cxlcr_pool_lock(pool) < 0) {
			cxlcr_hosts_close(&m);
			return -1;
		}
		cxlcr_refresh(k, sizeof(*k));
		rc = pod_key_state(pool, k, true);
		if (rc == 1)
			rc = make_key_locked(k);
		cxlcr_pool_unlock(pool);
	}
	if (rc == 0)
		memcpy(key, k->key, CXLCR_POD_KEY_BYTES);
	cxlcr_hosts_close(&m);
	return rc;
}

/* ---- watching ---- */

const char *cxlcr_host_verdict_name(enum cxlcr_host_verdict v)
{
	static const char *const names[] = { "unused", "watching", "alive", "suspect", "dead", "left", "corrupt" };
	return v < sizeof(names) / sizeof(names[0]) ? names[v] : "?";
}

void cxlcr_hosts_watch_init(struct cxlcr_hosts_watch *w, uint64_t lease_ns)
{
	memset(w, 0, sizeof(*w));
	w->lease_ns = lease_ns ? lease_ns : cxlcr_lease_ns();
}

/* Whether entry e is intact. A registration rewrites an identity under
 * the pool lock, so one that fails its checks without the lock is looked
 * at again with it: only then is it corrupt. */
static bool intact_now(const struct cxlcr_hosts_map *m, const struct cxlcr_host_entry *e, bool *locked,
		       char *why, size_t len)
{
	if (cxlcr_host_entry_intact(e, why, len))
		return true;
	if (!*locked && cxlcr_pool_lock(m->pool) == 0)
		*locked = true;
	cxlcr_refresh(e, sizeof(*e));
	return cxlcr_host_entry_intact(e, why, len);
}

void cxlcr_hosts_observe(struct cxlcr_hosts_watch *w, const struct cxlcr_hosts_map *m, uint64_t now)
{
	bool locked = false;
	if (memcmp(w->pool_uuid, m->header->pool_uuid, sizeof(w->pool_uuid)) != 0) {
		cxlcr_hosts_watch_init(w, w->lease_ns);   /* a new pool: start over */
		memcpy(w->pool_uuid, m->header->pool_uuid, sizeof(w->pool_uuid));
	}
	cxlcr_refresh(m->entries, CXLCR_HOSTS_MAX * sizeof(*m->entries));
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++) {
		const struct cxlcr_host_entry *e = &m->entries[i];
		struct cxlcr_host_seen *s = &w->entry[i];
		/* The counter before the rest: a beat seen with an older
		 * identity is still a beat. */
		uint64_t counter = __atomic_load_n(&e->counter, __ATOMIC_SEQ_CST);
		s->intact = intact_now(m, e, &locked, s->why, sizeof(s->why));
		uint64_t inc = s->intact ? e->id.incarnation : 0;
		if (s->seen && (s->incarnation != inc || s->counter != counter))
			s->advanced = true;
		if (!s->seen || s->incarnation != inc || s->counter != counter) {
			s->incarnation = inc;
			s->counter = counter;
			s->since_ns = now;
			s->seen = true;
		}
		s->state = s->intact ? __atomic_load_n(&e->state, __ATOMIC_SEQ_CST) : CXLCR_HOST_FREE;
		int tomb = s->intact && s->state == CXLCR_HOST_RUNNING
				   ? cxlcr_tombstone_check(e, i, s->tombstone_why, sizeof(s->tombstone_why))
				   : 0;
		s->tombstone = tomb > 0 ? (uint32_t)tomb : 0;
		if (tomb >= 0)
			s->tombstone_why[0] = 0;
		s->period_ns = s->intact ? e->id.period_ns : 0;
		cxlcr_copy_field(s->name, sizeof(s->name), s->intact ? e->id.name : "");
	}
	if (locked)
		cxlcr_pool_unlock(m->pool);
}

void cxlcr_hosts_watch_restart(struct cxlcr_hosts_watch *w, uint64_t now)
{
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++)
		if (w->entry[i].seen)
			w->entry[i].since_ns = now;
}

void cxlcr_hosts_advanced_reset(struct cxlcr_hosts_watch *w)
{
	for (uint32_t i = 0; i < CXLCR_HOSTS_MAX; i++)
		w->entry[i].advanced = false;
}

/* The silence after which a host is taken for dead: our lease, or four of
 * the host's own periods if it beats more slowly than we expect (a period
 * is a duration, not a time: it can be compared across hosts). */
static uint64_t dead_after(const struct cxlcr_hosts_watch *w, const struct cxlcr_host_seen *s)
{
	uint64_t own = w->lease_ns, theirs = 4 * s->period_ns;
	return theirs > own ? theirs : own;
}

enum cxlcr_host_verdict cxlcr_hosts_judge(const struct cxlcr_hosts_watch *w, uint32_t index, uint64_t now,
					  uint64_t *silent_ns)
{
	const struct cxlcr_host_seen *s = index < CXLCR_HOSTS_MAX ? &w->entry[index] : NULL;
	uint64_t silent = s && s->seen ? now - s->since_ns : 0;
	if (silent_ns)
		*silent_ns = silent;
	if (!s || !s->seen)
		return CXLCR_VERDICT_UNUSED;
	if (!s->intact)
		return CXLCR_VERDICT_CORRUPT;
	if (s->state == CXLCR_HOST_FREE)
		return CXLCR_VERDICT_UNUSED;
	if (s->state == CXLCR_HOST_LEFT)
		return CXLCR_VERDICT_LEFT;
	if (s->tombstone)
		return CXLCR_VERDICT_DEAD;   /* its last word: no need to wait for the lease */
	if (silent >= dead_after(w, s))
		return CXLCR_VERDICT_DEAD;
	if (silent >= 2 * s->period_ns)
		return CXLCR_VERDICT_SUSPECT;
	return s->advanced ? CXLCR_VERDICT_ALIVE : CXLCR_VERDICT_WATCHING;
}

void cxlcr_hosts_claims_begin(struct cxlcr_hosts_watch *w)
{
	for (uint32_t i = 0; i < w->claims; i++)
		w->claim[i].seen = false;
}

bool cxlcr_hosts_claim_stale(struct cxlcr_hosts_watch *w, uint32_t entry, uint32_t slot, uint64_t token,
			     uint64_t now)
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

void cxlcr_hosts_claims_end(struct cxlcr_hosts_watch *w)
{
	uint32_t kept = 0;
	for (uint32_t i = 0; i < w->claims; i++)
		if (w->claim[i].seen)
			w->claim[kept++] = w->claim[i];
	w->claims = kept;
}
