/*
 * Running the tools cxlcr drives (ip, nsenter, iptables, criu): argv lists,
 * never a shell, with a time limit on each, and the tool's last line of
 * stderr kept for the one-line error that reaches the operator.
 */
#ifndef CXLCR_EXEC_H
#define CXLCR_EXEC_H
#include <stdbool.h>
#include <sys/types.h>

/* Runs argv (NULL-terminated) and waits at most timeout_s seconds. Returns
 * its exit status, or -1 (killed, timed out, or could not start) with the
 * reason in cxlcr_last_error(). A non-zero status also sets the error. */
int exec_argv(char *const argv[], int timeout_s);

/* exec_argv(), with pass_fd handed to the tool as its fd 3. */
int exec_argv_fd(char *const argv[], int timeout_s, int pass_fd);
/* exec_argv(), with fds[i] handed to the tool as its fd 3 + i (nfds <= 8). */
int exec_argv_fds(char *const argv[], int timeout_s, const int *fds, int nfds);
/* exec_argv_fds(), the tool running in the network namespace netns_fd
 * (-1: ours). */
int exec_argv_in(char *const argv[], int timeout_s, const int *fds, int nfds, int netns_fd);

/* exec_argv_in() for a tool that builds processes (criu restore), run by
 * a keeper: if the verb dies, the tool and everything it left behind die
 * too (see run_kept() in exec.c). */
int exec_argv_kept(char *const argv[], int timeout_s, const int *fds, int nfds, int netns_fd);

/* How a tool runs: by itself, or under a keeper (run_kept() in exec.c),
 * which may also hold what a successful tool made (EXEC_HELD: a criu
 * restore whose tasks are left stopped) until exec_held_release(). */
enum exec_keep {
	EXEC_BARE,
	EXEC_KEPT,
	EXEC_HELD,
};

/* A tool started and waited for in two steps (a criu swrk, which is sent
 * its request between them): exec_argv_kept()'s start, with fds[i] as the
 * tool's fd 3 + i (nfds <= 8), and its wait, which collects the tool's
 * stderr, bounds it by timeout_s and stops it if the caller of this
 * worker's request goes. finish returns the tool's exit status, or -1;
 * under EXEC_HELD a success leaves the keeper holding (this process's one
 * held keeper). abort stops a started tool that will not be waited for. */
struct exec_child {
	pid_t pid;      /* the tool, or its keeper */
	int err;        /* its stderr */
	enum exec_keep keep;
	int report, go; /* EXEC_HELD: the keeper's "the tool succeeded", and our "go" */
	char name[32];
};
int exec_tool_start(char *const argv[], const int *fds, int nfds, int netns_fd, enum exec_keep keep,
		    struct exec_child *c);
int exec_tool_finish(struct exec_child *c, int timeout_s);
void exec_tool_abort(struct exec_child *c);

/* The held keeper (if any) lets the stopped tasks its tool made run (go:
 * SIGCONT to each, which it waits for), or ends them. Until then, and if
 * this process dies first, they never run: the keeper ends them when our
 * end of its "go" pipe closes without a go. stopped (n of them, at most
 * EXEC_HELD_STOPPED_MAX; pids in the restored tree's PID namespace): the
 * processes that were stopped when they were checkpointed, which stay
 * stopped. 0, or -1 if they could not be let run (gone). */
/* A held keeper's process name: a stopped task whose parent has it waits
 * for its restore's go (control/owner_state.c); once the keeper has let
 * the rest run and ended, a task left stopped (an operator's) is not
 * held. */
#define EXEC_KEEPER_NAME "cxlcr-keeper"
#define EXEC_HELD_STOPPED_MAX 1000 /* the go is one write of at most PIPE_BUF (4096) bytes */
int exec_held_release(bool go, const pid_t *stopped, size_t n);

/* The next tool run from this thread takes fd over (pass it among its fds
 * too): this process closes its own copy as soon as the tool has one, so
 * that a lock on fd lives exactly as long as the tool (not as long as a
 * verb that may stall meanwhile). */
void exec_hand_over(int fd);

/* exec_argv() on a NULL-terminated list of arguments. */
int exec_run(int timeout_s, const char *arg0, ...) __attribute__((sentinel));

/* A tool killed half-way can leave children behind (a criu restore killed
 * mid-way leaves the tasks it was rebuilding, stuck, holding the pool and
 * the service's link name). exec_adopt_orphans() makes this process the
 * reaper of the orphans of the tools it runs from now on (a tool's own
 * detached result too, such as a restored service, until we exit);
 * exec_kill_orphans() SIGKILLs and reaps every child this process has,
 * and returns how many there were. */
int exec_adopt_orphans(void);
int exec_kill_orphans(void);

/* In a child just forked from parent: it dies (SIGKILL) when parent does,
 * even if parent died before the prctl. 0, or -1 if parent is gone. A
 * process a verb forks to work for it must not outlive the verb: what it
 * started would go on behind the back of whoever handles the verb's end
 * (docs/control-plane.md). */
int exec_die_with(pid_t parent);

#endif
