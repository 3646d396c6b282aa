/*
 * Remote fork: children of a running service on another pod host (fork.h).
 *
 *   fork_service()     the request: a snapshot from the parent's host if
 *                      needed (cxlcr snapshot), then the children from the
 *                      destination's daemon (cxlcr fork-restore)
 *   cmd_fork_restore   the destination's side: one fetch of the parent's
 *                      image set, one rebased image set per child (rebase/),
 *                      and all children restored by CRIU at once
 *
 * The destination's daemon holds a borrow of the snapshot while it works;
 * each child takes its own when the CRIU plugin restores it (criu-plugin/
 * fork.c) and holds it for as long as it lives.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/catalog.h"
#include "../common/error.h"
#include "../common/snapshot.h"
#include "../common/util.h"
#include "../rebase/rebase.h"
#include "cli.h"
#include "container.h"
#include "criu.h"
#include "fork.h"
#include "../control/fence.h"
#include "exec.h"
#include "image_store.h"
#include "rpc.h"
#include "rpc_tcp.h"

#define CHILD_NUMBER_MAX 9999
#define PREFETCH_LOG_DIR "/var/log/cxlcr"
#define KILL_WAIT_MS 10000

/* One child being made on this host. */
struct child_job {
	char name[CXLCR_NAME_MAX];
	struct cxlcr_region region;
	char link[16];
	uint32_t ip;                  /* host order */
	char dir[PATH_MAX];
	pid_t worker;                 /* the process running its criu restore */
	pid_t pid;                    /* the restored child */
	double restore_ms;
	bool ok;
};

/* What `cxlcr ps` shows for a child being made, and once it runs. */
static void making_command(const char *parent, char *out, size_t len)
{
	snprintf(out, len, "forking %.38s", parent);
}

static void child_command(const char *parent, char *out, size_t len)
{
	snprintf(out, len, "fork of %.38s", parent);
}

/*
 * The children of parent a dead maker left half made: a fork-restore
 * worker killed (or its host crashed) between a child's region and its
 * running task. Its restore jobs and their CRIU died with it (the keeper
 * ended the half-restored tasks); what stays is the region, owned by the
 * dead maker, and the child's network namespace. Run under the parent's
 * lease (no other fork of it is under way), on the child's host.
 */
static void drop_half_made(struct cxlcr_pool *pool, const char *parent)
{
	char making[CXLCR_COMMAND_MAX];
	making_command(parent, making, sizeof(making));
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r = pool->table[i];
		if (r.state != CXLCR_REGION_LIVE || r.kind != CXLCR_KIND_CHILD ||
		    strncmp(r.command, making, sizeof(r.command)) ||
		    strncmp(r.owner_host, this_host(), CXLCR_HOST_MAX) || pid_alive(r.owner_pid))
			continue;
		char link[16];
		container_link_name(pool->sb->uuid, r.generation, 0, link);
		container_netns_release(link, true);
		cxlcr_region_free(pool, r.generation);
	}
}

/* A child region PARENT.N with the lowest free N: its name, owner host and
 * address. Its owner pid is set once the child runs. */
static int child_region(struct cxlcr_pool *pool, const struct pod *pod, const char *parent,
			struct child_job *job)
{
	for (int n = 1; n <= CHILD_NUMBER_MAX; n++) {
		snprintf(job->name, sizeof(job->name), "%.*s.%d", (int)CXLCR_NAME_MAX - 8, parent, n);
		if (cxlcr_region_find(pool, CXLCR_KIND_CHILD, job->name, NULL) ||
		    cxlcr_region_find(pool, CXLCR_KIND_ARENA, job->name, NULL))
			continue;
		if (cxlcr_region_alloc(pool, CXLCR_KIND_CHILD, job->name, CXLCR_POOL_ALIGN, &job->region) < 0) {
			if (cxlcr_region_find(pool, CXLCR_KIND_CHILD, job->name, NULL))
				continue; /* another fork took this number meanwhile */
			return -1;
		}
		container_link_name(pool->sb->uuid, job->region.generation, 0, job->link);
		/* Its maker owns it until the child runs (half_made()). */
		char making[CXLCR_COMMAND_MAX];
		making_command(parent, making, sizeof(making));
		if (cxlcr_region_set_owner(pool, job->region.generation, getpid(), this_host(), making) < 0 ||
		    cxlcr_region_assign_net(pool, job->region.generation, pod_service_first(pod),
					    POD_SERVICE_COUNT, job->link, &job->ip) < 0) {
			cxlcr_region_free(pool, job->region.generation);
			return -1;
		}
		return 0;
	}
	return cxlcr_error("%s has %d children already", parent, CHILD_NUMBER_MAX);
}

