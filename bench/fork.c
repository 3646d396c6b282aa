/*
 * fork-probe: request-to-first-answer times for bench/fork.sh, on
 * CLOCK_MONOTONIC, with one poller for both sides of the comparison.
 *
 *   fork-probe api --api ENDPOINT [--token-file FILE] --service NAME --to HOST
 *                  [--count N] --port PORT --key KEY [--timeout S]
 *       asks the fork API (libcxlcr) for N children of NAME on HOST, then
 *       polls every child (a thread each) with a Redis GET of KEY until it
 *       returns a value. Prints one JSON object: request_ms (the API's
 *       reply), the daemon's freeze_ms, snapshot_ms, restore_ms, total_ms,
 *       and per child name, address, restore_ms and first_answer_ms (from
 *       the request). The children stay: the caller stops them.
 *
 *   fork-probe exec --addr IP --port PORT --key KEY [--timeout S] -- CMD...
 *       starts CMD (e.g. a criu restore) and polls IP:PORT the same way
 *       from the same instant. Prints {"first_answer_ms", "cmd_ms"}; fails
 *       if CMD fails.
 *
 * An attempt is a fresh connection, GET, and the first line of the reply
 * ("$<len>" for a value; "$-1", an error or a refused connection mean not
 * yet), retried 1 ms apart. Exit 1 on any failure, with one line saying it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cxlcr/cxlcr.h>

#define ATTEMPT_MS 200 /* per attempt: a lost SYN is retried, not waited for */
#define RETRY_NS 1000000L

extern char **environ;

