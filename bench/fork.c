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
 * yet), retried 1 ms apart (demos/lib/first_answer.c, which faas-scale
 * times its children with too). Exit 1 on any failure, with one line
 * saying it.
 */
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int probe_api(const char *endpoint, const char *token, const char *service, const char *host,
		     unsigned count, uint16_t port, const char *request, double timeout_s)
{
	static struct fa_fork f;
	int rc = fa_fork_and_poll("fork-probe", endpoint, token, service, host, count, port, request, is_value,
				  timeout_s, &f);
	if (rc < 0)
		return 1;
	const struct cxlcr_fork_result *r = &f.result;
	printf("{\"request_ms\": %.3f, \"freeze_ms\": %.3f, \"snapshot_ms\": %.3f, \"restore_ms\": %.3f, "
	       "\"total_ms\": %.3f, \"children\": [",
	       f.request_ms, r->freeze_ms, r->snapshot_ms, r->restore_ms, r->total_ms);
	for (unsigned i = 0; i < r->count; i++)
		printf("%s{\"name\": \"%s\", \"address\": \"%s\", \"restore_ms\": %.3f, \"first_answer_ms\": %.3f}",
		       i ? ", " : "", r->child[i].name, r->child[i].address, r->child[i].restore_ms,
		       f.target[i].first_answer_ms);
	printf("]}\n");
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
		static char token[CXLCR_API_TOKEN_LEN + 2];
		if (token_file && fa_read_token("fork-probe", token_file, token, sizeof(token)) < 0)
			return 1;
		return probe_api(endpoint, token_file ? token : NULL, service, host, count, (uint16_t)port,
				 request, timeout_s);
	}
	if (!addr || optind >= argc)
		usage();
	return probe_exec(addr, (uint16_t)port, request, timeout_s, argv + optind);
}
