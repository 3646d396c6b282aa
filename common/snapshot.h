/*
 * Snapshots of an arena, for remote fork (the CXLfork path).
 *
 * A snapshot is an immutable copy of an arena's heap at one freeze point,
 * in a region of its own: the heap's non-zero pages are copied into it, and
 * a leaf table gives, for every page of the heap, its tier (zero, CXL, cold)
 * and device-relative offset. The layout is in pool_format.h (struct
 * cxlcr_snapshot_header). Snapshots are found by name through the catalog
 * (catalog.h), which also decides when one may be freed.
 */
#ifndef CXLCR_SNAPSHOT_H
#define CXLCR_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include "pool.h"

/* What cxlcr_snapshot_create() made, and how long it took. */
struct cxlcr_snapshot_info {
	uint64_t region_generation;  /* the snapshot's region: cxlcr_snapshot_open() takes it */
	uint64_t region_offset;
	uint64_t region_size;
	uint64_t heap_address;
	uint64_t heap_size;
	uint64_t pages_total;
	uint64_t pages_cxl;          /* stored: in this snapshot or in its bases */
	uint64_t pages_own;          /* copied into this snapshot */
	uint32_t base_count;         /* earlier snapshots whose copies it shares (incremental) */
	uint64_t pages_zero;         /* not stored */
	uint64_t holes_skipped;      /* zero pages skipped without reading them (file pools) */
	uint64_t pages_refreshed;    /* cxlcr_snapshot_finish(): pages that changed after the draft */
	uint64_t pages_written;      /* ... of which written pages it looked at (tracked finish) */
	bool tracked;                /* the finish copied only written pages, compared none */
	uint32_t punches_logged;     /* punches whose pages the arena's punch log gave */
	const char *compared_because; /* why every page was compared (NULL: it was not) */
	uint64_t scan_ns;            /* finding the non-zero pages */
	uint64_t written_ns;         /* finish: the written pages (or every page, comparing) */
	uint64_t holes_ns;           /* finish: pages punched out since the draft */
	uint64_t publish_ns;         /* finish: the tables, the header copy, the header */
	uint64_t copy_ns;            /* copying them and writing the table */
	uint64_t total_ns;
};

/*
 * Copies the heap of the live arena region with this generation into a new
 * snapshot region called name (a region name: see cxlcr_valid_name): every
 * non-zero 4 KiB page is copied, zero pages are only recorded in the leaf
 * table. The snapshot is complete (and visible to other hosts) when this
 * returns 0; on failure nothing is left behind.
 *
 * This function only copies. The caller freezes the service first and
 * resumes it afterwards (and, on a non-coherent device, has the service's
 * host write its cached arena lines back before): pages that change while
 * the copy runs end up in the snapshot in any state, or as zero.
 *
 * The arena must have been attached (its header names its heap address).
 */
int cxlcr_snapshot_create(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
			  struct cxlcr_snapshot_info *out);
/* The same, in a freeze whose scan of the written pages has just re-armed
 * the whole heap (tracking/track.h): the snapshot notes the arena's scan
 * count, so that the next one can be incremental on it. Without that note
 * a fresh snapshot made in the freeze (no draft, or a draft that could not
 * be finished) would turn the next one full. */
int cxlcr_snapshot_create_tracked(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
				  struct cxlcr_snapshot_info *out);

/*
 * A snapshot in two steps, so that the service is frozen only for the
 * second: cxlcr_snapshot_draft() does all of cxlcr_snapshot_create() but
 * the header, while the service runs (the region is no snapshot yet, and
 * nobody can open it); cxlcr_snapshot_finish(), in the freeze, compares
 * each page of the arena with the draft, copies again the ones that
 * changed, and publishes the snapshot. Comparing reads the heap twice but
 * allocates nothing, which is most of what a copy costs. finish returns 1
 * (and leaves the draft) when a page that was zero in the draft holds data
 * now: the packed draft has no room for it, and the caller frees the draft
 * and calls cxlcr_snapshot_create() instead.
 */
int cxlcr_snapshot_draft(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
			 struct cxlcr_snapshot_info *out);

/*
 * An incremental draft: like cxlcr_snapshot_draft(), but only the pages of
 * `since` (written since base's finish, as write tracking found them, see
 * tracking/track.h), those past base's heap and those of bases it would
 * rather not keep are copied; every other leaf is base's, and the draft
 * holds a catalog borrow on each snapshot whose data it uses (base, the
 * catalog entry base_entry of base_entry_generation, which the caller
 * holds while this runs, and base's own bases). Returns 1 when base cannot
 * serve (another heap, not tracked at its finish, a base going away): the
 * caller makes a full draft; so does a draft whose leaves would make more
 * than max_runs runs (0: no bound; a fork child maps each run, see
 * CXLCR_SNAPSHOT_INCREMENTAL_RUNS_MAX). Its finish is cxlcr_snapshot_finish(), as for
 * any draft; a page shared with a base that changes meanwhile is copied
 * into room the draft leaves for it. since NULL: the writes since base
 * are not known (a recovery point that failed after its scan, a fork
 * child that ran, tracking lost and found again), and every page is
 * compared with base's copy instead: the draft reads the whole heap, but
 * stores only what changed, where a full draft would need as much pool
 * space again as the heap.
 */
