/*
 * Running CRIU on a pod service. Only the service's own pages, fds and
 * namespaces go into the images: its heap is a shared mapping of the pool,
 * which CRIU records as a file mapping and re-creates at the same address;
 * the cxlcr plugin records the arena and takes it over on restore.
 */
#ifndef CXLCR_CRIU_H
#define CXLCR_CRIU_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "criu_swrk.h"
#include "host_files.h"

#define CRIU_TIMEOUT_S 120
/* CRIU's time: CRIU_TIMEOUT_S, or less when the deadline of the requests
 * that wait for it is shorter ($CXLCR_RPC_TIMEOUT_MS): a CRIU that runs on
 * after its caller gave up would keep a service frozen, or half-restored
 * tasks mapping its arena, for nobody (docs/control-plane.md). */
int criu_timeout_s(void);

/* Tests stop CRIU at a step of their choice: with $CXLCR_TEST_CRIU_HOOK=DIR
 * in the daemons' environment, DIR/action-script is CRIU's action script
 * (tests/t_faults.sh). NULL otherwise. */
const char *criu_test_action_script(void);

/*
 * CRIU runs inside the service's network namespace (setns before exec).
 * The namespace is then not one CRIU has to dump or rebuild: the
 * destination makes it beforehand, with eth0, the address and the MAC
 * (container_netns_prepare), and the restore runs in it. Dumping and
 * rebuilding it (links, addresses, routes, rules, iptables and nftables
 * through their tools) took ~40 ms of every dump and ~60 ms of every
 * restore, inside the freeze; even as an --external namespace CRIU still
 * dumped the host's whole conntrack table for it twice (~8 ms).
 *
 * The network of a service is locked by taking its link off the pod's
 * bridge, not by CRIU's iptables lock (~70 ms to lift with the nftables
 * backend). A service's only way in or out is its link, so nothing reaches
 * its sockets while CRIU dumps them. The plugin does it, through a netlink
 * socket of the host the daemon lends CRIU (criu-plugin/netlock.c): only
 * once the tasks are frozen (taken off earlier, the still running service
 * would send replies into the void, resent only after a retransmission
 * timeout), and on restore it puts the new link on the bridge just before
 * the tasks resume.
 */

/* Dumps the service whose PID-namespace init is pid into dir. With
 * leave_stopped the tasks stay frozen for a migrate to either end or
 * resume them; otherwise CRIU kills them. */
int criu_dump(pid_t pid, const char *dir, const char *link, bool leave_stopped);

/* Restores the image set in dir (of criu_dump()) into the network namespace
 * netns_fd (container_netns_prepare()), whose link joins bridge just before
 * the tasks resume; *pid receives the restored init's pid. When this host
 * names the pool differently from the source (source_pool), the restored
 * mappings and fds of the pool are rebased onto pool_fd, this host's pool.
 * The restored tasks are left stopped (SIGSTOP): the caller lets them run
 * (container_signal_all(SIGCONT)) once it has judged the restore a
 * success, so that a CRIU that dies after its last step leaves nothing
 * that ran. */
struct criu_ahead;
int criu_restore(const char *dir, const char *bridge, const char *link, const char *source_pool, int pool_fd,
		 int netns_fd, struct criu_ahead *ahead, pid_t *pid);

/*
 * A migrate's restore, its CRIU started before the checkpoint exists
 * (while the source still runs: cmd_restore_session()), with what it will
 * most likely need: the pool's fd for source_pool when that host names the
 * pool otherwise (NULL: it does not), this host's own files of the paths
 * the source's service has open (host_files.h). criu_restore() uses it
 * if the checkpoint needs just that, and starts another otherwise; either
 * way it is spent. criu_ahead_abort() ends one that will not be used.
 */
struct criu_ahead {
	struct criu_swrk w;
	struct host_files own;
	char source_pool[PATH_MAX];
	bool started;
};
int criu_restore_ahead(struct criu_ahead *a, const char *bridge, const char *link, const char *source_pool,
		       int pool_fd, int netns_fd, char *const *host_files, int n);
void criu_ahead_abort(struct criu_ahead *a);

/* Remote fork (fork.h). The parent is dumped with its tasks left running
 * and no network lock; while CRIU holds them frozen, the plugin snapshots
 * the arena under snapshot_name. */
int criu_dump_for_fork(pid_t pid, const char *dir, const char *snapshot_name);
/* Restores a fork child from a rebased image set (rebase/): as
 * criu_restore(), into the child's own network namespace and working
 * directory (host_files.h: of its own name), with the parent's established
 * connections closed; with leave_stopped its tasks stay stopped (a
 * copy-mode child, which its pager lets run). */
int criu_restore_child(const char *dir, const char *name, const char *bridge, const char *link,
		       const char *source_pool, int pool_fd, int netns_fd, bool leave_stopped, pid_t *pid);

#include "../rebase/criu_stats.h" /* criu_read_dump_stats() */

#endif