/* Logs a background prefetch's outcome where the operator looks. */
static void log_prefetch(const struct child_job *job, pid_t pid, uint64_t pages, double ms, int rc)
{
	mkdir(PREFETCH_LOG_DIR, 0755);
	FILE *f = fopen(PREFETCH_LOG_DIR "/prefetch.log", "ae");
	if (!f)
		return;
	char when[32];
	time_t now = time(NULL);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime(&now));
	if (rc < 0)
		fprintf(f, "%s %s (pid %d on %s): prefetch stopped after %" PRIu64 " pages: %s\n", when, job->name,
			(int)pid, this_host(), pages, cxlcr_last_error());
	else
		fprintf(f, "%s %s (pid %d on %s): %" PRIu64 " changed pages prefetched in %.1f ms\n", when,
			job->name, (int)pid, this_host(), pages, ms);
	fclose(f);
}

/* In a restore worker, once the child runs: how long its restore took,
 * for collect(). */
static void note_restored(const struct child_job *job, uint64_t t0)
{
	double restored = (double)(cxlcr_mono_ns() - t0) / 1e6;
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", job->dir, CXLCR_RESTORE_INFO_FILE);
	FILE *f = fopen(path, "we");
	if (f) {
		fprintf(f, "restored_ms %.3f\n", restored);
		fclose(f);
	}
}

/*
 * The prefetch of a running child (prefetch.c), in a process of its own
 * that outlives the request, started once the request is answered: it
 * stops the child a batch at a time, and neither the answer nor the child's
 * first requests should wait for it. A failed prefetch costs the child
 * speed only: it is logged.
 */
static void start_prefetch(const struct child_job *job, const struct prefetch_list *list,
			   const struct cxlcr_snapshot *snap)
{
	if (!list->pages || list->header.count == 0 || fork() != 0)
		return;
	/* Nothing of the request's (its socket, the client's output) stays
	 * open here: the snapshot is mapped already. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3; fd++)
		dup2(null, fd);
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	uint64_t pages = 0;
	double ms = 0;
	/* The child runs on its own first, for as long as its restore took. */
	int rc = prefetch_child(list, job->pid, snap, (uint64_t)(job->restore_ms * 1e6), &pages, &ms);
	log_prefetch(job, job->pid, pages, ms, rc);
	_exit(0);
}

/* Runs every child's criu restore at once, each in a process of its own;
 * returns when all are done. A worker leaves its error line in its
 * directory. */
