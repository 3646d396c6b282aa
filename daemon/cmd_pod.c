/*
 * cxlcr pod up | pod down: an emulated pod on this machine (see pod.h).
 *
 * Host hI is a network namespace with an address on the pod's bridge, its
 * own UTS name hI, file system (emulation/hostfs.h) and pid namespace
 * (emulation/hostpid.h), and a cxlcrd. The bridge is in the machine's
 * network namespace, so clients here reach every host and service address.
 * All hosts map the same pool; nothing else ties them to one machine.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/arena.h"
#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/util.h"
#include "api.h"
#include "cli.h"
#include "container.h"
#include "../emulation/host_start.h"
#include "../emulation/hostfs.h"
#include "../emulation/hostgroup.h"
#include "../emulation/hostpid.h"
#include "config.h"
#include "../pod/membership.h"
#include "exec.h"
#include "rpc.h"
#include "service_there.h"

#define MAX_HOSTS       16
#define NET_TIMEOUT_S   10
#define STOP_WAIT_MS    10000

static const char *pid_path(const struct pod *pod, const char *host, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s.pid", pod->dir, host);
	return buf;
}

static void host_link(const struct pod *pod, int i, char *buf, size_t len)
{
	snprintf(buf, len, "cx%dh%d", pod->index, i);
}

static int daemon_pid(const struct pod *pod, const char *host)
{
	char path[128];
	return pod_pid_read(pid_path(pod, host, path, sizeof(path)));
}

static bool link_exists(const char *name)
{
	char path[128];
	snprintf(path, sizeof(path), "/sys/class/net/%s", name);
	return access(path, F_OK) == 0;
}

/* The pod network (the bridge's namespace: this machine's) gets a name,
 * so that the daemons inside their hosts' namespaces can enter it. */
static int name_pod_network(const struct pod *pod)
{
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", getpid());
	if (access(pod->netns_path, F_OK) == 0)
		return 0;
	return exec_run(NET_TIMEOUT_S, "ip", "netns", "attach", pod->netns, pid, NULL) ? -1 : 0;
}

static int make_bridge(const struct pod *pod)
{
	if (name_pod_network(pod) < 0)
		return -1;
	if (link_exists(pod->bridge))
		return 0;
	char addr[32], ip[16];
	snprintf(addr, sizeof(addr), "%s/%d", ip_string(pod_gateway(pod), ip), POD_PREFIX_LEN);
	/* A MAC of its own: otherwise the bridge takes its lowest port's, often
	 * a service's link, and a frozen source's frames taken off the bridge
	 * would still reach clients here (and the gateway's MAC would change
	 * at every migrate). */
	char mac[24];
	snprintf(mac, sizeof(mac), "02:cc:00:00:%02x:01", pod->index & 0xff);
	if (exec_run(NET_TIMEOUT_S, "ip", "link", "add", pod->bridge, "address", mac, "type", "bridge",
		     NULL) ||
	    exec_run(NET_TIMEOUT_S, "ip", "addr", "add", addr, "dev", pod->bridge, NULL) ||
	    exec_run(NET_TIMEOUT_S, "ip", "link", "set", pod->bridge, "up", NULL))
		return -1;
	return 0;
}

int pod_make_net(const struct pod *pod, const char *ns, const char *link, uint32_t ip_host_order, const char *mac)
{
	char addr[32], ip[16], path[64];
	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	if (access(path, F_OK) != 0 && exec_run(NET_TIMEOUT_S, "ip", "netns", "add", ns, NULL))
		return -1;
	if (link_exists(link))
		return 0;
	snprintf(addr, sizeof(addr), "%s/%d", ip_string(ip_host_order, ip), POD_PREFIX_LEN);
	if (exec_run(NET_TIMEOUT_S, "ip", "link", "add", link, "type", "veth", "peer", "name", "eth0",
		     "netns", ns, NULL) ||
	    (mac && exec_run(NET_TIMEOUT_S, "ip", "-n", ns, "link", "set", "eth0", "address", mac, NULL)) ||
	    exec_run(NET_TIMEOUT_S, "ip", "link", "set", link, "master", pod->bridge, "up", NULL) ||
	    exec_run(NET_TIMEOUT_S, "ip", "-n", ns, "addr", "add", addr, "dev", "eth0", NULL) ||
	    exec_run(NET_TIMEOUT_S, "ip", "-n", ns, "link", "set", "eth0", "up", NULL) ||
	    exec_run(NET_TIMEOUT_S, "ip", "-n", ns, "link", "set", "lo", "up", NULL))
		return -1;
	return 0;
}

