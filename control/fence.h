/*
 * Ending a freeze in a defined state (docs/control-plane.md): a frozen
 * source either takes its arena back and resumes, or, when a restored copy
 * owns and runs it, is fenced (killed). Never both, never neither.
 */
#ifndef CXLCR_CONTROL_FENCE_H
#define CXLCR_CONTROL_FENCE_H
#include <stddef.h>
#include <stdint.h>
#include "../common/pool.h"
#include "../daemon/cli.h"
#include "lease.h"

/* The frozen process pid (on host, with link veth off the bridge) of the
 * service whose arena region is generation: resumed if the arena is its
 * own again, which it makes sure of with a compare-and-set of the epoch
 * *before* it resumes (so a restore still under way, whose take-over
 * expects the old epoch, fails); fenced if another process owns and runs
 * it. Writes where the service runs now into where. Returns 1 when the
 * source was resumed, 0 when it was fenced. */
int service_resume_or_fence(struct cxlcr_pool *pool, uint64_t generation, int32_t pid, const char *host,
			    const char *veth, char *where, size_t len);

/* The start of every verb on a service s (loaded, pool open): takes its
 * lease (or checks the one handed down in passed); if the last holder died
 * with the service frozen, resumes or fences it first; then loads s again.
 * 0, or the exit status after printing the one-line reason. */
int verb_begin(struct cxlcr_pool *pool, struct service *s, const char *verb, const char *passed,
	       struct verb_lease *l);

/* verb_begin() for a verb that runs where its service runs (checkpoint,
 * migrate, snapshot): the service must still run here once the lease is
 * held (a dead verb's copy may have been fenced meanwhile). */
int verb_begin_here(struct cxlcr_pool *pool, struct service *s, const char *verb, const char *passed,
		    struct verb_lease *l);

#endif
