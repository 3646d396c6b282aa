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
#include <pthread.h>
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
#include "../pager/ahead.h"
#include "../pager/pager.h"
#include "../tier/tier.h"
#include "cli.h"
#include "container.h"
#include "criu.h"
#include "fork.h"
#include "host_files.h"
#include "../control/fence.h"
#include "exec.h"
#include "image_store.h"
#include "rpc.h"
#include "rpc_tcp.h"

#define CHILD_NUMBER_MAX 9999
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
	uint64_t installed_pages;     /* copy mode: installed by its pager before it ran */
	bool ok;
};

/* What `cxlcr ps` shows for a child being made, and once it runs. */
static void making_command(const char *parent, char *out, size_t len)
{
	snprintf(out, len, "forking %.38s", parent);
}

static void child_command(const char *parent, bool copy, char *out, size_t len)
{
	if (copy)
		snprintf(out, len, "fork of %.28s, copy mode", parent);
	else
		snprintf(out, len, "fork of %.38s", parent);
}

int fork_mode_parse(const char *s)
{
	if (!s)
		return FORK_MODE_DEFAULT;
	if (!strcmp(s, "share"))
		return FORK_MODE_SHARE;
	if (!strcmp(s, "copy"))
		return FORK_MODE_COPY;
	return -1;
}

const char *fork_mode_name(int mode)
{
	return mode == FORK_MODE_COPY ? "copy" : mode == FORK_MODE_SHARE ? "share" : NULL;
}

/*
 * The children a dead maker left half made: a fork-restore worker killed
 * (or its host crashed), or stalled and killed past its deadline, between
 * a child's region and the child made a service (its region's owner). A
 * child whose CRIU was still at work died with it (the keeper ends the
 * half-restored tasks); one that CRIU had restored runs on, in its network
 * namespace, whose name its maker gives up only once the child is made:
 * whatever runs there is ended. Then the namespace and the region go.
 * parent NULL: the children of every parent (the daemon, once a worker of
 * its died); else run under the parent's lease (no other fork of it is
 * under way). On the children's host. Returns how many were dropped.
 */
