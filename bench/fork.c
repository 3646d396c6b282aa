/*
 * fork-probe: request-to-first-answer times for bench/fork.sh, on
 * CLOCK_MONOTONIC, with one poller for both sides of the comparison.
 *
 *   fork-probe api --api ENDPOINT [--token-file FILE] --service NAME --to HOST
 *                  [--count N] [--mode share|copy] [--fetch background|eager|lazy]
 *                  --port PORT --key KEY [--timeout S]
 *       asks the fork API (libcxlcr) for N children of NAME on HOST, then
 *       polls every child (a thread each) with a Redis GET of KEY until it
 *       returns a value. Prints one JSON object: request_ms (the API's
 *       reply), the daemon's freeze_ms, snapshot_ms, restore_ms, total_ms,
 *       and per child name, address, restore_ms and first_answer_ms (from
 *       the request). The children stay: the caller stops them.
 *       With --first-keys N the request polled for the first answer is a
 *       script reading kv:str:0 .. kv:str:N-1 (a working set), not a GET
 *       of KEY.
 *       With --requests N [--keys K]: then sends the first child N GETs of
 *       keys kv:str:R (R uniform in [0, K), the same sequence every run),
 *       one at a time on one connection, and adds "requests": {"n",
 *       "p50_us", "p99_us", "total_ms"}: how the child serves its first N
 *       requests, while its pages are still coming in. With --hot-keys H
 *       --hot-pct P, P % of them read one of kv:str:0 .. kv:str:H-1 (the
 *       keys a skewed load reads: bench/tier_fork.sh), the rest any key.
 *       With --lines FILE the child speaks a line protocol instead (the
 *       FaaS function's, demos/faas/function.py): FILE holds one request
 *       a line; its first line is the first-answer request, and the N
 *       requests are its lines (--hot-keys H: P % of them of its first H
 *       lines, the rest any), each answered by one line starting "OK".
 *       With $FORK_PROBE_TRACE=FILE, each request's time is appended to
 *       FILE in the order sent ("INDEX US" a line, "end" after the last),
 *       to see when in the child's first moments the slow ones came.
 *
 *   fork-probe exec --addr IP --port PORT --key KEY [--timeout S] -- CMD...
 *       starts CMD (e.g. a criu restore) and polls IP:PORT the same way
 *       from the same instant. Prints {"first_answer_ms", "cmd_ms"}; fails
 *       if CMD fails.
 *
 * An attempt is a fresh connection, GET, and the first line of the reply
 * ("$<len>" for a value; "$-1", an error or a refused connection mean not
 * yet), retried 1 ms apart (demos/lib/first_answer.c, which faas-scale
 * times its children with too). Exit 1 on any failure, with one line
 * saying it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cxlcr/cxlcr.h>

#include "first_answer.h"

extern char **environ;

/* A Redis reply's first line: "$<len>" is a value; "$-1" (none) or an
 * error is not yet. */
static int is_value(const char *line)
{
	return line[0] == '$' && line[1] != '-';
}

/* The first-answer request of --first-keys n: one Lua script that reads
 * kv:str:0 .. kv:str:n-1, the keys a skewed load reads (bench/tier_fork.sh),
 * as the first invocation of a function touches its working set; it
 * answers "ok" once it has read them all. */
static char *working_set_request(unsigned n)
{
	static const char script[] =
		"for i = 0, tonumber(ARGV[1]) - 1 do redis.call('GET', 'kv:str:' .. i) end return 'ok'";
	char count[16];
	int cl = snprintf(count, sizeof(count), "%u", n);
	size_t len = sizeof(script) + 64;
	char *req = malloc(len);
	if (req)
		snprintf(req, len, "*4\r\n$4\r\nEVAL\r\n$%zu\r\n%s\r\n$1\r\n0\r\n$%d\r\n%s\r\n", strlen(script),
			 script, cl, count);
	return req;
}

