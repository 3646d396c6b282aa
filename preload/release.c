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
 * range out of the pool file (it then reads as zero, takes no memory and
 * is skipped by snapshots). A devdax device cannot punch holes: there the
 * range is zeroed, so that snapshots still store nothing for it. A fork
 * child's heap is private views of a snapshot (MADV_REMOVE says EACCES):
 * its own memory, given back as the call asked.
 *
 * Every other madvise of the process passes through unchanged, and the
 * preload's own (shed.c) calls the system call directly.
 */
#include <errno.h>
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

EXPORT int madvise(void *addr, size_t len, int advice)
{
	uintptr_t lo, hi;
	if ((advice != MADV_DONTNEED && advice != MADV_FREE) || !heap_part(addr, len, &lo, &hi))
		return preload_madvise(addr, len, advice);
	/* mimalloc's decommits are whole OS pages inside the heap. Counted
	 * around the punch, which tracking does not see (pool_format.h). */
	__atomic_fetch_add(&cx.header->punches_begun, 1, __ATOMIC_SEQ_CST);
	int punched = preload_madvise((void *)lo, hi - lo, MADV_REMOVE);
	__atomic_fetch_add(&cx.header->punches_done, 1, __ATOMIC_SEQ_CST);
	if (punched < 0) {
		if (errno == EACCES) /* a private mapping: a fork child's own memory */
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
