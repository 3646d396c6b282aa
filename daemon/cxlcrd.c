/*
 * cxlcrd: the daemon of one pod host.
 *
 * It listens on /run/cxlcr/podN/HOST.sock and on TCP at its control
 * address (the host table's; the control protocol and the fork API share
 * the port, rpc_tcp.h) and runs each request in a worker process, with the verb code of the command line, as host HOST:
 * services it starts or restores are owned by HOST in the pool. It serves
 * the fork API (api.h) the same way, on HOST.api and on TCP. The daemon
 * itself lives in the host's network and UTS namespaces (its address and
 * name); the service plumbing and CRIU work in the machine's network
 * namespace, where the pod's bridge is.
 *
 * Between requests it keeps the host registered in the pod's host table,
 * its heartbeat going, takes back the snapshot borrows of hosts whose
 * heartbeat stopped (pod/liveness.c), fences hosts it finds dead and
 * recovers their services, and, when it finds its own host fenced, kills
 * its old services first (recovery/takeover.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/catalog.h"
#include "../common/cpus.h"
#include "../common/error.h"
#include "../common/hosts.h"
#include "../common/pool_format.h"
#include "../common/pool.h"
#include "../common/util.h"
#include "../tracking/track.h"
#include "../control/fence.h"
#include "../control/outcome.h"
#include "../pager/ahead.h"
#include "../pager/pager.h"
#include "../pod/liveness.h"
#include "../tier/tier.h"
#include "api.h"
#include "../recovery/recovery.h"
#include "../tracking/idle.h"
#include "cli.h"
#include "config.h"
#include "dlog.h"
#include "fork.h"
#include "container.h"
#include "rpc.h"
#include "rpc_tcp.h"
#include "workers.h"
#include "../api/protocol.h"

static volatile sig_atomic_t stopping; /* 1: in order (SIGTERM); 2: at once (SIGINT, a second SIGTERM) */

/* The daemon's listening sockets (0: verbs, 1: the API's Unix socket, 2:
 * the API over TCP; -1: none). Every process the daemon forks without an
 * exec closes them first (close_listeners()): one that kept them would
 * keep the port bound, and requests queued unanswered, after the daemon
 * stopped listening or ended. */
static int listeners[3] = { -1, -1, -1 };

static void close_listeners(void)
{
	for (int i = 0; i < 3; i++)
		if (listeners[i] >= 0)
			close(listeners[i]), listeners[i] = -1;
}

static void on_term(int sig)
{
	if (sig == SIGINT || stopping)
		stopping = 2;
	else
		stopping = 1;
}

static void on_child(int sig)
{
	(void)sig; /* only wakes the poll: the loop reaps */
}

/* Most lines are news; failures say so with their priority. */
#define log_line(...) dlog(LOG_INFO, __VA_ARGS__)

/* Started by `cxlcr pod up` ($CXLCR_POD set): an emulated host, whose
 * daemon lives in the host's network namespace and sends its workers into
 * the pod's. Otherwise a real machine: everything in its own namespaces. */
static bool emulated;

/* Workers act in the machine's network namespace (see the top comment). */
static int enter_pod_network(void)
{
	if (!emulated)
		return 0;
	const struct pod *pod = pod_current(false);
	if (!pod)
		return -1;
	int fd = open(pod->netns_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return cxlcr_error("cannot enter the pod network namespace: %s", strerror(e));
	}
	close(fd);
	return 0;
}

/* A request's verb, its outcome recorded in the pool for `cxlcr status`
 * (control/outcome.h): whoever asked may be gone by its end. */
static char served_verb[32] = "?"; /* the request's verb, for the log */
static int dispatch_recorded(int argc, char **argv)
{
	if (argc > 0)
		snprintf(served_verb, sizeof(served_verb), "%s", argv[0]);
	int rc = cli_dispatch(argc, argv);
	fflush(NULL);
	const struct verb_args *a = verb_args_last();
	if (a && a->name && !a->lease && !a->recovery_point)
		verb_outcome_after_request(argv[0], a->name, rc, fail_last(), cli_host);
	return rc;
}

