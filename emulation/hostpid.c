/*
 * The emulated pod host's own pid namespace: see hostpid.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "../daemon/pod.h"
#include "hostpid.h"

#define END_WAIT_MS 10000

const char *hostpid_file(const struct pod *pod, const char *host, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s.init", pod->dir, host);
	return buf;
}

int hostpid_open(const struct pod *pod, const char *host)
{
	char path[128];
	hostpid_file(pod, host, path, sizeof(path));
	int pid = pod_pid_read(path);
	int fd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	/* Checked again once the pidfd holds the process: a pid reused in
	 * between is another process's, whose start time differs; and one
	 * that has exited (a zombie its parent has not reaped yet: a
	 * crashed host's) reads as such on its pidfd. */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (fd >= 0 && (pod_pid_read(path) != pid || poll(&p, 1, 0) != 0)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		errno = ESRCH;
	return fd;
}

/*
 * The host's pid 1. Its namespace's proc replaces the one the host's mount
 * namespace got from this machine (or from the host's earlier boot, whose
 * namespace is gone), so that /proc there shows the host's processes only.
 * Then it only sleeps: SIGCHLD ignored, the kernel reaps the children it
 * inherits (orphans of the host: a service whose starter exited). Signals
 * from inside the namespace cannot end a pid 1 without handlers; SIGKILL
 * from this machine does, and with it every process of the host.
 */
_Noreturn static void init_main(int ready)
{
	prctl(PR_SET_NAME, HOSTPID_INIT_NAME);
	umount2("/proc", MNT_DETACH);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		dprintf(ready, "cannot mount its own /proc: %s\n", strerror(errno));
		_exit(1);
	}
	dprintf(ready, "ok\n");
	close_range(0, ~0u, 0);
	setsid();
	if (chdir("/") < 0)
		_exit(1);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGCHLD, SIG_IGN);
	for (;;)
		pause();
}

int hostpid_clock_file(void)
{
	return open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
}

/*
 * The host's clocks, set once for its namespace before its init is in it:
 * CLOCK_MONOTONIC (and CLOCK_BOOTTIME with it) reads as if the host had
 * booted HOSTPID_BOOT_SECONDS ago plus a random part of up to
 * HOSTPID_CLOCK_SPREAD: two hosts never agree, and a host that boots again
 * (a crash, `pod up`) starts a clock of its own again, lower or higher than
 * before, as a machine's does. What works only because hosts share a clock
 * (a deadline written by one and read by another, a start time judged on
 * another host) fails here as it would on a real pod. CRIU restores a
 * service's clocks continued from its dump on any host (it gives the
 * restored tree a time namespace of its own). fd (hostpid_clock_file())
 * names this process: the offsets go to the time namespace its children
 * get, the one just made; both in one write, as the kernel takes a
 * namespace's offsets once.
 */
static int set_host_clock(const char *host, int fd)
{
	uint64_t r;
	if (fd < 0)
		return cxlcr_error("host %s: no /proc/self/timens_offsets to set its clocks with", host);
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return cxlcr_error("host %s: getrandom: %s", host, strerror(errno));
	struct timespec mono;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	long long off = HOSTPID_BOOT_SECONDS + (long long)(r % HOSTPID_CLOCK_SPREAD) - (long long)mono.tv_sec;
	char line[96];
	int n = snprintf(line, sizeof(line), "%d %lld 0\n%d %lld 0\n", CLOCK_MONOTONIC, off, CLOCK_BOOTTIME, off);
	if (write(fd, line, (size_t)n) != n)
		return cxlcr_error("host %s: cannot set its clocks: %s", host, strerror(errno));
	return 0;
}

pid_t hostpid_make(const char *host, int clock_fd)
{
	int ready[2];
	if (pipe2(ready, O_CLOEXEC) < 0) {
		cxlcr_error("pipe: %s", strerror(errno));
		if (clock_fd >= 0)
			close(clock_fd);
		return -1;
	}
	int rc = unshare(CLONE_NEWPID | CLONE_NEWTIME) < 0
			 ? cxlcr_error("host %s: cannot make its pid and time namespaces: %s", host, strerror(errno))
			 : set_host_clock(host, clock_fd);
	if (clock_fd >= 0)
		close(clock_fd);
	if (rc < 0) {
		close(ready[0]);
		close(ready[1]);
		return -1;
	}
	pid_t init = fork();
	if (init == 0) {
		close(ready[0]);
		init_main(ready[1]);
	}
	int e = errno;
	close(ready[1]);
	if (init < 0) {
		close(ready[0]);
		return cxlcr_error("host %s: cannot start its init: %s", host, strerror(e));
	}
	char said[256] = "";
	ssize_t n;
	while ((n = read(ready[0], said, sizeof(said) - 1)) < 0 && errno == EINTR)
		;
	close(ready[0]);
	said[n > 0 ? n : 0] = 0;
	said[strcspn(said, "\n")] = 0;
	if (strcmp(said, "ok")) {
		kill(init, SIGKILL);
		waitpid(init, NULL, 0);
		return cxlcr_error("host %s: its init: %s", host, said[0] ? said : "died");
	}
	return init;
}

void hostpid_end(const struct pod *pod, const char *host)
{
	char path[128];
	int fd = hostpid_open(pod, host);
	if (fd >= 0) {
		cxlcr_pidfd_kill_wait(fd, END_WAIT_MS);
		close(fd);
	}
	unlink(hostpid_file(pod, host, path, sizeof(path)));
}
