/*
 * cxlcr snapshot NAME: the parent's side of remote fork (fork.h).
 *
 * Runs in the daemon of the service's host. CRIU dumps the service with its
 * tasks left running; while it holds them frozen, the cxlcr plugin copies
 * the arena's non-zero pages into a new snapshot region (criu-plugin/fork.c),
 * so that the dump and the heap are of one instant. The dump is published in
 * the pool's image store under the snapshot's name, and the snapshot in the
 * catalog under the service's name, replacing the previous one: that one is
 * tombstoned and freed when its last child returns it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/snapshot.h"
#include "../common/util.h"
#include "../control/fence.h"
#include "../recovery/recovery.h"
#include "../tracking/track.h"
#include "cli.h"
#include "container.h"
#include "criu.h"
#include "fork.h"
#include "image_store.h"

/* How long a tiered snapshot watches the service's hot set by default. */
#define HOT_WINDOW_MS 1000

/* What the plugin wrote about the snapshot it took (CXLCR_SNAPSHOT_INFO_FILE). */
static int read_snapshot_info(const char *dir, struct snapshot_result *r)
{
	char path[PATH_MAX + 32], key[32];
	unsigned long long v;
	snprintf(path, sizeof(path), "%s/%s", dir, CXLCR_SNAPSHOT_INFO_FILE);
	FILE *f = fopen(path, "re");
	if (!f) {
		/* The plugin takes it beside CRIU's dump, which can end well
		 * without it: then it says why in a line of its own. */
		int missing = errno;
		char why[CXLCR_ERROR_MAX] = "";
		snprintf(path, sizeof(path), "%s/%s", dir, CXLCR_SNAPSHOT_ERROR_FILE);
		FILE *e = fopen(path, "re");
		if (e && fgets(why, sizeof(why), e))
			why[strcspn(why, "\n")] = 0;
		if (e)
			fclose(e);
		if (why[0])
			return cxlcr_error("%s", why);
		return cxlcr_error("the dump took no snapshot (%s/%s: %s)", dir, CXLCR_SNAPSHOT_INFO_FILE,
				   strerror(missing));
	}
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "untracked_because ", 18)) {
			line[strcspn(line, "\n")] = 0;
			cxlcr_copy_field(r->untracked_because, sizeof(r->untracked_because), line + 18);
			continue;
		}
		if (sscanf(line, "%31s %llu", key, &v) != 2)
			continue;
		if (!strcmp(key, "generation"))
			r->generation = v;
		else if (!strcmp(key, "pages_cxl"))
			r->pages_cxl = v;
		else if (!strcmp(key, "pages_zero"))
			r->pages_zero = v;
		else if (!strcmp(key, "pages_own"))
			r->pages_own = v;
		else if (!strcmp(key, "bases"))
			r->bases = (uint32_t)v;
		else if (!strcmp(key, "pages_refreshed"))
			r->pages_refreshed = v;
		else if (!strcmp(key, "pages_written"))
			r->pages_written = v;
		else if (!strcmp(key, "punches_logged"))
			r->punches_logged = (uint32_t)v;
		else if (!strcmp(key, "tracked"))
			r->tracked = v != 0;
		else if (!strcmp(key, "total_ns"))
			r->snapshot_ms = (double)v / 1e6;
		else if (!strcmp(key, "scan_ns"))
			r->open_ms = (double)v / 1e6;
		else if (!strcmp(key, "written_ns"))
			r->written_ms = (double)v / 1e6;
		else if (!strcmp(key, "holes_ns"))
			r->holes_ms = (double)v / 1e6;
		else if (!strcmp(key, "publish_ns"))
			r->publish_ms = (double)v / 1e6;
		else if (!strcmp(key, "beside_ns"))
			r->beside_ms = (double)v / 1e6;
		else if (!strcmp(key, "waited_ns"))
			r->waited_ms = (double)v / 1e6;
	}
	fclose(f);
	return r->generation ? 0 : cxlcr_error("%s names no snapshot", path);
}

