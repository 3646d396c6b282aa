/*
 * The snapshot catalog: snapshots found by name, borrowed by whoever uses
 * them, freed when the last borrower returns them. The protocol and the
 * on-device layout are described in pool_format.h (struct
 * cxlcr_catalog_entry); in short:
 *
 *   publish    a complete snapshot becomes findable under a name
 *   borrow     look the name up (borrow_begin), take a reference and check
 *              that the entry is still the one looked up (borrow_confirm)
 *   return     drop the reference; the last one of a tombstoned snapshot
 *              frees its region
 *   tombstone  no new borrows; freed now if nobody holds it, else later
 *   reap       drop the borrows of processes that died, and finish what a
 *              dead process left half done
 *
 * Any process on any host of the pod may call any of these at any time:
 * borrowing, returning and tombstoning take no lock (only atomics on the
 * pool), publishing takes the pool lock.
 */
#ifndef CXLCR_CATALOG_H
#define CXLCR_CATALOG_H

#include <stdbool.h>
#include <stdint.h>
#include "pool.h"

/* A stable copy of one catalog entry. */
struct cxlcr_catalog_info {
	uint32_t index;              /* of the entry in the catalog */
	uint32_t state;              /* enum cxlcr_catalog_state */
	uint64_t generation;
	uint32_t refcount;           /* references held (bits of holders) */
	uint32_t slots_claimed;      /* borrow slots in use, with or without a reference */
	uint32_t holds;              /* references held by snapshot regions (cxlcr_catalog_entry only) */
	uint32_t holds_orphaned;     /* ... whose region is gone (a reaper takes them back) */
	uint64_t holders;
	uint64_t snapshot_generation;
	uint64_t published_ns;
	char     name[CXLCR_NAME_MAX];
};

/* Who a borrow is recorded for. Zero fields mean: this process, this host.
 * A daemon that restores a child borrows for the child's pid, so that the
 * borrow ends when the child does. A borrow for a process of another host
 * lives as long as that host's heartbeat goes on (hosts.h). */
struct cxlcr_borrower {
	int32_t pid;
	const char *host;
};

/* One borrow, from borrow_begin() to return. */
struct cxlcr_borrow {
	uint32_t entry;              /* index of the catalog entry */
	uint32_t slot;               /* its borrow slot, once confirmed */
	uint64_t generation;         /* of the entry when it was looked up */
	uint64_t token;              /* our claim of the slot; 0 until confirmed */
	uint64_t snapshot_generation;   /* the snapshot's region: cxlcr_snapshot_open() takes it */
	char     name[CXLCR_NAME_MAX];
};

/* What cxlcr_catalog_reap() did. */
struct cxlcr_reap_report {
	uint32_t borrows_dropped;    /* slots of dead borrowers taken back */
	uint32_t references_dropped; /* ... of which held a reference */
	uint32_t snapshots_freed;    /* tombstoned snapshots whose last borrower was dead */
	uint32_t entries_repaired;   /* left half published or half freed by a dead process */
};

/*
 * Makes the complete snapshot with this region generation findable as name.
 * The snapshot is validated first; a name that is already published, or a
 * snapshot that already is, is refused. Creates the catalog on first use.
 */
int cxlcr_catalog_publish(struct cxlcr_pool *pool, const char *name, uint64_t snapshot_generation,
			  struct cxlcr_catalog_info *out);

/*
 * The same, but a snapshot already published as name is replaced: the new
 * one is published first and the old one tombstoned after, so that a
 * replacer that dies at any instant leaves name published (a borrower in
 * between takes either; a lookup takes the newest).
 */
int cxlcr_catalog_replace(struct cxlcr_pool *pool, const char *name, uint64_t snapshot_generation,
			  struct cxlcr_catalog_info *out);

/* The published entry called name; fails if there is none. */
int cxlcr_catalog_find(struct cxlcr_pool *pool, const char *name, struct cxlcr_catalog_info *out);

/* The snapshot regions the catalog names (entries in any state but FREE),
 * at most max of them, in one look: their count, or -1. */
int cxlcr_catalog_snapshots(struct cxlcr_pool *pool, uint64_t *snapshots, uint32_t max);

