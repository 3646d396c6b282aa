/*
 * cxlcr pool check [--json]: the pool's shared metadata, checked for what
 * must hold once nothing is under way (a stress test's end, after a fault):
 *
 *   region table  every entry FREE or LIVE (an entry left STAGING,
 *                 ABANDONED or FREEING keeps its space: a leak); every live
 *                 region aligned and inside the data area; no two regions
 *                 that take space overlap; no two live regions of one kind
 *                 and name (but quarantined ones); no entry left mid-rewrite (odd seq); every
 *                 extent's arena alive; every snapshot region named by the
 *                 catalog (else nobody will ever free it);
 *   catalog       every entry FREE, PUBLISHED or TOMBSTONE (WRITING and
 *                 FREEING are half done); its snapshot a live snapshot
 *                 region, named by no other entry; no tombstone without a
 *                 reference (it should have been freed); no borrow slot
 *                 claimed without a reference. (A name may be published
 *                 twice: a replace publishes before it retires.)
 *
 * Each problem is one line (or an element of "problems"); exit status 1 if
 * there is any. It reads without the lock, through stable copies, so it
 * can run beside the pool's users, but only a quiet pool must pass.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../common/arena.h"
#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/util.h"
#include "../control/lease.h"
#include "../recovery/recovery.h"
#include "cli.h"
#include "json.h"

#define PROBLEMS_MAX 64

struct check {
	char problems[PROBLEMS_MAX][CXLCR_ERROR_MAX];
	unsigned count;
	unsigned regions, snapshots, catalog_entries, borrows, holds, published;
	uint64_t region_bytes;
	uint32_t quarantined;     /* regions of fenced hosts, kept until they acknowledge */
	char quarantine[PROBLEMS_MAX][CXLCR_NAME_MAX + CXLCR_HOST_MAX + 40]; /* "NAME of HOST[ (being made ...)]" */
	/* The quarantined arenas, with what their headers say became of them
	 * (recovery/marks.c): the question after a recovery that went wrong. */
	unsigned arenas;
	struct quarantined_arena {
		unsigned region;          /* its index in quarantine[] */
		uint64_t generation;
		uint64_t recovered_into;  /* 0: not replaced; CXLCR_RECOVERY_MAKING: itself half made */
		bool given_up;            /* lost or failed */
	} arena[PROBLEMS_MAX];
};

static void problem(struct check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct check *c, const char *fmt, ...)
{
	if (c->count < PROBLEMS_MAX) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->problems[c->count], sizeof(c->problems[0]), fmt, ap);
		va_end(ap);
	}
	c->count++;
}

static const char *state_name(uint32_t s)
{
	static const char *const names[] = { "FREE", "LIVE", "STAGING", "ABANDONED", "FREEING" };
	return s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

static int by_offset(const void *a, const void *b)
{
	const struct cxlcr_region *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static bool live_region(const struct cxlcr_region *t, uint32_t kind, const char *name)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++)
		if (t[i].state == CXLCR_REGION_LIVE && t[i].kind == kind && !strncmp(t[i].name, name, CXLCR_NAME_MAX))
			return true;
	return false;
}

/* A quarantined region that is an arena (its own header): its recovery
 * marks, for the report. */
static void note_arena(struct cxlcr_pool *pool, const struct cxlcr_region *r, struct check *c)
{
	struct cxlcr_arena_header *h = recovery_arena_header(pool, r);
	if (!h)
		return;
	c->arena[c->arenas++] = (struct quarantined_arena){
		.region = c->quarantined,
		.generation = r->generation,
		.recovered_into = __atomic_load_n(&h->recovered_into, __ATOMIC_ACQUIRE),
		.given_up = __atomic_load_n(&h->lost, __ATOMIC_ACQUIRE) || __atomic_load_n(&h->failed, __ATOMIC_ACQUIRE),
	};
	munmap(h, sizeof(*h));
}

