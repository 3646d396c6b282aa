/*
 * Internal header of libcxlcr-preload.so, the malloc interposer that puts a
 * service's heap in its pool arena.
 *
 *   glue.c     loads mimalloc privately
 *   glibc.c    finds glibc's own allocator, whatever else the program links
 *   attach.c   maps the arena and hands it to mimalloc (process start)
 *   grow.c     adds an extent when the arena is full
 *   stats.c    per-thread "bytes used" counters kept in the arena header
 *   malloc.c   the malloc family, routed by address
 *   shed.c     drops the heap's page tables when a checkpoint is coming
 *   release.c  gives freed heap memory back to the pool
 *   track.c    the service's part of write tracking (tracking/)
 */
#ifndef CXLCR_PRELOAD_H
#define CXLCR_PRELOAD_H

#include <mimalloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/pool.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define TLS         __attribute__((tls_model("initial-exec"))) __thread
#define HIDDEN      __attribute__((visibility("hidden")))

/* glibc's own allocator, looked up in libc.so.6 (glibc.c): the functions
 * for every block outside the arena. */
HIDDEN void  *glibc_malloc(size_t n);
HIDDEN void  *glibc_calloc(size_t count, size_t size);
HIDDEN void  *glibc_realloc(void *p, size_t n);
HIDDEN void   glibc_free(void *p);
HIDDEN void  *glibc_memalign(size_t align, size_t n);
HIDDEN size_t glibc_usable_size(void *p);

/* The mimalloc functions the preload uses, from a private copy of the
 * library (see glue.c for why it is not linked normally). */
struct mimalloc_api {
	void *(*heap_malloc)(mi_heap_t *, size_t);
	void *(*heap_calloc)(mi_heap_t *, size_t, size_t);
	void *(*heap_realloc)(mi_heap_t *, void *, size_t);
	/* Not mi_heap_malloc_aligned: in mimalloc 2.0.9 (Debian 12) its fast path
	 * misaligns blocks of 256..1024 bytes aligned to 256..1024
	 * (microsoft/mimalloc#700). The _at variant does not take that path. */
	void *(*heap_malloc_aligned_at)(mi_heap_t *, size_t, size_t, size_t);
	void  (*free)(void *);
	size_t (*usable_size)(const void *);
	mi_heap_t *(*heap_new)(void);
	bool  (*manage_os_memory_ex)(void *, size_t, bool, bool, bool, int, bool, mi_arena_id_t *);
	void  (*option_set)(mi_option_t, long);
};

/* Per-thread state of the allocator. */
enum thread_state {
	THREAD_NEW = 0,     /* no heap yet */
	THREAD_ARENA,       /* allocates from its arena heap */
	THREAD_GLIBC,       /* exiting thread or fork child: glibc only */
	THREAD_NO_ROOM,     /* no heap: the arena was full and could not grow */
};

/* Is this thread on glibc because the arena had no room for its heap? */
HIDDEN bool preload_thread_without_room(void);

struct preload {
	uintptr_t heap_lo;         /* the arena's heap: [heap_lo, heap_lo+heap_size) */
	size_t heap_size;          /* reserved for it (--arena-max); its first */
	uint64_t grown;            /* ... grown bytes are mapped (atomic) */
	bool ready;                /* arena registered: allocation may use it */
	bool fork_child;           /* we are a child of fork(): hands off the arena */
	/* Reads 1 in this process, 0 in any child of fork(), _Fork() or a
	 * raw clone() (a MADV_WIPEONFORK page, see attach.c): those last two
	 * run no pthread_atfork handler. */
	const volatile uint32_t *live_mark;
	struct cxlcr_arena_header *header;
	/* The pool, kept open from the start (its metadata mapped only while
	 * growing, see cxlcr_pool_detach()): growing needs it, and a service
	 * that drops its privileges (memcached -u) could not open it again. */
	struct cxlcr_pool pool;
	struct mimalloc_api mi;
};

extern struct preload cx HIDDEN;
extern TLS mi_heap_t *tls_heap HIDDEN;

/* Is p inside the arena? One subtraction and a compare: unsigned wrap-around
 * makes pointers below heap_lo compare large. (The whole reservation counts:
 * mimalloc hands out only what is mapped.) */
static inline bool in_arena(const void *p)
{
	return (uintptr_t)p - cx.heap_lo < cx.heap_size;
}

HIDDEN int  preload_load_mimalloc(void);
HIDDEN int  preload_attach_arena(void);
HIDDEN mi_heap_t *preload_thread_heap_slow(void);
HIDDEN void preload_enter_fork_child(void);
/* (Re)arms live_mark; after a CRIU restore too, which keeps the page but
 * not its MADV_WIPEONFORK. */
HIDDEN void preload_arm_live_mark(void);
/* A child that ran no fork handler finds out here, on its first use of
 * the allocator: true if this is such a child (now handled as one). */
static inline bool forked_unseen(void)
{
	if (__builtin_expect(*cx.live_mark != 0 || cx.fork_child, 1))
		return false;
	preload_enter_fork_child();
	return true;
}
HIDDEN pid_t preload_outer_pid(void);
/* grow.c: adds an extent with room for n more bytes; false if the arena is
 * at its limit, the pool is full, or this process does not own the arena. */
HIDDEN bool preload_grow(size_t n);
HIDDEN int  preload_register_extent(void *start, size_t size);
/* Maps [start, start+len) of the heap with small pages from now on (and
 * drops its present mappings with zap): see track.c. */
HIDDEN void preload_small_pages(void *start, size_t len, bool zap);
/* ... and 2 MiB ones again, once the heap is unregistered (track.c). */
HIDDEN void preload_huge_pages(void *start, size_t len);
/* release.c: the madvise system call itself (ours interposes the name). */
HIDDEN int  preload_madvise(void *addr, size_t len, int advice);
/* shed.c: starts the thread that drops the heap's page tables on request. */
HIDDEN int  preload_shed_start(void);
HIDDEN bool preload_heap_is_shared(void);
/* track.c: makes or closes the userfaultfd of write tracking, on request. */
HIDDEN void preload_track_serve(struct cxlcr_arena_header *h);

/* stats.c */
extern TLS struct cxlcr_arena_slot *tls_slot HIDDEN;
HIDDEN void stats_account_slow(int64_t delta);
HIDDEN void stats_thread_start(void);
HIDDEN void stats_thread_exit(void);
HIDDEN void stats_fallback(size_t size);
HIDDEN void stats_early(void);
HIDDEN void stats_attached(void);

static inline void stats_account(int64_t delta)
{
	struct cxlcr_arena_slot *s = tls_slot;
	if (likely(s != NULL))
		__atomic_store_n(&s->used, s->used + delta, __ATOMIC_RELAXED);
	else
		stats_account_slow(delta);
}

#endif
