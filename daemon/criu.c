#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/rtnl.h"
#include "../common/util.h"
#include "../rebase/rebase.h"
#include "cli.h"
#include "criu.h"
#include "criu_swrk.h"
#include "host_files.h"
#include "exec.h"
#include "pod.h"
#include "rpc.h"

/* CRIU says what went wrong in its log. The cxlcr plugin's reason is the
 * one that matters when it refused; otherwise the first error line (later
 * ones only report the failure spreading). */
static int criu_failed(const char *dir, const char *log, const char *what)
{
	char path[PATH_MAX], line[512], last[512] = "";
	bool from_plugin = false;
	snprintf(path, sizeof(path), "%s/%s", dir, log);
	/* Killed or out of time: its log stops anywhere, often after errors
	 * it would have got over. */
	if (strstr(cxlcr_last_error(), "killed by signal") || strstr(cxlcr_last_error(), "timed out")) {
		snprintf(last, sizeof(last), "%s", cxlcr_last_error());
		return cxlcr_error("criu %s failed: %s (log %s)", what, last, path);
	}
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strstr(line, "Error") || strstr(line, "RLIMIT_NOFILE") || from_plugin)
			continue;
		if (strstr(line, "cxlcr:")) {
			const char *why = strstr(line, "cxlcr:") + 7;
			snprintf(last, sizeof(last), "%s", why);
			from_plugin = true;
		} else if (!last[0]) {
			snprintf(last, sizeof(last), "%s", line);
		}
	}
	if (f)
		fclose(f);
	last[strcspn(last, "\n")] = 0;
	const char *msg = last[0] ? last : cxlcr_last_error();
	char copy[600];
	snprintf(copy, sizeof(copy), "%s", msg);
	return cxlcr_error("criu %s failed: %s (log %s)", what, copy, path);
}

/* -v2 (errors and warnings) unless $CXLCR_CRIU_VERBOSITY asks for more:
 * every level costs time on the critical path of a migrate. */
static int criu_log_level(void)
{
	const char *env = getenv("CXLCR_CRIU_VERBOSITY");
	return env && *env ? atoi(env) : 2;
}

static const char *verbosity(void)
{
	static char v[8];
	snprintf(v, sizeof(v), "-v%d", criu_log_level());
	return v;
}

/* Tests stop CRIU at a step of their choice (tests/t_faults.sh): with
 * $CXLCR_TEST_CRIU_HOOK=DIR in the daemons' environment, DIR/action-script
 * is CRIU's action script. Never otherwise: CRIU runs an action script
 * through two shells at each of its ten steps (~15 ms of a migrate). */
const char *criu_test_action_script(void)
{
	static char path[PATH_MAX];
	const char *dir = getenv("CXLCR_TEST_CRIU_HOOK");
	if (!dir || !*dir)
		return NULL;
	snprintf(path, sizeof(path), "%s/action-script", dir);
	return access(path, X_OK) == 0 ? path : NULL;
}

/* Appends "--action-script PATH" when a test asks for it. */
static void add_test_hook(char **argv, size_t *n)
{
	const char *script = criu_test_action_script();
	if (script) {
		argv[(*n)++] = "--action-script";
		argv[(*n)++] = (char *)script;
	}
}

int criu_timeout_s(void)
{
	int deadline_s = (rpc_timeout_ms() + 999) / 1000;
	return deadline_s < CRIU_TIMEOUT_S ? deadline_s : CRIU_TIMEOUT_S;
}