static void restore_all(struct child_job *jobs, unsigned n, const struct pod *pod, const char *renamed,
			struct cxlcr_pool *pool)
{
	uint64_t t0 = cxlcr_mono_ns();
	pid_t self = getpid();
	for (unsigned i = 0; i < n; i++) {
		jobs[i].worker = fork();
		if (jobs[i].worker == 0) {
			/* Dies with this worker, and so does its CRIU's keeper,
			 * which then ends the half-restored child. */
			if (exec_die_with(self) < 0)
				_exit(1);
			/* Each child's network namespace, made here so that all are
			 * made at once: its own address and MAC. */
			pid_t pid;
			int netns = -1, rc = container_netns_prepare(jobs[i].link, jobs[i].ip);
			if (rc == 0 && (netns = container_netns_open(jobs[i].link)) < 0)
				rc = cxlcr_error("cannot open the network namespace of %s", jobs[i].name);
			if (rc == 0)
				rc = criu_restore_child(jobs[i].dir, pod->bridge, jobs[i].link, renamed, pool->fd,
							netns, &pid);
			container_netns_release(jobs[i].link, rc < 0);
			if (rc == 0)
				note_restored(&jobs[i], t0);
			if (rc < 0) {
				char path[PATH_MAX + 8];
				snprintf(path, sizeof(path), "%s/error", jobs[i].dir);
				FILE *f = fopen(path, "we");
				if (f) {
					fprintf(f, "%s\n", cxlcr_last_error());
					fclose(f);
				}
			}
			_exit(rc < 0 ? 1 : 0);
		}
	}
	for (unsigned left = n; left;) {
		int status;
		pid_t w = waitpid(-1, &status, 0);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			break;
		for (unsigned i = 0; i < n; i++) {
			if (jobs[i].worker != w)
				continue;
			jobs[i].restore_ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
			jobs[i].ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
			left--;
		}
	}
}

/* The pid CRIU restored a child as, or its error line. */
static int collect(struct child_job *job, char *why, size_t len)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/%s", job->dir, job->ok ? "restored.pid" : "error");
	FILE *f = fopen(path, "re");
	if (job->ok) {
		int p = 0;
		if (!f || fscanf(f, "%d", &p) != 1 || p <= 0) {
			if (f)
				fclose(f);
			snprintf(why, len, "criu restore left no pid in %.400s", path);
			return -1;
		}
		fclose(f);
		job->pid = p;
		snprintf(path, sizeof(path), "%s/%s", job->dir, CXLCR_RESTORE_INFO_FILE);
		double restored;
		if ((f = fopen(path, "re"))) {
			if (fscanf(f, "restored_ms %lf", &restored) == 1)
				job->restore_ms = restored;
			fclose(f);
		}
		return 0;
	}
	why[0] = 0;
	if (!f || !fgets(why, (int)len, f))
		snprintf(why, len, "criu restore of %s failed", job->name);
	if (f)
		fclose(f);
	why[strcspn(why, "\n")] = 0;
	return -1;
}

/* A failed request leaves no child behind: the ones that run are ended. */
static void undo_children(struct cxlcr_pool *pool, struct child_job *jobs, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (jobs[i].pid > 0) {
			kill(jobs[i].pid, SIGKILL);
			pid_wait_exit(jobs[i].pid, KILL_WAIT_MS);
		}
		if (jobs[i].region.generation)
			cxlcr_region_free(pool, jobs[i].region.generation);
	}
	cxlcr_catalog_reap(pool, NULL);
}

/*
 * Makes n children of parent on this host from the snapshot the catalog
 * holds under the parent's name. Prints one "child NAME HOST ADDRESS PID
 * MS" line per child (porcelain) or a sentence each.
 */
