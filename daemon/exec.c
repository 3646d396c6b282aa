#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "container.h"
#include "exec.h"
#include "rpc.h"

#define EXEC_MAX_ARGS 64

static int exec_tool(char *const argv[], int timeout_s, const int *fds, int nfds, int netns_fd, enum exec_keep keep);
static int list_children(pid_t *out, int max);

static __thread int handed_over = -1; /* exec_hand_over() */

void exec_hand_over(int fd)
{
	handed_over = fd;
}

/* The last non-empty line of what the tool wrote to stderr. */
static void last_line(const char *buf, char *out, size_t len)
{
	const char *end = buf + strlen(buf);
	while (end > buf && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	const char *start = end;
	while (start > buf && start[-1] != '\n')
		start--;
	snprintf(out, len, "%.*s", (int)(end - start), start);
}

int exec_argv(char *const argv[], int timeout_s)
{
	return exec_argv_fd(argv, timeout_s, -1);
}

int exec_argv_fd(char *const argv[], int timeout_s, int pass_fd)
{
	return exec_argv_fds(argv, timeout_s, &pass_fd, pass_fd >= 0 ? 1 : 0);
}

int exec_argv_fds(char *const argv[], int timeout_s, const int *fds, int nfds)
{
	return exec_argv_in(argv, timeout_s, fds, nfds, -1);
}

/*
 * The keeper of a tool that builds processes (a criu restore) or forks
 * helpers of its own (a criu dump: its kernel checks' probe): a process
 * between the verb and the tool, the reaper of whatever the tool leaves
 * behind, so that a tool killed half-way leaves nothing running when the
 * verb died too. The tool dies with the keeper (PR_SET_PDEATHSIG), and the
 * keeper learns of the verb's death by its own parent-death signal: it
 * then kills the tool and every process it adopted (half-restored tasks,
 * which would otherwise map the arena for ever). It kills what it adopted
 * too when the tool failed (killed, or exited non-zero). Otherwise the
 * keeper only passes the tool's exit on, and exits with it, handing the
 * tool's result (a restored service) up to the verb.
 * A held keeper (report >= 0) does not pass a success on by exiting: see
 * hold_made().
 */
/* A held keeper's go (hold_made): one write of at most PIPE_BUF bytes,
 * so a verb that dies in the middle of it said nothing. */
struct held_go {
	char word;      /* 'g' */
	uint32_t n;     /* processes that stay stopped */
	pid_t stopped[EXEC_HELD_STOPPED_MAX];
};
_Static_assert(sizeof(struct held_go) <= PIPE_BUF, "a keeper's go fits one atomic pipe write");
_Noreturn static void hold_made(int report, int go);
_Noreturn static void run_kept(char *const argv[], pid_t verb, int report, int go)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGPIPE); /* a report nobody reads fails, it does not kill */
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0 || prctl(PR_SET_PDEATHSIG, SIGUSR2) < 0 || getppid() != verb)
		_exit(127);
	/* What a held keeper holds is its children that wait for the go:
	 * known by their parent's name (EXEC_KEEPER_NAME). */
	if (report >= 0)
		prctl(PR_SET_NAME, EXEC_KEEPER_NAME);
	pid_t keeper = getpid();
	pid_t tool = fork();
	if (tool == 0) {
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != keeper)
			_exit(127);
		execvp(argv[0], argv);
		dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (tool < 0)
		_exit(127);
	bool orphaned = false;
	int status = 0;
	for (;;) {
		int sig = sigwaitinfo(&set, NULL);
		if (sig == SIGUSR2 || getppid() != verb) {
			orphaned = true;
			kill(tool, SIGKILL);
		}
		pid_t w = waitpid(tool, &status, WNOHANG);
		if (w == tool)
			break;
	}
	/* A tool that failed leaves nothing running either: what it had
	 * built (half-restored tasks, which map the pool) are our orphans. */
	if (orphaned || getppid() != verb || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		exec_kill_orphans();
	if (orphaned || getppid() != verb)
		_exit(1);
	if (report >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		hold_made(report, go);
	if (WIFSIGNALED(status)) {
		signal(WTERMSIG(status), SIG_DFL);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(WTERMSIG(status));
	}
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

/*
 * A held keeper's tool succeeded: what it made (a criu restore's tasks,
 * left stopped) is ours, adopted. It runs only once the verb says go,
 * after it has judged the result: a verb that dies first (our "go" pipe
 * ends without a word) leaves nothing that ran, so a source or a
 * checkpoint that goes on in its place meets an arena nobody else wrote
 * (daemon/criu.c says what happened without this). The go is one byte,
 * written before the verb can die, so a death just after it is no "no".
 */
_Noreturn static void hold_made(int report, int go)
{
	char word = 0;
	if (write(report, &word, 1) != 1) {
		exec_kill_orphans();
		_exit(1);
	}
	/* The go: 'g', then how many processes stay stopped and their pids
	 * in the restored tree's namespace, in one write (exec_held_release). */
	struct held_go g;
	ssize_t n;
	while ((n = read(go, &g, sizeof(g))) < 0 && errno == EINTR)
		;
	if (n < (ssize_t)offsetof(struct held_go, stopped) || g.word != 'g' || g.n > EXEC_HELD_STOPPED_MAX ||
	    (size_t)n != offsetof(struct held_go, stopped) + g.n * sizeof(pid_t)) {
		exec_kill_orphans();
		_exit(1);
	}
	pid_t kids[256];
	int k = list_children(kids, 256), rc = k > 0 ? 0 : 1;
	for (int i = 0; i < k; i++) {
		/* One killed while held is our zombie (its /proc stays): not a
		 * success, though the rest would run. */
		siginfo_t si = { 0 };
		if (waitid(P_PID, (id_t)kids[i], &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == kids[i])
			rc = 1;
		else if (container_signal_all_but(kids[i], SIGCONT, g.stopped, g.n) < 0)
			rc = 1;
	}
	_exit(rc);
}

int exec_argv_in(char *const argv[], int timeout_s, const int *fds, int nfds, int netns_fd)
{
	return exec_tool(argv, timeout_s, fds, nfds, netns_fd, EXEC_BARE);
}

int exec_argv_kept(char *const argv[], int timeout_s, const int *fds, int nfds, int netns_fd)
{
	return exec_tool(argv, timeout_s, fds, nfds, netns_fd, EXEC_KEPT);
}

/* The tool started: forked, its fds and namespace set, exec'd (through a
 * keeper if keep). exec_tool_finish() waits for it. */
int exec_tool_start(char *const argv[], const int *fds, int nfds, int netns_fd, enum exec_keep keep,
		    struct exec_child *c)
{
	int err[2], report[2] = { -1, -1 }, go[2] = { -1, -1 };
	if (pipe2(err, O_CLOEXEC) < 0)
		return cxlcr_error("%s: pipe: %s", argv[0], strerror(errno));
	if (keep == EXEC_HELD && (pipe2(report, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)) {
		int e = errno;
		for (int i = 0; i < 2; i++) {
			close(err[i]);
			if (report[i] >= 0)
				close(report[i]);
		}
		return cxlcr_error("%s: pipe: %s", argv[0], strerror(e));
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		close(err[0]);
		close(err[1]);
		for (int i = 0; i < 2 && keep == EXEC_HELD; i++) {
			close(report[i]);
			close(go[i]);
		}
		if (handed_over >= 0)
			close(handed_over);
		handed_over = -1;
		return cxlcr_error("%s: fork: %s", argv[0], strerror(errno));
	}
	if (pid == 0) {
		/* The tool dies with the verb that runs it: a CRIU left to go on
		 * after its worker died would restore and take the arena over
		 * behind the back of a source that resumed (docs/control-plane.md).
		 * The re-check covers a parent that died before the prctl. */
		if (exec_die_with(parent) < 0)
			_exit(127);
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		dup2(err[1], 2);
		if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) < 0) {
			dprintf(2, "cannot join the network namespace for %s: %s\n", argv[0], strerror(errno));
			_exit(127);
		}
		/* fds[i] becomes 3 + i: first out of the way (an fds[i] may be
		 * one of 3, 4, ...), then into place; dup2 clears close-on-exec. */
		/* A held keeper's two ends of its pipes follow them, close-on-exec:
		 * the keeper's alone. */
		int high[10], mine = keep == EXEC_HELD ? 2 : 0;
		if (nfds > 8)
			nfds = 8;
		for (int i = 0; i < nfds; i++)
			high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 64);
		if (mine) {
			high[nfds] = fcntl(report[1], F_DUPFD_CLOEXEC, 64);
			high[nfds + 1] = fcntl(go[0], F_DUPFD_CLOEXEC, 64);
		}
		for (int i = 0; i < nfds + mine; i++)
			dup2(high[i], 3 + i);
		for (int i = nfds; i < nfds + mine; i++)
			fcntl(3 + i, F_SETFD, FD_CLOEXEC);
		close_range(3 + (unsigned)(nfds + mine), ~0u, 0);
		if (keep != EXEC_BARE)
			run_kept(argv, parent, mine ? 3 + nfds : -1, mine ? 4 + nfds : -1);
		execvp(argv[0], argv);
		dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(err[1]);
	if (handed_over >= 0) {
		close(handed_over);
		handed_over = -1;
	}
	c->pid = pid;
	c->err = err[0];
	c->keep = keep;
	c->report = report[0];
	c->go = go[1];
	if (keep == EXEC_HELD) {
		close(report[1]);
		close(go[0]);
	}
	snprintf(c->name, sizeof(c->name), "%s", argv[0]);
	return 0;
}

/* Waits for a started tool: collects its stderr until it exits, at most
 * timeout_s seconds, and stops it if the caller of this worker's request
 * goes. Its exit status, or -1 with the reason. */
static struct {
	pid_t keeper;
	int go;
} held = { -1, -1 }; /* exec_held_release() */

int exec_tool_finish(struct exec_child *c, int timeout_s)
{
	pid_t pid = c->pid;
	int err = c->err;
	bool keep = c->keep != EXEC_BARE;
	const char *name = c->name;

	/* Collect stderr until the tool exits or its time is up. The tool's
	 * exit counts, not the pipe's end: children it leaves behind (a killed
	 * criu restore's half-built tasks) may hold the pipe open. */
	static __thread char buf[16384];
	size_t got = 0;
	buf[0] = 0;
	uint64_t deadline = cxlcr_mono_ns() + (uint64_t)timeout_s * 1000000000ull;
	bool timed_out = false, exited = false, abandoned = false, holding = false;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	/* The caller of the request this worker serves: once it has gone,
	 * the tool is stopped (rpc.h). Only while the pidfd tells the tool's
	 * exit apart: the poll set is in a fixed order. */
	int caller = pidfd >= 0 ? rpc_caller_fd() : -1;
	for (;;) {
		uint64_t now = cxlcr_mono_ns();
		if (now >= deadline) {
			timed_out = true;
			break;
		}
		/* (poll passes over an fd of -1) */
		struct pollfd p[4] = { { .fd = err, .events = POLLIN }, { .fd = pidfd, .events = POLLIN },
				       { .fd = pidfd >= 0 ? caller : -1, .events = POLLRDHUP },
				       { .fd = c->report, .events = POLLIN } };
		int rc = exited ? 1 : poll(p, 4, (int)((deadline - now) / 1000000) + 1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			continue;
		if (!exited && (p[2].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			abandoned = true;
			break;
		}
		/* A held keeper's word: its tool succeeded (as an exit 0). */
		char word;
		if (!exited && (p[3].revents & POLLIN) && read(c->report, &word, 1) == 1) {
			holding = exited = true;
			fcntl(err, F_SETFL, O_NONBLOCK);
		}
		if (!exited && pidfd >= 0 && p[1].revents) {
			/* What it wrote is in the pipe already: read that, no more. */
			exited = true;
			fcntl(err, F_SETFL, O_NONBLOCK);
		}
		char chunk[4096];
		ssize_t n = read(err, chunk, sizeof(chunk));
		if (n <= 0)
			break;
		/* Keep the tail: the last lines say what failed. */
		if (got + (size_t)n >= sizeof(buf)) {
			size_t drop = got + (size_t)n - sizeof(buf) + 1;
			memmove(buf, buf + drop, got - drop);
			got -= drop;
		}
		memcpy(buf + got, chunk, (size_t)n);
		got += (size_t)n;
		buf[got] = 0;
	}
	close(err);
	if (pidfd >= 0)
		close(pidfd);
	if (c->report >= 0)
		close(c->report);
	c->report = -1;
	if (holding) {
		held.keeper = pid;
		held.go = c->go;
		c->go = -1;
		return 0;
	}
	/* Without a go, a held keeper ends what it made (if it got so far). */
	if (c->go >= 0)
		close(c->go);
	c->go = -1;
	/* A keeper is told, not killed: killed, it could not end what the
	 * tool had built (its SIGUSR2 is the verb's death). */
	if (timed_out || abandoned)
		kill(pid, keep ? SIGUSR2 : SIGKILL);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	char line[400];
	last_line(buf, line, sizeof(line));
	if (timed_out)
		return cxlcr_error("%s timed out after %d s", name, timeout_s);
	if (abandoned)
		return cxlcr_error("%s stopped: the caller of this request has gone (it gave up or died)",
				   name);
	if (WIFSIGNALED(status))
		return cxlcr_error("%s killed by signal %d%s%s", name, WTERMSIG(status),
				   line[0] ? ": " : "", line);
	int code = WEXITSTATUS(status);
	if (code)
		cxlcr_error("%s failed (exit %d)%s%s", name, code, line[0] ? ": " : "", line);
	return code;
}

void exec_tool_abort(struct exec_child *c)
{
	if (c->report >= 0)
		close(c->report);
	if (c->go >= 0)
		close(c->go);
	c->report = c->go = -1;
	/* Its keeper ends what the tool left, as for a verb that died. */
	kill(c->pid, c->keep != EXEC_BARE ? SIGUSR2 : SIGKILL);
	while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(c->err);
}

int exec_held_release(bool go, const pid_t *stopped, size_t n)
{
	if (held.keeper <= 0)
		return 0;
	static struct held_go g;
	if (n > EXEC_HELD_STOPPED_MAX)
		n = 0; /* (no caller names more: restore.c reads at most as many) all run */
	g = (struct held_go){ .word = 'g', .n = (uint32_t)n };
	if (n)
		memcpy(g.stopped, stopped, n * sizeof(pid_t));
	size_t len = offsetof(struct held_go, stopped) + g.n * sizeof(pid_t);
	bool said = go && write(held.go, &g, len) == (ssize_t)len;
	close(held.go);
	int status = 0;
	while (waitpid(held.keeper, &status, 0) < 0 && errno == EINTR)
		;
	held.keeper = held.go = -1;
	if (!go)
		return 0;
	return said && WIFEXITED(status) && WEXITSTATUS(status) == 0
		       ? 0
		       : cxlcr_error("the restored tasks could not be let run (gone)");
}

static int exec_tool(char *const argv[], int timeout_s, const int *fds, int nfds, int netns_fd, enum exec_keep keep)
{
	struct exec_child c;
	if (exec_tool_start(argv, fds, nfds, netns_fd, keep, &c) < 0)
		return -1;
	return exec_tool_finish(&c, timeout_s);
}

int exec_run(int timeout_s, const char *arg0, ...)
{
	char *argv[EXEC_MAX_ARGS];
	int n = 0;
	va_list ap;
	va_start(ap, arg0);
	for (const char *a = arg0; a && n < EXEC_MAX_ARGS - 1; a = va_arg(ap, const char *))
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	return exec_argv(argv, timeout_s);
}

int exec_die_with(pid_t parent)
{
	return prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent ? -1 : 0;
}

int exec_adopt_orphans(void)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		return cxlcr_error("prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
	return 0;
}

/* Our children as the kernel lists them (a single-threaded process: the
 * main thread's list is all of them). */
static int list_children(pid_t *out, int max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", getpid(), getpid());
	FILE *f = fopen(path, "r");
	int n = 0, pid;
	while (f && n < max && fscanf(f, "%d", &pid) == 1)
		out[n++] = pid;
	if (f)
		fclose(f);
	return n;
}

int exec_kill_orphans(void)
{
	int killed = 0;
	/* Killing a child may hand us its own children: look again. */
	for (int round = 0; round < 16; round++) {
		pid_t pids[256];
		int n = list_children(pids, 256);
		if (!n)
			break;
		for (int i = 0; i < n; i++)
			kill(pids[i], SIGKILL);
		for (int i = 0; i < n; i++)
			while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
				;
		killed += n;
	}
	return killed;
}
