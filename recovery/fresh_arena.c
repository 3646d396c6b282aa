/*
 * A dead host's service, made again from its newest recovery point in a
 * fresh arena (recovery/takeover.c restores the point's dump into it).
 *
 * The dead host may only be frozen or cut off, and its service may write
 * its arena again when it wakes. So its arena and extents are quarantined
 * (region kind CXLCR_KIND_QUARANTINE: never handed to anyone, not freed
 * until that host acknowledges its fence), and new regions of the same
 * names and sizes get the point's pages: the arena header as the snapshot
 * keeps it (its extent table pointing at the new regions), and every page
 * of the heap the snapshot stores. The heap's address is the same, so
 * nothing in the process image moves but the pool offsets it maps
 * (rebase/relocate.c rewrites those).
 *
 * The recovery that makes it may die too (its host with it), or be taken
 * over by another host (recovery/takeover.c): so the new regions are born
 * CXLCR_KIND_MAKING, of this host and of the process making them, and
 * become an arena and its extents only at the end, in one step that the
 * recovery's fence guards. One left half made is never handed to
 * anyone. If this host died, it is freed with this host's quarantine once
 * this host acknowledges its own fence, and the recovery that takes over
 * starts again from the old arena, quarantined already. If only the
 * process making it died, the next recovery on this host frees it first
 * (recovery_sweep_ended_runs(), ended_runs.c), and undoes an arena it
 * committed that no restore took over.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/arena.h"
#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/persist.h"
#include "../common/snapshot.h"
#include "../common/util.h"
#include "../daemon/cli.h"
#include "recovery.h"

static int quarantine(struct cxlcr_pool *pool, const struct cxlcr_region *r, struct recovery_fresh *u)
{
	if (cxlcr_region_set_kind(pool, r->generation, r->kind, CXLCR_KIND_QUARANTINE) < 0)
		return -1;
	u->quarantined[u->nq] = r->generation;
	u->kinds[u->nq++] = r->kind;
	return 0;
}

/* Is snapshot region generation named by an entry of the catalog? */
static bool in_catalog(struct cxlcr_pool *pool, uint64_t generation)
{
	static uint64_t named[CXLCR_CATALOG_ENTRIES];
	int n = cxlcr_catalog_snapshots(pool, named, CXLCR_CATALOG_ENTRIES);
	if (n < 0)
		return true; /* unreadable: leave it be */
	for (int i = 0; i < n; i++)
		if (named[i] == generation)
			return true;
	return false;
}

/*
 * The snapshots of the service that no catalog entry names: a recovery
 * point (or a fork's snapshot) the dead host was taking when it died,
 * torn. Nobody would ever free one (its worker is gone, and the next
 * snapshot that drops strays is the recovered service's, much later),
 * and freeing it now is not safe either: a host that was only frozen
 * could wake with that worker still copying into it, into space by then
 * handed to someone else. So it is quarantined with the arena, as the
 * dead host's (freed when that host acknowledges its fence, takeover.c),
 * which also keeps it out of the catalog for good: publishing takes only
 * snapshot regions, under the pool lock. One published just before it
 * was quarantined (the catalog read, then a worker of the fenced host
 * published) is given back.
 */
static int quarantine_drafts(struct cxlcr_pool *pool, const struct cxlcr_region *arena, const char *dead_host,
			     struct recovery_fresh *u)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state != CXLCR_REGION_LIVE || r.kind != CXLCR_KIND_SNAPSHOT ||
		    !cxlcr_snapshot_named_for(r.name, arena->name) || in_catalog(pool, r.generation))
			continue;
		if (quarantine(pool, &r, u) < 0) {
			/* Freed meanwhile: the fenced host's point worker, which
			 * found its arena quarantined, dropped its draft (under
			 * load, both recoveries of t_drain_handoff failed on
			 * "region 32 is gone"). Nothing of it is left to keep. */
			struct cxlcr_region still;
			if (cxlcr_region_get(pool, r.generation, &still) < 0)
				continue;
			return -1;
		}
		if (in_catalog(pool, r.generation)) {
			cxlcr_region_set_kind(pool, r.generation, CXLCR_KIND_QUARANTINE, CXLCR_KIND_SNAPSHOT);
			u->nq--;
			continue;
		}
		cxlcr_region_set_owner(pool, r.generation, 0, dead_host, NULL);
		cxlcr_catalog_release_region_holds(pool, &r); /* a reaper would too */
	}
	return 0;
}

/* Quarantines the arena, then every extent of it (those it grew by after
 * the point too), then its torn snapshots. The arena's change of kind is
 * the commit: of two recoveries of one service, one fails here. An arena
 * quarantined already (by a recovery that was taken over) is the old one
 * still: only what of it is not yet is quarantined (and an undo gives it
 * back as an arena, like one this recovery quarantined). */
