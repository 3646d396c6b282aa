/*
 * cxlcr gc [--dry-run] [--foreign] [--json]: removes what crashed verbs
 * left behind, and only that.
 *
 *   - work directories (WORK_DIR/HOST/VERB.SERVICE.pPID-START.XXXXXX)
 *     whose maker, named in the directory's name with its start time, is
 *     gone: a verb that ended removes its own (or keeps only CRIU's logs
 *     after a failure, which gc then takes too);
 *   - named network namespaces of this pool's services (cxlcr-LINK, made
 *     ahead of a restore) that no verb is working on;
 *   - image sets nobody can restore: of a service that is gone, taken over
 *     since (an older epoch), never completed, or of a fork snapshot that is
 *     gone; unless a verb is working on the service;
 *   - empty working directories (HOST_WD_DIR/NAME) of no service of this
 *     host: a fork worker killed after making its child's leaves one.
 *
 * What gc cannot tie to this pool (work directories of an older format,
 * namespaces of other pools) is counted, and removed with --foreign: for a
 * machine that runs this pool's pod only.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/catalog.h"
#include "../common/persist.h"
#include "../common/error.h"
#include "../common/util.h"
#include "../control/lease.h"
#include "cli.h"
#include "container.h"
#include "host_files.h"
#include "image_store.h"
#include "json.h"

#define NETNS_DIR "/run/netns"
#define NETNS_PREFIX "cxlcr-"

struct gc {
	struct cxlcr_pool *pool;
	bool dry_run, foreign, json;
	struct json j;
	unsigned removed, foreign_left;
};

static void report(struct gc *g, const char *kind, const char *what, const char *why)
{
	g->removed++;
	if (g->json) {
		json_object_begin(&g->j, NULL);
		json_str(&g->j, "kind", kind);
		json_str(&g->j, "name", what);
		json_str(&g->j, "why", why);
		json_object_end(&g->j);
	} else {
		printf("%s %s %s (%s)\n", g->dry_run ? "would remove" : "removed", kind, what, why);
	}
}

/* Is a verb working on the service of this name now (one that died does
 * not count)? */
static bool busy(struct gc *g, const char *service)
{
	struct cxlcr_region copy;
	if (!cxlcr_region_find(g->pool, CXLCR_KIND_ARENA, service, &copy) &&
	    !cxlcr_region_find(g->pool, CXLCR_KIND_CHILD, service, &copy))
		return false;
	return verb_lease_held(g->pool, &copy);
}

/* "...pPID-START.XXXXXX": its maker; false if the name has none. */
static bool work_dir_maker(const char *name, int *pid, unsigned long long *start)
{
	size_t n = strlen(name);
	if (n < 8 || name[n - 7] != '.')
		return false;
	const char *end = name + n - 7, *p = end;
	while (p > name && p[-1] != '.')
		p--;
	char tail[64];
	if (p == name || (size_t)(end - p) >= sizeof(tail))
		return false;
	memcpy(tail, p, (size_t)(end - p));
	tail[end - p] = 0;
	int used = 0;
	return sscanf(tail, "p%d-%llu%n", pid, start, &used) == 2 && tail[used] == 0;
}

static void work_dirs(struct gc *g)
{
	DIR *top = opendir(IMAGE_WORK_DIR);
	if (!top)
		return;
	struct dirent *h;
	while ((h = readdir(top))) {
		if (h->d_name[0] == '.')
			continue;
		char host[PATH_MAX];
		snprintf(host, sizeof(host), "%s/%s", IMAGE_WORK_DIR, h->d_name);
		DIR *d = opendir(host);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.' || e->d_type != DT_DIR)
				continue;
			char path[PATH_MAX * 2];
			snprintf(path, sizeof(path), "%s/%s", host, e->d_name);
			int pid;
			unsigned long long start;
			uint64_t now;
			if (!work_dir_maker(e->d_name, &pid, &start)) {
				if (!g->foreign) {
					g->foreign_left++;
					continue;
				}
				report(g, "work-directory", path, "no maker in its name (an older cxlcr's)");
			} else if (cxlcr_process_start(pid, &now) && now == start) {
				continue; /* its verb still runs */
			} else {
				report(g, "work-directory", path, "its maker is gone");
			}
			if (!g->dry_run)
				image_work_dir_purge(path);
		}
		closedir(d);
	}
	closedir(top);
}