/* Writes the list of heap pages that changed since the service's previous
 * snapshot into the dump (CXLCR_CHANGED_PAGES_FILE): each child gets them
 * copied in up front (fork.c). Only a help: without a previous snapshot,
 * or if it cannot be read, the list is simply not there. */
static void note_changed_pages(struct cxlcr_pool *pool, const char *service, uint64_t generation,
			       const char *dir, struct snapshot_result *r)
{
	struct cxlcr_borrow b;
	struct cxlcr_snapshot prev = { 0 }, cur = { 0 };
	uint64_t *pages = NULL, count = 0;
	if (cxlcr_snapshot_open(pool, generation, &cur) < 0)
		return;
	r->runs = cur.header.run_count;
	if (cxlcr_catalog_borrow(pool, service, NULL, &b) < 0) {
		cxlcr_snapshot_close(&cur);
		return;
	}
	if (cxlcr_snapshot_open(pool, b.snapshot_generation, &prev) < 0 ||
	    cxlcr_snapshot_changed_pages(&prev, &cur, &pages, &count) < 0)
		goto out;
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", dir, CXLCR_CHANGED_PAGES_FILE);
	FILE *f = fopen(path, "we");
	if (!f)
		goto out;
	struct cxlcr_changed_pages h = { .magic = CXLCR_CHANGED_PAGES_MAGIC, .version = 1,
					  .page_size = CXLCR_SNAPSHOT_PAGE_SIZE,
					  .heap_address = cur.header.heap_address, .count = count };
	bool ok = fwrite(&h, sizeof(h), 1, f) == 1 && fwrite(pages, sizeof(*pages), count, f) == count;
	if (fclose(f) != 0 || !ok)
		remove(path);
	else
		r->pages_changed = count;
out:
	free(pages);
	if (cur.base)
		cxlcr_snapshot_close(&cur);
	if (prev.base)
		cxlcr_snapshot_close(&prev);
	cxlcr_catalog_return(pool, &b);
}

/* The snapshots the catalog holds for a service leave the catalog; their
 * regions and image sets go once their last borrower has returned them
 * (now, if nobody holds them: the catalog's free takes the dump with the
 * region). */
static void retire_previous(struct cxlcr_pool *pool, const char *service)
{
	bool freed;
	cxlcr_catalog_tombstone(pool, service, &freed);
}

/* Undoes a snapshot that did not make it into the catalog. */
static void drop_snapshot(struct cxlcr_pool *pool, const char *name)
{
	struct cxlcr_region r;
	if (cxlcr_region_find(pool, CXLCR_KIND_SNAPSHOT, name, &r))
		cxlcr_snapshot_region_free(pool, r.generation);
	image_store_reclaim(pool, name, 0);
}

/*
 * A snapshot worker that died (killed, or its host crashed) between its
 * draft and the catalog leaves a snapshot region, and maybe its image set,
 * that nothing refers to: no catalog entry names it, so no child can
 * borrow it and no reaper frees it. The next snapshot of the service,
 * under the service's lease (so no other snapshot of it is under way),
 * drops every such stray before it makes its own.
 */
static void drop_strays(struct cxlcr_pool *pool, const char *service)
{
	uint64_t named[CXLCR_CATALOG_ENTRIES];
	int got = cxlcr_catalog_snapshots(pool, named, CXLCR_CATALOG_ENTRIES);
	if (got < 0)
		return; /* unknown: nothing is a stray */
	uint32_t n = (uint32_t)got;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r = pool->table[i];
		if (r.state != CXLCR_REGION_LIVE || r.kind != CXLCR_KIND_SNAPSHOT || !cxlcr_snapshot_named_for(r.name, service))
			continue;
		bool in_catalog = false;
		for (uint32_t k = 0; k < n && !in_catalog; k++)
			in_catalog = named[k] == r.generation;
		if (!in_catalog)
			drop_snapshot(pool, r.name);
	}
}

void snapshot_forget(struct cxlcr_pool *pool, const char *service)
{
	retire_previous(pool, service);
	drop_strays(pool, service);
}