struct cxlcr_snapshot;
struct cxlcr_written;
int cxlcr_snapshot_draft_on(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
			    const struct cxlcr_snapshot *base, uint32_t base_entry, uint64_t base_entry_generation,
			    const struct cxlcr_written *since, uint64_t max_runs, struct cxlcr_snapshot_info *out);

/*
 * With write tracking (tracking/track.h) the finish need not compare: the
 * caller re-arms the heap's written pages right before the draft copy and
 * notes that on the draft (tracked, and the arena's fork_count then); in
 * the freeze it scans again, and passes what was written since as written:
 * only those pages are copied again. written NULL compares every page.
 */
struct cxlcr_written;
int cxlcr_snapshot_draft_note(struct cxlcr_pool *pool, const char *name, bool tracked, uint64_t fork_count);
/* The draft's notes: 0, or -1 if there is no such draft. */
int cxlcr_snapshot_draft_notes(struct cxlcr_pool *pool, const char *name, bool *tracked, uint64_t *fork_count);
int cxlcr_snapshot_finish(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
			  const struct cxlcr_written *written, struct cxlcr_snapshot_info *out);
/* Pre-copy: brings a draft up to date with the pages written since the
 * last scan (written) while the service runs, so that its finish has less
 * to copy in the freeze (snapshot_draft.c says why that is safe). 0 and
 * the pages it changed in *refreshed; 1 if its room ran out, with the
 * written ranges it could not bring up to date in *left, which the finish
 * must take as written too (the scan that found them re-armed them: no
 * later scan reports them); 1 with nothing in *left if the heap grew (its
 * finish copies afresh); -1 on error (nothing of written is known done). */
int cxlcr_snapshot_draft_refresh(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
				 const struct cxlcr_written *written, uint64_t *refreshed, struct cxlcr_written *left);
/* The finish without its seal, for the freeze: the copies and the header
 * of the freeze instant; the snapshot is not one until
 * cxlcr_snapshot_seal() (the run table, the checksums, `complete`), which
 * reads only the snapshot's region and so runs once the service goes on.
 * Sealing a sealed snapshot does nothing. out's page counts are the
 * seal's. */
int cxlcr_snapshot_finish_unsealed(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
				   const struct cxlcr_written *written, struct cxlcr_snapshot_info *out);
struct cxlcr_snapshot_seal_info {
	uint64_t pages_zero, pages_cxl, runs;
	uint64_t seal_ns;
};
int cxlcr_snapshot_seal(struct cxlcr_pool *pool, uint64_t generation, struct cxlcr_snapshot_seal_info *out);

/* An open snapshot: its region mapped read-only, its header and run table
 * checked (copies). */
struct cxlcr_snapshot {
	struct cxlcr_pool *pool;
	struct cxlcr_region region;               /* copy of its region entry */
	struct cxlcr_snapshot_header header;      /* copy, as checked */
	const uint8_t *base;                      /* the mapped region */
	const uint64_t *leaves;                   /* the leaf table in the pool: checked by
						     cxlcr_snapshot_validate() only */
	struct cxlcr_snapshot_run *runs;          /* copy, as checked: what a page is */
	uint64_t run_count;
	/* The data of its bases (an incremental snapshot), mapped read-only:
	 * a CXL leaf points into its own data area or into one of these. */
	uint32_t base_count;
	struct {
		uint64_t lo, hi;                  /* pool offsets */
		const uint8_t *map;
	} bases[CXLCR_SNAPSHOT_BASES_MAX];
};

/* The copy a CXL leaf's offset names, in the snapshot or one of its
 * bases, mapped; NULL if it lies in neither (checked on open: never). */
const uint8_t *cxlcr_snapshot_copy(const struct cxlcr_snapshot *s, uint64_t offset);

/*
 * Opens the snapshot region with this generation and checks its header and
 * run table, which is all a fork reads: a region that is not a snapshot,
 * or a snapshot that is incomplete, corrupt (magic, version, checksums,
 * layout, runs out of range or out of order), truncated (bigger than its
 * region) or foreign (another pool's, another region's), is refused with
 * one line saying so. It costs the same for any heap size.
 */
int cxlcr_snapshot_open(struct cxlcr_pool *pool, uint64_t snapshot_generation,
			struct cxlcr_snapshot *s);
void cxlcr_snapshot_close(struct cxlcr_snapshot *s);

/* Whether name is one the snapshot verb gives service's snapshots
 * ("SERVICE.sDIGITS", of at most the first CXLCR_SNAPSHOT_NAME_PREFIX
 * characters of SERVICE): its recovery points, forks' and operators'. */
