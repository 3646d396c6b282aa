/*
 * Checkpoints whose source runs on (issue 12 point 3).
 *
 * `criu dump --leave-running` lets the dumped tasks go on: the source keeps
 * allocating in its arena, which it still owns at the recorded epoch. A
 * restore of such a checkpoint that passed the epoch check would make a
 * second live allocator on the same arena; and once the source has run on,
 * the arena no longer matches the rest of the checkpoint (the globals and
 * stacks it holds point into a heap that has moved on). So the dump marks
 * its records (CXLCR_RECORD_F_LIVE_SOURCE, with the source's start time),
 * and a restore refuses them while the arena is still the source's, saying
 * which of the two it is. Such a checkpoint is for forks: cxlcr's fork
 * path turns its records into views of a snapshot taken in the same freeze
 * (rebase/), which this check never sees.
 *
 * CRIU does not tell its plugins how a dump ends. The plugin reads criu's
 * own command line; a criu driven over RPC (swrk, service) may have been
 * asked for anything, and its records are marked too: the mark costs a
 * restore only where the source's fate cannot be seen.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/util.h"
#include "plugin.h"

/* A short-option cluster like "-R" or "-vR": single dash, letters only. */
static bool cluster_has_R(const char *arg)
{
	if (arg[0] != '-' || arg[1] == '-' || !arg[1])
		return false;
	for (const char *p = arg + 1; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
			return false;
	return strchr(arg + 1, 'R') != NULL;
}

bool criu_leaves_running(void)
{
	char buf[8192];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	int index = 0;
	for (char *arg = buf; arg < buf + n; arg += strlen(arg) + 1, index++) {
		if (index == 1 && (!strcmp(arg, "swrk") || !strcmp(arg, "service")))
			return true;
		if (!strcmp(arg, "--leave-running") || cluster_has_R(arg))
			return true;
	}
	return false;
}

int live_source_check(const struct cxlcr_arena_record *rec, const struct cxlcr_region *now)
{
	if (!(rec->flags & CXLCR_RECORD_F_LIVE_SOURCE) || now->owner_epoch != rec->owner_epoch)
		return 0;   /* not such a record, or the epoch check refuses it anyway */
	uint64_t start;
	bool here = !strncmp(now->owner_host, cxlcr_host_name(), CXLCR_HOST_MAX);
	if (here && now->owner_pid == rec->real_pid && cxlcr_process_start(rec->real_pid, &start) &&
	    (uint32_t)start == rec->source_start)
		return cxlcr_error("arena %s: the checkpoint was taken with the tasks left running, and "
				   "its source still runs (pid %d): two processes would allocate in one arena",
				   rec->region_name, (int)rec->real_pid);
	return cxlcr_error("arena %s: the checkpoint was taken with the tasks left running; its source "
			   "(pid %d on %.64s) ran on after it, so the arena no longer matches the rest of "
			   "the checkpoint (fork from a snapshot instead)",
			   rec->region_name, (int)rec->real_pid, rec->host);
}
