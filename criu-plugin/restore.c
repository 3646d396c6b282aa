/*
 * Restore: check a checkpoint's arena records against the pool of this
 * host, then take the arenas over before the restored tasks run.
 *
 * A record is followed only if it is of this pool (uuid), its region is
 * still the one that was dumped (generation) and nobody took the region
 * over since (owner epoch). The take-over itself is a compare-and-set of
 * the epoch under the pool lock, so of several restores of one checkpoint
 * exactly one gets the arena; the others, and any later one, are refused.
 */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/arena.h"
#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/persist.h"
#include "../common/pool.h"
#include "../common/record.h"
#include "../common/util.h"
#include "plugin.h"

/* The regions this restore has taken over: another task of the same tree
 * that maps one of them (a child sharing its parent's arena) finds the
 * epoch already moved on, by us. */
#define CLAIMS_MAX 256
static struct claim {
	uint64_t generation;
	uint64_t from_epoch, to_epoch;
} claims[CLAIMS_MAX];
static size_t nclaims;

void restore_forget_claims(void)
{
	nclaims = 0;
}

static const struct claim *claimed_by_us(const struct cxlcr_arena_record *rec)
{
	for (size_t i = 0; i < nclaims; i++)
		if (claims[i].generation == rec->region_generation &&
		    claims[i].from_epoch == rec->owner_epoch)
			return &claims[i];
	return NULL;
}

/*
 * A recovery point's dump is taken with its tasks left running, which a
 * restore refuses (live_source.c): the heap has moved on since. Unless the
 * daemon has just made the heap what it was at that point
 * (recovery/restore_point.c) and says which point it restores
 * ($CXLCR_RECOVERY_POINT, the point's snapshot region): the arena's header
 * must name the same point.
 */
static bool reset_for_recovery(struct cxlcr_pool *pool, const struct cxlcr_arena_record *rec,
			       const struct cxlcr_region *r)
{
	const char *point = getenv("CXLCR_RECOVERY_POINT");
	if (!point || !*point || !(rec->flags & CXLCR_RECORD_F_LIVE_SOURCE) ||
	    (rec->region_kind != CXLCR_KIND_ARENA && rec->region_kind != CXLCR_KIND_EXTENT))
		return false;
	uint64_t want = strtoull(point, NULL, 10);
	/* An extent (a heap that grew: "ARENA.extN") is reset with its arena,
	 * whose header vouches for it: it lists the extent, and names the
	 * point. */
	struct cxlcr_region arena = *r;
	if (rec->region_kind == CXLCR_KIND_EXTENT) {
		char name[CXLCR_NAME_MAX];
		if (!cxlcr_extent_arena(r->name, name, sizeof(name)) ||
		    !cxlcr_region_find(pool, CXLCR_KIND_ARENA, name, &arena))
			return false;
	}
	const struct cxlcr_arena_header *h = cxlcr_pool_map(pool, arena.offset, sizeof(*h), 0, 0);
	if (!h)
		return false;
	cxlcr_refresh(h, sizeof(*h));
	bool ok = want && h->magic == CXLCR_ARENA_MAGIC && h->region_generation == arena.generation &&
		  __atomic_load_n(&h->restored_from, __ATOMIC_ACQUIRE) == want;
	if (ok && rec->region_kind == CXLCR_KIND_EXTENT) {
		bool listed = false;
		for (uint32_t k = 1; k < h->extent_count && k < CXLCR_ARENA_EXTENTS_MAX && !listed; k++)
			listed = h->extents[k].generation == r->generation;
		ok = listed;
	}
	munmap((void *)(uintptr_t)h, sizeof(*h));
	return ok;
}

/* Is this record still the truth about the pool? One message per reason,
 * each naming the arena. */