/*
 * The draft: the heap copied while the service runs. Incremental when it
 * can be (snapshot.h): the service's newest snapshot is its base, borrowed
 * while the draft is made (the draft then holds it itself), and write
 * tracking knows every page written since that snapshot's finish. Else a
 * full copy, and full_because says why. Without a draft at all (an
 * error), the freeze copies everything.
 */
static bool draft(struct cxlcr_pool *pool, const struct service *s, bool full, bool recovery_point,
		  struct snapshot_result *out)
{
	struct cxlcr_borrow b;
	struct cxlcr_snapshot base;
	bool have_base = false, tracked = false, since_known = false;
	uint64_t forks = 0;
	struct cxlcr_written since = { 0 };
	char why[160] = "the service has no earlier snapshot";
	if (full)
		snprintf(why, sizeof(why), "a full snapshot was asked for");
	else if (cxlcr_catalog_borrow(pool, s->region.name, NULL, &b) == 0) {
		have_base = cxlcr_snapshot_open(pool, b.snapshot_generation, &base) == 0;
		if (!have_base) {
			snprintf(why, sizeof(why), "its newest snapshot could not be opened: %s", cxlcr_last_error());
			cxlcr_catalog_return(pool, &b);
		}
	}
	cxlcr_track_before_draft(pool, s->region.generation, s->region.owner_pid, have_base ? &base.header : NULL,
				 &tracked, &forks, &since, &since_known);
	int rc = 1;
	if (have_base && !since_known)
		snprintf(why, sizeof(why), "%s",
			 !tracked ? "the service is not tracked"
				  : "writes since its newest snapshot are not all known (not tracked then, a fork "
				    "child, another scan, or 2 MiB mappings again since)");
	if (have_base) {
		/* No bound on its runs: scattered writes over a large heap make
		 * tens of thousands, and a snapshot that went full because of
		 * them would copy the whole heap each time. Only a child that
		 * maps each run needs fewer; a fork from a snapshot with too
		 * many takes a full one for its children first (fork.c).
		 * Writes since the base not known (a point that failed after
		 * its scan, a fork child that ran): every page is compared
		 * with the base, rather than a full copy, which needs as much
		 * pool space again as the heap (a 4 GiB service whose point
		 * failed once found none, and never had a point again). */
		struct cxlcr_snapshot_info info;
		rc = cxlcr_snapshot_draft_on(pool, s->region.generation, out->name, &base, b.entry, b.generation,
					     since_known ? &since : NULL, 0, &info);
		if (rc == 0) {
			cxlcr_copy_field(out->base, sizeof(out->base), base.region.name);
			if (!since_known)
				cxlcr_copy_field(out->draft_compared_because, sizeof(out->draft_compared_because), why);
			else if (info.compared_because)
				cxlcr_copy_field(out->draft_compared_because, sizeof(out->draft_compared_because),
						 info.compared_because);
		}
		else
			snprintf(why, sizeof(why), "%s",
				 cxlcr_last_error());
	}
	if (rc != 0)
		rc = cxlcr_snapshot_draft(pool, s->region.generation, out->name, NULL);
	if (rc == 0)
		cxlcr_snapshot_draft_note(pool, out->name, tracked, forks);
	else {
		/* A full pool, typically: a draft leaves room for its finish, so
		 * it needs more than the copy the freeze makes instead. */
		char was[sizeof(why)], err[96];
		snprintf(was, sizeof(was), "%s", why);
		snprintf(err, sizeof(err), "%s", cxlcr_last_error());
		if (recovery_point) /* not copied whole: skipped (snapshot_service) */
			snprintf(why, sizeof(why), "no draft: %.140s", err);
		else
			snprintf(why, sizeof(why), "%.36s; copied whole in the freeze (no draft: %.80s)", was, err);
	}
	if (!out->base[0])
		cxlcr_copy_field(out->full_because, sizeof(out->full_because), why);
	cxlcr_written_free(&since);
	if (have_base) {
		cxlcr_snapshot_close(&base);
		cxlcr_catalog_return(pool, &b);
	}
	return rc == 0;
}

