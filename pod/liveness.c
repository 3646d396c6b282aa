/*
 * The daemon's liveness duty (see liveness.h). The pool is opened for each
 * tick and closed again, so that a daemon never keeps a pool that was
 * formatted again under it; what it has registered and watched stays in
 * this process's memory, which is the point: a host's silence is measured
 * here, on this host's monotonic clock.
 */
#include <stdbool.h>
#include <string.h>
#include <syslog.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "liveness.h"

static struct cxlcr_host_reg me;
static struct cxlcr_hosts_watch watch;
static bool watching;
static char my_address[CXLCR_HOST_ADDR_MAX];
static uint32_t my_port;
static uint64_t next_reap_ns;
static char last_complaint[CXLCR_ERROR_MAX];

/* A trouble that lasts (a corrupt table) is said once, not every beat. */
static bool news(const char *what)
{
	if (!strcmp(what, last_complaint))
		return false;
	cxlcr_copy_field(last_complaint, sizeof(last_complaint), what);
	return true;
}

void liveness_identity(const char *address, uint32_t port)
{
	cxlcr_copy_field(my_address, sizeof(my_address), address ? address : "");
	my_port = port;
}

int liveness_period_ms(void)
{
	uint64_t ms = cxlcr_heartbeat_period_ns() / 1000000ull;
	return ms < 1 ? 1 : ms > 60000 ? 60000 : (int)ms;
}

void liveness_tick(void (*log)(int priority, const char *fmt, ...))
{
	struct cxlcr_pool pool;
	if (!watching) {
		cxlcr_hosts_watch_init(&watch, cxlcr_lease_ns());
		watching = true;
	}
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return;
	if (me.incarnation && cxlcr_host_beat(&pool, &me) < 0 && news(cxlcr_last_error()))
		log(LOG_WARNING, "heartbeat: %s; registering again", cxlcr_last_error());
	if (!me.incarnation) {
		uint64_t period = (uint64_t)liveness_period_ms() * 1000000ull;
		if (cxlcr_host_join(&pool, cxlcr_host_name(), my_address, my_port, period, &me) < 0) {
			if (news(cxlcr_last_error()))
				log(LOG_ERR, "cannot register in the host table: %s", cxlcr_last_error());
		} else {
			last_complaint[0] = 0;
			log(LOG_INFO, "registered in the host table: entry %u, incarnation %llu, heartbeat every %llu ms",
			    me.index, (unsigned long long)me.incarnation, (unsigned long long)(period / 1000000));
		}
	}
	/* Reaping reads the whole catalog: a quarter lease apart is enough. */
	uint64_t now = cxlcr_mono_ns();
	if (now >= next_reap_ns) {
		struct cxlcr_reap_report r;
		if (cxlcr_catalog_reap_watched(&pool, &watch, now, &r) > 0 || r.snapshots_freed)
			log(LOG_NOTICE, "reaped %u borrows of dead holders (%u references), freed %u snapshots",
			    r.borrows_dropped, r.references_dropped, r.snapshots_freed);
		next_reap_ns = now + cxlcr_lease_ns() / 4;
	}
	cxlcr_pool_close(&pool);
}

void liveness_leave(void)
{
	struct cxlcr_pool pool;
	if (!me.incarnation || cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0)
		return;
	cxlcr_host_leave(&pool, &me);
	cxlcr_pool_close(&pool);
}