static int quarantine_all(struct cxlcr_pool *pool, const struct cxlcr_region *arena, const char *dead_host,
			  struct recovery_fresh *u)
{
	if (arena->kind == CXLCR_KIND_QUARANTINE) { /* an undo makes it an arena again, as it would have been */
		u->quarantined[u->nq] = arena->generation;
		u->kinds[u->nq++] = CXLCR_KIND_ARENA;
	} else if (quarantine(pool, arena, u) < 0) {
		return -1;
	}
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state == CXLCR_REGION_LIVE && r.kind == CXLCR_KIND_EXTENT && cxlcr_extent_of(r.name, arena->name) &&
		    quarantine(pool, &r, u) < 0)
			return -1;
	}
	return quarantine_drafts(pool, arena, dead_host, u);
}

/* In an order that a process killed at any step leaves to the next
 * recovery: the old arena is to be recovered again first (a fresh arena
 * left then is one ended_runs.c undoes), the new regions are freed extents
 * first, and the old ones are given back extents first (an arena is never
 * live again while its extents are still quarantined). */
void recovery_fresh_undo(struct cxlcr_pool *pool, struct recovery_fresh *f)
{
	char why[CXLCR_ERROR_MAX];
	snprintf(why, sizeof(why), "%s", cxlcr_last_error());
	/* Not marked (fenced, or no lock to be had): nothing more is undone
	 * here. The old arena still names the fresh one, which is then what
	 * the next recovery on this host undoes (ended_runs.c), or, fenced,
	 * the recovery that took this one over deals with. */
	if (recovery_mark_recovered(pool, &f->old, 0) < 0) { /* to be recovered still */
		f->n = f->nq = 0;
		cxlcr_error("%s", why);
		return;
	}
	for (size_t i = f->n; i-- > 0;)
		cxlcr_region_free(pool, f->moves[i].new_generation);
	f->n = 0;
	/* (A torn point stays quarantined, the dead host's: quarantine_drafts
	 * says why; a retry would only quarantine it again.) */
	for (size_t i = f->nq; i-- > 0;)
		if (f->kinds[i] != CXLCR_KIND_SNAPSHOT)
			cxlcr_region_set_kind(pool, f->quarantined[i], CXLCR_KIND_QUARANTINE, f->kinds[i]);
	f->nq = 0;
	cxlcr_error("%s", why);
}

/* A new region like old (name, size), being made (of this host and this
 * process) until fresh_commit() makes it of kind; its move from where the
 * point's dump has it (at: generation and offset of the point's region,
 * which old stands for) is noted in f. */
static int fresh_like(struct cxlcr_pool *pool, uint32_t kind, const struct cxlcr_region *old, uint64_t at_generation,
		      uint64_t at_offset, struct recovery_fresh *f, struct cxlcr_region *out)
{
	/* Born of this host and this process: a winner killed right after the
	 * allocation leaves it for the next recovery here, or for its fence's
	 * clean-up. */
	if (cxlcr_region_alloc_owned(pool, CXLCR_KIND_MAKING, old->name, old->size, getpid(), this_host(), old->command,
				     out) < 0)
		return -1;
	f->kinds_new[f->n] = kind;
	f->moves[f->n++] = (struct cxlcr_rebase_move){ .old_generation = at_generation,
						       .new_generation = out->generation,
						       .old_offset = at_offset,
						       .new_offset = out->offset,
						       .size = old->size };
	return 0;
}

/* The new regions become what they stand for, owned by nobody yet, the
 * arena and its extents in one guarded change, with the marks that makes
 * true (the fresh arena made, the old one replaced by it) in the same
 * hold of the lock: a recovery taken over meanwhile stops here, its
 * regions all left being made (one killed in the middle of it may leave
 * the arena made and extents not, which the next recovery on this host
 * undoes). */
static int fresh_commit(struct cxlcr_pool *pool, struct recovery_fresh *f, const struct cxlcr_region *arena,
			const struct cxlcr_region *old)
{
	uint64_t gens[CXLCR_ARENA_EXTENTS_MAX];
	for (size_t i = 0; i < f->n; i++)
		gens[i] = f->moves[i].new_generation;
	struct recovery_made m;
	if (recovery_made_begin(pool, arena, old, &m) < 0)
		return -1;
	int rc = cxlcr_region_commit_made_and(pool, f->n, gens, f->kinds_new, recovery_made_write, &m);
	recovery_made_end(&m);
	return rc;
}

/* Was the arena old made from recovery point snapshot_generation (a fresh
 * arena a recovery committed, whose host then died before the service
 * took a point of its own)? Then that point is its point too. */
static bool made_from(struct cxlcr_pool *pool, const struct cxlcr_region *old, uint64_t snapshot_generation)
{
	struct cxlcr_arena_header *h = recovery_arena_header(pool, old);
	if (!h)
		return false;
	bool yes = __atomic_load_n(&h->restored_from, __ATOMIC_ACQUIRE) == snapshot_generation;
	munmap(h, sizeof(*h));
	return yes;
}