static void working_dirs(struct gc *g)
{
	DIR *d = opendir(HOST_WD_DIR);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || e->d_type != DT_DIR)
			continue;
		struct cxlcr_region r;
		if ((cxlcr_region_find(g->pool, CXLCR_KIND_ARENA, e->d_name, &r) ||
		     cxlcr_region_find(g->pool, CXLCR_KIND_CHILD, e->d_name, &r)) &&
		    (!strncmp(r.owner_host, this_host(), CXLCR_HOST_MAX) || verb_lease_held(g->pool, &r)))
			continue; /* its service's here, or a verb brings it here */
		if (!host_wd_idle(e->d_name))
			continue; /* what a service wrote, or works in, is not gc's to take */
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", HOST_WD_DIR, e->d_name);
		report(g, "working-directory", path, "empty, of no service of this host");
		if (!g->dry_run)
			host_wd_remove(e->d_name);
	}
	closedir(d);
}

/* The live arena of this pool whose link names start like link (the same
 * pool and region: "cxHHHHHHHH."), copied into r; false if none. */
static bool arena_of_link(struct gc *g, const char *link, struct cxlcr_region *r)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		cxlcr_region_slot(g->pool, i, r);
		if (r->state != CXLCR_REGION_LIVE || r->kind != CXLCR_KIND_ARENA)
			continue;
		char mine[16];
		container_link_name(g->pool->sb->uuid, r->generation, 0, mine);
		if (!strncmp(mine, link, 11))
			return true;
	}
	return false;
}

static void namespaces(struct gc *g)
{
	DIR *d = opendir(NETNS_DIR);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, NETNS_PREFIX "cx", strlen(NETNS_PREFIX) + 2))
			continue;
		const char *link = e->d_name + strlen(NETNS_PREFIX);
		struct cxlcr_region r;
		if (!arena_of_link(g, link, &r)) {
			if (!g->foreign) {
				g->foreign_left++;
				continue;
			}
			report(g, "network-namespace", e->d_name, "of no service of this pool");
		} else if (busy(g, r.name)) {
			continue;
		} else {
			report(g, "network-namespace", e->d_name, "no verb works on its service");
		}
		/* Only the name: the namespace goes with its last user, its link with it. */
		if (!g->dry_run)
			container_netns_release(link, false);
	}
	closedir(d);
}

/* Why the image set in region r is of no use to anyone, or NULL. */
static const char *image_set_stale(struct gc *g, const struct cxlcr_region *r, char *service, size_t len)
{
	struct cxlcr_image_set *m = cxlcr_pool_map(g->pool, r->offset, sizeof(*m), 0, 0);
	if (!m)
		return NULL;
	struct cxlcr_image_set meta = *m;
	munmap(m, sizeof(*m));
	cxlcr_copy_field(service, len, meta.service);
	if (busy(g, service))
		return NULL;
	if (meta.magic != CXLCR_IMAGES_MAGIC || meta.complete != CXLCR_IMAGES_COMPLETE)
		return "never completed";
	/* A snapshot's dump (fork, recovery point) is named after the
	 * snapshot, SERVICE.sNNN, and lives as long as it does, whatever the
	 * service's epoch since. */
	struct cxlcr_region snap;
	if (cxlcr_region_find(g->pool, CXLCR_KIND_SNAPSHOT, meta.service, &snap))
		return NULL;
	const char *dot = strrchr(meta.service, '.');
	if (dot && dot[1] == 's' && dot[2] >= '0' && dot[2] <= '9')
		return "its snapshot is gone";
	struct cxlcr_region arena;
	if (cxlcr_region_get(g->pool, meta.arena_generation, &arena) < 0)
		return "its service is gone";
	if (meta.arena_epoch < arena.owner_epoch)
		return "its service was taken over since";
	return NULL;
}

