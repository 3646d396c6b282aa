/*
 * Failures of an emulated pod host (hostgroup.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../daemon/pod.h"
#include "hostgroup.h"

#define SETTLE_TIMEOUT_MS 10000

/* Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or
 * /sys/fs/cgroup/unified on a hybrid system), or NULL. */
static const char *cgroup2_root(void)
{
	static char root[256];
	if (root[0])
		return root;
	FILE *f = setmntent("/proc/self/mounts", "re");
	if (!f)
		return NULL;
	struct mntent *m;
	while ((m = getmntent(f)))
		if (!strcmp(m->mnt_type, "cgroup2")) {
			cxlcr_copy_field(root, sizeof(root), m->mnt_dir);
			break;
		}
	endmntent(f);
	return root[0] ? root : NULL;
}

static int group_path(const struct pod *pod, const char *host, const char *file, char *out, size_t len)
{
	const char *root = cgroup2_root();
	if (!root)
		return cxlcr_error("no cgroup v2 hierarchy is mounted: emulated hosts cannot fail as a whole");
	int n = host ? snprintf(out, len, "%s/cxlcr/pod%d/%s%s%s", root, pod->index, host, file ? "/" : "",
				file ? file : "")
		     : snprintf(out, len, "%s/cxlcr/pod%d", root, pod->index);
	return n > 0 && (size_t)n < len ? 0 : cxlcr_error("cgroup path too long");
}

static int write_file(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return cxlcr_error("%s: %s", path, strerror(errno));
	ssize_t n = write(fd, value, strlen(value));
	int e = errno;
	close(fd);
	return n == (ssize_t)strlen(value) ? 0 : cxlcr_error("%s: %s", path, strerror(e));
}

/* The value of key in the group's cgroup.events ("populated", "frozen"). */
static int event(const struct pod *pod, const char *host, const char *key)
{
	char path[512], line[64];
	if (group_path(pod, host, "cgroup.events", path, sizeof(path)) < 0)
		return -1;
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int v = -1;
	size_t kl = strlen(key);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ' ')
			v = atoi(line + kl + 1);
	fclose(f);
	return v;
}

/* Waits until the group's event key has the value want: the kernel changes
 * cgroup.events when the whole group got there. Bounded. */
static int settle(const struct pod *pod, const char *host, const char *key, int want)
{
	uint64_t deadline = cxlcr_mono_ns() + SETTLE_TIMEOUT_MS * 1000000ull;
	while (event(pod, host, key) != want) {
		if (cxlcr_mono_ns() > deadline)
			return cxlcr_error("host %s: its processes did not get to %s=%d within %d ms", host, key, want,
					   SETTLE_TIMEOUT_MS);
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	return 0;
}

int hostgroup_create(const struct pod *pod, const char *host)
{
	char path[512];
	if (group_path(pod, NULL, NULL, path, sizeof(path)) < 0)
		return -1;
	char *slash = strrchr(path, '/');
	*slash = 0;
	mkdir(path, 0755); /* .../cxlcr */
	*slash = '/';
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return cxlcr_error("%s: %s", path, strerror(errno));
	if (group_path(pod, host, NULL, path, sizeof(path)) < 0)
		return -1;
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return cxlcr_error("%s: %s", path, strerror(errno));
	return 0;
}

int hostgroup_join(const struct pod *pod, const char *host)
{
	char path[512];
	return group_path(pod, host, "cgroup.procs", path, sizeof(path)) < 0 ? -1 : write_file(path, "0");
}

int hostgroup_kill(const struct pod *pod, const char *host)
{
	char path[512];
	if (group_path(pod, host, "cgroup.kill", path, sizeof(path)) < 0 || write_file(path, "1") < 0)
		return -1;
	return settle(pod, host, "populated", 0);
}

int hostgroup_freeze(const struct pod *pod, const char *host, bool frozen)
{
	char path[512];
	if (group_path(pod, host, "cgroup.freeze", path, sizeof(path)) < 0 ||
	    write_file(path, frozen ? "1" : "0") < 0)
		return -1;
	return settle(pod, host, "frozen", frozen);
}

bool hostgroup_has(const struct pod *pod, const char *host, pid_t pid)
{
	char path[512], line[32];
	if (group_path(pod, host, "cgroup.procs", path, sizeof(path)) < 0)
		return false;
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = atoi(line) == pid;
	fclose(f);
	return found;
}

void hostgroup_remove(const struct pod *pod, const char *host)
{
	char path[512];
	if (group_path(pod, host, NULL, path, sizeof(path)) == 0) {
		/* A frozen group keeps its tasks: thaw it first. */
		hostgroup_freeze(pod, host, false);
		if (event(pod, host, "populated") == 1)
			hostgroup_kill(pod, host);
		rmdir(path);
	}
}

void hostgroup_remove_pod(const struct pod *pod)
{
	char path[512];
	if (group_path(pod, NULL, NULL, path, sizeof(path)) == 0)
		rmdir(path);
}
