/*
 * Starting a program of an emulated host (a pod host's cxlcrd, the memory
 * host's cxlcr-memd) inside the host's network namespace (and, for a pod
 * host, its pid namespace: emulation/hostpid.h), detached from whoever
 * asked (its own session, its output in the host's log), and waiting until
 * it says it is ready: the program is given --ready-fd 3 by its caller and
 * writes "ok PID ..." there, or one line of error.
 */
#ifndef CXLCR_HOST_START_H
#define CXLCR_HOST_START_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define HOST_START_READY_MS 10000 /* how long a program may take to say it is ready */

struct host_start {
	const char *host;              /* its name, for errors */
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
	/* The host's own pid namespace: with own_pid_ns, the program starts
	 * in the namespace of the init whose pidfd is init_fd, or, when
	 * init_fd is -1, in a new one whose init (hostpid_make(), once the
	 * host's set-up is done: it mounts the host's /proc) is then in
	 * *init_made. Without, it runs in this machine's. */
	bool own_pid_ns;
	int init_fd;
	pid_t *init_made;
};

/* Starts s->bin as above. Returns its pid on this machine (the one its
 * starter forked; the program says its own, in its namespace: "ok PID"),
 * or -1 with the line it said instead (or "no answer") in
 * cxlcr_last_error(); said (len bytes) gets that line either way, and
 * stays empty when s->alongside failed (its error stands). A new init is
 * in *init_made even when the program then failed (the host is up, with
 * nothing running in it). */
int host_start(const struct host_start *s, char *said, size_t len);

#endif
