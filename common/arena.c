/*
 * An arena's heap as a whole: its extents, checked and mapped (arena.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "arena.h"
#include "error.h"
#include "persist.h"
#include "util.h"

void cxlcr_arena_header_init(struct cxlcr_arena_header *h, const struct cxlcr_pool *pool,
			     const struct cxlcr_region *r, uint64_t heap_address, uint64_t heap_size,
			     uint64_t reserved, int32_t pid)
{
	memset(h, 0, sizeof(*h));
	h->version = CXLCR_ARENA_VERSION;
	h->slot_count = CXLCR_ARENA_STAT_SLOTS;
	memcpy(h->pool_uuid, pool->sb->uuid, sizeof(h->pool_uuid));
	h->region_generation = r->generation;
	h->heap_address = heap_address;
	h->heap_size = heap_size;
	h->pid = pid;
	h->heap_reserved = reserved;
	h->extents[0] = (struct cxlcr_arena_extent){ .generation = r->generation,
						     .offset = r->offset + CXLCR_ARENA_HEAP_OFFSET,
						     .size = heap_size, .heap_offset = 0 };
	h->extent_count = 1;
	h->track_fd = -1;
	cxlcr_publish(h, sizeof(*h));
	h->magic = CXLCR_ARENA_MAGIC;
	cxlcr_publish(h, sizeof(*h));
}

int cxlcr_extent_name(char *out, size_t len, const char *arena, uint32_t n)
{
	int w = snprintf(out, len, "%s" CXLCR_EXTENT_SEP "%" PRIu32, arena, n);
	if (w < 0 || (size_t)w >= len || (size_t)w >= CXLCR_NAME_MAX)
		return cxlcr_error("arena '%s': the name of its extent %" PRIu32 " is too long", arena, n);
	return 0;
}

int cxlcr_extent_arena(const char *name, char *arena, size_t len)
{
	const char *sep = NULL;
	for (const char *p = strstr(name, CXLCR_EXTENT_SEP); p; p = strstr(p + 1, CXLCR_EXTENT_SEP))
		sep = p;
	if (!sep || (size_t)(sep - name) >= len)
		return 0;
	memcpy(arena, name, (size_t)(sep - name));
	arena[sep - name] = 0;
	return cxlcr_extent_of(name, arena);
}

int cxlcr_extent_of(const char *name, const char *arena)
{
	size_t n = strlen(arena), sep = strlen(CXLCR_EXTENT_SEP);
	if (strncmp(name, arena, n) || strncmp(name + n, CXLCR_EXTENT_SEP, sep) || !name[n + sep])
		return 0;
	for (const char *p = name + n + sep; *p; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

/* Extent i (>= 1) must be a live extent region of this arena, all of it
 * (or, of an arena a recovery is still making, one being made with it:
 * recovery/fresh_arena.c fills the heap before it commits them). */
static int check_extent(struct cxlcr_pool *pool, const struct cxlcr_region *arena, uint32_t i,
			const struct cxlcr_arena_extent *e)
{
	struct cxlcr_region r;
	if (cxlcr_region_get(pool, e->generation, &r) < 0)
		return cxlcr_error("arena '%s': its extent %" PRIu32 " (region %" PRIu64 ") is gone",
				   arena->name, i, e->generation);
	uint32_t want = arena->kind == CXLCR_KIND_MAKING ? CXLCR_KIND_MAKING : CXLCR_KIND_EXTENT;
	if (r.kind != want || !cxlcr_extent_of(r.name, arena->name))
		return cxlcr_error("arena '%s': extent %" PRIu32 " names region '%s', not one of its extents",
				   arena->name, i, r.name);
	if (e->offset != r.offset || e->size != r.size)
		return cxlcr_error("arena '%s': extent %" PRIu32 " says %" PRIu64 "+%" PRIu64
				   ", its region is %" PRIu64 "+%" PRIu64, arena->name, i, e->offset,
				   e->size, r.offset, r.size);
	return 0;
}

