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
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/error.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "../recovery/recovery.h"
#include "idle.h"

#define IDLE_SERVICES_MAX 64

static struct idle_state {
	struct recovery_run run; /* the `cxlcr huge-pages` under way */
	uint64_t scans;          /* its scan_count when last looked at */
	uint64_t since_ns;       /* when that count was first seen */
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

void tracking_idle_tick(struct cxlcr_pool *pool, const char *host, void (*log)(int priority, const char *fmt, ...))
{
	long after_s = tracking_huge_after_s();
	if (after_s <= 0)
		return;
	uint64_t after = (uint64_t)after_s * 1000000000ull;
	uint64_t now = cxlcr_mono_ns();
	recovery_runs_begin(states, IDLE_SERVICES_MAX, sizeof(states[0]));
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		if (!recovery_run_service(pool, i, host, &r))
			continue;
		struct idle_state *st = recovery_run_slot(states, IDLE_SERVICES_MAX, sizeof(states[0]), r.generation);
		if (!st)
			continue;
		st->run.seen = true;
		uint64_t scans = 0;
		bool want = wants_huge(pool, &r, &scans);
		if (recovery_run_under_way(&st->run))
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
		if (recovery_run_start(&st->run, "huge-pages", args) < 0)
			log(3 /* LOG_ERR */, "%s", cxlcr_last_error());
		/* Not again until its scan count moves (the verb moves it). */
		st->since_ns = now;
	}
	recovery_runs_end(states, IDLE_SERVICES_MAX, sizeof(states[0]));
}