static int fork_here(struct cxlcr_pool *pool, const char *parent, unsigned n, bool porcelain,
		     const struct verb_lease *l)
{
	const struct pod *pod = pod_current(false);
	if (!pod)
		return cxlcr_error("%s is not a pod host", this_host());
	uint64_t t0 = cxlcr_mono_ns();
	drop_half_made(pool, parent);
	struct cxlcr_borrow borrow;
	/* Dead children's borrows may hold every slot: reaped, and once more. */
	if (cxlcr_catalog_borrow(pool, parent, NULL, &borrow) < 0 &&
	    (cxlcr_catalog_reap(pool, NULL) < 0 || cxlcr_catalog_borrow(pool, parent, NULL, &borrow) < 0))
		return cxlcr_error("no snapshot of %s to fork from (%s)", parent, cxlcr_last_error());
	int rc = -1;
	struct child_job *jobs = calloc(n, sizeof(*jobs));
	struct cxlcr_snapshot snap = { 0 };
	struct prefetch_list list = { 0 };
	char src[PATH_MAX] = "";
	if (!jobs) {
		cxlcr_error("out of memory");
		goto out;
	}
	if (cxlcr_snapshot_open(pool, borrow.snapshot_generation, &snap) < 0)
		goto out;
	struct cxlcr_region images;
	struct cxlcr_image_set meta;
	if (image_store_find(pool, snap.header.name, &images, &meta) < 0 ||
	    image_work_dir("fork", parent, src, sizeof(src)) < 0 || image_store_fetch(pool, &images, src) < 0)
		goto out;
	char command[CXLCR_COMMAND_MAX];
	child_command(parent, command, sizeof(command));
	for (unsigned i = 0; i < n; i++) {
		struct child_job *job = &jobs[i];
		struct cxlcr_rebase_fork spec = { .snapshot = &snap, .ifname = SERVICE_IFNAME };
		if (child_region(pool, pod, parent, job) < 0 ||
		    image_work_dir("child", job->name, job->dir, sizeof(job->dir)) < 0)
			goto undo;
		spec.child_ip = htonl(job->ip);
		container_mac_of(job->ip, spec.child_mac);
		if (cxlcr_rebase_fork(src, job->dir, &spec, NULL) < 0) {
			cxlcr_error("rebase for %s: %s", job->name, cxlcr_last_error());
			goto undo;
		}
	}
	if (verb_lease_check(l, "the children's restore") < 0)
		goto undo;
	restore_all(jobs, n, pod, image_store_renamed_pool(pool, &meta), pool);
	char why[CXLCR_ERROR_MAX] = "";
	for (unsigned i = 0; i < n; i++) {
		char one[CXLCR_ERROR_MAX];
		if (collect(&jobs[i], one, sizeof(one)) < 0 && !why[0])
			snprintf(why, sizeof(why), "%s: %s", jobs[i].name, one);
	}
	if (why[0]) {
		cxlcr_error("%s", why);
		goto undo;
	}
	/* The children are the parent's fork's only while it holds the lease. */
	if (verb_lease_check(l, "the children's start") < 0)
		goto undo;
	for (unsigned i = 0; i < n; i++)
		cxlcr_region_set_owner(pool, jobs[i].region.generation, jobs[i].pid, this_host(), command);
	double total = (double)(cxlcr_mono_ns() - t0) / 1e6;
	/* The pages the parent changed before its snapshot, the same list for
	 * every child (it came with the dump). */
	int have_list = prefetch_load(src, &snap, &list);
	if (have_list < 0)
		log_prefetch(&jobs[0], jobs[0].pid, 0, 0, -1);
	uint64_t prefetched = have_list > 0 ? list.header.count : 0;
	for (unsigned i = 0; i < n; i++) {
		char ip[16];
		ip_string(jobs[i].ip, ip);
		if (porcelain)
			printf("child %s %s %s %d %.3f %" PRIu64 "\n", jobs[i].name, this_host(), ip,
			       (int)jobs[i].pid, jobs[i].restore_ms, prefetched);
		else
			printf("%s on %s: %s, pid %d, restored in %.1f ms (%" PRIu64
			       " changed pages being prefetched)\n",
			       jobs[i].name, this_host(), ip, (int)jobs[i].pid, jobs[i].restore_ms, prefetched);
	}
	if (porcelain)
		printf("restore_ms %.3f\nimage_bytes %" PRIu64 "\nsnapshot %s\n", total, meta.payload_bytes,
		       snap.header.name);
	/* The children run: the caller has its answer before their prefetch
	 * starts and before the clean-up (work directories, the borrow, the
	 * reap). */
	rpc_reply_now(EXIT_OK);
	for (unsigned i = 0; i < n; i++)
		start_prefetch(&jobs[i], &list, &snap);
	for (unsigned i = 0; i < n; i++)
		image_work_dir_remove(jobs[i].dir);
	rc = 0;
	goto out;
undo:
	undo_children(pool, jobs, n);
out:
	if (snap.base)
		cxlcr_snapshot_close(&snap);
	cxlcr_catalog_return(pool, &borrow);
	/* The borrows of children that have died go, and with them a replaced
	 * snapshot nobody holds any more: after the children run, as freeing
	 * a snapshot's memory takes ~60 ms per GiB. */
	cxlcr_catalog_reap(pool, NULL);
	if (src[0])
		image_work_dir_remove(src);
	free(list.pages);
	free(jobs);
	return rc;
}

