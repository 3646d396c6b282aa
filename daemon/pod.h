/*
 * The emulated pod of a pool. Each pool gets its own pod on a machine (a
 * test and a demo can run at once): pod N has bridge cxlcrN on subnet
 * 10.(78+N).0.0/16, hosts hI at .0.(10+I) in network namespaces cxlcrN-hI,
 * and its daemons' sockets under /run/cxlcr/podN/.
 */
#ifndef CXLCR_POD_H
#define CXLCR_POD_H
#include <stdbool.h>
#include <stdint.h>

#define POD_MAX           64
#define POD_RUN_DIR       "/run/cxlcr"
#define POD_PREFIX_LEN    16
#define POD_SERVICE_COUNT 0xfe00u /* .1.1 up to .254.255 */

struct pod {
	int index;
	char dir[64];          /* POD_RUN_DIR/podN: "pool", HOST.sock, HOST.pid */
	char bridge[16];       /* cxlcrN */
	char netns[32];        /* cxlcrN-pod: names the bridge's network namespace */
	char netns_path[64];
	uint32_t net;          /* 10.(78+N).0.0, host order */
};

/* The pod of $CXLCR_POOL (or the default pool); with create, one is set up
 * for it if it has none. NULL (and cxlcr_last_error()) if there is none. */
const struct pod *pod_current(bool create);
/* Writes POD_DIR/pool, which says whose pod it is (the directory exists). */
int pod_dir_write_pool(const struct pod *p, const char *pool);
/* The name of host's network namespace (cxlcrN-HOST, under /run/netns). */
void pod_host_netns(const struct pod *p, const char *host, char *buf, size_t len);
/* Forgets the pod of the current pool (pod down). */
void pod_forget(const struct pod *p);
/* The pid file of a program of the pod (POD_DIR/HOST.pid: a host's
 * daemon, the memory host's cxlcr-memd) says its pid and that pid's start
 * time, so that a process that got the pid after the program ended is not
 * taken for it: `pod down` would signal it, and a stale pod would never be
 * reclaimed. pod_pid_read() returns the pid while that process runs, else
 * 0 (a file of the pid alone, as older ones were: while the pid runs). */
int pod_pid_write(const char *path, int pid);
int pod_pid_read(const char *path);

static inline uint32_t pod_gateway(const struct pod *p) { return p->net | 1u; }
static inline uint32_t pod_host_ip(const struct pod *p, int i) { return p->net | (uint32_t)(10 + i); }
static inline uint32_t pod_service_first(const struct pod *p) { return p->net | 0x0101u; }

/* A network namespace ns with an address on the pod's bridge through the
 * veth link (cmd_pod.c): hosts, and the cold tier's memory host. mac, if
 * not NULL, is its eth0's address (one that stays the same when the
 * namespace is made again, so that the pod's neighbour caches stay right). */
int pod_make_net(const struct pod *pod, const char *ns, const char *link, uint32_t ip_host_order, const char *mac);
void pod_remove_net(const char *ns, const char *link);
/* The cold tier's memory host (cmd_tier.c): its name, and its log (its
 * cxlcr-memd's stdout and stderr) in its own /var/log/cxlcr. */
#define TIER_MEM_HOST "m0"
#define TIER_MEMD_LOG "cxlcr-memd"
/* Stops the cold tier's memory host of the pod, if it is up. */
void tier_host_down(const struct pod *pod);

#endif
