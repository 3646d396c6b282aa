/*
 * cxlcrd: the daemon of one pod host.
 *
 * It listens on /run/cxlcr/podN/HOST.sock and runs each request in a
 * worker process, with the verb code of the command line, as host HOST:
 * services it starts or restores are owned by HOST in the pool. It serves
 * the fork API (api.h) the same way, on HOST.api and on TCP. The daemon
 * itself lives in the host's network and UTS namespaces (its address and
 * name); the service plumbing and CRIU work in the machine's network
 * namespace, where the pod's bridge is.
 *
 * Between requests it keeps the host's heartbeat in the pool going and
 * takes back the snapshot borrows of hosts whose heartbeat stopped
 * (pod/liveness.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../pod/liveness.h"
#include "api.h"
#include "cli.h"
#include "container.h"
#include "rpc.h"
#include "workers.h"
#include "../api/protocol.h"

static volatile sig_atomic_t stopping;
static int log_fd = STDERR_FILENO; /* the daemon's log, even in a worker */

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

static void on_child(int sig)
{
	(void)sig; /* only wakes the poll: the loop reaps */
}

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...)
{
	char when[32];
	time_t t = time(NULL);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime(&t));
	char line[1024];
	int n = snprintf(line, sizeof(line), "%s cxlcrd[%s]: ", when, cli_host);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	dprintf(log_fd, "%s\n", line);
}