static void serve(int conn, bool over_tcp)
{
	signal(SIGCHLD, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	/* rpc_serve() hands stdout and stderr to the client. */
	dlog_set_fd(fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3));
	uint64_t t0 = cxlcr_mono_ns();
	int status;
	if (enter_pod_network() < 0) {
		dlog(LOG_ERR, "%s", cxlcr_last_error());
		_exit(EXIT_FAIL);
	}
	status = over_tcp ? rpc_serve_tcp(conn, dispatch_recorded) : rpc_serve(conn, dispatch_recorded);
	if (status < 0)
		dlog(LOG_WARNING, "request refused: %s", cxlcr_last_error());
	else
		log_line("request done: %s, exit %d in %.1f ms", served_verb, status,
			 (double)(cxlcr_mono_ns() - t0) / 1e6);
	_exit(status < 0 ? EXIT_FAIL : status);
}

/* A verb the daemon runs on its own (recovery/takeover.c: the recovery
 * of a host it fenced), as a worker: forked, not exec'd (the command's
 * start-up would add its libraries' constructors to a recovery), in the
 * pod's network like a request's worker, its output in the daemon's log.
 * The worker's pid, or -1. */
static pid_t run_verb(int argc, char **argv)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close_listeners();
		signal(SIGCHLD, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		uint64_t t0 = cxlcr_mono_ns();
		if (enter_pod_network() < 0) {
			dlog(LOG_ERR, "%s", cxlcr_last_error());
			_exit(EXIT_FAIL);
		}
		optind = 1;
		int status = cli_dispatch(argc, argv);
		fflush(NULL);
		log_line("%s %s done: exit %d in %.1f ms", argv[0], argc > 1 ? argv[1] : "", status,
			 (double)(cxlcr_mono_ns() - t0) / 1e6);
		_exit(status);
	}
	if (pid < 0)
		return cxlcr_error("cannot fork a worker: %s", strerror(errno));
	workers_add(pid, -1, 0, cxlcr_mono_ns());
	return pid;
}

