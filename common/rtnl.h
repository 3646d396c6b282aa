/*
 * The few rtnetlink requests cxlcr makes: a service's veth pair, its
 * address, its link on and off the pod bridge, and named network
 * namespaces. They used to be `ip` and `nsenter` commands, a fork and exec
 * each (~2-3 ms); several of them sit on the critical path of a restore,
 * and the network lock runs inside CRIU's freeze (criu-plugin/netlock.c).
 *
 * A socket works in the network namespace it was made in, whichever
 * namespace its user is in later: that is how CRIU, running inside a
 * service's namespace, still reaches the host's bridge (the daemon lends
 * it one). Every function returns 0 (or an index, or an fd) on success,
 * -1 with cxlcr_error() set otherwise.
 */
#ifndef CXLCR_RTNL_H
#define CXLCR_RTNL_H
#include <stdbool.h>
#include <stdint.h>

/* A NETLINK_ROUTE socket of this thread's network namespace, or of the
 * namespace netns_fd refers to (made in a short-lived thread that joins
 * it, so the caller's own namespace never changes). Close-on-exec. */
int cxlcr_rtnl_open(void);
int cxlcr_rtnl_open_in(int netns_fd);

/* The index of link `name` in the socket's namespace. */
int cxlcr_rtnl_link_index(int sk, const char *name);

/* Link `name`: master >0 puts it on that bridge (index), 0 takes it off,
 * <0 leaves that alone; up sets IFF_UP (false leaves the flags alone). */
int cxlcr_rtnl_link_set(int sk, const char *name, int master, bool up);

/* Link `name` on bridge `bridge`, up. */
int cxlcr_rtnl_link_attach(int sk, const char *name, const char *bridge);

/* A veth pair: `name` here, `peer` (with the given MAC) moved into the
 * namespace of peer_netns_fd. */
int cxlcr_rtnl_veth_add(int sk, const char *name, const char *peer, const uint8_t peer_mac[6],
			int peer_netns_fd);

/* Deletes link `name` (its veth peer goes with it). */
int cxlcr_rtnl_link_del(int sk, const char *name);

/* Adds ip/prefix (host order) to link `name`. */
int cxlcr_rtnl_addr_add(int sk, const char *name, uint32_t ip, int prefix);

/* Deletes the IPv4 neighbour entries of the socket's namespace that wait
 * for an answer (incomplete or failed), with the packets queued on them;
 * returns how many. An entry that asked while the namespace had no way out
 * would otherwise ask again only after retrans_time (1 s). */
int cxlcr_rtnl_neigh_flush_unresolved(int sk);

/* Is link `name` up and running (IFF_RUNNING: the kernel has seen its
 * carrier come on and made it able to send, which it does a little after
 * the carrier, from a work queue)? 1, 0, or -1. */
int cxlcr_rtnl_link_running(int sk, const char *name);

/* A new network namespace named `name` as `ip netns` names them
 * (/run/netns/NAME, a bind mount of it); returns an fd of it. */
int cxlcr_netns_create(const char *name);

/*
 * The network lock of a migrate (criu-plugin/netlock.c): the daemon lends
 * CRIU a socket of its host's namespace as fd $CXLCR_NETLOCK_FD, and names
 * the service's link and the pod bridge. The plugin takes the link off the
 * bridge once the tasks are frozen (dump), and puts it on, up, once the
 * restored tasks own their arena and are about to run (restore).
 */
#define CXLCR_SERVICE_IFNAME     "eth0"   /* the service's end of its link */
#define CXLCR_NETLOCK_FD_ENV     "CXLCR_NETLOCK_FD"
#define CXLCR_NETLOCK_LINK_ENV   "CXLCR_NETLOCK_LINK"
#define CXLCR_NETLOCK_BRIDGE_ENV "CXLCR_NETLOCK_BRIDGE"

#endif
