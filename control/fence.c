/* Resume or fence a frozen source, and the start of a verb under a lease. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "../common/error.h"
#include "../daemon/container.h"
#include "../daemon/rpc.h"
#include "fence.h"

#define KILL_WAIT_MS 10000

/* Another process than pid owns the arena and runs. */
static bool other_owner_runs(const struct cxlcr_region *now, int32_t pid)
{
	return now->owner_pid > 0 && now->owner_pid != pid && host_is_local_pod_host(now->owner_host) &&
	       pid_alive(now->owner_pid);
}

int service_resume_or_fence(struct cxlcr_pool *pool, uint64_t generation, int32_t pid, const char *host,
			    const char *veth, char *where, size_t len)
{
	for (int tries = 0; tries < 8; tries++) {
		struct cxlcr_region now, after;
		if (cxlcr_region_get(pool, generation, &now) < 0)
			break; /* the arena is gone: nothing to resume into */
		if (other_owner_runs(&now, pid))
			break;
		/* Claim first, resume after: a restore that is still under way
		 * (its worker dead or out of time, its CRIU not yet) expects the
		 * epoch it read, and its take-over now fails. */
		if (cxlcr_region_claim_epoch(pool, generation, now.owner_epoch, pid, host, &after) < 0) {
			if (after.generation == generation)
				continue; /* the epoch moved meanwhile: judge again */
			break;
		}
		if (veth[0] && strncmp(after.veth, veth, sizeof(after.veth)))
			cxlcr_region_set_veth(pool, generation, veth);
		const struct pod *pod = pod_current(false);
		if (pod)
			container_link_attach(pod, veth);
		container_signal_all(pid, SIGCONT);
		snprintf(where, len, "%s", host);
		return 1;
	}
	struct cxlcr_region now;
	bool moved = cxlcr_region_get(pool, generation, &now) == 0;
	kill(pid, SIGKILL);
	pid_wait_exit(pid, KILL_WAIT_MS);
	if (moved)
		snprintf(where, len, "%.*s (restored there; the source was fenced)", (int)CXLCR_HOST_MAX,
			 now.owner_host);
	else
		snprintf(where, len, "nowhere (its arena is gone)");
	return 0;
}

int verb_begin(struct cxlcr_pool *pool, struct service *s, const char *verb, const char *passed,
	       struct verb_lease *l)
{
	if (verb_lease_take(pool, &s->region, verb, passed, l) < 0)
		return fail(EXIT_FAIL, "%s", cxlcr_last_error());
	if (l->took_over && l->frozen_pid && verb_lease_frozen_alive(l)) {
		/* A verb died with the service frozen (its worker killed, or
		 * past its deadline): end that freeze before anything else. */
		struct cxlcr_region now;
		char veth[sizeof(now.veth) + 1] = "", where[CXLCR_HOST_MAX + 64];
		if (cxlcr_region_get(pool, s->region.generation, &now) == 0)
			memcpy(veth, now.veth, sizeof(now.veth));
		service_resume_or_fence(pool, s->region.generation, l->frozen_pid, l->dead_host, veth, where,
					sizeof(where));
	}
	if (l->took_over)
		verb_lease_note_frozen(l, 0, 0);
	struct cxlcr_region now;
	if (cxlcr_region_get(pool, s->region.generation, &now) < 0) {
		verb_lease_release(l);
		return fail(EXIT_NOT_FOUND, "service '%.*s' is gone", (int)CXLCR_NAME_MAX, s->region.name);
	}
	service_load(pool, &now, s);
	return 0;
}

int verb_begin_here(struct cxlcr_pool *pool, struct service *s, const char *verb, const char *passed,
		    struct verb_lease *l)
{
	int code = verb_begin(pool, s, verb, passed, l);
	if (code)
		return code;
	if ((code = service_require_here(s)))
		verb_lease_release(l);
	return code;
}
