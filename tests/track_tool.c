/*
 * track_tool: plays a write tracker that dies half-way through its start
 * (tracking/tracker.c, steps 1 and 2), for tests/t_tracker_life.sh.
 *
 *   track_tool leave SERVICE   asks SERVICE's helper thread for a
 *                              userfaultfd, waits for the answer, and
 *                              leaves it there: prints its fd number in
 *                              the service
 *
 * The pool is $CXLCR_POOL; run it on the service's host (the request words
 * are futexes of that host).
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../common/util.h"

#define ANSWER_MS 5000

int main(int argc, char **argv)
{
	if (argc != 3 || strcmp(argv[1], "leave")) {
		fprintf(stderr, "usage: track_tool leave SERVICE\n");
		return 2;
	}
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0) {
		fprintf(stderr, "track_tool: %s\n", cxlcr_last_error());
		return 1;
	}
	struct cxlcr_region r;
	if (!cxlcr_region_find(&pool, CXLCR_KIND_ARENA, argv[2], &r)) {
		fprintf(stderr, "track_tool: no arena named %s\n", argv[2]);
		return 1;
	}
	struct cxlcr_arena_header *h = cxlcr_pool_map(&pool, r.offset, sizeof(*h), 0, 0);
	if (!h) {
		fprintf(stderr, "track_tool: %s\n", cxlcr_last_error());
		return 1;
	}
	if (__atomic_load_n(&h->track_fd, __ATOMIC_ACQUIRE) >= 0) {
		fprintf(stderr, "track_tool: %s holds a userfaultfd of tracking already\n", argv[2]);
		return 1;
	}
	uint32_t want = __atomic_load_n(&h->track_done, __ATOMIC_ACQUIRE) + 1;
	__atomic_store_n(&h->track_request, want, __ATOMIC_RELEASE);
	__atomic_add_fetch(&h->doorbell, 1, __ATOMIC_ACQ_REL);
	cxlcr_futex_wake_all(&h->doorbell);
	uint64_t deadline = cxlcr_mono_ns() + ANSWER_MS * 1000000ull;
	uint32_t done;
	while ((done = __atomic_load_n(&h->track_done, __ATOMIC_ACQUIRE)) != want && cxlcr_mono_ns() < deadline)
		cxlcr_futex_wait_until(&h->track_done, done, deadline);
	int fd = __atomic_load_n(&h->track_fd, __ATOMIC_ACQUIRE);
	if (done != want || fd < 0) {
		fprintf(stderr, "track_tool: %s made no userfaultfd within %d ms\n", argv[2], ANSWER_MS);
		return 1;
	}
	printf("%d\n", fd);
	munmap(h, sizeof(*h));
	return 0;
}
