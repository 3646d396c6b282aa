#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../control/fence.h"
#include "../rebase/rebase.h"
#include "../recovery/recovery.h"
#include "../tracking/track.h"
#include "cli.h"
#include "container.h"
#include "criu.h"
#include "exec.h"
#include "image_store.h"
#include "restore.h"

/* After a failed restore: a criu that was killed half-way leaves the tasks
 * it was rebuilding behind, stuck (they map the pool) and holding the new
 * link, whose name the next try needs. They are our orphans: end them, and
 * take the link away at once (a dead network namespace only goes later). */
static void discard_restore(const char *link)
{
	char why[CXLCR_ERROR_MAX];
	snprintf(why, sizeof(why), "%s", cxlcr_last_error());
	exec_kill_orphans();
	container_netns_release(link, true);
	cxlcr_error("%s", why); /* the reason stays the restore's */
}



/* The plugin's figures of a restore in dir (CXLCR_RESTORE_PARTS_FILE):
 * zeros when it left none. */
static void read_plugin_parts(const char *dir, struct restore_parts *parts)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", dir, CXLCR_RESTORE_PARTS_FILE);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	if (fscanf(f, "take_over_ns %" SCNu64 " netlock_ns %" SCNu64, &parts->take_over_ns, &parts->netlock_ns) != 2)
		parts->take_over_ns = parts->netlock_ns = 0;
	fclose(f);
}

/*
 * A recovery point's records say the epochs of the point's instant (after
 * a relocation onto fresh regions, the arena's): each region of the heap,
 * the arena and every extent, is made to say its own epoch of now. The
 * claim of every restore moves an extent's epoch on with its arena's, and
 * some verbs move the arena's alone: a grown service restored from one
 * point a second time (it died again before its next point) was refused
 * as stale when only the arena's record was resealed.
 */
static int reseal_heap(struct cxlcr_pool *pool, const struct cxlcr_region *arena, const char *dir)
{
	struct cxlcr_arena_header *h = recovery_arena_header(pool, arena);
	if (!h)
		return cxlcr_error("arena %s: its header is not its own", arena->name);
	uint64_t gens[CXLCR_ARENA_EXTENTS_MAX] = { arena->generation }, epochs[CXLCR_ARENA_EXTENTS_MAX] = { arena->owner_epoch };
	size_t n = 1;
	int rc = 0;
	for (uint32_t k = 1; rc == 0 && k < h->extent_count && k < CXLCR_ARENA_EXTENTS_MAX; k++, n++) {
		struct cxlcr_region e;
		rc = cxlcr_region_get(pool, h->extents[k].generation, &e);
		gens[n] = e.generation;
		epochs[n] = e.owner_epoch;
	}
	munmap(h, sizeof(*h));
	return rc < 0 ? -1 : image_store_reseal_regions(dir, n, gens, epochs);
}

