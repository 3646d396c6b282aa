/*
 * A restore of a service on this host: its newest checkpoint (or a
 * recovery point's dump) fetched from the pool and restored by CRIU, the
 * arena taken over by the plugin, the address with it. `cxlcr restore`,
 * a migrate's destination (restore_session.c) and the recovery of a dead
 * host's services (recovery/) all go through restore_service().
 */
#ifndef CXLCR_RESTORE_H
#define CXLCR_RESTORE_H
#include <stdint.h>
#include <sys/types.h>

#include "../common/pool.h"
#include "../control/lease.h"
#include "json.h"

/* What a restore restores: the service's newest checkpoint, or the dump of
 * a recovery point (its snapshot's name and region; the heap was reset
 * from it, recovery/restore_point.c). */
struct recovery_fresh;
struct restore_from {
	const char *point_name;
	uint64_t point_generation;
	/* A dead host's service (recovery/takeover.c): the point's heap was
	 * copied into a fresh arena, which the dump is made to map instead. */
	const struct recovery_fresh *fresh;
};

/* Where a restore's time goes (restore --json, and so migrate --json):
 * the service runs again once CRIU is done; what follows it is clean-up
 * and the new tracker. */
struct restore_parts {
	uint64_t fetch_ns;   /* finding, claiming and fetching the images */
	uint64_t prepare_ns; /* the network namespace (if not made before), and so on */
	uint64_t criu_ns;    /* criu restore, its request to its end: the tasks resume at its end */
	uint64_t after_ns;   /* after CRIU: clean-up, and the tracker started */
	uint64_t tracker_ns; /* ... of which starting the tracker */
	/* Within criu_ns, the plugin's last steps before the tasks run
	 * (criu-plugin/cxlcr_criu.c): the arenas taken over, the link put on
	 * the bridge (the network lock released). */
	uint64_t take_over_ns, netlock_ns;
};

/* Fetches the newest checkpoint of a service (or its recovery point's
 * dump) and restores it here, under lease l; with ahead, by the CRIU a
 * migrate's destination started before the checkpoint existed (criu.h).
 * *link receives the service's new link. */
struct criu_ahead;
int restore_service(struct cxlcr_pool *pool, const char *name, const struct restore_from *from,
		    const struct verb_lease *l, pid_t *pid, char *link, uint64_t *image_bytes,
		    struct restore_parts *parts, struct criu_ahead *ahead);

void json_restore_parts(struct json *j, const struct restore_parts *p);
/* A restore's --json object on stdout: its name, this host and the pid
 * first (begin), its time, parts and image bytes last (end). */
void json_restore_begin(struct json *j, const char *name, pid_t pid);
void json_restore_end(struct json *j, double ms, const struct restore_parts *parts, uint64_t image_bytes);

#endif