int cxlcr_heap_read(struct cxlcr_pool *pool, const struct cxlcr_region *r,
		    const struct cxlcr_arena_header *h, struct cxlcr_heap *out)
{
	const char *name = r->name;
	memset(out, 0, sizeof(*out));
	cxlcr_refresh(h, sizeof(*h));
	uint32_t count = __atomic_load_n(&h->extent_count, __ATOMIC_ACQUIRE);
	uint64_t size = __atomic_load_n(&h->heap_size, __ATOMIC_ACQUIRE);
	out->address = h->heap_address;
	out->reserved = h->heap_reserved;
	if (count == 0 || count > CXLCR_ARENA_EXTENTS_MAX)
		return cxlcr_error("arena '%s': header lists %" PRIu32 " extents", name, count);
	if (out->address == 0 || out->address % CXLCR_SNAPSHOT_PAGE_SIZE)
		return cxlcr_error("arena '%s': heap address %#" PRIx64 " is not page aligned", name,
				   out->address);
	memcpy(out->extents, h->extents, count * sizeof(h->extents[0]));
	out->count = count;
	uint64_t at = 0;
	for (uint32_t i = 0; i < count; i++) {
		const struct cxlcr_arena_extent *e = &out->extents[i];
		if (e->heap_offset != at || e->size == 0 || e->size % CXLCR_POOL_ALIGN)
			return cxlcr_error("arena '%s': extent %" PRIu32 " at heap offset %" PRIu64
					   " (size %" PRIu64 "), expected at %" PRIu64, name, i,
					   e->heap_offset, e->size, at);
		if (i == 0) {
			if (e->generation != r->generation || e->offset != r->offset + CXLCR_ARENA_HEAP_OFFSET ||
			    e->size != r->size - CXLCR_ARENA_HEAP_OFFSET)
				return cxlcr_error("arena '%s': its first extent is not its own region's heap",
						   name);
		} else if (check_extent(pool, r, i, e) < 0) {
			return -1;
		}
		at += e->size;
	}
	/* heap_size grows after extent_count: it may lag one extent behind. */
	if (size != at && !(count > 1 && size == out->extents[count - 1].heap_offset))
		return cxlcr_error("arena '%s': heap of %" PRIu64 " bytes, its extents hold %" PRIu64, name,
				   size, at);
	if (at > out->reserved)
		return cxlcr_error("arena '%s': extents of %" PRIu64 " bytes exceed its limit of %" PRIu64,
				   name, at, out->reserved);
	out->size = at;
	return 0;
}

void *cxlcr_heap_map(struct cxlcr_pool *pool, const struct cxlcr_heap *heap, void *at)
{
	char *base = mmap(at, heap->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
			  (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
	if (base == MAP_FAILED || (at && base != at)) {
		if (base != MAP_FAILED)
			munmap(base, heap->size);
		cxlcr_error("cannot reserve %" PRIu64 " bytes of address space for a heap: %s", heap->size,
			    strerror(errno));
		return NULL;
	}
	for (uint32_t i = 0; i < heap->count; i++) {
		const struct cxlcr_arena_extent *e = &heap->extents[i];
		void *m = mmap(base + e->heap_offset, e->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			       pool->fd, (off_t)e->offset);
		if (m == MAP_FAILED) {
			cxlcr_error("pool %s: cannot map extent %" PRIu32 " (%" PRIu64 " bytes at %" PRIu64 "): %s",
				    pool->path, i, e->size, e->offset, strerror(errno));
			munmap(base, heap->size);
			return NULL;
		}
	}
	return base;
}

void cxlcr_heap_unmap(const struct cxlcr_heap *heap, void *base)
{
	if (base)
		munmap(base, heap->size);
}

uint64_t cxlcr_heap_pool_offset(const struct cxlcr_heap *heap, uint64_t off, uint64_t *contiguous)
{
	for (uint32_t i = 0; i < heap->count; i++) {
		const struct cxlcr_arena_extent *e = &heap->extents[i];
		if (off >= e->heap_offset && off < e->heap_offset + e->size) {
			*contiguous = e->heap_offset + e->size - off;
			return e->offset + (off - e->heap_offset);
		}
	}
	*contiguous = 0;
	return 0;
}

int cxlcr_arena_free_extents(struct cxlcr_pool *pool, const char *arena)
{
	int freed = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region *slot = &pool->table[i];
		cxlcr_refresh(slot, sizeof(*slot));
		if (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) != CXLCR_REGION_LIVE ||
		    slot->kind != CXLCR_KIND_EXTENT)
			continue;
		/* A stable copy before believing the name. */
		struct cxlcr_region r;
		if (cxlcr_region_get(pool, slot->generation, &r) < 0 || r.kind != CXLCR_KIND_EXTENT ||
		    !cxlcr_extent_of(r.name, arena))
			continue;
		if (cxlcr_region_free(pool, r.generation) < 0)
			return -1;
		freed++;
	}
	return freed;
}

int cxlcr_service_free(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	/* The extents first: an arena region without them is still whole to
	 * anyone who looks, extents without their arena are not. */
	if (r->kind == CXLCR_KIND_ARENA && cxlcr_arena_free_extents(pool, r->name) < 0)
		return -1;
	return cxlcr_region_free(pool, r->generation);
}
