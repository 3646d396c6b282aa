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
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "track.h"

#define ASK_TIMEOUT_MS 5000
#define GROWTH_POLL_MS 1000
#define END_TIMEOUT_MS 5000
#define TRACKER_NAME "cxlcr-tracker"

/* Waits until the service's helper thread has answered request `want`,
 * or the service has ended, or ASK_TIMEOUT_MS have gone by. A service
 * stopped by a signal answers nothing until it is continued: not waited
 * for (a stopped service's every verb waited the whole timeout). */
static int await_answer(struct cxlcr_arena_header *h, int pidfd, uint32_t want)
{
	uint64_t deadline = cxlcr_mono_ns() + ASK_TIMEOUT_MS * 1000000ull;
	for (;;) {
		uint32_t done = __atomic_load_n(&h->track_done, __ATOMIC_ACQUIRE);
		if (done == want)
			return 0;
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		if (poll(&p, 1, 0) > 0)
			return cxlcr_error("the service ended");
		if (cxlcr_process_state(cxlcr_pidfd_pid(pidfd)) == 'T')
			return cxlcr_error("the service is stopped (SIGSTOP): it answers no tracking request until it "
					   "is continued");
		uint64_t now = cxlcr_mono_ns();
		if (now >= deadline)
			return cxlcr_error("the service did not answer a tracking request within %d ms",
					   ASK_TIMEOUT_MS);
		/* A tenth of a second at most: its pidfd is looked at in between. */
		uint64_t until = now + 100000000ull;
		cxlcr_futex_wait_until(&h->track_done, done, until < deadline ? until : deadline);
	}
}

/* Asks the service's helper thread to make (or close) its userfaultfd and
 * waits for the answer, or for the service to end. */
static int ask(struct cxlcr_arena_header *h, int pidfd)
{
	uint32_t want = __atomic_load_n(&h->track_done, __ATOMIC_ACQUIRE) + 1;
	__atomic_store_n(&h->track_request, want, __ATOMIC_RELEASE);
	__atomic_add_fetch(&h->doorbell, 1, __ATOMIC_ACQ_REL);
	cxlcr_futex_wake_all(&h->doorbell);
	return await_answer(h, pidfd, want);
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

/* Has the service ended? Its pidfd says so (or broke). */
static bool service_ended(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	return poll(&p, 1, 0) != 0;
}

/*
 * The tracker's life. Its writes into the header stop when the service
 * ends: from then on the arena may be freed and its memory given to
 * another region (a checkpoint's image set), which a late write would
 * corrupt (t_continuity saw exactly that: a tracker that woke after its
 * service was stopped cleared `tracked` inside the next image set). Whoever
 * frees the arena also ends its tracker first (cxlcr_tracker_end), so a
 * tracker stalled between its check and its write cannot hit a reused
 * region either.
 */
static void run(struct cxlcr_arena_header *h, int pidfd, const char *name)
{
	(void)name;
	int uffd = take_uffd(h, pidfd);
	if (uffd < 0)
		return; /* `tracked` stays 0: status says so, snapshots compare */
	__atomic_store_n(&h->tracker_uffd, uffd + 1, __ATOMIC_RELEASE);
	uint32_t registered = 0;
	for (;;) {
		if (service_ended(pidfd))
			break;
		uint32_t count = __atomic_load_n(&h->extent_count, __ATOMIC_ACQUIRE);
		if (count > registered && count <= CXLCR_ARENA_EXTENTS_MAX) {
			if (register_extents(uffd, h, registered, count) < 0) {
				/* A failed registration while the service runs:
				 * the scans would say so anyway. */
				if (!service_ended(pidfd))
					__atomic_store_n(&h->tracked, 0, __ATOMIC_RELEASE);
				break;
			}
			registered = count;
			/* Also the end of the handshake, which a dump waits
			 * for (cxlcr_tracker_settle). */
			__atomic_store_n(&h->tracked, 1, __ATOMIC_RELEASE);
			cxlcr_futex_wake_all(&h->tracked);
		}
		cxlcr_futex_wait_until(&h->extent_count, count, cxlcr_mono_ns() + GROWTH_POLL_MS * 1000000ull);
	}
	close(uffd);
}

/* On unless CXLCR_WRITE_TRACKING=0 (in the environment of the daemons and
 * of `cxlcr run`): a service without a tracker is snapshotted by comparing
 * its heap, which is slower but needs nothing of the service. */
bool cxlcr_tracking_enabled(void)
{
	const char *on = getenv("CXLCR_WRITE_TRACKING");
	return !on || strcmp(on, "0") != 0;
}

/* Is pid the tracker of the arena at [offset, offset + size) of pool: a
 * process named so that maps that region (a reused pid is not)? */
static bool is_tracker_of(int pid, const struct cxlcr_pool *pool, const struct cxlcr_region *arena)
{
	char path[64], comm[32] = "";
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool named = fgets(comm, sizeof(comm), f) && !strcmp(comm, TRACKER_NAME "\n");
	fclose(f);
	struct stat st;
	return named && fstat(pool->fd, &st) == 0 &&
	       cxlcr_pid_maps_file(pid, st.st_dev, st.st_ino, arena->offset, arena->offset + arena->size);
}

int cxlcr_tracker_pidfd(struct cxlcr_pool *pool, const struct cxlcr_region *arena, int pid)
{
	int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	/* Checked while the pidfd holds the process: a pid reused afterwards
	 * is not taken for it. */
	if (pidfd >= 0 && !is_tracker_of(pid, pool, arena)) {
		close(pidfd);
		pidfd = -1;
	}
	return pidfd;
}

int cxlcr_tracker_end(struct cxlcr_pool *pool, const struct cxlcr_region *arena)
{
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, arena->offset, sizeof(*h), 0, 0);
	if (!h)
		return -1;
	int pid = __atomic_load_n(&h->tracker_pid, __ATOMIC_ACQUIRE);
	int rc = 0;
	/* The tracker runs on the service's host, and its pid is that host's
	 * own: another host's is not looked at (it ends with its service; an
	 * arena is freed elsewhere only once its host has gone: pod down). */
	if (strncmp(arena->owner_host, cxlcr_host_name(), CXLCR_HOST_MAX))
		pid = 0;
	int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	/* Checked while the pidfd holds the process, so the signal cannot
	 * reach whoever reuses the pid afterwards. */
	if (pidfd >= 0 && is_tracker_of(pid, pool, arena)) {
		if (!cxlcr_pidfd_kill_wait(pidfd, END_TIMEOUT_MS))
			rc = cxlcr_error("tracker of %s (pid %d) did not end within %d ms", arena->name, pid,
					 END_TIMEOUT_MS);
	}
	if (pidfd >= 0)
		close(pidfd);
	if (rc == 0) {
		__atomic_store_n(&h->tracker_pid, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&h->tracked, 0, __ATOMIC_RELEASE);
	}
	munmap(h, sizeof(*h));
	return rc;
}