#define CXLCR_SNAPSHOT_NAME_PREFIX 40
/* Set (to 1) in CRIU's environment for a recovery point's dump: if the
 * draft cannot be brought up to date in the freeze, the plugin fails the
 * dump instead of copying the whole heap while the service is frozen. */
#define CXLCR_SNAPSHOT_DRAFT_ONLY_ENV "CXLCR_SNAPSHOT_DRAFT_ONLY"
bool cxlcr_snapshot_named_for(const char *name, const char *service);

/* Opens, checks the leaf table too (its checksum, every leaf against its
 * run) and closes again: 0 if the snapshot is whole and ours. A snapshot
 * is validated when it is published in the catalog. */
int cxlcr_snapshot_validate(struct cxlcr_pool *pool, uint64_t snapshot_generation);

/*
 * Gives back what a published snapshot reserved and did not use: the room
 * its draft left for the pages its finish might copy (as many pages again
 * as it copied, so that a finish never runs out under a steady load; a
 * finish uses a small part), and for the runs it might add. The data area
 * ends with the copies and the arena header's copy follows them, so the
 * unused room is the region's tail: the region shrinks to what it holds,
 * and the pool may hand that space out again (on any pool: a devdax
 * device's memory too). The run table's room, inside the region, becomes
 * a hole in a pool file. The snapshot is immutable once published:
 * nothing reads or writes past its data. *freed (if given): the bytes
 * given back.
 */
int cxlcr_snapshot_trim(struct cxlcr_pool *pool, uint64_t snapshot_generation, uint64_t *freed);

/* Where page page_index of the heap lives: its tier (enum cxlcr_page_tier)
 * and device-relative offset (0 for a zero page), from the runs. */
int cxlcr_snapshot_page_offset(const struct cxlcr_snapshot *s, uint64_t page_index,
			       uint32_t *tier, uint64_t *offset);

/* The leaf of page page_index (< header.page_count) of an open snapshot.
 * cursor (start at 0) keeps the run last found: ascending look-ups cost
 * O(1) each. */
uint64_t cxlcr_snapshot_leaf(const struct cxlcr_snapshot *s, uint64_t page_index, uint64_t *cursor);

/* The maximal runs of a leaf table of `pages` leaves (struct
 * cxlcr_snapshot_run in pool_format.h): their number; the first cap of
 * them are written to runs. */
uint64_t cxlcr_snapshot_table_runs(const uint64_t *leaves, uint64_t pages, struct cxlcr_snapshot_run *runs,
				   uint64_t cap);

/* Copies page page_index of the snapshotted heap into buf
 * (CXLCR_SNAPSHOT_PAGE_SIZE bytes): the stored copy, or zeros. Cold pages
 * are refused: tier_read_page() (tier/tier.h) reads those. */
int cxlcr_snapshot_read_page(const struct cxlcr_snapshot *s, uint64_t page_index, void *buf);

/*
 * Splitting a snapshot between CXL and a cold tier (tier/ is the sink):
 * cxlcr_snapshot_split() makes a snapshot called name of the complete
 * snapshot source (which it leaves as it is): the non-zero pages whose bit
 * is set in hot (one bit per heap page, hot_pages of them: pages past them
 * count as cold) are copied into its region, every
 * other non-zero page is handed to the sink, zero pages go nowhere. Its
 * cold leaves point into the extent begin() chose, in heap order; its
 * header's `cold` says where, with the CRC-32C of every cold page in a
 * table of the region. On failure nothing is left (the region is freed,
 * and with it the extent: see tier/format.h).
 */
struct cxlcr_cold_sink {
	void *ctx;
	/* The new region exists: find room for `pages` cold pages owned by
	 * it; fill in server, server_incarnation, extent_offset, extent_size. */
	int (*begin)(void *ctx, uint64_t region_generation, uint64_t pages, struct cxlcr_snapshot_cold *cold);
	/* Cold page k (heap order): store it at extent_offset + k * 4 KiB. */
	int (*page)(void *ctx, uint64_t k, const void *page);
	/* Every page was given: 0 once they are all stored. */
	int (*end)(void *ctx);
};
int cxlcr_snapshot_split(struct cxlcr_pool *pool, uint64_t source, const uint64_t *hot, uint64_t hot_pages,
			 const char *name, const struct cxlcr_cold_sink *sink, struct cxlcr_snapshot_info *out);
/* The checksum a snapshot header's `cold` carries. */
uint32_t cxlcr_snapshot_cold_checksum(const struct cxlcr_snapshot_cold *c);

/* The heap pages of cur whose contents differ from prev's (two snapshots
 * of one arena): a malloc'd, ascending list of page indexes. A page whose
 * copy in prev is cold (on the cold tier) is not listed: not compared.
 * Where cur is incremental on prev, the pages it copied are listed
 * without comparing them (it copied them because they were written). */
int cxlcr_snapshot_changed_pages(const struct cxlcr_snapshot *prev, const struct cxlcr_snapshot *cur,
				 uint64_t **pages, uint64_t *count);

#endif
