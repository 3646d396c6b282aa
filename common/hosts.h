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
#include <sys/types.h>
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

/* A tombstone (pool_format.h, struct cxlcr_tombstone) for the entry index
 * and incarnation given, its checksum made. What the kernel module writes
 * from a panic; `cxlcr pod crash --panic` writes the same with this. */
void cxlcr_tombstone_fill(struct cxlcr_tombstone *t, uint32_t index, uint64_t incarnation, uint32_t reason,
			  uint64_t time_ns);
/* What entry e's tombstone says: 0 none (or one of an older incarnation),
 * the reason (enum cxlcr_tombstone_reason) of a valid one for the entry's
 * incarnation, -1 (and why, one phrase) if it is set but fails its checks. */
int cxlcr_tombstone_check(const struct cxlcr_host_entry *e, uint32_t index, char *why, size_t len);
const char *cxlcr_tombstone_reason_name(uint32_t reason);
/* Writes host's tombstone as its kernel would as it dies (the test path of
 * the panic notifier: cxlcr pod crash --panic). -1 with one line if the
 * host has no running entry. */
int cxlcr_host_write_tombstone(struct cxlcr_pool *pool, const char *host, uint32_t reason);

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
/* Fencing (pool_format.h, struct cxlcr_host_entry: fence, fence_ack).
 * host_fence: the host of entry index, judged dead at this incarnation, is
 * fenced by winner (an entry index): 1 if this call won (*fence is the new
 * fence word), 0 if it was fenced already or is not that incarnation
 * running any more, -1 with one line. host_fenced: whether entry index is
 * fenced (not acknowledged yet), its fence word, and whether the winner's
 * recovery is done. host_fence_done: the winner's recovery of fence word
 * `fence` is over, if the word is still `fence` (1; 0 if it moved on, -1
 * with one line). host_fence_ack: the host acknowledges fence word
 * `fence` (after killing its old services), only while that recovery is
 * done: 1 if it did, 0 if not (reopened meanwhile), -1 with one line.
 * host_fence_reopen: a recovery of fence word `fence` that was done goes
 * on (a retry, or an operator's restore of a service it left down), so
 * that the host, should it come back, waits for it again: 1 if reopened,
 * 0 if the host has acknowledged already, or the word moved on, or the
 * recovery is not done (both under the pool lock, so that a host frees
 * its quarantined regions and acknowledges either before a reopen or after
 * the recovery is done again, never in between). */
int cxlcr_host_fence(struct cxlcr_pool *pool, uint32_t index, uint64_t incarnation, uint32_t winner,
		     uint64_t *fence);
int cxlcr_host_fenced(struct cxlcr_pool *pool, uint32_t index, uint64_t *fence, bool *done);
int cxlcr_host_fence_done(struct cxlcr_pool *pool, uint32_t index, uint64_t fence);
int cxlcr_host_fence_ack(struct cxlcr_pool *pool, uint32_t index, uint64_t fence);
int cxlcr_host_fence_reopen(struct cxlcr_pool *pool, uint32_t index, uint64_t fence, uint64_t by);
/* A reopening by an operator's restore (restore_elsewhere.c) stores, as
 * `by`, fence_by_hand() of the process that works on it (its host entry,
 * its pid and start time, cxlcr_process_start()), not 0: the winner does
 * not take it for an unfinished recovery of its own
 * (fence_reopened_by_hand(), which also says whose: *host_index, if not
 * NULL), and if that process ends before it marks the recovery done
 * again, its host's daemon does (host_fence_close_by_hand(host_index):
 * every entry reopened by a process of that host that has ended, as this
 * process sees that host's processes, is marked done; how many, or -1
 * with one line; the first max of their pids in pids). A reused pid has another start time: it is not the
 * restore. */
uint64_t cxlcr_fence_by_hand(uint32_t host_index, pid_t pid, uint64_t start);
bool cxlcr_fence_reopened_by_hand(struct cxlcr_pool *pool, uint32_t index, uint32_t *host_index);
int cxlcr_host_fence_close_by_hand(struct cxlcr_pool *pool, uint32_t host_index, pid_t *pids, int max);
/* The host entry whose work a recovery is now (fence word fence, its
 * fence_done done): the host of an operator's restore that reopened it
 * by hand, or else its winner. A take-over is judged on that host. */
