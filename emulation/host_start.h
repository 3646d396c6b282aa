/*
 * Starting a program of an emulated host (a pod host's cxlcrd, the memory
 * host's cxlcr-memd) inside the host's network namespace, detached from
 * whoever asked (its own session, its output in the host's log), and
 * waiting until it says it is ready: the program is given --ready-fd 3 by
 * its caller and writes "ok PID ..." there, or one line of error.
 */
#ifndef CXLCR_HOST_START_H
#define CXLCR_HOST_START_H

#include <stddef.h>
#include <sys/types.h>

#define HOST_START_READY_MS 10000 /* how long a program may take to say it is ready */

struct host_start {
	const char *netns;            /* the network namespace's path (/run/netns/NAME) */
	const char *log;              /* its stdout and stderr (appended, 0640) */
	const char *bin;              /* the program */
	char *const *argv;            /* its arguments, NULL-ended (with --ready-fd 3) */
	/* In the child, once in the network namespace, before it detaches:
	 * the rest of the host's making (its own host name, file system,
	 * environment). 0, or -1 with cxlcr_last_error(). May be NULL. */
	int (*setup)(void *arg);
	/* In the caller while the child sets up (it may wait for it, as the
	 * pin of a host's new mount namespace does). 0, or -1 with
	 * cxlcr_last_error(), after which the child is not waited for. */
	int (*alongside)(pid_t child, void *arg);
	void *arg;
};

/* Starts s->bin as above. Returns its pid (as it said: "ok PID"), or -1
 * with the line it said instead (or "no answer") in cxlcr_last_error();
 * said (len bytes) gets that line either way, and stays empty when
 * s->alongside failed (its error stands). */
int host_start(const struct host_start *s, char *said, size_t len);

#endif