int fork_drop_half_made(struct cxlcr_pool *pool, const char *parent)
{
	char making[CXLCR_COMMAND_MAX];
	making_command(parent ? parent : "", making, sizeof(making));
	int dropped = 0;
	for (uint32_t i = 0; i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r = pool->table[i];
		if (r.state != CXLCR_REGION_LIVE || r.kind != CXLCR_KIND_CHILD ||
		    strncmp(r.command, making, parent ? sizeof(r.command) : strlen(making)) ||
		    strncmp(r.owner_host, this_host(), CXLCR_HOST_MAX) || pid_alive(r.owner_pid))
			continue;
		char link[16];
		container_link_name(pool->sb->uuid, r.generation, 0, link);
		container_netns_end_tasks(link, KILL_WAIT_MS);
		container_netns_release(link, true);
		if (cxlcr_region_free(pool, r.generation) == 0)
			dropped++;
	}
	return dropped;
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
		/* Its maker owns it, from its birth, until the child is made
		 * (fork_drop_half_made()). */
		char making[CXLCR_COMMAND_MAX];
		making_command(parent, making, sizeof(making));
		if (cxlcr_region_alloc_owned(pool, CXLCR_KIND_CHILD, job->name, CXLCR_POOL_ALIGN, getpid(), this_host(),
					     making, &job->region) < 0) {
			if (cxlcr_region_find(pool, CXLCR_KIND_CHILD, job->name, NULL))
				continue; /* another fork took this number meanwhile */
			return -1;
		}
		container_link_name(pool->sb->uuid, job->region.generation, 0, job->link);
		if (cxlcr_region_assign_net(pool, job->region.generation, pod_service_first(pod),
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
	if (rc < 0)
		host_log_line("prefetch.log", "%s (pid %d on %s): prefetch stopped after %" PRIu64 " pages: %s",
			      job->name, (int)pid, this_host(), pages, cxlcr_last_error());
	else
		host_log_line("prefetch.log", "%s (pid %d on %s): %" PRIu64 " changed pages prefetched in %.1f ms",
			      job->name, (int)pid, this_host(), pages, ms);
}

/* In a restore worker, once the child runs: how long its restore took,
 * for collect(). */
/* What a restore worker tells the fork (collect()): the child's pid, in
 * restored.pid, and how long its restore took. */
static int note_restored(const struct child_job *job, pid_t pid, uint64_t t0)
{
	double restored = (double)(cxlcr_mono_ns() - t0) / 1e6;
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", job->dir, CXLCR_RESTORE_INFO_FILE);
	FILE *f = fopen(path, "we");
	if (f) {
		fprintf(f, "restored_ms %.3f\n", restored);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/restored.pid", job->dir);
	if (!(f = fopen(path, "we")))
		return cxlcr_error("%s: %s", path, strerror(errno));
	bool ok = fprintf(f, "%d\n", (int)pid) > 0;
	return fclose(f) == 0 && ok ? 0 : cxlcr_error("%s: cannot be written", path);
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
			struct cxlcr_pool *pool, bool copy)
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
				rc = criu_restore_child(jobs[i].dir, jobs[i].name, pod->bridge, jobs[i].link, renamed,
							pool->fd, netns, copy, &pid);
			/* A restored child keeps its namespace's name until it is
			 * made (fork_here()): whoever drops it half made finds it
			 * by that name. */
			if (rc == 0)
				rc = note_restored(&jobs[i], pid, t0);
			if (rc < 0) {
				container_netns_release(jobs[i].link, true);
				host_wd_remove(jobs[i].name);
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
		if (jobs[i].link[0])
			container_netns_release(jobs[i].link, true);
		if (jobs[i].region.generation)
			cxlcr_region_free(pool, jobs[i].region.generation);
	}
	cxlcr_catalog_reap(pool, NULL);
}

/* How many runs a child that shares its snapshot's pages may map:
 * CXLCR_SNAPSHOT_INCREMENTAL_RUNS_MAX, or $CXLCR_FORK_SHARE_RUNS_MAX (tests
 * lower it to reach it with a small heap). */
static uint64_t fork_share_runs_max(void)
{
	const char *v = getenv("CXLCR_FORK_SHARE_RUNS_MAX");
	char *end;
	unsigned long long n = v && *v ? strtoull(v, &end, 10) : 0;
	return n && !*end && n <= CXLCR_SNAPSHOT_INCREMENTAL_RUNS_MAX ? n : CXLCR_SNAPSHOT_INCREMENTAL_RUNS_MAX;
}

/* Whether the newest snapshot of service has more runs than a child that
 * shares its pages should map (rebase/mm.c maps each run). */
static bool too_many_runs(struct cxlcr_pool *pool, const char *service)
{
	struct cxlcr_catalog_info have;
	struct cxlcr_snapshot newest;
	bool many = false;
	if (cxlcr_catalog_find(pool, service, &have) == 0 &&
	    cxlcr_snapshot_open(pool, have.snapshot_generation, &newest) == 0) {
		many = newest.header.run_count > fork_share_runs_max();
		cxlcr_snapshot_close(&newest);
	}
	return many;
}

/* libfabric started in this process while the images are fetched and
 * rebased (tier_warm): the pagers of a tiered snapshot's children, forked
 * from it, inherit it started instead of paying ~0.4 s each before their
 * child runs. The thread is joined before anything is forked. */
struct warm_up {
	pthread_t thread;
	bool running;
	char pool_path[PATH_MAX];
};

static void *warm_main(void *arg)
{
	struct warm_up *w = arg;
	struct cxlcr_pool own; /* its own handle: the caller's is in use */
	if (cxlcr_pool_open(&own, w->pool_path) == 0) {
		tier_warm(&own, false);
		cxlcr_pool_close(&own);
	}
	return NULL;
}

static void warm_start(struct warm_up *w, const struct cxlcr_pool *pool)
{
	cxlcr_copy_field(w->pool_path, sizeof(w->pool_path), pool->path);
	w->running = pthread_create(&w->thread, NULL, warm_main, w) == 0;
}

static void warm_join(struct warm_up *w)
{
	if (w->running)
		pthread_join(w->thread, NULL);
	w->running = false;
}

/*
 * The pagers of n copy-mode children, all started before any is waited
 * for: each takes its child's userfaultfd, opens its cold tier's reader
 * and installs its hot pages side by side with the others (one after the
 * other, 8 children of a tiered snapshot took 8 times one). Started with
 * early, before the children are restored (pager_give_pid()): their
 * connections to the memory server are made while CRIU restores them.
 * pagers_wait() gives them their children's pids if they do not have
 * them, and returns 0 once every child runs; -1 with the first reason
 * (the children of pagers that failed are dead with them; the caller ends
 * the others). pagers_end() ends pagers whose children were not restored.
 */
struct pagers {
	struct pager_child *pc;
	struct pager_handle *ph;
	unsigned spawned;
};

/* Whether the process of the checkpoint in dir was stopped (an operator's
 * SIGSTOP) when it was taken. A share-mode child comes back so by CRIU on
 * its own; a copy-mode child is let run by its pager, which must know. */
static bool root_was_stopped(const char *dir)
{
	static pid_t stopped[EXEC_HELD_STOPPED_MAX];
	size_t n;
	pid_t root;
	if (cxlcr_rebase_stopped_tasks(dir, stopped, EXEC_HELD_STOPPED_MAX, &n, &root) < 0) {
		fprintf(stderr, "cxlcr: warning: %s: its children run\n", cxlcr_last_error());
		return false;
	}
	for (size_t i = 0; i < n; i++)
		if (stopped[i] == root)
			return true;
	return false;
}

static int pagers_spawn(struct pagers *g, struct child_job *jobs, unsigned n, const struct cxlcr_snapshot *snap,
			int fetch, const uint64_t *hot, uint64_t hot_count, struct cold_ahead *ahead, bool early,
			bool stay_stopped)
{
	g->pc = calloc(n, sizeof(*g->pc));
	g->ph = calloc(n, sizeof(*g->ph));
	g->spawned = 0;
	if (!g->pc || !g->ph)
		return cxlcr_error("out of memory");
	for (unsigned i = 0; i < n; i++) {
		g->pc[i] = (struct pager_child){ .pid = early ? 0 : jobs[i].pid, .name = jobs[i].name,
						 .host = this_host(), .region_generation = jobs[i].region.generation,
						 .snapshot = snap, .fetch = fetch, .hot = hot, .hot_count = hot_count,
						 .ahead = ahead_on(ahead) ? ahead : NULL, .stay_stopped = stay_stopped };
		if (pager_spawn(&g->pc[i], &g->ph[i]) < 0)
			return -1;
		g->spawned++;
	}
	return 0;
}

static int pagers_wait(struct pagers *g, struct child_job *jobs, unsigned n)
{
	int rc = g->spawned == n ? 0 : -1;
	char why[CXLCR_ERROR_MAX] = "";
	for (unsigned i = 0; i < g->spawned; i++) {
		g->pc[i].pid = jobs[i].pid;
		pager_give_pid(&g->ph[i], jobs[i].pid);
	}
	for (unsigned i = 0; i < g->spawned; i++) {
		struct pager_stats ps;
		if (pager_wait(&g->pc[i], &g->ph[i], &ps) < 0) {
			if (!why[0])
				snprintf(why, sizeof(why), "%s", cxlcr_last_error());
			rc = -1;
			continue;
		}
		jobs[i].installed_pages = ps.pages_installed;
		jobs[i].restore_ms += ps.install_ms;
	}
	if (why[0])
		cxlcr_error("%s", why);
	g->spawned = 0;
	return rc;
}

static void pagers_end(struct pagers *g)
{
	for (unsigned i = 0; i < g->spawned; i++)
		pager_give_pid(&g->ph[i], 0);
	g->spawned = 0;
	free(g->pc);
	free(g->ph);
	g->pc = NULL;
	g->ph = NULL;
}

/* Forks the one fetcher of a tiered snapshot's cold pages for several
 * copy-mode children (pager/ahead.h), before their pagers, unless
 * cold_ahead_mb ($CXLCR_COLD_AHEAD_MB) is 0: the pagers then fetch them
 * all, as they do if it cannot start (said in the pager log). */
static void fetch_ahead(const struct cxlcr_snapshot *snap, struct cold_ahead *ahead, const struct child_job *job)
{
	int64_t limit = ahead_limit();
	if (limit > 0 && ahead_start(snap, (uint64_t)limit, ahead) == 0)
		return;
	if (limit != 0)
		host_log_line("pager.log", "%s: no fetch ahead of its cold pages: %s", job->name, cxlcr_last_error());
}

/*
 * Makes n children of parent on this host from the snapshot the catalog
 * holds under the parent's name. Prints one "child NAME HOST ADDRESS PID
 * MS" line per child (porcelain) or a sentence each.
 */
static int fork_here(struct cxlcr_pool *pool, const char *parent, unsigned n, int mode, int fetch,
		     bool porcelain, const struct verb_lease *l)
{
	const struct pod *pod = pod_current(false);
	if (!pod)
		return cxlcr_error("%s is not a pod host", this_host());
	uint64_t t0 = cxlcr_mono_ns();
	fork_drop_half_made(pool, parent);
	struct cxlcr_borrow borrow;
	/* Dead children's borrows may hold every slot: reaped, and once more. */
	if (cxlcr_catalog_borrow(pool, parent, NULL, &borrow) < 0 &&
	    (cxlcr_catalog_reap(pool, NULL) < 0 || cxlcr_catalog_borrow(pool, parent, NULL, &borrow) < 0))
		return cxlcr_error("no snapshot of %s to fork from (%s)", parent, cxlcr_last_error());
	int rc = -1;
	struct child_job *jobs = calloc(n, sizeof(*jobs));
	struct cxlcr_snapshot snap = { 0 };
	struct warm_up warm = { 0 };
	struct prefetch_list list = { 0 };
	struct cold_ahead ahead = { .pidfd = -1 };
	struct pagers pagers = { 0 };
	char src[PATH_MAX] = "";
	if (!jobs) {
		cxlcr_error("out of memory");
		goto out;
	}
	if (cxlcr_snapshot_open(pool, borrow.snapshot_generation, &snap) < 0)
		goto out;
	if (snap.header.pages_cold > 0)
		warm_start(&warm, pool);
	struct cxlcr_region images;
	struct cxlcr_image_set meta;
	if (image_store_find(pool, snap.header.name, &images, &meta) < 0 ||
	    image_work_dir("fork", parent, src, sizeof(src)) < 0 || image_store_fetch(pool, &images, src) < 0)
		goto out;
	/* A devdax pool cannot be mapped privately: its children are copies.
	 * So are those of a snapshot whose pages lie in more runs than a
	 * child should have mappings (scattered writes over a large heap
	 * since an incremental snapshot's bases): the requester takes a full
	 * snapshot for children that share (fork_under_lease), but a newer
	 * one may have been published since. */
	bool cold = snap.header.pages_cold > 0; /* a cold page cannot be mapped at all */
	bool copy = mode == FORK_MODE_COPY ||
		    (mode == FORK_MODE_DEFAULT &&
		     (pool->dax_rules || cold || snap.header.run_count > fork_share_runs_max()));
	if (!copy && cxlcr_pool_may_map_private(pool) < 0) {
		cxlcr_error("%s: its children can only be copies (--mode copy)", cxlcr_last_error());
		goto out;
	}
	if (!copy && cold) {
		cxlcr_error("snapshot %s keeps %" PRIu64 " pages on the cold tier: its children can only be "
			    "copies (--mode copy)", snap.header.name, snap.header.pages_cold);
		goto out;
	}
	char command[CXLCR_COMMAND_MAX];
	child_command(parent, copy, command, sizeof(command));
	for (unsigned i = 0; i < n; i++) {
		struct child_job *job = &jobs[i];
		struct cxlcr_rebase_fork spec = { .snapshot = &snap, .ifname = SERVICE_IFNAME, .copy = copy };
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
	bool stay_stopped = copy && n && root_was_stopped(jobs[0].dir);
	warm_join(&warm);
	if (fetch < 0)
		fetch = pager_fetch_parse(getenv(PAGER_FETCH_ENV));
	if (fetch < 0)
		fetch = PAGER_BACKGROUND;
	/* The pages the parent changed before its snapshot, the same list for
	 * every child (it came with the dump): prefetched into a share-mode
	 * child once it runs, a copy-mode child's hot pages. */
	int have_list = prefetch_load(src, &snap, &list);
	/* Children of a tiered snapshot: their pagers start first, and their
	 * connections to the memory server, which each child waits for
	 * before it runs, are made during their restore (pagers_spawn()).
	 * Several children share one fetch ahead of their cold pages
	 * (fetch_ahead()), forked before their pagers, which inherit it; it
	 * reads nothing before they run (ahead_go()). */
	bool early = copy && cold;
	if (early && fetch == PAGER_BACKGROUND && n > 1)
		fetch_ahead(&snap, &ahead, &jobs[0]);
	if (early && pagers_spawn(&pagers, jobs, n, &snap, fetch, have_list > 0 ? list.pages : NULL,
				  have_list > 0 ? list.header.count : 0, &ahead, true, stay_stopped) < 0)
		goto undo;
	restore_all(jobs, n, pod, image_store_renamed_pool(pool, &meta), pool, copy);
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
	if (have_list < 0)
		log_prefetch(&jobs[0], jobs[0].pid, 0, 0, -1);
	/* Copy mode: each child is stopped until its pager has installed its
	 * pages (and dies with its pager). */
	if (copy && !early &&
	    pagers_spawn(&pagers, jobs, n, &snap, fetch, have_list > 0 ? list.pages : NULL,
			 have_list > 0 ? list.header.count : 0, &ahead, false, stay_stopped) < 0)
		goto undo;
	if (copy && pagers_wait(&pagers, jobs, n) < 0)
		goto undo;
	ahead_go(&ahead);
	ahead_release(&ahead); /* the fetcher and the pagers have it */
	/* Made: each child owns its region, and its namespace needs no name. */
	for (unsigned i = 0; i < n; i++) {
		cxlcr_region_set_owner(pool, jobs[i].region.generation, jobs[i].pid, this_host(), command);
		container_netns_release(jobs[i].link, false);
	}
	double total = (double)(cxlcr_mono_ns() - t0) / 1e6;
	uint64_t prefetched = have_list > 0 && !copy ? list.header.count : 0;
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
		printf("restore_ms %.3f\nimage_bytes %" PRIu64 "\nsnapshot %s\nmode %s\n", total, meta.payload_bytes,
		       snap.header.name, copy ? "copy" : "share");
	/* The children run: the caller has its answer before their prefetch
	 * starts and before the clean-up (work directories, the borrow, the
	 * reap). */
	rpc_reply_now(EXIT_OK);
	for (unsigned i = 0; !copy && i < n; i++)
		start_prefetch(&jobs[i], &list, &snap);
	for (unsigned i = 0; i < n; i++)
		image_work_dir_remove(jobs[i].dir);
	rc = 0;
	goto out;
undo:
	warm_join(&warm);
	pagers_end(&pagers);
	ahead_stop(&ahead);
	undo_children(pool, jobs, n);
out:
	warm_join(&warm);
	pagers_end(&pagers);
	ahead_release(&ahead);
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
	const char *usage = "cxlcr fork-restore PARENT --count N --lease LEASE [--mode share|copy] "
			    "[--fetch background|eager|lazy] [--porcelain] (run by cxlcr fork on the destination host)";
	const struct option opts[] = { { "count", required_argument, 0, 'c' },
				       { "mode", required_argument, 0, 'm' },
				       { "fetch", required_argument, 0, 'f' },
				       { "porcelain", no_argument, 0, 'p' },
				       { "lease", required_argument, 0, 'L' },
				       { "help", no_argument, 0, 'h' },
				       { 0, 0, 0, 0 } };
	unsigned count = 1;
	bool porcelain = false;
	const char *lease = NULL;
	int c, mode = FORK_MODE_DEFAULT, fetch = -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:m:f:pL:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': count = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'm':
			if ((mode = fork_mode_parse(optarg)) < 0)
				return fail(EXIT_USAGE, "--mode %s: share or copy", optarg);
			break;
		case 'f':
			if ((fetch = pager_fetch_parse(optarg)) < 0)
				return fail(EXIT_USAGE, "--fetch %s: background, eager or lazy", optarg);
			break;
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
	rc = fork_here(&pool, argv[optind], count, mode, fetch, porcelain, &l);
	verb_lease_release(&l);
	cxlcr_pool_close(&pool);
	if (rc < 0)
		return fail(EXIT_FAIL, "fork of %s on %s failed: %s", argv[optind], this_host(), cxlcr_last_error());
	return EXIT_OK;
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
	/* A snapshot whose pages lie in too many runs (snapshots share their
	 * bases' pages without bound) would give children that share its
	 * pages more mappings than they should have: a full one is taken for
	 * them. Copies (copy mode, the default on devdax) map none of it. */
	bool shares = req->mode == FORK_MODE_SHARE || (req->mode == FORK_MODE_DEFAULT && !pool.dax_rules);
	bool full = false;
	if (!need_snapshot && shares)
		full = need_snapshot = too_many_runs(&pool, req->service);
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
		rep->freeze_ms = json_find_number(out, "freeze_ms");
		rep->snapshot_ms = json_find_number(out, "snapshot_ms");
		rep->snapshot_bytes = (uint64_t)json_find_number(out, "snapshot_bytes");
		/* A fresh incremental one may have too many runs for sharing. */
		if (!full && shares && cxlcr_pool_open(&pool, cxlcr_pool_path()) == 0) {
			full = too_many_runs(&pool, req->service);
			cxlcr_pool_close(&pool);
			argv[5] = "--full";
			if (full && rpc_call_capture(owner, 6, argv, out, sizeof(out), why, sizeof(why)) != 0) {
				snprintf(rep->error, sizeof(rep->error), "%s", why);
				return -1;
			}
			if (full) {
				rep->freeze_ms += json_find_number(out, "freeze_ms");
				rep->snapshot_ms += json_find_number(out, "snapshot_ms");
				rep->snapshot_bytes = (uint64_t)json_find_number(out, "snapshot_bytes");
			}
		}
	}
	char count[16];
	snprintf(count, sizeof(count), "%u", req->count);
	const char *mode = fork_mode_name(req->mode);
	char *argv[12] = { "fork-restore", (char *)req->service, "--count", count, "--porcelain", "--lease",
			   (char *)lease };
	int argc = 7;
	if (mode) {
		argv[argc++] = "--mode";
		argv[argc++] = (char *)mode;
	}
	if (req->fetch[0]) {
		argv[argc++] = "--fetch";
		argv[argc++] = (char *)req->fetch;
	}
	if (rpc_call_capture(req->host, argc, argv, out, sizeof(out), why, sizeof(why)) != 0) {
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
			   sscanf(line, "snapshot %63s", rep->snapshot) == 1 ||
			   sscanf(line, "mode %7s", rep->mode) == 1) {
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
