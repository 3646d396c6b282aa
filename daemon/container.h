/*
 * A pod service is container-like: it is pid 1 of its own PID namespace,
 * with its own network and UTS namespaces. Its address lives on its own
 * interface (eth0), joined to the pod bridge by a veth pair, so the address
 * belongs to the service and moves with it; restores never collide with the
 * host's PIDs. The mount namespace stays the machine's (see DESIGN.md).
 */
#ifndef CXLCR_CONTAINER_H
#define CXLCR_CONTAINER_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/rtnl.h"
#include "pod.h"

#define SERVICE_IFNAME   CXLCR_SERVICE_IFNAME

/* "10.78.1.7" for an address in host order. */
const char *ip_string(uint32_t ip, char buf[16]);

/* The name of a service incarnation's link on the bridge: unique per pool,
 * arena and owner epoch, so a restored service never meets its frozen
 * source's. */
void container_link_name(const uint8_t pool_uuid[16], uint64_t generation, uint64_t epoch,
			 char out[16]);

/* The MAC of a service's eth0, derived from its address (host order): a
 * service started again at an address that an earlier one had keeps the MAC
 * that clients' neighbour tables still hold (a random one would leave them
 * unreachable until those entries expire). Fork children get theirs too. */
void container_mac_of(uint32_t ip, uint8_t mac[6]);

/* Starts child_fn(arg) as pid 1 of new PID, network and UTS namespaces with
 * hostname `name`, after its network is set up: eth0 with ip/16, its peer
 * `link` on the pod's bridge. Returns the child's pid (in our namespace). */
pid_t container_start(const struct pod *pod, const char *name, const char *link, uint32_t ip,
		      void (*child_fn)(void *), void *arg);

/*
 * A restored service joins a network namespace made for it beforehand
 * (CRIU runs in it, see criu.h), with eth0 already carrying its address and
 * MAC, and its peer `link` not yet on the bridge: CRIU then neither dumps
 * nor rebuilds the namespace's links, addresses, routes and firewall
 * tables, which took most of a migrate's freeze. prepare (re)makes it as a
 * named namespace; open gives an fd of it for CRIU; release forgets the
 * name once the restored service holds the namespace, or, with discard,
 * removes the link too (a failed restore).
 */
int container_netns_prepare(const char *link, uint32_t ip);
int container_netns_open(const char *link);
void container_netns_release(const char *link, bool discard);
/* Ends (SIGKILL) every task in the named network namespace made for `link`
 * and waits, at most timeout_ms in all, until they have gone: what a
 * restore whose maker died left running there (a fork child CRIU restored
 * before its maker could make it a service). The name pins the namespace,
 * so a task found in it is the restore's, whatever its pid. Returns how
 * many tasks were ended (0 when the namespace has no name). */
int container_netns_end_tasks(const char *link, int timeout_ms);

/* Puts a service's link back on the pod's bridge (a failed checkpoint or
 * migrate; the CRIU plugin takes it off and puts it on otherwise, see
 * daemon/criu.h). */
int container_link_attach(const struct pod *pod, const char *link);

/* Sends sig to every task of the PID namespace whose init is `init`. */
int container_signal_all(pid_t init, int sig);
/* The same, but not to the processes whose pid in that namespace is one of
 * skip's n (a restored service's processes that were stopped when it was
 * checkpointed stay stopped). */
int container_signal_all_but(pid_t init, int sig, const pid_t *skip, size_t n);
/* The processes of that PID namespace that are stopped now (state T: a
 * SIGSTOP, not a tracer's stop), by their pids in it, at most max: taken
 * before a verb freezes a service, so that its failure resumes only those
 * that ran. */
size_t container_stopped(pid_t init, pid_t *stopped, size_t max);

#endif
