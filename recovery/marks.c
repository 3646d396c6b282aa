/*
 * What became of a service's recovery, written into its arena header for
 * `cxlcr status` to say: lost (its host died and it had no recovery
 * point), or failed (recovering it failed; given up on after a limit),
 * and, in an old arena, that a fresh one replaced it.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/persist.h"
#include "recovery.h"

struct cxlcr_arena_header *recovery_arena_header(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, r->offset, sizeof(*h), 0, 0);
	if (!h)
		return NULL;
	cxlcr_refresh(h, sizeof(*h));
	if (h->magic == CXLCR_ARENA_MAGIC && h->region_generation == r->generation)
		return h;
	munmap(h, sizeof(*h));
	return NULL;
}

void recovery_mark_lost(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	struct cxlcr_arena_header *h = recovery_arena_header(pool, r);
	if (!h)
		return;
	__atomic_store_n(&h->lost, 1, __ATOMIC_RELEASE);
	cxlcr_publish(&h->lost, sizeof(h->lost));
	munmap(h, sizeof(*h));
}

void recovery_mark_failed(struct cxlcr_pool *pool, const struct cxlcr_region *r, const char *why, bool give_up)
{
	struct cxlcr_arena_header *h = recovery_arena_header(pool, r);
	if (!h)
		return;
	if (why) {
		memset(h->failed_reason, 0, sizeof(h->failed_reason));
		snprintf(h->failed_reason, sizeof(h->failed_reason), "%s", why);
		cxlcr_publish(h->failed_reason, sizeof(h->failed_reason));
	}
	if (give_up) {
		__atomic_store_n(&h->failed, 1, __ATOMIC_RELEASE);
		cxlcr_publish(&h->failed, sizeof(h->failed));
	}
	munmap(h, sizeof(*h));
}

void recovery_mark_recovered(struct cxlcr_pool *pool, const struct cxlcr_region *r, uint64_t into)
{
	struct cxlcr_arena_header *h = recovery_arena_header(pool, r);
	if (!h)
		return;
	__atomic_store_n(&h->recovered_into, into, __ATOMIC_RELEASE);
	cxlcr_publish(&h->recovered_into, sizeof(h->recovered_into));
	munmap(h, sizeof(*h));
}

bool recovery_replaced(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	struct cxlcr_arena_header *h = recovery_arena_header(pool, r);
	if (!h)
		return true;
	bool yes = __atomic_load_n(&h->recovered_into, __ATOMIC_ACQUIRE) != 0;
	munmap(h, sizeof(*h));
	return yes;
}

bool recovery_given_up(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	struct cxlcr_arena_header *h = recovery_arena_header(pool, r);
	if (!h)
		return false;
	bool yes = __atomic_load_n(&h->lost, __ATOMIC_ACQUIRE) || __atomic_load_n(&h->failed, __ATOMIC_ACQUIRE);
	munmap(h, sizeof(*h));
	return yes;
}
