/*
 * A service restored from its newest recovery point (recovery/points.c)
 * on its own host, after its process died. A recovery point is a
 * snapshot of the heap and the dump of the rest of the process, taken in
 * one freeze; the heap has moved on since (the service ran, then died
 * anywhere in between), so the arena's heap is first made what it was at
 * the point: every page the snapshot stores is copied back, every other
 * page zeroed, the extents the heap grew by since are freed, and the
 * arena header becomes the snapshot's copy of it. Only then is the dump
 * restored, with CRIU and the plugin as for any restore: the dump was
 * taken with its tasks left running, which the plugin refuses unless the
 * arena says its heap was reset from that very point (restored_from).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/arena.h"
#include "../common/error.h"
#include "../common/persist.h"
#include "../common/snapshot.h"
#include "../common/util.h"
#include "recovery.h"

#define PAGE ((uint64_t)CXLCR_SNAPSHOT_PAGE_SIZE)

static bool page_zero(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (size_t i = 0; i < PAGE / 8; i++)
		if (w[i])
			return false;
	return true;
}

/* Makes the size bytes of heap (mapped) what they were in snapshot s: every
 * page it stores copied back, every other page zero. Pages that already
 * are are not written (a heap reset after a short run changes little); a
 * heap known to read zero (fresh: a new region) is only written, never
 * read, and its zero pages are left alone (reading them would fault every
 * page of it in). Each page written is written back at once. */
int recovery_copy_point(const struct cxlcr_snapshot *s, uint8_t *heap, uint64_t size, bool fresh)
{
	const struct cxlcr_snapshot_header *sh = &s->header;
	uint64_t run = 0;
	for (uint64_t i = 0; i < size / PAGE; i++) {
		uint8_t *p = heap + i * PAGE;
		uint64_t leaf = i < sh->page_count ? cxlcr_snapshot_leaf(s, i, &run) : 0;
		if (CXLCR_LEAF_TIER(leaf) == CXLCR_TIER_CXL) {
			const uint8_t *copy = cxlcr_snapshot_copy(s, CXLCR_LEAF_OFFSET(leaf));
			if (!copy)
				return cxlcr_error("recovery point %s: page %llu lies outside its data", s->region.name,
						   (unsigned long long)i);
			cxlcr_refresh(copy, PAGE);
			if (fresh || memcmp(p, copy, PAGE)) {
				memcpy(p, copy, PAGE);
				cxlcr_publish(p, PAGE);
			}
		} else if (CXLCR_LEAF_TIER(leaf) == CXLCR_TIER_ZERO) {
			if (!fresh && !page_zero(p)) {
				memset(p, 0, PAGE);
				cxlcr_publish(p, PAGE);
			}
		} else {
			return cxlcr_error("recovery point %s: page %llu is on the cold tier", s->region.name,
					   (unsigned long long)i);
		}
	}
	/* Only the pages written were written back: a flush of the whole
	 * heap would fault in every page of it that was never used. */
	return 0;
}

int recovery_heap_from_point(struct cxlcr_pool *pool, const struct cxlcr_region *arena,
			     const struct cxlcr_arena_header *h, const struct cxlcr_snapshot *s, bool fresh,
			     struct cxlcr_heap *now, uint8_t **heap)
{
	const struct cxlcr_snapshot_header *sh = &s->header;
	*heap = NULL;
	if (cxlcr_heap_read(pool, arena, h, now) < 0 || !(*heap = cxlcr_heap_map(pool, now, NULL)))
		return -1;
	if (now->address != sh->heap_address || now->size < sh->heap_size)
		return cxlcr_error("arena %s: its heap (%llu bytes at %#llx) is not the point's (%llu at %#llx)",
				   arena->name, (unsigned long long)now->size, (unsigned long long)now->address,
				   (unsigned long long)sh->heap_size, (unsigned long long)sh->heap_address);
	return recovery_copy_point(s, *heap, now->size, fresh);
}

void recovery_point_done(struct cxlcr_snapshot *s, struct cxlcr_arena_header *h, struct cxlcr_heap *now,
			 uint8_t *heap)
{
	if (heap)
		cxlcr_heap_unmap(now, heap);
	if (h)
		munmap(h, CXLCR_ARENA_HEAP_OFFSET);
	cxlcr_snapshot_close(s);
}

void recovery_header_from_point(struct cxlcr_arena_header *at, const struct cxlcr_snapshot *s,
				uint64_t point_generation, uint64_t scan_count)
{
	at->tracker_pid = 0;
	at->tracked = 0;
	at->track_fd = -1;
	at->scan_count = scan_count;
	at->restored_from = point_generation;
	cxlcr_copy_field(at->restored_from_name, sizeof(at->restored_from_name), s->region.name);
	at->lost = 0;
	at->failed = 0;
	memset(at->failed_reason, 0, sizeof(at->failed_reason));
	at->recovered_into = 0;
}

/* Extent regions of the arena that its header (as it was at the point)
 * does not list: the heap grew by them after the point. */
static void free_later_extents(struct cxlcr_pool *pool, const struct cxlcr_region *arena,
			       const struct cxlcr_arena_header *at_point)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state != CXLCR_REGION_LIVE || r.kind != CXLCR_KIND_EXTENT || !cxlcr_extent_of(r.name, arena->name))
			continue;
		bool listed = false;
		for (uint32_t k = 0; k < at_point->extent_count && k < CXLCR_ARENA_EXTENTS_MAX && !listed; k++)
			listed = at_point->extents[k].generation == r.generation;
		if (!listed)
			cxlcr_region_free(pool, r.generation);
	}
}

