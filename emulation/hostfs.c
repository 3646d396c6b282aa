/*
 * The emulated pod host's own file system: see hostfs.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"
#include "../daemon/pod.h"
#include "hostfs.h"

/* What a host keeps to itself: its run-time state (its daemon's sockets,
 * the fork API's token; the network namespaces it names), its verbs' work
 * directories, its logs, its daemon's configuration. */
static const char *const HOSTFS_DIRS[] = { "/run/cxlcr", "/run/netns", "/var/lib/cxlcr", "/var/log/cxlcr",
					     "/etc/cxlcr" };

const char *hostfs_pin_path(const struct pod *pod, const char *host, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s.mnt", pod->dir, host);
	return buf;
}

static int mkdir_p(const char *dir)
{
	char path[256];
	snprintf(path, sizeof(path), "%s", dir);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* setns into the namespace pinned at path; -1 with errno if it is not
 * one (a pin whose mount is gone is an empty file). */
static int enter_pinned(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = setns(fd, CLONE_NEWNS);
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* The new namespace got a copy of every mount of this machine's, among
 * them the pins of the hosts made before (and of other pods) under
 * /run/cxlcr, and every named network namespace under /run/netns: they
 * go, or this host would hold those namespaces alive (and see them). */
static void drop_copied_mounts(const char *under)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], (*targets)[256] = NULL;
	size_t n = 0, cap = 0;
	while (f && fgets(line, sizeof(line), f)) {
		char target[256];
		if (sscanf(line, "%*s %*s %*s %*s %255s", target) != 1 || strncmp(target, under, strlen(under)))
			continue;
		if (n == cap) {
			void *more = realloc(targets, (cap = cap ? 2 * cap : 64) * sizeof(*targets));
			if (!more)
				break;
			targets = more;
		}
		snprintf(targets[n++], sizeof(targets[0]), "%s", target);
	}
	if (f)
		fclose(f);
	while (n-- > 0) /* the last mounted first */
		umount2(targets[n], MNT_DETACH);
	free(targets);
}

/* The host's own /run/netns names only the pod's network namespace (its
 * workers enter it: the bridge is there), bound from podnet. */
static int own_netns_dir(const struct pod *pod, int podnet)
{
	char path[128], fd[64];
	snprintf(path, sizeof(path), "/run/netns/%s", pod->netns);
	snprintf(fd, sizeof(fd), "/proc/self/fd/%d", podnet);
	int f = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (f < 0)
		return -1;
	close(f);
	return mount(fd, path, NULL, MS_BIND, NULL);
}

#ifndef NS_GET_MNTNS_ID
#define NS_GET_MNTNS_ID _IOR(0xb7, 0x5, uint64_t) /* linux/nsfs.h, 6.8 */
#endif

/* The id of this process's mount namespace; 0 where the kernel does not
 * say (before 6.8). */
static uint64_t mntns_id(void)
{
	uint64_t id = 0;
	int fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && ioctl(fd, NS_GET_MNTNS_ID, &id) < 0)
		id = 0;
	if (fd >= 0)
		close(fd);
	return id;
}

/*
 * unshare(CLONE_NEWNS), in a namespace the parent can pin. The kernel
 * refuses to bind a mount namespace's file from a namespace whose id is
 * not lower than the bound one's (mnt_ns_loop(): EINVAL), and namespace
 * ids are handed out in per-CPU batches, so a namespace made now on one
 * CPU can have a lower id than one made earlier on another. `pod up` run
 * in the machine's first mount namespace never meets that; run in one of
 * its own (a container, a chroot, a systemd unit with PrivateTmp) it
 * failed about half the time. On any one CPU ids only grow, so a
 * namespace made on the CPU the parent's was made on is newer than it:
 * try each CPU of the machine in turn (not only those this process may
 * run on now: `taskset` narrows that, a cpuset does not let it), then
 * run where we could before.
 */
static int unshare_pinnable(void)
{
	uint64_t parent = mntns_id();
	if (unshare(CLONE_NEWNS) < 0)
		return -1;
	if (!parent || mntns_id() > parent)
		return 0;
	cpu_set_t allowed, one;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		return 0; /* the pin says what went wrong */
	long cpus = sysconf(_SC_NPROCESSORS_CONF);
	int rc = 0;
	for (int cpu = 0; cpu < cpus && cpu < CPU_SETSIZE; cpu++) {
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one) < 0)
			continue;
		/* A copy of the one made above (nothing is mounted in it yet). */
		if ((rc = unshare(CLONE_NEWNS)) < 0 || mntns_id() > parent)
			break;
	}
	int e = errno;
	sched_setaffinity(0, sizeof(allowed), &allowed);
	errno = e;
	return rc;
}

int hostfs_enter_or_make(const struct pod *pod, const char *host)
{
	char pin[128];
	hostfs_pin_path(pod, host, pin, sizeof(pin));
	if (enter_pinned(pin) == 0)
		return 1;
	int podnet = open(pod->netns_path, O_RDONLY | O_CLOEXEC);
	if (podnet < 0)
		return cxlcr_error("host %s: %s: %s", host, pod->netns_path, strerror(errno));
	/* Mounts made on this machine after the host started are not the
	 * host's, and the host's are not this machine's: private, not slave. */
	if (unshare_pinnable() < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		close(podnet);
		return cxlcr_error("host %s: cannot make its mount namespace: %s", host, strerror(errno));
	}
	drop_copied_mounts("/run/cxlcr/");
	drop_copied_mounts("/run/netns");
	for (size_t i = 0; i < sizeof(HOSTFS_DIRS) / sizeof(HOSTFS_DIRS[0]); i++) {
		const char *dir = HOSTFS_DIRS[i];
		if (mkdir_p(dir) < 0 || mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0) {
			close(podnet);
			return cxlcr_error("host %s: cannot mount its own %s: %s", host, dir, strerror(errno));
		}
	}
	int rc = own_netns_dir(pod, podnet);
	int e = errno;
	close(podnet);
	if (rc < 0)
		return cxlcr_error("host %s: cannot name the pod's network namespace in its own /run/netns: %s", host,
				   strerror(e));
	return 0;
}

int hostfs_pin(const struct pod *pod, const char *host, pid_t pid)
{
	char pin[128], ns[64];
	hostfs_pin_path(pod, host, pin, sizeof(pin));
	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
	hostfs_remove(pod, host); /* a pin whose namespace could not be entered */
	int fd = open(pin, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return cxlcr_error("host %s: cannot create %s: %s", host, pin, strerror(errno));
	close(fd);
	if (mount(ns, pin, NULL, MS_BIND, NULL) < 0) {
		int e = errno;
		unlink(pin);
		return cxlcr_error("host %s: cannot pin its mount namespace at %s: %s", host, pin, strerror(e));
	}
	return 0;
}

int hostfs_enter(const struct pod *pod, const char *host)
{
	char pin[128];
	hostfs_pin_path(pod, host, pin, sizeof(pin));
	if (enter_pinned(pin) < 0)
		return cxlcr_error("host %s: cannot enter its mount namespace (%s): %s", host, pin,
				   errno == ENOENT ? "the host is not up" : strerror(errno));
	return 0;
}

void hostfs_remove(const struct pod *pod, const char *host)
{
	char pin[128];
	hostfs_pin_path(pod, host, pin, sizeof(pin));
	umount2(pin, MNT_DETACH);
	unlink(pin);
}
