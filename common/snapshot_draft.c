/*
 * Drafts of snapshots (snapshot.h): incremental drafts, which copy only
 * what was written since an earlier snapshot and share the rest of its
 * pages, and the finish of any draft in the freeze, which brings it up to
 * date with the heap and publishes it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../tracking/track.h"
#include "catalog.h"
#include "error.h"
#include "persist.h"
#include "snapshot_internal.h"

/* Pages of a draft's room faulted in before its finish (64 MiB): more
 * than the 3,000-13,000 pages a finish found written during the draft of a
 * recovery point of a 1 GiB Redis under a saturating SET load
 * (docs/recovery.md). */
#define DRAFT_ROOM_PREFAULT 16384u
#include "util.h"

/* ---- incremental drafts ---- */

/* A snapshot whose data an incremental draft's leaves may use: the base
 * itself or one of the base's own bases. */
struct candidate {
	struct cxlcr_snapshot_base b;  /* region, data range, catalog entry */
	uint64_t refs;                 /* leaves of the new table that point into it */
};

static int candidate_of(const struct candidate *c, uint32_t n, uint64_t leaf)
{
	uint64_t at = CXLCR_LEAF_OFFSET(leaf);
	for (uint32_t k = 0; k < n; k++)
		if (at >= c[k].b.data_lo && at < c[k].b.data_hi)
			return (int)k;
	return -1;
}

static bool bit(const struct page_map *m, uint64_t i)
{
	return m->bits[i / 64] >> (i % 64) & 1;
}

static void set_bit(struct page_map *m, uint64_t i)
{
	m->bits[i / 64] |= 1ull << (i % 64);
}

/* The base and its own bases, as candidates (the base first). */
static uint32_t base_candidates(const struct cxlcr_snapshot *base, uint32_t entry, uint64_t entry_generation,
				struct candidate *c)
{
	const struct cxlcr_snapshot_header *h = &base->header;
	memset(c, 0, sizeof(*c) * (CXLCR_SNAPSHOT_BASES_MAX + 1));
	c[0].b.region_generation = base->region.generation;
	c[0].b.data_lo = base->region.offset + h->data_offset;
	c[0].b.data_hi = c[0].b.data_lo + h->data_size;
	c[0].b.entry = entry;
	c[0].b.entry_generation = entry_generation;
	uint32_t n = 1;
	for (uint32_t k = 0; k < h->base_count && k < CXLCR_SNAPSHOT_BASES_MAX; k++) {
		c[n].b = h->bases[k];
		c[n].b.slot = 0;
		c[n].b.token = 0;
		n++;
	}
	return n;
}

/*
 * The pages an incremental draft copies: those written since the base's
 * finish, and those past the base's heap (grown since).
 */
static int pages_to_copy(const struct source *src, const struct cxlcr_snapshot_header *bh,
			 const struct cxlcr_written *since, struct page_map *copy)
{
	copy->pages = src->pages;
	copy->bits = calloc((src->pages + 63) / 64, sizeof(uint64_t));
	if (!copy->bits)
		return cxlcr_error("out of memory for a map of %llu pages", (unsigned long long)src->pages);
	if (!since) { /* not known: every page is looked at */
		memset(copy->bits, 0xff, (src->pages + 63) / 64 * sizeof(uint64_t));
		return 0;
	}
	uint64_t lo = src->heap_address, hi = lo + src->heap_size;
	for (size_t k = 0; k < since->count; k++) {
		uint64_t a = since->ranges[k].start > lo ? since->ranges[k].start : lo;
		uint64_t b = since->ranges[k].end < hi ? since->ranges[k].end : hi;
		for (uint64_t i = (a - lo) / PAGE; a < b && i < (b - lo + PAGE - 1) / PAGE; i++)
			set_bit(copy, i);
	}
	for (uint64_t i = bh->page_count; i < src->pages; i++)
		set_bit(copy, i);
	return 0;
}

/* Runs of the table being built, with own copies (own) to be packed in
 * heap order: a bound on the runs of the final table, whatever offset the
 * own copies get. */
static uint64_t runs_with_own(const uint64_t *table, const struct page_map *own)
{
	uint64_t n = 0, want = 0;
	bool was_own = false;
	for (uint64_t i = 0; i < own->pages; i++) {
		bool is_own = bit(own, i);
		if (is_own)
			n += i == 0 || !was_own;
		else
			n += i == 0 || was_own || table[i] != want;
		want = is_own ? 0 : snap_next_in_run(table[i]);
		was_own = is_own;
	}
	return n;
}

