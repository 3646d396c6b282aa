/*
 * cxlcr tier up [--size S] | tier down | tier status: the cold tier's
 * memory server in the emulated pod (docs/cold-tier.md). The server,
 * cxlcr-memd, runs on a memory host of its own: a network namespace with
 * an address on the pod's bridge (.0.200), a file system and processes of
 * its own (emulation/hostfs.h, hostpid.h), like the pod's hosts, sharing
 * nothing with them but the pool and the bridge: its log is in m0's own
 * /var/log/cxlcr (`cxlcr pod logs m0`). On real machines it is started on
 * a memory host by hand or by a unit, with the same options.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../emulation/hostfs.h"
#include "../emulation/hostpid.h"
#include "../tier/format.h"
#include "../tier/tier.h"
#include "cli.h"
#include "container.h"
#include "../emulation/host_start.h"
#include "json.h"
#include "pod.h"

#define MEM_HOST        TIER_MEM_HOST
#define MEM_HOST_OCTET  200u
#define DEFAULT_SIZE    "1G"
#define STOP_WAIT_MS    10000
#define MEMD_LOG        HOST_LOG_DIR "/" TIER_MEMD_LOG ".log" /* m0's own */

static void mem_host_names(const struct pod *pod, char ns[32], char link[16], char pidfile[128])
{
	snprintf(ns, 32, "cxlcr%d-%s", pod->index, MEM_HOST);
	snprintf(link, 16, "cx%d%s", pod->index, MEM_HOST);
	snprintf(pidfile, 128, "%s/%s.pid", pod->dir, MEM_HOST);
}

struct memd_start {
	const struct pod *pod;
	const char *pool;
};

/* In the child that becomes the memory server, once in the memory host's
 * network namespace: its own file system (made at its first start; the
 * caller pins it), and the pool it serves. */
static int memd_setup(void *arg)
{
	const struct memd_start *m = arg;
	if (hostfs_enter_or_make(m->pod, MEM_HOST) < 0)
		return -1;
	return setenv("CXLCR_POOL", m->pool, 1) < 0 ? cxlcr_error("setenv: %s", strerror(errno)) : 0;
}

/* Starts cxlcr-memd inside the memory host's network and mount namespaces,
 * detached, and waits for its "ok PID ADDRESS PROVIDER" (or its one-line
 * error). */
static int start_memd(const struct pod *pod, const char *ns, const char *ip, const char *size, const char *pool,
		      char *said, size_t len)
{
	char bin[PATH_MAX], ns_path[64];
	installed_memd(bin, sizeof(bin));
	snprintf(ns_path, sizeof(ns_path), "/run/netns/%s", ns);
	char *argv[] = { "cxlcr-memd", "--name", MEM_HOST, "--address", (char *)ip, "--size", (char *)size,
			 "--ready-fd", "3", NULL };
	struct memd_start m = { .pod = pod, .pool = pool };
	/* A pid namespace of its own, as a pod host's (emulation/hostpid.h). */
	pid_t init = 0;
	struct host_start s = { .host = MEM_HOST, .netns = ns_path, .log = MEMD_LOG, .bin = bin, .argv = argv,
				.setup = memd_setup, .arg = &m, .own_pid_ns = true,
				.init_fd = hostpid_open(pod, MEM_HOST), .init_made = &init };
	int pid = host_start(&s, said, len);
	if (s.init_fd >= 0)
		close(s.init_fd);
	char init_file[128];
	if (init > 0)
		pod_pid_write(hostpid_file(pod, MEM_HOST, init_file, sizeof(init_file)), init);
	if (pid < 0 && said[0])
		return cxlcr_error("the memory server did not start: %s (its log: cxlcr pod logs %s)", said,
				   MEM_HOST);
	if (pid < 0)
		return -1;
	/* Its file system outlives it, as a pod host's does (pod down unpins it). */
	if (hostfs_pin(pod, MEM_HOST, pid) < 0) {
		kill(pid, SIGTERM);
		if (pid_wait_exit(pid, STOP_WAIT_MS) != 1)
			kill(pid, SIGKILL);
		return -1;
	}
	return pid;
}