void pod_remove_net(const char *ns, const char *link)
{
	char path[64];
	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	if (access(path, F_OK) == 0)
		exec_run(NET_TIMEOUT_S, "ip", "netns", "del", ns, NULL);
	if (link_exists(link))
		exec_run(NET_TIMEOUT_S, "ip", "link", "del", link, NULL);
}

/* The host's network namespace and its address on the bridge. */
static int make_host_net(const struct pod *pod, int i, const char *host)
{
	char ns[32], link[16];
	pod_host_netns(pod, host, ns, sizeof(ns));
	host_link(pod, i, link, sizeof(link));
	return pod_make_net(pod, ns, link, pod_host_ip(pod, i), NULL);
}

/* The host's cxlcrd.conf, in its own /etc/cxlcr: the daemon runs as
 * systemd runs a machine's (`cxlcrd --config`, scripts/cxlcrd.service.in). */
static int write_host_config(const char *host, const char *pool, const char *ip)
{
	FILE *f = fopen(DAEMON_CONFIG_DEFAULT, "we");
	if (!f)
		return -1;
	fprintf(f, "# emulated pod host %s (written by `cxlcr pod up`)\nhost = %s\npool = %s\naddress = %s\n",
		host, host, pool, ip);
	return fclose(f);
}

/* Waits for the child that set up the host's namespaces: a host whose
 * mount namespace it made new ('m') is pinned before its daemon starts. */
static int pin_if_made(const struct pod *pod, const char *host, pid_t child, int sync, int go)
{
	char c = 0;
	ssize_t n;
	while ((n = read(sync, &c, 1)) < 0 && errno == EINTR)
		;
	if (n == 1 && c == 'm' && hostfs_pin(pod, host, child) < 0) {
		kill(child, SIGKILL);
		return -1;
	}
	if (n == 1 && write(go, "g", 1) != 1)
		return cxlcr_error("host %s: its set-up died", host);
	return 0;
}

/* What the set-up of a pod host needs, in the child and in its parent. */
struct daemon_start {
	const struct pod *pod;
	const char *host, *pool, *ip;
	bool grouped;
	int sync[2], go[2];           /* the pin of a new mount namespace */
};

/* In the child that becomes hI's daemon, once in its network namespace:
 * the host's cgroup, host name and file system, its cxlcrd.conf, its run
 * directory of the pod, and the daemon's environment. */
static int daemon_setup(void *arg)
{
	struct daemon_start *d = arg;
	close(d->sync[0]);
	close(d->go[1]);
	if (d->grouped && hostgroup_join(d->pod, d->host) < 0)
		return -1;
	if (unshare(CLONE_NEWUTS) < 0 || sethostname(d->host, strlen(d->host)) < 0)
		return cxlcr_error("cannot enter the namespaces of %s: %s", d->host, strerror(errno));
	int made = hostfs_enter_or_make(d->pod, d->host);
	char c;
	if (made < 0)
		return -1;
	if (write(d->sync[1], made ? "e" : "m", 1) != 1 || read(d->go[0], &c, 1) != 1)
		return cxlcr_error("its mount namespace was not pinned");
	if (write_host_config(d->host, d->pool, d->ip) < 0)
		return cxlcr_error("host %s: cannot write %s: %s", d->host, DAEMON_CONFIG_DEFAULT, strerror(errno));
	/* The host's own run directory of the pod: its daemon's sockets,
	 * and what says which pool the pod is (for a command line run
	 * there, `pod exec`). */
	if (mkdir(d->pod->dir, 0755) < 0 && errno != EEXIST)
		return cxlcr_error("host %s: cannot create %s: %s", d->host, d->pod->dir, strerror(errno));
	if (pod_dir_write_pool(d->pod, d->pool) < 0)
		return cxlcr_error("host %s: %s", d->host, cxlcr_last_error());
	char index[16];
	snprintf(index, sizeof(index), "%d", d->pod->index);
	setenv("CXLCR_POD", index, 1);
	/* Tests feed a host's kernel log through a FIFO of its own
	 * (recovery/kmsg.c): $CXLCR_KMSG_DIR/HOST.kmsg. */
	const char *kmsg_dir = getenv("CXLCR_KMSG_DIR");
	if (kmsg_dir && *kmsg_dir) {
		char fifo[PATH_MAX];
		snprintf(fifo, sizeof(fifo), "%s/%s.kmsg", kmsg_dir, d->host);
		if (mkfifo(fifo, 0600) < 0 && errno != EEXIST)
			return cxlcr_error("%s: %s", fifo, strerror(errno));
		setenv("CXLCR_KMSG", fifo, 1);
	}
	/* A daemon's tools come from the system's directories, not from
	 * whatever the shell that ran `pod up` had on its PATH. */
	setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
	return 0;
}