int restore_check_record(struct cxlcr_pool *pool, const struct cxlcr_arena_record *rec)
{
	const char *name = rec->region_name;
	char want[40], have[40];
	if (memcmp(rec->pool_uuid, pool->sb->uuid, sizeof(rec->pool_uuid)))
		return cxlcr_error("arena %s: record is from another pool (uuid %s; pool %s is %s)",
				   name, cxlcr_uuid_str(rec->pool_uuid, want), pool->path,
				   cxlcr_uuid_str(pool->sb->uuid, have));
	struct cxlcr_region r;
	if (cxlcr_region_get(pool, rec->region_generation, &r) < 0) {
		struct cxlcr_region now;
		if (cxlcr_region_find(pool, rec->region_kind, name, &now))
			return cxlcr_error("checkpoint is stale: arena %s was freed and made again "
					   "(generation %" PRIu64 ", now %" PRIu64 ")",
					   name, rec->region_generation, now.generation);
		return cxlcr_error("arena %s: its region is gone from pool %s (generation %" PRIu64 ")",
				   name, pool->path, rec->region_generation);
	}
	if (r.offset != rec->region_offset || r.size != rec->region_size)
		return cxlcr_error("arena %s: region at %" PRIu64 "+%" PRIu64 ", record says %" PRIu64
				   "+%" PRIu64, name, r.offset, r.size, rec->region_offset,
				   rec->region_size);
	const struct claim *c = claimed_by_us(rec);
	if (r.owner_epoch != rec->owner_epoch && !(c && r.owner_epoch == c->to_epoch))
		return cxlcr_error("checkpoint is stale: arena %s was taken over (epoch %" PRIu64
				   ", now %" PRIu64 ")", name, rec->owner_epoch, r.owner_epoch);
	return c || reset_for_recovery(pool, rec, &r) ? 0 : live_source_check(rec, &r);
}

/* restore_precheck()'s pass over the record files. The pool is opened only
 * if there are records: a checkpoint without arenas needs none. */
struct precheck {
	const char *pool_path;
	struct cxlcr_pool pool;
	bool opened;
	int records;
};

static int precheck_file(int dirfd, const char *file, struct cxlcr_arena_record *recs, size_t n, void *arg)
{
	struct precheck *p = arg;
	if (!p->opened) {
		if (cxlcr_pool_open(&p->pool, p->pool_path) < 0)
			return -1;
		p->opened = true;
	}
	for (size_t i = 0; i < n; i++)
		if ((recs[i].flags & CXLCR_RECORD_F_FORK ? fork_check_record(&p->pool, &recs[i])
							 : restore_check_record(&p->pool, &recs[i])) < 0)
			return -1;
	p->records += (int)n;
	return 0;
}

int restore_precheck(int dirfd, const char *pool_path, int *records)
{
	struct precheck p = { .pool_path = pool_path, .pool = { .fd = -1 } };
	int rc = cxlcr_arena_records_each(dirfd, precheck_file, &p);
	if (p.opened)
		cxlcr_pool_close(&p.pool);
	*records = p.records;
	return rc;
}

/* The restored task maps the region where the record says, at the same
 * device offset: CRIU re-created the mapping at its captured address. (The
 * kernel may have merged it with a neighbouring mapping of the pool.) */
static int check_mapped(const struct pool_mapping *maps, size_t n, pid_t pid,
			const struct cxlcr_arena_record *rec)
{
	uint64_t addr = rec->map_address, len = rec->map_length;
	for (size_t i = 0; i < n; i++) {
		const struct pool_mapping *m = &maps[i];
		if (addr >= m->start && addr < m->end && len <= m->end - addr &&
		    m->pgoff + (addr - m->start) == rec->map_pgoff)
			return 0;
	}
	return cxlcr_error("arena %s: restored task %d does not map it at 0x%" PRIx64 " (%" PRIu64
			   " bytes of pool offset %" PRIu64 ")", rec->region_name, (int)pid,
			   rec->map_address, rec->map_length, rec->map_pgoff);
}

/* One restored task's records and where it maps the pool. */
struct task {
	pid_t pid;
	pid_t nspid;
	struct cxlcr_arena_record *recs;
	ssize_t n;
	struct pool_mapping *maps;
	size_t nmaps;
};

static int by_nspid(const void *a, const void *b)
{
	const struct task *x = a, *y = b;
	return x->nspid < y->nspid ? -1 : x->nspid > y->nspid;
}

/* Task t's records (none: t->n is 0). */
static int read_task(int dirfd, struct task *t)
{
	if (proc_innermost_nspid(t->pid, &t->nspid) < 0)
		return -1;
	char name[64];
	t->n = cxlcr_arena_records_read(dirfd, cxlcr_arena_record_name(name, sizeof(name), t->nspid), &t->recs);
	return t->n < 0 ? -1 : 0;
}

/* Checks task t's records, and that it maps its arenas where they say.
 * Takes nothing. */
