/*
 * Recovery: a host that is failing hands its services off (drain.c), on an
 * operator's request or when its kernel's log says so (kmsg.c).
 */
#ifndef CXLCR_RECOVERY_H
#define CXLCR_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>
#include "../common/pool.h"

#define DRAIN_MAX 256

struct drain_report {
	uint32_t count, moved, failed, skipped;
	struct drain_item {
		char name[CXLCR_NAME_MAX];
		char to[CXLCR_HOST_MAX];
		bool moved;
		double ms;
		char why[256];       /* why it was not moved */
	} items[DRAIN_MAX];
};

/* Migrates every running service of host to the pod's other registered
 * hosts in turn (or all to only_to); fork children stay. 0 with what
 * happened to each in *r (a service that could not move runs on where it
 * was), -1 if there is nowhere to go. */
int drain_host(struct cxlcr_pool *pool, const char *host, const char *only_to, struct drain_report *r);

/* `cxlcr host drain HOST [--to HOST2] [--json]`. */
int cmd_host(int argc, char **argv);

/* The trigger a kernel-log record ("PRIORITY,SEQ,TIME,FLAGS;MESSAGE") is,
 * or NULL: kernel facility only, and one of the failures kmsg.c lists. */
const char *kmsg_trigger(const char *record);

/* Forks the watcher of the kernel log at path (nothing if path is NULL or
 * empty), which drains host on a trigger, says so through log (the
 * daemon's, with syslog priorities) and dies with its parent. */
typedef void (*kmsg_log_fn)(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int kmsg_watch_start(const char *path, const char *host, kmsg_log_fn log);

/* The daemon's turn at recovery points (points.c): starts the ones that
 * are due for the services of host; returns in how many milliseconds it
 * wants its next turn. */
int recovery_points_tick(const char *host, void (*log)(int priority, const char *fmt, ...));

/* Makes the heap of arena (whose process is gone) what it was at the
 * recovery point whose snapshot is snapshot_generation, and marks the
 * arena so that the point's dump may be restored into it. */
int recovery_reset_arena(struct cxlcr_pool *pool, const struct cxlcr_region *arena, uint64_t snapshot_generation);

#endif