static void check_table(struct cxlcr_pool *pool, const struct cxlcr_region *t, struct check *c)
{
	static struct cxlcr_region taken[CXLCR_REGION_MAX];
	size_t n = 0;
	uint64_t end = pool->sb->size;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		const struct cxlcr_region *r = &t[i];
		if (r->seq & 1)
			problem(c, "region entry %u (%.64s) was left mid-rewrite (seq %u)", i, r->name, r->seq);
		if (r->state == CXLCR_REGION_FREE)
			continue;
		if (r->state != CXLCR_REGION_LIVE)
			problem(c, "region entry %u (%.64s) is left %s: its %llu bytes stay taken", i, r->name,
				state_name(r->state), (unsigned long long)r->size);
		else {
			c->regions++;
			c->region_bytes += r->size;
			if (cxlcr_kind_held_back(r->kind) && c->quarantined < PROBLEMS_MAX)
				snprintf(c->quarantine[c->quarantined], sizeof(c->quarantine[0]), "%.*s of %.*s%s",
					 (int)CXLCR_NAME_MAX, r->name, (int)CXLCR_HOST_MAX, r->owner_host,
					 r->kind == CXLCR_KIND_MAKING ? " (being made by a recovery)" : "");
			if (r->kind == CXLCR_KIND_QUARANTINE && c->quarantined < PROBLEMS_MAX)
				note_arena(pool, r, c);
			c->quarantined += cxlcr_kind_held_back(r->kind);
		}
		if (r->offset % CXLCR_POOL_ALIGN || r->offset < CXLCR_DATA_OFFSET || r->size == 0 ||
		    r->offset > end || r->size > end - r->offset)
			problem(c, "region %.64s lies at %llu+%llu, outside the data area [%llu, %llu) or unaligned",
				r->name, (unsigned long long)r->offset, (unsigned long long)r->size,
				(unsigned long long)CXLCR_DATA_OFFSET, (unsigned long long)end);
		taken[n++] = *r;
		if (r->state != CXLCR_REGION_LIVE)
			continue;
		for (uint32_t k = i + 1; k < CXLCR_REGION_MAX; k++)
			if (t[k].state == CXLCR_REGION_LIVE && t[k].kind == r->kind && !cxlcr_kind_held_back(r->kind) &&
			    !strncmp(t[k].name, r->name, CXLCR_NAME_MAX))
				problem(c, "two live regions of kind %u are called %.64s (entries %u and %u)", r->kind,
					r->name, i, k);
		if (r->kind == CXLCR_KIND_EXTENT) {
			char arena[CXLCR_NAME_MAX];
			if (!cxlcr_extent_arena(r->name, arena, sizeof(arena)) ||
			    !live_region(t, CXLCR_KIND_ARENA, arena))
				problem(c, "extent %.64s belongs to no live arena: leaked", r->name);
		}
	}
	qsort(taken, n, sizeof(taken[0]), by_offset);
	for (size_t i = 1; i < n; i++)
		if (taken[i - 1].offset + taken[i - 1].size > taken[i].offset)
			problem(c, "regions %.64s (%llu+%llu) and %.64s (%llu+%llu) overlap", taken[i - 1].name,
				(unsigned long long)taken[i - 1].offset, (unsigned long long)taken[i - 1].size,
				taken[i].name, (unsigned long long)taken[i].offset, (unsigned long long)taken[i].size);
}

/* A snapshot region no catalog entry names yet, of a service a live verb
 * works on (SERVICE.sNNN: a snapshot, a fork's or a recovery point being
 * taken), is in progress, not leaked. */
static bool in_progress(struct cxlcr_pool *pool, const struct cxlcr_region *snap)
{
	char service[CXLCR_NAME_MAX];
	cxlcr_copy_field(service, sizeof(service), snap->name);
	char *dot = strrchr(service, '.');
	if (!dot || dot[1] != 's')
		return false;
	*dot = 0;
	struct cxlcr_region arena;
	return cxlcr_region_find(pool, CXLCR_KIND_ARENA, service, &arena) && verb_lease_held(pool, &arena);
}

/*
 * A catalog entry seen half published (WRITING: its publisher fills it in
 * under the pool lock) or half freed (FREEING) is looked at again, 50 times
 * 1 ms apart at most: a check beside recovery points every 50 ms saw one
 * in between now and then (t_recovery_points: "catalog entry 5 (rp) is
 * left half published"), which is no leak. Whether it is still so, in the
 * same generation: one a dead writer left stays so, and is reported. (Not
 * in read_view(): a wait there lets the region table move on, and the
 * whole view is read again.)
 */
static bool still_midway(struct cxlcr_pool *pool, const struct cxlcr_catalog_info *seen)
{
	for (int look = 0; look < 50; look++) {
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
		struct cxlcr_catalog_info now;
		if (cxlcr_catalog_entry(pool, seen->index, &now) < 0)
			return true;
		if (now.state != seen->state || now.generation != seen->generation)
			return false;
	}
	return true;
}

