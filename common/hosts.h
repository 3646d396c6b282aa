/*
 * The host table: the pod's membership, in the pool (the layout and the
 * rules are in pool_format.h, struct cxlcr_host_entry).
 *
 *   join / beat / leave   a host's daemon registers (name, control address,
 *                         a new incarnation), bumps its heartbeat counter
 *                         every period, and says `left` when it stops in
 *                         order;
 *   watch / judge         a reader remembers, on its own CLOCK_MONOTONIC,
 *                         since when it has seen each counter unchanged, and
 *                         judges each host alive, suspect, dead or left by
 *                         that alone (docs/pod-membership.md). `cxlcr hosts`
 *                         and the daemon's reaper of snapshot borrows use
 *                         the same judgement.
 */
#ifndef CXLCR_HOSTS_H
#define CXLCR_HOSTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "pool.h"

/* The lease: $CXLCR_LEASE_MS if set (tests shorten it), else
 * CXLCR_CATALOG_LEASE_NS. A host silent for a whole lease is dead. */
uint64_t cxlcr_lease_ns(void);
/* How often a daemon beats: a quarter of the lease, at most
 * CXLCR_HEARTBEAT_PERIOD_MAX_NS (so that a reader can tell a host alive
 * from one sample window of two periods). */
#define CXLCR_HEARTBEAT_PERIOD_MAX_NS (500ull * 1000000ull)
uint64_t cxlcr_heartbeat_period_ns(void);

/* The table, mapped. */
struct cxlcr_hosts_map {
	struct cxlcr_pool *pool;
	void *base;
	size_t size;
	struct cxlcr_hosts_header *header;
	struct cxlcr_host_entry *entries;
};
/* Maps the host table; with create it is made if the pool has none. 1 (and
 * nothing mapped) if there is none and create is false; -1 with one line
 * if it is of another format version or corrupt. */
int cxlcr_hosts_open(struct cxlcr_pool *pool, bool create, struct cxlcr_hosts_map *m);
void cxlcr_hosts_close(struct cxlcr_hosts_map *m);
/* Whether entry e is intact: its identity matches its checksum and its
 * state is known. If not, why (one phrase) in buf. */
bool cxlcr_host_entry_intact(const struct cxlcr_host_entry *e, char *why, size_t len);

/* The pod's key (pool_format.h, struct cxlcr_pod_key) into key. With
 * create, made (random, under the pool lock) with the table if there is
 * none yet. 0; 1 if there is none and create is false; -1 with one line if
 * the key or the table is corrupt. */
int cxlcr_pod_key_get(struct cxlcr_pool *pool, bool create, uint8_t key[CXLCR_POD_KEY_BYTES]);

/* This host's registration, as its daemon holds it. */
struct cxlcr_host_reg {
	uint32_t index;              /* of the entry in the table */
	uint64_t incarnation;        /* 0: not registered */
	uint8_t  pool_uuid[16];      /* the pool it registered in */
};

/* Registers host (with its control address and port, which may be empty
 * and 0) under the pool lock, with an incarnation one above the entry's
 * last; makes the table if the pool has none. */
int cxlcr_host_join(struct cxlcr_pool *pool, const char *host, const char *address, uint32_t port,
		    uint64_t period_ns, struct cxlcr_host_reg *reg);
/* One beat. Fails (and forgets the registration) if the entry is no longer
 * ours: the pool was formatted again, or another daemon registered as this
 * host since. */
int cxlcr_host_beat(struct cxlcr_pool *pool, struct cxlcr_host_reg *reg);
/* The daemon stops in order: its entry says `left`. */
void cxlcr_host_leave(struct cxlcr_pool *pool, struct cxlcr_host_reg *reg);
/* The entry of host while its daemon runs (and its incarnation), or -1. */
int cxlcr_host_lookup(struct cxlcr_pool *pool, const char *host, uint64_t *incarnation);
/* The same, with the entry's whole identity (its control address). */
int cxlcr_host_lookup_id(struct cxlcr_pool *pool, const char *host, struct cxlcr_host_identity *id);

/* What one reader has seen of every entry, in its own memory. */
struct cxlcr_hosts_watch {
	uint64_t lease_ns;
	uint8_t  pool_uuid[16];
	struct cxlcr_host_seen {
		uint64_t incarnation, counter, period_ns, state;
		uint64_t since_ns;       /* our monotonic clock when we first saw this counter */
		bool     seen;
		bool     advanced;       /* seen to change since the watch began (or advanced_reset) */
		bool     intact;
		char     name[CXLCR_HOST_MAX];
		char     why[64];        /* what is wrong with it, if not intact */
	} entry[CXLCR_HOSTS_MAX];
	/* Borrow slots of the snapshot catalog seen claimed but not filled in
	 * (or half emptied): which, with which token, since when. A few at
	 * most: claims are filled in within microseconds. */
	struct {
		uint32_t entry, slot;
		uint64_t token, since_ns;
		bool     seen;           /* seen again in the current pass */
	} claim[64];
	uint32_t claims;
};

enum cxlcr_host_verdict {
	CXLCR_VERDICT_UNUSED = 0,    /* a free entry */
	CXLCR_VERDICT_WATCHING,      /* running, not seen to advance yet, silent for less than two periods */
	CXLCR_VERDICT_ALIVE,         /* running, seen to advance, silent for less than two periods */
	CXLCR_VERDICT_SUSPECT,       /* running, seen standing still for two of its periods */
	CXLCR_VERDICT_DEAD,          /* running, seen standing still for a whole lease */
	CXLCR_VERDICT_LEFT,          /* its daemon stopped in order */
	CXLCR_VERDICT_CORRUPT,       /* the entry fails its checks */
};
const char *cxlcr_host_verdict_name(enum cxlcr_host_verdict v);

void cxlcr_hosts_watch_init(struct cxlcr_hosts_watch *w, uint64_t lease_ns);
/* Reads every entry of the table at our time now (CLOCK_MONOTONIC); a
 * table of another pool than the watch's starts the watch afresh. */
void cxlcr_hosts_observe(struct cxlcr_hosts_watch *w, const struct cxlcr_hosts_map *m, uint64_t now);
/* Forgets which entries were seen to advance (a new sample window). */
void cxlcr_hosts_advanced_reset(struct cxlcr_hosts_watch *w);
/* The verdict on entry index at time now, by the last observe; *silent_ns
 * (if given): for how long we have seen its counter unchanged. */
enum cxlcr_host_verdict cxlcr_hosts_judge(const struct cxlcr_hosts_watch *w, uint32_t index, uint64_t now,
					  uint64_t *silent_ns);

/* Claims of borrow slots, watched the same way: a pass starts with
 * claims_begin, every suspect slot is noted (true once its token has stood
 * still for a lease), and claims_end forgets the ones not seen again. */
void cxlcr_hosts_claims_begin(struct cxlcr_hosts_watch *w);
bool cxlcr_hosts_claim_stale(struct cxlcr_hosts_watch *w, uint32_t entry, uint32_t slot, uint64_t token,
			     uint64_t now);
void cxlcr_hosts_claims_end(struct cxlcr_hosts_watch *w);

#endif
