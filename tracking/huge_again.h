/*
 * Back to 2 MiB mappings for a tracked service that a snapshot mapped
 * with 4 KiB ones (huge_again.c). Under the service's lease:
 *
 *   cxlcr_track_huge_begin()   the writes since its newest snapshot no
 *                              longer known, its heap unregistered
 *   (a shed request: the service's helper maps the heap with 2 MiB pages)
 *   cxlcr_track_huge_end()     the heap registered again
 */
#ifndef CXLCR_HUGE_AGAIN_H
#define CXLCR_HUGE_AGAIN_H

#include <stdint.h>

#include "track.h"

struct cxlcr_arena_header;
struct cxlcr_huge_again {
	struct cxlcr_arena_header *header; /* mapped */
	int uffd;                          /* a copy of the tracker's */
	uint32_t extents;                  /* the extents unregistered */
};

/* 0 begun; 1 nothing to do, *why says so; -1 with one line (the heap
 * registered as it was). */
int cxlcr_track_huge_begin(struct cxlcr_pool *pool, const struct cxlcr_region *arena, struct cxlcr_huge_again *g,
			   const char **why);
/* 0 if the heap is registered again and the helper has remapped it;
 * -1 with one line otherwise. */
int cxlcr_track_huge_end(struct cxlcr_huge_again *g);

#endif