/* The service's network namespace: CRIU runs inside it (criu.h). */
static int service_netns(pid_t pid)
{
	char ns[64];
	snprintf(ns, sizeof(ns), "/proc/%d/ns/net", pid);
	int fd = open(ns, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cxlcr_error("service pid %d: %s: %s", pid, ns, strerror(errno));
	return fd;
}

/* The network lock's environment (common/rtnl.h): the plugin finds the
 * lent socket at fd, the link, and the bridge. */
static void netlock_env(int fd, const char *link, const char *bridge)
{
	char n[16];
	snprintf(n, sizeof(n), "%d", fd);
	setenv(CXLCR_NETLOCK_FD_ENV, n, 1);
	setenv(CXLCR_NETLOCK_LINK_ENV, link, 1);
	if (bridge)
		setenv(CXLCR_NETLOCK_BRIDGE_ENV, bridge, 1);
}

static void netlock_env_clear(void)
{
	unsetenv(CXLCR_NETLOCK_FD_ENV);
	unsetenv(CXLCR_NETLOCK_LINK_ENV);
	unsetenv(CXLCR_NETLOCK_BRIDGE_ENV);
}

/*
 * CRIU's parasite needs a /proc of the dumped task's pid namespace; a pod
 * service's /proc is the machine's, so the parasite mounts one in the
 * task's working directory, as "proc.crtools", and removes it again.
 * Services may share a working directory (each runs in its own,
 * host_files.h, unless it changes it: a Redis --dir), and two dumps at
 * once in one directory collide ("Can't
 * create a directory (-17)": t_stress saw a snapshot fail so), and a dump
 * killed in between leaves the directory, or a proc mounted on it, for
 * every later dump to trip on. So dumps of services in one directory take
 * turns, under a lock on that directory itself (whoever shares it, on this
 * host or, emulated, on another: the lock needs no path of its own), and
 * each first removes such a leftover. The wait is bounded by CRIU's own
 * deadline.
 */
static int dump_turn(pid_t pid)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/cwd", (int)pid);
	int fd = open(link, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return cxlcr_error("service pid %d: its working directory: %s", (int)pid, strerror(errno));
	uint64_t deadline = cxlcr_mono_ns() + (uint64_t)criu_timeout_s() * 1000000000ull;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK || cxlcr_mono_ns() >= deadline) {
			int e = errno;
			close(fd);
			return cxlcr_error("another dump in the service's working directory held CRIU's turn past %d s (%s)",
					   criu_timeout_s(), strerror(e));
		}
		struct timespec t = { 0, 2000000 };
		nanosleep(&t, NULL);
	}
	char cwd[PATH_MAX - 16], left[PATH_MAX];
	ssize_t n = readlink(link, cwd, sizeof(cwd) - 1);
	if (n > 0) {
		cwd[n] = 0;
		snprintf(left, sizeof(left), "%s/proc.crtools", strcmp(cwd, "/") ? cwd : "");
		umount2(left, MNT_DETACH | UMOUNT_NOFOLLOW);
		if (rmdir(left) == 0)
			fprintf(stderr, "cxlcr: removed %s, left by a dump that was killed\n", left);
	}
	return fd;
}

/* One criu dump of the service whose PID-namespace init is pid, run in
 * its network namespace, with `leave` (--leave-stopped, --leave-running
 * or NULL) and the fds handed to it from 3 on. */
static int dump_service(pid_t pid, const char *dir, const char *leave, const int *fds, int nfds)
{
	char pid_s[16];
	snprintf(pid_s, sizeof(pid_s), "%d", pid);
	int netns = service_netns(pid);
	if (netns < 0)
		return -1;
	/* Cgroups are not the checkpoint's: a restore stays in the restoring
	 * host's (an emulated host's cgroup is the host, emulation/).
	 * A connection the kernel completed but the service has not accepted
	 * yet cannot be dumped, and CRIU fails the whole dump for it ("In-flight
	 * connection"): a client connecting in the instant of the freeze made
	 * a recovery point or a migrate fail. Such a connection is skipped: on
	 * a leave-running dump it stays queued and is accepted after the
	 * resume; after a move its client's next send is reset, and it
	 * connects again, as to any server that went away before answering. */
	char *argv[24] = { "criu", "dump", "-t", pid_s, "-D", (char *)dir, "-o", "dump.log",
			   (char *)verbosity(), "--tcp-established", "--skip-in-flight", "--network-lock", "skip",
			   "--lib", (char *)installed_plugin_dir(), "--manage-cgroups=ignore" };
	size_t n = 16;
	if (leave)
		argv[n++] = (char *)leave;
	add_test_hook(argv, &n);
	int turn = dump_turn(pid);
	if (turn < 0) {
		close(netns);
		return -1;
	}
	/* CRIU holds the turn, not this worker: the turn ends with the dump
	 * even if the worker stalls (a stalled worker held off every dump in
	 * that working directory until its own deadline). */
	int all[8];
	for (int i = 0; i < nfds && i < 7; i++)
		all[i] = fds[i];
	all[nfds < 7 ? nfds : 7] = turn;
	exec_hand_over(turn);
	/* Kept (exec.h), as a restore is: CRIU forks helpers of its own (the
	 * ptrace probe of its kernel checks sleeps until CRIU kills it), and
	 * one that outlived a CRIU killed with its verb kept the turn's lock,
	 * inherited, for ever: every later dump of the machine waited out its
	 * deadline and failed (seen after t_fence_wait killed a point). */
	int rc = exec_argv_kept(argv, criu_timeout_s(), all, (nfds < 7 ? nfds : 7) + 1, netns);
	close(netns);
	if (rc != 0)
		return criu_failed(dir, "dump.log", "dump");
	/* Its own /proc files, under a pid only this host gave it. */
	unsigned rewritten;
	return cxlcr_rebase_proc_self(dir, pid, &rewritten);
}

