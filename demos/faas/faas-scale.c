/*
 * faas-scale: what a FaaS platform does to scale a warm function out, with
 * libcxlcr (<cxlcr/cxlcr.h>): ask the daemon of the function's host, over
 * TCP with the pod's token, for N children on another host, then send each
 * child a first invocation and time it.
 *
 *   faas-scale --api tcp:IP:7390 --token-file FILE --service NAME --to HOST
 *              --port PORT [--count N] [--probe WORD] [--timeout SECONDS]
 *
 * Prints one JSON object: the fork's own timings (request_ms: the API's
 * reply, freeze_ms, snapshot_ms, restore_ms, total_ms as the daemon
 * reports them) and per child its name, host, address, pid, restore_ms,
 * first_answer_ms (fork request to the child's first answer, on
 * CLOCK_MONOTONIC) and that answer. Every child is polled by a thread of
 * its own (demos/lib/first_answer.c, shared with bench/fork.c's
 * fork-probe), so one slow child does not delay the others' figures. Exits 1
 * if the fork fails or a child does not answer within the timeout (the
 * children it made are left running: the caller owns them, as a platform
 * would).
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cxlcr/cxlcr.h>

#include "first_answer.h"

/* An invocation's answer is "OK ..." (anything else is an error). */
static int is_ok(const char *line)
{
	return !strncmp(line, "OK ", 3);
}

static void usage(void)
{
	fprintf(stderr, "usage: faas-scale --api ENDPOINT --token-file FILE --service NAME --to HOST "
			"--port PORT [--count N] [--probe WORD] [--timeout SECONDS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *endpoint = NULL, *token_file = NULL, *service = NULL, *host = NULL, *word = "kalomi";
	unsigned count = 1, port = 0;
	double timeout_s = 30;
	const struct option opts[] = { { "api", required_argument, 0, 'a' },
				       { "token-file", required_argument, 0, 'k' },
				       { "service", required_argument, 0, 's' },
				       { "to", required_argument, 0, 't' },
				       { "port", required_argument, 0, 'p' },
				       { "count", required_argument, 0, 'n' },
				       { "probe", required_argument, 0, 'w' },
				       { "timeout", required_argument, 0, 'T' },
				       { 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'a': endpoint = optarg; break;
		case 'k': token_file = optarg; break;
		case 's': service = optarg; break;
		case 't': host = optarg; break;
		case 'p': port = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': count = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'w': word = optarg; break;
		case 'T': timeout_s = strtod(optarg, NULL); break;
		default: usage();
		}
	}
	if (!endpoint || !token_file || !service || !host || optind != argc || !port || port > 65535 ||
	    count < 1 || count > CXLCR_API_MAX_CHILDREN || timeout_s <= 0)
		usage();
	char token[CXLCR_API_TOKEN_LEN + 2];
	if (fa_read_token("faas-scale", token_file, token, sizeof(token)) < 0)
		return 1;

	char request[CXLCR_API_NAME_MAX + 16];
	snprintf(request, sizeof(request), "INVOKE %s\n", word);
	static struct fa_fork f;
	int rc = fa_fork_and_poll("faas-scale", endpoint, token, service, host, count, (uint16_t)port, request,
				  is_ok, timeout_s, &f);
	if (rc < 0)
		return 1;

	const struct cxlcr_fork_result *r = &f.result;
	printf("{\"service\": \"%s\", \"host\": \"%s\", \"count\": %u, \"request_ms\": %.3f, "
	       "\"freeze_ms\": %.3f, \"snapshot_ms\": %.3f, \"restore_ms\": %.3f, \"total_ms\": %.3f, "
	       "\"children\": [",
	       service, host, r->count, f.request_ms, r->freeze_ms, r->snapshot_ms, r->restore_ms, r->total_ms);
	for (unsigned i = 0; i < r->count; i++) {
		/* Answers are "OK n=... top=... sum=...": no character JSON would escape. */
		const struct cxlcr_fork_child *ch = &r->child[i];
		const struct fa_target *t = &f.target[i];
		printf("%s{\"name\": \"%s\", \"host\": \"%s\", \"address\": \"%s\", \"pid\": %d, "
		       "\"restore_ms\": %.3f, \"first_answer_ms\": %.3f, \"answer\": \"%s\"}",
		       i ? ", " : "", ch->name, ch->host, ch->address, ch->pid, ch->restore_ms,
		       t->first_answer_ms, strpbrk(t->answer, "\"\\") ? "" : t->answer);
	}
	printf("]}\n");
	return rc;
}