int cxlcr_snapshot_draft_on(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
			    const struct cxlcr_snapshot *base, uint32_t base_entry, uint64_t base_entry_generation,
			    const struct cxlcr_written *since, uint64_t max_runs, struct cxlcr_snapshot_info *out)
{
	uint64_t start = cxlcr_mono_ns();
	const struct cxlcr_snapshot_header *bh = &base->header;
	struct source src;
	struct page_map copy = { 0 }, own = { 0 };
	uint64_t *table = NULL;
	struct candidate cand[CXLCR_SNAPSHOT_BASES_MAX + 1];
	struct cxlcr_snapshot_base held[CXLCR_SNAPSHOT_BASES_MAX];
	uint32_t held_count = 0;
	struct cxlcr_region snap_region = { 0 };
	uint8_t *snap = NULL;
	int rc = -1;
	if (!cxlcr_valid_name(name))
		return cxlcr_error("invalid snapshot name '%s'", name);
	if (snap_open_source(pool, arena_generation, &src) < 0)
		return -1;
	/* Compared page by page (since NULL), a base needs no scan noted. A
	 * tiered snapshot is no base either way: its cold pages would stay
	 * on their memory server for as long as the chain lives. */
	if (bh->arena_generation != arena_generation || bh->heap_address != src.heap_address ||
	    bh->page_count > src.pages || (!bh->track_scans && since) || bh->pages_cold) {
		cxlcr_error("snapshot %s is not a base for this heap as it is now", base->region.name);
		rc = 1; /* a full draft */
		goto out;
	}
	/* Its leaves become ours: they must be what it published. */
	if (snap_check_leaves(base) < 0)
		goto out;
	struct punch_note punches;
	snap_note_punches(&src, &punches);
	bool punched = !punches.clean || punches.begun != bh->track_punches;
	if (pages_to_copy(&src, bh, since, &copy) < 0)
		goto out;
	/* Pages punched out since the base read zero now, and no scan reports
	 * them; nor does SEEK_HOLE always (a 2 MiB page of the pool that the
	 * kernel did not split is zeroed in place: seen once in asan's
	 * snapshot_test). The arena's punch log says which they are; if it
	 * does not hold every punch since the base, every page is compared
	 * with the base's copy: what is the same is shared, the rest copied
	 * or zero. */
	struct punch_range punched_ranges[CXLCR_PUNCH_LOG];
	int logged = punched && punches.clean
			     ? snap_punch_ranges(&src, bh->track_punches, punches.begun, punched_ranges)
			     : -1;
	if (punched && logged < 0)
		memset(copy.bits, 0xff, (src.pages + 63) / 64 * sizeof(uint64_t));
	for (int k = 0; k < logged; k++)
		for (uint64_t i = punched_ranges[k].lo / PAGE; i < (punched_ranges[k].hi + PAGE - 1) / PAGE; i++)
			set_bit(&copy, i);
	uint32_t n = base_candidates(base, base_entry, base_entry_generation, cand);
	table = calloc(src.pages, LEAF_SIZE);
	own.pages = src.pages;
	own.bits = calloc((src.pages + 63) / 64, sizeof(uint64_t));
	if (!table || !own.bits) {
		cxlcr_error("out of memory for a leaf table of %llu pages", (unsigned long long)src.pages);
		goto out;
	}
	/* The base's leaves (refreshed by check_leaves) for the pages not
	 * written since; which of the candidates each one uses. */
	for (uint64_t i = 0; i < src.pages; i++) {
		if (bit(&copy, i))
			continue;
		uint64_t leaf = base->leaves[i];
		if (CXLCR_LEAF_TIER(leaf) != CXLCR_TIER_CXL)
			continue;
		int k = candidate_of(cand, n, leaf);
		if (k < 0) {
			cxlcr_error("snapshot '%s': leaf %llu lies outside its data and its bases'", base->region.name,
				    (unsigned long long)i);
			goto out;
		}
		table[i] = leaf;
		cand[k].refs++;
	}
	/* At most CXLCR_SNAPSHOT_BASES_MAX bases: the least used ones are
	 * copied instead (their pages become the new snapshot's own). */
	bool dropped[CXLCR_SNAPSHOT_BASES_MAX + 1] = { false };
	uint32_t used;
	for (;;) {
		int least = -1;
		used = 0;
		for (uint32_t k = 0; k < n; k++)
			if (cand[k].refs) {
				used++;
				if (least < 0 || cand[k].refs < cand[least].refs)
					least = (int)k;
			}
		if (used <= CXLCR_SNAPSHOT_BASES_MAX)
			break;
		for (uint64_t i = 0; i < src.pages; i++)
			if (CXLCR_LEAF_TIER(table[i]) == CXLCR_TIER_CXL && candidate_of(cand, n, table[i]) == least) {
				set_bit(&copy, i);
				table[i] = 0;
			}
		cand[least].refs = 0;
		dropped[least] = true;
	}
	/*
	 * The pages to copy that hold data now are the draft's own, but for
	 * those still the same as the base's copy: tracking reports whole
	 * 2 MiB pages where the heap is mapped with them (a pool file on a
	 * tmpfs with huge pages, devdax), and one write in one makes all 512
	 * small pages "written". Comparing reads them, which copying would
	 * have done anyway, and stores only what changed. A heap tracked at
	 * 4 KiB (track_small_pages: preload/track.c) reports pages that were
	 * written, which are hardly ever the same again: comparing them read
	 * the base's copy of each for nothing (8% of a point's draft under a
	 * SET load), so it compares only when every page is to be looked at
	 * (the punch log did not hold every punch since the base).
	 */
	const struct cxlcr_arena_header *ah = (const void *)src.base;
	bool small = __atomic_load_n(&ah->track_small_pages, __ATOMIC_ACQUIRE) &&
		     __atomic_load_n(&ah->track_small_mapped, __ATOMIC_ACQUIRE);
	bool compare = !small || (punched && logged < 0) || !since;
	uint64_t own_pages = 0, cxl = 0;
	/* A page in a hole of the pool file reads zero and is not read: on a
	 * pool file, reading it through a shared mapping would give it memory
	 * (a compared draft, which looks at every page, filled the arena's
	 * whole unused part so, 3 GiB of a 6 GiB arena in session 30). */
	uint64_t data_lo = 0, data_hi = 0;
	for (uint64_t i = snap_next_page_with(&copy, 0, true); i < src.pages; i = snap_next_page_with(&copy, i + 1, true)) {
		const uint8_t *p = src.heap + i * PAGE;
		uint64_t at = i * PAGE;
		while (at >= data_hi && data_hi != UINT64_MAX)
			if (!snap_heap_next_data(pool, &src, data_hi > at ? data_hi : at, &data_lo, &data_hi))
				data_lo = data_hi = UINT64_MAX;
		if (at < data_lo)
			continue; /* a hole: a zero leaf, nothing of its own */
		if (compare && i < bh->page_count && CXLCR_LEAF_TIER(base->leaves[i]) == CXLCR_TIER_CXL) {
			uint64_t leaf = base->leaves[i];
			int k = candidate_of(cand, n, leaf);
			const uint8_t *was = cxlcr_snapshot_copy(base, CXLCR_LEAF_OFFSET(leaf));
			if (was)
				cxlcr_refresh(was, PAGE);
			if (k >= 0 && !dropped[k] && was && (cand[k].refs || used < CXLCR_SNAPSHOT_BASES_MAX) &&
			    !memcmp(p, was, PAGE)) {
				used += cand[k].refs == 0;
				cand[k].refs++;
				table[i] = leaf;
				continue;
			}
		}
		if (!snap_page_is_zero(p)) {
			set_bit(&own, i);
			own_pages++;
		}
	}
	/* Room for what the pre-copy and the finish may copy: pages written
	 * while this draft is made, and while the pre-copy passes run. Not
	 * enough room means a full snapshot in the freeze (or, for a recovery
	 * point, none at all, and the next one has lost track of the writes).
	 * Measured at 1 GiB under redis-benchmark SETs: with own/8, the
	 * finish found 3,000-13,000 pages written in a draft of ~100 MiB and
	 * ran out of room at every other point; at 4 GiB under 10,000 SETs a
	 * second, drafts of 300-600 ms and their pre-copy ran out of room as
	 * large as the copies every few points. So twice the copies: once
	 * published, the room a snapshot did not use goes back to the pool
	 * (cxlcr_snapshot_trim), and room never written takes no memory in a
	 * pool file. A pool whose free space is in pieces (the room of
	 * trimmed snapshots) may have no gap that large: then as many again
	 * as the copies, then only the base room, before giving up (a
	 * snapshot with no draft is a whole copy in the freeze, which needs
	 * room for the whole heap: a 4 GiB service's points on a 22 GiB pool
	 * found none, every second). */
	uint64_t spare = 0;
	uint64_t runs = runs_with_own(table, &own);
	if (max_runs && runs > max_runs) {
		/* A fork child maps each run as one mapping of its own
		 * (rebase/mm.c): scattered writes make too many of them. */
		cxlcr_error("sharing its base's pages would make %llu runs, more than a fork child should map (%llu)",
			    (unsigned long long)runs, (unsigned long long)max_runs);
		rc = 1;
		goto out;
	}
	uint64_t run_room = 0;
	struct layout l;
	/* Not cleared: every byte of the region is written before anything
	 * reads it (the table below, the copies, the room as the finish uses
	 * it, the run table and the arena header's copy at the seal), but
	 * for the header, zeroed here: until the seal sets `complete`, a
	 * reader knows the region only by that header. Clearing it all was a
	 * write and write-back of twice what a point copies. */
	for (int times = 2;; times--) {
		spare = snap_draft_spare(own_pages) + (uint64_t)times * own_pages;
		run_room = runs + 2 * spare + 2;
		snap_plan_layout(src.pages, own_pages + spare, run_room, &l);
		if (cxlcr_region_alloc_uncleared(pool, CXLCR_KIND_SNAPSHOT, name, l.region_size, &snap_region) == 0)
			break;
		if (times == 0)
			goto out;
	}
	snap = cxlcr_pool_map(pool, snap_region.offset, snap_region.size, 0, 0);
	if (!snap)
		goto out;
	memset(snap, 0, CXLCR_SNAPSHOT_TABLE_OFFSET);
	cxlcr_publish(snap, CXLCR_SNAPSHOT_TABLE_OFFSET);
	/* Faulted in before the copy: the tables, the copies, the arena
	 * header's copy and as much of the room as a finish usually fills, all
	 * of which the finish writes in the freeze (a fresh 2 MiB page of a
	 * tmpfs can take milliseconds to find). Not the rest of the room, as
	 * large as the copies: the kernel zeroes every page it faults in, and
	 * zeroing the whole region was half of a point's draft under a SET
	 * load (perf: clear_page from MADV_POPULATE_WRITE). A finish that
	 * needs more of it faults those pages in the freeze. */
	uint64_t room_now = spare < DRAFT_ROOM_PREFAULT ? spare : DRAFT_ROOM_PREFAULT;
	snap_prefault(snap, l.data_offset + (own_pages + room_now) * PAGE, MADV_POPULATE_WRITE);
	snap_prefault(snap + l.arena_header_offset, l.region_size - l.arena_header_offset, MADV_POPULATE_WRITE);
	uint64_t copied = 0;
	for (uint64_t i = snap_next_page_with(&own, 0, true); i < src.pages; i = snap_next_page_with(&own, i + 1, true)) {
		uint64_t end = snap_next_page_with(&own, i, false);
		snap_copy_to_pool(snap + l.data_offset + copied * PAGE, src.heap + i * PAGE, (end - i) * PAGE);
		for (uint64_t j = i; j < end; j++, copied++)
			table[j] = CXLCR_LEAF(CXLCR_TIER_CXL, snap_region.offset + l.data_offset + copied * PAGE);
		i = end - 1;
	}
	cxlcr_fence();
	/* Hold each base whose data the table uses, in the draft's name. */
	for (uint32_t k = 0; k < n; k++) {
		if (!cand[k].refs)
			continue;
		held[held_count] = cand[k].b;
		if (cxlcr_catalog_hold(pool, cand[k].b.entry, cand[k].b.entry_generation, snap_region.generation,
				       &held[held_count].slot, &held[held_count].token) < 0) {
			rc = 1; /* a base going away: a full draft instead */
			goto out;
		}
		held_count++;
	}
	for (uint64_t i = 0; i < src.pages; i++)
		cxl += CXLCR_LEAF_TIER(table[i]) == CXLCR_TIER_CXL;
	memcpy(snap + l.table_offset, table, l.table_size);
	cxlcr_publish(snap + l.table_offset, l.table_size);
	struct cxlcr_snapshot_header *h = (void *)snap;
	h->page_count = src.pages;
	h->draft_nonzero = cxl;
	h->draft_own = own_pages;
	h->draft_spare = (uint32_t)spare;
	h->draft_run_room = run_room;
	h->draft_punches = punches.begun;
	h->draft_punch_clean = punches.clean;
	h->base_count = held_count;
	memcpy(h->bases, held, held_count * sizeof(held[0]));
	cxlcr_publish(h, sizeof(*h));
	held_count = 0; /* the draft's header lists them now: freeing it returns them */
	if (out) {
		memset(out, 0, sizeof(*out));
		out->region_generation = snap_region.generation;
		out->region_offset = snap_region.offset;
		out->region_size = snap_region.size;
		out->heap_address = src.heap_address;
		out->heap_size = src.heap_size;
		out->pages_total = src.pages;
		out->pages_cxl = cxl;
		out->pages_own = own_pages;
		out->pages_zero = src.pages - cxl;
		out->base_count = h->base_count;
		out->punches_logged = logged > 0 ? (uint32_t)logged : 0;
		out->compared_because = !since ? "the writes since the base are not known"
					: punched && logged < 0
						? (punches.clean ? "pages were punched out since the base, more than the punch log holds"
								 : "a punch was under way")
						: NULL;
		out->copy_ns = out->total_ns = cxlcr_mono_ns() - start;
	}
	rc = 0;
out:
	if (held_count)
		cxlcr_catalog_release_holds(pool, held, held_count);
	if (snap)
		munmap(snap, snap_region.size);
	if (rc != 0 && snap_region.generation)
		cxlcr_region_free(pool, snap_region.generation);
	free(table);
	free(copy.bits);
	free(own.bits);
	snap_close_source(&src);
	return rc;
}

