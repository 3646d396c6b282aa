/*
 * first_answer: how long from a request (a fork through libcxlcr, or a
 * restore) until a server answers, on CLOCK_MONOTONIC. Shared by
 * bench/fork.c (fork-probe: Redis GETs) and demos/faas/faas-scale.c
 * (function invocations), so that both time a first answer the same way.
 *
 * An attempt is a fresh TCP connection, the request, and the first line of
 * the reply; the caller's is_answer says whether that line is an answer
 * (anything else, or a refused connection, means not yet). Attempts are
 * retried 1 ms apart until the deadline.
 */
#ifndef CXLCR_FIRST_ANSWER_H
#define CXLCR_FIRST_ANSWER_H

#include <stddef.h>
#include <stdint.h>

#include <cxlcr/cxlcr.h>

struct fa_target {
	const char *address;            /* IPv4, dotted */
	uint16_t port;
	const char *request;            /* sent on every attempt */
	int (*is_answer)(const char *line); /* the reply's first line, without its newline */
	uint64_t t0, deadline;          /* ns, CLOCK_MONOTONIC */
	double first_answer_ms;         /* from t0; < 0: none yet */
	char answer[256];               /* the last attempt's first line */
};

uint64_t fa_mono_ns(void);
double fa_ms_since(uint64_t t0);
/* One attempt: 0 if the server answered (t->answer holds the line). */
int fa_attempt(struct fa_target *t);
/* The pause between two attempts. */
void fa_pause(void);
/* A thread's body: attempts until the first answer or the deadline. */
void *fa_poll(void *target);
/* Reads the pod's API token from path into token (len bytes with the NUL). */
int fa_read_token(const char *prog, const char *path, char *token, size_t len);

/* What fa_fork_and_poll measured besides each target's first answer. */
struct fa_fork {
	const char *mode;                /* in: "share", "copy", or NULL (the daemon's default) */
	const char *fetch;               /* in: copy mode's "background", "eager", "lazy", or NULL */
	struct cxlcr_fork_result result; /* the daemon's reply */
	struct fa_target target[CXLCR_API_MAX_CHILDREN];
	double request_ms;               /* request to the API's reply */
};

/*
 * Asks the fork API at endpoint for count children of service on host,
 * then polls every child's address:port with request (a thread each) from
 * the instant of the request. -1: the fork failed or a thread could not
 * start (said on stderr, prefixed with prog); 1: a child did not answer
 * within timeout_s (said too); 0: every child answered.
 */
int fa_fork_and_poll(const char *prog, const char *endpoint, const char *token, const char *service,
		     const char *host, unsigned count, uint16_t port, const char *request,
		     int (*is_answer)(const char *line), double timeout_s, struct fa_fork *f);

#endif