/*
 * CRIU cannot dump a userfaultfd ("Can't dump file N of that type"), and
 * a service holds one for a moment in every tracker's start (steps 1 and
 * 2: made, copied out, closed): a snapshot, a point or a migrate right
 * after a run or a restore could meet it and fail. A tracker ended in
 * that moment (a migrate ends it before its freeze) leaves the copy open
 * for good, and every later dump failed (t_proc_self in CI: a migrate
 * back right after a migrate). So before a dump, a live tracker's
 * handshake is waited for (`tracked`: it asks nothing after that), and
 * what is left open then (a dead one's) is closed by the same request the
 * tracker would have made.
 * Called by the verb that holds the service, so no tracker starts in
 * between.
 */
#define SETTLE_TIMEOUT_MS (3 * ASK_TIMEOUT_MS)
static int settle(struct cxlcr_pool *pool, const struct cxlcr_region *arena, struct cxlcr_arena_header *h,
		  int service)
{
	uint64_t deadline = cxlcr_mono_ns() + SETTLE_TIMEOUT_MS * 1000000ull;
	int pid = __atomic_load_n(&h->tracker_pid, __ATOMIC_ACQUIRE);
	int tracker = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	if (tracker >= 0 && !is_tracker_of(pid, pool, arena)) {
		close(tracker);
		tracker = -1;
	}
	while (tracker >= 0 && !__atomic_load_n(&h->tracked, __ATOMIC_ACQUIRE)) {
		if (service_ended(tracker))
			break; /* it left what it left: closed below */
		if (service_ended(service))
			break;
		uint64_t now = cxlcr_mono_ns();
		if (now >= deadline) {
			close(tracker);
			return cxlcr_error("the tracker of %s did not finish taking its userfaultfd within %d ms",
					   arena->name, SETTLE_TIMEOUT_MS);
		}
		uint64_t until = now + 100000000ull;
		cxlcr_futex_wait_until(&h->tracked, 0, until < deadline ? until : deadline);
	}
	if (tracker >= 0)
		close(tracker);
	/* No tracker asks anything now: what is open is left over. */
	uint32_t asked = __atomic_load_n(&h->track_request, __ATOMIC_ACQUIRE);
	if (asked != __atomic_load_n(&h->track_done, __ATOMIC_ACQUIRE) && await_answer(h, service, asked) < 0)
		return -1;
	if (__atomic_load_n(&h->track_fd, __ATOMIC_ACQUIRE) >= 0 && ask(h, service) < 0)
		return -1;
	if (__atomic_load_n(&h->track_fd, __ATOMIC_ACQUIRE) >= 0)
		return cxlcr_error("%s still holds a userfaultfd of tracking", arena->name);
	return 0;
}

