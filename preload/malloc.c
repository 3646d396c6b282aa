/*
 * The malloc family, routed by address.
 *
 * A pointer inside the arena was allocated by mimalloc and goes back to it;
 * any other pointer belongs to glibc. New memory comes from the calling
 * thread's arena heap, or from glibc when there is none yet (the process is
 * still loading), none any more (the thread is exiting, or this is a fork
 * child), or the arena is full and cannot grow (counted as a fallback).
 * A full arena first grows (grow.c), and the allocation is tried once more.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"

#define EXPORT __attribute__((visibility("default")))
#define MIN_ALIGN (2 * sizeof(void *)) /* glibc's malloc alignment */
/* What mimalloc's malloc always gives: it has 24-, 40-, ... byte size
 * classes, so plain malloc is only 8-byte aligned for such sizes. */
#define MI_MIN_ALIGN sizeof(void *)

/* mimalloc found no room: grow the arena and try again while growing
 * helps (other threads may take the new room first; growth ends at the
 * limit, so this ends too). */
#define GROW_TRIES 16
#define RETRY_GROWING(n, expr) ({                                             \
	void *p_ = NULL;                                                       \
	for (int i_ = 0; !p_ && i_ < GROW_TRIES && preload_grow(n); i_++)      \
		p_ = (expr);                                                   \
	p_;                                                                    \
})

static inline mi_heap_t *thread_heap(void)
{
	mi_heap_t *h = tls_heap;
	return likely(h != NULL && *cx.live_mark) ? h : preload_thread_heap_slow();
}

static inline size_t arena_usable(const void *p)
{
	return cx.mi.usable_size(p);
}

/* Allocated from the arena: count it. */
static inline void *arena_result(void *p)
{
	if (likely(p != NULL))
		stats_account((int64_t)arena_usable(p));
	return p;
}

/* Served by glibc instead: count it (as a fallback when the thread had an
 * arena heap, as early otherwise), unless glibc failed too. */
static inline void *glibc_result(mi_heap_t *h, void *p, size_t n)
{
	if (p) {
		if (h || unlikely(preload_thread_without_room()))
			stats_fallback(n);
		else
			stats_early();
	}
	return p;
}

static void *fallback_malloc(mi_heap_t *h, size_t n)
{
	return glibc_result(h, glibc_malloc(n), n);
}

EXPORT void *malloc(size_t n)
{
	mi_heap_t *h = thread_heap();
	if (likely(h != NULL)) {
		void *p = cx.mi.heap_malloc(h, n);
		if (likely(p != NULL))
			return arena_result(p);
		if ((p = RETRY_GROWING(n, cx.mi.heap_malloc(h, n))))
			return arena_result(p);
	}
	return fallback_malloc(h, n);
}

EXPORT void free(void *p)
{
	if (in_arena(p)) {
		if (unlikely(cx.fork_child || forked_unseen()))
			return; /* the parent's block: leave it alone */
		stats_account(-(int64_t)arena_usable(p));
		cx.mi.free(p);
		return;
	}
	glibc_free(p);
}

EXPORT void *calloc(size_t count, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(count, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	mi_heap_t *h = thread_heap();
	if (likely(h != NULL)) {
		void *p = cx.mi.heap_calloc(h, count, size);
		if (likely(p != NULL))
			return arena_result(p);
		if ((p = RETRY_GROWING(n, cx.mi.heap_calloc(h, count, size))))
			return arena_result(p);
	}
	return glibc_result(h, glibc_calloc(count, size), n);
}

/* Moves a block to new memory: used when a block changes allocator. */
static void *move_block(void *p, size_t old_usable, void *q, size_t n)
{
	memcpy(q, p, old_usable < n ? old_usable : n);
	free(p);
	return q;
}

EXPORT void *realloc(void *p, size_t n)
{
	if (!p)
		return malloc(n);
	if (n == 0) { /* glibc frees and returns NULL */
		free(p);
		return NULL;
	}
	mi_heap_t *h = thread_heap();
	if (in_arena(p)) {
		size_t old = arena_usable(p);
		if (likely(h != NULL)) {
			void *q = cx.mi.heap_realloc(h, p, n);
			if (unlikely(q == NULL))
				q = RETRY_GROWING(n, cx.mi.heap_realloc(h, p, n));
			if (likely(q != NULL)) {
				stats_account((int64_t)arena_usable(q) - (int64_t)old);
				return q;
			}
		}
		/* Arena full, or this thread may not use it: move to glibc. */
		void *q = fallback_malloc(h, n);
		return q ? move_block(p, old, q, n) : NULL;
	}
	if (h) {
		/* A block from before the arena existed moves into it. */
		void *q = cx.mi.heap_malloc(h, n);
		if (!q)
			q = RETRY_GROWING(n, cx.mi.heap_malloc(h, n));
		if (q)
			return move_block(p, glibc_usable_size(p), arena_result(q), n);
		return glibc_result(h, glibc_realloc(p, n), n);
	}
	return glibc_realloc(p, n);
}

EXPORT void *reallocarray(void *p, size_t count, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(count, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, n);
}

/* All the aligned allocators end here; align is a power of two. */
static void *aligned(size_t align, size_t n)
{
	if (align <= MI_MIN_ALIGN)
		return malloc(n);
	mi_heap_t *h = thread_heap();
	if (likely(h != NULL)) {
		void *p = cx.mi.heap_malloc_aligned_at(h, n, align, 0);
		if (likely(p != NULL))
			return arena_result(p);
		if (n + align > n && (p = RETRY_GROWING(n + align, cx.mi.heap_malloc_aligned_at(h, n, align, 0))))
			return arena_result(p);
	}
	return glibc_result(h, glibc_memalign(align, n), n);
}

static inline bool power_of_two(size_t x)
{
	return x && !(x & (x - 1));
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	if (!power_of_two(align) || align % sizeof(void *))
		return EINVAL;
	int saved = errno;
	void *p = aligned(align, n);
	if (!p)
		return ENOMEM;
	errno = saved;
	*out = p;
	return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (!power_of_two(align)) {
		errno = EINVAL;
		return NULL;
	}
	return aligned(align, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
	/* glibc rounds a non-power-of-two alignment up. */
	if (!power_of_two(align)) {
		if (align > ((size_t)1 << (sizeof(size_t) * 8 - 2))) {
			errno = EINVAL;
			return NULL;
		}
		size_t a = MIN_ALIGN;
		while (a < align)
			a <<= 1;
		align = a;
	}
	return aligned(align, n);
}

EXPORT void *valloc(size_t n)
{
	return aligned((size_t)getpagesize(), n);
}

EXPORT void *pvalloc(size_t n)
{
	size_t page = (size_t)getpagesize();
	size_t rounded;
	if (__builtin_add_overflow(n, page - 1, &rounded)) {
		errno = ENOMEM;
		return NULL;
	}
	rounded &= ~(page - 1);
	return aligned(page, rounded ? rounded : page);
}

EXPORT size_t malloc_usable_size(void *p)
{
	if (!p)
		return 0;
	if (in_arena(p))
		return arena_usable(p);
	return glibc_usable_size(p);
}
