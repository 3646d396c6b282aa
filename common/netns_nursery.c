/*
 * The namespace service network namespaces are made from.
 *
 * Every CRIU dump of a service (a migrate, a snapshot, a recovery point)
 * lists the service's TCP sockets through sock_diag while the service is
 * frozen, once for IPv4 and once for IPv6. The kernel answers by walking
 * every bucket of the namespace's established-connection hash, and a new
 * namespace shares the machine's: 262,144 buckets on a 24 GiB machine,
 * ~1.2 ms a walk, ~2.4 ms of every freeze for a service with a handful of
 * sockets (measured with strace on CRIU's sendmsg; `ss -tan` pays the same).
 *
 * Since Linux 6.1 a namespace gets a hash of its own when the namespace it
 * is made from says so (net.ipv4.tcp_child_ehash_entries of the creating
 * task's namespace). Setting that in the host's own namespace would change
 * every namespace anyone makes on the machine (containers, `ip netns`), so
 * cxlcr makes its services' namespaces from a namespace of its own, the
 * nursery, which holds nothing and exists only to carry that setting:
 * /run/netns/cxlcr-nursery (per emulated host, whose /run/netns is its
 * own). CXLCR_SERVICE_TCP_EHASH sets the size (0: the machine's shared
 * table, as before); the kernel rounds it up to a power of two.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "netns_nursery.h"

#define NURSERY_DIR "/run/netns"
#define NURSERY_PATH NURSERY_DIR "/cxlcr-nursery"
#define NURSERY_LOCK NURSERY_DIR "/.cxlcr-nursery.lock"
/* Services with up to ~100,000 connections keep chains of a few entries;
 * the walk of 16,384 buckets costs ~0.1 ms. */
#define DEFAULT_EHASH 16384

static long ehash_entries(void)
{
	const char *env = getenv("CXLCR_SERVICE_TCP_EHASH");
	if (!env || !*env)
		return DEFAULT_EHASH;
	char *end;
	long n = strtol(env, &end, 10);
	return *end || n < 0 ? DEFAULT_EHASH : n;
}

/* An fd of the nursery if PATH is one (a namespace bind-mounted there,
 * not the empty file a creation that died midway left). */
static int nursery_open(void)
{
	int fd = open(NURSERY_PATH, O_RDONLY | O_CLOEXEC);
	struct statfs fs;
	if (fd >= 0 && (fstatfs(fd, &fs) < 0 || fs.f_type != NSFS_MAGIC)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Makes the nursery with the calling thread: it unshares a namespace, sets
 * the child hash size there and binds it at NURSERY_PATH. The thread stays
 * in it, which is where its caller wants to be. Under the lock, so two
 * processes never bind two. */
static int nursery_make(long entries)
{
	mkdir(NURSERY_DIR, 0755);
	int lock = open(NURSERY_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		if (lock >= 0)
			close(lock);
		return -1;
	}
	int rc = -1, fd = nursery_open();
	if (fd >= 0) { /* made by another meanwhile */
		rc = setns(fd, CLONE_NEWNET);
		close(fd);
		goto out;
	}
	umount2(NURSERY_PATH, MNT_DETACH | UMOUNT_NOFOLLOW);
	unlink(NURSERY_PATH);
	int f = open(NURSERY_PATH, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0);
	if (f < 0 || unshare(CLONE_NEWNET) < 0)
		goto fail;
	close(f);
	f = -1;
	/* /proc/sys/net is the opener's namespace: this thread's new one. */
	int s = open("/proc/sys/net/ipv4/tcp_child_ehash_entries", O_WRONLY | O_CLOEXEC);
	char v[24];
	int n = snprintf(v, sizeof(v), "%ld", entries);
	bool set = s >= 0 && write(s, v, (size_t)n) == n;
	if (s >= 0)
		close(s);
	if (!set || mount("/proc/thread-self/ns/net", NURSERY_PATH, "none", MS_BIND, NULL) < 0)
		goto fail;
	rc = 0;
	goto out;
fail:
	if (f >= 0)
		close(f);
	unlink(NURSERY_PATH);
out:
	close(lock);
	return rc;
}

int cxlcr_netns_enter_nursery(void)
{
	long entries = ehash_entries();
	if (entries == 0)
		return 0;
	int fd = nursery_open();
	if (fd >= 0) {
		int rc = setns(fd, CLONE_NEWNET);
		close(fd);
		if (rc == 0)
			return 0;
	}
	return nursery_make(entries);
}
