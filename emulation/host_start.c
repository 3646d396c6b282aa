#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/error.h"
#include "host_start.h"
#include "hostpid.h"

/* The child: into the namespace, the host's own set-up, its pid namespace
 * (entered, or made with its init), then detached (a grandchild in a
 * session of its own) into the program. It reports "PROGRAM INIT" (their
 * pids here; INIT 0 when none was made) on report before it exits. */
_Noreturn static void start_child(const struct host_start *s, int ready, int report)
{
	int nsfd = open(s->netns, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) < 0) {
		dprintf(ready, "error: cannot enter %s: %s\n", s->netns, strerror(errno));
		_exit(1);
	}
	close(nsfd);
	/* The file of this process's clocks, opened while /proc is still this
	 * machine's: the host's mount namespace may have the proc of its
	 * previous init's (dead) pid namespace there, with no /proc/self. */
	int clock_fd = s->own_pid_ns && s->init_fd < 0 ? hostpid_clock_file() : -1;
	if (s->setup && s->setup(s->arg) < 0) {
		dprintf(ready, "error: %s\n", cxlcr_last_error());
		_exit(1);
	}
	pid_t init = 0;
	if (s->own_pid_ns && s->init_fd >= 0 && setns(s->init_fd, CLONE_NEWPID | CLONE_NEWTIME) < 0) {
		dprintf(ready, "error: cannot enter the host's pid and time namespaces: %s\n", strerror(errno));
		_exit(1);
	}
	if (s->own_pid_ns && s->init_fd < 0 && (init = hostpid_make(s->host, clock_fd)) < 0) {
		dprintf(ready, "error: %s\n", cxlcr_last_error());
		_exit(1);
	}
	pid_t program = fork();
	if (program != 0) {
		if (program < 0)
			dprintf(ready, "error: fork: %s\n", strerror(errno));
		dprintf(report, "%d %d\n", program > 0 ? (int)program : 0, (int)init);
		_exit(0);
	}
	setsid();
	int in = open("/dev/null", O_RDONLY), out = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0640);
	dup2(in, 0);
	dup2(out < 0 ? in : out, 1);
	dup2(out < 0 ? in : out, 2);
	dup2(ready, 3);
	close_range(4, ~0u, 0);
	execv(s->bin, s->argv);
	dprintf(3, "error: cannot run %s: %s\n", s->bin, strerror(errno));
	_exit(127);
}

int host_start(const struct host_start *s, char *said, size_t len)
{
	said[0] = 0;
	if (s->init_made)
		*s->init_made = 0;
	int ready[2], report[2];
	if (pipe2(ready, O_CLOEXEC) < 0)
		return cxlcr_error("pipe: %s", strerror(errno));
	if (pipe2(report, O_CLOEXEC) < 0) {
		close(ready[0]);
		close(ready[1]);
		return cxlcr_error("pipe: %s", strerror(errno));
	}
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		close(ready[0]);
		close(report[0]);
		start_child(s, ready[1], report[1]);
	}
	close(ready[1]);
	close(report[1]);
	if (child < 0) {
		close(ready[0]);
		close(report[0]);
		return cxlcr_error("fork: %s", strerror(errno));
	}
	int along = s->alongside ? s->alongside(child, s->arg) : 0;
	waitpid(child, NULL, 0);
	/* The child has exited: what it reported is in the pipe. */
	char pids[64] = "";
	ssize_t got = read(report[0], pids, sizeof(pids) - 1);
	close(report[0]);
	pids[got > 0 ? got : 0] = 0;
	int program = 0, init = 0;
	sscanf(pids, "%d %d", &program, &init);
	if (s->init_made)
		*s->init_made = init > 0 ? init : 0;
	if (along < 0) {
		close(ready[0]);
		return -1;
	}
	struct pollfd p = { .fd = ready[0], .events = POLLIN };
	ssize_t n = poll(&p, 1, HOST_START_READY_MS) == 1 ? read(ready[0], said, len - 1) : 0;
	close(ready[0]);
	said[n > 0 ? n : 0] = 0;
	said[strcspn(said, "\n")] = 0;
	if (!said[0])
		snprintf(said, len, "no answer");
	int pid;
	if (sscanf(said, "ok %d", &pid) != 1 || pid <= 0 || program <= 0)
		return cxlcr_error("%s", said);
	return program;
}
