/*
 * A userfaultfd made inside a stopped process (inject.h), the way
 * ../shared/DESIGN.md measured it to work on this kernel: ptrace, one
 * system call run by the task itself from its vDSO, pidfd_getfd().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/error.h"
#include "inject.h"

#ifndef __x86_64__
#error "inject.c injects x86-64 system calls"
#endif

#define STEP_TRIES 8

/* The address of a `syscall` instruction (0f 05) in pid's vDSO: the one
 * piece of code every task maps, whatever it runs. */
static int vdso_syscall(pid_t pid, uint64_t *at)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return cxlcr_error("%s: %s", path, strerror(errno));
	uint64_t lo = 0, hi = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "[vdso]") && sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) == 2)
			break;
	fclose(f);
	if (hi <= lo || hi - lo > (1u << 20))
		return cxlcr_error("pid %d has no vDSO", (int)pid);
	size_t len = (size_t)(hi - lo);
	uint8_t *code = malloc(len);
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got = code && fd >= 0 ? pread(fd, code, len, (off_t)lo) : -1;
	if (fd >= 0)
		close(fd);
	int rc = cxlcr_error("pid %d: no syscall instruction in its vDSO", (int)pid);
	for (ssize_t i = 0; got > 1 && i + 1 < got; i++) {
		if (code[i] == 0x0f && code[i + 1] == 0x05) {
			*at = lo + (uint64_t)i;
			rc = 0;
			break;
		}
	}
	free(code);
	return rc;
}

/* Waits for the traced main thread's next stop: its wait status, or -1 if
 * it ended or cannot be waited for. */
static int wait_stop(pid_t pid)
{
	int st;
	for (;;) {
		if (waitpid(pid, &st, __WALL) < 0) {
			if (errno == EINTR)
				continue;
			return cxlcr_error("waitpid %d: %s", (int)pid, strerror(errno));
		}
		if (!WIFSTOPPED(st))
			return cxlcr_error("pid %d ended before it could be paged", (int)pid);
		return st;
	}
}

/*
 * Runs userfaultfd(O_CLOEXEC | O_NONBLOCK) as pid's main thread, stopped
 * in a ptrace stop: its fd number in pid. The registers are put back as
 * they were, so that the task resumes where CRIU left it. The step may be
 * reported after a group-stop trap first (the task was group-stopped):
 * the step is then asked again.
 */
static int run_userfaultfd(pid_t pid, uint64_t insn)
{
	struct user_regs_struct saved, r;
	if (ptrace(PTRACE_GETREGS, pid, 0, &saved) < 0)
		return cxlcr_error("pid %d: PTRACE_GETREGS: %s", (int)pid, strerror(errno));
	r = saved;
	r.rip = insn;
	r.rax = SYS_userfaultfd;
	r.orig_rax = (uint64_t)-1; /* no system call to restart in between */
	r.rdi = O_CLOEXEC | O_NONBLOCK;
	int rc = cxlcr_error("pid %d: the injected system call did not run in %d steps", (int)pid, STEP_TRIES);
	for (int tries = 0; tries < STEP_TRIES; tries++) {
		if (ptrace(PTRACE_SETREGS, pid, 0, &r) < 0) {
			cxlcr_error("pid %d: PTRACE_SETREGS: %s", (int)pid, strerror(errno));
			break;
		}
		if (ptrace(PTRACE_SINGLESTEP, pid, 0, 0) < 0) {
			cxlcr_error("pid %d: PTRACE_SINGLESTEP: %s", (int)pid, strerror(errno));
			break;
		}
		int st = wait_stop(pid);
		if (st < 0)
			return -1; /* gone: nothing to put back */
		struct user_regs_struct after;
		if (ptrace(PTRACE_GETREGS, pid, 0, &after) < 0) {
			cxlcr_error("pid %d: PTRACE_GETREGS: %s", (int)pid, strerror(errno));
			break;
		}
		if (after.rip != insn + 2)
			continue; /* a trap before the step (the group stop): again */
		if ((int64_t)after.rax < 0) {
			cxlcr_error("pid %d: userfaultfd() in the child failed: %s", (int)pid,
				    strerror((int)-(int64_t)after.rax));
			break;
		}
		rc = (int)after.rax;
		break;
	}
	if (ptrace(PTRACE_SETREGS, pid, 0, &saved) < 0)
		return cxlcr_error("pid %d: cannot put its registers back: %s", (int)pid, strerror(errno));
	return rc;
}

int inject_take_uffd(pid_t pid)
{
	/* Its fork()s are traced too (PTRACE_O_TRACEFORK: each new process
	 * is attached with the same options): a child's own child gets its
	 * pages from the pager as well, and dies with it. */
	if (ptrace(PTRACE_SEIZE, pid, 0, (void *)(long)(PTRACE_O_EXITKILL | PTRACE_O_TRACEFORK)) < 0)
		return cxlcr_error("cannot trace pid %d: %s", (int)pid, strerror(errno));
	/* Stopped in its group stop already: the interrupt only makes sure
	 * it is reported to us. */
	if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) < 0)
		return cxlcr_error("pid %d: PTRACE_INTERRUPT: %s", (int)pid, strerror(errno));
	if (wait_stop(pid) < 0)
		return -1;
	uint64_t insn;
	if (vdso_syscall(pid, &insn) < 0)
		return -1;
	int theirs = run_userfaultfd(pid, insn);
	if (theirs < 0)
		return -1;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return cxlcr_error("pidfd_open %d: %s", (int)pid, strerror(errno));
	int uffd = (int)syscall(SYS_pidfd_getfd, pidfd, theirs, 0);
	int e = errno;
	close(pidfd);
	if (uffd < 0)
		return cxlcr_error("pidfd_getfd of pid %d's userfaultfd: %s", (int)pid, strerror(e));
	return uffd;
}

int inject_resume(pid_t pid, bool stay_stopped)
{
	if (kill(pid, stay_stopped ? SIGSTOP : SIGCONT) < 0)
		return cxlcr_error("pid %d: %s: %s", (int)pid, stay_stopped ? "SIGSTOP" : "SIGCONT", strerror(errno));
	if (ptrace(PTRACE_CONT, pid, 0, 0) < 0)
		return cxlcr_error("pid %d: PTRACE_CONT: %s", (int)pid, strerror(errno));
	return 0;
}

int inject_pass_signals(pid_t pid, int *status)
{
	for (;;) {
		int st;
		pid_t w = waitpid(-1, &st, __WALL | WNOHANG);
		if (w == 0)
			return 1;
		if (w < 0)
			return errno == EINTR ? 1 : cxlcr_error("waitpid: %s", strerror(errno));
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			if (w != pid)
				continue; /* one of its own children */
			*status = st;
			return 0;
		}
		if (!WIFSTOPPED(st))
			continue;
		int sig = WSTOPSIG(st), event = st >> 16;
		if (event == PTRACE_EVENT_STOP) {
			/* A group stop (SIGSTOP and the like): the task stays
			 * stopped, as it would untraced, until a SIGCONT. Else
			 * the first stop of a process its fork made (SIGTRAP). */
			bool group = sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
			ptrace(group ? PTRACE_LISTEN : PTRACE_CONT, w, 0, 0);
		} else if (event) {
			ptrace(PTRACE_CONT, w, 0, 0); /* PTRACE_EVENT_FORK */
		} else {
			ptrace(PTRACE_CONT, w, 0, (void *)(long)sig);
		}
	}
}