int cmd_fork_restore(int argc, char **argv)
{
	const char *usage = "cxlcr fork-restore PARENT --count N --lease LEASE [--porcelain] (run by cxlcr fork "
			    "on the destination host)";
	const struct option opts[] = { { "count", required_argument, 0, 'c' },
				       { "porcelain", no_argument, 0, 'p' },
				       { "lease", required_argument, 0, 'L' },
				       { "help", no_argument, 0, 'h' },
				       { 0, 0, 0, 0 } };
	unsigned count = 1;
	bool porcelain = false;
	const char *lease = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:pL:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': count = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'p': porcelain = true; break;
		case 'L': lease = optarg; break;
		case 'h': printf("usage: %s\n", usage); return EXIT_OK;
		default: return EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || count < 1 || count > FORK_MAX_CHILDREN || !lease)
		return fail(EXIT_USAGE, "usage: %s (N from 1 to %d)", usage, FORK_MAX_CHILDREN);
	if (!cli_host)
		return fail(EXIT_USAGE, "fork-restore runs in a host's daemon; use cxlcr fork");
	/* Only under the lease of the fork that asked: a fork whose caller
	 * gave up must not make children after the next one began. */
	struct cxlcr_pool pool;
	struct service s;
	struct verb_lease l;
	int rc = service_find(&pool, argv[optind], &s);
	if (rc)
		return rc;
	if ((rc = verb_begin(&pool, &s, "fork", lease, &l))) {
		cxlcr_pool_close(&pool);
		return rc;
	}
	rc = fork_here(&pool, argv[optind], count, porcelain, &l);
	verb_lease_release(&l);
	cxlcr_pool_close(&pool);
	if (rc < 0)
		return fail(EXIT_FAIL, "fork of %s on %s failed: %s", argv[optind], this_host(), cxlcr_last_error());
	return EXIT_OK;
}

/* A number from a JSON object printed by one of our verbs. */
static double json_number(const char *text, const char *key)
{
	char pattern[64];
	snprintf(pattern, sizeof(pattern), "\"%s\":", key);
	const char *at = strstr(text, pattern);
	return at ? strtod(at + strlen(pattern), NULL) : 0;
}

