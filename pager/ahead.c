/*
 * The cold fetch ahead of the restore (ahead.h): the chunks of a tiered
 * snapshot's cold pages, and a process that reads them into memory the
 * pagers share while CRIU restores the children.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/cpus.h"
#include "../common/error.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "../common/snapshot.h"
#include "../tier/tier.h"
#include "ahead.h"
#include "pager.h"

#define PAGE CXLCR_SNAPSHOT_PAGE_SIZE
#define AHEAD_GO_TIMEOUT_MS 120000u /* the longest a fetcher waits for its children to run */
#define AHEAD_LANES 2u  /* the fetcher's threads, each with a connection of its own (as the pager's lanes) */

enum ahead_state { AHEAD_PENDING = 0, AHEAD_DONE = 1, AHEAD_FAILED = 2 };

int cold_chunks_make(const struct cxlcr_snapshot *s, struct cold_chunks *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t count = 0;
	for (uint64_t i = 0; i < s->run_count; i++)
		if (CXLCR_LEAF_TIER(s->runs[i].leaf) == CXLCR_TIER_COLD)
			count += (s->runs[i].pages + COLD_RUN - 1) / COLD_RUN;
	if (!count)
		return 0;
	if (!(out->c = calloc(count, sizeof(*out->c))))
		return cxlcr_error("out of memory");
	for (uint64_t i = 0; i < s->run_count; i++) {
		const struct cxlcr_snapshot_run *run = &s->runs[i];
		if (CXLCR_LEAF_TIER(run->leaf) != CXLCR_TIER_COLD)
			continue;
		for (uint64_t at = 0; at < run->pages; at += COLD_RUN) {
			uint64_t n = run->pages - at < COLD_RUN ? run->pages - at : COLD_RUN;
			out->c[out->count++] = (struct cold_chunk){ .first_page = run->first_page + at,
								    .at = out->pages, .pages = (uint32_t)n };
			out->pages += n;
		}
	}
	return 0;
}

void cold_chunks_free(struct cold_chunks *c)
{
	free(c->c);
	memset(c, 0, sizeof(*c));
}

int64_t cold_chunk_of(const struct cold_chunks *c, uint64_t page)
{
	uint64_t lo = 0, hi = c->count; /* the last chunk that starts at or before page is in [lo, hi) */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (c->c[mid].first_page <= page)
			lo = mid;
		else
			hi = mid;
	}
	if (!c->count || page < c->c[lo].first_page || page >= c->c[lo].first_page + c->c[lo].pages)
		return -1;
	return (int64_t)lo;
}

int64_t ahead_limit_parse(const char *text)
{
	uint64_t mb;
	if (cxlcr_parse_count(text, AHEAD_MB_MAX, &mb) < 0)
		return cxlcr_error("'%.40s' is not a number of MiB from 0 to %u (0: no fetch ahead)", text, AHEAD_MB_MAX);
	return (int64_t)(mb << 20);
}

int64_t ahead_limit(void)
{
	const char *v = getenv(AHEAD_ENV);
	if (!v)
		return (int64_t)AHEAD_MB_DEFAULT << 20;
	int64_t bytes = ahead_limit_parse(v);
	if (bytes < 0)
		return cxlcr_error("%s: %s", AHEAD_ENV, cxlcr_last_error());
	return bytes;
}

bool ahead_on(const struct cold_ahead *a)
{
	return a && a->map && a->pidfd >= 0;
}

/* The fetcher's lanes claim chunks in order from one counter: the pagers
 * install them in that order too, so the first to be waited for is the
 * first to come. */
struct fetcher {
	struct cold_ahead *a;
	const struct cxlcr_snapshot *s;
	uint64_t next; /* atomic */
};

/* One lane: a chunk that cannot be read after COLD_TRIES readers is
 * marked failed (a pager reads it itself, with its own tries) and the lane
 * ends: a server that does not answer would cost each further chunk its
 * timeouts. The chunks left then are failed by fetcher_main(). */