static void image_sets(struct gc *g)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		if (cxlcr_region_get(g->pool, g->pool->table[i].generation, &r) < 0 || r.kind != CXLCR_KIND_IMAGES)
			continue;
		char service[CXLCR_NAME_MAX];
		const char *why = image_set_stale(g, &r, service, sizeof(service));
		if (!why)
			continue;
		report(g, "image-set", r.name, why);
		if (!g->dry_run)
			cxlcr_region_free(g->pool, r.generation);
	}
}

/*
 * Snapshot drafts whose verb is gone: a draft is made while its service's
 * verb lease is held and is published or freed before it is released, so
 * a draft of a service no verb works on was left by a verb that died. It
 * may hold borrows on the snapshots it shares pages with (an incremental
 * draft): freeing it returns them (cxlcr_snapshot_region_free), or those
 * snapshots would never go.
 */
static void snapshot_drafts(struct gc *g)
{
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		if (cxlcr_region_get(g->pool, g->pool->table[i].generation, &r) < 0 || r.kind != CXLCR_KIND_SNAPSHOT)
			continue;
		struct cxlcr_snapshot_header *h = cxlcr_pool_map(g->pool, r.offset, sizeof(*h), 0, 0);
		if (!h)
			continue;
		cxlcr_refresh(h, sizeof(*h));
		bool draft = h->complete != CXLCR_SNAPSHOT_COMPLETE;
		munmap(h, sizeof(*h));
		/* Its name is SERVICE.sNNN (cmd_snapshot.c). */
		char service[CXLCR_NAME_MAX];
		cxlcr_copy_field(service, sizeof(service), r.name);
		char *dot = strrchr(service, '.');
		if (!draft || !dot || dot[1] != 's')
			continue;
		*dot = 0;
		if (busy(g, service))
			continue;
		report(g, "snapshot-draft", r.name, "never finished: its verb is gone");
		if (!g->dry_run)
			cxlcr_snapshot_region_free(g->pool, r.generation);
	}
}

int cmd_gc(int argc, char **argv)
{
	static const struct option opts[] = { { "dry-run", no_argument, 0, 'n' },
					      { "foreign", no_argument, 0, 'f' },
					      { "json", no_argument, 0, 'j' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	struct gc g = { 0 };
	int c;
	while ((c = getopt_long(argc, argv, "nfjh", opts, NULL)) != -1) {
		switch (c) {
		case 'n': g.dry_run = true; break;
		case 'f': g.foreign = true; break;
		case 'j': g.json = true; break;
		case 'h':
			printf("usage: cxlcr gc [--dry-run] [--foreign] [--json]\n\n"
			       "Removes what crashed verbs left: work directories whose maker is gone,\n"
			       "network namespaces of this pool's services that no verb works on, image\n"
			       "sets nobody can restore, snapshot drafts no verb finishes (with the\n"
			       "borrows they held), and empty working directories of no service of this\n"
			       "host. --foreign also removes what cannot be tied\n"
			       "to this pool (for a machine that runs this pool's pod only).\n");
			return EXIT_OK;
		default: return EXIT_USAGE;
		}
	}
	if (optind < argc)
		return fail(EXIT_USAGE, "gc: unexpected argument '%s'", argv[optind]);
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	g.pool = &pool;
	if (g.json) {
		json_begin(&g.j, stdout);
		json_bool(&g.j, "dry_run", g.dry_run);
		json_array_begin(&g.j, g.dry_run ? "would_remove" : "removed");
	}
	work_dirs(&g);
	namespaces(&g);
	image_sets(&g);
	snapshot_drafts(&g);
	working_dirs(&g);
	cxlcr_pool_close(&pool);
	if (g.json) {
		json_array_end(&g.j);
		json_u64(&g.j, "foreign_left", g.foreign_left);
		json_end(&g.j);
	} else {
		printf("%u %s\n", g.removed, g.dry_run ? "to remove" : "removed");
		if (g.foreign_left)
			printf("%u left that belong to no service of this pool (--foreign removes them)\n",
			       g.foreign_left);
	}
	return EXIT_OK;
}
