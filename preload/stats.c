/*
 * "Bytes used" of the arena, readable by `cxlcr status` from any host.
 *
 * Every thread that allocates claims one slot of the arena header and is its
 * only writer, so counting costs a plain store on a line no other thread
 * writes. A reader sums the slots. When a thread exits it folds its count
 * into retired_used and frees the slot; threads beyond the slot count, and
 * frees in threads that hold no slot, add to retired_used atomically.
 */
#include <unistd.h>

#include "preload.h"

TLS struct cxlcr_arena_slot *tls_slot;

void stats_thread_start(void)
{
	struct cxlcr_arena_header *h = cx.header;
	uint64_t tid = (uint64_t)gettid();
	for (uint32_t i = 0; i < CXLCR_ARENA_STAT_SLOTS; i++) {
		uint64_t seen = 0;
		if (__atomic_load_n(&h->slots[i].tid, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&h->slots[i].tid, &seen, tid, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			__atomic_store_n(&h->slots[i].used, 0, __ATOMIC_RELAXED);
			tls_slot = &h->slots[i];
			return;
		}
	}
}

void stats_thread_exit(void)
{
	struct cxlcr_arena_slot *s = tls_slot;
	if (!s)
		return;
	tls_slot = NULL;
	__atomic_fetch_add(&cx.header->retired_used, __atomic_load_n(&s->used, __ATOMIC_RELAXED),
			   __ATOMIC_RELAXED);
	__atomic_store_n(&s->used, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->tid, 0, __ATOMIC_RELEASE);
}

void stats_account_slow(int64_t delta)
{
	if (cx.header && !cx.fork_child)
		__atomic_fetch_add(&cx.header->retired_used, delta, __ATOMIC_RELAXED);
}

void stats_fallback(size_t size)
{
	if (cx.header && !cx.fork_child) {
		__atomic_fetch_add(&cx.header->fallback_allocs, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&cx.header->fallback_bytes, size, __ATOMIC_RELAXED);
	}
}

/* Allocations before the arena is attached happen on the one thread that
 * loads the process; they are added to the header once it exists. */
static uint64_t early_before_attach;

void stats_early(void)
{
	if (!cx.header)
		early_before_attach++;
	else if (!cx.fork_child)
		__atomic_fetch_add(&cx.header->early_allocs, 1, __ATOMIC_RELAXED);
}

void stats_attached(void)
{
	__atomic_fetch_add(&cx.header->early_allocs, early_before_attach, __ATOMIC_RELAXED);
}
