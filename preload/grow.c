/*
 * A full arena grows.
 *
 * Nobody can size a heap exactly in advance, so an arena is not a cliff:
 * when mimalloc finds no room, the preload allocates another region of
 * the pool (an extent), maps it right after the heap inside the address
 * space reserved at start, records it in the arena header (so that
 * snapshots, status and a restore find it), and hands it to mimalloc as
 * one more arena. Only when the reservation (--arena-max) is used up or
 * the pool itself is full does an allocation fall back to glibc.
 *
 * Extents grow geometrically (each as large as the heap so far, at most
 * EXTENT_MAX), so that a heap that grows a lot takes few region slots.
 * Only the arena's owner grows it. A fork child restored from a snapshot
 * has copy-on-write views of the heap and, in its memory, its parent's
 * state of this library (the same pid, possibly, on another host): it
 * recognises itself by its heap mapping being private, and falls back to
 * glibc.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/arena.h"
#include "../common/error.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "preload.h"

#define EXTENT_MAX   (1ull << 30)
/* What mimalloc needs around a block: a huge one gets a segment of its own,
 * of its size rounded up plus a segment's metadata. */
#define SEGMENT      (32ull << 20)

static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
/* Growing opens the pool, which may allocate: such an allocation must not
 * try to grow again (it would wait for the lock this thread holds). */
static TLS bool growing;

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* The pool region of our arena, if this process owns it. */
static int owned_arena(struct cxlcr_pool *pool, struct cxlcr_region *r)
{
	if (cxlcr_region_get(pool, cx.header->region_generation, r) < 0)
		return -1;
	if (r->owner_pid != preload_outer_pid())
		return cxlcr_error("arena '%s' is owned by pid %d, not by this process", r->name,
				   (int)r->owner_pid);
	return 0;
}

/* Allocates, claims and maps one extent of size bytes at heap offset at. */
static int add_extent(struct cxlcr_pool *pool, const struct cxlcr_region *arena, uint32_t index,
		      uint64_t at, uint64_t size, struct cxlcr_region *ext)
{
	char name[CXLCR_NAME_MAX];
	if (cxlcr_extent_name(name, sizeof(name), arena->name, index) < 0 ||
	    cxlcr_region_alloc(pool, CXLCR_KIND_EXTENT, name, size, ext) < 0)
		return -1;
	if (cxlcr_region_claim(pool, ext->generation, arena->owner_pid, arena->owner_host, arena->command,
			       ext) < 0)
		goto free;
	void *want = (void *)(cx.heap_lo + at);
	if (mmap(want, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, pool->fd, (off_t)ext->offset) ==
	    MAP_FAILED) {
		cxlcr_error("pool %s: cannot map extent '%s': %s", pool->path, name, strerror(errno));
		goto free;
	}
	return 0;
free:
	cxlcr_region_free(pool, ext->generation);
	return -1;
}

/* Records extent index in the header: the entry first, then the count,
 * then the heap size, each published (see pool_format.h). */
static void record_extent(uint32_t index, const struct cxlcr_region *ext, uint64_t at)
{
	struct cxlcr_arena_header *h = cx.header;
	h->extents[index] = (struct cxlcr_arena_extent){ .generation = ext->generation, .offset = ext->offset,
							 .size = ext->size, .heap_offset = at };
	cxlcr_publish(&h->extents[index], sizeof(h->extents[index]));
	__atomic_store_n(&h->extent_count, index + 1, __ATOMIC_RELEASE);
	cxlcr_publish(&h->extent_count, sizeof(h->extent_count));
	cxlcr_futex_wake_all(&h->extent_count); /* the tracker */
	__atomic_store_n(&h->heap_size, at + ext->size, __ATOMIC_RELEASE);
	cxlcr_publish(&h->heap_size, sizeof(h->heap_size));
}

/* The sizes to try for n more bytes with `at` in use: the geometric step,
 * then the least that serves n (the pool may have room for that only). */
static int extent_sizes(size_t n, uint64_t at, uint64_t sizes[2])
{
	uint64_t room = cx.heap_size - at;
	uint64_t need = round_up((uint64_t)n + SEGMENT, CXLCR_HEAP_ALIGN);
	if (need > room)
		return 0;
	uint64_t step = at < EXTENT_MAX ? round_up(at, CXLCR_HEAP_ALIGN) : EXTENT_MAX;
	if (step > room)
		step = room / CXLCR_HEAP_ALIGN * CXLCR_HEAP_ALIGN;
	sizes[0] = step > need ? step : need;
	sizes[1] = need;
	return sizes[0] == need ? 1 : 2;
}