/* ---- the finish ---- */

/* A draft being finished: its table (in the pool, changed in place), its
 * own copies, the room left after them, and its bases' data, mapped. */
struct finish {
	uint8_t *snap;               /* the draft region, mapped */
	uint64_t snap_offset;        /* its pool offset */
	uint64_t *table;             /* its leaf table */
	uint64_t own_lo, own_hi;     /* pool offsets of its own copies */
	uint64_t spare_end;          /* the room for more ends here */
	uint32_t base_count;
	struct cxlcr_snapshot_base bases[CXLCR_SNAPSHOT_BASES_MAX];
	const uint8_t *base_maps[CXLCR_SNAPSHOT_BASES_MAX];
	uint64_t refreshed;
};

/* Where the copy a CXL leaf names lies in memory: the draft's own area or
 * a base's data (NULL if it lies in neither). */
static const uint8_t *finish_copy(const struct finish *f, uint64_t leaf)
{
	uint64_t at = CXLCR_LEAF_OFFSET(leaf);
	if (at >= f->own_lo && at < f->own_hi)
		return f->snap + (at - f->snap_offset);
	for (uint32_t k = 0; k < f->base_count; k++)
		if (at >= f->bases[k].data_lo && at < f->bases[k].data_hi) {
			const uint8_t *copy = f->base_maps[k] + (at - f->bases[k].data_lo);
			cxlcr_refresh(copy, PAGE);
			return copy;
		}
	return NULL;
}

