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
 */
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/rtnl.h"
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

int netlock_release(void)
{
	int sk;
	const char *link, *bridge = getenv(CXLCR_NETLOCK_BRIDGE_ENV);
	if (!lent(&sk, &link))
		return 0;
	if (!bridge || !*bridge)
		return cxlcr_error("%s is not set", CXLCR_NETLOCK_BRIDGE_ENV);
	if (cxlcr_rtnl_link_attach(sk, link, bridge) < 0)
		return -1;
	int here = cxlcr_rtnl_open();
	if (here < 0)
		return -1;
	int flushed = cxlcr_rtnl_neigh_flush_unresolved(here);
	close(here);
	return flushed < 0 ? -1 : 1;
}