/*
 * The arena is a fresh one a recovery made from this point of a dead
 * host's service (recovery/fresh_arena.c), and it died before it took a
 * point of its own: the point's copy of the header (at_point) names the
 * dead host's regions, whose dump maps them. Its extents become the
 * arena's own (h: its header now, whose first extents the recovery made
 * like the point's), and moves in f say where each of the point's regions
 * is now, for the dump's rebase (rebase/relocate.c), as after the
 * recovery itself. Its account of that recovery stays.
 */
static int made_from_point(struct cxlcr_pool *pool, const struct cxlcr_region *arena,
			   const struct cxlcr_arena_header *h, const struct cxlcr_snapshot *s,
			   struct cxlcr_arena_header *at_point, struct recovery_fresh *f)
{
	uint32_t n = at_point->extent_count;
	if (!n || n > CXLCR_ARENA_EXTENTS_MAX || n > h->extent_count || h->extents[0].generation != arena->generation)
		return cxlcr_error("recovery point %s: arena %s was not made from it", s->region.name, arena->name);
	memset(f, 0, sizeof(*f));
	f->arena = *arena;
	f->old = *arena;
	for (uint32_t k = 0; k < n; k++) {
		struct cxlcr_region r;
		if (cxlcr_region_get(pool, h->extents[k].generation, &r) < 0 ||
		    h->extents[k].size != at_point->extents[k].size ||
		    h->extents[k].heap_offset != at_point->extents[k].heap_offset)
			return cxlcr_error("recovery point %s: extent %u of arena %s is not the one made from it",
					   s->region.name, k, arena->name);
		/* Where the heap starts in its region is the same in both. */
		uint64_t in_region = h->extents[k].offset - r.offset;
		f->moves[f->n++] = (struct cxlcr_rebase_move){ .old_generation = at_point->extents[k].generation,
							       .new_generation = r.generation,
							       .old_offset = at_point->extents[k].offset - in_region,
							       .new_offset = r.offset,
							       .size = r.size };
		at_point->extents[k].generation = h->extents[k].generation;
		at_point->extents[k].offset = h->extents[k].offset;
	}
	at_point->region_generation = arena->generation;
	memcpy(at_point->recovered_from_host, h->recovered_from_host, sizeof(at_point->recovered_from_host));
	memcpy(at_point->recovered_on_host, h->recovered_on_host, sizeof(at_point->recovered_on_host));
	return 0;
}

int recovery_reset_arena(struct cxlcr_pool *pool, const struct cxlcr_region *arena, uint64_t snapshot_generation,
			 struct recovery_fresh *moved)
{
	struct cxlcr_snapshot s;
	if (moved)
		moved->n = 0;
	if (cxlcr_snapshot_open(pool, snapshot_generation, &s) < 0)
		return -1;
	int rc = -1;
	const struct cxlcr_snapshot_header *sh = &s.header;
	uint8_t *heap = NULL;
	struct cxlcr_heap now;
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, arena->offset, CXLCR_ARENA_HEAP_OFFSET, 0, 0);
	if (!h)
		goto out;
	cxlcr_refresh(h, sizeof(*h));
	/* Of this arena (its generation is never reused), or of the one it
	 * was made from (made_from_point()). Its epoch may have moved on
	 * since the point (a verb that fenced a dead one, a restore): the
	 * point is still one instant of heap and process; the restore's
	 * records are brought to the epoch of now (image_store_reseal). */
	bool made = sh->arena_generation != arena->generation && moved && h->magic == CXLCR_ARENA_MAGIC &&
		    h->region_generation == arena->generation &&
		    __atomic_load_n(&h->restored_from, __ATOMIC_ACQUIRE) == snapshot_generation &&
		    h->recovered_from_host[0];
	if (sh->arena_generation != arena->generation && !made) {
		cxlcr_error("recovery point %s is not of arena %s", s.region.name, arena->name);
		goto out;
	}
	/* The header as it was at the point, but what belongs to the
	 * present: no tracker, no scan history to build on (the next
	 * snapshot is a full one), and the mark the plugin looks for.
	 * Checked before anything of the arena is written: a point whose
	 * copy is not this arena's is refused with the heap untouched. */
	const struct cxlcr_arena_header *copy = (const void *)(s.base + sh->arena_header_offset);
	static struct cxlcr_arena_header at_point;
	cxlcr_refresh(copy, sizeof(at_point));
	memcpy(&at_point, copy, sizeof(at_point));
	if (at_point.magic != CXLCR_ARENA_MAGIC || at_point.region_generation != sh->arena_generation ||
	    (made && made_from_point(pool, arena, h, &s, &at_point, moved) < 0)) {
		if (at_point.magic != CXLCR_ARENA_MAGIC || at_point.region_generation != sh->arena_generation)
			cxlcr_error("recovery point %s: its copy of the arena header is not arena %s's", s.region.name,
				    arena->name);
		goto out;
	}
	if (recovery_heap_from_point(pool, arena, h, &s, false, &now, &heap) < 0)
		goto out;
	free_later_extents(pool, arena, &at_point);
	recovery_header_from_point(&at_point, &s, snapshot_generation,
				   __atomic_load_n(&h->scan_count, __ATOMIC_ACQUIRE) + 1);
	memcpy(h, &at_point, sizeof(at_point));
	cxlcr_publish(h, sizeof(*h));
	rc = 0;
out:
	if (rc < 0 && moved)
		moved->n = 0;
	recovery_point_done(&s, h, &now, heap);
	return rc;
}
