/*
 * What the parts of common/snapshot*.c share, and nothing else includes:
 * snapshot.c takes snapshots (the arena as a source, the two passes, the
 * layout, publishing) and reads them; snapshot_draft.c makes incremental
 * drafts and finishes drafts in the freeze; snapshot_split.c makes a
 * tiered snapshot of a snapshot.
 */
#ifndef CXLCR_SNAPSHOT_INTERNAL_H
#define CXLCR_SNAPSHOT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include "arena.h"
#include "pool.h"
#include "snapshot.h"

#define PAGE ((uint64_t)CXLCR_SNAPSHOT_PAGE_SIZE)
#define LEAF_SIZE sizeof(uint64_t)
#define RUN_SIZE sizeof(struct cxlcr_snapshot_run)
#ifndef MADV_POPULATE_READ   /* Linux 5.14; older C libraries lack the names */
#define MADV_POPULATE_READ  22
#define MADV_POPULATE_WRITE 23
#endif

/* The arena being copied. */
struct source {
	struct cxlcr_region region;
	uint8_t *base;               /* the arena region's header, mapped */
	struct cxlcr_heap extents;   /* where the heap lies in the pool */
	const uint8_t *heap;         /* the whole heap, mapped in one range */
	uint64_t heap_size;
	uint64_t heap_address;       /* where its owner maps the heap */
	uint64_t pages;
};

int snap_open_source(struct cxlcr_pool *pool, uint64_t arena_generation, struct source *src);
void snap_close_source(struct source *src);

/* Pass 1: which pages hold data. */
struct page_map {
	uint64_t *bits;              /* bit i: heap page i is not zero */
	uint64_t pages;
	uint64_t nonzero;
	uint64_t holes_skipped;      /* zero pages never read */
};

/* The first page at or after i whose bit is `set`, or m->pages. */
uint64_t snap_next_page_with(const struct page_map *m, uint64_t i, bool set);
bool snap_page_is_zero(const uint8_t *page);
/* The next stretch [*lo, *hi) of the heap at or after from that may hold
 * data (not a hole of the pool file), within one extent. */
bool snap_heap_next_data(const struct cxlcr_pool *pool, const struct source *src, uint64_t from, uint64_t *lo,
			 uint64_t *hi);
void snap_prefault(void *p, uint64_t len, int how);

/* Runs: the leaf the page after a leaf has in the same run. */
uint64_t snap_next_in_run(uint64_t leaf);

/* Pass 2: the layout of a snapshot region, the copy, publishing. */
struct layout {
	uint64_t table_offset, table_size;
	uint64_t run_offset, run_count;
	uint64_t data_offset, data_size;
	uint64_t arena_header_offset;
	uint64_t region_size;
};

void snap_plan_layout(uint64_t pages, uint64_t nonzero, uint64_t runs, struct layout *l);
void snap_copy_to_pool(uint8_t *dst, const uint8_t *src, size_t len);
struct publish_extra {
	uint64_t own;                /* pages copied into its own data area */
	const struct cxlcr_snapshot_base *bases;
	uint32_t base_count;
	bool tracked;
	const struct cxlcr_snapshot_cold *cold; /* a tiered snapshot's (tier/): NULL otherwise */
};

/* Publishing a snapshot: its header filled in (what must be of the freeze
 * instant), then sealed (runs, checksums, `complete`: what may follow the
 * freeze); snap_publish_snapshot() does both (snapshot.c says why two). */
void snap_fill_header(struct cxlcr_pool *pool, const struct source *src, const struct cxlcr_region *snap_region,
		      uint8_t *snap, const struct layout *l, const struct publish_extra *x, const uint64_t *table);
int snap_seal(uint8_t *snap, uint64_t region_size);
int snap_publish_snapshot(struct cxlcr_pool *pool, const struct source *src, const struct cxlcr_region *snap_region,
			  uint8_t *snap, const struct layout *l, const struct publish_extra *x, const uint64_t *table);
void snap_describe(struct cxlcr_snapshot_info *out, const struct cxlcr_region *snap_region, const struct source *src,
		   const struct page_map *m);

/* Drafts: room for the finish, and the arena's punch counters. */
uint64_t snap_draft_spare(uint64_t copies);
struct punch_note {
	uint64_t begun;
	bool clean;
};

void snap_note_punches(const struct source *src, struct punch_note *n);
/* The heap ranges [lo, hi) (offsets in the heap, within it) of punches
 * from..to-1, from the arena's punch log (pool_format.h): their count, or
 * -1 if the log does not hold them all (more than CXLCR_PUNCH_LOG, an
 * entry rewritten since, a preload that logs nothing), and the caller
 * compares every page instead. from and to are punch counts seen with no
 * punch under way. */
struct punch_range {
	uint64_t lo, hi;
};
int snap_punch_ranges(const struct source *src, uint64_t from, uint64_t to,
		      struct punch_range out[CXLCR_PUNCH_LOG]);

/* Reading: the full check of a snapshot's leaf table. */
int snap_check_leaves(const struct cxlcr_snapshot *s);

#endif