/* A worker for one fork API request: it logs one line. */
static void serve_api(int conn, bool over_tcp)
{
	signal(SIGCHLD, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	char summary[1024];
	/* The TCP port serves the control protocol too (rpc_tcp.h). */
	if (over_tcp && rpc_tcp_is_control(conn))
		serve(conn, true);
	if (enter_pod_network() < 0) {
		dlog(LOG_ERR, "api request: %s", cxlcr_last_error());
		_exit(EXIT_FAIL);
	}
	int rc = api_serve(conn, over_tcp, summary, sizeof(summary));
	log_line("%s", summary);
	_exit(rc < 0 ? EXIT_FAIL : EXIT_OK);
}

/* The fork API's sockets: HOST.api, and TCP at the host's address unless
 * the port is 0. The pod's token is made here if `pod up` did not. */
static int listen_api(const char *address, int port, int *unix_fd, int *tcp_fd, char *path, size_t len)
{
	const struct pod *pod = pod_current(false);
	*tcp_fd = -1;
	if (!pod || api_token_ensure(pod) < 0)
		return -1;
	*unix_fd = rpc_listen(api_socket_path(cli_host, path, len));
	if (*unix_fd < 0)
		return -1;
	if (port > 0 && (*tcp_fd = api_listen_tcp(cli_host, address, port)) < 0) {
		close(*unix_fd);
		unlink(path);
		return -1;
	}
	return 0;
}

/*
 * A worker killed in the middle of a verb (issue 13): the services whose
 * lease it held are taken over and given back at once, by a process of
 * its own, which resumes what the worker left frozen (or fences it, if a
 * restored copy owns the arena and runs): without it they would stay
 * frozen, off the bridge, until the next verb on them.
 */
static void worker_died(pid_t pid, int sig, bool overdue)
{
	pid_t r = fork();
	if (r != 0) {
		if (r < 0)
			dlog(LOG_WARNING, "worker %d was killed; cannot fork its recovery: %s", (int)pid,
			     strerror(errno));
		return;
	}
	close_listeners();
	signal(SIGCHLD, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	/* It resumes in the pod's network, as a worker would (its link). */
	struct cxlcr_pool pool;
	int n = -1;
	if (enter_pod_network() < 0)
		dlog(LOG_ERR, "worker %d was killed; its services wait for their next verb: %s", (int)pid,
		     cxlcr_last_error());
	else if (cxlcr_pool_open(&pool, cxlcr_pool_path()) == 0) {
		char why[96];
		if (overdue)
			snprintf(why, sizeof(why), "stalled past its deadline ($%s) and was killed", WORKER_DEADLINE_ENV);
		else
			snprintf(why, sizeof(why), "was killed by signal %d", sig);
		n = verb_recover_dead(&pool, pid, why);
		/* (An operator's restore of a dead host's service that it ran
		 * had reopened that host's recovery: the daemon's next tick
		 * marks it done again, pod/liveness.c.) */
		/* A fork-restore worker's children that CRIU restored before it
		 * could make them services: they end with their maker. */
		int half = fork_drop_half_made(&pool, NULL);
		if (half > 0) {
			cxlcr_catalog_reap(&pool, NULL); /* their borrows */
			dlog(LOG_WARNING, "worker %d was killed while making fork children: %d half-made child%s "
			     "ended and freed", (int)pid, half, half == 1 ? "" : "ren");
		}
		cxlcr_pool_close(&pool);
	}
	if (n > 0)
		dlog(LOG_WARNING, "worker %d was killed in a verb: %d service%s taken over and resumed", (int)pid,
		     n, n == 1 ? "" : "s");
	_exit(0);
}

/* A worker past its deadline (workers_kill_overdue) was killed. */
static void worker_overdue(pid_t pid, uint64_t ran_ns)
{
	dlog(LOG_WARNING, "worker %d served one request for %llu ms, past its deadline ($%s): killed", (int)pid,
	     (unsigned long long)(ran_ns / 1000000ull), WORKER_DEADLINE_ENV);
}

/* A connection over the limits gets one line and is closed: a JSON
 * error on the fork API, the verb protocol's refusal otherwise. */
static void refuse(int conn, int kind, const char *why)
{
	if (kind != 0) {
		size_t len;
		char *line = api_error_encode(why, &len);
		if (line && write(conn, line, len) < 0)
			(void)0;
		free(line);
	}
	dlog(LOG_WARNING, "connection refused: %s", why);
	close(conn);
}

/* Hands a connection to a worker process, which serves it and exits;
 * unless the endpoint or the peer has as many workers as it may. */
static void spawn_worker(int conn, int kind)
{
	char why[128];
	uint64_t peer = workers_peer_of(conn);
	workers_reap(worker_died);
	if (!workers_admit(kind, peer, why, sizeof(why))) {
		refuse(conn, kind, why);
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close_listeners();
		if (kind == 0)
			serve(conn, false);
		else
			serve_api(conn, kind == 2);
	}
	if (pid < 0)
		dlog(LOG_ERR, "cannot fork a worker: %s", strerror(errno));
	else
		workers_add(pid, kind, peer, cxlcr_mono_ns());
	close(conn);
}

/* How long a daemon that stops in order waits for the recoveries its host
 * works on ($CXLCR_STOP_WAIT_MS, 0..80000; the systemd unit's stop
 * timeout is 90 s). */
#define STOP_WAIT_DEFAULT_MS 60000
#define STOP_WAIT_MAX_MS 80000 /* under the unit's TimeoutStopSec=90: a SIGKILL there is a host death */

static long stop_wait_ms(void)
{
	const char *v = getenv("CXLCR_STOP_WAIT_MS");
	if (!v || !*v)
		return STOP_WAIT_DEFAULT_MS;
	char *end;
	errno = 0;
	long ms = strtol(v, &end, 10);
	if (errno || *end || ms < 0 || ms > STOP_WAIT_MAX_MS) {
		dlog(LOG_WARNING, "CXLCR_STOP_WAIT_MS='%s' is not 0..%d: waiting %d ms", v, STOP_WAIT_MAX_MS,
		     STOP_WAIT_DEFAULT_MS);
		return STOP_WAIT_DEFAULT_MS;
	}
	return ms;
}

/*
 * Stopping in order (SIGTERM), before the entry says `left`: the
 * recoveries of dead hosts that this host works on (a fence it won whose
 * recovery worker still runs, a restore by hand here that reopened one)
 * are finished first. A host that left is gone to the others, who take
 * such a recovery over at once and fence it: the restore by hand an
 * operator is running here would fail at its next change, for no fault of
 * its own. Meanwhile the daemon goes on beating (it is alive), takes no
 * new request (its listeners are closed, in its forks too), fences
 * nobody and takes no recovery over, and reaps (and kills past their
 * deadline) its workers. Bounded by $CXLCR_STOP_WAIT_MS, or ended by
 * SIGINT or a second SIGTERM: then it leaves anyway, and the others take
 * over what is left.
 */
static void finish_recoveries(void (*died)(pid_t, int, bool), uint64_t deadline_ns)
{
	uint32_t host = 0;
	if (stopping > 1 || liveness_own_recoveries(&host) == 0)
		return;
	close_listeners();
	liveness_stop_taking_recoveries();
	long wait_ms = stop_wait_ms();
	int period = liveness_period_ms();
	uint64_t end = cxlcr_mono_ns() + (uint64_t)wait_ms * 1000000ull;
	dlog(LOG_NOTICE, "stopping: waiting for the recovery of host entry %u's services that this host works on "
	     "to finish before leaving (at most %ld ms)", host, wait_ms);
	int open = 1;
	while (stopping < 2 && cxlcr_mono_ns() < end) {
		workers_reap(died);
		workers_kill_overdue(cxlcr_mono_ns(), deadline_ns, worker_overdue);
		if (liveness_tick(dlog))
			break; /* fenced meanwhile: what it did is the others' now */
		if ((open = liveness_own_recoveries(&host)) == 0)
			break;
		poll(NULL, 0, period);
	}
	if (open)
		dlog(LOG_WARNING, "stopping: leaving with the recovery of host entry %u's services still under way: "
		     "another host takes it over", host);
	else
		dlog(LOG_NOTICE, "stopping: the recoveries this host worked on are done");
}

/* The control address the host table gives the other hosts: where the
 * TCP listener is bound ("" if on every address, or not listening). */
static void register_identity(int tcp, int port)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	char ip[INET_ADDRSTRLEN] = "";
	if (tcp >= 0 && getsockname(tcp, (struct sockaddr *)&a, &len) == 0 && a.sin_family == AF_INET &&
	    a.sin_addr.s_addr != htonl(INADDR_ANY))
		inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
	liveness_identity(ip, tcp >= 0 ? (uint32_t)port : 0);
}

static void usage(void)
{
	printf("usage: cxlcrd [--config FILE] [--host NAME] [--pool PATH] [--address ADDR] [--port PORT]\n"
	       "              [--lease MS] [--ready-fd FD]\n\n"
	       "The daemon of one pod host: on a machine, run by systemd (cxlcrd.service) with\n"
	       "--config %s; in the emulated pod, `cxlcr pod up` starts one per host.\n"
	       "Flags override the file's keys (host, pool, address, port, lease); the file's\n"
	       "recovery_interval (ms, default 1000; 0: none) is how often the services this\n"
	       "daemon starts take a recovery point unless cxlcr run --recovery-interval says;\n"
	       "its pager_cpus ($%s, a CPU list as 0-3,8) is where the pagers of copy-mode\n"
	       "children run, off the services' own CPUs; its cold_ahead_mb ($%s, default %u; 0:\n"
	       "none) bounds the one fetch of a tiered snapshot's cold pages that several\n"
	       "copy-mode children forked at once share; its fault_around ($%s, pages, default\n"
	       "%u; 1: its page alone) is how many pages a fault on a cold page reads; its\n"
	       "huge_after_s ($%s, default %d; 0: never) is how long a service that takes no\n"
	       "recovery points goes without a snapshot before it gets 2 MiB mappings again.\n"
	       "  --host     this host's name in the pod (default: the machine's name)\n"
	       "  --pool     the pool device or file ($CXLCR_POOL, else %s)\n"
	       "  --address  the IPv4 address to listen on over TCP (default: the emulated host's,\n"
	       "             else any)\n"
	       "  --port     the TCP port (the control protocol and the fork API; $%s, default %d; 0: no TCP)\n"
	       "  --lease    ms: a host whose heartbeat stood still that long is dead and its services\n"
	       "             are recovered elsewhere ($CXLCR_LEASE_MS, default %d)\n"
	       "SIGTERM stops it in order: the recoveries of dead hosts it runs (or a restore by\n"
	       "hand here) are finished first, at most $CXLCR_STOP_WAIT_MS (default %d), then the\n"
	       "host leaves the pod; SIGINT (or a second SIGTERM) leaves at once.\n",
	       DAEMON_CONFIG_DEFAULT, PAGER_CPUS_ENV, AHEAD_ENV, AHEAD_MB_DEFAULT, PAGER_FAULT_AROUND_ENV,
	       PAGER_FAULT_AROUND_MAX, HUGE_AFTER_ENV, HUGE_AFTER_DEFAULT_S, CXLCR_POOL_DEFAULT_PATH, API_PORT_ENV, CXLCR_API_PORT, DAEMON_LEASE_DEFAULT_MS, STOP_WAIT_DEFAULT_MS);
}

/* The flags, then the file they override: what the daemon runs with. */
static int configure(int argc, char **argv, struct daemon_config *cfg, int *ready_fd)
{
	static const struct option opts[] = { { "config", required_argument, 0, 'c' },
					      { "host", required_argument, 0, 'H' },
					      { "pool", required_argument, 0, 'P' },
					      { "address", required_argument, 0, 'a' },
					      { "port", required_argument, 0, 'p' },
					      { "api-port", required_argument, 0, 'p' },
					      { "ready-fd", required_argument, 0, 'r' },
					      { "lease", required_argument, 0, 'l' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	struct daemon_config flags;
	const char *file = NULL;
	int c;
	daemon_config_init(&flags);
	daemon_config_init(cfg);
	while ((c = getopt_long(argc, argv, "c:H:P:a:p:r:l:h", opts, NULL)) != -1) {
		const char *bad = NULL;
		switch (c) {
		case 'c': file = optarg; break;
		case 'H': snprintf(flags.host, sizeof(flags.host), "%s", optarg); break;
		case 'P': snprintf(flags.pool, sizeof(flags.pool), "%s", optarg); break;
		case 'a':
			if (!daemon_config_address_ok(optarg))
				bad = "--address: not an IPv4 address";
			snprintf(flags.address, sizeof(flags.address), "%s", optarg);
			break;
		case 'p':
			if ((flags.port = daemon_config_port(optarg)) < 0)
				bad = "the port must be a number from 0 to 65535";
			break;
		case 'r': *ready_fd = atoi(optarg); break;
		case 'l':
			if ((flags.lease_ms = daemon_config_lease(optarg)) < 0)
				bad = "--lease: a number of milliseconds from 1 to 3600000";
			break;
		case 'h': usage(); exit(0);
		default: return EXIT_USAGE;
		}
		if (bad) {
			dlog_startup_error("%s", bad);
			return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		dlog_startup_error("unexpected argument '%s' (see --help)", argv[optind]);
		return EXIT_USAGE;
	}
	if (file && daemon_config_read(file, cfg) < 0) {
		dlog_startup_error("%s", cxlcr_last_error());
		return EXIT_USAGE;
	}
	if (flags.host[0])
		memcpy(cfg->host, flags.host, sizeof(cfg->host));
	if (flags.pool[0])
		memcpy(cfg->pool, flags.pool, sizeof(cfg->pool));
	if (flags.address[0])
		memcpy(cfg->address, flags.address, sizeof(cfg->address));
	if (flags.port >= 0)
		cfg->port = flags.port;
	if (flags.lease_ms > 0)
		cfg->lease_ms = flags.lease_ms;
	/* The pagers' CPUs go to them as the lease does: in the environment
	 * that the workers, and the pagers their forks start, inherit. */
	if (cfg->pager_cpus[0])
		setenv(PAGER_CPUS_ENV, cfg->pager_cpus, 1);
	const char *pager_cpus = getenv(PAGER_CPUS_ENV);
	if (pager_cpus && cxlcr_pin_cpus(pager_cpus, true) < 0) {
		dlog_startup_error("pager_cpus: %s", cxlcr_last_error());
		return EXIT_USAGE;
	}
	/* So does the limit of the fetch ahead (pager/ahead.h), checked here
	 * once rather than at each fork. */
	if (cfg->cold_ahead_mb[0])
		setenv(AHEAD_ENV, cfg->cold_ahead_mb, 1);
	if (ahead_limit() < 0) {
		dlog_startup_error("%s", cxlcr_last_error());
		return EXIT_USAGE;
	}
	/* And how much a cold fault reads (pager/pager.h). */
	if (cfg->fault_around[0])
		setenv(PAGER_FAULT_AROUND_ENV, cfg->fault_around, 1);
	if (pager_fault_around() < 0) {
		dlog_startup_error("%s", cxlcr_last_error());
		return EXIT_USAGE;
	}
	/* And when an idle service gets 2 MiB mappings again (tracking/idle.c). */
	if (cfg->huge_after_s[0])
		setenv(HUGE_AFTER_ENV, cfg->huge_after_s, 1);
	if (tracking_huge_after_s() < 0) {
		dlog_startup_error("%s: %s", HUGE_AFTER_ENV, cxlcr_last_error());
		return EXIT_USAGE;
	}
	/* The lease is the process's (common/hosts.c reads it): the heartbeat
	 * beats every quarter of it, and hosts silent for it are dead. */
	char lease[24];
	if (cfg->lease_ms > 0 || !getenv("CXLCR_LEASE_MS")) {
		snprintf(lease, sizeof(lease), "%ld", cfg->lease_ms > 0 ? cfg->lease_ms : DAEMON_LEASE_DEFAULT_MS);
		setenv("CXLCR_LEASE_MS", lease, 1);
	}
	/* So is the recovery interval of the services it starts (cmd_run.c). */
	char interval[24];
	if (cfg->recovery_interval_ms >= 0 || !getenv(RECOVERY_INTERVAL_ENV)) {
		snprintf(interval, sizeof(interval), "%ld",
			 cfg->recovery_interval_ms >= 0 ? cfg->recovery_interval_ms : DAEMON_RECOVERY_INTERVAL_DEFAULT_MS);
		setenv(RECOVERY_INTERVAL_ENV, interval, 1);
	}
	if (cfg->port < 0 && (cfg->port = api_port_from_env()) < 0) {
		dlog_startup_error("$%s: the port must be a number from 0 to 65535", API_PORT_ENV);
		return EXIT_USAGE;
	}
	if (!cfg->host[0])
		snprintf(cfg->host, sizeof(cfg->host), "%s", emulated ? "" : cxlcr_host_name());
	if (!cfg->host[0]) {
		dlog_startup_error("--host NAME is required");
		return EXIT_USAGE;
	}
	if (!cxlcr_valid_name(cfg->host) || strlen(cfg->host) >= CXLCR_HOST_MAX) {
		dlog_startup_error("host name '%s' is not valid", cfg->host);
		return EXIT_USAGE;
	}
	if (cfg->pool[0])
		setenv("CXLCR_POOL", cfg->pool, 1);
	return 0;
}

int main(int argc, char **argv)
{
	static struct daemon_config cfg;
	int ready_fd = -1;
	const char *pod_env = getenv("CXLCR_POD");
	emulated = pod_env && *pod_env;
	int rc = configure(argc, argv, &cfg, &ready_fd);
	if (rc)
		return rc;
	cli_host = cfg.host;
	cxlcr_host_name_set(cli_host);
	dlog_init(cli_host);
	/* CRIU and the daemon's other children inherit its working
	 * directory: nothing of theirs must land in a directory someone
	 * shares. (A service runs in its own: host_files.h.) */
	const char *pool_env = getenv("CXLCR_POOL");
	if (pool_env && pool_env[0] != '/') {
		char *abs = realpath(pool_env, NULL);
		if (abs)
			setenv("CXLCR_POOL", abs, 1);
		free(abs);
	}
	if (chdir("/") < 0) {
		dlog_startup_error("cannot change directory to /: %s", strerror(errno));
		return EXIT_FAIL;
	}
	/* A machine's daemon makes the run directory of its pool (where the
	 * command line finds its socket); an emulated host's was made by
	 * `pod up`. */
	const struct pod *machine_pod = emulated ? NULL : pod_current(true);
	char path[128], api_path[128] = "";
	int s = -1, api_unix = -1, api_tcp = -1;
	if (emulated || machine_pod)
		s = rpc_listen(host_socket_path(cli_host, path, sizeof(path)));
	if (s >= 0 && listen_api(cfg.address, cfg.port, &api_unix, &api_tcp, api_path, sizeof(api_path)) < 0) {
		close(s);
		unlink(path);
		s = -1;
	}
	if (s < 0) {
		if (ready_fd >= 0)
			dprintf(ready_fd, "error: %s\n", cxlcr_last_error());
		dlog(LOG_ERR, "%s", cxlcr_last_error());
		if (machine_pod)
			pod_forget(machine_pod);
		return EXIT_FAIL;
	}
	struct sigaction sa = { .sa_handler = on_term };
	sigaddset(&sa.sa_mask, SIGTERM); /* on_term reads, then writes: one at a time */
	sigaddset(&sa.sa_mask, SIGINT);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* Workers are counted (workers.c) and reaped as they end: SIGCHLD
	 * interrupts the poll below. */
	struct sigaction chld = { .sa_handler = on_child };
	sigaction(SIGCHLD, &chld, NULL);
	signal(SIGPIPE, SIG_IGN);
	char tcp[96] = "";
	if (api_tcp >= 0)
		snprintf(tcp, sizeof(tcp), " and tcp %s:%d", cfg.address[0] ? cfg.address : "(host's address)",
			 cfg.port);
	log_line("host %s (%s) listening on %s, pool %s; fork API on %s%s", cli_host,
		 emulated ? "emulated" : "machine", path, cxlcr_pool_path(), api_path, tcp);
	register_identity(api_tcp, cfg.port);
	liveness_on_fence(workers_kill_all);
	recovery_set_runner(run_verb);
	/* When this machine's kernel says it is failing, its services go to
	 * other hosts (recovery/kmsg.c). An emulated host watches only what
	 * $CXLCR_KMSG names (a FIFO of its own: they share the machine's
	 * kernel); an empty $CXLCR_KMSG watches nothing. */
	const char *kmsg = getenv("CXLCR_KMSG");
	if (!kmsg && !emulated)
		kmsg = "/dev/kmsg";
	if (kmsg_watch_start(kmsg, cli_host, dlog) < 0)
		log_line("%s", cxlcr_last_error());
	/* Requests over TCP are authenticated with the pod's key: the first
	 * daemon of a pool makes it. libsodium starts here once, not in
	 * every worker. */
	uint8_t key[32];
	if (sodium_init() < 0)
		dlog(LOG_ERR, "libsodium cannot start");
	if (rpc_pod_key(key, true) < 0)
		dlog(LOG_ERR, "%s", cxlcr_last_error());
	memset(key, 0, sizeof(key));
	/* Whether this kernel keeps tracking across a drop of the heap's page
	 * tables is asked once, here (tracking/zap_probe.c), and the forked
	 * workers inherit the answer: asked in each, it cost every snapshot
	 * and every recovery point ~3 ms of CPU (a 4 MiB memfd written,
	 * dropped and scanned). */
	if (cxlcr_tracking_enabled())
		log_line("the kernel %s tracking across a drop of page tables",
			 cxlcr_track_zap_keeps_writes() ? "keeps" : "does not keep");
	/* A host that serves children of tiered snapshots starts libfabric
	 * now, before it joins the pod (nobody judges its heartbeat yet):
	 * ~0.4 s once, which its workers, and the pagers their forks start,
	 * inherit instead of paying it on each fork's path (tier_warm()).
	 * When `tier_warm = yes` is configured, $CXLCR_TIER_WARM is 1, or a
	 * memory server of the pool is up already; `no` never. */
	const char *warm_env = getenv("CXLCR_TIER_WARM");
	if (cfg.tier_warm != 0) {
		bool always = cfg.tier_warm == 1 || (warm_env && !strcmp(warm_env, "1"));
		struct cxlcr_pool pool;
		bool opened = cxlcr_pool_open(&pool, cxlcr_pool_path()) == 0;
		uint64_t t0 = cxlcr_mono_ns();
		if (tier_warm(opened ? &pool : NULL, always))
			log_line("libfabric started for the cold tier in %.0f ms", (double)(cxlcr_mono_ns() - t0) / 1e6);
		if (opened)
			cxlcr_pool_close(&pool);
	}
	/* Registered in the host table before it says it is ready: a verb
	 * finds a host there and nowhere else, and one sent the moment
	 * `pod up` (or systemd) returned found no such host. */
	int period = liveness_period_ms();
	bool fenced = liveness_tick(dlog);
	uint64_t next_tick = cxlcr_mono_ns() + (uint64_t)period * 1000000ull, next_points = 0;
	if (ready_fd >= 0) {
		dprintf(ready_fd, "ok %d\n", getpid());
		close(ready_fd);
	}
	/* 0: the verb socket, 1: the API's Unix socket, 2: the API over TCP. */
	listeners[0] = s, listeners[1] = api_unix, listeners[2] = api_tcp;
	struct pollfd p[3];
	for (int i = 0; i < 3; i++)
		p[i] = (struct pollfd){ .fd = listeners[i], .events = POLLIN };
	uint64_t worker_deadline_ns = (uint64_t)workers_deadline_ms(rpc_timeout_ms()) * 1000000ull;
	while (!stopping) {
		workers_reap(worker_died);
		uint64_t now = cxlcr_mono_ns();
		uint64_t next_overdue = workers_kill_overdue(now, worker_deadline_ns, worker_overdue);
		if (now >= next_tick) {
			fenced = liveness_tick(dlog);
			next_tick = cxlcr_mono_ns() + (uint64_t)period * 1000000ull;
			now = cxlcr_mono_ns();
		}
		/* A fenced host's services are the winner's until it is done. */
		if (fenced)
			next_points = next_tick;
		else if (now >= next_points) {
			/* One opening of the pool for the pass's two looks at this
			 * host's services. */
			struct cxlcr_pool pool;
			int next_ms = 1000;
			if (cxlcr_pool_open(&pool, cxlcr_pool_path()) == 0) {
				next_ms = recovery_points_tick(&pool, cli_host, dlog);
				tracking_idle_tick(&pool, cli_host, dlog);
				cxlcr_pool_close(&pool);
			}
			next_points = now + (uint64_t)next_ms * 1000000ull;
			now = cxlcr_mono_ns();
		}
		uint64_t wake = next_points < next_tick ? next_points : next_tick;
		wake = next_overdue < wake ? next_overdue : wake;
		if (poll(p, 3, wake > now ? (int)((wake - now) / 1000000ull) + 1 : 0) <= 0)
			continue; /* EINTR from SIGTERM ends the loop, from SIGCHLD reaps */
		for (int i = 0; i < 3; i++) {
			if (p[i].fd < 0 || !(p[i].revents & POLLIN))
				continue;
			int conn = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (conn >= 0)
				spawn_worker(conn, i);
		}
	}
	finish_recoveries(worker_died, worker_deadline_ns);
	liveness_leave();
	unlink(path);
	unlink(api_path);
	if (machine_pod)
		pod_forget(machine_pod);
	log_line("stopped");
	return 0;
}