static int check_task(struct cxlcr_pool *pool, struct task *t)
{
	bool arenas = false;
	for (ssize_t i = 0; i < t->n; i++)
		arenas |= !(t->recs[i].flags & CXLCR_RECORD_F_FORK);
	/* A fork child's view of a snapshot is many private mappings
	 * (rebase/, hundreds for a large heap, whose maps are not read): its
	 * snapshot was checked by restore_precheck(), and is borrowed rather
	 * than taken over (the borrow fails if the catalog no longer holds
	 * it). */
	struct pool_id id;
	if (arenas && (pool_id_of(pool, &id) < 0 || proc_pool_mappings(t->pid, &id, &t->maps, &t->nmaps) < 0))
		return -1;
	for (ssize_t i = 0; i < t->n; i++) {
		if (!(t->recs[i].flags & CXLCR_RECORD_F_FORK) &&
		    (restore_check_record(pool, &t->recs[i]) < 0 ||
		     check_mapped(t->maps, t->nmaps, t->pid, &t->recs[i]) < 0))
			return -1;
	}
	return 0;
}

/*
 * Takes over every arena the tree's records name (once each: tasks that
 * share an arena record it each), for the first task that maps it, in one
 * step under the pool lock: either all or none (common/pool.h). Task by
 * task, a later arena that had changed owner in the meantime left the
 * earlier ones taken by a tree that is then killed, and its checkpoint
 * stale for them.
 */
static int claim_all(struct cxlcr_pool *pool, const struct task *tasks, size_t count)
{
	uint64_t gens[CLAIMS_MAX], from[CLAIMS_MAX];
	int32_t pids[CLAIMS_MAX];
	static struct cxlcr_region now[CLAIMS_MAX];
	const char *names[CLAIMS_MAX];
	size_t n = 0;
	for (size_t k = 0; k < count; k++)
		for (ssize_t i = 0; i < tasks[k].n; i++) {
			const struct cxlcr_arena_record *rec = &tasks[k].recs[i];
			if ((rec->flags & CXLCR_RECORD_F_FORK) || claimed_by_us(rec))
				continue;
			bool seen = false;
			for (size_t j = 0; j < n && !seen; j++)
				seen = gens[j] == rec->region_generation && from[j] == rec->owner_epoch;
			if (seen)
				continue;
			if (n + nclaims == CLAIMS_MAX)
				return cxlcr_error("arena %s: more than %d arenas in one restore", rec->region_name,
						   CLAIMS_MAX);
			gens[n] = rec->region_generation;
			from[n] = rec->owner_epoch;
			pids[n] = tasks[k].pid;
			names[n] = rec->region_name;
			n++;
		}
	if (n == 0)
		return 0;
	if (cxlcr_region_claim_epochs(pool, n, gens, from, pids, cxlcr_host_name(), now) < 0) {
		for (size_t j = 0; j < n; j++)
			if (now[j].generation == gens[j] && now[j].owner_epoch != from[j])
				return cxlcr_error("checkpoint is stale: arena %s was taken over (epoch %" PRIu64
						   ", now %" PRIu64 ")", names[j], from[j], now[j].owner_epoch);
		return -1;
	}
	for (size_t j = 0; j < n; j++)
		claims[nclaims++] = (struct claim){ gens[j], from[j], now[j].owner_epoch };
	return 0;
}

/*
 * A restore run by the recovery of a dead host's services
 * (recovery/takeover.c) takes the fresh arena over only while that
 * recovery's fence is still its own ($CXLCR_RECOVERY_FENCE, "ENTRY:FENCE"):
 * of a winner that stalled here and the host that took its recovery over,
 * only one brings the service up. A restore by hand adds the word of its
 * reopening (":BY_HAND", recovery/restore_elsewhere.c): once that was
 * closed (its restore's process ended), a later restore by hand owns the
 * recovery, and this CRIU takes nothing.
 */
static int recovery_guard(struct cxlcr_pool *pool, struct cxlcr_hosts_map *m)
{
	const char *v = getenv("CXLCR_RECOVERY_FENCE");
	if (!v || !*v)
		return 0;
	char *p;
	errno = 0;
	unsigned long index = strtoul(v, &p, 10);
	unsigned long long fence = 0, by_hand = 0;
	if (p != v && *p == ':')
		fence = strtoull(p + 1, &p, 10);
	if (*p == ':')
		by_hand = strtoull(p + 1, &p, 10);
	if (errno || *p || !fence || index >= CXLCR_HOSTS_MAX)
		return cxlcr_error("$CXLCR_RECOVERY_FENCE is not ENTRY:FENCE[:BY_HAND]: %s", v);
	return cxlcr_host_fence_guard_by_hand(pool, (uint32_t)index, fence, by_hand, m);
}

