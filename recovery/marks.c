/*
 * What became of a service's recovery, written into its arena header for
 * `cxlcr status` to say: lost (its host died and it had no recovery
 * point), or failed (recovering it failed; given up on after a limit),
 * and, in an old arena, that a fresh one replaced it.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/error.h"
#include "../common/persist.h"
#include "../common/util.h"
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

/* Under the lock: r is still live at its offset, and h, its header mapped
 * before the lock, is still its own (refreshed). */
static bool still_its_header(struct cxlcr_pool *pool, const struct cxlcr_region *r, struct cxlcr_arena_header *h)
{
	struct cxlcr_region now;
	if (cxlcr_region_get(pool, r->generation, &now) < 0 || now.offset != r->offset)
		return false;
	cxlcr_refresh(h, sizeof(*h));
	return h->magic == CXLCR_ARENA_MAGIC && h->region_generation == r->generation;
}

/* A mark is written under the pool lock, right after the lock and every
 * guard this process works under are found still to hold, as a change to
 * the region table is: a recovery whose work was taken over (its winner
 * only frozen, woken after the fence moved on) must not change what the
 * one that took over reads (that an old arena was replaced, or is to be
 * recovered still). And only into r while it is still live and its
 * header still its own, judged under the lock too: the wait for the lock
 * may last leases, in which r could be freed and its space given to
 * another region. -1 with one line if refused. */
static int mark(struct cxlcr_pool *pool, const struct cxlcr_region *r,
		void (*write)(struct cxlcr_arena_header *h, const void *arg), const void *arg)
{
	struct cxlcr_arena_header *h = recovery_arena_header(pool, r);
	if (!h)
		return 0;
	int rc = cxlcr_pool_lock(pool);
	if (rc == 0) {
		if ((rc = cxlcr_pool_held(pool)) == 0 && still_its_header(pool, r, h))
			write(h, arg);
		char why[CXLCR_ERROR_MAX];
		cxlcr_copy_field(why, sizeof(why), cxlcr_last_error());
		if (cxlcr_pool_unlock(pool) == 0 && rc < 0)
			cxlcr_error("%s", why);
	}
	munmap(h, sizeof(*h));
	return rc;
}

static void write_lost(struct cxlcr_arena_header *h, const void *arg)
{
	(void)arg;
	__atomic_store_n(&h->lost, 1, __ATOMIC_RELEASE);
	cxlcr_publish(&h->lost, sizeof(h->lost));
}

int recovery_mark_lost(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	return mark(pool, r, write_lost, NULL);
}

struct failed_mark {
	const char *why;
	bool give_up;
};

static void write_failed(struct cxlcr_arena_header *h, const void *arg)
{
	const struct failed_mark *f = arg;
	if (f->why) {
		memset(h->failed_reason, 0, sizeof(h->failed_reason));
		snprintf(h->failed_reason, sizeof(h->failed_reason), "%s", f->why);
		cxlcr_publish(h->failed_reason, sizeof(h->failed_reason));
	}
	if (f->give_up) {
		__atomic_store_n(&h->failed, 1, __ATOMIC_RELEASE);
		cxlcr_publish(&h->failed, sizeof(h->failed));
	}
}

int recovery_mark_failed(struct cxlcr_pool *pool, const struct cxlcr_region *r, const char *why, bool give_up)
{
	struct failed_mark f = { why, give_up };
	return mark(pool, r, write_failed, &f);
}

static void write_recovered(struct cxlcr_arena_header *h, const void *arg)
{
	__atomic_store_n(&h->recovered_into, *(const uint64_t *)arg, __ATOMIC_RELEASE);
	cxlcr_publish(&h->recovered_into, sizeof(h->recovered_into));
}

int recovery_mark_recovered(struct cxlcr_pool *pool, const struct cxlcr_region *r, uint64_t into)
{
	return mark(pool, r, write_recovered, &into);
}

int recovery_made_begin(struct cxlcr_pool *pool, const struct cxlcr_region *fresh, const struct cxlcr_region *old,
			struct recovery_made *m)
{
	/* (An old arena whose header is not its own has no mark to take,
	 * as recovery_mark_recovered() leaves it.) */
	*m = (struct recovery_made){ .pool = pool,
				     .fresh = recovery_arena_header(pool, fresh),
				     .old = recovery_arena_header(pool, old),
				     .fresh_generation = fresh->generation,
				     .old_region = *old };
	if (m->fresh)
		return 0;
	recovery_made_end(m);
	return cxlcr_error("arena %.*s: its header is not its own", (int)CXLCR_NAME_MAX, fresh->name);
}

/* Under the commit's hold of the lock: the fresh arena's header is its
 * own (its region was just committed); the old arena's is judged again,
 * as mark() does (mapped before the lock, it may have been freed and its
 * space given to another region meanwhile). No pool lock is taken here. */
void recovery_made_write(void *arg)
{
	struct recovery_made *m = arg;
	cxlcr_refresh(m->fresh, sizeof(*m->fresh));
	__atomic_store_n(&m->fresh->recovered_into, 0, __ATOMIC_RELEASE);
	cxlcr_publish(&m->fresh->recovered_into, sizeof(m->fresh->recovered_into));
	if (m->old && still_its_header(m->pool, &m->old_region, m->old)) {
		__atomic_store_n(&m->old->recovered_into, m->fresh_generation, __ATOMIC_RELEASE);
		cxlcr_publish(&m->old->recovered_into, sizeof(m->old->recovered_into));
	}
}

void recovery_made_end(struct recovery_made *m)
{
	if (m->fresh)
		munmap(m->fresh, sizeof(*m->fresh));
	if (m->old)
		munmap(m->old, sizeof(*m->old));
	m->fresh = m->old = NULL;
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