static void check_catalog(struct cxlcr_pool *pool, const struct cxlcr_region *t, const struct cxlcr_catalog_info *e,
			  const bool *busy, struct check *c)
{
	static bool named[CXLCR_REGION_MAX];
	memset(named, 0, sizeof(named));
	for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES; i++) {
		const struct cxlcr_catalog_info *x = &e[i];
		if (x->state == CXLCR_CATALOG_FREE)
			continue;
		c->catalog_entries++;
		/* Snapshots holding their bases (incremental) are not borrowers. */
		c->borrows += x->refcount - x->holds;
		c->holds += x->holds;
		c->published += x->state == CXLCR_CATALOG_PUBLISHED;
		if (x->holds_orphaned)
			problem(c, "catalog entry %u (%.64s) is held by %u snapshot region(s) that are gone", i, x->name,
				x->holds_orphaned);
		if (x->state != CXLCR_CATALOG_PUBLISHED && x->state != CXLCR_CATALOG_TOMBSTONE) {
			if (still_midway(pool, x))
				problem(c, "catalog entry %u (%.64s) is left half %s", i, x->name,
					x->state == CXLCR_CATALOG_WRITING ? "published" : "freed");
			continue;
		}
		if (x->state == CXLCR_CATALOG_TOMBSTONE && x->refcount == 0)
			problem(c, "catalog entry %u (%.64s) is a tombstone nobody holds: its snapshot was never freed",
				i, x->name);
		if (x->slots_claimed > x->refcount)
			problem(c, "catalog entry %u (%.64s) has %u borrow slot(s) claimed and %u reference(s)", i,
				x->name, x->slots_claimed, x->refcount);
		bool found = false;
		for (uint32_t k = 0; k < CXLCR_REGION_MAX && !found; k++) {
			if (t[k].state == CXLCR_REGION_LIVE && t[k].generation == x->snapshot_generation) {
				found = true;
				if (t[k].kind != CXLCR_KIND_SNAPSHOT)
					problem(c, "catalog entry %u (%.64s) names region %.64s, which is no snapshot", i,
						x->name, t[k].name);
				else if (named[k])
					problem(c, "snapshot %.64s is named by two catalog entries", t[k].name);
				named[k] = true;
			}
		}
		if (!found)
			problem(c, "catalog entry %u (%.64s) names snapshot region %llu, which is gone", i, x->name,
				(unsigned long long)x->snapshot_generation);
		/* Two published entries of one name are no problem: a replace
		 * publishes the new one before it retires the old one, and one
		 * that died in between leaves both, the newer being the name's
		 * (pool_format.h); the next replace retires the older. */
	}
	for (uint32_t k = 0; k < CXLCR_REGION_MAX; k++) {
		if (t[k].state != CXLCR_REGION_LIVE || t[k].kind != CXLCR_KIND_SNAPSHOT)
			continue;
		c->snapshots++;
		if (!named[k] && !busy[k])
			problem(c, "snapshot region %.64s (%llu bytes) is named by no catalog entry: leaked", t[k].name,
				(unsigned long long)t[k].size);
	}
}

/*
 * One view of the region table, the catalog and the verbs under way, as
 * of one instant. Each is read through stable copies, but not all at
 * once: a recovery point published (or its predecessor freed) between the
 * reads showed a snapshot region that no catalog entry named, as a leak
 * beside a busy but healthy pool. So the table is read before and after
 * the catalog, and the view kept only when the two agree; and whether a
 * snapshot's service has a verb under way (busy[k]) is read between the
 * first table read and the catalog: a snapshot being made then was begun
 * under its service's lease before that read and is published after the
 * catalog was read, so its lease is seen held. Read after the catalog,
 * that lease could be gone already, with the snapshot published too late
 * for the catalog read. Returns -1 (with the problem recorded) if the
 * catalog cannot be read or the pool never held still.
 */
/*
 * One catalog entry, read until no borrow slot of it is claimed without its
 * reference (or 50 looks, 1 ms apart, have passed). A borrow claims its
 * slot, then takes the reference; a return drops the reference, then
 * frees the slot: each is a few stores apart, and a check beside a busy
 * service (recovery points every 50 ms, their bases' holds taken back as
 * they retire) saw one in between now and then, which is no leak. A slot
 * whose claimer died between the two stays so, and is reported.
 */
static int read_entry_settled(struct cxlcr_pool *pool, uint32_t i, struct cxlcr_catalog_info *e, struct check *c)
{
	for (int look = 0;; look++) {
		if (cxlcr_catalog_entry(pool, i, e) < 0) {
			problem(c, "catalog entry %u cannot be read: %s", i, cxlcr_last_error());
			return -1;
		}
		if (e->slots_claimed <= e->refcount || look == 50)
			return 0;
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
}

static int read_view(struct cxlcr_pool *pool, struct cxlcr_region *table, struct cxlcr_catalog_info *e, bool *busy,
		     struct check *c)
{
	static struct cxlcr_region again[CXLCR_REGION_MAX];
	for (int attempt = 0; attempt < 1000; attempt++) {
		for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++)
			cxlcr_region_slot(pool, i, &table[i]);
		for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++)
			busy[i] = table[i].state == CXLCR_REGION_LIVE && table[i].kind == CXLCR_KIND_SNAPSHOT &&
				  in_progress(pool, &table[i]);
		for (uint32_t i = 0; i < CXLCR_CATALOG_ENTRIES; i++)
			if (read_entry_settled(pool, i, &e[i], c) < 0)
				return -1;
		for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++)
			cxlcr_region_slot(pool, i, &again[i]);
		if (!memcmp(table, again, sizeof(again)))
			return 0;
	}
	problem(c, "the region table changed under every one of 1000 reads of the catalog");
	return -1;
}

