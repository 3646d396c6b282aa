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

/* The frozen process pid (its start time start, noted at the freeze; 0:
 * not known), on host, with link veth off the bridge, of the
 * service whose arena region is generation: resumed if the arena is its
 * own again, which it makes sure of with a compare-and-set of the epoch
 * *before* it resumes (so a restore still under way, whose take-over
 * expects the old epoch, fails); fenced if another process owns and runs
 * it. Resumed: every process of it but the nstopped of stopped (pids in
 * its namespace, container_stopped(): stopped before the freeze, they
 * stay so; NULL, 0: all of them). Writes where the service runs now into
 * where. Returns 1 when the source was resumed, 0 when it was fenced, -1
 * when it had ended and nobody else owns the arena (neither: the arena
 * and its epoch are left as they are, for a restore from its checkpoint). */
int service_resume_or_fence(struct cxlcr_pool *pool, uint64_t generation, int32_t pid, uint64_t start,
			    const char *host, const char *veth, const pid_t *stopped, size_t nstopped, char *where,
			    size_t len);

/*
 * A restore that failed after the plugin took the arena over (CRIU killed
 * just before the tasks resume, or its worker killed and the task ended
 * by its keeper) leaves the arena's epoch moved on and the checkpoint's
 * records stale: nobody could restore the service again, and its data
 * would be out of reach. If the new owner is dead (waited for a while,
 * judged on its own machine: owner_state.h), the arena is fenced once more
 * (compare-and-set of the epoch, to the same dead owner) and the
 * checkpoint is published again with that epoch in its records, so that a
 * retry works. True if it was renewed. A migrate's source that is still
 * frozen takes its arena back the same way (service_resume_or_fence()).
 */
struct cxlcr_image_set;
/* wait: for an owner on any host (another process's restore, whose
 * keeper may still be ending its task); false for the
 * restore's own worker, which waits only for an owner on its own host (an
 * owner on another is the migrate's source, which took its arena back). */
bool checkpoint_renew_stale(struct cxlcr_pool *pool, const struct cxlcr_region *images,
			    const struct cxlcr_image_set *meta, bool wait);

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

/* After a worker of this host's daemon died (killed): the leases it held
 * are taken over at once, which resumes or fences what it left frozen
 * (verb_begin), and given back; the services it worked on answer again
 * without waiting for the next verb on them; each one's last verb is
 * recorded as abandoned, the worker having "why" (control/outcome.h).
 * Returns how many. */
int verb_recover_dead(struct cxlcr_pool *pool, int32_t pid, const char *why);

#endif