/*
 * Brings page i of the draft up to date with the arena page p (NULL: a
 * hole of the pool file, zero). A copy of the draft's own is rewritten in
 * place; a page whose leaf is zero or a base's copy gets a copy of its own
 * in the room after the draft's copies, when it changed; a base's page that
 * is a hole now becomes a zero page. Returns 1 if it changed, 0 if it was
 * right, -1 if there is no room (the caller snapshots afresh).
 */
static int refresh_page(struct finish *f, uint64_t i, const uint8_t *p)
{
	uint64_t leaf = f->table[i];
	uint32_t tier = CXLCR_LEAF_TIER(leaf);
	if (tier == CXLCR_TIER_CXL) {
		uint64_t at = CXLCR_LEAF_OFFSET(leaf);
		if (at >= f->own_lo && at < f->own_hi) {
			static const uint8_t zero[CXLCR_SNAPSHOT_PAGE_SIZE] __attribute__((aligned(64)));
			uint8_t *copy = f->snap + (at - f->snap_offset);
			if (!p)
				p = zero;
			if (!memcmp(copy, p, PAGE))
				return 0;
			snap_copy_to_pool(copy, p, PAGE); /* a page that became zero stays stored, as zeros */
			return 1;
		}
		const uint8_t *copy = finish_copy(f, leaf);
		if (!copy)
			return -1;
		if (!p) {
			f->table[i] = CXLCR_LEAF(CXLCR_TIER_ZERO, 0);
			return 1;
		}
		if (!memcmp(copy, p, PAGE))
			return 0;
	} else if (!p || snap_page_is_zero(p)) {
		return 0;
	}
	if (f->own_hi + PAGE > f->spare_end)
		return -1;
	snap_copy_to_pool(f->snap + (f->own_hi - f->snap_offset), p, PAGE);
	f->table[i] = CXLCR_LEAF(CXLCR_TIER_CXL, f->own_hi);
	f->own_hi += PAGE;
	return 1;
}

