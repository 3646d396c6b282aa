#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"
#include "container.h"
#include "cli.h"
#include "criu.h"
#include "exec.h"

/* The directory holding cxlcr_criu.so, and only it (CRIU loads every
 * library in its plugin directory). */
static const char *plugin_dir(void)
{
	static char dir[PATH_MAX];
	const char *env = getenv("CXLCR_CRIU_PLUGIN_DIR");
	if (env && *env)
		return env;
	if (path_near_exe("criu", dir, sizeof(dir)))
		return dir;
	return "/usr/local/lib/cxlcr/criu";
}

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
static const char *verbosity(void)
{
	static char v[8];
	const char *env = getenv("CXLCR_CRIU_VERBOSITY");
	snprintf(v, sizeof(v), "-v%d", env && *env ? atoi(env) : 2);
	return v;
}

/* The action script that is the service's network lock (criu.h), next to
 * our binary in the build tree, or installed. */
static const char *network_lock_script(void)
{
	static char path[PATH_MAX];
	const char *env = getenv("CXLCR_CRIU_NETLOCK_SCRIPT");
	if (env && *env)
		return env;
	if (path_near_exe("criu-network-lock.sh", path, sizeof(path)))
		return path;
	return "/usr/local/lib/cxlcr/criu-network-lock.sh";
}

/* The service's network namespace is external to CRIU: a restore joins
 * one made beforehand (container.h). "net[INODE]:KEY" for --external. */
static int external_netns(pid_t pid, char *arg, size_t len)
{
	char ns[64];
	struct stat st;
	snprintf(ns, sizeof(ns), "/proc/%d/ns/net", pid);
	if (stat(ns, &st) < 0)
		return cxlcr_error("service pid %d: %s: %s", pid, ns, strerror(errno));
	snprintf(arg, len, "net[%llu]:%s", (unsigned long long)st.st_ino, CRIU_NETNS_KEY);
	return 0;
}

int criu_dump(pid_t pid, const char *dir, const char *link, bool leave_stopped)
{
	char pid_s[16], ext[64];
	snprintf(pid_s, sizeof(pid_s), "%d", pid);
	if (external_netns(pid, ext, sizeof(ext)) < 0)
		return -1;
	/* The script learns the link (and the bridge, to put it back if the
	 * dump fails) from the environment CRIU passes on to it. */
	const struct pod *pod = pod_current(false);
	setenv("CXLCR_NETLOCK_LINK", link, 1);
	if (pod)
		setenv("CXLCR_NETLOCK_BRIDGE", pod->bridge, 1);
	char *argv[] = { "criu", "dump", "-t", pid_s, "-D", (char *)dir, "-o", "dump.log",
			 (char *)verbosity(), "--external", ext, "--tcp-established", "--network-lock", "skip",
			 "--action-script", (char *)network_lock_script(), "--lib", (char *)plugin_dir(),
			 leave_stopped ? "--leave-stopped" : NULL, NULL };
	int rc = exec_argv(argv, CRIU_TIMEOUT_S);
	unsetenv("CXLCR_NETLOCK_LINK");
	unsetenv("CXLCR_NETLOCK_BRIDGE");
	if (rc != 0)
		return criu_failed(dir, "dump.log", "dump");
	return 0;
}

/* A migrated service takes its established connections along; a fork
 * child restores them closed (they are its parent's). */
static int restore_images(const char *dir, const char *bridge, const char *link, const char *source_pool,
			  int pool_fd, int netns_fd, bool tcp_close, pid_t *pid)
{
	char pidfile[PATH_MAX], inherit[PATH_MAX + 16], netns[64];
	/* The service's network namespace, made beforehand: CRIU's fd 4. */
	snprintf(netns, sizeof(netns), "fd[4]:%s", CRIU_NETNS_KEY);
	snprintf(pidfile, sizeof(pidfile), "%s/restored.pid", dir);
	char *argv[] = { "criu", "restore", "-D", (char *)dir, "-o", "restore.log", (char *)verbosity(), "-d",
			 "--inherit-fd", netns, tcp_close ? "--tcp-close" : "--tcp-established",
			 "--network-lock", "skip", "--pidfile", pidfile,
			 "--lib", (char *)plugin_dir(), NULL, NULL, NULL, NULL, NULL };
	size_t n = sizeof(argv) / sizeof(argv[0]) - 5;
	/* The link joins the bridge at CRIU's network-unlock, before the
	 * tasks resume: a service that found its link without carrier would
	 * wait a whole ARP retry (1 s) before it could answer anyone. (Tests
	 * can also stop CRIU at a chosen step with the script, see
	 * CXLCR_TEST_CRIU_HOOK in it.) */
	argv[n++] = "--action-script";
	argv[n++] = (char *)network_lock_script();
	setenv("CXLCR_NETLOCK_LINK", link, 1);
	setenv("CXLCR_NETLOCK_BRIDGE", bridge, 1);
	/* CRIU opens a mapped file by the path it had at dump time, unless it
	 * is told to take an inherited fd for that path (without its leading
	 * slash): the pool as this host names it. */
	if (source_pool && pool_fd >= 0) {
		snprintf(inherit, sizeof(inherit), "fd[3]:%s", source_pool + (source_pool[0] == '/'));
		argv[n] = "--inherit-fd";
		argv[n + 1] = inherit;
	}
	int fds[2] = { pool_fd, netns_fd };
	int rc = exec_argv_fds(argv, CRIU_TIMEOUT_S, fds, 2);
	unsetenv("CXLCR_NETLOCK_LINK");
	unsetenv("CXLCR_NETLOCK_BRIDGE");
	if (rc != 0)
		return criu_failed(dir, "restore.log", "restore");
	FILE *f = fopen(pidfile, "r");
	int p = 0;
	if (!f || fscanf(f, "%d", &p) != 1 || p <= 0) {
		if (f)
			fclose(f);
		return cxlcr_error("criu restore left no pid in %s", pidfile);
	}
	fclose(f);
	*pid = p;
	return 0;
}

int criu_restore(const char *dir, const char *bridge, const char *link, const char *source_pool, int pool_fd,
		 int netns_fd, pid_t *pid)
{
	return restore_images(dir, bridge, link, source_pool, pool_fd, netns_fd, false, pid);
}

int criu_dump_for_fork(pid_t pid, const char *dir, const char *snapshot_name)
{
	char pid_s[16], ext[64];
	snprintf(pid_s, sizeof(pid_s), "%d", pid);
	if (external_netns(pid, ext, sizeof(ext)) < 0)
		return -1;
	/* No network lock: the parent keeps its sockets and goes on. */
	char *argv[] = { "criu", "dump", "-t", pid_s, "-D", (char *)dir, "-o", "dump.log",
			 (char *)verbosity(), "--external", ext, "--tcp-established", "--network-lock", "skip",
			 "--leave-running", "--lib", (char *)plugin_dir(), NULL };
	setenv("CXLCR_SNAPSHOT_NAME", snapshot_name, 1);
	int rc = exec_argv(argv, CRIU_TIMEOUT_S);
	unsetenv("CXLCR_SNAPSHOT_NAME");
	return rc != 0 ? criu_failed(dir, "dump.log", "dump") : 0;
}

int criu_restore_child(const char *dir, const char *bridge, const char *link, const char *source_pool,
		       int pool_fd, int netns_fd, pid_t *pid)
{
	return restore_images(dir, bridge, link, source_pool, pool_fd, netns_fd, true, pid);
}
