/*
 * The daemon's background runs of the cxlcr command (a recovery point, a
 * restore, the recovery of a dead host): forked and exec'd, so that the
 * daemon's loop (its heartbeat above all) never waits for them.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <linux/close_range.h>
#include <unistd.h>

#include "../common/error.h"
#include "../daemon/cli.h"
#include "recovery.h"

int recovery_spawn(const char *what, char *const args[])
{
	char bin[PATH_MAX];
	if (!path_near_exe("cxlcr", bin, sizeof(bin)))
		return cxlcr_error("%s: cannot find the cxlcr command", what);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return cxlcr_error("%s: fork: %s", what, strerror(errno));
	if (pid == 0) {
		close_range(3, ~0u, 0); /* nothing of the daemon's: its sockets stay its own */
		execv(bin, args);
		_exit(127);
	}
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	return fd < 0 ? cxlcr_error("%s: pidfd_open: %s", what, strerror(errno)) : fd;
}