/* Reads one RESP bulk reply ("$<len>\r\n<data>\r\n", or "$-1\r\n") whole
 * from fd: 1 for a value, 0 for none, -1 on an error or a closed socket. */
static int read_bulk(int fd)
{
	char line[64];
	size_t n = 0;
	while (n < sizeof(line) - 1) {
		if (read(fd, line + n, 1) != 1)
			return -1;
		if (line[n++] == '\n')
			break;
	}
	line[n] = 0;
	if (line[0] != '$')
		return -1;
	long len = strtol(line + 1, NULL, 10);
	if (len < 0)
		return 0;
	static char body[1 << 16];
	for (size_t left = (size_t)len + 2; left;) {
		ssize_t r = read(fd, body, left < sizeof(body) ? left : sizeof(body));
		if (r <= 0)
			return -1;
		left -= (size_t)r;
	}
	return 1;
}

/* --lines: the requests of a line-protocol child, and whether a reply's
 * first line answers one. */
static char **lines;
static unsigned line_count;

static int is_ok(const char *line)
{
	return !strncmp(line, "OK", 2);
}

static int load_lines(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "fork-probe: %s: %s\n", path, strerror(errno));
		return -1;
	}
	char buf[256];
	while (fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = 0;
		char **more = realloc(lines, (line_count + 1) * sizeof(*lines));
		if (!more || !(more[line_count] = malloc(strlen(buf) + 2))) {
			fclose(f);
			fprintf(stderr, "fork-probe: out of memory\n");
			return -1;
		}
		lines = more;
		snprintf(lines[line_count++], strlen(buf) + 2, "%s\n", buf);
	}
	fclose(f);
	if (!line_count) {
		fprintf(stderr, "fork-probe: %s holds no request\n", path);
		return -1;
	}
	return 0;
}

/* One reply line of a line-protocol child, whole: 1 if it starts "OK",
 * 0 if not, -1 on a closed socket. One request is in flight at a time, so
 * nothing follows the newline. */
static int read_line_reply(int fd)
{
	static char buf[4096];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			return -1;
		n += (size_t)r;
		if (memchr(buf, '\n', n) || n == sizeof(buf) - 1)
			break;
	}
	return is_ok(buf);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The child's first n requests right after its first answer: GETs of
 * random keys of the whole key space, hot_pct % of them of the first
 * hot_keys keys (a fixed seed, so each child is asked the same), one at a
 * time; their p50 and p99. */
