/*
 * The tracker: a small root process per service that holds the userfaultfd
 * of its write tracking (track.h).
 *
 * Tracking lasts only while someone holds the userfaultfd (closing the last
 * copy unregisters the heap), and the service must not hold it itself:
 * CRIU cannot dump one. So, once a service runs (started, restored, or
 * migrated here), the command that made it run forks a tracker, which
 *   1. asks the service for a userfaultfd and copies it out (pidfd_getfd),
 *   2. asks the service to close its own copy,
 *   3. registers the heap, and each extent the heap grows by (it sleeps on
 *      the arena header's extent count, which the preload wakes),
 *   4. ends when the service does.
 * If the tracker dies, tracking is lost, and scans say so (the next
 * snapshot compares instead, and says why).
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "track.h"

#define ASK_TIMEOUT_MS 5000
#define GROWTH_POLL_MS 1000

/* Asks the service's helper thread to make (or close) its userfaultfd and
 * waits for the answer, or for the service to end. */
static int ask(struct cxlcr_arena_header *h, int pidfd)
{
	uint32_t want = __atomic_load_n(&h->track_done, __ATOMIC_ACQUIRE) + 1;
	__atomic_store_n(&h->track_request, want, __ATOMIC_RELEASE);
	__atomic_add_fetch(&h->doorbell, 1, __ATOMIC_ACQ_REL);
	syscall(SYS_futex, &h->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
	uint64_t deadline = cxlcr_mono_ns() + ASK_TIMEOUT_MS * 1000000ull;
	for (;;) {
		uint32_t done = __atomic_load_n(&h->track_done, __ATOMIC_ACQUIRE);
		if (done == want)
			return 0;
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		if (poll(&p, 1, 0) > 0)
			return cxlcr_error("the service ended");
		uint64_t now = cxlcr_mono_ns();
		if (now >= deadline)
			return cxlcr_error("the service did not answer a tracking request within %d ms",
					   ASK_TIMEOUT_MS);
		struct timespec left = { 0, (long)((deadline - now) < 100000000ull ? deadline - now : 100000000ull) };
		syscall(SYS_futex, &h->track_done, FUTEX_WAIT, done, &left, NULL, 0);
	}
}

/* Steps 1 and 2: the service's userfaultfd, ours alone afterwards. */
static int take_uffd(struct cxlcr_arena_header *h, int pidfd)
{
	if (__atomic_load_n(&h->track_fd, __ATOMIC_ACQUIRE) >= 0 && ask(h, pidfd) < 0)
		return -1; /* a copy left by a tracker that died half-way: closed first */
	if (ask(h, pidfd) < 0)
		return -1;
	int theirs = __atomic_load_n(&h->track_fd, __ATOMIC_ACQUIRE);
	if (theirs < 0)
		return cxlcr_error("the service could not make a userfaultfd (see its log)");
	int uffd = (int)syscall(SYS_pidfd_getfd, pidfd, theirs, 0);
	int e = errno;
	if (ask(h, pidfd) < 0) {
		if (uffd >= 0)
			close(uffd);
		return -1;
	}
	if (uffd < 0)
		return cxlcr_error("pidfd_getfd of the service's userfaultfd: %s", strerror(e));
	return uffd;
}

/* Step 3 for the extents [from, count) the header lists now. */
static int register_extents(int uffd, const struct cxlcr_arena_header *h, uint32_t from, uint32_t count)
{
	for (uint32_t i = from; i < count; i++) {
		uint64_t lo = h->heap_address + h->extents[i].heap_offset;
		if (cxlcr_track_register(uffd, lo, lo + h->extents[i].size) < 0)
			return -1;
	}
	return 0;
}

static void run(struct cxlcr_arena_header *h, int pidfd, const char *name)
{
	(void)name;
	int uffd = take_uffd(h, pidfd);
	if (uffd < 0)
		return; /* `tracked` stays 0: status says so, snapshots compare */
	uint32_t registered = 0;
	for (;;) {
		uint32_t count = __atomic_load_n(&h->extent_count, __ATOMIC_ACQUIRE);
		if (count > registered && count <= CXLCR_ARENA_EXTENTS_MAX) {
			if (register_extents(uffd, h, registered, count) < 0)
				break;
			registered = count;
			__atomic_store_n(&h->tracked, 1, __ATOMIC_RELEASE);
		}
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		if (poll(&p, 1, 0) != 0)
			break; /* the service ended (or its pidfd broke) */
		struct timespec wait = { GROWTH_POLL_MS / 1000, (GROWTH_POLL_MS % 1000) * 1000000L };
		syscall(SYS_futex, &h->extent_count, FUTEX_WAIT, count, &wait, NULL, 0);
	}
	__atomic_store_n(&h->tracked, 0, __ATOMIC_RELEASE);
	close(uffd);
}

/*
 * Off unless CXLCR_WRITE_TRACKING=1 (in the environment of the daemons and
 * of `cxlcr run`): tests/t_continuity.sh found the image set of a
 * checkpoint changed in the pool between its publication and its restore
 * (pages-1.img: checksum mismatch) in 3 of 12 runs with trackers on, none
 * of 19 without (docs/tracking.md). Until that is understood, snapshots
 * compare the heap unless tracking is asked for.
 */
bool cxlcr_tracking_enabled(void)
{
	const char *on = getenv("CXLCR_WRITE_TRACKING");
	return on && !strcmp(on, "1");
}

int cxlcr_tracker_start(struct cxlcr_pool *pool, const struct cxlcr_region *arena)
{
	if (!cxlcr_tracking_enabled())
		return 0;
	int pidfd = (int)syscall(SYS_pidfd_open, arena->owner_pid, 0);
	if (pidfd < 0)
		return cxlcr_error("tracker of %s: pid %d: %s", arena->name, (int)arena->owner_pid, strerror(errno));
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, arena->offset, sizeof(*h), 0, 0);
	if (!h) {
		close(pidfd);
		return -1;
	}
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		/* Detached, with nothing of the caller's but these two. */
		if (fork() != 0)
			_exit(0);
		setsid();
		prctl(PR_SET_NAME, "cxlcr-tracker");
		if (chdir("/") < 0)
			_exit(1);
		for (int fd = 0; fd < 1024; fd++)
			if (fd != pidfd)
				close(fd);
		signal(SIGPIPE, SIG_IGN);
		run(h, pidfd, arena->name);
		_exit(0);
	}
	munmap(h, sizeof(*h));
	close(pidfd);
	if (child < 0)
		return cxlcr_error("tracker of %s: fork: %s", arena->name, strerror(errno));
	waitpid(child, NULL, 0);
	return 0;
}
