#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/checksum.h"
#include "../common/error.h"
#include "../common/netns_nursery.h"
#include "../common/rtnl.h"
#include "../common/util.h"
#include "container.h"


const char *ip_string(uint32_t ip, char buf[16])
{
	struct in_addr a = { htonl(ip) };
	inet_ntop(AF_INET, &a, buf, 16);
	return buf;
}

void container_link_name(const uint8_t pool_uuid[16], uint64_t generation, uint64_t epoch,
			 char out[16])
{
	/* Names are global on a machine: the pool's identity goes in too. */
	uint32_t h = cxlcr_crc32c(0, pool_uuid, 16);
	h = cxlcr_crc32c(h, &generation, sizeof(generation));
	snprintf(out, 16, "cx%08x.%llu", h, (unsigned long long)(epoch % 1000));
}

void container_mac_of(uint32_t ip, uint8_t mac[6])
{
	mac[0] = 0x02;
	mac[1] = 0x78;
	mac[2] = (uint8_t)(ip >> 24);
	mac[3] = (uint8_t)(ip >> 16);
	mac[4] = (uint8_t)(ip >> 8);
	mac[5] = (uint8_t)ip;
}

/* eth0 inside the service's network namespace (netns_fd), its peer
 * `link` outside; with pod, on the pod's bridge. eth0's MAC is derived
 * from the address (container_mac_of). */
static int plumb(const struct pod *pod, int netns_fd, const char *link, uint32_t ip)
{
	uint8_t mac[6];
	container_mac_of(ip, mac);
	int here = cxlcr_rtnl_open();
	if (here < 0)
		return -1;
	int there = -1, rc = -1;
	if (cxlcr_rtnl_veth_add(here, link, SERVICE_IFNAME, mac, netns_fd) < 0 ||
	    (pod && cxlcr_rtnl_link_attach(here, link, pod->bridge) < 0) ||
	    (there = cxlcr_rtnl_open_in(netns_fd)) < 0 ||
	    cxlcr_rtnl_addr_add(there, SERVICE_IFNAME, ip, POD_PREFIX_LEN) < 0 ||
	    cxlcr_rtnl_link_set(there, SERVICE_IFNAME, -1, true) < 0 || cxlcr_rtnl_link_set(there, "lo", -1, true) < 0)
		goto out;
	rc = 0;
out:
	close(here);
	if (there >= 0)
		close(there);
	return rc;
}

/* The named network namespace made for the restore that gives `link`. */
static void netns_of(const char *link, char name[32], char path[64])
{
	snprintf(name, 32, "cxlcr-%.20s", link);
	snprintf(path, 64, "/run/netns/%s", name);
}

void container_netns_release(const char *link, bool discard)
{
	char name[32], path[64];
	netns_of(link, name, path);
	if (discard && if_nametoindex(link)) {
		int sk = cxlcr_rtnl_open();
		if (sk >= 0) {
			cxlcr_rtnl_link_del(sk, link); /* it may be going already */
			close(sk);
		}
	}
	/* As `ip netns del`: the name goes, the namespace lives on as long as
	 * a task or an fd holds it. */
	if (umount2(path, MNT_DETACH) == 0 || errno == EINVAL)
		unlink(path);
}

/* Whether /proc/PID/ns/net is the namespace ns. */
static bool in_netns(long pid, const struct stat *ns)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%ld/ns/net", pid);
	return stat(path, &st) == 0 && st.st_dev == ns->st_dev && st.st_ino == ns->st_ino;
}

int container_netns_end_tasks(const char *link, int timeout_ms)
{
	char name[32], path[64];
	netns_of(link, name, path);
	struct stat ns;
	DIR *d;
	if (stat(path, &ns) < 0 || !(d = opendir("/proc")))
		return 0;
	uint64_t deadline = cxlcr_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	int ended = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || !in_netns(pid, &ns))
			continue;
		/* Through a pidfd, checked once more once open: a pid reused
		 * meanwhile is left alone. */
		int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
		if (fd < 0)
			continue;
		if (in_netns(pid, &ns) && syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0) == 0) {
			ended++;
			uint64_t now = cxlcr_mono_ns();
			struct pollfd p = { .fd = fd, .events = POLLIN };
			if (now < deadline)
				poll(&p, 1, (int)((deadline - now) / 1000000) + 1);
		}
		close(fd);
	}
	closedir(d);
	return ended;
}

int container_netns_prepare(const char *link, uint32_t ip)
{
	char name[32], path[64];
	netns_of(link, name, path);
	container_netns_release(link, true); /* what a failed attempt left */
	int netns = cxlcr_netns_create(name);
	if (netns < 0 || plumb(NULL, netns, link, ip) < 0) {
		char why[512];
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		if (netns >= 0)
			close(netns);
		container_netns_release(link, true);
		return cxlcr_error("cannot prepare the network of %s: %s", link, why);
	}
	close(netns);
	return 0;
}