static int tier_up(int argc, char **argv)
{
	static const struct option opts[] = { { "size", required_argument, 0, 's' },
					      { "json", no_argument, 0, 'j' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	const char *size = DEFAULT_SIZE;
	bool json = false;
	int c;
	uint64_t bytes;
	while ((c = getopt_long(argc, argv, "s:jh", opts, NULL)) != -1) {
		switch (c) {
		case 's': size = optarg; break;
		case 'j': json = true; break;
		case 'h':
			printf("usage: cxlcr tier up [--size SIZE] [--json]\n\n"
			       "Starts the cold tier's memory server (cxlcr-memd, default %s) on memory host %s\n"
			       "of the emulated pod: a network namespace of its own on the pod's bridge. It\n"
			       "registers in the pool; tiered snapshots (cxlcr snapshot --tier) keep their\n"
			       "cold pages there. $CXLCR_TIER_PROVIDER names the libfabric provider;\n"
			       "$CXLCR_MEMD_SPIN_US how long the server spins after a request (default 200).\n",
			       DEFAULT_SIZE, MEM_HOST);
			return EXIT_OK;
		default: return EXIT_USAGE;
		}
	}
	if (optind != argc)
		return fail(EXIT_USAGE, "usage: cxlcr tier up [--size SIZE] [--json]");
	if (cxlcr_parse_size(size, &bytes) < 0 || bytes < 4096 || bytes % 4096)
		return fail(EXIT_USAGE, "--size %s: a size of whole 4 KiB pages", size);
	char pool_abs[PATH_MAX];
	int rc = pool_path_abs(pool_abs, sizeof(pool_abs));
	if (rc)
		return rc;
	const struct pod *pod = pod_current(false);
	if (!pod)
		return fail(EXIT_FAIL, "the pool has no pod up (cxlcr pod up first)");
	char ns[32], link[16], pidfile[128], ip[16], said[256] = "";
	mem_host_names(pod, ns, link, pidfile);
	ip_string(pod->net | MEM_HOST_OCTET, ip);
	int pid = pod_pid_read(pidfile);
	bool started = false;
	if (!pid) {
		/* A MAC of its own, as the bridge has: a memory host made again
		 * after `tier down` keeps its address, and the hosts' neighbour
		 * caches (which would send to the old one for seconds) stay right. */
		char mac[24];
		snprintf(mac, sizeof(mac), "02:cc:00:00:%02x:%02x", pod->index & 0xff, MEM_HOST_OCTET);
		if (pod_make_net(pod, ns, link, pod->net | MEM_HOST_OCTET, mac) < 0)
			return fail(EXIT_FAIL, "memory host %s: %s", MEM_HOST, cxlcr_last_error());
		if ((pid = start_memd(pod, ns, ip, size, pool_abs, said, sizeof(said))) < 0) {
			char why[CXLCR_ERROR_MAX];
			snprintf(why, sizeof(why), "%s", cxlcr_last_error());
			pod_remove_net(ns, link);
			return fail(EXIT_FAIL, "memory host %s: %s", MEM_HOST, why);
		}
		pod_pid_write(pidfile, pid);
		started = true;
	}
	if (json) {
		struct json j;
		json_begin(&j, stdout);
		json_str(&j, "host", MEM_HOST);
		json_str(&j, "address", ip);
		json_i64(&j, "pid", pid);
		json_bool(&j, "started", started);
		json_end(&j);
	} else {
		printf("memory server %s %s at %s, pid %d\n", MEM_HOST, started ? "up" : "already up", ip, pid);
	}
	return EXIT_OK;
}

void tier_host_down(const struct pod *pod)
{
	char ns[32], link[16], pidfile[128];
	mem_host_names(pod, ns, link, pidfile);
	int pid = pod_pid_read(pidfile);
	if (pid) {
		kill(pid, SIGTERM); /* it marks itself down in the tier table */
		if (pid_wait_exit(pid, STOP_WAIT_MS) != 1)
			kill(pid, SIGKILL);
	}
	unlink(pidfile);
	hostpid_end(pod, MEM_HOST);
	pod_remove_net(ns, link);
}

static int tier_down(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: cxlcr tier down\n\nStops the cold tier's memory server of the pod; the cold pages "
		       "it held are gone (snapshots that used them refuse to be read).\n");
		return EXIT_OK;
	}
	if (argc > 1)
		return fail(EXIT_USAGE, "usage: cxlcr tier down");
	const struct pod *pod = pod_current(false);
	if (!pod) {
		printf("no pod is up for this pool\n");
		return EXIT_OK;
	}
	tier_host_down(pod);
	printf("memory server %s down\n", MEM_HOST);
	return EXIT_OK;
}

static int tier_status(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 1 && !json) {
		printf("usage: cxlcr tier status [--json]\n\nThe memory servers of the pool's tier table: "
		       "address, size, and what live snapshots use of it.\n");
		return strcmp(argv[1], "--help") && strcmp(argv[1], "-h") ? EXIT_USAGE : EXIT_OK;
	}
	struct cxlcr_pool pool;
	int rc = open_pool_or_fail(&pool);
	if (rc)
		return rc;
	struct json j;
	if (json) {
		json_begin(&j, stdout);
		json_array_begin(&j, "servers");
	}
	int found = 0;
	for (uint32_t i = 0; i < CXLCR_TIER_SERVERS; i++) {
		struct tier_server_info s;
		int r = tier_server_get(&pool, i, &s);
		if (r < 0)
			fprintf(stderr, "warning: %s\n", cxlcr_last_error());
		if (r != 0)
			continue;
		found++;
		if (json) {
			json_object_begin(&j, NULL);
			json_str(&j, "name", s.name);
			json_str(&j, "address", s.address);
			json_u64(&j, "bulk_port", s.bulk_port);
			json_str(&j, "provider", s.provider);
			json_bool(&j, "up", s.up);
			json_str(&j, "state", s.up ? "up" : s.dead ? "dead" : "down");
			json_i64(&j, "pid", s.pid);
			json_u64(&j, "incarnation", s.incarnation);
			json_u64(&j, "size", s.size);
			json_u64(&j, "used", s.used);
			json_u64(&j, "extents", s.extents);
			json_object_end(&j);
		} else {
			char a[32], b[32];
			printf("%s %s at %s (%s), %s of %s used in %u extents\n", s.name,
			       s.up ? "up" : s.dead ? "dead (its heartbeat stood still; its memory is lost)" : "down",
			       s.address, s.provider, cxlcr_format_size(s.used, a, sizeof(a)),
			       cxlcr_format_size(s.size, b, sizeof(b)), s.extents);
		}
	}
	cxlcr_pool_close(&pool);
	if (json) {
		json_array_end(&j);
		json_end(&j);
	} else if (!found) {
		printf("no memory server is registered in this pool\n");
	}
	return EXIT_OK;
}

int cmd_tier(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: cxlcr tier up [--size SIZE] | tier down | tier status [--json]\n");
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	if (!strcmp(argv[1], "up"))
		return tier_up(argc - 1, argv + 1);
	if (!strcmp(argv[1], "down"))
		return tier_down(argc - 1, argv + 1);
	if (!strcmp(argv[1], "status"))
		return tier_status(argc - 1, argv + 1);
	return fail(EXIT_USAGE, "cxlcr tier: unknown command '%s' (up, down, status)", argv[1]);
}
