/*
 * Which processes of a checkpoint were stopped (SIGSTOP, a job-control
 * stop) when it was taken.
 *
 * CRIU records each process's state in its core image (task_core_entry's
 * task_state: COMPEL_TASK_STOPPED for a stopped one) and, restoring on its
 * own, stops such a process again. A service's restore is held instead
 * (CRIU's leave_stopped stops every task alike; daemon/exec.c lets them
 * run once the restore is judged a success), so the daemon asks here which
 * of them to leave stopped: a service an operator had stopped comes back
 * stopped, on whichever host.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "core.pb-c.h"
#include "image_io.h"
#include "pstree.pb-c.h"
#include "rebase.h"

#define CRIU_CORE_MAGIC     0x55053847u
#define COMPEL_TASK_STOPPED 0x03 /* compel/include/uapi/task-state.h */

/* Whether process pid's core image says it was stopped: 1, 0, or -1. */
static int was_stopped(int dirfd, pid_t pid)
{
	char name[64];
	snprintf(name, sizeof(name), "core-%d.img", (int)pid);
	struct image_file f;
	int rc = image_load(dirfd, name, CRIU_CORE_MAGIC, &f);
	if (rc <= 0) {
		image_free(&f);
		return rc == 0 ? cxlcr_error("image %s: missing", name) : -1;
	}
	ProtobufCMessage *m;
	rc = image_next(&f, &core_entry__descriptor, &m);
	if (rc > 0) {
		const CoreEntry *c = (const CoreEntry *)m;
		if (!c->tc)
			rc = cxlcr_error("image %s: no task core", name);
		else
			rc = c->tc->task_state == COMPEL_TASK_STOPPED;
		protobuf_c_message_free_unpacked(m, NULL);
	} else if (rc == 0) {
		rc = cxlcr_error("image %s: empty", name);
	}
	image_free(&f);
	return rc;
}

int cxlcr_rebase_stopped_tasks(const char *dir, pid_t *pids, size_t max, size_t *n, pid_t *root)
{
	*n = 0;
	if (root)
		*root = 0;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return cxlcr_error("%s: cannot open the image directory: %s", dir, strerror(errno));
	struct image_file f;
	int rc = image_load(dirfd, "pstree.img", CRIU_PSTREE_MAGIC, &f);
	if (rc <= 0) {
		image_free(&f);
		close(dirfd);
		return rc == 0 ? cxlcr_error("image pstree.img: missing") : -1;
	}
	ProtobufCMessage *m;
	while ((rc = image_next(&f, &pstree_entry__descriptor, &m)) > 0) {
		pid_t pid = (pid_t)((const PstreeEntry *)m)->pid;
		protobuf_c_message_free_unpacked(m, NULL);
		if (root && !*root)
			*root = pid; /* the tree's first entry */
		int stopped = was_stopped(dirfd, pid);
		if (stopped < 0) {
			rc = -1;
			break;
		}
		if (stopped && *n >= max) {
			rc = cxlcr_error("%s: more than %zu stopped processes", dir, max);
			break;
		}
		if (stopped)
			pids[(*n)++] = pid;
	}
	image_free(&f);
	close(dirfd);
	return rc < 0 ? -1 : 0;
}