/*
 * Whether the service drops its page tables over the heap between the
 * draft and the freeze. CRIU reads /proc/PID/smaps in the freeze, and the
 * kernel walks every present page there: ~6 ms per GiB the service
 * touched, the one part of a snapshot's freeze that grew with the heap.
 * Dropped, the walk meets markers (~0.6 ms per GiB of heap), and the
 * service takes a minor fault (~0.8 us) on each page it touches again.
 *
 * Only where that loses nothing tracking knows (tracking/zap_probe.c: the
 * kernel is asked, never assumed) and on a file pool (a devdax mapping's
 * tables are its device's 2 MiB pages, walked cheaply). Not for recovery
 * points, by default: one a second would make a busy service take those
 * faults all the time for a few ms of freeze ($CXLCR_POINT_SHED=1 lets
 * them); $CXLCR_SNAPSHOT_SHED=0 keeps every snapshot's tables.
 */
/*
 * Pre-copy (cxlcr_snapshot_draft_refresh(), common/snapshot.h): while the
 * service runs, the pages it wrote during the draft are brought up to date
 * in it, pass after pass, until a pass finds fewer than PRECOPY_ENOUGH
 * (what a finish copies in about a millisecond) or PRECOPY_PASSES ran: so
 * that the finish in the freeze has only the last pass's writes to copy.
 * A pass whose draft ran out of room hands what it could not copy to the
 * finish, through a file in the dump's directory the plugin reads
 * (criu-plugin/fork.c): those pages were re-armed by the pass's scan, and
 * no later scan reports them. Where it cannot even do that, the draft is
 * noted untracked, and the finish compares every page.
 */
#define PRECOPY_PASSES 3
#define PRECOPY_ENOUGH 2048

static void precopy(struct cxlcr_pool *pool, const struct service *s, const char *dir, struct snapshot_result *out)
{
	uint64_t t0 = cxlcr_mono_ns();
	struct cxlcr_written left = { 0 };
	for (int pass = 0; pass < PRECOPY_PASSES; pass++) {
		struct cxlcr_written w = { 0 };
		const char *why;
		if (cxlcr_track_since_draft(pool, s->region.generation, s->region.owner_pid, out->name, &w, &why) != 0) {
			cxlcr_written_free(&w);
			break; /* not tracked: the finish finds that too, and compares */
		}
		uint64_t pages = w.bytes / CXLCR_SNAPSHOT_PAGE_SIZE, refreshed = 0;
		int rc = pages ? cxlcr_snapshot_draft_refresh(pool, s->region.generation, out->name, &w, &refreshed, &left)
			       : 0;
		for (size_t i = 0; rc < 0 && i < w.count; i++)
			if (cxlcr_written_add(&left, w.ranges[i].start, w.ranges[i].end) < 0)
				break;
		out->precopy_passes++;
		out->precopy_pages += pages;
		cxlcr_written_free(&w);
		if (rc != 0 || pages < PRECOPY_ENOUGH)
			break;
	}
	if (left.count) {
		int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		bool saved = fd >= 0 && cxlcr_written_save(fd, CXLCR_WRITTEN_PENDING_FILE, &left) == 0;
		if (fd >= 0)
			close(fd);
		if (!saved) {
			bool tracked;
			uint64_t forks;
			if (cxlcr_snapshot_draft_notes(pool, out->name, &tracked, &forks) == 0)
				cxlcr_snapshot_draft_note(pool, out->name, false, forks);
		}
	}
	cxlcr_written_free(&left);
	out->precopy_ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
}

/*
 * A tracked service maps its heap with 2 MiB pages until its first
 * snapshot, which switches it to small ones (tracking/tracker.c says why),
 * here, before the hot set and the draft: its helper remaps the heap on a
 * shed request (preload/shed.c). Nothing depends on the remap but the
 * size of what scans report, so a service that does not answer soon is
 * snapshotted as it is mapped, and the next snapshot asks again.
 */
#define SMALL_PAGES_ANSWER_MS 200
static void small_pages_first(struct cxlcr_pool *pool, const struct service *s, struct snapshot_result *out)
{
	uint64_t t0 = cxlcr_mono_ns();
	if (cxlcr_track_small_pages_begin(pool, &s->region) != 1)
		return;
	if (service_shed_page_tables(pool, s, SMALL_PAGES_ANSWER_MS))
		out->small_pages_ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	else
		fprintf(stderr, "cxlcr: warning: %s: heap not remapped with small pages yet (no answer within %d ms)\n",
			s->region.name, SMALL_PAGES_ANSWER_MS);
}

