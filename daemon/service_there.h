/*
 * A service whose process runs on another host, as that host sees it.
 *
 * A pid in the pool (a region's owner_pid) means something on its own
 * host only: the hosts of a pod share no pid namespace (a real pod's no
 * kernel; an emulated host has a pid namespace of its own,
 * emulation/hostpid.h). So whether such a service's process runs, and its
 * memory, is asked of its host's daemon over the control protocol (the
 * internal verb `service-state`), which looks at the pid only while the
 * pool still names it that host's owner at that epoch, as it would judge
 * one of its own (service_load()). The question is bounded
 * (SERVICE_ASK_MS): a host that does not answer (frozen, crashed, cut off)
 * leaves the service's state "unknown", with the reason.
 */
#ifndef CXLCR_SERVICE_THERE_H
#define CXLCR_SERVICE_THERE_H

#include <stddef.h>

#include "cli.h"

#define SERVICE_ASK_MS 2000 /* at most (and at most the rpc deadline) */

/* For each of the n services that another host runs (state "remote"),
 * what its host's daemon says: one question per host. */
void service_ask_hosts(struct cxlcr_pool *pool, struct service *s, size_t n);
/* service_load(), then the question for a service of another host. */
void service_load_asking(struct cxlcr_pool *pool, const struct cxlcr_region *r, struct service *s);

/* cxlcr service-state GENERATION:EPOCH:PID...: on the owner's host, one
 * line per service: "GENERATION runs RSS_ANON RSS_SHMEM RSS_FILE" (kB),
 * "GENERATION gone", or "GENERATION moved" (the pool names another owner
 * by now: ask again). */
int cmd_service_state(int argc, char **argv);

#endif
