/*
 * The daemon's liveness duty (see liveness.h). The pool is opened for each
 * tick and closed again, so that a daemon never keeps a pool that was
 * formatted again under it; what it has joined and watched stays in this
 * process's memory, which is the point: a host's silence is measured here,
 * on this host's monotonic clock.
 */
#include <stdbool.h>
#include <string.h>
#include <syslog.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/heartbeat.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "liveness.h"

static struct cxlcr_heartbeat me;
static struct cxlcr_heartbeat_watch watch;
static bool watching;

int liveness_period_ms(void)
{
	uint64_t ms = cxlcr_lease_ns() / 4 / 1000000ull;
	return ms < 1 ? 1 : ms > 60000 ? 60000 : (int)ms;
}

void liveness_tick(void (*log)(int priority, const char *fmt, ...))
{
	struct cxlcr_pool pool;
	if (!watching) {
		cxlcr_heartbeat_watch_init(&watch, cxlcr_lease_ns());
		watching = true;
	}
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return;
	uint64_t period = (uint64_t)liveness_period_ms() * 1000000ull;
	if (me.incarnation && cxlcr_heartbeat_beat(&pool, &me) < 0)
		log(LOG_WARNING, "heartbeat: %s; joining again", cxlcr_last_error());
	if (!me.incarnation) {
		int rc = cxlcr_heartbeat_join(&pool, cxlcr_host_name(), period, &me);
		if (rc < 0)
			log(LOG_ERR, "heartbeat: cannot join: %s", cxlcr_last_error());
		else if (rc == 0)
			log(LOG_INFO, "heartbeat: slot %u, every %llu ms", me.index, (unsigned long long)(period / 1000000));
	}
	struct cxlcr_reap_report r;
	if (cxlcr_catalog_reap_watched(&pool, &watch, cxlcr_mono_ns(), &r) > 0 || r.snapshots_freed)
		log(LOG_NOTICE, "reaped %u borrows of dead holders (%u references), freed %u snapshots", r.borrows_dropped,
		    r.references_dropped, r.snapshots_freed);
	cxlcr_pool_close(&pool);
}

void liveness_leave(void)
{
	struct cxlcr_pool pool;
	if (!me.incarnation || cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return;
	cxlcr_heartbeat_leave(&pool, &me);
	cxlcr_pool_close(&pool);
}