/*
 * A growth is under way from fence_enter() to fence_leave(): while it is,
 * a verb that is about to dump the service waits (pool_format.h,
 * grow_fence), and while a verb's fence is up, a growth waits for it to
 * come down, at most CXLCR_GROW_FENCE_WAIT_MS in all (a verb that died
 * with its fence up; then the fence goes). A CRIU that froze us midway
 * would otherwise put the files growing has open in its checkpoint, and
 * the restore fail on them.
 */
static void fence_enter(void)
{
	uint32_t *w = &cx.header->grow_fence;
	uint64_t until = cxlcr_mono_ns() + CXLCR_GROW_FENCE_WAIT_MS * 1000000ull;
	for (;;) {
		uint32_t seen = __atomic_load_n(w, __ATOMIC_ACQUIRE);
		uint64_t now = cxlcr_mono_ns();
		if (!(seen & CXLCR_GROW_FENCE) || now >= until) {
			/* Past the wait, the fence is taken down for good: its
			 * verb is gone, and the next growth need not wait too. */
			uint32_t want = (now >= until ? seen & ~CXLCR_GROW_FENCE : seen) + 1;
			if (__atomic_compare_exchange_n(w, &seen, want, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				return;
			continue;
		}
		cxlcr_futex_wait_until(w, seen, until);
	}
}

static void fence_leave(void)
{
	uint32_t *w = &cx.header->grow_fence;
	uint32_t now = __atomic_sub_fetch(w, 1, __ATOMIC_ACQ_REL);
	if (now & CXLCR_GROW_FENCE)
		cxlcr_futex_wake_all(w);
}

/*
 * Tests only ($CXLCR_TEST_GROW_HOLD=PATH, tests/t_grow_fence.sh): the first
 * growth stops inside the fence with a /proc file open, as growing has one
 * for a moment, says so by making PATH.held, and goes on once PATH exists
 * (at most a minute).
 */
static void test_hold(void)
{
	static bool held;
	const char *path = getenv("CXLCR_TEST_GROW_HOLD");
	if (held || !path || !*path)
		return;
	held = true;
	char mark[4096];
	snprintf(mark, sizeof(mark), "%s.held", path);
	int proc = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	struct timespec tick = { 0, 2000000 };
	for (int i = 0; i < 30000 && access(path, F_OK) != 0; i++)
		nanosleep(&tick, NULL);
	if (proc >= 0)
		close(proc);
}

bool preload_grow(size_t n)
{
	if (!cx.ready || cx.fork_child || n > cx.heap_size || growing)
		return false;
	/* Several threads may find the arena full at once: one grows it, the
	 * others find it grown and try again. */
	uint64_t seen = __atomic_load_n(&cx.grown, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&grow_lock);
	growing = true;
	bool grown = false;
	uint64_t at = __atomic_load_n(&cx.grown, __ATOMIC_ACQUIRE);
	uint32_t index = cx.header->extent_count;
	if (at != seen) {
		grown = true;
		goto out;
	}
	uint64_t sizes[2];
	int tries = extent_sizes(n, at, sizes);
	if (tries == 0 || index >= CXLCR_ARENA_EXTENTS_MAX)
		goto out;
	struct cxlcr_region arena, ext;
	fence_enter();
	test_hold();
	if (!preload_heap_is_shared() || cxlcr_pool_attach(&cx.pool) < 0) {
		fence_leave();
		goto out;
	}
	if (owned_arena(&cx.pool, &arena) == 0) {
		for (int i = 0; i < tries && !grown; i++)
			grown = add_extent(&cx.pool, &arena, index, at, sizes[i], &ext) == 0;
	}
	cxlcr_pool_detach(&cx.pool);
	if (grown)
		record_extent(index, &ext, at);
	fence_leave();
	if (grown) {
		bool small = __atomic_load_n(&cx.header->track_small_pages, __ATOMIC_SEQ_CST);
		if (small)
			preload_small_pages((void *)(cx.heap_lo + at), ext.size, false);
		if (preload_register_extent((void *)(cx.heap_lo + at), ext.size) < 0) {
			/* Mapped and recorded, but mimalloc will not use it:
			 * it stays the arena's (a restore maps it), unused. */
			grown = false;
		}
		__atomic_store_n(&cx.grown, at + ext.size, __ATOMIC_SEQ_CST);
		/* A first snapshot that asked for small pages after the look
		 * above may have had the helper remap the heap before it saw
		 * this extent (shed.c: shed_heap): then it is this one's to do. */
		if (!small && __atomic_load_n(&cx.header->track_small_pages, __ATOMIC_SEQ_CST))
			preload_small_pages((void *)(cx.heap_lo + at), ext.size, true);
	}
out:
	growing = false;
	pthread_mutex_unlock(&grow_lock);
	return grown;
}
