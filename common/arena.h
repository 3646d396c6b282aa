/*
 * An arena's heap as a whole: the arena region's heap part plus the extent
 * regions it grew by (pool_format.h, "An arena grows"). One definition of
 * what a valid extent table is, used by whoever reads a heap from the pool
 * (snapshots, status) and by the preload that writes it.
 */
#ifndef CXLCR_ARENA_H
#define CXLCR_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"

/* A checked copy of an arena header's heap description. */
struct cxlcr_heap {
	uint64_t address;        /* where the owner maps the heap */
	uint64_t size;           /* bytes in use: the extents' sum */
	uint64_t reserved;       /* the owner's address-space limit */
	uint32_t count;
	struct cxlcr_arena_extent extents[CXLCR_ARENA_EXTENTS_MAX];
};

/* Writes a new arena header for region r, whose heap of heap_size bytes
 * (its first extent) its owner maps at heap_address and may grow to
 * reserved bytes; magic is written last. */
void cxlcr_arena_header_init(struct cxlcr_arena_header *h, const struct cxlcr_pool *pool,
			     const struct cxlcr_region *r, uint64_t heap_address, uint64_t heap_size,
			     uint64_t reserved, int32_t pid);

/* "<arena>.ext<n>": the name of an arena's extent n (n >= 1). */
int cxlcr_extent_name(char *out, size_t len, const char *arena, uint32_t n);

/* Is name an extent of the arena called arena? */
int cxlcr_extent_of(const char *name, const char *arena);
/* The arena whose extent name is, into arena (len bytes): 1, or 0 if name
 * is no extent's (an arena's own name may hold the separator). */
int cxlcr_extent_arena(const char *name, char *arena, size_t len);

/* Reads the heap description of the arena region r, whose header h is
 * mapped, and checks it against the region table: extent 0 is r's heap,
 * every other extent a live CXLCR_KIND_EXTENT region of this arena at the
 * offset and size it says, the extents follow each other from heap offset
 * 0 without gaps and add up to heap_size, within heap_reserved. */
int cxlcr_heap_read(struct cxlcr_pool *pool, const struct cxlcr_region *r,
		    const struct cxlcr_arena_header *h, struct cxlcr_heap *out);

/* Maps the whole heap, contiguous, at an address of the system's choosing
 * (or, with at, exactly there): each extent MAP_SHARED from the pool. */
void *cxlcr_heap_map(struct cxlcr_pool *pool, const struct cxlcr_heap *heap, void *at);
void cxlcr_heap_unmap(const struct cxlcr_heap *heap, void *base);

/* The pool offset of heap byte off, and how many bytes from there lie in
 * the same extent; 0 if off is beyond the heap. */
uint64_t cxlcr_heap_pool_offset(const struct cxlcr_heap *heap, uint64_t off, uint64_t *contiguous);

/* Frees every extent region of the arena called arena (after the arena's
 * owner is gone). Returns how many were freed, -1 on error. */
int cxlcr_arena_free_extents(struct cxlcr_pool *pool, const char *arena);

/* Frees a service's region: an arena with its extents, any other kind as
 * it is. */
int cxlcr_service_free(struct cxlcr_pool *pool, const struct cxlcr_region *r);

#endif