/* fork_service() under the parent's lease (lease: its --lease argument). */
static int fork_under_lease(const struct fork_request *req, struct fork_reply *rep, const char *lease)
{
	uint64_t t0 = cxlcr_mono_ns();
	if (req->count < 1 || req->count > FORK_MAX_CHILDREN) {
		snprintf(rep->error, sizeof(rep->error), "count must be from 1 to %d", FORK_MAX_CHILDREN);
		return -1;
	}
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0) {
		snprintf(rep->error, sizeof(rep->error), "%s", cxlcr_last_error());
		return -1;
	}
	struct cxlcr_region parent;
	char owner[CXLCR_HOST_MAX] = "";
	bool found = cxlcr_region_find(&pool, CXLCR_KIND_ARENA, req->service, &parent);
	if (found)
		cxlcr_copy_field(owner, sizeof(owner), parent.owner_host);
	struct cxlcr_catalog_info have;
	bool need_snapshot = req->fresh || cxlcr_catalog_find(&pool, req->service, &have) < 0;
	/* A snapshot whose pages lie in too many runs (recovery points share
	 * their bases' pages without bound) would give children more
	 * mappings than they should have: a full one is taken for them. */
	bool full = false;
	struct cxlcr_snapshot newest;
	if (!need_snapshot && cxlcr_snapshot_open(&pool, have.snapshot_generation, &newest) == 0) {
		full = need_snapshot = newest.header.run_count > CXLCR_SNAPSHOT_INCREMENTAL_RUNS_MAX;
		cxlcr_snapshot_close(&newest);
	}
	cxlcr_pool_close(&pool);
	if (!found) {
		snprintf(rep->error, sizeof(rep->error), "no service named '%s'", req->service);
		return -1;
	}
	if (!rpc_host_up(req->host)) {
		snprintf(rep->error, sizeof(rep->error), "host %s is not up (see cxlcr pod up)", req->host);
		return -1;
	}
	static char out[64 * 1024];
	char why[CXLCR_ERROR_MAX];
	if (need_snapshot) {
		char *argv[] = { "snapshot", (char *)req->service, "--json", "--lease", (char *)lease,
				 full ? "--full" : NULL, NULL };
		if (!rpc_host_up(owner)) {
			snprintf(rep->error, sizeof(rep->error), "service '%s' is not running on a pod host",
				 req->service);
			return -1;
		}
		if (rpc_call_capture(owner, full ? 6 : 5, argv, out, sizeof(out), why, sizeof(why)) != 0) {
			snprintf(rep->error, sizeof(rep->error), "%s", why);
			return -1;
		}
		rep->freeze_ms = json_number(out, "freeze_ms");
		rep->snapshot_ms = json_number(out, "snapshot_ms");
		rep->snapshot_bytes = (uint64_t)json_number(out, "snapshot_bytes");
	}
	char count[16];
	snprintf(count, sizeof(count), "%u", req->count);
	char *argv[] = { "fork-restore", (char *)req->service, "--count", count, "--porcelain", "--lease",
			 (char *)lease, NULL };
	if (rpc_call_capture(req->host, 7, argv, out, sizeof(out), why, sizeof(why)) != 0) {
		snprintf(rep->error, sizeof(rep->error), "%s", why);
		return -1;
	}
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		struct fork_child *ch = &rep->child[rep->count];
		char ip[16];
		int pid;
		if (rep->count < FORK_MAX_CHILDREN &&
		    sscanf(line, "child %63s %63s %15s %d %lf %" SCNu64, ch->name, ch->host, ip, &pid,
			   &ch->restore_ms, &ch->prefetched_pages) == 6) {
			inet_pton(AF_INET, ip, &ch->ip);
			ch->pid = pid;
			rep->count++;
		} else if (sscanf(line, "restore_ms %lf", &rep->restore_ms) == 1 ||
			   sscanf(line, "image_bytes %" SCNu64, &rep->image_bytes) == 1 ||
			   sscanf(line, "snapshot %63s", rep->snapshot) == 1) {
			continue;
		}
	}
	rep->total_ms = (double)(cxlcr_mono_ns() - t0) / 1e6;
	if (rep->count != req->count) {
		snprintf(rep->error, sizeof(rep->error), "%s answered with %u of %u children", req->host,
			 rep->count, req->count);
		return -1;
	}
	return 0;
}

/* A fork is a verb on its parent: it holds the parent's lease throughout,
 * and hands it to the snapshot it asks for. */
int fork_service(const struct fork_request *req, struct fork_reply *rep)
{
	memset(rep, 0, sizeof(*rep));
	struct cxlcr_pool pool;
	if (cxlcr_pool_open(&pool, cxlcr_pool_path()) < 0) {
		snprintf(rep->error, sizeof(rep->error), "%s", cxlcr_last_error());
		return -1;
	}
	struct cxlcr_region parent;
	struct verb_lease l = { 0 };
	if (cxlcr_region_find(&pool, CXLCR_KIND_ARENA, req->service, &parent)) {
		struct service s;
		service_load(&pool, &parent, &s);
		cxlcr_error("service '%s' is gone", req->service);
		if (verb_begin(&pool, &s, "fork", NULL, &l) != 0) {
			snprintf(rep->error, sizeof(rep->error), "%s", cxlcr_last_error());
			cxlcr_pool_close(&pool);
			return -1;
		}
	}
	cxlcr_pool_close(&pool);
	char lease[48];
	verb_lease_arg(&l, lease, sizeof(lease));
	int rc = fork_under_lease(req, rep, lease);
	verb_lease_release(&l);
	return rc;
}
