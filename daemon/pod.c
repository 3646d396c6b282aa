#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "../emulation/hostfs.h"
#include "../emulation/hostpid.h"
#include "pod.h"

static void describe(struct pod *p, int index)
{
	p->index = index;
	snprintf(p->dir, sizeof(p->dir), "%s/pod%d", POD_RUN_DIR, index);
	snprintf(p->bridge, sizeof(p->bridge), "cxlcr%d", index);
	snprintf(p->netns, sizeof(p->netns), "cxlcr%d-pod", index);
	snprintf(p->netns_path, sizeof(p->netns_path), "/run/netns/%s", p->netns);
	p->net = (10u << 24) | ((78u + (uint32_t)index) << 16);
}

static bool pod_of(int index, const char *pool)
{
	char path[128], line[PATH_MAX] = "";
	snprintf(path, sizeof(path), "%s/pod%d/pool", POD_RUN_DIR, index);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool same = fgets(line, sizeof(line), f) && (line[strcspn(line, "\n")] = 0, !strcmp(line, pool));
	fclose(f);
	return same;
}

/* A pod whose pool file is gone and whose daemons are dead (a test that
 * was killed before `pod down`) is forgotten, so that its number can be
 * used again; its bridge and hosts' namespaces are reused as they are. */
static bool reclaim_stale(const struct pod *p)
{
	char path[PATH_MAX], pool[PATH_MAX] = "";
	snprintf(path, sizeof(path), "%s/pool", p->dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool read_ok = fgets(pool, sizeof(pool), f) != NULL;
	fclose(f);
	pool[strcspn(pool, "\n")] = 0;
	if (!read_ok || access(pool, F_OK) == 0)
		return false;
	DIR *d = opendir(p->dir);
	struct dirent *e;
	bool alive = false;
	while (d && (e = readdir(d)) && !alive) {
		if (!strstr(e->d_name, ".pid"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", p->dir, e->d_name);
		alive = pod_pid_read(path) > 0;
	}
	if (d)
		closedir(d);
	if (!alive)
		pod_forget(p);
	return !alive;
}

int pod_pid_write(const char *path, int pid)
{
	uint64_t start = 0;
	cxlcr_process_start(pid, &start);
	FILE *f = fopen(path, "we");
	if (!f || fprintf(f, "%d %llu\n", pid, (unsigned long long)start) < 0 || fclose(f) != 0)
		return cxlcr_error("cannot write %s: %s", path, strerror(errno));
	return 0;
}

int pod_pid_read(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int pid = 0;
	unsigned long long said = 0;
	int n = fscanf(f, "%d %llu", &pid, &said);
	fclose(f);
	uint64_t start;
	if (n < 1 || pid <= 0 || !cxlcr_process_start(pid, &start))
		return 0;
	return n == 1 || start == said ? pid : 0;
}

/* The pod directories say which pool each pod serves and hold its
 * daemons' sockets, so they are believed only if nobody but root could
 * have made or changed them (the rules the pool's path follows). They stay
 * 0755: users may reach the fork API's socket in them, which its mode and
 * SO_PEERCRED then refuse. */
static int check_run_dir(bool create)
{
	if (create && mkdir(POD_RUN_DIR, 0755) < 0 && errno != EEXIST)
		return cxlcr_error("cannot create %s: %s", POD_RUN_DIR, strerror(errno));
	if (cxlcr_check_trusted_dir(POD_RUN_DIR) < 0 && (create || errno != ENOENT))
		return -1;
	return 0;
}

int pod_dir_write_pool(const struct pod *p, const char *pool)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/pool", p->dir);
	FILE *f = fopen(path, "w");
	if (!f || fprintf(f, "%s\n", pool) < 0 || fclose(f) != 0)
		return cxlcr_error("cannot write %s: %s", path, strerror(errno));
	return 0;
}

const struct pod *pod_current(bool create)
{
	static struct pod pod;
	static char cached[PATH_MAX];
	char pool[PATH_MAX];
	if (!realpath(cxlcr_pool_path(), pool))
		snprintf(pool, sizeof(pool), "%s", cxlcr_pool_path());
	if (cached[0] && !strcmp(cached, pool))
		return &pod;
	if (check_run_dir(create) < 0)
		return NULL;
	/* A daemon is told its pod: its host may name the pool differently. */
	const char *env = getenv("CXLCR_POD");
	if (env && *env) {
		describe(&pod, atoi(env));
		snprintf(cached, sizeof(cached), "%s", pool);
		return &pod;
	}
	for (int i = 0; i < POD_MAX; i++) {
		if (pod_of(i, pool)) {
			describe(&pod, i);
			snprintf(cached, sizeof(cached), "%s", pool);
			return &pod;
		}
	}
	if (!create) {
		cxlcr_error("no pod is up for pool %s (cxlcr pod up)", pool);
		return NULL;
	}
	for (int i = 0; i < POD_MAX; i++) {
		describe(&pod, i);
		if (mkdir(pod.dir, 0755) < 0 && !(reclaim_stale(&pod) && mkdir(pod.dir, 0755) == 0))
			continue; /* taken: mkdir is the claim */
		if (pod_dir_write_pool(&pod, pool) < 0)
			return NULL;
		snprintf(cached, sizeof(cached), "%s", pool);
		return &pod;
	}
	cxlcr_error("all %d pods of this machine are in use", POD_MAX);
	return NULL;
}

void pod_host_netns(const struct pod *p, const char *host, char *buf, size_t len)
{
	snprintf(buf, len, "cxlcr%d-%s", p->index, host);
}

/* Everything in the pod's directory goes, the pins of its hosts' mount
 * namespaces (emulation/hostfs.h) unmounted first, and the hosts whose
 * init still runs (a stale pod's: emulation/hostpid.h) ended. */
void pod_forget(const struct pod *p)
{
	DIR *d = opendir(p->dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[PATH_MAX];
		if (e->d_name[0] == '.')
			continue;
		size_t n = strlen(e->d_name);
		if (n > 5 && n < 64 && !strcmp(e->d_name + n - 5, ".init")) {
			char host[64];
			snprintf(host, sizeof(host), "%.*s", (int)(n - 5), e->d_name);
			hostpid_end(p, host);
		}
		snprintf(path, sizeof(path), "%s/%s", p->dir, e->d_name);
		umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(p->dir);
}