/* The tracked finish: only the pages in the written ranges are brought up
 * to date. */
static int refresh_written(struct finish *f, const struct source *src, const struct cxlcr_written *written,
			   uint64_t *looked, struct cxlcr_written *left)
{
	uint64_t lo = src->heap_address, hi = lo + src->heap_size;
	for (size_t k = 0; k < written->count; k++) {
		uint64_t a = written->ranges[k].start > lo ? written->ranges[k].start : lo;
		uint64_t b = written->ranges[k].end < hi ? written->ranges[k].end : hi;
		for (uint64_t i = (a - lo) / PAGE; a < b && i < (b - lo + PAGE - 1) / PAGE; i++) {
			int r = refresh_page(f, i, src->heap + i * PAGE);
			if (r < 0) {
				/* What is left, from this page on, for whoever
				 * can still bring it up to date (a pre-copy's
				 * caller hands it to the finish). */
				if (left) {
					uint64_t from = lo + i * PAGE;
					if (cxlcr_written_add(left, from, written->ranges[k].end > from
									? written->ranges[k].end : from + PAGE) < 0)
						return -1;
					for (size_t m = k + 1; m < written->count; m++)
						if (cxlcr_written_add(left, written->ranges[m].start, written->ranges[m].end) < 0)
							return -1;
				}
				return 1;
			}
			f->refreshed += (uint64_t)r;
			(*looked)++;
		}
	}
	return 0;
}