static bool snapshot_may_shed(const struct cxlcr_pool *pool, bool recovery_point)
{
	const char *env = getenv(recovery_point ? "CXLCR_POINT_SHED" : "CXLCR_SNAPSHOT_SHED");
	bool want = env && *env ? strcmp(env, "0") != 0 : !recovery_point;
	return want && !pool->devdax && (!cxlcr_tracking_enabled() || cxlcr_track_zap_keeps_writes());
}

int snapshot_service(struct cxlcr_pool *pool, const struct service *s, struct verb_lease *l, bool full,
		     bool recovery_point, uint32_t tier_window_ms, struct snapshot_result *out)
{
	memset(out, 0, sizeof(*out));
	drop_strays(pool, s->region.name);
	/* A tracker still starting (a snapshot right after a run or a
	 * restore) has the service hold a userfaultfd for a moment: CRIU
	 * would refuse it, and the draft would find the heap untracked. */
	if (cxlcr_tracker_settle(pool, &s->region) < 0)
		fprintf(stderr, "cxlcr: warning: %s: %s\n", s->region.name, cxlcr_last_error());
	small_pages_first(pool, s, out);
	uint64_t *hot = NULL, hot_pages = 0;
	if (tier_window_ms && snapshot_hot_set(pool, s, tier_window_ms, &hot, &hot_pages, out) < 0)
		return -1;
	if (tier_window_ms)
		full = true; /* split afterwards: a tiered snapshot is no base, nor has one */
	uint64_t t0 = cxlcr_mono_ns();
	/* Unique among the snapshots of the service that children still hold. */
	snprintf(out->name, sizeof(out->name), "%.*s.s%llu", CXLCR_SNAPSHOT_NAME_PREFIX, s->region.name,
		 (unsigned long long)((cxlcr_now_ns() / 1000000) % 100000000000ull));
	char dir[PATH_MAX];
	if (image_work_dir("snapshot", s->region.name, dir, sizeof(dir)) < 0)
		return -1;
	/* The heap is copied while the service runs; in the freeze, the
	 * plugin only copies again what changed since (snapshot.h). Without a
	 * draft it copies everything then. */
	uint64_t d0 = cxlcr_mono_ns();
	bool drafted = draft(pool, s, full, recovery_point, out);
	out->draft_ms = (double)(cxlcr_mono_ns() - d0) / 1e6;
	if (!drafted && recovery_point) {
		/* Without a draft the heap would be copied whole in the freeze:
		 * seconds for a large heap, and as much pool space again as
		 * the heap, which a pool that had no room for the draft seldom
		 * has. A point is skipped instead; the next one compares the
		 * heap with the newest point (the scan before this draft lost
		 * track of what was written before it). */
		free(hot);
		image_work_dir_remove(dir);
		return cxlcr_error("recovery point %s not taken: %s", out->name, out->full_because);
	}
	precopy(pool, s, dir, out);
	static pid_t stopped[EXEC_HELD_STOPPED_MAX]; /* before the freeze: they stay stopped after a failure */
	size_t nstopped = container_stopped(s->region.owner_pid, stopped, EXEC_HELD_STOPPED_MAX);
	verb_lease_note_frozen(l, s->region.owner_pid, s->region.owner_epoch, stopped, nstopped);
	uint64_t s0 = cxlcr_mono_ns();
	if (snapshot_may_shed(pool, recovery_point) && service_shed_page_tables(pool, s, SERVICE_SHED_ANSWER_MS))
		out->shed_ms = (double)(cxlcr_mono_ns() - s0) / 1e6;
	uint64_t f0 = cxlcr_mono_ns();
	if (recovery_point)
		setenv(CXLCR_SNAPSHOT_DRAFT_ONLY_ENV, "1", 1);
	int dumped = service_fence_growth(pool, s, GROW_FENCE_TIMEOUT_MS);
	if (dumped == 0) {
		dumped = criu_dump_for_fork(s->region.owner_pid, dir, out->name);
		service_unfence_growth(pool, s);
	}
	unsetenv(CXLCR_SNAPSHOT_DRAFT_ONLY_ENV);
	if (dumped < 0) {
		char why[CXLCR_ERROR_MAX];
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		free(hot);
		/* CRIU lets the tasks go on a failed dump; make sure (but
		 * not those that were stopped before it). */
		container_signal_all_but(s->region.owner_pid, SIGCONT, stopped, nstopped);
		drop_snapshot(pool, out->name);
		image_work_dir_failed(dir); /* CRIU's log stays */
		return cxlcr_error("%s", why);
	}
	out->freeze_ms = (double)(cxlcr_mono_ns() - f0) / 1e6;
	/* CRIU's start-up and clean-up are in freeze_ms; the tasks were
	 * frozen for this much of it. */
	struct criu_dump_stats stats;
	if (criu_read_dump_stats(dir, &stats) == 0)
		out->frozen_ms = stats.frozen_ms;
	if (read_snapshot_info(dir, out) < 0)
		goto undo;
	/* The plugin leaves a finished draft unsealed (its seal needs no
	 * freeze); one it copied whole is sealed already, and this does
	 * nothing. */
	struct cxlcr_snapshot_seal_info sealed;
	if (cxlcr_snapshot_seal(pool, out->generation, &sealed) < 0)
		goto undo;
	out->pages_cxl = sealed.pages_cxl;
	out->pages_zero = sealed.pages_zero;
	out->seal_ms = (double)sealed.seal_ns / 1e6;
	/* Not for a recovery point: the list only helps the children of a
	 * fork, and building it walks both leaf tables and compares every
	 * page copied since (perf, a point a second of a 1 GiB Redis under
	 * 10,000 SETs/s: ~85 ms of the ~300 ms of CPU each point took).
	 * A fork from a point does without it. */
	if (!recovery_point)
		note_changed_pages(pool, s->region.name, out->generation, dir, out);
	if (hot) {
		char full_name[CXLCR_NAME_MAX];
		cxlcr_copy_field(full_name, sizeof(full_name), out->name);
		int rc = snapshot_tier(pool, hot, hot_pages, out);
		free(hot);
		hot = NULL;
		if (rc < 0) {
			cxlcr_copy_field(out->name, sizeof(out->name), full_name);
			goto undo;
		}
	}
	/* A host fenced while this ran (recovery/takeover.c: it was declared
	 * dead) no longer has the service: its arena was quarantined, and
	 * the catalog's points are the recovered service's now. */
	struct cxlcr_region still;
	if (cxlcr_region_get(pool, s->region.generation, &still) < 0 || still.kind != CXLCR_KIND_ARENA) {
		cxlcr_error("%s: its arena was quarantined (its host was fenced): snapshot dropped", s->region.name);
		goto undo;
	}
	struct cxlcr_image_set meta;
	image_set_describe(pool, &s->region, out->name, &meta);
	if (image_store_publish(pool, dir, &meta, &out->image_bytes) < 0)
		goto undo;
	/* Published before the previous one is retired: a worker that dies
	 * at any instant leaves the service a point to recover from. */
	struct cxlcr_catalog_info info;
	if (cxlcr_catalog_replace(pool, s->region.name, out->generation, &info) < 0)
		goto undo;
	out->snapshot_bytes = out->pages_own * CXLCR_SNAPSHOT_PAGE_SIZE;
	/* The room its draft kept for the freeze, now that the freeze is
	 * over (a point every second would otherwise hold as much again as
	 * it copied, in itself and in every older point it shares pages
	 * with). Only memory: the snapshot stands if this fails. */
	cxlcr_snapshot_trim(pool, out->generation, &out->room_freed_bytes);
	if (!out->bases && out->base[0]) {
		/* Incremental as drafted, but nothing is left of its base: every
		 * page was found written since (or the freeze copied afresh). */
		if (out->tracked && !out->full_because[0])
			snprintf(out->full_because, sizeof(out->full_because),
				 "every page it holds was written since its base %.100s", out->base);
		out->base[0] = 0;
	}
	out->total_ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	image_work_dir_remove(dir);
	return 0;
undo:;
	char why[CXLCR_ERROR_MAX];
	snprintf(why, sizeof(why), "%s", cxlcr_last_error());
	free(hot);
	drop_snapshot(pool, out->name);
	image_work_dir_remove(dir);
	return cxlcr_error("%s", why);
}