/* In `pod up`, while the child sets hI up: pins its new mount namespace. */
static int daemon_alongside(pid_t child, void *arg)
{
	struct daemon_start *d = arg;
	close(d->sync[1]);
	close(d->go[0]);
	int rc = pin_if_made(d->pod, d->host, child, d->sync[0], d->go[1]);
	close(d->sync[0]);
	close(d->go[1]);
	return rc;
}

/* Starts hI's daemon inside the host's namespaces, detached: its network
 * namespace, its own host name, its own file system (emulation/hostfs.h). */
static int start_daemon(const struct pod *pod, const char *host, const char *pool, const char *ip)
{
	char ns[32], ns_path[64], bin[PATH_MAX], msg[512];
	pod_host_netns(pod, host, ns, sizeof(ns));
	snprintf(ns_path, sizeof(ns_path), "/run/netns/%s", ns);
	installed_daemon(bin, sizeof(bin));
	/* Everything the host runs lives in its cgroup, so that it can fail
	 * as a whole (emulation/hostgroup.h); without cgroup v2 it cannot. */
	struct daemon_start d = { .pod = pod, .host = host, .pool = pool, .ip = ip,
				  .grouped = hostgroup_create(pod, host) == 0 };
	if (pipe2(d.sync, O_CLOEXEC) < 0)
		return cxlcr_error("pipe: %s", strerror(errno));
	if (pipe2(d.go, O_CLOEXEC) < 0) {
		close(d.sync[0]);
		close(d.sync[1]);
		return cxlcr_error("pipe: %s", strerror(errno));
	}
	char *argv[] = { "cxlcrd", "--config", DAEMON_CONFIG_DEFAULT, "--ready-fd", "3", NULL };
	/* In the host's pid namespace while its init lives (a daemon that
	 * stopped while its services ran), else in a new one: the host boots
	 * (emulation/hostpid.h). */
	pid_t init = 0;
	struct host_start s = { .host = host, .netns = ns_path, .log = HOSTFS_DAEMON_LOG, .bin = bin,
				.argv = argv, .setup = daemon_setup, .alongside = daemon_alongside, .arg = &d,
				.own_pid_ns = true, .init_fd = hostpid_open(pod, host), .init_made = &init };
	int pid = host_start(&s, msg, sizeof(msg));
	if (s.init_fd >= 0)
		close(s.init_fd);
	char init_file[128];
	if (init > 0)
		pod_pid_write(hostpid_file(pod, host, init_file, sizeof(init_file)), init);
	if (pid < 0 && msg[0])
		return cxlcr_error("the daemon of %s did not start: %s (cxlcr pod logs %s)", host, msg, host);
	if (pid < 0)
		return -1;
	char path[128];
	pod_pid_write(pid_path(pod, host, path, sizeof(path)), pid);
	return pid;
}

