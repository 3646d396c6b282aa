/*
 * Page-table shedding: just before a checkpoint or a migrate freezes this
 * process, the daemon asks it to drop its page tables over the heap. The
 * pages stay where they are, in the pool.
 *
 * Why: CRIU reads /proc/PID/smaps while the service is frozen, and the
 * kernel accounts there every 4 KiB page a mapping maps, even one under a
 * 2 MiB page: ~2.7 ms per GiB of heap the service has touched, so the
 * freeze grew with the heap. Dropping the tables takes one step per 2 MiB
 * page, while the service still runs; the few pages it touches before the
 * freeze come back with a fault each.
 *
 * A thread of our own waits on a futex in the arena header (the daemon's
 * mapping of the same page wakes it), sheds, and answers in shed_done. Its
 * signals are blocked: the service's signals stay the service's. A heap
 * that is not a shared mapping any more (a fork child's is a copy-on-write
 * view of a snapshot, and the thread is restored with it) is never shed:
 * MADV_DONTNEED would throw its private pages away.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/util.h"
#include "preload.h"

/* Is the heap still a shared mapping (of the pool)? A fork child made from
 * a snapshot has private views of it instead, and everything else in its
 * memory (this library's state too) is its parent's. Reads /proc/self/maps
 * without allocating: it runs when the arena is full (grow.c). */
bool preload_heap_is_shared(void)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	char buf[4096];
	size_t have = 0;
	bool shared = false, found = false;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = 0;
		char *line = buf, *nl;
		while (!found && (nl = strchr(line, '\n'))) {
			*nl = 0;
			unsigned long lo, hi;
			char perms[5];
			if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && cx.heap_lo >= lo && cx.heap_lo < hi) {
				shared = perms[3] == 's';
				found = true;
			}
			line = nl + 1;
		}
		if (found)
			break;
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)
			have = 0; /* a line longer than the buffer: not ours */
	}
	close(fd);
	return shared;
}

/*
 * Drops the heap's page tables. A snapshot that asked for small pages
 * first (tracking/tracker.c: track_small_pages) has them from here on: no
 * 2 MiB mapping comes back once the tables are gone. cx.grown is read
 * after the flag: an extent that grows meanwhile is either in it or sees
 * the flag itself (grow.c).
 */
static void shed_heap(void)
{
	uint32_t small = __atomic_load_n(&cx.header->track_small_pages, __ATOMIC_SEQ_CST);
	size_t len = __atomic_load_n(&cx.grown, __ATOMIC_SEQ_CST);
	if (small == CXLCR_TRACK_HUGE_AGAIN) {
		/* Not a drop: `cxlcr huge-pages`, its heap unregistered. */
		preload_huge_pages((void *)cx.heap_lo, len);
		__atomic_store_n(&cx.header->track_small_mapped, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&cx.header->track_small_pages, 0, __ATOMIC_SEQ_CST);
	} else if (small) {
		preload_small_pages((void *)cx.heap_lo, len, true);
		__atomic_store_n(&cx.header->track_small_mapped, 1, __ATOMIC_SEQ_CST);
	} else
		preload_madvise((void *)cx.heap_lo, len, MADV_DONTNEED);
}

/*
 * The service's helper thread: it sleeps on the arena header's doorbell and
 * does what the daemon on this host asks of the service itself: drop its
 * page tables over the heap before a checkpoint (and map it with small
 * pages from a first snapshot on), make or close the
 * userfaultfd of write tracking (track.c).
 */
static void *shed_thread(void *unused)
{
	(void)unused;
	prctl(PR_SET_NAME, "cxlcr-shed");
	struct cxlcr_arena_header *h = cx.header;
	for (;;) {
		uint32_t bell = __atomic_load_n(&h->doorbell, __ATOMIC_ACQUIRE);
		uint32_t shed = __atomic_load_n(&h->shed_request, __ATOMIC_ACQUIRE);
		if (shed != __atomic_load_n(&h->shed_done, __ATOMIC_ACQUIRE)) {
			if (preload_heap_is_shared())
				shed_heap();
			__atomic_store_n(&h->shed_done, shed, __ATOMIC_RELEASE);
			cxlcr_futex_wake_all(&h->shed_done);
		}
		uint32_t track = __atomic_load_n(&h->track_request, __ATOMIC_ACQUIRE);
		if (track != __atomic_load_n(&h->track_done, __ATOMIC_ACQUIRE)) {
			preload_track_serve(h);
			__atomic_store_n(&h->track_done, track, __ATOMIC_RELEASE);
			cxlcr_futex_wake_all(&h->track_done);
		}
		if (__atomic_load_n(&h->doorbell, __ATOMIC_ACQUIRE) == bell)
			cxlcr_futex_wait_until(&h->doorbell, bell, CXLCR_FOREVER);
	}
	return NULL;
}

int preload_shed_start(void)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	int e = pthread_create(&t, NULL, shed_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e)
		return -1;
	pthread_detach(t);
	return 0;
}
