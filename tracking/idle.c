/*
 * 2 MiB mappings again for a service that is not snapshotted any more.
 *
 * A snapshot maps the service's heap with 4 KiB pages (tracker.c), which
 * costs a service that reads all over a large heap a third of its
 * requests on a guest (docs/tracking.md), and it keeps them for good. A
 * host's daemon looks at its services once a tick; one that is tracked,
 * mapped small, takes no recovery points (whose scans every interval want
 * the small pages) and whose heap no scan has touched for
 * CXLCR_HUGE_AFTER_S seconds (cxlcrd.conf's huge_after_s; default 30; 0:
 * never) is given its 2 MiB
 * mappings back by `cxlcr huge-pages NAME`, the verb an operator runs, so
 * that the service's lease keeps it from racing a snapshot. The scan count
 * in the arena header is what says "snapshotted": every snapshot and
 * point scans. The time is this daemon's own monotonic clock.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "idle.h"

#define IDLE_SERVICES_MAX 64

static struct idle_state {
	uint64_t generation; /* the arena's region; 0: free slot */
	bool seen;           /* still a service of this host at this tick */
	uint64_t scans;      /* its scan_count when last looked at */
	uint64_t since_ns;   /* when that count was first seen */
	int pidfd;           /* the `cxlcr huge-pages` under way, or -1 */
} states[IDLE_SERVICES_MAX];

long tracking_huge_after_parse(const char *text)
{
	char *end;
	errno = 0;
	long s = strtol(text, &end, 10);
	if (errno || end == text || *end || s < 0 || s > 86400)
		return cxlcr_error("'%.100s' is not a number of seconds from 0 to 86400", text);
	return s;
}

long tracking_huge_after_s(void)
{
	const char *env = getenv(HUGE_AFTER_ENV);
	return env && *env ? tracking_huge_after_parse(env) : HUGE_AFTER_DEFAULT_S;
}

static struct idle_state *state_of(uint64_t generation)
{
	struct idle_state *free_slot = NULL;
	for (int i = 0; i < IDLE_SERVICES_MAX; i++) {
		if (states[i].generation == generation)
			return &states[i];
		if (!states[i].generation && !free_slot)
			free_slot = &states[i];
	}
	if (free_slot)
		*free_slot = (struct idle_state){ .generation = generation, .pidfd = -1 };
	return free_slot;
}

/* Has the run under way (if any) ended? Then its pidfd goes. */
static bool under_way(struct idle_state *st)
{
	if (st->pidfd < 0)
		return false;
	struct pollfd p = { .fd = st->pidfd, .events = POLLIN };
	if (poll(&p, 1, 0) == 0)
		return true;
	close(st->pidfd);
	st->pidfd = -1;
	return false;
}

/* Does the service's header ask for the remap now? Its scan count in
 * *scans either way. */
static bool wants_huge(struct cxlcr_pool *pool, const struct cxlcr_region *r, uint64_t *scans)
{
	const struct cxlcr_arena_header *h = cxlcr_pool_map(pool, r->offset, sizeof(*h), 0, 0);
	if (!h)
		return false;
	cxlcr_refresh(h, sizeof(*h));
	bool want = h->magic == CXLCR_ARENA_MAGIC && h->region_generation == r->generation &&
		    !__atomic_load_n(&h->recovery_interval_ms, __ATOMIC_ACQUIRE) &&
		    __atomic_load_n(&h->tracked, __ATOMIC_ACQUIRE) &&
		    __atomic_load_n(&h->track_small_pages, __ATOMIC_ACQUIRE) == 1 &&
		    __atomic_load_n(&h->track_small_mapped, __ATOMIC_ACQUIRE);
	*scans = __atomic_load_n(&h->scan_count, __ATOMIC_ACQUIRE);
	munmap((void *)(uintptr_t)h, sizeof(*h));
	return want;
}

void tracking_idle_tick(const char *host, int (*spawn)(const char *what, char *const args[]),
			void (*log)(int priority, const char *fmt, ...))
{
	long after_s = tracking_huge_after_s();
	if (after_s <= 0)
		return;
	uint64_t after = (uint64_t)after_s * 1000000000ull;
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return;
	uint64_t now = cxlcr_mono_ns();
	for (int k = 0; k < IDLE_SERVICES_MAX; k++)
		states[k].seen = false;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(&pool, i, &r);
		if (r.state != CXLCR_REGION_LIVE || r.kind != CXLCR_KIND_ARENA || r.owner_pid <= 1 ||
		    strncmp(r.owner_host, host, CXLCR_HOST_MAX))
			continue;
		struct idle_state *st = state_of(r.generation);
		if (!st)
			continue;
		st->seen = true;
		uint64_t scans = 0;
		bool want = wants_huge(&pool, &r, &scans);
		if (under_way(st))
			continue;
		if (!st->since_ns || scans != st->scans) {
			st->scans = scans;
			st->since_ns = now;
			continue;
		}
		if (!want || now - st->since_ns < after)
			continue;
		char name[CXLCR_NAME_MAX + 1] = "";
		memcpy(name, r.name, CXLCR_NAME_MAX);
		log(6 /* LOG_INFO */, "%s: no snapshot for %.0f s: its heap gets 2 MiB mappings again", name,
		    (double)(now - st->since_ns) / 1e9);
		char *args[] = { "cxlcr", "huge-pages", name, "--quiet", NULL };
		st->pidfd = spawn("huge-pages", args);
		if (st->pidfd < 0)
			log(3 /* LOG_ERR */, "%s", cxlcr_last_error());
		/* Not again until its scan count moves (the verb moves it). */
		st->since_ns = now;
	}
	for (int k = 0; k < IDLE_SERVICES_MAX; k++)
		if (states[k].generation && !states[k].seen) {
			if (states[k].pidfd >= 0)
				close(states[k].pidfd);
			states[k] = (struct idle_state){ .pidfd = -1 };
		}
	cxlcr_pool_close(&pool);
}