int criu_dump(pid_t pid, const char *dir, const char *link, bool leave_stopped)
{
	int rtnl = cxlcr_rtnl_open();
	if (rtnl < 0)
		return -1;
	/* The plugin takes the link off the bridge once the tasks are frozen
	 * through our socket (CRIU's fd 3). */
	netlock_env(3, link, NULL);
	int rc = dump_service(pid, dir, leave_stopped ? "--leave-stopped" : NULL, &rtnl, 1);
	netlock_env_clear();
	close(rtnl);
	return rc;
}

/* A restore's request: the options, and the fds CRIU was started with
 * (start_worker()) under the keys the checkpoint names them by. */
static void restore_opts(struct criu_restore_opts *o, const char *dir, const char *source_pool, int pool_fd,
			 const struct host_files *own, bool tcp_close, bool leave_stopped)
{
	*o = (struct criu_restore_opts){ .dir = dir, .log_file = "restore.log", .log_level = criu_log_level(),
					 .tcp_close = tcp_close, .leave_stopped = leave_stopped };
	/* CRIU opens a mapped file by the path it had at dump time, unless it
	 * is told to take an inherited fd for that path (without its leading
	 * slash): the pool as this host names it. */
	if (source_pool && pool_fd >= 0) {
		o->inherit[o->n_inherit].fd = 3;
		o->inherit[o->n_inherit++].key = source_pool + (source_pool[0] == '/');
	}
	for (int i = 0; i < own->n; i++) {
		o->inherit[o->n_inherit].fd = 5 + i;
		o->inherit[o->n_inherit++].key = strchr(own->arg[i], ':') + 1;
	}
}

/* CRIU started as a service worker in netns_fd, with the pool as this host
 * names it (its fd 3), the host's netlink socket for the network lock (fd
 * 4: the plugin puts the link on the bridge just before the tasks resume)
 * and this host's own files the checkpoint names (fds 5..). */
static int start_worker(struct criu_swrk *w, int pool_fd, const struct host_files *own, const char *link,
			const char *bridge, int netns_fd, bool hold)
{
	int rtnl = cxlcr_rtnl_open();
	if (rtnl < 0)
		return -1;
	netlock_env(4, link, bridge);
	int fds[2 + HOST_FILES_MAX] = { pool_fd, rtnl };
	for (int i = 0; i < own->n; i++)
		fds[2 + i] = own->fd[i];
	int rc = criu_swrk_start(w, fds, 2 + own->n, netns_fd, hold);
	netlock_env_clear();
	close(rtnl);
	return rc;
}

int criu_restore_ahead(struct criu_ahead *a, const char *bridge, const char *link, const char *source_pool,
		       int pool_fd, int netns_fd, char *const *host_files, int n)
{
	memset(a, 0, sizeof(*a));
	if (host_files_open_paths(host_files, n, 5, &a->own) < 0)
		return -1;
	if (source_pool)
		snprintf(a->source_pool, sizeof(a->source_pool), "%s", source_pool);
	if (start_worker(&a->w, pool_fd, &a->own, link, bridge, netns_fd, true) < 0) {
		host_files_close(&a->own);
		return -1;
	}
	a->started = true;
	return 0;
}