static int pod_up(int argc, char **argv)
{
	static const struct option opts[] = { { "hosts", required_argument, 0, 'n' },
					      { "host-pool", required_argument, 0, 'p' },
					      { "json", no_argument, 0, 'j' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	int c, hosts = 2;
	bool json = false;
	const char *host_pool[MAX_HOSTS] = { 0 };
	while ((c = getopt_long(argc, argv, "n:p:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'p': {
			/* hI=PATH: host hI sees the pool under another path. */
			int i;
			const char *eq = strchr(optarg, '=');
			if (sscanf(optarg, "h%d=", &i) != 1 || !eq || i < 0 || i >= MAX_HOSTS || !eq[1])
				return fail(EXIT_USAGE, "--host-pool %s: expected hN=PATH", optarg);
			host_pool[i] = eq + 1;
			break;
		}
		case 'n':
			hosts = atoi(optarg);
			if (hosts < 1 || hosts > MAX_HOSTS)
				return fail(EXIT_USAGE, "--hosts %s: between 1 and %d", optarg, MAX_HOSTS);
			break;
		case 'j': json = true; break;
		case 'h':
			printf("usage: cxlcr pod up [--hosts N] [--host-pool hI=PATH]... [--json]\n\n"
			       "Starts emulated hosts h0..hN-1 (default 2) on this machine, each with its\n"
			       "own network namespace and address on the pod's bridge, its own file system\n"
			       "(/run/cxlcr, /run/netns, /var/lib/cxlcr, /var/log/cxlcr, /etc/cxlcr: cxlcr pod\n"
			       "logs, pod exec), its own processes (a pid namespace and its /proc) and a\n"
			       "cxlcrd. The hosts share only the pool and the bridge. Each pool has its own\n"
			       "pod. Hosts already up are left as they are. --json gives this machine's pid\n"
			       "of each host's daemon.\n"
			       "--host-pool: host hI sees the pool under PATH (another name of the same\n"
			       "device or file); restores there rebase the pool's mappings onto it.\n");
			return EXIT_OK;
		default: return EXIT_USAGE;
		}
	}
	char pool_abs[PATH_MAX];
	int rc = pool_path_abs(pool_abs, sizeof(pool_abs));
	if (rc)
		return rc;
	const struct pod *pod = pod_current(true);
	if (!pod)
		return fail(EXIT_FAIL, "%s", cxlcr_last_error());
	if (api_token_ensure(pod) < 0) /* the fork API's, over TCP: this machine's copy */
		return fail(EXIT_FAIL, "%s", cxlcr_last_error());
	if (make_bridge(pod) < 0)
		return fail(EXIT_FAIL, "cannot create bridge %s: %s", pod->bridge, cxlcr_last_error());
	struct json j;
	if (json) {
		json_begin(&j, stdout);
		json_str(&j, "bridge", pod->bridge);
		json_array_begin(&j, "hosts");
	}
	for (int i = 0; i < hosts; i++) {
		char host[16], ip[16];
		snprintf(host, sizeof(host), "h%d", i);
		int pid = daemon_pid(pod, host);
		bool started = false;
		if (!pid) {
			const char *pool_path = host_pool[i] ? host_pool[i] : pool_abs;
			struct cxlcr_pool same;
			if (host_pool[i] && cxlcr_pool_open(&same, host_pool[i]) < 0)
				return fail(EXIT_FAIL, "host %s: %s", host, cxlcr_last_error());
			if (host_pool[i])
				cxlcr_pool_close(&same);
			ip_string(pod_host_ip(pod, i), ip);
			if (make_host_net(pod, i, host) < 0 || (pid = start_daemon(pod, host, pool_path, ip)) < 0) {
				if (json)
					json_end(&j);
				return fail(EXIT_FAIL, "host %s: %s", host, cxlcr_last_error());
			}
			started = true;
		}
		ip_string(pod_host_ip(pod, i), ip);
		if (json) {
			json_object_begin(&j, NULL);
			json_str(&j, "host", host);
			json_str(&j, "address", ip);
			json_i64(&j, "daemon_pid", pid);
			json_bool(&j, "started", started);
			json_object_end(&j);
		} else {
			printf("%s %s at %s, cxlcrd pid %d\n", host, started ? "up" : "already up", ip, pid);
		}
	}
	if (json) {
		json_array_end(&j);
		json_end(&j);
	}
	return EXIT_OK;
}

/*
 * The services that a host about to go away runs, by the generations of
 * their regions (at most CXLCR_REGION_MAX): its daemon says which (their
 * pids are its own: daemon/service_there.h). None if it does not answer
 * (crashed: what it ran is gone already, and its services are its
 * recovery's).
 */
static size_t services_running_on(struct cxlcr_pool *pool, const char *host, uint64_t *gens)
{
	struct service *all = calloc(CXLCR_REGION_MAX, sizeof(*all));
	size_t n = 0, running = 0;
	for (uint32_t i = 0; all && i < CXLCR_REGION_MAX; i++) {
		struct cxlcr_region r;
		cxlcr_region_slot(pool, i, &r);
		if (r.state == CXLCR_REGION_LIVE && cxlcr_kind_is_service(r.kind) &&
		    !strncmp(r.owner_host, host, CXLCR_HOST_MAX) && r.owner_pid > 1)
			service_load(pool, &r, &all[n++]);
	}
	service_ask_hosts(pool, all, n);
	for (size_t i = 0; i < n; i++)
		if (all[i].running)
			gens[running++] = all[i].region.generation;
	free(all);
	return running;
}

/* Once a host has gone with every process of it: the arenas of the
 * services it ran are freed; checkpointed services (no process) keep
 * theirs. */
static void free_host_services(struct cxlcr_pool *pool, const char *host, const uint64_t *gens, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct cxlcr_region r;
		if (cxlcr_region_get(pool, gens[i], &r) == 0 && !strncmp(r.owner_host, host, CXLCR_HOST_MAX))
			service_free(pool, &r);
	}
}

static int pod_down(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: cxlcr pod down\n\nStops the services on the hosts of the pool's pod, their "
		       "daemons, and removes the hosts and the pod's bridge.\n");
		return EXIT_OK;
	}
	const struct pod *pod = pod_current(false);
	if (!pod) {
		printf("no pod is up for this pool\n");
		return EXIT_OK;
	}
	int hosts = 0;
	struct cxlcr_pool pool;
	bool pool_open = cxlcr_pool_open(&pool, cxlcr_pool_path()) == 0;
	static uint64_t gens[CXLCR_REGION_MAX];
	for (int i = 0; i < MAX_HOSTS; i++) {
		char host[16], path[128], ns[32], link[16];
		snprintf(host, sizeof(host), "h%d", i);
		pod_host_netns(pod, host, ns, sizeof(ns));
		host_link(pod, i, link, sizeof(link));
		snprintf(path, sizeof(path), "/run/netns/%s", ns);
		int pid = daemon_pid(pod, host);
		if (!pid && access(path, F_OK) != 0)
			continue;
		size_t running = pool_open ? services_running_on(&pool, host, gens) : 0;
		if (pid) {
			/* The whole pod goes: each daemon leaves at once
			 * (SIGINT), not after the recoveries its host works
			 * on (SIGTERM would wait for them). */
			kill(pid, SIGINT);
			if (pid_wait_exit(pid, STOP_WAIT_MS) != 1)
				kill(pid, SIGKILL);
		}
		unlink(pid_path(pod, host, path, sizeof(path)));
		pod_remove_net(ns, link);
		/* Every process of the host ends: its cgroup's, and its pid
		 * namespace's with its init. */
		hostgroup_remove(pod, host);
		hostpid_end(pod, host);
		if (pool_open)
			free_host_services(&pool, host, gens, running);
		hostfs_remove(pod, host);
		printf("%s down\n", host);
		hosts++;
	}
	tier_host_down(pod); /* the cold tier's memory host, if it is up */
	if (link_exists(pod->bridge))
		exec_run(NET_TIMEOUT_S, "ip", "link", "del", pod->bridge, NULL);
	if (access(pod->netns_path, F_OK) == 0)
		exec_run(NET_TIMEOUT_S, "ip", "netns", "del", pod->netns, NULL);
	hostgroup_remove_pod(pod);
	pod_forget(pod);
	if (pool_open) {
		membership_forget(pool.sb->uuid);
		cxlcr_pool_close(&pool);
	}
	if (!hosts)
		printf("no pod hosts were up\n");
	return EXIT_OK;
}

