/* Resume or fence a frozen source, and the start of a verb under a lease. */
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../daemon/container.h"
#include "../daemon/image_store.h"
#include "../daemon/rpc.h"
#include "../tracking/track.h"
#include "fence.h"
#include "frozen.h"
#include "outcome.h"
#include "owner_state.h"

#define KILL_WAIT_MS 10000

#define HELD_WAIT_MS 10000

/*
 * Another process than pid (the frozen source, on host) owns the arena and
 * runs. A restored task that took the arena over but that CRIU still holds
 * (it has not run, so it wrote nothing) is waited for, at most
 * HELD_WAIT_MS: its restore either lets it run, or ends it (a restore
 * whose caller gave up is stopped, a dead worker's keeper kills it).
 * Fencing the source for a task that then dies before it ran would leave
 * the service nowhere. The owner is judged on its own machine
 * (owner_state.h): the same pid on another machine is another task.
 */
static bool other_owner_runs(const struct cxlcr_region *now, int32_t pid, const char *host)
{
	char owner[CXLCR_HOST_MAX + 1];
	cxlcr_copy_field(owner, sizeof(owner), now->owner_host);
	if (now->owner_pid <= 0 || (now->owner_pid == pid && !strcmp(owner, host)))
		return false;
	return owner_state(now, false, HELD_WAIT_MS) == OWNER_RUNS;
}

/*
 * A restored copy owns the arena, but the restore's worker may have died
 * or stalled (and been killed) after its CRIU succeeded, before its own
 * last steps: the region still names the source's link (the next dump
 * then fails to find it). The region is the pool's, so the fencing side
 * names the link a restore to that epoch makes (container_link_name()):
 * the same as the restore's, so doing it twice is harmless. The spent
 * checkpoint is left alone: a copy that looks as if it ran (untraced) may
 * yet be ended by its keeper (a restore stopped at pre-resume), and is then
 * restored from it (checkpoint_renew_stale()); the next restore or migrate
 * of the service reclaims it.
 */
static void finish_taken_over(struct cxlcr_pool *pool, const struct cxlcr_region *now)
{
	char link[16];
	container_link_name(pool->sb->uuid, now->generation, now->owner_epoch, link);
	if (strncmp(now->veth, link, sizeof(now->veth)))
		cxlcr_region_set_veth(pool, now->generation, link);
}

/* The caller has just checked that pid is the frozen source; a pidfd holds
 * it from here on, through judgements that may take seconds (owner_state()
 * waits), so that neither the SIGCONT nor the SIGKILL at their end can
 * reach a process that got the pid after the source ended meanwhile. (A
 * pidfd that cannot be had, e.g. out of fds, leaves the pid itself.) */