int recovery_fresh_arena(struct cxlcr_pool *pool, const struct cxlcr_region *old, uint64_t snapshot_generation,
			 const char *dead_host, struct recovery_fresh *f)
{
	static struct cxlcr_arena_header at;
	struct cxlcr_region ext_old[CXLCR_ARENA_EXTENTS_MAX];
	struct cxlcr_snapshot s;
	memset(f, 0, sizeof(*f));
	f->old = *old;
	uint64_t t0 = cxlcr_mono_ns();
	if (cxlcr_snapshot_open(pool, snapshot_generation, &s) < 0)
		return -1;
	int rc = -1;
	struct cxlcr_arena_header *h = NULL;
	uint8_t *heap = NULL;
	struct cxlcr_heap now;
	const struct cxlcr_snapshot_header *sh = &s.header;
	const struct cxlcr_arena_header *copy = (const void *)(s.base + sh->arena_header_offset);
	cxlcr_refresh(copy, sizeof(at));
	memcpy(&at, copy, sizeof(at));
	bool ours = sh->arena_generation == old->generation || made_from(pool, old, snapshot_generation);
	if (!ours || at.magic != CXLCR_ARENA_MAGIC || at.region_generation != sh->arena_generation ||
	    !at.extent_count || at.extent_count > CXLCR_ARENA_EXTENTS_MAX ||
	    sh->arena_header_size > CXLCR_ARENA_HEAP_OFFSET) {
		cxlcr_error("recovery point %s is not of arena %s", s.region.name, old->name);
		goto out;
	}
	/* The extents the heap had at the point (later ones are not the
	 * point's: they are quarantined with the rest and never copied). */
	for (uint32_t k = 1; k < at.extent_count; k++)
		if (cxlcr_region_get(pool, at.extents[k].generation, &ext_old[k]) < 0) {
			cxlcr_error("recovery point %s: extent %u of arena %s is gone", s.region.name, k, old->name);
			goto out;
		}
	if (quarantine_all(pool, old, dead_host, f) < 0)
		goto undo;
	recovery_test_step("quarantined");
	struct cxlcr_region arena;
	/* The point's arena is old, or the one old was made from (a fresh
	 * arena committed by a recovery whose host then died): the dump maps
	 * that one, whose heap begins at the header's first extent. */
	if (fresh_like(pool, CXLCR_KIND_ARENA, old, sh->arena_generation,
		       at.extents[0].offset - CXLCR_ARENA_HEAP_OFFSET, f, &arena) < 0)
		goto undo;
	at.region_generation = arena.generation;
	at.extents[0].generation = arena.generation;
	at.extents[0].offset = arena.offset + CXLCR_ARENA_HEAP_OFFSET; /* (old may be a later copy of the point's arena) */
	for (uint32_t k = 1; k < at.extent_count; k++) {
		struct cxlcr_region ext;
		if (fresh_like(pool, CXLCR_KIND_EXTENT, &ext_old[k], ext_old[k].generation, ext_old[k].offset, f, &ext) < 0)
			goto undo;
		at.extents[k].generation = ext.generation;
		at.extents[k].offset = ext.offset + (at.extents[k].offset - ext_old[k].offset);
	}
	/* The header: the point's, in the new regions, without what belonged
	 * to the dead host's process (its tracker, its scans), marked with the
	 * point the plugin may restore into it and with where it came from. */
	h = cxlcr_pool_map(pool, arena.offset, CXLCR_ARENA_HEAP_OFFSET, 0, 0);
	if (!h)
		goto undo;
	cxlcr_refresh(copy, sh->arena_header_size);
	memcpy(h, copy, sh->arena_header_size);
	recovery_header_from_point(&at, &s, snapshot_generation, 1);
	at.recovered_into = CXLCR_RECOVERY_MAKING;
	cxlcr_copy_field(at.recovered_from_host, sizeof(at.recovered_from_host), dead_host);
	cxlcr_copy_field(at.recovered_on_host, sizeof(at.recovered_on_host), this_host());
	memcpy(h, &at, sizeof(at));
	cxlcr_publish(h, sh->arena_header_size);
	if (recovery_heap_from_point(pool, &arena, h, &s, true, &now, &heap) < 0)
		goto undo;
	recovery_test_step("copied");
	/* Its owner is nobody yet (the restore's plugin takes it over), on
	 * this host; its address is the dead service's (nobody else may have
	 * it: the quarantined arena is no service any more). */
	uint32_t ip = 0;
	if (fresh_commit(pool, f, &arena, old) < 0)
		goto undo;
	if ((old->service_ip &&
	     (cxlcr_region_assign_net(pool, arena.generation, ntohl(old->service_ip), 1, "", &ip) < 0 ||
	      htonl(ip) != old->service_ip)) ||
	    cxlcr_region_get(pool, arena.generation, &f->arena) < 0) {
		goto undo;
	}
	rc = 0;
	f->ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	goto out;
undo:
	recovery_fresh_undo(pool, f);
out:
	recovery_point_done(&s, h, &now, heap);
	return rc;
}
