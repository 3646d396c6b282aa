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
/* Forgets the pod of the current pool (pod down). */
void pod_forget(const struct pod *p);

static inline uint32_t pod_gateway(const struct pod *p) { return p->net | 1u; }
static inline uint32_t pod_host_ip(const struct pod *p, int i) { return p->net | (uint32_t)(10 + i); }
static inline uint32_t pod_service_first(const struct pod *p) { return p->net | 0x0101u; }

#endif
