/*
 * The network lock of a pod service, taken and released in CRIU's freeze.
 *
 * CRIU runs inside the service's own network namespace (daemon/criu.c), so
 * it neither dumps that namespace nor runs its network-lock step, and the
 * daemon has no action script to give it: an action script costs two
 * shells at each of the ten steps of a dump and a restore, ~15 ms on the
 * critical path. The link to lock is outside that namespace, on the host's
 * pod bridge, so the daemon lends us a netlink socket of the host
 * (common/rtnl.h names the environment).
 *
 * Dump: once the tasks are frozen, the service's link leaves the bridge
 * (and stays up: a link that is down marks the service's routes
 * "linkdown"). Packets that arrive from then on are dropped, and a client
 * sends them again to wherever the service runs next, instead of being
 * acknowledged by the frozen source and lost with it. A dump that fails
 * leaves the link off; the daemon puts it back when it resumes the source.
 *
 * Restore: the new link joins the bridge, up, once the restored tasks own
 * their arena and have their sockets back, just before they run. CRIU's
 * plugin hooks come only after the sockets left TCP repair mode, and
 * leaving it makes them send: the neighbour lookups this started in the
 * service's namespace (CRIU's own, now) found no way out and would ask
 * again only after a whole ARP retry (1 s). They are flushed once the link
 * is on, so that the service's first packets ask afresh.
 *
 * "On" means running at both ends, not just attached: the kernel makes a
 * veth able to send, and a bridge port able to forward, from a work queue
 * a little after the carrier comes on. A packet sent before then is
 * dropped, and when it is the ARP request of a neighbour lookup, that
 * lookup asks again only after 1 s: ~5% of migrates under load stalled
 * for a second so (bench/continuity.sh with many migrates). So the lock is
 * released once both ends run, and the unresolved lookups are flushed
 * after that.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/rtnl.h"
#include "../common/util.h"
#include "plugin.h"

/* The lent socket and the link, or false when this CRIU was not run by a
 * cxlcr daemon for a pod service (plain criu, a fork's snapshot dump). */
static bool lent(int *sk, const char **link)
{
	const char *fd = getenv(CXLCR_NETLOCK_FD_ENV);
	*link = getenv(CXLCR_NETLOCK_LINK_ENV);
	if (!fd || !*fd || !*link || !**link)
		return false;
	*sk = atoi(fd);
	return *sk > 2;
}

int netlock_take(void)
{
	int sk;
	const char *link;
	if (!lent(&sk, &link))
		return 0;
	return cxlcr_rtnl_link_set(sk, link, 0, false) < 0 ? -1 : 1;
}

#define RUNNING_WAIT_NS   (200 * 1000000ull) /* the work queue runs within ~1 ms */
#define RUNNING_POLL_NS   (50 * 1000ull)

/* Waits until the service's link runs at the host's end (host_sk) and at
 * its own (here). 1 when both do, 0 when they did not in time or cannot be
 * asked (the lock is released anyway: a late start costs an ARP retry, not
 * the service). */
static int wait_running(int host_sk, const char *link, int here)
{
	uint64_t give_up = cxlcr_mono_ns() + RUNNING_WAIT_NS;
	for (;;) {
		int host = cxlcr_rtnl_link_running(host_sk, link);
		int own = host == 1 ? cxlcr_rtnl_link_running(here, CXLCR_SERVICE_IFNAME) : 0;
		if (host < 0 || own < 0)
			return 0;
		if (host && own)
			return 1;
		if (cxlcr_mono_ns() > give_up)
			return 0;
		struct timespec pause = { 0, (long)RUNNING_POLL_NS };
		nanosleep(&pause, NULL);
	}
}

int netlock_release(int *flushed, bool *late)
{
	*flushed = 0;
	*late = false;
	int sk;
	const char *link, *bridge = getenv(CXLCR_NETLOCK_BRIDGE_ENV);
	if (!lent(&sk, &link))
		return 0;
	if (!bridge || !*bridge)
		return cxlcr_error("%s is not set", CXLCR_NETLOCK_BRIDGE_ENV);
	int here = cxlcr_rtnl_open();
	if (here < 0)
		return -1;
	int rc = cxlcr_rtnl_link_attach(sk, link, bridge);
	if (rc == 0 && (rc = wait_running(sk, link, here)) == 0)
		*late = true;
	if (rc >= 0)
		rc = *flushed = cxlcr_rtnl_neigh_flush_unresolved(here);
	close(here);
	return rc < 0 ? -1 : 1;
}