/*
 * cxlcr pod crash H | freeze H | thaw H: a host of the emulated pod fails as
 * a real one would. crash ends every process of the host at once (its
 * daemon, workers, services, trackers), with no clean-up: what they held in
 * the pool stays as they left it. freeze stops them all, thaw resumes them.
 */
static int pod_fail(int argc, char **argv)
{
	const char *verb = argv[0];
	/* crash --panic: the host's kernel leaves its tombstone first, as the
	 * module of kernel/ does from its panic notifier (the same bytes). */
	bool panic = !strcmp(verb, "crash") && argc == 3 && !strcmp(argv[2], "--panic");
	if (panic)
		argc--;
	if (argc != 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: cxlcr pod %s HOST%s\n\n%s\n", verb, !strcmp(verb, "crash") ? " [--panic]" : "",
		       !strcmp(verb, "crash") ? "Kills every process of emulated host HOST at once, with no clean-up.\n"
						"With --panic, its tombstone is written into the host table first, as\n"
						"the kernel module's panic notifier would: the others recover at once."
		       : !strcmp(verb, "freeze") ? "Stops every process of emulated host HOST (cxlcr pod thaw resumes them)."
						: "Resumes the processes of emulated host HOST that pod freeze stopped.");
		return argc == 2 ? EXIT_OK : EXIT_USAGE;
	}
	const char *host = argv[1];
	const struct pod *pod = pod_current(false);
	if (!pod)
		return fail(EXIT_FAIL, "no pod is up for this pool (cxlcr pod up)");
	int index, end = 0;
	if (sscanf(host, "h%d%n", &index, &end) != 1 || host[end] || index < 0 || index >= MAX_HOSTS ||
	    !daemon_pid(pod, host))
		return fail(EXIT_USAGE, "pod %s: %s is not a host of this pod", verb, host);
	if (panic) {
		struct cxlcr_pool pool;
		int prc = open_pool_or_fail(&pool);
		if (prc)
			return prc;
		/* The processes stop first, as a panic stops the other CPUs:
		 * nothing of the host runs once its last word is written. */
		bool stopped = hostgroup_freeze(pod, host, true) == 0;
		prc = stopped ? cxlcr_host_write_tombstone(&pool, host, CXLCR_TOMBSTONE_PANIC) : -1;
		cxlcr_pool_close(&pool);
		if (prc < 0)
			return fail(EXIT_FAIL, "pod crash %s --panic: %s", host, cxlcr_last_error());
	}
	int rc = !strcmp(verb, "crash") ? hostgroup_kill(pod, host) : hostgroup_freeze(pod, host, !strcmp(verb, "freeze"));
	if (rc < 0)
		return fail(EXIT_FAIL, "pod %s %s: %s", verb, host, cxlcr_last_error());
	printf("%s %s\n", host, !strcmp(verb, "crash") ? "crashed" : !strcmp(verb, "freeze") ? "frozen" : "thawed");
	return EXIT_OK;
}

int cmd_pod(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "crash") || !strcmp(argv[1], "freeze") || !strcmp(argv[1], "thaw")))
		return pod_fail(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "logs"))
		return pod_logs(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "exec"))
		return pod_exec(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "up"))
		return pod_up(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "down"))
		return pod_down(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: cxlcr pod up [--hosts N] [--json]\n       cxlcr pod down\n"
		       "       cxlcr pod crash HOST [--panic] | freeze HOST | thaw HOST\n"
		       "       cxlcr pod logs HOST | exec HOST -- CMD [ARGS...]\n");
		return EXIT_OK;
	}
	return fail(EXIT_USAGE, "usage: cxlcr pod up [--hosts N] | down | crash HOST [--panic] | freeze HOST | thaw HOST | logs HOST | exec HOST -- CMD");
}
