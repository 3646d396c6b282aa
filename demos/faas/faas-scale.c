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
 * its own, so one slow child does not delay the others' figures. Exits 1
 * if the fork fails or a child does not answer within the timeout (the
 * children it made are left running: the caller owns them, as a platform
 * would).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cxlcr/cxlcr.h>

#define ATTEMPT_MS 200 /* one connect + request; a lost SYN is retried, not waited for */
#define RETRY_NS 1000000L

struct probe {
	const struct cxlcr_fork_child *child;
	uint16_t port;
	const char *request;      /* "INVOKE WORD\n" */
	uint64_t t0, deadline;    /* ns, CLOCK_MONOTONIC */
	double first_answer_ms;   /* < 0: none */
	char answer[256];
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Waits for fd to be ready for events, until deadline (ns). */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	uint64_t now = mono_ns();
	if (now >= deadline)
		return -1;
	struct pollfd p = { .fd = fd, .events = events };
	int n = poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
	return n == 1 && !(p.revents & (POLLERR | POLLNVAL)) ? 0 : -1;
}

/* One attempt: connect, send the request, read one line. 0 if it is an
 * answer ("OK ..."). */
static int attempt(struct probe *p)
{
	uint64_t until = mono_ns() + ATTEMPT_MS * 1000000ull;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(p->port) };
	inet_pton(AF_INET, p->child->address, &sa.sin_addr);
	int rc = -1, err = 0;
	socklen_t len = sizeof(err);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
		goto out;
	if (wait_fd(fd, POLLOUT, until) < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		goto out;
	size_t n = strlen(p->request);
	if (send(fd, p->request, n, MSG_NOSIGNAL) != (ssize_t)n)
		goto out;
	size_t got = 0;
	while (got < sizeof(p->answer) - 1) {
		if (wait_fd(fd, POLLIN, until) < 0)
			goto out;
		ssize_t r = recv(fd, p->answer + got, sizeof(p->answer) - 1 - got, 0);
		if (r <= 0)
			goto out;
		got += (size_t)r;
		p->answer[got] = 0;
		char *nl = strchr(p->answer, '\n');
		if (nl) {
			*nl = 0;
			rc = strncmp(p->answer, "OK ", 3) ? -1 : 0;
			goto out;
		}
	}
out:
	close(fd);
	return rc;
}

static void *poll_child(void *arg)
{
	struct probe *p = arg;
	p->first_answer_ms = -1;
	while (mono_ns() < p->deadline) {
		if (attempt(p) == 0) {
			p->first_answer_ms = (double)(mono_ns() - p->t0) / 1e6;
			return NULL;
		}
		nanosleep(&(struct timespec){ .tv_nsec = RETRY_NS }, NULL);
	}
	return NULL;
}

static int read_token(const char *path, char *token, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f || !fgets(token, (int)len, f)) {
		fprintf(stderr, "faas-scale: cannot read the token from %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	token[strcspn(token, "\r\n")] = 0;
	return 0;
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
	if (read_token(token_file, token, sizeof(token)) < 0)
		return 1;

	static struct cxlcr_fork_result r;
	uint64_t t0 = mono_ns();
	struct cxlcr_api *api = cxlcr_api_connect(endpoint, token);
	if (!api || cxlcr_api_fork(api, service, host, count, &r) < 0) {
		fprintf(stderr, "faas-scale: fork of %s onto %s: %s\n", service, host, cxlcr_api_error(api));
		cxlcr_api_close(api);
		return 1;
	}
	double request_ms = (double)(mono_ns() - t0) / 1e6;
	cxlcr_api_close(api);

	char request[CXLCR_API_NAME_MAX + 16];
	snprintf(request, sizeof(request), "INVOKE %s\n", word);
	static struct probe probes[CXLCR_API_MAX_CHILDREN];
	pthread_t threads[CXLCR_API_MAX_CHILDREN];
	uint64_t deadline = mono_ns() + (uint64_t)(timeout_s * 1e9);
	for (unsigned i = 0; i < r.count; i++) {
		probes[i] = (struct probe){ .child = &r.child[i], .port = (uint16_t)port, .request = request,
					    .t0 = t0, .deadline = deadline };
		if (pthread_create(&threads[i], NULL, poll_child, &probes[i]) != 0) {
			fprintf(stderr, "faas-scale: pthread_create failed\n");
			return 1;
		}
	}
	int rc = 0;
	for (unsigned i = 0; i < r.count; i++) {
		pthread_join(threads[i], NULL);
		if (probes[i].first_answer_ms < 0) {
			fprintf(stderr, "faas-scale: %s at %s:%u did not answer within %g s\n", r.child[i].name,
				r.child[i].address, port, timeout_s);
			rc = 1;
		}
	}

	printf("{\"service\": \"%s\", \"host\": \"%s\", \"count\": %u, \"request_ms\": %.3f, "
	       "\"freeze_ms\": %.3f, \"snapshot_ms\": %.3f, \"restore_ms\": %.3f, \"total_ms\": %.3f, "
	       "\"children\": [",
	       service, host, r.count, request_ms, r.freeze_ms, r.snapshot_ms, r.restore_ms, r.total_ms);
	for (unsigned i = 0; i < r.count; i++) {
		/* Answers are "OK n=... top=... sum=...": no character JSON would escape. */
		const struct cxlcr_fork_child *ch = &r.child[i];
		printf("%s{\"name\": \"%s\", \"host\": \"%s\", \"address\": \"%s\", \"pid\": %d, "
		       "\"restore_ms\": %.3f, \"first_answer_ms\": %.3f, \"answer\": \"%s\"}",
		       i ? ", " : "", ch->name, ch->host, ch->address, ch->pid, ch->restore_ms,
		       probes[i].first_answer_ms, strpbrk(probes[i].answer, "\"\\") ? "" : probes[i].answer);
	}
	printf("]}\n");
	return rc;
}
