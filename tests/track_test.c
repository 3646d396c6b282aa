/*
 * Write tracking (tracking/): a heap-like MAP_SHARED mapping of a file on
 * /dev/shm, registered for asynchronous write protection, scanned through
 * /proc/self/pagemap. The first scan reports what was written before it;
 * then each scan reports exactly the pages written since the one before
 * (at the mapping's page granularity); a write racing with the scan is
 * reported by one scan or the next, never by neither; a range that is not
 * registered is reported as not tracked.
 */
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include "../common/error.h"
#include "../tracking/track.h"
#include "test.h"

#define SIZE (64 * MiB)

static uint8_t *map;
static int pagemap;
static size_t granule; /* the writer's slots are this far apart */

static bool covered(const struct cxlcr_written *w, uintptr_t a)
{
	for (size_t i = 0; i < w->count; i++)
		if (a >= w->ranges[i].start && a < w->ranges[i].end)
			return true;
	return false;
}

static struct cxlcr_written scan(void)
{
	struct cxlcr_written w = { 0 };
	CHECK(cxlcr_track_scan(pagemap, (uintptr_t)map, (uintptr_t)map + SIZE, &w) == 0, "%s", cxlcr_last_error());
	return w;
}

/* The racing writer: bumps counters spread over the mapping, and says
 * after each store which one it was (a store acknowledged is "done"). */
static volatile uint64_t done_writes;
static volatile bool stop;
static void *writer(void *arg)
{
	(void)arg;
	for (uint64_t i = 0; !stop; i++) {
		uint64_t *p = (uint64_t *)(void *)(map + (i * 7919 % (SIZE / granule)) * granule);
		__atomic_store_n(p, i, __ATOMIC_RELEASE);
		__atomic_store_n(&done_writes, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

int main(void)
{
	printf("track_test: write tracking with userfaultfd and PAGEMAP_SCAN\n");
	char path[] = "/dev/shm/cxlcr-track-test.XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	CHECK(ftruncate(fd, SIZE) == 0);
	map = mmap(NULL, SIZE + 2 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	map = (uint8_t *)(((uintptr_t)map + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
	CHECK(mmap(map, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == map);
	memset(map, 1, 8 * MiB); /* written before tracking starts */

	int uffd = cxlcr_track_make_uffd();
	CHECK(uffd >= 0, "%s", cxlcr_last_error());
	pagemap = cxlcr_track_open(getpid());
	CHECK(pagemap >= 0);
	struct cxlcr_written w = { 0 };
	CHECK(cxlcr_track_scan(pagemap, (uintptr_t)map, (uintptr_t)map + SIZE, &w) == 1,
	      "an unregistered range scanned as tracked");
	cxlcr_written_free(&w);
	CHECK(cxlcr_track_register(uffd, (uintptr_t)map, (uintptr_t)map + SIZE) == 0, "%s", cxlcr_last_error());

	SAY("the first scan reports what was written before tracking");
	w = scan();
	CHECK(covered(&w, (uintptr_t)map) && covered(&w, (uintptr_t)map + 8 * MiB - 1), "pre-written pages missing");
	SAY("first scan: %zu ranges, %llu KiB", w.count, (unsigned long long)w.bytes >> 10);
	cxlcr_written_free(&w);
	w = scan();
	CHECK(w.count == 0, "a scan right after a scan reports %zu ranges", w.count);

	SAY("writes to three pages: exactly those are reported, once");
	uintptr_t a = (uintptr_t)map + 3 * MiB, b = (uintptr_t)map + 40 * MiB + 4096, c = (uintptr_t)map + SIZE - 1;
	*(volatile uint8_t *)a = 3;
	*(volatile uint8_t *)b = 3;
	*(volatile uint8_t *)c = 3;
	w = scan();
	CHECK(covered(&w, a) && covered(&w, b) && covered(&w, c), "a written page was not reported");
	/* A page is 4 KiB or, where the file system gave a huge page, 2 MiB. */
	CHECK(w.bytes <= 3 * 2 * MiB, "%llu bytes reported for 3 writes", (unsigned long long)w.bytes);
	SAY("3 writes: %zu ranges, %llu KiB", w.count, (unsigned long long)w.bytes >> 10);
	cxlcr_written_free(&w);
	w = scan();
	CHECK(w.count == 0);

	SAY("a writer races 300 scans: a slot that changed between two scans is reported by the second");
	granule = 2 * MiB;
	enum { SLOTS = SIZE / (2 * MiB) };
	uint64_t seen[SLOTS], now[SLOTS];
	pthread_t t;
	CHECK(pthread_create(&t, NULL, writer, NULL) == 0);
	while (__atomic_load_n(&done_writes, __ATOMIC_ACQUIRE) == 0)
		sched_yield(); /* the writer runs */
	w = scan();
	cxlcr_written_free(&w);
	for (int s = 0; s < SLOTS; s++)
		seen[s] = __atomic_load_n((uint64_t *)(void *)(map + s * granule), __ATOMIC_ACQUIRE);
	uint64_t changed = 0;
	/* 300 rounds, and on a busy machine more, until the writer has been
	 * seen changing slots between scans a few hundred times. */
	for (int round = 0; round < 300 || (changed < 300 && round < 100000); round++) {
		for (int s = 0; s < SLOTS; s++)
			now[s] = __atomic_load_n((uint64_t *)(void *)(map + s * granule), __ATOMIC_ACQUIRE);
		struct cxlcr_written r = scan();
		/* seen[] was read after the previous scan had re-armed every
		 * page: a slot that differs now was written since, and the
		 * scan that just ran must say so. */
		for (int s = 0; s < SLOTS; s++) {
			if (now[s] == seen[s])
				continue;
			changed++;
			CHECK(covered(&r, (uintptr_t)map + s * granule), "round %d: slot %d changed (%llu -> %llu) "
			      "but was not reported", round, s, (unsigned long long)seen[s], (unsigned long long)now[s]);
		}
		cxlcr_written_free(&r);
		for (int s = 0; s < SLOTS; s++)
			seen[s] = __atomic_load_n((uint64_t *)(void *)(map + s * granule), __ATOMIC_ACQUIRE);
		if (round >= 300)
			sched_yield(); /* give the writer the CPU */
	}
	stop = true;
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(changed > 0, "the writer changed nothing between scans");
	SAY("%llu slot changes seen between scans, every one reported (%llu writes)", (unsigned long long)changed,
	    (unsigned long long)done_writes);
	w = scan();
	cxlcr_written_free(&w);
	w = scan();
	CHECK(w.count == 0);

	SAY("with its userfaultfd closed, the range is no longer tracked");
	close(uffd);
	CHECK(cxlcr_track_scan(pagemap, (uintptr_t)map, (uintptr_t)map + SIZE, &w) == 1,
	      "a range whose userfaultfd is closed scanned as tracked");
	printf("track_test: all checks passed\n");
	return 0;
}
