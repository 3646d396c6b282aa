/*
 * A userfaultfd made inside another process, stopped before it ever ran.
 *
 * A copy-mode fork child (pager.h) is restored by CRIU with --leave-stopped:
 * its heap is anonymous memory that nothing has filled yet, and none of
 * its threads may run before the pager has taken its userfaultfd and
 * registered the heap. A userfaultfd belongs to the mm of the process that
 * makes it, so the child itself must make it: inject_take_uffd() seizes
 * the child's main thread (PTRACE_SEIZE with PTRACE_O_EXITKILL: the caller
 * stays its tracer, and if the caller dies, for any reason, the kernel
 * kills the child; with PTRACE_O_TRACEFORK, the same holds for the
 * processes the main thread forks), points its instruction pointer at a `syscall`
 * instruction of its vDSO with the userfaultfd system call's number,
 * single-steps it, restores the registers exactly, and copies the new fd
 * out with pidfd_getfd(). The child keeps its own copy: while any copy is
 * open the registration holds, so a pager that dies leaves the child's
 * faults waiting (never served as zeros) until EXITKILL ends it.
 */
#ifndef CXLCR_PAGER_INJECT_H
#define CXLCR_PAGER_INJECT_H

#include <stdbool.h>
#include <sys/types.h>

/* Takes a userfaultfd of pid (a task group-stopped by criu restore
 * --leave-stopped, whose main thread is pid): returns the fd (ours, open
 * O_NONBLOCK), the main thread left in a ptrace stop with the caller as
 * its tracer; or -1 with cxlcr_last_error(). */
int inject_take_uffd(pid_t pid);

/* Lets the child run: SIGCONT for its other threads, then the main thread
 * resumed. The caller stays its tracer (inject_pass_signals()). With
 * stay_stopped (its process was stopped when its snapshot was taken) it
 * stops again instead, as CRIU on its own restores a stopped process: its
 * main thread is resumed into a SIGSTOP, which inject_pass_signals()
 * turns into a group stop that lasts until a SIGCONT. */
int inject_resume(pid_t pid, bool stay_stopped);

/* The tracer's side of the child's life: waits (without blocking) for the
 * stops of the main thread and of the processes it forked, and passes
 * every signal on, as if they were not traced. Returns 1 while the child
 * lives, 0 once it has ended (with its wait status in *status), -1 on an
 * error. */
int inject_pass_signals(pid_t pid, int *status);

#endif