int cmd_snapshot(int argc, char **argv)
{
	struct verb_args a;
	struct cxlcr_pool pool;
	struct service s;
	int code;
	if (!service_verb_here(argc, argv, "cxlcr snapshot NAME [--full] [--tier [--hot-window SEC]] [--json]", NULL, &a, &pool, &s, &code))
		return code;
	struct verb_lease l;
	if ((code = verb_begin_here(&pool, &s, a.recovery_point ? VERB_RECOVERY_POINT : "snapshot", a.lease, &l))) {
		cxlcr_pool_close(&pool);
		return code;
	}
	if (s.region.kind != CXLCR_KIND_ARENA) {
		verb_lease_release(&l);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "'%s' is a fork child; snapshot its parent", a.name);
	}
	/* Tests only: a point of a service restored from a point (on its
	 * host, or recovered from a dead one) may stop here, holding its
	 * lease (recovery/test_step.c), so that the service can die again
	 * before it has a newer point. */
	if (a.recovery_point && s.restored_from)
		recovery_test_step("point-after-restore");
	if (a.hot_window_s > 0 && !a.tier) {
		verb_lease_release(&l);
		cxlcr_pool_close(&pool);
		return fail(EXIT_USAGE, "--hot-window goes with --tier");
	}
	if (a.tier && (a.recovery_point || s.recovery_interval_ms)) {
		verb_lease_release(&l);
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "'%s' takes recovery points, which are restored from CXL alone: no --tier", a.name);
	}
	uint32_t window_ms = !a.tier ? 0 : a.hot_window_s > 0 ? (uint32_t)(a.hot_window_s * 1000 + 0.5) : HOT_WINDOW_MS;
	if (a.tier && !window_ms)
		window_ms = 1;
	struct snapshot_result r;
	char why[CXLCR_ERROR_MAX] = "";
	int rc = verb_lease_check(&l, "the freeze");
	if (rc < 0)
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
	if (rc == 0) {
		static pid_t stopped[EXEC_HELD_STOPPED_MAX];
		size_t nstopped = container_stopped(s.region.owner_pid, stopped, EXEC_HELD_STOPPED_MAX);
		verb_lease_note_frozen(&l, s.region.owner_pid, s.region.owner_epoch, stopped, nstopped);
		rc = snapshot_service(&pool, &s, &l, a.full, a.recovery_point, window_ms, &r);
		/* (The reason first: a lease lost meanwhile would say so over it.) */
		if (rc < 0)
			snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		verb_lease_note_frozen(&l, 0, 0, NULL, 0);
	}
	verb_lease_release(&l);
	if (rc < 0) {
		cxlcr_pool_close(&pool);
		return fail(EXIT_FAIL, "snapshot of %s failed: %s; it goes on running", a.name, why);
	}
	cxlcr_pool_close(&pool);
	if (a.json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "name", a.name);
		json_str(&j, "snapshot", r.name);
		json_str(&j, "host", this_host());
		json_double(&j, "freeze_ms", r.freeze_ms);
		json_double(&j, "frozen_ms", r.frozen_ms);
		json_double(&j, "snapshot_ms", r.snapshot_ms);
		json_object_begin(&j, "snapshot_parts");
		json_double(&j, "open_ms", r.open_ms);
		json_double(&j, "written_ms", r.written_ms);
		json_double(&j, "holes_ms", r.holes_ms);
		json_double(&j, "publish_ms", r.publish_ms);
		json_double(&j, "beside_criu_ms", r.beside_ms);
		json_double(&j, "waited_ms", r.waited_ms);
		json_object_end(&j);
		json_double(&j, "total_ms", r.total_ms);
		json_u64(&j, "image_bytes", r.image_bytes);
		json_u64(&j, "snapshot_bytes", r.snapshot_bytes);
		json_u64(&j, "room_freed_bytes", r.room_freed_bytes);
		json_u64(&j, "pages_stored", r.pages_cxl);
		json_u64(&j, "pages_copied", r.pages_own);
		json_bool(&j, "incremental", r.bases > 0);
		if (r.bases > 0) {
			json_str(&j, "base", r.base);
			json_u64(&j, "bases", r.bases);
			json_null_value(&j, "full_because");
		} else {
			json_null_value(&j, "base");
			json_str(&j, "full_because", r.full_because[0] ? r.full_because : "the freeze copied every page");
		}
		json_u64(&j, "pages_zero", r.pages_zero);
		if (a.recovery_point)
			json_null_value(&j, "pages_changed"); /* not listed for a point */
		else
			json_u64(&j, "pages_changed", r.pages_changed);
		json_double(&j, "draft_ms", r.draft_ms);
		json_double(&j, "shed_ms", r.shed_ms);
		json_double(&j, "small_pages_ms", r.small_pages_ms);
		json_u64(&j, "precopy_passes", r.precopy_passes);
		json_u64(&j, "precopy_pages", r.precopy_pages);
		json_double(&j, "precopy_ms", r.precopy_ms);
		json_double(&j, "seal_ms", r.seal_ms);
		json_u64(&j, "pages_refreshed", r.pages_refreshed);
		json_bool(&j, "write_tracking", r.tracked);
		json_u64(&j, "pages_written", r.pages_written);
		if (r.tracked)
			json_null_value(&j, "compared_because");
		else
			json_str(&j, "compared_because", r.untracked_because);
		json_u64(&j, "punches_logged", r.punches_logged);
		json_u64(&j, "runs", r.runs);
		if (r.draft_compared_because[0])
			json_str(&j, "draft_compared_because", r.draft_compared_because);
		else
			json_null_value(&j, "draft_compared_because");
		json_bool(&j, "tiered", r.tiered);
		if (r.tiered) {
			json_object_begin(&j, "tier");
			json_u64(&j, "pages_hot", r.pages_hot);
			json_u64(&j, "pages_cold", r.pages_cold);
			json_u64(&j, "pages_zero", r.pages_zero);
			json_u64(&j, "pages_present", r.hot_seen);
			json_u64(&j, "cxl_bytes", r.cxl_bytes);
			json_u64(&j, "untiered_cxl_bytes", r.untiered_bytes);
			json_u64(&j, "cold_bytes", r.cold_bytes);
			json_str(&j, "server", r.tier_server);
			json_double(&j, "hot_window_ms", r.hot_window_ms);
			json_double(&j, "tier_ms", r.tier_ms);
			json_double(&j, "rma_write_ms", r.tier_write_ms);
			json_object_end(&j);
		}
		json_end(&j);
	} else {
		char b[32], c[32];
		printf("%s snapshotted on %s as %s: heap copied in %.1f ms while it ran, then frozen %.1f ms "
		       "(beside CRIU's dump, %.1f ms bringing %" PRIu64 " changed pages up to date, %.1f ms of it "
		       "waited for); %s of heap pages stored (%" PRIu64 " zero pages not), %s of images\n",
		       a.name, this_host(), r.name, r.draft_ms, r.frozen_ms, r.beside_ms, r.pages_refreshed, r.waited_ms,
		       cxlcr_format_size(r.snapshot_bytes, b, sizeof(b)), r.pages_zero,
		       cxlcr_format_size(r.image_bytes, c, sizeof(c)));
		if (r.tiered)
			printf("tiered: %" PRIu64 " hot pages in CXL (%s of region, %s untiered), %" PRIu64
			       " cold pages on memory server %s, %" PRIu64 " zero pages nowhere\n",
			       r.pages_hot, cxlcr_format_size(r.cxl_bytes, b, sizeof(b)),
			       cxlcr_format_size(r.untiered_bytes, c, sizeof(c)), r.pages_cold, r.tier_server, r.pages_zero);
	}
	return EXIT_OK;
}