/* Workers act in the machine's network namespace (see the top comment). */
static int enter_pod_network(void)
{
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

static void serve(int conn)
{
	signal(SIGCHLD, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	/* rpc_serve() hands stdout and stderr to the client. */
	log_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	uint64_t t0 = cxlcr_mono_ns();
	int status;
	if (enter_pod_network() < 0) {
		log_line("%s", cxlcr_last_error());
		_exit(EXIT_FAIL);
	}
	status = rpc_serve(conn, cli_dispatch);
	if (status < 0)
		log_line("request refused: %s", cxlcr_last_error());
	else
		log_line("request done: exit %d in %.1f ms", status, (double)(cxlcr_mono_ns() - t0) / 1e6);
	_exit(status < 0 ? EXIT_FAIL : status);
}

/* A worker for one fork API request: it logs one line. */
static void serve_api(int conn, bool over_tcp)
{
	signal(SIGCHLD, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	char summary[1024];
	if (enter_pod_network() < 0) {
		log_line("api request: %s", cxlcr_last_error());
		_exit(EXIT_FAIL);
	}
	int rc = api_serve(conn, over_tcp, summary, sizeof(summary));
	log_line("%s", summary);
	_exit(rc < 0 ? EXIT_FAIL : EXIT_OK);
}

/* The fork API's sockets: HOST.api, and TCP at the host's address unless
 * the port is 0. The pod's token is made here if `pod up` did not. */
static int listen_api(int port, int *unix_fd, int *tcp_fd, char *path, size_t len)
{
	const struct pod *pod = pod_current(false);
	*tcp_fd = -1;
	if (!pod || api_token_ensure(pod) < 0)
		return -1;
	*unix_fd = rpc_listen(api_socket_path(cli_host, path, len));
	if (*unix_fd < 0)
		return -1;
	if (port > 0 && (*tcp_fd = api_listen_tcp(cli_host, port)) < 0) {
		close(*unix_fd);
		unlink(path);
		return -1;
	}
	return 0;
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
	log_line("connection refused: %s", why);
	close(conn);
}

/* Hands a connection to a worker process, which serves it and exits;
 * unless the endpoint or the peer has as many workers as it may. */
static void spawn_worker(int conn, int kind, const int *listeners, int n)
{
	char why[128];
	uint64_t peer = workers_peer_of(conn);
	workers_reap();
	if (!workers_admit(kind, peer, why, sizeof(why))) {
		refuse(conn, kind, why);
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < n; i++)
			if (listeners[i] >= 0)
				close(listeners[i]);
		if (kind == 0)
			serve(conn);
		else
			serve_api(conn, kind == 2);
	}
	if (pid < 0)
		log_line("cannot fork a worker: %s", strerror(errno));
	else
		workers_add(pid, kind, peer);
	close(conn);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "host", required_argument, 0, 'H' },
					      { "ready-fd", required_argument, 0, 'r' },
					      { "api-port", required_argument, 0, 'p' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	int c, ready_fd = -1, api_port = api_port_from_env();
	while ((c = getopt_long(argc, argv, "H:r:p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'H': cli_host = optarg; break;
		case 'r': ready_fd = atoi(optarg); break;
		case 'p': {
			char *end;
			long port = strtol(optarg, &end, 10);
			api_port = *end || port < 0 || port > 65535 ? -1 : (int)port;
			break;
		}
		case 'h':
			printf("usage: cxlcrd --host NAME [--ready-fd FD] [--api-port PORT]\n\n"
			       "The daemon of pod host NAME; `cxlcr pod up` starts one per host.\n"
			       "The pool is $CXLCR_POOL, or %s.\n"
			       "The fork API listens on NAME.api and on TCP port PORT of the host's\n"
			       "address ($%s, default %d; 0: no TCP).\n", CXLCR_POOL_DEFAULT_PATH,
			       API_PORT_ENV, CXLCR_API_PORT);
			return 0;
		default: return EXIT_USAGE;
		}
	}
	if (!cli_host || !cxlcr_valid_name(cli_host)) {
		fprintf(stderr, "cxlcrd: --host NAME is required\n");
		return EXIT_USAGE;
	}
	if (api_port < 0) {
		fprintf(stderr, "cxlcrd: the API port must be a number from 0 to 65535\n");
		return EXIT_USAGE;
	}
	/* Services and CRIU inherit the daemon's working directory: CRIU's
	 * leftovers of a killed dump (proc.crtools) or a service's own files
	 * (Redis's dump.rdb) must not land in a directory someone shares. */
	const char *pool_env = getenv("CXLCR_POOL");
	if (pool_env && pool_env[0] != '/') {
		char *abs = realpath(pool_env, NULL);
		if (abs)
			setenv("CXLCR_POOL", abs, 1);
		free(abs);
	}
	if (chdir("/") < 0) {
		fprintf(stderr, "cxlcrd: cannot change directory to /: %s\n", strerror(errno));
		return EXIT_FAIL;
	}
	char path[128], api_path[128];
	int s = rpc_listen(host_socket_path(cli_host, path, sizeof(path))), api_unix = -1, api_tcp = -1;
	if (s >= 0 && listen_api(api_port, &api_unix, &api_tcp, api_path, sizeof(api_path)) < 0) {
		close(s);
		unlink(path);
		s = -1;
	}
	if (s < 0) {
		if (ready_fd >= 0)
			dprintf(ready_fd, "error: %s\n", cxlcr_last_error());
		fprintf(stderr, "cxlcrd: %s\n", cxlcr_last_error());
		return EXIT_FAIL;
	}
	struct sigaction sa = { .sa_handler = on_term };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* Workers are counted (workers.c) and reaped as they end: SIGCHLD
	 * interrupts the poll below. */
	struct sigaction chld = { .sa_handler = on_child };
	sigaction(SIGCHLD, &chld, NULL);
	signal(SIGPIPE, SIG_IGN);
	log_line("listening on %s, pool %s; fork API on %s%s", path, cxlcr_pool_path(), api_path,
		 api_tcp >= 0 ? " and TCP" : "");
	if (ready_fd >= 0) {
		dprintf(ready_fd, "ok %d\n", getpid());
		close(ready_fd);
	}
	/* 0: the verb socket, 1: the API's Unix socket, 2: the API over TCP. */
	int listeners[3] = { s, api_unix, api_tcp };
	struct pollfd p[3];
	for (int i = 0; i < 3; i++)
		p[i] = (struct pollfd){ .fd = listeners[i], .events = POLLIN };
	int period = liveness_period_ms();
	uint64_t next_tick = 0;
	while (!stopping) {
		workers_reap();
		uint64_t now = cxlcr_mono_ns();
		if (now >= next_tick) {
			liveness_tick(log_line);
			next_tick = cxlcr_mono_ns() + (uint64_t)period * 1000000ull;
			now = cxlcr_mono_ns();
		}
		if (poll(p, 3, (int)((next_tick - now) / 1000000ull) + 1) <= 0)
			continue; /* EINTR from SIGTERM ends the loop, from SIGCHLD reaps */
		for (int i = 0; i < 3; i++) {
			if (p[i].fd < 0 || !(p[i].revents & POLLIN))
				continue;
			int conn = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (conn >= 0)
				spawn_worker(conn, i, listeners, 3);
		}
	}
	liveness_leave();
	unlink(path);
	unlink(api_path);
	log_line("stopped");
	return 0;
}