int service_resume_or_fence(struct cxlcr_pool *pool, uint64_t generation, int32_t pid, uint64_t start,
			    const char *host, const char *veth, const pid_t *stopped, size_t nstopped, char *where,
			    size_t len)
{
	int pfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	/* The pid is the source's only while its start time is the one noted
	 * at the freeze: another process's is not resumed, nor killed. */
	uint64_t now_start;
	bool ended = start && (!cxlcr_process_start(pid, &now_start) || now_start != start);
	if (ended && pfd >= 0) {
		close(pfd);
		pfd = -1;
	}
	for (int tries = 0; tries < 8; tries++) {
		struct cxlcr_region now, after;
		if (cxlcr_region_get(pool, generation, &now) < 0)
			break; /* the arena is gone: nothing to resume into */
		if (other_owner_runs(&now, pid, host))
			break;
		/* A source that ended while frozen is not given its arena
		 * back: claimed for a dead process, the arena's epoch would
		 * no longer be its checkpoint's, and nothing could restore
		 * the service from it. */
		if (ended || (pfd >= 0 ? !cxlcr_pidfd_running(pfd) : !pid_alive(pid))) {
			snprintf(where, len, "nowhere (its process has ended)");
			if (pfd >= 0)
				close(pfd);
			return -1;
		}
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
		if (pfd >= 0 ? cxlcr_pidfd_running(pfd) : pid_alive(pid))
			container_signal_all_but(pid, SIGCONT, stopped, nstopped);
		/* A migrate ends its source's tracker before the freeze
		 * (cmd_migrate.c): tracked again, from a full round. Only a
		 * help: without it, snapshots compare. */
		cxlcr_tracker_ensure(pool, &after);
		snprintf(where, len, "%s", host);
		if (pfd >= 0)
			close(pfd);
		return 1;
	}
	struct cxlcr_region now;
	bool moved = cxlcr_region_get(pool, generation, &now) == 0;
	if (pfd >= 0) {
		cxlcr_pidfd_kill_wait(pfd, KILL_WAIT_MS);
		close(pfd);
	}
	if (moved && now.owner_epoch && (strncmp(now.owner_host, host, CXLCR_HOST_MAX) || now.owner_pid != pid))
		finish_taken_over(pool, &now);
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
			    const struct cxlcr_image_set *meta, bool wait)
{
	struct cxlcr_region now, after, current;
	struct cxlcr_image_set current_meta;
	if (cxlcr_region_get(pool, meta->arena_generation, &now) < 0 || now.owner_epoch == meta->arena_epoch)
		return false;
	char why[CXLCR_ERROR_MAX];
	snprintf(why, sizeof(why), "%s", cxlcr_last_error());
	/* The caller's view of the checkpoint may be old: another verb's
	 * take-over may have renewed it meanwhile (then it is fresh, and a
	 * second renewal would fence the arena past it), or replaced it. */
	if (image_store_find(pool, meta->service, &current, &current_meta) == 0 &&
	    current_meta.arena_generation == meta->arena_generation) {
		if (current_meta.arena_epoch == now.owner_epoch) {
			cxlcr_error("%s", why);
			return true;
		}
		images = &current;
		meta = &current_meta;
	}
	/* Its keeper ends it once its CRIU is gone: wait for that (the
	 * task's end may lag its keeper's), on the owner's machine. The
	 * restore's own worker does not wait for an owner on another host:
	 * that is the migrate's source, which took its arena back, and lives
	 * on. */
	bool other_host = strncmp(now.owner_host, this_host(), CXLCR_HOST_MAX) != 0;
	if (owner_state(&now, true, wait || !other_host ? HELD_WAIT_MS : 0) != OWNER_GONE) {
		cxlcr_error("%s", why);
		return false;
	}
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
		/* What an operator had stopped before that freeze stays
		 * stopped, as the dead verb's host recorded it; unknown, every
		 * process runs again. */
		static pid_t stopped[FROZEN_STOPPED_MAX];
		ssize_t nstopped = verb_lease_frozen_stopped(l, stopped, FROZEN_STOPPED_MAX);
		if (nstopped < 0) {
			fprintf(stderr, "cxlcr: warning: %s: every process of %.*s is continued\n", cxlcr_last_error(),
				(int)CXLCR_NAME_MAX, s->region.name);
			nstopped = 0;
		}
		service_resume_or_fence(pool, s->region.generation, l->frozen_pid, l->frozen_start, l->dead_host, veth,
					stopped, (size_t)nstopped, where, sizeof(where));
	}
	if (l->took_over)
		verb_lease_note_frozen(l, 0, 0, NULL, 0);
	/* A restore that died after its task took the arena over, before
	 * the task ran (its keeper ended it): the checkpoint is renewed. */
	struct cxlcr_region images;
	struct cxlcr_image_set meta;
	if (l->took_over && image_store_find(pool, s->region.name, &images, &meta) == 0 &&
	    !checkpoint_renew_stale(pool, &images, &meta, true) && !strncmp(l->dead_verb, "restore", sizeof(l->dead_verb))) {
		/* A restore whose worker died (or stalled) after its CRIU let
		 * the task run: the restore's own last steps. */
		struct cxlcr_region owner;
		if (cxlcr_region_get(pool, s->region.generation, &owner) == 0 &&
		    owner.owner_epoch == meta.arena_epoch + 1 &&
		    !strncmp(owner.owner_host, this_host(), CXLCR_HOST_MAX) && pid_alive(owner.owner_pid))
			finish_taken_over(pool, &owner);
	}
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

int verb_recover_dead(struct cxlcr_pool *pool, int32_t pid, const char *why)
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
		/* Recorded before the lease goes: whoever waits for the lease
		 * finds the outcome. s is loaded again by verb_begin: where the
		 * take-over left the service. */
		char verb[CXLCR_LEASE_VERB_MAX + 1], host[CXLCR_HOST_MAX + 1], reason[CXLCR_OUTCOME_REASON_MAX];
		snprintf(verb, sizeof(verb), "%.*s", (int)CXLCR_LEASE_VERB_MAX, l.dead_verb);
		snprintf(host, sizeof(host), "%.*s", (int)CXLCR_HOST_MAX, l.dead_host);
		snprintf(reason, sizeof(reason), "its worker (pid %d on %s) %s; taken over: the service is %s on %.*s",
			 (int)pid, host, why, s.state, (int)CXLCR_HOST_MAX, s.region.owner_host);
		verb_outcome_record(pool, s.region.generation, verb, CXLCR_OUTCOME_ABANDONED, host, reason);
		verb_lease_release(&l);
		done++;
	}
	return done;
}