int restore_service(struct cxlcr_pool *pool, const char *name, const struct restore_from *from,
		    const struct verb_lease *l, pid_t *pid, char *link, uint64_t *image_bytes,
		    struct restore_parts *parts, struct criu_ahead *ahead)
{
	uint64_t t0 = cxlcr_mono_ns();
	if (verb_lease_check(l, "the restore") < 0)
		return -1;
	struct cxlcr_region images;
	struct cxlcr_image_set meta;
	if (image_store_find(pool, from ? from->point_name : name, &images, &meta) < 0)
		return -1;
	struct cxlcr_region arena;
	uint64_t want = from && from->fresh ? from->fresh->arena.generation : meta.arena_generation;
	if (!cxlcr_region_find(pool, CXLCR_KIND_ARENA, name, &arena) || arena.generation != want)
		return cxlcr_error("the arena of checkpoint %s is gone", images.name);
	/* One restore of a checkpoint at a time: a racing one stops here,
	 * before it has anything to clean up. */
	uint64_t claim;
	if (image_store_claim(pool, &images, this_host(), &claim) < 0)
		return -1;
	char dir[PATH_MAX];
	if (image_work_dir("restore", name, dir, sizeof(dir)) < 0) {
		image_store_release(pool, &images, claim);
		return -1;
	}
	if (image_store_fetch(pool, &images, dir) < 0) {
		image_store_release(pool, &images, claim);
		image_work_dir_remove(dir);
		return -1;
	}
	*image_bytes = meta.payload_bytes;
	/* Which processes were stopped when they were checkpointed: they stay
	 * stopped (CRIU, on its own, stops them again). Read before CRIU
	 * runs; not readable, or too many to name, they all run (with a
	 * warning) rather than the restore failing after the arena was taken
	 * over. */
	static pid_t stopped[EXEC_HELD_STOPPED_MAX];
	size_t nstopped = 0;
	if (cxlcr_rebase_stopped_tasks(dir, stopped, EXEC_HELD_STOPPED_MAX, &nstopped, NULL) < 0) {
		fprintf(stderr, "warning: %s: which processes were stopped is unknown, all of them will run: %s\n", name,
			cxlcr_last_error());
		nstopped = 0;
	}
	uint64_t t1 = cxlcr_mono_ns();
	parts->fetch_ns = t1 - t0;
	/* A recovery point's dump says the epoch of its instant; the arena,
	 * reset from the point under this verb's lease, is taken over from
	 * the epoch of now. */
	if (from) {
		meta.arena_epoch = arena.owner_epoch;
		int moved = 0;
		if (from->fresh) {
			moved = cxlcr_rebase_relocate(dir, from->fresh->moves, from->fresh->n, arena.owner_epoch);
			meta.arena_generation = arena.generation;
		}
		if (moved < 0 || reseal_heap(pool, &arena, dir) < 0) {
			image_store_release(pool, &images, claim);
			image_work_dir_remove(dir);
			return -1;
		}
	}
	container_link_name(pool->sb->uuid, meta.arena_generation, meta.arena_epoch + 1, link);
	const struct pod *pod = pod_current(false);
	/* Hosts may name the pool differently: the mapping is then rebased. */
	const char *rebase = image_store_renamed_pool(pool, &meta);
	/* The service's network namespace, made by `restore-prepare` (a
	 * migrate asks for it before it freezes the source), or now. */
	int netns = container_netns_open(link);
	if (!pod)
		cxlcr_error("host %s is not in a pod", this_host());
	else if (netns < 0 && container_netns_prepare(link, ntohl(meta.service_ip)) == 0)
		netns = container_netns_open(link);
	/* From here the namespace lives as long as what is in it (CRIU, the
	 * restored tasks) and our fd, not by its name: a restore whose worker
	 * dies before it lets its tasks run (their keeper ends them) leaves
	 * no namespace whose link keeps the service's address on the bridge
	 * beside the source that resumes. */
	if (netns >= 0)
		container_netns_release(link, false);
	exec_adopt_orphans();
	char point[24] = "";
	if (from)
		snprintf(point, sizeof(point), "%llu", (unsigned long long)from->point_generation);
	setenv("CXLCR_RECOVERY_POINT", point, 1); /* the plugin allows this point's dump only */
	uint64_t t2 = cxlcr_mono_ns();
	parts->prepare_ns = t2 - t1;
	int restored = !pod || netns < 0 || verb_lease_check(l, "CRIU's restore") < 0 ? -1
		       : criu_restore(dir, pod->bridge, link, rebase, pool->fd, netns, ahead, pid);
	/* CRIU left the tasks stopped, held by its keeper (criu_restore()):
	 * the restore is a success, so they run now, while this verb still
	 * holds the service, and before the checkpoint is spent (a worker
	 * that dies before this leaves it to be renewed). If they were
	 * killed meanwhile, or the lease moved on, nothing ran: a failed
	 * restore (the keeper ends them). */
	if (restored == 0) {
		bool ours = verb_lease_check(l, "letting the restored service run") == 0;
		if (exec_held_release(ours, stopped, nstopped) < 0 || !ours)
			restored = -1;
	}
	unsetenv("CXLCR_RECOVERY_POINT");
	uint64_t t3 = cxlcr_mono_ns();
	parts->criu_ns = t3 - t2;
	if (restored < 0) {
		if (netns >= 0)
			close(netns);
		discard_restore(link);
		/* The checkpoint can be tried again (if the plugin has taken the
		 * arena over, once it is renewed). Here, where the copy is
		 * judged at once: a migrate's source may not be able to judge
		 * it (its host silent), and judges the image set of now when it
		 * renews (checkpoint_renew_stale()), so it finds this renewal. */
		if ((from && from->fresh) || !checkpoint_renew_stale(pool, &images, &meta, false)) {
			char why[CXLCR_ERROR_MAX];
			snprintf(why, sizeof(why), "%s", cxlcr_last_error());
			image_store_release(pool, &images, claim);
			cxlcr_error("%s", why);
		}
		image_work_dir_failed(dir); /* CRIU's log stays */
		return -1;
	}
	close(netns);
	read_plugin_parts(dir, parts);
	/* The plugin put the link on the bridge (criu-plugin/netlock.c); the
	 * namespace lives on with the service. */
	/* The plugin took the arena over (owner, epoch); the checkpoint is
	 * spent now, as a second restore of it would be refused anyway. */
	cxlcr_region_set_veth(pool, meta.arena_generation, link);
	image_store_reclaim(pool, name, 0);
	if (from) /* a recovery point stays one: it may be restored again */
		image_store_release(pool, &images, claim);
	image_work_dir_remove(dir);
	/* Tracking does not survive a checkpoint (its userfaultfd stayed with
	 * the source's tracker): the restored service is tracked anew, and
	 * its first scan reports every page. */
	struct cxlcr_region now;
	uint64_t t4 = cxlcr_mono_ns();
	if (cxlcr_region_get(pool, meta.arena_generation, &now) == 0)
		cxlcr_tracker_start(pool, &now);
	parts->tracker_ns = cxlcr_mono_ns() - t4;
	parts->after_ns = cxlcr_mono_ns() - t3;
	return 0;
}


void json_restore_parts(struct json *j, const struct restore_parts *p)
{
	json_object_begin(j, "restore_parts");
	json_double(j, "fetch_ms", (double)p->fetch_ns / 1e6);
	json_double(j, "prepare_ms", (double)p->prepare_ns / 1e6);
	json_double(j, "criu_restore_ms", (double)p->criu_ns / 1e6);
	json_double(j, "after_ms", (double)p->after_ns / 1e6);
	json_double(j, "tracker_ms", (double)p->tracker_ns / 1e6);
	json_double(j, "plugin_take_over_ms", (double)p->take_over_ns / 1e6);
	json_double(j, "netlock_release_ms", (double)p->netlock_ns / 1e6);
	json_object_end(j);
}

void json_restore_begin(struct json *j, const char *name, pid_t pid)
{
	json_begin(j, stdout);
	json_str(j, "name", name);
	json_str(j, "host", this_host());
	json_i64(j, "pid", pid);
}

void json_restore_end(struct json *j, double ms, const struct restore_parts *parts, uint64_t image_bytes)
{
	json_double(j, "restore_ms", ms);
	json_restore_parts(j, parts);
	json_double(j, "total_ms", ms);
	json_u64(j, "image_bytes", image_bytes);
	json_end(j);
}
