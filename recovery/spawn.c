/*
 * The daemon's background runs of the cxlcr command (a recovery point, a
 * restore, the recovery of a dead host): forked and exec'd, so that the
 * daemon's loop (its heartbeat above all) never waits for them.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
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

/* The i-th state of a table of states of size bytes. */
static struct recovery_run *nth(void *table, size_t size, size_t i)
{
	return (struct recovery_run *)((char *)table + i * size);
}

bool recovery_run_service(struct cxlcr_pool *pool, uint32_t i, const char *host, struct cxlcr_region *r)
{
	cxlcr_region_slot(pool, i, r);
	return r->state == CXLCR_REGION_LIVE && r->kind == CXLCR_KIND_ARENA && r->owner_pid > 1 &&
	       !strncmp(r->owner_host, host, CXLCR_HOST_MAX);
}

void *recovery_run_slot(void *table, size_t n, size_t size, uint64_t generation)
{
	struct recovery_run *free_slot = NULL;
	for (size_t i = 0; i < n; i++) {
		struct recovery_run *r = nth(table, size, i);
		if (r->generation == generation)
			return r;
		if (!r->generation && !free_slot)
			free_slot = r;
	}
	if (free_slot) {
		memset(free_slot, 0, size);
		free_slot->generation = generation;
		free_slot->pidfd = -1;
	}
	return free_slot;
}

bool recovery_run_under_way(struct recovery_run *r)
{
	if (r->pidfd < 0)
		return false;
	struct pollfd p = { .fd = r->pidfd, .events = POLLIN };
	if (poll(&p, 1, 0) == 0)
		return true;
	close(r->pidfd);
	r->pidfd = -1;
	return false;
}

int recovery_run_start(struct recovery_run *r, const char *what, char *const args[])
{
	int fd = recovery_spawn(what, args);
	if (fd < 0)
		return -1;
	r->pidfd = fd;
	return 0;
}

void recovery_runs_begin(void *table, size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++)
		nth(table, size, i)->seen = false;
}

void recovery_runs_end(void *table, size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++) {
		struct recovery_run *r = nth(table, size, i);
		if (!r->generation || r->seen)
			continue;
		if (r->pidfd >= 0)
			close(r->pidfd);
		memset(r, 0, size);
		r->pidfd = -1;
	}
}