/* Entry index, whatever its state (for listings and tests). */
int cxlcr_catalog_entry(struct cxlcr_pool *pool, uint32_t index, struct cxlcr_catalog_info *out);

/*
 * Borrowing, in two steps (cxlcr_catalog_borrow() does both):
 *   borrow_begin    looks name up: which entry, at which generation;
 *   borrow_confirm  claims a borrow slot, takes a reference, and checks
 *                   that the entry still is that generation and published.
 *                   If it is not (tombstoned, or freed and reused in
 *                   between) the reference is dropped again and it fails.
 * who may be NULL (see struct cxlcr_borrower). While the borrow is held the
 * snapshot's region stays allocated.
 */
int cxlcr_catalog_borrow_begin(struct cxlcr_pool *pool, const char *name, struct cxlcr_borrow *b);
int cxlcr_catalog_borrow_confirm(struct cxlcr_pool *pool, const struct cxlcr_borrower *who,
				 struct cxlcr_borrow *b);
/* Both steps; looks the name up again (a few times) when the entry was
 * replaced between them. */
int cxlcr_catalog_borrow(struct cxlcr_pool *pool, const char *name, const struct cxlcr_borrower *who,
			 struct cxlcr_borrow *b);

/* Ends a borrow. The snapshot must no longer be mapped by the borrower:
 * if this was the last reference of a tombstoned snapshot, its region is
 * freed here. Fails if the borrow was reaped meanwhile. */
int cxlcr_catalog_return(struct cxlcr_pool *pool, struct cxlcr_borrow *b);

/* Stops new borrows of name (of every entry published as name). If nobody
 * holds it, its snapshot is freed now (*freed = true), else by the last
 * borrower to return it. */
int cxlcr_catalog_tombstone(struct cxlcr_pool *pool, const char *name, bool *freed);

/*
 * Drops every borrow whose holder is gone: a process of this host (and pid
 * namespace) that no longer exists. Frees the tombstoned snapshots that
 * leaves without borrowers, and finishes publishes and frees that a dead
 * process left half done. report may be NULL. Returns the number of
 * borrows dropped, or -1.
 */
int cxlcr_catalog_reap(struct cxlcr_pool *pool, struct cxlcr_reap_report *report);

/*
 * Holds: borrows made in the name of a snapshot region (an incremental
 * snapshot on each of its bases), not of a process. cxlcr_catalog_hold
 * borrows entry (still of entry_generation, published or a tombstone) for
 * the region holder_region; the hold lasts until that region is freed with
 * cxlcr_snapshot_region_free(), which takes back the holds its header
 * lists (and may so free its bases), or until a reaper finds the region
 * gone. cxlcr_catalog_release_holds takes back holds not yet recorded in
 * a header; cxlcr_catalog_release_region_holds those a snapshot region's
 * header lists, without freeing the region (one kept in quarantine).
 */
struct cxlcr_snapshot_base;
int cxlcr_catalog_hold(struct cxlcr_pool *pool, uint32_t entry, uint64_t entry_generation,
		       uint64_t holder_region, uint32_t *slot, uint64_t *token);
int cxlcr_catalog_release_holds(struct cxlcr_pool *pool, const struct cxlcr_snapshot_base *bases, uint32_t n);
int cxlcr_catalog_release_region_holds(struct cxlcr_pool *pool, const struct cxlcr_region *snapshot);
int cxlcr_snapshot_region_free(struct cxlcr_pool *pool, uint64_t generation);

/*
 * The same, by a reaper that lives long enough to watch: it also drops the
 * borrows of hosts whose heartbeat it has seen stand still for a whole
 * lease, and slots left claimed but not filled in (or half emptied) that
 * long. now is the reaper's CLOCK_MONOTONIC (cxlcr_mono_ns()); what it saw
 * is kept in watch between calls (cxlcr_hosts_watch_init() first).
 */
struct cxlcr_hosts_watch;
int cxlcr_catalog_reap_watched(struct cxlcr_pool *pool, struct cxlcr_hosts_watch *watch, uint64_t now,
			       struct cxlcr_reap_report *report);

#endif
