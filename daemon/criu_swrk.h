/*
 * CRIU's restore run as a service worker (`criu swrk FD`): CRIU is started
 * first, with the fds it will need and in the namespace it will restore
 * into, and told what to restore later, in one request over a socket
 * (CRIU's rpc.proto, encoded with protobuf-c).
 *
 * Why: exec'ing criu (the dynamic loader, its libraries, its start-up)
 * costs ~2 ms before it reads an image, and every restore of a migrate
 * runs while the service is frozen. A migrate's destination starts its
 * worker before the source freezes (cmd_migrate.c: the restore session),
 * so that only the request is left for the freeze. Every restore goes
 * this one way, a migrate's or not (criu.c), so that tests and faults
 * exercise the path that migrates take.
 */
#ifndef CXLCR_CRIU_SWRK_H
#define CXLCR_CRIU_SWRK_H
#include <stdbool.h>
#include <sys/types.h>

#include "exec.h"

#define CRIU_SWRK_INHERIT_MAX 8

/* What a restore asks of CRIU: the options of `criu restore` cxlcr uses. */
struct criu_restore_opts {
	const char *dir;       /* the image set, also CRIU's work directory */
	const char *log_file;  /* in dir */
	int log_level;
	bool tcp_close;        /* a fork child: its parent's connections closed */
	bool leave_stopped;    /* a copy-mode child: its pager lets it run */
	int n_inherit;         /* --inherit-fd fd[FD]:KEY */
	struct { int fd; const char *key; } inherit[CRIU_SWRK_INHERIT_MAX];
};

struct criu_swrk {
	struct exec_child child; /* criu (through its keeper: exec.h) */
	int sk;                  /* our end of its request socket */
	bool started;
};

/* Starts `criu swrk` through a keeper (exec_argv_kept()'s rules: it dies
 * with this worker, and what it leaves behind with it), in the network
 * namespace netns_fd, with fds[i] as its fd 3 + i (nfds <= 7; the request
 * socket comes after them). With hold, what a successful restore made is
 * held stopped until exec_held_release() (exec.h). 0, or -1 with the
 * reason. */
int criu_swrk_start(struct criu_swrk *w, const int *fds, int nfds, int netns_fd, bool hold);

/* Sends the restore and waits for CRIU to end (timeout_s): 0 with the
 * restored init's pid in *pid; otherwise non-zero as exec_tool_finish()
 * (the reason in cxlcr_last_error(), CRIU's own in its log). The worker is
 * spent either way. */
int criu_swrk_restore(struct criu_swrk *w, const struct criu_restore_opts *o, int timeout_s, pid_t *pid);

/* A started worker that will not be asked: stopped and reaped. */
void criu_swrk_abort(struct criu_swrk *w);

#endif
