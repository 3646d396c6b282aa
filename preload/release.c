/*
 * Freed heap memory goes back to the pool.
 *
 * mimalloc gives memory it no longer needs back with madvise(MADV_DONTNEED)
 * ("decommit", after a short delay). On private memory that frees the
 * pages; on the arena, a MAP_SHARED mapping of the pool, it only drops
 * this process's page tables: the data stays in the pool, resident, and
 * every snapshot, fork and recovery point would copy deleted data. So the
 * preload registers the arena as decommittable and takes mimalloc's
 * madvise calls (it calls madvise through the PLT, which finds ours):
 * inside the arena, DONTNEED and FREE become MADV_REMOVE, which punches the
 * range out of the pool file (it then reads as zero and is skipped by
 * snapshots), and the range's blocks are reserved again (reserve_again():
 * the memory stays the arena's, so that the next touch cannot find it
 * taken). A devdax device cannot punch holes: there the
 * range is zeroed, so that snapshots still store nothing for it. A fork
 * child's heap is private views of a snapshot (MADV_REMOVE says EACCES),
 * or anonymous memory in copy mode (EINVAL): its own memory, given back as
 * the call asked.
 *
 * Every other madvise of the process passes through unchanged, and the
 * preload's own (shed.c) calls the system call directly.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

#define EXPORT __attribute__((visibility("default")))

int preload_madvise(void *addr, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, addr, len, advice);
}

/* The part of [addr, addr+len) that lies in the heap mapped so far. */
static bool heap_part(void *addr, size_t len, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t a = (uintptr_t)addr, end = a + len;
	uintptr_t heap_end = cx.heap_lo + __atomic_load_n(&cx.grown, __ATOMIC_ACQUIRE);
	*lo = a > cx.heap_lo ? a : cx.heap_lo;
	*hi = end < heap_end ? end : heap_end;
	return cx.ready && !cx.fork_child && *lo < *hi;
}

/*
 * The blocks of the heap range [lo, hi), just punched out, are reserved
 * again in the pool file (fallocate, which allocates without writing: the
 * range still reads as zero, is not resident in this process and is a hole
 * to SEEK_DATA, so snapshots skip it). A region gets its blocks when it is
 * made, so that a service never meets a full file system at its first
 * touch of a page (a SIGBUS); a punch gave them back, and the next touch
 * of that page could find another tenant had taken them. On devdax there
 * is nothing to reserve.
 */
static void reserve_again(uintptr_t lo, uintptr_t hi)
{
	if (cx.pool.devdax || cx.pool.fd < 0)
		return;
	const struct cxlcr_arena_header *h = cx.header;
	uint64_t a = lo - cx.heap_lo, b = hi - cx.heap_lo;
	uint32_t n = __atomic_load_n(&h->extent_count, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n && i < CXLCR_ARENA_EXTENTS_MAX; i++) {
		const struct cxlcr_arena_extent *e = &h->extents[i];
		uint64_t s = a > e->heap_offset ? a : e->heap_offset;
		uint64_t t = b < e->heap_offset + e->size ? b : e->heap_offset + e->size;
		if (s < t)
			fallocate(cx.pool.fd, FALLOC_FL_KEEP_SIZE, (off_t)(e->offset + (s - e->heap_offset)),
				  (off_t)(t - s));
	}
}

/* Entry n % CXLCR_PUNCH_LOG of the punch log, as a seqlock: its seq is 0
 * while the range is rewritten, n + 1 once it is whole. */
static void log_punch(uint64_t n, uintptr_t lo, uintptr_t hi)
{
	struct cxlcr_punch_entry *e = &cx.header->punch_log[n % CXLCR_PUNCH_LOG];
	__atomic_store_n(&e->seq, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&e->lo, lo - cx.heap_lo, __ATOMIC_RELAXED);
	__atomic_store_n(&e->hi, hi - cx.heap_lo, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, n + 1, __ATOMIC_RELEASE);
}

EXPORT int madvise(void *addr, size_t len, int advice)
{
	uintptr_t lo, hi;
	if ((advice != MADV_DONTNEED && advice != MADV_FREE) || !heap_part(addr, len, &lo, &hi))
		return preload_madvise(addr, len, advice);
	/* mimalloc's decommits are whole OS pages inside the heap. Counted
	 * around the punch, which tracking does not see, and logged before it
	 * (pool_format.h, punch_log), so that a snapshot knows its pages. */
	uint64_t n = __atomic_fetch_add(&cx.header->punches_begun, 1, __ATOMIC_SEQ_CST);
	log_punch(n, lo, hi);
	int punched = preload_madvise((void *)lo, hi - lo, MADV_REMOVE);
	__atomic_fetch_add(&cx.header->punches_done, 1, __ATOMIC_SEQ_CST);
	if (punched == 0)
		reserve_again(lo, hi);
	if (punched < 0) {
		/* A fork child's own memory: a private view of a snapshot
		 * (EACCES), or anonymous memory in copy mode (EINVAL). */
		if (errno == EACCES || errno == EINVAL)
			return preload_madvise(addr, len, advice);
		/* devdax (ENODEV, EOPNOTSUPP): no holes, so zeros */
		memset((void *)lo, 0, hi - lo);
		preload_madvise((void *)lo, hi - lo, MADV_DONTNEED);
	}
	__atomic_fetch_add(&cx.header->released_bytes, hi - lo, __ATOMIC_RELAXED);
	if (lo > (uintptr_t)addr && preload_madvise(addr, lo - (uintptr_t)addr, advice) < 0)
		return -1;
	if (hi < (uintptr_t)addr + len && preload_madvise((void *)hi, (uintptr_t)addr + len - hi, advice) < 0)
		return -1;
	return 0;
}