struct target {
	char address[16];
	uint16_t port;
	const char *request;    /* the GET, in RESP */
	uint64_t t0, deadline;  /* ns */
	double first_answer_ms; /* < 0: none yet */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double ms_since(uint64_t t0)
{
	return (double)(mono_ns() - t0) / 1e6;
}

static int wait_fd(int fd, short events, uint64_t deadline)
{
	uint64_t now = mono_ns();
	if (now >= deadline)
		return -1;
	struct pollfd p = { .fd = fd, .events = events };
	int n = poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
	return n == 1 && !(p.revents & (POLLERR | POLLNVAL)) ? 0 : -1;
}

/* One attempt: 0 if the server returned a value for the key. */
static int attempt(const struct target *t)
{
	uint64_t until = mono_ns() + ATTEMPT_MS * 1000000ull;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(t->port) };
	inet_pton(AF_INET, t->address, &sa.sin_addr);
	int rc = -1, err = 0;
	socklen_t len = sizeof(err);
	char line[64];
	size_t got = 0, n = strlen(t->request);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
		goto out;
	if (wait_fd(fd, POLLOUT, until) < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		goto out;
	if (send(fd, t->request, n, MSG_NOSIGNAL) != (ssize_t)n)
		goto out;
	while (got < sizeof(line) - 1) {
		if (wait_fd(fd, POLLIN, until) < 0)
			goto out;
		ssize_t r = recv(fd, line + got, sizeof(line) - 1 - got, 0);
		if (r <= 0)
			goto out;
		got += (size_t)r;
		line[got] = 0;
		if (strchr(line, '\n')) {
			rc = line[0] == '$' && line[1] != '-' ? 0 : -1;
			break;
		}
	}
out:
	close(fd);
	return rc;
}

static void pause_retry(void)
{
	nanosleep(&(struct timespec){ .tv_nsec = RETRY_NS }, NULL);
}

static void *poll_target(void *arg)
{
	struct target *t = arg;
	t->first_answer_ms = -1;
	while (mono_ns() < t->deadline) {
		if (attempt(t) == 0) {
			t->first_answer_ms = ms_since(t->t0);
			break;
		}
		pause_retry();
	}
	return NULL;
}

static char *read_token(const char *path)
{
	static char token[CXLCR_API_TOKEN_LEN + 2];
	FILE *f = fopen(path, "re");
	if (!f || !fgets(token, sizeof(token), f)) {
		fprintf(stderr, "fork-probe: cannot read the token from %s\n", path);
		exit(1);
	}
	fclose(f);
	token[strcspn(token, "\r\n")] = 0;
	return token;
}

static int probe_api(const char *endpoint, const char *token, const char *service, const char *host,
		     unsigned count, uint16_t port, const char *request, double timeout_s)
{
	static struct cxlcr_fork_result r;
	static struct target t[CXLCR_API_MAX_CHILDREN];
	pthread_t th[CXLCR_API_MAX_CHILDREN];
	uint64_t t0 = mono_ns();
	struct cxlcr_api *api = cxlcr_api_connect(endpoint, token);
	if (!api || cxlcr_api_fork(api, service, host, count, &r) < 0) {
		fprintf(stderr, "fork-probe: fork of %s onto %s: %s\n", service, host, cxlcr_api_error(api));
		cxlcr_api_close(api);
		return 1;
	}
	double request_ms = ms_since(t0);
	cxlcr_api_close(api);
	uint64_t deadline = mono_ns() + (uint64_t)(timeout_s * 1e9);
	for (unsigned i = 0; i < r.count; i++) {
		t[i] = (struct target){ .port = port, .request = request, .t0 = t0, .deadline = deadline };
		snprintf(t[i].address, sizeof(t[i].address), "%s", r.child[i].address);
		if (pthread_create(&th[i], NULL, poll_target, &t[i]) != 0) {
			fprintf(stderr, "fork-probe: pthread_create failed\n");
			return 1;
		}
	}
	int rc = 0;
	for (unsigned i = 0; i < r.count; i++) {
		pthread_join(th[i], NULL);
		if (t[i].first_answer_ms < 0) {
			fprintf(stderr, "fork-probe: %s at %s:%u did not answer within %g s\n", r.child[i].name,
				r.child[i].address, port, timeout_s);
			rc = 1;
		}
	}
	printf("{\"request_ms\": %.3f, \"freeze_ms\": %.3f, \"snapshot_ms\": %.3f, \"restore_ms\": %.3f, "
	       "\"total_ms\": %.3f, \"children\": [",
	       request_ms, r.freeze_ms, r.snapshot_ms, r.restore_ms, r.total_ms);
	for (unsigned i = 0; i < r.count; i++)
		printf("%s{\"name\": \"%s\", \"address\": \"%s\", \"restore_ms\": %.3f, \"first_answer_ms\": %.3f}",
		       i ? ", " : "", r.child[i].name, r.child[i].address, r.child[i].restore_ms,
		       t[i].first_answer_ms);
	printf("]}\n");
	return rc;
}

static int probe_exec(const char *address, uint16_t port, const char *request, double timeout_s, char **cmd)
{
	struct target t = { .port = port, .request = request, .first_answer_ms = -1 };
	snprintf(t.address, sizeof(t.address), "%s", address);
	pid_t pid;
	t.t0 = mono_ns();
	t.deadline = t.t0 + (uint64_t)(timeout_s * 1e9);
	int e = posix_spawnp(&pid, cmd[0], NULL, NULL, cmd, environ);
	if (e) {
		fprintf(stderr, "fork-probe: cannot run %s: %s\n", cmd[0], strerror(e));
		return 1;
	}
	double cmd_ms = -1;
	int status = 0;
	while (mono_ns() < t.deadline && (t.first_answer_ms < 0 || cmd_ms < 0)) {
		if (cmd_ms < 0 && waitpid(pid, &status, WNOHANG) == pid) {
			cmd_ms = ms_since(t.t0);
			if (!WIFEXITED(status) || WEXITSTATUS(status)) {
				fprintf(stderr, "fork-probe: %s failed (status 0x%x)\n", cmd[0], status);
				return 1;
			}
		}
		if (t.first_answer_ms < 0 && attempt(&t) == 0)
			t.first_answer_ms = ms_since(t.t0);
		else if (t.first_answer_ms < 0 || cmd_ms < 0)
			pause_retry();
	}
	if (t.first_answer_ms < 0 || cmd_ms < 0) {
		fprintf(stderr, "fork-probe: %s within %g s\n",
			t.first_answer_ms < 0 ? "no answer" : "the command did not end", timeout_s);
		if (cmd_ms < 0)
			kill(pid, SIGKILL), waitpid(pid, &status, 0);
		return 1;
	}
	printf("{\"first_answer_ms\": %.3f, \"cmd_ms\": %.3f}\n", t.first_answer_ms, cmd_ms);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: fork-probe api --api ENDPOINT [--token-file FILE] --service NAME --to HOST "
			"[--count N] --port PORT --key KEY [--timeout S]\n"
			"       fork-probe exec --addr IP --port PORT --key KEY [--timeout S] -- CMD...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "api") && strcmp(argv[1], "exec")))
		usage();
	bool api_mode = !strcmp(argv[1], "api");
	const char *endpoint = NULL, *token_file = NULL, *service = NULL, *host = NULL, *addr = NULL, *key = NULL;
	unsigned count = 1, port = 0;
	double timeout_s = 60;
	const struct option opts[] = { { "api", required_argument, 0, 'a' },
				       { "token-file", required_argument, 0, 'k' },
				       { "service", required_argument, 0, 's' },
				       { "to", required_argument, 0, 't' },
				       { "count", required_argument, 0, 'n' },
				       { "addr", required_argument, 0, 'A' },
				       { "port", required_argument, 0, 'p' },
				       { "key", required_argument, 0, 'K' },
				       { "timeout", required_argument, 0, 'T' },
				       { 0, 0, 0, 0 } };
	int c;
	optind = 2;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (c) {
		case 'a': endpoint = optarg; break;
		case 'k': token_file = optarg; break;
		case 's': service = optarg; break;
		case 't': host = optarg; break;
		case 'n': count = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'A': addr = optarg; break;
		case 'p': port = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'K': key = optarg; break;
		case 'T': timeout_s = strtod(optarg, NULL); break;
		default: usage();
		}
	}
	if (!key || strlen(key) > 200 || !port || port > 65535 || timeout_s <= 0)
		usage();
	char request[256];
	snprintf(request, sizeof(request), "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(key), key);
	if (api_mode) {
		if (!endpoint || !service || !host || optind != argc || count < 1 ||
		    count > CXLCR_API_MAX_CHILDREN)
			usage();
		return probe_api(endpoint, token_file ? read_token(token_file) : NULL, service, host, count,
				 (uint16_t)port, request, timeout_s);
	}
	if (!addr || optind >= argc)
		usage();
	return probe_exec(addr, (uint16_t)port, request, timeout_s, argv + optind);
}