int cxlcr_tracker_settle(struct cxlcr_pool *pool, const struct cxlcr_region *arena)
{
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, arena->offset, sizeof(*h), 0, 0);
	if (!h)
		return -1;
	int rc = 0;
	/* The usual case, a glance: the handshake is over and left nothing. */
	if (__atomic_load_n(&h->track_fd, __ATOMIC_ACQUIRE) >= 0 ||
	    __atomic_load_n(&h->track_request, __ATOMIC_ACQUIRE) != __atomic_load_n(&h->track_done, __ATOMIC_ACQUIRE) ||
	    (__atomic_load_n(&h->tracker_pid, __ATOMIC_ACQUIRE) > 0 && !__atomic_load_n(&h->tracked, __ATOMIC_ACQUIRE))) {
		int service = (int)syscall(SYS_pidfd_open, arena->owner_pid, 0);
		rc = service < 0 ? cxlcr_error("%s: pid %d: %s", arena->name, (int)arena->owner_pid, strerror(errno))
				 : settle(pool, arena, h, service);
		if (service >= 0)
			close(service);
	}
	munmap(h, sizeof(*h));
	return rc;
}

bool cxlcr_track_small_pages_wanted(void)
{
	const char *env = getenv("CXLCR_TRACK_SMALL_PAGES");
	return !env || strcmp(env, "0") != 0;
}

/* A service keeps the heap mapping it has until a snapshot asks for small
 * pages (cxlcr_track_small_pages_begin), and keeps small pages from then
 * on, restored or migrated too (the flag lives in the arena header): the
 * preload applies it at the tracker's start (preload/track.c). On a kernel
 * that loses what tracking knows when page tables are dropped, the start
 * of a tracker, before it registers anything, is the only safe time for
 * the remap: there every tracked service gets small pages at once. Only
 * an operator's CXLCR_TRACK_SMALL_PAGES=0 turns them off again. */
static void tracker_small_pages(struct cxlcr_pool *pool, const struct cxlcr_region *arena)
{
	bool wanted = cxlcr_track_small_pages_wanted();
	if (wanted && cxlcr_track_zap_keeps_writes())
		return;
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, arena->offset, sizeof(*h), 0, 0);
	if (!h)
		return;
	__atomic_store_n(&h->track_small_pages, wanted, __ATOMIC_RELEASE);
	if (!wanted)
		__atomic_store_n(&h->track_small_mapped, 0, __ATOMIC_RELEASE);
	munmap(h, sizeof(*h));
}

/*
 * Small pages cost a service that is never snapshotted for nothing: on a
 * guest where each page-table change traps to the hypervisor, a Redis with
 * a 1 GiB heap on 4 KiB mappings did a third of the SETs it did on 2 MiB
 * ones (docs/tracking.md). They pay only once scans are read: from the
 * first snapshot on. So that snapshot asks for them, before its draft:
 * the flag here, then the service's helper remaps the heap (a shed
 * request). Before the first scan there is nothing tracked to lose; later,
 * the remap is a drop of page tables while the service is tracked, which
 * is safe only where the kernel keeps what tracking knows across it (as
 * for the shed: zap_probe.c), so this is only done there. Until the
 * service says it has remapped (track_small_mapped), every snapshot asks
 * again: one whose service did not answer in time, or that was killed in
 * between, leaves it to the next (a late answer is as safe as a timely
 * one, by the same property).
 */