/*
 * Did the service punch pages out of the pool (give freed memory back,
 * preload/release.c) since the draft began, or was one under way then?
 * No write reports such a page, and SEEK_HOLE does not always either (a
 * 2 MiB page the kernel could not split is zeroed in place), so a finish
 * that trusted the written pages would keep their old contents. In the
 * freeze no punch is under way: the service's threads are stopped.
 */
static bool punched_since(const struct source *src, const struct cxlcr_snapshot_header *draft)
{
	const struct cxlcr_arena_header *a = (const void *)src->base;
	return !draft->draft_punch_clean || __atomic_load_n(&a->punches_begun, __ATOMIC_SEQ_CST) != draft->draft_punches;
}

/* The pages of the punches since the draft, from the arena's punch log:
 * brought up to date like written ones (a hole of the pool file is a zero
 * page, read or not). -1 if the log does not hold them all (the caller
 * compares every page), else 0 or 1 as refresh_page(). */
static int refresh_punched(struct finish *f, struct cxlcr_pool *pool, const struct source *src,
			   const struct cxlcr_snapshot_header *draft, uint32_t *logged, uint64_t *looked)
{
	struct punch_note now;
	struct punch_range r[CXLCR_PUNCH_LOG];
	snap_note_punches(src, &now);
	int n = draft->draft_punch_clean && now.clean
			? snap_punch_ranges(src, draft->draft_punches, now.begun, r)
			: -1;
	if (n < 0)
		return -1;
	*logged = (uint32_t)n;
	for (int k = 0; k < n; k++) {
		for (uint64_t at = r[k].lo / PAGE * PAGE, lo, hi; at < r[k].hi; at = hi) {
			bool data = snap_heap_next_data(pool, src, at, &lo, &hi);
			if (!data || lo >= r[k].hi)
				lo = hi = r[k].hi;
			if (hi > r[k].hi)
				hi = (r[k].hi + PAGE - 1) / PAGE * PAGE;
			for (uint64_t i = at / PAGE; i < hi / PAGE; i++) {
				bool in_data = i >= lo / PAGE;
				int rc = refresh_page(f, i, in_data ? src->heap + i * PAGE : NULL);
				if (rc < 0)
					return 1; /* no room: the caller snapshots afresh */
				f->refreshed += (uint64_t)rc;
				(*looked)++;
			}
		}
	}
	return 0;
}

/* Maps the data areas of a draft's bases (read-only); they are alive, as
 * the draft holds a borrow on each. */
static int map_bases(struct finish *f, struct cxlcr_pool *pool, const struct cxlcr_snapshot_header *h)
{
	f->base_count = h->base_count;
	if (f->base_count > CXLCR_SNAPSHOT_BASES_MAX)
		return cxlcr_error("draft has %u bases, at most %u", f->base_count, CXLCR_SNAPSHOT_BASES_MAX);
	memcpy(f->bases, h->bases, f->base_count * sizeof(f->bases[0]));
	for (uint32_t k = 0; k < f->base_count; k++) {
		const struct cxlcr_snapshot_base *b = &f->bases[k];
		f->base_maps[k] = b->data_hi > b->data_lo ? cxlcr_pool_map(pool, b->data_lo, b->data_hi - b->data_lo, 0, 0)
							  : NULL;
		if (!f->base_maps[k])
			return -1;
		/* Refreshed page by page as they are read (finish_copy): all of
		 * it would cost ~0.1 ms a MiB in the freeze. */
	}
	return 0;
}

static void unmap_bases(struct finish *f)
{
	for (uint32_t k = 0; k < f->base_count; k++)
		if (f->base_maps[k])
			munmap((void *)(uintptr_t)f->base_maps[k], f->bases[k].data_hi - f->bases[k].data_lo);
	f->base_count = 0;
}

/* A draft opened to be brought up to date (its finish, or a pre-copy
 * pass): its region mapped, its arena's heap, the layout it planned (its
 * copies, the room after them and room for the runs a finish may add), and
 * f set to copy into it, its bases mapped. */
