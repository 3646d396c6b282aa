/*
 * `cxlcr restore NAME --host H --recovery-point` of a service whose own
 * host is dead: an operator brings back, on a living host H, a service that
 * the hard-crash recovery left down (failed after its tries, or never
 * retried because its winner died after it was done), from its newest
 * recovery point, into a fresh arena, at its address, as the recovery
 * itself would have (restore_recovered()). A service whose host is alive
 * is restored as before, on that host (cmd_restore).
 *
 * It runs under the service's lease (one verb at a time on it), and under
 * the dead host's fence: the recovery, done, is reopened while it works
 * (cxlcr_host_fence_reopen), so that the dead host, should it come back,
 * neither frees its quarantined regions nor acknowledges until it is done
 * again; and the pool changes nothing for it once another host takes that
 * recovery over (the same guard as the winner's, cxlcr_host_fence_guard).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/util.h"
#include "../control/fence.h"
#include "../control/lease.h"
#include "../daemon/cli.h"
#include "../daemon/restore.h"
#include "recovery.h"

static const char *usage =
	"cxlcr restore NAME --host HOST [--recovery-point] [--json]\n\n"
	"Restores service NAME on HOST from its checkpoint, or with --recovery-point\n"
	"from its newest recovery point (docs/recovery.md):\n"
	"  - NAME ran on HOST and its process died: its heap is made what it was at\n"
	"    the point, then the point's dump is restored there;\n"
	"  - NAME ran on another host that was declared dead (fenced) and its\n"
	"    recovery is over, but NAME was left down (`cxlcr status` says failed):\n"
	"    NAME comes back on HOST, a living host, into a fresh arena made from\n"
	"    the point, at its address; writes acknowledged after the point are lost.\n"
	"Exit status: 0 restored, 1 failed (one line says why), 2 bad usage,\n"
	"3 no such service, 4 no pool.";

/* Why a service of host `owner` (not this one) cannot be restored here
 * now, or NULL; *index and *fence: its host table entry and fence word. */
static const char *dead_owner(struct cxlcr_pool *pool, const char *name, const char *owner, uint32_t *index,
			      uint64_t *fence, char *why, size_t len)
{
	uint64_t inc;
	bool done = false;
	int i = cxlcr_host_lookup(pool, owner, &inc);
	if (i < 0)
		snprintf(why, len, "%s ran on %s, which has no entry in the host table: nobody has fenced it", name,
			 owner);
	else if (!cxlcr_host_fenced(pool, (uint32_t)i, fence, &done))
		snprintf(why, len,
			 "%s ran on %s, which is not declared dead: restore it there (cxlcr restore %s --host %s "
			 "--recovery-point)", name, owner, name, owner);
	else if (!done)
		snprintf(why, len, "host %s is dead and its services are being recovered by host entry %u: wait for "
			 "that (cxlcr hosts --json)", owner, (unsigned)(*fence & 0xff) - 1);
	else
		return *index = (uint32_t)i, NULL;
	return why;
}

/* The restore itself, with the service's lease held and the dead host's
 * recovery reopened: 0, or -1 with one line (nothing changed then). */
static int restore_guarded(struct cxlcr_pool *pool, const struct cxlcr_region *arena, uint32_t index,
			   uint64_t fence, uint64_t by_hand, char *point, size_t len, pid_t *pid)
{
	struct cxlcr_hosts_map guard;
	if (cxlcr_host_fence_guard_by_hand(pool, index, fence, by_hand, &guard) < 0)
		return -1;
	/* The CRIU plugin takes the fresh arena over under the same guard:
	 * a CRIU that outlived this process (its keeper stalled) takes
	 * nothing once the reopening was closed. */
	char env[72];
	snprintf(env, sizeof(env), "%u:%llu:%llu", index, (unsigned long long)fence, (unsigned long long)by_hand);
	setenv("CXLCR_RECOVERY_FENCE", env, 1);
	static struct recovery_fresh fresh;
	char owner[CXLCR_HOST_MAX + 1];
	cxlcr_copy_field(owner, sizeof(owner), arena->owner_host);
	/* What a restore here that ended half-way left made (this one holds
	 * the dead host's recovery now): undone first. */
	struct recovery_sweep swept;
	if (recovery_sweep_ended_runs(pool, owner, &swept) > 0)
		fprintf(stderr, "what an earlier restore here left half made: %u region(s) freed, %u fresh arena(s) undone\n",
			swept.made_freed, swept.undone);
	int got = restore_recovered(pool, arena->generation, owner, point, len, pid, &fresh);
	unsetenv("CXLCR_RECOVERY_FENCE");
	if (got == 1)
		cxlcr_error("%.*s has no recovery point", (int)CXLCR_NAME_MAX, arena->name), got = -1;
	/* Why, for status: marked under the same guard (refused if this
	 * restore's reopening was taken over meanwhile). */
	if (got < 0) {
		char why[CXLCR_ERROR_MAX];
		snprintf(why, sizeof(why), "restore on %s by hand failed: %s", this_host(), cxlcr_last_error());
		recovery_mark_failed(pool, arena, why, false);
		cxlcr_error("%s", why);
	}
	cxlcr_host_fence_unguard(pool, &guard);
	return got;
}

