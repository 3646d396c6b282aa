/*
 * Host heartbeats: how a host of the pod tells the others that it lives,
 * without a clock they share (the layout and the rules are in pool_format.h,
 * struct cxlcr_host_heartbeat and the catalog's borrow protocol).
 *
 *   join / beat / leave   a host's daemon takes its slot, bumps its counter
 *                         every period, and says when it stops in order;
 *   watch                 a long-lived reaper on another host remembers, on
 *                         its own CLOCK_MONOTONIC, since when it has seen
 *                         each counter unchanged; a host whose counter stood
 *                         still for a whole lease is taken for dead.
 */
#ifndef CXLCR_HEARTBEAT_H
#define CXLCR_HEARTBEAT_H

#include <stdbool.h>
#include <stdint.h>
#include "pool.h"

/* The lease: $CXLCR_LEASE_MS if set (tests shorten it), else
 * CXLCR_CATALOG_LEASE_NS. A daemon beats four times per lease. */
uint64_t cxlcr_lease_ns(void);

/* This host's slot, as its daemon holds it. */
struct cxlcr_heartbeat {
	uint32_t index;              /* of the slot in the table */
	uint64_t incarnation;        /* 0: not joined */
	uint8_t  pool_uuid[16];      /* the pool it was joined in */
};

/* Takes (or takes again) host's slot with a new incarnation, under the pool
 * lock. 1 if the pool has no catalog yet (nothing to join: no borrow can
 * name this host before there is one). */
int cxlcr_heartbeat_join(struct cxlcr_pool *pool, const char *host, uint64_t period_ns,
			 struct cxlcr_heartbeat *hb);
/* One beat. Fails (and forgets the join) if the slot is no longer ours: the
 * pool was formatted again, or another daemon took this host's name. */
int cxlcr_heartbeat_beat(struct cxlcr_pool *pool, struct cxlcr_heartbeat *hb);
/* The daemon stops in order: its host's borrows are no longer judged by age. */
void cxlcr_heartbeat_leave(struct cxlcr_pool *pool, struct cxlcr_heartbeat *hb);

/* The slot of host's running daemon in table, or -1 (none runs there). */
int cxlcr_heartbeat_lookup(const struct cxlcr_host_heartbeat *table, const char *host,
			   uint64_t *incarnation);

/* What one reaper has seen of every slot, in its own memory. */
struct cxlcr_heartbeat_watch {
	uint64_t lease_ns;
	uint8_t  pool_uuid[16];
	struct {
		uint64_t incarnation, counter;
		uint64_t since_ns;       /* our monotonic clock when we first saw this value */
		uint64_t period_ns;
		bool     seen;
	} slot[CXLCR_HEARTBEAT_SLOTS];
	/* Borrow slots seen claimed but not filled in (or half emptied): which,
	 * with which token, since when. A few at most: claims are filled in
	 * within microseconds. */
	struct {
		uint32_t entry, slot;
		uint64_t token, since_ns;
		bool     seen;           /* seen again in the current pass */
	} claim[64];
	uint32_t claims;
};

void cxlcr_heartbeat_watch_init(struct cxlcr_heartbeat_watch *w, uint64_t lease_ns);
/* Reads every slot of table at our time now (CLOCK_MONOTONIC). */
void cxlcr_heartbeat_observe(struct cxlcr_heartbeat_watch *w, const struct cxlcr_host_heartbeat *table,
			     uint64_t now);
/* Whether slot index has a running daemon whose counter we have seen stand
 * still for a whole lease (judged at the last observe, at time now). */
bool cxlcr_heartbeat_stalled(const struct cxlcr_heartbeat_watch *w, uint32_t index, uint64_t now);

/* Claims of borrow slots, watched the same way: a pass starts with
 * claims_begin, every suspect slot is noted (true once its token has stood
 * still for a lease), and claims_end forgets the ones not seen again. */
void cxlcr_heartbeat_claims_begin(struct cxlcr_heartbeat_watch *w);
bool cxlcr_heartbeat_claim_stale(struct cxlcr_heartbeat_watch *w, uint32_t entry, uint32_t slot,
				 uint64_t token, uint64_t now);
void cxlcr_heartbeat_claims_end(struct cxlcr_heartbeat_watch *w);

#endif