static inline uint32_t cxlcr_fence_by_hand_host(uint64_t done)
{
	return (uint32_t)(done >> CXLCR_FENCE_BY_HAND_HOST) & 63;
}
static inline uint32_t cxlcr_fence_worker(uint64_t fence, uint64_t done)
{
	return (done & CXLCR_FENCE_BY_HAND) ? cxlcr_fence_by_hand_host(done) : (uint32_t)(fence & 0xff) - 1;
}
/* The winner of fence word `from` on entry index died before its recovery
 * was done (or the host of a restore by hand that reopened it,
 * cxlcr_fence_worker()): gone, the entry judged gone, whose work the
 * recovery must still be (else nothing is done); winner (an entry index)
 * takes the recovery over, with a fence
 * word one generation on (a compare-and-set under the pool lock, so that
 * each change the old winner's recovery makes under host_fence_guard was
 * made either before it or never). 1 if this call won (*fence is the new
 * word), 0 if the word is not `from` any more or its recovery is done,
 * -1 with one line. */
int cxlcr_host_fence_take_over(struct cxlcr_pool *pool, uint32_t index, uint64_t from, uint32_t gone, uint32_t winner,
			       uint64_t *fence);
/* A recovery under fence word `fence` of entry index: from now on, pool
 * changes nothing in its region table once the word has moved on (taken
 * over: cxlcr_pool_guard). m keeps the table mapped meanwhile; the caller
 * ends it with host_fence_unguard. */
int cxlcr_host_fence_guard(struct cxlcr_pool *pool, uint32_t index, uint64_t fence, struct cxlcr_hosts_map *m);
/* The same for a recovery reopened by a restore by hand (by_hand: its
 * fence_done word, cxlcr_fence_by_hand(); 0: as host_fence_guard): its
 * changes are refused too once the reopening was closed (the restore's
 * process ended, and its host's daemon marked the recovery done again),
 * even if a later restore by hand has reopened it since. */
int cxlcr_host_fence_guard_by_hand(struct cxlcr_pool *pool, uint32_t index, uint64_t fence, uint64_t by_hand,
				   struct cxlcr_hosts_map *m);
/* The fenced host frees what it left quarantined only while the recovery
 * of fence word `fence` is done (the same guard on its fence_done word):
 * a recovery reopened meanwhile stops its frees. */
int cxlcr_host_done_guard(struct cxlcr_pool *pool, uint32_t index, uint64_t fence, struct cxlcr_hosts_map *m);
void cxlcr_host_fence_unguard(struct cxlcr_pool *pool, struct cxlcr_hosts_map *m);

/* The entry of host while its daemon runs (and its incarnation), or -1. */
int cxlcr_host_lookup(struct cxlcr_pool *pool, const char *host, uint64_t *incarnation);
/* The same, with the entry's whole identity (its control address). */
int cxlcr_host_lookup_id(struct cxlcr_pool *pool, const char *host, struct cxlcr_host_identity *id);
/* The pool lock as a look without it sees it: 0 free, 1 held. host gets
 * the name of the host its word names (CXLCR_LOCK_HOST), "" if it names
 * none or that entry is not intact; *takeovers how often a holder's lock
 * was taken from it. */
int cxlcr_pool_lock_holder(struct cxlcr_pool *pool, char *host, size_t len, uint64_t *takeovers);

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
		uint32_t tombstone;      /* the reason of a valid tombstone of this incarnation; 0: none */
		char     tombstone_why[48]; /* a tombstone refused: why ("" if none) */
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
	/* The status word of each catalog entry whose tombstone this reaper
	 * has let go of its dump and bases (common/catalog.c, settle_entry). */
	uint64_t let_go[CXLCR_CATALOG_ENTRIES];
};

enum cxlcr_host_verdict {
	CXLCR_VERDICT_UNUSED = 0,    /* a free entry */
	CXLCR_VERDICT_WATCHING,      /* running, not seen to advance yet, silent for less than two periods */
	CXLCR_VERDICT_ALIVE,         /* running, seen to advance, silent for less than two periods */
	CXLCR_VERDICT_SUSPECT,       /* running, seen standing still for two of its periods */
	CXLCR_VERDICT_DEAD,          /* running, seen standing still for a whole lease, or its tombstone seen */
	CXLCR_VERDICT_LEFT,          /* its daemon stopped in order */
	CXLCR_VERDICT_CORRUPT,       /* the entry fails its checks */
};
const char *cxlcr_host_verdict_name(enum cxlcr_host_verdict v);

void cxlcr_hosts_watch_init(struct cxlcr_hosts_watch *w, uint64_t lease_ns);
/* Reads every entry of the table at our time now (CLOCK_MONOTONIC); a
 * table of another pool than the watch's starts the watch afresh. */
void cxlcr_hosts_observe(struct cxlcr_hosts_watch *w, const struct cxlcr_hosts_map *m, uint64_t now);
/* The reader was away (stalled) until now: every silence it measured so
 * far starts again from now. */
void cxlcr_hosts_watch_restart(struct cxlcr_hosts_watch *w, uint64_t now);
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