int pool_check(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 2 || (argc > 1 && !json)) {
		printf("usage: cxlcr pool check [--json]\n");
		return argc > 1 && !strcmp(argv[1], "--help") ? EXIT_OK : EXIT_USAGE;
	}
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	static struct cxlcr_region table[CXLCR_REGION_MAX];
	static struct cxlcr_catalog_info entries[CXLCR_CATALOG_ENTRIES];
	static bool busy[CXLCR_REGION_MAX];
	static struct check c;
	memset(&c, 0, sizeof(c));
	if (read_view(&pool, table, entries, busy, &c) == 0) {
		check_table(&pool, table, &c);
		check_catalog(&pool, table, entries, busy, &c);
	}
	/* Who holds the pool lock, if anyone: an operator's first question
	 * when verbs wait. Held is not a problem (work under way). */
	char holder[CXLCR_HOST_MAX + 1];
	uint64_t takeovers;
	bool held = cxlcr_pool_lock_holder(&pool, holder, sizeof(holder), &takeovers) == 1;
	cxlcr_pool_close(&pool);
	unsigned shown = c.count < PROBLEMS_MAX ? c.count : PROBLEMS_MAX;
	if (json) {
		struct json j;
		json_begin(&j, stdout);
		json_bool(&j, "ok", c.count == 0);
		json_u64(&j, "regions", c.regions);
		json_u64(&j, "region_bytes", c.region_bytes);
		json_u64(&j, "quarantined", c.quarantined);
		json_array_begin(&j, "quarantined_regions");
		for (unsigned i = 0; i < c.quarantined && i < PROBLEMS_MAX; i++)
			json_str(&j, NULL, c.quarantine[i]);
		json_array_end(&j);
		json_array_begin(&j, "quarantined_arenas");
		for (unsigned i = 0; i < c.arenas; i++) {
			const struct quarantined_arena *a = &c.arena[i];
			json_object_begin(&j, NULL);
			json_str(&j, "region", c.quarantine[a->region]);
			json_u64(&j, "generation", a->generation);
			if (a->recovered_into && a->recovered_into != CXLCR_RECOVERY_MAKING)
				json_u64(&j, "recovered_into", a->recovered_into);
			else
				json_null_value(&j, "recovered_into");
			json_bool(&j, "half_made", a->recovered_into == CXLCR_RECOVERY_MAKING);
			json_bool(&j, "given_up", a->given_up);
			json_object_end(&j);
		}
		json_array_end(&j);
		json_u64(&j, "snapshots", c.snapshots);
		json_u64(&j, "catalog_entries", c.catalog_entries);
		json_u64(&j, "borrows", c.borrows);
		json_u64(&j, "holds", c.holds);
		json_u64(&j, "published", c.published);
		json_bool(&j, "lock_held", held);
		json_str(&j, "lock_holder_host", holder);
		json_u64(&j, "lock_takeovers", takeovers);
		json_u64(&j, "problem_count", c.count);
		json_array_begin(&j, "problems");
		for (unsigned i = 0; i < shown; i++)
			json_str(&j, NULL, c.problems[i]);
		json_array_end(&j);
		json_end(&j);
	} else {
		for (unsigned i = 0; i < shown; i++)
			printf("problem: %s\n", c.problems[i]);
		if (c.count > shown)
			printf("problem: ... and %u more\n", c.count - shown);
		if (held)
			printf("pool lock: held by %s%s (taken from a holder %llu time%s so far)\n",
			       holder[0] ? "a process of host " : "a process of no host", holder,
			       (unsigned long long)takeovers, takeovers == 1 ? "" : "s");
		printf("%s: %u live region(s) (%llu bytes), %u snapshot(s), %u catalog entr%s, %u borrow(s)\n",
		       c.count ? "pool check failed" : "pool check passed", c.regions,
		       (unsigned long long)c.region_bytes, c.snapshots, c.catalog_entries,
		       c.catalog_entries == 1 ? "y" : "ies", c.borrows);
	}
	return c.count ? EXIT_FAIL : EXIT_OK;
}