/*
 * The restored tasks pids (as this host sees them), all of one tree, are
 * about to run: every task's records must hold and it must map its arenas
 * where they say; then, and only then, the tasks take their arenas over.
 * Everything is checked before anything is taken, across the whole tree:
 * a task refused after another had taken its arena would leave that arena
 * owned by a task that is killed, and the checkpoint stale. The arenas are
 * taken in the tasks' order in their own pid namespace (the root first),
 * so two restores of one checkpoint meet at the same first arena, where
 * the loser stops before it has taken any. Returns how many records the
 * tasks had (0: none maps an arena), -1 if they must not run.
 */
int restore_take_over(int dirfd, const pid_t *pids, size_t count, const char *pool_path)
{
	struct task *tasks = calloc(count ? count : 1, sizeof(*tasks));
	if (!tasks)
		return cxlcr_error("out of memory for %zu restored tasks", count);
	int rc = -1, records = 0;
	for (size_t k = 0; k < count; k++) {
		tasks[k].pid = pids[k];
		if (read_task(dirfd, &tasks[k]) < 0)
			goto out;
		records += (int)tasks[k].n;
	}
	if (records == 0) {
		rc = 0; /* the pool is opened only for a tree with records */
		goto out;
	}
	struct cxlcr_pool pool;
	struct cxlcr_hosts_map guard = { 0 };
	if (cxlcr_pool_open(&pool, pool_path) < 0)
		goto out;
	if (recovery_guard(&pool, &guard) < 0)
		goto close;
	for (size_t k = 0; k < count; k++)
		if (check_task(&pool, &tasks[k]) < 0)
			goto close;
	qsort(tasks, count, sizeof(*tasks), by_nspid);
	if (claim_all(&pool, tasks, count) < 0)
		goto close;
	for (size_t k = 0; k < count; k++)
		for (ssize_t i = 0; i < tasks[k].n; i++)
			if ((tasks[k].recs[i].flags & CXLCR_RECORD_F_FORK) &&
			    fork_borrow_for(&pool, tasks[k].pid, &tasks[k].recs[i]) < 0)
				goto close;
	rc = records;
close:
	if (guard.base)
		cxlcr_host_fence_unguard(&pool, &guard);
	cxlcr_pool_close(&pool);
out:
	for (size_t k = 0; k < count; k++) {
		free(tasks[k].recs);
		free(tasks[k].maps);
	}
	free(tasks);
	return rc;
}

/* Every thread that this process traces, as "tid tgid" pairs: on restore,
 * CRIU's master traces every thread of the restored tree from the moment
 * the tasks are restored until it lets them go. */
static size_t traced_threads(pid_t (*tids)[2], size_t max)
{
	size_t n = 0;
	DIR *procdir = opendir("/proc");
	if (!procdir)
		return 0;
	struct dirent *p;
	while ((p = readdir(procdir)) && n < max) {
		pid_t tgid = (pid_t)atoi(p->d_name);
		if (tgid <= 0)
			continue;
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task", (int)tgid);
		DIR *taskdir = opendir(path);
		if (!taskdir)
			continue;
		struct dirent *t;
		while ((t = readdir(taskdir)) && n < max) {
			pid_t tid = (pid_t)atoi(t->d_name);
			char status[96], *line = NULL;
			size_t cap = 0;
			if (tid <= 0)
				continue;
			snprintf(status, sizeof(status), "/proc/%d/task/%d/status", (int)tgid, (int)tid);
			FILE *f = fopen(status, "re");
			if (!f)
				continue;
			while (getline(&line, &cap, f) > 0) {
				if (!strncmp(line, "TracerPid:", 10)) {
					if (atoi(line + 10) == getpid()) {
						tids[n][0] = tid;
						tids[n][1] = tgid;
						n++;
					}
					break;
				}
			}
			free(line);
			fclose(f);
		}
		closedir(taskdir);
	}
	closedir(procdir);
	return n;
}

/* Appends to pids (at most max, *count of them so far) the children of
 * every thread of pid that are not there yet (/proc/PID/task/TID/children). */
static void add_children(pid_t pid, pid_t *pids, size_t *count, size_t max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && *count < max) {
		if (e->d_name[0] == '.')
			continue;
		char file[320];
		snprintf(file, sizeof(file), "/proc/%d/task/%s/children", (int)pid, e->d_name);
		FILE *f = fopen(file, "re");
		if (!f)
			continue;
		int child;
		while (*count < max && fscanf(f, "%d", &child) == 1) {
			bool seen = false;
			for (size_t k = 0; k < *count && !seen; k++)
				seen = pids[k] == child;
			if (!seen)
				pids[(*count)++] = child;
		}
		fclose(f);
	}
	closedir(d);
}

