/*
 * What a recovery on this host that ended half-way left made: its process
 * was killed, crashed or ran past its deadline while its host lives, and
 * its daemon runs it again (recovery/takeover.c), or an operator restores
 * by hand (restore_elsewhere.c). Whatever it made is undone first, so that
 * the run that follows recovers those services afresh:
 *
 *   - regions it was still making (CXLCR_KIND_MAKING, of this host and of
 *     that process): freed. Nobody else ever would while this host lives
 *     (its fence's clean-up frees them only once it has been fenced);
 *   - a fresh arena it committed for a service of the dead host being
 *     recovered, that no restore ever took over (owned by nobody, its
 *     owner epoch as it was born): its extents freed, the old arena it
 *     replaced marked not recovered again (so that the run lists it once
 *     more), then the arena itself freed. In that order, so that a sweep
 *     that dies half-way leaves what the next one finishes.
 *
 * Only the process that holds the dead host's recovery now may undo a
 * fresh arena of it (the winner's run under its fence, not done; a restore
 * by hand once it has reopened it), and only while the old arena it
 * replaced is still quarantined: otherwise that recovery is over, and the
 * fresh arena is the service's only heap. Nothing of a dead run may still
 * be in use: a region is let go only when no process of this host maps it
 * (a restore's CRIU, and the tasks it held stopped, end with their keeper,
 * daemon/exec.c, a moment after the run's process), a region being made
 * only once its maker has ended, and a committed arena only under its
 * service's lease, which a live verb would hold.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "../common/arena.h"
#include "../common/util.h"
#include "../control/lease.h"
#include "../daemon/cli.h"
#include "recovery.h"

/* Whether a process of this host maps any of region r. */
static bool mapped_here(struct cxlcr_pool *pool, const struct cxlcr_region *r)
{
	struct stat st;
	return fstat(pool->fd, &st) < 0 || cxlcr_file_range_mapped(st.st_dev, st.st_ino, r->offset, r->offset + r->size);
}

static bool of_this_host(const struct cxlcr_region *r)
{
	return r->state == CXLCR_REGION_LIVE && !strncmp(r->owner_host, this_host(), CXLCR_HOST_MAX);
}

/* The regions being made here whose maker has ended (and that nothing
 * maps): freed; how many. */
static uint32_t free_made(struct cxlcr_pool *pool)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (of_this_host(&r) && r.kind == CXLCR_KIND_MAKING && cxlcr_region_owner_gone(&r, this_host()) &&
		    !mapped_here(pool, &r) && cxlcr_region_free(pool, r.generation) == 0)
			n++;
	}
	return n;
}

/* Is g a fresh arena a recovery here committed from a point of a service
 * of a dead host (into dead, its name), and no restore ever took over? */
static bool never_taken(struct cxlcr_pool *pool, const struct cxlcr_region *g, char dead[CXLCR_HOST_MAX + 1])
{
	if (!of_this_host(g) || g->kind != CXLCR_KIND_ARENA || g->owner_pid != 0 || g->owner_epoch != CXLCR_EPOCH_BORN)
		return false;
	struct cxlcr_arena_header *h = recovery_arena_header(pool, g);
	if (!h)
		return false;
	cxlcr_copy_field(dead, CXLCR_HOST_MAX + 1, h->recovered_from_host);
	bool yes = h->restored_from && dead[0] && strcmp(dead, this_host()) &&
		   !strncmp(h->recovered_on_host, this_host(), CXLCR_HOST_MAX);
	munmap(h, sizeof(*h));
	return yes;
}

/* The quarantined arena of dead_host that g was made for, if it is still
 * there (*q): it names g as its replacement (the commit marks it so in
 * the same hold of the lock), or none (an undo took its mark back and its
 * maker died before it freed g; or its maker was killed inside the
 * commit's hold, after g's kind changed and before the marks). A
 * quarantined arena names no other live arena of g's name:
 * there is only one. */
static bool replaced_by(struct cxlcr_pool *pool, const struct cxlcr_region *g, const char *dead_host,
			struct cxlcr_region *q)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		cxlcr_region_slot(pool, i, q);
		if (q->state != CXLCR_REGION_LIVE || q->kind != CXLCR_KIND_QUARANTINE ||
		    strncmp(q->name, g->name, CXLCR_NAME_MAX) || strncmp(q->owner_host, dead_host, CXLCR_HOST_MAX))
			continue;
		struct cxlcr_arena_header *h = recovery_arena_header(pool, q);
		if (!h)
			continue;
		uint64_t into = __atomic_load_n(&h->recovered_into, __ATOMIC_ACQUIRE);
		munmap(h, sizeof(*h));
		if (into == g->generation || into == 0)
			return true;
	}
	return false;
}

/* Whether g (never_taken) was made for a service of dead_host that is
 * still to recover (*q: its quarantined arena). */
static bool left_for(struct cxlcr_pool *pool, const struct cxlcr_region *g, const char *dead_host,
		     struct cxlcr_region *q)
{
	char dead[CXLCR_HOST_MAX + 1];
	return never_taken(pool, g, dead) && !strcmp(dead, dead_host) && replaced_by(pool, g, dead_host, q);
}

/* Undoes fresh arena g (left_for dead_host) under its lease: 0, or -1 if
 * a live verb holds it, something here maps it, or a step failed (left
 * for the next sweep). */
static int undo_committed(struct cxlcr_pool *pool, const struct cxlcr_region *g, const char *dead_host)
{
	struct verb_lease l = { 0 };
	if (verb_lease_take(pool, g, "recover", NULL, &l) < 0)
		return -1;
	int rc = -1;
	struct cxlcr_region now, q;
	if (cxlcr_region_get(pool, g->generation, &now) < 0 || !left_for(pool, &now, dead_host, &q) ||
	    mapped_here(pool, &now))
		goto out;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region e;
		cxlcr_region_slot(pool, i, &e);
		if (of_this_host(&e) && e.kind == CXLCR_KIND_EXTENT && cxlcr_extent_of(e.name, g->name) &&
		    (mapped_here(pool, &e) || cxlcr_region_free(pool, e.generation) < 0))
			goto out;
	}
	if (recovery_mark_recovered(pool, &q, 0) == 0)
		rc = cxlcr_region_free(pool, g->generation);
out:
	verb_lease_release(&l);
	return rc;
}

bool recovery_left_made(struct cxlcr_pool *pool, const char *name, struct cxlcr_region *old)
{
	struct cxlcr_region g;
	char dead[CXLCR_HOST_MAX + 1];
	return cxlcr_region_find(pool, CXLCR_KIND_ARENA, name, &g) && never_taken(pool, &g, dead) &&
	       replaced_by(pool, &g, dead, old);
}

int recovery_sweep_ended_runs(struct cxlcr_pool *pool, const char *dead_host, struct recovery_sweep *out)
{
	*out = (struct recovery_sweep){ .made_freed = free_made(pool) };
	for (uint32_t i = 0; i < CXLCR_REGION_MAX && dead_host; i++) {
		struct cxlcr_region g, q;
		cxlcr_region_slot(pool, i, &g);
		if (!left_for(pool, &g, dead_host, &q))
			continue; /* (no old arena left to recover: the service's only heap) */
		if (undo_committed(pool, &g, dead_host) == 0)
			out->undone++;
		else
			out->left++;
	}
	return (int)(out->made_freed + out->undone);
}