struct open_draft {
	struct cxlcr_region region;
	struct source src;
	uint8_t *snap;
	struct layout l;
	struct finish f;
};

/* 0; 1 if the heap grew since the draft (its finish copies afresh); -1 with
 * the error. Only a 0 leaves anything to close_draft(). */
static int open_draft(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name, struct open_draft *d)
{
	memset(d, 0, sizeof(*d));
	if (!cxlcr_region_find(pool, CXLCR_KIND_SNAPSHOT, name, &d->region))
		return cxlcr_error("no draft snapshot '%s'", name);
	if (snap_open_source(pool, arena_generation, &d->src) < 0)
		return -1;
	int rc = -1;
	d->snap = cxlcr_pool_map(pool, d->region.offset, d->region.size, 0, 0);
	if (!d->snap)
		goto fail;
	const struct cxlcr_snapshot_header *h = (const void *)d->snap;
	snap_plan_layout(d->src.pages, h->draft_own + h->draft_spare, h->draft_run_room, &d->l);
	if (h->complete == CXLCR_SNAPSHOT_COMPLETE || h->magic != 0 || d->l.region_size > d->region.size) {
		cxlcr_error("snapshot '%s' is not a draft of this arena", name);
		goto fail;
	}
	if (h->page_count != d->src.pages) {
		rc = 1;
		goto fail;
	}
	struct finish *f = &d->f;
	f->snap = d->snap;
	f->snap_offset = d->region.offset;
	f->table = (void *)(d->snap + d->l.table_offset);
	f->own_lo = d->region.offset + d->l.data_offset;
	f->own_hi = f->own_lo + h->draft_own * PAGE;
	f->spare_end = f->own_lo + d->l.data_size;
	if (map_bases(f, pool, h) < 0)
		goto fail;
	return 0;
fail:
	unmap_bases(&d->f);
	if (d->snap)
		munmap(d->snap, d->region.size);
	snap_close_source(&d->src);
	return rc;
}

static void close_draft(struct open_draft *d)
{
	unmap_bases(&d->f);
	munmap(d->snap, d->region.size);
	snap_close_source(&d->src);
}

/*
 * A pass of pre-copy: the pages written since the last scan brought up to
 * date in the draft while the service runs, as the finish would in the
 * freeze. Under a write load the first copy of a large heap takes long
 * enough for tens of thousands of pages to be written meanwhile
 * (docs/recovery.md: 10,000-60,000 at 1 GiB under SETs, a finish of
 * 50-400 ms in the freeze); each pass leaves the finish only what was
 * written during the pass before.
 *
 * A page written while it is copied is torn here, and reported again: the
 * scan that found it re-armed it before this copy, so its next write is
 * seen by the next scan, a later pass's or the finish's. Pages it gives a
 * copy of their own take room the draft kept for its finish: the draft's
 * header then counts them as its own (draft_own), and the room that is
 * left (draft_spare), so that the finish's layout is the same. 0; 1 if
 * the draft is not one this can bring up to date (no room, the heap grew):
 * the finish then decides.
 */
int cxlcr_snapshot_draft_refresh(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
				 const struct cxlcr_written *written, uint64_t *refreshed, struct cxlcr_written *left)
{
	*refreshed = 0;
	struct open_draft d;
	int rc = open_draft(pool, arena_generation, name, &d);
	if (rc != 0)
		return rc;
	struct cxlcr_snapshot_header *h = (void *)d.snap;
	uint64_t own_before = h->draft_own, looked = 0;
	rc = refresh_written(&d.f, &d.src, written, &looked, left);
	/* What it copied stands even when it ran out of room: the leaves
	 * that point at the new copies are in the table already. */
	uint64_t added = (d.f.own_hi - d.f.own_lo) / PAGE - own_before;
	h->draft_own = own_before + added;
	h->draft_spare -= (uint32_t)added;
	cxlcr_fence();
	cxlcr_publish(h, sizeof(*h));
	*refreshed = d.f.refreshed;
	close_draft(&d);
	return rc;
}