/*
 * The restored tree is the root and its descendants: CRIU rebuilds it
 * under the root, and a task whose parent is gone is the root's, which is
 * its PID namespace's init. Walked from the root, in the freeze, it costs
 * a few /proc reads per task; the tracees of this CRIU (traced_threads())
 * are the same tasks, but finding them reads the status of every thread
 * of the machine: 3.7-5.3 ms of the restore's freeze on a host running a
 * few hundred processes (migrate --json: plugin_take_over_ms).
 */
size_t restore_traced_tasks(pid_t root, pid_t *pids, size_t max)
{
	size_t count = 0;
	if (max)
		pids[count++] = root;
	for (size_t at = 0; at < count; at++)
		add_children(pids[at], pids, &count, max);
	return count;
}

/*
 * Until CRIU detaches from the restored threads (its last step), each is
 * stopped under its ptrace, on the way into the rt_sigreturn that resumes
 * it. Should CRIU die before that (killed, or its keeper kills it: a verb
 * past its deadline, or whose caller went), the kernel detaches them and
 * they run on: for the milliseconds until the keeper kills what it
 * adopted, a copy that owns the arena runs beside a source that is about
 * to judge it and resume, or to renew its checkpoint as if it had never
 * run (its writes to the heap then meet a process state that does not
 * know them: t_fault_migrate saw Redis crash, restored from such a
 * checkpoint). PTRACE_O_EXITKILL makes the kernel kill each thread
 * instead, as CRIU exits, before it returns to user space; CRIU's own
 * PTRACE_DETACH at the end drops the option with the tracing. CRIU sets
 * only PTRACE_O_TRACESYSGOOD on these threads (cr-restore.c, catch_tasks),
 * which is kept. We are CRIU's process, the tracer, so we may set them.
 */
int restore_die_with_criu(const pid_t *pids, size_t count)
{
	for (size_t k = 0; k < count; k++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pids[k]);
		DIR *d = opendir(path);
		if (!d)
			return cxlcr_error("restored task %d: %s: %s", (int)pids[k], path, strerror(errno));
		struct dirent *t;
		int rc = 0;
		while ((t = readdir(d)) && rc == 0) {
			pid_t tid = (pid_t)atoi(t->d_name);
			/* ESRCH: not stopped under our ptrace (a zombie of the
			 * tree, restored as one): CRIU's death frees nothing of it. */
			if (tid > 0 && ptrace(PTRACE_SETOPTIONS, tid, NULL,
					      (void *)(long)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)) < 0 &&
			    errno != ESRCH)
				rc = cxlcr_error("restored thread %d of task %d: PTRACE_SETOPTIONS: %s", (int)tid,
						 (int)pids[k], strerror(errno));
		}
		closedir(d);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/*
 * Kills the whole restored tree and reaps it, as its tracer. A killed
 * thread that is traced stays a zombie until its tracer waits for it, and
 * CRIU, cleaning up after a failed restore, waits for the root task only
 * (without __WALL): it would wait forever for threads it never reaps. So
 * every traced thread is killed, then all are reaped together: they do not
 * die in any order we can wait in (the last thread of a PID namespace's
 * init waits, in the kernel, for the namespace's other threads to be
 * reaped first; a leader is reapable only after its other threads).
 */
void restore_kill_traced(void)
{
	static pid_t tids[4096][2];
	size_t n = traced_threads(tids, sizeof(tids) / sizeof(tids[0]));
	for (size_t i = 0; i < n; i++)
		kill(tids[i][1], SIGKILL);
	/* Bounded: a thread we cannot reap must not hang CRIU either. */
	size_t left = n;
	for (int tries = 0; left && tries < 2500; tries++) {
		for (size_t i = 0; i < n; i++) {
			if (tids[i][0] && waitpid(tids[i][0], NULL, __WALL | WNOHANG) != 0) {
				tids[i][0] = 0;
				left--;
			}
		}
		if (left)
			usleep(2000);
	}
}

/* In the freeze, but only a small file in the restore's directory (a
 * tmpfs): some microseconds. Figures only: a failure is ignored. */
void restore_note_parts(int dirfd, uint64_t take_over_ns, uint64_t netlock_ns)
{
	int fd = openat(dirfd, CXLCR_RESTORE_PARTS_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	dprintf(fd, "take_over_ns %" PRIu64 "\nnetlock_ns %" PRIu64 "\n", take_over_ns, netlock_ns);
	close(fd);
}