void criu_ahead_abort(struct criu_ahead *a)
{
	if (!a || !a->started)
		return;
	criu_swrk_abort(&a->w);
	host_files_close(&a->own);
	a->started = false;
}

/* Was the worker started ahead with what the checkpoint in dir needs: the
 * same pool path to rebase (or none), the same files of this host? */
static bool ahead_fits(const struct criu_ahead *a, const char *dir, const char *source_pool)
{
	return a && a->started && (source_pool ? !strcmp(a->source_pool, source_pool) : !a->source_pool[0]) &&
	       host_files_same(&a->own, dir);
}

/* A migrated service takes its established connections along; a fork
 * child restores them closed (they are its parent's). CRIU runs as a
 * service worker (criu_swrk.h): the one started ahead if it fits the
 * checkpoint, else one started now. Held: its keeper holds the stopped
 * tasks until the caller lets them run (exec_held_release()). */
static int restore_images(const char *dir, const char *bridge, const char *link, const char *source_pool,
			  int pool_fd, int netns_fd, bool tcp_close, bool leave_stopped, bool held,
			  struct criu_ahead *ahead, const char *wd_name, pid_t *pid)
{
	struct criu_restore_opts o;
	int rc;
	if (ahead_fits(ahead, dir, source_pool)) {
		restore_opts(&o, dir, source_pool, pool_fd, &ahead->own, tcp_close, leave_stopped);
		ahead->started = false;
		rc = criu_swrk_restore(&ahead->w, &o, criu_timeout_s(), pid);
		host_files_close(&ahead->own);
		return rc != 0 ? criu_failed(dir, "restore.log", "restore") : 0;
	}
	criu_ahead_abort(ahead);
	/* The service's log and working directory are this host's own
	 * (host_files.h). */
	struct host_files own;
	if (host_files_open_as(dir, 5, wd_name, &own) < 0)
		return -1;
	restore_opts(&o, dir, source_pool, pool_fd, &own, tcp_close, leave_stopped);
	struct criu_swrk w;
	rc = start_worker(&w, pool_fd, &own, link, bridge, netns_fd, held);
	if (rc == 0)
		rc = criu_swrk_restore(&w, &o, criu_timeout_s(), pid);
	host_files_close(&own);
	return rc != 0 ? criu_failed(dir, "restore.log", "restore") : 0;
}

/* Left stopped, and held so: CRIU detaches from the restored tasks before
 * it answers, and its post-resume step runs after; killed in between, it
 * left a restore that failed but whose copy ran and wrote the arena,
 * beside a source (or a checkpoint renewed for the next try) whose own
 * state knew nothing of those writes (t_fault_migrate saw the resumed
 * source's Redis crash). Stopped until restore_service() has judged the
 * restore, and ended by their keeper if it never does (its worker died),
 * the copy runs only as the one that won. */
int criu_restore(const char *dir, const char *bridge, const char *link, const char *source_pool, int pool_fd,
		 int netns_fd, struct criu_ahead *ahead, pid_t *pid)
{
	return restore_images(dir, bridge, link, source_pool, pool_fd, netns_fd, false, true, true, ahead, NULL, pid);
}

int criu_dump_for_fork(pid_t pid, const char *dir, const char *snapshot_name)
{
	/* No network lock: the parent keeps its sockets and goes on. */
	setenv("CXLCR_SNAPSHOT_NAME", snapshot_name, 1);
	int rc = dump_service(pid, dir, "--leave-running", NULL, 0);
	unsetenv("CXLCR_SNAPSHOT_NAME");
	return rc;
}

int criu_restore_child(const char *dir, const char *name, const char *bridge, const char *link,
		       const char *source_pool, int pool_fd, int netns_fd, bool leave_stopped, pid_t *pid)
{
	return restore_images(dir, bridge, link, source_pool, pool_fd, netns_fd, true, leave_stopped, false, NULL, name,
			      pid);
}