int container_netns_open(const char *link)
{
	char name[32], path[64];
	netns_of(link, name, path);
	return open(path, O_RDONLY | O_CLOEXEC);
}

pid_t container_start(const struct pod *pod, const char *name, const char *link, uint32_t ip,
		      void (*child_fn)(void *), void *arg)
{
	int go[2], report[2];
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(report, O_CLOEXEC) < 0)
		return cxlcr_error("pipe: %s", strerror(errno));
	pid_t helper = fork();
	if (helper < 0)
		return cxlcr_error("fork: %s", strerror(errno));
	if (helper == 0) {
		/* The helper creates the namespaces; its child is their pid 1.
		 * The network namespace comes from the nursery (a TCP hash of
		 * its own: common/netns_nursery.c). No UTS namespace: the
		 * service's host name is its host's, and CRIU forks itself
		 * once per namespace it dumps, ~1.2 ms of every freeze. */
		close(go[1]);
		close(report[0]);
		cxlcr_netns_enter_nursery();
		if (unshare(CLONE_NEWPID | CLONE_NEWNET) < 0) {
			dprintf(report[1], "-%d", errno);
			_exit(1);
		}
		pid_t init = fork();
		if (init == 0) {
			close(report[1]);
			char c;
			/* Wait until the parent has set up our network. */
			while (read(go[0], &c, 1) < 0 && errno == EINTR)
				;
			close(go[0]);
			child_fn(arg);
			_exit(127);
		}
		dprintf(report[1], "%d", init < 0 ? -errno : init);
		_exit(0);
	}
	close(go[0]);
	close(report[1]);
	char buf[32] = "";
	ssize_t n = read(report[0], buf, sizeof(buf) - 1);
	close(report[0]);
	waitpid(helper, NULL, 0);
	int pid = n > 0 ? atoi(buf) : -EIO;
	if (pid <= 0) {
		close(go[1]);
		return cxlcr_error("cannot create the service's namespaces: %s", strerror(-pid));
	}
	char ns_path[64];
	snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/net", pid);
	int netns = open(ns_path, O_RDONLY | O_CLOEXEC);
	if (netns < 0 || plumb(pod, netns, link, ip) < 0) {
		if (netns < 0)
			cxlcr_error("%s: %s", ns_path, strerror(errno));
		else
			close(netns);
		char why[512];
		snprintf(why, sizeof(why), "%s", cxlcr_last_error());
		kill(pid, SIGKILL);
		close(go[1]);
		return cxlcr_error("cannot set up the service's network: %s", why);
	}
	close(netns);
	if (write(go[1], "g", 1) != 1) {
		close(go[1]);
		return cxlcr_error("the service died while its network was set up");
	}
	close(go[1]);
	return pid;
}

int container_link_attach(const struct pod *pod, const char *link)
{
	int sk = cxlcr_rtnl_open();
	if (sk < 0)
		return -1;
	int rc = cxlcr_rtnl_link_attach(sk, link, pod->bridge);
	close(sk);
	return rc;
}

/* Does task pid live in the PID namespace of init? */
static bool same_pid_ns(pid_t pid, const struct stat *ns)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	return stat(path, &st) == 0 && st.st_ino == ns->st_ino && st.st_dev == ns->st_dev;
}

/* Task pid's pid in its own (innermost) PID namespace: the last field of
 * /proc/PID/status's NSpid line; 0 if unknown. */
static pid_t inner_pid(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	pid_t inner = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		char *last = strrchr(line, '\t');
		inner = last ? (pid_t)atoi(last + 1) : 0;
		break;
	}
	fclose(f);
	return inner;
}

size_t container_stopped(pid_t init, pid_t *stopped, size_t max)
{
	char path[64];
	struct stat ns;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", init);
	DIR *d = stat(path, &ns) == 0 ? opendir("/proc") : NULL;
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		pid_t pid = atoi(e->d_name);
		if (pid > 0 && same_pid_ns(pid, &ns) && cxlcr_process_state(pid) == 'T') {
			pid_t inner = inner_pid(pid);
			if (inner > 0)
				stopped[n++] = inner;
		}
	}
	closedir(d);
	return n;
}

int container_signal_all(pid_t init, int sig)
{
	return container_signal_all_but(init, sig, NULL, 0);
}

int container_signal_all_but(pid_t init, int sig, const pid_t *skip, size_t n)
{
	char path[64];
	struct stat ns;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", init);
	if (stat(path, &ns) < 0)
		return cxlcr_error("service pid %d is gone", init);
	DIR *d = opendir("/proc");
	if (!d)
		return cxlcr_error("/proc: %s", strerror(errno));
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t pid = atoi(e->d_name);
		if (pid <= 0 || !same_pid_ns(pid, &ns))
			continue;
		bool skipped = false;
		if (n) {
			pid_t inner = inner_pid(pid);
			for (size_t i = 0; i < n && !skipped; i++)
				skipped = inner == skip[i];
		}
		if (!skipped)
			kill(pid, sig);
	}
	closedir(d);
	return 0;
}