/* The service's arena: live, or quarantined by a restore of it (the
 * winner's, or one by hand) that died half-way and was not replaced since,
 * which the restore takes up again (restore_recovered()); or replaced by a
 * fresh arena here that such a restore committed and no restore took over
 * (the quarantined one then: restore_guarded() undoes the fresh one). */
static bool service_arena(struct cxlcr_pool *pool, const char *name, struct cxlcr_region *arena)
{
	return recovery_left_made(pool, name, arena) || cxlcr_region_find(pool, CXLCR_KIND_ARENA, name, arena) ||
	       (cxlcr_region_find(pool, CXLCR_KIND_QUARANTINE, name, arena) && !recovery_replaced(pool, arena));
}

/* 0 restored (the caller reports), NOT_OURS (no service of another host:
 * cmd_restore's), or the exit status after one line. */
#define NOT_OURS (-1)
static int restore_elsewhere(const struct verb_args *a, double *ms, char *point, size_t len, char *from,
			     pid_t *pid)
{
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	struct cxlcr_region arena;
	if (!service_arena(&pool, a->name, &arena) || !strncmp(arena.owner_host, this_host(), CXLCR_HOST_MAX)) {
		cxlcr_pool_close(&pool);
		return NOT_OURS;
	}
	cxlcr_copy_field(from, CXLCR_HOST_MAX + 1, arena.owner_host);
	uint32_t index = 0;
	uint64_t fence = 0;
	char why[CXLCR_ERROR_MAX];
	struct service s;
	struct verb_lease l = { 0 };
	if (dead_owner(&pool, a->name, from, &index, &fence, why, sizeof(why))) {
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "restore of %s from its recovery point: %s", a->name, why);
	}
	service_load(&pool, &arena, &s);
	if ((rc = verb_begin(&pool, &s, "restore", a->lease, &l))) {
		cxlcr_pool_close(&pool);
		return rc;
	}
	/* The recovery is reopened only now: a host that came back and
	 * acknowledged meanwhile has its service back, and one that frees
	 * its quarantined regions does so before this or after we are done.
	 * Reopened in this process's name (its host, its pid and start): if
	 * we end before we mark it done, our daemon's next tick does; if our
	 * host dies, the others take the recovery over (pod/liveness.c). */
	uint64_t incarnation, start = 0;
	int me = cxlcr_host_lookup(&pool, this_host(), &incarnation);
	if (me < 0) {
		verb_lease_release(&l);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "restore of %s from its recovery point: this host (%s) is not running in the pod "
			    "(its daemon stopped or left): restore it on a host that is", a->name, this_host());
	}
	uint64_t by_hand = 0;
	if (!cxlcr_process_start(getpid(), &start) ||
	    cxlcr_host_fence_reopen(&pool, index, fence, by_hand = cxlcr_fence_by_hand((uint32_t)me, getpid(), start)) !=
		    1) {
		verb_lease_release(&l);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "restore of %s from its recovery point: host %s acknowledged its fence or was "
			    "fenced again meanwhile: try again", a->name, from);
	}
	uint64_t t0 = cxlcr_mono_ns();
	int got = restore_guarded(&pool, &arena, index, fence, by_hand, point, len, pid);
	*ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	if (got < 0)
		cxlcr_copy_field(why, sizeof(why), cxlcr_last_error());
	/* Done again (unless another host took the recovery over: then it
	 * is that host's to finish; the word is compared under the lock). */
	cxlcr_host_fence_done(&pool, index, fence);
	verb_lease_release(&l);
	cxlcr_pool_close(&pool);
	if (got < 0)
		return fail(EXIT_FAIL, "%s", why);
	return 0;
}

int cmd_restore_verb(int argc, char **argv)
{
	struct verb_args a;
	int code;
	if (!parse_verb_args(argc, argv, usage, true, "host", &a, &code))
		return code;
	if (!a.recovery_point || !cli_host || a.lease) {
		optind = 0;
		return cmd_restore(argc, argv);
	}
	double ms = 0;
	char point[CXLCR_NAME_MAX + 1] = "", from[CXLCR_HOST_MAX + 1] = "";
	pid_t pid = 0;
	code = restore_elsewhere(&a, &ms, point, sizeof(point), from, &pid);
	if (code == NOT_OURS) {
		optind = 0;
		return cmd_restore(argc, argv);
	}
	if (code || (a.quiet && !a.json))
		return code;
	if (a.json) {
		struct json j;
		json_restore_begin(&j, a.name, pid);
		json_str(&j, "recovery_point", point);
		json_str(&j, "from_host", from);
		json_double(&j, "restore_ms", ms);
		json_end(&j);
	} else {
		printf("%s restored on %s from recovery point %s (its host %s is dead): pid %d, %.1f ms\n", a.name,
		       this_host(), point, from, (int)pid, ms);
	}
	return EXIT_OK;
}