static void *lane_main(void *arg)
{
	struct fetcher *f = arg;
	struct cold_ahead *a = f->a;
	struct tier_reader *r = NULL;
	struct sched_param idle = { .sched_priority = 0 };
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
	for (;;) {
		uint64_t i = __atomic_fetch_add(&f->next, 1, __ATOMIC_RELAXED);
		if (i >= a->covered)
			break;
		const struct cold_chunk *c = &a->chunks.c[i];
		const void *data = NULL;
		bool ok = false;
		for (unsigned tries = 0; !ok && tries < COLD_TRIES; tries++) {
			if (!r && tier_reader_open_run(f->s, COLD_RUN, &r) < 0)
				r = NULL;
			if (r && tier_read_run(r, c->first_page, c->pages, &data) == 0)
				ok = true;
			else if (r) {
				tier_reader_close(r);
				r = NULL;
			}
		}
		if (ok)
			memcpy(a->data + c->at * PAGE, data, (size_t)c->pages * PAGE);
		__atomic_store_n(&a->state[i], ok ? AHEAD_DONE : AHEAD_FAILED, __ATOMIC_RELEASE);
		cxlcr_futex_wake_all(&a->state[i]);
		/* Tests only: the fetcher stops (all of it) after its first
		 * chunk, for a test to kill it there (tests/t_fork_tier.sh). */
		if (i == 0 && getenv(AHEAD_TEST_STOP_ENV))
			raise(SIGSTOP);
		if (!ok)
			break;
	}
	if (r)
		tier_reader_close(r);
	return NULL;
}

/* The fetcher process: nothing of the request's stays open (its socket,
 * the client's output) but the pool, whose tier table the readers map; it
 * ends when every chunk it covers is fetched or failed, and never leaves
 * one pending. */
_Noreturn static void fetcher_main(struct cold_ahead *a, const struct cxlcr_snapshot *s)
{
	prctl(PR_SET_NAME, "cxlcr-ahead");
	setsid();
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	const char *cpus = getenv(PAGER_CPUS_ENV);
	if (cpus)
		(void)cxlcr_pin_cpus(cpus, false);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3; fd++)
		dup2(null, fd);
	for (int fd = 3; fd < 1024; fd++)
		if (fd != s->pool->fd)
			close(fd);
	/* Not before the children run (ahead_go()): the fetch's RMA traffic
	 * would take the CPUs their restore and their pagers' start need. */
	uint64_t until = cxlcr_mono_ns() + AHEAD_GO_TIMEOUT_MS * 1000000ull;
	while (!__atomic_load_n(a->go, __ATOMIC_ACQUIRE)) {
		if (cxlcr_mono_ns() >= until) {
			a->covered = 0; /* nobody will wait: the request is gone */
			break;
		}
		cxlcr_futex_wait_until(a->go, 0, until);
	}
	struct fetcher f = { .a = a, .s = s };
	pthread_t t[AHEAD_LANES];
	unsigned started = 0;
	for (unsigned k = 0; k < AHEAD_LANES; k++)
		if (pthread_create(&t[k], NULL, lane_main, &f) == 0)
			started++;
	if (!started)
		lane_main(&f);
	for (unsigned k = 0; k < started; k++)
		pthread_join(t[k], NULL);
	for (uint64_t i = 0; i < a->covered; i++)
		if (__atomic_load_n(&a->state[i], __ATOMIC_ACQUIRE) == AHEAD_PENDING) {
			__atomic_store_n(&a->state[i], AHEAD_FAILED, __ATOMIC_RELEASE);
			cxlcr_futex_wake_all(&a->state[i]);
		}
	_exit(0);
}

