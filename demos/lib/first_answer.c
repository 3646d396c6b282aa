/* Request-to-first-answer timing; see first_answer.h. */
#include "first_answer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ATTEMPT_MS 200 /* one connect + request: a lost SYN is retried, not waited for */
#define RETRY_NS 1000000L

uint64_t fa_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double fa_ms_since(uint64_t t0)
{
	return (double)(fa_mono_ns() - t0) / 1e6;
}

/* Waits for fd to be ready for events, until deadline (ns). */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	uint64_t now = fa_mono_ns();
	if (now >= deadline)
		return -1;
	struct pollfd p = { .fd = fd, .events = events };
	int n = poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
	return n == 1 && !(p.revents & (POLLERR | POLLNVAL)) ? 0 : -1;
}

/* Non-blocking throughout, each step bounded by ATTEMPT_MS: a child whose
 * address is not reachable yet must not hold the poller past its retry. */
int fa_attempt(struct fa_target *t)
{
	uint64_t until = fa_mono_ns() + ATTEMPT_MS * 1000000ull;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(t->port) };
	inet_pton(AF_INET, t->address, &sa.sin_addr);
	int rc = -1, err = 0;
	socklen_t len = sizeof(err);
	size_t got = 0, n = strlen(t->request);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
		goto out;
	if (wait_fd(fd, POLLOUT, until) < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		goto out;
	if (send(fd, t->request, n, MSG_NOSIGNAL) != (ssize_t)n)
		goto out;
	while (got < sizeof(t->answer) - 1) {
		if (wait_fd(fd, POLLIN, until) < 0)
			goto out;
		ssize_t r = recv(fd, t->answer + got, sizeof(t->answer) - 1 - got, 0);
		if (r <= 0)
			goto out;
		got += (size_t)r;
		t->answer[got] = 0;
		char *nl = strchr(t->answer, '\n');
		if (nl) {
			*nl = 0;
			rc = t->is_answer(t->answer) ? 0 : -1;
			break;
		}
	}
out:
	close(fd);
	return rc;
}

void fa_pause(void)
{
	nanosleep(&(struct timespec){ .tv_nsec = RETRY_NS }, NULL);
}

void *fa_poll(void *target)
{
	struct fa_target *t = target;
	t->first_answer_ms = -1;
	while (fa_mono_ns() < t->deadline) {
		if (fa_attempt(t) == 0) {
			t->first_answer_ms = fa_ms_since(t->t0);
			break;
		}
		fa_pause();
	}
	return NULL;
}

int fa_read_token(const char *prog, const char *path, char *token, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f || !fgets(token, (int)len, f)) {
		fprintf(stderr, "%s: cannot read the token from %s: %s\n", prog, path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	token[strcspn(token, "\r\n")] = 0;
	return 0;
}

/* The clock starts before the connection to the API, as a platform's
 * request would: the figures include the API round trip. The children are
 * polled by a thread each, so one slow child does not delay the others'
 * figures. */
int fa_fork_and_poll(const char *prog, const char *endpoint, const char *token, const char *service,
		     const char *host, unsigned count, uint16_t port, const char *request,
		     int (*is_answer)(const char *line), double timeout_s, struct fa_fork *f)
{
	struct cxlcr_fork_result *r = &f->result;
	pthread_t th[CXLCR_API_MAX_CHILDREN];
	uint64_t t0 = fa_mono_ns();
	struct cxlcr_api *api = cxlcr_api_connect(endpoint, token);
	if (!api || cxlcr_api_fork_mode(api, service, host, count, f->mode, f->fetch, r) < 0) {
		fprintf(stderr, "%s: fork of %s onto %s: %s\n", prog, service, host, cxlcr_api_error(api));
		cxlcr_api_close(api);
		return -1;
	}
	f->request_ms = fa_ms_since(t0);
	cxlcr_api_close(api);
	uint64_t deadline = fa_mono_ns() + (uint64_t)(timeout_s * 1e9);
	for (unsigned i = 0; i < r->count; i++) {
		f->target[i] = (struct fa_target){ .address = r->child[i].address, .port = port, .request = request,
						   .is_answer = is_answer, .t0 = t0, .deadline = deadline };
		if (pthread_create(&th[i], NULL, fa_poll, &f->target[i]) != 0) {
			fprintf(stderr, "%s: pthread_create failed\n", prog);
			return -1;
		}
	}
	int rc = 0;
	for (unsigned i = 0; i < r->count; i++) {
		pthread_join(th[i], NULL);
		if (f->target[i].first_answer_ms < 0) {
			fprintf(stderr, "%s: %s at %s:%u did not answer within %g s\n", prog, r->child[i].name,
				r->child[i].address, port, timeout_s);
			rc = 1;
		}
	}
	return rc;
}
