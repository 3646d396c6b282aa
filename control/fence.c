/* Resume or fence a frozen source, and the start of a verb under a lease. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../daemon/container.h"
#include "../daemon/image_store.h"
#include "../daemon/rpc.h"
#include "fence.h"

#define KILL_WAIT_MS 10000

#define HELD_WAIT_MS 10000

/* Is pid held by a tracer (CRIU, which has not let a restored task run)? */
static bool traced(int32_t pid)
{
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	bool yes = false;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "TracerPid:", 10)) {
			yes = atoi(line + 10) != 0;
			break;
		}
	if (f)
		fclose(f);
	return yes;
}

/* Waits (at most HELD_WAIT_MS) while pid lives under a tracer: a restored
 * task its CRIU still holds, whose restore lets it run or ends it. */
static void wait_while_held(int32_t pid)
{
	uint64_t until = cxlcr_mono_ns() + HELD_WAIT_MS * 1000000ull;
	while (pid_alive(pid) && traced(pid) && cxlcr_mono_ns() < until)
		usleep(5000);
}

/*
 * Another process than pid owns the arena and runs. A restored task that
 * took the arena over but that CRIU still holds (it has not run, so it
 * wrote nothing) is waited for, at most HELD_WAIT_MS: its restore either
 * lets it run, or ends it (a restore whose caller gave up is stopped, a
 * dead worker's keeper kills it). Fencing the source for a task that then
 * dies before it ran would leave the service nowhere.
 */
static bool other_owner_runs(const struct cxlcr_region *now, int32_t pid)
{
	if (now->owner_pid <= 0 || now->owner_pid == pid || !host_is_local_pod_host(now->owner_host))
		return false;
	wait_while_held(now->owner_pid);
	return pid_alive(now->owner_pid);
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
		snprintf(where, len,
			 "%.*s (restored there, or checkpointed if that restore failed; the source was fenced)",
			 (int)CXLCR_HOST_MAX,
			 now.owner_host);
	else
		snprintf(where, len, "nowhere (its arena is gone)");
	return 0;
}

bool checkpoint_renew_stale(struct cxlcr_pool *pool, const struct cxlcr_region *images,
			    const struct cxlcr_image_set *meta)
{
	struct cxlcr_region now, after;
	if (cxlcr_region_get(pool, meta->arena_generation, &now) < 0 || now.owner_epoch == meta->arena_epoch ||
	    (strncmp(now.owner_host, this_host(), CXLCR_HOST_MAX) && !host_is_local_pod_host(now.owner_host)))
		return false;
	/* Its keeper ends it once its CRIU is gone: wait for that. */
	uint64_t until = cxlcr_mono_ns() + HELD_WAIT_MS * 1000000ull;
	while (pid_alive(now.owner_pid) && cxlcr_mono_ns() < until)
		usleep(5000);
	if (pid_alive(now.owner_pid))
		return false;
	char why[CXLCR_ERROR_MAX];
	snprintf(why, sizeof(why), "%s", cxlcr_last_error());
	bool renewed = cxlcr_region_claim_epoch(pool, now.generation, now.owner_epoch, now.owner_pid, this_host(),
						&after) == 0 &&
		       image_store_renew(pool, images, meta, after.owner_epoch) == 0;
	/* The failed restore's namespace goes too: its link joined the
	 * bridge at the take-over, with the service's address and MAC. */
	char link[16];
	container_link_name(pool->sb->uuid, meta->arena_generation, meta->arena_epoch + 1, link);
	container_netns_release(link, true);
	cxlcr_error("%s", why); /* the reason stays the caller's */
	return renewed;
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
	/* A restore that died after its task took the arena over, before
	 * the task ran (its keeper ended it): the checkpoint is renewed. */
	struct cxlcr_region images;
	struct cxlcr_image_set meta;
	if (l->took_over && image_store_find(pool, s->region.name, &images, &meta) == 0)
		checkpoint_renew_stale(pool, &images, &meta);
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

int verb_recover_dead(struct cxlcr_pool *pool, int32_t pid)
{
	uint64_t held[16];
	int n = verb_lease_held_by(pool, pid, held, 16), done = 0;
	for (int i = 0; i < n; i++) {
		struct cxlcr_region r;
		if (cxlcr_region_get(pool, held[i], &r) < 0)
			continue;
		struct service s;
		struct verb_lease l;
		service_load(pool, &r, &s);
		if (verb_begin(pool, &s, "recover", NULL, &l) != 0)
			continue; /* taken by a live verb meanwhile: it recovers */
		verb_lease_release(&l);
		done++;
	}
	return done;
}