int ahead_start(const struct cxlcr_snapshot *s, uint64_t limit, struct cold_ahead *a)
{
	memset(a, 0, sizeof(*a));
	a->pidfd = -1;
	if (cold_chunks_make(s, &a->chunks) < 0)
		return -1;
	while (a->covered < a->chunks.count &&
	       (a->chunks.c[a->covered].at + a->chunks.c[a->covered].pages) * PAGE <= limit)
		a->covered++;
	if (!a->covered) {
		cold_chunks_free(&a->chunks);
		return 0;
	}
	size_t states = (((a->covered + 1) * sizeof(uint32_t)) + PAGE - 1) / PAGE * PAGE;
	uint64_t pages = a->chunks.c[a->covered - 1].at + a->chunks.c[a->covered - 1].pages;
	a->map_len = states + pages * PAGE;
	a->map = mmap(NULL, a->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (a->map == MAP_FAILED) {
		a->map = NULL;
		cold_chunks_free(&a->chunks);
		return cxlcr_error("the fetch ahead: mmap of %zu bytes: %s", a->map_len, strerror(errno));
	}
	a->state = a->map;
	a->go = &a->state[a->covered];
	a->data = (uint8_t *)a->map + states;
	pid_t pid = fork();
	if (pid == 0)
		fetcher_main(a, s);
	int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	if (pidfd < 0) {
		int e = errno;
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		ahead_release(a);
		return cxlcr_error("the fetch ahead: %s: %s", pid < 0 ? "fork" : "pidfd_open", strerror(e));
	}
	a->pidfd = pidfd;
	return 0;
}

/* Whether the fetcher has ended (it marks every chunk before it does,
 * unless it was killed). */
static bool fetcher_gone(const struct cold_ahead *a)
{
	struct pollfd p = { .fd = a->pidfd, .events = POLLIN };
	return poll(&p, 1, 0) != 0;
}

int ahead_chunk(const struct cold_ahead *a, uint64_t i, int wait_ms, const uint8_t **data)
{
	if (!ahead_on(a) || i >= a->covered)
		return -1;
	uint64_t until = cxlcr_mono_ns() + (uint64_t)wait_ms * 1000000ull;
	for (bool gone = false;;) {
		uint32_t st = __atomic_load_n(&a->state[i], __ATOMIC_ACQUIRE);
		if (st == AHEAD_DONE) {
			*data = a->data + a->chunks.c[i].at * PAGE;
			return 1;
		}
		if (st != AHEAD_PENDING || gone)
			return -1;
		if ((gone = fetcher_gone(a)))
			continue; /* one more look: it may have marked the chunk as it ended */
		uint64_t now = cxlcr_mono_ns();
		if (now >= until)
			return 0;
		/* At most 10 ms a wait: a fetcher killed between the look above
		 * and the wait wakes nobody. */
		cxlcr_futex_wait_until(&a->state[i], AHEAD_PENDING, until - now > 10000000ull ? now + 10000000ull : until);
	}
}

const uint8_t *ahead_page(const struct cold_ahead *a, uint64_t page)
{
	if (!ahead_on(a))
		return NULL;
	int64_t i = cold_chunk_of(&a->chunks, page);
	if (i < 0 || (uint64_t)i >= a->covered || __atomic_load_n(&a->state[i], __ATOMIC_ACQUIRE) != AHEAD_DONE)
		return NULL;
	const struct cold_chunk *c = &a->chunks.c[i];
	return a->data + (c->at + (page - c->first_page)) * PAGE;
}

void ahead_go(struct cold_ahead *a)
{
	if (!ahead_on(a))
		return;
	__atomic_store_n(a->go, 1, __ATOMIC_RELEASE);
	cxlcr_futex_wake_all(a->go);
}

void ahead_stop(struct cold_ahead *a)
{
	if (a->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, a->pidfd, SIGKILL, NULL, 0);
}

void ahead_release(struct cold_ahead *a)
{
	if (a->map)
		munmap(a->map, a->map_len);
	if (a->pidfd >= 0)
		close(a->pidfd);
	cold_chunks_free(&a->chunks);
	a->map = NULL;
	a->state = NULL;
	a->data = NULL;
	a->pidfd = -1;
	a->covered = 0;
}