static int first_requests(const char *address, uint16_t port, unsigned n, unsigned keys, unsigned hot_keys,
			  unsigned hot_pct, double *p50, double *p99, double *total_ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (fd < 0 || inet_pton(AF_INET, address, &a.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fprintf(stderr, "fork-probe: cannot connect to %s:%u: %s\n", address, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	double *us = malloc(n * sizeof(double));
	uint64_t x = 0x9e3779b97f4a7c15ull, t0 = fa_mono_ns();
	int rc = us ? 0 : -1;
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		x ^= x >> 12, x ^= x << 25, x ^= x >> 27; /* xorshift64 */
		char key[32], req[96];
		uint64_t r = x * 0x2545f4914f6cdd1dull;
		bool hot = hot_keys && (r >> 40) % 100 < hot_pct;
		uint64_t k = r % (hot ? hot_keys : keys);
		if (lines) {
			const char *line = lines[k];
			ssize_t ll = (ssize_t)strlen(line);
			uint64_t t = fa_mono_ns();
			if (write(fd, line, (size_t)ll) != ll || read_line_reply(fd) != 1) {
				fprintf(stderr, "fork-probe: request %u (%.*s) to %s: no answer\n", i, (int)ll - 1, line,
					address);
				rc = -1;
			}
			us[i] = (double)(fa_mono_ns() - t) / 1e3;
			continue;
		}
		int kl = snprintf(key, sizeof(key), "kv:str:%llu", (unsigned long long)k);
		int rl = snprintf(req, sizeof(req), "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", kl, key);
		uint64_t t = fa_mono_ns();
		if (write(fd, req, (size_t)rl) != rl || read_bulk(fd) != 1) {
			fprintf(stderr, "fork-probe: request %u (GET %s) to %s: no value\n", i, key, address);
			rc = -1;
		}
		us[i] = (double)(fa_mono_ns() - t) / 1e3;
	}
	*total_ms = fa_ms_since(t0);
	close(fd);
	const char *trace = getenv("FORK_PROBE_TRACE");
	if (rc == 0 && trace && *trace) {
		FILE *tf = fopen(trace, "a");
		if (tf) {
			for (unsigned i = 0; i < n; i++)
				fprintf(tf, "%u %.1f\n", i, us[i]);
			fprintf(tf, "end\n");
			fclose(tf);
		}
	}
	if (rc == 0) {
		qsort(us, n, sizeof(double), cmp_double);
		*p50 = us[n / 2];
		*p99 = us[(size_t)n * 99 / 100];
	}
	free(us);
	return rc;
}

static int probe_api(const char *endpoint, const char *token, const char *service, const char *host,
		     unsigned count, const char *mode, const char *fetch, uint16_t port, const char *request,
		     double timeout_s, unsigned requests, unsigned keys, unsigned hot_keys, unsigned hot_pct)
{
	static struct fa_fork f;
	f.mode = mode;
	f.fetch = fetch;
	int rc = fa_fork_and_poll("fork-probe", endpoint, token, service, host, count, port, request,
				  lines ? is_ok : is_value, timeout_s, &f);
	if (rc < 0)
		return 1;
	const struct cxlcr_fork_result *r = &f.result;
	double p50 = 0, p99 = 0, req_ms = 0;
	if (rc == 0 && requests &&
	    first_requests(r->child[0].address, port, requests, keys, hot_keys, hot_pct, &p50, &p99, &req_ms) < 0)
		rc = 1;
	printf("{\"request_ms\": %.3f, \"freeze_ms\": %.3f, \"snapshot_ms\": %.3f, \"restore_ms\": %.3f, "
	       "\"total_ms\": %.3f, \"mode\": \"%s\", \"children\": [",
	       f.request_ms, r->freeze_ms, r->snapshot_ms, r->restore_ms, r->total_ms, r->mode);
	for (unsigned i = 0; i < r->count; i++)
		printf("%s{\"name\": \"%s\", \"address\": \"%s\", \"pid\": %d, \"restore_ms\": %.3f, "
		       "\"first_answer_ms\": %.3f}",
		       i ? ", " : "", r->child[i].name, r->child[i].address, r->child[i].pid, r->child[i].restore_ms,
		       f.target[i].first_answer_ms);
	printf("]");
	if (requests)
		printf(", \"requests\": {\"n\": %u, \"p50_us\": %.1f, \"p99_us\": %.1f, \"total_ms\": %.3f}", requests,
		       p50, p99, req_ms);
	printf("}\n");
	return rc;
}

/* The command and the polling start at the same instant, and this one
 * thread does both: the restored process may answer before its criu
 * restore has ended, or after. */
static int probe_exec(const char *address, uint16_t port, const char *request, double timeout_s, char **cmd)
{
	struct fa_target t = { .address = address, .port = port, .request = request, .is_answer = is_value,
			       .first_answer_ms = -1 };
	pid_t pid;
	t.t0 = fa_mono_ns();
	t.deadline = t.t0 + (uint64_t)(timeout_s * 1e9);
	int e = posix_spawnp(&pid, cmd[0], NULL, NULL, cmd, environ);
	if (e) {
		fprintf(stderr, "fork-probe: cannot run %s: %s\n", cmd[0], strerror(e));
		return 1;
	}
	double cmd_ms = -1;
	int status = 0;
	while (fa_mono_ns() < t.deadline && (t.first_answer_ms < 0 || cmd_ms < 0)) {
		if (cmd_ms < 0 && waitpid(pid, &status, WNOHANG) == pid) {
			cmd_ms = fa_ms_since(t.t0);
			if (!WIFEXITED(status) || WEXITSTATUS(status)) {
				fprintf(stderr, "fork-probe: %s failed (status 0x%x)\n", cmd[0], status);
				return 1;
			}
		}
		if (t.first_answer_ms < 0 && fa_attempt(&t) == 0)
			t.first_answer_ms = fa_ms_since(t.t0);
		else if (t.first_answer_ms < 0 || cmd_ms < 0)
			fa_pause();
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
			"[--count N] [--mode share|copy] [--fetch background|eager|lazy] --port PORT --key KEY "
			"[--timeout S] [--first-keys N] [--lines FILE] [--requests N [--keys K] [--hot-keys H --hot-pct P]]\n"
			"       fork-probe exec --addr IP --port PORT --key KEY [--timeout S] -- CMD...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "api") && strcmp(argv[1], "exec")))
		usage();
	bool api_mode = !strcmp(argv[1], "api");
	const char *endpoint = NULL, *token_file = NULL, *service = NULL, *host = NULL, *addr = NULL, *key = NULL,
		   *mode = NULL, *fetch = NULL, *lines_file = NULL;
	unsigned count = 1, port = 0, requests = 0, keys = 0, first_keys = 0, hot_keys = 0, hot_pct = 0;
	double timeout_s = 60;
	const struct option opts[] = { { "api", required_argument, 0, 'a' },
				       { "token-file", required_argument, 0, 'k' },
				       { "service", required_argument, 0, 's' },
				       { "to", required_argument, 0, 't' },
				       { "count", required_argument, 0, 'n' },
				       { "mode", required_argument, 0, 'm' },
				       { "fetch", required_argument, 0, 'f' },
				       { "addr", required_argument, 0, 'A' },
				       { "port", required_argument, 0, 'p' },
				       { "key", required_argument, 0, 'K' },
				       { "timeout", required_argument, 0, 'T' },
				       { "requests", required_argument, 0, 'R' },
				       { "keys", required_argument, 0, 'N' },
				       { "first-keys", required_argument, 0, 'F' },
				       { "hot-keys", required_argument, 0, 'h' },
				       { "hot-pct", required_argument, 0, 'P' },
				       { "lines", required_argument, 0, 'L' },
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
		case 'm': mode = optarg; break;
		case 'f': fetch = optarg; break;
		case 'A': addr = optarg; break;
		case 'p': port = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'K': key = optarg; break;
		case 'T': timeout_s = strtod(optarg, NULL); break;
		case 'R': requests = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'N': keys = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'F': first_keys = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'h': hot_keys = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'P': hot_pct = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'L': lines_file = optarg; break;
		default: usage();
		}
	}
	if (lines_file) {
		if (load_lines(lines_file) < 0)
			return 1;
		keys = line_count;
		if (hot_keys > line_count)
			usage();
		key = "";
	}
	if (!key || strlen(key) > 200 || !port || port > 65535 || timeout_s <= 0)
		usage();
	static char get[256];
	snprintf(get, sizeof(get), "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(key), key);
	const char *request = lines ? lines[0] : get;
	if (!lines && first_keys && first_keys <= 1000000 && !(request = working_set_request(first_keys))) {
		fprintf(stderr, "fork-probe: out of memory\n");
		return 1;
	}
	if (api_mode) {
		if (!endpoint || !service || !host || optind != argc || count < 1 ||
		    count > CXLCR_API_MAX_CHILDREN || (requests && !keys))
			usage();
		static char token[CXLCR_API_TOKEN_LEN + 2];
		if (token_file && fa_read_token("fork-probe", token_file, token, sizeof(token)) < 0)
			return 1;
		return probe_api(endpoint, token_file ? token : NULL, service, host, count, mode, fetch,
				 (uint16_t)port, request, timeout_s, requests, keys, hot_keys, hot_pct);
	}
	if (!addr || optind >= argc)
		usage();
	return probe_exec(addr, (uint16_t)port, request, timeout_s, argv + optind);
}