static int finish(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
		  const struct cxlcr_written *written, bool seal, struct cxlcr_snapshot_info *out)
{
	uint64_t start = cxlcr_mono_ns();
	struct open_draft d;
	int rc = open_draft(pool, arena_generation, name, &d);
	if (rc != 0)
		return rc; /* 1: the heap grew since the draft, the caller snapshots afresh */
	struct finish *f = &d.f;
	const struct cxlcr_snapshot_header *h = (const void *)d.snap;
	uint64_t looked = 0;
	uint64_t t_written = cxlcr_mono_ns(), t_holes = t_written;
	/* Pages punched out since the draft (see punched_since()) come from
	 * the punch log; if it does not hold them all, every page is
	 * compared, which finds them whatever the pool's page size. */
	bool scanned = written != NULL;
	uint32_t logged = 0;
	const char *compared = written ? NULL : "not tracked";
	if (written) {
		rc = refresh_written(f, &d.src, written, &looked, NULL);
		t_holes = cxlcr_mono_ns();
		if (rc == 0 && punched_since(&d.src, h)) {
			rc = refresh_punched(f, pool, &d.src, h, &logged, &looked);
			if (rc < 0) {
				written = NULL;
				compared = "pages were punched out since the draft, more than its punch log holds";
			}
		}
		if (rc > 0)
			goto unmap;
		if (written)
			goto publish;
	}
	snap_prefault(d.snap + d.l.data_offset, d.region.size - d.l.data_offset, MADV_POPULATE_READ);
	/* Pool-file holes are zero pages: not read. */
	uint64_t end = d.src.heap_size, at = 0, lo, hi;
	for (bool more = true; more; at = hi) {
		more = snap_heap_next_data(pool, &d.src, at, &lo, &hi);
		if (!more)
			lo = hi = end;
		snap_prefault((void *)(uintptr_t)(d.src.heap + lo), hi - lo, MADV_POPULATE_READ);
		for (uint64_t i = at / PAGE; i < hi / PAGE; i++) {
			bool in_data = i >= lo / PAGE;
			int r = refresh_page(f, i, in_data ? d.src.heap + i * PAGE : NULL);
			if (r < 0) {
				rc = 1; /* the caller snapshots afresh */
				goto unmap;
			}
			f->refreshed += (uint64_t)r;
		}
	}
publish:
	cxlcr_fence();
	uint64_t t_publish = cxlcr_mono_ns();
	struct publish_extra x = { .own = (f->own_hi - f->own_lo) / PAGE, .bases = f->bases,
				   .base_count = f->base_count, .tracked = scanned };
	snap_fill_header(pool, &d.src, &d.region, d.snap, &d.l, &x, f->table);
	if (seal && snap_seal(d.snap, d.region.size) < 0)
		goto unmap;
	if (out) {
		/* Unsealed, its counts are the seal's to make: the caller's
		 * cxlcr_snapshot_seal() gives them. */
		struct page_map m = { .pages = d.src.pages, .nonzero = seal ? h->pages_cxl : 0 };
		snap_describe(out, &d.region, &d.src, &m);
		out->pages_own = h->pages_own;
		out->base_count = h->base_count;
		out->pages_refreshed = f->refreshed;
		out->pages_written = looked;
		out->tracked = written != NULL;
		out->punches_logged = logged;
		out->compared_because = written ? NULL : compared;
		out->copy_ns = out->total_ns = cxlcr_mono_ns() - start;
		out->written_ns = (written ? t_holes : t_publish) - t_written;
		out->holes_ns = written ? t_publish - t_holes : 0;
		out->publish_ns = cxlcr_mono_ns() - t_publish;
		out->scan_ns = t_written - start; /* opening the arena and the draft, mapping the bases */
	}
	rc = 0;
unmap:
	close_draft(&d);
	return rc;
}

int cxlcr_snapshot_finish(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
			  const struct cxlcr_written *written, struct cxlcr_snapshot_info *out)
{
	return finish(pool, arena_generation, name, written, true, out);
}

int cxlcr_snapshot_finish_unsealed(struct cxlcr_pool *pool, uint64_t arena_generation, const char *name,
				   const struct cxlcr_written *written, struct cxlcr_snapshot_info *out)
{
	return finish(pool, arena_generation, name, written, false, out);
}

int cxlcr_snapshot_seal(struct cxlcr_pool *pool, uint64_t generation, struct cxlcr_snapshot_seal_info *out)
{
	uint64_t t0 = cxlcr_mono_ns();
	struct cxlcr_region r;
	if (cxlcr_region_get(pool, generation, &r) < 0)
		return -1;
	if (r.kind != CXLCR_KIND_SNAPSHOT)
		return cxlcr_error("region %llu is no snapshot", (unsigned long long)generation);
	uint8_t *snap = cxlcr_pool_map(pool, r.offset, r.size, 0, 0);
	if (!snap)
		return -1;
	struct cxlcr_snapshot_header *h = (void *)snap;
	cxlcr_refresh(h, sizeof(*h));
	int rc = h->complete == CXLCR_SNAPSHOT_COMPLETE ? 0 : snap_seal(snap, r.size);
	if (rc == 0 && out) {
		out->pages_zero = h->pages_zero;
		out->pages_cxl = h->pages_cxl;
		out->runs = h->run_count;
		out->seal_ns = cxlcr_mono_ns() - t0;
	}
	munmap(snap, r.size);
	return rc;
}