int cxlcr_track_small_pages_begin(struct cxlcr_pool *pool, const struct cxlcr_region *arena)
{
	if (!cxlcr_tracking_enabled() || !cxlcr_track_small_pages_wanted() || !cxlcr_track_zap_keeps_writes())
		return 0;
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, arena->offset, sizeof(*h), 0, 0);
	if (!h)
		return -1;
	cxlcr_refresh(&h->track_small_pages, sizeof(h->track_small_pages) + sizeof(h->track_small_mapped));
	int rc = 0;
	/* (CXLCR_TRACK_HUGE_AGAIN left by a `huge-pages` whose service did
	 * not answer is not small pages either.) */
	if (__atomic_load_n(&h->track_small_pages, __ATOMIC_ACQUIRE) != 1 ||
	    !__atomic_load_n(&h->track_small_mapped, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&h->track_small_pages, 1, __ATOMIC_SEQ_CST);
		cxlcr_publish(&h->track_small_pages, sizeof(h->track_small_pages));
		rc = 1;
	}
	munmap(h, sizeof(*h));
	return rc;
}

/*
 * Forks the tracker (detached: its parent exits at once, so nobody need
 * reap it) and records its pid in the header. Called by the verb that made
 * the service run, while it still holds the service, so the record is in
 * place before anyone may free the arena. A tracker left from before (a
 * checkpointed or migrated service's, ending on its own) is ended first:
 * one tracker per arena.
 */
int cxlcr_tracker_start(struct cxlcr_pool *pool, const struct cxlcr_region *arena)
{
	if (!cxlcr_tracking_enabled())
		return 0;
	if (cxlcr_tracker_end(pool, arena) < 0)
		return -1;
	tracker_small_pages(pool, arena);
	int pidfd = (int)syscall(SYS_pidfd_open, arena->owner_pid, 0);
	if (pidfd < 0)
		return cxlcr_error("tracker of %s: pid %d: %s", arena->name, (int)arena->owner_pid, strerror(errno));
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, arena->offset, sizeof(*h), 0, 0);
	int report[2] = { -1, -1 };
	if (!h || pipe2(report, O_CLOEXEC) < 0) {
		int e = errno;
		if (h)
			munmap(h, sizeof(*h));
		close(pidfd);
		return h ? cxlcr_error("tracker of %s: pipe: %s", arena->name, strerror(e)) : -1;
	}
	/* A new userfaultfd knows nothing of what was written before it: no
	 * snapshot taken before it may be the base of one taken after it.
	 * Counted as a scan, which the continuity check of the next draft
	 * sees (since.c), whatever the kernel reports for pages it never
	 * tracked (a restored service's whole heap, or tables dropped when
	 * the last tracker ended, are holes, which kernels have not always
	 * reported as written). */
	__atomic_add_fetch(&h->scan_count, 1, __ATOMIC_SEQ_CST);
	cxlcr_publish(&h->scan_count, sizeof(h->scan_count));
	/* Not tracked until the new tracker has registered the heap, which
	 * also says its handshake with the service is over (settle). */
	__atomic_store_n(&h->tracked, 0, __ATOMIC_RELEASE);
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		/* Detached, with nothing of the caller's but these two. */
		pid_t tracker = fork();
		if (tracker != 0) {
			if (write(report[1], &tracker, sizeof(tracker)) != sizeof(tracker))
				_exit(1);
			_exit(0);
		}
		setsid();
		prctl(PR_SET_NAME, TRACKER_NAME);
		if (chdir("/") < 0)
			_exit(1);
		for (int fd = 0; fd < 1024; fd++)
			if (fd != pidfd)
				close(fd);
		signal(SIGPIPE, SIG_IGN);
		run(h, pidfd, arena->name);
		_exit(0);
	}
	close(report[1]);
	pid_t tracker = -1;
	if (child > 0 && read(report[0], &tracker, sizeof(tracker)) == sizeof(tracker) && tracker > 0)
		__atomic_store_n(&h->tracker_pid, tracker, __ATOMIC_RELEASE);
	close(report[0]);
	munmap(h, sizeof(*h));
	close(pidfd);
	if (child < 0)
		return cxlcr_error("tracker of %s: fork: %s", arena->name, strerror(errno));
	waitpid(child, NULL, 0);
	if (tracker <= 0)
		return cxlcr_error("tracker of %s: it did not start", arena->name);
	return 0;
}

int cxlcr_tracker_ensure(struct cxlcr_pool *pool, const struct cxlcr_region *arena)
{
	if (!cxlcr_tracking_enabled())
		return 0;
	struct cxlcr_arena_header *h = cxlcr_pool_map(pool, arena->offset, sizeof(*h), 0, 0);
	if (!h)
		return -1;
	int pid = __atomic_load_n(&h->tracker_pid, __ATOMIC_ACQUIRE);
	munmap(h, sizeof(*h));
	if (pid > 0 && is_tracker_of(pid, pool, arena))
		return 0;
	return cxlcr_tracker_start(pool, arena);
}
